/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/adaptive: batch sizing under memory pressure, simulated (no GPU), four ways over the
 * same items and the same pressure trace (docs/batch.md):
 *   (a) a fixed batch size: an out-of-memory step loses its batch, as a job that catches the
 *       error and moves on;
 *   (b) the rule gpum's design replaces: check memory every 10 items; above 85% of the device
 *       used halve the batch, below 50% double it up to the initial size; out of memory: halve
 *       and run the same items again;
 *   (c) gpum's runner (gpum_batch_run), with the items' sizes as weights and the device's free
 *       memory as its limit;
 *   (d) an oracle that knows every item's size and the future of the trace: each step takes
 *       the most items that fit what is free for the whole step, keeping to the same aim as
 *       (c) (peaks under 90% of the device); when one item does not fit, it waits 20 ms.
 * Items: 10 million, sizes from a log-normal distribution (like audio clips of varying length:
 * median 1, a long tail up to 100), 128 MiB per unit of size; the job's base is 10 GiB. Device:
 * 80 GiB; other jobs arrive (every 20 s on average) holding 8-32 GiB for 90 s on average,
 * up to 60 GiB together, each allocating its memory 2 s after gpumd granted it (its start-up);
 * one that allocates while a step runs takes its memory then. gpum's runner reads its limit
 * from gpumd's view (what the others were granted), the rule from the memory in use. A step costs
 * 20 ms plus 0.2 ms per unit of size (so larger batches are faster per item); an
 * out-of-memory step costs its 20 ms. Every item's runs are counted:
 * lost (0 runs) and duplicated (more than 1) are printed. Usage: adaptive [ITEMS] [SEED].
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/batch.h>
#include <gpum/error.h>

#define GiB (1024.0 * 1024 * 1024)
#define DEVICE (80 * GiB)
#define BASE (10 * GiB)
#define UNIT_BYTES (128.0 * 1024 * 1024)
#define STEP_S 0.020
#define UNIT_S 0.0002
#define MAX_OTHER (60 * GiB)
#define MAX_BATCH 8192
#define FIXED_BATCH 256
#define MAX_JOBS 64
#define ORACLE_SHARE 0.9 /* the oracle keeps to the aim too: peaks under 90% of the device */

static uint64_t n_items;
static float *size_of; /* units per item */
static double *prefix; /* prefix[i] = sum of size_of[0..i-1] */

/* The other jobs, as two traces of (time, bytes held after it): what gpumd has granted them
 * (from their grant until they end), and what they physically hold (from their grant plus
 * START_S, the time a job takes to start and allocate, until they end). */
typedef struct {
  double t;
  double held;
} trace_ev_t;
typedef struct {
  trace_ev_t *ev;
  size_t n;
} trace_t;
static trace_t granted, physical;
#define START_S 2.0

static double uniform(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return (double)(*s >> 11) / 9007199254740992.0;
}

static double normal(uint64_t *s) {
  double u = uniform(s), v = uniform(s);
  return sqrt(-2 * log(u > 1e-300 ? u : 1e-300)) * cos(2 * M_PI * v);
}

static void make_items(uint64_t seed) {
  size_of = malloc(n_items * sizeof *size_of);
  prefix = malloc((n_items + 1) * sizeof *prefix);
  prefix[0] = 0;
  for (uint64_t i = 0; i < n_items; i++) {
    double x = exp(1.0 * normal(&seed)); /* log-normal: median 1, mean 1.65, a long tail */
    if (x > 100)
      x = 100;
    size_of[i] = (float)x;
    prefix[i + 1] = prefix[i] + x;
  }
}

typedef struct {
  double t, delta;
} change_t;

static int by_time(const void *a, const void *b) {
  double x = ((const change_t *)a)->t, y = ((const change_t *)b)->t;
  return x < y ? -1 : x > y;
}

static void build(trace_t *tr, change_t *c, size_t n) {
  qsort(c, n, sizeof *c, by_time);
  tr->ev = malloc((n ? n : 1) * sizeof *tr->ev);
  double held = 0;
  for (size_t i = 0; i < n; i++) {
    held += c[i].delta;
    tr->ev[tr->n++] = (trace_ev_t){c[i].t, held > 0 ? held : 0};
  }
}

/* Other jobs arrive every 20 s on average and hold 8-32 GiB for 90 s on average, up to 60 GiB
 * granted together (gpumd queues the rest: left out). */
