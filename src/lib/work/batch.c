/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The adaptive batch runner (gpum/batch.h, docs/batch.md).
 *
 * The runner's one control variable is a budget W in weight units (items count 1 each unless a
 * weight callback says otherwise): a batch takes items in order while their weights fit in W
 * (at least one item, at most max_batch, never past the accumulation window). W follows what
 * was measured:
 *   - after each successful step the memory callback's peak is fitted against the batch's
 *     weight, peak = base + per_unit x weight, by least squares with forgetting (recent steps
 *     count more: other jobs come and go); until two different weights were seen, base is
 *     taken as 0, which overstates per_unit: the safe side;
 *   - the budget the fit allows keeps peaks under target (0.88) of the device's size and 97% of
 *     the limit as the callback reports it now (without the device's size: base + target of
 *     what the limit leaves above base), a quarter less under gpumd's pressure; W moves toward
 *     it, at once up to the heaviest batch that succeeded lately, beyond that at most doubling
 *     per step;
 *   - an out-of-memory step of a weight that succeeded within the last 64 steps is taken for a
 *     passing spike (another job's): the same items run again once as they were, and if that
 *     fails too W halves; an out-of-memory step of a weight not proven so makes the weight a
 *     ceiling and halves W; the ceiling holds W below 90% of it until 64 steps succeeded, then
 *     lifts (conditions change);
 *   - without a memory callback W doubles after 8 successes in a row, below the ceiling.
 */
#include <math.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/batch.h>
#include <gpum/error.h>
#include <gpum/report.h>

#include "os_internal.h"

#define DEFAULT_TARGET 0.88
#define PRESSURE_SHARE 0.75 /* of the limit while gpumd reports pressure */
#define LIMIT_SHARE 0.97    /* of the limit, at most, when the device's size is known */
#define FORGET 0.9          /* weight of the past in the fit, per step */
#define CEILING_STEPS 64    /* successes before an out-of-memory ceiling lifts */
#define BLIND_GROW_STEPS 8  /* successes before growing without a memory callback */
#define HALF_TRAJECTORY (GPUM_BATCH_TRAJECTORY / 2)
#define ALONE_TRIES 3 /* one item out of memory alone this many times: it does not fit */
#define WAIT_MS 100   /* the default wait between tries of an item waiting for memory */
#define DEFAULT_MAX_WAIT_MS 600000

/* The published figures, in the order gpum_batch_figures gives them. */
enum {
  PUB_BATCH_SIZE,
  PUB_SMALLEST,
  PUB_LARGEST,
  PUB_DONE,
  PUB_FALLBACK,
  PUB_FAILED,
  PUB_OOMS,
  PUB_RETRIES,
  PUB_WAITS,
  PUB_PEAK,
  PUB_ITEMS,
  PUB_ITEMS_PER_S, /* a double's bits */
  PUB_COUNT
};

struct gpum_batch_runner {
  gpum_batch_opts_t o;
  gpum_batch_stats_t st;
  uint64_t pos;       /* the next item */
  double budget;      /* W */
  double ceiling;     /* weight that ran out of memory; 0: none */
  unsigned since_oom; /* successes since the ceiling was set */
  unsigned streak;    /* successes in a row (blind growth) */
  double recent_ok;   /* the heaviest step that succeeded in the current span of 64 */
  double last_ok;     /* ... and in the span before */
  unsigned span;      /* successes in the current span */
  /* The fit's decayed sums over (weight x, peak y). */
  double n, sx, sy, sxx, sxy;
  _Atomic bool pressure;
  /* Windows. */
  uint64_t win_start, win_size, win_done, since_ckpt;
  /* The trajectory's last half, a ring. */
  gpum_batch_change_t tail[HALF_TRAJECTORY];
  size_t tail_next;
  size_t last_size;
  uint64_t t0;
  uint64_t waited_ms;              /* the default wait's time for the current item */
  uint64_t last_limit, last_total; /* the memory callback's last figures */
  /* The figures other threads may read during a run (gpum_batch_figures, a reporter's thread):
   * copied from st after every step, each one atomic (doubles as their bits). */
  _Atomic uint64_t pub[PUB_COUNT];
};

static void publish(gpum_batch_runner_t *r);

static double weight_of(const gpum_batch_runner_t *r, uint64_t item) {
  if (!r->o.weight)
    return 1.0;
  double w = r->o.weight(item, r->o.user);
  return w > 0 && isfinite(w) ? w : 1.0;
}

int gpum_batch_create(const gpum_batch_opts_t *opts, gpum_batch_runner_t **out) {
  if (!opts || !out)
    return gpum_error(GPUM_EINVAL, "gpum_batch_create: NULL argument");
  if (!opts->step)
    return gpum_error(GPUM_EINVAL, "the batch runner needs a step function");
  if (opts->batch_size == 0)
    return gpum_error(GPUM_EINVAL, "the first batch size must be at least 1");
  if (opts->max_batch && opts->max_batch < opts->batch_size)
    return gpum_error(GPUM_EINVAL, "max_batch (%zu) is below batch_size (%zu)", opts->max_batch,
                      opts->batch_size);
  if (opts->start > opts->items)
    return gpum_error(GPUM_EINVAL, "start (%llu) is past the %llu items",
                      (unsigned long long)opts->start, (unsigned long long)opts->items);
  if (opts->target < 0 || opts->target > 1)
    return gpum_error(GPUM_EINVAL, "target must be a share of the limit, in 0..1");
  gpum_batch_runner_t *r = calloc(1, sizeof *r);
  if (!r)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  r->o = *opts;
  if (!r->o.max_batch)
    r->o.max_batch = r->o.batch_size;
  if (r->o.target == 0)
    r->o.target = DEFAULT_TARGET;
  r->pos = r->win_start = opts->start;
  r->st.batch_size = r->o.batch_size;
  publish(r);
  *out = r;
  return 0;
}

void gpum_batch_destroy(gpum_batch_runner_t *r) {
  free(r);
}

void gpum_batch_set_pressure(gpum_batch_runner_t *r, bool on) {
  if (r)
    atomic_store(&r->pressure, on);
}

void gpum_batch_stats(const gpum_batch_runner_t *r, gpum_batch_stats_t *out) {
  *out = r->st;
  /* The trajectory: its first half as recorded, then the ring's newest entries in order. */
  size_t head = r->st.changes < HALF_TRAJECTORY ? (size_t)r->st.changes : HALF_TRAJECTORY;
  size_t tail = r->st.changes > HALF_TRAJECTORY ? (size_t)(r->st.changes - HALF_TRAJECTORY) : 0;
  if (tail > HALF_TRAJECTORY)
    tail = HALF_TRAJECTORY;
  for (size_t i = 0; i < tail; i++)
    out->trajectory[head + i] =
        r->tail[(r->tail_next + HALF_TRAJECTORY - tail + i) % HALF_TRAJECTORY];
  out->nchanges = head + tail;
}

static void note_size(gpum_batch_runner_t *r, uint64_t item, size_t size) {
  if (size == r->last_size)
    return;
  r->last_size = size;
  gpum_batch_change_t c = {.item = item, .size = size};
  if (r->st.changes < HALF_TRAJECTORY) {
    r->st.trajectory[r->st.changes] = c;
  } else {
    r->tail[r->tail_next] = c;
    r->tail_next = (r->tail_next + 1) % HALF_TRAJECTORY;
  }
  r->st.changes++;
  r->st.nchanges =
      r->st.changes < GPUM_BATCH_TRAJECTORY ? (size_t)r->st.changes : GPUM_BATCH_TRAJECTORY;
}

/* The items of the next batch from r->pos: count and total weight. */
static size_t form(gpum_batch_runner_t *r, double *weight) {
  uint64_t left = r->o.items - r->pos, win_left = r->win_start + r->win_size - r->pos;
  size_t cap = r->o.max_batch;
  if (left < cap)
    cap = (size_t)left;
  if (win_left < cap)
    cap = (size_t)win_left;
  size_t n = 0;
  double w = 0;
  while (n < cap) {
    double wi = weight_of(r, r->pos + n);
    if (n > 0 && w + wi > r->budget)
      break;
    w += wi;
    n++;
  }
  *weight = w;
  return n;
}

/* The budget the fit allows, or -1 when there is nothing to go on. */
static double fit_allows(const gpum_batch_runner_t *r, uint64_t limit, uint64_t total) {
  if (r->n <= 0 || limit == 0)
    return -1;
  double mx = r->sx / r->n, my = r->sy / r->n;
  double var = r->sxx / r->n - mx * mx, cov = r->sxy / r->n - mx * my;
  bool spread = var > 1e-4 * mx * mx; /* weights differ enough to fit a slope */
  double per, base;
  if (spread && cov > 0) {
    per = cov / var;
    base = my - per * mx;
    if (base < 0) { /* a line through the origin rather than a negative base */
      base = 0;
      per = r->sxy / r->sxx;
    }
  } else if (!spread) {
    base = 0; /* one weight seen: all of the peak taken for the items (the safe side) */
    per = mx > 0 ? my / mx : 0;
  } else {
    /* Peaks do not grow with the batch (a cache holds them up, or memory is not what the
     * batch size moves): nothing to size by but the peaks' own level. */
    base = my;
    per = 0;
  }
  /* With the device's size: peaks up to target of it, and never closer than LIMIT_SHARE to
   * the limit (what other jobs leave). Without it, the margin is taken on what the limit
   * leaves above the job's fixed memory (its base): that is where a misjudged batch lands. */
  double cap = total ? fmin((double)limit * LIMIT_SHARE, (double)total * r->o.target)
                     : base + ((double)limit - base) * r->o.target;
  if (atomic_load(&r->pressure))
    cap *= PRESSURE_SHARE;
  double room = cap - base;
  if (per <= 0) /* no cost per item measured: grow while the peaks leave room */
    return room > 0 ? HUGE_VAL : 0;
  return room > 0 ? room / per : 0;
}

static void learn(gpum_batch_runner_t *r, double weight, const gpum_batch_memory_t *m) {
  r->n = r->n * FORGET + 1;
  r->sx = r->sx * FORGET + weight;
  r->sy = r->sy * FORGET + (double)m->peak;
  r->sxx = r->sxx * FORGET + weight * weight;
  r->sxy = r->sxy * FORGET + weight * (double)m->peak;
}

/* After a successful step of weight w: the next budget. */
static void grow(gpum_batch_runner_t *r, double w) {
  double next = r->budget;
  if (w > r->recent_ok)
    r->recent_ok = w;
  if (++r->span >= CEILING_STEPS) {
    r->last_ok = r->recent_ok;
    r->recent_ok = 0;
    r->span = 0;
  }
  gpum_batch_memory_t m = {0};
  bool measured = r->o.memory && r->o.memory(&m, r->o.user) == 0;
  if (measured) {
    r->last_limit = m.limit;
    r->last_total = m.total;
    if (m.peak > r->st.peak)
      r->st.peak = m.peak;
    learn(r, w, &m);
    double allows = fit_allows(r, m.limit, m.total);
    /* Toward what the fit allows: at once when the heaviest batch so far was at least that
     * heavy (the fit is interpolating), else at most doubling (it extrapolates). */
    if (allows >= 0) {
      next = allows;
      double reach = fmax(2 * r->budget, fmax(r->recent_ok, r->last_ok));
      if (next > reach)
        next = reach;
    }
  } else if (++r->streak >= BLIND_GROW_STEPS) {
    r->streak = 0;
    next = 2 * r->budget;
  }
  if (atomic_load(&r->pressure) && next > r->budget)
    next = r->budget;
  if (r->ceiling > 0) {
    if (++r->since_oom >= CEILING_STEPS)
      r->ceiling = 0;
    else if (next > 0.9 * r->ceiling)
      next = 0.9 * r->ceiling;
  }
  r->budget = next > 1e-9 ? next : 1e-9; /* a batch always takes one item */
}

/* Whether w succeeded lately: an out-of-memory step of that weight is taken for a spike. */
static bool proven(const gpum_batch_runner_t *r, double w) {
  return w <= r->recent_ok || w <= r->last_ok;
}

static void after_oom(gpum_batch_runner_t *r, double w) {
  r->st.ooms++;
  /* A weight that succeeded lately and failed twice now: something passing (another job), not
   * the batch; the batch halves for relief but sets no ceiling, which would ratchet down. */
  if (!proven(r, w)) {
    r->ceiling = w;
    r->since_oom = 0;
  }
  r->streak = 0;
  r->budget = w / 2;
  if (r->o.memory) { /* the step's peak up to the failure is no sample of a full batch */
    gpum_batch_memory_t m = {0};
    if (r->o.memory(&m, r->o.user) == 0) {
      r->last_limit = m.limit;
      r->last_total = m.total;
    }
  }
}

/* Advances past count items; closes the window and checkpoints when due. */
static int advance(gpum_batch_runner_t *r, size_t count) {
  r->pos += count;
  r->win_done += count;
  r->since_ckpt += count;
  if (r->win_done < r->win_size && r->pos < r->o.items)
    return 0;
  r->st.windows++;
  r->win_start = r->pos;
  r->win_done = 0;
  if (r->o.checkpoint && r->o.checkpoint_every && r->since_ckpt >= r->o.checkpoint_every) {
    r->since_ckpt = 0;
    int rc = r->o.checkpoint(r->pos, r->o.user);
    if (rc != 0)
      return rc;
  }
  return 0;
}

/* Without an effective batch a window is one micro-batch: form() caps it at max_batch. */
static void window_open(gpum_batch_runner_t *r) {
  uint64_t left = r->o.items - r->win_start;
  uint64_t e = r->o.effective_batch ? r->o.effective_batch : UINT64_MAX;
  r->win_size = left < e ? left : e;
}

/* One item alone ran out of memory: the fallback, or reported failed. */
static void fall_back(gpum_batch_runner_t *r, gpum_batch_t *b) {
  int rc = GPUM_EDEVOOM;
  if (r->o.fallback) {
    rc = r->o.fallback(b, r->o.user);
    if (rc == 0) {
      r->st.fallback++;
      return;
    }
  }
  r->st.failed++;
  if (r->o.failed)
    r->o.failed(b->first, rc, r->o.user);
}

/* What one item of weight w needs by the fit (0: no fit yet). */
static double need_of(const gpum_batch_runner_t *r, double w) {
  if (r->n <= 0 || r->sx <= 0)
    return 0;
  double mx = r->sx / r->n, my = r->sy / r->n;
  double var = r->sxx / r->n - mx * mx, cov = r->sxy / r->n - mx * my;
  if (var > 1e-9 * mx * mx && cov > 0) {
    double per = cov / var, base = my - per * mx;
    if (base >= 0)
      return base + per * w;
  }
  return my / mx * w;
}

/* An item that does not fit what is free now but would fit the device waits for memory. */
static bool should_wait(const gpum_batch_runner_t *r, double w) {
  double need = need_of(r, w);
  if (need <= 0 || r->last_limit == 0 || need <= (double)r->last_limit)
    return false;
  double device = r->last_total ? (double)r->last_total * r->o.target : 0;
  return need <= device;
}

static int wait_default(gpum_batch_runner_t *r) {
  uint64_t max = r->o.max_wait_ms ? r->o.max_wait_ms : DEFAULT_MAX_WAIT_MS;
  if (r->waited_ms >= max)
    return GPUM_ETIMEDOUT;
  struct timespec ts = {0, WAIT_MS * 1000000L};
  nanosleep(&ts, NULL);
  r->waited_ms += WAIT_MS;
  return 0;
}

/* Waits until the memory callback says an item of weight w fits what is free (other jobs
 * ended), or the wait gives up (its code). */
static int wait_for_memory(gpum_batch_runner_t *r, double w) {
  int wr = 0;
  while (wr == 0 && should_wait(r, w)) {
    r->st.waits++;
    wr = r->o.wait ? r->o.wait(r->o.user) : wait_default(r);
    gpum_batch_memory_t m = {0};
    if (wr == 0 && r->o.memory(&m, r->o.user) == 0) {
      r->last_limit = m.limit;
      r->last_total = m.total;
    }
  }
  return wr;
}

static void publish(gpum_batch_runner_t *r) {
  const gpum_batch_stats_t *s = &r->st;
  const uint64_t v[PUB_COUNT - 1] = {s->batch_size, s->smallest, s->largest, s->done,
                                     s->fallback,   s->failed,   s->ooms,    s->retries,
                                     s->waits,      s->peak,     r->o.items};
  for (int i = 0; i < PUB_COUNT - 1; i++)
    atomic_store_explicit(&r->pub[i], v[i], memory_order_relaxed);
  uint64_t bits;
  memcpy(&bits, &s->items_per_s, sizeof bits);
  atomic_store_explicit(&r->pub[PUB_ITEMS_PER_S], bits, memory_order_relaxed);
}

static void timing(gpum_batch_runner_t *r) {
  r->st.seconds = (double)(gpum__os_mono_ns() - r->t0) / 1e9;
  r->st.items_per_s = r->st.seconds > 0 ? (double)(r->st.done + r->st.fallback) / r->st.seconds : 0;
  publish(r);
}

size_t gpum_batch_figures(gpum_batch_runner_t *r, gpum_figure_t *out, size_t cap) {
  static const char *const names[PUB_COUNT] = {
      "batch_size", "smallest_batch", "largest_batch", "done",       "fallback", "failed",
      "ooms",       "oom_retries",    "waits",         "peak_bytes", "items",    "items_per_s"};
  size_t n = 0;
  for (int i = 0; i < PUB_COUNT && n < cap; i++) {
    uint64_t v = atomic_load_explicit(&r->pub[i], memory_order_relaxed);
    double d;
    if (i == PUB_ITEMS_PER_S)
      memcpy(&d, &v, sizeof d);
    else
      d = (double)v;
    out[n++] = (gpum_figure_t){names[i], d};
  }
  return n;
}

int gpum_batch_run(gpum_batch_runner_t *r) {
  if (!r)
    return gpum_error(GPUM_EINVAL, "gpum_batch_run: NULL runner");
  r->t0 = gpum__os_mono_ns() - (uint64_t)(r->st.seconds * 1e9);
  if (r->budget == 0) { /* the first batch: batch_size items, whatever they weigh */
    double w = 0;
    for (size_t i = 0; i < r->o.batch_size && r->pos + i < r->o.items; i++)
      w += weight_of(r, r->pos + i);
    r->budget = w > 0 ? w : 1;
  }
  if (r->win_done == 0)
    window_open(r);
  unsigned attempt = 0, alone = 0; /* tries of these items; of one item alone */
  while (r->pos < r->o.items) {
    double w;
    size_t count = form(r, &w);
    /* One item that would not fit what is free now, by what was measured: wait for memory
     * rather than fail it. */
    if (count == 1 && attempt == 0 && should_wait(r, w) && wait_for_memory(r, w) != 0)
      alone = ALONE_TRIES - 1; /* gave up waiting: one try, then the fallback */
    if (!r->o.effective_batch)
      r->win_size = count; /* each micro-batch its own window */
    note_size(r, r->pos, count);
    r->st.batch_size = count;
    gpum_batch_t b = {.first = r->pos,
                      .count = count,
                      .attempt = attempt,
                      .window_end = r->win_done + count >= r->win_size,
                      .loss_scale = (double)count / (double)r->win_size,
                      .window = r->st.windows};
    int rc = r->o.step(&b, r->o.user);
    /* A batch, or one item a few times (another job's passing spike): smaller, again. */
    alone = count == 1 && rc == GPUM_EDEVOOM ? alone + 1 : 0;
    if (rc == GPUM_EDEVOOM && attempt == 0 && proven(r, w)) {
      r->st.ooms++; /* a spike: the same items again, as they were */
      r->st.retries += count;
      attempt++;
      continue;
    }
    if (rc == GPUM_EDEVOOM && count == 1 && should_wait(r, w)) {
      r->st.ooms++;
      int wr = wait_for_memory(r, w);
      if (wr == 0) {
        alone = 0;
        attempt++;
        continue;
      }
      alone = ALONE_TRIES; /* gave up waiting: the fallback, or failed */
    }
    if (rc == GPUM_EDEVOOM && (count > 1 || alone < ALONE_TRIES)) {
      after_oom(r, w);
      r->st.retries += count;
      attempt++;
      continue;
    }
    if (rc == GPUM_EDEVOOM) { /* one item, alone, does not fit: ALONE_TRIES in a row */
      after_oom(r, w);
      fall_back(r, &b);
    } else if (rc != 0) {
      timing(r);
      return rc;
    } else {
      r->st.done += count;
      r->st.steps++;
      if (r->st.smallest == 0 || count < r->st.smallest)
        r->st.smallest = count;
      if (count > r->st.largest)
        r->st.largest = count;
      grow(r, w);
    }
    attempt = alone = 0;
    r->waited_ms = 0;
    rc = advance(r, count);
    if (rc == 0 && r->win_done == 0 && r->pos < r->o.items)
      window_open(r);
    timing(r);
    if (r->o.progress)
      r->o.progress(&r->st, r->o.user);
    if (rc != 0)
      return rc;
  }
  timing(r);
  return 0;
}

int gpum_batch_memory_from_pool(gpum_batch_memory_t *m, void *pool) {
  gpum_pool_stats_t s;
  int rc = gpum_pool_stats(pool, &s);
  if (rc != 0)
    return rc;
  gpum_pool_reset_peaks(pool);
  if (s.limit == 0)
    return gpum_error(GPUM_ENOENT, "the pool has no limit to measure against");
  /* What the steps used (blocks handed out), not what the pool keeps cached: the cache would
   * make every batch look as large as the biggest one. */
  m->peak = s.allocated_bytes.peak;
  m->limit = s.limit;
  return 0;
}

#define MAX_PROCS 256

int gpum_batch_memory_from_device(gpum_batch_memory_t *m, void *device) {
  gpum_batch_device_t *d = device;
  if (!m || !d || !d->session)
    return gpum_error(GPUM_EINVAL, "gpum_batch_memory_from_device: no device session");
  gpum_device_sample_t s;
  int rc = gpum_device_sample(d->session, d->index, &s);
  if (rc != 0)
    return rc;
  if (!gpum_sample_valid(&s, GPUM_METRIC_MEMORY_TOTAL) ||
      !gpum_sample_valid(&s, GPUM_METRIC_MEMORY_USED))
    return gpum_error(GPUM_ENOTSUP, "device %u does not report its memory", d->index);
  gpum_process_t *procs = calloc(MAX_PROCS, sizeof *procs);
  if (!procs)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  size_t n = 0;
  rc = gpum_device_processes(d->session, d->index, procs, MAX_PROCS, &n);
  if (rc == GPUM_ENOSPC) {
    rc = 0;
    n = MAX_PROCS;
  }
  unsigned pid = d->pid ? d->pid : (unsigned)getpid();
  uint64_t mine = 0;
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (procs[i].pid == pid && procs[i].memory_valid)
      mine += procs[i].memory;
  free(procs);
  if (rc != 0)
    return rc;
  /* The driver's free figure when it gives one (it leaves out what the driver reserves). */
  uint64_t free_b = gpum_sample_valid(&s, GPUM_METRIC_MEMORY_FREE) ? s.memory_free
                    : s.memory_total > s.memory_used               ? s.memory_total - s.memory_used
                                                                   : 0;
  m->peak = mine;
  m->limit = d->limit ? d->limit : free_b + mine;
  m->total = s.memory_total;
  return 0;
}
