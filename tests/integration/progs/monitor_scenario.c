/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test program: runs one monitor scenario against the simulated node named by $GPUM_SIM_NODE
 * (started by the calling script), injecting faults through libgpum_sim.so's control API
 * (dlopened from $GPUM_SIM_LIBRARY) in the same process, so every step waits on the monitor's
 * own events or on a polled condition with a deadline, never on a sleep.
 *
 *   monitor_scenario xid79 | transient30 | transient100 | hang | stats | disabled | busy | ecc |
 *                    threads
 *
 * Prints "ok: ..." per check; on a failed check prints "FAIL: ..." and exits 1.
 */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/alert.h>
#include <gpum/error.h>
#include <gpum/monitor.h>
#include <gpum/sim.h>

static const char *node;
static int (*sim_inject)(const char *, unsigned, const gpum_sim_fault_t *);
static int (*sim_clear)(const char *, unsigned);
static int (*sim_set_util)(const char *, unsigned, int, int);
static int (*sim_hold)(const char *, unsigned, uint64_t, uint64_t, pid_t *);

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("FAIL: ", stdout);
  vprintf(fmt, ap);
  va_end(ap);
  fputc('\n', stdout);
  fflush(stdout);
  exit(1);
}

static void ok(const char *what) {
  printf("ok: %s\n", what);
  fflush(stdout);
}

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void load_sim(void) {
  const char *lib = getenv("GPUM_SIM_LIBRARY");
  node = getenv("GPUM_SIM_NODE");
  if (lib == NULL || node == NULL)
    fail("GPUM_SIM_LIBRARY and GPUM_SIM_NODE must be set");
  void *dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (dl == NULL)
    fail("dlopen %s: %s", lib, dlerror());
  void *p;
#define SYM(var, name)               \
  if ((p = dlsym(dl, name)) == NULL) \
    fail("%s not exported", name);   \
  memcpy(&var, &p, sizeof var)
  SYM(sim_inject, "gpum_sim_inject");
  SYM(sim_clear, "gpum_sim_clear");
  SYM(sim_set_util, "gpum_sim_set_util");
  SYM(sim_hold, "gpum_sim_hold");
#undef SYM
}

static void inject(unsigned dev, gpum_sim_fault_kind_t kind, int64_t value, double rate) {
  gpum_sim_fault_t f = {.kind = kind, .value = value, .rate = rate};
  if (sim_inject(node, dev, &f) != 0)
    fail("inject fault %d on device %u", (int)kind, dev);
}

static void clear(unsigned dev) {
  if (sim_clear(node, dev) != 0)
    fail("clear device %u", dev);
}

/* A monitor with test-sized timings: 20 ms rounds, short backoff, watchdog 300 ms. */
static void test_opts(gpum_monitor_opts_t *o) {
  gpum_monitor_opts_init(o);
  o->interval_ms = 20;
  o->history_seconds = 60;
  o->watchdog_ms = 300;
  o->backoff_base_ms = 20;
  o->backoff_max_ms = 320;
  o->jitter = 0.1;
  o->seed = 42;
}

static gpum_monitor_t *start(const gpum_monitor_opts_t *o, int retries, int retry_base_ms) {
  gpum_device_open_opts_t d;
  gpum_device_open_opts_init(&d);
  d.backend = GPUM_BACKEND_NVML;
  d.retries = retries;
  d.retry_base_ms = retry_base_ms;
  gpum_monitor_t *mon;
  if (gpum_monitor_create(&d, o, &mon) != 0)
    fail("gpum_monitor_create: %s", gpum_last_error());
  if (gpum_monitor_start(mon) != 0)
    fail("gpum_monitor_start: %s", gpum_last_error());
  if (gpum_monitor_wait_info(mon, 10000, NULL) != 0)
    fail("gpum_monitor_wait_info: %s", gpum_last_error());
  return mon;
}

static uint64_t count_of(gpum_monitor_t *mon, unsigned dev) {
  uint64_t n = 0;
  if (gpum_monitor_sample_count(mon, dev, &n) != 0)
    fail("sample count of device %u: %s", dev, gpum_last_error());
  return n;
}

/* Polls until device dev has at least n samples (deadline ms). */
static void wait_samples(gpum_monitor_t *mon, unsigned dev, uint64_t n, unsigned ms) {
  uint64_t end = mono_ms() + ms;
  gpum_monitor_event_t ev;
  uint64_t cur = UINT64_MAX - 1; /* no event has this seq: event_wait is used as a timed pause */
  while (count_of(mon, dev) < n) {
    if (mono_ms() > end)
      fail("device %u: %llu samples after %u ms, expected %llu", dev,
           (unsigned long long)count_of(mon, dev), ms, (unsigned long long)n);
    gpum_monitor_event_wait(mon, &cur, &ev, 5);
    cur = UINT64_MAX - 1;
  }
}

