/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NVML backend: loads libnvidia-ml (or libgpum_sim.so, or whatever GPUM_NVML_LIBRARY
 * names) with dlopen, resolves our declared ABI subset newest symbol first, and reads static
 * info, dynamic samples and memory health (retired pages, remapped rows). Process lists live
 * in nvml_proc.c, events in nvml_events.c.
 *
 * Symbols: nvmlInit_v2 -> nvmlInit, nvmlDeviceGetCount_v2 -> plain,
 * nvmlDeviceGetHandleByIndex_v2 -> plain, nvmlShutdown, nvmlDeviceGetName,
 * nvmlDeviceGetUUID and one of nvmlDeviceGetMemoryInfo_v2 / nvmlDeviceGetMemoryInfo are
 * required (missing -> GPUM_EDRIVER naming the symbol); every other symbol is optional and
 * its field is simply invalid when absent. Versioned structs carry the encoded version
 * (nvmlMemory_v2 = 0x02000028, nvmlTemperature_v1 = 0x0100000C); when a driver rejects one
 * (FUNCTION_NOT_FOUND, ARGUMENT_VERSION_MISMATCH) the device falls back to the older call for
 * the rest of the session.
 *
 * Opening a session calls nvmlInit and nvmlDeviceGetCount, then learns each GPU's MIG layout
 * on a thread per GPU with a deadline (a GPU in MIG mode is listed as its MIG instances); each
 * device's handle is looked up by the first call on that device (and again after a failed
 * lookup), so a GPU whose driver calls hang holds up the callers of that device, and the
 * opening of a session by at most the MIG deadline.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "device/nvml_internal.h"

_Static_assert(sizeof(void *) == sizeof(gpum_nvmlInit_v2_fn), "function pointers fit void *");

static const struct {
  const char *name;
  size_t off;
} sym_table[] = {
#define GPUM__NVML_SYM(ret, name, params) {#name, offsetof(gpum__nvml_syms_t, name)},
    GPUM_NVML_FUNCS(GPUM__NVML_SYM)
#undef GPUM__NVML_SYM
};

/* True when name is one of the comma-separated names in list. */
static bool listed(const char *list, const char *name) {
  size_t len = strlen(name);
  for (const char *p = list; p && *p;) {
    size_t n = strcspn(p, ",");
    if (n == len && !strncmp(p, name, len))
      return true;
    p += n;
    if (*p == ',')
      p++;
  }
  return false;
}

/* GPUM_TEST_NVML_HIDE, a testing aid (GPUM_TEST_* is not an option section): comma-separated
 * NVML symbols to treat as not exported, so that every fallback path (memory v1, the old
 * temperature call, _v3 -> _v2 -> v1 process lists, ...) runs against one simulated driver. */
static void resolve_all(gpum__nvml_t *nv) {
  const char *hide = getenv("GPUM_TEST_NVML_HIDE");
  for (size_t i = 0; i < sizeof sym_table / sizeof sym_table[0]; i++) {
    void *p = dlsym(nv->dl, sym_table[i].name);
    if (p && hide && listed(hide, sym_table[i].name)) {
      gpum_log(GPUM_LOG_DEBUG, "device", "symbol hidden by GPUM_TEST_NVML_HIDE symbol=%s",
               sym_table[i].name);
      p = NULL;
    }
    memcpy((char *)&nv->f + sym_table[i].off, &p, sizeof p);
  }
}

/* Picks the newest of each required family. Returns 0 or GPUM_EDRIVER naming the symbol. */
static int choose_symbols(gpum__nvml_t *nv) {
  const char *missing = NULL;
  nv->init = nv->f.nvmlInit_v2 ? nv->f.nvmlInit_v2 : nv->f.nvmlInit;
  nv->get_count =
      nv->f.nvmlDeviceGetCount_v2 ? nv->f.nvmlDeviceGetCount_v2 : nv->f.nvmlDeviceGetCount;
  nv->get_handle = nv->f.nvmlDeviceGetHandleByIndex_v2 ? nv->f.nvmlDeviceGetHandleByIndex_v2
                                                       : nv->f.nvmlDeviceGetHandleByIndex;
  nv->event_wait = nv->f.nvmlEventSetWait_v2 ? nv->f.nvmlEventSetWait_v2 : nv->f.nvmlEventSetWait;
  if (!nv->init)
    missing = "nvmlInit_v2 (or nvmlInit)";
  else if (!nv->f.nvmlShutdown)
    missing = "nvmlShutdown";
  else if (!nv->get_count)
    missing = "nvmlDeviceGetCount_v2 (or nvmlDeviceGetCount)";
  else if (!nv->get_handle)
    missing = "nvmlDeviceGetHandleByIndex_v2 (or nvmlDeviceGetHandleByIndex)";
  else if (!nv->f.nvmlDeviceGetName)
    missing = "nvmlDeviceGetName";
  else if (!nv->f.nvmlDeviceGetUUID)
    missing = "nvmlDeviceGetUUID";
  else if (!nv->f.nvmlDeviceGetMemoryInfo_v2 && !nv->f.nvmlDeviceGetMemoryInfo)
    missing = "nvmlDeviceGetMemoryInfo_v2 (or nvmlDeviceGetMemoryInfo)";
  if (missing)
    return gpum_error(GPUM_EDRIVER, "%s does not export %s: not a usable NVML library", nv->path,
                      missing);
  nv->stride_hint = gpum__proc_stride_hint(nv->f.nvmlDeviceGetConfComputeMemSizeInfo != NULL,
                                           nv->f.nvmlDeviceGetRunningProcessDetailList != NULL);
  return 0;
}

