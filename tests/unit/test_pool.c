/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the pool core: rounding, small and large segments, splitting and merging,
 * reuse, trim, limits in bytes and as a fraction, the OOM ladder's order and its message, OOM
 * callbacks run without the lock, the strategies, stats, the JSON snapshot (parsed with
 * jansson and compared with the stats), the CSV event log, the built-in sources, the pool's own
 * host memory (huge-page chunks and map tables, exercised by a pool of 70,000 blocks), the
 * rule for big cached segments near the limit, and bad input that must change nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include <gpum/error.h>
#include <gpum/pool.h>

#include "pool/pool_internal.h"
#include "pool_testlib.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

typedef struct {
  gpum_pool_source_t *src;
  tl_src_t *tl;
  gpum_pool_t *pool;
} fx_t;

static void fx_open(fx_t *f, unsigned features, uint64_t capacity, const gpum_pool_opts_t *o) {
  f->tl = tl_open(features, capacity, &f->src);
  assert_non_null(f->tl);
  assert_int_equal(gpum_pool_create(f->src, o, &f->pool), 0);
}

static void fx_close(fx_t *f) {
  assert_int_equal(gpum__pool_check(f->pool), 0);
  gpum_pool_destroy(f->pool);
  assert_int_equal(f->tl->used, 0);
  assert_int_equal(f->tl->events_live, 0);
  tl_close(f->tl, f->src);
}

static gpum_devptr_t must_alloc(gpum_pool_t *p, size_t size) {
  gpum_devptr_t ptr = 0;
  assert_int_equal(gpum_pool_alloc(p, size, 0, &ptr), 0);
  assert_int_equal(ptr % 512, 0);
  return ptr;
}

static gpum_pool_stats_t stats(gpum_pool_t *p) {
  gpum_pool_stats_t st;
  assert_int_equal(gpum_pool_stats(p, &st), 0);
  return st;
}

static void test_pool_rounding_and_segments(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0, 0, NULL);
  gpum_devptr_t a = must_alloc(f.pool, 1);
  gpum_pool_stats_t st = stats(f.pool);
  assert_int_equal(st.allocated_bytes.current, 512);
  assert_int_equal(st.requested_bytes.current, 1);
  assert_int_equal(st.reserved_bytes.current, 2 * MiB); /* a small segment */
  gpum_devptr_t b = must_alloc(f.pool, MiB);            /* still small: same segment */
  assert_int_equal(b, a + 512);
  assert_int_equal(stats(f.pool).reserved_bytes.current, 2 * MiB);
  gpum_devptr_t d = must_alloc(f.pool, 11 * MiB); /* own segment, 2 MiB steps: 12 MiB */
  assert_int_equal(stats(f.pool).reserved_bytes.current, 14 * MiB);
  /* Its 1 MiB remainder is not worth a split: the block keeps it. */
  assert_int_equal(stats(f.pool).allocated_bytes.current, 512 + MiB + 12 * MiB);
  gpum_devptr_t c = must_alloc(f.pool, MiB + 1); /* large: a 20 MiB segment */
  st = stats(f.pool);
  assert_int_equal(st.reserved_bytes.current, 34 * MiB);
  assert_int_equal(st.segment.current, 3);
  assert_int_equal(st.allocated_bytes.current, 512 + MiB + 12 * MiB + (MiB + 512));
  assert_int_equal(st.num_source_allocs, 3);
  for (gpum_devptr_t *p = (gpum_devptr_t[]){a, b, c, d}, *e = p + 4; p < e; p++)
    assert_int_equal(gpum_pool_free(f.pool, *p), 0);
  st = stats(f.pool);
  assert_int_equal(st.allocated_bytes.current, 0);
  assert_int_equal(st.reserved_bytes.current, 34 * MiB); /* cached */
  assert_int_equal(st.free_cached, 34 * MiB);
  assert_int_equal(st.inactive_split.current, 0); /* everything merged back */
  fx_close(&f);
}

static void test_pool_split_rules(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0, 0, NULL);
  /* Large: a remainder of 1 MiB or less stays with the block. */
  gpum_devptr_t a = must_alloc(f.pool, 19 * MiB + 100);
  gpum_pool_stats_t st = stats(f.pool);
  assert_int_equal(st.allocated_bytes.current, 20 * MiB);
  assert_int_equal(st.requested_bytes.current, 19 * MiB + 100);
  assert_int_equal(st.num_splits, 0);
  /* Large: a bigger remainder is split off and reused. */
  gpum_devptr_t b = must_alloc(f.pool, 5 * MiB);
  gpum_devptr_t c = must_alloc(f.pool, 5 * MiB);
  assert_int_equal(c, b + 5 * MiB);
  st = stats(f.pool);
  assert_int_equal(st.num_splits, 2);
  assert_int_equal(st.segment.current, 2);
  assert_int_equal(st.inactive_split.current, 1);
  assert_int_equal(st.inactive_split_bytes.current, 10 * MiB);
  /* Free in the middle, then the neighbours: everything merges into one block. */
  assert_int_equal(gpum_pool_free(f.pool, b), 0);
  assert_int_equal(stats(f.pool).inactive_split.current, 2);
  assert_int_equal(gpum_pool_free(f.pool, c), 0);
  st = stats(f.pool);
  assert_int_equal(st.inactive_split.current, 0);
  assert_true(st.num_merges >= 2);
  assert_int_equal(st.largest_free_block, 20 * MiB);
  /* Same size again: the same address comes back. */
  assert_int_equal(must_alloc(f.pool, 5 * MiB), b);
  assert_int_equal(gpum_pool_free(f.pool, b), 0);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  assert_int_equal(gpum__pool_check(f.pool), 0);
  fx_close(&f);
}

/* BALANCED near its limit: a cached segment of its own (larger than 20 MiB) is not split for a
 * request of half its size or less; without pressure it is, as in PyTorch. */
