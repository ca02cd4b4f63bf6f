/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rest of the simulated CUDA driver: streams and events (execution is synchronous, so work
 * is always complete and events complete when recorded, but handles are validated as the real
 * driver does), stream-ordered allocation, the driver version, error names and strings, and
 * cuGetProcAddress_v2, which hands out the simulator's own entry points.
 *
 * Test aid: gpum_sim_debug_stream_hold() makes a stream busy, so that events recorded on it stay
 * pending (cuEventQuery: CUDA_ERROR_NOT_READY) and synchronising with it blocks, until the hold is
 * released. Tests of stream-ordered code (the pool's cross-stream reuse) use it to control when
 * work "completes", deterministically.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>

#include "sim_internal.h"

#define STREAM_MAGIC 0x7374726du
#define EVENT_MAGIC 0x6576656eu

struct CUstream_st {
  uint32_t magic;
  bool held; /* gpum_sim_debug_stream_hold: work on it does not complete */
  struct CUstream_st *next;
};

struct CUevent_st {
  uint32_t magic;
  unsigned flags;
  bool recorded;
  bool pending;           /* recorded on a held stream that has not been released since */
  struct CUstream_st *on; /* the held stream it was recorded on (only while pending) */
  uint64_t when_ns;
  struct CUevent_st *next;
};

static pthread_mutex_t obj_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t obj_cond = PTHREAD_COND_INITIALIZER; /* a hold was released */
static struct CUstream_st *streams;
static struct CUevent_st *events;
/* The default stream (handle NULL), for holds. */
static struct CUstream_st default_stream = {.magic = STREAM_MAGIC};

void gpum__sim_misc_atfork(gpum__sim_fork_phase_t ph) {
  gpum__sim_fork_mutex(&obj_mu, ph);
  /* Threads of the parent that waited on it are not in the child. */
  if (ph == GPUM__SIM_FORK_CHILD)
    pthread_cond_init(&obj_cond, NULL);
}

bool gpum__sim_cu_stream_ok(CUstream h) {
  if (!h)
    return true;
  pthread_mutex_lock(&obj_mu);
  struct CUstream_st *s = streams;
  while (s && s != h)
    s = s->next;
  pthread_mutex_unlock(&obj_mu);
  return s != NULL;
}

/* The stream state behind a handle, NULL for an unknown one (obj_mu held). */
static struct CUstream_st *stream_find(CUstream h) {
  if (!h)
    return &default_stream;
  struct CUstream_st *s = streams;
  while (s && s != h)
    s = s->next;
  return s;
}

/* Completes the work held on s: its pending events and its waiters (obj_mu held). */
static void stream_release(struct CUstream_st *s) {
  s->held = false;
  for (struct CUevent_st *e = events; e; e = e->next) {
    if (e->pending && e->on == s) {
      e->pending = false;
      e->on = NULL;
    }
  }
  pthread_cond_broadcast(&obj_cond);
}

static bool any_held(void) {
  bool held = default_stream.held;
  for (struct CUstream_st *s = streams; s && !held; s = s->next)
    held = s->held;
  return held;
}

int gpum_sim_debug_stream_hold(void *stream, int hold) {
  pthread_mutex_lock(&obj_mu);
  struct CUstream_st *s = stream_find(stream);
  if (s && hold)
    s->held = true;
  else if (s)
    stream_release(s);
  pthread_mutex_unlock(&obj_mu);
  if (!s)
    return gpum__sim_err(GPUM_EINVAL,
                         "gpum_sim_debug_stream_hold: %p is not a stream of this "
                         "process",
                         stream);
  return 0;
}

void gpum__sim_cu_streams_wait_idle(void) {
  pthread_mutex_lock(&obj_mu);
  while (any_held())
    pthread_cond_wait(&obj_cond, &obj_mu);
  pthread_mutex_unlock(&obj_mu);
}

/* obj_mu held. */
static bool event_known(CUevent h) {
  struct CUevent_st *e = events;
  while (e && e != h)
    e = e->next;
  return e != NULL;
}

static bool event_ok(CUevent h) {
  pthread_mutex_lock(&obj_mu);
  bool ok = event_known(h);
  pthread_mutex_unlock(&obj_mu);
  return ok;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags) {
  GPUM__SIM_CU_ENTRY(phStream && Flags <= CU_STREAM_NON_BLOCKING, GPUM__SIM_CU_CTX);
  struct CUstream_st *s = calloc(1, sizeof *s);
  if (!s)
    return CUDA_ERROR_OUT_OF_MEMORY;
  s->magic = STREAM_MAGIC;
  pthread_mutex_lock(&obj_mu);
  s->next = streams;
  streams = s;
  pthread_mutex_unlock(&obj_mu);
  *phStream = s;
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream hStream) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_INIT);
  pthread_mutex_lock(&obj_mu);
  struct CUstream_st **pp = &streams;
  while (*pp && *pp != hStream)
    pp = &(*pp)->next;
  struct CUstream_st *s = *pp;
  if (s) {
    *pp = s->next;
    stream_release(s); /* as in CUDA, its work still completes */
  }
  pthread_mutex_unlock(&obj_mu);
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  free(s);
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream hStream) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_CTX);
  pthread_mutex_lock(&obj_mu);
  struct CUstream_st *s = stream_find(hStream);
  while (s && s->held) {
    pthread_cond_wait(&obj_cond, &obj_mu);
    s = stream_find(hStream);
  }
  pthread_mutex_unlock(&obj_mu);
  return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_CTX);
  if (Flags > 1)
    return CUDA_ERROR_INVALID_VALUE;
  if (!gpum__sim_cu_stream_ok(hStream) || !event_ok(hEvent))
    return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags) {
  /* Flags: BLOCKING_SYNC | DISABLE_TIMING | INTERPROCESS */
  GPUM__SIM_CU_ENTRY(phEvent && !(Flags & ~7u), GPUM__SIM_CU_CTX);
  struct CUevent_st *e = calloc(1, sizeof *e);
  if (!e)
    return CUDA_ERROR_OUT_OF_MEMORY;
  e->magic = EVENT_MAGIC;
  e->flags = Flags;
  pthread_mutex_lock(&obj_mu);
  e->next = events;
  events = e;
  pthread_mutex_unlock(&obj_mu);
  *phEvent = e;
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_CTX);
  if (!event_ok(hEvent) || !gpum__sim_cu_stream_ok(hStream))
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&obj_mu);
  struct CUstream_st *s = stream_find(hStream);
  hEvent->recorded = true;
  hEvent->when_ns = gpum__sim_now_ns();
  hEvent->pending = s && s->held;
  hEvent->on = hEvent->pending ? s : NULL;
  pthread_mutex_unlock(&obj_mu);
  return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent hEvent) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_CTX);
  if (!event_ok(hEvent))
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&obj_mu);
  bool pending = hEvent->pending;
  pthread_mutex_unlock(&obj_mu);
  return pending ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS; /* unheld work is always complete */
}

