/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stream-ordered memory pools of the simulated CUDA driver: each visible device has a default
 * pool (cuDeviceGetDefaultMemPool, also its current pool), and programs may create more
 * (cuMemPoolCreate). cuMemAllocFromPoolAsync allocates on the pool's device whatever the current
 * context. The simulated streams do not defer work, so memory freed into a pool goes back to the
 * device at once, as a real pool with its default release threshold (0) does at the next
 * synchronisation; the pool's attributes count what is allocated from it (docs/sim.md).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#define POOL_MAGIC 0x6c6f6f70u /* "pool" */

struct CUmemPoolHandle_st {
  uint32_t magic;
  unsigned simdev;
  bool is_default;
  bool destroyed;  /* cuMemPoolDestroy called while allocations were outstanding */
  uint64_t used;   /* bytes allocated from the pool and not freed */
  uint64_t high;   /* the most it has held since the watermark was reset */
  uint64_t thresh; /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, kept for GetAttribute */
  struct CUmemPoolHandle_st *next;
};

/* Lock order: the node lock, blocks_mu (cuda_mem.c), then pools_mu. */
static pthread_mutex_t pools_mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUmemPoolHandle_st default_pools[GPUM__SIM_MAX_DEVICES];
static struct CUmemPoolHandle_st *created;

void gpum__sim_pool_atfork(gpum__sim_fork_phase_t ph) {
  gpum__sim_fork_mutex(&pools_mu, ph);
}

void gpum__sim_pool_remap(const uint32_t *map) {
  pthread_mutex_lock(&pools_mu);
  for (size_t i = 0; i < GPUM__SIM_MAX_DEVICES; i++)
    if (default_pools[i].magic == POOL_MAGIC)
      default_pools[i].simdev = map[default_pools[i].simdev];
  for (struct CUmemPoolHandle_st *c = created; c; c = c->next)
    c->simdev = map[c->simdev];
  pthread_mutex_unlock(&pools_mu);
}

static bool pool_ok(const struct CUmemPoolHandle_st *p) {
  if (!p)
    return false;
  pthread_mutex_lock(&pools_mu);
  bool ok = false;
  for (size_t i = 0; i < GPUM__SIM_MAX_DEVICES && !ok; i++)
    ok = p == &default_pools[i] && p->magic == POOL_MAGIC;
  for (const struct CUmemPoolHandle_st *c = created; c && !ok; c = c->next)
    ok = c == p && !c->destroyed;
  pthread_mutex_unlock(&pools_mu);
  return ok;
}

unsigned gpum__sim_cu_pool_simdev(const struct CUmemPoolHandle_st *pool) {
  return pool->simdev;
}

void gpum__sim_cu_pool_count(struct CUmemPoolHandle_st *pool, int64_t delta) {
  pthread_mutex_lock(&pools_mu);
  pool->used = (uint64_t)((int64_t)pool->used + delta);
  if (pool->used > pool->high)
    pool->high = pool->used;
  bool gone = pool->destroyed && pool->used == 0;
  if (gone) {
    struct CUmemPoolHandle_st **pp = &created;
    while (*pp && *pp != pool)
      pp = &(*pp)->next;
    if (*pp)
      *pp = pool->next;
  }
  pthread_mutex_unlock(&pools_mu);
  if (gone)
    free(pool);
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev) {
  unsigned simdev;
  GPUM__SIM_CU_ENTRY(pool_out != NULL, GPUM__SIM_CU_INIT);
  CUresult r = gpum__sim_cu_device(dev, &simdev);
  if (r != CUDA_SUCCESS)
    return r;
  struct CUmemPoolHandle_st *p = &default_pools[dev];
  pthread_mutex_lock(&pools_mu);
  if (p->magic != POOL_MAGIC)
    *p = (struct CUmemPoolHandle_st){.magic = POOL_MAGIC, .simdev = simdev, .is_default = true};
  pthread_mutex_unlock(&pools_mu);
  *pool_out = p;
  return CUDA_SUCCESS;
}

