/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libgpum_enforce.so's pieces (docs/enforce.md): enforce.c (set-up from the environment, the
 * real driver's entry points, dlsym and cuGetProcAddress), hooks_cuda.c (the allocation calls
 * and what the program is told of memory), hooks_hip.c (the same for the HIP runtime, with
 * hip_map.c's device mapping and rounding), hooks_nvml.c (NVML's memory info), ptrmap.c (what
 * each allocation of this process was charged), grow.c (elastic reservations).
 */
#ifndef GPUM_ENFORCE_INTERNAL_H
#define GPUM_ENFORCE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <gpum/error.h>
#include <gpum/fence.h>

#include "cuda_abi.h"
#include "hip_abi.h"
#include "nvml_abi.h"

#define GPUM_ENFORCE_EXPORT __attribute__((visibility("default")))

/* The driver calls the shim wraps: X(name). Each has a wrapper of the same name here and the
 * real entry point in gpum__enf_real. */
#define GPUM_ENF_CUDA_WRAPPED(X)        \
  X(cuMemAlloc_v2)                      \
  X(cuMemAllocPitch_v2)                 \
  X(cuMemAllocManaged)                  \
  X(cuMemAllocAsync)                    \
  X(cuMemAllocAsync_ptsz)               \
  X(cuMemAllocFromPoolAsync)            \
  X(cuMemAllocFromPoolAsync_ptsz)       \
  X(cuMemCreate)                        \
  X(cuMemFree_v2)                       \
  X(cuMemFreeAsync)                     \
  X(cuMemFreeAsync_ptsz)                \
  X(cuMemRelease)                       \
  X(cuMemGetInfo_v2)                    \
  X(cuDeviceTotalMem_v2)                \
  X(cuDeviceGetDefaultMemPool)          \
  X(cuDeviceGetMemPool)                 \
  X(cuMemPoolCreate)                    \
  X(cuIpcGetMemHandle)                  \
  X(cuIpcOpenMemHandle_v2)              \
  X(cuMemExportToShareableHandle)       \
  X(cuMemImportFromShareableHandle)     \
  X(cuMemPoolExportToShareableHandle)   \
  X(cuMemPoolImportFromShareableHandle) \
  X(cuGetProcAddress)                   \
  X(cuGetProcAddress_v2)
/* Driver calls the shim uses without wrapping them. */
#define GPUM_ENF_CUDA_USED(X) \
  X(cuCtxGetDevice)           \
  X(cuDriverGetVersion)       \
  X(cuMemGetAllocationGranularity)
#define GPUM_ENF_NVML_WRAPPED(X) \
  X(nvmlDeviceGetMemoryInfo)     \
  X(nvmlDeviceGetMemoryInfo_v2)
#define GPUM_ENF_NVML_USED(X) \
  X(nvmlDeviceGetIndex)       \
  X(nvmlDeviceGetUUID)
/* The HIP runtime calls the shim wraps, and those it only uses. */
#define GPUM_ENF_HIP_WRAPPED(X) \
  X(hipMalloc)                  \
  X(hipExtMallocWithFlags)      \
  X(hipMallocManaged)           \
  X(hipMallocPitch)             \
  X(hipMallocAsync)             \
  X(hipMallocFromPoolAsync)     \
  X(hipDeviceGetDefaultMemPool) \
  X(hipFree)                    \
  X(hipFreeAsync)               \
  X(hipMemGetInfo)              \
  X(hipDeviceTotalMem)          \
  X(hipIpcGetMemHandle)         \
  X(hipIpcOpenMemHandle)
#define GPUM_ENF_HIP_USED(X) \
  X(hipGetDevice)            \
  X(hipDeviceGetUuid)

/* The wrappers, by the driver's names and prototypes (exported: exports.map). */
#pragma GCC visibility push(default)
#define GPUM__ENF_DECL(name, params) CUresult name params;
#define GPUM__ENF_DECL_OTHER(name, pfn, params) CUresult name params;
GPUM_CUDA_FUNCS(GPUM__ENF_DECL)
GPUM_CUDA_FUNCS_OTHER(GPUM__ENF_DECL_OTHER)
#undef GPUM__ENF_DECL_OTHER
#undef GPUM__ENF_DECL
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);
#define GPUM__ENF_DECL_HIP(name, params) hipError_t name params;
GPUM_HIP_FUNCS(GPUM__ENF_DECL_HIP)
#undef GPUM__ENF_DECL_HIP
#pragma GCC visibility pop

/* The real entry points, NULL where the driver lacks one. */
struct gpum__enf_real {
#define GPUM__ENF_FIELD(name) gpum_##name##_fn name;
  GPUM_ENF_CUDA_WRAPPED(GPUM__ENF_FIELD)
  GPUM_ENF_CUDA_USED(GPUM__ENF_FIELD)
  GPUM_ENF_NVML_WRAPPED(GPUM__ENF_FIELD)
  GPUM_ENF_NVML_USED(GPUM__ENF_FIELD)
  GPUM_ENF_HIP_WRAPPED(GPUM__ENF_FIELD)
  GPUM_ENF_HIP_USED(GPUM__ENF_FIELD)
#undef GPUM__ENF_FIELD
};
extern struct gpum__enf_real gpum__enf_real;

