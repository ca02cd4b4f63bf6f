/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Our own declarations of the CUDA driver API subset gpum uses (shared/research/monitoring.md
 * §2, CUDA 13.0's cuda.h). libgpum dlopens libcuda.so.1 and resolves these names; libgpum_sim.so
 * exports them.
 *
 * Every constant we use and every struct field is listed once, in GPUM_CUDA_CONSTS and
 * GPUM_CUDA_LAYOUT, and our definitions are generated from those lists. The build-time test
 * tests/unit/test_cuda_abi.c includes the real cuda.h (where installed), defines
 * GPUM_CUDA_ABI_USE_SYSTEM_HEADER so that this file takes its types from cuda.h, and then checks
 * each listed constant, offset and size, and each prototype in GPUM_CUDA_FUNCS, against cuda.h.
 */
#ifndef GPUM_CUDA_ABI_H
#define GPUM_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

/* X(name, value): enum constants, by the names cuda.h gives them. */
#define GPUM_CUDA_CONSTS(X)                                               \
  X(CUDA_SUCCESS, 0)                                                      \
  X(CUDA_ERROR_INVALID_VALUE, 1)                                          \
  X(CUDA_ERROR_OUT_OF_MEMORY, 2)                                          \
  X(CUDA_ERROR_NOT_INITIALIZED, 3)                                        \
  X(CUDA_ERROR_DEINITIALIZED, 4)                                          \
  X(CUDA_ERROR_STUB_LIBRARY, 34)                                          \
  X(CUDA_ERROR_NO_DEVICE, 100)                                            \
  X(CUDA_ERROR_INVALID_DEVICE, 101)                                       \
  X(CUDA_ERROR_INVALID_CONTEXT, 201)                                      \
  X(CUDA_ERROR_ECC_UNCORRECTABLE, 214)                                    \
  X(CUDA_ERROR_NOT_FOUND, 500)                                            \
  X(CUDA_ERROR_NOT_READY, 600)                                            \
  X(CUDA_ERROR_INVALID_HANDLE, 400)                                       \
  X(CUDA_ERROR_ILLEGAL_STATE, 401)                                        \
  X(CUDA_ERROR_ILLEGAL_ADDRESS, 700)                                      \
  X(CUDA_ERROR_LAUNCH_FAILED, 719)                                        \
  X(CUDA_ERROR_NOT_PERMITTED, 800)                                        \
  X(CUDA_ERROR_NOT_SUPPORTED, 801)                                        \
  X(CUDA_ERROR_UNKNOWN, 999)                                              \
  X(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 16)                         \
  X(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 19)                          \
  X(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 33)                                   \
  X(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 34)                                \
  X(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 41)                           \
  X(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 50)                                \
  X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 75)                     \
  X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 76)                     \
  X(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 102)         \
  X(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 103) \
  X(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 115)                      \
  X(CU_MEM_ALLOCATION_TYPE_PINNED, 1)                                     \
  X(CU_MEM_HANDLE_TYPE_NONE, 0)                                           \
  X(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1)                          \
  X(CU_IPC_HANDLE_SIZE, 64)                                               \
  X(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, 1)                                \
  X(CU_MEM_LOCATION_TYPE_DEVICE, 1)                                       \
  X(CU_MEM_LOCATION_TYPE_HOST, 2)                                         \
  X(CU_MEM_ACCESS_FLAGS_PROT_NONE, 0)                                     \
  X(CU_MEM_ACCESS_FLAGS_PROT_READ, 1)                                     \
  X(CU_MEM_ACCESS_FLAGS_PROT_READWRITE, 3)                                \
  X(CU_MEM_ALLOC_GRANULARITY_MINIMUM, 0)                                  \
  X(CU_MEM_ALLOC_GRANULARITY_RECOMMENDED, 1)                              \
  X(CU_GET_PROC_ADDRESS_DEFAULT, 0)                                       \
  X(CU_GET_PROC_ADDRESS_SUCCESS, 0)                                       \
  X(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, 1)                              \
  X(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, 2)                        \
  X(CU_GET_PROC_ADDRESS_LEGACY_STREAM, 1)                                 \
  X(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, 2)                     \
  X(CU_MEM_ATTACH_GLOBAL, 1)                                              \
  X(CU_MEM_ATTACH_HOST, 2)                                                \
  X(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 4)                                 \
  X(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, 5)                              \
  X(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 6)                                 \
  X(CU_MEMPOOL_ATTR_USED_MEM_CURRENT, 7)                                  \
  X(CU_MEMPOOL_ATTR_USED_MEM_HIGH, 8)                                     \
  X(CU_STREAM_DEFAULT, 0)                                                 \
  X(CU_STREAM_NON_BLOCKING, 1)                                            \
  X(CU_EVENT_DEFAULT, 0)                                                  \
  X(CU_EVENT_DISABLE_TIMING, 2)                                           \
  X(CU_MEMHOSTALLOC_PORTABLE, 1)                                          \
  X(CU_PROCESS_STATE_RUNNING, 0)                                          \
  X(CU_PROCESS_STATE_LOCKED, 1)                                           \
  X(CU_PROCESS_STATE_CHECKPOINTED, 2)                                     \
  X(CU_PROCESS_STATE_FAILED, 3)

