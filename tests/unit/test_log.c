/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for logging: silent by default, level filtering, the key=value line format (the
 * message split from the fields, quotes and newlines escaped), level names and parsing with bad
 * input, stderr output with a timestamp (fd 2 redirected to a temporary file), the callback
 * alongside a target, no re-entry from a callback, errno preserved, and many threads logging at
 * once without torn lines.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/log.h>

typedef struct {
  pthread_mutex_t lock;
  int count;
  char last[4096];
  gpum_log_level_t last_level;
  char last_module[64];
  int bad_lines;
} capture_t;

static capture_t cap = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void capture_fn(gpum_log_level_t level, const char *module, const char *line, void *arg) {
  capture_t *c = arg;
  pthread_mutex_lock(&c->lock);
  c->count++;
  c->last_level = level;
  snprintf(c->last, sizeof c->last, "%s", line);
  snprintf(c->last_module, sizeof c->last_module, "%s", module);
  pthread_mutex_unlock(&c->lock);
}

static int reset(void **state) {
  (void)state;
  gpum_log_set_target(GPUM_LOG_TARGET_NONE);
  gpum_log_set_level(GPUM_LOG_TRACE);
  cap.count = 0;
  cap.last[0] = '\0';
  cap.bad_lines = 0;
  gpum_log_set_callback(capture_fn, &cap);
  return 0;
}

static int restore(void **state) {
  (void)state;
  gpum_log_set_callback(NULL, NULL);
  gpum_log_set_target(GPUM_LOG_TARGET_NONE);
  gpum_log_set_level(GPUM_LOG_WARN);
  return 0;
}

static void test_defaults_are_silent(void **state) {
  (void)state;
  /* Runs first, before any setter: the process-wide defaults. */
  assert_int_equal(gpum_log_get_level(), GPUM_LOG_WARN);
  /* With target NONE and no callback nothing is written: fd 2 stays empty. */
  char path[] = "/tmp/gpum-test-log-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  int saved = dup(2);
  dup2(fd, 2);
  gpum_log(GPUM_LOG_ERROR, "test", "should not appear");
  dup2(saved, 2);
  close(saved);
  assert_int_equal(lseek(fd, 0, SEEK_END), 0);
  close(fd);
  unlink(path);
}

static void test_line_format(void **state) {
  (void)state;
  gpum_log(GPUM_LOG_INFO, "device", "backend selected backend=%s count=%u", "nvml", 2u);
  assert_int_equal(cap.count, 1);
  assert_string_equal(cap.last,
                      "level=info module=device msg=\"backend selected\" backend=nvml count=2");
  assert_int_equal(cap.last_level, GPUM_LOG_INFO);
  assert_string_equal(cap.last_module, "device");
}

static void test_message_only_and_fields_only(void **state) {
  (void)state;
  gpum_log(GPUM_LOG_WARN, "x", "plain message");
  assert_string_equal(cap.last, "level=warn module=x msg=\"plain message\"");
  gpum_log(GPUM_LOG_WARN, "x", "a=1 b=2");
  assert_string_equal(cap.last, "level=warn module=x msg=\"\" a=1 b=2");
  gpum_log(GPUM_LOG_WARN, NULL, "no module");
  assert_string_equal(cap.last, "level=warn module=gpum msg=\"no module\"");
  /* '=' inside a word that is not a key does not start the fields */
  gpum_log(GPUM_LOG_WARN, "x", "1+1=2 is true k=v");
  assert_string_equal(cap.last, "level=warn module=x msg=\"1+1=2 is true\" k=v");
}

static void test_escaping_keeps_one_line(void **state) {
  (void)state;
  gpum_log(GPUM_LOG_ERROR, "x", "say \"hi\"\\ now\nsecond line err=%s", "a\nb");
  assert_string_equal(cap.last, "level=error module=x msg=\"say \\\"hi\\\"\\\\ now\\nsecond line\" "
                                "err=a\\nb");
  assert_null(strchr(cap.last, '\n'));
  gpum_log(GPUM_LOG_ERROR, "x", "bell\a");
  assert_string_equal(cap.last, "level=error module=x msg=\"bell\\x07\"");
}