/* The state set up from the environment at load (enforce.c). */
struct gpum__enf_state {
  gpum_fence *fence;    /* set by gpum__enf_fence: use that */
  bool passthrough;     /* a driver the shim does not know: wrap nothing */
  uint64_t reservation; /* gpumd's reservation id, 0 without one */
  uint64_t max_limit;   /* elastic: the most the reservation may grow to (0: not elastic) */
  char fence_name[GPUM_FENCE_NAME_MAX];
  bool owns_fence; /* this process created the region (no gpum run): it removes it at exit */
};
extern struct gpum__enf_state gpum__enf;

/* The job's fence, opened (or created from GPUM_MEM_LIMIT) at the first call that needs it;
 * NULL when there is nothing to fence. */
gpum_fence *gpum__enf_fence(void);
/* Loads the real CUDA entry points once (from handle when the program's dlsym brings one and
 * nothing is loaded yet, else from the process or the driver libgpum would load). False when
 * no driver could be found: the wrappers then answer CUDA_ERROR_NOT_INITIALIZED. */
bool gpum__enf_cuda_ready(void *handle);
bool gpum__enf_nvml_ready(void *handle);
/* The HIP runtime's entry points, from handle, else what follows the shim in the process (a
 * program that calls HIP has loaded libamdhip64.so.5). */
bool gpum__enf_hip_ready(void *handle);
/* The wrapper standing for a real entry point, or NULL when fn is not one the shim wraps. */
void *gpum__enf_wrapper_for(const void *fn);
/* One line on stderr, "gpum-enforce: ...". */
void gpum__enf_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* hooks_cuda.c: what the job holds on a device (fence counter) and its limit there. */
bool gpum__enf_view(unsigned dev, uint64_t *limit, uint64_t *used);
/* Whether calls are fenced (a fence is open and the driver is one the shim knows). */
bool gpum__enf_fenced(void);
/* What a driver's memory info says, told the reservation: *total (when not NULL) at most the
 * limit on fence device dev, *free (when not NULL) at most what is left of it. Nothing changes
 * when calls are not fenced or dev is no fence device (dev < 0). cuMemGetInfo's, HIP's. */
void gpum__enf_tell_limit(int dev, size_t *free, size_t *total);
/* Charges bytes on fence device dev before the driver call: false when it would pass the limit
 * (after one try to grow an elastic reservation; one line on stderr naming oom_code, the code
 * the caller returns). *charged: whether a charge was taken (none past the fence's devices or
 * without a free process slot: the call then goes through unfenced). */
bool gpum__enf_charge(int dev, uint64_t bytes, bool *charged, const char *oom_code);
/* After the driver call: ok keeps the charge with (kind, key), else gives it back. */
void gpum__enf_settle(bool ok, bool charged, unsigned kind, uint64_t key, int dev, uint64_t bytes);
/* A free: gives back what (kind, key) was charged, if anything. */
void gpum__enf_give_back(unsigned kind, uint64_t key);
/* After a successful call the driver's checkpoint cannot follow (managed memory, memory shared
 * with another process): marks the job's fence with flags (GPUM_FENCE_USED_*) for gpumd. Nothing
 * without a fence. */
void gpum__enf_mark_used(unsigned flags);

/* hip_map.c: HIP ordinals to fence devices, and HIP's rounding (pure: unit-tested).
 * The fence device of HIP ordinal ord: the position of the device's UUID in
 * GPUM_RESERVATION_DEVICES (resdevs) when both are known, else ord. The UUID is the
 * ROCR_VISIBLE_DEVICES entry (rocr) the ordinal stands on after HIP_VISIBLE_DEVICES (hvd), when
 * that entry is a "GPU-" UUID, else runtime_uuid (from hipDeviceGetUuid, may be NULL). -1 when
 * ord is not a device the lists leave visible. */
int gpum__enf_hip_fence_dev(const char *rocr, const char *hvd, const char *resdevs, int ord,
                            const char *runtime_uuid);
/* The bytes a HIP allocation of bytes is charged: whole 2 MiB granules from 2 MiB up, whole
 * 4 KiB pages below (UINT64_MAX when that overflows). */
uint64_t gpum__enf_hip_round(uint64_t bytes);
/* ptrmap.c: allocation -> (bytes charged, device). kind: 0 pointers, 1 cuMemCreate handles,
 * 2 HIP pointers. */
int gpum__enf_map_put(unsigned kind, uint64_t key, uint64_t bytes, unsigned dev);
bool gpum__enf_map_take(unsigned kind, uint64_t key, uint64_t *bytes, unsigned *dev);
/* Forgets every entry (a child after fork: the parent's allocations are not its own). */
void gpum__enf_map_clear(void);
/* Pools' devices (cuMemPoolCreate, default pools): pool -> CUDA device, -1 if unknown. */
void gpum__enf_pool_note(const void *pool, int dev);
int gpum__enf_pool_dev(const void *pool);

/* grow.c: asks gpumd to grow the reservation so that need more bytes fit on dev; true when the
 * fence's limit was raised. Bounded by enforce.grow_timeout. */
bool gpum__enf_grow(unsigned dev, uint64_t need);
/* Gives back what an elastic reservation holds above its base when gpumd asked for it. */
void gpum__enf_maybe_shrink(void);

#endif /* GPUM_ENFORCE_INTERNAL_H */
