/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for libgpum's JSON scanner (core/json_scan_internal.h): the shapes it takes, what
 * it gives up to jansson (escapes, UTF-8, duplicate keys, every syntax error), that whatever
 * it walks to the end jansson accepts too (hand-picked and random, mangled inputs), the values it
 * reads, and its limits (depth, keys).
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

/* Random objects built from pieces, then mangled (a byte changed or dropped, or cut short;
 * seeded: the same inputs every run): whatever the scanner takes, jansson takes, and every
 * well-formed one in its shape it takes itself. */
static void test_random(void **state) {
  (void)state;
  static const char *const keys[] = {"id", "op", "state", "a", "id"};
  static const char *const vals[] = {"1",      "-7",   "\"r-1\"",  "true",        "null",
                                     "[1,2]",  "{}",   "1.5",      "\"\\u00e9\"", "0",
                                     "[[{}]]", "\"\"", "-0.25e-3", "{\"a\":[]}",  "\"\xc3\xa9\""};
  static const char mangle[] = "{}[]\",: \t\\-0e.x\xff\x01";
  unsigned seed = 2711;
  char buf[512];
  unsigned taken = 0;
  for (int round = 0; round < 20000; round++) {
    size_t n = (size_t)snprintf(buf, sizeof buf, "{");
    bool in_shape = true;
    unsigned used = 0; /* keys written (bits), for duplicates: "id" is there twice */
    int fields = (int)(rand_r(&seed) % 5);
    for (int k = 0; k < fields; k++) {
      unsigned ki = rand_r(&seed) % 5, v = rand_r(&seed) % 15, bit = 1u << (ki == 4 ? 0 : ki);
      in_shape &= v != 8 && v != 14 && !(used & bit); /* no escape, no UTF-8, no duplicate */
      used |= bit;
      n +=
          (size_t)snprintf(buf + n, sizeof buf - n, "%s\"%s\":%s", k ? "," : "", keys[ki], vals[v]);
    }
    n += (size_t)snprintf(buf + n, sizeof buf - n, "}");
    switch (rand_r(&seed) % 4) {
    case 0:
      if (in_shape)
        assert_true(takes(buf));
      break;
    case 1:
      buf[rand_r(&seed) % n] = mangle[rand_r(&seed) % (sizeof mangle - 1)];
      break;
    case 2: {
      size_t at = rand_r(&seed) % n;
      memmove(buf + at, buf + at + 1, n - at);
      break;
    }
    default:
      buf[rand_r(&seed) % (n + 1)] = '\0';
      break;
    }
    if (takes(buf)) {
      taken++;
      if (!jansson_takes(buf))
        fail_msg("the scanner took '%s', which jansson refuses", buf);
    }
  }
  assert_true(taken > 3000); /* the property was tried on many inputs (4,284 of this seed) */
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
      cmocka_unit_test(test_random),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
