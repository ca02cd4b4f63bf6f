/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The device layer: discover GPUs and read them, behind one backend interface.
 *
 * Backends: "nvml" (libnvidia-ml loaded with dlopen, or libgpum_sim.so when GPUM_SIM_NODE is
 * set), "rocm" (AMD's librocm_smi64 loaded with dlopen, or libgpum_sim.so when GPUM_SIM_NODE is
 * set; $GPUM_ROCM_SMI_LIBRARY overrides), "levelzero" (Intel GPUs through Level Zero Sysman:
 * libze_loader loaded with dlopen, or libgpum_sim.so when GPUM_SIM_NODE is set;
 * $GPUM_LEVEL_ZERO_LIBRARY overrides) and "host"
 * (the CPU fallback: one device "cpu" with host RAM as memory and CPU load as utilisation,
 * flagged is_host everywhere it is shown).
 * "auto" loads every vendor library present and lists the devices of each that finds one
 * (NVIDIA, then AMD, then Intel, each in its own order: the indexes are stable), reporting
 * that vendor's backend when it is the only one and "mixed" when there are several; with no
 * GPU at all it falls back to host. It logs what it chose at info level.
 *
 * Every metric of a sample carries a validity bit: a metric the driver does not support
 * (NVML_ERROR_NOT_SUPPORTED) is invalid, never 0. Transient driver errors are retried with
 * exponential backoff and jitter before they are returned.
 *
 * A session is safe to use from several threads: calls are serialised by the session.
 */
#ifndef GPUM_DEVICE_H
#define GPUM_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/export.h>
#include <gpum/options.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GPUM_BACKEND_AUTO = 0,
  GPUM_BACKEND_NVML = 1,
  GPUM_BACKEND_HOST = 2,
  GPUM_BACKEND_ROCM = 3,       /* AMD GPUs through ROCm SMI (docs/devices.md) */
  GPUM_BACKEND_LEVEL_ZERO = 4, /* Intel GPUs through Level Zero Sysman (docs/devices.md) */
  /* What auto reports on a node where several vendors' libraries found devices: one list of
   * them all (docs/devices.md). Not a choice of its own: asking for it is auto. */
  GPUM_BACKEND_MIXED = 5,
} gpum_backend_kind_t;

/* "auto", "nvml", "host", "rocm", "levelzero". */
GPUM_API const char *gpum_backend_name(gpum_backend_kind_t kind);
/* Parses a backend name. Returns 0 or GPUM_EINVAL. */
GPUM_API int gpum_backend_parse(const char *s, gpum_backend_kind_t *out);

typedef struct {
  gpum_backend_kind_t backend; /* default GPUM_BACKEND_AUTO */
  /* NVML library to dlopen. NULL: $GPUM_NVML_LIBRARY, else libgpum_sim.so when $GPUM_SIM_NODE
   * is set, else libnvidia-ml.so.1 then libnvidia-ml.so. */
  const char *nvml_library;
  /* ROCm SMI library to dlopen. NULL: $GPUM_ROCM_SMI_LIBRARY, else libgpum_sim.so when
   * $GPUM_SIM_NODE is set, else librocm_smi64.so.1 then librocm_smi64.so. */
  const char *rocm_library;
  /* Level Zero loader to dlopen. NULL: $GPUM_LEVEL_ZERO_LIBRARY, else libgpum_sim.so when
   * $GPUM_SIM_NODE is set, else libze_loader.so.1 then libze_loader.so. */
  const char *level_zero_library;
  /* Transient-error retries per call (default 5) and the first backoff (default 10 ms, doubled
   * each time, with +-50% jitter). 0 retries: fail at once. Use -1 for the defaults. */
  int retries;
  int retry_base_ms;
} gpum_device_open_opts_t;

/* Fills opts with the defaults. */
GPUM_API void gpum_device_open_opts_init(gpum_device_open_opts_t *opts);

typedef struct gpum_device_session gpum_device_session_t;

/* Opens a session (opts NULL: defaults). Returns 0, GPUM_EDRIVER (library missing or its init
 * failed; the detail names the library and the driver's message), GPUM_ENODEV (nvml asked for
 * explicitly and no device found) or GPUM_ENOMEM. Caller closes with gpum_device_close. */
GPUM_API int gpum_device_open(const gpum_device_open_opts_t *opts, gpum_device_session_t **out);
GPUM_API void gpum_device_close(gpum_device_session_t *s);