/* X(type, field, offset) and sizes: the layouts we declare, as the fact sheet gives them. */
#define GPUM_CUDA_LAYOUT(X)                       \
  X(CUmemLocation, type, 0)                       \
  X(CUmemLocation, id, 4)                         \
  X(CUmemAllocationProp, type, 0)                 \
  X(CUmemAllocationProp, requestedHandleTypes, 4) \
  X(CUmemAllocationProp, location, 8)             \
  X(CUmemAllocationProp, win32HandleMetaData, 16) \
  X(CUmemAllocationProp, allocFlags, 24)          \
  X(CUmemAccessDesc, location, 0)                 \
  X(CUmemAccessDesc, flags, 8)                    \
  X(CUuuid, bytes, 0)                             \
  X(CUmemPoolProps, allocType, 0)                 \
  X(CUmemPoolProps, handleTypes, 4)               \
  X(CUmemPoolProps, location, 8)                  \
  X(CUmemPoolProps, win32SecurityAttributes, 16)  \
  X(CUmemPoolProps, maxSize, 24)                  \
  X(CUmemPoolProps, usage, 32)                    \
  X(CUmemPoolProps, reserved, 34)                 \
  X(CUcheckpointLockArgs, timeoutMs, 0)           \
  X(CUcheckpointLockArgs, reserved0, 4)           \
  X(CUcheckpointLockArgs, reserved1, 8)           \
  X(CUcheckpointGpuPair, oldUuid, 0)              \
  X(CUcheckpointGpuPair, newUuid, 16)             \
  X(CUcheckpointRestoreArgs, gpuPairs, 0)         \
  X(CUcheckpointRestoreArgs, gpuPairsCount, 8)    \
  X(CUcheckpointRestoreArgs, reserved, 12)        \
  X(CUcheckpointRestoreArgs, reserved1, 56)       \
  X(CUipcMemHandle, reserved, 0)
#define GPUM_CUDA_SIZES(X)           \
  X(CUmemLocation, 8)                \
  X(CUmemAllocationProp, 32)         \
  X(CUmemAccessDesc, 12)             \
  X(CUmemPoolProps, 88)              \
  X(CUuuid, 16)                      \
  X(CUresult, 4)                     \
  X(CUdevice, 4)                     \
  X(CUdeviceptr, 8)                  \
  X(CUmemGenericAllocationHandle, 8) \
  X(CUprocessState, 4)               \
  X(CUcheckpointLockArgs, 64)        \
  X(CUcheckpointCheckpointArgs, 64)  \
  X(CUcheckpointGpuPair, 32)         \
  X(CUcheckpointRestoreArgs, 64)     \
  X(CUcheckpointUnlockArgs, 64)      \
  X(CUipcMemHandle, 64)              \
  X(CUmemAllocationHandleType, 4)

#ifndef GPUM_CUDA_ABI_USE_SYSTEM_HEADER

#define GPUM__CUDA_ENUM(name, value) name = (value),
enum { GPUM_CUDA_CONSTS(GPUM__CUDA_ENUM) };
#undef GPUM__CUDA_ENUM