static void make_trace(uint64_t seed, double horizon) {
  size_t cap = 1024, n = 0;
  change_t *g = malloc(cap * sizeof *g), *p = malloc(cap * sizeof *p);
  struct {
    double end, bytes;
  } live[MAX_JOBS];
  size_t nlive = 0;
  double held = 0;
  for (double t = 0; t < horizon;) {
    t -= 20 * log(1 - uniform(&seed));
    for (size_t j = 0; j < nlive;) /* jobs that ended before t */
      if (live[j].end <= t) {
        held -= live[j].bytes;
        live[j] = live[--nlive];
      } else {
        j++;
      }
    double bytes = (8 + 24 * uniform(&seed)) * GiB;
    double end = t + START_S - 90 * log(1 - uniform(&seed));
    if (held + bytes > MAX_OTHER || nlive == MAX_JOBS)
      continue;
    live[nlive].end = end;
    live[nlive++].bytes = bytes;
    held += bytes;
    if (n + 2 > cap) {
      cap *= 2;
      g = realloc(g, cap * sizeof *g);
      p = realloc(p, cap * sizeof *p);
    }
    g[n] = (change_t){t, bytes};
    p[n] = (change_t){t + START_S, bytes};
    g[n + 1] = (change_t){end, -bytes};
    p[n + 1] = (change_t){end, -bytes};
    n += 2;
  }
  build(&granted, g, n);
  build(&physical, p, n);
  free(g);
  free(p);
}

