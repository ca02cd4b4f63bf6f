/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A driver on which sharing memory with another process succeeds, for test_enforce_used.sh:
 * preloaded after the enforcement shim (LD_PRELOAD="shim ipc_peer.so"), so that the shim's real
 * entry points for these calls are these, and the other calls reach the simulated driver. The
 * simulator maps no memory into another process and offers no shareable handles
 * (src/sim/cuda_ipc.c), so without this the shim's marking on success of these calls could not
 * be seen. Each call checks what the program passed and answers with a value the program
 * checks, so that the test also sees the shim pass both through unchanged:
 *   cuIpcOpenMemHandle_v2, hipIpcOpenMemHandle: a handle of 64 'P' bytes (else
 *     CUDA_ERROR_INVALID_HANDLE / hipErrorInvalidHandle) gives the pointer 0x5ee0000;
 *   cuMemExportToShareableHandle, cuMemPoolExportToShareableHandle: a POSIX file descriptor
 *     (handle type 1, flags 0; else CUDA_ERROR_INVALID_VALUE) is 42;
 *   cuMemImportFromShareableHandle, cuMemPoolImportFromShareableHandle: from descriptor 42
 *     (else CUDA_ERROR_INVALID_VALUE), the allocation handle 0xabc / the pool 0xabc.
 */
#include <stdint.h>

#include "cuda_abi.h"
#include "hip_abi.h"

#define PEER_PTR 0x5ee0000ULL
#define PEER_FD 42
#define PEER_HANDLE 0xabcULL

#define EXPORT __attribute__((visibility("default")))

static int is_peer_handle(const char *b) {
  for (int i = 0; i < 64; i++)
    if (b[i] != 'P')
      return 0;
  return 1;
}

EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                      unsigned int Flags) {
  if (!pdptr || Flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
    return CUDA_ERROR_INVALID_VALUE;
  if (!is_peer_handle(handle.reserved))
    return CUDA_ERROR_INVALID_HANDLE;
  *pdptr = PEER_PTR;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemExportToShareableHandle(void *shareableHandle,
                                             CUmemGenericAllocationHandle handle,
                                             CUmemAllocationHandleType handleType,
                                             unsigned long long flags) {
  if (!shareableHandle || handle == 0 || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
      flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  *(int *)shareableHandle = PEER_FD;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                               CUmemAllocationHandleType shHandleType) {
  if (!handle || (intptr_t)osHandle != PEER_FD ||
      shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return CUDA_ERROR_INVALID_VALUE;
  *handle = PEER_HANDLE;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
                                                 CUmemAllocationHandleType handleType,
                                                 unsigned long long flags) {
  if (!handle_out || !pool || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  *(int *)handle_out = PEER_FD;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
                                                   CUmemAllocationHandleType handleType,
                                                   unsigned long long flags) {
  if (!pool_out || (intptr_t)handle != PEER_FD ||
      handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  *pool_out = (CUmemoryPool)(uintptr_t)PEER_HANDLE;
  return CUDA_SUCCESS;
}

EXPORT hipError_t hipIpcOpenMemHandle(void **devPtr, hipIpcMemHandle_t handle, unsigned int flags) {
  (void)flags;
  if (!devPtr)
    return hipErrorInvalidValue;
  if (!is_peer_handle(handle.reserved))
    return hipErrorInvalidHandle;
  *devPtr = (void *)(uintptr_t)PEER_PTR;
  return hipSuccess;
}
