/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the adaptive batch runner (src/lib/work/batch.c, gpum/batch.h): 1 million
 * items, out-of-memory injected at random batch sizes and at random times, every item run
 * exactly once (a count per item); a step backed by a pool on a simulated device with a limit,
 * whose free memory changes, grows and shrinks the batch from the pool's own figures; an item
 * too large alone goes to the CPU fallback or is reported failed, and the run goes on;
 * accumulation windows and loss scales add up to the effective batch; checkpoint and resume
 * without repeating an item; option errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/batch.h>
#include <gpum/error.h>
#include <gpum/pool.h>

#define MiB (1024ULL * 1024)

typedef struct {
  uint8_t *runs; /* per item: times a successful step (or the fallback) ran it */
  uint64_t items;
  unsigned seed;
  size_t cap;         /* an OOM above this many items */
  unsigned oom_every; /* and at random, about 1 step in oom_every (0: never) */
  uint64_t too_big;   /* this item fails even alone (UINT64_MAX: none) */
  bool with_fallback;
  uint64_t failed_item; /* reported by the failed callback */
  int failed_calls;
  /* windows */
  double scale_sum;
  size_t window_items;
  size_t window_count;
  bool windows_ok;
  size_t effective;
  uint64_t stop_at; /* checkpoint: stop the run at the first checkpoint past this */
  uint64_t ckpt_next;
} ctx_t;

static void mark(ctx_t *c, const gpum_batch_t *b) {
  for (size_t i = 0; i < b->count; i++)
    c->runs[b->first + i]++;
  c->scale_sum += b->loss_scale;
  c->window_items += b->count;
  if (b->window_end) {
    /* A window: its scales sum to 1 and it holds the effective batch (or the rest). */
    uint64_t left = c->items - (b->first + b->count);
    if (c->scale_sum < 0.999999 || c->scale_sum > 1.000001 ||
        (c->effective && c->window_items != c->effective && left != 0))
      c->windows_ok = false;
    c->scale_sum = 0;
    c->window_items = 0;
    c->window_count++;
  }
}

static int step(const gpum_batch_t *b, void *user) {
  ctx_t *c = user;
  if (b->first <= c->too_big && c->too_big < b->first + b->count)
    return GPUM_EDEVOOM;
  if (b->count > c->cap)
    return GPUM_EDEVOOM;
  if (c->oom_every && rand_r(&c->seed) % c->oom_every == 0)
    return GPUM_EDEVOOM;
  /* The capacity wanders: other jobs come and go. */
  if (rand_r(&c->seed) % 50 == 0)
    c->cap = 1 + (size_t)rand_r(&c->seed) % 700;
  mark(c, b);
  return 0;
}

static int fallback(const gpum_batch_t *b, void *user) {
  ctx_t *c = user;
  assert_int_equal(b->count, 1);
  mark(c, b);
  return 0;
}

static void failed(uint64_t item, int error, void *user) {
  ctx_t *c = user;
  c->failed_item = item;
  c->failed_calls++;
  assert_int_equal(error, GPUM_EDEVOOM);
}

static ctx_t *ctx_new(uint64_t items) {
  ctx_t *c = test_calloc(1, sizeof *c);
  c->runs = test_calloc(items, 1);
  c->items = items;
  c->seed = 12345;
  c->cap = 300;
  c->too_big = UINT64_MAX;
  c->windows_ok = true;
  return c;
}

static void ctx_free(ctx_t *c) {
  test_free(c->runs);
  test_free(c);
}

static void exactly_once(const ctx_t *c, uint64_t from, uint64_t to) {
  for (uint64_t i = from; i < to; i++)
    if (c->runs[i] != 1)
      fail_msg("item %llu ran %u times", (unsigned long long)i, c->runs[i]);
}

static void test_million_items_exactly_once(void **state) {
  (void)state;
  const uint64_t n = 1000000;
  ctx_t *c = ctx_new(n);
  c->oom_every = 20;
  gpum_batch_opts_t o = {.items = n, .batch_size = 64, .max_batch = 1024, .step = step, .user = c};
  gpum_batch_runner_t *r;
  assert_int_equal(gpum_batch_create(&o, &r), 0);
  assert_int_equal(gpum_batch_run(r), 0);
  gpum_batch_stats_t st;
  gpum_batch_stats(r, &st);
  exactly_once(c, 0, n);
  assert_int_equal(st.done, n);
  assert_int_equal(st.failed, 0);
  assert_true(st.ooms > 100); /* the injection did bite */
  assert_true(st.retries >= st.ooms);
  assert_true(st.largest > 64 && st.largest <= 1024); /* grew without a memory callback */
  assert_true(st.nchanges > 0 && st.nchanges <= GPUM_BATCH_TRAJECTORY);
  assert_true(c->windows_ok);
  assert_int_equal(c->window_count, st.steps); /* no effective batch: each step a window */
  gpum_batch_destroy(r);
  ctx_free(c);
}

