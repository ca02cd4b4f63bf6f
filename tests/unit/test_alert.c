/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the alert engine, driven by fed samples, Xids and health states with explicit
 * timestamps (no clock, no sleeps): a rule fires only after its duration has held on every
 * sample, clears only past its clear threshold (hysteresis), once per (rule, device); device
 * filters; symbolic temperature thresholds resolved per device; Xid rules with the table's
 * meanings, levels, repeats and the Xid window; health rules with and without a duration; the
 * default rules; callbacks on fire and clear (and re-entry from a callback); the history's
 * contents, order and bound; loading rules from strings, files and the configuration.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <gpum/alert.h>
#include <gpum/error.h>
#include <gpum/monitor.h>
#include <gpum/options.h>

#define S(x) ((uint64_t)(x)*1000000000ull)
#define MS(x) ((uint64_t)(x)*1000000ull)
#define GiB (UINT64_C(1) << 30)

/* ---- Helpers ---------------------------------------------------------------------------- */

#define MAX_SEEN 64

typedef struct {
  gpum_alert_t seen[MAX_SEEN];
  size_t n;
} recorder_t;

static void record(const gpum_alert_t *a, void *arg) {
  recorder_t *r = arg;
  if (r->n < MAX_SEEN)
    r->seen[r->n++] = *a;
}

typedef struct {
  gpum_alert_engine_t *e;
  recorder_t rec;
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  if (f == NULL || gpum_alert_engine_create(NULL, &f->e) != 0)
    return -1;
  if (gpum_alert_engine_add_callback(f->e, record, &f->rec) != 0)
    return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  gpum_alert_engine_destroy(f->e);
  free(f);
  return 0;
}

static void add(fixture_t *f, const char *rule) {
  if (gpum_alert_engine_add_rule(f->e, rule, NULL) != 0)
    fail_msg("rule '%s': %s", rule, gpum_last_error());
}

static gpum_device_sample_t temp_sample(int c) {
  gpum_device_sample_t s = {0};
  s.temperature_c = c;
  s.valid = 1u << GPUM_METRIC_TEMPERATURE;
  return s;
}

static void feed_temp(fixture_t *f, unsigned dev, int c, uint64_t t) {
  gpum_device_sample_t s = temp_sample(c);
  gpum_alert_engine_feed_sample(f->e, dev, &s, t);
}

static size_t n_active(fixture_t *f) {
  size_t n = 0;
  int rc = gpum_alert_engine_active(f->e, NULL, 0, &n);
  assert_int_equal(rc, n ? GPUM_ENOSPC : 0);
  return n;
}

static gpum_alert_t active_at(fixture_t *f, size_t i) {
  gpum_alert_t a[16];
  size_t n = 0;
  assert_int_equal(gpum_alert_engine_active(f->e, a, 16, &n), 0);
  assert_true(i < n);
  return a[i];
}

static gpum_device_info_t info_with_temps(int slowdown, int shutdown) {
  gpum_device_info_t info = {0};
  info.temp_slowdown_c = slowdown;
  info.temp_shutdown_c = shutdown;
  info.valid = GPUM_INFO_TEMP_SLOWDOWN | GPUM_INFO_TEMP_SHUTDOWN;
  return info;
}

/* ---- Metric rules ----------------------------------------------------------------------- */

static void test_fires_only_after_duration(void **state) {
  fixture_t *f = *state;
  add(f, "temperature > 80 for 10s WARNING");
  feed_temp(f, 0, 85, S(100));
  feed_temp(f, 0, 86, S(105));
  feed_temp(f, 0, 87, S(110) - 1); /* 1 ns short of 10 s */
  assert_int_equal(n_active(f), 0);
  assert_int_equal(f->rec.n, 0);
  feed_temp(f, 0, 88, S(110));
  assert_int_equal(n_active(f), 1);
  assert_int_equal(f->rec.n, 1);
  gpum_alert_t a = f->rec.seen[0];
  assert_int_equal(a.state, GPUM_ALERT_FIRED);
  assert_int_equal(a.level, GPUM_ALERT_WARNING);
  assert_int_equal(a.device, 0);
  assert_int_equal(a.rule, 0);
  assert_true(a.value == 88.0);
  assert_true(a.threshold == 80.0);
  assert_true(a.clear_threshold == 80.0);
  assert_int_equal(a.since_ns, S(100));
  assert_int_equal(a.fired_ns, S(110));
  assert_int_equal(a.cleared_ns, 0);
  assert_string_equal(a.metric, "temperature");
  assert_string_equal(a.rule_text, "temperature > 80 for 10s WARNING");
  assert_string_equal(a.message, "GPU 0: temperature 88 \u00b0C above 80 \u00b0C for 10s");
  /* Still above: no second alert for the same (rule, device). */
  feed_temp(f, 0, 90, S(120));
  feed_temp(f, 0, 95, S(200));
  assert_int_equal(n_active(f), 1);
  assert_int_equal(f->rec.n, 1);
}

static void test_interruption_restarts_wait(void **state) {
  fixture_t *f = *state;
  add(f, "temperature > 80 for 10s WARNING");
  feed_temp(f, 0, 85, S(0));
  feed_temp(f, 0, 80, S(5)); /* not above: the wait restarts */
  feed_temp(f, 0, 85, S(6));
  feed_temp(f, 0, 85, S(12));
  assert_int_equal(n_active(f), 0);
  /* A sample without the metric also breaks the continuity. */
  gpum_device_sample_t none = {0};
  gpum_alert_engine_feed_sample(f->e, 0, &none, S(13));
  feed_temp(f, 0, 85, S(16));
  feed_temp(f, 0, 85, S(25));
  assert_int_equal(n_active(f), 0);
  feed_temp(f, 0, 85, S(26));
  assert_int_equal(n_active(f), 1);
  assert_int_equal(active_at(f, 0).since_ns, S(16));
}