typedef int CUresult; /* an enum in cuda.h: 4 bytes, all values non-negative */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef uint64_t cuuint64_t;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef int CUmemPool_attribute;
typedef int CUdevice_attribute;
typedef int CUmemAllocationGranularity_flags;
typedef int CUdriverProcAddressQueryResult;
typedef int CUmemAllocationHandleType; /* CU_MEM_HANDLE_TYPE_*: an enum in cuda.h */

/* Memory exported to another process (cuIpcGetMemHandle), passed by value: opaque. */
typedef struct {
  char reserved[64]; /* CU_IPC_HANDLE_SIZE */
} CUipcMemHandle;

typedef struct {
  char bytes[16];
} CUuuid;

typedef struct {
  int type; /* CU_MEM_LOCATION_TYPE_* */
  int id;
} CUmemLocation;

typedef struct {
  int type;                 /* CU_MEM_ALLOCATION_TYPE_PINNED */
  int requestedHandleTypes; /* CU_MEM_HANDLE_TYPE_* */
  CUmemLocation location;
  void *win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags; /* zero it */
} CUmemAllocationProp;

typedef struct {
  CUmemLocation location;
  int flags; /* CU_MEM_ACCESS_FLAGS_PROT_* */
} CUmemAccessDesc;

typedef struct {
  int allocType;   /* CU_MEM_ALLOCATION_TYPE_PINNED */
  int handleTypes; /* CU_MEM_HANDLE_TYPE_* */
  CUmemLocation location;
  void *win32SecurityAttributes;
  size_t maxSize; /* 0: the system's default */
  unsigned short usage;
  unsigned char reserved[54]; /* zero it */
} CUmemPoolProps;

/* The checkpoint API (CUDA 12.8, group CUDA_CHECKPOINT; docs/sim.md "Checkpoint and
 * restore"). Every reserved field must be zero. */
typedef int CUprocessState; /* CU_PROCESS_STATE_*: an enum in cuda.h */

typedef struct {
  unsigned int timeoutMs; /* 0: no timeout */
  unsigned int reserved0;
  cuuint64_t reserved1[7];
} CUcheckpointLockArgs;

typedef struct {
  cuuint64_t reserved[8];
} CUcheckpointCheckpointArgs;

typedef struct {
  CUuuid oldUuid; /* the GPU that was checkpointed */
  CUuuid newUuid; /* the GPU to restore onto */
} CUcheckpointGpuPair;

typedef struct {
  CUcheckpointGpuPair *gpuPairs; /* NULL: restore onto the same GPUs */
  unsigned int gpuPairsCount;
  char reserved[52 - sizeof(CUcheckpointGpuPair *)];
  cuuint64_t reserved1;
} CUcheckpointRestoreArgs;

typedef struct {
  cuuint64_t reserved[8];
} CUcheckpointUnlockArgs;

