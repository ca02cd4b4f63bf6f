/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test helpers for the pool tests: a scriptable memory source (capacity, failure of chosen
 * allocations, optional events that complete only when the test says so, optional
 * synchronize, mem_info and reserve/map), a log of the calls it saw, and the test scale
 * (GPUM_TEST_SCALE, default 1; sanitizer builds divide the work by 10 unless it is set).
 */
#ifndef GPUM_POOL_TESTLIB_H
#define GPUM_POOL_TESTLIB_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/pool.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TL_SANITIZED 1
#else
#define TL_SANITIZED 0
#endif

/* Scales an operation count: GPUM_TEST_SCALE (a positive number) multiplies it; without it,
 * sanitizer builds run a tenth. */
static inline long tl_scale(long n) {
  const char *s = getenv("GPUM_TEST_SCALE");
  double f = TL_SANITIZED ? 0.1 : 1.0;
  if (s != NULL && *s) {
    char *end = NULL;
    double v = strtod(s, &end);
    if (end != s && *end == '\0' && v > 0)
      f = v;
  }
  long r = (long)((double)n * f);
  return r > 0 ? r : 1;
}

typedef struct tl_event {
  gpum_stream_t stream;
  bool done;
  struct tl_event *next;
} tl_event_t;

typedef struct {
  pthread_mutex_t lock;
  uint64_t capacity; /* 0 = unlimited */
  uint64_t used, next;
  long alloc_calls, allocs, frees, maps, unmaps;
  long fail_nth;   /* the alloc calls numbered fail_nth.. (1-based) fail; 0 = none */
  long fail_count; /* how many in a row fail from fail_nth (0 counts as 1) */
  bool fail_all;   /* every alloc fails */
  long records, syncs, events_live;
  tl_event_t *events;
  gpum_stream_t idle[8]; /* streams with no work queued: their new events are complete */
  int nidle;
  char calls[4096]; /* "alloc free sync ..." in order */
  uint64_t total;   /* mem_info total (capacity when 0) */
} tl_src_t;

enum { TL_EVENTS = 1, TL_SYNC = 2, TL_MEMINFO = 4, TL_VMM = 8 };

static inline void tl_note(tl_src_t *s, const char *what) {
  size_t n = strlen(s->calls);
  if (n + strlen(what) + 2 < sizeof(s->calls)) {
    if (n)
      s->calls[n++] = ' ';
    memcpy(s->calls + n, what, strlen(what) + 1);
  }
}

static inline int tl_take(tl_src_t *s, size_t size) {
  if (s->capacity && s->used + size > s->capacity)
    return gpum_error(GPUM_EDEVOOM, "test source: full");
  s->used += size;
  return 0;
}

static inline int tl_alloc(void *ctx, size_t size, gpum_devptr_t *addr) {
  tl_src_t *s = ctx;
  pthread_mutex_lock(&s->lock);
  long n = ++s->alloc_calls;
  int rc = 0;
  if (s->fail_all ||
      (s->fail_nth && n >= s->fail_nth && n < s->fail_nth + (s->fail_count ? s->fail_count : 1)))
    rc = gpum_error(GPUM_EDEVOOM, "test source: injected failure of call %ld", n);
  else
    rc = tl_take(s, size);
  if (rc == 0) {
    *addr = s->next;
    s->next += (size + (UINT64_C(2) << 20) - 1) / (UINT64_C(2) << 20) * (UINT64_C(2) << 20);
    s->allocs++;
  }
  tl_note(s, rc == 0 ? "alloc" : "alloc-fail");
  pthread_mutex_unlock(&s->lock);
  return rc;
}

static inline int tl_free(void *ctx, gpum_devptr_t addr, size_t size) {
  tl_src_t *s = ctx;
  (void)addr;
  pthread_mutex_lock(&s->lock);
  s->used -= size;
  s->frees++;
  tl_note(s, "free");
  pthread_mutex_unlock(&s->lock);
  return 0;
}

static inline int tl_mem_info(void *ctx, uint64_t *free_b, uint64_t *total) {
  tl_src_t *s = ctx;
  pthread_mutex_lock(&s->lock);
  *total = s->total ? s->total : s->capacity;
  *free_b = s->capacity - s->used;
  pthread_mutex_unlock(&s->lock);
  return 0;
}

static inline int tl_reserve(void *ctx, size_t size, gpum_devptr_t *base) {
  tl_src_t *s = ctx;
  pthread_mutex_lock(&s->lock);
  *base = s->next;
  s->next += size;
  tl_note(s, "reserve");
  pthread_mutex_unlock(&s->lock);
  return 0;
}