const char *gpum__nvml_strerror(const gpum__nvml_t *nv, int rv) {
  if (nv && nv->f.nvmlErrorString) {
    const char *m = nv->f.nvmlErrorString(rv);
    if (m && *m)
      return m;
  }
  return gpum_nvml_return_message(rv);
}

int gpum__nvml_fail(const gpum__nvml_t *nv, const char *call, unsigned i, int rv) {
  int code = gpum_device_map_nvml_error(rv);
  if (gpum_device_nvml_error_is_transient(rv))
    return gpum_error(code, "%s on device %u: %s (NVML %d), still failing after retries", call, i,
                      gpum__nvml_strerror(nv, rv), rv);
  return gpum_error(code, "%s on device %u: %s (NVML %d)", call, i, gpum__nvml_strerror(nv, rv),
                    rv);
}

/* Fatal: the whole read fails rather than leaving one field invalid. Besides a lost device and
 * transient errors that outlasted the retries, that is a driver which is gone or unusable
 * (unloaded, not initialised, library and kernel module out of step): reporting "no data" as a
 * healthy device would hide it. */
bool gpum__nvml_is_fatal(int rv) {
  return rv == NVML_ERROR_GPU_IS_LOST || rv == NVML_ERROR_RESET_REQUIRED ||
         rv == NVML_ERROR_DRIVER_NOT_LOADED || rv == NVML_ERROR_UNINITIALIZED ||
         rv == NVML_ERROR_LIB_RM_VERSION_MISMATCH || gpum_device_nvml_error_is_transient(rv);
}

void gpum__nvml_note(gpum__nvml_t *nv, unsigned i, int rv) {
  if (i >= nv->ndev)
    return;
  gpum__nvml_dev_t *d = &nv->dev[i];
  if (rv == NVML_ERROR_GPU_IS_LOST) {
    if (!d->lost) {
      d->lost = true;
      d->lost_pending = true;
      gpum_log(GPUM_LOG_INFO, "device", "device lost index=%u", i);
    }
  } else if (rv == NVML_SUCCESS) {
    d->lost = false;
  }
}

static void unload(gpum__nvml_t *nv) {
  if (!nv)
    return;
  gpum__nvml_events_close(nv);
  if (nv->probe_left) {
    /* A thread is still in a driver call: shutting NVML down or unmapping it under that thread
     * is not safe. The library stays loaded (one reference, the process's). */
    gpum_log(GPUM_LOG_INFO, "device", "NVML left loaded: a MIG probe is still in a driver call");
  } else {
    if (nv->initialised)
      nv->f.nvmlShutdown();
    if (nv->dl)
      dlclose(nv->dl);
  }
  pthread_mutex_destroy(&nv->ev_lock);
  free(nv->dev);
  free(nv);
}

/* ---- MIG layout ----
 *
 * A GPU in MIG mode is listed as its MIG instances, which is what jobs get. Learning the
 * layout takes driver calls on every GPU (handle, nvmlDeviceGetMigMode, the MIG handles), and
 * a GPU whose calls hang must not hold up opening a session: each GPU is probed on a thread of
 * its own, and a GPU that has not answered within GPUM__MIG_PROBE_MS is listed as a whole GPU
 * (its thread is left in its call; the library then stays loaded). Transient errors are tried
 * again at once, a few times.
 *
 * The process keeps the last probe (per library and simulated node): sessions opened while it
 * is still waiting for a GPU, or within GPUM__MIG_KEEP_MS of it, take its answers and its
 * deadline instead of probing again. Sessions opened together (gpum status's readers, one per
 * device) so agree on the numbering, a hung GPU costs the process one deadline, not one per
 * session, and no second thread is sent into its hung call. */
#define GPUM__MIG_PROBE_MS 500
#define GPUM__MIG_KEEP_MS 5000
#define GPUM__MIG_MAX 8 /* MIG devices under one GPU: 7 on A100/H100 */

typedef struct {
  bool done, mig;
  unsigned n;                  /* instances found */
  unsigned idx[GPUM__MIG_MAX]; /* their MIG device indexes */
} gpum__mig_gpu_t;

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned refs;    /* the opener and each thread not yet finished */
  unsigned pending; /* GPUs not probed yet */
  gpum_nvmlDeviceGetHandleByIndex_v2_fn get_handle;
  gpum_nvmlDeviceGetMigMode_fn get_mode;
  gpum_nvmlDeviceGetMaxMigDeviceCount_fn max_count;
  gpum_nvmlDeviceGetMigDeviceHandleByIndex_fn mig_handle;
  gpum__mig_gpu_t *gpu;
  pthread_t *tid; /* the threads (joined by the starter when done, else detached) */
  bool *started;  /* tid[i] was created */
  /* Set at the start, read-only after. */
  char key[PATH_MAX + 160]; /* library path and $GPUM_SIM_NODE */
  unsigned count;
  struct timespec deadline; /* CLOCK_MONOTONIC */
  uint64_t started_ms;
} gpum__mig_probe_t;