static void test_pool_oversize_rule(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0, 0, NULL); /* no limit, no device size: never under pressure */
  gpum_devptr_t big = must_alloc(f.pool, 40 * MiB);
  assert_int_equal(gpum_pool_free(f.pool, big), 0);
  assert_int_equal(must_alloc(f.pool, 6 * MiB), big); /* split */
  assert_int_equal(stats(f.pool).segment.current, 1);
  assert_int_equal(gpum_pool_free(f.pool, big), 0);
  fx_close(&f);

  /* Limit 50 MiB: 40 + a 20 MiB segment would pass 80% of it. The 40 MiB segment stays whole
   * and the request gets a segment of the 10 MiB left. */
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.limit_bytes = 50 * MiB;
  fx_open(&f, 0, 0, &o);
  big = must_alloc(f.pool, 40 * MiB);
  assert_int_equal(gpum_pool_free(f.pool, big), 0);
  gpum_devptr_t a = must_alloc(f.pool, 6 * MiB);
  gpum_pool_stats_t st = stats(f.pool);
  assert_int_equal(st.segment.current, 2);
  assert_int_equal(st.reserved_bytes.current, 50 * MiB);
  assert_true(a < big || a >= big + 40 * MiB);
  assert_int_equal(must_alloc(f.pool, 40 * MiB), big); /* still whole for its own size */
  assert_int_equal(gpum_pool_free(f.pool, big), 0);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  fx_close(&f);

  /* Limit 45 MiB: no room for 6 MiB beside it. The ladder gives the empty 40 MiB segment back
   * and makes a 20 MiB one. */
  o.limit_bytes = 45 * MiB;
  fx_open(&f, 0, 0, &o);
  big = must_alloc(f.pool, 40 * MiB);
  assert_int_equal(gpum_pool_free(f.pool, big), 0);
  assert_int_equal(must_alloc(f.pool, 21 * MiB), big); /* over half its size: split */
  assert_int_equal(gpum_pool_free(f.pool, big), 0);
  a = must_alloc(f.pool, 6 * MiB);
  st = stats(f.pool);
  assert_int_equal(st.segment.current, 1);
  assert_int_equal(st.reserved_bytes.current, 20 * MiB);
  assert_int_equal(st.num_alloc_retries, 1);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  fx_close(&f);

  /* GREEDY keeps PyTorch's rule under a limit too: its big segments are split for anything. */
  gpum_pool_opts_init(&o);
  o.strategy = GPUM_POOL_GREEDY;
  o.limit_bytes = 70 * MiB;
  fx_open(&f, 0, 0, &o);
  big = must_alloc(f.pool, 40 * MiB); /* a 64 MiB segment */
  assert_int_equal(gpum_pool_free(f.pool, big), 0);
  assert_int_equal(must_alloc(f.pool, 6 * MiB), big);
  assert_int_equal(stats(f.pool).segment.current, 1);
  assert_int_equal(gpum_pool_free(f.pool, big), 0);
  fx_close(&f);
}

static void test_pool_fragmentation_stat(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0, 0, NULL);
  gpum_devptr_t p[4];
  for (int i = 0; i < 4; i++)
    p[i] = must_alloc(f.pool, 512 * KiB);
  assert_int_equal(gpum_pool_free(f.pool, p[0]), 0);
  assert_int_equal(gpum_pool_free(f.pool, p[2]), 0);
  gpum_pool_stats_t st = stats(f.pool);
  assert_int_equal(st.free_cached, MiB);
  assert_int_equal(st.largest_free_block, 512 * KiB);
  assert_true(st.fragmentation > 0.49 && st.fragmentation < 0.51);
  assert_int_equal(gpum_pool_free(f.pool, p[1]), 0);
  assert_int_equal(gpum_pool_free(f.pool, p[3]), 0);
  st = stats(f.pool);
  assert_true(st.fragmentation == 0.0);
  fx_close(&f);
}

static void test_pool_bad_input(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, TL_EVENTS, 0, NULL);
  gpum_devptr_t a = must_alloc(f.pool, 1000);
  gpum_pool_stats_t before = stats(f.pool);
  gpum_devptr_t x = 77;
  assert_int_equal(gpum_pool_alloc(f.pool, 0, 0, &x), GPUM_EINVAL);
  assert_int_equal(x, 77);
  assert_non_null(strstr(gpum_last_error(), "0 bytes"));
  assert_int_equal(gpum_pool_alloc(NULL, 10, 0, &x), GPUM_EINVAL);
  assert_int_equal(gpum_pool_alloc(f.pool, 10, 0, NULL), GPUM_EINVAL);
  assert_int_equal(gpum_pool_free(f.pool, a + 512), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "not a block of this pool"));
  assert_int_equal(gpum_pool_free(f.pool, 0), GPUM_EINVAL);
  assert_int_equal(gpum_pool_free(NULL, a), GPUM_EINVAL);
  assert_int_equal(gpum_pool_record_stream(f.pool, a + 1, 5), GPUM_EINVAL);
  assert_int_equal(gpum_pool_add_oom_callback(f.pool, NULL, NULL), GPUM_EINVAL);
  assert_int_equal(gpum_pool_stats(f.pool, NULL), GPUM_EINVAL);
  assert_int_equal(gpum_pool_snapshot_json(NULL, &(char *){NULL}), GPUM_EINVAL);
  gpum_pool_stats_t after = stats(f.pool);
  assert_memory_equal(&before, &after, sizeof(before));
  /* A double free changes nothing either. */
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  before = stats(f.pool);
  assert_int_equal(gpum_pool_free(f.pool, a), GPUM_EINVAL);
  after = stats(f.pool);
  assert_memory_equal(&before, &after, sizeof(before));
  assert_int_equal(gpum__pool_check(f.pool), 0);
  fx_close(&f);
}

static void expect_bad_opts(gpum_pool_source_t *src, const gpum_pool_opts_t *o, const char *what) {
  gpum_pool_t *p = (gpum_pool_t *)&p;
  assert_int_equal(gpum_pool_create(src, o, &p), GPUM_EINVAL);
  assert_null(p);
  if (strstr(gpum_last_error(), what) == NULL)
    fail_msg("'%s' does not name '%s'", gpum_last_error(), what);
}

static void test_pool_bad_options(void **state) {
  (void)state;
  gpum_pool_source_t *src = NULL;
  tl_src_t *tl = tl_open(0, 0, &src);
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.limit_fraction = 1.5;
  expect_bad_opts(src, &o, "limit_fraction 1.5");
  o.limit_fraction = -0.1;
  expect_bad_opts(src, &o, "limit_fraction");
  o.limit_fraction = 0.0 / 0.0;
  expect_bad_opts(src, &o, "limit_fraction");
  o.limit_fraction = 0.5; /* valid, but the source cannot report memory */
  expect_bad_opts(src, &o, "reports device memory");
  gpum_pool_opts_init(&o);
  o.gc_threshold = 1.0;
  expect_bad_opts(src, &o, "gc_threshold 1");
  gpum_pool_opts_init(&o);
  o.max_split_size = MiB;
  expect_bad_opts(src, &o, "max_split_size 1048576");
  gpum_pool_opts_init(&o);
  o.strategy = (gpum_pool_strategy_t)9;
  expect_bad_opts(src, &o, "unknown strategy 9");
  gpum_pool_opts_init(&o);
  o.name = "";
  expect_bad_opts(src, &o, "pool name");
  char longname[100];
  memset(longname, 'x', sizeof(longname) - 1);
  longname[99] = '\0';
  o.name = longname;
  expect_bad_opts(src, &o, "pool name");
  gpum_pool_opts_init(&o);
  o.device = -1;
  expect_bad_opts(src, &o, "device -1");
  gpum_pool_t *p = NULL;
  assert_int_equal(gpum_pool_create(NULL, NULL, &p), GPUM_EINVAL);
  assert_int_equal(gpum_pool_create(src, NULL, NULL), GPUM_EINVAL);
  assert_int_equal(tl->alloc_calls, 0);
  tl_close(tl, src);
}

