/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The device session: picks a backend (auto | nvml | rocm | host; auto may list several
 * vendors' devices through mixed.c), serialises calls into it with one
 * mutex, and holds what every backend shares: the retry policy for transient driver errors,
 * the NVML error mapping, the metric table, and the /proc lookup that turns the pids a backend
 * reports into gpum_process_t entries with user and command.
 *
 * Transient NVML errors (retried with exponential backoff and +-50% jitter, then reported as
 * GPUM_EAGAIN):
 *   NVML_ERROR_UNKNOWN (999)   - the catch-all the driver returns for a failed RM call that may
 *                                well succeed next time; also what injected faults use;
 *   NVML_ERROR_TIMEOUT (10)    - the driver did not answer in time;
 *   NVML_ERROR_IRQ_ISSUE (11)  - interrupt problem in the kernel driver, usually passing;
 *   NVML_ERROR_NOT_READY (27)  - the device or the requested data is not ready yet.
 * Not retried: NVML_ERROR_IN_USE (19) is returned by state-changing calls (reset, MIG mode)
 * while something holds the GPU, which does not pass in milliseconds, and the device layer
 * only queries; GPU_IS_LOST and RESET_REQUIRED are final and map to GPUM_ELOST / GPUM_ERESET
 * at once; every other code is a plain error (NOT_SUPPORTED makes a metric invalid).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "nvml_abi.h"
#include "device/device_internal.h"
#include "os_internal.h"
#include "core/names_internal.h"

/* ---- names ---- */

const char *gpum_backend_name(gpum_backend_kind_t kind) {
  static const char *const names[] = {[GPUM_BACKEND_AUTO] = "auto",
                                      [GPUM_BACKEND_NVML] = "nvml",
                                      [GPUM_BACKEND_HOST] = "host",
                                      [GPUM_BACKEND_ROCM] = "rocm",
                                      [GPUM_BACKEND_LEVEL_ZERO] = "levelzero",
                                      [GPUM_BACKEND_MIXED] = "mixed"};
  return GPUM__NAME_OF(names, kind, "unknown");
}

int gpum_backend_parse(const char *s, gpum_backend_kind_t *out) {
  static const gpum_backend_kind_t kinds[] = {GPUM_BACKEND_AUTO, GPUM_BACKEND_NVML,
                                              GPUM_BACKEND_HOST, GPUM_BACKEND_ROCM,
                                              GPUM_BACKEND_LEVEL_ZERO};
  if (!s || !out)
    return gpum_error(GPUM_EINVAL, "backend name is NULL");
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    if (!strcasecmp(s, gpum_backend_name(kinds[i]))) {
      *out = kinds[i];
      return 0;
    }
  }
  return gpum_error(GPUM_EINVAL,
                    "unknown backend '%s' (expected auto, nvml, rocm, levelzero or host)", s);
}

static const char *const metric_names[] = {
#define NAME(id, name, unit) name,
    GPUM_METRICS(NAME)
#undef NAME
};
static const char *const metric_units[] = {
#define UNIT(id, name, unit) unit,
    GPUM_METRICS(UNIT)
#undef UNIT
};

const char *gpum_metric_name(gpum_metric_t m) {
  return (unsigned)m < GPUM_METRIC_COUNT ? metric_names[m] : "unknown";
}

const char *gpum_metric_unit(gpum_metric_t m) {
  return (unsigned)m < GPUM_METRIC_COUNT ? metric_units[m] : "";
}