/* Waits for the next event matching (device, kind, to-state or -1); returns it. Events of
 * other kinds are passed to seen (may be NULL). */
typedef void (*seen_fn)(const gpum_monitor_event_t *ev, void *arg);

static gpum_monitor_event_t wait_event(gpum_monitor_t *mon, uint64_t *cur, unsigned dev,
                                       gpum_monitor_event_kind_t kind, int to, unsigned ms,
                                       seen_fn seen, void *arg) {
  uint64_t end = mono_ms() + ms;
  gpum_monitor_event_t ev;
  for (;;) {
    uint64_t now = mono_ms();
    if (now > end)
      fail("no %s event%s%s on device %u within %u ms", gpum_monitor_event_kind_name(kind),
           to >= 0 ? " to " : "", to >= 0 ? gpum_health_state_name((gpum_health_t)to) : "", dev,
           ms);
    if (gpum_monitor_event_wait(mon, cur, &ev, (unsigned)(end - now)) != 0)
      continue;
    if (seen != NULL)
      seen(&ev, arg);
    if (ev.device == dev && ev.kind == kind && (to < 0 || (int)ev.to == to))
      return ev;
  }
}

static gpum_device_health_t health_of(gpum_monitor_t *mon, unsigned dev) {
  gpum_device_health_t h;
  if (gpum_monitor_health(mon, dev, &h) != 0)
    fail("health of device %u: %s", dev, gpum_last_error());
  return h;
}

/* Fails on any transition of device *arg to ERROR. */
static void no_error(const gpum_monitor_event_t *ev, void *arg) {
  unsigned dev = *(unsigned *)arg;
  if (ev->kind == GPUM_MONEV_HEALTH && ev->device == dev && ev->to == GPUM_HEALTH_ERROR)
    fail("device %u went ERROR: %s", dev, ev->reason);
}

/* ---- XID 79 -------------------------------------------------------------------------- */

typedef struct {
  unsigned dev;
  uint64_t times[64];
  unsigned n, healthy;
  bool other_error;
} probes_t;

static void record_probes(const gpum_monitor_event_t *ev, void *arg) {
  probes_t *p = arg;
  if (ev->kind == GPUM_MONEV_HEALTH && ev->device != p->dev && ev->to == GPUM_HEALTH_ERROR)
    p->other_error = true;
  if (ev->kind != GPUM_MONEV_PROBE || ev->device != p->dev)
    return;
  if (ev->rc == 0)
    p->healthy++;
  else if (p->n < 64)
    p->times[p->n++] = ev->time_ns;
}

static void check_backoff(const probes_t *p, unsigned base_ms, unsigned max_ms) {
  if (p->n < 6)
    fail("only %u failed re-probes recorded", p->n);
  /* The k-th gap between failed re-probes is at least base * 2^(k-1) (capped at the maximum),
   * less the 10% jitter: lower bounds only, so a loaded machine (late wake-ups) cannot fail
   * the check, while probing at a fixed rate would. The delays stop growing at the maximum. */
  for (unsigned i = 1; i < p->n; i++) {
    double gap = (double)(p->times[i] - p->times[i - 1]) / 1e6;
    double want = (double)base_ms * (double)(1u << (i - 1 < 10 ? i - 1 : 10));
    if (want > max_ms)
      want = max_ms;
    printf("  re-probe gap %u: %.1f ms (at least %.0f)\n", i, gap, 0.9 * want);
    if (gap < 0.9 * want - 1)
      fail("re-probe gap %u is %.1f ms: no backoff", i, gap);
    if (gap > 1.1 * max_ms + 500)
      fail("re-probe gap %u is %.1f ms, far above the maximum %u ms", i, gap, max_ms);
  }
  ok("re-probes back off exponentially up to the maximum");
}

/* True when the engine's history has an alert of metric on device dev. */
static bool has_alert(gpum_alert_engine_t *e, unsigned dev, const char *metric) {
  gpum_alert_t a[64];
  size_t n = 0;
  gpum_alert_engine_history(e, a, 64, &n);
  for (size_t i = 0; i < n && i < 64; i++)
    if (a[i].device == dev && strcmp(a[i].metric, metric) == 0)
      return true;
  return false;
}

