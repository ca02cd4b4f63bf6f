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

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4 /* Linux 5.7 */
#endif

/* A cuMemAlloc_v2 allocation of this process, in a map by address: the one containing a
 * pointer is found in O(log n) (copies, cuMemGetAddressRange, cuMemFree). */
struct block {
  struct gpum__sim_tnode node; /* key: the address */
  uint64_t size;
  unsigned simdev;
  int entry;                       /* its entry in the node's allocation table */
  struct CUmemPoolHandle_st *pool; /* the memory pool it came from, or NULL */
  void *saved;                     /* checkpointed: where its pages are in host memory */
  bool managed;                    /* cuMemAllocManaged */
};

/* Lock order: the node lock before blocks_mu. */
static pthread_mutex_t blocks_mu = PTHREAD_MUTEX_INITIALIZER;
static struct gpum__sim_tnode *blocks;

static struct block *block_of(struct gpum__sim_tnode *t) {
  return t ? GPUM__SIM_CONTAINER(t, struct block, node) : NULL;
}

/* The block containing ptr, or NULL (blocks_mu held). */
static struct block *block_containing(CUdeviceptr ptr) {
  struct block *b = block_of(gpum__sim_tree_floor(blocks, ptr));
  return b && ptr - b->node.key < b->size ? b : NULL;
}

/* Checks and spends capacity for size bytes on dev (lock held). Dead processes are reaped only
 * when their memory stands in the way, so an allocation that fits costs no /proc reads. */
static CUresult take_capacity(struct gpum__sim_node *n, unsigned dev, uint64_t size) {
  struct gpum__sim_dev_state *d = &n->dev[dev];
  if (d->fail_after_set && size > d->fail_after_left)
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (size > gpum__sim_free(n, dev))
    gpum__sim_reap(n);
  if (size > gpum__sim_free(n, dev))
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (d->fail_after_set)
    d->fail_after_left -= size;
  return CUDA_SUCCESS;
}

CUresult gpum__sim_cu_take_capacity(struct gpum__sim_node *n, unsigned dev, uint64_t size) {
  return take_capacity(n, dev, size);
}

/* Allocates bytesize bytes on the current context's device, or on pool's device from pool
 * (which counts them until they are freed). */
