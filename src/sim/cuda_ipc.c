/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory shared between processes, as far as the simulated CUDA driver goes (docs/sim.md,
 * "Limitations"): its device memory is private to the process that allocated it, so nothing
 * can be mapped into another process.
 *
 * cuIpcGetMemHandle works as cuda.h documents it: the base of a cuMemAlloc_v2 allocation of the
 * calling process (not managed memory, not a pool's) gets a handle, anything else
 * CUDA_ERROR_INVALID_VALUE. cuIpcOpenMemHandle_v2 checks its arguments and the handle, refuses
 * a handle of the calling process itself with CUDA_ERROR_INVALID_CONTEXT (what the real driver
 * answers, though cuda.h does not say it), and answers CUDA_ERROR_NOT_SUPPORTED for a handle of
 * another process: that mapping is not simulated. The shareable-handle calls (VMM allocations
 * and pools: cuMemExportToShareableHandle, ...) check their arguments and answer
 * CUDA_ERROR_NOT_SUPPORTED, as the device's HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
 * attribute (0) says.
 */
#include <string.h>
#include <unistd.h>

#include "sim_internal.h"

#define IPC_MAGIC 0x3143504953505047ULL /* "GPPSIPC1" little-endian */

_Static_assert(sizeof(struct ipc_handle) == sizeof(CUipcMemHandle), "an IPC handle's size");

CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr) {
  GPUM__SIM_CU_ENTRY(pHandle != NULL, GPUM__SIM_CU_CTX);
  struct ipc_handle h = {.magic = IPC_MAGIC, .ptr = dptr, .pid = (uint32_t)getpid()};
  if (!gpum__sim_cu_ipc_exportable(dptr, &h.size, &h.simdev))
    return CUDA_ERROR_INVALID_VALUE;
  memcpy(pHandle, &h, sizeof h);
  return CUDA_SUCCESS;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags) {
  GPUM__SIM_CU_ENTRY(pdptr != NULL && (Flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == 0,
                     GPUM__SIM_CU_CTX);
  struct ipc_handle h;
  memcpy(&h, &handle, sizeof h);
  if (h.magic != IPC_MAGIC || h.ptr == 0 || h.size == 0 || h.pid == 0)
    return CUDA_ERROR_INVALID_HANDLE;
  if (h.pid == (uint32_t)getpid())
    return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType,
                                      unsigned long long flags) {
  (void)handle;
  (void)handleType;
  GPUM__SIM_CU_ENTRY(shareableHandle != NULL && flags == 0, GPUM__SIM_CU_INIT);
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                        CUmemAllocationHandleType shHandleType) {
  (void)osHandle;
  (void)shHandleType;
  GPUM__SIM_CU_ENTRY(handle != NULL, GPUM__SIM_CU_INIT);
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
                                          CUmemAllocationHandleType handleType,
                                          unsigned long long flags) {
  (void)handleType;
  GPUM__SIM_CU_ENTRY(handle_out != NULL && pool != NULL && flags == 0, GPUM__SIM_CU_INIT);
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
                                            CUmemAllocationHandleType handleType,
                                            unsigned long long flags) {
  (void)handleType;
  GPUM__SIM_CU_ENTRY(pool_out != NULL && handle != NULL && flags == 0, GPUM__SIM_CU_INIT);
  return CUDA_ERROR_NOT_SUPPORTED;
}