static int scenario_xid79(void) {
  gpum_monitor_opts_t o;
  test_opts(&o);
  gpum_alert_engine_t *alerts;
  if (gpum_alert_engine_create(NULL, &alerts) != 0 ||
      gpum_alert_engine_add_default_rules(alerts) != 0)
    fail("alert engine: %s", gpum_last_error());
  o.alerts = alerts;
  gpum_monitor_t *mon = start(&o, 1, 1);
  wait_samples(mon, 1, 3, 5000);
  uint64_t cur = 0;
  inject(1, GPUM_SIM_FAULT_XID, 79, 0);
  probes_t p = {.dev = 1};
  gpum_monitor_event_t ev =
      wait_event(mon, &cur, 1, GPUM_MONEV_HEALTH, GPUM_HEALTH_ERROR, 5000, record_probes, &p);
  printf("  transition: %s -> %s: %s\n", gpum_health_state_name(ev.from),
         gpum_health_state_name(ev.to), ev.reason);
  if (strstr(ev.reason, "79") == NULL && strstr(ev.reason, "fallen off the bus") == NULL)
    fail("ERROR reason does not name XID 79 or the lost GPU: %s", ev.reason);
  ok("XID 79 -> ERROR with the reason");
  p.n = 0;
  while (p.n < 7)
    wait_event(mon, &cur, 1, GPUM_MONEV_PROBE, -1, 5000, record_probes, &p);
  check_backoff(&p, o.backoff_base_ms, o.backoff_max_ms);
  if (health_of(mon, 1).state != GPUM_HEALTH_ERROR)
    fail("device 1 left ERROR while lost");
  uint64_t c0 = count_of(mon, 0);
  wait_samples(mon, 0, c0 + 10, 5000);
  if (p.other_error || health_of(mon, 0).state != GPUM_HEALTH_AVAILABLE)
    fail("device 0 is not AVAILABLE");
  ok("the other device keeps being sampled");

  clear(1);
  p.healthy = 0;
  ev = wait_event(mon, &cur, 1, GPUM_MONEV_HEALTH, GPUM_HEALTH_AVAILABLE, 5000, record_probes, &p);
  printf("  transition: %s -> %s: %s (healthy probes %u)\n", gpum_health_state_name(ev.from),
         gpum_health_state_name(ev.to), ev.reason, p.healthy);
  if (p.healthy != o.recover_probes || ev.from != GPUM_HEALTH_ERROR)
    fail("recovered after %u healthy probes, expected %u", p.healthy, o.recover_probes);
  ok("after the fault is cleared the device returns to AVAILABLE after M healthy probes");
  gpum_monitor_destroy(mon);
  if (!has_alert(alerts, 1, "xid") || !has_alert(alerts, 1, "health") ||
      has_alert(alerts, 0, "xid"))
    fail("the alert engine was not fed the XID and the health transition of device 1");
  gpum_alert_engine_destroy(alerts);
  ok("the attached alert engine got the XID and the ERROR transition");
  return 0;
}

/* ---- transient errors ---------------------------------------------------------------- */

typedef struct {
  unsigned dev, failures;
} count_t;

static void count_failures(const gpum_monitor_event_t *ev, void *arg) {
  count_t *c = arg;
  no_error(ev, &c->dev);
  if (ev->kind == GPUM_MONEV_PROBE && ev->device == c->dev && ev->rc != 0)
    c->failures++;
}

static int scenario_transient30(void) {
  gpum_monitor_opts_t o;
  test_opts(&o);
  o.interval_ms = 5;
  o.backoff_base_ms = 5;
  /* The default retry count (-1: 5 retries, so each call is tried 6 times): P(sample fails) =
   * 1 - (1 - 0.3^6)^8 = 0.58%; 3 in a row: 2e-7 per round, 8e-5 over 400 rounds. */
  gpum_monitor_t *mon = start(&o, -1, 1);
  wait_samples(mon, 0, 2, 5000);
  uint64_t cur = 0;
  gpum_monitor_event_t ev;
  while (gpum_monitor_event_wait(mon, &cur, &ev, 0) == 0) {
  }
  inject(0, GPUM_SIM_FAULT_ERROR_RATE, 0, 0.3);
  uint64_t c0 = count_of(mon, 0);
  count_t c = {.dev = 0};
  uint64_t end = mono_ms() + 60000;
  while (count_of(mon, 0) < c0 + 400) {
    if (mono_ms() > end)
      fail("device 0 sampled only %llu times in 60 s", (unsigned long long)(count_of(mon, 0) - c0));
    if (gpum_monitor_event_wait(mon, &cur, &ev, 20) == 0)
      count_failures(&ev, &c);
  }
  while (gpum_monitor_event_wait(mon, &cur, &ev, 0) == 0)
    count_failures(&ev, &c);
  printf("  400 samples, %u failed calls retried\n", c.failures);
  if (health_of(mon, 0).state == GPUM_HEALTH_ERROR)
    fail("device 0 is ERROR");
  ok("a 30% transient error rate never marks the device ERROR");
  clear(0);
  gpum_monitor_destroy(mon);
  return 0;
}