static void test_pool_strategy_names(void **state) {
  (void)state;
  gpum_pool_strategy_t s;
  assert_int_equal(gpum_pool_strategy_parse("greedy", &s), 0);
  assert_int_equal(s, GPUM_POOL_GREEDY);
  assert_int_equal(gpum_pool_strategy_parse("BALANCED", &s), 0);
  assert_int_equal(s, GPUM_POOL_BALANCED);
  assert_int_equal(gpum_pool_strategy_parse("Consolidated", &s), 0);
  assert_int_equal(s, GPUM_POOL_CONSOLIDATED);
  assert_int_equal(gpum_pool_strategy_parse("fragmentation-aware", &s), 0);
  assert_int_equal(s, GPUM_POOL_FRAGMENTATION_AWARE);
  assert_int_equal(gpum_pool_strategy_parse("FRAGMENTATION_AWARE", &s), 0);
  s = GPUM_POOL_GREEDY;
  assert_int_equal(gpum_pool_strategy_parse("fast", &s), GPUM_EINVAL);
  assert_int_equal(s, GPUM_POOL_GREEDY);
  assert_non_null(strstr(gpum_last_error(), "'fast'"));
  assert_int_equal(gpum_pool_strategy_parse(NULL, &s), GPUM_EINVAL);
  assert_string_equal(gpum_pool_strategy_name(GPUM_POOL_FRAGMENTATION_AWARE),
                      "FRAGMENTATION_AWARE");
  assert_string_equal(gpum_pool_strategy_name(GPUM_POOL_BALANCED), "BALANCED");
}

/* ---- Limits, the ladder, callbacks, the message ---- */

static void test_pool_limit_bytes(void **state) {
  (void)state;
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.limit_bytes = 30 * MiB;
  fx_t f;
  fx_open(&f, 0, 0, &o);
  assert_int_equal(stats(f.pool).limit, 30 * MiB);
  gpum_devptr_t a = must_alloc(f.pool, 20 * MiB);
  /* 12 MiB does not fit beside 20 (+ its segment): fails after the ladder. */
  gpum_devptr_t x = 0;
  assert_int_equal(gpum_pool_alloc(f.pool, 12 * MiB, 0, &x), GPUM_EDEVOOM);
  assert_non_null(strstr(gpum_last_error(), "limit 30.00 MiB"));
  /* 10 MiB fits exactly. */
  gpum_devptr_t b = must_alloc(f.pool, 10 * MiB);
  /* Larger than the limit by itself: fails at once without asking the source. */
  long calls = f.tl->alloc_calls;
  uint64_t retries = stats(f.pool).num_alloc_retries;
  assert_int_equal(gpum_pool_alloc(f.pool, 31 * MiB, 0, &x), GPUM_EDEVOOM);
  assert_string_equal(gpum_last_error(),
                      "out of device memory on GPU 0 (pool 'default'): tried to allocate 31.00 "
                      "MiB, more than the pool's limit of 30.00 MiB");
  assert_int_equal(f.tl->alloc_calls, calls);
  assert_int_equal(stats(f.pool).num_alloc_retries, retries);
  assert_int_equal(stats(f.pool).num_ooms, 2);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  assert_int_equal(gpum_pool_free(f.pool, b), 0);
  assert_true(stats(f.pool).reserved_bytes.peak <= 30 * MiB);
  fx_close(&f);
}

static void test_pool_limit_fraction(void **state) {
  (void)state;
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.limit_fraction = 0.25;
  fx_t f;
  fx_open(&f, TL_MEMINFO, GiB, &o);
  assert_int_equal(stats(f.pool).limit, 256 * MiB);
  gpum_devptr_t x;
  assert_int_equal(gpum_pool_alloc(f.pool, 257 * MiB, 0, &x), GPUM_EDEVOOM);
  assert_non_null(strstr(gpum_last_error(), "limit of 256.00 MiB"));
  gpum_pool_destroy(f.pool);
  /* Both: the smaller wins. */
  o.limit_bytes = 100 * MiB;
  assert_int_equal(gpum_pool_create(f.src, &o, &f.pool), 0);
  assert_int_equal(stats(f.pool).limit, 100 * MiB);
  fx_close(&f);
}

static void test_pool_small_limit_packs(void **state) {
  (void)state;
  /* A limit below the segment size: one segment of what is left, not a failure. */
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.limit_bytes = MiB;
  fx_t f;
  fx_open(&f, 0, 0, &o);
  gpum_devptr_t p[8];
  for (int i = 0; i < 8; i++)
    p[i] = must_alloc(f.pool, 128 * KiB);
  assert_int_equal(stats(f.pool).reserved_bytes.current, MiB);
  assert_int_equal(stats(f.pool).segment.current, 1);
  gpum_devptr_t x;
  assert_int_equal(gpum_pool_alloc(f.pool, 512, 0, &x), GPUM_EDEVOOM);
  for (int i = 0; i < 8; i++)
    assert_int_equal(gpum_pool_free(f.pool, p[i]), 0);
  fx_close(&f);
}

typedef struct {
  int calls;
  int order[8];
  int *seq;
  int id;
  bool answer;
  gpum_devptr_t to_free;
  gpum_pool_stats_t seen;
} cb_t;

static bool oom_cb(gpum_pool_t *pool, size_t requested, void *arg) {
  cb_t *c = arg;
  c->calls++;
  c->order[0] = (*c->seq)++;
  assert_true(requested > 0);
  /* The lock is released: the pool can be called from here. */
  assert_int_equal(gpum_pool_stats(pool, &c->seen), 0);
  if (c->to_free) {
    assert_int_equal(gpum_pool_free(pool, c->to_free), 0);
    c->to_free = 0;
  }
  return c->answer;
}

static void test_pool_oom_ladder_order(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, TL_SYNC | TL_EVENTS, 24 * MiB, NULL);
  int seq = 0;
  cb_t c1 = {.seq = &seq, .answer = false}, c2 = {.seq = &seq, .answer = false};
  assert_int_equal(gpum_pool_add_oom_callback(f.pool, oom_cb, &c1), 0);
  assert_int_equal(gpum_pool_add_oom_callback(f.pool, oom_cb, &c2), 0);
  gpum_devptr_t a = must_alloc(f.pool, 12 * MiB);
  gpum_devptr_t b = must_alloc(f.pool, 12 * MiB);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  /* Step 1: a cached block serves the request; nothing else happens. */
  a = must_alloc(f.pool, 12 * MiB);
  assert_int_equal(stats(f.pool).num_alloc_retries, 0);
  assert_int_equal(c1.calls, 0);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  /* 20 MiB: growth fails; sync, the cached segment goes back, growth fails again; the
   * callbacks are asked in order; then the error. */
  gpum_devptr_t x = 0;
  assert_int_equal(gpum_pool_alloc(f.pool, 20 * MiB, 0, &x), GPUM_EDEVOOM);
  assert_string_equal(f.tl->calls, "alloc alloc alloc-fail sync free alloc-fail");
  assert_int_equal(c1.calls, 1);
  assert_int_equal(c2.calls, 1);
  assert_int_equal(c1.order[0], 0);
  assert_int_equal(c2.order[0], 1);
  gpum_pool_stats_t st = stats(f.pool);
  assert_int_equal(st.num_alloc_retries, 1);
  assert_int_equal(st.num_ooms, 1);
  assert_int_equal(st.num_source_frees, 1);
  /* The callbacks saw the pool after the ladder had freed the cached segment. */
  assert_int_equal(c1.seen.reserved_bytes.current, 12 * MiB);
  /* Now the second callback frees b and asks for a retry: the allocation succeeds. */
  c2.to_free = b;
  c2.answer = true;
  assert_int_equal(gpum_pool_alloc(f.pool, 20 * MiB, 0, &x), 0);
  assert_int_equal(c1.calls, 2);
  assert_int_equal(c2.calls, 2);
  st = stats(f.pool);
  assert_int_equal(st.num_ooms, 1);
  assert_int_equal(st.allocated_bytes.current, 20 * MiB);
  assert_int_equal(gpum_pool_free(f.pool, x), 0);
  fx_close(&f);
}