#define GPUM__CUDA_OFF(type, field, off) \
  _Static_assert(offsetof(type, field) == (off), #type "." #field);
GPUM_CUDA_LAYOUT(GPUM__CUDA_OFF)
#undef GPUM__CUDA_OFF
#define GPUM__CUDA_SIZE(type, size) _Static_assert(sizeof(type) == (size), "sizeof " #type);
GPUM_CUDA_SIZES(GPUM__CUDA_SIZE)
#undef GPUM__CUDA_SIZE

#endif /* !GPUM_CUDA_ABI_USE_SYSTEM_HEADER */

/*
 * Prototypes, by the versioned names libcuda.so.1 exports (cuda.h #defines the plain names to
 * these). X(name, params); every function returns CUresult.
 */
#define GPUM_CUDA_FUNCS(X)                                                                        \
  X(cuInit, (unsigned int Flags))                                                                 \
  X(cuDriverGetVersion, (int *driverVersion))                                                     \
  X(cuGetErrorName, (CUresult error, const char **pStr))                                          \
  X(cuGetErrorString, (CUresult error, const char **pStr))                                        \
  X(cuGetProcAddress_v2, (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,      \
                          CUdriverProcAddressQueryResult *symbolStatus))                          \
  X(cuDeviceGetCount, (int *count))                                                               \
  X(cuDeviceGet, (CUdevice * device, int ordinal))                                                \
  X(cuDeviceGetName, (char *name, int len, CUdevice dev))                                         \
  X(cuDeviceGetUuid_v2, (CUuuid * uuid, CUdevice dev))                                            \
  X(cuDeviceTotalMem_v2, (size_t * bytes, CUdevice dev))                                          \
  X(cuDeviceGetAttribute, (int *pi, CUdevice_attribute attrib, CUdevice dev))                     \
  X(cuDeviceGetPCIBusId, (char *pciBusId, int len, CUdevice dev))                                 \
  X(cuDevicePrimaryCtxRetain, (CUcontext * pctx, CUdevice dev))                                   \
  X(cuDevicePrimaryCtxRelease_v2, (CUdevice dev))                                                 \
  X(cuCtxSetCurrent, (CUcontext ctx))                                                             \
  X(cuCtxGetCurrent, (CUcontext * pctx))                                                          \
  X(cuCtxGetDevice, (CUdevice * device))                                                          \
  X(cuCtxSynchronize, (void))                                                                     \
  X(cuMemAlloc_v2, (CUdeviceptr * dptr, size_t bytesize))                                         \
  X(cuMemFree_v2, (CUdeviceptr dptr))                                                             \
  X(cuMemGetInfo_v2, (size_t * free, size_t * total))                                             \
  X(cuMemGetAddressRange_v2, (CUdeviceptr * pbase, size_t * psize, CUdeviceptr dptr))             \
  X(cuMemAllocPitch_v2, (CUdeviceptr * dptr, size_t * pPitch, size_t WidthInBytes, size_t Height, \
                         unsigned int ElementSizeBytes))                                          \
  X(cuMemAllocManaged, (CUdeviceptr * dptr, size_t bytesize, unsigned int flags))                 \
  X(cuMemAllocAsync, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream))                     \
  X(cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream))                                         \
  X(cuMemAllocFromPoolAsync,                                                                      \
    (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream))                   \
  X(cuDeviceGetDefaultMemPool, (CUmemoryPool * pool_out, CUdevice dev))                           \
  X(cuDeviceGetMemPool, (CUmemoryPool * pool, CUdevice dev))                                      \
  X(cuMemPoolCreate, (CUmemoryPool * pool, const CUmemPoolProps *poolProps))                      \
  X(cuMemPoolDestroy, (CUmemoryPool pool))                                                        \
  X(cuMemPoolTrimTo, (CUmemoryPool pool, size_t minBytesToKeep))                                  \
  X(cuMemPoolSetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value))            \
  X(cuMemPoolGetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value))            \
  X(cuMemcpyHtoD_v2, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount))              \
  X(cuMemcpyDtoH_v2, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount))                    \
  X(cuMemcpyDtoD_v2, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount))            \
  X(cuMemcpyHtoDAsync_v2,                                                                         \
    (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream))             \
  X(cuMemcpyDtoHAsync_v2,                                                                         \
    (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream))                   \
  X(cuMemsetD8_v2, (CUdeviceptr dstDevice, unsigned char uc, size_t N))                           \
  X(cuMemAllocHost_v2, (void **pp, size_t bytesize))                                              \
  X(cuMemHostAlloc, (void **pp, size_t bytesize, unsigned int Flags))                             \
  X(cuMemFreeHost, (void *p))                                                                     \
  X(cuMemAddressReserve, (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr,     \
                          unsigned long long flags))                                              \
  X(cuMemAddressFree, (CUdeviceptr ptr, size_t size))                                             \
  X(cuMemCreate, (CUmemGenericAllocationHandle * handle, size_t size,                             \
                  const CUmemAllocationProp *prop, unsigned long long flags))                     \
  X(cuMemRelease, (CUmemGenericAllocationHandle handle))                                          \
  X(cuMemMap, (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,  \
               unsigned long long flags))                                                         \
  X(cuMemUnmap, (CUdeviceptr ptr, size_t size))                                                   \
  X(cuMemSetAccess, (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count))    \
  X(cuMemGetAllocationGranularity, (size_t * granularity, const CUmemAllocationProp *prop,        \
                                    CUmemAllocationGranularity_flags option))                     \
  X(cuMemExportToShareableHandle,                                                                 \
    (void *shareableHandle, CUmemGenericAllocationHandle handle,                                  \
     CUmemAllocationHandleType handleType, unsigned long long flags))                             \
  X(cuMemImportFromShareableHandle, (CUmemGenericAllocationHandle * handle, void *osHandle,       \
                                     CUmemAllocationHandleType shHandleType))                     \
  X(cuMemPoolExportToShareableHandle,                                                             \
    (void *handle_out, CUmemoryPool pool, CUmemAllocationHandleType handleType,                   \
     unsigned long long flags))                                                                   \
  X(cuMemPoolImportFromShareableHandle,                                                           \
    (CUmemoryPool * pool_out, void *handle, CUmemAllocationHandleType handleType,                 \
     unsigned long long flags))                                                                   \
  X(cuIpcGetMemHandle, (CUipcMemHandle * pHandle, CUdeviceptr dptr))                              \
  X(cuIpcOpenMemHandle_v2, (CUdeviceptr * pdptr, CUipcMemHandle handle, unsigned int Flags))      \
  X(cuStreamCreate, (CUstream * phStream, unsigned int Flags))                                    \
  X(cuStreamDestroy_v2, (CUstream hStream))                                                       \
  X(cuStreamSynchronize, (CUstream hStream))                                                      \
  X(cuStreamWaitEvent, (CUstream hStream, CUevent hEvent, unsigned int Flags))                    \
  X(cuEventCreate, (CUevent * phEvent, unsigned int Flags))                                       \
  X(cuEventRecord, (CUevent hEvent, CUstream hStream))                                            \
  X(cuEventQuery, (CUevent hEvent))                                                               \
  X(cuEventSynchronize, (CUevent hEvent))                                                         \
  X(cuEventElapsedTime, (float *pMilliseconds, CUevent hStart, CUevent hEnd))                     \
  X(cuEventDestroy_v2, (CUevent hEvent))                                                          \
  X(cuCheckpointProcessGetRestoreThreadId, (int pid, int *tid))                                   \
  X(cuCheckpointProcessGetState, (int pid, CUprocessState *state))                                \
  X(cuCheckpointProcessLock, (int pid, CUcheckpointLockArgs *args))                               \
  X(cuCheckpointProcessCheckpoint, (int pid, CUcheckpointCheckpointArgs *args))                   \
  X(cuCheckpointProcessRestore, (int pid, CUcheckpointRestoreArgs *args))                         \
  X(cuCheckpointProcessUnlock, (int pid, CUcheckpointUnlockArgs *args))