static void test_zero_duration_fires_at_once(void **state) {
  fixture_t *f = *state;
  add(f, "utilization_gpu >= 99 INFO");
  gpum_device_sample_t s = {0};
  s.util_gpu = 99;
  s.valid = 1u << GPUM_METRIC_UTIL_GPU;
  gpum_alert_engine_feed_sample(f->e, 3, &s, S(1));
  assert_int_equal(n_active(f), 1);
  assert_string_equal(f->rec.seen[0].message, "GPU 3: utilization_gpu 99% at or above 99%");
}

static void test_hysteresis(void **state) {
  fixture_t *f = *state;
  add(f, "temperature > 80 WARNING clear 75");
  feed_temp(f, 0, 85, S(1));
  assert_int_equal(n_active(f), 1);
  feed_temp(f, 0, 79, S(2)); /* below the threshold, above the clear threshold */
  feed_temp(f, 0, 76, S(3));
  feed_temp(f, 0, 75, S(4)); /* clears strictly below 75 */
  assert_int_equal(n_active(f), 1);
  assert_int_equal(f->rec.n, 1);
  feed_temp(f, 0, 74, S(5));
  assert_int_equal(n_active(f), 0);
  assert_int_equal(f->rec.n, 2);
  gpum_alert_t c = f->rec.seen[1];
  assert_int_equal(c.state, GPUM_ALERT_CLEARED);
  assert_int_equal(c.id, f->rec.seen[0].id);
  assert_true(c.clear_value == 74.0);
  assert_true(c.clear_threshold == 75.0);
  assert_int_equal(c.cleared_ns, S(5));
  assert_string_equal(c.message,
                      "GPU 0: temperature 85 \u00b0C above 80 \u00b0C; cleared at 74 \u00b0C");
  /* Fires again on the next excursion, as a new alert. */
  feed_temp(f, 0, 81, S(6));
  assert_int_equal(n_active(f), 1);
  assert_int_equal(f->rec.n, 3);
  assert_true(f->rec.seen[2].id > c.id);
}

static void test_default_clear_is_threshold(void **state) {
  fixture_t *f = *state;
  add(f, "temperature > 80 WARNING");
  feed_temp(f, 0, 81, S(1));
  feed_temp(f, 0, 80, S(2)); /* neither above nor below 80 */
  assert_int_equal(n_active(f), 1);
  feed_temp(f, 0, 79, S(3));
  assert_int_equal(n_active(f), 0);
}

static void test_below_rules(void **state) {
  fixture_t *f = *state;
  add(f, "clock_sm < 500 for 2s INFO clear 600");
  gpum_device_sample_t s = {0};
  s.valid = 1u << GPUM_METRIC_CLOCK_SM;
  s.clock_sm_mhz = 300;
  gpum_alert_engine_feed_sample(f->e, 0, &s, S(0));
  gpum_alert_engine_feed_sample(f->e, 0, &s, S(2));
  assert_int_equal(n_active(f), 1);
  assert_string_equal(active_at(f, 0).message, "GPU 0: clock_sm 300 MHz below 500 MHz for 2s");
  s.clock_sm_mhz = 600;
  gpum_alert_engine_feed_sample(f->e, 0, &s, S(3));
  assert_int_equal(n_active(f), 1);
  s.clock_sm_mhz = 601;
  gpum_alert_engine_feed_sample(f->e, 0, &s, S(4));
  assert_int_equal(n_active(f), 0);
}

static void test_device_filter(void **state) {
  fixture_t *f = *state;
  add(f, "temperature > 80 WARNING devices 1,3-4");
  feed_temp(f, 0, 90, S(1));
  feed_temp(f, 2, 90, S(1));
  feed_temp(f, 5, 90, S(1));
  feed_temp(f, 63, 90, S(1));
  feed_temp(f, 64, 90, S(1)); /* beyond GPUM_ALERT_MAX_DEVICES: ignored */
  assert_int_equal(n_active(f), 0);
  feed_temp(f, 1, 90, S(2));
  feed_temp(f, 4, 90, S(2));
  assert_int_equal(n_active(f), 2);
  assert_int_equal(active_at(f, 0).device, 1);
  assert_int_equal(active_at(f, 1).device, 4);
}

static void test_per_device_state(void **state) {
  fixture_t *f = *state;
  add(f, "temperature > 80 for 10s WARNING");
  feed_temp(f, 0, 90, S(0));
  feed_temp(f, 1, 90, S(5));
  feed_temp(f, 0, 90, S(10));
  feed_temp(f, 1, 90, S(10));
  assert_int_equal(n_active(f), 1);
  assert_int_equal(active_at(f, 0).device, 0);
  feed_temp(f, 1, 90, S(15));
  assert_int_equal(n_active(f), 2);
  feed_temp(f, 0, 70, S(16));
  assert_int_equal(n_active(f), 1);
  assert_int_equal(active_at(f, 0).device, 1);
}