static void test_pool_oom_message(void **state) {
  (void)state;
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.name = "train";
  o.limit_bytes = 40 * MiB;
  fx_t f;
  fx_open(&f, TL_MEMINFO, 48 * MiB, &o);
  gpum_devptr_t big[2], small[4];
  for (int i = 0; i < 2; i++)
    big[i] = must_alloc(f.pool, 12 * MiB);
  for (int i = 0; i < 4; i++)
    small[i] = must_alloc(f.pool, 512 * KiB);
  assert_int_equal(gpum_pool_free(f.pool, small[0]), 0);
  assert_int_equal(gpum_pool_free(f.pool, small[2]), 0);
  gpum_devptr_t x;
  assert_int_equal(gpum_pool_alloc(f.pool, 20 * MiB, 0, &x), GPUM_EDEVOOM);
  assert_string_equal(gpum_last_error(),
                      "out of device memory on GPU 0 (pool 'train'): tried to allocate 20.00 "
                      "MiB; device total 48.00 MiB, free 22.00 MiB; this pool holds 26.00 MiB "
                      "reserved, of which 25.00 MiB allocated and 1.00 MiB cached (largest cached "
                      "block 512.00 KiB, fragmentation 50%); limit 40.00 MiB");
  for (int i = 0; i < 2; i++)
    assert_int_equal(gpum_pool_free(f.pool, big[i]), 0);
  assert_int_equal(gpum_pool_free(f.pool, small[1]), 0);
  assert_int_equal(gpum_pool_free(f.pool, small[3]), 0);
  fx_close(&f);

  /* No mem_info, no limit: those parts are left out. */
  gpum_pool_opts_init(&o);
  o.device = 3;
  fx_open(&f, 0, 0, &o);
  f.tl->fail_all = true;
  assert_int_equal(gpum_pool_alloc(f.pool, 4 * MiB, 0, &x), GPUM_EDEVOOM);
  assert_string_equal(gpum_last_error(),
                      "out of device memory on GPU 3 (pool 'default'): tried to allocate 4.00 "
                      "MiB; this pool holds 0 B reserved, of which 0 B allocated and 0 B cached "
                      "(largest cached block 0 B, fragmentation 0%)");
  f.tl->fail_all = false;
  fx_close(&f);
}

static void test_pool_callbacks_full(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0, 0, NULL);
  int seq = 0;
  cb_t c = {.seq = &seq};
  for (int i = 0; i < GPUM__POOL_MAX_CALLBACKS; i++)
    assert_int_equal(gpum_pool_add_oom_callback(f.pool, oom_cb, &c), 0);
  assert_int_equal(gpum_pool_add_oom_callback(f.pool, oom_cb, &c), GPUM_ENOSPC);
  fx_close(&f);
}

/* ---- Trim ---- */

static void test_pool_trim(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0, 0, NULL);
  gpum_devptr_t p[5];
  for (int i = 0; i < 5; i++)
    p[i] = must_alloc(f.pool, 12 * MiB); /* five 12 MiB segments */
  gpum_devptr_t keep = must_alloc(f.pool, 4 * KiB);
  for (int i = 0; i < 5; i++)
    assert_int_equal(gpum_pool_free(f.pool, p[i]), 0);
  assert_int_equal(stats(f.pool).reserved_bytes.current, 62 * MiB);
  uint64_t released = 0;
  assert_int_equal(gpum_pool_trim(f.pool, 40 * MiB, &released), 0);
  assert_int_equal(released, 24 * MiB); /* two segments: 62 -> 38 */
  gpum_pool_stats_t st = stats(f.pool);
  assert_int_equal(st.reserved_bytes.current, 38 * MiB);
  assert_int_equal(st.num_source_frees, 2);
  assert_int_equal(f.tl->used, 38 * MiB);
  assert_int_equal(gpum_pool_trim(f.pool, 0, &released), 0);
  assert_int_equal(released, 36 * MiB); /* the small segment stays: it is in use */
  assert_int_equal(stats(f.pool).reserved_bytes.current, 2 * MiB);
  assert_int_equal(gpum_pool_trim(f.pool, 0, NULL), 0);
  assert_int_equal(gpum_pool_free(f.pool, keep), 0);
  assert_int_equal(gpum_pool_trim(f.pool, 0, &released), 0);
  assert_int_equal(released, 2 * MiB);
  st = stats(f.pool);
  assert_int_equal(st.reserved_bytes.current, 0);
  assert_int_equal(st.reserved_bytes.peak, 62 * MiB);
  assert_int_equal(st.segment.current, 0);
  gpum_pool_reset_peaks(f.pool);
  assert_int_equal(stats(f.pool).reserved_bytes.peak, 0);
  fx_close(&f);
}

/* ---- Strategies ---- */

static void test_pool_greedy(void **state) {
  (void)state;
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.strategy = GPUM_POOL_GREEDY;
  fx_t f;
  fx_open(&f, 0, 0, &o);
  gpum_devptr_t a = must_alloc(f.pool, 5 * MiB);
  assert_int_equal(stats(f.pool).reserved_bytes.current, 64 * MiB);
  gpum_devptr_t b[12];
  for (int i = 0; i < 12; i++)
    b[i] = must_alloc(f.pool, 5 * MiB); /* 13 x 5 MiB: a second, doubled segment */
  assert_int_equal(stats(f.pool).reserved_bytes.current, 64 * MiB + 128 * MiB);
  assert_int_equal(stats(f.pool).segment.current, 2);
  for (int i = 0; i < 12; i++)
    assert_int_equal(gpum_pool_free(f.pool, b[i]), 0);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  assert_int_equal(stats(f.pool).reserved_bytes.current, 192 * MiB); /* nothing given back */
  uint64_t r;
  assert_int_equal(gpum_pool_trim(f.pool, 0, &r), 0);
  assert_int_equal(r, 192 * MiB);
  fx_close(&f);
}

static void test_pool_consolidated(void **state) {
  (void)state;
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.strategy = GPUM_POOL_CONSOLIDATED;
  fx_t f;
  fx_open(&f, 0, 0, &o);
  gpum_devptr_t p[4];
  for (int i = 0; i < 4; i++)
    p[i] = must_alloc(f.pool, 12 * MiB);
  for (int i = 0; i < 4; i++)
    assert_int_equal(gpum_pool_free(f.pool, p[i]), 0);
  /* Empty segments go back at once, one spare kept. */
  gpum_pool_stats_t st = stats(f.pool);
  assert_int_equal(st.segment.current, 1);
  assert_int_equal(st.reserved_bytes.current, 12 * MiB);
  assert_int_equal(st.num_source_frees, 3);
  /* The lowest address among equal candidates. */
  gpum_devptr_t s[8];
  for (int i = 0; i < 8; i++)
    s[i] = must_alloc(f.pool, 4 * KiB);
  for (int i = 1; i < 8; i += 2)
    assert_int_equal(gpum_pool_free(f.pool, s[i]), 0);
  assert_int_equal(must_alloc(f.pool, 4 * KiB), s[1]);
  fx_close(&f);
}

