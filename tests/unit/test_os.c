/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the OS layer (src/common/os.c) and the JSON escaping every hand-written JSON
 * of gpum shares (src/lib/core/strbuf.c): the clocks, /proc/PID/stat parsing (a command name
 * with spaces and ')', malformed lines) and reading (this process, a missing pid), and the
 * escape of every byte class.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <gpum/clock.h>

#include "core/options_internal.h"
#include "os_internal.h"

static void test_clocks(void **state) {
  (void)state;
  uint64_t a = gpum__os_mono_ns(), b = gpum_clock_mono_ns();
  assert_true(b >= a);
  assert_true(gpum__os_mono_ms() * 1000000u <= gpum__os_mono_ns());
  uint64_t real = gpum_clock_real_ns();
  assert_true(real > 1700000000ull * 1000000000ull); /* after November 2023 */
  assert_true(gpum__os_real_ns() >= real);
}

static void test_parse_proc_stat(void **state) {
  (void)state;
  gpum__os_proc_stat_t st;
  static const char line[] =
      "4242 (my (odd) cmd) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 "
      "12345 67 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  assert_int_equal(gpum__os_parse_proc_stat(line, &st), 0);
  assert_int_equal(st.state, 'S');
  assert_int_equal(st.ppid, 17);
  assert_int_equal(st.start_time, 987654);
  assert_int_equal(gpum__os_parse_proc_stat("12 (x) S 1 2 3", &st), -EINVAL); /* short */
  assert_int_equal(gpum__os_parse_proc_stat("12 x S 1", &st), -EINVAL);       /* no ')' */
  assert_int_equal(gpum__os_parse_proc_stat("12 (x)", &st), -EINVAL);
  static const char bad[] = "1 (x) R q 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0\n";
  assert_int_equal(gpum__os_parse_proc_stat(bad, &st), -EINVAL); /* ppid not a number */
}

static void test_read_proc_stat(void **state) {
  (void)state;
  gpum__os_proc_stat_t me, again;
  assert_int_equal(gpum__os_proc_stat((int)getpid(), &me), 0);
  assert_int_equal(me.ppid, (int)getppid());
  assert_true(me.state == 'R' || me.state == 'S');
  assert_true(me.start_time > 0);
  assert_int_equal(gpum__os_proc_stat((int)getpid(), &again), 0);
  assert_int_equal(again.start_time, me.start_time); /* with the pid, it names the process */
  assert_int_equal(gpum__os_proc_stat(0x7ffffff0, &me), -ENOENT);
}

static void test_json_escape(void **state) {
  (void)state;
  char esc[6];
  assert_int_equal(gpum__json_escape('a', esc), 0);
  assert_int_equal(gpum__json_escape(0xc3, esc), 0); /* UTF-8 goes as it is */
  assert_int_equal(gpum__json_escape('"', esc), 2);
  assert_memory_equal(esc, "\\\"", 2);
  assert_int_equal(gpum__json_escape('\n', esc), 2);
  assert_memory_equal(esc, "\\n", 2);
  assert_int_equal(gpum__json_escape(0x1f, esc), 6);
  assert_memory_equal(esc, "\\u001F", 6);
  gpum__strbuf_t b = {0};
  static const char in[] = "a\"b\\c\td\x01\xc3\xa9";
  gpum__strbuf_json(&b, in, sizeof in - 1);
  char *out = NULL;
  assert_int_equal(gpum__strbuf_finish(&b, &out), 0);
  assert_string_equal(out, "\"a\\\"b\\\\c\\td\\u0001\xc3\xa9\"");
  free(out);
  gpum__strbuf_t e = {0};
  gpum__strbuf_json(&e, "", 0);
  assert_int_equal(gpum__strbuf_finish(&e, &out), 0);
  assert_string_equal(out, "\"\"");
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_clocks),
      cmocka_unit_test(test_parse_proc_stat),
      cmocka_unit_test(test_read_proc_stat),
      cmocka_unit_test(test_json_escape),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