CUresult gpum__sim_cu_alloc(CUdeviceptr *dptr, size_t bytesize, struct CUmemPoolHandle_st *pool) {
  if (!dptr || bytesize == 0)
    return CUDA_ERROR_INVALID_VALUE;
  struct block *b = malloc(sizeof *b);
  if (!b)
    return CUDA_ERROR_OUT_OF_MEMORY;
  void *p = mmap(NULL, bytesize, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    free(b);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  struct gpum__sim_node *n;
  unsigned dev;
  CUresult r = pool ? gpum__sim_cu_begin_on(&n, gpum__sim_cu_pool_simdev(pool))
                    : gpum__sim_cu_begin(&n, &dev);
  if (pool)
    dev = gpum__sim_cu_pool_simdev(pool);
  if (r != CUDA_SUCCESS)
    goto out_unmap;
  r = take_capacity(n, dev, bytesize);
  int entry = -1;
  if (r == CUDA_SUCCESS &&
      (entry = gpum__sim_alloc_add(n, GPUM__SIM_K_MEM, dev, (uint64_t)(uintptr_t)p, bytesize)) < 0)
    r = CUDA_ERROR_OUT_OF_MEMORY; /* the allocation table is full */
  if (r == CUDA_SUCCESS) {
    *b = (struct block){.size = bytesize, .simdev = dev, .entry = entry, .pool = pool};
    pthread_mutex_lock(&blocks_mu);
    gpum__sim_tree_insert(&blocks, &b->node, (uint64_t)(uintptr_t)p);
    if (pool)
      gpum__sim_cu_pool_count(pool, (int64_t)bytesize);
    pthread_mutex_unlock(&blocks_mu);
  }
  gpum__sim_unlock(n);
  if (r != CUDA_SUCCESS)
    goto out_unmap;
  *dptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
out_unmap:
  munmap(p, bytesize);
  free(b);
  return r;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  GPUM__SIM_CU_FORK_GATE();
  return gpum__sim_cu_alloc(dptr, bytesize, NULL);
}

/* Pitched rows are aligned as the driver's texture pitch alignment on current GPUs. */
#define PITCH_ALIGN 512u

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes) {
  GPUM__SIM_CU_FORK_GATE();
  if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
      (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
    return CUDA_ERROR_INVALID_VALUE;
  if (WidthInBytes > SIZE_MAX - PITCH_ALIGN)
    return CUDA_ERROR_INVALID_VALUE;
  size_t pitch = (WidthInBytes + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
  if (Height > SIZE_MAX / pitch)
    return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = gpum__sim_cu_alloc(dptr, pitch * Height, NULL);
  if (r == CUDA_SUCCESS)
    *pPitch = pitch;
  return r;
}

/* Managed memory is counted on the current device from the start (a real driver places pages on
 * first touch): docs/sim.md. */
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  GPUM__SIM_CU_FORK_GATE();
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = gpum__sim_cu_alloc(dptr, bytesize, NULL);
  if (r == CUDA_SUCCESS) {
    pthread_mutex_lock(&blocks_mu);
    struct block *b = block_of(gpum__sim_tree_find(blocks, *dptr));
    if (b)
      b->managed = true;
    pthread_mutex_unlock(&blocks_mu);
  }
  return r;
}

bool gpum__sim_cu_ipc_exportable(CUdeviceptr ptr, uint64_t *size, unsigned *simdev) {
  pthread_mutex_lock(&blocks_mu);
  struct block *b = block_of(gpum__sim_tree_find(blocks, ptr));
  bool ok = b && !b->managed && !b->pool && !b->saved;
  if (ok) {
    *size = b->size;
    *simdev = b->simdev;
  }
  pthread_mutex_unlock(&blocks_mu);
  return ok;
}

/* Forgets block b (both locks held): its table entry when it is this process's (a child after
 * fork, or a process whose node was restarted, holds blocks that are not), the block, its
 * memory. */
static void block_free(struct gpum__sim_node *n, struct block *b) {
  if (gpum__sim_alloc_mine(n, b->entry, GPUM__SIM_K_MEM, b->node.key))
    gpum__sim_alloc_remove(n, b->entry);
  gpum__sim_tree_remove(&blocks, &b->node);
  if (b->pool)
    gpum__sim_cu_pool_count(b->pool, -(int64_t)b->size);
  munmap((void *)(uintptr_t)b->node.key, b->size);
  free(b);
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_INIT);
  struct gpum__sim_node *n = gpum__sim_attached();
  if (!n || gpum__sim_lock(n) != 0)
    return CUDA_ERROR_UNKNOWN;
  /* Frees work on a lost device too, so that cleanup paths can give memory back. */
  pthread_mutex_lock(&blocks_mu);
  struct block *b = block_of(gpum__sim_tree_find(blocks, dptr));
  if (b)
    block_free(n, b);
  pthread_mutex_unlock(&blocks_mu);
  gpum__sim_unlock(n);
  return b ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

void gpum__sim_cu_free_all(struct gpum__sim_node *n, unsigned simdev) {
  pthread_mutex_lock(&blocks_mu);
  struct block *b = block_of(gpum__sim_tree_ceil(blocks, 0));
  while (b) {
    struct block *next = block_of(gpum__sim_tree_ceil(blocks, b->node.key + 1));
    if (b->simdev == simdev)
      block_free(n, b);
    b = next;
  }
  pthread_mutex_unlock(&blocks_mu);
}

CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
  GPUM__SIM_CU_FORK_GATE();
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

bool gpum__sim_cu_range_ok(CUdeviceptr ptr, size_t len) {
  pthread_mutex_lock(&blocks_mu);
  struct block *b = block_containing(ptr);
  bool ok = b && len <= b->size - (ptr - b->node.key);
  pthread_mutex_unlock(&blocks_mu);
  return ok || gpum__sim_cu_vmm_range_ok(ptr, len);
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_CTX);
  pthread_mutex_lock(&blocks_mu);
  struct block *b = block_containing(dptr);
  if (b && pbase)
    *pbase = b->node.key;
  if (b && psize)
    *psize = b->size;
  pthread_mutex_unlock(&blocks_mu);
  return b ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* Copies check context and device (gpum__sim_cu_check) and run without the node lock. */

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_CTX);
  if (ByteCount == 0)
    return CUDA_SUCCESS;
  if (!srcHost || !gpum__sim_cu_range_ok(dstDevice, ByteCount))
    return CUDA_ERROR_INVALID_VALUE;
  memcpy((void *)(uintptr_t)dstDevice, srcHost, ByteCount);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_CTX);
  if (ByteCount == 0)
    return CUDA_SUCCESS;
  if (!dstHost || !gpum__sim_cu_range_ok(srcDevice, ByteCount))
    return CUDA_ERROR_INVALID_VALUE;
  memcpy(dstHost, (const void *)(uintptr_t)srcDevice, ByteCount);
  return CUDA_SUCCESS;
}

