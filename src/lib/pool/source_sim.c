/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulated source: addresses without memory, for replaying traces on a CPU. Segments get
 * addresses from a bump pointer above a fake base (0x7f0000000000, 2 MiB aligned, never
 * reused) and count against a capacity in bytes (0 = unlimited); frees give the capacity back.
 * With a capacity it reports device memory (total = capacity, free = what is left), so limits
 * as a fraction work. It also offers reserve/map/unmap, so expandable segments can be replayed:
 * reserving takes addresses only, mapping takes capacity. Nothing is ever backed: the memory
 * must not be touched. Thread-safe (a source may serve several pools).
 */
#include <pthread.h>
#include <stdlib.h>

#include <gpum/error.h>
#include <gpum/size.h>

#include "pool/pool_internal.h"

#define SIM_BASE UINT64_C(0x7f0000000000)
#define SIM_ALIGN (UINT64_C(2) << 20)

typedef struct {
  pthread_mutex_t lock;
  uint64_t capacity, used, next;
} sim_t;

static int take(sim_t *s, uint64_t size) {
  if (s->capacity != 0 && (size > s->capacity || s->used > s->capacity - size)) {
    char a[GPUM_SIZE_BUFSZ], b[GPUM_SIZE_BUFSZ];
    return gpum_error(GPUM_EDEVOOM, "simulated device: %s requested, %s of %s free",
                      gpum_size_format(size, a, sizeof(a)),
                      gpum_size_format(s->capacity - s->used, b, sizeof(b)),
                      gpum_size_format(s->capacity, (char[GPUM_SIZE_BUFSZ]){0}, GPUM_SIZE_BUFSZ));
  }
  s->used += size;
  return 0;
}

static int give(sim_t *s, uint64_t size) {
  if (size > s->used)
    return gpum_error(GPUM_EINVAL, "simulated device: freeing %llu bytes, only %llu in use",
                      (unsigned long long)size, (unsigned long long)s->used);
  s->used -= size;
  return 0;
}

static gpum_devptr_t bump(sim_t *s, uint64_t size) {
  gpum_devptr_t addr = s->next;
  s->next += (size + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN;
  return addr;
}

static int sim_alloc(void *ctx, size_t size, gpum_devptr_t *addr) {
  sim_t *s = ctx;
  pthread_mutex_lock(&s->lock);
  int rc = take(s, size);
  if (rc == 0)
    *addr = bump(s, size);
  pthread_mutex_unlock(&s->lock);
  return rc;
}

static int sim_free(void *ctx, gpum_devptr_t addr, size_t size) {
  sim_t *s = ctx;
  (void)addr;
  pthread_mutex_lock(&s->lock);
  int rc = give(s, size);
  pthread_mutex_unlock(&s->lock);
  return rc;
}

static int sim_mem_info(void *ctx, uint64_t *free_bytes, uint64_t *total_bytes) {
  sim_t *s = ctx;
  pthread_mutex_lock(&s->lock);
  *total_bytes = s->capacity;
  *free_bytes = s->capacity - s->used;
  pthread_mutex_unlock(&s->lock);
  return 0;
}

static int sim_reserve(void *ctx, size_t size, gpum_devptr_t *base) {
  sim_t *s = ctx;
  pthread_mutex_lock(&s->lock);
  *base = bump(s, size);
  pthread_mutex_unlock(&s->lock);
  return 0;
}

static int sim_map(void *ctx, gpum_devptr_t addr, size_t size) {
  sim_t *s = ctx;
  (void)addr;
  pthread_mutex_lock(&s->lock);
  int rc = take(s, size);
  pthread_mutex_unlock(&s->lock);
  return rc;
}

static int sim_unmap(void *ctx, gpum_devptr_t addr, size_t size) {
  return sim_free(ctx, addr, size);
}

static void sim_unreserve(void *ctx, gpum_devptr_t base, size_t size) {
  (void)ctx, (void)base, (void)size;
}

static void sim_destroy(void *ctx) {
  sim_t *s = ctx;
  pthread_mutex_destroy(&s->lock);
  free(s);
}

int gpum_pool_source_simulated(uint64_t capacity, gpum_pool_source_t **out) {
  if (out == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_pool_source_simulated: out is NULL");
  *out = NULL;
  sim_t *s = calloc(1, sizeof(*s));
  if (s == NULL)
    return gpum_error(GPUM_ENOMEM, "out of host memory for the simulated source");
  if (pthread_mutex_init(&s->lock, NULL) != 0) {
    free(s);
    return gpum_error(GPUM_ENOMEM, "cannot create the simulated source's mutex");
  }
  s->capacity = capacity;
  s->next = SIM_BASE;
  gpum_pool_source_ops_t ops = {
      .name = "simulated",
      .alloc = sim_alloc,
      .free = sim_free,
      .mem_info = capacity ? sim_mem_info : NULL,
      .reserve = sim_reserve,
      .map = sim_map,
      .unmap = sim_unmap,
      .unreserve = sim_unreserve,
      .destroy = sim_destroy,
  };
  int rc = gpum_pool_source_custom(&ops, s, out);
  if (rc != 0)
    sim_destroy(s);
  else
    (*out)->host_memory = true; /* addresses only: no GPU's memory */
  return rc;
}