bool gpum_sample_get(const gpum_device_sample_t *s, gpum_metric_t m, double *v) {
  if (!s || (unsigned)m >= GPUM_METRIC_COUNT || !gpum_sample_valid(s, m))
    return false;
  double d = 0;
  switch (m) {
  case GPUM_METRIC_MEMORY_TOTAL:
    d = (double)s->memory_total;
    break;
  case GPUM_METRIC_MEMORY_USED:
    d = (double)s->memory_used;
    break;
  case GPUM_METRIC_MEMORY_FREE:
    d = (double)s->memory_free;
    break;
  case GPUM_METRIC_MEMORY_RESERVED:
    d = (double)s->memory_reserved;
    break;
  case GPUM_METRIC_UTIL_GPU:
    d = s->util_gpu;
    break;
  case GPUM_METRIC_UTIL_MEMORY:
    d = s->util_memory;
    break;
  case GPUM_METRIC_TEMPERATURE:
    d = s->temperature_c;
    break;
  case GPUM_METRIC_POWER:
    d = s->power_mw;
    break;
  case GPUM_METRIC_CLOCK_SM:
    d = s->clock_sm_mhz;
    break;
  case GPUM_METRIC_CLOCK_MEM:
    d = s->clock_mem_mhz;
    break;
  case GPUM_METRIC_ECC_CORRECTED:
    d = (double)s->ecc_corrected;
    break;
  case GPUM_METRIC_ECC_UNCORRECTED:
    d = (double)s->ecc_uncorrected;
    break;
  case GPUM_METRIC_COUNT:
    return false;
  }
  if (v)
    *v = d;
  return true;
}

/* ---- NVML error mapping ---- */

bool gpum_device_nvml_error_is_transient(int r) {
  return r == NVML_ERROR_UNKNOWN || r == NVML_ERROR_TIMEOUT || r == NVML_ERROR_IRQ_ISSUE ||
         r == NVML_ERROR_NOT_READY;
}

int gpum_device_map_nvml_error(int r) {
  if (gpum_device_nvml_error_is_transient(r))
    return GPUM_EAGAIN;
  switch (r) {
  case NVML_SUCCESS:
    return 0;
  case NVML_ERROR_UNINITIALIZED:
    return GPUM_ESTATE;
  case NVML_ERROR_INVALID_ARGUMENT:
    return GPUM_EINVAL;
  case NVML_ERROR_NOT_SUPPORTED:
    return GPUM_ENOTSUP;
  case NVML_ERROR_NO_PERMISSION:
    return GPUM_EPERM;
  case NVML_ERROR_ALREADY_INITIALIZED:
    return GPUM_ESTATE;
  case NVML_ERROR_NOT_FOUND:
    return GPUM_ENOENT;
  case NVML_ERROR_INSUFFICIENT_SIZE:
    return GPUM_ENOSPC;
  case NVML_ERROR_INSUFFICIENT_POWER:
    return GPUM_EIO;
  case NVML_ERROR_DRIVER_NOT_LOADED:
    return GPUM_EDRIVER;
  case NVML_ERROR_LIBRARY_NOT_FOUND:
    return GPUM_EDRIVER;
  case NVML_ERROR_FUNCTION_NOT_FOUND:
    return GPUM_EDRIVERVER;
  case NVML_ERROR_CORRUPTED_INFOROM:
    return GPUM_EIO;
  case NVML_ERROR_GPU_IS_LOST:
    return GPUM_ELOST;
  case NVML_ERROR_RESET_REQUIRED:
    return GPUM_ERESET;
  case NVML_ERROR_OPERATING_SYSTEM:
    return GPUM_EIO;
  case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
    return GPUM_EDRIVER;
  case NVML_ERROR_IN_USE:
    return GPUM_EBUSY;
  case NVML_ERROR_MEMORY:
    return GPUM_ENOMEM;
  case NVML_ERROR_NO_DATA:
    return GPUM_ENOENT;
  case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
    return GPUM_ENOTSUP;
  case NVML_ERROR_INSUFFICIENT_RESOURCES:
    return GPUM_EBUSY;
  case NVML_ERROR_FREQ_NOT_SUPPORTED:
    return GPUM_ENOTSUP;
  case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
    return GPUM_EDRIVERVER;
  case NVML_ERROR_DEPRECATED:
    return GPUM_ENOTSUP;
  case NVML_ERROR_GPU_NOT_FOUND:
    return GPUM_ENODEV;
  case NVML_ERROR_INVALID_STATE:
    return GPUM_ESTATE;
  case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED:
    return GPUM_ENOTSUP;
  default:
    return GPUM_EIO;
  }
}

/* ---- retry policy ---- */

uint64_t gpum__backoff_delay_us(unsigned base_ms, unsigned cap_ms, int attempt, double r01) {
  uint64_t d = base_ms;
  for (int i = 0; i < attempt && d < cap_ms; i++)
    d *= 2;
  if (d > cap_ms)
    d = cap_ms;
  if (r01 < 0)
    r01 = 0;
  if (r01 >= 1)
    r01 = 0.999999;
  return (uint64_t)((double)d * 1000.0 * (0.5 + r01));
}