/* The simulator's streams do not order work: an async copy is done before it returns, once its
 * stream is known (a completed copy is what any later synchronisation would see). */
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                              CUstream hStream) {
  GPUM__SIM_CU_FORK_GATE();
  if (!gpum__sim_cu_stream_ok(hStream))
    return CUDA_ERROR_INVALID_HANDLE;
  return cuMemcpyHtoD_v2(dstDevice, srcHost, ByteCount);
}

CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                              CUstream hStream) {
  GPUM__SIM_CU_FORK_GATE();
  if (!gpum__sim_cu_stream_ok(hStream))
    return CUDA_ERROR_INVALID_HANDLE;
  return cuMemcpyDtoH_v2(dstHost, srcDevice, ByteCount);
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_CTX);
  if (ByteCount == 0)
    return CUDA_SUCCESS;
  if (!gpum__sim_cu_range_ok(dstDevice, ByteCount) || !gpum__sim_cu_range_ok(srcDevice, ByteCount))
    return CUDA_ERROR_INVALID_VALUE;
  memmove((void *)(uintptr_t)dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount);
  return CUDA_SUCCESS;
}

CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_CTX);
  if (N == 0)
    return CUDA_SUCCESS;
  if (!gpum__sim_cu_range_ok(dstDevice, N))
    return CUDA_ERROR_INVALID_VALUE;
  memset((void *)(uintptr_t)dstDevice, uc, N);
  return CUDA_SUCCESS;
}

/* ---- checkpoint and restore (cuda_ckpt.c) ----
 *
 * A checkpoint moves each allocation's pages into host memory with mremap: every page
 * written, resident or swapped, goes to a new private mapping without being copied or faulted
 * in (an 80 GiB allocation of which 4 KiB were written costs 4 KiB). The allocation's own
 * range is left mapped PROT_NONE, so that its addresses stay reserved and a stray access
 * faults, as device memory that is gone would: with MREMAP_DONTUNMAP (Linux 5.7) in one step;
 * where the kernel refuses it (some sandboxes), the range is mapped again at once with
 * MAP_FIXED_NOREPLACE, and should another thread of the process have mapped something there
 * in between, the checkpoint fails. A restore moves the pages back over the same addresses
 * (mremap MREMAP_FIXED), so every pointer the program holds is valid again, as with the real
 * driver, which keeps virtual addresses. */

static struct block *first_block(void) {
  return block_of(gpum__sim_tree_ceil(blocks, 0));
}