static size_t after(const trace_t *tr, double t) { /* the first event after t */
  size_t lo = 0, hi = tr->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (tr->ev[mid].t <= t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* What the other jobs hold (or were granted) at t. */
static double held_at(const trace_t *tr, double t) {
  size_t i = after(tr, t);
  return i ? tr->ev[i - 1].held : 0;
}

/* The most the other jobs physically hold during [t0, t1]. */
static double other_during(double t0, double t1) {
  double most = held_at(&physical, t0);
  for (size_t i = after(&physical, t0); i < physical.n && physical.ev[i].t <= t1; i++)
    if (physical.ev[i].held > most)
      most = physical.ev[i].held;
  return most;
}

typedef struct {
  const char *name;
  double now; /* simulated seconds */
  uint64_t ooms, lost, dup, steps;
  double peak;      /* the job's highest peak, bytes */
  uint8_t *runs;    /* per item */
  double last_peak; /* for the memory callback */
} sim_t;

/* One step over [first, first + count): true when it ran (memory fitted). */
static bool sim_step(sim_t *s, uint64_t first, size_t count) {
  double units = prefix[first + count] - prefix[first];
  double need = BASE + units * UNIT_BYTES;
  /* Another job that arrives while the step runs takes its memory as well. */
  double free_now = DEVICE - other_during(s->now, s->now + STEP_S + units * UNIT_S);
  if (need > free_now) {
    s->ooms++;
    s->now += STEP_S;
    s->last_peak = free_now > BASE ? free_now : BASE; /* as far as the device allowed */
    return false;
  }
  s->now += STEP_S + units * UNIT_S;
  s->steps++;
  if (need > s->peak)
    s->peak = need;
  s->last_peak = need;
  for (size_t i = 0; i < count; i++)
    s->runs[first + i]++;
  return true;
}

static void tally(sim_t *s) {
  for (uint64_t i = 0; i < n_items; i++) {
    s->lost += s->runs[i] == 0;
    s->dup += s->runs[i] > 1;
  }
}

static void run_fixed(sim_t *s) {
  for (uint64_t i = 0; i < n_items;) {
    size_t c = n_items - i < FIXED_BATCH ? (size_t)(n_items - i) : FIXED_BATCH;
    sim_step(s, i, c); /* out of memory: the batch is lost */
    i += c;
  }
}

static void run_rule(sim_t *s) {
  size_t b = FIXED_BATCH, since = 0;
  for (uint64_t i = 0; i < n_items;) {
    size_t c = n_items - i < b ? (size_t)(n_items - i) : b;
    if (!sim_step(s, i, c)) {
      b = b > 1 ? b / 2 : 1;
      continue;
    }
    i += c;
    since += c;
    if (since >= 10) { /* check memory every 10 items */
      since = 0;
      double used = (held_at(&physical, s->now) + s->last_peak) / DEVICE;
      if (used > 0.85)
        b = b > 1 ? b / 2 : 1;
      else if (used < 0.5 && b < FIXED_BATCH)
        b = 2 * b < FIXED_BATCH ? 2 * b : FIXED_BATCH;
    }
  }
}

static int gpum_step(const gpum_batch_t *b, void *user) {
  return sim_step(user, b->first, b->count) ? 0 : GPUM_EDEVOOM;
}

static int gpum_memory(gpum_batch_memory_t *m, void *user) {
  sim_t *s = user;
  m->peak = (uint64_t)s->last_peak;
  /* gpumd's view: what the other jobs were granted, known before they allocate it. */
  m->limit = (uint64_t)(DEVICE - fmax(held_at(&granted, s->now), held_at(&physical, s->now)));
  m->total = (uint64_t)DEVICE;
  return 0;
}

/* An item waiting for memory: 100 ms pass (simulated), as the runner's default wait. */
static int gpum_wait(void *user) {
  sim_t *s = user;
  s->now += 0.1;
  return 0;
}

static double gpum_weight(uint64_t item, void *user) {
  (void)user;
  return size_of[item];
}

static void run_gpum(sim_t *s, gpum_batch_stats_t *st) {
  gpum_batch_opts_t o = {.items = n_items,
                         .batch_size = 64,
                         .max_batch = MAX_BATCH,
                         .step = gpum_step,
                         .memory = gpum_memory,
                         .weight = gpum_weight,
                         .wait = gpum_wait,
                         .user = s};
  gpum_batch_runner_t *r;
  if (gpum_batch_create(&o, &r) != 0 || gpum_batch_run(r) != 0) {
    fprintf(stderr, "gpum runner: %s\n", gpum_last_error());
    exit(1);
  }
  gpum_batch_stats(r, st);
  gpum_batch_destroy(r);
}

/* Whether [i, end) fits for the whole step, arrivals during it included (the oracle knows). */
static bool fits(const sim_t *s, uint64_t i, uint64_t end) {
  double units = prefix[end] - prefix[i], need = BASE + units * UNIT_BYTES;
  return need <= ORACLE_SHARE * DEVICE &&
         need <= DEVICE - other_during(s->now, s->now + STEP_S + units * UNIT_S);
}

/* The most items from first that fit for the whole step. */
static void run_oracle(sim_t *s) {
  for (uint64_t i = 0; i < n_items;) {
    uint64_t lo = i + 1, hi = i + MAX_BATCH < n_items ? i + MAX_BATCH : n_items;
    while (lo < hi) { /* the largest end that fits (fitting is monotone in end) */
      uint64_t mid = (lo + hi + 1) / 2;
      if (fits(s, i, mid))
        lo = mid;
      else
        hi = mid - 1;
    }
    if (!fits(s, i, lo)) { /* one item alone does not fit now: wait */
      s->now += STEP_S;
      continue;
    }
    sim_step(s, i, (size_t)(lo - i));
    i = lo;
  }
}

int main(int argc, char **argv) {
  n_items = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000;
  uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 42;
  if (n_items == 0 || seed == 0)
    return 2;
  make_items(seed);
  /* A horizon past the slowest run: every step at its fixed cost, one item each. */
  make_trace(seed * 7919, (double)n_items * (STEP_S + 40 * UNIT_S) / 8 + 3600);
  sim_t s[4] = {{.name = "(a) fixed batch"},
                {.name = "(b) 85%/50% rule"},
                {.name = "(c) gpum runner"},
                {.name = "(d) oracle"}};
  gpum_batch_stats_t st;
  for (int k = 0; k < 4; k++) {
    s[k].runs = calloc(n_items, 1);
    if (k == 0)
      run_fixed(&s[k]);
    else if (k == 1)
      run_rule(&s[k]);
    else if (k == 2)
      run_gpum(&s[k], &st);
    else
      run_oracle(&s[k]);
    tally(&s[k]);
  }
  printf("%llu items, %zu other jobs; device %.0f GiB, base %.0f GiB\n",
         (unsigned long long)n_items, granted.n / 2, DEVICE / GiB, BASE / GiB);
  printf("%-18s %10s %12s %10s %10s %10s\n", "", "OOMs", "items/s", "peak", "lost", "dup");
  for (int k = 0; k < 4; k++)
    printf("%-18s %10llu %12.0f %9.1f%% %10llu %10llu\n", s[k].name, (unsigned long long)s[k].ooms,
           (double)(n_items - s[k].lost) / s[k].now, 100 * s[k].peak / DEVICE,
           (unsigned long long)s[k].lost, (unsigned long long)s[k].dup);
  double thr_c = (double)(n_items - s[2].lost) / s[2].now, thr_d = (double)n_items / s[3].now;
  printf("gpum vs rule: OOMs %.3fx (aim <= 0.10)\n",
         s[1].ooms ? (double)s[2].ooms / (double)s[1].ooms : 0.0);
  printf("gpum vs oracle: throughput %.3f (aim >= 0.95)\n", thr_c / thr_d);
  printf("gpum: peak %.1f%% of the device (aim < 90%%), %llu lost, %llu duplicated (aim 0, 0); "
         "batch sizes %zu..%zu, %llu changes, %llu waits for memory\n",
         100 * s[2].peak / DEVICE, (unsigned long long)s[2].lost, (unsigned long long)s[2].dup,
         st.smallest, st.largest, (unsigned long long)st.changes, (unsigned long long)st.waits);
  return 0;
}