/* The backend actually in use (never AUTO), and a description of the loaded library
 * ("libnvidia-ml.so.1", "/path/libgpum_sim.so (simulated node 'demo')", "host"). */
GPUM_API gpum_backend_kind_t gpum_device_backend(const gpum_device_session_t *s);
GPUM_API const char *gpum_device_backend_detail(const gpum_device_session_t *s);
/* Driver version string ("550.54.15"), or "" when unknown. Owned by the session. */
GPUM_API const char *gpum_device_driver_version(const gpum_device_session_t *s);
/* True when the nvml backend runs on libgpum_sim.so. */
GPUM_API bool gpum_device_is_simulated(const gpum_device_session_t *s);

GPUM_API unsigned gpum_device_count(const gpum_device_session_t *s);

#define GPUM_UUID_LEN 96
#define GPUM_NAME_LEN 96
#define GPUM_BUSID_LEN 32

/* Validity bits of gpum_device_info_t.valid. */
enum {
  GPUM_INFO_UUID = 1u << 0,
  GPUM_INFO_NAME = 1u << 1,
  GPUM_INFO_PCI = 1u << 2,
  GPUM_INFO_MEMORY_TOTAL = 1u << 3,
  GPUM_INFO_COMPUTE_CAP = 1u << 4,
  GPUM_INFO_POWER_LIMIT = 1u << 5,
  GPUM_INFO_TEMP_SLOWDOWN = 1u << 6,
  GPUM_INFO_TEMP_SHUTDOWN = 1u << 7,
  GPUM_INFO_ECC_MODE = 1u << 8,
  GPUM_INFO_MIG = 1u << 9, /* a MIG instance: parent_uuid, parent_index, mig_gi, mig_ci */
};

typedef struct {
  unsigned index;
  char uuid[GPUM_UUID_LEN];
  char name[GPUM_NAME_LEN];
  char pci_bus_id[GPUM_BUSID_LEN];
  uint64_t memory_total; /* bytes */
  int cc_major, cc_minor;
  unsigned power_limit_mw;
  int temp_slowdown_c, temp_shutdown_c;
  bool ecc_enabled;
  bool is_host;       /* the CPU fallback device */
  const char *vendor; /* "nvidia", "amd", "intel", "host" */
  /* The device's number among its vendor's devices, as that vendor's runtime and tools number
   * them (NVML's and CUDA's index, ROCm SMI's, Level Zero's). index itself on a session of one
   * vendor; on a node of several, auto lists NVIDIA, then AMD, then Intel devices, so the two
   * differ for every vendor but the first. */
  unsigned vendor_index;
  uint32_t valid; /* GPUM_INFO_* */
  /* NVIDIA MIG (docs/devices.md): a GPU in MIG mode is listed as its MIG instances. For an
   * instance (GPUM_INFO_MIG): the parent GPU's UUID and NVML index, its GPU and compute
   * instance ids; gpum_device_get_info gives a whole GPU parent_uuid "" and parent_index -1. */
  char parent_uuid[GPUM_UUID_LEN];
  int parent_index;
  unsigned mig_gi, mig_ci;
} gpum_device_info_t;

/* Static info for device index. Returns 0, GPUM_ENODEV (bad index), GPUM_ELOST, GPUM_ERESET or
 * the mapped driver error. */
GPUM_API int gpum_device_get_info(gpum_device_session_t *s, unsigned index,
                                  gpum_device_info_t *out);

/* Metrics of a dynamic sample. Order is stable (used as bit numbers and array indexes). */
#define GPUM_METRICS(X)                                 \
  X(MEMORY_TOTAL, "memory_total", "bytes")              \
  X(MEMORY_USED, "memory_used", "bytes")                \
  X(MEMORY_FREE, "memory_free", "bytes")                \
  X(MEMORY_RESERVED, "memory_driver_reserved", "bytes") \
  X(UTIL_GPU, "utilization_gpu", "percent")             \
  X(UTIL_MEMORY, "utilization_memory", "percent")       \
  X(TEMPERATURE, "temperature", "celsius")              \
  X(POWER, "power", "milliwatts")                       \
  X(CLOCK_SM, "clock_sm", "MHz")                        \
  X(CLOCK_MEM, "clock_mem", "MHz")                      \
  X(ECC_CORRECTED, "ecc_corrected", "count")            \
  X(ECC_UNCORRECTED, "ecc_uncorrected", "count")

