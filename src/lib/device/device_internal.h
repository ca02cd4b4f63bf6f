/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the device layer: the backend vtable every backend implements, the session
 * that wraps one backend behind a mutex, the retry policy for transient driver errors, the
 * driver-library path selection shared by the NVML backend and the CUDA loader, and the pure
 * helpers (process-list stride detection, /proc parsing, backoff schedule) that the unit tests
 * call directly. Never installed.
 */
#ifndef GPUM_DEVICE_INTERNAL_H
#define GPUM_DEVICE_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/device.h>

/* One process using a device, as a backend reports it (before the /proc lookup). */
typedef struct {
  unsigned pid;
  uint64_t memory;
  bool memory_valid;
} gpum__rawproc_t;

/* Retry policy for transient driver errors (see gpum_device_nvml_error_is_transient). */
typedef struct {
  int retries;      /* extra attempts after the first */
  unsigned base_ms; /* first delay; doubled per attempt */
  unsigned cap_ms;  /* no single delay exceeds this (before jitter) */
  uint64_t rng;     /* xorshift state for the jitter; guarded by the session lock */
} gpum__retry_t;

/* 5 retries: at a 30% transient error rate a call still fails 0.3^6 = 0.07% of the time, so a
 * sample of 8 calls fails 0.6% of the time and the monitor's 3-in-a-row rule for ERROR is met
 * about once in 5 million rounds (two months at 1 Hz). With 3 retries it would be once a day. */
#define GPUM__RETRY_DEFAULT_COUNT 5
#define GPUM__RETRY_DEFAULT_BASE_MS 10
#define GPUM__RETRY_CAP_MS 1000
#define GPUM__RETRY_MAX_COUNT 100
#define GPUM__RETRY_MAX_BASE_MS 60000

/*
 * The backend vtable. Every function is called with the session lock held, except
 * events_enable and event_wait: those take the backend's event lock first and the session
 * lock only for short sections (always in that order), so that sampling from other threads
 * goes on while one thread waits for events.
 * All return 0 or a negative GPUM_E* with the detail set.
 */
struct gpum__backend {
  const char *name;
  gpum_backend_kind_t kind;
  /* Loads and initialises; sets s->count, s->detail, s->driver_version, s->simulated and
   * s->impl. On failure leaves nothing allocated. */
  int (*open)(gpum_device_session_t *s, const gpum_device_open_opts_t *opts);
  void (*close)(gpum_device_session_t *s);
  int (*get_info)(gpum_device_session_t *s, unsigned index, gpum_device_info_t *out);
  int (*sample)(gpum_device_session_t *s, unsigned index, gpum_device_sample_t *out);
  /* *out is zeroed by the caller; unsupported fields stay invalid. */
  int (*memory_health)(gpum_device_session_t *s, unsigned index, gpum_memory_health_t *out);
  /* *out is malloc'd (caller frees), each pid once; *n its length (may be 0 with *out NULL). */
  int (*processes)(gpum_device_session_t *s, unsigned index, gpum__rawproc_t **out, size_t *n);
  /* Per-process utilisation (gpum_device_process_util): *out malloc'd (caller frees), the
   * newest sample per pid after since_us; NULL when the backend has none (GPUM_ENOTSUP). */
  int (*process_util)(gpum_device_session_t *s, unsigned index, uint64_t since_us,
                      gpum_process_util_t **out, size_t *n);
  int (*events_enable)(gpum_device_session_t *s);
  int (*event_wait)(gpum_device_session_t *s, gpum_device_event_t *ev, unsigned timeout_ms);
};

extern const struct gpum__backend gpum__backend_nvml;
extern const struct gpum__backend gpum__backend_host;
extern const struct gpum__backend gpum__backend_rocm;
extern const struct gpum__backend gpum__backend_level_zero;
extern const struct gpum__backend gpum__backend_mixed;

/* ---- the list of every vendor's devices (mixed.c) ---- */

#define GPUM__MIXED_MAX 4 /* vendor sessions in one list */
/* Makes s (opened, without a backend yet) the list of the devices of children[0..n), in that
 * order, taking the sessions over (they are closed with s; on failure the caller keeps them).
 * Sets s->impl, count, detail, driver_version and simulated. 0, GPUM_EINVAL or GPUM_ENOMEM. */
int gpum__mixed_adopt(gpum_device_session_t *s, gpum_device_session_t *const *children, unsigned n);
/* The kind a mixed session reports: its one vendor's, else GPUM_BACKEND_MIXED. */
gpum_backend_kind_t gpum__mixed_kind(const gpum_device_session_t *s);

