/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA driver loader: library selection (shared with NVML through libpath.c), symbol
 * resolution with required/optional rules, cuInit, primary-context helpers, and CUresult
 * names and mapping. See cuda_loader.h for the contract and the list of required symbols.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "device/cuda_loader.h"
#include "device/device_internal.h"

/* Codes we name and map that cuda_abi.h does not list. Values from CUDA 13.0's cuda.h. */
enum {
  CU_ERR_PROFILER_DISABLED = 5,
  CU_ERR_DEVICE_UNAVAILABLE = 46,
  CU_ERR_DEVICE_NOT_LICENSED = 102,
  CU_ERR_ALREADY_MAPPED = 208,
  CU_ERR_NOT_MAPPED = 211,
  CU_ERR_CONTEXT_ALREADY_IN_USE = 216,
  CU_ERR_OPERATING_SYSTEM = 304,
  CU_ERR_ILLEGAL_STATE = 401,
  CU_ERR_LAUNCH_OUT_OF_RESOURCES = 701,
  CU_ERR_CONTEXT_IS_DESTROYED = 709,
  CU_ERR_SYSTEM_DRIVER_MISMATCH = 803,
  CU_ERR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
  CU_ERR_TIMEOUT = 909,
};

/* The CUDA version whose ABI our _vN prototypes follow, for cuGetProcAddress_v2. */
#define PROC_ADDRESS_VERSION 12000

_Static_assert(sizeof(void *) == sizeof(gpum_cuInit_fn), "function pointers fit void *");

static const char *const required[] = {"cuInit",
                                       "cuDriverGetVersion",
                                       "cuDeviceGetCount",
                                       "cuDeviceGet",
                                       "cuDeviceGetName",
                                       "cuDeviceTotalMem_v2",
                                       "cuDeviceGetAttribute",
                                       "cuDevicePrimaryCtxRetain",
                                       "cuDevicePrimaryCtxRelease_v2",
                                       "cuCtxSetCurrent",
                                       "cuCtxGetCurrent",
                                       "cuCtxSynchronize",
                                       "cuMemAlloc_v2",
                                       "cuMemFree_v2",
                                       "cuMemGetInfo_v2",
                                       "cuMemcpyHtoD_v2",
                                       "cuMemcpyDtoH_v2",
                                       "cuStreamCreate",
                                       "cuStreamDestroy_v2",
                                       "cuStreamSynchronize",
                                       "cuEventCreate",
                                       "cuEventRecord",
                                       "cuEventQuery",
                                       "cuEventSynchronize",
                                       "cuEventDestroy_v2"};

static const struct {
  const char *name;
  size_t off;
} sym_table[] = {
#define GPUM__CUDA_SYM(name, params) {#name, offsetof(gpum__cuda_t, name)},
    GPUM_CUDA_FUNCS(GPUM__CUDA_SYM)
#undef GPUM__CUDA_SYM
};

static bool is_required(const char *name) {
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
    if (!strcmp(required[i], name))
      return true;
  }
  return false;
}

/* "cuMemAlloc_v2" -> "cuMemAlloc" (the name cuGetProcAddress knows). */
static void base_name(const char *name, char *out, size_t len) {
  snprintf(out, len, "%s", name);
  char *v = strstr(out, "_v");
  if (v && v[2] >= '0' && v[2] <= '9')
    *v = '\0';
}

static void *lookup(gpum__cuda_t *cu, const char *name) {
  void *p = dlsym(cu->dl, name);
  if (p || !cu->cuGetProcAddress_v2)
    return p;
  char base[64];
  base_name(name, base, sizeof base);
  CUdriverProcAddressQueryResult st = 0;
  if (cu->cuGetProcAddress_v2(base, &p, PROC_ADDRESS_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st) !=
          CUDA_SUCCESS ||
      st != CU_GET_PROC_ADDRESS_SUCCESS)
    return NULL;
  return p;
}

static int resolve(gpum__cuda_t *cu) {
  void *gpa = dlsym(cu->dl, "cuGetProcAddress_v2");
  memcpy(&cu->cuGetProcAddress_v2, &gpa, sizeof gpa);
  for (size_t i = 0; i < sizeof sym_table / sizeof sym_table[0]; i++) {
    void *p = lookup(cu, sym_table[i].name);
    if (!p && is_required(sym_table[i].name))
      return gpum_error(GPUM_EDRIVER, "%s does not export %s: not a usable CUDA driver", cu->path,
                        sym_table[i].name);
    memcpy((char *)cu + sym_table[i].off, &p, sizeof p);
  }
  return 0;
}