typedef enum {
#define GPUM__METRIC_ENUM(id, name, unit) GPUM_METRIC_##id,
  GPUM_METRICS(GPUM__METRIC_ENUM)
#undef GPUM__METRIC_ENUM
      GPUM_METRIC_COUNT
} gpum_metric_t;

GPUM_API const char *gpum_metric_name(gpum_metric_t m); /* "memory_used" */
GPUM_API const char *gpum_metric_unit(gpum_metric_t m); /* "bytes" */

typedef struct {
  uint64_t timestamp_ns; /* CLOCK_REALTIME */
  uint32_t valid;        /* bit (1u << gpum_metric_t) per valid metric */
  uint64_t memory_total, memory_used, memory_free, memory_reserved; /* bytes */
  unsigned util_gpu, util_memory;                                   /* percent */
  int temperature_c;
  unsigned power_mw;
  unsigned clock_sm_mhz, clock_mem_mhz;
  uint64_t ecc_corrected, ecc_uncorrected; /* volatile counts since driver load */
} gpum_device_sample_t;

static inline bool gpum_sample_valid(const gpum_device_sample_t *s, gpum_metric_t m) {
  return (s->valid >> m) & 1u;
}
/* The metric as a double; returns false (and leaves *v alone) when it is not valid. */
GPUM_API bool gpum_sample_get(const gpum_device_sample_t *s, gpum_metric_t m, double *v);

/* Reads the dynamic metrics. Unsupported metrics are left invalid. Returns 0 when the device
 * answered (even with some metrics invalid), GPUM_ELOST / GPUM_ERESET when the device is lost or
 * needs a reset, GPUM_EAGAIN when transient errors outlasted the retries, GPUM_ENODEV for a bad
 * index. */
GPUM_API int gpum_device_sample(gpum_device_session_t *s, unsigned index,
                                gpum_device_sample_t *out);

/* Validity bits of gpum_memory_health_t.valid. */
enum {
  /* retired_pages_pending (page retirement: GPUs before Ampere, with ECC) */
  GPUM_MEMHEALTH_RETIRED_PENDING = 1u << 0,
  /* remapped_rows_*, remap_pending and remap_failure (row remapping: Ampere and later) */
  GPUM_MEMHEALTH_REMAPPED_ROWS = 1u << 1,
};

/* How the device's memory copes with bad cells. GPUs before Ampere retire a bad page: the
 * retirement is pending until the driver next loads (reboot or GPU reset). Ampere and later
 * remap the bad row instead: the remap is pending until the GPU is reset, and a failed remap
 * (no spare row left) means the GPU needs service. A device supports one scheme, or neither
 * (consumer boards, ECC off): what it does not support is invalid, never false or 0. */
typedef struct {
  uint32_t valid;             /* GPUM_MEMHEALTH_* */
  bool retired_pages_pending; /* a page retirement waits for the next driver load */
  unsigned remapped_rows_correctable, remapped_rows_uncorrectable; /* rows remapped so far */
  bool remap_pending; /* a row remap waits for a GPU reset */
  bool remap_failure; /* a row remap failed */
} gpum_memory_health_t;

/* Reads retired-page and remapped-row state of device index (NVML's
 * nvmlDeviceGetRetiredPagesPendingStatus and nvmlDeviceGetRemappedRows). Returns 0 when the
 * device answered, even when no field is valid (unsupported, or the host backend, which has
 * none); GPUM_ELOST / GPUM_ERESET / GPUM_EAGAIN / GPUM_ENODEV as gpum_device_sample (then
 * nothing is valid); GPUM_EINVAL when out is NULL. Thread-safe like every session call. */
GPUM_API int gpum_device_memory_health(gpum_device_session_t *s, unsigned index,
                                       gpum_memory_health_t *out);

#define GPUM_USER_LEN 32
#define GPUM_COMMAND_LEN 256

typedef struct {
  unsigned pid;
  uint64_t memory;                /* bytes */
  bool memory_valid;              /* false when the driver reports "not available" */
  char user[GPUM_USER_LEN];       /* from /proc; "" when the pid is not visible here */
  char command[GPUM_COMMAND_LEN]; /* from /proc/PID/cmdline, spaces between args */
  /* An MPS control daemon's server (command nvidia-cuda-mps-server): the device is served by
   * MPS (docs/devices.md). */
  bool mps_server;
} gpum_process_t;