/*
 * Entry points cuda.h declares only under other names: the per-thread-default-stream variants
 * (cuda.h names them with CUDA_API_PER_THREAD_DEFAULT_STREAM) and the CUDA 11.3 cuGetProcAddress
 * (legacy section). X(name, cudaTypedefs.h's PFN type, params); the ABI check compares each with
 * that PFN type.
 */
#define GPUM_CUDA_FUNCS_OTHER(X)                                                               \
  X(cuMemAllocAsync_ptsz, PFN_cuMemAllocAsync_v11020_ptsz,                                     \
    (CUdeviceptr * dptr, size_t bytesize, CUstream hStream))                                   \
  X(cuMemFreeAsync_ptsz, PFN_cuMemFreeAsync_v11020_ptsz, (CUdeviceptr dptr, CUstream hStream)) \
  X(cuMemAllocFromPoolAsync_ptsz, PFN_cuMemAllocFromPoolAsync_v11020_ptsz,                     \
    (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream))                \
  X(cuGetProcAddress, PFN_cuGetProcAddress_v11030,                                             \
    (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags))

/* Function-pointer typedefs: gpum_<name>_fn. */
#define GPUM__CUDA_TYPEDEF(name, params) typedef CUresult(*gpum_##name##_fn) params;
GPUM_CUDA_FUNCS(GPUM__CUDA_TYPEDEF)
#undef GPUM__CUDA_TYPEDEF
#define GPUM__CUDA_TYPEDEF_OTHER(name, pfn, params) typedef CUresult(*gpum_##name##_fn) params;
GPUM_CUDA_FUNCS_OTHER(GPUM__CUDA_TYPEDEF_OTHER)
#undef GPUM__CUDA_TYPEDEF_OTHER

#endif /* GPUM_CUDA_ABI_H */
