/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Our own declarations of the HIP runtime subset gpum uses (libamdhip64.so.5): the calls the
 * enforcement shim wraps (src/enforce/hooks_hip.c) and the simulator exports (src/sim/hip.c),
 * so that neither needs hip/hip_runtime_api.h to build.
 *
 * Every constant is listed once, in GPUM_HIP_CONSTS, every struct field in GPUM_HIP_LAYOUT and
 * every size in GPUM_HIP_SIZES; our definitions are generated from those lists.
 * tests/abi/check_hip_abi.c (built where Debian's libamdhip64-dev installs
 * hip/hip_runtime_api.h, compiled as C with -D__HIP_PLATFORM_AMD__) defines
 * GPUM_HIP_ABI_USE_SYSTEM_HEADER so that this file takes its types from the real header, then
 * checks each listed constant, offset and size and each prototype of GPUM_HIP_FUNCS against it.
 *
 * hipError_t is an int-sized enum in the real header; it is spelled int here. The opaque
 * handles (streams, pools) are pointers to incomplete structs of the header's tags.
 */
#ifndef GPUM_HIP_ABI_H
#define GPUM_HIP_ABI_H

#include <stddef.h>
#include <stdint.h>

/* X(name, value): the constants we use, by hip_runtime_api.h's names. */
#define GPUM_HIP_CONSTS(X)           \
  X(hipSuccess, 0)                   \
  X(hipErrorInvalidValue, 1)         \
  X(hipErrorOutOfMemory, 2)          \
  X(hipErrorNotInitialized, 3)       \
  X(hipErrorDeinitialized, 4)        \
  X(hipErrorNoDevice, 100)           \
  X(hipErrorInvalidDevice, 101)      \
  X(hipErrorInvalidContext, 201)     \
  X(hipErrorECCNotCorrectable, 214)  \
  X(hipErrorInvalidHandle, 400)      \
  X(hipErrorNotFound, 500)           \
  X(hipErrorNotSupported, 801)       \
  X(hipErrorUnknown, 999)            \
  X(hipMemAttachGlobal, 0x01)        \
  X(hipMemAttachHost, 0x02)          \
  X(hipMemAttachSingle, 0x04)        \
  X(hipDeviceMallocDefault, 0x0)     \
  X(hipDeviceMallocFinegrained, 0x1) \
  X(hipMallocSignalMemory, 0x2)      \
  X(hipHostMallocDefault, 0x0)       \
  X(hipHostMallocPortable, 0x1)      \
  X(hipHostMallocMapped, 0x2)        \
  X(hipHostMallocWriteCombined, 0x4) \
  X(hipMemcpyHostToHost, 0)          \
  X(hipMemcpyHostToDevice, 1)        \
  X(hipMemcpyDeviceToHost, 2)        \
  X(hipMemcpyDeviceToDevice, 3)      \
  X(hipMemcpyDefault, 4)

/* X(type, field, offset): every field of the structs we use, LP64. */
#define GPUM_HIP_LAYOUT(X) \
  X(hipUUID, bytes, 0)     \
  X(hipIpcMemHandle_t, reserved, 0)

/* X(type, size): the structs and the enums as they are passed. */
#define GPUM_HIP_SIZES(X) \
  X(hipUUID, 16)          \
  X(hipError_t, 4)        \
  X(hipMemcpyKind, 4)     \
  X(hipDevice_t, 4)       \
  X(hipIpcMemHandle_t, 64)

#ifndef GPUM_HIP_ABI_USE_SYSTEM_HEADER

#define GPUM__HIP_ENUM(name, value) name = (value),
enum { GPUM_HIP_CONSTS(GPUM__HIP_ENUM) };
#undef GPUM__HIP_ENUM
/* hipErrorMemoryAllocation is the older name of hipErrorOutOfMemory (both 2). */

typedef int hipError_t;
typedef int hipDevice_t;
typedef int hipMemcpyKind;
typedef struct ihipStream_t *hipStream_t;
typedef struct ihipMemPoolHandle_t *hipMemPool_t;

typedef struct hipUUID_t {
  char bytes[16]; /* the 16 hex digits after "GPU-" of ROCm's unique id, not NUL-terminated */
} hipUUID;

