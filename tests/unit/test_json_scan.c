/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for libgpum's JSON scanner (core/json_scan_internal.h): the shapes it takes, what
 * it gives up to jansson (escapes, UTF-8, duplicate keys, every syntax error), that whatever
 * it walks to the end jansson accepts too, the values it reads, and its limits (depth, keys).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/json_scan_internal.h"

/* The scanner's verdict on text: walked to its end (one value) without failing. */
static bool takes(const char *text) {
  gpum__jscan_t s;
  gpum__jscan_init(&s, text, strlen(text));
  gpum__jscan_skip(&s);
  return gpum__jscan_done(&s);
}

static bool jansson_takes(const char *text) {
  json_t *v = json_loadb(text, strlen(text), JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
  json_decref(v);
  return v != NULL;
}

static void test_takes_the_common_shape(void **state) {
  (void)state;
  static const char *const good[] = {
      "{}",
      "[]",
      " { \"a\" : 1 , \"b\" : [ true, false, null ] }\n",
      "{\"id\":\"r-1\",\"n\":-12,\"x\":0,\"r\":0.95,\"e\":1e-05,\"E\":2.5E+3,\"o\":{\"k\":[]}}",
      "{\"a\":{\"a\":{\"a\":1}},\"b\":{\"a\":2}}", /* the same key in other objects */
      "9223372036854775807",
      "-9223372036854775808",
      "\"printable ASCII ~!@#$%^&*()_+{}[]:;'<>,.?/\"",
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    assert_true(takes(good[i]));
    assert_true(jansson_takes(good[i])); /* never takes what jansson refuses */
  }
}

/* Given up (jansson reads it instead): outside the shape, or not JSON at all. */
static void test_gives_up(void **state) {
  (void)state;
  static const char *const up[] = {
      "{\"a\":\"\\u0041\"}",     /* an escape */
      "{\"a\":\"caf\xc3\xa9\"}", /* UTF-8 */
      "{\"a\":\"\x01\"}",        /* a control byte */
      "{\"a\":1,\"a\":2}",       /* a duplicate key */
      "{\"a\":1,}",
      "[1,]",
      "{,}",
      "[,1]",
      "{\"a\" 1}",
      "{\"a\":}",
      "{\"a\":1",
      "[1 2]",
      "01",
      "-",
      "1.",
      ".5",
      "1e",
      "+1",
      "9223372036854775808", /* past long long: jansson's "too big integer" */
      "1e999",
      "tru",
      "nul",
      "{\"a\":1} x",
      "{1:2}",
      "",
      "   ",
      "\"open",
  };
  for (size_t i = 0; i < sizeof up / sizeof up[0]; i++)
    assert_false(takes(up[i]));
}

static void test_reads_values(void **state) {
  (void)state;
  const char *text = "{\"s\":\"abc\",\"i\":-42,\"d\":2.5,\"t\":true,\"n\":null,\"a\":[1,{}],"
                     "\"w\":\"not a number\"}";
  gpum__jscan_t s;
  gpum__jscan_init(&s, text, strlen(text));
  assert_true(gpum__jscan_begin_object(&s));
  const char *k, *v;
  size_t n, vn;
  bool is_int = false;
  long long i = 0;
  double d = 0;
  int lit = 9;
  assert_true(gpum__jscan_key(&s, &k, &n) && n == 1 && k[0] == 's');
  assert_true(gpum__jscan_string(&s, &v, &vn) && vn == 3 && !memcmp(v, "abc", 3));
  assert_true(gpum__jscan_key(&s, &k, &n) && k[0] == 'i');
  assert_true(gpum__jscan_number(&s, &is_int, &i, &d) && is_int && i == -42);
  assert_true(gpum__jscan_key(&s, &k, &n) && k[0] == 'd');
  assert_true(gpum__jscan_number(&s, &is_int, &i, &d) && !is_int && d == 2.5);
  assert_true(gpum__jscan_key(&s, &k, &n) && k[0] == 't');
  assert_true(gpum__jscan_literal(&s, &lit) && lit == 1);
  assert_true(gpum__jscan_key(&s, &k, &n) && k[0] == 'n');
  assert_true(gpum__jscan_literal(&s, &lit) && lit == -1);
  assert_true(gpum__jscan_key(&s, &k, &n) && k[0] == 'a');
  assert_true(gpum__jscan_begin_array(&s));
  assert_true(gpum__jscan_next(&s));
  assert_true(gpum__jscan_number(&s, &is_int, &i, &d) && i == 1);
  assert_true(gpum__jscan_next(&s));
  assert_false(gpum__jscan_string(&s, &v, &vn)); /* an object where a string was wanted: skipped */
  assert_false(gpum__jscan_next(&s));
  assert_true(gpum__jscan_key(&s, &k, &n) && k[0] == 'w');
  assert_false(gpum__jscan_number(&s, &is_int, &i, &d)); /* mistyped: skipped, not a failure */
  assert_false(gpum__jscan_key(&s, &k, &n));
  assert_false(s.fail);
  assert_true(gpum__jscan_done(&s));
}

/* depth arrays, one in another, in buf. */
static const char *nested(char *buf, int depth) {
  for (int i = 0; i < depth; i++) {
    buf[i] = '[';
    buf[2 * depth - 1 - i] = ']';
  }
  buf[2 * depth] = '\0';
  return buf;
}

/* Nesting past GPUM__JSCAN_MAX_DEPTH and more open keys than it keeps are given up. */
static void test_limits(void **state) {
  (void)state;
  char deep[2 * (GPUM__JSCAN_MAX_DEPTH + 1) + 1];
  assert_false(takes(nested(deep, GPUM__JSCAN_MAX_DEPTH + 1)));
  assert_true(jansson_takes(deep));
  assert_true(takes(nested(deep, GPUM__JSCAN_MAX_DEPTH))); /* one level less: taken */
  char wide[8 * (GPUM__JSCAN_MAX_KEYS + 1) + 8] = "{";
  size_t o = 1;
  for (int i = 0; i <= GPUM__JSCAN_MAX_KEYS; i++)
    o += (size_t)snprintf(wide + o, sizeof wide - o, "%s\"%d\":0", i ? "," : "", i);
  snprintf(wide + o, sizeof wide - o, "}");
  assert_false(takes(wide));
  assert_true(jansson_takes(wide));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_takes_the_common_shape),
      cmocka_unit_test(test_gives_up),
      cmocka_unit_test(test_reads_values),
      cmocka_unit_test(test_limits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
