/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA driver loader (library-internal): dlopens libcuda.so.1, or libgpum_sim.so when
 * GPUM_SIM_NODE is set, or what GPUM_CUDA_LIBRARY names (the same selection as NVML, see
 * device_internal.h), resolves the driver API subset of src/abi/cuda_abi.h, and offers the
 * few helpers the pool and the enforcement shim need: primary context, error names, and the
 * mapping of CUresult to GPUM_E* codes.
 *
 * Required symbols (missing -> GPUM_EDRIVER naming the first one): cuInit,
 * cuDriverGetVersion, cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceTotalMem_v2,
 * cuDeviceGetAttribute, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease_v2,
 * cuCtxSetCurrent, cuCtxGetCurrent, cuCtxSynchronize, cuMemAlloc_v2, cuMemFree_v2,
 * cuMemGetInfo_v2, cuMemcpyHtoD_v2, cuMemcpyDtoH_v2, cuStreamCreate, cuStreamDestroy_v2,
 * cuStreamSynchronize, cuEventCreate, cuEventRecord, cuEventQuery, cuEventSynchronize,
 * cuEventDestroy_v2. Every other function of GPUM_CUDA_FUNCS is optional and NULL when
 * absent (error names, UUID, PCI bus id, async allocation, the virtual-memory calls, pinned
 * host memory, ...): callers check before use. Each symbol is looked up with dlsym by its
 * versioned name; one that dlsym does not find is asked of cuGetProcAddress_v2 (when
 * exported) by its base name at CUDA 12.0 semantics, which return exactly the _vN ABI our
 * prototypes declare.
 *
 * A loaded gpum__cuda_t is immutable and may be shared by threads; CUDA's own thread rules
 * (one current context per thread) apply to the calls.
 */
#ifndef GPUM_CUDA_LOADER_H
#define GPUM_CUDA_LOADER_H

#include <limits.h>
#include <stdbool.h>

#include "cuda_abi.h"

typedef struct gpum__cuda {
  void *dl;
  char path[PATH_MAX];
  bool simulated;     /* libgpum_sim.so */
  int driver_version; /* cuDriverGetVersion, e.g. 12040 */
#define GPUM__CUDA_FIELD(name, params) gpum_##name##_fn name;
  GPUM_CUDA_FUNCS(GPUM__CUDA_FIELD)
#undef GPUM__CUDA_FIELD
} gpum__cuda_t;

/* Loads the driver and calls cuInit(0). library NULL or "": $GPUM_CUDA_LIBRARY, else the sim
 * when $GPUM_SIM_NODE is set, else libcuda.so.1. Returns 0, GPUM_EDRIVER (cannot load, a
 * required symbol is missing, or cuInit failed: the detail names the library and the
 * CUDA error), GPUM_ENODEV (cuInit says there is no device) or GPUM_ENOMEM. The caller frees
 * *out with gpum__cuda_unload. */
int gpum__cuda_load(const char *library, gpum__cuda_t **out);
/* dlcloses and frees. NULL is fine. Contexts retained through it must be released first. */
void gpum__cuda_unload(gpum__cuda_t *cu);

/* Retains the primary context of device ordinal and makes it current on the calling thread.
 * *ctx (may be NULL) receives it. Undo with gpum__cuda_context_release. Returns 0 or the
 * mapped CUDA error with the detail set. */
int gpum__cuda_context_enter(gpum__cuda_t *cu, int ordinal, CUcontext *ctx);
/* Releases the primary context retained by gpum__cuda_context_enter. */
int gpum__cuda_context_release(gpum__cuda_t *cu, int ordinal);

/* "CUDA_ERROR_OUT_OF_MEMORY": cuGetErrorName when exported, else our own table, else
 * "CUDA_ERROR_UNKNOWN_CODE". cu may be NULL. Never returns NULL. */
const char *gpum__cuda_error_name(const gpum__cuda_t *cu, CUresult r);
/* CUresult -> GPUM_E* (OUT_OF_MEMORY -> GPUM_EDEVOOM, NO_DEVICE/INVALID_DEVICE -> GPUM_ENODEV,
 * NOT_SUPPORTED -> GPUM_ENOTSUP, ...; 0 for CUDA_SUCCESS). Pure. */
int gpum__cuda_map_error(CUresult r);
/* 0 when r is CUDA_SUCCESS, else sets the detail "<what>: CUDA_ERROR_X (message)" and returns
 * the mapped code. */
int gpum__cuda_check(const gpum__cuda_t *cu, CUresult r, const char *what);

#endif /* GPUM_CUDA_LOADER_H */
