/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Randomised test of the pool against a shadow model: 10^6 operations in all (scaled by
 * GPUM_TEST_SCALE; a tenth under sanitizers) over four configurations (each strategy; with and
 * without stream events, expandable segments and a limit), mixing small, large and huge sizes,
 * frees in random order, record_stream, event completions and trims. After every operation the
 * pool's counters must equal the shadow's (live count and requested bytes, OOMs) and a new
 * block must be 512-aligned and not already live; every thousand operations the full
 * consistency checker runs (segments covered by blocks, no overlap, merging complete, free
 * lists and bitmaps, stats equal to the blocks), and the shadow's live blocks are checked
 * against the pool's pointer map and for overlap among themselves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/pool.h>

#include "pool/pool_internal.h"
#include "pool_testlib.h"

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define MAX_LIVE 2000
#define CHECK_EVERY 1000

typedef struct {
  gpum_devptr_t ptr;
  uint64_t size;
  gpum_stream_t stream;
} live_t;

typedef struct {
  uint64_t s;
} rng_t;

static uint64_t rnd(rng_t *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * UINT64_C(2685821657736338717);
}

static uint64_t rnd_between(rng_t *r, uint64_t lo, uint64_t hi) { /* log-uniform in [lo, hi] */
  double a = log2((double)lo), b = log2((double)hi);
  double x = a + (b - a) * ((double)(rnd(r) >> 11) / (double)(UINT64_C(1) << 53));
  uint64_t v = (uint64_t)exp2(x);
  return v < lo ? lo : v > hi ? hi : v;
}

static uint64_t random_size(rng_t *r) {
  unsigned k = (unsigned)(rnd(r) % 100);
  if (k < 60)
    return rnd_between(r, 1, MiB);
  if (k < 90)
    return rnd_between(r, MiB + 1, 10 * MiB);
  if (k < 99)
    return rnd_between(r, 10 * MiB + 1, 100 * MiB);
  return rnd_between(r, 100 * MiB, GiB);
}

static int cmp_live(const void *a, const void *b) {
  const live_t *x = a, *y = b;
  return x->ptr < y->ptr ? -1 : x->ptr > y->ptr;
}

static void full_check(gpum_pool_t *pool, const live_t *live, size_t n) {
  int rc = gpum__pool_check(pool);
  if (rc != 0)
    fail_msg("consistency check: %s", gpum_last_error());
  live_t *v = malloc((n ? n : 1) * sizeof(*v));
  assert_non_null(v);
  memcpy(v, live, n * sizeof(*v));
  qsort(v, n, sizeof(*v), cmp_live);
  for (size_t i = 0; i < n; i++) {
    const gpum__block_t *b = gpum__blockmap_get(&pool->map, v[i].ptr);
    if (b == NULL || b->state != GPUM__B_ALLOC || b->requested != v[i].size ||
        b->stream != v[i].stream || b->size < v[i].size)
      fail_msg("live block 0x%llx does not match the pool", (unsigned long long)v[i].ptr);
    if (i + 1 < n && v[i].ptr + b->size > v[i + 1].ptr)
      fail_msg("live blocks 0x%llx and 0x%llx overlap", (unsigned long long)v[i].ptr,
               (unsigned long long)v[i + 1].ptr);
  }
  free(v);
}

typedef struct {
  const char *what;
  gpum_pool_strategy_t strategy;
  unsigned features;
  uint64_t limit;
  bool expandable;
  uint64_t seed;
} config_t;

