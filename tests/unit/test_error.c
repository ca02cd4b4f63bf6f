/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the error table and the thread-local detail message: every code has a name
 * and a message, unknown codes are described safely, the detail is per thread, long details are
 * cut at 1 KiB with "..." on a UTF-8 boundary, and a detail may quote the previous one.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/error.h>

static void test_every_code_has_name_and_message(void **state) {
  (void)state;
#define XX(name, value, msg)                        \
  assert_string_equal(gpum_err_name(value), #name); \
  assert_string_equal(gpum_strerror(value), msg);   \
  assert_true((value) < 0);
  GPUM_ERRNO_MAP(XX)
#undef XX
  assert_string_equal(gpum_strerror(GPUM_EDEVOOM), "out of device memory");
  assert_string_equal(gpum_err_name(GPUM_EUNKNOWN_KEY), "EUNKNOWN_KEY");
}

static void test_codes_are_unique(void **state) {
  (void)state;
  static const int codes[] = {
#define XX(name, value, msg) value,
      GPUM_ERRNO_MAP(XX)
#undef XX
  };
  size_t n = sizeof codes / sizeof codes[0];
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      assert_int_not_equal(codes[i], codes[j]);
}

static void test_unknown_and_zero(void **state) {
  (void)state;
  assert_string_equal(gpum_strerror(-9999), "unknown error");
  assert_string_equal(gpum_err_name(-9999), "UNKNOWN");
  assert_string_equal(gpum_strerror(42), "unknown error");
  assert_string_equal(gpum_strerror(0), "success");
  assert_string_equal(gpum_err_name(0), "OK");
}

static void test_error_sets_detail_and_returns_code(void **state) {
  (void)state;
  gpum_error_clear();
  assert_string_equal(gpum_last_error(), "");
  assert_int_equal(gpum_error(GPUM_EINVAL, "bad size '%s' at %d", "8XB", 3), GPUM_EINVAL);
  assert_string_equal(gpum_last_error(), "bad size '8XB' at 3");
  gpum_error_clear();
  assert_string_equal(gpum_last_error(), "");
}

static void test_error_preserves_errno(void **state) {
  (void)state;
  errno = EACCES;
  gpum_error(GPUM_EPERM, "x");
  assert_int_equal(errno, EACCES);
}

static void test_error_can_quote_previous_detail(void **state) {
  (void)state;
  gpum_error(GPUM_ENOENT, "file %s missing", "/a");
  assert_int_equal(gpum_error(GPUM_EIO, "loading config: %s", gpum_last_error()), GPUM_EIO);
  assert_string_equal(gpum_last_error(), "loading config: file /a missing");
}

static void test_truncation_marked(void **state) {
  (void)state;
  char big[3000];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  gpum_error(GPUM_EINVAL, "%s", big);
  const char *d = gpum_last_error();
  size_t n = strlen(d);
  assert_true(n < 1024);
  assert_true(n >= 1000);
  assert_string_equal(d + n - 3, "...");
  assert_int_equal(d[0], 'a');
}

static void test_exact_fit_not_marked(void **state) {
  (void)state;
  char s[1024];
  memset(s, 'b', 1023);
  s[1023] = '\0';
  gpum_error(GPUM_EINVAL, "%s", s);
  assert_int_equal(strlen(gpum_last_error()), 1023);
  assert_int_equal(gpum_last_error()[1022], 'b');
}

static void test_truncation_keeps_utf8_whole(void **state) {
  (void)state;
  /* "é" is two bytes; an odd offset makes the naive cut land inside a character. */
  char s[2100] = "x";
  for (size_t i = 1; i + 2 < sizeof s; i += 2)
    memcpy(s + i, "\xc3\xa9", 3);
  gpum_error(GPUM_EINVAL, "%s", s);
  const char *d = gpum_last_error();
  size_t n = strlen(d);
  assert_string_equal(d + n - 3, "...");
  /* the byte before "..." ends a character: it is the second byte of "é" */
  assert_int_equal((unsigned char)d[n - 4], 0xa9);
}

static void test_null_format_clears(void **state) {
  (void)state;
  gpum_error(GPUM_EINVAL, "something");
  assert_int_equal(gpum_error(GPUM_EIO, NULL), GPUM_EIO);
  assert_string_equal(gpum_last_error(), "");
}

static void *thread_main(void *arg) {
  (void)arg;
  const char *before = gpum_last_error();
  int empty = before[0] == '\0';
  gpum_error(GPUM_EBUSY, "thread detail");
  int same = strcmp(gpum_last_error(), "thread detail") == 0;
  return (void *)(intptr_t)(empty && same);
}

static void test_detail_is_per_thread(void **state) {
  (void)state;
  pthread_t t;
  void *ok = NULL;
  gpum_error(GPUM_EINVAL, "main detail");
  assert_int_equal(pthread_create(&t, NULL, thread_main, NULL), 0);
  assert_int_equal(pthread_join(t, &ok), 0);
  assert_true((intptr_t)ok);
  assert_string_equal(gpum_last_error(), "main detail");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_code_has_name_and_message),
      cmocka_unit_test(test_codes_are_unique),
      cmocka_unit_test(test_unknown_and_zero),
      cmocka_unit_test(test_error_sets_detail_and_returns_code),
      cmocka_unit_test(test_error_preserves_errno),
      cmocka_unit_test(test_error_can_quote_previous_detail),
      cmocka_unit_test(test_truncation_marked),
      cmocka_unit_test(test_exact_fit_not_marked),
      cmocka_unit_test(test_truncation_keeps_utf8_whole),
      cmocka_unit_test(test_null_format_clears),
      cmocka_unit_test(test_detail_is_per_thread),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