struct gpum_device_session {
  pthread_mutex_t lock;
  const struct gpum__backend *ops;
  void *impl; /* backend state */
  gpum__retry_t retry;
  unsigned count;
  bool simulated;
  char detail[PATH_MAX + 128];
  char driver_version[96];
};

/* Copies src into *dst with its library paths in one block of their own (*block, freed by the
 * caller; NULL when there is none), for whoever opens sessions later, on other threads (the
 * readers, the monitor). 0 or GPUM_ENOMEM (then nothing is allocated). */
int gpum__device_opts_dup(const gpum_device_open_opts_t *src, gpum_device_open_opts_t *dst,
                          char **block);

/* Locks/unlocks the session (used by backends inside event_wait). */
/* A GPU backend's get_info after its query returned rc: on success *out becomes the device's
 * last good info (*last, *have_last); on a failure *out is that last info, so a lost device is
 * still shown by name, or an empty one of index and vendor. Returns rc. */
int gpum__info_keep(int rc, gpum_device_info_t *out, gpum_device_info_t *last, bool *have_last,
                    unsigned index, const char *vendor);

void gpum__session_lock(gpum_device_session_t *s);
void gpum__session_unlock(gpum_device_session_t *s);

/* ---- retry (device.c) ---- */

/* Delay before retry number attempt (0 = the first retry): base * 2^attempt, capped at cap_ms,
 * then scaled by a jitter factor in [0.5, 1.5) taken from r01 (a number in [0, 1)).
 * In microseconds. Pure. */
uint64_t gpum__backoff_delay_us(unsigned base_ms, unsigned cap_ms, int attempt, double r01);
/* Draws the next jitter number in [0, 1) from the policy's generator. */
double gpum__retry_rand01(gpum__retry_t *r);
/* Sleeps the backoff delay for attempt. */
void gpum__retry_sleep(gpum__retry_t *r, int attempt);
/* Validates and applies opts (-1 = default). Returns 0 or GPUM_EINVAL naming the value. */
int gpum__retry_init(gpum__retry_t *r, const gpum_device_open_opts_t *opts);

/* ---- /proc lookups (procinfo.c) ---- */

/* The real uid from the text of /proc/PID/status ("Uid:\t1000\t1000\t..."). 0 or GPUM_EPARSE. */
int gpum__parse_status_uid(const char *status, unsigned *uid);
/* Turns a /proc/PID/cmdline buffer (NUL-separated args) into one line with spaces; trailing
 * NULs dropped, control characters replaced by '?'. Always NUL-terminates out. */
void gpum__cmdline_to_string(const char *buf, size_t n, char *out, size_t outlen);
/* Fills user (name, or the numeric uid when there is no passwd entry) and command (cmdline,
 * else the comm name) for pid; both "" when the pid is not visible here. Never fails. */
void gpum__proc_identity(unsigned pid, char *user, size_t ulen, char *cmd, size_t clen);
/* The real uid of pid, from /proc/PID/status: 0, or GPUM_ENOENT when it is not visible here
 * (nothing raised). Never looks up a name. */
int gpum__proc_uid(unsigned pid, unsigned *uid);
/* The parent of pid (the PPid of /proc/PID/status): 0, or GPUM_ENOENT when pid is not visible
 * here or has none (nothing raised). */
int gpum__proc_parent(unsigned pid, unsigned *ppid);
/* How long what these read of a pid is kept (procinfo.c): GPUM__PROC_TTL_NS; tests set
 * another (0: read every time), which also empties the cache. */
#define GPUM__PROC_TTL_NS UINT64_C(1000000000)
void gpum__proc_cache_ttl(uint64_t ttl_ns);

/* True when command (a /proc cmdline with spaces) runs nvidia-cuda-mps-server, the server an
 * MPS control daemon starts per GPU: its first word, or that word's last path part. Pure. */
bool gpum__is_mps_server(const char *command);

/* ---- process-list stride (nvml_proc.c) ---- */

#define GPUM__PROC_FILL 0xAA
/* Decides the entry stride the driver really wrote into a _v3 process buffer that was filled
 * with GPUM__PROC_FILL before the call: n entries were reported, buf holds len bytes (at least
 * 32 * n). Returns 32 when any byte of [24n, 32n) was overwritten, 24 when that range is
 * untouched, and hint (24 or 32) when n is 0 or the buffer is too short to tell. Pure. */
unsigned gpum__proc_detect_stride(const unsigned char *buf, size_t len, unsigned n, unsigned hint);
/* The symbol-presence rule (nvitop): 32 only if nvmlDeviceGetConfComputeMemSizeInfo is exported
 * and nvmlDeviceGetRunningProcessDetailList is not; else 24. Pure. */
