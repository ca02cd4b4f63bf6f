/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpum's pool as PyTorch's CUDA allocator. PyTorch takes it through
 * torch.cuda.memory.CUDAPluggableAllocator from libgpum_torch.so, a small C++ library beside
 * libgpum (src/torch/pluggable.cc):
 *
 *   alloc = torch.cuda.memory.CUDAPluggableAllocator("libgpum_torch.so",
 *                                                     "gpum_torch_pluggable_malloc",
 *                                                     "gpum_torch_pluggable_free")
 *   torch.cuda.memory.change_current_allocator(alloc)
 *
 * (gpum.torch.use_gpum_allocator() in the Python package does this). PyTorch does not check a
 * pluggable allocator's result: a NULL would become a tensor with no memory behind it. So
 * gpum_torch_pluggable_malloc reports a failure as a C++ exception (std::runtime_error), which
 * PyTorch raises in Python as RuntimeError("CUDA out of memory. Tried to allocate ...: the
 * pool's explanation"); it cannot be torch.cuda.OutOfMemoryError (pytorch/pytorch#133280).
 * gpum_torch_malloc and gpum_torch_free below are the same allocator for C callers.
 *
 * Each CUDA device gets one gpum pool over cuMemAlloc, made at its first allocation, with the
 * pool's defaults: under gpum run its limit is the reservation (GPUM_MEM_LIMIT), so PyTorch's
 * allocations stop at the reservation, and the pool's caching, trimming under pressure and
 * statistics apply. The pools live as long as the process (PyTorch's allocator does too): this
 * is the one piece of process-wide state in libgpum, as PyTorch's interface requires. The
 * functions are thread-safe.
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

/* size bytes on device for use on stream (a cudaStream_t, which is the driver's CUstream).
 * NULL when it cannot (out of memory against the device or the limit, a bad device, no
 * driver), with the reason as libgpum's error detail (gpum_last_error) of the calling thread.
 * Not for CUDAPluggableAllocator itself (above). */
GPUM_API void *gpum_torch_malloc(ssize_t size, int device, void *stream);
/* Gives ptr back to device's pool (cached there for reuse on stream). */
GPUM_API void gpum_torch_free(void *ptr, ssize_t size, int device, void *stream);
/* The pool serving device (made if needed): for statistics (gpum_pool_stats), trimming, or
 * attaching to a reservation session. 0, or the error that making it gave. */
GPUM_API int gpum_torch_pool(int device, gpum_pool_t **out);

#ifdef __cplusplus
}
#endif

#endif /* GPUM_TORCH_H */
