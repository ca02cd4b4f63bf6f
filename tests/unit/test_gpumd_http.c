/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the REST API's pure pieces (src/gpumd/http*.c): parsing http.listen (IPv4,
 * IPv6, localhost, loopback detection, bad hosts and ports), the token file (created 0600
 * with 64 hex digits, read back, refused when readable by others, too short, with spaces, or
 * missing without create), the constant-time token comparison, route matching with an {ID}
 * segment, the rule for calls without a token (a non-loopback listener refuses all; on
 * loopback a call that changes state needs the caller's owner known), the mapping of gpum
 * error codes to HTTP statuses, and the UTF-8 cleaning of error messages that quote a client's
 * bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <gpum/error.h>

#include "http_internal.h"

static void test_parse_listen(void **state) {
  (void)state;
  char host[64];
  unsigned port = 1;
  bool lo = false;
  assert_int_equal(gpumd_http_parse_listen("127.0.0.1:8642", host, sizeof host, &port, &lo), 0);
  assert_string_equal(host, "127.0.0.1");
  assert_int_equal(port, 8642);
  assert_true(lo);
  assert_int_equal(gpumd_http_parse_listen("127.8.9.10:0", host, sizeof host, &port, &lo), 0);
  assert_true(lo);
  assert_int_equal(port, 0);
  assert_int_equal(gpumd_http_parse_listen("localhost:80", host, sizeof host, &port, &lo), 0);
  assert_string_equal(host, "127.0.0.1");
  assert_true(lo);
  assert_int_equal(gpumd_http_parse_listen("[::1]:9000", host, sizeof host, &port, &lo), 0);
  assert_string_equal(host, "::1");
  assert_true(lo);
  assert_int_equal(gpumd_http_parse_listen("0.0.0.0:8642", host, sizeof host, &port, &lo), 0);
  assert_false(lo);
  assert_int_equal(gpumd_http_parse_listen("[::]:8642", host, sizeof host, &port, &lo), 0);
  assert_false(lo);
  assert_int_equal(gpumd_http_parse_listen("10.1.2.3:1", host, sizeof host, &port, &lo), 0);
  assert_false(lo);
  static const char *const bad[] = {
      "8642",         ":8642",          "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:65536",
      "127.0.0.1:-1", "example.com:80", "[::1:80",    "::1:80"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    gpum_error_clear();
    assert_int_equal(gpumd_http_parse_listen(bad[i], host, sizeof host, &port, &lo), GPUM_EINVAL);
    assert_non_null(strstr(gpum_last_error(), "http.listen"));
  }
}

static char dir[64];

static int make_dir(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/gpum-http-unit.XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static void write_file(const char *path, const char *text, mode_t mode) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  assert_int_equal(chmod(path, mode), 0);
}

static void test_token_file(void **state) {
  (void)state;
  char path[128], tok[GPUMD_HTTP_TOKEN_HEX + 1], again[GPUMD_HTTP_TOKEN_HEX + 1];
  snprintf(path, sizeof path, "%s/http.token", dir);
  unlink(path);
  assert_int_equal(gpumd_http_token_load(path, false, tok, sizeof tok), GPUM_EIO);
  assert_int_equal(gpumd_http_token_load(path, true, tok, sizeof tok), 0);
  assert_int_equal(strlen(tok), GPUMD_HTTP_TOKEN_HEX);
  assert_int_equal(strspn(tok, "0123456789abcdef"), GPUMD_HTTP_TOKEN_HEX);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_int_equal(gpumd_http_token_load(path, true, again, sizeof again), 0);
  assert_string_equal(tok, again); /* read back, not replaced */
  chmod(path, 0640);
  gpum_error_clear();
  assert_int_equal(gpumd_http_token_load(path, true, again, sizeof again), GPUM_EPERM);
  assert_non_null(strstr(gpum_last_error(), "chmod 600"));
  write_file(path, "short\n", 0600);
  assert_int_equal(gpumd_http_token_load(path, false, again, sizeof again), GPUM_EINVAL);
  write_file(path, "has a space in the middle\n", 0600);
  assert_int_equal(gpumd_http_token_load(path, false, again, sizeof again), GPUM_EINVAL);
  write_file(path, "0123456789abcdef-hand-made\r\n", 0600);
  assert_int_equal(gpumd_http_token_load(path, false, again, sizeof again), 0);
  assert_string_equal(again, "0123456789abcdef-hand-made");
  unlink(path);
  rmdir(dir);
}

static void test_token_matches(void **state) {
  (void)state;
  const char *want = "0123456789abcdef0123456789abcdef";
  assert_true(gpumd_http_token_matches(want, want, strlen(want)));
  assert_false(gpumd_http_token_matches(want, want, strlen(want) - 1));
  assert_false(gpumd_http_token_matches(want, "0123456789abcdef0123456789abcdeX", 32));
  assert_false(gpumd_http_token_matches(want, "", 0));
  assert_false(gpumd_http_token_matches("", "", 0)); /* no token: nothing matches */
  char longer[80];
  snprintf(longer, sizeof longer, "%sxx", want);
  assert_false(gpumd_http_token_matches(want, longer, strlen(longer)));
}

static void test_path_match(void **state) {
  (void)state;
  char id[64] = "";
  assert_true(gpumd_http_path_match("/api/v1/gpu/status", "/api/v1/gpu/status", id, sizeof id));
  assert_false(gpumd_http_path_match("/api/v1/gpu/status", "/api/v1/gpu/status/", id, sizeof id));
  assert_true(gpumd_http_path_match("/api/v1/reservations/{ID}", "/api/v1/reservations/r-7", id,
                                    sizeof id));
  assert_string_equal(id, "r-7");
  assert_false(
      gpumd_http_path_match("/api/v1/reservations/{ID}", "/api/v1/reservations/", id, sizeof id));
  assert_false(gpumd_http_path_match("/api/v1/reservations/{ID}", "/api/v1/reservations/r-7/renew",
                                     id, sizeof id));
  assert_true(gpumd_http_path_match("/api/v1/reservations/{ID}/renew",
                                    "/api/v1/reservations/r-12/renew", id, sizeof id));
  assert_string_equal(id, "r-12");
  assert_false(gpumd_http_path_match("/api/v1/reservations/{ID}/renew",
                                     "/api/v1/reservations/r-12/renewal", id, sizeof id));
  char small[4];
  assert_false(gpumd_http_path_match("/r/{ID}", "/r/r-1234", small, sizeof small));
}

static void test_tokenless_rule(void **state) {
  (void)state;
  const char *msg = NULL;
  /* A non-loopback listener: every call needs the token, whoever the caller is. */
  for (int known = 0; known < 2; known++)
    for (int mutating = 0; mutating < 2; mutating++) {
      msg = NULL;
      assert_int_equal(gpumd_http_tokenless_rule(false, known, mutating, &msg), 401);
      assert_non_null(strstr(msg, "non-loopback"));
    }
  /* Loopback: reads are open; a change needs the owner of the caller's socket. */
  assert_int_equal(gpumd_http_tokenless_rule(true, false, false, &msg), 0);
  assert_int_equal(gpumd_http_tokenless_rule(true, true, false, &msg), 0);
  assert_int_equal(gpumd_http_tokenless_rule(true, true, true, &msg), 0);
  msg = NULL;
  assert_int_equal(gpumd_http_tokenless_rule(true, false, true, &msg), 401);
  assert_non_null(strstr(msg, "Authorization: Bearer"));
  assert_non_null(strstr(msg, "owner"));
}

static void test_status_of(void **state) {
  (void)state;
  assert_int_equal(gpumd_http_status_of(GPUM_EINVAL), 400);
  assert_int_equal(gpumd_http_status_of(GPUM_EPARSE), 400);
  assert_int_equal(gpumd_http_status_of(GPUM_EPERM), 403);
  assert_int_equal(gpumd_http_status_of(GPUM_ENOENT), 404);
  assert_int_equal(gpumd_http_status_of(GPUM_ESTATE), 409);
  assert_int_equal(gpumd_http_status_of(GPUM_EBUSY), 409);
  assert_int_equal(gpumd_http_status_of(GPUM_ENEVERFIT), 422);
  assert_int_equal(gpumd_http_status_of(GPUM_EAGAIN), 503);
  assert_int_equal(gpumd_http_status_of(GPUM_ENOMEM), 500);
  assert_int_equal(gpumd_http_status_of(GPUM_EINTERNAL), 500);
}

static void test_utf8_clean(void **state) {
  (void)state;
  char out[16];
  gpumd_utf8_clean("plain r-1", out, sizeof out);
  assert_string_equal(out, "plain r-1");
  gpumd_utf8_clean("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", out, sizeof out);
  assert_string_equal(out, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  gpumd_utf8_clean("a\xff\xfe", out, sizeof out); /* not UTF-8 at all */
  assert_string_equal(out, "a??");
  gpumd_utf8_clean("x\xc3", out, sizeof out); /* cut inside a character */
  assert_string_equal(out, "x?");
  gpumd_utf8_clean("\xc0\xaf\xe0\x80\xaf", out, sizeof out); /* overlong '/' */
  assert_string_equal(out, "?????");
  gpumd_utf8_clean("\xed\xa0\x80", out, sizeof out); /* a surrogate, U+D800 */
  assert_string_equal(out, "???");
  gpumd_utf8_clean("\xf4\x90\x80\x80", out, sizeof out); /* past U+10FFFF */
  assert_string_equal(out, "????");
  gpumd_utf8_clean("\xf4\x8f\xbf\xbf", out, sizeof out); /* U+10FFFF itself */
  assert_string_equal(out, "\xf4\x8f\xbf\xbf");
  char small[5];
  gpumd_utf8_clean("ab\xe2\x82\xac", small, sizeof small); /* the euro does not fit */
  assert_string_equal(small, "ab");
  gpumd_utf8_clean("abcdefgh", small, sizeof small);
  assert_string_equal(small, "abcd");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_listen),   cmocka_unit_test_setup(test_token_file, make_dir),
      cmocka_unit_test(test_token_matches),  cmocka_unit_test(test_path_match),
      cmocka_unit_test(test_tokenless_rule), cmocka_unit_test(test_status_of),
      cmocka_unit_test(test_utf8_clean),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
