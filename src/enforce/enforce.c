/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libgpum_enforce.so: set-up and interception (docs/enforce.md).
 *
 * At load the shim reads its environment: GPUM_FENCE names the reservation's region (gpum run
 * --enforce creates it), or GPUM_MEM_LIMIT alone makes the process create a region of its own
 * and name it in GPUM_FENCE for its children. Neither: the shim fences nothing. GPUM_ENFORCE=0
 * turns it off.
 *
 * The HIP runtime (libamdhip64.so.5, hooks_hip.c) is reached the first two ways: linked calls,
 * and dlsym on the handle of a dlopen'd runtime (HIP 5.x has no hipGetProcAddress).
 *
 * The program reaches the driver three ways, and each lands on the wrappers: a call to a linked
 * symbol (the shim is preloaded, so its definitions come first), dlsym (the shim's dlsym gives
 * the wrapper when the real lookup found a real entry point the shim wraps), and
 * cuGetProcAddress (whose wrapper does the same with what the driver returned, cuGetProcAddress
 * itself included). Matching on the address the driver returned, rather than on names and
 * versions, keeps every versioned name (_v2, _v3, _ptsz) on its own wrapper, and passes
 * everything else through untouched.
 *
 * The real entry points are loaded once, from the driver the program uses: the handle its dlsym
 * was given, else what follows the shim in the process, else the library libgpum would load
 * (GPUM_CUDA_LIBRARY, the simulated driver under GPUM_SIM_NODE, libcuda.so.1).
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gpum/size.h>

#include "os_internal.h"
#include "device/device_internal.h"
#include "enforce_internal.h"

struct gpum__enf_real gpum__enf_real;
struct gpum__enf_state gpum__enf;

/* The newest CUDA driver major version whose ABI the shim knows. */
#define KNOWN_CUDA_MAJOR 13

typedef void *(*dlsym_fn)(void *, const char *);
static _Atomic(dlsym_fn) real_dlsym_p;

static dlsym_fn real_dlsym(void) {
  dlsym_fn f = atomic_load_explicit(&real_dlsym_p, memory_order_acquire);
  if (!f) {
    /* glibc 2.34 moved dlsym into libc (GLIBC_2.34); older ones have GLIBC_2.2.5 only. */
    void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p)
      p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    memcpy(&f, &p, sizeof f);
    atomic_store_explicit(&real_dlsym_p, f, memory_order_release);
  }
  return f;
}

void gpum__enf_log(const char *fmt, ...) {
  char buf[512];
  int n = snprintf(buf, sizeof buf, "gpum-enforce[%d]: ", (int)getpid());
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = (size_t)n + (m < 0                                    ? 0
                            : (size_t)m < sizeof buf - (size_t)n - 1 ? (size_t)m
                                                                     : sizeof buf - (size_t)n - 2);
  buf[len++] = '\n';
  /* One write: lines of concurrent processes do not interleave. */
  ssize_t w = write(STDERR_FILENO, buf, len);
  (void)w;
}

/* --- Set-up from the environment ------------------------------------------------------------ */

static void on_fork_child(void) {
  gpum__enf_map_clear();
}

/* What the environment asked for, read at load; the region is opened (or created) at the first
 * call that needs it, so that processes that never touch CUDA (a shell, ls) leave nothing. */
static struct {
  bool off;       /* GPUM_ENFORCE=0, or nothing to fence */
  bool given;     /* GPUM_FENCE came from the environment: the region must exist */
  uint64_t limit; /* GPUM_MEM_LIMIT, for a region of the job's own */
  pthread_mutex_t mu;
  _Atomic int state; /* 0 not yet, 1 open, -1 given up */
} want = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void fence_from_env(void) {
  const char *off = getenv("GPUM_ENFORCE");
  if (off && (!strcmp(off, "0") || !strcmp(off, "off") || !strcmp(off, "false"))) {
    want.off = true;
    return;
  }
  const char *rid = getenv("GPUM_RESERVATION_ID");
  if (rid && *rid) /* "r-12", as gpumd names it */
    gpum__enf.reservation = strtoull(strrchr(rid, '-') ? strrchr(rid, '-') + 1 : rid, NULL, 10);
  const char *max = getenv("GPUM_MEM_MAX");
  if (max && *max && gpum_size_parse(max, &gpum__enf.max_limit) != 0) {
    gpum__enf_log("GPUM_MEM_MAX '%.40s' is not a size: the reservation will not grow", max);
    gpum__enf.max_limit = 0;
  }
  const char *lim = getenv("GPUM_MEM_LIMIT");
  if (lim && *lim && (gpum_size_parse(lim, &want.limit) != 0 || want.limit == 0)) {
    gpum__enf_log("GPUM_MEM_LIMIT '%.40s' is not a size: not fencing to it", lim);
    want.limit = 0;
  }
  const char *name = getenv(GPUM_FENCE_ENV);
  if (name && *name && strlen(name) < sizeof gpum__enf.fence_name) {
    snprintf(gpum__enf.fence_name, sizeof gpum__enf.fence_name, "%s", name);
    want.given = true;
    return;
  }
  if (!want.limit) {
    want.off = true;
    return;
  }
  /* A region of the job's own, named now so that children (fork, exec) join it; the name
   * cannot be guessed, so no one can make it first. */
  if (gpum_fence_own_name(gpum__enf.fence_name, sizeof gpum__enf.fence_name) != 0) {
    gpum__enf_log("cannot name a fence (%s): not fencing", gpum_last_error());
    want.off = true;
    return;
  }
  setenv(GPUM_FENCE_ENV, gpum__enf.fence_name, 1);
}