unsigned gpum__proc_stride_hint(bool has_conf_compute_mem, bool has_detail_list);
/* Decodes n entries of the given stride (16, 24 or 32) into out. Pure. */
void gpum__proc_decode(const unsigned char *buf, unsigned n, unsigned stride, gpum__rawproc_t *out);
/* Adds the entries of add to list (each pid once; for a pid in both, the larger valid memory
 * is kept, since compute and graphics share one context). *list grows with realloc.
 * Returns 0 or GPUM_ENOMEM. */
int gpum__proc_merge(gpum__rawproc_t **list, size_t *n, const gpum__rawproc_t *add, size_t nadd);

/* Keeps, of samples[0..n), the newest sample per pid and none with a value over 100 % (a
 * driver bug); returns how many are left, at the front. Pure. */
size_t gpum__proc_util_reduce(gpum_process_util_t *samples, size_t n);

/* ---- host backend parsing (host.c) ---- */

typedef struct {
  uint64_t busy, total; /* jiffies */
} gpum__cpu_times_t;

/* Parses the aggregate "cpu " line of /proc/stat. 0 or GPUM_EPARSE. */
int gpum__parse_proc_stat(const char *text, gpum__cpu_times_t *out);
/* Percentage busy between two snapshots (0..100); -1 when total did not advance. */
int gpum__cpu_util_percent(const gpum__cpu_times_t *a, const gpum__cpu_times_t *b);
/* MemTotal and MemAvailable of /proc/meminfo in bytes. 0 or GPUM_EPARSE. */
int gpum__parse_meminfo(const char *text, uint64_t *total, uint64_t *available);
/* The 1-minute load average of /proc/loadavg as a percentage of ncpu (0..100). 0 or
 * GPUM_EPARSE. */
int gpum__parse_loadavg_percent(const char *text, unsigned ncpu, unsigned *percent);

/* ---- driver library selection (libpath.c) ---- */

typedef enum {
  GPUM__LIB_NVML = 0,
  GPUM__LIB_CUDA = 1,
  GPUM__LIB_ROCM_SMI = 2,
  GPUM__LIB_LEVEL_ZERO = 3,
} gpum__lib_kind_t;

#define GPUM__LIBPATH_MAX 3
typedef struct {
  unsigned n;                                /* candidates, tried in order */
  const char *candidates[GPUM__LIBPATH_MAX]; /* point into storage or static strings */
  const char *source; /* "option", "GPUM_NVML_LIBRARY", "GPUM_SIM_NODE", "default" */
  bool simulated;     /* the sim library was chosen because of GPUM_SIM_NODE */
  char sim_node[128]; /* $GPUM_SIM_NODE when simulated */
  char storage[PATH_MAX];
} gpum__libpath_t;

/* Writes DIR/file into buf when DIR is the directory of the object that holds libgpum
 * (libgpum.so, a program or library that links it statically) and the file exists there. */
bool gpum__beside_libgpum(const char *file, char *buf, size_t len);
/* Decides which library to load for kind: the explicit path (opts/config) if not NULL or
 * empty, else $GPUM_NVML_LIBRARY / $GPUM_CUDA_LIBRARY / $GPUM_ROCM_SMI_LIBRARY /
 * $GPUM_LEVEL_ZERO_LIBRARY, else libgpum_sim.so when $GPUM_SIM_NODE is set (found as
 * $GPUM_SIM_LIBRARY, else beside the loaded libgpum, else in GPUM_INSTALL_LIBDIR, else by the
 * loader's search path), else the system driver names. Returns 0 or GPUM_EINVAL (path too long). */
int gpum__libpath_resolve(gpum__lib_kind_t kind, const char *explicit_path, gpum__libpath_t *out);
/* Tries each candidate with dlopen(RTLD_NOW | RTLD_LOCAL). On success *dl and *used (the
 * candidate that loaded) are set. On failure returns GPUM_EDRIVER with a detail that names
 * every path tried, dlerror()'s message and where the choice came from. */
int gpum__libpath_open(const gpum__libpath_t *lp, const char *what, void **dl, const char **used);

/* Sets s->simulated (the library was chosen for GPUM_SIM_NODE, or is libgpum_sim.so by its
 * symbols) and s->detail (path, with the simulated node's name) for a backend that loaded dl
 * from path. */
void gpum__session_library(gpum_device_session_t *s, const gpum__libpath_t *lp, void *dl,
                           const char *path);

#endif /* GPUM_DEVICE_INTERNAL_H */
