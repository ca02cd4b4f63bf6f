/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stream-ordered reuse.
 *
 * With a source that records events, a block freed on stream A goes to A's own free lists: A
 * may reuse it at once, since A's later work is ordered after the work that used it. Other
 * streams may use it only once the work queued on A at the time of the free has completed.
 * Each stream keeps at most one outstanding event, recorded when a block is freed on it while
 * none is outstanding (so, at free time), or when the previous one completes and newer frees
 * remain. Blocks carry the stream's sequence number at free (their stamp) and sit in the
 * stream's list in free order; when the event completes, every block stamped at or before it
 * moves to the shared owner, merging with shared neighbours. Events are polled on a miss, so a
 * stream that went idle gives its free blocks back to everyone instead of fragmenting the pool
 * (the fix RMM issue 2039 asks for). A free of a block used on other streams too
 * (record_stream) is deferred until events recorded on those streams at free time complete.
 *
 * Without event operations every event counts as completed at once: frees go straight to the
 * shared owner and no stream lists are used.
 */
#include <stdlib.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "pool/pool_internal.h"

gpum__owner_t *gpum__pool_owner(gpum_pool_t *p, gpum_stream_t stream) {
  if (p->last_owner != NULL && p->last_owner->stream == stream)
    return p->last_owner;
  for (gpum__owner_t *o = p->owners; o != NULL; o = o->next)
    if (o->stream == stream) {
      p->last_owner = o;
      return o;
    }
  gpum__owner_t *o = calloc(1, sizeof(*o));
  if (o == NULL) {
    gpum_error(GPUM_ENOMEM, "pool '%s': out of host memory for stream %llu", p->name,
               (unsigned long long)stream);
    return NULL;
  }
  o->stream = stream;
  gpum__tlsf_init(&o->tlsf[0]);
  gpum__tlsf_init(&o->tlsf[1]);
  o->next = p->owners;
  p->owners = o;
  p->last_owner = o;
  return o;
}

void gpum__pool_owners_free(gpum_pool_t *p) {
  gpum__owner_t *o = p->owners;
  while (o != NULL) {
    gpum__owner_t *next = o->next;
    if (o->event != NULL)
      p->ops->event_destroy(p->ctx, o->event);
    free(o);
    o = next;
  }
  p->owners = p->last_owner = NULL;
}

void gpum__pool_owner_arm(gpum_pool_t *p, gpum__owner_t *o) {
  if (o->shared || o->event != NULL || o->age_head == NULL || !p->has_events)
    return;
  void *ev = NULL;
  if (p->ops->event_record(p->ctx, o->stream, &ev) != 0) {
    gpum_log(GPUM_LOG_DEBUG, "pool", "pool '%s': recording an event on stream %llu failed: %s",
             p->name, (unsigned long long)o->stream, gpum_last_error());
    return; /* tried again at the next poll */
  }
  o->event = ev;
  o->event_seq = o->seq;
}

/* Moves o's free blocks stamped <= upto to the shared owner. */
static void give_back(gpum_pool_t *p, gpum__owner_t *o, uint64_t upto) {
  gpum__block_t *b;
  while ((b = o->age_head) != NULL && b->stamp <= upto) {
    gpum__pool_free_remove(p, b);
    gpum__pool_free_insert(p, b, &p->shared);
    p->st.num_stream_merges++;
  }
}

/* An event that completes gives back the blocks freed before it; the blocks freed after it
 * (reused and freed again meanwhile) need a new event. That one is queried at once too: on an
 * idle stream it has completed already, and waiting for the next miss to notice would make
 * this allocation take a new segment while the stream's blocks sit unused. At most two rounds
 * per stream: the second event covers every block the stream holds. */
void gpum__pool_streams_poll(gpum_pool_t *p) {
  for (gpum__owner_t *o = p->owners; o != NULL; o = o->next) {
    for (int round = 0; round < 2; round++) {
      if (o->event != NULL) {
        if (p->ops->event_query(p->ctx, o->event) != 0)
          break;
        p->ops->event_destroy(p->ctx, o->event);
        o->event = NULL;
        give_back(p, o, o->event_seq);
      }
      gpum__pool_owner_arm(p, o);
      if (o->event == NULL)
        break; /* nothing left to give back (or the record failed: tried at the next poll) */
    }
  }
}