double gpum__retry_rand01(gpum__retry_t *r) {
  uint64_t x = r->rng ? r->rng : 0x9E3779B97F4A7C15ull;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  r->rng = x;
  return (double)(x >> 11) / (double)(1ull << 53);
}

void gpum__retry_sleep(gpum__retry_t *r, int attempt) {
  uint64_t us = gpum__backoff_delay_us(r->base_ms, r->cap_ms, attempt, gpum__retry_rand01(r));
  struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int gpum__retry_init(gpum__retry_t *r, const gpum_device_open_opts_t *opts) {
  int retries = opts ? opts->retries : -1;
  int base = opts ? opts->retry_base_ms : -1;
  if (retries < -1 || retries > GPUM__RETRY_MAX_COUNT)
    return gpum_error(GPUM_EINVAL, "retries %d out of range (-1 for the default, 0..%d)", retries,
                      GPUM__RETRY_MAX_COUNT);
  if (base < -1 || base > GPUM__RETRY_MAX_BASE_MS)
    return gpum_error(GPUM_EINVAL, "retry_base_ms %d out of range (-1 for the default, 0..%d)",
                      base, GPUM__RETRY_MAX_BASE_MS);
  r->retries = retries < 0 ? GPUM__RETRY_DEFAULT_COUNT : retries;
  r->base_ms = base < 0 ? GPUM__RETRY_DEFAULT_BASE_MS : (unsigned)base;
  r->cap_ms = r->base_ms > GPUM__RETRY_CAP_MS ? r->base_ms : GPUM__RETRY_CAP_MS;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  r->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)r;
  if (!r->rng)
    r->rng = 1;
  return 0;
}

/* ---- session ---- */

void gpum_device_open_opts_init(gpum_device_open_opts_t *opts) {
  if (!opts)
    return;
  memset(opts, 0, sizeof *opts);
  opts->backend = GPUM_BACKEND_AUTO;
  opts->nvml_library = NULL;
  opts->rocm_library = NULL;
  opts->level_zero_library = NULL;
  opts->retries = -1;
  opts->retry_base_ms = -1;
}

int gpum__device_opts_dup(const gpum_device_open_opts_t *src, gpum_device_open_opts_t *dst,
                          char **block) {
  const char **paths[] = {&dst->nvml_library, &dst->rocm_library, &dst->level_zero_library};
  enum { N = sizeof paths / sizeof paths[0] };
  *dst = *src;
  *block = NULL;
  size_t len = 0;
  for (size_t i = 0; i < N; i++)
    len += *paths[i] ? strlen(*paths[i]) + 1 : 0;
  if (len == 0)
    return 0;
  char *b = malloc(len), *p = b;
  if (!b)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  for (size_t i = 0; i < N; i++) {
    if (!*paths[i])
      continue;
    size_t k = strlen(*paths[i]) + 1;
    memcpy(p, *paths[i], k);
    *paths[i] = p;
    p += k;
  }
  *block = b;
  return 0;
}

void gpum__session_library(gpum_device_session_t *s, const gpum__libpath_t *lp, void *dl,
                           const char *path) {
  s->simulated = lp->simulated || dlsym(dl, "gpum_sim_last_error") != NULL;
  const char *node = getenv("GPUM_SIM_NODE");
  if (s->simulated && node && *node)
    snprintf(s->detail, sizeof s->detail, "%s (simulated node '%s')", path, node);
  else
    snprintf(s->detail, sizeof s->detail, "%s", path);
}

int gpum__info_keep(int rc, gpum_device_info_t *out, gpum_device_info_t *last, bool *have_last,
                    unsigned index, const char *vendor) {
  if (rc == 0) {
    *last = *out;
    *have_last = true;
  } else if (*have_last) {
    *out = *last;
  } else {
    memset(out, 0, sizeof *out);
    out->index = index;
    out->vendor_index = index;
    out->parent_index = -1;
    out->vendor = vendor;
  }
  return rc;
}

