/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pool's public entry points: options, create and destroy, alloc with its OOM ladder, free,
 * record_stream, trim and OOM callbacks. Each call takes the pool's mutex once; the hot path
 * (a cached size) is a TLSF lookup, a pointer-map insert and a few counters, with no malloc.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/size.h>

#include "pool/pool_internal.h"
#include "core/names_internal.h"

#define MIB ((uint64_t)1 << 20)
#define FA_MAX_SPLIT (64 * MIB)
#define FA_GC_THRESHOLD 0.8
/* The default cache bound of a pool without a limit, a share of the device: on a GPU shared
 * with other jobs, memory a pool caches but does not use is memory they cannot have. 1/8 (10
 * GiB on an 80 GB GPU) keeps the generated transformer logs' steady state cached (no driver
 * call per step) while FRAGMENTATION_AWARE no longer holds 2.5-5x its peak (docs/pool.md). */
#define DEFAULT_CACHE_FRACTION 0.125
#define GREEDY_FIRST_STEP (64 * MIB)

const char *gpum_pool_strategy_name(gpum_pool_strategy_t s) {
  static const char *const names[] = {[GPUM_POOL_BALANCED] = "BALANCED",
                                      [GPUM_POOL_GREEDY] = "GREEDY",
                                      [GPUM_POOL_CONSOLIDATED] = "CONSOLIDATED",
                                      [GPUM_POOL_FRAGMENTATION_AWARE] = "FRAGMENTATION_AWARE"};
  return GPUM__NAME_OF(names, s, "UNKNOWN");
}

int gpum_pool_strategy_parse(const char *s, gpum_pool_strategy_t *out) {
  static const struct {
    const char *name;
    gpum_pool_strategy_t value;
  } names[] = {
      {"balanced", GPUM_POOL_BALANCED},
      {"greedy", GPUM_POOL_GREEDY},
      {"consolidated", GPUM_POOL_CONSOLIDATED},
      {"fragmentation_aware", GPUM_POOL_FRAGMENTATION_AWARE},
      {"fragmentation-aware", GPUM_POOL_FRAGMENTATION_AWARE},
  };
  if (s == NULL || out == NULL)
    return gpum_error(GPUM_EINVAL, "no pool strategy given");
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strcasecmp(s, names[i].name) == 0) {
      *out = names[i].value;
      return 0;
    }
  return gpum_error(GPUM_EINVAL,
                    "unknown pool strategy '%s' (use balanced, greedy, consolidated or "
                    "fragmentation_aware)",
                    s);
}

void gpum_pool_opts_init(gpum_pool_opts_t *opts) {
  if (opts == NULL)
    return;
  memset(opts, 0, sizeof(*opts));
  opts->name = "default";
  opts->strategy = GPUM_POOL_BALANCED;
}

/* ---- Create and destroy ---- */

static int check_opts(const gpum_pool_source_t *src, const gpum_pool_opts_t *o) {
  const char *name = o->name ? o->name : "default";
  if (strlen(name) >= GPUM__POOL_NAME_MAX || name[0] == '\0')
    return gpum_error(GPUM_EINVAL, "pool name '%.80s' must have 1 to %d characters", name,
                      GPUM__POOL_NAME_MAX - 1);
  if ((unsigned)o->strategy > GPUM_POOL_FRAGMENTATION_AWARE)
    return gpum_error(GPUM_EINVAL,
                      "pool '%s': unknown strategy %d (use BALANCED, GREEDY, CONSOLIDATED or "
                      "FRAGMENTATION_AWARE)",
                      name, (int)o->strategy);
  if (o->device < 0)
    return gpum_error(GPUM_EINVAL, "pool '%s': device %d is negative", name, o->device);
  if (!(o->limit_fraction >= 0 && o->limit_fraction <= 1))
    return gpum_error(GPUM_EINVAL,
                      "pool '%s': limit_fraction %g is out of range (give a fraction in (0, 1], "
                      "or 0 for none)",
                      name, o->limit_fraction);
  if (o->limit_fraction > 0 && src->ops.mem_info == NULL)
    return gpum_error(GPUM_EINVAL,
                      "pool '%s': limit_fraction needs a source that reports device memory, and "
                      "source '%s' does not (give limit_bytes instead)",
                      name, src->name);
  if (!(o->cache_limit_fraction >= 0 && o->cache_limit_fraction <= 1))
    return gpum_error(GPUM_EINVAL,
                      "pool '%s': cache_limit_fraction %g is out of range (give a fraction in "
                      "(0, 1], or 0 for the default)",
                      name, o->cache_limit_fraction);
  if (!(o->gc_threshold >= 0 && o->gc_threshold < 1))
    return gpum_error(GPUM_EINVAL,
                      "pool '%s': gc_threshold %g is out of range (give a value in (0, 1), or 0 "
                      "for off)",
                      name, o->gc_threshold);
  if (o->max_split_size != 0 && o->max_split_size < GPUM__POOL_LARGE_SEG)
    return gpum_error(GPUM_EINVAL,
                      "pool '%s': max_split_size %llu is too small (give 0 for no limit, or at "
                      "least 20 MiB, the large segment size)",
                      name, (unsigned long long)o->max_split_size);
  return 0;
}

