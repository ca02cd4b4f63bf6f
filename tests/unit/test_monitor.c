/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the monitor: health state names, the single-probe classifier, the backoff
 * schedule, the health state machine driven step by step (transient failures never ERROR on
 * their own, N in a row do, ELOST at once, re-probes back off, M healthy probes recover, a
 * critical event restarts recovery, ECC growth, the operator's DISABLED overlay), the packed
 * history record and ring, nearest-rank statistics, option validation, and a live monitor on
 * the host backend whose window statistics are recomputed from its raw history.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/monitor.h>

#include "monitor/monitor_internal.h"

#define MS 1000000ull

static void test_state_names(void **state) {
  (void)state;
  gpum_health_t h;
  for (int i = 0; i < GPUM_HEALTH_COUNT; i++) {
    assert_int_equal(gpum_health_state_parse(gpum_health_state_name((gpum_health_t)i), &h), 0);
    assert_int_equal(h, i);
  }
  assert_string_equal(gpum_health_state_name(GPUM_HEALTH_BUSY), "BUSY");
  assert_int_equal(gpum_health_state_parse("error", &h), 0);
  assert_int_equal(h, GPUM_HEALTH_ERROR);
  assert_string_equal(gpum_health_state_name((gpum_health_t)17), "UNKNOWN");
  assert_int_equal(gpum_health_state_parse("broken", &h), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "'broken'"));
  assert_int_equal(gpum_health_state_parse("", &h), GPUM_EINVAL);
  assert_int_equal(gpum_health_state_parse(NULL, &h), GPUM_EINVAL);
  assert_string_equal(gpum_monitor_event_kind_name(GPUM_MONEV_PROBE), "probe");
}

static gpum_device_sample_t sample(unsigned util, uint64_t used, uint64_t total) {
  gpum_device_sample_t s;
  memset(&s, 0, sizeof s);
  s.util_gpu = util;
  s.memory_used = used;
  s.memory_total = total;
  s.valid =
      1u << GPUM_METRIC_UTIL_GPU | 1u << GPUM_METRIC_MEMORY_USED | 1u << GPUM_METRIC_MEMORY_TOTAL;
  return s;
}

static void test_classify(void **state) {
  (void)state;
  char why[GPUM_HEALTH_REASON_LEN];
  gpum_device_sample_t s = sample(10, 10, 100);
  gpum_health_probe_t p = {.rc = 0, .sample = &s};
  assert_int_equal(gpum_health_classify(&p, NULL, why, sizeof why), GPUM_HEALTH_AVAILABLE);
  assert_string_equal(why, "");
  s.util_gpu = 90; /* default threshold 90: at it counts */
  assert_int_equal(gpum_health_classify(&p, NULL, why, sizeof why), GPUM_HEALTH_BUSY);
  assert_string_equal(why, "GPU utilisation 90% >= 90%");
  s.valid &= ~(1u << GPUM_METRIC_UTIL_GPU); /* invalid metrics never make BUSY */
  assert_int_equal(gpum_health_classify(&p, NULL, why, sizeof why), GPUM_HEALTH_AVAILABLE);
  s = sample(0, 95, 100);
  assert_int_equal(gpum_health_classify(&p, NULL, why, sizeof why), GPUM_HEALTH_BUSY);
  assert_non_null(strstr(why, "memory used 95.0% >= 90%"));
  gpum_busy_thresholds_t t = {.util_gpu_pct = 0, .memory_pct = 0, .jobs = 2};
  assert_int_equal(gpum_health_classify(&p, &t, why, sizeof why), GPUM_HEALTH_AVAILABLE);
  p.jobs_valid = true;
  p.jobs = 2;
  assert_int_equal(gpum_health_classify(&p, &t, why, sizeof why), GPUM_HEALTH_BUSY);
  assert_string_equal(why, "jobs 2 >= 2");
  gpum_memory_health_t mh = {.valid = GPUM_MEMHEALTH_REMAPPED_ROWS, .remap_failure = true};
  p.memory_health = &mh;
  assert_int_equal(gpum_health_classify(&p, &t, why, sizeof why), GPUM_HEALTH_ERROR);
  assert_non_null(strstr(why, "row remapping failed"));

  gpum_health_probe_t e = {.rc = GPUM_ELOST};
  assert_int_equal(gpum_health_classify(&e, NULL, why, sizeof why), GPUM_HEALTH_ERROR);
  assert_string_equal(why, "GPU is lost (fallen off the bus)");
  e.rc = GPUM_ERESET;
  assert_int_equal(gpum_health_classify(&e, NULL, why, sizeof why), GPUM_HEALTH_ERROR);
  e.rc = GPUM_EAGAIN; /* one transient failure is never ERROR */
  assert_int_equal(gpum_health_classify(&e, NULL, why, sizeof why), GPUM_HEALTH_AVAILABLE);
  assert_string_equal(why, "transient driver errors");
  e.rc = GPUM_EDRIVER;
  assert_int_equal(gpum_health_classify(&e, NULL, why, sizeof why), GPUM_HEALTH_ERROR);
  assert_non_null(strstr(why, "EDRIVER"));
  assert_int_equal(gpum_health_classify(NULL, NULL, NULL, 0), GPUM_HEALTH_ERROR);
  assert_int_equal(gpum_health_classify(&e, NULL, NULL, 0), GPUM_HEALTH_ERROR);
}