/* Lists the processes using device index (compute and graphics, each pid once). Writes up to
 * cap entries into procs and the total into *count. Returns 0, GPUM_ENOSPC when cap < *count (the
 * first cap entries are filled), or a device error as gpum_device_sample. */
GPUM_API int gpum_device_processes(gpum_device_session_t *s, unsigned index, gpum_process_t *procs,
                                   size_t cap, size_t *count);
/* gpum_device_processes with flags: GPUM_PROCESSES_NO_USER leaves each user "" and looks no
 * name up. A user name comes from getpwuid_r, which may ask NSS (LDAP, SSSD) and block for as
 * long as it likes: a caller with a deadline (gpumd's admission reads) keeps names apart, in a
 * cache of its own resolved off its path. */
#define GPUM_PROCESSES_NO_USER 1u
GPUM_API int gpum_device_processes_flags(gpum_device_session_t *s, unsigned index,
                                         gpum_process_t *procs, size_t cap, size_t *count,
                                         unsigned flags);

/* One process's share of a device over the driver's last sample period, as NVML's
 * nvmlDeviceGetProcessUtilization reports it: percentages, 0..100. */
typedef struct {
  unsigned pid;
  uint64_t timestamp_us; /* when the driver took the sample: microseconds since the epoch */
  unsigned sm_util;      /* SM (3D/compute) */
  unsigned mem_util;     /* frame buffer memory */
  unsigned enc_util;     /* video encoder */
  unsigned dec_util;     /* video decoder */
} gpum_process_util_t;

/* The utilisation of each process on device index in samples the driver took after since_us
 * (microseconds since the epoch; 0: every sample it keeps), the newest one per pid; a process
 * the driver saw idle over the period has none (NVML lists only non-zero ones), nor does a
 * sample over 100 % (a driver bug that nvtop also drops). Writes up to cap entries into out
 * and the total into *count. Returns 0 (*count may be 0: no sample since since_us),
 * GPUM_ENOSPC when cap < *count (the first cap entries are filled), GPUM_ENOTSUP where the
 * driver does not give it (ROCm, Level Zero and host backends, a MIG instance, an NVML without
 * the call or a device without it), GPUM_EINVAL for a NULL count (or out with cap > 0), or a
 * device error as gpum_device_sample. Thread-safe like every session call. */
GPUM_API int gpum_device_process_util(gpum_device_session_t *s, unsigned index, uint64_t since_us,
                                      gpum_process_util_t *out, size_t cap, size_t *count);

typedef enum {
  GPUM_DEVEV_XID = 1,
  GPUM_DEVEV_ECC_SINGLE = 2,
  GPUM_DEVEV_ECC_DOUBLE = 3,
  GPUM_DEVEV_GPU_LOST = 4,
} gpum_device_event_kind_t;

typedef struct {
  gpum_device_event_kind_t kind;
  unsigned device; /* index */
  uint64_t xid;    /* GPUM_DEVEV_XID: the Xid number (999 = unknown) */
  uint64_t timestamp_ns;
} gpum_device_event_t;

/* Subscribes the session to XID and ECC events of every device that supports them.
 * Returns 0 or GPUM_ENOTSUP when no device supports events. */
GPUM_API int gpum_device_events_enable(gpum_device_session_t *s);
/* Waits up to timeout_ms for one event. Returns 0, GPUM_ETIMEDOUT, GPUM_ESTATE (events not
 * enabled) or a driver error. A device that fell off the bus yields GPUM_DEVEV_GPU_LOST. */
GPUM_API int gpum_device_event_wait(gpum_device_session_t *s, gpum_device_event_t *ev,
                                    unsigned timeout_ms);

/* --- From the configuration ---------------------------------------------------------------- */

/* The options a configuration gives the device layer: backend, nvml.library, rocm_smi.library,
 * level_zero.library,
 * retry.count
 * (clamped to 0..100) and retry.base (to 60 s); cfg NULL: the defaults. Strings point into
 * cfg. Returns 0 or GPUM_EINVAL (an unknown backend). Thread-safe. */