void gpum__session_lock(gpum_device_session_t *s) {
  pthread_mutex_lock(&s->lock);
}

void gpum__session_unlock(gpum_device_session_t *s) {
  pthread_mutex_unlock(&s->lock);
}

static int try_backend(gpum_device_session_t *s, const struct gpum__backend *ops,
                       const gpum_device_open_opts_t *opts) {
  s->ops = ops;
  s->impl = NULL;
  s->count = 0;
  s->simulated = false;
  s->detail[0] = '\0';
  s->driver_version[0] = '\0';
  int rc = ops->open(s, opts);
  if (rc)
    s->ops = NULL;
  return rc;
}

/* Says which backend auto selected, at info level, once per process and again only when the
 * choice changes: a program opens a session per thread or per device (gpumd one per device
 * reader and monitor worker), and the same line each time says nothing new. */
static void log_selection(const char *line) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static char last[640];
  pthread_mutex_lock(&mu);
  bool fresh = strcmp(last, line) != 0;
  if (fresh)
    snprintf(last, sizeof last, "%s", line);
  pthread_mutex_unlock(&mu);
  if (fresh)
    gpum_log(GPUM_LOG_INFO, "device", "%s", line);
}

/* The vendor backends auto tries, in the order their devices are listed. */
static const struct gpum__backend *const vendor_backends[] = {
    &gpum__backend_nvml, &gpum__backend_rocm, &gpum__backend_level_zero};

/* auto: every vendor backend that loads and finds a device, in one list (mixed.c), else host;
 * says which and why at info level. */
static int open_auto(gpum_device_session_t *s, const gpum_device_open_opts_t *opts) {
  enum { NV = sizeof vendor_backends / sizeof vendor_backends[0] };
  _Static_assert(NV <= GPUM__MIXED_MAX, "the mixed list holds every vendor");
  gpum_device_session_t *found[NV];
  unsigned nfound = 0;
  char why[512] = "", line[640];
  size_t off = 0;
  for (unsigned i = 0; i < NV; i++) {
    gpum_device_open_opts_t o = *opts;
    o.backend = vendor_backends[i]->kind;
    gpum_device_session_t *c = NULL;
    if (gpum_device_open(&o, &c) == 0) {
      found[nfound++] = c;
      continue;
    }
    int w = snprintf(why + off, sizeof why - off, "%s%s: %s", off ? "; " : "",
                     vendor_backends[i]->name, gpum_last_error());
    if (w > 0)
      off = off + (size_t)w < sizeof why ? off + (size_t)w : sizeof why - 1;
  }
  if (nfound > 0) {
    int rc = gpum__mixed_adopt(s, found, nfound);
    if (rc) {
      for (unsigned i = 0; i < nfound; i++)
        gpum_device_close(found[i]);
      return rc;
    }
    s->ops = &gpum__backend_mixed;
    snprintf(line, sizeof line, "backend selected backend=%s library=\"%.480s\" devices=%u",
             gpum_backend_name(gpum__mixed_kind(s)), s->detail, s->count);
    log_selection(line);
    if (why[0])
      gpum_log(GPUM_LOG_DEBUG, "device", "not on this node: %s", why);
    return 0;
  }
  int rc = try_backend(s, &gpum__backend_host, opts);
  if (rc)
    return rc;
  snprintf(line, sizeof line, "backend selected backend=host reason=\"%.500s\"", why);
  log_selection(line);
  return 0;
}

