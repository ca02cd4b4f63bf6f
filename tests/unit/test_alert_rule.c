/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for alert rule parsing: the accepted forms and their normalised text, thresholds
 * with units and symbolic temperature thresholds, device and Xid lists, and every rejection
 * with the column and the expectation in its message (nothing is added to an engine on error).
 * Also the derived metrics (memory_used_pct, power_pct) and value formatting.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/alert.h>
#include <gpum/error.h>
#include <gpum/monitor.h>

#include "monitor/alert_internal.h"

#define GiB (UINT64_C(1) << 30)

typedef struct {
  const char *text;
  const char *normalised;
} good_t;

static void test_rule_normalises(void **state) {
  (void)state;
  static const good_t cases[] = {
      {"temperature > 80 WARNING", "temperature > 80 WARNING"},
      {"Temperature>slowdown-5 for 10s warning clear slowdown-8",
       "temperature > slowdown-5 for 10s WARNING clear slowdown-8"},
      {"memory_used_pct > 90% for 30s WARNING clear 85",
       "memory_used_pct > 90% for 30s WARNING clear 85"},
      {"power > 300W for 1m INFO devices 0, 2-3", "power > 300w for 1m INFO devices 0,2-3"},
      {"utilization_gpu <= 5 for 5m INFO clear 10", "utilization_gpu <= 5 for 5m INFO clear 10"},
      {"  xid   any  auto ", "xid any auto"},
      {"xid 79,48 , 94 CRITICAL devices 1", "xid 79,48,94 CRITICAL devices 1"},
      {"xid critical ERROR", "xid critical ERROR"},
      {"health == error CRITICAL", "health == ERROR CRITICAL"},
      {"health != AVAILABLE WARNING for 30s", "health != AVAILABLE for 30s WARNING"},
      {"ecc_uncorrected > 0 CRITICAL", "ecc_uncorrected > 0 CRITICAL"},
      {"clock_sm < 300MHz INFO", "clock_sm < 300mhz INFO"},
      {"CRITICAL devices 0-1,5 temperature", NULL}, /* metric must come first: rejected */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char buf[GPUM_ALERT_RULE_LEN];
    int rc = gpum_alert_rule_check(cases[i].text, buf, sizeof buf);
    if (cases[i].normalised == NULL) {
      assert_int_equal(rc, GPUM_EPARSE);
      continue;
    }
    if (rc != 0)
      fail_msg("'%s': %s", cases[i].text, gpum_last_error());
    assert_string_equal(buf, cases[i].normalised);
    /* The normalised form parses to itself. */
    char again[GPUM_ALERT_RULE_LEN];
    assert_int_equal(gpum_alert_rule_check(buf, again, sizeof again), 0);
    assert_string_equal(again, buf);
  }
}

static void test_rule_fields(void **state) {
  (void)state;
  gpum__alert_rule_t r;
  assert_int_equal(gpum__alert_rule_parse("power > 300W for 1m30s INFO devices 0,2-3", &r), 0);
  assert_int_equal(r.kind, GPUM__RULE_METRIC);
  assert_int_equal(r.metric, GPUM_METRIC_POWER);
  assert_int_equal(r.op, GPUM__OP_GT);
  assert_int_equal(r.threshold.base, GPUM__THR_ABS);
  assert_true(r.threshold.value == 300000.0); /* milliwatts */
  assert_int_equal(r.for_ms, 90000);
  assert_int_equal(r.level, GPUM_ALERT_INFO);
  assert_false(r.has_clear);
  assert_int_equal(r.devices, 0xdull); /* 0, 2, 3 */

  assert_int_equal(gpum__alert_rule_parse("memory_used >= 70GiB ERROR", &r), 0);
  assert_true(r.threshold.value == (double)(70 * GiB));
  assert_int_equal(r.op, GPUM__OP_GE);
  assert_int_equal(r.devices, ~0ull);

  assert_int_equal(gpum__alert_rule_parse("power < 500mW WARNING", &r), 0);
  assert_true(r.threshold.value == 500.0);

  assert_int_equal(gpum__alert_rule_parse("temperature > shutdown-5.5 CRITICAL clear 80C", &r), 0);
  assert_int_equal(r.threshold.base, GPUM__THR_SHUTDOWN);
  assert_true(r.threshold.value == -5.5);
  assert_int_equal(r.clear.base, GPUM__THR_ABS);
  assert_true(r.clear.value == 80.0);
  assert_true(r.has_clear);

  assert_int_equal(gpum__alert_rule_parse("temperature >= slowdown WARNING", &r), 0);
  assert_int_equal(r.threshold.base, GPUM__THR_SLOWDOWN);
  assert_true(r.threshold.value == 0.0);

  assert_int_equal(gpum__alert_rule_parse("xid 79,48 CRITICAL", &r), 0);
  assert_int_equal(r.kind, GPUM__RULE_XID);
  assert_int_equal(r.xid_count, 2);
  assert_int_equal(r.xids[0], 79);
  assert_int_equal(r.xids[1], 48);
  assert_false(r.xid_any);

  assert_int_equal(gpum__alert_rule_parse("xid any auto", &r), 0);
  assert_true(r.xid_any);
  assert_true(r.level_auto);

  assert_int_equal(gpum__alert_rule_parse("health == ERROR for 1m CRITICAL", &r), 0);
  assert_int_equal(r.kind, GPUM__RULE_HEALTH);
  assert_int_equal(r.health_state, GPUM_HEALTH_ERROR);
  assert_int_equal(r.for_ms, 60000);
  assert_int_equal(r.level, GPUM_ALERT_CRITICAL);
}