static void test_item_too_big_alone(void **state) {
  (void)state;
  for (int with = 0; with < 2; with++) {
    ctx_t *c = ctx_new(5000);
    c->too_big = 1234;
    c->with_fallback = with;
    gpum_batch_opts_t o = {.items = 5000,
                           .batch_size = 100,
                           .step = step,
                           .fallback = with ? fallback : NULL,
                           .failed = failed,
                           .user = c};
    gpum_batch_runner_t *r;
    assert_int_equal(gpum_batch_create(&o, &r), 0);
    assert_int_equal(gpum_batch_run(r), 0); /* the run goes on */
    gpum_batch_stats_t st;
    gpum_batch_stats(r, &st);
    if (with) {
      exactly_once(c, 0, 5000);
      assert_int_equal(st.fallback, 1);
      assert_int_equal(st.failed, 0);
      assert_int_equal(c->failed_calls, 0);
    } else {
      exactly_once(c, 0, 1234);
      exactly_once(c, 1235, 5000);
      assert_int_equal(c->runs[1234], 0);
      assert_int_equal(st.failed, 1);
      assert_int_equal(c->failed_calls, 1);
      assert_int_equal(c->failed_item, 1234);
    }
    assert_int_equal(st.done, 4999);
    gpum_batch_destroy(r);
    ctx_free(c);
  }
}

static void test_windows_add_up(void **state) {
  (void)state;
  const uint64_t n = 100003; /* the last window is short */
  ctx_t *c = ctx_new(n);
  c->oom_every = 7;
  c->effective = 256;
  gpum_batch_opts_t o = {.items = n,
                         .batch_size = 64,
                         .max_batch = 512,
                         .effective_batch = 256,
                         .step = step,
                         .user = c};
  gpum_batch_runner_t *r;
  assert_int_equal(gpum_batch_create(&o, &r), 0);
  assert_int_equal(gpum_batch_run(r), 0);
  gpum_batch_stats_t st;
  gpum_batch_stats(r, &st);
  exactly_once(c, 0, n);
  assert_true(c->windows_ok);
  assert_int_equal(c->window_count, (n + 255) / 256);
  assert_int_equal(st.windows, (n + 255) / 256);
  assert_true(st.largest <= 256); /* a micro-batch never crosses a window */
  gpum_batch_destroy(r);
  ctx_free(c);
}

static int ckpt(uint64_t next, void *user) {
  ctx_t *c = user;
  c->ckpt_next = next;
  return next >= c->stop_at ? GPUM_EINTR : 0; /* stop there, as a preempted job would */
}

static void test_checkpoint_resume(void **state) {
  (void)state;
  const uint64_t n = 200000;
  ctx_t *c = ctx_new(n);
  c->oom_every = 10;
  c->effective = 128;
  c->stop_at = 70000;
  gpum_batch_opts_t o = {.items = n,
                         .batch_size = 32,
                         .max_batch = 128,
                         .effective_batch = 128,
                         .step = step,
                         .checkpoint = ckpt,
                         .checkpoint_every = 5000,
                         .user = c};
  gpum_batch_runner_t *r;
  assert_int_equal(gpum_batch_create(&o, &r), 0);
  assert_int_equal(gpum_batch_run(r), GPUM_EINTR);
  gpum_batch_destroy(r);
  uint64_t next = c->ckpt_next;
  assert_true(next >= 70000 && next % 128 == 0); /* at a window boundary */
  /* Resume from the checkpoint in a new runner: nothing before it runs again. */
  c->stop_at = UINT64_MAX;
  o.start = next;
  assert_int_equal(gpum_batch_create(&o, &r), 0);
  assert_int_equal(gpum_batch_run(r), 0);
  exactly_once(c, 0, n);
  assert_true(c->windows_ok);
  gpum_batch_destroy(r);
  ctx_free(c);
}

/* A step backed by a pool on a simulated device (2 GiB) with a 1 GiB limit: item i needs
 * bytes_of(i), over 1 million items. Another job on the same device takes 1.5 GiB from item
 * 250,000 to 600,000 (the job gives its cache back first, as under gpumd's pressure), so the
 * job has 0.5 GiB then; and out-of-memory is injected at random times (1 step in 40). */