int gpum_device_open(const gpum_device_open_opts_t *opts, gpum_device_session_t **out) {
  gpum_device_open_opts_t defaults;
  if (!out)
    return gpum_error(GPUM_EINVAL, "gpum_device_open: out is NULL");
  *out = NULL;
  if (!opts) {
    gpum_device_open_opts_init(&defaults);
    opts = &defaults;
  }
  if (opts->backend != GPUM_BACKEND_AUTO && opts->backend != GPUM_BACKEND_NVML &&
      opts->backend != GPUM_BACKEND_HOST && opts->backend != GPUM_BACKEND_ROCM &&
      opts->backend != GPUM_BACKEND_LEVEL_ZERO && opts->backend != GPUM_BACKEND_MIXED)
    return gpum_error(GPUM_EINVAL, "unknown backend kind %d", (int)opts->backend);
  gpum_device_session_t *s = calloc(1, sizeof *s);
  if (!s)
    return gpum_error(GPUM_ENOMEM, "cannot allocate a device session");
  int rc = gpum__retry_init(&s->retry, opts);
  if (rc)
    goto out_free;
  if (pthread_mutex_init(&s->lock, NULL) != 0) {
    rc = gpum_error(GPUM_ENOMEM, "cannot create the session mutex");
    goto out_free;
  }
  switch (opts->backend) {
  case GPUM_BACKEND_NVML:
    rc = try_backend(s, &gpum__backend_nvml, opts);
    if (rc == 0 && s->count == 0) {
      s->ops->close(s);
      rc = gpum_error(GPUM_ENODEV, "NVML (%s) reports no device", s->detail);
    }
    break;
  case GPUM_BACKEND_HOST:
    rc = try_backend(s, &gpum__backend_host, opts);
    break;
  case GPUM_BACKEND_ROCM:
    rc = try_backend(s, &gpum__backend_rocm, opts);
    if (rc == 0 && s->count == 0) {
      s->ops->close(s);
      rc = gpum_error(GPUM_ENODEV, "ROCm SMI (%s) reports no device", s->detail);
    }
    break;
  case GPUM_BACKEND_LEVEL_ZERO:
    rc = try_backend(s, &gpum__backend_level_zero, opts);
    if (rc == 0 && s->count == 0) {
      s->ops->close(s);
      rc = gpum_error(GPUM_ENODEV, "Level Zero (%s) reports no device", s->detail);
    }
    break;
  default: /* auto, and mixed: what auto reported, asked for again (a reader's session) */
    rc = open_auto(s, opts);
    break;
  }
  if (rc)
    goto out_mutex;
  *out = s;
  return 0;
out_mutex:
  pthread_mutex_destroy(&s->lock);
out_free:
  free(s);
  return rc;
}