static void test_backoff(void **state) {
  (void)state;
  assert_int_equal(gpum__mon_backoff_ms(10, 100, 0.0, 1, 0.5), 10);
  assert_int_equal(gpum__mon_backoff_ms(10, 100, 0.0, 2, 0.5), 20);
  assert_int_equal(gpum__mon_backoff_ms(10, 100, 0.0, 4, 0.5), 80);
  assert_int_equal(gpum__mon_backoff_ms(10, 100, 0.0, 5, 0.5), 100);
  assert_int_equal(gpum__mon_backoff_ms(10, 100, 0.0, 500, 0.5), 100);
  assert_int_equal(gpum__mon_backoff_ms(100, 1000, 0.2, 1, 0.0), 80);
  assert_int_equal(gpum__mon_backoff_ms(100, 1000, 0.2, 1, 0.5), 100);
  assert_in_range(gpum__mon_backoff_ms(100, 1000, 0.2, 1, 0.999999), 119, 120);
  assert_int_equal(gpum__mon_backoff_ms(0, 0, 0.5, 1, 0.0), 1);
  uint64_t rng = 7;
  for (int i = 0; i < 10000; i++) {
    double u = gpum__mon_rand01(&rng);
    assert_true(u >= 0.0 && u < 1.0);
  }
}

static gpum__hsm_cfg_t cfg3(void) {
  gpum__hsm_cfg_t c = {.fail_threshold = 3,
                       .recover_probes = 3,
                       .interval_ms = 10,
                       .backoff_base_ms = 10,
                       .backoff_max_ms = 160,
                       .jitter = 0.0};
  gpum_busy_thresholds_init(&c.busy);
  return c;
}

static void ok_step(gpum__hsm_t *h, const gpum__hsm_cfg_t *c, unsigned util, uint64_t t,
                    gpum__hsm_out_t *o) {
  gpum_device_sample_t s = sample(util, 1, 100);
  gpum__hsm_result(h, c, 0, NULL, &s, NULL, NULL, t, t, 0.5, o);
}

static void fail_step(gpum__hsm_t *h, const gpum__hsm_cfg_t *c, int rc, uint64_t t,
                      gpum__hsm_out_t *o) {
  gpum__hsm_result(h, c, rc, "boom", NULL, NULL, NULL, t, t, 0.5, o);
}

/* Transient failures at 30%: ERROR exactly when 3 come in a row, never before (the machine is
 * reset after each ERROR and the walk goes on). */
