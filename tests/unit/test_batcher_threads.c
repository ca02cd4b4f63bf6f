/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the dynamic request batcher (src/lib/work/batcher.c, gpum/batcher.h), rule by
 * rule: a full batch goes at once, a partial one when the oldest request waited
 * max_queue_delay, a preferred size as soon as it can be formed; higher priority levels first;
 * REJECT and DELAY timeouts, an override that may only shorten; max_queue_size; completions in
 * submission order under preserve_ordering; out-of-memory splits with every request answered
 * exactly once; the memory bound and pressure; cancel; shutdown draining or failing what is
 * queued; 16 submitting threads. A gate in the model holds a worker where a rule needs the
 * queue to fill: synchronisation by condition variables, never by sleeping. Runs under
 * ThreadSanitizer too (the _threads suffix).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <cmocka.h>

#include <gpum/batcher.h>
#include <gpum/error.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool gate_closed;     /* the model waits while it is closed */
static intptr_t hold_only;   /* ... only for a batch holding this input (0: any batch) */
static unsigned in_model;    /* model calls waiting at the gate */
static size_t oom_above;     /* batches larger than this run out of memory (0: never) */
static intptr_t oom_alone;   /* this input fails even alone (0: none) */
static intptr_t ran[100000]; /* the inputs in the order the model ran them */
static size_t nran;
static size_t sizes[1024]; /* the batch sizes the model got */
static size_t nsizes;

static void reset(void) {
  pthread_mutex_lock(&mu);
  gate_closed = false;
  hold_only = 0;
  in_model = 0;
  oom_above = 0;
  oom_alone = 0;
  nran = nsizes = 0;
  pthread_mutex_unlock(&mu);
}

static int model(void *const *in, void **out, size_t n, unsigned worker, void *user) {
  (void)worker, (void)user;
  pthread_mutex_lock(&mu);
  bool held = gate_closed && !hold_only;
  for (size_t i = 0; i < n && hold_only && gate_closed; i++)
    held = held || (intptr_t)in[i] == hold_only;
  if (held) {
    in_model++;
    pthread_cond_broadcast(&cv);
    while (gate_closed)
      pthread_cond_wait(&cv, &mu);
    in_model--;
  }
  int rc = 0;
  if (oom_above && n > oom_above)
    rc = GPUM_EDEVOOM;
  for (size_t i = 0; i < n && rc == 0; i++)
    if (oom_alone && (intptr_t)in[i] == oom_alone)
      rc = GPUM_EDEVOOM;
  if (rc == 0) {
    if (nsizes < 1024)
      sizes[nsizes++] = n;
    for (size_t i = 0; i < n; i++) {
      if (nran < 100000)
        ran[nran++] = (intptr_t)in[i];
      out[i] = (void *)((intptr_t)in[i] * 2);
    }
  }
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  return rc;
}

/* Waits until k model calls wait at the gate. */
static void wait_in_model(unsigned k) {
  pthread_mutex_lock(&mu);
  while (in_model < k)
    pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
}