CUresult cuEventSynchronize(CUevent hEvent) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_CTX);
  if (!event_ok(hEvent))
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&obj_mu);
  while (event_known(hEvent) && hEvent->pending)
    pthread_cond_wait(&obj_cond, &obj_mu);
  pthread_mutex_unlock(&obj_mu);
  return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_CTX);
  if (!pMilliseconds)
    return CUDA_ERROR_INVALID_VALUE;
  if (!event_ok(hStart) || !event_ok(hEnd))
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&obj_mu);
  bool ok = hStart->recorded && hEnd->recorded &&
            !((hStart->flags | hEnd->flags) & CU_EVENT_DISABLE_TIMING);
  if (ok)
    *pMilliseconds = (float)(((double)hEnd->when_ns - (double)hStart->when_ns) / 1e6);
  pthread_mutex_unlock(&obj_mu);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuEventDestroy_v2(CUevent hEvent) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_INIT);
  pthread_mutex_lock(&obj_mu);
  struct CUevent_st **pp = &events;
  while (*pp && *pp != hEvent)
    pp = &(*pp)->next;
  struct CUevent_st *e = *pp;
  if (e)
    *pp = e->next;
  pthread_mutex_unlock(&obj_mu);
  if (!e)
    return CUDA_ERROR_INVALID_HANDLE;
  free(e);
  return CUDA_SUCCESS;
}

