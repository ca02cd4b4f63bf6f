/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stream-ordered reuse, on a test source whose events complete only when the test says so:
 * a block freed on a stream is reused on that stream at once; another stream gets it only
 * after the event recorded at the free has completed; record_stream defers the free until the
 * events on the named streams complete; an idle stream's free blocks go back to the shared
 * lists (counted, and merged with their free neighbours), at the first miss after the stream
 * went idle even when its blocks were freed again after its last event; the OOM ladder's
 * synchronize makes every stream's blocks available; a source without events reuses across streams
 * at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/pool.h>

#include "pool/pool_internal.h"
#include "pool_testlib.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)

typedef struct {
  gpum_pool_source_t *src;
  tl_src_t *tl;
  gpum_pool_t *pool;
} fx_t;

static void fx_open(fx_t *f, unsigned features, uint64_t capacity) {
  f->tl = tl_open(features, capacity, &f->src);
  assert_non_null(f->tl);
  assert_int_equal(gpum_pool_create(f->src, NULL, &f->pool), 0);
}

static void fx_close(fx_t *f) {
  if (gpum__pool_check(f->pool) != 0)
    fail_msg("%s", gpum_last_error());
  gpum_pool_destroy(f->pool);
  assert_int_equal(f->tl->used, 0);
  assert_int_equal(f->tl->events_live, 0);
  tl_close(f->tl, f->src);
}

static gpum_devptr_t on(gpum_pool_t *p, size_t size, gpum_stream_t s) {
  gpum_devptr_t ptr = 0;
  int rc = gpum_pool_alloc(p, size, s, &ptr);
  if (rc != 0)
    fail_msg("alloc %zu on %llu: %s", size, (unsigned long long)s, gpum_last_error());
  return ptr;
}

static gpum_pool_stats_t stats(gpum_pool_t *p) {
  gpum_pool_stats_t st;
  assert_int_equal(gpum_pool_stats(p, &st), 0);
  return st;
}

static void test_streams_same_stream_at_once(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, TL_EVENTS, 0);
  gpum_devptr_t a = on(f.pool, 12 * MiB, 1);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  assert_int_equal(f.tl->records, 1);           /* recorded at free time */
  assert_int_equal(on(f.pool, 12 * MiB, 1), a); /* the event has not completed: same stream */
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  fx_close(&f);
}

static void test_streams_other_stream_after_event(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, TL_EVENTS, 0);
  gpum_devptr_t a = on(f.pool, 12 * MiB, 1);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  gpum_devptr_t b = on(f.pool, 12 * MiB, 2); /* stream 1's work may still use a */
  assert_true(b != a);
  assert_int_equal(stats(f.pool).segment.current, 2);
  assert_int_equal(gpum_pool_free(f.pool, b), 0);
  /* Stream 1's event completes: a is anyone's at the next miss. */
  tl_complete(f.tl, false, 1);
  assert_int_equal(on(f.pool, 12 * MiB, 3), a);
  gpum_pool_stats_t st = stats(f.pool);
  assert_true(st.num_stream_merges >= 1);
  assert_int_equal(st.segment.current, 2);
  /* b (stream 2, event pending) is still not for stream 3. */
  gpum_devptr_t c = on(f.pool, 12 * MiB, 3);
  assert_true(c != b);
  assert_int_equal(stats(f.pool).segment.current, 3);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  assert_int_equal(gpum_pool_free(f.pool, c), 0);
  fx_close(&f);
}

/* The cuda-source helper's case: stream 1 reuses and frees its block again while the event of
 * the first free is outstanding, so the block is stamped after that event. Once stream 1 has
 * no work left, the first allocation on stream 2 must find the block (the poll records a new
 * event and sees at once that it completed), not take a new segment. */
static void test_streams_idle_stream_reused_at_first_miss(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, TL_EVENTS, 0);
  gpum_devptr_t a = on(f.pool, 12 * MiB, 1);
  assert_int_equal(gpum_pool_free(f.pool, a), 0); /* event 1 recorded */
  assert_int_equal(on(f.pool, 12 * MiB, 1), a);   /* reused on stream 1 */
  assert_int_equal(gpum_pool_free(f.pool, a), 0); /* event 1 still outstanding: no new one */
  assert_int_equal(f.tl->records, 1);
  tl_idle(f.tl, 1);
  assert_int_equal(on(f.pool, 12 * MiB, 2), a);
  gpum_pool_stats_t st = stats(f.pool);
  assert_int_equal(st.segment.current, 1);
  assert_int_equal(st.num_source_allocs, 1);
  assert_true(st.num_stream_merges >= 1);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  fx_close(&f);
}