static void test_symbolic_thresholds(void **state) {
  fixture_t *f = *state;
  gpum_device_info_t info = info_with_temps(87, 92);
  add(f, "temperature > slowdown-5 for 10s WARNING clear slowdown-8");
  add(f, "temperature > shutdown-5 for 5s CRITICAL clear shutdown-8");
  gpum_alert_engine_set_device_info(f->e, 2, &info);
  info = info_with_temps(80, 90);
  gpum_alert_engine_set_device_info(f->e, 3, &info);
  /* Device 0 has no info: the rules do not apply to it. */
  feed_temp(f, 0, 100, S(0));
  feed_temp(f, 0, 100, S(20));
  assert_int_equal(n_active(f), 0);
  /* 83 °C is above 87-5 on device 2, and above 80-5 on device 3. */
  feed_temp(f, 2, 83, S(0));
  feed_temp(f, 3, 76, S(0));
  feed_temp(f, 2, 83, S(10));
  feed_temp(f, 3, 76, S(10));
  assert_int_equal(n_active(f), 2);
  gpum_alert_t a = active_at(f, 0);
  assert_int_equal(a.device, 2);
  assert_true(a.threshold == 82.0);
  assert_true(a.clear_threshold == 79.0);
  assert_string_equal(a.message, "GPU 2: temperature 83 \u00b0C above 82 \u00b0C (slowdown 87 "
                                 "\u00b0C - 5) for 10s");
  assert_true(active_at(f, 1).threshold == 75.0);
  /* Device 2 heats up to within 5 °C of shutdown: CRITICAL too after 5 s. */
  feed_temp(f, 2, 88, S(11));
  feed_temp(f, 2, 88, S(16));
  assert_int_equal(n_active(f), 3);
  a = active_at(f, 2);
  assert_int_equal(a.level, GPUM_ALERT_CRITICAL);
  assert_string_equal(a.message, "GPU 2: temperature 88 \u00b0C above 87 \u00b0C (shutdown 92 "
                                 "\u00b0C - 5) for 5s");
  /* Cooling to 80: CRITICAL clears (below 84), WARNING holds (not below 79). */
  feed_temp(f, 2, 80, S(17));
  assert_int_equal(n_active(f), 2);
  feed_temp(f, 2, 78, S(18));
  assert_int_equal(n_active(f), 1);
  assert_int_equal(active_at(f, 0).device, 3);
  gpum_alert_t last = f->rec.seen[f->rec.n - 1];
  assert_int_equal(last.state, GPUM_ALERT_CLEARED);
  assert_non_null(strstr(last.message, "; cleared at 78 \u00b0C"));
}

static void test_mixed_base_clear_held_at_threshold(void **state) {
  fixture_t *f = *state;
  gpum_device_info_t info = info_with_temps(87, 92);
  /* Clear at 85 against a threshold of 82 on this device: clears only below 82. */
  add(f, "temperature > slowdown-5 WARNING clear 85");
  gpum_alert_engine_set_device_info(f->e, 0, &info);
  feed_temp(f, 0, 83, S(1));
  feed_temp(f, 0, 83, S(2));
  feed_temp(f, 0, 82, S(3));
  assert_int_equal(n_active(f), 1);
  assert_true(active_at(f, 0).clear_threshold == 82.0);
  feed_temp(f, 0, 81, S(4));
  assert_int_equal(n_active(f), 0);
}

static void test_clock_going_backwards(void **state) {
  fixture_t *f = *state;
  add(f, "temperature > 80 for 10s WARNING");
  feed_temp(f, 0, 90, S(100));
  feed_temp(f, 0, 90, S(50)); /* earlier than the start: no wrap-around to "long ago" */
  assert_int_equal(n_active(f), 0);
  feed_temp(f, 0, 90, S(110));
  assert_int_equal(n_active(f), 1);
}

static void test_memory_pct_rule(void **state) {
  fixture_t *f = *state;
  add(f, "memory_used_pct > 90 for 10s WARNING clear 85");
  gpum_device_sample_t s = {0};
  s.valid = (1u << GPUM_METRIC_MEMORY_USED) | (1u << GPUM_METRIC_MEMORY_TOTAL);
  s.memory_total = 80 * GiB;
  s.memory_used = 74 * GiB; /* 92.5 % */
  gpum_alert_engine_feed_sample(f->e, 0, &s, S(0));
  gpum_alert_engine_feed_sample(f->e, 0, &s, S(10));
  assert_int_equal(n_active(f), 1);
  assert_string_equal(active_at(f, 0).message, "GPU 0: memory_used_pct 92.5% above 90% for 10s");
  s.memory_used = 70 * GiB; /* 87.5 %: within the hysteresis band */
  gpum_alert_engine_feed_sample(f->e, 0, &s, S(11));
  assert_int_equal(n_active(f), 1);
  s.memory_used = 60 * GiB; /* 75 % */
  gpum_alert_engine_feed_sample(f->e, 0, &s, S(12));
  assert_int_equal(n_active(f), 0);
}

static void test_power_pct_needs_info(void **state) {
  fixture_t *f = *state;
  add(f, "power_pct >= 95 ERROR");
  gpum_device_sample_t s = {0};
  s.valid = 1u << GPUM_METRIC_POWER;
  s.power_mw = 400000;
  gpum_alert_engine_feed_sample(f->e, 0, &s, S(0));
  assert_int_equal(n_active(f), 0);
  gpum_device_info_t info = {0};
  info.power_limit_mw = 400000;
  info.valid = GPUM_INFO_POWER_LIMIT;
  gpum_alert_engine_set_device_info(f->e, 0, &info);
  gpum_alert_engine_feed_sample(f->e, 0, &s, S(1));
  assert_int_equal(n_active(f), 1);
  assert_string_equal(active_at(f, 0).message, "GPU 0: power_pct 100% at or above 95%");
}