static struct block *next_block(const struct block *b) {
  return block_of(gpum__sim_tree_ceil(blocks, b->node.key + 1));
}

/* Moves b's pages out to host memory, leaving its range reserved (blocks_mu held). */
static int block_save(struct block *b) {
  void *at = (void *)(uintptr_t)b->node.key;
  void *away = mremap(at, b->size, b->size, MREMAP_MAYMOVE | MREMAP_DONTUNMAP);
  if (away != MAP_FAILED) {
    b->saved = away;
    mprotect(at, b->size, PROT_NONE);
    return 0;
  }
  /* A place to move to (mremap does not move a mapping it need not grow). */
  void *host = mmap(NULL, b->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (host == MAP_FAILED)
    return -1;
  away = mremap(at, b->size, b->size, MREMAP_MAYMOVE | MREMAP_FIXED, host);
  if (away == MAP_FAILED) {
    munmap(host, b->size);
    return -1;
  }
  void *again = mmap(at, b->size, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (again != at) {
    if (again != MAP_FAILED)
      munmap(again, b->size); /* a kernel before 4.17 took the address as a hint */
    if (mremap(away, b->size, b->size, MREMAP_MAYMOVE | MREMAP_FIXED, at) == MAP_FAILED) {
      b->saved = away; /* the range was taken: the pages stay in host memory */
      return -2;
    }
    return -1;
  }
  b->saved = away;
  return 0;
}

/* Moves b's pages back to its own addresses (blocks_mu held). */
static int block_load(struct block *b) {
  void *at = (void *)(uintptr_t)b->node.key;
  if (mremap(b->saved, b->size, b->size, MREMAP_MAYMOVE | MREMAP_FIXED, at) == MAP_FAILED)
    return -1;
  b->saved = NULL;
  return 0;
}

int gpum__sim_mem_save(void) {
  int ret = 0;
  pthread_mutex_lock(&blocks_mu);
  struct block *b;
  for (b = first_block(); b; b = next_block(b))
    if ((ret = block_save(b)) != 0)
      break;
  if (ret != 0) /* undo: the allocations saved so far come back */
    for (struct block *u = first_block(); u != b; u = next_block(u))
      block_load(u);
  pthread_mutex_unlock(&blocks_mu);
  return ret;
}

int gpum__sim_mem_load(void) {
  int ret = 0;
  pthread_mutex_lock(&blocks_mu);
  for (struct block *b = first_block(); b; b = next_block(b))
    if (b->saved && block_load(b) != 0)
      ret = -1;
  pthread_mutex_unlock(&blocks_mu);
  return ret;
}

void gpum__sim_mem_remap(const uint32_t *map) {
  pthread_mutex_lock(&blocks_mu);
  for (struct block *b = first_block(); b; b = next_block(b))
    b->simdev = map[b->simdev];
  pthread_mutex_unlock(&blocks_mu);
}

/* ---- pinned host memory: plain page-aligned host memory, remembered for cuMemFreeHost ---- */

struct host_block {
  void *p;
  struct host_block *next;
};
static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;
static struct host_block *host_blocks;

/* host_mu and blocks_mu are never held together. */
void gpum__sim_mem_atfork(gpum__sim_fork_phase_t ph) {
  if (ph == GPUM__SIM_FORK_PREPARE) {
    pthread_mutex_lock(&blocks_mu);
    pthread_mutex_lock(&host_mu);
  } else {
    pthread_mutex_unlock(&host_mu);
    pthread_mutex_unlock(&blocks_mu);
  }
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
  /* Flags: PORTABLE | DEVICEMAP | WRITECOMBINED */
  GPUM__SIM_CU_ENTRY(pp && bytesize != 0 && !(Flags & ~7u), GPUM__SIM_CU_CTX);
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
  GPUM__SIM_CU_FORK_GATE();
  return cuMemHostAlloc(pp, bytesize, 0);
}

CUresult cuMemFreeHost(void *p) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_INIT);
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