static pthread_mutex_t mig_cache_mu = PTHREAD_MUTEX_INITIALIZER;
static gpum__mig_probe_t *mig_cache; /* holds a reference */

static uint64_t mono_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

typedef struct {
  gpum__mig_probe_t *p;
  unsigned i;
} gpum__mig_arg_t;

#define MIG_TRY(rv, expr)                                      \
  do {                                                         \
    for (int t_ = 0; t_ < 5; t_++)                             \
      if (!gpum_device_nvml_error_is_transient((rv) = (expr))) \
        break;                                                 \
  } while (0)

static void mig_probe_release(gpum__mig_probe_t *p) {
  /* p->mu held; frees p when this was the last reference. */
  bool last = --p->refs == 0;
  pthread_mutex_unlock(&p->mu);
  if (last) {
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->gpu);
    free(p->tid);
    free(p->started);
    free(p);
  }
}

static void *mig_probe_thread(void *arg) {
  gpum__mig_arg_t a = *(gpum__mig_arg_t *)arg;
  free(arg);
  gpum__mig_probe_t *p = a.p;
  gpum__mig_gpu_t r = {.done = true};
  nvmlDevice_t h = NULL;
  unsigned cur = 0, pend = 0;
  int rv;
  MIG_TRY(rv, p->get_handle(a.i, &h));
  if (rv == NVML_SUCCESS && h) {
    MIG_TRY(rv, p->get_mode(h, &cur, &pend));
    r.mig = rv == NVML_SUCCESS && cur == NVML_DEVICE_MIG_ENABLE;
  }
  if (r.mig) {
    unsigned max = GPUM__MIG_MAX;
    if (p->max_count) {
      MIG_TRY(rv, p->max_count(h, &max));
      if (rv != NVML_SUCCESS || max > GPUM__MIG_MAX)
        max = GPUM__MIG_MAX;
    }
    for (unsigned k = 0; k < max; k++) {
      nvmlDevice_t m = NULL;
      MIG_TRY(rv, p->mig_handle(h, k, &m));
      if (rv == NVML_SUCCESS && m)
        r.idx[r.n++] = k;
    }
  }
  pthread_mutex_lock(&p->mu);
  p->gpu[a.i] = r;
  p->pending--;
  pthread_cond_broadcast(&p->cv);
  mig_probe_release(p);
  return NULL;
}

/* The kept probe for key and count when it may be reused, with a reference taken. */
static gpum__mig_probe_t *mig_cached(const char *key, unsigned count) {
  gpum__mig_probe_t *p = mig_cache;
  if (!p || p->count != count || strcmp(p->key, key) != 0)
    return NULL;
  pthread_mutex_lock(&p->mu);
  bool reuse = p->pending > 0 || mono_ms() - p->started_ms < GPUM__MIG_KEEP_MS;
  if (reuse)
    p->refs++;
  pthread_mutex_unlock(&p->mu);
  return reuse ? p : NULL;
}

/* Starts a probe of count GPUs (one thread each), with two references: the caller's and the
 * cache's. NULL when out of memory. */
static gpum__mig_probe_t *mig_start(gpum__nvml_t *nv, const char *key, unsigned count) {
  gpum__mig_probe_t *p = calloc(1, sizeof *p);
  size_t slots = count ? count : 1;
  if (!p || !(p->gpu = calloc(slots, sizeof *p->gpu)) ||
      !(p->tid = calloc(slots, sizeof *p->tid)) ||
      !(p->started = calloc(slots, sizeof *p->started))) {
    if (p) {
      free(p->gpu);
      free(p->tid);
    }
    free(p);
    return NULL;
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->cv, &ca);
  pthread_condattr_destroy(&ca);
  snprintf(p->key, sizeof p->key, "%s", key);
  p->count = count;
  p->started_ms = mono_ms();
  clock_gettime(CLOCK_MONOTONIC, &p->deadline);
  p->deadline.tv_sec += GPUM__MIG_PROBE_MS / 1000;
  p->deadline.tv_nsec += (long)(GPUM__MIG_PROBE_MS % 1000) * 1000000L;
  if (p->deadline.tv_nsec >= 1000000000L) {
    p->deadline.tv_sec++;
    p->deadline.tv_nsec -= 1000000000L;
  }
  p->refs = 2; /* the caller's and the cache's, taken before any thread can drop its own */
  p->get_handle = nv->get_handle;
  p->get_mode = nv->f.nvmlDeviceGetMigMode;
  p->max_count = nv->f.nvmlDeviceGetMaxMigDeviceCount;
  p->mig_handle = nv->f.nvmlDeviceGetMigDeviceHandleByIndex;
  pthread_mutex_lock(&p->mu);
  for (unsigned i = 0; i < count; i++) {
    gpum__mig_arg_t *a = malloc(sizeof *a);
    if (!a)
      break;
    *a = (gpum__mig_arg_t){p, i};
    if (pthread_create(&p->tid[i], NULL, mig_probe_thread, a) == 0) {
      p->started[i] = true;
      p->refs++;
      p->pending++;
    } else {
      free(a);
    }
  }
  pthread_mutex_unlock(&p->mu);
  return p;
}

