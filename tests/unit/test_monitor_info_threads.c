/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the monitor's static info on a simulated node whose device 1 hangs (every
 * NVML call on it slowed to 60 s): gpum_monitor_create and gpum_monitor_start return at once
 * instead of waiting for it, device 0 has its info and samples while device 1's info is
 * pending (GPUM_EAGAIN, no samples), gpum_monitor_wait_info times out at its deadline naming
 * the silent device, and once the fault is cleared the info arrives: the wait returns, a
 * GPUM_MONEV_INFO event reaches the pollers and the subscribers. Also the bad inputs.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/monitor.h>
#include <gpum/sim.h>

typedef int (*create_fn)(const char *, const char *, char *, size_t);
typedef int (*destroy_fn)(const char *);
typedef int (*inject_fn)(const char *, unsigned, const gpum_sim_fault_t *);
typedef int (*clear_fn)(const char *, unsigned);

static struct {
  void *dl;
  create_fn create;
  destroy_fn destroy;
  inject_fn inject;
  clear_fn clear;
  char node[64];
  char spec[256];
} sim;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void *sym(const char *name) {
  void *p = dlsym(sim.dl, name);
  if (p == NULL)
    fail_msg("%s is not exported by the simulator", name);
  return p;
}

/* A two-device node with a unique name, selected through GPUM_SIM_NODE. */
static int setup(void **state) {
  (void)state;
  const char *lib = getenv("GPUM_SIM_LIBRARY");
  if (lib == NULL)
    fail_msg("GPUM_SIM_LIBRARY is not set");
  sim.dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (sim.dl == NULL)
    fail_msg("dlopen %s: %s", lib, dlerror());
  void *p;
  p = sym("gpum_sim_create");
  memcpy(&sim.create, &p, sizeof p);
  p = sym("gpum_sim_destroy");
  memcpy(&sim.destroy, &p, sizeof p);
  p = sym("gpum_sim_inject");
  memcpy(&sim.inject, &p, sizeof p);
  p = sym("gpum_sim_clear");
  memcpy(&sim.clear, &p, sizeof p);
  snprintf(sim.node, sizeof sim.node, "tmoninfo%ld", (long)getpid());
  snprintf(sim.spec, sizeof sim.spec, "%s/gpum-%s.yaml", P_tmpdir, sim.node);
  FILE *f = fopen(sim.spec, "w");
  assert_non_null(f);
  fprintf(f, "devices:\n  - count: 2\n    name: \"NVIDIA H100 80GB HBM3\"\n    memory: 80GiB\n");
  fclose(f);
  assert_int_equal(sim.create(sim.spec, sim.node, NULL, 0), 0);
  unlink(sim.spec);
  setenv("GPUM_SIM_NODE", sim.node, 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  sim.clear(sim.node, UINT32_MAX);
  sim.destroy(sim.node);
  dlclose(sim.dl);
  return 0;
}

/* Counts the INFO events delivered to a subscriber (on the sampler thread). */
typedef struct {
  pthread_mutex_t lock;
  unsigned info[2];
  int rc[2];
} seen_t;

static void on_event(const gpum_monitor_event_t *ev, void *user) {
  seen_t *s = user;
  if (ev->kind != GPUM_MONEV_INFO || ev->device > 1)
    return;
  pthread_mutex_lock(&s->lock);
  s->info[ev->device]++;
  s->rc[ev->device] = ev->rc;
  pthread_mutex_unlock(&s->lock);
}

static unsigned seen_info(seen_t *s, unsigned dev) {
  pthread_mutex_lock(&s->lock);
  unsigned n = s->info[dev];
  pthread_mutex_unlock(&s->lock);
  return n;
}

/* Waits (event_wait as the clock, deadline 10 s) for the next INFO event of dev. */
static gpum_monitor_event_t wait_info_event(gpum_monitor_t *mon, uint64_t *cur, unsigned dev) {
  uint64_t deadline = now_ms() + 10000;
  gpum_monitor_event_t ev;
  memset(&ev, 0, sizeof ev);
  while (now_ms() < deadline) {
    if (gpum_monitor_event_wait(mon, cur, &ev, 100) == 0 && ev.kind == GPUM_MONEV_INFO &&
        ev.device == dev)
      return ev;
  }
  fail_msg("no info event of device %u within 10 s", dev);
  return ev;
}

static void test_hung_device_info(void **state) {
  (void)state;
  gpum_sim_fault_t slow = {.kind = GPUM_SIM_FAULT_SLOW, .value = 60000};
  assert_int_equal(sim.inject(sim.node, 1, &slow), 0);
  gpum_device_open_opts_t d;
  gpum_device_open_opts_init(&d);
  d.backend = GPUM_BACKEND_NVML;
  gpum_monitor_opts_t o;
  gpum_monitor_opts_init(&o);
  o.interval_ms = 20;
  o.watchdog_ms = 300;
  o.backoff_base_ms = 20;
  o.backoff_max_ms = 100;
  gpum_monitor_t *mon = NULL;
  uint64_t t0 = now_ms();
  assert_int_equal(gpum_monitor_create(&d, &o, &mon), 0);
  assert_true(now_ms() - t0 < 5000); /* not one 60 s call */
  gpum_device_info_t info;
  unsigned missing = 9;
  assert_int_equal(gpum_monitor_device_info(mon, 0, &info), GPUM_EAGAIN);
  assert_non_null(strstr(gpum_last_error(), "device 0 has not answered"));
  assert_int_equal(gpum_monitor_wait_info(mon, 10, &missing), GPUM_ESTATE);
  assert_int_equal(missing, 0);
  seen_t seen = {.lock = PTHREAD_MUTEX_INITIALIZER};
  assert_int_equal(gpum_monitor_subscribe(mon, on_event, &seen, NULL), 0);

  t0 = now_ms();
  assert_int_equal(gpum_monitor_start(mon), 0);
  /* The event registration of device 1 hangs too: start waits for it up to the watchdog. */
  assert_true(now_ms() - t0 < 300 + 4000);
  t0 = now_ms();
  assert_int_equal(gpum_monitor_wait_info(mon, 400, &missing), GPUM_ETIMEDOUT);
  uint64_t waited = now_ms() - t0;
  assert_true(waited >= 390 && waited < 4000);
  assert_int_equal(missing, 1);
  assert_non_null(strstr(gpum_last_error(), "1 of 2 devices did not answer within 400 ms"));
  assert_non_null(strstr(gpum_last_error(), "device 1"));
  assert_int_equal(gpum_monitor_wait_info(mon, 0, NULL), GPUM_ETIMEDOUT);

  assert_int_equal(gpum_monitor_device_info(mon, 0, &info), 0);
  assert_int_equal(info.index, 0);
  assert_string_equal(info.name, "NVIDIA H100 80GB HBM3");
  assert_memory_equal(info.uuid, "GPU-", 4);
  assert_int_equal(info.memory_total, 80ull << 30);
  assert_int_equal(gpum_monitor_device_info(mon, 1, &info), GPUM_EAGAIN);
  assert_int_equal(info.index, 1);
  assert_int_equal(gpum_monitor_device_info(mon, 2, &info), GPUM_ENODEV);
  uint64_t cur = 0;
  gpum_monitor_event_t ev = wait_info_event(mon, &cur, 0);
  assert_int_equal(ev.rc, 0);
  assert_non_null(strstr(ev.reason, "NVIDIA H100 80GB HBM3 (GPU-"));
  assert_string_equal(gpum_monitor_event_kind_name(GPUM_MONEV_INFO), "info");
  /* Device 0 is sampled on time; device 1 has no sample while its info is pending. */
  uint64_t n0 = 0, deadline = now_ms() + 10000;
  while (n0 < 5 && now_ms() < deadline) {
    gpum_monitor_event_wait(mon, &cur, &ev, 20);
    assert_int_equal(gpum_monitor_sample_count(mon, 0, &n0), 0);
  }
  assert_true(n0 >= 5);
  gpum_device_sample_t s;
  assert_int_equal(gpum_monitor_latest(mon, 1, &s), GPUM_ENOENT);
  assert_int_equal(seen_info(&seen, 1), 0);

  /* The driver answers again: the pending info arrives and the wait returns. */
  assert_int_equal(sim.clear(sim.node, 1), 0);
  assert_int_equal(gpum_monitor_wait_info(mon, 10000, &missing), 0);
  assert_int_equal(missing, 0);
  assert_int_equal(gpum_monitor_device_info(mon, 1, &info), 0);
  assert_int_equal(info.index, 1);
  assert_memory_equal(info.uuid, "GPU-", 4);
  ev = wait_info_event(mon, &cur, 1);
  assert_int_equal(ev.rc, 0);
  deadline = now_ms() + 10000; /* delivered to subscribers on the sampler thread */
  while (seen_info(&seen, 1) == 0 && now_ms() < deadline)
    gpum_monitor_event_wait(mon, &cur, &ev, 20);
  assert_int_equal(seen_info(&seen, 0), 1);
  assert_int_equal(seen_info(&seen, 1), 1);
  assert_int_equal(seen.rc[1], 0);
  gpum_monitor_destroy(mon);
}

static void test_bad_input(void **state) {
  (void)state;
  unsigned missing = 7;
  assert_int_equal(gpum_monitor_wait_info(NULL, 10, &missing), GPUM_EINVAL);
  assert_int_equal(missing, 0);
  gpum_device_open_opts_t d;
  gpum_device_open_opts_init(&d);
  d.backend = GPUM_BACKEND_NVML;
  gpum_monitor_t *mon = NULL;
  assert_int_equal(gpum_monitor_create(&d, NULL, &mon), 0);
  gpum_device_info_t info;
  assert_int_equal(gpum_monitor_device_info(mon, 0, NULL), GPUM_EINVAL);
  assert_int_equal(gpum_monitor_device_info(NULL, 0, &info), GPUM_EINVAL);
  assert_int_equal(gpum_monitor_device_info(mon, 5, &info), GPUM_ENODEV);
  assert_int_equal(gpum_monitor_wait_info(mon, 0, NULL), GPUM_ESTATE);
  gpum_monitor_destroy(mon);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hung_device_info),
      cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
