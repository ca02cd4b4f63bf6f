/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device and pinned host memory of the simulated CUDA driver.
 *
 * cuMemAlloc_v2 maps private anonymous memory (MAP_NORESERVE: only the pages written use host
 * RAM) in the calling process and returns its address as the CUdeviceptr, so that cuMemcpy* and
 * cuMemsetD8 really copy. The allocation is accounted in the node's table under the caller's
 * pid and device: capacity is enforced against what every process holds plus the driver's
 * reserve, and the injected fail-after budget is spent here.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim_internal.h"

/* Checks and spends capacity for size bytes on dev (lock held). */
static CUresult take_capacity(struct gpum__sim_node *n, unsigned dev, uint64_t size) {
  struct gpum__sim_dev_state *d = &n->dev[dev];
  gpum__sim_reap(n);
  if (d->fail_after_set && size > d->fail_after_left)
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (size > gpum__sim_free(n, dev))
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (d->fail_after_set)
    d->fail_after_left -= size;
  return CUDA_SUCCESS;
}

CUresult gpum__sim_cu_take_capacity(struct gpum__sim_node *n, unsigned dev, uint64_t size) {
  return take_capacity(n, dev, size);
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  if (!dptr || bytesize == 0)
    return CUDA_ERROR_INVALID_VALUE;
  void *p = mmap(NULL, bytesize, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return CUDA_ERROR_OUT_OF_MEMORY;
  struct gpum__sim_node *n;
  unsigned dev;
  CUresult r = gpum__sim_cu_begin(&n, &dev);
  if (r != CUDA_SUCCESS)
    goto out_unmap;
  r = take_capacity(n, dev, bytesize);
  if (r == CUDA_SUCCESS &&
      gpum__sim_alloc_add(n, GPUM__SIM_K_MEM, dev, (uint64_t)(uintptr_t)p, bytesize, 0, 0) < 0)
    r = CUDA_ERROR_OUT_OF_MEMORY; /* the allocation table is full */
  gpum__sim_unlock(n);
  if (r != CUDA_SUCCESS)
    goto out_unmap;
  *dptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
out_unmap:
  munmap(p, bytesize);
  return r;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  if (!gpum__sim_cu_initialized())
    return CUDA_ERROR_NOT_INITIALIZED;
  struct gpum__sim_node *n = gpum__sim_attached();
  if (!n || gpum__sim_lock(n) != 0)
    return CUDA_ERROR_UNKNOWN;
  /* Frees work on a lost device too, so that cleanup paths can give memory back. */
  int idx = gpum__sim_alloc_find(n, GPUM__SIM_K_MEM, dptr);
  uint64_t size = idx >= 0 ? n->allocs[idx].size : 0;
  gpum__sim_alloc_remove(n, idx);
  gpum__sim_unlock(n);
  if (idx < 0)
    return CUDA_ERROR_INVALID_VALUE;
  munmap((void *)(uintptr_t)dptr, size);
  return CUDA_SUCCESS;
}

void gpum__sim_cu_free_all(struct gpum__sim_node *n, unsigned simdev) {
  pid_t self;
  uint64_t start;
  gpum__sim_self(&self, &start);
  for (uint32_t i = 0; i < n->alloc_hw && i < GPUM__SIM_MAX_ALLOCS; i++) {
    struct gpum__sim_alloc *a = &n->allocs[i];
    if (a->state != GPUM__SIM_A_USED || a->pid != self || a->device != simdev ||
        a->kind != GPUM__SIM_K_MEM)
      continue;
    uint64_t addr = a->addr, size = a->size;
    gpum__sim_alloc_remove(n, (int)i);
    munmap((void *)(uintptr_t)addr, size);
  }
}

CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
  if (!free || !total)
    return CUDA_ERROR_INVALID_VALUE;
  struct gpum__sim_node *n;
  unsigned dev;
  CUresult r = gpum__sim_cu_begin(&n, &dev);
  if (r != CUDA_SUCCESS)
    return r;
  gpum__sim_reap(n);
  *free = gpum__sim_free(n, dev);
  *total = n->spec.dev[dev].memory;
  gpum__sim_unlock(n);
  return CUDA_SUCCESS;
}

/* The calling process's cuMemAlloc entry containing ptr, or -1 (lock held). */
static int find_containing(struct gpum__sim_node *n, CUdeviceptr ptr) {
  pid_t self;
  uint64_t start;
  gpum__sim_self(&self, &start);
  for (uint32_t i = 0; i < n->alloc_hw && i < GPUM__SIM_MAX_ALLOCS; i++) {
    const struct gpum__sim_alloc *a = &n->allocs[i];
    if (a->state == GPUM__SIM_A_USED && a->kind == GPUM__SIM_K_MEM && a->pid == self &&
        ptr >= a->addr && ptr - a->addr < a->size)
      return (int)i;
  }
  return -1;
}

