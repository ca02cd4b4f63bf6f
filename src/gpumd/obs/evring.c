/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ring of recent events (evring.h): a circular array of pointers to records, one malloc'd
 * record per event, indexed by id - first. The array grows by doubling; the byte bound, not a
 * count, limits what is held.
 */
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>

#include "evring.h"

struct gpumd_evring_rec {
  size_t len;
  char text[];
};

void gpumd_evring_init(gpumd_evring_t *r, size_t max_bytes, uint64_t next_id) {
  memset(r, 0, sizeof *r);
  r->max_bytes = max_bytes;
  r->first = next_id;
}

static void drop_oldest(gpumd_evring_t *r) {
  struct gpumd_evring_rec *e = r->rec[r->head];
  r->bytes -= e->len;
  free(e);
  r->rec[r->head] = NULL;
  r->head = (r->head + 1) % r->cap;
  r->count--;
  r->first++;
}

/* Empties r; the next event is next_id. The array is kept. */
static void clear(gpumd_evring_t *r, uint64_t next_id) {
  while (r->count > 0)
    drop_oldest(r);
  r->head = 0;
  r->first = next_id;
}

void gpumd_evring_free(gpumd_evring_t *r) {
  uint64_t next = gpumd_evring_next(r);
  if (r->rec)
    clear(r, next);
  free(r->rec);
  gpumd_evring_init(r, r->max_bytes, next);
}

uint64_t gpumd_evring_next(const gpumd_evring_t *r) {
  return r->first + r->count;
}

uint64_t gpumd_evring_first(const gpumd_evring_t *r) {
  return r->first;
}

/* Room for one more record: the array doubled (its records moved to the front) when full. */
static int grow(gpumd_evring_t *r) {
  if (r->count < r->cap)
    return 0;
  size_t cap = r->cap ? r->cap * 2 : 64;
  struct gpumd_evring_rec **rec = calloc(cap, sizeof *rec);
  if (!rec)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  for (size_t i = 0; i < r->count; i++)
    rec[i] = r->rec[(r->head + i) % r->cap];
  free(r->rec);
  r->rec = rec;
  r->cap = cap;
  r->head = 0;
  return 0;
}

int gpumd_evring_push(gpumd_evring_t *r, uint64_t id, const char *text, size_t len) {
  if (id != gpumd_evring_next(r)) {
    clear(r, id + 1);
    return gpum_error(GPUM_EINVAL, "event %llu out of sequence", (unsigned long long)id);
  }
  if (len > r->max_bytes) { /* never held: the ring continues after it */
    clear(r, id + 1);
    return 0;
  }
  while (r->count > 0 && r->bytes + len > r->max_bytes)
    drop_oldest(r);
  struct gpumd_evring_rec *e = malloc(sizeof *e + len);
  if (!e || grow(r) != 0) {
    free(e);
    clear(r, id + 1);
    return gpum_error(GPUM_ENOMEM, "out of memory");
  }
  e->len = len;
  memcpy(e->text, text, len);
  r->rec[(r->head + r->count) % r->cap] = e;
  r->count++;
  r->bytes += len;
  return 0;
}

bool gpumd_evring_get(const gpumd_evring_t *r, uint64_t id, const char **text, size_t *len) {
  if (id < r->first || id >= gpumd_evring_next(r))
    return false;
  const struct gpumd_evring_rec *e = r->rec[(r->head + (id - r->first)) % r->cap];
  *text = e->text;
  *len = e->len;
  return true;
}
