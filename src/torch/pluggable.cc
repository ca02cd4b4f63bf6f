// SPDX-License-Identifier: Apache-2.0
//
// libgpum_torch.so: gpum's pool as PyTorch's CUDA allocator, in the form PyTorch's
// CUDAPluggableAllocator can use (gpum/torch.h, docs/python.md). PyTorch does not check what a
// pluggable allocator's malloc returns: a NULL becomes a tensor without memory, and the program
// fails later at an illegal address (seen on an H100: docs/hardware.md). A failure must be a
// C++ exception, which PyTorch turns into a Python RuntimeError; it cannot be
// torch.cuda.OutOfMemoryError, whose C++ type belongs to PyTorch's own library (pytorch/pytorch
// issue 133280). The message begins as PyTorch's own ("CUDA out of memory. Tried to allocate
// 3.00 GiB"), so code that recognises an out-of-memory error by its text (gpum.adaptive,
// Hugging Face accelerate) does, and goes on with the pool's explanation.
#include <cstdint>
#include <stdexcept>
#include <string>

#include <gpum/error.h>
#include <gpum/export.h>
#include <gpum/size.h>
#include <gpum/torch.h>

extern "C" GPUM_API void *gpum_torch_pluggable_malloc(ssize_t size, int device, void *stream) {
  if (size == 0)
    return nullptr; // an empty tensor: PyTorch asks for nothing and frees nothing
  gpum_pool_t *pool = nullptr;
  gpum_devptr_t ptr = 0;
  int rc = size < 0 ? gpum_error(GPUM_EINVAL, "a negative size (%zd bytes)", size)
                    : gpum_torch_pool(device, &pool);
  if (rc == 0)
    rc = gpum_pool_alloc(pool, static_cast<size_t>(size),
                         static_cast<gpum_stream_t>(reinterpret_cast<uintptr_t>(stream)), &ptr);
  if (rc == 0)
    return reinterpret_cast<void *>(static_cast<uintptr_t>(ptr));
  char sz[GPUM_SIZE_BUFSZ];
  gpum_size_format(size < 0 ? 0 : static_cast<uint64_t>(size), sz, sizeof sz);
  std::string msg;
  if (rc == GPUM_EDEVOOM)
    msg = std::string("CUDA out of memory. Tried to allocate ") + sz + " on GPU " +
          std::to_string(device) + ": ";
  else
    msg = std::string("gpum's allocator cannot allocate ") + sz + " on GPU " +
          std::to_string(device) + " (" + gpum_err_name(rc) + "): ";
  msg += gpum_last_error();
  throw std::runtime_error(msg);
}

extern "C" GPUM_API void gpum_torch_pluggable_free(void *ptr, ssize_t size, int device,
                                                   void *stream) {
  gpum_torch_free(ptr, size, device, stream);
}