/* Probes every GPU's MIG layout (or takes the kept probe's answers) and waits for it up to
 * the probe's deadline. Returns the probe with its lock held (the caller releases it with
 * mig_probe_release) and sets *left when a thread this call started was left in a call. */
static gpum__mig_probe_t *mig_probe(gpum__nvml_t *nv, unsigned count, bool *left) {
  char key[PATH_MAX + 160];
  const char *node = getenv("GPUM_SIM_NODE");
  snprintf(key, sizeof key, "%s|%s", nv->path, node ? node : "");
  *left = false;
  pthread_mutex_lock(&mig_cache_mu);
  gpum__mig_probe_t *p = mig_cached(key, count);
  bool mine = p == NULL;
  if (mine && (p = mig_start(nv, key, count)) != NULL) {
    gpum__mig_probe_t *old = mig_cache;
    mig_cache = p; /* with the reference mig_start took for it */
    if (old) {
      pthread_mutex_lock(&old->mu);
      mig_probe_release(old);
    }
  }
  pthread_mutex_unlock(&mig_cache_mu);
  if (!p)
    return NULL;
  pthread_mutex_lock(&p->mu);
  while (p->pending > 0 && pthread_cond_timedwait(&p->cv, &p->mu, &p->deadline) == 0) {
  }
  *left = mine && p->pending > 0;
  if (mine) {
    /* Joins the threads that are done (they are exiting), detaches those still in a call. */
    bool *done = calloc(count ? count : 1, sizeof *done);
    for (unsigned i = 0; done && i < count; i++)
      done[i] = p->gpu[i].done;
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < count; i++) {
      if (!p->started[i])
        continue;
      if (done && done[i])
        pthread_join(p->tid[i], NULL);
      else
        pthread_detach(p->tid[i]);
    }
    free(done);
    pthread_mutex_lock(&p->mu);
  }
  return p;
}

static int enumerate(gpum_device_session_t *s, gpum__nvml_t *nv) {
  unsigned count = 0;
  int rv;
  GPUM__NV_RETRY(s, rv, nv->get_count(&count));
  if (rv != NVML_SUCCESS)
    return gpum_error(gpum_device_map_nvml_error(rv), "nvmlDeviceGetCount in %s: %s (NVML %d)",
                      nv->path, gpum__nvml_strerror(nv, rv), rv);
  if (count > 4096)
    return gpum_error(GPUM_EDRIVER, "%s reports %u devices: not plausible", nv->path, count);
  gpum__mig_probe_t *p = NULL;
  bool left = false;
  if (count > 0 && nv->f.nvmlDeviceGetMigMode && nv->f.nvmlDeviceGetMigDeviceHandleByIndex) {
    p = mig_probe(nv, count, &left);
    if (!p)
      return gpum_error(GPUM_ENOMEM, "cannot probe the GPUs' MIG modes");
  }
  unsigned ndev = 0;
  for (unsigned i = 0; i < count; i++)
    ndev += p && p->gpu[i].done && p->gpu[i].mig ? p->gpu[i].n : 1;
  nv->dev = calloc(ndev ? ndev : 1, sizeof *nv->dev);
  for (unsigned i = 0, k = 0; nv->dev && i < count; i++) {
    const gpum__mig_gpu_t *g = p ? &p->gpu[i] : NULL;
    if (g && g->done && g->mig) {
      if (g->n == 0)
        gpum_log(GPUM_LOG_INFO, "device", "GPU in MIG mode with no MIG instance index=%u", i);
      for (unsigned m = 0; m < g->n; m++)
        nv->dev[k++] = (gpum__nvml_dev_t){.gpu = i, .mig = (int)g->idx[m]};
      continue;
    }
    if (g && !g->done)
      gpum_log(GPUM_LOG_INFO, "device",
               "no MIG mode from GPU index=%u within %d ms: listed as a whole GPU", i,
               GPUM__MIG_PROBE_MS);
    nv->dev[k++] = (gpum__nvml_dev_t){.gpu = i, .mig = -1};
  }
  if (p) {
    nv->probe_left = left;
    mig_probe_release(p); /* unlocks */
  }
  if (!nv->dev)
    return gpum_error(GPUM_ENOMEM, "cannot allocate %u device records", ndev);
  nv->ndev = ndev;
  /* The handles are looked up on first use (gpum__nvml_handle): a device whose driver calls
   * hang must not hold up later calls on other devices. */
  return 0;
}