typedef struct {
  const char *text;
  const char *message; /* expected substring of the detail */
} bad_t;

static void test_rule_rejects(void **state) {
  (void)state;
  static const bad_t cases[] = {
      {"", "column 1: empty rule"},
      {"   ", "column 1: empty rule"},
      {"tempreature > 80 WARNING", "column 1: unknown metric 'tempreature' (expected memory_total"},
      {"temperature 80 WARNING",
       "column 13: expected a comparison (>, >=, <, <=, ==, !=) after 'temperature', found '80'"},
      {"temperature", "column 12: expected a comparison"},
      {"temperature => 80 WARNING", "column 13: expected a comparison"},
      {"temperature >", "column 14: expected a threshold"},
      {"temperature > hot WARNING", "column 15: bad threshold 'hot' for temperature (expected a "
                                    "temperature"},
      {"temperature > 0x50 WARNING", "column 15: bad threshold '0x50'"},
      {"temperature > nan WARNING", "column 15: bad threshold 'nan'"},
      {"temperature > inf WARNING", "column 15: bad threshold 'inf'"},
      {"temperature > slowdown-x WARNING", "column 15: bad threshold 'slowdown-x'"},
      {"temperature > slowdown5 WARNING", "column 15: bad threshold 'slowdown5'"},
      {"power_pct > slowdown WARNING", "column 13: bad threshold 'slowdown' for power_pct"},
      {"power > 300X WARNING", "column 9: bad threshold '300X' for power (expected a power"},
      {"memory_used > lots WARNING", "column 15: bad threshold 'lots' for memory_used"},
      {"utilization_gpu > 50C WARNING", "bad threshold '50C' for utilization_gpu"},
      {"temperature > 80", "column 17: missing level (expected INFO, WARNING, ERROR or CRITICAL)"},
      {"temperature > 80 for 10s", "column 25: missing level"},
      {"temperature > 80 WARN", "column 18: unexpected 'WARN' (expected a level INFO, WARNING, "
                                "ERROR or CRITICAL, or for, clear, devices)"},
      {"temperature > 80 WARNING ERROR", "column 26: a second level 'ERROR'"},
      {"temperature > 80 for", "column 21: expected a duration (such as 30s) after 'for'"},
      {"temperature > 80 for 10x WARNING", "column 22: bad duration '10x' after 'for'"},
      {"temperature > 80 for 1s for 2s WARNING", "column 25: 'for' given twice"},
      {"temperature > 80 WARNING clear", "column 31: expected a threshold"},
      {"temperature > 80 WARNING clear 85",
       "column 32: clear threshold '85' is above the threshold '80': a '>' rule clears at or "
       "below its threshold"},
      {"temperature < 20 WARNING clear 15", "clear threshold '15' is below the threshold '20'"},
      {"temperature > slowdown-5 WARNING clear slowdown-2",
       "clear threshold 'slowdown-2' is above"},
      {"temperature == 80 WARNING clear 79", "column 27: 'clear' needs a >, >=, < or <= rule"},
      {"temperature > 80 WARNING clear 70 clear 60", "column 35: 'clear' given twice"},
      {"temperature > 80 WARNING devices", "column 33: expected device indices"},
      {"temperature > 80 WARNING devices 64", "column 34: bad device list '64'"},
      {"temperature > 80 WARNING devices 3-1", "bad device list '3-1'"},
      {"temperature > 80 WARNING devices 0,,1", "bad device list '0,,1'"},
      {"temperature > 80 WARNING devices 0 devices 1", "'devices' given twice"},
      {"temperature > 80 auto", "column 18: level 'auto' is only for xid rules"},
      {"xid", "column 4: expected any, critical or Xid numbers after 'xid'"},
      {"xid WARNING", "column 5: bad Xid 'WARNING'"},
      {"xid 0 ERROR", "column 5: bad Xid '0'"},
      {"xid 79,x ERROR", "column 8: bad Xid 'x'"},
      {"xid any", "missing level (expected INFO, WARNING, ERROR or CRITICAL or auto)"},
      {"xid any for 1m ERROR", "column 9: xid rules take no 'for'"},
      {"xid any ERROR clear 5", "column 15: only metric rules take 'clear'"},
      {"health > ERROR CRITICAL", "column 8: health rules compare with == or !=, not >"},
      {"health == BROKEN CRITICAL", "column 11: expected a health state (AVAILABLE, BUSY, ERROR "
                                    "or DISABLED), found 'BROKEN'"},
      {"health ==", "column 10: expected a health state"},
      {"health == ERROR CRITICAL clear 1", "only metric rules take 'clear'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gpum__alert_rule_t r;
    int rc = gpum__alert_rule_parse(cases[i].text, &r);
    if (rc != GPUM_EPARSE)
      fail_msg("'%s' gave %d, expected GPUM_EPARSE", cases[i].text, rc);
    if (strstr(gpum_last_error(), cases[i].message) == NULL)
      fail_msg("'%s': message \"%s\" lacks \"%s\"", cases[i].text, gpum_last_error(),
               cases[i].message);
  }
  gpum__alert_rule_t r;
  assert_int_equal(gpum__alert_rule_parse(NULL, &r), GPUM_EINVAL);
}

static void test_rule_too_long(void **state) {
  (void)state;
  char text[1024] = "temperature > 80 WARNING";
  for (int i = 0; i < 50; i++)
    strncat(text, " x", sizeof text - strlen(text) - 1);
  assert_int_equal(gpum_alert_rule_check(text, NULL, 0), GPUM_EPARSE);
  assert_non_null(strstr(gpum_last_error(), "rule too long"));
  char word[200];
  memset(word, 'a', sizeof word - 1);
  word[sizeof word - 1] = '\0';
  assert_int_equal(gpum_alert_rule_check(word, NULL, 0), GPUM_EPARSE);
  assert_non_null(strstr(gpum_last_error(), "too long"));
}

static void test_rule_add_rejected_adds_nothing(void **state) {
  (void)state;
  gpum_alert_engine_t *e = NULL;
  assert_int_equal(gpum_alert_engine_create(NULL, &e), 0);
  unsigned idx = 99;
  assert_int_equal(gpum_alert_engine_add_rule(e, "temperature > 80 WARN", &idx), GPUM_EPARSE);
  assert_int_equal(idx, 99);
  assert_string_equal(gpum_last_error(),
                      "alert rule \"temperature > 80 WARN\": column 18: unexpected 'WARN' "
                      "(expected a level INFO, WARNING, ERROR or CRITICAL, or for, clear, "
                      "devices)");
  assert_int_equal(gpum_alert_engine_rule_count(e), 0);
  assert_int_equal(gpum_alert_engine_add_rule(e, "temperature > 80 WARNING", &idx), 0);
  assert_int_equal(idx, 0);
  assert_int_equal(gpum_alert_engine_add_rule(e, "xid any auto", &idx), 0);
  assert_int_equal(idx, 1);
  assert_int_equal(gpum_alert_engine_rule_count(e), 2);
  char buf[GPUM_ALERT_RULE_LEN];
  assert_int_equal(gpum_alert_engine_rule_text(e, 1, buf, sizeof buf), 0);
  assert_string_equal(buf, "xid any auto");
  assert_int_equal(gpum_alert_engine_rule_text(e, 2, buf, sizeof buf), GPUM_ENOENT);
  assert_int_equal(gpum_alert_engine_rule_text(e, 0, buf, 8), GPUM_ENOSPC);
  assert_int_equal(gpum_alert_engine_add_rule(e, NULL, NULL), GPUM_EINVAL);
  gpum_alert_engine_destroy(e);
}

static void test_rule_max_rules(void **state) {
  (void)state;
  gpum_alert_engine_t *e = NULL;
  assert_int_equal(gpum_alert_engine_create(NULL, &e), 0);
  for (int i = 0; i < GPUM_ALERT_MAX_RULES; i++)
    assert_int_equal(gpum_alert_engine_add_rule(e, "temperature > 80 WARNING", NULL), 0);
  assert_int_equal(gpum_alert_engine_add_rule(e, "temperature > 80 WARNING", NULL), GPUM_ENOSPC);
  assert_int_equal(gpum_alert_engine_rule_count(e), GPUM_ALERT_MAX_RULES);
  gpum_alert_engine_destroy(e);
}

static void test_levels(void **state) {
  (void)state;
  gpum_alert_level_t l;
  assert_int_equal(gpum_alert_level_parse("warning", &l), 0);
  assert_int_equal(l, GPUM_ALERT_WARNING);
  assert_int_equal(gpum_alert_level_parse("CRITICAL", &l), 0);
  assert_int_equal(l, GPUM_ALERT_CRITICAL);
  assert_int_equal(gpum_alert_level_parse("WARN", &l), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "'WARN'"));
  assert_string_equal(gpum_alert_level_name(GPUM_ALERT_INFO), "INFO");
  assert_string_equal(gpum_alert_level_name(GPUM_ALERT_ERROR), "ERROR");
  assert_string_equal(gpum_alert_level_name((gpum_alert_level_t)7), "UNKNOWN");
}