void gpum_device_close(gpum_device_session_t *s) {
  if (!s)
    return;
  if (s->ops)
    s->ops->close(s);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

gpum_backend_kind_t gpum_device_backend(const gpum_device_session_t *s) {
  if (s && s->ops == &gpum__backend_mixed)
    return gpum__mixed_kind(s);
  return s && s->ops ? s->ops->kind : GPUM_BACKEND_HOST;
}

const char *gpum_device_backend_detail(const gpum_device_session_t *s) {
  return s ? s->detail : "";
}

const char *gpum_device_driver_version(const gpum_device_session_t *s) {
  return s ? s->driver_version : "";
}

bool gpum_device_is_simulated(const gpum_device_session_t *s) {
  return s && s->simulated;
}

unsigned gpum_device_count(const gpum_device_session_t *s) {
  return s ? s->count : 0;
}

static int check_index(const gpum_device_session_t *s, unsigned index) {
  if (!s)
    return gpum_error(GPUM_EINVAL, "device session is NULL");
  if (index >= s->count)
    return gpum_error(GPUM_ENODEV, "no device with index %u (%u device%s)", index, s->count,
                      s->count == 1 ? "" : "s");
  return 0;
}

int gpum_device_get_info(gpum_device_session_t *s, unsigned index, gpum_device_info_t *out) {
  if (!out)
    return gpum_error(GPUM_EINVAL, "gpum_device_get_info: out is NULL");
  int rc = check_index(s, index);
  if (rc)
    return rc;
  memset(out, 0, sizeof *out);
  out->index = index;
  out->vendor_index = index;
  out->parent_index = -1; /* a whole GPU, unless the backend finds a MIG instance */
  gpum__session_lock(s);
  rc = s->ops->get_info(s, index, out);
  gpum__session_unlock(s);
  return rc;
}

int gpum_device_sample(gpum_device_session_t *s, unsigned index, gpum_device_sample_t *out) {
  if (!out)
    return gpum_error(GPUM_EINVAL, "gpum_device_sample: out is NULL");
  int rc = check_index(s, index);
  if (rc)
    return rc;
  memset(out, 0, sizeof *out);
  out->timestamp_ns = gpum__os_real_ns();
  gpum__session_lock(s);
  rc = s->ops->sample(s, index, out);
  gpum__session_unlock(s);
  return rc;
}

int gpum_device_memory_health(gpum_device_session_t *s, unsigned index, gpum_memory_health_t *out) {
  if (!out)
    return gpum_error(GPUM_EINVAL, "gpum_device_memory_health: out is NULL");
  memset(out, 0, sizeof *out);
  int rc = check_index(s, index);
  if (rc)
    return rc;
  gpum__session_lock(s);
  rc = s->ops->memory_health(s, index, out);
  gpum__session_unlock(s);
  if (rc)
    memset(out, 0, sizeof *out); /* a failed read leaves nothing valid */
  return rc;
}

int gpum_device_processes(gpum_device_session_t *s, unsigned index, gpum_process_t *procs,
                          size_t cap, size_t *count) {
  return gpum_device_processes_flags(s, index, procs, cap, count, 0);
}

int gpum_device_processes_flags(gpum_device_session_t *s, unsigned index, gpum_process_t *procs,
                                size_t cap, size_t *count, unsigned flags) {
  if (!count || (cap > 0 && !procs))
    return gpum_error(GPUM_EINVAL, "gpum_device_processes: %s is NULL", count ? "procs" : "count");
  *count = 0;
  int rc = check_index(s, index);
  if (rc)
    return rc;
  gpum__rawproc_t *raw = NULL;
  size_t n = 0;
  gpum__session_lock(s);
  rc = s->ops->processes(s, index, &raw, &n);
  gpum__session_unlock(s);
  if (rc)
    return rc;
  /* The /proc lookups run without the session lock: they do not touch the driver. */
  for (size_t i = 0; i < n && i < cap; i++) {
    gpum_process_t *p = &procs[i];
    memset(p, 0, sizeof *p);
    p->pid = raw[i].pid;
    p->memory = raw[i].memory_valid ? raw[i].memory : 0;
    p->memory_valid = raw[i].memory_valid;
    gpum__proc_identity(p->pid, p->user, flags & GPUM_PROCESSES_NO_USER ? 0 : sizeof p->user,
                        p->command, sizeof p->command);
    p->mps_server = gpum__is_mps_server(p->command);
  }
  free(raw);
  *count = n;
  if (n > cap)
    return gpum_error(GPUM_ENOSPC, "device %u has %zu processes, room for %zu", index, n, cap);
  return 0;
}

int gpum_device_process_util(gpum_device_session_t *s, unsigned index, uint64_t since_us,
                             gpum_process_util_t *out, size_t cap, size_t *count) {
  if (!count || (cap > 0 && !out))
    return gpum_error(GPUM_EINVAL, "gpum_device_process_util: %s is NULL", count ? "out" : "count");
  *count = 0;
  int rc = check_index(s, index);
  if (rc)
    return rc;
  if (!s->ops->process_util)
    return gpum_error(GPUM_ENOTSUP, "the %s backend gives no per-process utilisation",
                      s->ops->name);
  gpum_process_util_t *raw = NULL;
  size_t n = 0;
  gpum__session_lock(s);
  rc = s->ops->process_util(s, index, since_us, &raw, &n);
  gpum__session_unlock(s);
  if (rc)
    return rc;
  if (n > 0 && cap > 0) /* (out may be NULL with cap 0: memcpy's arguments never may) */
    memcpy(out, raw, (n < cap ? n : cap) * sizeof *out);
  free(raw);
  *count = n;
  if (n > cap)
    return gpum_error(GPUM_ENOSPC, "device %u has %zu process samples, room for %zu", index, n,
                      cap);
  return 0;
}

int gpum_device_events_enable(gpum_device_session_t *s) {
  if (!s)
    return gpum_error(GPUM_EINVAL, "device session is NULL");
  return s->ops->events_enable(s); /* takes the lock itself, see the vtable */
}

int gpum_device_event_wait(gpum_device_session_t *s, gpum_device_event_t *ev, unsigned timeout_ms) {
  if (!s || !ev)
    return gpum_error(GPUM_EINVAL, "gpum_device_event_wait: %s is NULL", s ? "ev" : "session");
  memset(ev, 0, sizeof *ev);
  return s->ops->event_wait(s, ev, timeout_ms); /* takes the lock itself, see the vtable */
}
