/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ring of recent events that gpumd replays to a reconnecting event stream (evring.c):
 * events are held under consecutive ids and read back by id; the byte bound drops the oldest
 * first and never splits an event; an event larger than the bound and an id out of sequence
 * leave an empty ring that continues after that id (no gap; evring.c does the same on a failed
 * allocation, which is not injected here); the array grows past its first size with the records in
 * order, also when it has wrapped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/error.h>

#include "evring.h"

static void push_text(gpumd_evring_t *r, uint64_t id, const char *text) {
  assert_int_equal(gpumd_evring_push(r, id, text, strlen(text)), 0);
}

static void assert_held(const gpumd_evring_t *r, uint64_t id, const char *want) {
  const char *t = NULL;
  size_t n = 0;
  assert_true(gpumd_evring_get(r, id, &t, &n));
  assert_int_equal(n, strlen(want));
  assert_memory_equal(t, want, n);
}

static void test_push_get(void **state) {
  (void)state;
  gpumd_evring_t r;
  gpumd_evring_init(&r, 1024, 1000001);
  assert_int_equal(gpumd_evring_next(&r), 1000001);
  assert_int_equal(gpumd_evring_first(&r), 1000001);
  const char *t;
  size_t n;
  assert_false(gpumd_evring_get(&r, 1000001, &t, &n));
  push_text(&r, 1000001, "id: 1000001\n\n");
  push_text(&r, 1000002, "id: 1000002\n\n");
  assert_held(&r, 1000001, "id: 1000001\n\n");
  assert_held(&r, 1000002, "id: 1000002\n\n");
  assert_false(gpumd_evring_get(&r, 1000000, &t, &n));
  assert_false(gpumd_evring_get(&r, 1000003, &t, &n));
  assert_int_equal(gpumd_evring_next(&r), 1000003);
  gpumd_evring_free(&r);
  assert_int_equal(gpumd_evring_next(&r), 1000003); /* ids go on after a free */
  assert_false(gpumd_evring_get(&r, 1000002, &t, &n));
}

static void test_byte_bound(void **state) {
  (void)state;
  gpumd_evring_t r;
  gpumd_evring_init(&r, 30, 1);
  push_text(&r, 1, "0123456789"); /* 10 bytes each: three fit */
  push_text(&r, 2, "abcdefghij");
  push_text(&r, 3, "ABCDEFGHIJ");
  assert_int_equal(gpumd_evring_first(&r), 1);
  push_text(&r, 4, "klmnopqrst"); /* the oldest goes */
  assert_int_equal(gpumd_evring_first(&r), 2);
  assert_held(&r, 4, "klmnopqrst");
  push_text(&r, 5, "0123456789abc"); /* 13 bytes: two go */
  assert_int_equal(gpumd_evring_first(&r), 4);
  assert_true(r.bytes <= 30);
  assert_held(&r, 5, "0123456789abc");
  gpumd_evring_free(&r);
}

static void test_too_big_and_out_of_sequence(void **state) {
  (void)state;
  gpumd_evring_t r;
  gpumd_evring_init(&r, 16, 1);
  push_text(&r, 1, "small");
  push_text(&r, 2, "this one is larger than the ring");
  assert_int_equal(gpumd_evring_first(&r), 3); /* emptied, no gap */
  assert_int_equal(gpumd_evring_next(&r), 3);
  push_text(&r, 3, "small");
  assert_int_equal(gpumd_evring_push(&r, 9, "x", 1), GPUM_EINVAL);
  assert_int_equal(gpumd_evring_next(&r), 10);
  const char *t;
  size_t n;
  assert_false(gpumd_evring_get(&r, 3, &t, &n));
  push_text(&r, 10, "after");
  assert_held(&r, 10, "after");
  gpumd_evring_free(&r);
}

/* Many records through a ring that wraps and grows: every held one reads back as pushed. */
static void test_grow_wrapped(void **state) {
  (void)state;
  gpumd_evring_t r;
  gpumd_evring_init(&r, 40 * 8, 1); /* about 40 records of 8 bytes */
  char buf[32];
  for (uint64_t id = 1; id <= 5000; id++) {
    snprintf(buf, sizeof buf, "e%07llu", (unsigned long long)id);
    push_text(&r, id, buf);
    if (id % 97 == 0) {
      for (uint64_t k = gpumd_evring_first(&r); k < gpumd_evring_next(&r); k++) {
        snprintf(buf, sizeof buf, "e%07llu", (unsigned long long)k);
        assert_held(&r, k, buf);
      }
      assert_int_equal(gpumd_evring_next(&r) - gpumd_evring_first(&r), 40);
    }
  }
  gpumd_evring_free(&r);
  /* And a ring that is never trimmed: growth past 64, 128, ... slots keeps the order. */
  gpumd_evring_init(&r, 1u << 20, 1);
  for (uint64_t id = 1; id <= 1000; id++) {
    snprintf(buf, sizeof buf, "e%07llu", (unsigned long long)id);
    push_text(&r, id, buf);
  }
  for (uint64_t id = 1; id <= 1000; id++) {
    snprintf(buf, sizeof buf, "e%07llu", (unsigned long long)id);
    assert_held(&r, id, buf);
  }
  gpumd_evring_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_push_get),
      cmocka_unit_test(test_byte_bound),
      cmocka_unit_test(test_too_big_and_out_of_sequence),
      cmocka_unit_test(test_grow_wrapped),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
