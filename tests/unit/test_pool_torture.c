/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allocation-failure torture (curl's idea, applied to the memory source): a generated trace is
 * replayed once to count the source allocations it makes, then once per N with the Nth source
 * allocation failing (and again with a burst of four failures from the Nth). Every pool call
 * must return 0 or GPUM_EDEVOOM, the consistency checker must pass after every operation, a
 * failed allocation must leave the counters unchanged, and once the source works again the
 * pool recovers: the rest of the trace and a final round of allocations succeed, and
 * everything goes back to the source.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/pool.h>

#include "pool/pool_internal.h"
#include "pool_testlib.h"

#define MiB (UINT64_C(1) << 20)
#define TRACE_LEN 240

typedef struct {
  bool alloc;
  uint64_t size; /* alloc */
  int slot;      /* the slot allocated into or freed */
  gpum_stream_t stream;
} op_t;

static op_t trace[TRACE_LEN];

static void make_trace(void) {
  uint64_t s = 12345;
  bool used[32] = {false};
  for (int i = 0; i < TRACE_LEN; i++) {
    s = s * 6364136223846793005u + 1442695040888963407u;
    int slot = (int)((s >> 33) % 32);
    uint64_t k = (s >> 20) % 10;
    uint64_t size = k < 5   ? ((s >> 40) % (512 * 1024)) + 1
                    : k < 8 ? ((s >> 40) % (8 * MiB)) + MiB
                            : ((s >> 40) % (30 * MiB)) + 10 * MiB;
    trace[i] = (op_t){!used[slot], size, slot, (s >> 50) % 3};
    used[slot] = !used[slot];
  }
}

typedef struct {
  long source_allocs, ooms;
} result_t;

static void check(gpum_pool_t *pool, long n, int op) {
  if (gpum__pool_check(pool) != 0)
    fail_msg("failing call %ld, op %d: %s", n, op, gpum_last_error());
}

static result_t replay(long fail_nth, long fail_count, unsigned features,
                       gpum_pool_strategy_t strategy) {
  gpum_pool_source_t *src = NULL;
  tl_src_t *tl = tl_open(features, 0, &src);
  assert_non_null(tl);
  tl->fail_nth = fail_nth;
  tl->fail_count = fail_count;
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.strategy = strategy;
  gpum_pool_t *pool = NULL;
  assert_int_equal(gpum_pool_create(src, &o, &pool), 0);
  gpum_devptr_t slots[32] = {0};
  result_t r = {0};
  for (int i = 0; i < TRACE_LEN; i++) {
    const op_t *op = &trace[i];
    if (op->alloc) {
      gpum_pool_stats_t before, after;
      assert_int_equal(gpum_pool_stats(pool, &before), 0);
      int rc = gpum_pool_alloc(pool, op->size, op->stream, &slots[op->slot]);
      if (rc == GPUM_EDEVOOM) {
        r.ooms++;
        slots[op->slot] = 0;
        assert_int_equal(gpum_pool_stats(pool, &after), 0);
        assert_int_equal(after.allocated_bytes.current, before.allocated_bytes.current);
        assert_int_equal(after.allocation.current, before.allocation.current);
        assert_int_equal(after.num_ooms, before.num_ooms + 1);
      } else if (rc != 0) {
        fail_msg("failing call %ld, op %d: unexpected %s: %s", fail_nth, i, gpum_err_name(rc),
                 gpum_last_error());
      }
    } else if (slots[op->slot] != 0) {
      assert_int_equal(gpum_pool_free(pool, slots[op->slot]), 0);
      slots[op->slot] = 0;
    }
    check(pool, fail_nth, i);
  }
  /* Recovery: with the source healthy, fresh allocations succeed. */
  tl->fail_nth = 0;
  for (int i = 0; i < 32; i++)
    if (slots[i] != 0)
      assert_int_equal(gpum_pool_free(pool, slots[i]), 0);
  for (int i = 0; i < 32; i++)
    if (gpum_pool_alloc(pool, (uint64_t)(i + 1) * MiB, 0, &slots[i]) != 0)
      fail_msg("failing call %ld: no recovery: %s", fail_nth, gpum_last_error());
  check(pool, fail_nth, TRACE_LEN);
  for (int i = 0; i < 32; i++)
    assert_int_equal(gpum_pool_free(pool, slots[i]), 0);
  tl_complete(tl, true, 0);
  assert_int_equal(gpum_pool_trim(pool, 0, NULL), 0);
  r.source_allocs = tl->allocs;
  assert_int_equal(tl->used, 0);
  gpum_pool_destroy(pool);
  assert_int_equal(tl->events_live, 0);
  tl_close(tl, src);
  return r;
}

static void torture(unsigned features, gpum_pool_strategy_t strategy) {
  make_trace();
  /* The clean run: how many source allocations does the trace make? */
  result_t clean = replay(0, 0, features, strategy);
  assert_int_equal(clean.ooms, 0);
  long calls = clean.source_allocs;
  assert_true(calls >= 2);
  long ooms_single = 0, ooms_burst = 0;
  for (long n = 1; n <= calls + 1; n++) {
    ooms_single += replay(n, 1, features, strategy).ooms;
    ooms_burst += replay(n, 4, features, strategy).ooms;
  }
  /* A single failure is absorbed by the ladder's retry or surfaces as one OOM; a burst must
   * surface somewhere. */
  assert_true(ooms_burst > 0);
  print_message("%ld source allocations; OOMs with single failures %ld, with bursts %ld\n", calls,
                ooms_single, ooms_burst);
}

static void test_torture_balanced(void **state) {
  (void)state;
  torture(0, GPUM_POOL_BALANCED);
}

static void test_torture_events_consolidated(void **state) {
  (void)state;
  torture(TL_EVENTS | TL_SYNC, GPUM_POOL_CONSOLIDATED);
}

static void test_torture_greedy(void **state) {
  (void)state;
  torture(TL_EVENTS, GPUM_POOL_GREEDY);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_torture_balanced),
      cmocka_unit_test(test_torture_events_consolidated),
      cmocka_unit_test(test_torture_greedy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