static void describe(gpum_device_session_t *s, gpum__nvml_t *nv, const gpum__libpath_t *lp) {
  if (nv->f.nvmlSystemGetDriverVersion &&
      nv->f.nvmlSystemGetDriverVersion(s->driver_version, sizeof s->driver_version) != NVML_SUCCESS)
    s->driver_version[0] = '\0';
  s->driver_version[sizeof s->driver_version - 1] = '\0';
  /* The simulator also exports its control API; that tells it apart however it was named. */
  gpum__session_library(s, lp, nv->dl, nv->path);
}

static int nvml_open(gpum_device_session_t *s, const gpum_device_open_opts_t *opts) {
  gpum__libpath_t lp;
  int rc = gpum__libpath_resolve(GPUM__LIB_NVML, opts ? opts->nvml_library : NULL, &lp);
  if (rc)
    return rc;
  gpum__nvml_t *nv = calloc(1, sizeof *nv);
  if (!nv)
    return gpum_error(GPUM_ENOMEM, "cannot allocate the NVML backend");
  pthread_mutex_init(&nv->ev_lock, NULL);
  const char *used = NULL;
  rc = gpum__libpath_open(&lp, "NVML", &nv->dl, &used);
  if (rc)
    goto out_unload;
  snprintf(nv->path, sizeof nv->path, "%s", used);
  resolve_all(nv);
  rc = choose_symbols(nv);
  if (rc)
    goto out_unload;
  int rv;
  GPUM__NV_RETRY(s, rv, nv->init());
  if (rv != NVML_SUCCESS) {
    rc = gpum_error(GPUM_EDRIVER, "nvmlInit in %s failed: %s (NVML %d)", nv->path,
                    gpum__nvml_strerror(nv, rv), rv);
    goto out_unload;
  }
  nv->initialised = true;
  rc = enumerate(s, nv);
  if (rc)
    goto out_unload;
  describe(s, nv, &lp);
  s->impl = nv;
  s->count = nv->ndev;
  gpum_log(GPUM_LOG_DEBUG, "device", "nvml loaded library=\"%s\" devices=%u driver=%s", nv->path,
           nv->ndev, s->driver_version);
  return 0;
out_unload:
  unload(nv);
  return rc;
}

static void nvml_close(gpum_device_session_t *s) {
  unload(s->impl);
  s->impl = NULL;
}

int gpum__nvml_gpu_handle(gpum_device_session_t *s, gpum__nvml_t *nv, unsigned i, nvmlDevice_t *h) {
  gpum__nvml_dev_t *d = &nv->dev[i];
  if (d->gpu_handle) {
    *h = d->gpu_handle;
    return 0;
  }
  nvmlDevice_t found = NULL;
  int rv;
  GPUM__NV_DEV(s, nv, i, rv, nv->get_handle(d->gpu, &found));
  if (rv == NVML_SUCCESS && found == NULL)
    return gpum_error(GPUM_EDRIVER, "nvmlDeviceGetHandleByIndex on GPU %u gave no handle", d->gpu);
  if (rv != NVML_SUCCESS) {
    if (d->handle_err != rv)
      gpum_log(GPUM_LOG_INFO, "device", "no handle for device index=%u error=\"%s\"", i,
               gpum__nvml_strerror(nv, rv));
    d->handle_err = rv;
    return gpum__nvml_fail(nv, "nvmlDeviceGetHandleByIndex", i, rv);
  }
  d->handle_err = 0;
  d->gpu_handle = found;
  if (d->mig < 0) /* a whole GPU: its own handle too */
    d->handle = found;
  *h = found;
  return 0;
}

int gpum__nvml_handle(gpum_device_session_t *s, gpum__nvml_t *nv, unsigned i, nvmlDevice_t *h) {
  gpum__nvml_dev_t *d = &nv->dev[i];
  if (d->handle) {
    *h = d->handle;
    return 0;
  }
  nvmlDevice_t gh = NULL, found = NULL;
  int rc = gpum__nvml_gpu_handle(s, nv, i, &gh);
  if (rc)
    return rc;
  if (d->mig < 0) {
    d->handle = gh;
    *h = gh;
    return 0;
  }
  int rv;
  GPUM__NV_DEV(s, nv, i, rv,
               nv->f.nvmlDeviceGetMigDeviceHandleByIndex(gh, (unsigned)d->mig, &found));
  if (rv == NVML_SUCCESS && found == NULL)
    rv = NVML_ERROR_NOT_FOUND;
  if (rv != NVML_SUCCESS) /* NOT_FOUND: the instance was destroyed since the session opened */
    return gpum__nvml_fail(nv, "nvmlDeviceGetMigDeviceHandleByIndex", i, rv);
  d->handle = found;
  *h = found;
  return 0;
}

