/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The "cuda" and "pinned" memory sources of the pool allocator, and what every CUDA source
 * shares (see source_cuda_internal.h): the driver comes from libgpum's CUDA loader (libcuda.so.1,
 * $GPUM_CUDA_LIBRARY, or the simulated driver when GPUM_SIM_NODE is set), each source retains
 * the primary context of its device and enters it around every driver call, because the pool
 * may call a source from any thread; the caller's current context is restored afterwards.
 *
 * "cuda": segments from cuMemAlloc_v2 / cuMemFree_v2 on one device; mem_info is the device's
 * cuMemGetInfo_v2. "pinned": page-locked host memory from cuMemHostAlloc (PORTABLE, so every
 * context may use it) / cuMemFreeHost, through device 0's primary context; its mem_info reports
 * host RAM (MemTotal and MemAvailable of /proc/meminfo), which is what pinned allocations
 * consume, so that limits given as a fraction and OOM messages mean something.
 *
 * Stream ordering for both: event_record takes a CUevent (CU_EVENT_DISABLE_TIMING) from a small
 * cache or creates one and records it on the stream; event_query maps CUDA_ERROR_NOT_READY to
 * GPUM_EAGAIN; event_destroy returns the event to the cache. For "pinned" the streams must belong
 * to device 0's primary context (or be 0, the default stream).
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/pool.h>
#include <gpum/size.h>

#include "device/device_internal.h"
#include "pool/pool_internal.h"
#include "pool/source_cuda_internal.h"
#include "os_internal.h"

/* ---- common part ------------------------------------------------------------------------- */

static int check_device(gpum__cuda_src_t *s, int device) {
  int count = 0;
  int rc = gpum__cuda_check(s->cu, s->cu->cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (rc)
    return rc;
  if (device >= 0 && device < count)
    return 0;
  const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
  char vis[160] = "";
  if (cvd)
    snprintf(vis, sizeof vis, "; CUDA_VISIBLE_DEVICES=\"%s\"", cvd);
  if (count == 0)
    return gpum_error(GPUM_ENODEV,
                      "%s pool source: no CUDA device %d: the CUDA driver (%s) sees no "
                      "device%s",
                      s->kind, device, s->cu->path, vis);
  return gpum_error(GPUM_ENODEV,
                    "%s pool source: no CUDA device %d: the CUDA driver (%s) sees %d "
                    "device%s (0-%d)%s",
                    s->kind, device, s->cu->path, count, count == 1 ? "" : "s", count - 1, vis);
}

int gpum__cuda_src_open(const char *kind, int device, gpum__cuda_src_t **out) {
  *out = NULL;
  gpum__cuda_src_t *s = calloc(1, sizeof *s);
  if (!s)
    return gpum_error(GPUM_ENOMEM, "cannot allocate the %s pool source", kind);
  s->kind = kind;
  s->ordinal = device;
  int rc = gpum__cuda_load(NULL, &s->cu);
  if (rc) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", gpum_last_error());
    rc = gpum_error(rc, "%s pool source: %s", kind, msg);
    goto out_free;
  }
  if ((rc = check_device(s, device)) != 0)
    goto out_unload;
  rc = gpum__cuda_src_check(s, s->cu->cuDeviceGet(&s->dev, device), "cuDeviceGet");
  if (rc)
    goto out_unload;
  rc = gpum__cuda_src_check(s, s->cu->cuDevicePrimaryCtxRetain(&s->ctx, s->dev),
                            "cuDevicePrimaryCtxRetain");
  if (rc)
    goto out_unload;
  if (pthread_mutex_init(&s->mu, NULL) != 0) {
    rc = gpum_error(GPUM_ENOMEM, "cannot create the %s pool source's mutex", kind);
    goto out_release;
  }
  *out = s;
  return 0;
out_release:
  s->cu->cuDevicePrimaryCtxRelease_v2(s->dev);
out_unload:
  gpum__cuda_unload(s->cu);
out_free:
  free(s);
  return rc;
}

