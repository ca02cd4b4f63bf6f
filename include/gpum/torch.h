/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpum's pool as PyTorch's CUDA allocator: the two functions that
 * torch.cuda.memory.CUDAPluggableAllocator loads from libgpum.so,
 *
 *   alloc = torch.cuda.memory.CUDAPluggableAllocator("libgpum.so", "gpum_torch_malloc",
 *                                                     "gpum_torch_free")
 *   torch.cuda.memory.change_current_allocator(alloc)
 *
 * (gpum.torch.use_gpum_allocator() in the Python package does this). Each CUDA device gets one
 * gpum pool over cuMemAlloc, made at its first allocation, with the pool's defaults: under
 * gpum run its limit is the reservation (GPUM_MEM_LIMIT), so PyTorch's allocations stop at the
 * reservation with PyTorch's own out-of-memory error, and the pool's caching, trimming under
 * pressure and statistics apply. The pools live as long as the process (PyTorch's allocator
 * does too): this is the one piece of process-wide state in libgpum, as PyTorch's interface
 * requires. Both functions are thread-safe.
 */
#ifndef GPUM_TORCH_H
#define GPUM_TORCH_H

#include <stddef.h>
#include <sys/types.h>

#include <gpum/export.h>
#include <gpum/pool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* PyTorch's malloc: size bytes on device for use on stream (a cudaStream_t, which is the
 * driver's CUstream). NULL when it cannot (out of memory against the device or the limit, a
 * bad device, no driver): PyTorch then frees its cache, retries, and raises its out-of-memory
 * error. The reason is kept as libgpum's error detail (gpum_last_error) of the calling
 * thread. */
GPUM_API void *gpum_torch_malloc(ssize_t size, int device, void *stream);
/* PyTorch's free: gives ptr back to device's pool (cached there for reuse on stream). */
GPUM_API void gpum_torch_free(void *ptr, ssize_t size, int device, void *stream);
/* The pool serving device (made if needed): for statistics (gpum_pool_stats), trimming, or
 * attaching to a reservation session. 0, or the error that making it gave. */
GPUM_API int gpum_torch_pool(int device, gpum_pool_t **out);

#ifdef __cplusplus
}
#endif

#endif /* GPUM_TORCH_H */