/* Memory info, v2 preferred. On success fills total/used/free and (v2) reserved. */
static int read_memory(gpum_device_session_t *s, gpum__nvml_t *nv, unsigned i, nvmlDevice_t h,
                       uint64_t *total, uint64_t *used, uint64_t *freeb, uint64_t *reserved,
                       bool *have_reserved) {
  int rv = NVML_ERROR_FUNCTION_NOT_FOUND;
  gpum__nvml_dev_t *d = &nv->dev[i];
  if (nv->f.nvmlDeviceGetMemoryInfo_v2 && !d->mem_v1) {
    nvmlMemory_v2_t m2;
    memset(&m2, 0, sizeof m2);
    m2.version = nvmlMemory_v2;
    GPUM__NV_DEV(s, nv, i, rv, nv->f.nvmlDeviceGetMemoryInfo_v2(h, &m2));
    if (rv == NVML_SUCCESS) {
      *total = m2.total, *used = m2.used, *freeb = m2.free, *reserved = m2.reserved;
      *have_reserved = true;
      return rv;
    }
    if (rv == NVML_ERROR_FUNCTION_NOT_FOUND || rv == NVML_ERROR_ARGUMENT_VERSION_MISMATCH) {
      d->mem_v1 = true;
      gpum_log(GPUM_LOG_DEBUG, "device", "memory info v2 rejected index=%u nvml=%d", i, rv);
    } else if (gpum__nvml_is_fatal(rv) || rv != NVML_ERROR_NOT_SUPPORTED) {
      return rv;
    }
  }
  if (!nv->f.nvmlDeviceGetMemoryInfo)
    return rv;
  nvmlMemory_t m1;
  memset(&m1, 0, sizeof m1);
  GPUM__NV_DEV(s, nv, i, rv, nv->f.nvmlDeviceGetMemoryInfo(h, &m1));
  if (rv == NVML_SUCCESS) {
    *total = m1.total, *used = m1.used, *freeb = m1.free;
    *have_reserved = false;
  }
  return rv;
}

/* Fails the whole read for a fatal result; otherwise the field just stays invalid. */
#define FIELD(call, expr, on_ok)                    \
  do {                                              \
    int rv_;                                        \
    GPUM__NV_DEV(s, nv, index, rv_, expr);          \
    if (rv_ == NVML_SUCCESS) {                      \
      on_ok;                                        \
    } else if (gpum__nvml_is_fatal(rv_)) {          \
      return gpum__nvml_fail(nv, call, index, rv_); \
    }                                               \
  } while (0)

/* A MIG instance's parent and instance ids. The parent's UUID comes from its handle gh. */
static int info_mig(gpum_device_session_t *s, gpum__nvml_t *nv, unsigned index, nvmlDevice_t h,
                    nvmlDevice_t gh, gpum_device_info_t *out) {
  const gpum__nvml_dev_t *d = &nv->dev[index];
  out->parent_index = (int)d->gpu;
  FIELD("nvmlDeviceGetUUID", nv->f.nvmlDeviceGetUUID(gh, out->parent_uuid, sizeof out->parent_uuid),
        out->valid |= GPUM_INFO_MIG);
  out->parent_uuid[sizeof out->parent_uuid - 1] = '\0';
  if (nv->f.nvmlDeviceGetGpuInstanceId)
    FIELD("nvmlDeviceGetGpuInstanceId", nv->f.nvmlDeviceGetGpuInstanceId(h, &out->mig_gi), {});
  if (nv->f.nvmlDeviceGetComputeInstanceId)
    FIELD("nvmlDeviceGetComputeInstanceId", nv->f.nvmlDeviceGetComputeInstanceId(h, &out->mig_ci),
          {});
  return 0;
}

/* h: the device's handle (a MIG instance's own); gh: the whole GPU's (the parent's), which
 * answers what is the GPU's: PCI identity, power limit, temperature thresholds, ECC mode. */
static int info_query(gpum_device_session_t *s, gpum__nvml_t *nv, unsigned index, nvmlDevice_t h,
                      nvmlDevice_t gh, gpum_device_info_t *out) {
  out->parent_index = -1;
  FIELD("nvmlDeviceGetName", nv->f.nvmlDeviceGetName(h, out->name, sizeof out->name),
        out->valid |= GPUM_INFO_NAME);
  FIELD("nvmlDeviceGetUUID", nv->f.nvmlDeviceGetUUID(h, out->uuid, sizeof out->uuid),
        out->valid |= GPUM_INFO_UUID);
  out->name[sizeof out->name - 1] = out->uuid[sizeof out->uuid - 1] = '\0';
  if (nv->dev[index].mig >= 0) {
    int rc = info_mig(s, nv, index, h, gh, out);
    if (rc)
      return rc;
  }
  if (nv->f.nvmlDeviceGetPciInfo_v3) {
    nvmlPciInfo_t pci;
    memset(&pci, 0, sizeof pci);
    FIELD("nvmlDeviceGetPciInfo_v3", nv->f.nvmlDeviceGetPciInfo_v3(gh, &pci), {
      snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%.*s", (int)sizeof pci.busId - 1,
               pci.busId);
      out->valid |= GPUM_INFO_PCI;
    });
  }
  uint64_t total, used, freeb, reserved;
  bool have_reserved;
  int rv = read_memory(s, nv, index, h, &total, &used, &freeb, &reserved, &have_reserved);
  if (rv == NVML_SUCCESS) {
    out->memory_total = total;
    out->valid |= GPUM_INFO_MEMORY_TOTAL;
  } else if (gpum__nvml_is_fatal(rv)) {
    return gpum__nvml_fail(nv, "nvmlDeviceGetMemoryInfo", index, rv);
  }
  if (nv->f.nvmlDeviceGetCudaComputeCapability)
    FIELD("nvmlDeviceGetCudaComputeCapability",
          nv->f.nvmlDeviceGetCudaComputeCapability(h, &out->cc_major, &out->cc_minor),
          out->valid |= GPUM_INFO_COMPUTE_CAP);
  if (nv->f.nvmlDeviceGetEnforcedPowerLimit)
    FIELD("nvmlDeviceGetEnforcedPowerLimit",
          nv->f.nvmlDeviceGetEnforcedPowerLimit(gh, &out->power_limit_mw),
          out->valid |= GPUM_INFO_POWER_LIMIT);
  if (nv->f.nvmlDeviceGetTemperatureThreshold) {
    unsigned t = 0;
    FIELD("nvmlDeviceGetTemperatureThreshold",
          nv->f.nvmlDeviceGetTemperatureThreshold(gh, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &t), {
            out->temp_slowdown_c = (int)t;
            out->valid |= GPUM_INFO_TEMP_SLOWDOWN;
          });
    FIELD("nvmlDeviceGetTemperatureThreshold",
          nv->f.nvmlDeviceGetTemperatureThreshold(gh, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, &t), {
            out->temp_shutdown_c = (int)t;
            out->valid |= GPUM_INFO_TEMP_SHUTDOWN;
          });
  }
  if (nv->f.nvmlDeviceGetEccMode) {
    nvmlEnableState_t cur = 0, pend = 0;
    FIELD("nvmlDeviceGetEccMode", nv->f.nvmlDeviceGetEccMode(gh, &cur, &pend), {
      out->ecc_enabled = cur == NVML_FEATURE_ENABLED;
      out->valid |= GPUM_INFO_ECC_MODE;
    });
  }
  return 0;
}

