/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for gpumd's protocol helpers (src/gpumd/proto/proto.c, src/gpumd/util/json_in.c,
 * src/gpumd/net/reply.c): the nesting-depth scan that runs before a line is parsed (strings and
 * escapes skipped, early stop past the limit), the unknown-field check that names the offending
 * field, the protocol's names shared with the client library (both sides' enums map through the one
 * table of client/protocol_internal.h), and the error replies to bad lines: exactly one valid UTF-8
 * line per line, whatever bytes the parse error quotes (a backslash before a non-ASCII character),
 * EPROTO for JSON values that are not objects, messages cut before a character, and an error for a
 * reply whose body could not be built. The daemon-level behaviour (closing on over-long lines, the
 * socket) is tested in tests/integration/test_gpumd_basic.sh.
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

#include "client/client_internal.h"
#include "devices.h"
#include "engine.h"
#include "gpumd.h"
#include "net.h"
#include "obs.h"
#include "ops.h"
#include "proto.h"
#include "rest.h"

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

/* gpumd's own JSON writer (src/gpumd/util/json_out.c) must give exactly jansson's compact output,
 * but for reals (test_json_reals). */
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
  assert_int_equal(gpumd_json_size(v), n); /* the size a list page is cut by */
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

/* The writer checks eight bytes at a time whether a string needs escapes, and writes integers
 * two digits at a time: every byte value at every place of strings of 1 to 17 bytes (whole
 * words, tails, both), and integers at each count of digits, both signs. Bytes that are not
 * UTF-8 are left out (the writer writes them as '?', jansson refuses them). */
static void test_json_writer_word_paths(void **state) {
  (void)state;
  for (size_t len = 1; len <= 17; len++)
    for (size_t at = 0; at < len; at++)
      for (unsigned byte = 1; byte < 0x80; byte++) {
        char s[18];
        memset(s, 'a', len);
        s[at] = (char)byte;
        check_same_as_jansson(json_stringn(s, len));
      }
  /* a multi-byte character at each place of a 17-byte string */
  for (size_t at = 0; at + 2 <= 17; at++) {
    char s[18];
    memset(s, 'b', 17);
    memcpy(s + at, "\xc3\xa9", 2);
    check_same_as_jansson(json_stringn(s, 17));
  }
  long long v = 1;
  for (int digits = 1; digits <= 18; digits++, v *= 10) {
    check_same_as_jansson(json_integer(v));
    check_same_as_jansson(json_integer(-v));
    check_same_as_jansson(json_integer(v - 1));
    check_same_as_jansson(json_integer(1 - v));
    check_same_as_jansson(json_integer(v * 10 - 1));
    check_same_as_jansson(json_integer(v + 7));
  }
}

/* gpumd_dec_u64 counts the digits from the bit length: every power of ten and of two, each
 * side of it, up to the largest 64-bit value, as printf writes them. */
static void check_dec(uint64_t v) {
  char want[32], got[24];
  int n = snprintf(want, sizeof want, "%llu", (unsigned long long)v);
  memset(got, 'x', sizeof got);
  assert_int_equal(gpumd_dec_u64(got, v), (size_t)n);
  assert_memory_equal(got, want, (size_t)n);
  assert_int_equal(got[n], 'x'); /* nothing written past the digits */
}

static void test_dec_u64(void **state) {
  (void)state;
  uint64_t p = 1;
  for (int k = 0; k < 20; k++, p *= 10) {
    check_dec(p);
    check_dec(p - 1);
    check_dec(p + 1);
    check_dec(p * 3);
  }
  for (int k = 0; k < 64; k++) {
    check_dec(UINT64_C(1) << k);
    check_dec((UINT64_C(1) << k) - 1);
    check_dec((UINT64_C(1) << k) + 1);
  }
  check_dec(UINT64_MAX);
  check_dec(UINT64_MAX - 1);
  check_dec(UINT64_C(1795630876805298123)); /* a nanosecond time */
}

/* Reals are written in the shortest form that reads back the same: no float noise such as
 * jansson's %.17g 0.94999999999999996 for 0.95, and nothing lost. */
static void check_real(double v, const char *want) {
  char buf[GPUMD_REAL_BUFSZ];
  size_t n = gpumd_json_real(v, buf, sizeof buf);
  assert_string_equal(buf, want);
  assert_int_equal(n, strlen(want));
  assert_true(strtod(buf, NULL) == v);
  json_t *j = json_real(v);
  struct evbuffer *out = evbuffer_new();
  assert_int_equal(gpumd_json_write(out, j), 0);
  assert_int_equal(evbuffer_get_length(out), n);
  assert_memory_equal(evbuffer_pullup(out, -1), want, n);
  evbuffer_free(out);
  json_decref(j);
}

