/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The dynamic request batcher (gpum/batcher.h, docs/batcher.md).
 *
 * One mutex guards the queues, the order list and the statistics; the workers wait on `work`,
 * callers of gpum_batcher_wait on `done`. The model function and the completion callbacks run
 * without the mutex: a worker takes a batch out of the queues, runs it, then completes its
 * requests under the mutex and calls their callbacks after releasing it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/batcher.h>
#include <gpum/error.h>

#include "os_internal.h"
#include "monitor/monitor_internal.h"

#define MAX_LEVELS 64
#define SAMPLES 4096 /* latency samples kept for the percentiles */

/* DONE: waiting for the requests before it (preserve_ordering); CALLING: its done callback
 * runs; RELEASED: a waiter may return (and free it). */
enum { ST_QUEUED, ST_RUNNING, ST_DONE, ST_CALLING, ST_RELEASED };

struct gpum_batcher_req {
  gpum_batcher_t *b;
  void *input, *output;
  int status, state;
  unsigned level; /* 0: the highest */
  bool delayed;   /* timed out under DELAY: served after every request that has not */
  bool autofree;  /* the done callback owns it: freed after the callback */
  uint64_t t_submit, t_start, deadline; /* deadline 0: none */
  gpum_batcher_done_fn done;
  void *user;
  gpum_batcher_req_t *prev, *next; /* in its queue */
  gpum_batcher_req_t *onext;       /* in submission order (preserve_ordering) */
  gpum_batcher_req_t *cnext;       /* in a list of callbacks to call */
};

typedef struct {
  gpum_batcher_req_t *head, *tail;
  size_t n;
} queue_t;

#define MEM_SAMPLES 32
#define MEM_SPARE 0.9 /* the share of the limit the measured batches may fill */

struct gpum_batcher {
  gpum_batcher_opts_t o;
  size_t preferred[32];
  gpum_batcher_policy_t policy[MAX_LEVELS];
  pthread_mutex_t mu;
  pthread_cond_t work, done, reap; /* CLOCK_MONOTONIC timed waits */
  queue_t q[MAX_LEVELS], delayed;
  size_t queued;
  gpum_batcher_req_t *ohead, *otail; /* unreleased requests in submission order */
  bool stopping, drain, pressure;
  size_t oom_bound; /* the bound OOMs left (max_batch_size when none) */
  /* Measured memory (opts.memory): recent (batch size, peak) pairs and the bound they give. */
  size_t mem_n[MEM_SAMPLES];
  double mem_peak[MEM_SAMPLES];
  size_t mem_count, mem_next;
  size_t mem_bound; /* 0: none (no callback, nothing measured yet, or memory does not grow) */
  double per_item, fixed;
  pthread_t *threads;
  unsigned nthreads;
  pthread_t reaper; /* fails or delays what times out while every worker is busy */
  bool reaper_running;
  bool reaper_asleep; /* waiting on reap until reap_at (0: until woken) */
  uint64_t reap_at;
  gpum_batcher_stats_t st;
  uint64_t t0;
  double qwait[SAMPLES], e2e[SAMPLES];
  size_t nsamples, next_sample;
};

static uint64_t now_us(void) {
  return gpum__os_mono_ns() / 1000;
}

static void q_push(queue_t *q, gpum_batcher_req_t *r) {
  r->next = NULL;
  r->prev = q->tail;
  if (q->tail)
    q->tail->next = r;
  else
    q->head = r;
  q->tail = r;
  q->n++;
}

static void q_remove(queue_t *q, gpum_batcher_req_t *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    q->head = r->next;
  if (r->next)
    r->next->prev = r->prev;
  else
    q->tail = r->prev;
  r->prev = r->next = NULL;
  q->n--;
}

static queue_t *queue_of(gpum_batcher_t *b, gpum_batcher_req_t *r) {
  return r->delayed ? &b->delayed : &b->q[r->level];
}

static unsigned levels(const gpum_batcher_t *b) {
  return b->o.priority_levels ? b->o.priority_levels : 1;
}

