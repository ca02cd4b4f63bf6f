/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for gpumd_json_parse (src/gpumd/util/json_fast.c): for every input its result is
 * json_loadb's with JSON_REJECT_DUPLICATES | JSON_DECODE_ANY (the same value, types included,
 * or NULL and the same error for both), and its fast path alone gives that value or nothing;
 * the protocol's common requests take the fast path; on hand-picked inputs at the edges of its fast
 * path (escapes, UTF-8, reals, integer limits, leading zeros, duplicates, literals, trailing bytes,
 * scalars on top, nesting) and on random requests, well-formed and mangled (seeded: the same inputs
 * every run). Whenever gpumd_json_parse_flat takes a line, its members are jansson's object's.
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

#include "devices.h"
#include "engine.h"
#include "gpumd.h"
#include "net.h"
#include "obs.h"
#include "ops.h"
#include "proto.h"
#include "rest.h"

static unsigned fast_taken; /* inputs the fast path took itself */
static unsigned flat_taken; /* inputs gpumd_json_parse_flat took */

/* Same kind of value all the way down (json_equal already tells integer from real); the fast
 * path alone gives that value or nothing. */
static void assert_same(const char *s, size_t len) {
  json_error_t e1, e2;
  json_t *alone = gpumd_json_parse_fast(s, len, GPUMD_JSON_FAST_MAX_DEPTH);
  json_t *fast = gpumd_json_parse(s, len, &e1);
  json_t *ref = json_loadb(s, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e2);
  if ((fast == NULL) != (ref == NULL) || (fast && !json_equal(fast, ref))) {
    char *a = fast ? json_dumps(fast, JSON_ENCODE_ANY) : NULL;
    char *b = ref ? json_dumps(ref, JSON_ENCODE_ANY) : NULL;
    fail_msg("input '%.*s': gpumd_json_parse gave %s, json_loadb %s", (int)len, s, a ? a : "NULL",
             b ? b : "NULL");
  }
  if (!fast)
    assert_string_equal(e1.text, e2.text); /* jansson's own error */
  if (alone) {
    assert_true(json_equal(alone, ref));
    fast_taken++;
  }
  json_decref(alone);
  json_decref(fast);
  /* A flat line (gpumd_json_parse_flat) is jansson's object, member for member in order. */
  gpumd_flat_t flat;
  if (gpumd_json_parse_flat(s, len, &flat)) {
    assert_true(json_is_object(ref));
    assert_int_equal(json_object_size(ref), flat.count);
    const char *key;
    json_t *v;
    size_t i = 0;
    json_object_foreach(ref, key, v) {
      const gpumd_flat_field_t *m = &flat.field[i++];
      assert_string_equal(m->key, key);
      assert_int_equal(m->type, json_typeof(v));
      if (json_is_integer(v))
        assert_true(m->integer == json_integer_value(v));
      if (json_is_string(v)) {
        assert_int_equal(m->length, json_string_length(v));
        assert_memory_equal(m->string, json_string_value(v), m->length + 1);
      }
    }
    flat_taken++;
  }
  json_decref(ref);
}

static void same(const char *s) {
  assert_same(s, strlen(s));
}

/* The requests of the protocol's hot path take the fast path. */
static void test_common_requests_fast(void **state) {
  (void)state;
  static const char *const reqs[] = {
      "{\"id\":1,\"op\":\"reserve\",\"bytes_per_gpu\":1048576}",
      "{\"id\": 7, \"op\": \"release\", \"reservation\": \"r-12\"}",
      ("{\"id\":\"x-1\",\"op\":\"reserve\",\"bytes_per_gpu\":\"1GiB\",\"gpus\":2,"
       "\"devices\":[0,1],\"lease\":\"ttl\",\"ttl_ms\":60000,\"wait\":false,\"label\":\"job\"}"),
      "{\"id\": 3, \"op\": \"list\", \"all\": true}"};
  for (size_t i = 0; i < sizeof reqs / sizeof *reqs; i++) {
    json_t *v = gpumd_json_parse_fast(reqs[i], strlen(reqs[i]), GPUMD_MAX_DEPTH);
    assert_non_null(v);
    json_decref(v);
    same(reqs[i]);
    /* and all but the one with a list are flat lines, decoded without a tree */
    gpumd_flat_t flat;
    assert_int_equal(gpumd_json_parse_flat(reqs[i], strlen(reqs[i]), &flat), i != 2);
  }
}

/* The fast path takes a value nested up to its max_depth and nothing deeper (the protocol's
 * nesting check relies on it): arrays and objects count alike, strings holding brackets not. */