static void test_json_reals(void **state) {
  (void)state;
  check_real(0.95, "0.95");
  check_real(38.0 / 80.0, "0.475");
  check_real(0.1, "0.1");
  check_real(0.1 + 0.2, "0.30000000000000004"); /* not 0.3: that would read back otherwise */
  check_real(1.0, "1.0");
  check_real(-2.5, "-2.5");
  check_real(1e-5, "1e-05");
  check_real(-1e300, "-1e+300");
  check_real(123456789012.0, "123456789012.0");
  char small[4];
  assert_int_equal(gpumd_json_real(0.123456, small, sizeof small), 0);
  assert_string_equal(small, "");
}

/* ---- names shared with the client ----------------------------------------------------- */

/* Each value of a table spells the same on both sides and parses back to the same value. */
static void test_shared_names(void **state) {
  (void)state;
  gpumd_resv_state_t st;
#define STATE(n)                                                                    \
  assert_string_equal(gpumd_resv_state_name(GPUMD_RESV_##n), GPUM_PROTO_STATE_##n); \
  assert_string_equal(gpum_res_state_name(GPUM_RES_##n), GPUM_PROTO_STATE_##n);     \
  assert_int_equal(gpum__res_state_parse(GPUM_PROTO_STATE_##n), GPUM_RES_##n);      \
  assert_int_equal(gpumd_resv_state_parse(GPUM_PROTO_STATE_##n, &st), 0);           \
  assert_int_equal(st, GPUMD_RESV_##n);
  // cppcheck-suppress unknownMacro ; an X-macro of protocol_internal.h, expanded by STATE
  GPUM_PROTO_STATES(STATE)
#undef STATE
  assert_int_equal(gpum__res_state_parse("NEW"), GPUM_RES_UNKNOWN);
  assert_int_equal(gpum__res_state_parse(NULL), GPUM_RES_UNKNOWN);
  gpumd_lease_kind_t lk;
#define LEASE(n)                                                                     \
  assert_string_equal(gpumd_lease_kind_name(GPUMD_LEASE_##n), GPUM_PROTO_LEASE_##n); \
  assert_string_equal(gpum__lease_name(GPUM_LEASE_##n), GPUM_PROTO_LEASE_##n);       \
  assert_int_equal(gpumd_lease_kind_parse(GPUM_PROTO_LEASE_##n, &lk), 0);            \
  assert_int_equal(lk, GPUMD_LEASE_##n);
  GPUM_PROTO_LEASES(LEASE)
#undef LEASE
  assert_null(gpum__lease_name((gpum_lease_t)99));
  gpumd_on_timeout_t ot;
#define TIMEOUT(n)                                                                             \
  assert_string_equal(gpumd_on_timeout_name(GPUMD_ON_TIMEOUT_##n), GPUM_PROTO_ON_TIMEOUT_##n); \
  assert_int_equal(gpumd_on_timeout_parse(GPUM_PROTO_ON_TIMEOUT_##n, &ot), 0);                 \
  assert_int_equal(ot, GPUMD_ON_TIMEOUT_##n);
  GPUM_PROTO_ON_TIMEOUTS(TIMEOUT)
#undef TIMEOUT
#define PRESSURE(n) \
  assert_string_equal(gpumd_pressure_name(GPUMD_PRESSURE_##n), GPUM_PROTO_PRESSURE_##n);
  GPUM_PROTO_PRESSURES(PRESSURE)
#undef PRESSURE
}

/* ---- error replies to bad lines -------------------------------------------------------- */

typedef struct {
  gpumd_t d;
  gpumd_conn_t c;
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  assert_non_null(f);
  f->c.d = &f->d;
  f->c.staged = evbuffer_new();
  assert_non_null(f->c.staged);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  evbuffer_free(f->c.staged);
  free(f);
  return 0;
}

/* Takes the one staged message: exactly one line, valid JSON and UTF-8 (jansson checks), an
 * error reply with that code. Returns it (caller decrefs). */
static json_t *take_one_error(fixture_t *f, const char *code) {
  size_t n = evbuffer_get_length(f->c.staged);
  char *s = malloc(n + 1);
  assert_non_null(s);
  evbuffer_remove(f->c.staged, s, n);
  s[n] = '\0';
  char *nl = strchr(s, '\n');
  if (!nl || nl[1] != '\0')
    fail_msg("expected exactly one line, got %zu bytes: '%s'", n, s);
  json_error_t jerr;
  json_t *m = json_loadb(s, (size_t)(nl - s), JSON_REJECT_DUPLICATES, &jerr);
  if (!m)
    fail_msg("reply '%s' is not valid JSON/UTF-8: %s", s, jerr.text);
  free(s);
  assert_true(json_is_false(json_object_get(m, "ok")));
  assert_string_equal(json_string_value(json_object_get(json_object_get(m, "error"), "code")),
                      code);
  assert_true(json_is_string(json_object_get(json_object_get(m, "error"), "message")));
  return m;
}

static void line_gets_error(fixture_t *f, const char *line, const char *code) {
  gpumd_proto_line(&f->c, line, strlen(line));
  json_t *m = take_one_error(f, code);
  assert_true(json_is_null(json_object_get(m, "id")));
  json_decref(m);
}

/* list's request: defaults, each filter, and every bad value refused with its field named. */
static void test_list_decode(void **state) {
  (void)state;
  gpumd_list_req_t q;
  json_t *j = json_pack("{s:s, s:i}", "op", "list", "id", 1);
  assert_int_equal(gpumd_list_decode(j, &q), 0);
  assert_int_equal(q.limit, GPUMD_LIST_LIMIT_DEFAULT);
  assert_int_equal(q.after, 0);
  assert_false(q.all || q.uid_set || q.states || q.label);
  assert_true(q.budget > 0 && q.budget + GPUMD_LIST_ENVELOPE <= GPUMD_MAX_MESSAGE);
  json_decref(j);
  j = json_pack("{s:s, s:i, s:s, s:[s,s], s:i, s:s, s:b}", "op", "list", "limit", 7, "cursor",
                "c1.42", "state", "QUEUED", "GRANTED", "uid", 1000, "label", "train-*", "all", 1);
  assert_int_equal(gpumd_list_decode(j, &q), 0);
  assert_int_equal(q.limit, 7);
  assert_int_equal(q.after, 42);
  assert_int_equal(q.states, (1u << GPUMD_RESV_QUEUED) | (1u << GPUMD_RESV_GRANTED));
  assert_true(q.uid_set && q.uid == 1000 && q.all);
  assert_string_equal(q.label, "train-*");
  assert_false(q.total_set);
  json_decref(j);
  /* A filtered walk's cursor carries the total its first page counted. */
  j = json_pack("{s:s, s:s}", "op", "list", "cursor", "c1.42.9876");
  assert_int_equal(gpumd_list_decode(j, &q), 0);
  assert_true(q.after == 42 && q.total_set && q.total == 9876);
  json_decref(j);
  /* A long request id leaves the lists less room. */
  char id[2048];
  memset(id, 'x', sizeof id - 1);
  id[sizeof id - 1] = '\0';
  j = json_pack("{s:s, s:s}", "op", "list", "id", id);
  size_t small = q.budget;
  assert_int_equal(gpumd_list_decode(j, &q), 0);
  assert_true(q.budget + sizeof id <= GPUMD_MAX_MESSAGE && q.budget < small);
  json_decref(j);
  static const char *const bad[] = {"{\"limit\": 0}",
                                    "{\"limit\": 10001}",
                                    "{\"limit\": \"5\"}",
                                    "{\"limit\": 1.5}",
                                    "{\"cursor\": \"\"}",
                                    "{\"cursor\": \"c1.\"}",
                                    "{\"cursor\": \"c1.0\"}",
                                    "{\"cursor\": \"c1.01\"}",
                                    "{\"cursor\": \"c1.-1\"}",
                                    "{\"cursor\": 3}",
                                    "{\"cursor\": \"r-5\"}",
                                    "{\"cursor\": \"c1.99999999999999999999\"}",
                                    "{\"cursor\": \"c1.12.\"}",
                                    "{\"cursor\": \"c1.12.0\"}",
                                    "{\"cursor\": \"c1.12.07\"}",
                                    "{\"cursor\": \"c1.12.3.4\"}",
                                    "{\"cursor\": \"c1.12.x\"}",
                                    "{\"cursor\": \"c1.12.99999999999999999999\"}",
                                    "{\"state\": \"ENDED\"}",
                                    "{\"state\": [\"QUEUED\", 1]}",
                                    "{\"state\": 1}",
                                    "{\"uid\": -1}",
                                    "{\"uid\": \"root\"}",
                                    "{\"label\": 5}",
                                    "{\"sort\": \"id\"}",
                                    "{\"all\": 1}",
                                    NULL};
  static const char *const field[] = {
      "limit",  "limit",  "limit",  "limit",  "cursor", "cursor", "cursor", "cursor", "cursor",
      "cursor", "cursor", "cursor", "cursor", "cursor", "cursor", "cursor", "cursor", "cursor",
      "state",  "state",  "state",  "uid",    "uid",    "label",  "sort",   "all"};
  for (size_t i = 0; bad[i]; i++) {
    j = json_loads(bad[i], 0, NULL);
    assert_non_null(j);
    assert_int_equal(gpumd_list_decode(j, &q), GPUM_EINVAL);
    if (!strstr(gpum_last_error(), field[i]))
      fail_msg("%s: '%s' does not name %s", bad[i], gpum_last_error(), field[i]);
    json_decref(j);
  }
  char label[GPUMD_RESV_LABEL_LEN + 2];
  memset(label, 'l', sizeof label - 1);
  label[sizeof label - 1] = '\0';
  j = json_pack("{s:s}", "label", label);
  assert_int_equal(gpumd_list_decode(j, &q), GPUM_EINVAL);
  json_decref(j);
}

static void test_bad_escape_before_utf8_gets_one_reply(void **state) {
  fixture_t *f = *state;
  line_gets_error(f, "[\"\\\xc3\xa9\"]", "EPARSE");                             /* ["\é"] */
  line_gets_error(f, "{\"id\":\"\\\xe4\xb8\xad\",\"op\":\"hello\"}", "EPARSE"); /* "\中" */
  line_gets_error(f, "[\"\\\xf0\x9f\x98\x80\"]", "EPARSE");
  line_gets_error(f, "[\"\\\xc3\"]", "EPARSE");         /* a lone lead byte */
  line_gets_error(f, "[\"\xe4\xb8\"]", "EPARSE");       /* a cut character */
  line_gets_error(f, "{\"a\":1,\"\xff\":2}", "EPARSE"); /* not UTF-8 at all */
}

static void test_non_object_is_eproto(void **state) {
  fixture_t *f = *state;
  static const char *const values[] = {"1",    "\"x\"", "null",   "true",
                                       "-2.5", "[]",    "[1, 2]", "\"\xc3\xa9\""};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
    line_gets_error(f, values[i], "EPROTO");
  line_gets_error(f, "1 2", "EPARSE"); /* not one JSON value */
}

static void test_error_text_never_cuts_utf8(void **state) {
  fixture_t *f = *state;
  char big[3000] = "x"; /* 1 + 3 x 999 bytes: the 1 KiB cut falls inside a character */
  for (size_t i = 1; i + 3 < sizeof big; i += 3)
    memcpy(big + i, "\xe4\xb8\xad", 4);
  gpumd_reply_err(&f->c, NULL, GPUM_EINVAL, "%s", big);
  json_t *m = take_one_error(f, "EINVAL");
  const char *msg = json_string_value(json_object_get(json_object_get(m, "error"), "message"));
  size_t n = strlen(msg);
  assert_true(n > 900 && n < 1024);
  assert_string_equal(msg + n - 3, "...");
  assert_null(strchr(msg, '?')); /* nothing replaced: the cut was before a character */
  json_decref(m);

  char out[8];
  gpumd_utf8_clean("a\xc3\xa9\xff\xe4\xb8", out, sizeof out);
  assert_string_equal(out, "a\xc3\xa9???");
  gpumd_utf8_clean("ab\xe4\xb8\xad\xe4\xb8\xad", out, sizeof out); /* a whole character or none */
  assert_string_equal(out, "ab\xe4\xb8\xad");
}

static void test_reply_that_cannot_be_built(void **state) {
  fixture_t *f = *state;
  json_t *id = json_integer(42);
  /* What json_pack gives for a body holding text that is not UTF-8. */
  json_t *body = json_pack("{s:s}", "label", "\xc3");
  assert_null(body);
  gpumd_reply_ok(&f->c, id, body);
  json_t *m = take_one_error(f, "EINTERNAL");
  assert_true(json_equal(json_object_get(m, "id"), id));
  json_decref(m);
  json_decref(id);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_depth_counts_nesting),
      cmocka_unit_test(test_depth_skips_strings),
      cmocka_unit_test(test_depth_stops_past_limit),
      cmocka_unit_test(test_check_fields),
      cmocka_unit_test(test_json_writer_matches_jansson),
      cmocka_unit_test(test_json_writer_word_paths),
      cmocka_unit_test(test_json_reals),
      cmocka_unit_test(test_dec_u64),
      cmocka_unit_test(test_shared_names),
      cmocka_unit_test(test_list_decode),
      cmocka_unit_test_setup_teardown(test_bad_escape_before_utf8_gets_one_reply, setup, teardown),
      cmocka_unit_test_setup_teardown(test_non_object_is_eproto, setup, teardown),
      cmocka_unit_test_setup_teardown(test_error_text_never_cuts_utf8, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reply_that_cannot_be_built, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