void gpum__cuda_src_close(gpum__cuda_src_t *s) {
  if (!s)
    return;
  CUcontext prev = NULL;
  bool entered = gpum__cuda_src_enter(s, &prev) == 0;
  if (s->impl_free)
    s->impl_free(s);
  for (unsigned i = 0; i < s->nevents; i++)
    s->cu->cuEventDestroy_v2(s->events[i]);
  if (entered)
    gpum__cuda_src_leave(s, prev);
  CUresult r = s->cu->cuDevicePrimaryCtxRelease_v2(s->dev);
  if (r != CUDA_SUCCESS)
    gpum_log(GPUM_LOG_WARN, "pool", "%s source: cuDevicePrimaryCtxRelease_v2(device %d): %s",
             s->kind, s->ordinal, gpum__cuda_error_name(s->cu, r));
  pthread_mutex_destroy(&s->mu);
  gpum__cuda_unload(s->cu);
  free(s);
}

int gpum__cuda_src_enter(gpum__cuda_src_t *s, CUcontext *prev) {
  *prev = NULL;
  int rc = gpum__cuda_src_check(s, s->cu->cuCtxGetCurrent(prev), "cuCtxGetCurrent");
  if (rc || *prev == s->ctx)
    return rc;
  return gpum__cuda_src_check(s, s->cu->cuCtxSetCurrent(s->ctx), "cuCtxSetCurrent");
}

void gpum__cuda_src_leave(gpum__cuda_src_t *s, CUcontext prev) {
  if (prev != s->ctx)
    s->cu->cuCtxSetCurrent(prev);
}

static int run(gpum__cuda_src_t *s, bool lock, gpum__cuda_src_fn fn, void *arg) {
  CUcontext prev;
  int rc = gpum__cuda_src_enter(s, &prev);
  if (rc)
    return rc;
  if (lock)
    pthread_mutex_lock(&s->mu);
  rc = fn(s, arg);
  if (lock)
    pthread_mutex_unlock(&s->mu);
  gpum__cuda_src_leave(s, prev);
  return rc;
}

int gpum__cuda_src_run(gpum__cuda_src_t *s, gpum__cuda_src_fn fn, void *arg) {
  return run(s, false, fn, arg);
}

int gpum__cuda_src_run_locked(gpum__cuda_src_t *s, gpum__cuda_src_fn fn, void *arg) {
  return run(s, true, fn, arg);
}

int gpum__cuda_src_check(const gpum__cuda_src_t *s, CUresult r, const char *fmt, ...) {
  if (r == CUDA_SUCCESS)
    return 0;
  char call[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(call, sizeof call, fmt, ap);
  va_end(ap);
  char what[384];
  snprintf(what, sizeof what, "%s on CUDA device %d (%s pool source)", call, s->ordinal, s->kind);
  return gpum__cuda_check(s->cu, r, what);
}

typedef struct {
  uint64_t *free_bytes, *total_bytes;
} mem_info_args_t;

static int mem_info_in(gpum__cuda_src_t *s, void *arg) {
  const mem_info_args_t *a = arg;
  size_t f = 0, t = 0;
  int rc = gpum__cuda_src_check(s, s->cu->cuMemGetInfo_v2(&f, &t), "cuMemGetInfo_v2");
  if (rc == 0) {
    *a->free_bytes = f;
    *a->total_bytes = t;
  }
  return rc;
}

static int src_mem_info(void *ctx, uint64_t *free_bytes, uint64_t *total_bytes) {
  return gpum__cuda_src_run(ctx, mem_info_in, &(mem_info_args_t){free_bytes, total_bytes});
}

typedef struct {
  gpum_stream_t stream;
  void **event;
} event_record_args_t;

static int event_record_in(gpum__cuda_src_t *s, void *arg) {
  const event_record_args_t *a = arg;
  CUevent ev = NULL;
  pthread_mutex_lock(&s->mu);
  if (s->nevents > 0)
    ev = s->events[--s->nevents];
  pthread_mutex_unlock(&s->mu);
  int rc = 0;
  if (!ev)
    rc = gpum__cuda_src_check(s, s->cu->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING),
                              "cuEventCreate");
  if (rc == 0) {
    rc = gpum__cuda_src_check(s, s->cu->cuEventRecord(ev, (CUstream)(uintptr_t)a->stream),
                              "cuEventRecord(stream 0x%llx)", (unsigned long long)a->stream);
    if (rc)
      s->cu->cuEventDestroy_v2(ev);
  }
  if (rc == 0)
    *a->event = ev;
  return rc;
}

