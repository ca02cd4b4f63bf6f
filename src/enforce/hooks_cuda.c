/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The wrapped CUDA driver calls (docs/enforce.md). An allocation is charged to the fence before
 * the driver is asked, so that two threads or two processes cannot both pass the check with
 * bytes that fit only once; a failed driver call gives the charge back. The charge is the size
 * as the driver rounds it: the device's allocation granularity (2 MiB on current GPUs) for
 * sizes of at least one granule, 512 bytes below that. What would pass the limit fails with
 * CUDA_ERROR_OUT_OF_MEMORY, the driver's own code for memory that is short, after one try to
 * grow an elastic reservation. Frees give back what the allocation was charged.
 *
 * The program is told its reservation: cuMemGetInfo_v2 and cuDeviceTotalMem_v2 give the limit
 * as the device's total and free = limit - what the job holds (never more than the device has).
 *
 * What the driver's checkpoint cannot take is marked in the fence for gpumd when the call
 * succeeds: managed memory (cuMemAllocManaged), memory shared with another process (cuIpc*,
 * the shareable handles of VMM allocations and of pools). Those calls pass through unchanged.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <gpum/clock.h>
#include <gpum/size.h>

#include "enforce_internal.h"

#define SMALL_ROUND 512u
#define DEFAULT_GRAN (2u << 20)

enum { KIND_PTR = 0, KIND_HANDLE = 1 };

static _Atomic uint64_t gran[GPUM_FENCE_MAX_DEVICES];

bool gpum__enf_fenced(void) {
  return !gpum__enf.passthrough && gpum__enf_fence();
}