static int scenario_transient100(void) {
  gpum_monitor_opts_t o;
  test_opts(&o);
  gpum_monitor_t *mon = start(&o, 1, 1);
  wait_samples(mon, 0, 2, 5000);
  uint64_t cur = 0;
  gpum_monitor_event_t ev;
  while (gpum_monitor_event_wait(mon, &cur, &ev, 0) == 0) {
  }
  inject(0, GPUM_SIM_FAULT_ERROR_RATE, 0, 1.0);
  probes_t p = {.dev = 0};
  ev = wait_event(mon, &cur, 0, GPUM_MONEV_HEALTH, GPUM_HEALTH_ERROR, 10000, record_probes, &p);
  printf("  transition after %u failed calls: %s\n", p.n, ev.reason);
  if (p.n != o.fail_threshold)
    fail("ERROR after %u failed calls, expected N = %u", p.n, o.fail_threshold);
  if (strstr(ev.reason, "3 consecutive failed driver calls") == NULL)
    fail("reason does not say why: %s", ev.reason);
  /* The k-th retry waits at least base * 2^(k-1) less the 10% jitter. */
  for (unsigned i = 1; i < p.n; i++)
    if ((double)(p.times[i] - p.times[i - 1]) / 1e6 < 0.9 * o.backoff_base_ms * (1u << (i - 1)) - 1)
      fail("retry %u came after %.1f ms: no backoff", i,
           (double)(p.times[i] - p.times[i - 1]) / 1e6);
  ok("a 100% error rate marks ERROR after N tries, with backoff between them");
  clear(0);
  wait_event(mon, &cur, 0, GPUM_MONEV_HEALTH, GPUM_HEALTH_AVAILABLE, 10000, NULL, NULL);
  ok("recovers once the errors stop");
  gpum_monitor_destroy(mon);
  return 0;
}

/* Threads of this process. */
static unsigned thread_count(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  unsigned n = 0;
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "Threads: %u", &n) == 1)
      break;
  if (f != NULL)
    fclose(f);
  return n;
}

/* ---- hanging call -------------------------------------------------------------------- */

static int scenario_hang(void) {
  gpum_monitor_opts_t o;
  test_opts(&o);
  gpum_monitor_t *mon = start(&o, 1, 1);
  for (unsigned d = 0; d < 3; d++)
    wait_samples(mon, d, 3, 5000);
  uint64_t cur = 0;
  inject(1, GPUM_SIM_FAULT_SLOW, 1500, 0);
  uint64_t t0 = mono_ms();
  gpum_monitor_event_t ev =
      wait_event(mon, &cur, 1, GPUM_MONEV_HEALTH, GPUM_HEALTH_ERROR, 5000, NULL, NULL);
  printf("  after %llu ms: %s\n", (unsigned long long)(mono_ms() - t0), ev.reason);
  if (strstr(ev.reason, "driver call hung for") == NULL)
    fail("reason does not say the call hung: %s", ev.reason);
  if (health_of(mon, 1).responsive)
    fail("device 1 still responsive");
  ok("a hung call marks its device unresponsive (ERROR)");
  /* While device 1 hangs, devices 0 and 2 go on at the interval: 25 rounds of 20 ms within
   * 1.5 s (twice the time they need, for loaded machines). */
  uint64_t h1 = count_of(mon, 1), c0 = count_of(mon, 0), c2 = count_of(mon, 2);
  uint64_t t1 = mono_ms();
  wait_samples(mon, 0, c0 + 25, 1500);
  wait_samples(mon, 2, c2 + 25, 1500);
  printf("  25 samples of devices 0 and 2 in %llu ms\n", (unsigned long long)(mono_ms() - t1));
  if (count_of(mon, 1) != h1)
    fail("device 1 was sampled while hung");
  if (health_of(mon, 0).state != GPUM_HEALTH_AVAILABLE ||
      health_of(mon, 2).state != GPUM_HEALTH_AVAILABLE)
    fail("another device left AVAILABLE");
  ok("a hanging call does not stop sampling of the other devices");
  clear(1);
  ev = wait_event(mon, &cur, 1, GPUM_MONEV_HEALTH, GPUM_HEALTH_AVAILABLE, 10000, NULL, NULL);
  printf("  %s\n", ev.reason);
  if (!health_of(mon, 1).responsive)
    fail("device 1 not responsive after recovery");
  ok("the hung device recovers when its calls return");
  gpum_monitor_destroy(mon);

  /* Destroying a monitor whose worker is stuck in a hung call returns after about two
   * watchdog periods; the abandoned worker frees itself once its call returns. */
  unsigned threads0 = thread_count();
  mon = start(&o, 1, 1);
  wait_samples(mon, 1, 2, 5000);
  cur = 0;
  inject(1, GPUM_SIM_FAULT_SLOW, 1500, 0);
  wait_event(mon, &cur, 1, GPUM_MONEV_HEALTH, GPUM_HEALTH_ERROR, 5000, NULL, NULL);
  uint64_t t2 = mono_ms();
  gpum_monitor_destroy(mon);
  uint64_t took = mono_ms() - t2;
  printf("  destroy with a hung call took %llu ms\n", (unsigned long long)took);
  if (took > 4 * o.watchdog_ms)
    fail("destroy waited %llu ms for a hung call", (unsigned long long)took);
  clear(1);
  uint64_t end = mono_ms() + 20000;
  while (thread_count() > threads0) {
    if (mono_ms() > end)
      fail("the abandoned worker did not exit (%u threads, %u before)", thread_count(), threads0);
    struct timespec ts = {0, 5000000}; /* polling a condition with a deadline */
    nanosleep(&ts, NULL);
  }
  ok("destroy does not wait for a hung call; the abandoned worker exits when it returns");
  return 0;
}