/* Opens the named region, or creates it from GPUM_MEM_LIMIT (the first process of the job to
 * need it does; the others open it, waiting a moment for its creator to fill it in). */
static gpum_fence *fence_open(void) {
  gpum_fence *f = NULL;
  for (int tries = 0; tries < 2000; tries++) {
    int rc = gpum_fence_open(gpum__enf.fence_name, true, &f);
    if (rc == 0)
      return f;
    if (rc == GPUM_ENOENT && want.limit) {
      /* Regions of earlier jobs killed before they could remove theirs go first. */
      if (tries == 0)
        (void)gpum_fence_sweep_own();
      gpum_fence_opts_t o = {.limit = want.limit,
                             .max_limit =
                                 gpum__enf.max_limit > want.limit ? gpum__enf.max_limit : 0,
                             .reservation = gpum__enf.reservation};
      rc = gpum_fence_create(gpum__enf.fence_name, &o, &f);
      if (rc == 0) {
        gpum__enf.owns_fence = true;
        return f;
      }
      if (rc == GPUM_EEXIST)
        continue; /* another process of the job made it first: open it */
    }
    if (rc != GPUM_EPROTO) {
      gpum__enf_log("cannot open the fence '%.64s' (%s): not fencing", gpum__enf.fence_name,
                    gpum_strerror(rc));
      return NULL;
    }
    /* Being created by another process of the job: its size or magic is not there yet. */
    sched_yield();
  }
  gpum__enf_log("the fence '%.64s' was never filled in: not fencing", gpum__enf.fence_name);
  return NULL;
}

gpum_fence *gpum__enf_fence(void) {
  int s = atomic_load_explicit(&want.state, memory_order_acquire);
  if (s == 1)
    return gpum__enf.fence;
  if (s == -1 || want.off)
    return NULL;
  pthread_mutex_lock(&want.mu);
  if (atomic_load(&want.state) == 0) {
    gpum__enf.fence = fence_open();
    if (gpum__enf.fence && gpum_fence_reservation(gpum__enf.fence))
      gpum__enf.reservation = gpum_fence_reservation(gpum__enf.fence);
    atomic_store_explicit(&want.state, gpum__enf.fence ? 1 : -1, memory_order_release);
  }
  pthread_mutex_unlock(&want.mu);
  return gpum__enf.fence;
}

static pid_t creator;

__attribute__((constructor)) static void enforce_init(void) {
  creator = getpid();
  pthread_atfork(NULL, NULL, on_fork_child);
  fence_from_env();
}

/* The process that made the job's region removes its name at exit unless another process still
 * holds memory in it (a child that still runs keeps its mapping either way). */
__attribute__((destructor)) static void enforce_fini(void) {
  if (!gpum__enf.owns_fence || getpid() != creator || !gpum__enf.fence)
    return;
  gpum_fence_reclaim(gpum__enf.fence);
  for (unsigned d = 0; d < GPUM_FENCE_MAX_DEVICES; d++) {
    gpum_fence_usage_t u;
    if (gpum_fence_usage(gpum__enf.fence, d, &u) == 0 && u.used > 0 && u.procs > 1)
      return;
  }
  gpum_fence_unlink(gpum__enf.fence_name);
}

/* --- The real entry points ------------------------------------------------------------------ */

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int cuda_loaded, nvml_loaded, hip_loaded; /* 0 not yet, 1 loaded, -1 none */