static uint64_t granularity(unsigned dev) {
  uint64_t g = atomic_load_explicit(&gran[dev], memory_order_relaxed);
  if (g)
    return g;
  size_t q = 0;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = (int)dev;
  if (!gpum__enf_real.cuMemGetAllocationGranularity ||
      gpum__enf_real.cuMemGetAllocationGranularity(&q, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
          CUDA_SUCCESS ||
      q == 0 || (q & (q - 1)))
    q = DEFAULT_GRAN;
  atomic_store_explicit(&gran[dev], q, memory_order_relaxed);
  return q;
}

static uint64_t round_to(uint64_t n, uint64_t m) {
  return n > UINT64_MAX - (m - 1) ? UINT64_MAX : (n + m - 1) / m * m;
}

static uint64_t charged_size(unsigned dev, uint64_t bytes) {
  uint64_t g = granularity(dev);
  return bytes >= g ? round_to(bytes, g) : round_to(bytes, SMALL_ROUND);
}

/* The current context's device, or -1 (no context: the driver will say so itself). */
static int current_dev(void) {
  CUdevice d = -1;
  if (!gpum__enf_real.cuCtxGetDevice || gpum__enf_real.cuCtxGetDevice(&d) != CUDA_SUCCESS)
    return -1;
  return d;
}

void gpum__enf_tell_limit(int dev, size_t *free, size_t *total) {
  uint64_t limit, used;
  if (dev < 0 || !gpum__enf_view((unsigned)dev, &limit, &used))
    return;
  if (total && limit < *total)
    *total = limit;
  uint64_t left = limit > used ? limit - used : 0;
  if (free && left < *free)
    *free = left;
}

bool gpum__enf_view(unsigned dev, uint64_t *limit, uint64_t *used) {
  if (!gpum__enf_fenced() || dev >= GPUM_FENCE_MAX_DEVICES)
    return false;
  gpum_fence_usage_t u;
  if (gpum_fence_usage(gpum__enf.fence, dev, &u) != 0)
    return false;
  *limit = u.limit;
  *used = u.used;
  return true;
}

static _Atomic uint64_t last_oom_ms;
static _Atomic unsigned quiet_ooms;

/* One line per second at most: reservation, device, limit, used, asked, the code returned. */
static void log_oom(unsigned dev, uint64_t used, uint64_t asked, const char *code) {
  uint64_t now = gpum_clock_mono_ns() / 1000000, last = atomic_load(&last_oom_ms);
  if (last && now - last < 1000) {
    atomic_fetch_add(&quiet_ooms, 1);
    return;
  }
  if (!atomic_compare_exchange_strong(&last_oom_ms, &last, now ? now : 1)) {
    atomic_fetch_add(&quiet_ooms, 1);
    return;
  }
  char l[32], u[32], a[32], who[48];
  gpum_fence_usage_t fu = {0};
  (void)gpum_fence_usage(gpum__enf.fence, dev, &fu);
  if (gpum__enf.reservation)
    snprintf(who, sizeof who, "reservation r-%llu", (unsigned long long)gpum__enf.reservation);
  else
    snprintf(who, sizeof who, "GPUM_MEM_LIMIT");
  unsigned quiet = atomic_exchange(&quiet_ooms, 0);
  gpum__enf_log("%s: out of memory on device %u: limit %s, used %s, asked %s "
                "(%s)%s%.0u%s",
                who, dev, gpum_size_format(fu.limit, l, sizeof l),
                gpum_size_format(used, u, sizeof u), gpum_size_format(asked, a, sizeof a), code,
                quiet ? "; " : "", quiet, quiet ? " more refused since the last line" : "");
}

static _Atomic bool warned_slots;

bool gpum__enf_charge(int dev, uint64_t bytes, bool *charged, const char *oom_code) {
  *charged = false;
  if (dev < 0 || dev >= GPUM_FENCE_MAX_DEVICES)
    return true;
  uint64_t used = 0;
  int rc = gpum_fence_charge(gpum__enf.fence, (unsigned)dev, bytes, &used);
  if (rc == GPUM_EDEVOOM && gpum__enf_grow((unsigned)dev, bytes))
    rc = gpum_fence_charge(gpum__enf.fence, (unsigned)dev, bytes, &used);
  if (rc == 0) {
    *charged = true;
    return true;
  }
  if (rc == GPUM_EDEVOOM) {
    log_oom((unsigned)dev, used, bytes, oom_code);
    return false;
  }
  /* Never worse than no shim: a fence that cannot take this process lets it through. */
  if (!atomic_exchange(&warned_slots, true))
    gpum__enf_log("cannot charge the fence (%s): this process is not fenced", gpum_strerror(rc));
  return true;
}

/* Charges bytes on dev: CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY. */
static CUresult charge(int dev, uint64_t bytes, bool *charged) {
  return gpum__enf_charge(dev, bytes, charged, "CUDA_ERROR_OUT_OF_MEMORY")
             ? CUDA_SUCCESS
             : CUDA_ERROR_OUT_OF_MEMORY;
}

void gpum__enf_settle(bool ok, bool charged, unsigned kind, uint64_t key, int dev, uint64_t bytes) {
  if (charged && (!ok || gpum__enf_map_put(kind, key, bytes, (unsigned)dev) != 0))
    gpum_fence_uncharge(gpum__enf.fence, (unsigned)dev, bytes);
}

/* After the driver call: keeps the charge with what was allocated, or gives it back. */
static CUresult settle(CUresult r, bool charged, unsigned kind, uint64_t key, int dev,
                       uint64_t bytes) {
  gpum__enf_settle(r == CUDA_SUCCESS, charged, kind, key, dev, bytes);
  return r;
}

void gpum__enf_give_back(unsigned kind, uint64_t key) {
  uint64_t bytes;
  unsigned dev;
  if (gpum__enf_map_take(kind, key, &bytes, &dev)) {
    gpum_fence_uncharge(gpum__enf.fence, dev, bytes);
    gpum__enf_maybe_shrink();
  }
}

/* The real entry point, or an error: CUDA_ERROR_NOT_INITIALIZED without a driver, and
 * CUDA_ERROR_NOT_FOUND (with one warning per entry point) when the driver lacks it (a program
 * built against a newer driver than the one installed: without the shim the loader would have
 * stopped it at that call). */
#define NEED_REAL(name)                                                                      \
  do {                                                                                       \
    if (!gpum__enf_cuda_ready(NULL))                                                         \
      return CUDA_ERROR_NOT_INITIALIZED;                                                     \
    if (!gpum__enf_real.name) {                                                              \
      static _Atomic bool warned_;                                                           \
      if (!atomic_exchange(&warned_, true))                                                  \
        gpum__enf_log("the CUDA driver has no %s: the call fails with CUDA_ERROR_NOT_FOUND", \
                      #name);                                                                \
      return CUDA_ERROR_NOT_FOUND;                                                           \
    }                                                                                        \
  } while (0)

/* An allocation of bytes on dev through call, which sets *dptr. */
#define FENCED_ALLOC(name, dev_expr, bytes_expr, call)                               \
  do {                                                                               \
    NEED_REAL(name);                                                                 \
    if (!gpum__enf_fenced() || !dptr || (bytes_expr) == 0)                           \
      return call;                                                                   \
    int dev_ = (dev_expr);                                                           \
    if (dev_ < 0)                                                                    \
      return call;                                                                   \
    uint64_t b_ = charged_size((unsigned)dev_, (bytes_expr));                        \
    bool charged_;                                                                   \
    CUresult r_ = charge(dev_, b_, &charged_);                                       \
    if (r_ != CUDA_SUCCESS)                                                          \
      return r_;                                                                     \
    r_ = call;                                                                       \
    return settle(r_, charged_, KIND_PTR, r_ == CUDA_SUCCESS ? *dptr : 0, dev_, b_); \
  } while (0)

GPUM_ENFORCE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  FENCED_ALLOC(cuMemAlloc_v2, current_dev(), bytesize,
               gpum__enf_real.cuMemAlloc_v2(dptr, bytesize));
}

void gpum__enf_mark_used(unsigned flags) {
  gpum_fence *f = gpum__enf_fence();
  if (f)
    gpum_fence_mark_used(f, flags);
}

/* r, after marking flags when it is a success. */
static CUresult mark(CUresult r, unsigned flags) {
  if (r == CUDA_SUCCESS)
    gpum__enf_mark_used(flags);
  return r;
}

static CUresult alloc_managed(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  FENCED_ALLOC(cuMemAllocManaged, current_dev(), bytesize,
               gpum__enf_real.cuMemAllocManaged(dptr, bytesize, flags));
}

GPUM_ENFORCE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
                                               unsigned int flags) {
  return mark(alloc_managed(dptr, bytesize, flags), GPUM_FENCE_USED_MANAGED);
}

