/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpum's pool as PyTorch's CUDA allocator (gpum/torch.h): one pool per CUDA device over the
 * cuMemAlloc source, made at the device's first allocation and kept for the process's life.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <gpum/error.h>
#include <gpum/torch.h>

#define MAX_DEVICES 64

static pthread_mutex_t make_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(gpum_pool_t *) pools[MAX_DEVICES];
static gpum_pool_source_t *sources[MAX_DEVICES];

int gpum_torch_pool(int device, gpum_pool_t **out) {
  if (device < 0 || device >= MAX_DEVICES)
    return gpum_error(GPUM_ENODEV, "CUDA device %d is not one gpum's allocator serves (0-%d)",
                      device, MAX_DEVICES - 1);
  gpum_pool_t *p = atomic_load_explicit(&pools[device], memory_order_acquire);
  int rc = 0;
  if (!p) {
    pthread_mutex_lock(&make_mu);
    p = atomic_load(&pools[device]);
    if (!p) {
      gpum_pool_opts_t o;
      gpum_pool_opts_init(&o);
      o.device = device;
      o.name = "torch";
      rc = sources[device] ? 0 : gpum_pool_source_cuda(device, &sources[device]);
      if (rc == 0 && (rc = gpum_pool_create(sources[device], &o, &p)) == 0)
        atomic_store_explicit(&pools[device], p, memory_order_release);
    }
    pthread_mutex_unlock(&make_mu);
  }
  if (rc == 0)
    *out = p;
  return rc;
}

void *gpum_torch_malloc(ssize_t size, int device, void *stream) {
  gpum_pool_t *p;
  gpum_devptr_t ptr = 0;
  if (size <= 0) {
    gpum_error(GPUM_EINVAL, "gpum_torch_malloc: size %zd", size);
    return NULL;
  }
  if (gpum_torch_pool(device, &p) != 0 ||
      gpum_pool_alloc(p, (size_t)size, (gpum_stream_t)(uintptr_t)stream, &ptr) != 0)
    return NULL;
  return (void *)(uintptr_t)ptr;
}

void gpum_torch_free(void *ptr, ssize_t size, int device, void *stream) {
  (void)size, (void)stream; /* the pool knows the block's size and streams */
  gpum_pool_t *p;
  if (ptr && gpum_torch_pool(device, &p) == 0)
    gpum_pool_free(p, (gpum_devptr_t)(uintptr_t)ptr);
}