/* The batch bound now: max_batch_size, what fits the budget, what OOMs left, pressure. */
static size_t bound_of(const gpum_batcher_t *b) {
  size_t n = b->o.max_batch_size;
  if (b->o.item_bytes && b->o.budget_bytes / b->o.item_bytes < n)
    n = (size_t)(b->o.budget_bytes / b->o.item_bytes);
  if (b->mem_bound && b->mem_bound < n)
    n = b->mem_bound;
  if (b->oom_bound < n)
    n = b->oom_bound;
  if (b->pressure)
    n /= 2;
  return n ? n : 1;
}

/* Hands a completed request over (mutex held): one with a done callback goes to *out, whose
 * callbacks are called after unlocking (and which is released after its callback); one
 * without is released at once. *out is newest first (pushed in O(1)); release() calls them in
 * completion order. */
static void hand_over(gpum_batcher_req_t *r, gpum_batcher_req_t **out) {
  if (r->done) {
    r->state = ST_CALLING;
    r->cnext = *out;
    *out = r;
  } else {
    r->state = ST_RELEASED;
  }
}

/* Marks r completed (mutex held); callbacks to call go to *out (see hand_over). */
static void complete(gpum_batcher_t *b, gpum_batcher_req_t *r, int status, void *output,
                     gpum_batcher_req_t **out) {
  r->status = status;
  r->output = output;
  r->state = ST_DONE;
  if (status == 0)
    b->st.completed++;
  else
    b->st.failed++;
  /* Handed over in submission order under preserve_ordering, else at once. */
  if (b->o.preserve_ordering) {
    while (b->ohead && b->ohead->state == ST_DONE) {
      gpum_batcher_req_t *h = b->ohead;
      b->ohead = h->onext;
      if (!b->ohead)
        b->otail = NULL;
      hand_over(h, out);
    }
  } else {
    hand_over(r, out);
  }
  uint64_t t = now_us();
  size_t i = b->next_sample;
  b->qwait[i] = (double)((r->t_start ? r->t_start : t) - r->t_submit);
  b->e2e[i] = (double)(t - r->t_submit);
  b->next_sample = (i + 1) % SAMPLES;
  if (b->nsamples < SAMPLES)
    b->nsamples++;
  pthread_cond_broadcast(&b->done);
}

/* Calls the callbacks of list (newest first, as hand_over builds it) in completion order
 * (mutex not held: a callback may submit), then releases each. */
static void release(gpum_batcher_t *b, gpum_batcher_req_t *newest) {
  gpum_batcher_req_t *list = NULL;
  while (newest) { /* reversed: oldest first */
    gpum_batcher_req_t *r = newest;
    newest = r->cnext;
    r->cnext = list;
    list = r;
  }
  while (list) {
    gpum_batcher_req_t *r = list;
    list = r->cnext; /* read before the callback: r may be freed after it */
    bool autofree = r->autofree;
    r->done(r, r->status, r->output, r->user);
    if (autofree) {
      free(r);
      continue;
    }
    pthread_mutex_lock(&b->mu);
    r->state = ST_RELEASED;
    pthread_cond_broadcast(&b->done);
    pthread_mutex_unlock(&b->mu);
  }
}

/* A queued request whose timeout passed: to the delayed queue under DELAY, else failed with
 * GPUM_ETIMEDOUT (its callback added to *out). Mutex held. */
static void time_out(gpum_batcher_t *b, gpum_batcher_req_t *r, gpum_batcher_req_t **out) {
  q_remove(&b->q[r->level], r);
  if (b->policy[r->level].delay) {
    r->delayed = true;
    q_push(&b->delayed, r);
  } else {
    b->queued--;
    b->st.rejected_timeout++;
    complete(b, r, GPUM_ETIMEDOUT, NULL, out);
  }
}

/* Times out every queued request whose deadline passed; returns the next deadline (0: none).
 * Mutex held. */
static uint64_t expire(gpum_batcher_t *b, uint64_t now, gpum_batcher_req_t **out) {
  uint64_t next = 0;
  for (unsigned l = 0; l < levels(b); l++) {
    gpum_batcher_req_t *r = b->q[l].head;
    while (r) {
      gpum_batcher_req_t *n = r->next;
      if (r->deadline && r->deadline <= now) {
        time_out(b, r, out);
      } else if (r->deadline && (!next || r->deadline < next)) {
        next = r->deadline;
      }
      r = n;
    }
  }
  return next;
}

