/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ring of recent Server-Sent Events that sse.c replays to a stream reconnecting with
 * Last-Event-ID: the formatted text of each event, under consecutive ids, bounded by bytes (the
 * oldest events go first). Loop thread only; no locking.
 */
#ifndef GPUMD_EVRING_H
#define GPUMD_EVRING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gpumd_evring_rec;

typedef struct {
  struct gpumd_evring_rec **rec; /* circular, cap slots; rec[head] holds event first */
  size_t cap, head, count;
  uint64_t first;   /* id of the oldest event held; when empty, the id the next one gets */
  size_t bytes;     /* event text held */
  size_t max_bytes; /* bound on bytes (one event larger than it is not kept) */
} gpumd_evring_t;

/* An empty ring whose first event will be next_id, holding at most max_bytes of event text. */
void gpumd_evring_init(gpumd_evring_t *r, size_t max_bytes, uint64_t next_id);
/* Frees what r holds (r is then empty, as after init with the same bound and next id). */
void gpumd_evring_free(gpumd_evring_t *r);
/* Appends the event id (which must be the next: gpumd_evring_next(r)) with its text, dropping
 * the oldest events while the bytes pass the bound. Returns 0, or GPUM_EINVAL for an id out of
 * sequence or GPUM_ENOMEM; on either failure the ring is emptied and continues after id, so that
 * it never has a gap. */
int gpumd_evring_push(gpumd_evring_t *r, uint64_t id, const char *text, size_t len);
/* The id the next event must have. */
uint64_t gpumd_evring_next(const gpumd_evring_t *r);
/* The id of the oldest event held (gpumd_evring_next when empty). */
uint64_t gpumd_evring_first(const gpumd_evring_t *r);
/* The text of event id, valid until the next push or free. False when id is not held. */
bool gpumd_evring_get(const gpumd_evring_t *r, uint64_t id, const char **text, size_t *len);

#endif /* GPUMD_EVRING_H */