/* The reservation the process runs under: GPUM_MEM_LIMIT (bytes per GPU), set by gpum run and
 * the other launchers (gpum_reservation_env); 0 when unset or not a plain positive number. */
static uint64_t reservation_limit(void) {
  const char *s = getenv("GPUM_MEM_LIMIT");
  if (s == NULL || *s < '0' || *s > '9')
    return 0;
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  return *end == '\0' ? (uint64_t)v : 0;
}

static int apply_opts(gpum_pool_t *p, const gpum_pool_opts_t *o) {
  snprintf(p->name, sizeof(p->name), "%s", o->name ? o->name : "default");
  p->opts = *o;
  p->opts.name = p->name;
  p->strategy = o->strategy;
  p->log = o->event_log;
  uint64_t free_b = 0;
  if (p->ops->mem_info != NULL && p->ops->mem_info(p->ctx, &free_b, &p->device_total) != 0) {
    if (o->limit_fraction > 0)
      return gpum_error(GPUM_EINVAL,
                        "pool '%s': limit_fraction: source '%s' cannot report "
                        "device memory: %s",
                        p->name, p->src->name, gpum_last_error());
    p->device_total = 0;
  }
  p->limit = o->limit_bytes;
  if (o->limit_fraction > 0) {
    uint64_t f = (uint64_t)floor(o->limit_fraction * (double)p->device_total);
    if (p->limit == 0 || f < p->limit)
      p->limit = f;
  }
  /* The reservation is GPU memory: it does not bound pools of host memory (host, pinned) or of
   * no memory at all (simulated, so that a replay does not depend on the environment). */
  if (p->limit == 0 && !o->no_reservation_limit && !p->src->host_memory)
    p->limit = reservation_limit();
  /* The cache bound. Under a limit (the reservation, usually) the pool may cache up to it:
   * that memory is the job's own, gpumd counts it as taken whether it is used or cached. With
   * no limit, caching is bounded by a share of the device instead, so that a pool of a job
   * that reserved nothing does not sit on memory the GPU's other jobs need. */
  uint64_t ref = p->limit ? p->limit : p->device_total;
  double frac = o->cache_limit_fraction > 0 ? o->cache_limit_fraction
                : p->limit == 0             ? DEFAULT_CACHE_FRACTION
                                            : 0;
  if (o->cache_limit_bytes == 0 && o->cache_limit_fraction > 0 && ref == 0)
    return gpum_error(GPUM_EINVAL,
                      "pool '%s': cache_limit_fraction needs a limit or a source that reports "
                      "device memory, and source '%s' does not (give cache_limit_bytes instead)",
                      p->name, p->src->name);
  p->cache_max = UINT64_MAX;
  if (o->cache_limit_bytes > 0)
    p->cache_max = o->cache_limit_bytes;
  else if (frac > 0 && ref > 0)
    p->cache_max = (uint64_t)floor(frac * (double)ref);
  p->max_split = o->max_split_size;
  p->gc_threshold = o->gc_threshold;
  p->expandable = o->expandable_segments;
  if (p->strategy == GPUM_POOL_FRAGMENTATION_AWARE) {
    if (p->max_split == 0)
      p->max_split = FA_MAX_SPLIT;
    if (p->gc_threshold == 0)
      p->gc_threshold = FA_GC_THRESHOLD;
    p->expandable = true;
  }
  p->expandable = p->expandable && p->has_vmm;
  p->greedy_step = GREEDY_FIRST_STEP;
  return 0;
}