static int src_event_record(void *ctx, gpum_stream_t stream, void **event) {
  return gpum__cuda_src_run(ctx, event_record_in, &(event_record_args_t){stream, event});
}

static int event_query_in(gpum__cuda_src_t *s, void *event) {
  CUresult r = s->cu->cuEventQuery(event);
  if (r == CUDA_ERROR_NOT_READY)
    return GPUM_EAGAIN; /* the common answer: no detail message to format */
  return gpum__cuda_src_check(s, r, "cuEventQuery");
}

static int src_event_query(void *ctx, void *event) {
  return gpum__cuda_src_run(ctx, event_query_in, event);
}

static int event_destroy_in(gpum__cuda_src_t *s, void *event) {
  s->cu->cuEventDestroy_v2(event);
  return 0;
}

static void src_event_destroy(void *ctx, void *event) {
  gpum__cuda_src_t *s = ctx;
  pthread_mutex_lock(&s->mu);
  bool cached = s->nevents < GPUM__CUDA_SRC_EVENT_CACHE;
  if (cached)
    s->events[s->nevents++] = event;
  pthread_mutex_unlock(&s->mu);
  if (!cached)
    (void)gpum__cuda_src_run(s, event_destroy_in, event);
}

static int synchronize_in(gpum__cuda_src_t *s, void *arg) {
  (void)arg;
  return gpum__cuda_src_check(s, s->cu->cuCtxSynchronize(), "cuCtxSynchronize");
}

static int src_synchronize(void *ctx) {
  return gpum__cuda_src_run(ctx, synchronize_in, NULL);
}

static void src_destroy(void *ctx) {
  gpum__cuda_src_close(ctx);
}

void gpum__cuda_src_common_ops(gpum_pool_source_ops_t *ops) {
  ops->mem_info = src_mem_info;
  ops->event_record = src_event_record;
  ops->event_query = src_event_query;
  ops->event_destroy = src_event_destroy;
  ops->synchronize = src_synchronize;
  ops->destroy = src_destroy;
}

int gpum__cuda_src_finish(gpum__cuda_src_t *s, const gpum_pool_source_ops_t *ops,
                          gpum_pool_source_t **out) {
  int rc = gpum_pool_source_custom(ops, s, out);
  if (rc) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", gpum_last_error());
    gpum__cuda_src_close(s);
    return gpum_error(rc, "%s", msg);
  }
  gpum_log(GPUM_LOG_DEBUG, "pool", "%s source on CUDA device %d (driver \"%s\")", s->kind,
           s->ordinal, s->cu->path);
  return 0;
}

/* ---- "cuda": cuMemAlloc_v2 --------------------------------------------------------------- */

static int cuda_alloc_in(gpum__cuda_src_t *s, void *arg) {
  const gpum__cuda_src_seg_t *a = arg;
  CUdeviceptr p = 0;
  char sz[GPUM_SIZE_BUFSZ];
  int rc = gpum__cuda_src_check(s, s->cu->cuMemAlloc_v2(&p, a->size), "cuMemAlloc_v2(%s)",
                                gpum_size_format(a->size, sz, sizeof sz));
  if (rc == 0)
    *a->out = p;
  return rc;
}

static int cuda_alloc(void *ctx, size_t size, gpum_devptr_t *addr) {
  return gpum__cuda_src_run(ctx, cuda_alloc_in, &(gpum__cuda_src_seg_t){.size = size, .out = addr});
}

static int cuda_free_in(gpum__cuda_src_t *s, void *arg) {
  const gpum__cuda_src_seg_t *a = arg;
  char sz[GPUM_SIZE_BUFSZ];
  return gpum__cuda_src_check(s, s->cu->cuMemFree_v2(a->addr), "cuMemFree_v2(0x%llx, %s)",
                              (unsigned long long)a->addr,
                              gpum_size_format(a->size, sz, sizeof sz));
}

static int cuda_free(void *ctx, gpum_devptr_t addr, size_t size) {
  return gpum__cuda_src_run(ctx, cuda_free_in, &(gpum__cuda_src_seg_t){.addr = addr, .size = size});
}

int gpum__pool_cuda_ops(int device, gpum_pool_source_ops_t *ops, void **ctx) {
  gpum__cuda_src_t *s;
  int rc = gpum__cuda_src_open("cuda", device, &s);
  if (rc)
    return rc;
  *ops = (gpum_pool_source_ops_t){.name = "cuda", .alloc = cuda_alloc, .free = cuda_free};
  gpum__cuda_src_common_ops(ops);
  *ctx = s;
  return 0;
}

