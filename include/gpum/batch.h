/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The adaptive batch runner: runs a step function over N items, a batch at a time, and keeps
 * the batch as large as memory allows (docs/batch.md).
 *
 * Items are indices 0..N-1, taken in order; a batch is a contiguous range of them. The step
 * reports success (0), device out-of-memory (GPUM_EDEVOOM), or another error, which stops the
 * run. On out-of-memory the runner retries the same items with a smaller batch, so no item is
 * lost and none is counted twice; an item that fails alone goes to the fallback callback (the
 * CPU, say) or is reported as failed, and the run goes on. The batch grows back when memory
 * allows, judged from what the runner measured (the peak memory of the batches it ran, against
 * the budget the memory callback reports) rather than a fixed rule; optional item weights (a
 * clip's length, a sequence's tokens) let it size batches by what they hold, not by count.
 *
 * With an effective batch E, micro-batches never cross an accumulation window of E items: the
 * step is told when its micro-batch closes a window (time to step the optimizer) and the scale
 * for its loss (its items over the window's), so training semantics do not change when the
 * batch shrinks. A step that fails with GPUM_EDEVOOM must leave no trace (no gradients
 * accumulated): it is run again with fewer items.
 *
 * Thread safety: a runner is used by one thread (gpum_batch_run and the callbacks it calls);
 * gpum_batch_set_pressure may be called from any thread. No global state.
 */
#ifndef GPUM_BATCH_H
#define GPUM_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/device.h>
#include <gpum/export.h>
#include <gpum/pool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One micro-batch, as the step (or the fallback) sees it. */
typedef struct {
  uint64_t first;    /* index of its first item */
  size_t count;      /* items first .. first + count - 1 */
  unsigned attempt;  /* 0 the first time these items run; more after out-of-memory retries */
  bool window_end;   /* it closes an accumulation window: step the optimizer after it */
  double loss_scale; /* count / the window's items: the loss weights sum to 1 per window */
  uint64_t window;   /* the window's number, from 0 (from the start item on a resume) */
} gpum_batch_t;

/* Returns 0 when the batch ran, GPUM_EDEVOOM when the device ran out of memory (it is retried
 * smaller), anything else to stop the run (gpum_batch_run returns it). */
typedef int (*gpum_batch_step_fn)(const gpum_batch_t *b, void *user);

/* What the memory callback reports after each step. */
typedef struct {
  uint64_t peak;  /* the most in use since the previous call (the step's peak), bytes */
  uint64_t limit; /* what may be used now: the reservation, the pool's limit, or the device's
                     free memory plus what the job holds */
  uint64_t total; /* the device's size (0: unknown): peaks are kept under target of it */
} gpum_batch_memory_t;

/* Fills *m; returns 0, or an error (the runner then grows by doubling, up to max_batch). */
typedef int (*gpum_batch_memory_fn)(gpum_batch_memory_t *m, void *user);

/* An item's relative size (a clip's length, a sequence's tokens; > 0). */
typedef double (*gpum_batch_weight_fn)(uint64_t item, void *user);

typedef struct gpum_batch_stats gpum_batch_stats_t;
typedef void (*gpum_batch_progress_fn)(const gpum_batch_stats_t *s, void *user);

/* Called after a window closes once at least checkpoint_every items passed since the last
 * checkpoint: next is the first item not done (resume there with opts.start = next). A
 * non-zero return stops the run with that code. */
typedef int (*gpum_batch_checkpoint_fn)(uint64_t next, void *user);

/* Waits for memory to come back (another job ends) before an item is tried again: return 0
 * to try again, non-zero to give the item up (then the fallback, or failed). */
typedef int (*gpum_batch_wait_fn)(void *user);

/* Called for an item that failed (out of memory alone, and no fallback or the fallback failed). */
typedef void (*gpum_batch_failed_fn)(uint64_t item, int error, void *user);

typedef struct {
  uint64_t items;              /* N (required) */
  uint64_t start;              /* the first item to run: 0, or a checkpoint's next to resume */
  size_t batch_size;           /* the first batch's size (required, >= 1) */
  size_t max_batch;            /* the largest (0: batch_size) */
  size_t effective_batch;      /* items per accumulation window (0: every micro-batch is one) */
  double target;               /* the share of the device (memory.total) peaks may reach, or,
                                  without it, of what the limit leaves above the job's fixed
                                  memory (0: 0.88) */
  gpum_batch_step_fn step;     /* required */
  gpum_batch_step_fn fallback; /* optional: runs one item that failed alone (count 1) */
  gpum_batch_memory_fn memory; /* optional: see above */
  gpum_batch_weight_fn weight; /* optional: items' sizes (default: all 1) */
  gpum_batch_checkpoint_fn checkpoint; /* optional */
  uint64_t checkpoint_every;           /* items between checkpoints (0: none) */
  gpum_batch_progress_fn progress;     /* optional: after every step */
  gpum_batch_failed_fn failed;         /* optional */
  gpum_batch_wait_fn wait; /* optional: an item that would fit the device but not what is free
                              now waits for memory through it (default: 100 ms sleeps, up to
                              max_wait_ms) */
  uint64_t max_wait_ms;    /* with the default wait: how long an item may wait (0: 10 min) */
  void *user;              /* passed to every callback */
} gpum_batch_opts_t;

/* Where the batch size changed: from item on, size. */
typedef struct {
  uint64_t item;
  size_t size;
} gpum_batch_change_t;

#define GPUM_BATCH_TRAJECTORY 256 /* changes kept: the first 128 and the last 128 */

struct gpum_batch_stats {
  uint64_t done;            /* items run by the step */
  uint64_t fallback;        /* items run by the fallback */
  uint64_t failed;          /* items that failed */
  uint64_t steps;           /* successful steps */
  uint64_t ooms;            /* steps that ran out of memory */
  uint64_t retries;         /* items run again after an out-of-memory step */
  uint64_t windows;         /* accumulation windows closed */
  uint64_t waits;           /* times an item waited for memory */
  size_t batch_size;        /* now */
  size_t smallest, largest; /* batch sizes run */
  uint64_t peak;            /* the highest peak the memory callback reported */
  double seconds;           /* wall time of the run so far */
  double items_per_s;       /* (done + fallback) / seconds */
  size_t nchanges;          /* changes recorded in trajectory */
  uint64_t changes;         /* batch size changes in all */
  gpum_batch_change_t trajectory[GPUM_BATCH_TRAJECTORY];
};

typedef struct gpum_batch_runner gpum_batch_runner_t;

/* Creates a runner for opts (copied). GPUM_EINVAL for missing or inconsistent options (the
 * detail says which), GPUM_ENOMEM. Free with gpum_batch_destroy. */
GPUM_API int gpum_batch_create(const gpum_batch_opts_t *opts, gpum_batch_runner_t **out);
GPUM_API void gpum_batch_destroy(gpum_batch_runner_t *r);
/* Runs the items from opts.start to the end: 0 when every item was run, fell back or was
 * reported failed; else the first error a step, the fallback or a checkpoint returned (the run
 * stops there; gpum_batch_stats says how far it got, and a checkpoint's next resumes it). */
GPUM_API int gpum_batch_run(gpum_batch_runner_t *r);
/* The runner's figures (also during the run, from its callbacks). */
GPUM_API void gpum_batch_stats(const gpum_batch_runner_t *r, gpum_batch_stats_t *out);
/* gpumd's memory pressure on the job's GPU began (true) or ended (false): while it lasts the
 * runner takes a quarter less of the limit and does not grow. Any thread. */
GPUM_API void gpum_batch_set_pressure(gpum_batch_runner_t *r, bool on);

/* A memory callback over a gpum pool: the pool's peak of allocated bytes since the last call
 * (its peaks are reset each time) and its limit (GPUM_ENOENT when it has none). Pass the pool as
 * user, or call it from your own callback. */
GPUM_API int gpum_batch_memory_from_pool(gpum_batch_memory_t *m, void *pool);

/* A memory callback over the device layer, for a job whose memory no gpum pool holds (a
 * framework's own allocator): fill one in and pass it as the callback's argument. */
typedef struct {
  gpum_device_session_t *session; /* gpum_device_open's */
  unsigned index;                 /* the device, as the device layer numbers it */
  unsigned pid;                   /* the process whose memory counts (0: the caller) */
  uint64_t limit;                 /* the job's limit (0: the device's free memory and the
                                     process's own, read each time; under gpum run pass
                                     GPUM_MEM_LIMIT) */
} gpum_batch_device_t;

/* Reports the process's memory on the device as the peak (the driver's figure: a caching
 * allocator's high-water mark shows in it), the limit as above, and the device's size as
 * total. A device error is returned (the runner then grows as without a callback). */
GPUM_API int gpum_batch_memory_from_device(gpum_batch_memory_t *m, void *device);

#ifdef __cplusplus
}
#endif

#endif /* GPUM_BATCH_H */