/* From the current device's pool, its default pool (cuda_pool.c). */
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  GPUM__SIM_CU_FORK_GATE();
  if (!gpum__sim_cu_stream_ok(hStream))
    return CUDA_ERROR_INVALID_HANDLE;
  CUdevice dev;
  CUmemoryPool pool;
  CUresult r = cuCtxGetDevice(&dev);
  if (r == CUDA_SUCCESS)
    r = cuDeviceGetDefaultMemPool(&pool, dev);
  return r == CUDA_SUCCESS ? gpum__sim_cu_alloc(dptr, bytesize, pool) : r;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  GPUM__SIM_CU_FORK_GATE();
  if (!gpum__sim_cu_stream_ok(hStream))
    return CUDA_ERROR_INVALID_HANDLE;
  return cuMemFree_v2(dptr);
}

/* The per-thread-default-stream variants: the simulator's streams do not order work, so they are
 * the same calls. */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  GPUM__SIM_CU_FORK_GATE();
  return cuMemAllocAsync(dptr, bytesize, hStream);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  GPUM__SIM_CU_FORK_GATE();
  return cuMemFreeAsync(dptr, hStream);
}

CUresult cuDriverGetVersion(int *driverVersion) {
  if (!driverVersion)
    return CUDA_ERROR_INVALID_VALUE;
  /* Works before cuInit, as in CUDA; without a node, the version the spec defaults to. */
  int err = 0;
  struct gpum__sim_node *n = gpum__sim_attach(&err);
  *driverVersion = n ? n->spec.cuda_version : 12040;
  return CUDA_SUCCESS;
}

static const struct {
  CUresult code;
  const char *name, *text;
} cu_errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_ECC_UNCORRECTABLE, "CUDA_ERROR_ECC_UNCORRECTABLE",
     "uncorrectable ECC error encountered"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE",
     "the operation cannot be performed in the present state"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {GPUM__SIM_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static CUresult error_lookup(CUresult error, const char **pStr, bool name) {
  if (!pStr)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof cu_errors / sizeof cu_errors[0]; i++) {
    if (cu_errors[i].code == error) {
      *pStr = name ? cu_errors[i].name : cu_errors[i].text;
      return CUDA_SUCCESS;
    }
  }
  *pStr = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char **pStr) {
  return error_lookup(error, pStr, true);
}

CUresult cuGetErrorString(CUresult error, const char **pStr) {
  return error_lookup(error, pStr, false);
}

static const struct {
  const char *name;
  void (*fn)(void); /* cast back by the caller to the function's real type */
} procs[] = {
#define GPUM__SIM_PROC(name, params) {#name, (void (*)(void)) & name},
#define GPUM__SIM_PROC_OTHER(name, pfn, params) GPUM__SIM_PROC(name, params)
    GPUM_CUDA_FUNCS(GPUM__SIM_PROC) GPUM_CUDA_FUNCS_OTHER(GPUM__SIM_PROC_OTHER)
#undef GPUM__SIM_PROC_OTHER
#undef GPUM__SIM_PROC
};

/* Length of name without a trailing "_v<digits>" suffix. */
static size_t base_len(const char *name) {
  size_t len = strlen(name), i = len;
  while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
    i--;
  if (i < len && i >= 2 && name[i - 1] == 'v' && name[i - 2] == '_')
    return i - 2;
  return len;
}

/* The entry point named exactly, else by its base name (CUDA asks without the _vN suffix). */
static void (*proc_find(const char *symbol))(void) {
  const size_t n = sizeof procs / sizeof procs[0];
  for (size_t i = 0; i < n; i++)
    if (!strcmp(procs[i].name, symbol))
      return procs[i].fn;
  for (size_t i = 0; i < n; i++) {
    size_t bl = base_len(procs[i].name);
    if (bl == strlen(symbol) && !strncmp(procs[i].name, symbol, bl))
      return procs[i].fn;
  }
  return NULL;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus) {
  if (!symbol || !pfn || cudaVersion <= 0 || flags > 2)
    return CUDA_ERROR_INVALID_VALUE;
  void (*found)(void) = NULL;
  /* Per-thread default stream: the _ptsz variant where the driver has one. */
  if (flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM && strlen(symbol) < 100) {
    char ptsz[112];
    snprintf(ptsz, sizeof ptsz, "%s_ptsz", symbol);
    found = proc_find(ptsz);
  }
  if (!found)
    found = proc_find(symbol);
  /* POSIX (dlsym) guarantees a function pointer fits a void *; ISO C has no cast for it. */
  memcpy(pfn, &found, sizeof found);
  if (symbolStatus)
    *symbolStatus = found ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return found ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* CUDA 11.3's form, without the status (cudart of 11.x asks for it). */
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
