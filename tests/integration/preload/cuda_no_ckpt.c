/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A CUDA driver from before the checkpoint API (CUDA 12.4), for test_ckpt_lib.sh: it exports
 * every function of cuda_abi.h but the cuCheckpointProcess* ones, so that libgpum's loader
 * takes it (GPUM_CUDA_LIBRARY) and gpum_ckpt_open meets a driver without them. cuInit and
 * cuDriverGetVersion answer; every other call returns CUDA_ERROR_NOT_SUPPORTED (none is made).
 */
#include "cuda_abi.h"

/* The checkpoint calls get other names, so that this driver does not export them. */
#define cuCheckpointProcessGetRestoreThreadId old_driver_lacks_GetRestoreThreadId
#define cuCheckpointProcessGetState old_driver_lacks_GetState
#define cuCheckpointProcessLock old_driver_lacks_Lock
#define cuCheckpointProcessCheckpoint old_driver_lacks_Checkpoint
#define cuCheckpointProcessRestore old_driver_lacks_Restore
#define cuCheckpointProcessUnlock old_driver_lacks_Unlock

#pragma GCC diagnostic ignored "-Wunused-parameter"
#define STUB(name, params)           \
  CUresult name params;              \
  CUresult name params {             \
    return CUDA_ERROR_NOT_SUPPORTED; \
  }
#define cuInit stub_cuInit
#define cuDriverGetVersion stub_cuDriverGetVersion
GPUM_CUDA_FUNCS(STUB) // NOLINT(misc-unused-parameters): stubs ignore their arguments
#undef cuInit
#undef cuDriverGetVersion

CUresult cuInit(unsigned flags);
CUresult cuInit(unsigned flags) {
  (void)flags;
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version);
CUresult cuDriverGetVersion(int *version) {
  *version = 12040;
  return CUDA_SUCCESS;
}