static void gate(bool closed) {
  pthread_mutex_lock(&mu);
  gate_closed = closed;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

static gpum_batcher_t *make(gpum_batcher_opts_t *o) {
  o->fn = model;
  gpum_batcher_t *b = NULL;
  assert_int_equal(gpum_batcher_create(o, &b), 0);
  return b;
}

static gpum_batcher_req_t *submit(gpum_batcher_t *b, intptr_t x, unsigned prio, uint64_t timeout) {
  gpum_batcher_submit_opts_t so = {.priority = prio, .timeout_us = timeout};
  gpum_batcher_req_t *r = NULL;
  assert_int_equal(gpum_batcher_submit(b, (void *)x, &so, &r), 0);
  return r;
}

static void expect_output(gpum_batcher_req_t *r, intptr_t x) {
  void *out = NULL;
  assert_int_equal(gpum_batcher_wait(r, -1, &out), 0);
  assert_int_equal((intptr_t)out, 2 * x);
  gpum_batcher_req_free(r);
}

static void test_full_batch_goes_at_once(void **state) {
  (void)state;
  reset();
  gpum_batcher_opts_t o = {.max_batch_size = 8, .max_queue_delay_us = 60000000};
  gpum_batcher_t *b = make(&o);
  gpum_batcher_req_t *r[8];
  for (int i = 0; i < 8; i++)
    r[i] = submit(b, i + 1, 0, 0);
  for (int i = 0; i < 8; i++)
    expect_output(r[i], i + 1); /* long before the 60 s delay */
  assert_int_equal(nsizes, 1);
  assert_int_equal(sizes[0], 8);
  gpum_batcher_stats_t st;
  gpum_batcher_stats(b, &st);
  assert_int_equal(st.batch_sizes[8], 1);
  assert_int_equal(st.completed, 8);
  assert_true(st.e2e_p99_us > 0 && st.throughput > 0);
  gpum_batcher_destroy(b);
}

static void test_delay_expiry(void **state) {
  (void)state;
  reset();
  gpum_batcher_opts_t o = {.max_batch_size = 8, .max_queue_delay_us = 20000};
  gpum_batcher_t *b = make(&o);
  gpum_batcher_req_t *r[3];
  for (int i = 0; i < 3; i++)
    r[i] = submit(b, i + 1, 0, 0);
  for (int i = 0; i < 3; i++)
    expect_output(r[i], i + 1);
  /* The oldest waited the delay: the three went as one partial batch. */
  assert_int_equal(nsizes, 1);
  assert_int_equal(sizes[0], 3);
  gpum_batcher_stats_t st;
  gpum_batcher_stats(b, &st);
  assert_true(st.queue_p99_us >= 20000); /* the oldest (the slowest of three) waited it */
  gpum_batcher_destroy(b);
}

static void test_preferred_size(void **state) {
  (void)state;
  reset();
  size_t pref[] = {4};
  gpum_batcher_opts_t o = {.max_batch_size = 16,
                           .preferred_sizes = pref,
                           .npreferred = 1,
                           .max_queue_delay_us = 60000000};
  gpum_batcher_t *b = make(&o);
  gpum_batcher_req_t *r[4];
  for (int i = 0; i < 4; i++)
    r[i] = submit(b, i + 1, 0, 0);
  for (int i = 0; i < 4; i++)
    expect_output(r[i], i + 1); /* formed at 4, not after 60 s */
  assert_int_equal(sizes[0], 4);
  gpum_batcher_destroy(b);
}

static void test_priorities(void **state) {
  (void)state;
  reset();
  gpum_batcher_opts_t o = {.max_batch_size = 1, .priority_levels = 2, .default_priority = 2};
  gpum_batcher_t *b = make(&o);
  gate(true);
  gpum_batcher_req_t *first = submit(b, 100, 0, 0);
  wait_in_model(1); /* the worker is held with 100 */
  gpum_batcher_req_t *low1 = submit(b, 1, 2, 0), *low2 = submit(b, 2, 2, 0);
  gpum_batcher_req_t *high = submit(b, 3, 1, 0);
  gate(false);
  expect_output(first, 100);
  expect_output(low1, 1);
  expect_output(low2, 2);
  expect_output(high, 3);
  assert_int_equal(nran, 4);
  intptr_t want[] = {100, 3, 1, 2}; /* the higher level first, FIFO within a level */
  for (int i = 0; i < 4; i++)
    assert_int_equal(ran[i], want[i]);
  gpum_batcher_destroy(b);
}

static void busy_wait_us(uint64_t us) { /* lets a deadline pass: time, not synchronisation */
  struct timespec a, n;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do
    clock_gettime(CLOCK_MONOTONIC, &n);
  while ((uint64_t)(n.tv_sec - a.tv_sec) * 1000000 + (uint64_t)(n.tv_nsec - a.tv_nsec) / 1000 < us);
}

static void test_timeouts_reject_delay_override(void **state) {
  (void)state;
  reset();
  /* REJECT: a request that waits past its level's timeout fails with GPUM_ETIMEDOUT. The
   * request that holds the worker has a level without a timeout: on a loaded machine the worker
   * may take longer than the 2 ms to pick it up. */
  gpum_batcher_policy_t pols[2] = {{0}, {.timeout_us = 2000, .allow_override = true}};
  gpum_batcher_opts_t o = {.max_batch_size = 1, .priority_levels = 2, .policies = pols};
  gpum_batcher_t *b = make(&o);
  gate(true);
  gpum_batcher_req_t *first = submit(b, 100, 1, 0);
  wait_in_model(1);
  gpum_batcher_req_t *late = submit(b, 7, 0, 0);
  gpum_batcher_req_t *longer = submit(b, 8, 0, 3600000000ull); /* may only shorten */
  busy_wait_us(3000);
  gate(false);
  expect_output(first, 100);
  assert_int_equal(gpum_batcher_wait(late, -1, NULL), GPUM_ETIMEDOUT);
  assert_int_equal(gpum_batcher_wait(longer, -1, NULL), GPUM_ETIMEDOUT);
  gpum_batcher_req_free(late);
  gpum_batcher_req_free(longer);
  gpum_batcher_stats_t st;
  gpum_batcher_stats(b, &st);
  assert_int_equal(st.rejected_timeout, 2);
  gpum_batcher_destroy(b);
  /* DELAY: a timed-out request stays, behind every request that has not timed out. */
  reset();
  gpum_batcher_policy_t pol = {.timeout_us = 3600000000ull, .delay = true, .allow_override = true};
  o = (gpum_batcher_opts_t){.max_batch_size = 1, .default_policy = pol};
  b = make(&o);
  gate(true);
  first = submit(b, 100, 0, 0);
  wait_in_model(1);
  gpum_batcher_req_t *x = submit(b, 1, 0, 1); /* times out after 1 us */
  busy_wait_us(100);
  gpum_batcher_req_t *y = submit(b, 2, 0, 0);
  gate(false);
  expect_output(first, 100);
  expect_output(x, 1); /* served, not rejected */
  expect_output(y, 2);
  assert_int_equal(ran[1], 2); /* y before x */
  assert_int_equal(ran[2], 1);
  gpum_batcher_destroy(b);
}

static void test_timeout_while_workers_busy(void **state) {
  (void)state;
  reset();
  /* The only worker is held in the model: the waiting request still times out on time. (The
   * held request's level has no timeout, whatever the time the worker takes to pick it up.) */
  gpum_batcher_policy_t pols[2] = {{0}, {.timeout_us = 20000}};
  gpum_batcher_opts_t o = {.max_batch_size = 1, .priority_levels = 2, .policies = pols};
  gpum_batcher_t *b = make(&o);
  gate(true);
  gpum_batcher_req_t *first = submit(b, 100, 1, 0);
  wait_in_model(1);
  gpum_batcher_req_t *late = submit(b, 7, 0, 0);
  assert_int_equal(gpum_batcher_wait(late, 30000, NULL), GPUM_ETIMEDOUT);
  pthread_mutex_lock(&mu);
  assert_int_equal(in_model, 1); /* the worker never left the first batch */
  pthread_mutex_unlock(&mu);
  gpum_batcher_req_free(late);
  gate(false);
  expect_output(first, 100);
  gpum_batcher_destroy(b);
}

static uint64_t clock_us(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void test_waiting_workers_sleep(void **state) {
  (void)state;
  reset();
  /* While a partial batch waits out max_queue_delay, the four workers and the timeout thread
   * sleep: the process burns a small part of the wait (a spinning worker burns all of it). */
  gpum_batcher_policy_t pol = {.timeout_us = 3600000000ull};
  gpum_batcher_opts_t o = {
      .max_batch_size = 8, .max_queue_delay_us = 300000, .workers = 4, .default_policy = pol};
  gpum_batcher_t *b = make(&o);
  uint64_t t0 = clock_us(CLOCK_MONOTONIC), c0 = clock_us(CLOCK_PROCESS_CPUTIME_ID);
  gpum_batcher_req_t *r = submit(b, 5, 0, 0);
  expect_output(r, 5);
  uint64_t wall = clock_us(CLOCK_MONOTONIC) - t0, cpu = clock_us(CLOCK_PROCESS_CPUTIME_ID) - c0;
  assert_true(wall >= 300000);
  assert_true(cpu < wall / 4);
  gpum_batcher_destroy(b);
}

static long voluntary_switches(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_nvcsw;
}

static void on_extra(gpum_batcher_req_t *r, int status, void *out, void *user);

static void test_submit_leaves_waiting_workers_asleep(void **state) {
  (void)state;
  reset();
  /* A request that cannot change what a waiting worker decides (the batch is neither full nor
   * due) does not wake it: a context switch per request was most of the batcher's CPU cost. The
   * pause after each submit lets a woken worker go back to waiting (it would switch twice). */
  gpum_batcher_opts_t o = {.max_batch_size = 1000, .max_queue_delay_us = 60000000, .workers = 2};
  gpum_batcher_t *b = make(&o);
  gpum_batcher_submit_opts_t so = {.done = on_extra};
  assert_int_equal(gpum_batcher_submit(b, (void *)1, &so, NULL), 0); /* a worker times it */
  busy_wait_us(5000);
  long before = voluntary_switches();
  for (int i = 0; i < 100; i++) {
    assert_int_equal(gpum_batcher_submit(b, (void *)1, &so, NULL), 0);
    busy_wait_us(200);
  }
  long woken = voluntary_switches() - before;
  assert_true(woken < 20); /* woken on each submit: about 200 */
  gpum_batcher_stats_t st;
  gpum_batcher_stats(b, &st);
  assert_int_equal(st.queued, 101);
  assert_int_equal(st.batches, 0);
  gpum_batcher_shutdown(b, true); /* the 101 go as one batch */
  gpum_batcher_stats(b, &st);
  assert_int_equal(st.completed, 101);
  gpum_batcher_destroy(b);
}

static void test_leftover_timed_while_worker_busy(void **state) {
  (void)state;
  reset();
  /* Three requests, batches of two: the first two go at once and are held in the model; the
   * third goes on the other worker when its delay is over, not when the first worker is free. */
  pthread_mutex_lock(&mu);
  hold_only = 1;
  pthread_mutex_unlock(&mu);
  gate(true);
  gpum_batcher_opts_t o = {.max_batch_size = 2, .max_queue_delay_us = 20000, .workers = 2};
  gpum_batcher_t *b = make(&o);
  gpum_batcher_req_t *r1 = submit(b, 1, 0, 0), *r2 = submit(b, 2, 0, 0), *r3 = submit(b, 3, 0, 0);
  wait_in_model(1);
  expect_output(r3, 3); /* while {1, 2} is held */
  pthread_mutex_lock(&mu);
  assert_int_equal(in_model, 1);
  pthread_mutex_unlock(&mu);
  gate(false);
  expect_output(r1, 1);
  expect_output(r2, 2);
  gpum_batcher_destroy(b);
}

static void test_max_queue_size_and_cancel(void **state) {
  (void)state;
  reset();
  gpum_batcher_policy_t pol = {.max_queue_size = 2};
  gpum_batcher_opts_t o = {.max_batch_size = 1, .default_policy = pol};
  gpum_batcher_t *b = make(&o);
  gate(true);
  gpum_batcher_req_t *first = submit(b, 100, 0, 0);
  wait_in_model(1);
  gpum_batcher_req_t *a = submit(b, 1, 0, 0), *c = submit(b, 2, 0, 0), *r = NULL;
  assert_int_equal(gpum_batcher_submit(b, (void *)3, NULL, &r), GPUM_EBUSY);
  assert_int_equal(gpum_batcher_cancel(a), 0);               /* queued: cancelled */
  assert_int_equal(gpum_batcher_cancel(first), GPUM_ESTATE); /* in the model */
  assert_int_equal(gpum_batcher_wait(a, 0, NULL), GPUM_EINTR);
  assert_int_equal(gpum_batcher_wait(c, 0, NULL), GPUM_EAGAIN); /* not yet */
  gate(false);
  expect_output(first, 100);
  expect_output(c, 2);
  gpum_batcher_req_free(a);
  gpum_batcher_stats_t st;
  gpum_batcher_stats(b, &st);
  assert_int_equal(st.rejected_full, 1);
  assert_int_equal(st.cancelled, 1);
  gpum_batcher_destroy(b);
}

static intptr_t order[16];
static size_t norder;

static void on_done(gpum_batcher_req_t *r, int status, void *out, void *user) {
  (void)r, (void)out;
  assert_int_equal(status, 0);
  pthread_mutex_lock(&mu);
  order[norder++] = (intptr_t)user;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

static void test_preserve_ordering(void **state) {
  (void)state;
  reset();
  norder = 0;
  gpum_batcher_opts_t o = {.max_batch_size = 1, .workers = 2, .preserve_ordering = true};
  gpum_batcher_t *b = make(&o);
  pthread_mutex_lock(&mu);
  hold_only = 10; /* only the first request is held */
  pthread_mutex_unlock(&mu);
  gate(true);
  gpum_batcher_submit_opts_t so = {.done = on_done, .user = (void *)1};
  assert_int_equal(gpum_batcher_submit(b, (void *)10, &so, NULL), 0);
  wait_in_model(1);
  so.user = (void *)2;
  assert_int_equal(gpum_batcher_submit(b, (void *)20, &so, NULL), 0);
  pthread_mutex_lock(&mu); /* the second one ran on the other worker... */
  while (nran < 1)
    pthread_cond_wait(&cv, &mu);
  assert_int_equal(ran[0], 20);
  assert_int_equal(norder, 0); /* ... but is not released before the first */
  pthread_mutex_unlock(&mu);
  gate(false);
  gpum_batcher_shutdown(b, true);
  assert_int_equal(norder, 2);
  assert_int_equal(order[0], 1);
  assert_int_equal(order[1], 2);
  gpum_batcher_destroy(b);
}

static void test_oom_splits(void **state) {
  (void)state;
  reset();
  oom_above = 3;
  oom_alone = 13;
  gpum_batcher_opts_t o = {.max_batch_size = 16, .max_queue_delay_us = 60000000};
  gpum_batcher_t *b = make(&o);
  gpum_batcher_req_t *r[16];
  for (int i = 0; i < 16; i++)
    r[i] = submit(b, i + 1, 0, 0);
  for (int i = 0; i < 16; i++) {
    if (i + 1 == 13) {
      assert_int_equal(gpum_batcher_wait(r[i], -1, NULL), GPUM_EDEVOOM);
      gpum_batcher_req_free(r[i]);
    } else {
      expect_output(r[i], i + 1);
    }
  }
  /* Every request ran once (but 13), in batches of at most 3. */
  assert_int_equal(nran, 15);
  int seen[17] = {0};
  for (size_t i = 0; i < nran; i++)
    seen[ran[i]]++;
  for (int i = 1; i <= 16; i++)
    assert_int_equal(seen[i], i == 13 ? 0 : 1);
  for (size_t i = 0; i < nsizes; i++)
    assert_true(sizes[i] <= 3);
  gpum_batcher_stats_t st;
  gpum_batcher_stats(b, &st);
  assert_true(st.oom_splits >= 3);
  assert_true(st.bound <= 8); /* the bound dropped to what ran */
  gpum_batcher_destroy(b);
}

static void test_memory_bound_and_pressure(void **state) {
  (void)state;
  reset();
  gpum_batcher_opts_t o = {
      .max_batch_size = 10, .item_bytes = 100, .budget_bytes = 350, .max_queue_delay_us = 1000};
  gpum_batcher_t *b = make(&o);
  gpum_batcher_stats_t st;
  gpum_batcher_stats(b, &st);
  assert_int_equal(st.bound, 3);
  gpum_batcher_set_pressure(b, true);
  gpum_batcher_stats(b, &st);
  assert_int_equal(st.bound, 1);
  gpum_batcher_set_pressure(b, false);
  gpum_batcher_req_t *r[10];
  for (int i = 0; i < 10; i++)
    r[i] = submit(b, i + 1, 0, 0);
  for (int i = 0; i < 10; i++)
    expect_output(r[i], i + 1);
  for (size_t i = 0; i < nsizes; i++)
    assert_true(sizes[i] <= 3);
  gpum_batcher_destroy(b);
}

/* A job whose batches take 1000 bytes plus 100 per request, under a 10000-byte limit: the
 * memory callback reports the last batch's peak (one worker: the batch that just ran). */
static int fake_memory(gpum_batch_memory_t *m, void *user) {
  (void)user;
  pthread_mutex_lock(&mu);
  m->peak = 1000 + 100 * (nsizes ? sizes[nsizes - 1] : 0);
  pthread_mutex_unlock(&mu);
  m->limit = 10000;
  return 0;
}

static void test_measured_memory_bound(void **state) {
  (void)state;
  reset();
  gpum_batcher_opts_t o = {
      .max_batch_size = 128, .max_queue_delay_us = 5000, .memory = fake_memory};
  gpum_batcher_t *b = make(&o);
  gpum_batcher_stats_t st;
  gpum_batcher_stats(b, &st);
  assert_int_equal(st.bound, 128); /* nothing measured yet */
  gpum_batcher_req_t *r[200];
  for (int i = 0; i < 3; i++)
    r[i] = submit(b, i + 1, 0, 0);
  for (int i = 0; i < 3; i++)
    expect_output(r[i], i + 1);
  /* One size seen: 1300 bytes for 3 requests, all of it counted per request (433), and the
   * bound at what fits 90% of the limit (20), at least twice the size seen. */
  gpum_batcher_stats(b, &st);
  assert_int_equal(nsizes, 1);
  assert_int_equal(st.item_bytes, 433);
  assert_int_equal(st.fixed_bytes, 0);
  assert_int_equal(st.bound, 20);
  for (int i = 0; i < 5; i++)
    r[i] = submit(b, i + 1, 0, 0);
  for (int i = 0; i < 5; i++)
    expect_output(r[i], i + 1);
  /* Two sizes: the line is exact, 1000 fixed and 100 per request: (9000 - 1000) / 100 = 80. */
  gpum_batcher_stats(b, &st);
  assert_int_equal(nsizes, 2);
  assert_int_equal(st.item_bytes, 100);
  assert_int_equal(st.fixed_bytes, 1000);
  assert_int_equal(st.bound, 80);
  /* 200 queued behind a held batch go in batches of at most 80. */
  gate(true);
  gpum_batcher_req_t *first = submit(b, 1000, 0, 0);
  wait_in_model(1);
  for (int i = 0; i < 200; i++)
    r[i] = submit(b, i + 1, 0, 0);
  size_t before = nsizes;
  gate(false);
  expect_output(first, 1000);
  for (int i = 0; i < 200; i++)
    expect_output(r[i], i + 1);
  size_t largest = 0;
  for (size_t i = before; i < nsizes; i++)
    largest = sizes[i] > largest ? sizes[i] : largest;
  assert_int_equal(largest, 80);
  gpum_batcher_destroy(b);
}

static void *shutdown_thread(void *arg) {
  gpum_batcher_t *b = *(gpum_batcher_t **)arg;
  bool drain = ((gpum_batcher_t **)arg)[1] != NULL;
  gpum_batcher_shutdown(b, drain);
  return NULL;
}

static void on_extra(gpum_batcher_req_t *r, int status, void *out, void *user) {
  (void)r, (void)status, (void)out, (void)user;
}

static void test_shutdown_both_ways(void **state) {
  (void)state;
  for (int drain = 0; drain < 2; drain++) {
    reset();
    gpum_batcher_opts_t o = {.max_batch_size = 1};
    gpum_batcher_t *b = make(&o);
    gate(true);
    gpum_batcher_req_t *first = submit(b, 100, 0, 0);
    wait_in_model(1);
    gpum_batcher_req_t *queued = submit(b, 5, 0, 0);
    /* Shut down from another thread while the worker is held; once submits are refused the
     * batcher is stopping, and the worker is let go. */
    gpum_batcher_t *arg[2] = {b, drain ? b : NULL};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, shutdown_thread, arg), 0);
    gpum_batcher_submit_opts_t extra = {.done = on_extra};
    while (gpum_batcher_submit(b, (void *)9, &extra, NULL) != GPUM_ESTATE)
      ;
    gate(false);
    pthread_join(t, NULL);
    expect_output(first, 100);
    if (drain) {
      expect_output(queued, 5); /* drained */
    } else {
      assert_int_equal(gpum_batcher_wait(queued, -1, NULL), GPUM_EINTR); /* failed */
      gpum_batcher_req_free(queued);
    }
    gpum_batcher_stats_t st;
    gpum_batcher_stats(b, &st);
    assert_true(drain ? st.shut_down == 0 : st.shut_down >= 1);
    gpum_batcher_destroy(b);
  }
}

#define SUBMITTERS 16
#define PER 2000

static gpum_batcher_t *shared;

static void *submitter(void *arg) {
  intptr_t base = (intptr_t)arg * PER;
  unsigned seed = (unsigned)base + 1;
  for (intptr_t i = 0; i < PER; i++) {
    gpum_batcher_submit_opts_t so = {.priority = 1 + (unsigned)rand_r(&seed) % 3};
    gpum_batcher_req_t *r = NULL;
    if (gpum_batcher_submit(shared, (void *)(base + i + 1), &so, &r) != 0)
      return (void *)1;
    void *out = NULL;
    if (gpum_batcher_wait(r, -1, &out) != 0 || (intptr_t)out != 2 * (base + i + 1))
      return (void *)2;
    gpum_batcher_req_free(r);
  }
  return NULL;
}

static void test_sixteen_submitters(void **state) {
  (void)state;
  reset();
  gpum_batcher_opts_t o = {
      .max_batch_size = 32, .max_queue_delay_us = 200, .priority_levels = 3, .workers = 4};
  shared = make(&o);
  pthread_t t[SUBMITTERS];
  for (intptr_t i = 0; i < SUBMITTERS; i++)
    assert_int_equal(pthread_create(&t[i], NULL, submitter, (void *)i), 0);
  for (int i = 0; i < SUBMITTERS; i++) {
    void *rc;
    pthread_join(t[i], &rc);
    assert_null(rc);
  }
  gpum_batcher_stats_t st;
  gpum_batcher_stats(shared, &st);
  assert_int_equal(st.completed, SUBMITTERS * PER);
  assert_int_equal(st.submitted, SUBMITTERS * PER);
  uint64_t items = 0;
  for (size_t n = 1; n < GPUM_BATCHER_HIST; n++)
    items += n * st.batch_sizes[n];
  assert_int_equal(items, SUBMITTERS * PER);  /* each request in exactly one batch */
  assert_true(st.batches < SUBMITTERS * PER); /* and they were batched */
  gpum_batcher_destroy(shared);
}

static void test_option_errors(void **state) {
  (void)state;
  gpum_batcher_t *b = NULL;
  gpum_batcher_opts_t o = {.max_batch_size = 4};
  assert_int_equal(gpum_batcher_create(&o, &b), GPUM_EINVAL); /* no model */
  o.fn = model;
  o.max_batch_size = 0;
  assert_int_equal(gpum_batcher_create(&o, &b), GPUM_EINVAL);
  o.max_batch_size = 4;
  size_t pref[] = {5};
  o.preferred_sizes = pref;
  o.npreferred = 1;
  assert_int_equal(gpum_batcher_create(&o, &b), GPUM_EINVAL);
  o.npreferred = 0;
  o.item_bytes = 100;
  o.budget_bytes = 50;
  assert_int_equal(gpum_batcher_create(&o, &b), GPUM_EINVAL);
  o.item_bytes = 0;
  o.priority_levels = 2;
  o.default_priority = 3;
  assert_int_equal(gpum_batcher_create(&o, &b), GPUM_EINVAL);
  o.default_priority = 0;
  assert_int_equal(gpum_batcher_create(&o, &b), 0);
  gpum_batcher_submit_opts_t so = {.priority = 3};
  gpum_batcher_req_t *r = NULL;
  assert_int_equal(gpum_batcher_submit(b, NULL, &so, &r), GPUM_EINVAL);
  gpum_batcher_destroy(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_full_batch_goes_at_once),
      cmocka_unit_test(test_delay_expiry),
      cmocka_unit_test(test_preferred_size),
      cmocka_unit_test(test_priorities),
      cmocka_unit_test(test_timeouts_reject_delay_override),
      cmocka_unit_test(test_timeout_while_workers_busy),
      cmocka_unit_test(test_waiting_workers_sleep),
      cmocka_unit_test(test_submit_leaves_waiting_workers_asleep),
      cmocka_unit_test(test_leftover_timed_while_worker_busy),
      cmocka_unit_test(test_max_queue_size_and_cancel),
      cmocka_unit_test(test_preserve_ordering),
      cmocka_unit_test(test_oom_splits),
      cmocka_unit_test(test_memory_bound_and_pressure),
      cmocka_unit_test(test_measured_memory_bound),
      cmocka_unit_test(test_shutdown_both_ways),
      cmocka_unit_test(test_sixteen_submitters),
      cmocka_unit_test(test_option_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