/* The simulator has no cuDeviceSetMemPool: a device's current pool is its default pool. */
CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
  GPUM__SIM_CU_FORK_GATE();
  return cuDeviceGetDefaultMemPool(pool, dev);
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps) {
  unsigned simdev;
  bool args_ok = pool && poolProps && poolProps->allocType == CU_MEM_ALLOCATION_TYPE_PINNED &&
                 poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
                 (poolProps->handleTypes == CU_MEM_HANDLE_TYPE_NONE ||
                  poolProps->handleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  GPUM__SIM_CU_ENTRY(args_ok, GPUM__SIM_CU_INIT);
  CUresult r = gpum__sim_cu_device(poolProps->location.id, &simdev);
  if (r != CUDA_SUCCESS)
    return r == CUDA_ERROR_INVALID_DEVICE ? CUDA_ERROR_INVALID_VALUE : r;
  struct CUmemPoolHandle_st *p = calloc(1, sizeof *p);
  if (!p)
    return CUDA_ERROR_OUT_OF_MEMORY;
  p->magic = POOL_MAGIC;
  p->simdev = simdev;
  pthread_mutex_lock(&pools_mu);
  p->next = created;
  created = p;
  pthread_mutex_unlock(&pools_mu);
  *pool = p;
  return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  GPUM__SIM_CU_FORK_GATE();
  if (!pool_ok(pool) || pool->is_default)
    return CUDA_ERROR_INVALID_VALUE;
  /* Outstanding allocations keep the pool until the last is freed, as in CUDA. */
  pthread_mutex_lock(&pools_mu);
  pool->destroyed = true;
  bool now = pool->used == 0;
  if (now) {
    struct CUmemPoolHandle_st **pp = &created;
    while (*pp != pool)
      pp = &(*pp)->next;
    *pp = pool->next;
  }
  pthread_mutex_unlock(&pools_mu);
  if (now)
    free(pool);
  return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  GPUM__SIM_CU_FORK_GATE();
  (void)minBytesToKeep; /* nothing is kept past a free: there is nothing to trim */
  return pool_ok(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  GPUM__SIM_CU_FORK_GATE();
  if (!pool_ok(pool) || !value)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&pools_mu);
  CUresult r = CUDA_SUCCESS;
  uint64_t v;
  memcpy(&v, value, sizeof v);
  if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
    pool->thresh = v;
  else if ((attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH || attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH) &&
           v == 0)
    pool->high = pool->used; /* only a reset to zero is allowed */
  else if (attr < 1 || attr > CU_MEMPOOL_ATTR_USED_MEM_HIGH ||
           attr == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT ||
           attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT || attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH ||
           attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH)
    r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_unlock(&pools_mu);
  return r; /* the reuse policies (1-3) are accepted and change nothing here */
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  GPUM__SIM_CU_FORK_GATE();
  if (!pool_ok(pool) || !value)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&pools_mu);
  CUresult r = CUDA_SUCCESS;
  uint64_t v = 0;
  switch (attr) {
  case 1:
  case 2:
  case 3: {
    int on = 1; /* the reuse policies, on by default */
    memcpy(value, &on, sizeof on);
    pthread_mutex_unlock(&pools_mu);
    return CUDA_SUCCESS;
  }
  case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
    v = pool->thresh;
    break;
  case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
  case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
    v = pool->used;
    break;
  case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
  case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
    v = pool->high;
    break;
  default:
    r = CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_unlock(&pools_mu);
  if (r == CUDA_SUCCESS)
    memcpy(value, &v, sizeof v);
  return r;
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream) {
  GPUM__SIM_CU_FORK_GATE();
  if (!gpum__sim_cu_stream_ok(hStream))
    return CUDA_ERROR_INVALID_HANDLE;
  if (!pool_ok(pool))
    return CUDA_ERROR_INVALID_VALUE;
  return gpum__sim_cu_alloc(dptr, bytesize, pool);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream) {
  GPUM__SIM_CU_FORK_GATE();
  return cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream);
}