static void test_fast_depth_bound(void **state) {
  (void)state;
  static const struct {
    const char *s;
    int depth;
  } cases[] = {{"[]", 1},
               {"{\"a\":[1,{\"b\":[]}]}", 4},
               {"{\"a\":\"[[[[\"}", 1},
               {"[[[[[[[[]]]]]]]]", 8},
               {"[[[[[[[[[]]]]]]]]]", 9},
               {"{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{}}}}}}}}}", 9}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const char *s = cases[i].s;
    for (int limit = 1; limit <= 10; limit++) {
      json_t *v = gpumd_json_parse_fast(s, strlen(s), limit);
      if ((v != NULL) != (cases[i].depth <= limit))
        fail_msg("'%s' (depth %d) with limit %d: %s", s, cases[i].depth, limit,
                 v ? "taken" : "refused");
      json_decref(v);
    }
    assert_int_equal(gpumd_json_depth(s, strlen(s), 100), cases[i].depth);
  }
}

static void test_edges(void **state) {
  (void)state;
  static const char *const cases[] = {
      "{}", "[]", " { } ", "{\"id\":1,\"op\":\"reserve\",\"bytes_per_gpu\":1048576}",
      "{\"id\": \"abc\", \"op\": \"release\", \"reservation\": \"r-12\"}\r\n",
      "{\"a\":[1,2,[3,{\"b\":null}]],\"t\":true,\"f\":false}", "[1,\"x\",null,true,false,[],{}]",
      /* integers at and past the limits, signs, zeros */
      "[9223372036854775807]", "[9223372036854775808]", "[-9223372036854775808]",
      "[-9223372036854775809]", "[18446744073709551616]", "[0]", "[-0]", "[00]", "[01]", "[-01]",
      "[-]", "[+1]", "[1.5]", "[1e3]", "[1E3]", "[-0.0]", "[1.]", "[.5]",
      "[123456789012345678901234567890]",
      /* strings: escapes, UTF-8, control bytes, DEL, unterminated */
      "[\"a\\nb\"]", "[\"\\u00e9\"]", "[\"\\u0000\"]", "[\"\xc3\xa9\"]", "[\"\xff\"]", "[\"\x01\"]",
      "[\"\x7f\"]", "[\"abc]", "[\"\"]", "{\"\":1}",
      /* duplicates, syntax errors, trailing bytes */
      "{\"a\":1,\"a\":2}", "{\"a\":1,}", "[1,]", "{\"a\" 1}", "{a:1}", "{\"a\":1} x", "{\"a\":1}{}",
      "[1 2]", "[tru]", "[truex]", "[nul]", "[nullx]", "[falsey]", "", "   ", "{", "[", "}", "]",
      "{\"a\":}",
      /* scalars on top: values too (proto.c answers EPROTO for them, not EPARSE) */
      "1", "\"x\"", "true", "null", " -2 ", "\"\\u00e9\"", "1.5", "\"a\" 1", "nul",
      /* nesting */
      "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
      "[[[[[[[[]]]]]]]]"};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    same(cases[i]);
  assert_same("{\"a\":\"x\0y\"}", 12); /* a NUL byte inside */
  assert_same("{\"a\":1}\0", 8);
}

/* Random requests built from pieces, then mangled: a byte changed, dropped or cut short. */
static void test_random(void **state) {
  (void)state;
  static const char *const keys[] = {"id", "op", "bytes_per_gpu", "gpus", "label", "a", "id"};
  static const char *const vals[] = {"1",           "-7",           "\"reserve\"",
                                     "\"r-1\"",     "true",         "null",
                                     "[1,2]",       "{}",           "1.5",
                                     "\"\\u00e9\"", "\"\xc3\xa9\"", "9223372036854775807",
                                     "[[{}]]",      "\"\"",         "0"};
  static const char mangle[] = "{}[]\",: \t\\-0e.x\xff\x01";
  unsigned seed = 12345;
  char buf[512];
  for (int round = 0; round < 20000; round++) {
    size_t n = 0;
    int fields = (int)(rand_r(&seed) % 5);
    n += (size_t)snprintf(buf + n, sizeof buf - n, "{");
    for (int k = 0; k < fields; k++)
      n += (size_t)snprintf(buf + n, sizeof buf - n, "%s\"%s\":%s", k ? "," : "",
                            keys[rand_r(&seed) % 7], vals[rand_r(&seed) % 15]);
    n += (size_t)snprintf(buf + n, sizeof buf - n, "}");
    switch (rand_r(&seed) % 4) {
    case 0: /* as built */
      break;
    case 1:
      buf[rand_r(&seed) % n] = mangle[rand_r(&seed) % (sizeof mangle - 1)];
      break;
    case 2: {
      size_t at = rand_r(&seed) % n;
      memmove(buf + at, buf + at + 1, n - at - 1);
      n--;
      break;
    }
    default:
      n = rand_r(&seed) % (n + 1);
    }
    assert_same(buf, n);
  }
  assert_true(fast_taken > 2000); /* the comparison covered the fast path, not only jansson */
  assert_true(flat_taken > 1000); /* and flat lines */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_common_requests_fast),
      cmocka_unit_test(test_fast_depth_bound),
      cmocka_unit_test(test_edges),
      cmocka_unit_test(test_random),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