bool gpum__sim_cu_range_ok(CUdeviceptr ptr, size_t len) {
  struct gpum__sim_node *n = gpum__sim_attached();
  if (!n || gpum__sim_lock(n) != 0)
    return false;
  int i = find_containing(n, ptr);
  bool ok = i >= 0 && len <= n->allocs[i].size - (ptr - n->allocs[i].addr);
  gpum__sim_unlock(n);
  return ok || gpum__sim_cu_vmm_range_ok(ptr, len);
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
  struct gpum__sim_node *n;
  unsigned dev;
  CUresult r = gpum__sim_cu_begin(&n, &dev);
  if (r != CUDA_SUCCESS)
    return r;
  int i = find_containing(n, dptr);
  if (i >= 0) {
    if (pbase)
      *pbase = n->allocs[i].addr;
    if (psize)
      *psize = n->allocs[i].size;
  }
  gpum__sim_unlock(n);
  return i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* Checks context and device for a copy (the lock is not kept: copies run unlocked). */
static CUresult copy_begin(void) {
  struct gpum__sim_node *n;
  unsigned dev;
  CUresult r = gpum__sim_cu_begin(&n, &dev);
  if (r == CUDA_SUCCESS)
    gpum__sim_unlock(n);
  return r;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount) {
  CUresult r = copy_begin();
  if (r != CUDA_SUCCESS || ByteCount == 0)
    return r;
  if (!srcHost || !gpum__sim_cu_range_ok(dstDevice, ByteCount))
    return CUDA_ERROR_INVALID_VALUE;
  memcpy((void *)(uintptr_t)dstDevice, srcHost, ByteCount);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  CUresult r = copy_begin();
  if (r != CUDA_SUCCESS || ByteCount == 0)
    return r;
  if (!dstHost || !gpum__sim_cu_range_ok(srcDevice, ByteCount))
    return CUDA_ERROR_INVALID_VALUE;
  memcpy(dstHost, (const void *)(uintptr_t)srcDevice, ByteCount);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
  CUresult r = copy_begin();
  if (r != CUDA_SUCCESS || ByteCount == 0)
    return r;
  if (!gpum__sim_cu_range_ok(dstDevice, ByteCount) || !gpum__sim_cu_range_ok(srcDevice, ByteCount))
    return CUDA_ERROR_INVALID_VALUE;
  memmove((void *)(uintptr_t)dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount);
  return CUDA_SUCCESS;
}

CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  CUresult r = copy_begin();
  if (r != CUDA_SUCCESS || N == 0)
    return r;
  if (!gpum__sim_cu_range_ok(dstDevice, N))
    return CUDA_ERROR_INVALID_VALUE;
  memset((void *)(uintptr_t)dstDevice, uc, N);
  return CUDA_SUCCESS;
}

/* ---- pinned host memory: plain page-aligned host memory, remembered for cuMemFreeHost ---- */

struct host_block {
  void *p;
  struct host_block *next;
};
static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;
static struct host_block *host_blocks;

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
  if (!pp || bytesize == 0 || (Flags & ~7u)) /* PORTABLE | DEVICEMAP | WRITECOMBINED */
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = copy_begin();
  if (r != CUDA_SUCCESS)
    return r;
  struct host_block *b = malloc(sizeof *b);
  void *p = NULL;
  if (!b || posix_memalign(&p, 4096, bytesize) != 0) {
    free(b);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  b->p = p;
  pthread_mutex_lock(&host_mu);
  b->next = host_blocks;
  host_blocks = b;
  pthread_mutex_unlock(&host_mu);
  *pp = p;
  return CUDA_SUCCESS;
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) {
  return cuMemHostAlloc(pp, bytesize, 0);
}

CUresult cuMemFreeHost(void *p) {
  if (!gpum__sim_cu_initialized())
    return CUDA_ERROR_NOT_INITIALIZED;
  pthread_mutex_lock(&host_mu);
  struct host_block **pp = &host_blocks, *b;
  while (*pp && (*pp)->p != p)
    pp = &(*pp)->next;
  b = *pp;
  if (b)
    *pp = b->next;
  pthread_mutex_unlock(&host_mu);
  if (!b)
    return CUDA_ERROR_INVALID_VALUE;
  free(b->p);
  free(b);
  return CUDA_SUCCESS;
}