static void test_streams_record_stream_defers(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, TL_EVENTS, 0);
  gpum_devptr_t a = on(f.pool, 12 * MiB, 1);
  assert_int_equal(gpum_pool_record_stream(f.pool, a, 5), 0);
  assert_int_equal(gpum_pool_record_stream(f.pool, a, 5), 0); /* twice is once */
  assert_int_equal(gpum_pool_record_stream(f.pool, a, 1), 0); /* its own stream: nothing */
  long records = f.tl->records;
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  assert_int_equal(f.tl->records, records + 1); /* one event, on stream 5 */
  gpum_pool_stats_t st = stats(f.pool);
  assert_int_equal(st.allocated_bytes.current, 0);
  assert_int_equal(st.active.current, 1); /* awaiting */
  assert_int_equal(st.active_bytes.current, 12 * MiB);
  assert_int_equal(gpum_pool_free(f.pool, a), GPUM_EINVAL); /* already freed */
  /* Not even stream 1 gets it while stream 5's work is pending. */
  gpum_devptr_t b = on(f.pool, 12 * MiB, 1);
  assert_true(b != a);
  assert_int_equal(gpum_pool_free(f.pool, b), 0);
  tl_complete(f.tl, false, 5);
  /* The next allocation completes the free; stream 1 reuses a (or b: both are its own). */
  gpum_devptr_t c = on(f.pool, 12 * MiB, 1);
  assert_true(c == a || c == b);
  st = stats(f.pool);
  assert_int_equal(st.active.current, 1);
  assert_int_equal(st.active_bytes.current, 12 * MiB);
  assert_int_equal(gpum_pool_free(f.pool, c), 0);
  fx_close(&f);
}

static void test_streams_idle_stream_merge(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, TL_EVENTS, 0);
  /* Stream 1 takes a small segment in six pieces and frees them all: its free blocks are its
   * own (merged among themselves), beside the shared remainder. */
  gpum_devptr_t p[6];
  for (int i = 0; i < 6; i++)
    p[i] = on(f.pool, 256 * KiB, 1);
  for (int i = 0; i < 6; i++)
    assert_int_equal(gpum_pool_free(f.pool, p[i]), 0);
  gpum_pool_stats_t st = stats(f.pool);
  assert_int_equal(st.inactive_split.current, 2); /* stream 1's 1.5 MiB + the shared 0.5 */
  assert_int_equal(st.largest_free_block, 1536 * KiB);
  /* One event is outstanding per stream: the one recorded at the first free covers that
   * free only. When it completes, a miss records the next one, covering the rest. */
  assert_int_equal(f.tl->records, 1);
  tl_complete(f.tl, false, 1);
  gpum_devptr_t other = on(f.pool, 12 * MiB, 2); /* any miss polls and records the next event */
  assert_true(other != p[0]);
  assert_int_equal(f.tl->records, 2);
  assert_int_equal(gpum_pool_free(f.pool, other), 0);
  /* Stream 1 stays idle; its event completes; a miss on stream 3 merges its blocks back. */
  tl_complete(f.tl, false, 1);
  gpum_devptr_t big = on(f.pool, MiB, 3);
  assert_int_equal(big, p[0]);
  st = stats(f.pool);
  assert_int_equal(st.segment.current, 2); /* no new segment for stream 3 */
  assert_true(st.num_stream_merges >= 1);
  assert_int_equal(gpum_pool_free(f.pool, big), 0);
  /* Everything completes: trim finds the first segment whole and empty, and gives it back. */
  tl_complete(f.tl, true, 0);
  uint64_t released = 0;
  assert_int_equal(gpum_pool_trim(f.pool, 0, &released), 0);
  assert_int_equal(released, 14 * MiB);
  fx_close(&f);
}

static void test_streams_ladder_synchronizes(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, TL_EVENTS | TL_SYNC, 24 * MiB);
  gpum_devptr_t a = on(f.pool, 12 * MiB, 1);
  gpum_devptr_t b = on(f.pool, 12 * MiB, 1);
  assert_int_equal(gpum_pool_record_stream(f.pool, b, 4), 0);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  assert_int_equal(gpum_pool_free(f.pool, b), 0);
  /* The source is full; stream 2 gets a block only through the ladder's synchronize. */
  gpum_devptr_t c = on(f.pool, 12 * MiB, 2);
  assert_true(c == a || c == b);
  assert_int_equal(f.tl->syncs, 1);
  gpum_pool_stats_t st = stats(f.pool);
  assert_int_equal(st.num_alloc_retries, 1);
  assert_int_equal(st.active.current, 1); /* b's deferred free completed */
  assert_int_equal(gpum_pool_free(f.pool, c), 0);
  fx_close(&f);
}

static void test_streams_without_events(void **state) {
  (void)state;
  fx_t f;
  fx_open(&f, 0, 0);
  gpum_devptr_t a = on(f.pool, 12 * MiB, 1);
  assert_int_equal(gpum_pool_record_stream(f.pool, a, 7), 0);
  assert_int_equal(gpum_pool_free(f.pool, a), 0); /* every event counts as completed */
  assert_int_equal(on(f.pool, 12 * MiB, 2), a);
  assert_int_equal(stats(f.pool).active.current, 1);
  assert_int_equal(gpum_pool_free(f.pool, a), 0);
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_streams_same_stream_at_once),
      cmocka_unit_test(test_streams_other_stream_after_event),
      cmocka_unit_test(test_streams_idle_stream_reused_at_first_miss),
      cmocka_unit_test(test_streams_record_stream_defers),
      cmocka_unit_test(test_streams_idle_stream_merge),
      cmocka_unit_test(test_streams_ladder_synchronizes),
      cmocka_unit_test(test_streams_without_events),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