GPUM_ENFORCE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  FENCED_ALLOC(cuMemAllocAsync, current_dev(), bytesize,
               gpum__enf_real.cuMemAllocAsync(dptr, bytesize, hStream));
}

GPUM_ENFORCE_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                  CUstream hStream) {
  FENCED_ALLOC(cuMemAllocAsync_ptsz, current_dev(), bytesize,
               gpum__enf_real.cuMemAllocAsync_ptsz(dptr, bytesize, hStream));
}

static int pool_dev(CUmemoryPool pool) {
  int d = gpum__enf_pool_dev(pool);
  return d >= 0 ? d : current_dev();
}

GPUM_ENFORCE_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
                                                     CUmemoryPool pool, CUstream hStream) {
  FENCED_ALLOC(cuMemAllocFromPoolAsync, pool_dev(pool), bytesize,
               gpum__enf_real.cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream));
}

GPUM_ENFORCE_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                          CUmemoryPool pool, CUstream hStream) {
  FENCED_ALLOC(cuMemAllocFromPoolAsync_ptsz, pool_dev(pool), bytesize,
               gpum__enf_real.cuMemAllocFromPoolAsync_ptsz(dptr, bytesize, pool, hStream));
}

/* Pitched: charged for the pitch the driver is expected to choose (rows of 512-byte multiples),
 * then corrected to the pitch it chose. */
