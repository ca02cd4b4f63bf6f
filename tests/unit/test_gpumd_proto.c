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
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <event2/buffer.h>
#include <jansson.h>

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

/* gpumd's own JSON writer (src/gpumd/server.c) must give exactly jansson's compact output. */
static void check_same_as_jansson(json_t *v) {
  assert_non_null(v);
  char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  assert_non_null(want);
  struct evbuffer *out = evbuffer_new();
  assert_non_null(out);
  assert_int_equal(gpumd_json_write(out, v), 0);
  size_t n = evbuffer_get_length(out);
  char *got = (char *)evbuffer_pullup(out, -1);
  if (n != strlen(want) || (n > 0 && memcmp(got, want, n) != 0))
    fail_msg("writer gave '%.*s', jansson '%s'", (int)n, got ? got : "", want);
  evbuffer_free(out);
  free(want);
  json_decref(v);
}

static void test_json_writer_matches_jansson(void **state) {
  (void)state;
  check_same_as_jansson(json_pack("{s:i, s:s, s:b, s:n}", "id", 7, "op", "list", "ok", 1, "x"));
  check_same_as_jansson(json_string("quote \" backslash \\ slash / tab \t nl \n cr \r"));
  check_same_as_jansson(json_string("ctl \x01\x1f del \x7f utf8 \xc3\xa9 \xe2\x82\xac"));
  check_same_as_jansson(json_stringn("nul\0inside", 11));
  check_same_as_jansson(json_integer(INT64_MIN));
  check_same_as_jansson(json_integer(INT64_MAX));
  check_same_as_jansson(json_integer(0));
  check_same_as_jansson(json_real(0.1));
  check_same_as_jansson(json_real(-1e300));
  check_same_as_jansson(json_pack("[[], {}, [i, [i, [i]]], {s:{s:[]}}]", 1, 2, 3, "a", "b"));
  check_same_as_jansson(json_false());
  /* Bigger than the writer's 4 KiB staging buffer, in one string and in many small pieces. */
  char big[10000];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  big[5000] = '"';
  check_same_as_jansson(json_string(big));
  json_t *arr = json_array();
  for (int i = 0; i < 3000; i++)
    json_array_append_new(arr, json_pack("{s:i, s:s}", "i", i, "s", "r-\"x\""));
  check_same_as_jansson(arr);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_depth_counts_nesting),
      cmocka_unit_test(test_depth_skips_strings),
      cmocka_unit_test(test_depth_stops_past_limit),
      cmocka_unit_test(test_check_fields),
      cmocka_unit_test(test_json_writer_matches_jansson),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