static void complete(gpum_pool_t *p, gpum__block_t *b) {
  if (b->prev_free)
    b->prev_free->next_free = b->next_free;
  else
    p->deferred = b->next_free;
  if (b->next_free)
    b->next_free->prev_free = b->prev_free;
  b->prev_free = b->next_free = NULL;
  free(b->events);
  b->events = NULL;
  b->nevents = 0;
  gpum__pool_block_release(p, b);
}

void gpum__pool_deferred_poll(gpum_pool_t *p) {
  gpum__block_t *b = p->deferred;
  while (b != NULL) {
    gpum__block_t *next = b->next_free;
    while (b->nevents > 0 && p->ops->event_query(p->ctx, b->events[b->nevents - 1]) == 0)
      p->ops->event_destroy(p->ctx, b->events[--b->nevents]);
    if (b->nevents == 0)
      complete(p, b);
    b = next;
  }
}

void gpum__pool_streams_sync(gpum_pool_t *p) {
  if (!p->has_events)
    return;
  if (p->ops->synchronize == NULL || p->ops->synchronize(p->ctx) != 0) {
    gpum__pool_deferred_poll(p);
    gpum__pool_streams_poll(p);
    return;
  }
  /* Every event has completed. */
  while (p->deferred != NULL) {
    gpum__block_t *b = p->deferred;
    while (b->nevents > 0)
      p->ops->event_destroy(p->ctx, b->events[--b->nevents]);
    complete(p, b);
  }
  for (gpum__owner_t *o = p->owners; o != NULL; o = o->next) {
    if (o->event != NULL) {
      p->ops->event_destroy(p->ctx, o->event);
      o->event = NULL;
    }
    give_back(p, o, UINT64_MAX);
  }
}

bool gpum__pool_defer(gpum_pool_t *p, gpum__block_t *b) {
  if (!p->has_events || b->nuses == 0)
    return false;
  void **events = calloc(b->nuses, sizeof(*events));
  if (events == NULL)
    goto out_sync;
  uint32_t n = 0;
  for (uint32_t i = 0; i < b->nuses; i++) {
    if (p->ops->event_record(p->ctx, b->uses[i], &events[n]) != 0)
      goto out_events;
    n++;
  }
  free(b->uses);
  b->uses = NULL;
  b->nuses = b->cap_uses = 0;
  b->events = events;
  b->nevents = n;
  b->state = GPUM__B_AWAIT;
  b->prev_free = NULL;
  b->next_free = p->deferred;
  if (p->deferred)
    p->deferred->prev_free = b;
  p->deferred = b;
  return true;

out_events:
  while (n > 0)
    p->ops->event_destroy(p->ctx, events[--n]);
  free(events);
out_sync:
  /* Cannot wait for the other streams: wait for everything instead. */
  gpum_log(GPUM_LOG_WARN, "pool", "pool '%s': cannot defer the free of 0x%llx (%s); synchronizing",
           p->name, (unsigned long long)b->addr, gpum_last_error());
  if (p->ops->synchronize != NULL)
    p->ops->synchronize(p->ctx);
  return false;
}

void gpum__pool_deferred_drop(gpum_pool_t *p) {
  for (gpum__block_t *b = p->deferred; b != NULL; b = b->next_free)
    while (b->nevents > 0)
      p->ops->event_destroy(p->ctx, b->events[--b->nevents]);
}

int gpum__pool_block_use(gpum_pool_t *p, gpum__block_t *b, gpum_stream_t stream) {
  if (stream == b->stream)
    return 0;
  for (uint32_t i = 0; i < b->nuses; i++)
    if (b->uses[i] == stream)
      return 0;
  if (b->nuses == b->cap_uses) {
    uint32_t cap = b->cap_uses ? b->cap_uses * 2 : 4;
    gpum_stream_t *u = realloc(b->uses, cap * sizeof(*u));
    if (u == NULL)
      return gpum_error(GPUM_ENOMEM, "pool '%s': out of host memory for record_stream", p->name);
    b->uses = u;
    b->cap_uses = cap;
  }
  b->uses[b->nuses++] = stream;
  return 0;
}