static void test_hsm_transient(void **state) {
  (void)state;
  gpum__hsm_cfg_t c = cfg3();
  gpum__hsm_t h;
  gpum__hsm_init(&h, 0);
  gpum__hsm_out_t o;
  uint64_t rng = 12345, t = 1;
  unsigned run = 0, failures = 0, errors = 0;
  for (int i = 0; i < 5000; i++, t += 10 * MS) {
    if (gpum__mon_rand01(&rng) < 0.3) {
      fail_step(&h, &c, GPUM_EAGAIN, t, &o);
      run++;
      failures++;
      assert_true(o.probe);
      assert_int_equal(o.probe_rc, GPUM_EAGAIN);
      if (run < 3) {
        assert_false(o.transition);
        assert_int_equal(h.shown, GPUM_HEALTH_AVAILABLE);
        /* the retry is scheduled with backoff, not with the next round */
        assert_int_equal(h.next_attempt_mono, t + (10ull << (run - 1)) * MS);
        assert_false(gpum__hsm_due(&h, t + 1));
        assert_true(gpum__hsm_due(&h, h.next_attempt_mono));
      } else {
        assert_true(o.transition);
        assert_int_equal(o.to, GPUM_HEALTH_ERROR);
        assert_non_null(strstr(h.reason, "3 consecutive failed driver calls; last: boom"));
        assert_false(h.gone); /* failing, with no sign the GPU is gone */
        errors++;
        gpum__hsm_init(&h, t);
        run = 0;
      }
    } else {
      ok_step(&h, &c, 0, t, &o);
      assert_false(o.transition);
      run = 0;
      assert_int_equal(h.next_attempt_mono, 0);
    }
  }
  assert_true(failures > 1000);
  assert_true(errors > 0);
}

static void test_hsm_error_recovery(void **state) {
  (void)state;
  gpum__hsm_cfg_t c = cfg3();
  gpum__hsm_t h;
  gpum__hsm_init(&h, 0);
  gpum__hsm_out_t o;
  uint64_t t = 1000 * MS;
  fail_step(&h, &c, GPUM_ELOST, t, &o); /* at once, no N */
  assert_true(o.transition);
  assert_int_equal(o.from, GPUM_HEALTH_AVAILABLE);
  assert_int_equal(o.to, GPUM_HEALTH_ERROR);
  assert_string_equal(o.reason, "GPU is lost (fallen off the bus)");
  assert_int_equal(h.since_ns, t);
  assert_true(h.gone);
  /* failed re-probes: 10, 20, 40, 80, 160, 160 ms apart */
  uint64_t want[] = {10, 20, 40, 80, 160, 160, 160};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    assert_int_equal(h.next_attempt_mono - t, want[i] * MS);
    t = h.next_attempt_mono;
    fail_step(&h, &c, GPUM_ELOST, t, &o);
    assert_true(o.probe);
    assert_false(o.transition);
  }
  /* healthy probes: M = 3 to recover; a critical event in between starts over */
  ok_step(&h, &c, 0, t, &o);
  assert_int_equal(h.healthy_probes, 1);
  assert_int_equal(h.next_attempt_mono, 0); /* then with the rounds */
  gpum__hsm_critical(&h, &c, "XID 48: double-bit ECC", true, t, t, 0.5, &o);
  assert_false(o.transition);
  assert_int_equal(h.healthy_probes, 0);
  assert_string_equal(h.reason, "XID 48: double-bit ECC");
  ok_step(&h, &c, 0, t + 1, &o);
  ok_step(&h, &c, 0, t + 2, &o);
  assert_int_equal(h.shown, GPUM_HEALTH_ERROR);
  assert_string_equal(o.reason, "healthy probe 2 of 3");
  ok_step(&h, &c, 95, t + 3, &o); /* recovers into BUSY when over the threshold */
  assert_true(o.transition);
  assert_int_equal(o.from, GPUM_HEALTH_ERROR);
  assert_int_equal(o.to, GPUM_HEALTH_BUSY);
  assert_non_null(strstr(h.reason, "recovered after 3 healthy probes; GPU utilisation 95%"));
  assert_false(h.gone);
  ok_step(&h, &c, 5, t + 4, &o);
  assert_int_equal(o.to, GPUM_HEALTH_AVAILABLE);
  assert_int_equal(h.failures, 0);
  fail_step(&h, &c, GPUM_ERESET, t + 5, &o);
  assert_int_equal(h.shown, GPUM_HEALTH_ERROR);
  assert_string_equal(h.reason, "GPU needs a reset");
  assert_true(h.gone);
  /* A hung call (the watchdog) is ERROR but not gone; a critical Xid after it is. */
  gpum__hsm_init(&h, t + 6);
  gpum__hsm_critical(&h, &c, "driver call hung for 5000 ms (watchdog 5000 ms)", false, t + 6, t + 6,
                     0.5, &o);
  assert_int_equal(h.shown, GPUM_HEALTH_ERROR);
  assert_false(h.gone);
  gpum__hsm_critical(&h, &c, "XID 79: GPU has fallen off the bus", true, t + 7, t + 7, 0.5, &o);
  assert_true(h.gone);
  gpum__hsm_critical(&h, &c, "driver call hung for 6000 ms (watchdog 5000 ms)", false, t + 8, t + 8,
                     0.5, &o);
  assert_true(h.gone); /* stays gone until it recovers */
}