/* Memory exported to another process (hipIpcGetMemHandle), passed by value: opaque. */
typedef struct hipIpcMemHandle_st {
  char reserved[64]; /* HIP_IPC_HANDLE_SIZE */
} hipIpcMemHandle_t;

#if defined(__LP64__)
#define GPUM__HIP_OFF(type, field, off) \
  _Static_assert(offsetof(type, field) == (off), "offset of " #type "." #field);
GPUM_HIP_LAYOUT(GPUM__HIP_OFF)
#undef GPUM__HIP_OFF
#define GPUM__HIP_SIZE(type, size) _Static_assert(sizeof(type) == (size), "sizeof " #type);
GPUM_HIP_SIZES(GPUM__HIP_SIZE)
#undef GPUM__HIP_SIZE
#endif

#endif /* !GPUM_HIP_ABI_USE_SYSTEM_HEADER */

/* The runtime version the simulator reports (hipRuntimeGetVersion: HIP_VERSION of Debian's
 * 5.2.3, HIP 5.2.21153: major * 10000000 + minor * 100000 + patch). */
#define GPUM_HIP_SIM_VERSION 50221153

/* X(name, params): the functions returning hipError_t. */
#define GPUM_HIP_FUNCS(X)                                                               \
  X(hipInit, (unsigned int flags))                                                      \
  X(hipRuntimeGetVersion, (int *runtimeVersion))                                        \
  X(hipGetDeviceCount, (int *count))                                                    \
  X(hipSetDevice, (int deviceId))                                                       \
  X(hipGetDevice, (int *deviceId))                                                      \
  X(hipDeviceGetUuid, (hipUUID * uuid, hipDevice_t device))                             \
  X(hipDeviceTotalMem, (size_t * bytes, hipDevice_t device))                            \
  X(hipMemGetInfo, (size_t * free, size_t * total))                                     \
  X(hipMalloc, (void **ptr, size_t size))                                               \
  X(hipExtMallocWithFlags, (void **ptr, size_t sizeBytes, unsigned int flags))          \
  X(hipMallocManaged, (void **dev_ptr, size_t size, unsigned int flags))                \
  X(hipMallocPitch, (void **ptr, size_t *pitch, size_t width, size_t height))           \
  X(hipMallocAsync, (void **dev_ptr, size_t size, hipStream_t stream))                  \
  X(hipMallocFromPoolAsync,                                                             \
    (void **dev_ptr, size_t size, hipMemPool_t mem_pool, hipStream_t stream))           \
  X(hipDeviceGetDefaultMemPool, (hipMemPool_t * mem_pool, int device))                  \
  X(hipFree, (void *ptr))                                                               \
  X(hipFreeAsync, (void *dev_ptr, hipStream_t stream))                                  \
  X(hipHostMalloc, (void **ptr, size_t size, unsigned int flags))                       \
  X(hipHostFree, (void *ptr))                                                           \
  X(hipMemcpy, (void *dst, const void *src, size_t sizeBytes, hipMemcpyKind kind))      \
  X(hipIpcGetMemHandle, (hipIpcMemHandle_t * handle, void *devPtr))                     \
  X(hipIpcOpenMemHandle, (void **devPtr, hipIpcMemHandle_t handle, unsigned int flags)) \
  X(hipDeviceSynchronize, (void))                                                       \
  X(hipGetLastError, (void))

/* X(name, params): the functions returning const char *. */
#define GPUM_HIP_FUNCS_STR(X)                \
  X(hipGetErrorName, (hipError_t hip_error)) \
  X(hipGetErrorString, (hipError_t hipError))

#define GPUM__HIP_FN(name, params) typedef hipError_t(*gpum_##name##_fn) params;
GPUM_HIP_FUNCS(GPUM__HIP_FN)
#undef GPUM__HIP_FN
#define GPUM__HIP_FN_STR(name, params) typedef const char *(*gpum_##name##_fn)params;
GPUM_HIP_FUNCS_STR(GPUM__HIP_FN_STR)
#undef GPUM__HIP_FN_STR

#endif /* GPUM_HIP_ABI_H */