GPUM_ENFORCE_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch,
                                                size_t WidthInBytes, size_t Height,
                                                unsigned int ElementSizeBytes) {
  NEED_REAL(cuMemAllocPitch_v2);
#define REAL_PITCH \
  gpum__enf_real.cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes)
  int dev = gpum__enf_fenced() && dptr && pPitch && WidthInBytes && Height ? current_dev() : -1;
  if (dev < 0 || WidthInBytes > UINT64_MAX / 2 || Height > UINT64_MAX / round_to(WidthInBytes, 512))
    return REAL_PITCH;
  uint64_t est = charged_size((unsigned)dev, round_to(WidthInBytes, 512) * Height);
  bool charged;
  CUresult r = charge(dev, est, &charged);
  if (r != CUDA_SUCCESS)
    return r;
  r = REAL_PITCH;
#undef REAL_PITCH
  if (r != CUDA_SUCCESS || !charged)
    return settle(r, charged, KIND_PTR, 0, dev, est);
  uint64_t actual = charged_size((unsigned)dev, (uint64_t)*pPitch * Height);
  if (actual > est) {
    bool more;
    if (charge(dev, actual - est, &more) != CUDA_SUCCESS) {
      if (gpum__enf_real.cuMemFree_v2)
        gpum__enf_real.cuMemFree_v2(*dptr);
      gpum_fence_uncharge(gpum__enf.fence, (unsigned)dev, est);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (!more)
      actual = est;
  } else if (actual < est) {
    gpum_fence_uncharge(gpum__enf.fence, (unsigned)dev, est - actual);
  }
  return settle(r, true, KIND_PTR, *dptr, dev, actual);
}

GPUM_ENFORCE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                         const CUmemAllocationProp *prop,
                                         unsigned long long flags) {
  NEED_REAL(cuMemCreate);
#define REAL_CREATE gpum__enf_real.cuMemCreate(handle, size, prop, flags)
  /* Host-located physical memory is not the device's. */
  if (!gpum__enf_fenced() || !handle || !prop || size == 0 ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0)
    return REAL_CREATE;
  int dev = prop->location.id;
  uint64_t b = dev < GPUM_FENCE_MAX_DEVICES ? charged_size((unsigned)dev, size) : size;
  bool charged;
  CUresult r = charge(dev, b, &charged);
  if (r != CUDA_SUCCESS)
    return r;
  r = REAL_CREATE;
#undef REAL_CREATE
  return settle(r, charged, KIND_HANDLE, r == CUDA_SUCCESS ? *handle : 0, dev, b);
}

GPUM_ENFORCE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  NEED_REAL(cuMemFree_v2);
  CUresult r = gpum__enf_real.cuMemFree_v2(dptr);
  if (r == CUDA_SUCCESS && gpum__enf_fenced())
    gpum__enf_give_back(KIND_PTR, dptr);
  return r;
}

/* A stream-ordered free gives the bytes back when it is enqueued: only this job's later
 * allocations can reuse them before the stream gets there (docs/enforce.md). */
GPUM_ENFORCE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  NEED_REAL(cuMemFreeAsync);
  CUresult r = gpum__enf_real.cuMemFreeAsync(dptr, hStream);
  if (r == CUDA_SUCCESS && gpum__enf_fenced())
    gpum__enf_give_back(KIND_PTR, dptr);
  return r;
}

GPUM_ENFORCE_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  NEED_REAL(cuMemFreeAsync_ptsz);
  CUresult r = gpum__enf_real.cuMemFreeAsync_ptsz(dptr, hStream);
  if (r == CUDA_SUCCESS && gpum__enf_fenced())
    gpum__enf_give_back(KIND_PTR, dptr);
  return r;
}

GPUM_ENFORCE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  NEED_REAL(cuMemRelease);
  CUresult r = gpum__enf_real.cuMemRelease(handle);
  if (r == CUDA_SUCCESS && gpum__enf_fenced())
    gpum__enf_give_back(KIND_HANDLE, handle);
  return r;
}