static void run(const config_t *c, long ops) {
  gpum_pool_source_t *src = NULL;
  tl_src_t *tl = tl_open(c->features, 0, &src);
  assert_non_null(tl);
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.strategy = c->strategy;
  o.limit_bytes = c->limit;
  o.expandable_segments = c->expandable;
  gpum_pool_t *pool = NULL;
  assert_int_equal(gpum_pool_create(src, &o, &pool), 0);
  live_t *live = calloc(MAX_LIVE, sizeof(*live));
  assert_non_null(live);
  size_t n = 0;
  uint64_t requested = 0, ooms = 0;
  rng_t r = {c->seed * UINT64_C(0x9E3779B97F4A7C15) + 1};
  for (long i = 0; i < ops; i++) {
    unsigned k = (unsigned)(rnd(&r) % 1000);
    if (k < 500 && n < MAX_LIVE) {
      uint64_t size = random_size(&r);
      gpum_stream_t stream = rnd(&r) % 4;
      gpum_devptr_t ptr = 0;
      int rc = gpum_pool_alloc(pool, size, stream, &ptr);
      if (rc == GPUM_EDEVOOM && c->limit) {
        ooms++;
      } else {
        if (rc != 0)
          fail_msg("%s: op %ld: alloc %llu: %s", c->what, i, (unsigned long long)size,
                   gpum_last_error());
        if (ptr % 512 != 0 || gpum__blockmap_get(&pool->map, ptr) == NULL)
          fail_msg("%s: op %ld: bad pointer 0x%llx", c->what, i, (unsigned long long)ptr);
        live[n++] = (live_t){ptr, size, stream};
        requested += size;
      }
    } else if (k < 960 && n > 0) {
      size_t j = rnd(&r) % n;
      assert_int_equal(gpum_pool_free(pool, live[j].ptr), 0);
      requested -= live[j].size;
      live[j] = live[--n];
    } else if (k < 980 && n > 0) {
      size_t j = rnd(&r) % n;
      assert_int_equal(gpum_pool_record_stream(pool, live[j].ptr, rnd(&r) % 6), 0);
    } else if (k < 995) {
      tl_complete(tl, rnd(&r) % 2 == 0, rnd(&r) % 6);
    } else {
      uint64_t target = rnd(&r) % 2 ? 0 : pool->st.reserved_bytes.current / 2;
      assert_int_equal(gpum_pool_trim(pool, target, NULL), 0);
    }
    /* Cheap checks after every operation. */
    if (pool->st.allocation.current != n || pool->st.requested_bytes.current != requested ||
        pool->st.num_ooms != ooms || (c->limit && pool->st.reserved_bytes.current > c->limit))
      fail_msg("%s: op %ld: counters differ from the shadow (live %llu/%zu, requested %llu/%llu)",
               c->what, i, (unsigned long long)pool->st.allocation.current, n,
               (unsigned long long)pool->st.requested_bytes.current, (unsigned long long)requested);
    if (i % CHECK_EVERY == 0)
      full_check(pool, live, n);
  }
  full_check(pool, live, n);
  for (size_t j = 0; j < n; j++)
    assert_int_equal(gpum_pool_free(pool, live[j].ptr), 0);
  tl_complete(tl, true, 0); /* the configuration without synchronize needs this */
  assert_int_equal(gpum_pool_trim(pool, 0, NULL), 0);
  full_check(pool, live, 0);
  gpum_pool_stats_t st;
  assert_int_equal(gpum_pool_stats(pool, &st), 0);
  assert_int_equal(st.allocated_bytes.current, 0);
  assert_int_equal(st.active.current, 0); /* trim synchronized: nothing awaits */
  assert_int_equal(st.reserved_bytes.current, 0);
  assert_int_equal(st.allocation.allocated - st.allocation.freed, 0);
  print_message("%s: %ld ops, peak reserved %.1f MiB, peak allocated %.1f MiB, %llu OOMs, "
                "%llu stream merges\n",
                c->what, ops, (double)st.reserved_bytes.peak / MiB,
                (double)st.allocated_bytes.peak / MiB, (unsigned long long)ooms,
                (unsigned long long)st.num_stream_merges);
  gpum_pool_destroy(pool);
  assert_int_equal(tl->used, 0);
  assert_int_equal(tl->events_live, 0);
  tl_close(tl, src);
  free(live);
}

static const config_t configs[] = {
    {"balanced", GPUM_POOL_BALANCED, 0, 0, false, 1},
    {"consolidated+events", GPUM_POOL_CONSOLIDATED, TL_EVENTS | TL_SYNC, 0, false, 2},
    {"fragmentation-aware+vmm+events+limit", GPUM_POOL_FRAGMENTATION_AWARE,
     TL_EVENTS | TL_SYNC | TL_VMM, 24 * GiB, true, 3},
    {"greedy+events-without-sync+limit", GPUM_POOL_GREEDY, TL_EVENTS, 24 * GiB, false, 4},
};

static void test_pool_random(void **state) {
  const config_t *c = *state;
  run(c, tl_scale(250000));
}

int main(void) {
  struct CMUnitTest tests[4];
  for (int i = 0; i < 4; i++)
    tests[i] =
        (struct CMUnitTest){configs[i].what, test_pool_random, NULL, NULL, (void *)&configs[i]};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