static void test_derived_values(void **state) {
  (void)state;
  gpum_device_sample_t s = {0};
  gpum_device_info_t info = {0};
  double v = 0;
  s.memory_used = 74 * GiB;
  s.memory_total = 80 * GiB;
  s.memory_free = 6 * GiB;
  s.power_mw = 350000;
  s.valid = (1u << GPUM_METRIC_MEMORY_USED) | (1u << GPUM_METRIC_MEMORY_TOTAL) |
            (1u << GPUM_METRIC_MEMORY_FREE) | (1u << GPUM_METRIC_POWER);
  assert_true(gpum__alert_value(GPUM__AM_MEMORY_USED_PCT, &s, NULL, &v));
  assert_true(v == 92.5);
  assert_true(gpum__alert_value(GPUM__AM_MEMORY_FREE_PCT, &s, NULL, &v));
  assert_true(v == 7.5);
  /* power_pct needs the power limit from the device info. */
  assert_false(gpum__alert_value(GPUM__AM_POWER_PCT, &s, NULL, &v));
  info.power_limit_mw = 400000;
  info.valid = GPUM_INFO_POWER_LIMIT;
  assert_true(gpum__alert_value(GPUM__AM_POWER_PCT, &s, &info, &v));
  assert_true(v == 87.5);
  /* Without memory_total in the sample, the info's total is used; without either, unknown. */
  s.valid &= ~(1u << GPUM_METRIC_MEMORY_TOTAL);
  assert_false(gpum__alert_value(GPUM__AM_MEMORY_USED_PCT, &s, &info, &v));
  info.memory_total = 100 * GiB;
  info.valid |= GPUM_INFO_MEMORY_TOTAL;
  assert_true(gpum__alert_value(GPUM__AM_MEMORY_USED_PCT, &s, &info, &v));
  assert_true(v == 74.0);
  /* An invalid metric is unknown, never 0. */
  assert_false(gpum__alert_value(GPUM_METRIC_TEMPERATURE, &s, &info, &v));
}