static void test_level_filtering(void **state) {
  (void)state;
  gpum_log_set_level(GPUM_LOG_WARN);
  gpum_log(GPUM_LOG_DEBUG, "x", "dropped");
  gpum_log(GPUM_LOG_INFO, "x", "dropped");
  assert_int_equal(cap.count, 0);
  gpum_log(GPUM_LOG_WARN, "x", "kept");
  gpum_log(GPUM_LOG_ERROR, "x", "kept");
  assert_int_equal(cap.count, 2);
  gpum_log_set_level(GPUM_LOG_OFF);
  gpum_log(GPUM_LOG_ERROR, "x", "dropped");
  assert_int_equal(cap.count, 2);
  /* OFF and out-of-range levels are never lines, whatever the threshold */
  gpum_log_set_level(GPUM_LOG_TRACE);
  gpum_log(GPUM_LOG_OFF, "x", "never");
  gpum_log((gpum_log_level_t)99, "x", "never");
  gpum_log((gpum_log_level_t)-1, "x", "never");
  assert_int_equal(cap.count, 2);
  /* a bad level passed to the setter is ignored */
  gpum_log_set_level((gpum_log_level_t)42);
  assert_int_equal(gpum_log_get_level(), GPUM_LOG_TRACE);
}

static void test_level_names_and_parse(void **state) {
  (void)state;
  static const char *const names[] = {"trace", "debug", "info", "warn", "error", "off"};
  for (int i = GPUM_LOG_TRACE; i <= GPUM_LOG_OFF; i++) {
    gpum_log_level_t l = GPUM_LOG_ERROR;
    assert_string_equal(gpum_log_level_name((gpum_log_level_t)i), names[i]);
    assert_int_equal(gpum_log_level_parse(names[i], &l), 0);
    assert_int_equal(l, i);
  }
  gpum_log_level_t l = GPUM_LOG_INFO;
  assert_int_equal(gpum_log_level_parse("DEBUG", &l), 0);
  assert_int_equal(l, GPUM_LOG_DEBUG);
  assert_string_equal(gpum_log_level_name((gpum_log_level_t)17), "unknown");
  l = GPUM_LOG_INFO;
  assert_int_equal(gpum_log_level_parse("loud", &l), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "'loud'"));
  assert_int_equal(gpum_log_level_parse("", &l), GPUM_EINVAL);
  assert_int_equal(gpum_log_level_parse("warning", &l), GPUM_EINVAL);
  assert_int_equal(gpum_log_level_parse(NULL, &l), GPUM_EINVAL);
  assert_int_equal(l, GPUM_LOG_INFO); /* untouched */
}

/* Runs fn with fd 2 redirected to a temporary file and returns what was written (malloc'd). */
static char *capture_stderr(void (*fn)(void)) {
  char path[] = "/tmp/gpum-test-log-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  int saved = dup(2);
  assert_true(saved >= 0);
  assert_int_equal(dup2(fd, 2), 2);
  fn();
  assert_int_equal(dup2(saved, 2), 2);
  close(saved);
  off_t n = lseek(fd, 0, SEEK_END);
  char *out = calloc(1, (size_t)n + 1);
  assert_non_null(out);
  assert_int_equal(pread(fd, out, (size_t)n, 0), n);
  close(fd);
  unlink(path);
  return out;
}

static void log_two_lines(void) {
  gpum_log_set_target(GPUM_LOG_TARGET_STDERR);
  gpum_log(GPUM_LOG_INFO, "device", "hello k=v");
  gpum_log(GPUM_LOG_DEBUG, "device", "second");
  gpum_log_set_target(GPUM_LOG_TARGET_NONE);
  gpum_log(GPUM_LOG_ERROR, "device", "not written: target is none again");
}

static void test_stderr_target(void **state) {
  (void)state;
  char *out = capture_stderr(log_two_lines);
  /* 2026-11-22T05:12:13.123Z level=info module=device msg="hello" k=v */
  char *second = strchr(out, '\n');
  assert_non_null(second);
  assert_int_equal(strlen(out), (size_t)(strchr(second + 1, '\n') - out) + 1); /* two lines */
  assert_int_equal(out[4], '-');
  assert_int_equal(out[10], 'T');
  assert_int_equal(out[19], '.');
  assert_int_equal(out[23], 'Z');
  assert_memory_equal(out + 24, " level=info module=device msg=\"hello\" k=v\n", 42);
  assert_non_null(strstr(second + 1, "level=debug module=device msg=\"second\"\n"));
  assert_null(strstr(out, "not written"));
  /* the callback saw all three: it does not depend on the target */
  assert_int_equal(cap.count, 3);
  free(out);
}