/* ---- window statistics ---------------------------------------------------------------- */

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Independent computation: sort, nearest rank ceil(p * n / 100), 1-based. */
static double rank_of(const double *s, size_t n, unsigned p) {
  size_t r = (p * n + 99) / 100;
  return s[(r == 0 ? 1 : r) - 1];
}

static void check_stats(gpum_monitor_t *mon, const gpum_device_sample_t *h, size_t n, size_t a,
                        size_t b, gpum_metric_t m) {
  double *v = malloc(n * sizeof(*v));
  size_t k = 0;
  double sum = 0;
  for (size_t i = a; i <= b; i++) {
    double x;
    if (gpum_sample_get(&h[i], m, &x)) {
      v[k++] = x;
      sum += x;
    }
  }
  qsort(v, k, sizeof(*v), cmp_d);
  gpum_window_stats_t st;
  if (gpum_monitor_range_stats(mon, 0, m, h[a].timestamp_ns, h[b].timestamp_ns, &st) != 0)
    fail("range stats: %s", gpum_last_error());
  if (st.count != k)
    fail("%s: count %zu, expected %zu", gpum_metric_name(m), st.count, k);
  if (k > 0 && (st.min != v[0] || st.max != v[k - 1] || st.p50 != rank_of(v, k, 50) ||
                st.p95 != rank_of(v, k, 95) || st.p99 != rank_of(v, k, 99) ||
                fabs(st.mean - sum / (double)k) > 1e-9 * fmax(1.0, fabs(st.mean))))
    fail("%s over samples %zu..%zu: got min %g max %g mean %g p50 %g p95 %g p99 %g; expected "
         "%g %g %g %g %g %g",
         gpum_metric_name(m), a, b, st.min, st.max, st.mean, st.p50, st.p95, st.p99, v[0], v[k - 1],
         sum / (double)k, rank_of(v, k, 50), rank_of(v, k, 95), rank_of(v, k, 99));
  free(v);
}

static int scenario_stats(void) {
  gpum_monitor_opts_t o;
  test_opts(&o);
  o.interval_ms = 5;
  o.devices = (const unsigned[]){0};
  o.device_count = 1;
  gpum_monitor_t *mon = start(&o, 1, 1);
  /* Vary utilisation (and with it temperature and power) while sampling. */
  int levels[] = {10, 90, 40, 70, 0, 100, 55};
  for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
    if (sim_set_util(node, 0, levels[i], -1) != 0)
      fail("set util");
    wait_samples(mon, 0, 15 * (i + 1), 5000);
  }
  gpum_monitor_stop(mon);
  size_t n = 0;
  gpum_device_sample_t small[4];
  if (gpum_monitor_history(mon, 0, 0, small, 4, &n) != GPUM_ENOSPC || n < 100)
    fail("history with a small buffer: expected ENOSPC and the count, got n=%zu", n);
  gpum_device_sample_t *h = calloc(n, sizeof(*h));
  size_t n2 = 0;
  if (gpum_monitor_history(mon, 0, 0, h, n, &n2) != 0 || n2 != n)
    fail("history: %s", gpum_last_error());
  if (memcmp(&small[3], &h[3], sizeof small[3]) != 0)
    fail("paged history differs");
  size_t n3 = 0;
  gpum_monitor_history(mon, 0, h[n - 6].timestamp_ns, small, 4, &n3);
  if (n3 != 5 || small[0].timestamp_ns != h[n - 5].timestamp_ns)
    fail("history since a time: %zu samples", n3);
  ok("raw history copies out, pages and filters by time");
  unsigned distinct = 0;
  for (size_t i = 1; i < n; i++)
    distinct += h[i].util_gpu != h[i - 1].util_gpu;
  if (distinct < 5)
    fail("utilisation did not vary (%u changes)", distinct);
  for (int m = 0; m < GPUM_METRIC_COUNT; m++) {
    check_stats(mon, h, n, 0, n - 1, (gpum_metric_t)m);
    check_stats(mon, h, n, n / 3, 2 * n / 3, (gpum_metric_t)m);
    check_stats(mon, h, n, n - 7, n - 1, (gpum_metric_t)m);
  }
  gpum_window_stats_t w;
  if (gpum_monitor_window_stats(mon, 0, GPUM_METRIC_UTIL_GPU, 3600, &w) != 0 || w.count != n)
    fail("window of an hour: %zu of %zu samples", w.count, n);
  if (gpum_monitor_window_stats(mon, 0, GPUM_METRIC_UTIL_GPU, 0, &w) != GPUM_EINVAL ||
      gpum_monitor_range_stats(mon, 0, GPUM_METRIC_COUNT, 0, 1, &w) != GPUM_EINVAL ||
      gpum_monitor_range_stats(mon, 0, GPUM_METRIC_POWER, 2, 1, &w) != GPUM_EINVAL ||
      gpum_monitor_range_stats(mon, 7, GPUM_METRIC_POWER, 0, 1, &w) != GPUM_ENODEV)
    fail("bad statistics arguments accepted");
  gpum_window_stats_t t;
  if (gpum_monitor_window_stats(mon, 0, GPUM_METRIC_TEMPERATURE, 3600, &t) != 0)
    fail("temperature window: %s", gpum_last_error());
  printf("  %zu samples; utilization_gpu p50 %g p95 %g; temperature mean %.2f\n", n, w.p50, w.p95,
         t.mean);
  ok("window statistics equal the values computed from the raw samples");
  free(h);
  gpum_monitor_destroy(mon);
  return 0;
}