int gpum_pool_create(gpum_pool_source_t *src, const gpum_pool_opts_t *opts, gpum_pool_t **out) {
  if (out == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_pool_create: out is NULL");
  *out = NULL;
  if (src == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_pool_create: no memory source given");
  gpum_pool_opts_t defaults;
  gpum_pool_opts_init(&defaults);
  if (opts == NULL)
    opts = &defaults;
  int rc = check_opts(src, opts);
  if (rc != 0)
    return rc;
  gpum_pool_t *p = calloc(1, sizeof(*p));
  if (p == NULL)
    return gpum_error(GPUM_ENOMEM, "out of host memory for a pool");
  p->src = src;
  p->ops = &src->ops;
  p->ctx = src->ctx;
  p->has_events = src->ops.event_record != NULL;
  p->has_vmm = src->ops.reserve != NULL;
  rc = apply_opts(p, opts);
  if (rc != 0)
    goto out_free;
  /* An adaptive mutex spins briefly before sleeping: the critical section is a few tens of
   * nanoseconds, far shorter than a futex sleep and wake-up, so two threads sharing a pool
   * would otherwise spend most of their time in the kernel. */
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
  int mrc = pthread_mutex_init(&p->lock, &attr);
  pthread_mutexattr_destroy(&attr);
  if (mrc != 0) {
    rc = gpum_error(GPUM_ENOMEM, "pool '%s': cannot create its mutex", p->name);
    goto out_free;
  }
  p->shared.shared = true;
  gpum__tlsf_init(&p->shared.tlsf[0]);
  gpum__tlsf_init(&p->shared.tlsf[1]);
  gpum__blockmap_init(&p->map);
  gpum__pool_log_header(p);
  *out = p;
  return 0;

out_free:
  free(p);
  return rc;
}

void gpum_pool_destroy(gpum_pool_t *p) {
  if (p == NULL)
    return;
  size_t live = gpum__blockmap_count(&p->map);
  if (live != 0) {
    char buf[GPUM_SIZE_BUFSZ];
    gpum_log(GPUM_LOG_WARN, "pool", "pool '%s' destroyed with %zu blocks (%s) still allocated",
             p->name, live, gpum_size_format(p->st.allocated_bytes.current, buf, sizeof(buf)));
  }
  if (p->has_events && p->ops->synchronize != NULL)
    p->ops->synchronize(p->ctx);
  gpum__pool_deferred_drop(p);
  while (p->segs != NULL)
    gpum__pool_seg_release(p, p->segs);
  gpum__pool_owners_free(p);
  gpum__pool_nodes_free(p);
  gpum__blockmap_free(&p->map);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

/* ---- Allocation ---- */

/* One pass of the ladder below the callbacks: cached blocks, blocks of streams whose events
 * completed, growth, then (sync and) free unsplit cached segments and retry. */
static int attempt(gpum_pool_t *p, gpum__owner_t *o, int kind, uint64_t rsize,
                   gpum__block_t **out) {
  int rc = gpum__pool_nodes_reserve(p, 2);
  if (rc == 0)
    rc = gpum__blockmap_reserve(&p->map);
  if (rc != 0)
    return rc;
  if (p->deferred != NULL)
    gpum__pool_deferred_poll(p);
  if ((*out = gpum__pool_find(p, o, kind, rsize)) != NULL)
    return 0;
  if (p->has_events) {
    gpum__pool_streams_poll(p);
    if ((*out = gpum__pool_find(p, o, kind, rsize)) != NULL)
      return 0;
  }
  rc = gpum__pool_grow(p, kind, rsize, out);
  if (rc != GPUM_EDEVOOM)
    return rc;
  p->st.num_alloc_retries++;
  gpum__pool_streams_sync(p);
  if ((*out = gpum__pool_find(p, o, kind, rsize)) != NULL)
    return 0;
  gpum__pool_release_cached(p, 0);
  return gpum__pool_grow(p, kind, rsize, out);
}

/* The callbacks, each asked once with the lock released; true asks for another attempt. */
static int ask_callbacks(gpum_pool_t *p, size_t size, gpum_stream_t stream, int kind,
                         uint64_t rsize, gpum__block_t **out) {
  int rc = GPUM_EDEVOOM;
  for (size_t i = 0; i < p->ncallbacks; i++) {
    gpum__oom_cb_t cb = p->callbacks[i];
    pthread_mutex_unlock(&p->lock);
    bool retry = cb.fn(p, size, cb.arg);
    pthread_mutex_lock(&p->lock);
    if (!retry)
      continue;
    gpum__owner_t *o = p->has_events ? gpum__pool_owner(p, stream) : NULL;
    if (p->has_events && o == NULL)
      return GPUM_ENOMEM;
    rc = attempt(p, o, kind, rsize, out);
    if (rc != GPUM_EDEVOOM)
      return rc;
  }
  return rc;
}

static int alloc_locked(gpum_pool_t *p, size_t size, gpum_stream_t stream, gpum_devptr_t *ptr) {
  if (size > GPUM__POOL_MAX_REQUEST || (p->limit && gpum__pool_round(size) > p->limit))
    return gpum__pool_oom_error(p, size, stream, true);
  uint64_t rsize = gpum__pool_round(size);
  int kind = gpum__pool_kind(rsize);
  gpum__owner_t *o = NULL;
  if (p->has_events && (o = gpum__pool_owner(p, stream)) == NULL)
    return GPUM_ENOMEM;
  gpum__block_t *b = NULL;
  int rc;
  /* The hot path: nodes and map slots to spare, no deferred frees, a cached block. */
  if (p->node_avail >= 2 && p->deferred == NULL && gpum__blockmap_reserve(&p->map) == 0 &&
      (b = gpum__pool_find(p, o, kind, rsize)) != NULL)
    rc = 0;
  else
    rc = attempt(p, o, kind, rsize, &b);
  if (rc == GPUM_EDEVOOM && p->ncallbacks > 0)
    rc = ask_callbacks(p, size, stream, kind, rsize, &b);
  if (rc == GPUM_EDEVOOM)
    return gpum__pool_oom_error(p, size, stream, false);
  if (rc != 0)
    return rc;
  if (p->has_events)
    o = gpum__pool_owner(p, stream); /* found again: a callback may have run */
  gpum__pool_take(p, b, rsize, size, stream, o);
  *ptr = b->addr;
  if (p->log)
    gpum__pool_log(p, "allocate", b->addr, size, stream);
  return 0;
}

int gpum_pool_alloc(gpum_pool_t *p, size_t size, gpum_stream_t stream, gpum_devptr_t *ptr) {
  if (p == NULL || ptr == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_pool_alloc: %s is NULL", p ? "ptr" : "pool");
  if (size == 0)
    return gpum_error(GPUM_EINVAL, "pool '%s': cannot allocate 0 bytes", p->name);
  pthread_mutex_lock(&p->lock);
  int rc = alloc_locked(p, size, stream, ptr);
  pthread_mutex_unlock(&p->lock);
  return rc;
}

/* ---- Free, record_stream, trim, callbacks ---- */

static int unknown_ptr(gpum_pool_t *p, gpum_devptr_t ptr) {
  return gpum_error(GPUM_EINVAL,
                    "pool '%s': 0x%llx is not a block of this pool (never allocated here, or "
                    "already freed)",
                    p->name, (unsigned long long)ptr);
}

int gpum_pool_free(gpum_pool_t *p, gpum_devptr_t ptr) {
  if (p == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_pool_free: pool is NULL");
  pthread_mutex_lock(&p->lock);
  gpum__block_t *b = gpum__blockmap_remove(&p->map, ptr);
  if (b == NULL) {
    pthread_mutex_unlock(&p->lock);
    return unknown_ptr(p, ptr);
  }
  gpum__stat_sub(&p->st.allocated_bytes, b->size);
  gpum__stat_sub(&p->st.requested_bytes, b->requested);
  gpum__stat_sub(&p->st.allocation, 1);
  if (p->log)
    gpum__pool_log(p, "free", ptr, b->requested, b->stream);
  if (b->nuses == 0 || !gpum__pool_defer(p, b))
    gpum__pool_block_release(p, b);
  pthread_mutex_unlock(&p->lock);
  return 0;
}

int gpum_pool_record_stream(gpum_pool_t *p, gpum_devptr_t ptr, gpum_stream_t stream) {
  if (p == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_pool_record_stream: pool is NULL");
  pthread_mutex_lock(&p->lock);
  gpum__block_t *b = gpum__blockmap_get(&p->map, ptr);
  int rc = b ? gpum__pool_block_use(p, b, stream) : unknown_ptr(p, ptr);
  pthread_mutex_unlock(&p->lock);
  return rc;
}

int gpum_pool_trim(gpum_pool_t *p, uint64_t target_bytes, uint64_t *released) {
  if (released)
    *released = 0;
  if (p == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_pool_trim: pool is NULL");
  pthread_mutex_lock(&p->lock);
  gpum__pool_streams_sync(p);
  uint64_t r = gpum__pool_release_cached(p, target_bytes);
  pthread_mutex_unlock(&p->lock);
  if (released)
    *released = r;
  return 0;
}

int gpum_pool_add_oom_callback(gpum_pool_t *p, gpum_pool_oom_fn fn, void *arg) {
  if (p == NULL || fn == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_pool_add_oom_callback: %s is NULL",
                      p ? "the callback" : "pool");
  pthread_mutex_lock(&p->lock);
  int rc = 0;
  if (p->ncallbacks == GPUM__POOL_MAX_CALLBACKS)
    rc = gpum_error(GPUM_ENOSPC, "pool '%s': already %d OOM callbacks", p->name,
                    GPUM__POOL_MAX_CALLBACKS);
  else
    p->callbacks[p->ncallbacks++] = (gpum__oom_cb_t){fn, arg};
  pthread_mutex_unlock(&p->lock);
  return rc;
}
