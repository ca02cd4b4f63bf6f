/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for gpumd's protocol helpers (src/gpumd/proto.c): the nesting-depth scan that
 * runs before a line is parsed (strings and escapes skipped, early stop past the limit) and
 * the unknown-field check that names the offending field. The daemon-level behaviour (error
 * replies, closing on over-long lines) is tested in tests/integration/test_gpumd_basic.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/error.h>

#include "gpumd_internal.h"

static int depth(const char *s) {
  return gpumd_json_depth(s, strlen(s), 100);
}

static void test_depth_counts_nesting(void **state) {
  (void)state;
  assert_int_equal(depth("1"), 0);
  assert_int_equal(depth("{}"), 1);
  assert_int_equal(depth("{\"a\": [1, {\"b\": []}]}"), 4);
  assert_int_equal(depth("[[]] [[[]]]"), 3); /* the deepest point counts */
}

static void test_depth_skips_strings(void **state) {
  (void)state;
  assert_int_equal(depth("{\"a\": \"[[[[{{{{\"}"), 1);
  assert_int_equal(depth("{\"a\": \"\\\"[[[\"}"), 1); /* escaped quote stays in the string */
  assert_int_equal(depth("{\"a\": \"\\\\\", \"b\": [[]]}"), 3); /* escaped backslash ends */
}

static void test_depth_stops_past_limit(void **state) {
  (void)state;
  char deep[4096];
  memset(deep, '[', sizeof deep);
  /* Stops as soon as the limit is passed: reports limit + 1. */
  assert_int_equal(gpumd_json_depth(deep, sizeof deep, 8), 9);
  assert_int_equal(gpumd_json_depth("[[[[[[[[]]]]]]]]", 16, 8), 8);
  /* Unbalanced or truncated input does not read past len. */
  assert_int_equal(gpumd_json_depth("]]]][", 5, 8), 1);
  assert_int_equal(gpumd_json_depth("{\"abc", 5, 8), 1);
}

static void test_check_fields(void **state) {
  (void)state;
  static const char *const allowed[] = {"id", "op", "all", NULL};
  json_t *ok = json_pack("{s:i, s:s, s:b}", "id", 1, "op", "list", "all", 1);
  json_t *bad = json_pack("{s:i, s:s, s:i}", "id", 1, "op", "list", "everything", 1);
  json_t *empty = json_object();
  assert_int_equal(gpumd_check_fields(ok, allowed), 0);
  assert_int_equal(gpumd_check_fields(empty, allowed), 0);
  assert_int_equal(gpumd_check_fields(bad, allowed), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "'everything'"));
  json_decref(ok);
  json_decref(bad);
  json_decref(empty);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_depth_counts_nesting),
      cmocka_unit_test(test_depth_skips_strings),
      cmocka_unit_test(test_depth_stops_past_limit),
      cmocka_unit_test(test_check_fields),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
