/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Control API of the simulated GPU driver, exported by libgpum_sim.so beside its NVML and CUDA
 * entry points. `gpum sim ...` is a thin front end over these calls; programs (test
 * harnesses, demos) may call them directly after dlopen("libgpum_sim.so").
 *
 * A simulated node is named by a string of 1-64 characters from [A-Za-z0-9_.-]; its state lives
 * in the POSIX shared-memory object "/gpum-sim-<name>" (mode 0600, so one user's node), shared
 * by every process of that user that loads the library with GPUM_SIM_NODE=<name>.
 *
 * Every function returns 0 or a negative GPUM_E* code (include/gpum/error.h) and, on failure,
 * sets a detail message for the calling thread, read with gpum_sim_last_error(). A failing
 * call changes nothing. All functions are thread-safe and safe to call from several processes
 * at once (the node is guarded by a robust process-shared mutex).
 *
 * libgpum_sim.so does not link libgpum: do not link a program against libgpum_sim.so unless you
 * want its nvml and cu symbols to replace the real driver's; dlopen it with RTLD_LOCAL.
 */
#ifndef GPUM_SIM_H
#define GPUM_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUM_SIM_MAX_DEVICES 16
#define GPUM_SIM_NAME_MAX 64
#define GPUM_SIM_MAX_PROCESSES 256
/* The metrics a spec may declare unsupported (`unsupported: [power, ecc]`), in bit order: bit i
 * of gpum_sim_device_status_t.unsupported stands for the i-th name. */
#define GPUM_SIM_METRIC_NAMES                                                                     \
  "memory", "memory_v2", "utilization", "temperature", "power", "clocks", "ecc", "retired_pages", \
      "remapped_rows", "processes", "events", "pci", "process_utilization"
/* Bumped whenever a struct below changes; gpum_sim_status() checks it. */
#define GPUM_SIM_API_VERSION 1

/* The detail message of the last failure on this thread ("" when none). Owned by the thread. */
const char *gpum_sim_last_error(void);

/* Creates the node described by the YAML spec at spec_path, named name (NULL: the spec's
 * name). The actual name is written to name_out (may be NULL; GPUM_SIM_NAME_MAX + 1 bytes).
 * Returns 0, GPUM_ENOENT (no spec file), GPUM_EPARSE/GPUM_EINVAL (bad spec; the detail names
 * the line), GPUM_EEXIST (a node of that name exists) or GPUM_EIO. */
int gpum_sim_create(const char *spec_path, const char *name, char *name_out, size_t name_len);

/* Stops a node: the processes holding memory with gpum_sim_hold() are terminated and the
 * shared-memory object is unlinked. Processes still attached see a stopped node: their NVML
 * calls return NVML_ERROR_DRIVER_NOT_LOADED and CUDA calls CUDA_ERROR_DEINITIALIZED.
 * Returns 0 or GPUM_ENOENT. */
int gpum_sim_destroy(const char *name);

/* Lists the nodes of this user: up to max names (each GPUM_SIM_NAME_MAX + 1 bytes) into
 * names; *count receives the total found. Returns 0 or GPUM_EIO. */
int gpum_sim_list(char (*names)[GPUM_SIM_NAME_MAX + 1], size_t max, size_t *count);

typedef enum {
  GPUM_SIM_FAULT_XID = 1,        /* value: the Xid number (1..999) */
  GPUM_SIM_FAULT_ECC_SINGLE = 2, /* value: how many errors (>= 1) */
  GPUM_SIM_FAULT_ECC_DOUBLE = 3, /* value: how many errors (>= 1) */
  GPUM_SIM_FAULT_TEMP = 4,       /* value: degrees C (-50..200), overrides the model */
  GPUM_SIM_FAULT_ERROR_RATE = 5, /* rate: fraction 0..1 of NVML calls failing */
  GPUM_SIM_FAULT_SLOW = 6,       /* value: delay of every NVML call in ms */
  GPUM_SIM_FAULT_FAIL_AFTER = 7, /* value: CUDA allocations fail after this many more bytes */
  GPUM_SIM_FAULT_CKPT_FAIL =
      8, /* value: the next N checkpoints of a process on it fail (1..1000) */
  GPUM_SIM_FAULT_RESTORE_FAIL = 9, /* value: the next N restores onto it fail (1..1000) */
} gpum_sim_fault_kind_t;

typedef struct {
  gpum_sim_fault_kind_t kind;
  int64_t value;
  double rate;
} gpum_sim_fault_t;

/* Injects a fault on one device. See docs/sim.md for what each makes NVML and CUDA return.
 * Returns 0, GPUM_ENOENT (no node), GPUM_ENODEV (bad device index) or GPUM_EINVAL (bad value). */
int gpum_sim_inject(const char *name, unsigned device, const gpum_sim_fault_t *fault);

/* Clears every fault of a device, including the lost and reset-required states (like a GPU
 * reset: volatile ECC counters go back to 0). device == UINT32_MAX: every device. */
int gpum_sim_clear(const char *name, unsigned device);

/* Sets the utilisation a device reports (gpu_pct 0..100; mem_pct 0..100, or -1 for gpu_pct/2).
 * Temperature and power then move towards the matching values with a lag. */
int gpum_sim_set_util(const char *name, unsigned device, int gpu_pct, int mem_pct);

/* Starts a detached process that holds bytes of memory on device as an unmanaged external
 * user (it shows in NVML's process list) for duration_ms (0: until killed or the node is
 * stopped). Returns once the memory is accounted, with the holder's pid in *pid_out.
 * GPUM_EDEVOOM when the device does not have the memory free. */
int gpum_sim_hold(const char *name, unsigned device, uint64_t bytes, uint64_t duration_ms,
                  pid_t *pid_out);

typedef struct {
  uint32_t pid;
  uint32_t device;
  uint64_t bytes;
} gpum_sim_process_t;

typedef struct {
  unsigned index;        /* the node's (--device of gpum sim set/inject/hold) */
  char vendor[16];       /* "nvidia", "amd", "intel": which interface shows it */
  unsigned vendor_index; /* its number there (NVML's, ROCm SMI's, Level Zero's) */
  char name[96];
  char uuid[96];
  char pci_bus_id[32];
  int cc_major, cc_minor;
  uint64_t memory_total, memory_reserved, memory_used; /* used: by processes */
  unsigned util_gpu, util_mem;                         /* percent */
  unsigned temperature_c, power_mw, power_limit_mw;
  bool lost, reset_required;
  int last_xid; /* 0: none */
  unsigned xid_count;
  int temp_override; /* -1000: none */
  double error_rate; /* 0..1 */
  unsigned slow_ms;
  bool fail_after_set;
  uint64_t fail_after_left;
  uint64_t ecc_sbe_volatile, ecc_dbe_volatile, ecc_sbe_aggregate, ecc_dbe_aggregate;
  uint32_t unsupported; /* bit i: the i-th of GPUM_SIM_METRIC_NAMES */
} gpum_sim_device_status_t;

typedef struct {
  unsigned api_version; /* set by the caller to GPUM_SIM_API_VERSION */
  char name[GPUM_SIM_NAME_MAX + 1];
  char driver_version[80];
  int cuda_version; /* 12040 */
  uint64_t created_unix;
  unsigned device_count;
  gpum_sim_device_status_t devices[GPUM_SIM_MAX_DEVICES];
  unsigned process_count; /* entries of processes[] (one per pid and device) */
  gpum_sim_process_t processes[GPUM_SIM_MAX_PROCESSES];
} gpum_sim_status_t;

/* Reads a node's state. out->api_version must be GPUM_SIM_API_VERSION (GPUM_EINVAL otherwise:
 * the caller was built against another version of this header). Dead processes' memory is
 * reclaimed first. Returns 0 or GPUM_ENOENT/GPUM_EDRIVERVER. */
int gpum_sim_status(const char *name, gpum_sim_status_t *out);

/* Test hook: takes the node's lock, writes one byte to ready_fd, then blocks forever with the
 * lock held (until the process is killed). Used to check that a process killed while holding
 * the lock does not block the others. Returns only on failure. */
int gpum_sim_debug_hold_lock(const char *name, int ready_fd);

/* Test hook: hold (hold != 0) or release (0) a CUDA stream of the calling process (a CUstream
 * from cuStreamCreate, or NULL for the default stream). While a stream is held its work does not
 * complete: events recorded on it stay pending (cuEventQuery returns CUDA_ERROR_NOT_READY) and
 * cuEventSynchronize, cuStreamSynchronize and cuCtxSynchronize block until it is released.
 * Releasing completes everything recorded on it; destroying a held stream releases it. Used to
 * test stream-ordered code deterministically. Returns 0 or GPUM_EINVAL (not a stream of this
 * process). */
int gpum_sim_debug_stream_hold(void *stream, int hold);

/* Test aid: how many CUDA calls of the calling process are in flight now (past the gate that
 * cuCheckpointProcessLock closes, and not yet returned). A test waits for a call of its own to
 * be in flight before it asks for a lock that must wait for it. */
unsigned gpum_sim_debug_cu_calls(void);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_SIM_H */
