/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The first lines of a Server-Sent Event as gpumd formats them once per event (sse.c,
 * gpumd_sse_event_head): "id: ID\nevent: NAME\ndata: ", the id in decimal (0, one digit, the
 * 16 digits of a run's ids, the largest 64-bit value), and a buffer too small for them giving 0
 * and an empty string, never a cut line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "obs.h"

static void assert_head(uint64_t id, const char *event, const char *want) {
  char buf[96];
  size_t n = gpumd_sse_event_head(buf, sizeof buf, id, event);
  assert_string_equal(buf, want);
  assert_int_equal(n, strlen(want));
}

static void test_ids(void **state) {
  (void)state;
  assert_head(0, "reservation", "id: 0\nevent: reservation\ndata: ");
  assert_head(7, "xid", "id: 7\nevent: xid\ndata: ");
  assert_head(1795630876805298ull, "sample", "id: 1795630876805298\nevent: sample\ndata: ");
  assert_head(UINT64_MAX, "health", "id: 18446744073709551615\nevent: health\ndata: ");
}

static void test_too_small(void **state) {
  (void)state;
  const char *want = "id: 42\nevent: alert\ndata: ";
  size_t need = strlen(want);
  char buf[64];
  /* room for the text and its NUL: written */
  memset(buf, 'x', sizeof buf);
  assert_int_equal(gpumd_sse_event_head(buf, need + 1, 42, "alert"), need);
  assert_string_equal(buf, want);
  /* one byte less: nothing, and an empty string */
  memset(buf, 'x', sizeof buf);
  assert_int_equal(gpumd_sse_event_head(buf, need, 42, "alert"), 0);
  assert_string_equal(buf, "");
  /* no room at all: nothing written */
  buf[0] = 'x';
  assert_int_equal(gpumd_sse_event_head(buf, 0, 42, "alert"), 0);
  assert_int_equal(buf[0], 'x');
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ids),
      cmocka_unit_test(test_too_small),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