/* ---- Xid rules -------------------------------------------------------------------------- */

static void test_xid_auto_levels_and_meanings(void **state) {
  fixture_t *f = *state;
  add(f, "xid any auto");
  gpum_alert_engine_feed_xid(f->e, 1, 79, S(10));
  gpum_alert_engine_feed_xid(f->e, 1, 13, S(11));
  gpum_alert_engine_feed_xid(f->e, 2, 999, S(12));
  assert_int_equal(f->rec.n, 3);
  gpum_alert_t a = f->rec.seen[0];
  assert_int_equal(a.level, GPUM_ALERT_CRITICAL);
  assert_int_equal(a.xid, 79);
  assert_true(a.value == 79.0);
  assert_string_equal(a.metric, "xid");
  assert_string_equal(a.message, "GPU 1: Xid 79: GPU has fallen off the bus (critical: the GPU "
                                 "needs a reset or service)");
  a = f->rec.seen[1];
  assert_int_equal(a.level, GPUM_ALERT_ERROR);
  assert_string_equal(a.message, "GPU 1: Xid 13: Graphics Engine Exception");
  a = f->rec.seen[2];
  assert_int_equal(a.level, GPUM_ALERT_ERROR);
  assert_string_equal(a.message, "GPU 2: Xid 999: unknown Xid");
  assert_int_equal(n_active(f), 3);
}

static void test_xid_lists_and_critical(void **state) {
  fixture_t *f = *state;
  add(f, "xid 48,94,95 WARNING");
  add(f, "xid critical INFO devices 0");
  gpum_alert_engine_feed_xid(f->e, 0, 79, S(1)); /* critical: rule 1 only */
  gpum_alert_engine_feed_xid(f->e, 0, 31, S(2)); /* neither */
  gpum_alert_engine_feed_xid(f->e, 0, 94, S(3)); /* both */
  gpum_alert_engine_feed_xid(f->e, 1, 79, S(4)); /* rule 1 is for device 0 only */
  assert_int_equal(f->rec.n, 3);
  assert_int_equal(f->rec.seen[0].rule, 1);
  assert_int_equal(f->rec.seen[0].level, GPUM_ALERT_INFO);
  assert_int_equal(f->rec.seen[1].rule, 0);
  assert_int_equal(f->rec.seen[1].xid, 94);
  assert_int_equal(f->rec.seen[1].level, GPUM_ALERT_WARNING);
  assert_string_equal(f->rec.seen[1].message, "GPU 0: Xid 94: Contained ECC error (critical: "
                                              "the GPU needs a reset or service)");
  assert_int_equal(f->rec.seen[2].rule, 1);
}