static gpum_batcher_req_t *oldest(gpum_batcher_t *b) {
  gpum_batcher_req_t *o = NULL;
  for (unsigned l = 0; l < levels(b); l++)
    if (b->q[l].head && (!o || b->q[l].head->t_submit < o->t_submit))
      o = b->q[l].head;
  if (!o)
    o = b->delayed.head;
  return o;
}

/* How many to take now (0: wait until *until, 0 = until woken). Mutex held. */
static size_t decide(gpum_batcher_t *b, uint64_t now, uint64_t *until) {
  size_t n = b->queued, bound = bound_of(b);
  *until = 0;
  if (n == 0)
    return 0;
  if (n >= bound || b->stopping)
    return n < bound ? n : bound;
  size_t best = 0; /* the largest preferred size that can be formed */
  for (size_t i = 0; i < b->o.npreferred; i++)
    if (b->preferred[i] <= n && b->preferred[i] <= bound && b->preferred[i] > best)
      best = b->preferred[i];
  if (best)
    return best;
  gpum_batcher_req_t *o = oldest(b);
  uint64_t due = o->t_submit + b->o.max_queue_delay_us;
  if (now >= due)
    return n;
  *until = due;
  return 0;
}

/* Takes up to count requests: levels highest first, FIFO, then the delayed ones. A request
 * whose timeout passed before the reaper saw it is timed out here, never run. Mutex held. */
static size_t take(gpum_batcher_t *b, size_t count, gpum_batcher_req_t **batch, uint64_t now,
                   gpum_batcher_req_t **out) {
  size_t k = 0;
  for (unsigned l = 0; l <= levels(b) && k < count; l++) {
    queue_t *q = l < levels(b) ? &b->q[l] : &b->delayed;
    while (q->head && k < count) {
      gpum_batcher_req_t *r = q->head;
      if (l < levels(b) && r->deadline && r->deadline <= now) {
        time_out(b, r, out);
        continue;
      }
      q_remove(q, r);
      r->state = ST_RUNNING;
      r->t_start = now;
      batch[k++] = r;
    }
  }
  b->queued -= k;
  return k;
}

/* A batch of n ran with this peak (mutex held): fits peak = fixed + n * per_item through the
 * recent batches (least squares) and bounds the batch by what fits the limit with MEM_SPARE.
 * While one size only was measured, the cost per request is its peak / n (all of it, fixed part
 * included: the safe side) and the bound may still reach twice that size, so that the batcher
 * learns from a second size; peaks that do not grow with the batch set no bound. */
static void learn(gpum_batcher_t *b, size_t n, const gpum_batch_memory_t *m) {
  b->mem_n[b->mem_next] = n;
  b->mem_peak[b->mem_next] = (double)m->peak;
  b->mem_next = (b->mem_next + 1) % MEM_SAMPLES;
  if (b->mem_count < MEM_SAMPLES)
    b->mem_count++;
  double k = (double)b->mem_count, sn = 0, sp = 0, snn = 0, snp = 0, most = 0;
  for (size_t i = 0; i < b->mem_count; i++) {
    double x = (double)b->mem_n[i], y = b->mem_peak[i];
    sn += x;
    sp += y;
    snn += x * x;
    snp += x * y;
    if (y / x > most)
      most = y / x;
  }
  double var = k * snn - sn * sn, slope = 0, fixed = 0;
  bool one_size = var <= 1e-9;
  if (one_size) {
    slope = most;
  } else {
    slope = (k * snp - sn * sp) / var;
    fixed = (sp - slope * sn) / k;
    if (fixed < 0) { /* a line through the origin then: the safe side */
      fixed = 0;
      slope = most;
    }
  }
  b->per_item = slope > 0 ? slope : 0;
  b->fixed = fixed;
  double limit = (double)(b->o.budget_bytes ? b->o.budget_bytes : m->limit) * MEM_SPARE;
  if (slope <= 0 || limit <= 0) {
    b->mem_bound = 0;
    return;
  }
  double fit = (limit - fixed) / slope;
  size_t bound = fit >= (double)b->o.max_batch_size ? b->o.max_batch_size
                 : fit >= 1                         ? (size_t)fit
                                                    : 1;
  if (one_size && bound < 2 * n)
    bound = 2 * n < b->o.max_batch_size ? 2 * n : b->o.max_batch_size;
  b->mem_bound = bound;
}

