/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for figures and their units (gpum/size.h): the unit and scale read from each
 * suffix, a name that only looks like one, and each unit's text as gpum top, gpum jobs and the
 * dashboard show it (sizes in IEC units, times scaled to the nearest readable unit, ratios in
 * percent, counts with SI prefixes past 9999), non-finite values and truncation.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/size.h>

static void test_unit_of_names(void **state) {
  (void)state;
  static const struct {
    const char *name;
    gpum_unit_t unit;
    double scale;
    size_t stem; /* the name's length without its unit's suffix */
  } cases[] = {
      {"allocated_bytes", GPUM_UNIT_BYTES, 1, 9},
      {"queue_p99_us", GPUM_UNIT_SECONDS, 1e-6, 9},
      {"step_ms", GPUM_UNIT_SECONDS, 1e-3, 4},
      {"wait_ns", GPUM_UNIT_SECONDS, 1e-9, 4},
      {"run_seconds", GPUM_UNIT_SECONDS, 1, 3},
      {"items_per_s", GPUM_UNIT_PER_SECOND, 1, 5},
      {"tokens_per_second", GPUM_UNIT_PER_SECOND, 1, 6},
      {"hit_ratio", GPUM_UNIT_RATIO, 1, 3},
      {"util_percent", GPUM_UNIT_RATIO, 0.01, 4},
      {"queued", GPUM_UNIT_COUNT, 1, 6},
      {"bytes", GPUM_UNIT_COUNT, 1, 5}, /* a suffix needs a name before it */
      {"status", GPUM_UNIT_COUNT, 1, 6},
      {"bus", GPUM_UNIT_COUNT, 1, 3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double scale = -1;
    assert_int_equal(gpum_figure_unit(cases[i].name, &scale), cases[i].unit);
    assert_true(fabs(scale - cases[i].scale) < 1e-15);
    assert_int_equal(gpum_figure_stem_len(cases[i].name), cases[i].stem);
  }
  assert_int_equal(gpum_figure_unit(NULL, NULL), GPUM_UNIT_COUNT);
  assert_int_equal(gpum_figure_stem_len(NULL), 0);
  assert_string_equal(gpum_unit_name(GPUM_UNIT_BYTES), "bytes");
  assert_string_equal(gpum_unit_name(GPUM_UNIT_SECONDS), "seconds");
  assert_string_equal(gpum_unit_name(GPUM_UNIT_RATIO), "ratio");
  assert_string_equal(gpum_unit_name(GPUM_UNIT_PER_SECOND), "per_second");
  assert_string_equal(gpum_unit_name(GPUM_UNIT_COUNT), "");
}

static void test_figure_text(void **state) {
  (void)state;
  static const struct {
    const char *name;
    double value;
    const char *text;
  } cases[] = {
      {"allocated_bytes", 2684354560.0, "2.50 GiB"},
      {"allocated_bytes", 512, "512 B"},
      {"queue_p99_us", 11400, "11.4 ms"},
      {"queue_p50_us", 850, "850 us"},
      {"wait_ns", 12, "12 ns"},
      {"run_seconds", 2.5, "2.5 s"},
      {"run_seconds", 5400, "1h30m"},
      {"run_seconds", 0, "0 s"},
      {"hit_ratio", 0.93, "93.0%"},
      {"util_percent", 45, "45.0%"},
      {"items_per_s", 1234, "1234/s"},
      {"items_per_s", 123456, "123k/s"},
      {"items_per_s", 1234.5, "1234/s"}, /* never %g's "1.23e+03/s" */
      {"mean_batch", 999.7, "1000"},
      {"step_ms", 999.96, "1000 ms"},
      {"queued", 42, "42"},
      {"mean_batch", 2.345, "2.35"},
      {"submitted", 12345, "12.3k"},
      {"submitted", 4560000, "4.56M"},
      {"submitted", 999999, "1M"},
      {"queued", -3, "-3"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char buf[GPUM_FIGURE_BUFSZ];
    assert_string_equal(gpum_figure_format(cases[i].name, cases[i].value, buf, sizeof buf),
                        cases[i].text);
  }
}

static void test_odd_values(void **state) {
  (void)state;
  char buf[GPUM_FIGURE_BUFSZ];
  assert_string_equal(gpum_value_format(GPUM_UNIT_BYTES, NAN, buf, sizeof buf), "nan");
  assert_string_equal(gpum_value_format(GPUM_UNIT_COUNT, INFINITY, buf, sizeof buf), "inf");
  assert_string_equal(gpum_value_format(GPUM_UNIT_SECONDS, -INFINITY, buf, sizeof buf), "-inf");
  assert_string_equal(gpum_value_format(GPUM_UNIT_BYTES, -5, buf, sizeof buf), "-5 B");
  char small[5];
  assert_string_equal(gpum_value_format(GPUM_UNIT_BYTES, 2684354560.0, small, sizeof small),
                      "2.50");
  assert_null(gpum_value_format(GPUM_UNIT_COUNT, 1, NULL, 0));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unit_of_names),
      cmocka_unit_test(test_figure_text),
      cmocka_unit_test(test_odd_values),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