/* On a failure after a successful earlier read, *out keeps that earlier info (its valid bits
 * say which fields), so a lost device can still be shown by name. */
static int nvml_get_info(gpum_device_session_t *s, unsigned index, gpum_device_info_t *out) {
  gpum__nvml_t *nv = s->impl;
  gpum__nvml_dev_t *d = &nv->dev[index];
  out->vendor = "nvidia";
  out->is_host = false;
  out->parent_index = -1;
  nvmlDevice_t h = NULL, gh = NULL;
  int rc = gpum__nvml_handle(s, nv, index, &h);
  if (rc == 0)
    rc = gpum__nvml_gpu_handle(s, nv, index, &gh);
  if (rc == 0)
    rc = info_query(s, nv, index, h, gh, out);
  return gpum__info_keep(rc, out, &d->info, &d->info_cached, index, "nvidia");
}

static int sample_temperature(gpum_device_session_t *s, gpum__nvml_t *nv, unsigned index,
                              nvmlDevice_t h, gpum_device_sample_t *out) {
  gpum__nvml_dev_t *d = &nv->dev[index];
  if (nv->f.nvmlDeviceGetTemperatureV && !d->temp_legacy) {
    nvmlTemperature_t t;
    memset(&t, 0, sizeof t);
    t.version = nvmlTemperature_v1;
    t.sensorType = NVML_TEMPERATURE_GPU;
    int rv;
    GPUM__NV_DEV(s, nv, index, rv, nv->f.nvmlDeviceGetTemperatureV(h, &t));
    if (rv == NVML_SUCCESS) {
      out->temperature_c = t.temperature;
      out->valid |= 1u << GPUM_METRIC_TEMPERATURE;
      return 0;
    }
    if (gpum__nvml_is_fatal(rv))
      return gpum__nvml_fail(nv, "nvmlDeviceGetTemperatureV", index, rv);
    if (rv != NVML_ERROR_FUNCTION_NOT_FOUND && rv != NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
      return 0;
    d->temp_legacy = true;
  }
  if (nv->f.nvmlDeviceGetTemperature) {
    unsigned t = 0;
    FIELD("nvmlDeviceGetTemperature", nv->f.nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU, &t), {
      out->temperature_c = (int)t;
      out->valid |= 1u << GPUM_METRIC_TEMPERATURE;
    });
  }
  return 0;
}