static void test_xid_window_and_repeats(void **state) {
  fixture_t *f = *state;
  add(f, "xid any ERROR");
  gpum_alert_engine_feed_xid(f->e, 0, 43, S(0));
  gpum_alert_engine_feed_xid(f->e, 0, 43, S(60)); /* repeat: extends the window to 60+300 */
  gpum_alert_engine_feed_xid(f->e, 0, 31, S(61)); /* another Xid: its own alert */
  assert_int_equal(f->rec.n, 2);
  assert_int_equal(n_active(f), 2);
  assert_int_equal(active_at(f, 0).repeats, 1);
  gpum_alert_engine_advance(f->e, S(359));
  assert_int_equal(n_active(f), 2);
  gpum_alert_engine_advance(f->e, S(360));
  assert_int_equal(n_active(f), 1);
  assert_int_equal(active_at(f, 0).xid, 31);
  gpum_alert_t c = f->rec.seen[2];
  assert_int_equal(c.state, GPUM_ALERT_CLEARED);
  assert_int_equal(c.xid, 43);
  assert_int_equal(c.repeats, 1);
  assert_int_equal(c.cleared_ns, S(360));
  assert_string_equal(c.message, "GPU 0: Xid 43: GPU stopped processing; expired");
  /* Any feed expires Xid alerts too. */
  feed_temp(f, 5, 20, S(361));
  assert_int_equal(n_active(f), 0);
  /* The history keeps both, cleared, with the repeat count. */
  gpum_alert_t h[4];
  size_t n = 0;
  assert_int_equal(gpum_alert_engine_history(f->e, h, 4, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(h[0].xid, 43);
  assert_int_equal(h[0].repeats, 1);
  assert_int_equal(h[0].state, GPUM_ALERT_CLEARED);
  assert_int_equal(h[1].xid, 31);
  assert_int_equal(h[1].state, GPUM_ALERT_CLEARED);
}

static void test_xid_zero_window_is_history_only(void **state) {
  (void)state;
  gpum_alert_engine_opts_t o;
  gpum_alert_engine_t *e = NULL;
  recorder_t rec = {0};
  gpum_alert_engine_opts_init(&o);
  o.xid_window_ms = 0;
  assert_int_equal(gpum_alert_engine_create(&o, &e), 0);
  assert_int_equal(gpum_alert_engine_add_callback(e, record, &rec), 0);
  assert_int_equal(gpum_alert_engine_add_rule(e, "xid any auto", NULL), 0);
  gpum_alert_engine_feed_xid(e, 0, 48, S(1));
  assert_int_equal(rec.n, 2);
  assert_int_equal(rec.seen[0].state, GPUM_ALERT_FIRED);
  assert_int_equal(rec.seen[1].state, GPUM_ALERT_CLEARED);
  size_t n = 0;
  assert_int_equal(gpum_alert_engine_active(e, NULL, 0, &n), 0);
  assert_int_equal(n, 0);
  gpum_alert_t h;
  assert_int_equal(gpum_alert_engine_history(e, &h, 1, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(h.level, GPUM_ALERT_CRITICAL);
  assert_string_equal(h.message, "GPU 0: Xid 48: Double-bit ECC error (critical: the GPU needs "
                                 "a reset or service); expired");
  gpum_alert_engine_destroy(e);
}

/* ---- Health rules ----------------------------------------------------------------------- */

static void test_health_rule(void **state) {
  fixture_t *f = *state;
  add(f, "health == ERROR CRITICAL");
  gpum_alert_engine_feed_health(f->e, 2, GPUM_HEALTH_BUSY, "utilisation 95%", S(1));
  assert_int_equal(n_active(f), 0);
  gpum_alert_engine_feed_health(f->e, 2, GPUM_HEALTH_ERROR, "GPU has fallen off the bus", S(2));
  assert_int_equal(n_active(f), 1);
  gpum_alert_t a = active_at(f, 0);
  assert_int_equal(a.level, GPUM_ALERT_CRITICAL);
  assert_int_equal(a.device, 2);
  assert_true(a.value == GPUM_HEALTH_ERROR);
  assert_string_equal(a.metric, "health");
  assert_string_equal(a.message, "GPU 2: health ERROR: GPU has fallen off the bus");
  /* Same state again: still one alert. */
  gpum_alert_engine_feed_health(f->e, 2, GPUM_HEALTH_ERROR, "still lost", S(3));
  assert_int_equal(f->rec.n, 1);
  gpum_alert_engine_feed_health(f->e, 2, GPUM_HEALTH_AVAILABLE, NULL, S(9));
  assert_int_equal(n_active(f), 0);
  assert_int_equal(f->rec.n, 2);
  assert_string_equal(f->rec.seen[1].message,
                      "GPU 2: health ERROR: GPU has fallen off the bus; cleared: now AVAILABLE");
  assert_int_equal(f->rec.seen[1].cleared_ns, S(9));
}

static void test_health_rule_duration(void **state) {
  fixture_t *f = *state;
  add(f, "health != AVAILABLE for 30s WARNING");
  gpum_alert_engine_feed_health(f->e, 0, GPUM_HEALTH_BUSY, "", S(100));
  gpum_alert_engine_advance(f->e, S(129));
  assert_int_equal(n_active(f), 0);
  /* A change between non-AVAILABLE states restarts the wait: the state must have lasted. */
  gpum_alert_engine_feed_health(f->e, 0, GPUM_HEALTH_DISABLED, "operator", S(129));
  gpum_alert_engine_advance(f->e, S(158));
  assert_int_equal(n_active(f), 0);
  gpum_alert_engine_advance(f->e, S(159));
  assert_int_equal(n_active(f), 1);
  assert_string_equal(active_at(f, 0).message,
                      "GPU 0: health DISABLED, not AVAILABLE for 30s: operator");
  assert_int_equal(active_at(f, 0).since_ns, S(129));
}

/* ---- Defaults, callbacks, history ------------------------------------------------------- */

static void test_default_rules(void **state) {
  fixture_t *f = *state;
  assert_int_equal(gpum_alert_engine_add_default_rules(f->e), 0);
  size_t n = gpum_alert_engine_rule_count(f->e);
  assert_int_equal(n, 5);
  for (unsigned i = 0; i < n; i++) {
    char buf[GPUM_ALERT_RULE_LEN];
    assert_int_equal(gpum_alert_engine_rule_text(f->e, i, buf, sizeof buf), 0);
    assert_string_equal(buf, gpum_alert_default_rules[i]);
  }
  gpum_device_info_t info = info_with_temps(87, 92);
  gpum_alert_engine_set_device_info(f->e, 0, &info);
  /* Within 5 °C of slowdown for 10 s: WARNING; within 5 °C of shutdown for 5 s: CRITICAL. */
  for (int t = 0; t <= 10; t++)
    feed_temp(f, 0, 83, S(t));
  assert_int_equal(n_active(f), 1);
  assert_int_equal(active_at(f, 0).level, GPUM_ALERT_WARNING);
  for (int t = 11; t <= 16; t++)
    feed_temp(f, 0, 88, S(t));
  assert_int_equal(n_active(f), 2);
  assert_int_equal(active_at(f, 1).level, GPUM_ALERT_CRITICAL);
  /* Memory above 90% of total for 10 s. */
  gpum_device_sample_t s = {0};
  s.valid = (1u << GPUM_METRIC_MEMORY_USED) | (1u << GPUM_METRIC_MEMORY_TOTAL);
  s.memory_total = 100 * GiB;
  s.memory_used = 91 * GiB;
  gpum_alert_engine_feed_sample(f->e, 1, &s, S(20));
  gpum_alert_engine_feed_sample(f->e, 1, &s, S(30));
  assert_int_equal(n_active(f), 3);
  assert_string_equal(active_at(f, 2).metric, "memory_used_pct");
  /* Any Xid: CRITICAL for the fatal ones, ERROR otherwise; device ERROR: CRITICAL. */
  gpum_alert_engine_feed_xid(f->e, 1, 95, S(31));
  gpum_alert_engine_feed_xid(f->e, 1, 31, S(31));
  gpum_alert_engine_feed_health(f->e, 1, GPUM_HEALTH_ERROR, "3 consecutive failures", S(32));
  assert_int_equal(n_active(f), 6);
  assert_int_equal(active_at(f, 3).level, GPUM_ALERT_CRITICAL);
  assert_int_equal(active_at(f, 4).level, GPUM_ALERT_ERROR);
  assert_int_equal(active_at(f, 5).level, GPUM_ALERT_CRITICAL);
  assert_string_equal(active_at(f, 5).metric, "health");
}

typedef struct {
  gpum_alert_engine_t *e;
  size_t calls;
  size_t active_seen[8];
} reentry_t;

/* A callback that queries the engine: the engine's mutex is not held during callbacks. */
static void reenter(const gpum_alert_t *a, void *arg) {
  reentry_t *r = arg;
  size_t n = 0;
  (void)a;
  gpum_alert_engine_active(r->e, NULL, 0, &n);
  if (r->calls < 8)
    r->active_seen[r->calls] = n;
  r->calls++;
}

static void test_callbacks(void **state) {
  fixture_t *f = *state;
  recorder_t second = {0};
  reentry_t re = {.e = f->e};
  assert_int_equal(gpum_alert_engine_add_callback(f->e, record, &second), 0);
  assert_int_equal(gpum_alert_engine_add_callback(f->e, reenter, &re), 0);
  assert_int_equal(gpum_alert_engine_add_callback(f->e, NULL, NULL), GPUM_EINVAL);
  add(f, "temperature > 80 WARNING");
  add(f, "temperature > 90 CRITICAL");
  feed_temp(f, 0, 95, S(1)); /* both fire, in rule order */
  feed_temp(f, 0, 70, S(2)); /* both clear */
  assert_int_equal(f->rec.n, 4);
  assert_int_equal(second.n, 4);
  assert_int_equal(re.calls, 4);
  assert_int_equal(f->rec.seen[0].state, GPUM_ALERT_FIRED);
  assert_int_equal(f->rec.seen[0].level, GPUM_ALERT_WARNING);
  assert_int_equal(f->rec.seen[1].state, GPUM_ALERT_FIRED);
  assert_int_equal(f->rec.seen[1].level, GPUM_ALERT_CRITICAL);
  assert_int_equal(f->rec.seen[2].state, GPUM_ALERT_CLEARED);
  assert_int_equal(f->rec.seen[3].state, GPUM_ALERT_CLEARED);
  for (size_t i = 0; i < 4; i++)
    assert_int_equal(second.seen[i].id, f->rec.seen[i].id);
  /* The callbacks run after the feed's changes are complete. */
  assert_int_equal(re.active_seen[0], 2);
  assert_int_equal(re.active_seen[2], 0);
  /* At most 16 callbacks. */
  for (int i = 3; i < 16; i++)
    assert_int_equal(gpum_alert_engine_add_callback(f->e, record, &second), 0);
  assert_int_equal(gpum_alert_engine_add_callback(f->e, record, &second), GPUM_ENOSPC);
}

static void test_history(void **state) {
  (void)state;
  gpum_alert_engine_opts_t o;
  gpum_alert_engine_t *e = NULL;
  gpum_alert_engine_opts_init(&o);
  assert_int_equal(o.history_cap, 256);
  assert_int_equal(o.xid_window_ms, 300000);
  o.history_cap = 3;
  assert_int_equal(gpum_alert_engine_create(&o, &e), 0);
  assert_int_equal(gpum_alert_engine_add_rule(e, "temperature > 80 WARNING", NULL), 0);
  assert_int_equal(gpum_alert_engine_add_rule(e, "xid any auto", NULL), 0);
  gpum_device_sample_t hot = temp_sample(85), cool = temp_sample(60);
  gpum_alert_engine_feed_sample(e, 0, &hot, S(1)); /* alert 1, cleared at 2 */
  gpum_alert_engine_feed_sample(e, 0, &cool, S(2));
  gpum_alert_engine_feed_sample(e, 1, &hot, S(3)); /* alert 2, active */
  gpum_alert_engine_feed_xid(e, 0, 79, S(4));      /* alert 3, active */
  gpum_alert_t h[3];
  size_t n = 0;
  assert_int_equal(gpum_alert_engine_history(e, h, 3, &n), 0);
  assert_int_equal(n, 3);
  assert_int_equal(h[0].id, 1);
  assert_int_equal(h[0].state, GPUM_ALERT_CLEARED);
  assert_true(h[0].value == 85.0);
  assert_true(h[0].clear_value == 60.0);
  assert_int_equal(h[0].fired_ns, S(1));
  assert_int_equal(h[0].cleared_ns, S(2));
  assert_int_equal(h[1].id, 2);
  assert_int_equal(h[1].state, GPUM_ALERT_FIRED);
  assert_int_equal(h[1].device, 1);
  assert_int_equal(h[2].xid, 79);
  /* A fourth alert drops the oldest. */
  gpum_alert_engine_feed_xid(e, 0, 13, S(5));
  assert_int_equal(gpum_alert_engine_history(e, h, 3, &n), 0);
  assert_int_equal(n, 3);
  assert_int_equal(h[0].id, 2);
  assert_int_equal(h[2].id, 4);
  /* Clearing an alert updates its history entry. */
  gpum_alert_engine_feed_sample(e, 1, &cool, S(6));
  assert_int_equal(gpum_alert_engine_history(e, h, 3, &n), 0);
  assert_int_equal(h[0].state, GPUM_ALERT_CLEARED);
  assert_int_equal(h[0].cleared_ns, S(6));
  /* Too small a buffer: ENOSPC with the count, the first ones copied. */
  assert_int_equal(gpum_alert_engine_history(e, h, 1, &n), GPUM_ENOSPC);
  assert_int_equal(n, 3);
  assert_int_equal(h[0].id, 2);
  assert_int_equal(gpum_alert_engine_active(e, h, 1, &n), GPUM_ENOSPC);
  assert_int_equal(n, 2);
  assert_int_equal(gpum_alert_engine_active(e, NULL, 1, &n), GPUM_EINVAL);
  gpum_alert_counters_t c;
  gpum_alert_engine_counters(e, &c);
  assert_int_equal(c.fired, 4);
  assert_int_equal(c.cleared, 2);
  assert_int_equal(c.dropped_from_history, 1);
  gpum_alert_engine_destroy(e);
  o.history_cap = 0;
  assert_int_equal(gpum_alert_engine_create(&o, &e), GPUM_EINVAL);
  assert_null(e);
}

/* ---- Loading ---------------------------------------------------------------------------- */

static void test_add_rules_string(void **state) {
  fixture_t *f = *state;
  assert_int_equal(
      gpum_alert_engine_add_rules(f->e,
                                  "power_pct > 95 for 1m WARNING; xid 79 CRITICAL;;  # a comment\n"
                                  "health == ERROR CRITICAL # trailing comment; not a rule\n",
                                  "alerts.rules"),
      0);
  assert_int_equal(gpum_alert_engine_rule_count(f->e), 3);
  char buf[GPUM_ALERT_RULE_LEN];
  assert_int_equal(gpum_alert_engine_rule_text(f->e, 2, buf, sizeof buf), 0);
  assert_string_equal(buf, "health == ERROR CRITICAL");
  /* All-or-nothing, and the error names the rule. */
  assert_int_equal(
      gpum_alert_engine_add_rules(f->e, "xid any auto; temperature > 80 WARNIN", "alerts.rules"),
      GPUM_EPARSE);
  assert_string_equal(gpum_last_error(),
                      "alerts.rules: rule 2 \" temperature > 80 WARNIN\": column 19: unexpected "
                      "'WARNIN' (expected a level INFO, WARNING, ERROR or CRITICAL, or for, "
                      "clear, devices)");
  assert_int_equal(gpum_alert_engine_rule_count(f->e), 3);
  assert_int_equal(gpum_alert_engine_add_rules(f->e, "", NULL), 0);
  assert_int_equal(gpum_alert_engine_rule_count(f->e), 3);
}

/* Writes text to a fresh temporary file; the caller unlinks path. */
static void write_temp(char *path, size_t len, const char *text) {
  snprintf(path, len, "/tmp/gpum-test-alert-%ld-XXXXXX", (long)getpid());
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
}

static void test_load_file(void **state) {
  fixture_t *f = *state;
  char path[128], bad[128];
  write_temp(path, sizeof path,
             "# site rules\n\nmemory_used_pct > 95 for 30s ERROR clear 90\n"
             "xid 74 CRITICAL devices 0-3\n");
  assert_int_equal(gpum_alert_engine_load_file(f->e, path), 0);
  assert_int_equal(gpum_alert_engine_rule_count(f->e), 2);
  write_temp(bad, sizeof bad, "xid any auto\n# ok so far\n\ntemperature >> 80 WARNING\n");
  assert_int_equal(gpum_alert_engine_load_file(f->e, bad), GPUM_EPARSE);
  char want[512];
  snprintf(want, sizeof want, "%s:4: rule \"temperature >> 80 WARNING\": column 13:", bad);
  if (strncmp(gpum_last_error(), want, strlen(want)))
    fail_msg("got \"%s\", want prefix \"%s\"", gpum_last_error(), want);
  assert_int_equal(gpum_alert_engine_rule_count(f->e), 2);
  unlink(path);
  unlink(bad);
  assert_int_equal(gpum_alert_engine_load_file(f->e, path), GPUM_ENOENT);
  assert_non_null(strstr(gpum_last_error(), path));
}

static void test_configure(void **state) {
  fixture_t *f = *state;
  gpum_config_t *cfg = NULL;
  char path[128];
  assert_int_equal(gpum_config_new(&cfg), 0);
  /* Defaults: the default rules only. */
  assert_int_equal(gpum_alert_engine_configure(f->e, cfg), 0);
  assert_int_equal(gpum_alert_engine_rule_count(f->e), 5);
  /* alerts.defaults off, alerts.rules and alerts.file. */
  gpum_alert_engine_t *e = NULL;
  assert_int_equal(gpum_alert_engine_create(NULL, &e), 0);
  write_temp(path, sizeof path, "health == DISABLED INFO\n");
  assert_int_equal(gpum_config_set(cfg, "alerts.defaults", "false", GPUM_OPT_SRC_API), 0);
  assert_int_equal(
      gpum_config_set(cfg, "alerts.rules", "xid 79 CRITICAL; power > 300W INFO", GPUM_OPT_SRC_API),
      0);
  assert_int_equal(gpum_config_set(cfg, "alerts.file", path, GPUM_OPT_SRC_API), 0);
  assert_int_equal(gpum_alert_engine_configure(e, cfg), 0);
  assert_int_equal(gpum_alert_engine_rule_count(e), 3);
  char buf[GPUM_ALERT_RULE_LEN];
  assert_int_equal(gpum_alert_engine_rule_text(e, 2, buf, sizeof buf), 0);
  assert_string_equal(buf, "health == DISABLED INFO");
  /* A bad rule in the option: nothing added. */
  assert_int_equal(
      gpum_config_set(cfg, "alerts.rules", "xid 79 CRITICAL; power > 300 WATTS", GPUM_OPT_SRC_API),
      0);
  assert_int_equal(gpum_alert_engine_configure(e, cfg), GPUM_EPARSE);
  assert_non_null(strstr(gpum_last_error(), "alerts.rules: rule 2"));
  assert_int_equal(gpum_alert_engine_rule_count(e), 3);
  /* Engine options from the configuration. */
  gpum_alert_engine_opts_t o;
  assert_int_equal(gpum_config_set(cfg, "alerts.xid_window", "1m", GPUM_OPT_SRC_API), 0);
  assert_int_equal(gpum_config_set(cfg, "alerts.history", "1000", GPUM_OPT_SRC_API), 0);
  gpum_alert_engine_opts_from_config(&o, cfg);
  assert_int_equal(o.xid_window_ms, 60000);
  assert_int_equal(o.history_cap, 1000);
  assert_int_equal(gpum_config_set(cfg, "alerts.history", "0", GPUM_OPT_SRC_API), GPUM_ERANGE);
  unlink(path);
  gpum_alert_engine_destroy(e);
  gpum_config_free(cfg);
}

/* A condition the caller judges: fires once per (device, name), its message follows the later
 * feeds without a callback, clears once; an Xid window passing does not touch it. */
static void test_condition(void **state) {
  fixture_t *f = *state;
  add(f, "xid 79 CRITICAL"); /* an Xid alert beside it, expiring by its window */
  gpum_alert_engine_feed_condition(f->e, 1, "overcommitted", false, GPUM_ALERT_WARNING, NULL, 1);
  assert_int_equal(f->rec.n, 0);
  gpum_alert_engine_feed_condition(f->e, 1, "overcommitted", true, GPUM_ALERT_WARNING,
                                   "GPU 1: 10 GiB over", 2);
  gpum_alert_engine_feed_condition(f->e, 2, "overcommitted", true, GPUM_ALERT_ERROR,
                                   "GPU 2: 1 GiB over", 2);
  gpum_alert_engine_feed_xid(f->e, 1, 79, 3);
  assert_int_equal(f->rec.n, 3);
  const gpum_alert_t *a = &f->rec.seen[0];
  assert_int_equal(a->state, GPUM_ALERT_FIRED);
  assert_int_equal(a->rule, GPUM_ALERT_RULE_CONDITION);
  assert_int_equal(a->device, 1);
  assert_int_equal(a->level, GPUM_ALERT_WARNING);
  assert_string_equal(a->metric, "overcommitted");
  assert_string_equal(a->message, "GPU 1: 10 GiB over");
  assert_int_equal(f->rec.seen[1].level, GPUM_ALERT_ERROR);
  /* Still holding: the message follows, no callback, no second alert. */
  gpum_alert_engine_feed_condition(f->e, 1, "overcommitted", true, GPUM_ALERT_WARNING,
                                   "GPU 1: 12 GiB over", 4);
  assert_int_equal(f->rec.n, 3);
  gpum_alert_t act[8];
  size_t n = 0;
  assert_int_equal(gpum_alert_engine_active(f->e, act, 8, &n), 0);
  assert_int_equal(n, 3);
  assert_string_equal(act[0].message, "GPU 1: 12 GiB over");
  /* The Xid's window passes: only the Xid alert expires. */
  gpum_alert_engine_advance(f->e, 3 + 301ull * 1000000000ull);
  assert_int_equal(f->rec.n, 4);
  assert_int_equal(f->rec.seen[3].xid, 79);
  /* Cleared once. */
  gpum_alert_engine_feed_condition(f->e, 1, "overcommitted", false, GPUM_ALERT_WARNING, NULL, 5);
  gpum_alert_engine_feed_condition(f->e, 1, "overcommitted", false, GPUM_ALERT_WARNING, NULL, 6);
  assert_int_equal(f->rec.n, 5);
  assert_int_equal(f->rec.seen[4].state, GPUM_ALERT_CLEARED);
  assert_int_equal(f->rec.seen[4].id, a->id);
  assert_string_equal(f->rec.seen[4].message, "GPU 1: 12 GiB over; cleared");
  assert_int_equal(gpum_alert_engine_active(f->e, act, 8, &n), 0);
  assert_int_equal(n, 1); /* GPU 2's */
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_fires_only_after_duration),
      T(test_interruption_restarts_wait),
      T(test_zero_duration_fires_at_once),
      T(test_hysteresis),
      T(test_default_clear_is_threshold),
      T(test_below_rules),
      T(test_device_filter),
      T(test_per_device_state),
      T(test_symbolic_thresholds),
      T(test_mixed_base_clear_held_at_threshold),
      T(test_clock_going_backwards),
      T(test_memory_pct_rule),
      T(test_power_pct_needs_info),
      T(test_xid_auto_levels_and_meanings),
      T(test_xid_lists_and_critical),
      T(test_xid_window_and_repeats),
      cmocka_unit_test(test_xid_zero_window_is_history_only),
      T(test_health_rule),
      T(test_health_rule_duration),
      T(test_default_rules),
      T(test_callbacks),
      T(test_condition),
      cmocka_unit_test(test_history),
      T(test_add_rules_string),
      T(test_load_file),
      T(test_configure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
