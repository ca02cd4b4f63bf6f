/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The dynamic request batcher (docs/batcher.md): turns a stream of single requests into
 * batches for a model, with Triton's semantics and a memory bound.
 *
 * Requests wait in one FIFO queue per priority level (level 1 is the highest); N workers (one
 * per model instance) take batches. A batch goes when it is full (max_batch_size), when a
 * preferred size can be formed as a worker frees up, or when the oldest request has waited
 * max_queue_delay. Per level: a queue timeout with REJECT (the request fails with
 * GPUM_ETIMEDOUT) or DELAY (it stays, behind every request that has not timed out), an override
 * per request that may only shorten it, and max_queue_size (a submit past it fails at once with
 * GPUM_EBUSY). With preserve_ordering, completions are released in submission order.
 *
 * Memory-aware: a batch is also bounded by what fits, item_bytes per request against
 * budget_bytes, or, with a memory callback (the adaptive runner's, gpum/batch.h: a pool's or the
 * device's peak after each batch), by the bytes per request and the fixed bytes the batcher
 * measures (a line fitted through the peaks of batches of different sizes) against the
 * callback's limit (or budget_bytes), keeping 10% spare; a batch the model answers with
 * GPUM_EDEVOOM is split and its halves run (no request is lost or answered twice; one request alone
 * out of memory fails with GPUM_EDEVOOM), and the bound drops to what ran;
 * gpum_batcher_set_pressure lowers it by half until the pressure ends. The bound grows back by one
 * request per batch that fits.
 *
 * Thread safety: every function may be called from any thread; the model function runs on the
 * workers' threads, a completion callback on the thread that completes the request.
 */
#ifndef GPUM_BATCHER_H
#define GPUM_BATCHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/batch.h>
#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Runs a batch: n requests' inputs; writes each one's output (may leave NULL). Returns 0,
 * GPUM_EDEVOOM (the batch is split and retried), or another error (every request of the batch
 * fails with it). worker: 0..workers-1. */
typedef int (*gpum_batcher_fn)(void *const *inputs, void **outputs, size_t n, unsigned worker,
                               void *user);

typedef struct {
  uint64_t timeout_us;   /* how long a request may wait in the queue (0: no timeout) */
  bool delay;            /* on timeout: DELAY (stay, behind the others) rather than REJECT */
  bool allow_override;   /* a request may give a shorter timeout */
  size_t max_queue_size; /* 0: unbounded */
} gpum_batcher_policy_t;

typedef struct {
  size_t max_batch_size;         /* >= 1 (required) */
  const size_t *preferred_sizes; /* optional, each <= max_batch_size */
  size_t npreferred;
  uint64_t max_queue_delay_us;           /* 0: no waiting for more requests */
  unsigned priority_levels;              /* 0 or 1: one level */
  unsigned default_priority;             /* 1..levels (0: the lowest level) */
  const gpum_batcher_policy_t *policies; /* one per level, or NULL (default_policy for all) */
  gpum_batcher_policy_t default_policy;
  bool preserve_ordering;
  unsigned workers;      /* >= 1 (0: 1) */
  uint64_t item_bytes;   /* memory a request needs in a batch (0: no memory bound) */
  uint64_t budget_bytes; /* what the batches may use (the reservation's headroom) */
  gpum_batcher_fn fn;    /* required */
  void *user;
  /* Optional, instead of item_bytes: called on the worker after each batch that ran (the peak
   * since the previous call; with several workers the peaks of overlapping batches add up, which
   * only makes the bound smaller). */
  gpum_batch_memory_fn memory;
  void *memory_user;
} gpum_batcher_opts_t;

typedef struct gpum_batcher gpum_batcher_t;
typedef struct gpum_batcher_req gpum_batcher_req_t;

/* Called once when a request completes (status 0 with its output, or its error). */
typedef void (*gpum_batcher_done_fn)(gpum_batcher_req_t *req, int status, void *output, void *user);

typedef struct {
  unsigned priority;         /* 0: the default */
  uint64_t timeout_us;       /* 0: the level's; else shorter only where the level allows it */
  gpum_batcher_done_fn done; /* optional */
  void *user;
} gpum_batcher_submit_opts_t;

/* Makes a batcher and starts its workers. GPUM_EINVAL (the detail says which option),
 * GPUM_ENOMEM. */
GPUM_API int gpum_batcher_create(const gpum_batcher_opts_t *opts, gpum_batcher_t **out);
/* Stops it: with drain, queued requests are still served; without, they fail with GPUM_EINTR.
 * Waits for the workers; the batcher then refuses submits (GPUM_ESTATE). */
GPUM_API void gpum_batcher_shutdown(gpum_batcher_t *b, bool drain);
/* Shuts down (draining) if needed and frees. Requests must have been freed. */
GPUM_API void gpum_batcher_destroy(gpum_batcher_t *b);

/* Queues input; *req (may be NULL when a done callback is given, which then also frees it) is
 * the handle. GPUM_EBUSY (the level's queue is full), GPUM_EINVAL (bad priority),
 * GPUM_ESTATE (shut down). */
GPUM_API int gpum_batcher_submit(gpum_batcher_t *b, void *input,
                                 const gpum_batcher_submit_opts_t *opts, gpum_batcher_req_t **req);
/* Waits up to timeout_ms (-1: for ever) for the request: its status (0, or its error), output
 * in *output; GPUM_EAGAIN when it is not done yet (poll with timeout_ms 0). */
GPUM_API int gpum_batcher_wait(gpum_batcher_req_t *req, int64_t timeout_ms, void **output);
/* Cancels a queued request (it completes with GPUM_EINTR); GPUM_ESTATE when it already runs or
 * ran. */
GPUM_API int gpum_batcher_cancel(gpum_batcher_req_t *req);
/* Frees a completed request's handle (one without a done callback). */
GPUM_API void gpum_batcher_req_free(gpum_batcher_req_t *req);

GPUM_API void gpum_batcher_set_pressure(gpum_batcher_t *b, bool on);

#define GPUM_BATCHER_HIST 64 /* batch sizes counted one by one; larger ones in the last slot */

typedef struct {
  uint64_t submitted, completed, failed;
  uint64_t rejected_full, rejected_timeout, cancelled, shut_down;
  uint64_t batches, oom_splits;
  uint64_t batch_sizes[GPUM_BATCHER_HIST + 1];     /* [n]: batches of n requests (n < HIST) */
  double queue_p50_us, queue_p95_us, queue_p99_us; /* queue wait, recent requests */
  double e2e_p50_us, e2e_p95_us, e2e_p99_us;       /* submit to completion */
  double throughput;                               /* completed per second since create */
  size_t bound;                                    /* the batch bound now (memory, OOMs) */
  size_t queued;
  uint64_t item_bytes;  /* per request: item_bytes, or as measured (0: not yet) */
  uint64_t fixed_bytes; /* measured bytes that do not grow with the batch (weights, workspace) */
} gpum_batcher_stats_t;

GPUM_API void gpum_batcher_stats(gpum_batcher_t *b, gpum_batcher_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* GPUM_BATCHER_H */
