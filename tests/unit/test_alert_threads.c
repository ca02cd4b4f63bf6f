/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Threaded test of the alert engine (also run under ThreadSanitizer by make test-tsan): the
 * monitor feeds samples, Xids and health states from different threads while readers copy the
 * active list and the history. Every fire and clear reaches the callback exactly once, and
 * the counters, the callback tally and the active list agree at the end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include <gpum/alert.h>
#include <gpum/monitor.h>

#define ROUNDS 2000
#define S(x) ((uint64_t)(x)*1000000000ull)

typedef struct {
  pthread_mutex_t mu;
  uint64_t fired, cleared;
} tally_t;

static void count(const gpum_alert_t *a, void *arg) {
  tally_t *t = arg;
  pthread_mutex_lock(&t->mu);
  if (a->state == GPUM_ALERT_FIRED)
    t->fired++;
  else
    t->cleared++;
  pthread_mutex_unlock(&t->mu);
}

typedef struct {
  gpum_alert_engine_t *e;
  unsigned device;
} feeder_t;

static void *feed_samples(void *p) {
  feeder_t *f = p;
  for (unsigned i = 0; i < ROUNDS; i++) {
    gpum_device_sample_t s = {0};
    s.valid = 1u << GPUM_METRIC_TEMPERATURE;
    s.temperature_c = (i / 3) % 2 ? 90 : 60; /* three hot samples, three cool */
    gpum_alert_engine_feed_sample(f->e, f->device, &s, S(i));
  }
  return NULL;
}

static void *feed_events(void *p) {
  feeder_t *f = p;
  for (unsigned i = 0; i < ROUNDS; i++) {
    gpum_alert_engine_feed_xid(f->e, f->device, i % 2 ? 79 : 13, S(i));
    gpum_alert_engine_feed_health(f->e, f->device,
                                  i % 4 ? GPUM_HEALTH_AVAILABLE : GPUM_HEALTH_ERROR, "test", S(i));
  }
  return NULL;
}

static void *read_lists(void *p) {
  feeder_t *f = p;
  gpum_alert_t buf[32];
  for (unsigned i = 0; i < ROUNDS; i++) {
    size_t n = 0;
    gpum_alert_engine_active(f->e, buf, 32, &n);
    gpum_alert_engine_history(f->e, buf, 32, &n);
  }
  return NULL;
}

static void test_concurrent_feeds(void **state) {
  (void)state;
  gpum_alert_engine_opts_t o;
  gpum_alert_engine_t *e = NULL;
  tally_t tally = {.fired = 0};
  pthread_mutex_init(&tally.mu, NULL);
  gpum_alert_engine_opts_init(&o);
  o.history_cap = 16;
  o.xid_window_ms = 2000;
  assert_int_equal(gpum_alert_engine_create(&o, &e), 0);
  assert_int_equal(gpum_alert_engine_add_callback(e, count, &tally), 0);
  assert_int_equal(gpum_alert_engine_add_rule(e, "temperature > 80 for 1s WARNING", NULL), 0);
  assert_int_equal(gpum_alert_engine_add_rule(e, "xid any auto", NULL), 0);
  assert_int_equal(gpum_alert_engine_add_rule(e, "health == ERROR CRITICAL", NULL), 0);
  feeder_t f[4] = {{e, 0}, {e, 1}, {e, 2}, {e, 3}};
  pthread_t th[4];
  assert_int_equal(pthread_create(&th[0], NULL, feed_samples, &f[0]), 0);
  assert_int_equal(pthread_create(&th[1], NULL, feed_samples, &f[1]), 0);
  assert_int_equal(pthread_create(&th[2], NULL, feed_events, &f[2]), 0);
  assert_int_equal(pthread_create(&th[3], NULL, read_lists, &f[3]), 0);
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  gpum_alert_counters_t c;
  gpum_alert_engine_counters(e, &c);
  size_t active = 0;
  gpum_alert_engine_active(e, NULL, 0, &active);
  assert_int_equal(tally.fired, c.fired);
  assert_int_equal(tally.cleared, c.cleared);
  assert_int_equal(c.fired - c.cleared, active);
  /* Exactly: 333 hot spells on each of 2 devices, every Xid (each one's 2 s window has
   * expired when the same Xid comes back 2 s later), and 500 ERROR states. */
  assert_int_equal(c.fired, 2 * 333 + ROUNDS + ROUNDS / 4);
  gpum_alert_engine_destroy(e);
  pthread_mutex_destroy(&tally.mu);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concurrent_feeds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