/* Runs batch[0..n) with splits on out-of-memory; completes every request. */
static void run(gpum_batcher_t *b, gpum_batcher_req_t **batch, size_t n, unsigned worker, void **in,
                void **outv) {
  for (size_t i = 0; i < n; i++) {
    in[i] = batch[i]->input;
    outv[i] = NULL;
  }
  int rc = b->o.fn(in, outv, n, worker, b->o.user);
  gpum_batcher_req_t *rel = NULL;
  if (rc == GPUM_EDEVOOM && n > 1) {
    pthread_mutex_lock(&b->mu);
    b->st.oom_splits++;
    if (b->oom_bound > n / 2)
      b->oom_bound = n / 2; /* what did not fit will not be formed again soon */
    pthread_mutex_unlock(&b->mu);
    run(b, batch, n / 2, worker, in, outv);
    run(b, batch + n / 2, n - n / 2, worker, in, outv);
    return;
  }
  gpum_batch_memory_t m = {0};
  bool measured = rc == 0 && b->o.memory && b->o.memory(&m, b->o.memory_user) == 0;
  pthread_mutex_lock(&b->mu);
  if (measured)
    learn(b, n, &m);
  b->st.batches++;
  b->st.batch_sizes[n < GPUM_BATCHER_HIST ? n : GPUM_BATCHER_HIST]++;
  if (rc == 0 && n >= b->oom_bound && b->oom_bound < b->o.max_batch_size)
    b->oom_bound++; /* it fitted at the bound: grow it back, one by one */
  for (size_t i = 0; i < n; i++)
    complete(b, batch[i], rc, rc == 0 ? outv[i] : NULL, &rel);
  pthread_mutex_unlock(&b->mu);
  release(b, rel);
}

/* A worker's start: its id and its arrays (max_batch_size each), allocated by create so that a
 * worker never runs short of them. The worker frees them. */
typedef struct {
  gpum_batcher_t *b;
  unsigned id;
  gpum_batcher_req_t **batch;
  void **in, **outv;
} worker_arg_t;

static void worker_arg_free(worker_arg_t *wa) {
  if (!wa)
    return;
  free(wa->batch);
  free(wa->in);
  free(wa->outv);
  free(wa);
}

static void *worker(void *arg) {
  worker_arg_t *wa = arg;
  gpum_batcher_t *b = wa->b;
  unsigned id = wa->id;
  gpum_batcher_req_t **batch = wa->batch;
  void **in = wa->in, **outv = wa->outv;
  size_t cap = b->o.max_batch_size;
  pthread_mutex_lock(&b->mu);
  for (;;) {
    gpum_batcher_req_t *rel = NULL;
    uint64_t now = now_us();
    if (b->stopping && !b->drain) { /* fail what is queued */
      size_t k;
      while ((k = take(b, cap, batch, now, &rel)) > 0)
        for (size_t i = 0; i < k; i++) {
          b->st.shut_down++;
          complete(b, batch[i], GPUM_EINTR, NULL, &rel);
        }
    }
    uint64_t until = 0;
    size_t want = decide(b, now, &until);
    if (want) {
      size_t k = take(b, want, batch, now, &rel);
      bool more = b->queued > 0;
      pthread_mutex_unlock(&b->mu);
      if (more) /* what is left needs a worker to time it (submits do not always wake one) */
        pthread_cond_signal(&b->work);
      release(b, rel);
      if (k) /* 0: every one taken had timed out */
        run(b, batch, k, id, in, outv);
      pthread_mutex_lock(&b->mu);
      continue;
    }
    if (rel) {
      pthread_mutex_unlock(&b->mu);
      release(b, rel);
      pthread_mutex_lock(&b->mu);
      continue;
    }
    if (b->stopping && b->queued == 0)
      break;
    if (until) {
      struct timespec ts = gpum__os_mono_timespec(until * 1000);
      pthread_cond_timedwait(&b->work, &b->mu, &ts);
    } else {
      pthread_cond_wait(&b->work, &b->mu);
    }
  }
  pthread_mutex_unlock(&b->mu);
  worker_arg_free(wa);
  return NULL;
}