int gpum__cuda_load(const char *library, gpum__cuda_t **out) {
  if (!out)
    return gpum_error(GPUM_EINVAL, "gpum__cuda_load: out is NULL");
  *out = NULL;
  gpum__libpath_t lp;
  int rc = gpum__libpath_resolve(GPUM__LIB_CUDA, library, &lp);
  if (rc)
    return rc;
  gpum__cuda_t *cu = calloc(1, sizeof *cu);
  if (!cu)
    return gpum_error(GPUM_ENOMEM, "cannot allocate the CUDA loader");
  const char *used = NULL;
  rc = gpum__libpath_open(&lp, "CUDA driver", &cu->dl, &used);
  if (rc)
    goto out_free;
  snprintf(cu->path, sizeof cu->path, "%s", used);
  cu->simulated = lp.simulated || dlsym(cu->dl, "gpum_sim_last_error") != NULL;
  rc = resolve(cu);
  if (rc)
    goto out_close;
  CUresult r = cu->cuInit(0);
  if (r != CUDA_SUCCESS) {
    rc = gpum__cuda_map_error(r) == GPUM_ENODEV ? GPUM_ENODEV : GPUM_EDRIVER;
    rc = gpum_error(rc, "cuInit in %s failed: %s", cu->path, gpum__cuda_error_name(cu, r));
    goto out_close;
  }
  if (cu->cuDriverGetVersion(&cu->driver_version) != CUDA_SUCCESS)
    cu->driver_version = 0;
  gpum_log(GPUM_LOG_DEBUG, "cuda", "driver loaded library=\"%s\" version=%d simulated=%d", cu->path,
           cu->driver_version, (int)cu->simulated);
  *out = cu;
  return 0;
out_close:
  dlclose(cu->dl);
out_free:
  free(cu);
  return rc;
}

void gpum__cuda_unload(gpum__cuda_t *cu) {
  if (!cu)
    return;
  if (cu->dl)
    dlclose(cu->dl);
  free(cu);
}

int gpum__cuda_context_enter(gpum__cuda_t *cu, int ordinal, CUcontext *ctx) {
  CUdevice dev;
  CUcontext c = NULL;
  char what[64];
  snprintf(what, sizeof what, "cuDeviceGet(%d)", ordinal);
  int rc = gpum__cuda_check(cu, cu->cuDeviceGet(&dev, ordinal), what);
  if (rc)
    return rc;
  snprintf(what, sizeof what, "cuDevicePrimaryCtxRetain(device %d)", ordinal);
  rc = gpum__cuda_check(cu, cu->cuDevicePrimaryCtxRetain(&c, dev), what);
  if (rc)
    return rc;
  snprintf(what, sizeof what, "cuCtxSetCurrent(device %d)", ordinal);
  rc = gpum__cuda_check(cu, cu->cuCtxSetCurrent(c), what);
  if (rc) {
    cu->cuDevicePrimaryCtxRelease_v2(dev);
    return rc;
  }
  if (ctx)
    *ctx = c;
  return 0;
}