/* ---- operator, BUSY, ECC ----------------------------------------------------------------- */

static int scenario_disabled(void) {
  gpum_monitor_opts_t o;
  test_opts(&o);
  gpum_monitor_t *mon = start(&o, 1, 1);
  wait_samples(mon, 0, 2, 5000);
  uint64_t cur = 0;
  if (gpum_monitor_set_disabled(mon, 0, true, "maintenance window") != 0)
    fail("set_disabled: %s", gpum_last_error());
  gpum_monitor_event_t ev =
      wait_event(mon, &cur, 0, GPUM_MONEV_HEALTH, GPUM_HEALTH_DISABLED, 1000, NULL, NULL);
  gpum_device_health_t h = health_of(mon, 0);
  if (strcmp(ev.reason, "maintenance window") != 0 || h.state != GPUM_HEALTH_DISABLED)
    fail("DISABLED reason '%s'", ev.reason);
  uint64_t c = count_of(mon, 0);
  wait_samples(mon, 0, c + 3, 5000);
  ok("DISABLED by the operator, with the reason; sampling goes on");
  /* Faults while disabled do not change what is shown... */
  inject(0, GPUM_SIM_FAULT_XID, 79, 0);
  probes_t p = {.dev = 0};
  while (p.n < 2)
    wait_event(mon, &cur, 0, GPUM_MONEV_PROBE, -1, 5000, record_probes, &p);
  if (health_of(mon, 0).state != GPUM_HEALTH_DISABLED)
    fail("a fault changed the state of a DISABLED device");
  /* ...and on re-enable the device takes the state the rules give: ERROR. */
  gpum_monitor_set_disabled(mon, 0, false, NULL);
  ev = wait_event(mon, &cur, 0, GPUM_MONEV_HEALTH, GPUM_HEALTH_ERROR, 1000, NULL, NULL);
  if (ev.from != GPUM_HEALTH_DISABLED)
    fail("re-enable went from %s", gpum_health_state_name(ev.from));
  ok("only the operator leaves DISABLED; then the rules apply");
  clear(0);
  wait_event(mon, &cur, 0, GPUM_MONEV_HEALTH, GPUM_HEALTH_AVAILABLE, 10000, NULL, NULL);
  if (gpum_monitor_set_disabled(mon, 9, true, NULL) != GPUM_ENODEV)
    fail("set_disabled on an unknown device");
  gpum_monitor_destroy(mon);
  return 0;
}