GPUM_API int gpum_device_opts_from_config(const gpum_config_t *cfg, gpum_device_open_opts_t *opts);
/* Parses a device list, as the devices option takes it: indexes and ranges separated by
 * commas ("0,2", "0-3", "1,4-6"), each at most 65535, into idx[0..*n) in ascending order
 * without repeats; NULL or "" gives *n = 0 (all devices). Returns 0, GPUM_EINVAL (naming the
 * bad part) or GPUM_ERANGE (more than cap indexes); *n is 0 on an error. Thread-safe. */
GPUM_API int gpum_device_list_parse(const char *s, unsigned *idx, size_t cap, size_t *n);

/* --- Hang-safe readers ------------------------------------------------------------------ */

/*
 * A driver call on a GPU that stopped answering can hang for minutes (nvidia-smi hangs with
 * it). Readers read each device on a thread of its own, with a device session of its own, so
 * that a hung device holds up only its own reads: a caller is told which devices did not
 * answer, and at the end a thread stuck in a call is left behind (it frees only what it owns
 * when, if ever, the call returns). One piece serves gpum status, gpumd's process lists and
 * the monitor's sampling.
 *
 * Three ways to read:
 *   - gpum_device_readers_read asks chosen devices for a fresh read and waits for them up to a
 *     deadline (gpum status);
 *   - gpum_device_readers_request asks one device without waiting, and
 *     gpum_device_readers_take takes its result once it is there (notify says when): the
 *     monitor's sampler, with a request of its own per read (what to read this time);
 *   - periodic (interval_ms > 0): every reader reads its device every interval and keeps the
 *     newest result, which gpum_device_readers_latest copies (gpumd's process lists); a
 *     gpum_device_readers_read of periodic readers makes them read at once and copies the
 *     fresh results (gpumd's admission).
 *
 * Each result is result_size bytes, each request request_size bytes (a copy is kept). The read
 * function fills a zeroed result on the reader's thread: read(session, index, request,
 * result, user), request NULL when none was given; session is NULL when the reader's session
 * could not be opened (gpum_last_error() says why, on that thread). It returns 0 or an error
 * code, kept with the result. A result may own memory (result_free frees it): read and take
 * hand a result over with what it owns (the reader forgets it); latest copies it, so a
 * periodic result must own nothing.
 *
 * user: with user_size 0 it is passed as it is and must outlive every reader thread, also one
 * left behind in a hung call (which may still call read and result_free after
 * gpum_device_readers_stop); with user_size > 0 the readers keep a copy of those bytes, which
 * lives as long as any of their threads, and pass the copy. notify is never called once
 * gpum_device_readers_stop has begun.
 */
typedef int (*gpum_device_read_fn)(gpum_device_session_t *s, unsigned index, const void *request,
                                   void *result, void *user);

typedef struct {
  gpum_device_open_opts_t device; /* how each reader opens its session (copied) */
  size_t result_size;             /* bytes of one result, > 0 */
  size_t request_size;            /* bytes of one request; 0: requests carry nothing */
  gpum_device_read_fn read;       /* required */
  void (*result_free)(void *result, void *user); /* frees what a result owns; NULL: nothing */
  void (*notify)(unsigned index, void *user);    /* a result is ready (reader thread; NULL: none) */
  unsigned interval_ms;  /* 0: reads on demand; else one every interval (1..3600000) */
  unsigned stop_wait_ms; /* how long stop waits for a reader in a call (0: not at all) */
  bool open_at_start;    /* start opens the sessions of its devices and fails if one cannot be
                            opened (else each reader opens its own, on its thread) */
  void *user;
  size_t user_size; /* > 0: a copy of user_size bytes at user is kept and passed instead */
  /* The leading bytes of result that hold its content (at most result_size), for results of
   * a fixed size that are mostly empty (gpumd's process lists: room for 128 processes, a few
   * used): the readers copy, and clear before a read, only those bytes. A copy's bytes past
   * them are left as they were: read nothing there. The read function writes nothing past
   * what it makes result_len cover. NULL: every result is result_size bytes long. */
  size_t (*result_len)(const void *result, void *user);
} gpum_device_readers_opts_t;

typedef struct gpum_device_readers gpum_device_readers_t;

/* Starts readers for the n devices in indexes (more start when read or request names them).
 * Returns 0, GPUM_EINVAL (bad options), GPUM_ENOMEM, or with open_at_start the error of a
 * session that could not be opened. Stop them with gpum_device_readers_stop. */