static void log_after_bad_target(void) {
  gpum_log_set_target(GPUM_LOG_TARGET_STDERR);
  gpum_log_set_target((gpum_log_target_t)9); /* ignored: stderr stays the target */
  gpum_log(GPUM_LOG_ERROR, "x", "still on stderr");
  gpum_log_set_target(GPUM_LOG_TARGET_NONE);
}

static void test_bad_target_ignored(void **state) {
  (void)state;
  char *out = capture_stderr(log_after_bad_target);
  assert_non_null(strstr(out, "msg=\"still on stderr\""));
  free(out);
}

static void test_callback_removed(void **state) {
  (void)state;
  gpum_log_set_callback(NULL, NULL);
  gpum_log(GPUM_LOG_ERROR, "x", "nobody hears");
  assert_int_equal(cap.count, 0);
}

static int reentry_calls;
static void reentrant_fn(gpum_log_level_t level, const char *module, const char *line, void *arg) {
  (void)level;
  (void)module;
  (void)line;
  (void)arg;
  reentry_calls++;
  gpum_log(GPUM_LOG_ERROR, "x", "from inside the callback"); /* dropped, not a deadlock */
}

static void test_callback_reentry_dropped(void **state) {
  (void)state;
  reentry_calls = 0;
  gpum_log_set_callback(reentrant_fn, NULL);
  gpum_log(GPUM_LOG_ERROR, "x", "outer");
  assert_int_equal(reentry_calls, 1);
}

static void test_errno_preserved(void **state) {
  (void)state;
  errno = ENOSPC;
  gpum_log(GPUM_LOG_ERROR, "x", "something");
  assert_int_equal(errno, ENOSPC);
}

static void test_long_line_truncated(void **state) {
  (void)state;
  char *big = malloc(10000);
  assert_non_null(big);
  memset(big, 'q', 9999);
  big[9999] = '\0';
  gpum_log(GPUM_LOG_ERROR, "x", "%s", big);
  size_t n = strlen(cap.last);
  assert_true(n < 4096);
  assert_string_equal(cap.last + n - 3, "...");
  free(big);
}

#define THREADS 4
#define PER_THREAD 500

static void *log_worker(void *arg) {
  int id = (int)(intptr_t)arg;
  for (int i = 0; i < PER_THREAD; i++)
    gpum_log(GPUM_LOG_INFO, "thr", "tick thread=%d i=%d", id, i);
  return NULL;
}

static void check_fn(gpum_log_level_t level, const char *module, const char *line, void *arg) {
  capture_t *c = arg;
  (void)level;
  (void)module;
  int t, i;
  /* the lock in the logger serialises callbacks: no torn or interleaved lines */
  if (sscanf(line, "level=info module=thr msg=\"tick\" thread=%d i=%d", &t, &i) != 2)
    c->bad_lines++;
  c->count++;
}

static void test_threads(void **state) {
  (void)state;
  pthread_t th[THREADS];
  gpum_log_set_callback(check_fn, &cap);
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_create(&th[i], NULL, log_worker, (void *)(intptr_t)i), 0);
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  assert_int_equal(cap.count, THREADS * PER_THREAD);
  assert_int_equal(cap.bad_lines, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults_are_silent),
      cmocka_unit_test_setup_teardown(test_line_format, reset, restore),
      cmocka_unit_test_setup_teardown(test_message_only_and_fields_only, reset, restore),
      cmocka_unit_test_setup_teardown(test_escaping_keeps_one_line, reset, restore),
      cmocka_unit_test_setup_teardown(test_level_filtering, reset, restore),
      cmocka_unit_test_setup_teardown(test_level_names_and_parse, reset, restore),
      cmocka_unit_test_setup_teardown(test_stderr_target, reset, restore),
      cmocka_unit_test_setup_teardown(test_bad_target_ignored, reset, restore),
      cmocka_unit_test_setup_teardown(test_callback_removed, reset, restore),
      cmocka_unit_test_setup_teardown(test_callback_reentry_dropped, reset, restore),
      cmocka_unit_test_setup_teardown(test_errno_preserved, reset, restore),
      cmocka_unit_test_setup_teardown(test_long_line_truncated, reset, restore),
      cmocka_unit_test_setup_teardown(test_threads, reset, restore),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