static int scenario_busy(void) {
  gpum_monitor_opts_t o;
  test_opts(&o);
  o.busy.util_gpu_pct = 80;
  o.busy.memory_pct = 50;
  gpum_monitor_t *mon = start(&o, 1, 1);
  wait_samples(mon, 0, 2, 5000);
  uint64_t cur = 0;
  if (sim_set_util(node, 0, 95, 10) != 0)
    fail("set util");
  gpum_monitor_event_t ev =
      wait_event(mon, &cur, 0, GPUM_MONEV_HEALTH, GPUM_HEALTH_BUSY, 2000, NULL, NULL);
  if (strstr(ev.reason, "utilisation 95% >= 80%") == NULL)
    fail("BUSY reason: %s", ev.reason);
  sim_set_util(node, 0, 79, 10);
  wait_event(mon, &cur, 0, GPUM_MONEV_HEALTH, GPUM_HEALTH_AVAILABLE, 2000, NULL, NULL);
  ok("BUSY over the utilisation threshold, AVAILABLE under it");
  gpum_device_info_t info;
  gpum_monitor_device_info(mon, 1, &info);
  pid_t holder;
  if (sim_hold(node, 1, info.memory_total * 6 / 10, 0, &holder) != 0)
    fail("hold memory");
  ev = wait_event(mon, &cur, 1, GPUM_MONEV_HEALTH, GPUM_HEALTH_BUSY, 2000, NULL, NULL);
  if (strstr(ev.reason, "memory used") == NULL)
    fail("BUSY reason: %s", ev.reason);
  kill(holder, SIGKILL);
  wait_event(mon, &cur, 1, GPUM_MONEV_HEALTH, GPUM_HEALTH_AVAILABLE, 10000, NULL, NULL);
  ok("BUSY over the memory threshold, AVAILABLE once released");
  gpum_monitor_destroy(mon);

  /* Job count: the device's processes by default. */
  test_opts(&o);
  o.busy.util_gpu_pct = 0;
  o.busy.memory_pct = 0;
  o.busy.jobs = 1;
  mon = start(&o, 1, 1);
  wait_samples(mon, 2, 2, 5000);
  cur = 0;
  if (health_of(mon, 2).state != GPUM_HEALTH_AVAILABLE)
    fail("device 2 not AVAILABLE without jobs");
  if (sim_hold(node, 2, 1 << 20, 0, &holder) != 0)
    fail("hold memory");
  ev = wait_event(mon, &cur, 2, GPUM_MONEV_HEALTH, GPUM_HEALTH_BUSY, 2000, NULL, NULL);
  if (strcmp(ev.reason, "jobs 1 >= 1") != 0)
    fail("BUSY reason: %s", ev.reason);
  kill(holder, SIGKILL);
  wait_event(mon, &cur, 2, GPUM_MONEV_HEALTH, GPUM_HEALTH_AVAILABLE, 10000, NULL, NULL);
  ok("BUSY at the job-count threshold (processes on the device)");
  gpum_monitor_destroy(mon);
  return 0;
}

static int scenario_ecc(void) {
  gpum_monitor_opts_t o;
  test_opts(&o);
  gpum_monitor_t *mon = start(&o, 1, 1);
  wait_samples(mon, 0, 2, 5000);
  uint64_t cur = 0;
  inject(0, GPUM_SIM_FAULT_ECC_SINGLE, 3, 0);
  wait_event(mon, &cur, 0, GPUM_MONEV_ECC, -1, 5000, no_error, &(unsigned){0});
  uint64_t c = count_of(mon, 0);
  wait_samples(mon, 0, c + 5, 5000);
  gpum_monitor_event_t ev;
  while (gpum_monitor_event_wait(mon, &cur, &ev, 0) == 0)
    no_error(&ev, &(unsigned){0});
  ok("corrected ECC errors do not mark ERROR");
  inject(0, GPUM_SIM_FAULT_ECC_DOUBLE, 1, 0);
  ev = wait_event(mon, &cur, 0, GPUM_MONEV_HEALTH, GPUM_HEALTH_ERROR, 5000, NULL, NULL);
  printf("  %s\n", ev.reason);
  if (strstr(ev.reason, "ECC") == NULL && strstr(ev.reason, "XID") == NULL)
    fail("reason: %s", ev.reason);
  ok("an uncorrectable ECC error marks ERROR");
  gpum_monitor_destroy(mon);
  return 0;
}

/* ---- threads (run under ThreadSanitizer by test_monitor_threads.sh) ------------------- */

typedef struct {
  gpum_monitor_t *mon;
  int stop;        /* __atomic */
  unsigned rounds; /* per reader, for the report */
  bool bad;
} shared_t;

static unsigned delivered; /* __atomic */

/* Counts the events but the static-info ones (emitted at start, before the subscription). */
static void count_cb(const gpum_monitor_event_t *ev, void *user) {
  (void)user;
  if (ev->kind != GPUM_MONEV_INFO)
    __atomic_add_fetch(&delivered, 1, __ATOMIC_RELAXED);
}