typedef struct {
  gpum_pool_t *pool, *other;
  gpum_pool_source_t *src;
  uint8_t *runs;
  gpum_devptr_t other_ptr;
  bool squeezed;
  uint64_t pos; /* the runner's position, from the progress callback */
  size_t largest_before, largest_in, largest_after;
  uint64_t most_in; /* the heaviest step during the squeeze, bytes */
  unsigned seed;
  uint64_t injected; /* out-of-memory steps the test injected */
} pctx_t;

#define SQUEEZE_FROM 250000
#define SQUEEZE_TO 600000

static uint64_t bytes_of(uint64_t item) {
  return (1 + item % 7) * MiB; /* 1..7 MiB */
}

static double weight(uint64_t item, void *user) {
  (void)user;
  return (double)bytes_of(item);
}

static int pool_step(const gpum_batch_t *b, void *user) {
  pctx_t *p = user;
  static gpum_devptr_t ptrs[4096];
  if (rand_r(&p->seed) % 40 == 0) { /* another job's passing spike */
    p->injected++;
    return GPUM_EDEVOOM;
  }
  size_t n = 0;
  int rc = 0;
  uint64_t bytes = 0;
  for (; n < b->count; n++) {
    rc = gpum_pool_alloc(p->pool, bytes_of(b->first + n), 0, &ptrs[n]);
    if (rc != 0)
      break;
    bytes += bytes_of(b->first + n);
  }
  for (size_t i = 0; i < n; i++)
    assert_int_equal(gpum_pool_free(p->pool, ptrs[i]), 0);
  if (rc == GPUM_EDEVOOM)
    return rc;
  assert_int_equal(rc, 0);
  for (size_t i = 0; i < b->count; i++)
    p->runs[b->first + i]++;
  size_t *largest = p->squeezed               ? &p->largest_in
                    : b->first < SQUEEZE_FROM ? &p->largest_before
                                              : &p->largest_after;
  if (b->count > *largest)
    *largest = b->count;
  if (p->squeezed && bytes > p->most_in)
    p->most_in = bytes;
  return 0;
}

/* The job's budget: the pool's limit, or what the other job leaves on the device. */
static int pool_memory(gpum_batch_memory_t *m, void *user) {
  pctx_t *p = user;
  int rc = gpum_batch_memory_from_pool(m, p->pool);
  if (rc == 0 && p->squeezed && m->limit > 512 * MiB)
    m->limit = 512 * MiB;
  return rc;
}

static void pool_progress(const gpum_batch_stats_t *st, void *user) {
  pctx_t *p = user;
  uint64_t pos = st->done + st->fallback + st->failed;
  if (!p->squeezed && pos >= SQUEEZE_FROM && pos < SQUEEZE_TO) {
    assert_int_equal(gpum_pool_trim(p->pool, 0, NULL), 0);
    assert_int_equal(gpum_pool_alloc(p->other, 1536 * MiB, 0, &p->other_ptr), 0);
    p->squeezed = true;
  } else if (p->squeezed && pos >= SQUEEZE_TO) {
    assert_int_equal(gpum_pool_free(p->other, p->other_ptr), 0);
    assert_int_equal(gpum_pool_trim(p->other, 0, NULL), 0);
    p->squeezed = false;
  }
}

static void test_pool_backed(void **state) {
  (void)state;
  const uint64_t n = 1000000;
  pctx_t *p = test_calloc(1, sizeof *p);
  p->seed = 777;
  p->runs = test_calloc(n, 1);
  assert_int_equal(gpum_pool_source_simulated(2048 * MiB, &p->src), 0);
  gpum_pool_opts_t po;
  gpum_pool_opts_init(&po);
  po.limit_bytes = 1024 * MiB;
  assert_int_equal(gpum_pool_create(p->src, &po, &p->pool), 0);
  po.limit_bytes = 0;
  po.name = "other";
  assert_int_equal(gpum_pool_create(p->src, &po, &p->other), 0);
  gpum_batch_opts_t o = {.items = n,
                         .batch_size = 8,
                         .max_batch = 4096,
                         .step = pool_step,
                         .memory = pool_memory,
                         .weight = weight,
                         .progress = pool_progress,
                         .user = p};
  gpum_batch_runner_t *r;
  assert_int_equal(gpum_batch_create(&o, &r), 0);
  assert_int_equal(gpum_batch_run(r), 0);
  gpum_batch_stats_t st;
  gpum_batch_stats(r, &st);
  for (uint64_t i = 0; i < n; i++)
    if (p->runs[i] != 1)
      fail_msg("item %llu ran %u times", (unsigned long long)i, p->runs[i]);
  assert_int_equal(st.done, n);
  assert_int_equal(st.failed, 0);
  /* It grew from 8 items to what 90% of 1 GiB holds (about 230 items of 4 MiB on average),
   * shrank to what 0.5 GiB holds while the other job ran, grew back after. */
  assert_true(p->largest_before > 150);
  assert_true(p->largest_in < p->largest_before);
  assert_true(p->most_in <= 512 * MiB);
  assert_true(p->largest_after > p->largest_in);
  /* From the pool's figures, not by trial: beyond the injected ones, a handful of
   * out-of-memory steps in all. */
  assert_true(p->injected > 100);
  assert_true(st.ooms >= p->injected && st.ooms - p->injected <= 10);
  assert_true(st.peak <= 1024 * MiB);
  gpum_batch_destroy(r);
  gpum_pool_destroy(p->pool);
  gpum_pool_destroy(p->other);
  gpum_pool_source_destroy(p->src);
  test_free(p->runs);
  test_free(p);
}