static void test_hsm_ecc_and_disabled(void **state) {
  (void)state;
  gpum__hsm_cfg_t c = cfg3();
  gpum__hsm_t h;
  gpum__hsm_init(&h, 0);
  gpum__hsm_out_t o;
  gpum_device_sample_t s = sample(0, 1, 100);
  s.valid |= 1u << GPUM_METRIC_ECC_UNCORRECTED;
  s.ecc_uncorrected = 4; /* a count already there at start is not growth */
  gpum__hsm_result(&h, &c, 0, NULL, &s, NULL, NULL, 1, 1, 0.5, &o);
  gpum__hsm_result(&h, &c, 0, NULL, &s, NULL, NULL, 2, 2, 0.5, &o);
  assert_int_equal(h.shown, GPUM_HEALTH_AVAILABLE);
  s.ecc_uncorrected = 5;
  gpum__hsm_result(&h, &c, 0, NULL, &s, NULL, NULL, 3, 3, 0.5, &o);
  assert_true(o.transition);
  assert_string_equal(h.reason, "uncorrectable ECC errors grew from 4 to 5");

  gpum__hsm_init(&h, 0);
  gpum__hsm_set_disabled(&h, true, NULL, 7, &o);
  assert_true(o.transition);
  assert_int_equal(o.to, GPUM_HEALTH_DISABLED);
  assert_string_equal(o.reason, "disabled by the operator");
  for (int i = 0; i < 3; i++)
    fail_step(&h, &c, GPUM_EAGAIN, 10 + i, &o);
  assert_false(o.transition); /* shown stays DISABLED */
  assert_int_equal(h.shown, GPUM_HEALTH_DISABLED);
  assert_int_equal(h.inner, GPUM_HEALTH_ERROR);
  gpum__hsm_set_disabled(&h, true, "again", 20, &o);
  assert_false(o.transition);
  gpum__hsm_set_disabled(&h, false, NULL, 21, &o);
  assert_true(o.transition);
  assert_int_equal(o.from, GPUM_HEALTH_DISABLED);
  assert_int_equal(o.to, GPUM_HEALTH_ERROR);
  assert_non_null(strstr(o.reason, "3 consecutive"));
  gpum__hsm_init(&h, 0);
  gpum__hsm_set_disabled(&h, true, "x", 1, &o);
  gpum__hsm_set_disabled(&h, false, NULL, 2, &o);
  assert_int_equal(o.to, GPUM_HEALTH_AVAILABLE);
  assert_string_equal(o.reason, "enabled by the operator");
}