GPUM_API int gpum_device_readers_start(const gpum_device_readers_opts_t *opts,
                                       const unsigned *indexes, size_t n,
                                       gpum_device_readers_t **out);
/* Asks the devices in indexes for a fresh read (one that begins after this call) and waits up
 * to timeout_ms for them. For each i, rcs[i] gets the read's return and results (an array of n
 * results) its result, handed over (periodic readers: copied); or rcs[i] = GPUM_ETIMEDOUT and
 * results[i] is left alone when the device did not answer in time (a reader already busy with
 * an earlier read for timeout_ms or longer, a hung call, is not waited for). Returns 0, or
 * GPUM_ENOMEM when a reader cannot be started. Thread-safe. With flat results (no result_free)
 * and two devices or more, the read is first swept (from the first such read on, once the
 * sweep's session is open): one more thread, with a session of its own, reads the devices one after
 * the other (one thread woken instead of one per device), and hands those it has not begun to their
 * own readers once it has spent 2 ms in one read; the read function may then run for one device on
 * two threads at once (two sessions). */
GPUM_API int gpum_device_readers_read(gpum_device_readers_t *rs, const unsigned *indexes, size_t n,
                                      unsigned timeout_ms, void *results, int *rcs);
/* Asks device index for a read with request (request_size bytes, copied; NULL: zeros) and
 * returns at once. GPUM_EBUSY when its reader has not finished the previous request (a hung
 * call), GPUM_ENOMEM when a reader cannot be started. Thread-safe. */
GPUM_API int gpum_device_readers_request(gpum_device_readers_t *rs, unsigned index,
                                         const void *request);
/* Takes the result of device index's newest request when it is there: returns 1 with the
 * result handed over to *result and the read's return in *rc; 0 when it is not there yet (or
 * was taken); GPUM_ENODEV when no reader reads index. Thread-safe. */
GPUM_API int gpum_device_readers_take(gpum_device_readers_t *rs, unsigned index, void *result,
                                      int *rc);
/* Periodic: copies the newest result of device index into out and returns its read's code;
 * GPUM_EAGAIN before the first read finished, GPUM_ENODEV when no reader reads index.
 * Thread-safe. */
GPUM_API int gpum_device_readers_latest(gpum_device_readers_t *rs, unsigned index, void *out);
/* Stops the readers: each is joined, waiting up to stop_wait_ms for one in a call; a reader
 * still stuck in a driver call then is left behind (logged at info level). NULL is fine. */
GPUM_API void gpum_device_readers_stop(gpum_device_readers_t *rs);

/* --- The CUDA driver ---------------------------------------------------------------------- */

/* What gpum_cuda_probe found. */
typedef struct {
  char path[4096];    /* the library that was loaded */
  int driver_version; /* cuDriverGetVersion: 12040 for CUDA 12.4 */
  int device_count;   /* cuDeviceGetCount, after CUDA_VISIBLE_DEVICES */
  bool simulated;     /* libgpum_sim.so */
} gpum_cuda_probe_t;

/* Loads the CUDA driver exactly as the pool does (library, else $GPUM_CUDA_LIBRARY, else the
 * simulated driver when $GPUM_SIM_NODE is set, else libcuda.so.1), calls cuInit(0), reads
 * what *out holds and unloads it again. library NULL or "": the default search. Returns 0,
 * GPUM_EDRIVER (the library cannot be loaded, lacks a required symbol, or cuInit failed: the
 * detail names the library and the CUDA error), GPUM_ENODEV (no device, e.g. every one hidden
 * by CUDA_VISIBLE_DEVICES) or GPUM_ENOMEM. Thread-safe. */
GPUM_API int gpum_cuda_probe(const char *library, gpum_cuda_probe_t *out);

/* Maps an NVML return code to a GPUM_E* code (GPU_IS_LOST -> GPUM_ELOST, RESET_REQUIRED ->
 * GPUM_ERESET, NOT_SUPPORTED -> GPUM_ENOTSUP, TIMEOUT/UNKNOWN/... -> GPUM_EAGAIN, ...).
 * Exposed for tests and tools. */
GPUM_API int gpum_device_map_nvml_error(int nvml_ret);
/* True for NVML codes the device layer retries (transient). */
GPUM_API bool gpum_device_nvml_error_is_transient(int nvml_ret);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_DEVICE_H */