static void test_pool_fragmentation_aware(void **state) {
  (void)state;
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.strategy = GPUM_POOL_FRAGMENTATION_AWARE;
  o.limit_bytes = 200 * MiB;
  fx_t f;
  fx_open(&f, 0, 0, &o); /* no virtual memory: plain segments */
  /* max_split_size defaults to 64 MiB: a cached 100 MiB block does not serve 30 MiB. */
  gpum_devptr_t a = must_alloc(f.pool, 100 * MiB);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  gpum_devptr_t b = must_alloc(f.pool, 30 * MiB);
  assert_true(b != a);
  assert_int_equal(stats(f.pool).reserved_bytes.current, 130 * MiB);
  /* ...but serves 90 MiB (within 20 MiB), unsplit. */
  gpum_devptr_t c = must_alloc(f.pool, 90 * MiB);
  assert_int_equal(c, a);
  assert_int_equal(stats(f.pool).allocated_bytes.current, 130 * MiB);
  assert_int_equal(gpum_pool_free(f.pool, c), 0);
  /* GC: growing past 0.8 x 200 MiB frees the old cached segment first. */
  gpum_devptr_t d = must_alloc(f.pool, 40 * MiB);
  gpum_pool_stats_t st = stats(f.pool);
  assert_int_equal(st.num_gc_frees, 1);
  assert_int_equal(st.reserved_bytes.current, 70 * MiB);
  assert_int_equal(gpum_pool_free(f.pool, b), 0);
  assert_int_equal(gpum_pool_free(f.pool, d), 0);
  fx_close(&f);
}

/* Defect: FRAGMENTATION_AWARE without a limit cached up to its GC threshold, 0.8 of the
 * device (64 GiB on 80 GiB), whatever it used. Now a pool without a limit caches at most 1/8 of
 * the device: requests that never reuse each other's cached blocks (max_split_size) leave the
 * cache there, not at 64 GiB. */
static void test_pool_cache_bound_default(void **state) {
  (void)state;
  unsetenv("GPUM_MEM_LIMIT");
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.strategy = GPUM_POOL_FRAGMENTATION_AWARE;
  fx_t f;
  fx_open(&f, TL_MEMINFO, 80 * GiB, &o); /* a device that says it has 80 GiB */
  uint64_t bound = 10 * GiB, most = 0;
  gpum_devptr_t prev = 0;
  for (uint64_t size = 100 * MiB; size <= 1500 * MiB; size += 25 * MiB) {
    gpum_devptr_t p = must_alloc(f.pool, size);
    if (prev)
      assert_int_equal(gpum_pool_free(f.pool, prev), 0);
    prev = p;
    gpum_pool_stats_t st = stats(f.pool);
    uint64_t cached = st.reserved_bytes.current - st.allocated_bytes.current;
    most = cached > most ? cached : most;
    assert_true(cached <= bound);
  }
  gpum_pool_stats_t st = stats(f.pool);
  assert_true(st.num_gc_frees > 0); /* the bound was reached and empty segments went back */
  assert_true(most > bound - 1500 * MiB);
  assert_int_equal(gpum_pool_free(f.pool, prev), 0);
  assert_true(stats(f.pool).reserved_bytes.current <= bound);
  fx_close(&f);
}

/* The reservation (GPUM_MEM_LIMIT, set by gpum run) is the default limit, and under a limit the
 * pool caches up to it; an explicit limit, or no_reservation_limit, wins; an explicit cache
 * bound applies under a limit too. */
static void test_pool_reservation_limit(void **state) {
  (void)state;
  fx_t f;
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  setenv("GPUM_MEM_LIMIT", "209715200", 1); /* 200 MiB */
  fx_open(&f, 0, 0, &o);
  assert_int_equal(stats(f.pool).limit, 200 * MiB);
  gpum_devptr_t a = must_alloc(f.pool, 150 * MiB);
  gpum_devptr_t x = 0;
  assert_int_equal(gpum_pool_alloc(f.pool, 60 * MiB, 0, &x), GPUM_EDEVOOM);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  assert_int_equal(stats(f.pool).reserved_bytes.current, 150 * MiB); /* cached: within it */
  fx_close(&f);

  o.limit_bytes = 300 * MiB;
  fx_open(&f, 0, 0, &o);
  assert_int_equal(stats(f.pool).limit, 300 * MiB);
  fx_close(&f);
  o.limit_bytes = 0;
  o.no_reservation_limit = true;
  fx_open(&f, 0, 0, &o);
  assert_int_equal(stats(f.pool).limit, 0);
  fx_close(&f);
  setenv("GPUM_MEM_LIMIT", "lots", 1); /* not a number: no limit */
  o.no_reservation_limit = false;
  fx_open(&f, 0, 0, &o);
  assert_int_equal(stats(f.pool).limit, 0);
  fx_close(&f);
  unsetenv("GPUM_MEM_LIMIT");

  o.limit_bytes = 200 * MiB;
  o.cache_limit_bytes = 30 * MiB;
  fx_open(&f, 0, 0, &o);
  gpum_devptr_t p[5];
  for (int i = 0; i < 5; i++)
    p[i] = must_alloc(f.pool, 15 * MiB); /* own 20 MiB segments */
  for (int i = 0; i < 5; i++)
    assert_int_equal(gpum_pool_free(f.pool, p[i]), 0);
  assert_true(stats(f.pool).reserved_bytes.current <= 30 * MiB);
  fx_close(&f);
  o.cache_limit_bytes = 0;
  o.limit_bytes = 0;
  o.no_reservation_limit = true;
  o.cache_limit_fraction = 0.5; /* a fraction of nothing: no limit, no device size */
  gpum_pool_t *none = NULL;
  fx_t h;
  h.tl = tl_open(0, 0, &h.src);
  assert_int_equal(gpum_pool_create(h.src, &o, &none), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "cache_limit_fraction needs a limit"));
  tl_close(h.tl, h.src);
  o.cache_limit_fraction = 1.5;
  gpum_pool_t *bad = NULL;
  fx_t g;
  g.tl = tl_open(0, 0, &g.src);
  assert_int_equal(gpum_pool_create(g.src, &o, &bad), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "cache_limit_fraction"));
  tl_close(g.tl, g.src);
}

/* CONSOLIDATED keeps one empty segment per kind as a spare; the cache bound applies to the
 * spare too: a freed segment of its own for a 12 GiB tensor is more than 1/8 of an 80 GiB
 * device, and goes back (it stayed cached before), while a small spare stays. */