static void test_record_and_ring(void **state) {
  (void)state;
  gpum_device_sample_t s, back;
  memset(&s, 0, sizeof s);
  s.timestamp_ns = 1700000000123456789ull;
  s.valid = (1u << GPUM_METRIC_COUNT) - 1;
  s.memory_total = 85899345920ull;
  s.memory_used = 12345678901ull;
  s.memory_free = 85899345920ull - 12345678901ull;
  s.memory_reserved = 536870912ull + 3;
  s.util_gpu = 100;
  s.util_memory = 37;
  s.temperature_c = -12;
  s.power_mw = 699123;
  s.clock_sm_mhz = 1980;
  s.clock_mem_mhz = 2619;
  s.ecc_corrected = 4000000000ull;
  s.ecc_uncorrected = 17;
  gpum__hrec_t r;
  gpum__hrec_pack(&s, &r);
  gpum__hrec_unpack(&r, &back);
  assert_memory_equal(&s, &back, sizeof s); /* exact for every realistic value */
  s.ecc_corrected = 1ull << 40;
  s.clock_sm_mhz = 70000;
  s.util_gpu = 300;
  gpum__hrec_pack(&s, &r);
  gpum__hrec_unpack(&r, &back);
  assert_int_equal(back.ecc_corrected, UINT32_MAX); /* saturates */
  assert_int_equal(back.clock_sm_mhz, 65535);
  assert_int_equal(back.util_gpu, 255);

  gpum__ring_t ring;
  assert_int_equal(gpum__ring_init(&ring, 0), GPUM_EINVAL);
  assert_int_equal(gpum__ring_init(&ring, 5), 0);
  assert_int_equal(gpum__ring_after(&ring, 0), 0);
  for (uint64_t i = 1; i <= 12; i++) {
    memset(&r, 0, sizeof r);
    r.timestamp_ns = i * 10;
    gpum__ring_push(&ring, &r);
  }
  assert_int_equal(ring.len, 5);
  assert_int_equal(ring.total, 12);
  for (size_t i = 0; i < 5; i++)
    assert_int_equal(gpum__ring_at(&ring, i)->timestamp_ns, (8 + i) * 10);
  assert_int_equal(gpum__ring_after(&ring, 0), 0);
  assert_int_equal(gpum__ring_after(&ring, 80), 1);
  assert_int_equal(gpum__ring_after(&ring, 85), 1);
  assert_int_equal(gpum__ring_after(&ring, 119), 4);
  assert_int_equal(gpum__ring_after(&ring, 120), 5);
  gpum__ring_free(&ring);
}

static void test_stats(void **state) {
  (void)state;
  double v[100];
  for (int i = 0; i < 100; i++)
    v[i] = 100 - i; /* unsorted: the input is not changed */
  gpum_window_stats_t st;
  assert_int_equal(gpum_stats_compute(v, 100, &st), 0);
  assert_int_equal(st.count, 100);
  assert_true(st.min == 1 && st.max == 100 && st.mean == 50.5);
  assert_true(st.p50 == 50 && st.p95 == 95 && st.p99 == 99);
  assert_true(v[0] == 100);
  double three[] = {3, 1, 2};
  assert_int_equal(gpum_stats_compute(three, 3, &st), 0);
  assert_true(st.p50 == 2 && st.p95 == 3 && st.p99 == 3 && st.mean == 2);
  double one = 7;
  assert_int_equal(gpum_stats_compute(&one, 1, &st), 0);
  assert_true(st.min == 7 && st.p50 == 7 && st.p99 == 7);
  assert_int_equal(gpum_stats_compute(NULL, 0, &st), 0);
  assert_int_equal(st.count, 0);
  assert_int_equal(gpum_stats_compute(NULL, 3, &st), GPUM_EINVAL);
  assert_int_equal(gpum_stats_compute(v, 3, NULL), GPUM_EINVAL);
}