/* The queue timeouts, kept by a thread of their own: a worker busy with a long batch must not
 * leave a timed-out request waiting for it. Sleeps until the earliest deadline. */
static void *reaper(void *arg) {
  gpum_batcher_t *b = arg;
  pthread_mutex_lock(&b->mu);
  while (!b->stopping) {
    gpum_batcher_req_t *rel = NULL;
    uint64_t next = expire(b, now_us(), &rel);
    if (rel) {
      pthread_mutex_unlock(&b->mu);
      release(b, rel);
      pthread_mutex_lock(&b->mu);
      continue;
    }
    b->reaper_asleep = true;
    b->reap_at = next;
    if (next) {
      struct timespec ts = gpum__os_mono_timespec(next * 1000);
      pthread_cond_timedwait(&b->reap, &b->mu, &ts);
    } else {
      pthread_cond_wait(&b->reap, &b->mu);
    }
    b->reaper_asleep = false;
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

int gpum_batcher_create(const gpum_batcher_opts_t *opts, gpum_batcher_t **out) {
  if (!opts || !out)
    return gpum_error(GPUM_EINVAL, "gpum_batcher_create: NULL argument");
  if (!opts->fn)
    return gpum_error(GPUM_EINVAL, "the batcher needs a model function");
  if (opts->max_batch_size == 0)
    return gpum_error(GPUM_EINVAL, "max_batch_size must be at least 1");
  if (opts->priority_levels > MAX_LEVELS)
    return gpum_error(GPUM_EINVAL, "at most %d priority levels", MAX_LEVELS);
  unsigned nl = opts->priority_levels ? opts->priority_levels : 1;
  if (opts->default_priority > nl)
    return gpum_error(GPUM_EINVAL, "default_priority %u is past the %u levels",
                      opts->default_priority, nl);
  if (opts->npreferred > 32)
    return gpum_error(GPUM_EINVAL, "at most 32 preferred sizes");
  for (size_t i = 0; i < opts->npreferred; i++)
    if (!opts->preferred_sizes || opts->preferred_sizes[i] == 0 ||
        opts->preferred_sizes[i] > opts->max_batch_size)
      return gpum_error(GPUM_EINVAL, "preferred sizes must be 1..max_batch_size");
  if (opts->item_bytes && opts->budget_bytes < opts->item_bytes)
    return gpum_error(GPUM_EINVAL, "the budget holds no request of item_bytes");
  gpum_batcher_t *b = calloc(1, sizeof *b);
  if (!b)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  b->o = *opts;
  if (!b->o.workers)
    b->o.workers = 1;
  memcpy(b->preferred, opts->preferred_sizes ? opts->preferred_sizes : b->preferred,
         opts->npreferred * sizeof *b->preferred);
  b->o.preferred_sizes = b->preferred;
  for (unsigned l = 0; l < nl; l++)
    b->policy[l] = opts->policies ? opts->policies[l] : opts->default_policy;
  b->o.policies = b->policy;
  b->oom_bound = opts->max_batch_size;
  b->t0 = now_us();
  pthread_mutex_init(&b->mu, NULL);
  gpum__os_cond_init_mono(&b->work);
  gpum__os_cond_init_mono(&b->done);
  gpum__os_cond_init_mono(&b->reap);
  b->threads = calloc(b->o.workers, sizeof *b->threads);
  if (!b->threads) {
    gpum_batcher_destroy(b);
    return gpum_error(GPUM_ENOMEM, "out of memory");
  }
  if (pthread_create(&b->reaper, NULL, reaper, b) != 0) {
    gpum_batcher_destroy(b);
    return gpum_error(GPUM_ENOMEM, "cannot start the batcher's timeout thread");
  }
  b->reaper_running = true;
  size_t cap = b->o.max_batch_size;
  for (unsigned i = 0; i < b->o.workers; i++) {
    worker_arg_t *wa = calloc(1, sizeof *wa);
    if (wa)
      *wa = (worker_arg_t){b, i, calloc(cap, sizeof *wa->batch), calloc(cap, sizeof *wa->in),
                           calloc(cap, sizeof *wa->outv)};
    if (!wa || !wa->batch || !wa->in || !wa->outv ||
        pthread_create(&b->threads[i], NULL, worker, wa) != 0) {
      worker_arg_free(wa);
      gpum_batcher_destroy(b);
      return gpum_error(GPUM_ENOMEM, "cannot start the batcher's workers");
    }
    b->nthreads++;
  }
  *out = b;
  return 0;
}

void gpum_batcher_shutdown(gpum_batcher_t *b, bool drain) {
  if (!b)
    return;
  pthread_mutex_lock(&b->mu);
  bool was = b->stopping;
  b->stopping = true;
  b->drain = drain;
  pthread_cond_broadcast(&b->work);
  pthread_cond_signal(&b->reap);
  pthread_mutex_unlock(&b->mu);
  if (was)
    return;
  if (b->reaper_running)
    pthread_join(b->reaper, NULL);
  b->reaper_running = false;
  for (unsigned i = 0; i < b->nthreads; i++)
    pthread_join(b->threads[i], NULL);
  b->nthreads = 0;
}

void gpum_batcher_destroy(gpum_batcher_t *b) {
  if (!b)
    return;
  gpum_batcher_shutdown(b, true);
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->work);
  pthread_cond_destroy(&b->done);
  pthread_cond_destroy(&b->reap);
  free(b->threads);
  free(b);
}

int gpum_batcher_submit(gpum_batcher_t *b, void *input, const gpum_batcher_submit_opts_t *so,
                        gpum_batcher_req_t **req) {
  gpum_batcher_submit_opts_t none = {0};
  if (!so)
    so = &none;
  if (!b || (!req && !so->done))
    return gpum_error(GPUM_EINVAL, "gpum_batcher_submit: a handle or a done callback is needed");
  unsigned nl = levels(b);
  unsigned prio = so->priority ? so->priority : b->o.default_priority ? b->o.default_priority : nl;
  if (prio > nl)
    return gpum_error(GPUM_EINVAL, "priority %u is past the %u levels", prio, nl);
  gpum_batcher_req_t *r = calloc(1, sizeof *r);
  if (!r)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  r->b = b;
  r->input = input;
  r->level = prio - 1;
  r->done = so->done;
  r->user = so->user;
  r->autofree = !req;
  pthread_mutex_lock(&b->mu);
  const gpum_batcher_policy_t *p = &b->policy[r->level];
  int rc = 0;
  if (b->stopping)
    rc = gpum_error(GPUM_ESTATE, "the batcher is shut down");
  else if (p->max_queue_size && b->q[r->level].n >= p->max_queue_size)
    rc = gpum_error(GPUM_EBUSY, "the queue of priority %u is full (%zu requests)", prio,
                    p->max_queue_size);
  if (rc) {
    if (rc == GPUM_EBUSY)
      b->st.rejected_full++;
    pthread_mutex_unlock(&b->mu);
    free(r);
    return rc;
  }
  r->t_submit = now_us();
  uint64_t timeout = p->timeout_us;
  if (so->timeout_us && p->allow_override && (!timeout || so->timeout_us < timeout))
    timeout = so->timeout_us;
  r->deadline = timeout ? r->t_submit + timeout : 0;
  r->state = ST_QUEUED;
  q_push(&b->q[r->level], r);
  b->queued++;
  if (b->o.preserve_ordering) { /* the order in which completions are released */
    if (b->otail)
      b->otail->onext = r;
    else
      b->ohead = r;
    b->otail = r;
  }
  b->st.submitted++;
  /* A worker is woken only where this request can change what a waiting one decides: the
   * first one queued (a worker must start timing max_queue_delay) or a batch that can go now.
   * Otherwise the worker already waiting out the delay of the oldest sleeps on: waking it on
   * every submit cost a context switch per request. Signalled after unlocking, so that the
   * woken worker does not block at once on the mutex. */
  uint64_t until;
  bool wake = b->queued == 1 || decide(b, r->t_submit, &until) > 0;
  bool reap = r->deadline && b->reaper_asleep && (!b->reap_at || r->deadline < b->reap_at);
  pthread_mutex_unlock(&b->mu);
  if (wake)
    pthread_cond_signal(&b->work);
  if (reap)
    pthread_cond_signal(&b->reap);
  if (req)
    *req = r;
  return 0;
}

int gpum_batcher_wait(gpum_batcher_req_t *r, int64_t timeout_ms, void **output) {
  if (!r)
    return gpum_error(GPUM_EINVAL, "gpum_batcher_wait: NULL request");
  gpum_batcher_t *b = r->b;
  pthread_mutex_lock(&b->mu);
  if (timeout_ms < 0) {
    while (r->state != ST_RELEASED)
      pthread_cond_wait(&b->done, &b->mu);
  } else if (r->state != ST_RELEASED && timeout_ms > 0) {
    struct timespec ts =
        gpum__os_mono_timespec(gpum__os_mono_ns() + (uint64_t)timeout_ms * 1000000);
    while (r->state != ST_RELEASED)
      if (pthread_cond_timedwait(&b->done, &b->mu, &ts) != 0)
        break;
  }
  int rc = r->state == ST_RELEASED ? r->status : GPUM_EAGAIN;
  if (rc != GPUM_EAGAIN && output)
    *output = r->output;
  pthread_mutex_unlock(&b->mu);
  return rc;
}

int gpum_batcher_cancel(gpum_batcher_req_t *r) {
  if (!r)
    return gpum_error(GPUM_EINVAL, "gpum_batcher_cancel: NULL request");
  gpum_batcher_t *b = r->b;
  gpum_batcher_req_t *rel = NULL;
  pthread_mutex_lock(&b->mu);
  int rc = 0;
  if (r->state != ST_QUEUED) {
    rc = gpum_error(GPUM_ESTATE, "the request already runs or ran");
  } else {
    q_remove(queue_of(b, r), r);
    b->queued--;
    b->st.cancelled++;
    complete(b, r, GPUM_EINTR, NULL, &rel);
  }
  pthread_mutex_unlock(&b->mu);
  release(b, rel);
  return rc;
}

void gpum_batcher_req_free(gpum_batcher_req_t *r) {
  free(r);
}

void gpum_batcher_set_pressure(gpum_batcher_t *b, bool on) {
  pthread_mutex_lock(&b->mu);
  b->pressure = on;
  pthread_cond_broadcast(&b->work);
  pthread_mutex_unlock(&b->mu);
}

/* Sorts v[0..n) in place; its nearest-rank percentiles (the monitor's statistics). */
static void percentiles(double *v, size_t n, double *p50, double *p95, double *p99) {
  gpum_window_stats_t st = {0};
  if (v)
    (void)gpum__stats_sort_in_place(v, n, &st);
  *p50 = st.p50;
  *p95 = st.p95;
  *p99 = st.p99;
}

void gpum_batcher_stats(gpum_batcher_t *b, gpum_batcher_stats_t *out) {
  /* The samples are copied under the mutex and sorted after: sorting 2 x 4096 of them took
   * about 0.25 ms, during which no request could be submitted or completed. */
  double *q = malloc(SAMPLES * sizeof *q), *e = malloc(SAMPLES * sizeof *e);
  pthread_mutex_lock(&b->mu);
  *out = b->st;
  out->bound = bound_of(b);
  out->queued = b->queued;
  out->item_bytes = b->o.item_bytes ? b->o.item_bytes : (uint64_t)b->per_item;
  out->fixed_bytes = (uint64_t)b->fixed;
  size_t n = b->nsamples;
  if (q && e) {
    memcpy(q, b->qwait, n * sizeof *q);
    memcpy(e, b->e2e, n * sizeof *e);
  }
  double secs = (double)(now_us() - b->t0) / 1e6;
  out->throughput = secs > 0 ? (double)b->st.completed / secs : 0;
  pthread_mutex_unlock(&b->mu);
  if (!q || !e)
    n = 0; /* out of memory: no percentiles */
  percentiles(q, n, &out->queue_p50_us, &out->queue_p95_us, &out->queue_p99_us);
  percentiles(e, n, &out->e2e_p50_us, &out->e2e_p95_us, &out->e2e_p99_us);
  free(q);
  free(e);
}