int gpum_pool_source_cuda(int device, gpum_pool_source_t **out) {
  if (!out)
    return gpum_error(GPUM_EINVAL, "gpum_pool_source_cuda: out is NULL");
  *out = NULL;
  gpum_pool_source_ops_t ops;
  void *ctx;
  int rc = gpum__pool_cuda_ops(device, &ops, &ctx);
  return rc ? rc : gpum__cuda_src_finish(ctx, &ops, out);
}

/* ---- "pinned": cuMemHostAlloc ------------------------------------------------------------ */

static int pinned_alloc_in(gpum__cuda_src_t *s, void *arg) {
  const gpum__cuda_src_seg_t *a = arg;
  void *p = NULL;
  char sz[GPUM_SIZE_BUFSZ];
  int rc = gpum__cuda_src_check(s, s->cu->cuMemHostAlloc(&p, a->size, CU_MEMHOSTALLOC_PORTABLE),
                                "cuMemHostAlloc(%s)", gpum_size_format(a->size, sz, sizeof sz));
  if (rc == 0)
    *a->out = (gpum_devptr_t)(uintptr_t)p;
  return rc;
}

static int pinned_alloc(void *ctx, size_t size, gpum_devptr_t *addr) {
  return gpum__cuda_src_run(ctx, pinned_alloc_in,
                            &(gpum__cuda_src_seg_t){.size = size, .out = addr});
}

static int pinned_free_in(gpum__cuda_src_t *s, void *arg) {
  const gpum__cuda_src_seg_t *a = arg;
  char sz[GPUM_SIZE_BUFSZ];
  return gpum__cuda_src_check(s, s->cu->cuMemFreeHost((void *)(uintptr_t)a->addr),
                              "cuMemFreeHost(0x%llx, %s)", (unsigned long long)a->addr,
                              gpum_size_format(a->size, sz, sizeof sz));
}

static int pinned_free(void *ctx, gpum_devptr_t addr, size_t size) {
  return gpum__cuda_src_run(ctx, pinned_free_in,
                            &(gpum__cuda_src_seg_t){.addr = addr, .size = size});
}

/* Host RAM: what page-locked allocations use up. */
static int pinned_mem_info(void *ctx, uint64_t *free_bytes, uint64_t *total_bytes) {
  (void)ctx;
  char buf[8192];
  if (gpum__os_read_file("/proc/meminfo", buf, sizeof buf) <= 0)
    return gpum_error(GPUM_EIO, "pinned pool source: cannot read /proc/meminfo");
  return gpum__parse_meminfo(buf, total_bytes, free_bytes);
}

int gpum__pool_pinned_ops(gpum_pool_source_ops_t *ops, void **ctx) {
  gpum__cuda_src_t *s;
  int rc = gpum__cuda_src_open("pinned", 0, &s);
  if (rc)
    return rc;
  if (!s->cu->cuMemHostAlloc || !s->cu->cuMemFreeHost) {
    rc = gpum_error(GPUM_ENOTSUP, "pinned pool source: the CUDA driver (%s) does not export %s",
                    s->cu->path, s->cu->cuMemHostAlloc ? "cuMemFreeHost" : "cuMemHostAlloc");
    gpum__cuda_src_close(s);
    return rc;
  }
  *ops = (gpum_pool_source_ops_t){.name = "pinned", .alloc = pinned_alloc, .free = pinned_free};
  gpum__cuda_src_common_ops(ops);
  ops->mem_info = pinned_mem_info;
  *ctx = s;
  return 0;
}

int gpum_pool_source_pinned(gpum_pool_source_t **out) {
  if (!out)
    return gpum_error(GPUM_EINVAL, "gpum_pool_source_pinned: out is NULL");
  *out = NULL;
  gpum_pool_source_ops_t ops;
  void *ctx = NULL;
  int rc = gpum__pool_pinned_ops(&ops, &ctx);
  if (rc == 0)
    rc = gpum__cuda_src_finish(ctx, &ops, out);
  if (rc == 0)
    (*out)->host_memory = true; /* page-locked host RAM */
  return rc;
}