static inline int tl_map(void *ctx, gpum_devptr_t addr, size_t size) {
  tl_src_t *s = ctx;
  (void)addr;
  pthread_mutex_lock(&s->lock);
  int rc = tl_take(s, size);
  if (rc == 0)
    s->maps++;
  pthread_mutex_unlock(&s->lock);
  return rc;
}

static inline int tl_unmap(void *ctx, gpum_devptr_t addr, size_t size) {
  tl_src_t *s = ctx;
  (void)addr;
  pthread_mutex_lock(&s->lock);
  s->used -= size;
  s->unmaps++;
  pthread_mutex_unlock(&s->lock);
  return 0;
}

static inline void tl_unreserve(void *ctx, gpum_devptr_t base, size_t size) {
  (void)ctx, (void)base, (void)size;
}

static inline int tl_record(void *ctx, gpum_stream_t stream, void **event) {
  tl_src_t *s = ctx;
  tl_event_t *e = calloc(1, sizeof(*e));
  if (e == NULL)
    return GPUM_ENOMEM;
  pthread_mutex_lock(&s->lock);
  e->stream = stream;
  for (int i = 0; i < s->nidle; i++)
    e->done = e->done || s->idle[i] == stream;
  e->next = s->events;
  s->events = e;
  s->records++;
  s->events_live++;
  pthread_mutex_unlock(&s->lock);
  *event = e;
  return 0;
}

static inline int tl_query(void *ctx, void *event) {
  tl_src_t *s = ctx;
  pthread_mutex_lock(&s->lock);
  bool done = ((tl_event_t *)event)->done;
  pthread_mutex_unlock(&s->lock);
  return done ? 0 : GPUM_EAGAIN;
}

static inline void tl_destroy_event(void *ctx, void *event) {
  tl_src_t *s = ctx;
  pthread_mutex_lock(&s->lock);
  for (tl_event_t **pp = &s->events; *pp; pp = &(*pp)->next)
    if (*pp == event) {
      *pp = ((tl_event_t *)event)->next;
      break;
    }
  s->events_live--;
  pthread_mutex_unlock(&s->lock);
  free(event);
}

/* Completes the events recorded so far on stream (every stream when all). */
static inline void tl_complete(tl_src_t *s, bool all, gpum_stream_t stream) {
  pthread_mutex_lock(&s->lock);
  for (tl_event_t *e = s->events; e; e = e->next)
    if (all || e->stream == stream)
      e->done = true;
  pthread_mutex_unlock(&s->lock);
}

/* The stream's work has finished: its events complete, and so will any recorded on it later. */
static inline void tl_idle(tl_src_t *s, gpum_stream_t stream) {
  tl_complete(s, false, stream);
  pthread_mutex_lock(&s->lock);
  if (s->nidle < (int)(sizeof(s->idle) / sizeof(s->idle[0])))
    s->idle[s->nidle++] = stream;
  pthread_mutex_unlock(&s->lock);
}

static inline int tl_sync(void *ctx) {
  tl_src_t *s = ctx;
  tl_complete(s, true, 0);
  pthread_mutex_lock(&s->lock);
  s->syncs++;
  tl_note(s, "sync");
  pthread_mutex_unlock(&s->lock);
  return 0;
}

/* A test source with the given features (TL_*) and capacity; *src is ready for a pool. */
static inline tl_src_t *tl_open(unsigned features, uint64_t capacity, gpum_pool_source_t **src) {
  tl_src_t *s = calloc(1, sizeof(*s));
  if (s == NULL)
    return NULL;
  pthread_mutex_init(&s->lock, NULL);
  s->capacity = capacity;
  s->next = UINT64_C(0x100000000000);
  gpum_pool_source_ops_t ops = {.name = "test", .alloc = tl_alloc, .free = tl_free};
  if (features & TL_MEMINFO)
    ops.mem_info = tl_mem_info;
  if (features & TL_EVENTS) {
    ops.event_record = tl_record;
    ops.event_query = tl_query;
    ops.event_destroy = tl_destroy_event;
  }
  if (features & TL_SYNC)
    ops.synchronize = tl_sync;
  if (features & TL_VMM) {
    ops.reserve = tl_reserve;
    ops.map = tl_map;
    ops.unmap = tl_unmap;
    ops.unreserve = tl_unreserve;
  }
  if (gpum_pool_source_custom(&ops, s, src) != 0) {
    free(s);
    return NULL;
  }
  return s;
}

static inline void tl_close(tl_src_t *s, gpum_pool_source_t *src) {
  gpum_pool_source_destroy(src);
  if (s == NULL)
    return;
  while (s->events) {
    tl_event_t *e = s->events;
    s->events = e->next;
    free(e);
  }
  pthread_mutex_destroy(&s->lock);
  free(s);
}

#endif /* GPUM_POOL_TESTLIB_H */