static void test_pool_cache_bound_consolidated(void **state) {
  (void)state;
  unsetenv("GPUM_MEM_LIMIT");
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.strategy = GPUM_POOL_CONSOLIDATED;
  fx_t f;
  fx_open(&f, TL_MEMINFO, 80 * GiB, &o);
  gpum_devptr_t big = must_alloc(f.pool, 12 * GiB);
  assert_int_equal(gpum_pool_free(f.pool, big), 0);
  gpum_pool_stats_t st = stats(f.pool);
  assert_int_equal(st.reserved_bytes.current, 0);
  assert_int_equal(st.num_gc_frees, 1);
  assert_int_equal(f.tl->used, 0);
  gpum_devptr_t small = must_alloc(f.pool, 100 * MiB);
  assert_int_equal(gpum_pool_free(f.pool, small), 0);
  assert_int_equal(stats(f.pool).reserved_bytes.current, 100 * MiB); /* the spare */
  fx_close(&f);
}

/* The reservation in GPUM_MEM_LIMIT is GPU memory: pools of host memory (host, pinned) and of
 * no memory (simulated: a replay must not depend on the environment it runs in) do not take
 * it as their limit; pools of other sources do. */
static void test_pool_reservation_not_host(void **state) {
  (void)state;
  setenv("GPUM_MEM_LIMIT", "209715200", 1); /* 200 MiB */
  gpum_pool_source_t *srcs[2] = {NULL, NULL};
  assert_int_equal(gpum_pool_source_host(&srcs[0]), 0);
  assert_int_equal(gpum_pool_source_simulated(0, &srcs[1]), 0);
  for (int i = 0; i < 2; i++) {
    gpum_pool_t *p = NULL;
    assert_int_equal(gpum_pool_create(srcs[i], NULL, &p), 0);
    assert_int_equal(stats(p).limit, 0);
    gpum_devptr_t a = must_alloc(p, 300 * MiB); /* more than the reservation */
    assert_int_equal(gpum_pool_free(p, a), 0);
    gpum_pool_destroy(p);
    gpum_pool_source_destroy(srcs[i]);
  }
  fx_t f;
  fx_open(&f, 0, 0, NULL); /* a custom source: device memory as far as the pool knows */
  assert_int_equal(stats(f.pool).limit, 200 * MiB);
  fx_close(&f);
  unsetenv("GPUM_MEM_LIMIT");
}

/* The effective cache bound is reported in the stats and the snapshot (the options as given
 * too): 1/8 of the device by default, none under a limit or with UINT64_MAX, as asked
 * otherwise. */
static void test_pool_cache_bound_reported(void **state) {
  (void)state;
  unsetenv("GPUM_MEM_LIMIT");
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  fx_t f;
  fx_open(&f, TL_MEMINFO, 80 * GiB, &o);
  assert_int_equal(stats(f.pool).cache_limit, 10 * GiB);
  char *js = NULL;
  assert_int_equal(gpum_pool_snapshot_json(f.pool, &js), 0);
  json_t *root = json_loads(js, 0, NULL);
  assert_non_null(root);
  assert_int_equal(
      json_integer_value(json_object_get(json_object_get(root, "stats"), "cache_limit")), 10 * GiB);
  json_t *jo = json_object_get(root, "options");
  assert_int_equal(json_integer_value(json_object_get(jo, "cache_limit_bytes")), 0);
  assert_true(json_is_false(json_object_get(jo, "no_reservation_limit")));
  json_decref(root);
  free(js);
  fx_close(&f);

  o.limit_bytes = 40 * GiB;
  fx_open(&f, TL_MEMINFO, 80 * GiB, &o);
  assert_int_equal(stats(f.pool).cache_limit, 0); /* caches up to the limit */
  fx_close(&f);
  o.cache_limit_fraction = 0.25; /* of the limit */
  fx_open(&f, TL_MEMINFO, 80 * GiB, &o);
  assert_int_equal(stats(f.pool).cache_limit, 10 * GiB);
  fx_close(&f);
  o.limit_bytes = 0;
  o.cache_limit_fraction = 0;
  o.cache_limit_bytes = UINT64_MAX;
  fx_open(&f, TL_MEMINFO, 80 * GiB, &o);
  assert_int_equal(stats(f.pool).cache_limit, 0);
  fx_close(&f);
}

static void test_pool_expandable(void **state) {
  (void)state;
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.expandable_segments = true;
  fx_t f;
  fx_open(&f, TL_VMM, 0, &o);
  gpum_devptr_t p[6];
  for (int i = 0; i < 6; i++)
    p[i] = must_alloc(f.pool, 3 * MiB);
  gpum_pool_stats_t st = stats(f.pool);
  assert_int_equal(st.segment.current, 1);
  assert_int_equal(st.reserved_bytes.current, 18 * MiB); /* mapped as needed, 2 MiB granules */
  assert_int_equal(st.num_source_allocs, 0);
  for (int i = 1; i < 6; i++)
    assert_int_equal(p[i], p[i - 1] + 3 * MiB);
  /* A 30 MiB request after freeing everything but the first: the free tail is extended. */
  for (int i = 1; i < 6; i++)
    assert_int_equal(gpum_pool_free(f.pool, p[i]), 0);
  gpum_devptr_t big = must_alloc(f.pool, 30 * MiB);
  assert_int_equal(big, p[1]);
  assert_int_equal(stats(f.pool).reserved_bytes.current, 34 * MiB);
  assert_int_equal(gpum_pool_free(f.pool, big), 0);
  /* Trim unmaps the free tail, keeping the granule the live block touches. */
  uint64_t r;
  assert_int_equal(gpum_pool_trim(f.pool, 0, &r), 0);
  assert_int_equal(r, 30 * MiB);
  st = stats(f.pool);
  assert_int_equal(st.reserved_bytes.current, 4 * MiB);
  assert_true(st.num_unmaps >= 1);
  assert_int_equal(f.tl->used, 4 * MiB);
  assert_int_equal(gpum_pool_free(f.pool, p[0]), 0);
  assert_int_equal(gpum_pool_trim(f.pool, 0, &r), 0);
  assert_int_equal(stats(f.pool).segment.current, 0);
  assert_int_equal(f.tl->used, 0);
  /* Small requests still use plain segments. */
  gpum_devptr_t s = must_alloc(f.pool, 100);
  assert_int_equal(stats(f.pool).num_source_allocs, 1);
  assert_int_equal(gpum_pool_free(f.pool, s), 0);
  fx_close(&f);
}

/* ---- Snapshot and event log ---- */

