/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tier cache under 8 threads at once (ThreadSanitizer too: the _threads suffix): each thread
 * puts, gets, pins and removes its own keys and checks every byte it reads, while the device
 * budget is small enough that the threads' entries push each other off the device all the time,
 * and a ninth thread calls gpum_tiercache_pressure and reads the stats.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/tiercache.h>

#include "tiercache_testlib.h"

#define THREADS 8
#define KEYS 64 /* per thread */
#define OPS 4000
#define MAXSZ 1024

static gpum_tiercache_t *cache;
static atomic_int failures;
static atomic_bool done;

static void *worker(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  unsigned version[KEYS] = {0};
  size_t sizes[KEYS] = {0};
  unsigned char buf[MAXSZ], want[MAXSZ];
  uint64_t x = 0x2545F4914F6CDD1Dull * (id + 1);
  for (unsigned op = 0; op < OPS; op++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    unsigned i = (unsigned)(x % KEYS), what = (unsigned)((x >> 20) % 10);
    uint64_t gk = (uint64_t)id * KEYS + i;
    char k[24];
    snprintf(k, sizeof k, "t%u-k%u", id, i);
    if (what < 4) {
      size_t n = 1 + (size_t)((x >> 32) % MAXSZ);
      tc_fill(buf, n, gk, version[i] + 1);
      if (gpum_tiercache_put(cache, k, strlen(k), buf, n) != 0) {
        atomic_fetch_add(&failures, 1);
        continue;
      }
      version[i]++;
      sizes[i] = n;
    } else if (what < 9) {
      size_t n = 0;
      int rc = gpum_tiercache_get(cache, k, strlen(k), buf, sizeof buf, &n, NULL);
      if (!sizes[i]) {
        if (rc != GPUM_ENOENT)
          atomic_fetch_add(&failures, 1);
        continue;
      }
      tc_fill(want, sizes[i], gk, version[i]);
      if (rc != 0 || n != sizes[i] || memcmp(buf, want, n) != 0)
        atomic_fetch_add(&failures, 1);
    } else if (sizes[i]) {
      gpum_devptr_t d = 0;
      int rc = gpum_tiercache_pin(cache, k, strlen(k), &d);
      if (rc == 0)
        rc = gpum_tiercache_unpin(cache, k, strlen(k));
      if (rc != 0 && rc != GPUM_EDEVOOM)
        atomic_fetch_add(&failures, 1);
    }
  }
  return NULL;
}

static void *pressurer(void *arg) {
  (void)arg;
  while (!atomic_load(&done)) {
    if (gpum_tiercache_pressure(cache, 4096, NULL) != 0)
      atomic_fetch_add(&failures, 1);
    gpum_tiercache_stats_t st;
    gpum_tiercache_stats(cache, &st);
  }
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  assert_int_equal(tc_sim_start("ttct"), 0);
  gpum_tiercache_opts_t o;
  gpum_tiercache_opts_init(&o);
  o.device_budget = 32 * 1024;
  o.pinned_limit = 8 << 20; /* room for every key: nothing is evicted */
  assert_int_equal(gpum_tiercache_create(&o, &cache), 0);
  pthread_t th[THREADS], pt;
  assert_int_equal(pthread_create(&pt, NULL, pressurer, NULL), 0);
  for (unsigned i = 0; i < THREADS; i++)
    assert_int_equal(pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i), 0);
  for (unsigned i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  atomic_store(&done, true);
  pthread_join(pt, NULL);
  assert_int_equal(atomic_load(&failures), 0);
  gpum_tiercache_stats_t st;
  gpum_tiercache_stats(cache, &st);
  assert_int_equal(st.tier[GPUM_TIER_PINNED].evictions, 0);
  assert_true(st.tier[GPUM_TIER_DEVICE].demotions > 100);
  assert_true(st.tier[GPUM_TIER_DEVICE].bytes <= o.device_budget);
  gpum_tiercache_destroy(cache);
  tc_sim_stop();
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_threads)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