#ifndef GPUM_ENFORCE_NO_DLSYM
static bool wrapped_name(const char *s) {
#define GPUM__ENF_IS(name) !strcmp(s, #name) ||
  return GPUM_ENF_CUDA_WRAPPED(GPUM__ENF_IS) GPUM_ENF_NVML_WRAPPED(GPUM__ENF_IS)
      GPUM_ENF_HIP_WRAPPED(GPUM__ENF_IS) false;
#undef GPUM__ENF_IS
}
#endif

static bool handle_is_real(void *h) {
  return h && h != RTLD_DEFAULT && h != RTLD_NEXT;
}

/* Fills the table from h (RTLD_NEXT: what follows the shim). */
static void load_cuda_from(void *h) {
  dlsym_fn ds = real_dlsym();
#define GPUM__ENF_LOAD(name)                                      \
  {                                                               \
    void *p = ds(h, #name);                                       \
    memcpy(&gpum__enf_real.name, &p, sizeof gpum__enf_real.name); \
  }
  GPUM_ENF_CUDA_WRAPPED(GPUM__ENF_LOAD)
  GPUM_ENF_CUDA_USED(GPUM__ENF_LOAD)
}

static void load_nvml_from(void *h) {
  dlsym_fn ds = real_dlsym();
  GPUM_ENF_NVML_WRAPPED(GPUM__ENF_LOAD)
  GPUM_ENF_NVML_USED(GPUM__ENF_LOAD)
}

static void load_hip_from(void *h) {
  dlsym_fn ds = real_dlsym();
  GPUM_ENF_HIP_WRAPPED(GPUM__ENF_LOAD)
  GPUM_ENF_HIP_USED(GPUM__ENF_LOAD)
#undef GPUM__ENF_LOAD
}

/* The driver to load from: handle when it has probe, else the process after the shim, else
 * the library libgpum's loader would open for kind. NULL when there is none. */
static void *driver_handle(void *handle, const char *probe, gpum__lib_kind_t kind) {
  dlsym_fn ds = real_dlsym();
  if (handle_is_real(handle) && ds(handle, probe))
    return handle;
  if (ds(RTLD_NEXT, probe))
    return RTLD_NEXT;
  gpum__libpath_t lp;
  void *dl = NULL;
  const char *used = NULL;
  if (gpum__libpath_resolve(kind, NULL, &lp) != 0 ||
      gpum__libpath_open(&lp, kind == GPUM__LIB_CUDA ? "CUDA driver" : "NVML", &dl, &used) != 0)
    return NULL;
  return dl;
}

bool gpum__enf_cuda_ready(void *handle) {
  int s = atomic_load_explicit(&cuda_loaded, memory_order_acquire);
  if (s == 1)
    return true;
  if (s == -1 && !handle_is_real(handle))
    return false;
  pthread_mutex_lock(&load_mu);
  if (atomic_load(&cuda_loaded) != 1) {
    void *h = driver_handle(handle, "cuInit", GPUM__LIB_CUDA);
    if (h) {
      load_cuda_from(h);
      int v = 0;
      if (gpum__enf_real.cuDriverGetVersion && gpum__enf_real.cuDriverGetVersion(&v) == 0 &&
          v / 1000 > KNOWN_CUDA_MAJOR && gpum__enf_fence()) {
        gpum__enf_log("the CUDA driver is version %d.%d, newer than the shim knows (%d.x): "
                      "not fencing",
                      v / 1000, v % 1000 / 10, KNOWN_CUDA_MAJOR);
        gpum__enf.passthrough = true;
      }
    }
    atomic_store_explicit(&cuda_loaded, h ? 1 : -1, memory_order_release);
  }
  pthread_mutex_unlock(&load_mu);
  return atomic_load(&cuda_loaded) == 1;
}

bool gpum__enf_nvml_ready(void *handle) {
  int s = atomic_load_explicit(&nvml_loaded, memory_order_acquire);
  if (s == 1)
    return true;
  if (s == -1 && !handle_is_real(handle))
    return false;
  pthread_mutex_lock(&load_mu);
  if (atomic_load(&nvml_loaded) != 1) {
    void *h = driver_handle(handle, "nvmlInit_v2", GPUM__LIB_NVML);
    if (h)
      load_nvml_from(h);
    atomic_store_explicit(&nvml_loaded, h ? 1 : -1, memory_order_release);
  }
  pthread_mutex_unlock(&load_mu);
  return atomic_load(&nvml_loaded) == 1;
}

bool gpum__enf_hip_ready(void *handle) {
  int s = atomic_load_explicit(&hip_loaded, memory_order_acquire);
  if (s == 1)
    return true;
  if (s == -1 && !handle_is_real(handle))
    return false;
  pthread_mutex_lock(&load_mu);
  if (atomic_load(&hip_loaded) != 1) {
    dlsym_fn ds = real_dlsym();
    /* No loader of libgpum's to fall back on: a program that reaches a HIP wrapper has loaded
     * the runtime itself, linked (RTLD_NEXT) or with dlopen (its handle). */
    void *h = handle_is_real(handle) && ds(handle, "hipMalloc") ? handle
              : ds(RTLD_NEXT, "hipMalloc")                      ? RTLD_NEXT
                                                                : NULL;
    if (h)
      load_hip_from(h);
    atomic_store_explicit(&hip_loaded, h ? 1 : -1, memory_order_release);
  }
  pthread_mutex_unlock(&load_mu);
  return atomic_load(&hip_loaded) == 1;
}

void *gpum__enf_wrapper_for(const void *fn) {
  if (!fn || gpum__enf.passthrough)
    return NULL;
#define GPUM__ENF_MATCH(name)                         \
  {                                                   \
    void *real, *wrap;                                \
    gpum_##name##_fn w = name;                        \
    memcpy(&real, &gpum__enf_real.name, sizeof real); \
    memcpy(&wrap, &w, sizeof wrap);                   \
    if (real && real == fn)                           \
      return wrap;                                    \
  }
  GPUM_ENF_CUDA_WRAPPED(GPUM__ENF_MATCH)
  GPUM_ENF_NVML_WRAPPED(GPUM__ENF_MATCH)
  GPUM_ENF_HIP_WRAPPED(GPUM__ENF_MATCH)
#undef GPUM__ENF_MATCH
  return NULL;
}

#ifndef GPUM_ENFORCE_NO_DLSYM
/* --- dlsym ---------------------------------------------------------------------------------- */

struct next_search {
  uintptr_t caller; /* an address in the calling object */
  const char *symbol;
  bool past_caller;
  void *found;
};

static bool object_holds(const struct dl_phdr_info *info, uintptr_t addr) {
  for (unsigned i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && addr >= lo && addr - lo < ph->p_memsz)
      return true;
  }
  return false;
}

