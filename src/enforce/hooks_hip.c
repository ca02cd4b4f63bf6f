/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The wrapped HIP runtime calls (docs/enforce.md, "AMD (HIP)"): the hipMalloc family is fenced
 * as the CUDA driver's allocations are (hooks_cuda.c), against the same fence: charged before
 * the runtime is asked, given back when the call fails or the memory is freed, refused with
 * hipErrorOutOfMemory (HIP's code for memory that is short) when it would take the job past its
 * limit on the device. Sizes are charged as hip_map.c rounds them. Managed memory is charged on
 * the current device, as cuMemAllocManaged is. hipHostMalloc is host memory: not fenced.
 * Managed memory and memory shared with another process (hipIpcGetMemHandle,
 * hipIpcOpenMemHandle) are marked in the fence for gpumd when the call succeeds, as in
 * hooks_cuda.c.
 *
 * The program is told its reservation: hipMemGetInfo and hipDeviceTotalMem give the limit as
 * the device's total and free = limit - what the job holds (never more than the device has).
 *
 * HIP ordinals map to the fence's devices through hip_map.c (ROCR_VISIBLE_DEVICES' UUIDs
 * looked up in GPUM_RESERVATION_DEVICES), once per ordinal.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "enforce_internal.h"

enum { KIND_HIP = 2 };
#define MAX_ORD 64
#define PITCH_EST 512u /* the row alignment the charge first assumes (corrected after) */

/* HIP ordinal -> fence device + 2 (0: not known yet, 1: none). */
static _Atomic int ord_map[MAX_ORD];

static int fence_dev(int ord) {
  if (ord < 0 || ord >= MAX_ORD)
    return -1;
  int v = atomic_load_explicit(&ord_map[ord], memory_order_relaxed);
  if (v)
    return v - 2;
  const char *rocr = getenv("ROCR_VISIBLE_DEVICES");
  const char *hvd = getenv("HIP_VISIBLE_DEVICES");
  if (!hvd)
    hvd = getenv("CUDA_VISIBLE_DEVICES");
  const char *res = getenv("GPUM_RESERVATION_DEVICES");
  char uuid[24] = "";
  hipUUID u;
  /* The runtime's UUID is only needed when ROCR names devices by index. */
  if (res && *res && gpum__enf_real.hipDeviceGetUuid &&
      gpum__enf_real.hipDeviceGetUuid(&u, ord) == hipSuccess) {
    memcpy(uuid, "GPU-", 4);
    memcpy(uuid + 4, u.bytes, sizeof u.bytes);
    uuid[4 + sizeof u.bytes] = '\0';
  }
  int d = gpum__enf_hip_fence_dev(rocr, hvd, res, ord, uuid);
  atomic_store_explicit(&ord_map[ord], d + 2, memory_order_relaxed);
  return d;
}

/* The fence device of the calling thread's current HIP device, or -1. */
static int current_fence_dev(void) {
  int d = -1;
  if (!gpum__enf_real.hipGetDevice || gpum__enf_real.hipGetDevice(&d) != hipSuccess)
    return -1;
  return fence_dev(d);
}

/* The real entry point, or an error: hipErrorNotInitialized when no runtime could be found,
 * hipErrorNotSupported (one warning per entry point) when the runtime lacks it. */