static int sample_rest(gpum_device_session_t *s, gpum__nvml_t *nv, unsigned index, nvmlDevice_t h,
                       gpum_device_sample_t *out) {
  /* NVML has no utilisation of one MIG instance (that takes DCGM), and the whole GPU's is not
   * the instance's: left invalid. */
  if (nv->f.nvmlDeviceGetUtilizationRates && nv->dev[index].mig < 0) {
    nvmlUtilization_t u = {0, 0};
    FIELD("nvmlDeviceGetUtilizationRates", nv->f.nvmlDeviceGetUtilizationRates(h, &u), {
      out->util_gpu = u.gpu;
      out->util_memory = u.memory;
      out->valid |= 1u << GPUM_METRIC_UTIL_GPU | 1u << GPUM_METRIC_UTIL_MEMORY;
    });
  }
  int rc = sample_temperature(s, nv, index, h, out);
  if (rc)
    return rc;
  if (nv->f.nvmlDeviceGetPowerUsage)
    FIELD("nvmlDeviceGetPowerUsage", nv->f.nvmlDeviceGetPowerUsage(h, &out->power_mw),
          out->valid |= 1u << GPUM_METRIC_POWER);
  if (nv->f.nvmlDeviceGetClockInfo) {
    FIELD("nvmlDeviceGetClockInfo",
          nv->f.nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM, &out->clock_sm_mhz),
          out->valid |= 1u << GPUM_METRIC_CLOCK_SM);
    FIELD("nvmlDeviceGetClockInfo",
          nv->f.nvmlDeviceGetClockInfo(h, NVML_CLOCK_MEM, &out->clock_mem_mhz),
          out->valid |= 1u << GPUM_METRIC_CLOCK_MEM);
  }
  if (nv->f.nvmlDeviceGetTotalEccErrors) {
    unsigned long long c = 0;
    FIELD("nvmlDeviceGetTotalEccErrors",
          nv->f.nvmlDeviceGetTotalEccErrors(h, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC,
                                            &c),
          {
            out->ecc_corrected = c;
            out->valid |= 1u << GPUM_METRIC_ECC_CORRECTED;
          });
    FIELD("nvmlDeviceGetTotalEccErrors",
          nv->f.nvmlDeviceGetTotalEccErrors(h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                            NVML_VOLATILE_ECC, &c),
          {
            out->ecc_uncorrected = c;
            out->valid |= 1u << GPUM_METRIC_ECC_UNCORRECTED;
          });
  }
  return 0;
}

static int nvml_sample(gpum_device_session_t *s, unsigned index, gpum_device_sample_t *out) {
  gpum__nvml_t *nv = s->impl;
  nvmlDevice_t h = NULL;
  int rc = gpum__nvml_handle(s, nv, index, &h);
  if (rc)
    return rc;
  uint64_t total, used, freeb, reserved;
  bool have_reserved = false;
  int rv = read_memory(s, nv, index, h, &total, &used, &freeb, &reserved, &have_reserved);
  if (rv == NVML_SUCCESS) {
    out->memory_total = total, out->memory_used = used, out->memory_free = freeb;
    out->valid |= 1u << GPUM_METRIC_MEMORY_TOTAL | 1u << GPUM_METRIC_MEMORY_USED |
                  1u << GPUM_METRIC_MEMORY_FREE;
    if (have_reserved) {
      out->memory_reserved = reserved;
      out->valid |= 1u << GPUM_METRIC_MEMORY_RESERVED;
    }
  } else if (gpum__nvml_is_fatal(rv)) {
    return gpum__nvml_fail(nv, "nvmlDeviceGetMemoryInfo", index, rv);
  }
  /* A MIG instance's temperature, power, clocks and ECC counts are its GPU's. */
  nvmlDevice_t gh = NULL;
  rc = gpum__nvml_gpu_handle(s, nv, index, &gh);
  if (rc == 0)
    rc = sample_rest(s, nv, index, gh, out);
  if (rc)
    out->valid = 0;
  return rc;
}

/* Page retirement (before Ampere) and row remapping (Ampere on): a device answers one and
 * returns NOT_SUPPORTED for the other, which leaves its fields invalid. */
static int nvml_memory_health(gpum_device_session_t *s, unsigned index, gpum_memory_health_t *out) {
  gpum__nvml_t *nv = s->impl;
  nvmlDevice_t h = NULL;
  int rc = gpum__nvml_gpu_handle(s, nv, index, &h); /* the GPU's memory, also for MIG */
  if (rc)
    return rc;
  if (nv->f.nvmlDeviceGetRetiredPagesPendingStatus) {
    nvmlEnableState_t pending = NVML_FEATURE_DISABLED;
    FIELD("nvmlDeviceGetRetiredPagesPendingStatus",
          nv->f.nvmlDeviceGetRetiredPagesPendingStatus(h, &pending), {
            out->retired_pages_pending = pending == NVML_FEATURE_ENABLED;
            out->valid |= GPUM_MEMHEALTH_RETIRED_PENDING;
          });
  }
  if (nv->f.nvmlDeviceGetRemappedRows) {
    unsigned corr = 0, unc = 0, pending = 0, failed = 0;
    FIELD("nvmlDeviceGetRemappedRows",
          nv->f.nvmlDeviceGetRemappedRows(h, &corr, &unc, &pending, &failed), {
            out->remapped_rows_correctable = corr;
            out->remapped_rows_uncorrectable = unc;
            out->remap_pending = pending != 0;
            out->remap_failure = failed != 0;
            out->valid |= GPUM_MEMHEALTH_REMAPPED_ROWS;
          });
  }
  return 0;
}

const struct gpum__backend gpum__backend_nvml = {
    .name = "nvml",
    .kind = GPUM_BACKEND_NVML,
    .open = nvml_open,
    .close = nvml_close,
    .get_info = nvml_get_info,
    .sample = nvml_sample,
    .memory_health = nvml_memory_health,
    .processes = gpum__nvml_processes,
    .process_util = gpum__nvml_process_util,
    .events_enable = gpum__nvml_events_enable,
    .event_wait = gpum__nvml_event_wait,
};