static void *reader(void *arg) {
  shared_t *sh = arg;
  uint64_t cur = 0, since[3] = {0, 0, 0};
  gpum_device_sample_t buf[16], s;
  gpum_monitor_event_t ev;
  gpum_window_stats_t w;
  gpum_device_health_t h;
  while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
    for (unsigned d = 0; d < 3; d++) {
      size_t n = 0;
      int rc = gpum_monitor_history(sh->mon, d, since[d], buf, 16, &n);
      if (rc != 0 && rc != GPUM_ENOSPC)
        sh->bad = true;
      size_t k = n < 16 ? n : 16;
      for (size_t i = 1; i < k; i++)
        if (buf[i].timestamp_ns < buf[i - 1].timestamp_ns)
          sh->bad = true;
      if (k > 0)
        since[d] = buf[k - 1].timestamp_ns;
      gpum_monitor_latest(sh->mon, d, &s);
      gpum_monitor_window_stats(sh->mon, d, GPUM_METRIC_TEMPERATURE, 1.0, &w);
      gpum_monitor_health(sh->mon, d, &h);
    }
    uint64_t before = cur;
    if (gpum_monitor_event_wait(sh->mon, &cur, &ev, 2) == 0 && (ev.seq <= before || cur != ev.seq))
      sh->bad = true;
    __atomic_add_fetch(&sh->rounds, 1, __ATOMIC_RELAXED);
  }
  return NULL;
}

static void *operator_thread(void *arg) {
  shared_t *sh = arg;
  bool on = false;
  while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
    on = !on;
    if (gpum_monitor_set_disabled(sh->mon, 2, on, "toggle") != 0)
      sh->bad = true;
    unsigned id;
    if (gpum_monitor_subscribe(sh->mon, count_cb, NULL, &id) != 0 ||
        gpum_monitor_unsubscribe(sh->mon, id) != 0)
      sh->bad = true;
    uint64_t cur = UINT64_MAX - 1;
    gpum_monitor_event_t ev;
    gpum_monitor_event_wait(sh->mon, &cur, &ev, 1); /* a 1 ms pause */
  }
  gpum_monitor_set_disabled(sh->mon, 2, false, NULL);
  return NULL;
}

static int scenario_threads(void) {
  gpum_monitor_opts_t o;
  test_opts(&o);
  o.interval_ms = 2;
  o.backoff_base_ms = 2;
  o.backoff_max_ms = 20;
  gpum_monitor_t *mon = start(&o, 1, 1);
  unsigned id;
  if (gpum_monitor_subscribe(mon, count_cb, NULL, &id) != 0)
    fail("subscribe");
  shared_t sh = {.mon = mon};
  pthread_t th[5];
  for (int i = 0; i < 4; i++)
    pthread_create(&th[i], NULL, reader, &sh);
  pthread_create(&th[4], NULL, operator_thread, &sh);
  uint64_t cur = 0;
  inject(0, GPUM_SIM_FAULT_ERROR_RATE, 0, 0.5);
  inject(1, GPUM_SIM_FAULT_XID, 79, 0);
  wait_event(mon, &cur, 1, GPUM_MONEV_HEALTH, GPUM_HEALTH_ERROR, 10000, NULL, NULL);
  clear(1);
  wait_event(mon, &cur, 1, GPUM_MONEV_HEALTH, GPUM_HEALTH_AVAILABLE, 10000, NULL, NULL);
  clear(0);
  wait_samples(mon, 0, count_of(mon, 0) + 50, 10000);
  __atomic_store_n(&sh.stop, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < 5; i++)
    pthread_join(th[i], NULL);
  gpum_monitor_stop(mon);
  if (sh.bad)
    fail("a reader saw inconsistent data or a call failed");
  /* every event was delivered to the subscriber, in order, exactly once */
  gpum_monitor_event_t ev;
  uint64_t last = 0, emitted = 0;
  while (gpum_monitor_event_wait(mon, &last, &ev, 0) == 0)
    emitted += ev.kind != GPUM_MONEV_INFO;
  unsigned got = __atomic_load_n(&delivered, __ATOMIC_RELAXED);
  printf("  %llu events, %u delivered; %u reader rounds\n", (unsigned long long)emitted, got,
         sh.rounds);
  if (got != emitted)
    fail("%u events delivered, %llu emitted", got, (unsigned long long)emitted);
  ok("concurrent readers, operator and subscribers during faults");
  gpum_monitor_destroy(mon);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: monitor_scenario xid79|transient30|transient100|hang|stats|"
                    "disabled|busy|ecc|threads\n");
    return 2;
  }
  load_sim();
  static const struct {
    const char *name;
    int (*fn)(void);
  } table[] = {{"xid79", scenario_xid79},
               {"transient30", scenario_transient30},
               {"transient100", scenario_transient100},
               {"hang", scenario_hang},
               {"stats", scenario_stats},
               {"disabled", scenario_disabled},
               {"busy", scenario_busy},
               {"ecc", scenario_ecc},
               {"threads", scenario_threads}};
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strcmp(argv[1], table[i].name) == 0)
      return table[i].fn();
  fprintf(stderr, "monitor_scenario: unknown scenario '%s'\n", argv[1]);
  return 2;
}
