/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of libgpum_sim.so, the simulated GPU driver.
 *
 * A simulated node is one POSIX shared-memory segment ("/gpum-sim-<name>") holding a
 * struct gpum__sim_node: a versioned header, a process-shared robust mutex, the node's spec
 * (what the YAML file said), the dynamic state of every device (utilisation, thermal model,
 * faults, ECC counters), the NVML event sets, the process table (each process holding memory,
 * with its bytes per device), the checkpoint table (each CUDA process's checkpoint state and
 * request channel, cuda_ckpt.c) and the allocation table (every allocation and context, per
 * process and device). Every process that loads the library maps the same segment, so all of
 * them see the same GPUs, as with a real driver.
 *
 * Scale: the allocation table is sized at node creation for every device filled in 2 MiB VMM
 * granules, with room for smaller allocations besides (409,600 entries for 8 x 80 GiB), and
 * lives in the segment's tail, which costs memory only as far as it has been used (ftruncate'd
 * shared memory; pages are populated as the table grows). No call scans it: free entries are
 * on a free list, each process's entries on a list of their own, bytes are counted per process
 * and device, and each process finds its own entries through its local maps (by handle in
 * O(1), by address in O(log n)). Dead processes are found by checking the process table, one
 * /proc read per process, never one per allocation.
 *
 * Crash safety: a process may die at any instruction while holding the lock. The record is
 * the state, owner and size of each entry, event set and process slot; an entry is filled
 * first and published last by storing its state word, and removed by clearing it first.
 * Everything else (the free list, each process's list of entries, its counts and bytes) is
 * derived, and the next locker, which gets EOWNERDEAD, rebuilds it from the record
 * (gpum__sim_repair) before it marks the mutex consistent.
 */
#ifndef GPUM_SIM_INTERNAL_H
#define GPUM_SIM_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cuda_abi.h"
#include "hip_abi.h"
#include "nvml_abi.h"
#include "rocm_smi_abi.h"
#include "ze_abi.h"

/* The library is built with -fvisibility=hidden: only the driver entry points and the control
 * API are exported, declared here with default visibility. */
#define GPUM__SIM_API __attribute__((visibility("default")))
#pragma GCC visibility push(default)
#include <gpum/sim.h>
#define GPUM__SIM_NVML_DECL(ret, name, params) ret name params;
GPUM_NVML_FUNCS(GPUM__SIM_NVML_DECL)
#undef GPUM__SIM_NVML_DECL
#define GPUM__SIM_CUDA_DECL(name, params) CUresult name params;
GPUM_CUDA_FUNCS(GPUM__SIM_CUDA_DECL)
#define GPUM__SIM_CUDA_DECL_OTHER(name, pfn, params) CUresult name params;
GPUM_CUDA_FUNCS_OTHER(GPUM__SIM_CUDA_DECL_OTHER)
#undef GPUM__SIM_CUDA_DECL_OTHER
#undef GPUM__SIM_CUDA_DECL
#define GPUM__SIM_RSMI_DECL(name, params) rsmi_status_t name params;
GPUM_RSMI_FUNCS(GPUM__SIM_RSMI_DECL)
#undef GPUM__SIM_RSMI_DECL
#define GPUM__SIM_HIP_DECL(name, params) hipError_t name params;
GPUM_HIP_FUNCS(GPUM__SIM_HIP_DECL)
#undef GPUM__SIM_HIP_DECL
#define GPUM__SIM_HIP_DECL_STR(name, params) const char *name params;
GPUM_HIP_FUNCS_STR(GPUM__SIM_HIP_DECL_STR)
#undef GPUM__SIM_HIP_DECL_STR
#define GPUM__SIM_ZE_DECL(name, params) ze_result_t name params;
GPUM_ZE_FUNCS(GPUM__SIM_ZE_DECL)
GPUM_ZES_INIT_FUNCS(GPUM__SIM_ZE_DECL)
#undef GPUM__SIM_ZE_DECL
#pragma GCC visibility pop

/* Not in our CUDA declarations: returned by cuInit when the node's layout is from another
 * version of the simulator, as the real driver does for a kernel-module mismatch. */
#define GPUM__SIM_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH 803

#define GPUM__SIM_MAGIC 0x314d495355504747ULL /* "GGPUSIM1" little-endian */
/* 3: a vendor per device; 4: energy and busy-time counters; 5: MIG instances; 6: the
 * checkpoint table (gpum__sim_node.ckpt), a process's memory away while checkpointed
 * (gpum__sim_proc.away) and the checkpoint faults (gpum__sim_dev_state.ckpt_fail). */
#define GPUM__SIM_LAYOUT_VERSION 6u
#define GPUM__SIM_MAX_DEVICES GPUM_SIM_MAX_DEVICES
/* The VMM granularity (minimum and recommended). */
#define GPUM__SIM_GRAN (2ull << 20)
/* The allocation table holds every device's memory in granules, plus this many entries per
 * device and per node for smaller cuMemAlloc allocations, contexts and holds. */
#define GPUM__SIM_ALLOCS_PER_DEVICE 8192u
#define GPUM__SIM_ALLOCS_PER_NODE 16384u
/* The table's bound, whatever the spec: 64 Mi entries (2.5 GiB of shared memory if all used). */
#define GPUM__SIM_MAX_ALLOCS (1u << 26)
/* Processes holding memory, contexts or event sets on one node at the same time. */
#define GPUM__SIM_MAX_PROCS 1024u
#define GPUM__SIM_NIL UINT32_MAX
#define GPUM__SIM_MAX_EVSETS 64u
#define GPUM__SIM_EVQ 64u
#define GPUM__SIM_MAX_SCHED 32u
#define GPUM__SIM_NAME_MAX GPUM_SIM_NAME_MAX

/* Metrics a spec can declare unsupported (NVML_ERROR_NOT_SUPPORTED). */
enum {
  GPUM__SIM_M_MEMORY = 1u << 0,      /* nvmlDeviceGetMemoryInfo (v1) */
  GPUM__SIM_M_MEMORY_V2 = 1u << 1,   /* nvmlDeviceGetMemoryInfo_v2 */
  GPUM__SIM_M_UTILIZATION = 1u << 2, /* nvmlDeviceGetUtilizationRates */
  GPUM__SIM_M_TEMPERATURE = 1u << 3, /* GetTemperature, GetTemperatureV, thresholds */
  GPUM__SIM_M_POWER = 1u << 4,       /* GetPowerUsage, GetEnforcedPowerLimit */
  GPUM__SIM_M_CLOCKS = 1u << 5,      /* GetClockInfo, GetMaxClockInfo */
  GPUM__SIM_M_ECC = 1u << 6,         /* GetEccMode, GetTotalEccErrors */
  GPUM__SIM_M_RETIRED_PAGES = 1u << 7,
  GPUM__SIM_M_REMAPPED_ROWS = 1u << 8,
  GPUM__SIM_M_PROCESSES = 1u << 9, /* the process lists */
  GPUM__SIM_M_EVENTS = 1u << 10,   /* supported event types 0, registration NOT_SUPPORTED */
  GPUM__SIM_M_PCI = 1u << 11,
  GPUM__SIM_M_PROC_UTIL = 1u << 12, /* nvmlDeviceGetProcessUtilization */
};

/* A device's vendor: which driver interface shows it. NVML and CUDA see only NVIDIA devices,
 * ROCm SMI only AMD ones, Level Zero only Intel ones, each numbering its own devices from 0 in
 * node order. */
enum { GPUM__SIM_V_NVIDIA = 0, GPUM__SIM_V_AMD = 1, GPUM__SIM_V_INTEL = 2 };

/* What the spec says about one device. Plain data, copied into shared memory. */
struct gpum__sim_dev_spec {
  uint32_t vendor;    /* GPUM__SIM_V_* */
  uint64_t unique_id; /* AMD: what rsmi_dev_unique_id_get gives; uuid is "GPU-" and its hex */
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  char pci_bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* "00000000:18:00.0" */
  unsigned pci_domain, pci_bus, pci_device;
  unsigned pci_device_id, pci_subsystem_id;
  uint64_t memory;         /* bytes */
  uint64_t reserved;       /* bytes the driver keeps */
  uint64_t context_memory; /* bytes a CUDA context costs */
  unsigned power_limit_mw, power_idle_mw, power_max_mw;
  int cc_major, cc_minor;
  unsigned multiprocessors;
  unsigned temp_idle, temp_max, temp_slowdown, temp_shutdown, temp_mem_max, temp_gpu_max;
  unsigned clock_sm_idle, clock_sm_max, clock_mem_idle, clock_mem_max, clock_video_max;
  bool ecc;
  bool uuid_generated;
  bool virtual_memory;     /* CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
  uint32_t unsupported;    /* GPUM__SIM_M_* */
  unsigned process_stride; /* 24, or 32 for the early-R535 quirk */
  double thermal_tau_s;    /* time constant of the temperature lag */
  double power_tau_s;      /* time constant of the power lag */
  /* MIG. A MIG-capable parent: mig_mode and mig_pending (NVML_DEVICE_MIG_*), mig_capable.
   * Its instances are node devices of their own, after every spec device (spec.c expands
   * them), with mig_of = the parent's node index + 1 (0: not an instance), mig_index (the MIG
   * device index under the parent), mig_gi and mig_ci (GPU and compute instance ids). NVML
   * and CUDA never number an instance as a GPU (vendor.c skips them). */
  uint32_t mig_capable, mig_mode, mig_pending;
  uint32_t mig_of, mig_index, mig_gi, mig_ci;
  uint32_t mps;         /* an MPS server stands in on it (control.c starts it with the node) */
  uint32_t mig_n;       /* parent, while parsing: profiles in mig_prof */
  char mig_prof[7][16]; /* parent, while parsing: "3g.40gb" */
};
/* Memory the stand-in MPS server holds on its GPU (its contexts). */
#define GPUM__SIM_MPS_BYTES (64ull << 20)
/* The most MIG instances one GPU has (an A100/H100: seven 1g profiles). */
#define GPUM__SIM_MIG_MAX 7u

/* A scheduled fault from the spec: applied once, at node start + at_ms. */
struct gpum__sim_sched_fault {
  unsigned device;
  uint64_t at_ms;
  gpum_sim_fault_t fault;
  uint32_t fired;
};

struct gpum__sim_node_spec {
  char name[GPUM__SIM_NAME_MAX + 1];
  char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
  int cuda_version; /* 12040 for "12.4" */
  unsigned device_count;
  struct gpum__sim_dev_spec dev[GPUM__SIM_MAX_DEVICES];
  unsigned sched_count;
  struct gpum__sim_sched_fault sched[GPUM__SIM_MAX_SCHED];
};

/* Dynamic state of one device. */
struct gpum__sim_dev_state {
  unsigned util_gpu, util_mem; /* targets set by `gpum sim set` */
  double temp_c, power_mw;     /* current values of the lagged model */
  uint64_t model_ns;           /* CLOCK_MONOTONIC time of temp_c/power_mw */
  /* Faults. */
  uint32_t lost;           /* XID 79: GPU_IS_LOST */
  uint32_t reset_required; /* XID 48/74/94/95: RESET_REQUIRED */
  int32_t temp_override;   /* -1000: none */
  uint32_t error_rate_ppm; /* fraction of NVML calls failing with UNKNOWN, in 1e-6 */
  uint32_t slow_ms;        /* delay of every NVML call */
  uint32_t fail_after_set; /* CUDA allocations fail once fail_after_left is used up */
  uint64_t fail_after_left;
  int32_t last_xid;
  uint32_t xid_count;
  uint64_t ecc_sbe_volatile, ecc_dbe_volatile, ecc_sbe_aggregate, ecc_dbe_aggregate;
  uint32_t remap_pending, remap_failure, remap_corr, remap_unc, retired_pending;
  /* Integrals of the model since the node started, advanced with it (Level Zero's energy
   * counter and engine busy time): microjoules and microseconds. */
  double energy_uj, busy_us;
  /* Checkpoint faults (cuda_ckpt.c): the next ckpt_fail checkpoints of a process holding memory
   * on the device fail, the next restore_fail restores onto it fail. */
  uint32_t ckpt_fail, restore_fail;
};

enum { GPUM__SIM_A_FREE = 0, GPUM__SIM_A_USED = 1 };
enum { GPUM__SIM_K_MEM = 1, GPUM__SIM_K_VMM = 2, GPUM__SIM_K_CTX = 3, GPUM__SIM_K_HOLD = 4 };

/* One allocation (or context) of one process on one device. state, kind, device, proc, addr
 * and size are the record; next and prev are derived (rebuilt by gpum__sim_repair). */
struct gpum__sim_alloc {
  uint32_t state;  /* GPUM__SIM_A_*: written last when publishing, first when removing */
  uint32_t kind;   /* GPUM__SIM_K_* */
  uint32_t device; /* simulated device index */
  uint32_t proc;   /* the owner's slot in gpum__sim_node.procs */
  uint32_t next;   /* in use: the owner's next entry; free: the next free entry */
  uint32_t prev;   /* in use: the owner's previous entry */
  uint64_t addr;   /* process-local address (MEM), handle id (VMM), device (CTX), 0 (HOLD) */
  uint64_t size;
};

/* A process that holds entries or event sets on the node. state, pid, start_time and hold are
 * the record; the rest is derived from the entries and event sets that name the slot. A slot
 * is given up when its process holds nothing more, or when the process is found dead. */
struct gpum__sim_proc {
  uint32_t state; /* GPUM__SIM_A_*: published last */
  int32_t pid;
  uint64_t start_time; /* /proc/PID/stat field 22: tells a reused pid apart */
  uint32_t hold;       /* a `gpum sim hold` process: `gpum sim stop` ends it */
  uint32_t away;    /* checkpointed (cuda_ckpt.c): its entries hold no device memory, so its bytes
                       are counted nowhere (gpum__sim_used, gpum__sim_processes) */
  uint32_t head;    /* its first entry, GPUM__SIM_NIL when none */
  uint32_t entries; /* its entries */
  uint32_t evsets;  /* its event sets */
  uint32_t count[GPUM__SIM_MAX_DEVICES]; /* its entries per device */
  uint64_t bytes[GPUM__SIM_MAX_DEVICES]; /* its bytes per device */
};

struct gpum__sim_event {
  uint32_t device;
  uint64_t type;
  uint64_t data;
};

/* An NVML event set: lives in shared memory so that another process can post to it. */
struct gpum__sim_evset {
  uint32_t state; /* GPUM__SIM_A_* */
  uint32_t proc;  /* the owner's slot */
  uint32_t gen;
  uint64_t mask[GPUM__SIM_MAX_DEVICES];
  uint32_t head, tail; /* events written / read (free-running counters) */
  struct gpum__sim_event q[GPUM__SIM_EVQ];
};

/* One CUDA process's checkpoint state and its request channel (cuda_ckpt.c). A slot is taken
 * by a process at cuInit, when its service thread starts, and reused once that process is
 * gone. A controller (cuCheckpointProcess*) fills op and args, sets busy and bumps req; the
 * service thread does the work, writes result and state, clears busy and bumps done. req and
 * done are futex words. */
struct gpum__sim_ckpt {
  uint32_t used; /* GPUM__SIM_A_* */
  int32_t pid;
  uint64_t start_time;
  int32_t tid;    /* the service thread: cuCheckpointProcessGetRestoreThreadId */
  uint32_t state; /* CU_PROCESS_STATE_* */
  uint32_t busy;  /* a request is being served */
  uint32_t req, done;
  uint32_t op; /* GPUM__SIM_CKPT_OP_* */
  uint32_t timeout_ms;
  int32_t result;
  uint32_t remap[GPUM__SIM_MAX_DEVICES]; /* restore: device -> device (identity when no pairs) */
  uint32_t remap_given;                  /* devices named as an old GPU by a pair (bitmask) */
};

struct gpum__sim_header {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t ready;        /* set last by the creator */
  uint64_t node_size;    /* bytes of the segment: sizeof(struct gpum__sim_node) + the table */
  uint32_t stopped;      /* set by `gpum sim stop` before unlinking */
  uint32_t alloc_cap;    /* entries in gpum__sim_node.allocs */
  uint64_t created_ns;   /* CLOCK_MONOTONIC */
  uint64_t created_unix; /* seconds since the epoch */
};

struct gpum__sim_node {
  struct gpum__sim_header hdr;
  pthread_mutex_t lock;
  uint32_t event_seq;   /* futex word: bumped on every posted event */
  uint32_t alloc_hw;    /* entries [0, alloc_hw) have been used; those above are zero pages */
  uint32_t alloc_ready; /* entries [0, alloc_ready) are backed by memory (populated) */
  uint32_t free_head;   /* derived: the free entries below alloc_hw, linked by next */
  uint32_t proc_hw;     /* slots [0, proc_hw) have been used */
  uint32_t pad;
  struct gpum__sim_node_spec spec;
  struct gpum__sim_dev_state dev[GPUM__SIM_MAX_DEVICES];
  struct gpum__sim_evset evsets[GPUM__SIM_MAX_EVSETS];
  struct gpum__sim_proc procs[GPUM__SIM_MAX_PROCS];
  struct gpum__sim_ckpt ckpt[GPUM__SIM_MAX_PROCS];
  struct gpum__sim_alloc allocs[]; /* hdr.alloc_cap entries */
};

/* The calling process: its pid and start time. */
struct gpum__sim_self {
  pid_t pid;
  uint64_t start_time;
};

/* ---- tree.c: ordered maps of the per-process bookkeeping ---- */
struct gpum__sim_tnode {
  struct gpum__sim_tnode *left, *right;
  uint64_t key;
  uint64_t prio;
};
/* Inserts node under key, which must not be in the tree yet. */
void gpum__sim_tree_insert(struct gpum__sim_tnode **root, struct gpum__sim_tnode *node,
                           uint64_t key);
/* Removes node, which must be in the tree. */
void gpum__sim_tree_remove(struct gpum__sim_tnode **root, struct gpum__sim_tnode *node);
/* The node with key, or NULL. */
struct gpum__sim_tnode *gpum__sim_tree_find(struct gpum__sim_tnode *root, uint64_t key);
/* The node with the greatest key <= key (floor) or the least key >= key (ceil), or NULL. */
struct gpum__sim_tnode *gpum__sim_tree_floor(struct gpum__sim_tnode *root, uint64_t key);
struct gpum__sim_tnode *gpum__sim_tree_ceil(struct gpum__sim_tnode *root, uint64_t key);
#define GPUM__SIM_CONTAINER(ptr, type, member) \
  ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* ---- util.c ---- */
/* Sets the thread's detail message (read back with gpum_sim_last_error) and returns err. */
int gpum__sim_err(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t gpum__sim_now_ns(void);
/* Size ("80GiB", "512MiB", "1024") and duration ("30s", "500ms", "2m") parsers. 0 or -1. */
int gpum__sim_parse_size(const char *s, uint64_t *out);
int gpum__sim_parse_duration_ms(const char *s, uint64_t *out);
bool gpum__sim_valid_name(const char *name);
/* A uniform random number in [0, 1) from a per-thread generator. */
double gpum__sim_rand01(void);
/* Copies a NUL-terminated string into a buffer of len bytes; false when it does not fit. */
bool gpum__sim_strfit(char *dst, size_t len, const char *src);
/* Sleeps ms milliseconds (resuming after signals). */
void gpum__sim_sleep_ms(uint64_t ms);

/* ---- vendor.c: each driver interface's own numbering of the node's devices ---- */
/* Devices of vendor on the node. */
unsigned gpum__sim_vendor_count(const struct gpum__sim_node *n, uint32_t vendor);
/* The node index of vendor's device number k, or -1 when there is none. */
int gpum__sim_vendor_dev(const struct gpum__sim_node *n, uint32_t vendor, unsigned k);
/* "nvidia", "amd", "intel": a GPUM__SIM_V_* as node specs write it. */
const char *gpum__sim_vendor_name(uint32_t vendor);
/* The number of node device idx among its vendor's devices. */
unsigned gpum__sim_vendor_ord(const struct gpum__sim_node *n, unsigned idx);

/* ---- spec.c ---- */
/* Parses a YAML spec. Returns 0 or GPUM_ENOENT/GPUM_EPARSE/GPUM_EINVAL with a detail naming the
 * file and line. */
int gpum__sim_spec_load(const char *path, struct gpum__sim_node_spec *out);
/* Sets the node name and generates the UUIDs the spec did not give (deterministic from the
 * name and the device index). */
void gpum__sim_spec_set_name(struct gpum__sim_node_spec *s, const char *name);
/* Whether uuid is 32 hex digits grouped 8-4-4-4-12 (an Intel device's), and its 16 bytes in
 * order into out (when not NULL). */
bool gpum__sim_uuid_bytes(const char *uuid, uint8_t out[16]);
/* A MIG profile name, "<slices>g.<memory>gb" ("3g.40gb"), to its compute slices (1-7) and
 * memory in GB (taken as GiB by the simulator). 0, or -1 when s is not one. Pure. */
int gpum__sim_mig_profile(const char *s, unsigned *slices, unsigned *mem_gb);
/* Metric name ("power") to GPUM__SIM_M_* bit, 0 when unknown. */
uint32_t gpum__sim_metric_bit(const char *name);

/* ---- shm.c ---- */
/* Creates the node's segment, its allocation table sized from the spec. 0, GPUM_EEXIST or
 * GPUM_EIO. */
int gpum__sim_shm_create(const struct gpum__sim_node_spec *spec, const char *name);
/* Maps an existing node. Returns 0, GPUM_ENOENT (no such node), GPUM_EDRIVERVER (layout
 * mismatch) or GPUM_EIO. */
int gpum__sim_shm_open(const char *name, struct gpum__sim_node **out);
void gpum__sim_shm_close(struct gpum__sim_node *n);
int gpum__sim_shm_unlink(const char *name);
/* Locks the node (robust: a dead owner's half-done update is repaired) and notes who the
 * calling process is (gpum__sim_me). 0 or GPUM_EIO. */
int gpum__sim_lock(struct gpum__sim_node *n);
void gpum__sim_unlock(struct gpum__sim_node *n);
/* The node named by GPUM_SIM_NODE, mapped once per process (re-mapped when it was stopped and
 * started again). NULL with *err set (GPUM_ENOENT, GPUM_EDRIVERVER, ...) on failure. */
struct gpum__sim_node *gpum__sim_attach(int *err);
/* The node this process is attached to, or NULL. */
struct gpum__sim_node *gpum__sim_attached(void);

/* ---- proc.c: the process and allocation tables (every function: lock held) ---- */
/* Reads state and start time of pid from /proc. 0, or -1 when the process does not exist. */
int gpum__sim_proc_stat(pid_t pid, char *state, uint64_t *start_time);
/* Notes the calling process (one getpid(); the start time is read once per process). Called
 * by gpum__sim_lock. */
void gpum__sim_identify(void);
/* The calling process as noted by this thread's last gpum__sim_lock. */
const struct gpum__sim_self *gpum__sim_me(void);
/* Frees the entries and event sets of processes that are gone, zombies, or whose pid was
 * reused: one liveness check per process slot. */
void gpum__sim_reap(struct gpum__sim_node *n);
/* Rebuilds the derived parts of the tables from the record after a lock owner died. */
void gpum__sim_repair(struct gpum__sim_node *n);
/* Adds an entry for the calling process (reaping dead processes first when the table or the
 * process table is full). Returns the entry index, or -1 when the table is full. */
int gpum__sim_alloc_add(struct gpum__sim_node *n, uint32_t kind, unsigned dev, uint64_t addr,
                        uint64_t size);
/* The calling process's slot in the process table, or -1 when it holds nothing. */
int gpum__sim_proc_mine(struct gpum__sim_node *n);
/* Whether entry idx is in use, of kind, with addr, and the calling process's. */
bool gpum__sim_alloc_mine(const struct gpum__sim_node *n, int idx, uint32_t kind, uint64_t addr);
/* Removes entry idx (in use). */
void gpum__sim_alloc_remove(struct gpum__sim_node *n, int idx);
/* Takes a free event set for the calling process: its index, or -1 when none is free. */
int gpum__sim_evset_add(struct gpum__sim_node *n);
/* Gives event set idx (in use) back. */
void gpum__sim_evset_remove(struct gpum__sim_node *n, unsigned idx);
/* Bytes held on dev by all processes (excluding the driver's reserve). */
uint64_t gpum__sim_used(const struct gpum__sim_node *n, unsigned dev);
/* Free bytes on dev as CUDA sees it: total - reserved - used. */
uint64_t gpum__sim_free(const struct gpum__sim_node *n, unsigned dev);
/* The processes on dev (or every device when dev == UINT32_MAX): one row per process and
 * device with its bytes, in process-table order. Returns the number found (may exceed max;
 * only max are written). */
unsigned gpum__sim_processes(const struct gpum__sim_node *n, unsigned dev, gpum_sim_process_t *out,
                             unsigned max);

/* ---- faults.c ---- */
/* Applies due scheduled faults and advances the thermal/power model. Lock held. */
void gpum__sim_tick(struct gpum__sim_node *n);
/* Milliseconds until the spec's next scheduled fault fires (0: due; UINT64_MAX: none left).
 * Lock held. */
uint64_t gpum__sim_next_fault_ms(const struct gpum__sim_node *n);
/* Applies one fault to dev (lock held). Returns 0 or GPUM_EINVAL. */
int gpum__sim_fault_apply(struct gpum__sim_node *n, unsigned dev, const gpum_sim_fault_t *f);
void gpum__sim_fault_clear(struct gpum__sim_node *n, unsigned dev);
/* Queues an event to every event set registered for it on dev, and wakes waiters. Lock held. */
void gpum__sim_post_event(struct gpum__sim_node *n, unsigned dev, uint64_t type, uint64_t data);
/* What a driver call on dev meets before it acts (gpum__sim_dev_enter). */
typedef enum {
  GPUM__SIM_ENTER_OK = 0, /* the node lock is held */
  GPUM__SIM_ENTER_LOCK,   /* the node lock could not be taken */
  GPUM__SIM_ENTER_LOST,   /* XID 79: fallen off the bus */
  GPUM__SIM_ENTER_RESET,  /* needs a reset */
  GPUM__SIM_ENTER_UNSUP,  /* metric marked unsupported in the spec */
  GPUM__SIM_ENTER_FLAKY,  /* the injected error rate struck */
} gpum__sim_enter_t;
/* Locks the node, advances the model and checks dev's faults and whether metric (GPUM__SIM_M_*,
 * 0 for none) is supported; sleeps the slow fault in steps outside the lock. On
 * GPUM__SIM_ENTER_OK the lock is held (caller unlocks); on anything else it is not. Shared by
 * the NVML and ROCm SMI entry points, which map the outcome to their own codes. */
gpum__sim_enter_t gpum__sim_dev_enter(struct gpum__sim_node *n, unsigned dev, uint32_t metric);
/* Current modelled values (lock held, after gpum__sim_tick). */
unsigned gpum__sim_temp(const struct gpum__sim_node *n, unsigned dev);
unsigned gpum__sim_power_mw(const struct gpum__sim_node *n, unsigned dev);
unsigned gpum__sim_clock(const struct gpum__sim_node *n, unsigned dev, int type, bool max);
/* Wakes every thread waiting in nvmlEventSetWait on this node. */
void gpum__sim_wake(struct gpum__sim_node *n);
/* Waits until n->event_seq differs from seen or timeout_ms pass. */
void gpum__sim_wait(struct gpum__sim_node *n, uint32_t seen, uint64_t timeout_ms);

/* ---- nvml_device.c: shared with nvml_events.c ---- */
/* Checks nvmlInit, the handle (INVALID_ARGUMENT for NULL or foreign ones), the device's
 * faults and whether metric (GPUM__SIM_M_*, 0 for none) is supported; sleeps for the slow fault
 * outside the lock. On NVML_SUCCESS the node lock is held (caller unlocks). */
nvmlReturn_t gpum__sim_nvml_enter(nvmlDevice_t h, uint32_t metric, struct gpum__sim_node **n,
                                  unsigned *idx);
/* The node when NVML is initialised, else NULL. */
struct gpum__sim_node *gpum__sim_nvml_node(void);
nvmlDevice_t gpum__sim_nvml_handle(unsigned idx);

/* ---- fork.c: the driver across fork() ---- */
/* fork() copies only the calling thread: a process-local lock that another thread held stays
 * held in the child for ever. fork.c's pthread_atfork handlers take every such lock before the
 * fork (PREPARE, in the lock order) and release them after it in both processes (PARENT,
 * CHILD, in reverse), through one function per file. The node's lock is process-shared and
 * robust: its holder in the parent releases it, so it needs nothing. */
typedef enum {
  GPUM__SIM_FORK_PREPARE,
  GPUM__SIM_FORK_PARENT,
  GPUM__SIM_FORK_CHILD,
} gpum__sim_fork_phase_t;
static inline void gpum__sim_fork_mutex(pthread_mutex_t *m, gpum__sim_fork_phase_t ph) {
  if (ph == GPUM__SIM_FORK_PREPARE)
    pthread_mutex_lock(m);
  else
    pthread_mutex_unlock(m);
}
void gpum__sim_ctx_atfork(gpum__sim_fork_phase_t ph);  /* cuda_ctx.c: cu_mu */
void gpum__sim_nvml_atfork(gpum__sim_fork_phase_t ph); /* nvml_device.c: its library's mu */
void gpum__sim_rocm_atfork(gpum__sim_fork_phase_t ph); /* rocm_smi.c: its library's mu */
void gpum__sim_hip_atfork(gpum__sim_fork_phase_t ph);  /* hip.c: init_mu, blk_mu, host_mu */
void gpum__sim_ze_atfork(gpum__sim_fork_phase_t ph);   /* level_zero.c: its library's mu */

/* A driver library's initialisation (nvmlInit/nvmlShutdown, rsmi_init/rsmi_shut_down), in
 * vendor.c: the first init attaches to the node, each shutdown undoes one init, and the node
 * is the library's while it is initialised. */
typedef struct {
  pthread_mutex_t mu;
  unsigned count;
  struct gpum__sim_node *node;
} gpum__sim_lib_t;
#define GPUM__SIM_LIB_INIT \
  { PTHREAD_MUTEX_INITIALIZER, 0, NULL }
/* 0, or the error gpum__sim_attach gave (GPUM_EPERM, GPUM_EDRIVERVER, ...). */
int gpum__sim_lib_init(gpum__sim_lib_t *l);
/* False when the library was not initialised (nothing to undo). */
bool gpum__sim_lib_shutdown(gpum__sim_lib_t *l);
/* The node while the library is initialised, else NULL. */
struct gpum__sim_node *gpum__sim_lib_node(gpum__sim_lib_t *l);
void gpum__sim_shm_atfork(gpum__sim_fork_phase_t ph);    /* shm.c: attach_mu */
void gpum__sim_events_atfork(gpum__sim_fork_phase_t ph); /* nvml_events.c: sets_mu */
void gpum__sim_misc_atfork(gpum__sim_fork_phase_t ph);   /* cuda_misc.c: obj_mu, obj_cond */
void gpum__sim_mem_atfork(gpum__sim_fork_phase_t ph);    /* cuda_mem.c: host_mu, blocks_mu */
void gpum__sim_pool_atfork(gpum__sim_fork_phase_t ph);   /* cuda_pool.c: pools_mu */
void gpum__sim_vmm_atfork(gpum__sim_fork_phase_t ph);    /* cuda_vmm.c: vmm_mu */
void gpum__sim_proc_atfork(gpum__sim_fork_phase_t ph);   /* proc.c: the cached pid (no lock) */

/* True in a process forked from one that had called cuInit (set by the CHILD handler). Such a
 * child cannot use the CUDA state it inherited, as with the real driver (CUDA is not
 * fork-safe): every CUDA entry point but cuDriverGetVersion, cuGetErrorName,
 * cuGetErrorString and cuGetProcAddress returns CUDA_ERROR_NOT_INITIALIZED there, cuInit
 * included, before it takes any lock. NVML stays usable. */
extern bool gpum__sim_cu_forked_flag;
static inline bool gpum__sim_cu_forked(void) {
  return __atomic_load_n(&gpum__sim_cu_forked_flag, __ATOMIC_RELAXED);
}
/* ---- cuda_ckpt.c: the checkpoint API and the call gate ---- */
/* Every CUDA entry point but cuDriverGetVersion, cuGetErrorName, cuGetErrorString,
 * cuGetProcAddress and the checkpoint calls passes the call gate first (GPUM__SIM_CU_FORK_GATE):
 * while the process is locked or checkpointed by cuCheckpointProcessLock the call waits there,
 * and the lock waits for the calls already past it (counted until they return). After a
 * failed checkpoint or restore (CU_PROCESS_STATE_FAILED) every call returns
 * CUDA_ERROR_UNKNOWN. Nested entry points (one calling another) count once. */
int gpum__sim_cu_call_begin(void); /* 1: counted, 0: nested, -1: the process failed */
void gpum__sim_cu_call_end(const int *begun);
/* Starts the service thread of this process (cuInit, once the node is attached). */
void gpum__sim_ckpt_start(struct gpum__sim_node *n);
void gpum__sim_ckpt_atfork(gpum__sim_fork_phase_t ph); /* cuda_ckpt.c: gate_mu */
/* Remaps this process's devices after a restore onto other GPUs (map: old -> new simulated
 * device), one function per file that keeps a device index: contexts and CUDA_VISIBLE_DEVICES
 * (cuda_ctx.c), allocations (cuda_mem.c), pools (cuda_pool.c), physical VMM allocations
 * (cuda_vmm.c). Called by the service thread while every CUDA call is held at the gate. */
void gpum__sim_ctx_remap(const uint32_t *map);
void gpum__sim_mem_remap(const uint32_t *map);
void gpum__sim_pool_remap(const uint32_t *map);
void gpum__sim_vmm_remap(const uint32_t *map);
/* The CUDA UUID of simdev (from its "GPU-" or "MIG-" string); false when that is malformed. */
bool gpum__sim_cu_uuid(const struct gpum__sim_node *n, unsigned simdev, CUuuid *uuid);
/* The simulated devices this process's CUDA sees, in ordinal order: their count (cuda_ctx.c). */
unsigned gpum__sim_cu_visible(unsigned *out);
/* Copies every cuMemAlloc allocation's bytes to host memory and releases its pages, keeping
 * its addresses reserved (checkpoint), or maps them again and copies the bytes back (restore).
 * 0; -1 when host memory ran out (nothing changed); -2 (save) when an allocation's range was
 * taken by another mapping meanwhile and its pages could not come back (the process is lost). */
int gpum__sim_mem_save(void);
int gpum__sim_mem_load(void);

#define GPUM__SIM_CAT2(a, b) a##b
#define GPUM__SIM_CAT(a, b) GPUM__SIM_CAT2(a, b)
#define GPUM__SIM_CU_FORK_GATE()                                                  \
  if (__builtin_expect(gpum__sim_cu_forked(), 0))                                 \
    return CUDA_ERROR_NOT_INITIALIZED;                                            \
  __attribute__((cleanup(gpum__sim_cu_call_end)))                                 \
  const int GPUM__SIM_CAT(gpum__sim_call_, __LINE__) = gpum__sim_cu_call_begin(); \
  if (GPUM__SIM_CAT(gpum__sim_call_, __LINE__) < 0)                               \
  return CUDA_ERROR_UNKNOWN

/* ---- cuda_ctx.c: shared with the other CUDA files ---- */
/* What a CUDA entry point needs of the driver before it acts (gpum__sim_cu_check), each level
 * including the one before. */
typedef enum {
  GPUM__SIM_CU_INIT, /* cuInit succeeded: else CUDA_ERROR_NOT_INITIALIZED */
  GPUM__SIM_CU_LIVE, /* and the node was not stopped since: else CUDA_ERROR_DEINITIALIZED */
  GPUM__SIM_CU_CTX,  /* and a usable current context on a healthy device: else
                        gpum__sim_cu_begin's error (the node lock is not kept) */
} gpum__sim_cu_need_t;
/* The checks a CUDA entry point opens with, in the real driver's order: its arguments first
 * (args_ok false: CUDA_ERROR_INVALID_VALUE), then what it needs of the driver. CUDA_SUCCESS
 * when the call may go on. Entry points that check something in between (a handle, a flag
 * checked after the context) pass true and check it themselves after. */
CUresult gpum__sim_cu_check(bool args_ok, gpum__sim_cu_need_t need);
/* As gpum__sim_cu_check for a call on CUDA device dev: the arguments, then
 * gpum__sim_cu_device (initialised, live, a visible ordinal); gives the simulated device. */
CUresult gpum__sim_cu_check_device(bool args_ok, CUdevice dev, unsigned *simdev);
/* The first line of a CUDA entry point: the fork gate, then gpum__sim_cu_check (or
 * gpum__sim_cu_check_device); a failed check returns its code from the entry point. */
#define GPUM__SIM_CU_ENTRY(args_ok, need)                          \
  GPUM__SIM_CU_FORK_GATE();                                        \
  const CUresult GPUM__SIM_CAT(gpum__sim_entry_r_, __LINE__) =     \
      gpum__sim_cu_check((args_ok), need);                         \
  if (GPUM__SIM_CAT(gpum__sim_entry_r_, __LINE__) != CUDA_SUCCESS) \
  return GPUM__SIM_CAT(gpum__sim_entry_r_, __LINE__)
#define GPUM__SIM_CU_ENTRY_DEVICE(args_ok, dev, simdev)            \
  GPUM__SIM_CU_FORK_GATE();                                        \
  const CUresult GPUM__SIM_CAT(gpum__sim_entry_r_, __LINE__) =     \
      gpum__sim_cu_check_device((args_ok), dev, simdev);           \
  if (GPUM__SIM_CAT(gpum__sim_entry_r_, __LINE__) != CUDA_SUCCESS) \
  return GPUM__SIM_CAT(gpum__sim_entry_r_, __LINE__)
/* Checks cuInit was called and that there is a usable current context; gives the simulated
 * device index of its device. Takes the node lock on success (caller unlocks). */
CUresult gpum__sim_cu_begin(struct gpum__sim_node **n, unsigned *simdev);
/* Maps a CUDA ordinal to the simulated device index (CUDA_VISIBLE_DEVICES applied). */
CUresult gpum__sim_cu_device(CUdevice dev, unsigned *simdev);
/* A device's fault state as a CUresult (lock held): UNKNOWN when lost, ... */
CUresult gpum__sim_cu_fault(const struct gpum__sim_node *n, unsigned simdev);
bool gpum__sim_cu_initialized(void);
/* Checks that [ptr, ptr+len) lies inside memory of the calling process that CUDA can access
 * (cuMemAlloc or mapped VMM with access set). */
bool gpum__sim_cu_range_ok(CUdeviceptr ptr, size_t len);
bool gpum__sim_cu_vmm_range_ok(CUdeviceptr ptr, size_t len);
/* Frees every cuMemAlloc allocation of the calling process on simdev (primary context
 * destroyed). Lock held. */
void gpum__sim_cu_free_all(struct gpum__sim_node *n, unsigned simdev);
/* Checks capacity and the fail-after budget for size bytes on dev and spends the budget
 * (lock held): CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY. */
CUresult gpum__sim_cu_take_capacity(struct gpum__sim_node *n, unsigned dev, uint64_t size);
/* Allocates device memory on the current context's device, or from pool (cuda_mem.c). */
CUresult gpum__sim_cu_alloc(CUdeviceptr *dptr, size_t bytesize, struct CUmemPoolHandle_st *pool);
/* Whether ptr is the base of a cuMemAlloc_v2 allocation of this process, the only memory
 * cuIpcGetMemHandle exports (not managed, not from a pool); its size and device (cuda_mem.c). */
bool gpum__sim_cu_ipc_exportable(CUdeviceptr ptr, uint64_t *size, unsigned *simdev);
/* As gpum__sim_cu_begin, on simdev rather than the current context's device. */
CUresult gpum__sim_cu_begin_on(struct gpum__sim_node **out, unsigned simdev);
/* The device of a pool, and its count of bytes allocated (delta; blocks_mu held) (cuda_pool.c). */
unsigned gpum__sim_cu_pool_simdev(const struct CUmemPoolHandle_st *pool);
void gpum__sim_cu_pool_count(struct CUmemPoolHandle_st *pool, int64_t delta);
/* Whether h is a live stream of this process (NULL, the default stream, counts). */
bool gpum__sim_cu_stream_ok(CUstream h);
/* Blocks while any stream of this process is held by gpum_sim_debug_stream_hold (cuda_misc.c). */
void gpum__sim_cu_streams_wait_idle(void);

/* What the simulator puts in an IPC memory handle, CUDA's CUipcMemHandle and HIP's
 * hipIpcMemHandle_t alike (64 opaque bytes each; the magic says which runtime made it). */
struct ipc_handle {
  uint64_t magic;
  uint64_t ptr; /* the address in the exporting process */
  uint64_t size;
  uint32_t pid; /* the exporting process */
  uint32_t simdev;
  char unused[32];
};

#endif /* GPUM_SIM_INTERNAL_H */