static void test_pool_snapshot(void **state) {
  (void)state;
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.name = "snap \"q\"\n";
  fx_t f;
  fx_open(&f, TL_EVENTS, 0, &o);
  gpum_devptr_t a = must_alloc(f.pool, 1000);
  gpum_devptr_t b = must_alloc(f.pool, 3 * MiB);
  gpum_devptr_t c = must_alloc(f.pool, 2000);
  assert_int_equal(gpum_pool_record_stream(f.pool, c, 9), 0);
  assert_int_equal(gpum_pool_free(f.pool, c), 0); /* awaiting stream 9 */
  assert_int_equal(gpum_pool_free(f.pool, b), 0);
  char *js = NULL;
  assert_int_equal(gpum_pool_snapshot_json(f.pool, &js), 0);
  json_error_t err;
  json_t *root = json_loads(js, 0, &err);
  if (root == NULL)
    fail_msg("snapshot does not parse: %s: %s", err.text, js);
  assert_string_equal(json_string_value(json_object_get(root, "name")), "snap \"q\"\n");
  assert_string_equal(json_string_value(json_object_get(root, "strategy")), "BALANCED");
  assert_string_equal(json_string_value(json_object_get(root, "source")), "test");
  gpum_pool_stats_t st = stats(f.pool);
  json_t *jst = json_object_get(root, "stats");
  assert_int_equal(
      json_integer_value(json_object_get(json_object_get(jst, "allocated_bytes"), "current")),
      st.allocated_bytes.current);
  assert_int_equal(
      json_integer_value(json_object_get(json_object_get(jst, "reserved_bytes"), "peak")),
      st.reserved_bytes.peak);
  assert_int_equal(json_integer_value(json_object_get(jst, "num_splits")), st.num_splits);
  json_t *segs = json_object_get(root, "segments");
  assert_int_equal(json_array_size(segs), st.segment.current);
  uint64_t total = 0, alloc = 0;
  int awaiting = 0, found_a = 0;
  size_t i, j;
  json_t *s, *blk;
  json_array_foreach(segs, i, s) {
    uint64_t seg_size = json_integer_value(json_object_get(s, "size")), sum = 0;
    total += seg_size;
    json_array_foreach(json_object_get(s, "blocks"), j, blk) {
      const char *state_s = json_string_value(json_object_get(blk, "state"));
      uint64_t size = json_integer_value(json_object_get(blk, "size"));
      sum += size;
      if (strcmp(state_s, "allocated") == 0)
        alloc += size;
      awaiting += strcmp(state_s, "awaiting_free") == 0;
      char hex[32];
      snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)a);
      if (strcmp(json_string_value(json_object_get(blk, "address")), hex) == 0) {
        found_a = 1;
        assert_int_equal(json_integer_value(json_object_get(blk, "requested_size")), 1000);
        assert_int_equal(json_integer_value(json_object_get(blk, "stream")), 0);
      }
    }
    assert_int_equal(sum, seg_size);
  }
  assert_int_equal(total, st.reserved_bytes.current);
  assert_int_equal(alloc, st.allocated_bytes.current);
  assert_int_equal(awaiting, 1);
  assert_true(found_a);
  json_decref(root);
  free(js);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  fx_close(&f);
}

static void test_pool_event_log(void **state) {
  (void)state;
  char *buf = NULL;
  size_t len = 0;
  FILE *log = open_memstream(&buf, &len);
  assert_non_null(log);
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.event_log = log;
  o.limit_bytes = 4 * MiB;
  fx_t f;
  fx_open(&f, 0, 0, &o);
  gpum_devptr_t a = 0;
  assert_int_equal(gpum_pool_alloc(f.pool, 1000, 7, &a), 0);
  gpum_devptr_t x;
  assert_int_equal(gpum_pool_alloc(f.pool, 5 * MiB, 7, &x), GPUM_EDEVOOM);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  assert_int_equal(gpum_pool_free(f.pool, a), GPUM_EINVAL); /* not logged */
  fx_close(&f);
  fclose(log);
  char *save = NULL, *line = strtok_r(buf, "\n", &save);
  assert_string_equal(line, "Thread,Time,Action,Pointer,Size,Stream");
  const char *actions[] = {"allocate", "allocate failure", "free"};
  const char *sizes[] = {"1000", "5242880", "1000"};
  unsigned thread0 = 0;
  for (int i = 0; i < 3; i++) {
    line = strtok_r(NULL, "\n", &save);
    assert_non_null(line);
    unsigned thread = 0, hh, mm, ss, us;
    char action[32], ptr[32], size[32], stream[32];
    int n = sscanf(line, "%u,%u:%u:%u.%u,%31[^,],%31[^,],%31[^,],%31s", &thread, &hh, &mm, &ss, &us,
                   action, ptr, size, stream);
    assert_int_equal(n, 9);
    assert_true(hh < 24 && mm < 60 && ss < 61 && us < 1000000);
    assert_non_null(strstr(line, ".")); /* HH:MM:SS.ffffff */
    assert_int_equal(strlen(strchr(line, '.') + 1) - strlen(strchr(strchr(line, '.'), ',')), 6);
    if (i == 0)
      thread0 = thread;
    assert_int_equal(thread, thread0);
    assert_true(thread >= 1);
    assert_string_equal(action, actions[i]);
    assert_string_equal(size, sizes[i]);
    assert_string_equal(stream, "7");
    char want[32];
    snprintf(want, sizeof(want), "0x%llx", (unsigned long long)(i == 1 ? 0 : a));
    assert_string_equal(ptr, want);
  }
  assert_null(strtok_r(NULL, "\n", &save));
  free(buf);
}

/* ---- Sources ---- */

static void test_pool_source_custom_checks(void **state) {
  (void)state;
  gpum_pool_source_t *src = (gpum_pool_source_t *)&src;
  gpum_pool_source_ops_t ops = {.name = "x", .alloc = tl_alloc};
  assert_int_equal(gpum_pool_source_custom(&ops, NULL, &src), GPUM_EINVAL);
  assert_null(src);
  assert_non_null(strstr(gpum_last_error(), "alloc and free are required"));
  ops.free = tl_free;
  ops.map = tl_map;
  assert_int_equal(gpum_pool_source_custom(&ops, NULL, &src), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "reserve, map"));
  ops.map = NULL;
  ops.event_query = tl_query;
  assert_int_equal(gpum_pool_source_custom(&ops, NULL, &src), GPUM_EINVAL);
  ops.event_query = NULL;
  assert_int_equal(gpum_pool_source_custom(NULL, NULL, &src), GPUM_EINVAL);
  assert_int_equal(gpum_pool_source_custom(&ops, NULL, NULL), GPUM_EINVAL);
  char name[] = "mine";
  ops.name = name;
  assert_int_equal(gpum_pool_source_custom(&ops, NULL, &src), 0);
  name[0] = 'X'; /* copied */
  assert_string_equal(gpum_pool_source_name(src), "mine");
  gpum_pool_source_destroy(src);
  gpum_pool_source_destroy(NULL);
  assert_int_equal(gpum_pool_source_open("nope", 0, 0, &src), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "'nope'"));
  assert_int_equal(gpum_pool_source_open(NULL, 0, 0, &src), GPUM_EINVAL);
}