static void test_bad_options(void **state) {
  (void)state;
  gpum_monitor_t *mon = (gpum_monitor_t *)&mon;
  gpum_monitor_opts_t o;
  gpum_monitor_opts_init(&o);
  o.interval_ms = 0;
  assert_int_equal(gpum_monitor_create(NULL, &o, &mon), GPUM_EINVAL);
  assert_null(mon);
  assert_non_null(strstr(gpum_last_error(), "interval 0 ms"));
  gpum_monitor_opts_init(&o);
  o.jitter = 0.9;
  assert_int_equal(gpum_monitor_create(NULL, &o, &mon), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "jitter 0.9"));
  gpum_monitor_opts_init(&o);
  o.fail_threshold = 0;
  assert_int_equal(gpum_monitor_create(NULL, &o, &mon), GPUM_EINVAL);
  gpum_monitor_opts_init(&o);
  o.busy.memory_pct = 101;
  assert_int_equal(gpum_monitor_create(NULL, &o, &mon), GPUM_EINVAL);
  gpum_monitor_opts_init(&o);
  o.backoff_base_ms = 100;
  o.backoff_max_ms = 50;
  assert_int_equal(gpum_monitor_create(NULL, &o, &mon), GPUM_EINVAL);
  gpum_monitor_opts_init(&o);
  o.history_seconds = 0;
  assert_int_equal(gpum_monitor_create(NULL, &o, &mon), GPUM_EINVAL);
  gpum_monitor_opts_init(&o);
  o.interval_ms = 1;
  o.history_seconds = 86400; /* 86.4 M records per device */
  assert_int_equal(gpum_monitor_create(NULL, &o, &mon), GPUM_EINVAL);
  assert_int_equal(gpum_monitor_create(NULL, NULL, NULL), GPUM_EINVAL);

  gpum_device_open_opts_t d;
  gpum_device_open_opts_init(&d);
  d.backend = GPUM_BACKEND_HOST;
  gpum_monitor_opts_init(&o);
  o.devices = (const unsigned[]){3};
  o.device_count = 1;
  assert_int_equal(gpum_monitor_create(&d, &o, &mon), GPUM_ENODEV);
  assert_non_null(strstr(gpum_last_error(), "no device 3"));
  o.devices = (const unsigned[]){0, 0};
  o.device_count = 2;
  assert_int_equal(gpum_monitor_create(&d, &o, &mon), GPUM_EINVAL);
  gpum_monitor_destroy(NULL);
  gpum_monitor_stop(NULL);
}

/* Counts the health events delivered to a subscriber. */
static void count_cb(const gpum_monitor_event_t *ev, void *user) {
  if (ev->kind == GPUM_MONEV_HEALTH)
    (*(unsigned *)user)++;
}