static void test_symbolic_resolution(void **state) {
  (void)state;
  gpum_device_info_t info = {0};
  gpum__alert_thr_t t = {.base = GPUM__THR_SLOWDOWN, .value = -5};
  double v = 0;
  assert_false(gpum__alert_thr_resolve(&t, NULL, &v));
  assert_false(gpum__alert_thr_resolve(&t, &info, &v)); /* not valid */
  info.temp_slowdown_c = 87;
  info.temp_shutdown_c = 92;
  info.valid = GPUM_INFO_TEMP_SLOWDOWN;
  assert_true(gpum__alert_thr_resolve(&t, &info, &v));
  assert_true(v == 82.0);
  t.base = GPUM__THR_SHUTDOWN;
  assert_false(gpum__alert_thr_resolve(&t, &info, &v));
  info.valid |= GPUM_INFO_TEMP_SHUTDOWN;
  assert_true(gpum__alert_thr_resolve(&t, &info, &v));
  assert_true(v == 87.0);
}

static void test_format_values(void **state) {
  (void)state;
  char b[48];
  assert_string_equal(gpum__alert_format_value(GPUM_METRIC_TEMPERATURE, 86, b, sizeof b),
                      "86 \u00b0C");
  assert_string_equal(gpum__alert_format_value(GPUM__AM_MEMORY_USED_PCT, 92.5, b, sizeof b),
                      "92.5%");
  assert_string_equal(gpum__alert_format_value(GPUM_METRIC_POWER, 250000, b, sizeof b), "250 W");
  assert_string_equal(gpum__alert_format_value(GPUM_METRIC_MEMORY_USED, 7.5 * GiB, b, sizeof b),
                      "7.50 GiB");
  assert_string_equal(gpum__alert_format_value(GPUM_METRIC_CLOCK_SM, 1410, b, sizeof b),
                      "1410 MHz");
  assert_string_equal(gpum__alert_format_value(GPUM_METRIC_ECC_UNCORRECTED, 3, b, sizeof b), "3");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rule_normalises),
      cmocka_unit_test(test_rule_fields),
      cmocka_unit_test(test_rule_rejects),
      cmocka_unit_test(test_rule_too_long),
      cmocka_unit_test(test_rule_add_rejected_adds_nothing),
      cmocka_unit_test(test_rule_max_rules),
      cmocka_unit_test(test_levels),
      cmocka_unit_test(test_derived_values),
      cmocka_unit_test(test_symbolic_resolution),
      cmocka_unit_test(test_format_values),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