int gpum__cuda_context_release(gpum__cuda_t *cu, int ordinal) {
  CUdevice dev;
  int rc = gpum__cuda_check(cu, cu->cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  if (rc)
    return rc;
  return gpum__cuda_check(cu, cu->cuDevicePrimaryCtxRelease_v2(dev),
                          "cuDevicePrimaryCtxRelease_v2");
}

static const struct {
  int code;
  const char *name;
} names[] = {
#define GPUM__CUDA_NAME(name, value) {value, #name},
    GPUM_CUDA_CONSTS(GPUM__CUDA_NAME)
#undef GPUM__CUDA_NAME
        {CU_ERR_PROFILER_DISABLED, "CUDA_ERROR_PROFILER_DISABLED"},
    {CU_ERR_DEVICE_UNAVAILABLE, "CUDA_ERROR_DEVICE_UNAVAILABLE"},
    {CU_ERR_DEVICE_NOT_LICENSED, "CUDA_ERROR_DEVICE_NOT_LICENSED"},
    {CU_ERR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED"},
    {CU_ERR_NOT_MAPPED, "CUDA_ERROR_NOT_MAPPED"},
    {CU_ERR_CONTEXT_ALREADY_IN_USE, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE"},
    {CU_ERR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM"},
    {CU_ERR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE"},
    {CU_ERR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
    {CU_ERR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED"},
    {CU_ERR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
    {CU_ERR_COMPAT_NOT_SUPPORTED_ON_DEVICE, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"},
    {CU_ERR_TIMEOUT, "CUDA_ERROR_TIMEOUT"},
};

const char *gpum__cuda_error_name(const gpum__cuda_t *cu, CUresult r) {
  if (cu && cu->cuGetErrorName) {
    const char *s = NULL;
    if (cu->cuGetErrorName(r, &s) == CUDA_SUCCESS && s && *s)
      return s;
  }
  /* Our table: error codes only (the constant list also holds attributes and flags). */
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (names[i].code == r && !strncmp(names[i].name, "CUDA_", 5))
      return names[i].name;
  }
  return "CUDA_ERROR_UNKNOWN_CODE";
}

int gpum__cuda_map_error(CUresult r) {
  switch (r) {
  case CUDA_SUCCESS:
    return 0;
  case CUDA_ERROR_INVALID_VALUE:
    return GPUM_EINVAL;
  case CUDA_ERROR_OUT_OF_MEMORY:
    return GPUM_EDEVOOM;
  case CUDA_ERROR_NOT_INITIALIZED:
    return GPUM_ESTATE;
  case CUDA_ERROR_DEINITIALIZED:
    return GPUM_ESTATE;
  case CUDA_ERROR_STUB_LIBRARY:
    return GPUM_EDRIVER;
  case CUDA_ERROR_NO_DEVICE:
    return GPUM_ENODEV;
  case CUDA_ERROR_INVALID_DEVICE:
    return GPUM_ENODEV;
  case CU_ERR_DEVICE_NOT_LICENSED:
    return GPUM_EPERM;
  case CU_ERR_DEVICE_UNAVAILABLE:
    return GPUM_EBUSY;
  case CUDA_ERROR_INVALID_CONTEXT:
    return GPUM_ESTATE;
  case CU_ERR_CONTEXT_IS_DESTROYED:
    return GPUM_ESTATE;
  case CU_ERR_CONTEXT_ALREADY_IN_USE:
    return GPUM_EBUSY;
  case CU_ERR_ILLEGAL_STATE:
    return GPUM_ESTATE;
  case CUDA_ERROR_ECC_UNCORRECTABLE:
    return GPUM_EIO;
  case CU_ERR_ALREADY_MAPPED:
    return GPUM_EEXIST;
  case CU_ERR_NOT_MAPPED:
    return GPUM_EINVAL;
  case CU_ERR_OPERATING_SYSTEM:
    return GPUM_EIO;
  case CUDA_ERROR_INVALID_HANDLE:
    return GPUM_EINVAL;
  case CUDA_ERROR_NOT_FOUND:
    return GPUM_ENOENT;
  case CUDA_ERROR_NOT_READY:
    return GPUM_EAGAIN;
  case CUDA_ERROR_ILLEGAL_ADDRESS:
    return GPUM_EIO;
  case CU_ERR_LAUNCH_OUT_OF_RESOURCES:
    return GPUM_EDEVOOM;
  case CUDA_ERROR_LAUNCH_FAILED:
    return GPUM_EIO;
  case CUDA_ERROR_NOT_PERMITTED:
    return GPUM_EPERM;
  case CUDA_ERROR_NOT_SUPPORTED:
    return GPUM_ENOTSUP;
  case CU_ERR_SYSTEM_DRIVER_MISMATCH:
    return GPUM_EDRIVERVER;
  case CU_ERR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    return GPUM_EDRIVERVER;
  case CU_ERR_TIMEOUT:
    return GPUM_ETIMEDOUT;
  default:
    return GPUM_EIO;
  }
}

int gpum__cuda_check(const gpum__cuda_t *cu, CUresult r, const char *what) {
  if (r == CUDA_SUCCESS)
    return 0;
  const char *msg = NULL;
  if (cu && cu->cuGetErrorString && cu->cuGetErrorString(r, &msg) != CUDA_SUCCESS)
    msg = NULL;
  if (msg && *msg)
    return gpum_error(gpum__cuda_map_error(r), "%s: %s (%s)", what ? what : "CUDA call",
                      gpum__cuda_error_name(cu, r), msg);
  return gpum_error(gpum__cuda_map_error(r), "%s: %s (%d)", what ? what : "CUDA call",
                    gpum__cuda_error_name(cu, r), (int)r);
}

int gpum_cuda_probe(const char *library, gpum_cuda_probe_t *out) {
  memset(out, 0, sizeof *out);
  gpum__cuda_t *cu = NULL;
  int rc = gpum__cuda_load(library && *library ? library : NULL, &cu);
  if (rc != 0)
    return rc;
  snprintf(out->path, sizeof out->path, "%s", cu->path);
  out->driver_version = cu->driver_version;
  out->simulated = cu->simulated;
  int n = 0;
  rc = gpum__cuda_check(cu, cu->cuDeviceGetCount(&n), "cuDeviceGetCount");
  out->device_count = n;
  gpum__cuda_unload(cu);
  return rc;
}