static void test_live_host(void **state) {
  (void)state;
  gpum_device_open_opts_t d;
  gpum_device_open_opts_init(&d);
  d.backend = GPUM_BACKEND_HOST;
  gpum_monitor_opts_t o;
  gpum_monitor_opts_init(&o);
  o.interval_ms = 5;
  o.history_seconds = 1; /* 200 records: the ring wraps */
  o.busy.util_gpu_pct = 0;
  o.busy.memory_pct = 0;
  gpum_monitor_t *mon;
  assert_int_equal(gpum_monitor_create(&d, &o, &mon), 0);
  assert_int_equal(gpum_monitor_device_count(mon), 1);
  assert_true(gpum_monitor_memory_usage(mon) >= 200 * 64);
  gpum_monitor_t *dflt;
  assert_int_equal(gpum_monitor_create(&d, NULL, &dflt), 0);
  /* defaults: 3600 records of 64 B per device, plus the event ring: 8 GPUs stay < 8 MiB */
  size_t per = gpum_monitor_memory_usage(dflt);
  assert_true(per >= 3600 * 64);
  assert_true(8 * per < 8u << 20);
  gpum_monitor_destroy(dflt);
  unsigned dev = 9;
  assert_int_equal(gpum_monitor_device_index(mon, 0, &dev), 0);
  assert_int_equal(dev, 0);
  assert_int_equal(gpum_monitor_device_index(mon, 1, &dev), GPUM_ENODEV);
  gpum_device_info_t info;
  /* No device is called before start: the worker reads the info. */
  assert_int_equal(gpum_monitor_device_info(mon, 0, &info), GPUM_EAGAIN);
  assert_int_equal(gpum_monitor_wait_info(mon, 0, NULL), GPUM_ESTATE);
  gpum_device_sample_t s;
  assert_int_equal(gpum_monitor_latest(mon, 0, &s), GPUM_ENOENT);
  assert_int_equal(gpum_monitor_latest(mon, 1, &s), GPUM_ENODEV);
  unsigned delivered = 0, id = 0;
  assert_int_equal(gpum_monitor_subscribe(mon, count_cb, &delivered, &id), 0);
  assert_int_equal(gpum_monitor_start(mon), 0);
  assert_int_equal(gpum_monitor_start(mon), GPUM_ESTATE);
  assert_int_equal(gpum_monitor_set_alert_engine(mon, NULL), GPUM_ESTATE);
  unsigned missing = 9;
  assert_int_equal(gpum_monitor_wait_info(mon, 10000, &missing), 0);
  assert_int_equal(missing, 0);
  assert_int_equal(gpum_monitor_device_info(mon, 0, &info), 0);
  assert_true(info.is_host);
  uint64_t n = 0, cur = 0;
  gpum_monitor_event_t ev;
  while (n < 250) { /* poll with a deadline (the ctest timeout) */
    gpum_monitor_event_wait(mon, &cur, &ev, 5);
    assert_int_equal(gpum_monitor_sample_count(mon, 0, &n), 0);
  }
  assert_int_equal(gpum_monitor_set_disabled(mon, 0, true, "test"), 0);
  assert_int_equal(gpum_monitor_event_wait(mon, &cur, &ev, 1000), 0);
  assert_int_equal(ev.kind, GPUM_MONEV_HEALTH);
  assert_int_equal(ev.to, GPUM_HEALTH_DISABLED);
  assert_int_equal(delivered, 1); /* delivered on this thread, before set_disabled returned */
  assert_int_equal(gpum_monitor_unsubscribe(mon, id), 0);
  assert_int_equal(gpum_monitor_unsubscribe(mon, id), GPUM_ENOENT);
  gpum_monitor_stop(mon);
  gpum_monitor_stop(mon);
  assert_int_equal(gpum_monitor_event_wait(mon, &cur, &ev, 0), GPUM_ETIMEDOUT);

  size_t count = 0;
  gpum_device_sample_t *h = calloc(300, sizeof(*h));
  assert_int_equal(gpum_monitor_history(mon, 0, 0, h, 300, &count), 0);
  assert_int_equal(count, 200);
  assert_int_equal(gpum_monitor_latest(mon, 0, &s), 0);
  assert_memory_equal(&s, &h[count - 1], sizeof s);
  for (int m = 0; m < GPUM_METRIC_COUNT; m++) {
    double v[200];
    size_t k = 0;
    for (size_t i = 0; i < count; i++)
      if (gpum_sample_get(&h[i], (gpum_metric_t)m, &v[k]))
        k++;
    gpum_window_stats_t want, got;
    assert_int_equal(gpum_stats_compute(v, k, &want), 0);
    assert_int_equal(gpum_monitor_range_stats(mon, 0, (gpum_metric_t)m, h[0].timestamp_ns,
                                              h[count - 1].timestamp_ns, &got),
                     0);
    assert_memory_equal(&want, &got, sizeof want);
  }
  gpum_device_health_t hh;
  assert_int_equal(gpum_monitor_health(mon, 0, &hh), 0);
  assert_int_equal(hh.state, GPUM_HEALTH_DISABLED);
  assert_string_equal(hh.reason, "test");
  assert_true(hh.responsive);
  free(h);
  gpum_monitor_destroy(mon);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_state_names),
      cmocka_unit_test(test_classify),
      cmocka_unit_test(test_backoff),
      cmocka_unit_test(test_hsm_transient),
      cmocka_unit_test(test_hsm_error_recovery),
      cmocka_unit_test(test_hsm_ecc_and_disabled),
      cmocka_unit_test(test_record_and_ring),
      cmocka_unit_test(test_stats),
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_live_host),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