static int next_cb(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  struct next_search *s = data;
  if (!s->past_caller) {
    s->past_caller = object_holds(info, s->caller);
    return 0;
  }
  if (!info->dlpi_name || !*info->dlpi_name)
    return 0;
  void *h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
  if (!h)
    return 0;
  s->found = real_dlsym()(h, s->symbol);
  dlclose(h);
  return s->found != NULL;
}

/* dlsym(RTLD_NEXT, symbol) as the caller at ret would have seen it: the real dlsym takes "next"
 * relative to the object that calls it, which is now the shim. The objects after the caller's,
 * in load order. */
static void *next_after(const void *ret, const char *symbol) {
  struct next_search s = {.caller = (uintptr_t)ret, .symbol = symbol};
  dl_iterate_phdr(next_cb, &s);
  return s.found;
}

GPUM_ENFORCE_EXPORT void *dlsym(void *handle, const char *symbol) {
  dlsym_fn ds = real_dlsym();
  if (!ds)
    return NULL;
  void *r =
      handle == RTLD_NEXT ? next_after(__builtin_return_address(0), symbol) : ds(handle, symbol);
  if (!r || gpum__enf.passthrough || !wrapped_name(symbol))
    return r;
  bool ready = symbol[0] == 'c'   ? gpum__enf_cuda_ready(handle)
               : symbol[0] == 'h' ? gpum__enf_hip_ready(handle)
                                  : gpum__enf_nvml_ready(handle);
  void *w = ready ? gpum__enf_wrapper_for(r) : NULL;
  return w ? w : r;
}

#endif /* !GPUM_ENFORCE_NO_DLSYM */

/* --- cuGetProcAddress ----------------------------------------------------------------------- */

static void swap_in_wrapper(void **pfn) {
  void *w = gpum__enf_wrapper_for(*pfn);
  if (w)
    *pfn = w;
}

GPUM_ENFORCE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                                 cuuint64_t flags,
                                                 CUdriverProcAddressQueryResult *symbolStatus) {
  if (!gpum__enf_cuda_ready(NULL) || !gpum__enf_real.cuGetProcAddress_v2)
    return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = gpum__enf_real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (r == CUDA_SUCCESS && pfn && *pfn)
    swap_in_wrapper(pfn);
  return r;
}

GPUM_ENFORCE_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                              cuuint64_t flags) {
  if (!gpum__enf_cuda_ready(NULL) || !gpum__enf_real.cuGetProcAddress)
    return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = gpum__enf_real.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
  if (r == CUDA_SUCCESS && pfn && *pfn)
    swap_in_wrapper(pfn);
  return r;
}