/* An item that does not fit what another job leaves, but fits the device, waits for memory:
 * a step needs 10 + its weights (units); the device has 200, another job holds 150 from item
 * 400 until the runner has waited 5 times. Item 500 weighs 100. */
typedef struct {
  uint8_t runs[1000];
  bool other;
  unsigned waits;
  double last_peak;
  size_t heavy_alone;
} wctx_t;

static double w_weight(uint64_t item, void *user) {
  (void)user;
  return item == 500 ? 100 : 1;
}

static int w_step(const gpum_batch_t *b, void *user) {
  wctx_t *c = user;
  double need = 10;
  for (size_t i = 0; i < b->count; i++)
    need += w_weight(b->first + i, c);
  if (b->first >= 400 && c->waits == 0)
    c->other = true;
  if (need > (c->other ? 50 : 200))
    return GPUM_EDEVOOM;
  c->last_peak = need;
  for (size_t i = 0; i < b->count; i++)
    c->runs[b->first + i]++;
  if (b->first == 500 && b->count == 1)
    c->heavy_alone++;
  return 0;
}

static int w_memory(gpum_batch_memory_t *m, void *user) {
  wctx_t *c = user;
  m->peak = (uint64_t)c->last_peak;
  m->limit = c->other ? 50 : 200;
  m->total = 200;
  return 0;
}

static int w_wait(void *user) {
  wctx_t *c = user;
  if (++c->waits == 5)
    c->other = false; /* the other job ends */
  return 0;
}

static void test_wait_for_memory(void **state) {
  (void)state;
  wctx_t *c = test_calloc(1, sizeof *c);
  gpum_batch_opts_t o = {.items = 1000,
                         .batch_size = 4,
                         .max_batch = 64,
                         .step = w_step,
                         .memory = w_memory,
                         .weight = w_weight,
                         .wait = w_wait,
                         .user = c};
  gpum_batch_runner_t *r;
  assert_int_equal(gpum_batch_create(&o, &r), 0);
  assert_int_equal(gpum_batch_run(r), 0);
  gpum_batch_stats_t st;
  gpum_batch_stats(r, &st);
  for (int i = 0; i < 1000; i++)
    assert_int_equal(c->runs[i], 1);
  assert_int_equal(st.failed, 0);
  assert_int_equal(st.waits, 5);
  assert_int_equal(c->heavy_alone, 1); /* it ran alone, once, after the other job ended */
  assert_true(st.peak <= 200 * 0.88 + 1);
  gpum_batch_destroy(r);
  test_free(c);
}

static void test_option_errors(void **state) {
  (void)state;
  gpum_batch_runner_t *r = NULL;
  gpum_batch_opts_t o = {.items = 10, .batch_size = 4};
  assert_int_equal(gpum_batch_create(&o, &r), GPUM_EINVAL); /* no step */
  o.step = step;
  o.batch_size = 0;
  assert_int_equal(gpum_batch_create(&o, &r), GPUM_EINVAL);
  o.batch_size = 8;
  o.max_batch = 4;
  assert_int_equal(gpum_batch_create(&o, &r), GPUM_EINVAL);
  o.max_batch = 0;
  o.start = 11;
  assert_int_equal(gpum_batch_create(&o, &r), GPUM_EINVAL);
  o.start = 0;
  o.target = 1.5;
  assert_int_equal(gpum_batch_create(&o, &r), GPUM_EINVAL);
  assert_null(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_million_items_exactly_once),
      cmocka_unit_test(test_item_too_big_alone),
      cmocka_unit_test(test_windows_add_up),
      cmocka_unit_test(test_checkpoint_resume),
      cmocka_unit_test(test_pool_backed),
      cmocka_unit_test(test_wait_for_memory),
      cmocka_unit_test(test_option_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