#define NEED_REAL(name)                                                                      \
  do {                                                                                       \
    if (!gpum__enf_hip_ready(NULL))                                                          \
      return hipErrorNotInitialized;                                                         \
    if (!gpum__enf_real.name) {                                                              \
      static _Atomic bool warned_;                                                           \
      if (!atomic_exchange(&warned_, true))                                                  \
        gpum__enf_log("the HIP runtime has no %s: the call fails with hipErrorNotSupported", \
                      #name);                                                                \
      return hipErrorNotSupported;                                                           \
    }                                                                                        \
  } while (0)

/* An allocation of bytes on fence device dev through call, which sets *ptr. */
#define FENCED_ALLOC(name, dev_expr, ptr, bytes, call)                                \
  do {                                                                                \
    NEED_REAL(name);                                                                  \
    if (!gpum__enf_fenced() || !(ptr) || (bytes) == 0)                                \
      return call;                                                                    \
    int dev_ = (dev_expr);                                                            \
    if (dev_ < 0)                                                                     \
      return call;                                                                    \
    uint64_t b_ = gpum__enf_hip_round(bytes);                                         \
    bool charged_;                                                                    \
    if (!gpum__enf_charge(dev_, b_, &charged_, "hipErrorOutOfMemory"))                \
      return hipErrorOutOfMemory;                                                     \
    hipError_t r_ = call;                                                             \
    gpum__enf_settle(r_ == hipSuccess && *(ptr), charged_, KIND_HIP,                  \
                     r_ == hipSuccess ? (uint64_t)(uintptr_t) * (ptr) : 0, dev_, b_); \
    return r_;                                                                        \
  } while (0)

GPUM_ENFORCE_EXPORT hipError_t hipMalloc(void **ptr, size_t size) {
  FENCED_ALLOC(hipMalloc, current_fence_dev(), ptr, size, gpum__enf_real.hipMalloc(ptr, size));
}

GPUM_ENFORCE_EXPORT hipError_t hipExtMallocWithFlags(void **ptr, size_t sizeBytes,
                                                     unsigned int flags) {
  FENCED_ALLOC(hipExtMallocWithFlags, current_fence_dev(), ptr, sizeBytes,
               gpum__enf_real.hipExtMallocWithFlags(ptr, sizeBytes, flags));
}

/* r, after marking flags when it is a success. */
static hipError_t mark(hipError_t r, unsigned flags) {
  if (r == hipSuccess)
    gpum__enf_mark_used(flags);
  return r;
}

static hipError_t alloc_managed(void **dev_ptr, size_t size, unsigned int flags) {
  FENCED_ALLOC(hipMallocManaged, current_fence_dev(), dev_ptr, size,
               gpum__enf_real.hipMallocManaged(dev_ptr, size, flags));
}

GPUM_ENFORCE_EXPORT hipError_t hipMallocManaged(void **dev_ptr, size_t size, unsigned int flags) {
  /* HIP gives a NULL pointer for size 0 and succeeds: nothing was allocated. */
  hipError_t r = alloc_managed(dev_ptr, size, flags);
  return r == hipSuccess && dev_ptr && *dev_ptr ? mark(r, GPUM_FENCE_USED_MANAGED) : r;
}

GPUM_ENFORCE_EXPORT hipError_t hipMallocAsync(void **dev_ptr, size_t size, hipStream_t stream) {
  FENCED_ALLOC(hipMallocAsync, current_fence_dev(), dev_ptr, size,
               gpum__enf_real.hipMallocAsync(dev_ptr, size, stream));
}

/* A pool's device, when the program had it from hipDeviceGetDefaultMemPool; else the current
 * device (pools from hipMemPoolCreate are not followed). */
static int pool_fence_dev(hipMemPool_t pool) {
  int d = gpum__enf_pool_dev(pool);
  return d >= 0 ? fence_dev(d) : current_fence_dev();
}

GPUM_ENFORCE_EXPORT hipError_t hipMallocFromPoolAsync(void **dev_ptr, size_t size,
                                                      hipMemPool_t mem_pool, hipStream_t stream) {
  FENCED_ALLOC(hipMallocFromPoolAsync, pool_fence_dev(mem_pool), dev_ptr, size,
               gpum__enf_real.hipMallocFromPoolAsync(dev_ptr, size, mem_pool, stream));
}

GPUM_ENFORCE_EXPORT hipError_t hipDeviceGetDefaultMemPool(hipMemPool_t *mem_pool, int device) {
  NEED_REAL(hipDeviceGetDefaultMemPool);
  hipError_t r = gpum__enf_real.hipDeviceGetDefaultMemPool(mem_pool, device);
  if (r == hipSuccess && mem_pool)
    gpum__enf_pool_note(*mem_pool, device);
  return r;
}

/* Pitched: charged for rows of 512-byte multiples, then corrected to the pitch HIP chose. */
GPUM_ENFORCE_EXPORT hipError_t hipMallocPitch(void **ptr, size_t *pitch, size_t width,
                                              size_t height) {
  NEED_REAL(hipMallocPitch);
#define REAL_PITCH gpum__enf_real.hipMallocPitch(ptr, pitch, width, height)
  int dev = gpum__enf_fenced() && ptr && pitch && width && height ? current_fence_dev() : -1;
  if (dev < 0 || width > UINT64_MAX / 2 || height > UINT64_MAX / (width + PITCH_EST))
    return REAL_PITCH;
  uint64_t est =
      gpum__enf_hip_round((uint64_t)(width + PITCH_EST - 1) / PITCH_EST * PITCH_EST * height);
  bool charged;
  if (!gpum__enf_charge(dev, est, &charged, "hipErrorOutOfMemory"))
    return hipErrorOutOfMemory;
  hipError_t r = REAL_PITCH;
#undef REAL_PITCH
  if (r != hipSuccess || !charged || !*ptr) {
    gpum__enf_settle(false, charged, KIND_HIP, 0, dev, est);
    return r;
  }
  uint64_t actual = gpum__enf_hip_round((uint64_t)*pitch * height);
  if (actual > est) {
    bool more;
    if (!gpum__enf_charge(dev, actual - est, &more, "hipErrorOutOfMemory")) {
      if (gpum__enf_real.hipFree)
        (void)gpum__enf_real.hipFree(*ptr);
      gpum__enf_settle(false, true, KIND_HIP, 0, dev, est);
      return hipErrorOutOfMemory;
    }
    if (!more)
      actual = est;
  } else if (actual < est) {
    gpum__enf_settle(false, true, KIND_HIP, 0, dev, est - actual);
  }
  gpum__enf_settle(true, true, KIND_HIP, (uint64_t)(uintptr_t)*ptr, dev, actual);
  return r;
}

GPUM_ENFORCE_EXPORT hipError_t hipFree(void *ptr) {
  NEED_REAL(hipFree);
  hipError_t r = gpum__enf_real.hipFree(ptr);
  if (r == hipSuccess && ptr && gpum__enf_fenced())
    gpum__enf_give_back(KIND_HIP, (uint64_t)(uintptr_t)ptr);
  return r;
}

/* A stream-ordered free gives the bytes back when it is enqueued, as cuMemFreeAsync's. */
GPUM_ENFORCE_EXPORT hipError_t hipFreeAsync(void *dev_ptr, hipStream_t stream) {
  NEED_REAL(hipFreeAsync);
  hipError_t r = gpum__enf_real.hipFreeAsync(dev_ptr, stream);
  if (r == hipSuccess && dev_ptr && gpum__enf_fenced())
    gpum__enf_give_back(KIND_HIP, (uint64_t)(uintptr_t)dev_ptr);
  return r;
}

GPUM_ENFORCE_EXPORT hipError_t hipMemGetInfo(size_t *free, size_t *total) {
  NEED_REAL(hipMemGetInfo);
  hipError_t r = gpum__enf_real.hipMemGetInfo(free, total);
  if (r == hipSuccess && gpum__enf_fenced())
    gpum__enf_tell_limit(current_fence_dev(), free, total);
  return r;
}

GPUM_ENFORCE_EXPORT hipError_t hipDeviceTotalMem(size_t *bytes, hipDevice_t device) {
  NEED_REAL(hipDeviceTotalMem);
  hipError_t r = gpum__enf_real.hipDeviceTotalMem(bytes, device);
  if (r == hipSuccess && gpum__enf_fenced())
    gpum__enf_tell_limit(fence_dev(device), NULL, bytes);
  return r;
}

/* Memory shared with another process: passed through, marked when the runtime says yes. */
GPUM_ENFORCE_EXPORT hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t *handle, void *devPtr) {
  NEED_REAL(hipIpcGetMemHandle);
  return mark(gpum__enf_real.hipIpcGetMemHandle(handle, devPtr), GPUM_FENCE_USED_IPC);
}

GPUM_ENFORCE_EXPORT hipError_t hipIpcOpenMemHandle(void **devPtr, hipIpcMemHandle_t handle,
                                                   unsigned int flags) {
  NEED_REAL(hipIpcOpenMemHandle);
  return mark(gpum__enf_real.hipIpcOpenMemHandle(devPtr, handle, flags), GPUM_FENCE_USED_IPC);
}