static void test_pool_source_simulated(void **state) {
  (void)state;
  gpum_pool_source_t *src = NULL;
  assert_int_equal(gpum_pool_source_open("simulated", 0, 64 * MiB, &src), 0);
  assert_string_equal(gpum_pool_source_name(src), "simulated");
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.limit_fraction = 0.5;
  gpum_pool_t *p = NULL;
  assert_int_equal(gpum_pool_create(src, &o, &p), 0);
  assert_int_equal(stats(p).limit, 32 * MiB);
  gpum_devptr_t a = must_alloc(p, 30 * MiB);
  assert_true(a >= UINT64_C(0x7f0000000000));
  gpum_devptr_t x;
  assert_int_equal(gpum_pool_alloc(p, 30 * MiB, 0, &x), GPUM_EDEVOOM);
  assert_int_equal(gpum_pool_free(p, a), 0);
  assert_int_equal(gpum__pool_check(p), 0);
  gpum_pool_destroy(p);
  /* Capacity without a limit: the source says no. */
  gpum_pool_opts_init(&o);
  assert_int_equal(gpum_pool_create(src, &o, &p), 0);
  a = must_alloc(p, 60 * MiB);
  assert_int_equal(gpum_pool_alloc(p, 10 * MiB, 0, &x), GPUM_EDEVOOM);
  assert_non_null(strstr(gpum_last_error(), "device total 64.00 MiB, free 4.00 MiB"));
  assert_int_equal(gpum_pool_free(p, a), 0);
  gpum_pool_destroy(p);
  gpum_pool_source_destroy(src);
}

static void test_pool_source_host(void **state) {
  (void)state;
  gpum_pool_source_t *src = NULL;
  assert_int_equal(gpum_pool_source_host(&src), 0);
  assert_string_equal(gpum_pool_source_name(src), "host");
  for (int expandable = 0; expandable < 2; expandable++) {
    gpum_pool_opts_t o;
    gpum_pool_opts_init(&o);
    o.expandable_segments = expandable;
    gpum_pool_t *p = NULL;
    assert_int_equal(gpum_pool_create(src, &o, &p), 0);
    gpum_devptr_t a = must_alloc(p, 100), b = must_alloc(p, 5 * MiB);
    memset((void *)(uintptr_t)a, 0xab, 100); /* real memory */
    memset((void *)(uintptr_t)b, 0xcd, 5 * MiB);
    assert_int_equal(((unsigned char *)(uintptr_t)b)[5 * MiB - 1], 0xcd);
    assert_int_equal(gpum_pool_free(p, a), 0);
    assert_int_equal(gpum_pool_free(p, b), 0);
    uint64_t r = 0;
    assert_int_equal(gpum_pool_trim(p, 0, &r), 0);
    assert_int_equal(r, 2 * MiB + (expandable ? 6 * MiB : 20 * MiB));
    assert_int_equal(gpum__pool_check(p), 0);
    gpum_pool_destroy(p);
  }
  gpum_pool_source_destroy(src);
}

/* The pool's own memory: small requests cache-line aligned, from 2 MiB up huge-page aligned;
 * both zeroed. */
static void test_pool_hostmem(void **state) {
  (void)state;
  assert_null(gpum__pool_hostmem_alloc(0));
  size_t sizes[] = {1, 100, 4096, 2 * MiB - 1, 2 * MiB, 3 * MiB + 5};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    unsigned char *m = gpum__pool_hostmem_alloc(sizes[i]);
    assert_non_null(m);
    assert_int_equal((uintptr_t)m % (sizes[i] >= 2 * MiB ? 2 * MiB : 64), 0);
    for (size_t j = 0; j < sizes[i]; j += 4093)
      assert_int_equal(m[j], 0);
    assert_int_equal(m[sizes[i] - 1], 0);
    memset(m, 0xa5, sizes[i]);
    gpum__pool_hostmem_free(m, sizes[i]);
  }
  gpum__pool_hostmem_free(NULL, 0);
}

/* Enough blocks that nodes come in 2 MiB chunks and the pointer map outgrows 2 MiB (both on
 * huge pages), with growth of the map in steps along the way. */
static void test_pool_many_blocks(void **state) {
  (void)state;
  enum { N = 70000 };
  fx_t f;
  fx_open(&f, 0, 0, NULL);
  gpum_devptr_t *v = calloc(N, sizeof(*v));
  assert_non_null(v);
  for (size_t i = 0; i < N; i++)
    v[i] = must_alloc(f.pool, 512);
  gpum_pool_stats_t st = stats(f.pool);
  assert_int_equal(st.allocation.current, N);
  assert_int_equal(st.segment.current, (N + 4095) / 4096); /* 4096 blocks per 2 MiB */
  assert_true(f.pool->nchunks > 8);                        /* past the 2 MiB chunk size */
  assert_true(f.pool->map.cur_cap * sizeof(gpum__map_slot_t) > 2 * MiB);
  assert_int_equal(gpum__pool_check(f.pool), 0);
  for (size_t i = 0; i < N; i += 2) /* every other one: no merges */
    assert_int_equal(gpum_pool_free(f.pool, v[i]), 0);
  assert_int_equal(gpum__pool_check(f.pool), 0);
  for (size_t i = 1; i < N; i += 2)
    assert_int_equal(gpum_pool_free(f.pool, v[i]), 0);
  st = stats(f.pool);
  assert_int_equal(st.allocation.current, 0);
  assert_int_equal(st.inactive_split.current, 0); /* everything merged back */
  free(v);
  fx_close(&f);
}

static void test_pool_destroy_with_live_blocks(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, TL_EVENTS | TL_SYNC, 0, NULL);
  gpum_devptr_t a = must_alloc(f.pool, 100);
  must_alloc(f.pool, 30 * MiB);
  assert_int_equal(gpum_pool_record_stream(f.pool, a, 3), 0);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  fx_close(&f); /* everything goes back to the source; events destroyed */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pool_rounding_and_segments),
      cmocka_unit_test(test_pool_split_rules),
      cmocka_unit_test(test_pool_oversize_rule),
      cmocka_unit_test(test_pool_fragmentation_stat),
      cmocka_unit_test(test_pool_bad_input),
      cmocka_unit_test(test_pool_bad_options),
      cmocka_unit_test(test_pool_strategy_names),
      cmocka_unit_test(test_pool_limit_bytes),
      cmocka_unit_test(test_pool_limit_fraction),
      cmocka_unit_test(test_pool_small_limit_packs),
      cmocka_unit_test(test_pool_oom_ladder_order),
      cmocka_unit_test(test_pool_oom_message),
      cmocka_unit_test(test_pool_callbacks_full),
      cmocka_unit_test(test_pool_trim),
      cmocka_unit_test(test_pool_greedy),
      cmocka_unit_test(test_pool_consolidated),
      cmocka_unit_test(test_pool_fragmentation_aware),
      cmocka_unit_test(test_pool_cache_bound_default),
      cmocka_unit_test(test_pool_reservation_limit),
      cmocka_unit_test(test_pool_cache_bound_consolidated),
      cmocka_unit_test(test_pool_reservation_not_host),
      cmocka_unit_test(test_pool_cache_bound_reported),
      cmocka_unit_test(test_pool_expandable),
      cmocka_unit_test(test_pool_snapshot),
      cmocka_unit_test(test_pool_event_log),
      cmocka_unit_test(test_pool_source_custom_checks),
      cmocka_unit_test(test_pool_source_simulated),
      cmocka_unit_test(test_pool_source_host),
      cmocka_unit_test(test_pool_hostmem),
      cmocka_unit_test(test_pool_many_blocks),
      cmocka_unit_test(test_pool_destroy_with_live_blocks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