GPUM_ENFORCE_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
  NEED_REAL(cuMemGetInfo_v2);
  CUresult r = gpum__enf_real.cuMemGetInfo_v2(free, total);
  if (r == CUDA_SUCCESS && gpum__enf_fenced())
    gpum__enf_tell_limit(current_dev(), free, total);
  return r;
}

GPUM_ENFORCE_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  NEED_REAL(cuDeviceTotalMem_v2);
  CUresult r = gpum__enf_real.cuDeviceTotalMem_v2(bytes, dev);
  if (r == CUDA_SUCCESS && gpum__enf_fenced())
    gpum__enf_tell_limit(dev, NULL, bytes);
  return r;
}

GPUM_ENFORCE_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev) {
  NEED_REAL(cuDeviceGetDefaultMemPool);
  CUresult r = gpum__enf_real.cuDeviceGetDefaultMemPool(pool_out, dev);
  if (r == CUDA_SUCCESS && pool_out)
    gpum__enf_pool_note(*pool_out, dev);
  return r;
}

GPUM_ENFORCE_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
  NEED_REAL(cuDeviceGetMemPool);
  CUresult r = gpum__enf_real.cuDeviceGetMemPool(pool, dev);
  if (r == CUDA_SUCCESS && pool)
    gpum__enf_pool_note(*pool, dev);
  return r;
}

GPUM_ENFORCE_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps) {
  NEED_REAL(cuMemPoolCreate);
  CUresult r = gpum__enf_real.cuMemPoolCreate(pool, poolProps);
  if (r == CUDA_SUCCESS && pool && poolProps &&
      poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
    gpum__enf_pool_note(*pool, poolProps->location.id);
  return r;
}

/* Memory shared with another process: passed through, marked when the driver says yes. */
GPUM_ENFORCE_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr) {
  NEED_REAL(cuIpcGetMemHandle);
  return mark(gpum__enf_real.cuIpcGetMemHandle(pHandle, dptr), GPUM_FENCE_USED_IPC);
}

GPUM_ENFORCE_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                                   unsigned int Flags) {
  NEED_REAL(cuIpcOpenMemHandle_v2);
  return mark(gpum__enf_real.cuIpcOpenMemHandle_v2(pdptr, handle, Flags), GPUM_FENCE_USED_IPC);
}

GPUM_ENFORCE_EXPORT CUresult cuMemExportToShareableHandle(void *shareableHandle,
                                                          CUmemGenericAllocationHandle handle,
                                                          CUmemAllocationHandleType handleType,
                                                          unsigned long long flags) {
  NEED_REAL(cuMemExportToShareableHandle);
  return mark(
      gpum__enf_real.cuMemExportToShareableHandle(shareableHandle, handle, handleType, flags),
      GPUM_FENCE_USED_IPC);
}

GPUM_ENFORCE_EXPORT CUresult cuMemImportFromShareableHandle(
    CUmemGenericAllocationHandle *handle, void *osHandle, CUmemAllocationHandleType shHandleType) {
  NEED_REAL(cuMemImportFromShareableHandle);
  return mark(gpum__enf_real.cuMemImportFromShareableHandle(handle, osHandle, shHandleType),
              GPUM_FENCE_USED_IPC);
}

GPUM_ENFORCE_EXPORT CUresult cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
                                                              CUmemAllocationHandleType handleType,
                                                              unsigned long long flags) {
  NEED_REAL(cuMemPoolExportToShareableHandle);
  return mark(gpum__enf_real.cuMemPoolExportToShareableHandle(handle_out, pool, handleType, flags),
              GPUM_FENCE_USED_IPC);
}

GPUM_ENFORCE_EXPORT CUresult
cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
                                   CUmemAllocationHandleType handleType, unsigned long long flags) {
  NEED_REAL(cuMemPoolImportFromShareableHandle);
  return mark(
      gpum__enf_real.cuMemPoolImportFromShareableHandle(pool_out, handle, handleType, flags),
      GPUM_FENCE_USED_IPC);
}
