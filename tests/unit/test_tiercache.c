/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the tiered cache (src/lib/work/tiercache*.c, gpum/tiercache.h) on the simulated
 * driver: placement on the device and demotion under a device budget, promotion on a hit,
 * demotion when device allocations fail (the simulator's fail-after fault), explicit pressure,
 * pinning, per-tier limits with the eviction callback, promotions that swap, the stats, the
 * errors, and data integrity (and gets = misses + hits) over 100,000 random operations against
 * a model.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/tiercache.h>

#include "tiercache_testlib.h"

#define KiB 1024

static int group_setup(void **state) {
  (void)state;
  return tc_sim_start("ttc");
}

static int group_teardown(void **state) {
  (void)state;
  tc_sim_stop();
  return 0;
}

static gpum_tiercache_t *make(uint64_t budget, uint64_t pinned, uint64_t host,
                              gpum_tiercache_evict_fn fn, void *user) {
  gpum_tiercache_opts_t o;
  gpum_tiercache_opts_init(&o);
  o.device_budget = budget;
  o.pinned_limit = pinned;
  o.host_limit = host;
  o.on_evict = fn;
  o.user = user;
  gpum_tiercache_t *c = NULL;
  int rc = gpum_tiercache_create(&o, &c);
  if (rc)
    fprintf(stderr, "create: %s\n", gpum_last_error());
  assert_int_equal(rc, 0);
  return c;
}

static void key_of(char *k, unsigned i) {
  snprintf(k, 16, "k%05u", i);
}

static void put_n(gpum_tiercache_t *c, unsigned first, unsigned n, size_t size) {
  unsigned char buf[8 * KiB];
  char k[16];
  for (unsigned i = first; i < first + n; i++) {
    key_of(k, i);
    tc_fill(buf, size, i, 0);
    assert_int_equal(gpum_tiercache_put(c, k, strlen(k), buf, size), 0);
  }
}

static gpum_tier_t where(gpum_tiercache_t *c, unsigned i) {
  char k[16];
  key_of(k, i);
  gpum_tier_t t = GPUM_TIER_COUNT;
  assert_int_equal(gpum_tiercache_lookup(c, k, strlen(k), &t, NULL), 0);
  return t;
}

static void check(gpum_tiercache_t *c, unsigned i, size_t size, gpum_tier_t *tier) {
  unsigned char want[8 * KiB], got[8 * KiB];
  char k[16];
  key_of(k, i);
  size_t n = 0;
  assert_int_equal(gpum_tiercache_get(c, k, strlen(k), got, sizeof got, &n, tier), 0);
  assert_int_equal(n, size);
  tc_fill(want, size, i, 0);
  assert_memory_equal(got, want, size);
}

static void test_errors(void **state) {
  (void)state;
  gpum_tiercache_opts_t o;
  gpum_tiercache_opts_init(&o);
  o.pinned_limit = 0;
  gpum_tiercache_t *c = NULL;
  assert_int_equal(gpum_tiercache_create(&o, &c), GPUM_EINVAL);
  assert_int_equal(gpum_tiercache_create(NULL, &c), GPUM_EINVAL);
  o.pinned_limit = 4 * KiB;
  o.device = 7;
  assert_int_equal(gpum_tiercache_create(&o, &c), GPUM_ENODEV);
  c = make(4 * KiB, 4 * KiB, 0, NULL, NULL);
  char buf[64] = "x";
  assert_int_equal(gpum_tiercache_put(c, "k", 0, buf, 1), GPUM_EINVAL);
  assert_int_equal(gpum_tiercache_put(c, NULL, 1, buf, 1), GPUM_EINVAL);
  assert_int_equal(gpum_tiercache_put(c, "k", 1, buf, 0), GPUM_EINVAL);
  assert_int_equal(gpum_tiercache_put(c, "k", 1, NULL, 1), GPUM_EINVAL);
  static unsigned char big[5 * KiB];
  assert_int_equal(gpum_tiercache_put(c, "k", 1, big, sizeof big), GPUM_EINVAL);
  assert_int_equal(gpum_tiercache_get(c, "nope", 4, buf, sizeof buf, NULL, NULL), GPUM_ENOENT);
  assert_int_equal(gpum_tiercache_remove(c, "nope", 4), GPUM_ENOENT);
  assert_int_equal(gpum_tiercache_pin(c, "nope", 4, NULL), GPUM_ENOENT);
  assert_int_equal(gpum_tiercache_unpin(c, "nope", 4), GPUM_ENOENT);
  assert_int_equal(gpum_tiercache_put(c, "k", 1, "hello", 5), 0);
  assert_int_equal(gpum_tiercache_unpin(c, "k", 1), GPUM_ESTATE);
  size_t n = 0;
  assert_int_equal(gpum_tiercache_get(c, "k", 1, buf, 3, &n, NULL), GPUM_ENOSPC);
  assert_int_equal(n, 5);
  gpum_tiercache_stats_t st;
  gpum_tiercache_stats(c, &st);
  assert_int_equal(st.misses, 1);
  assert_int_equal(st.tier[GPUM_TIER_DEVICE].hits, 0);
  assert_string_equal(gpum_tier_name(GPUM_TIER_PINNED), "pinned");
  gpum_tiercache_destroy(c);
  gpum_tiercache_destroy(NULL);
}

static void test_put_get_replace(void **state) {
  (void)state;
  gpum_tiercache_t *c = make(0, 64 * KiB, 0, NULL, NULL);
  put_n(c, 0, 4, 1000);
  gpum_tier_t t;
  for (unsigned i = 0; i < 4; i++) {
    check(c, i, 1000, &t);
    assert_int_equal(t, GPUM_TIER_DEVICE);
  }
  /* Replacing a key: the new bytes, the new size. */
  unsigned char buf[300], got[300];
  memset(buf, 0xAB, sizeof buf);
  assert_int_equal(gpum_tiercache_put(c, "k00001", 6, buf, sizeof buf), 0);
  size_t n;
  assert_int_equal(gpum_tiercache_get(c, "k00001", 6, got, sizeof got, &n, NULL), 0);
  assert_int_equal(n, sizeof buf);
  assert_memory_equal(got, buf, sizeof buf);
  assert_int_equal(gpum_tiercache_remove(c, "k00001", 6), 0);
  assert_int_equal(gpum_tiercache_lookup(c, "k00001", 6, NULL, NULL), GPUM_ENOENT);
  gpum_tiercache_stats_t st;
  gpum_tiercache_stats(c, &st);
  assert_int_equal(st.tier[GPUM_TIER_DEVICE].entries, 3);
  assert_int_equal(st.tier[GPUM_TIER_DEVICE].bytes, 3000);
  assert_int_equal(st.tier[GPUM_TIER_DEVICE].hits, 5);
  assert_int_equal(st.puts, 5);
  gpum_tiercache_destroy(c);
}

static void test_budget_demotes_and_hit_promotes(void **state) {
  (void)state;
  gpum_tiercache_t *c = make(4 * KiB, 64 * KiB, 0, NULL, NULL);
  put_n(c, 0, 8, KiB); /* 4 fit the device: the 4 coldest were demoted */
  for (unsigned i = 0; i < 4; i++)
    assert_int_equal(where(c, i), GPUM_TIER_PINNED);
  for (unsigned i = 4; i < 8; i++)
    assert_int_equal(where(c, i), GPUM_TIER_DEVICE);
  gpum_tier_t t;
  check(c, 0, KiB, &t); /* a pinned-tier hit, promoted; k4 is now the coldest on the device */
  assert_int_equal(t, GPUM_TIER_PINNED);
  assert_int_equal(where(c, 0), GPUM_TIER_DEVICE);
  assert_int_equal(where(c, 4), GPUM_TIER_PINNED);
  check(c, 0, KiB, &t);
  assert_int_equal(t, GPUM_TIER_DEVICE);
  gpum_tiercache_stats_t st;
  gpum_tiercache_stats(c, &st);
  assert_int_equal(st.tier[GPUM_TIER_DEVICE].demotions, 5);
  assert_int_equal(st.tier[GPUM_TIER_PINNED].promotions, 1);
  assert_int_equal(st.tier[GPUM_TIER_PINNED].hits, 1);
  assert_int_equal(st.tier[GPUM_TIER_DEVICE].hits, 1);
  assert_int_equal(st.tier[GPUM_TIER_DEVICE].misses, 1);
  assert_int_equal(st.tier[GPUM_TIER_DEVICE].bytes, 4 * KiB);
  assert_int_equal(st.tier[GPUM_TIER_PINNED].entries, 4);
  /* An entry bigger than the device budget goes straight to pinned memory. */
  static unsigned char big[6 * KiB];
  assert_int_equal(gpum_tiercache_put(c, "big", 3, big, sizeof big), 0);
  assert_int_equal(gpum_tiercache_lookup(c, "big", 3, &t, NULL), 0);
  assert_int_equal(t, GPUM_TIER_PINNED);
  for (unsigned i = 0; i < 8; i++)
    check(c, i, KiB, NULL);
  gpum_tiercache_destroy(c);
}

static void test_failed_allocations_demote(void **state) {
  (void)state;
  gpum_tiercache_t *c = make(0, 64 << 20, 0, NULL, NULL);
  /* The pool takes 2 MiB segments for these: two of them, then the driver says out of memory. */
  assert_int_equal(tc_fail_after(4 << 20), 0);
  static unsigned char buf[512 * KiB], got[512 * KiB];
  char k[16];
  for (unsigned i = 0; i < 24; i++) {
    key_of(k, i);
    tc_fill(buf, sizeof buf, i, 0);
    assert_int_equal(gpum_tiercache_put(c, k, strlen(k), buf, sizeof buf), 0);
  }
  gpum_tiercache_stats_t st;
  gpum_tiercache_stats(c, &st);
  assert_true(st.alloc_failures > 0);
  assert_true(st.tier[GPUM_TIER_DEVICE].demotions >= 16);
  assert_true(st.tier[GPUM_TIER_DEVICE].entries <= 8);
  assert_int_equal(st.tier[GPUM_TIER_DEVICE].entries + st.tier[GPUM_TIER_PINNED].entries, 24);
  assert_int_equal(where(c, 23), GPUM_TIER_DEVICE);
  assert_int_equal(where(c, 0), GPUM_TIER_PINNED);
  for (unsigned i = 0; i < 24; i++) { /* every byte, wherever it went */
    key_of(k, i);
    tc_fill(buf, sizeof buf, i, 0);
    size_t n = 0;
    assert_int_equal(gpum_tiercache_get(c, k, strlen(k), got, sizeof got, &n, NULL), 0);
    assert_int_equal(n, sizeof buf);
    assert_memory_equal(got, buf, sizeof buf);
  }
  assert_int_equal(tc_fail_after(0), 0);
  gpum_tiercache_destroy(c);
}

static void test_pressure(void **state) {
  (void)state;
  gpum_tiercache_t *c = make(0, 64 * KiB, 0, NULL, NULL);
  put_n(c, 0, 4, KiB);
  uint64_t freed = 0;
  assert_int_equal(gpum_tiercache_pressure(c, 1500, &freed), 0);
  assert_int_equal(freed, 2 * KiB);
  assert_int_equal(where(c, 0), GPUM_TIER_PINNED);
  assert_int_equal(where(c, 1), GPUM_TIER_PINNED);
  assert_int_equal(where(c, 2), GPUM_TIER_DEVICE);
  assert_int_equal(gpum_tiercache_pressure(c, UINT64_MAX, &freed), 0);
  assert_int_equal(freed, 2 * KiB);
  gpum_tiercache_stats_t st;
  gpum_tiercache_stats(c, &st);
  assert_int_equal(st.tier[GPUM_TIER_DEVICE].entries, 0);
  assert_int_equal(st.pressure_calls, 2);
  for (unsigned i = 0; i < 4; i++)
    check(c, i, KiB, NULL);
  gpum_tiercache_destroy(c);
}

static void test_pinning(void **state) {
  (void)state;
  gpum_tiercache_t *c = make(2 * KiB, 64 * KiB, 0, NULL, NULL);
  put_n(c, 0, 1, KiB);
  gpum_devptr_t d0 = 0, d1 = 0;
  assert_int_equal(gpum_tiercache_pin(c, "k00000", 6, &d0), 0);
  assert_true(d0 != 0);
  assert_int_equal(gpum_tiercache_pin(c, "k00000", 6, &d1), 0); /* nested */
  assert_int_equal(d0, d1);
  put_n(c, 1, 6, KiB); /* k0 stays on the device; the others take turns */
  assert_int_equal(where(c, 0), GPUM_TIER_DEVICE);
  unsigned char buf[KiB];
  assert_int_equal(gpum_tiercache_put(c, "k00000", 6, buf, KiB), GPUM_EBUSY);
  assert_int_equal(gpum_tiercache_remove(c, "k00000", 6), GPUM_EBUSY);
  uint64_t freed = 1;
  assert_int_equal(gpum_tiercache_pressure(c, UINT64_MAX, &freed), 0);
  assert_int_equal(freed, KiB); /* the unpinned one only */
  assert_int_equal(where(c, 0), GPUM_TIER_DEVICE);
  /* Pinning an entry on the pinned tier promotes it; then the device is all pinned. */
  assert_int_equal(gpum_tiercache_pin(c, "k00003", 6, &d1), 0);
  assert_int_equal(where(c, 3), GPUM_TIER_DEVICE);
  assert_int_equal(gpum_tiercache_pin(c, "k00004", 6, NULL), GPUM_EDEVOOM);
  assert_int_equal(where(c, 4), GPUM_TIER_PINNED);
  gpum_tier_t t;
  check(c, 4, KiB, &t); /* no room to promote: served from pinned memory, stays there */
  assert_int_equal(where(c, 4), GPUM_TIER_PINNED);
  check(c, 3, KiB, &t);
  assert_int_equal(t, GPUM_TIER_DEVICE);
  assert_int_equal(gpum_tiercache_unpin(c, "k00000", 6), 0);
  assert_int_equal(gpum_tiercache_unpin(c, "k00000", 6), 0);
  assert_int_equal(gpum_tiercache_unpin(c, "k00000", 6), GPUM_ESTATE);
  assert_int_equal(gpum_tiercache_unpin(c, "k00003", 6), 0);
  check(c, 4, KiB, &t); /* now it promotes */
  assert_int_equal(where(c, 4), GPUM_TIER_DEVICE);
  for (unsigned i = 0; i < 7; i++)
    check(c, i, KiB, NULL);
  gpum_tiercache_destroy(c);
}

/* Whether key k holds size bytes of tc_fill's pattern i (read back into host memory). */
static void check_key(gpum_tiercache_t *c, const char *k, size_t size, unsigned i) {
  unsigned char want[8 * KiB], got[8 * KiB];
  size_t n = 0;
  assert_int_equal(gpum_tiercache_get(c, k, strlen(k), got, sizeof got, &n, NULL), 0);
  assert_int_equal(n, size);
  tc_fill(want, size, i, 0);
  assert_memory_equal(got, want, size);
}

static void test_device_buffers(void **state) {
  (void)state;
  /* Device buffers of a gpum pool on the same device, in and out of every tier. */
  gpum_pool_source_t *src = NULL;
  gpum_pool_t *pool = NULL;
  gpum_pool_opts_t po;
  gpum_pool_opts_init(&po);
  assert_int_equal(gpum_pool_source_open("cuda", 0, 0, &src), 0);
  assert_int_equal(gpum_pool_create(src, &po, &pool), 0);
  gpum_devptr_t a = 0, b = 0;
  assert_int_equal(gpum_pool_alloc(pool, KiB, 0, &a), 0);
  assert_int_equal(gpum_pool_alloc(pool, KiB, 0, &b), 0);
  gpum_tiercache_t *c = make(2 * KiB, 64 * KiB, 0, NULL, NULL);
  put_n(c, 0, 1, KiB);
  gpum_tier_t t = GPUM_TIER_COUNT;
  size_t n = 0;
  /* Device tier -> a device buffer (device to device) -> a new entry on the device. */
  assert_int_equal(gpum_tiercache_get_device(c, "k00000", 6, a, KiB, &n, &t), 0);
  assert_int_equal(n, KiB);
  assert_int_equal(t, GPUM_TIER_DEVICE);
  assert_int_equal(gpum_tiercache_put_device(c, "dev-a", 5, a, KiB), 0);
  assert_int_equal(gpum_tiercache_lookup(c, "dev-a", 5, &t, NULL), 0);
  assert_int_equal(t, GPUM_TIER_DEVICE);
  check_key(c, "dev-a", KiB, 0);
  /* With the device full of pinned entries, a device buffer's entry goes to pinned memory
   * (device to host), and is read back into a device buffer from there (host to device). */
  assert_int_equal(gpum_tiercache_pin(c, "k00000", 6, NULL), 0);
  assert_int_equal(gpum_tiercache_pin(c, "dev-a", 5, NULL), 0);
  assert_int_equal(gpum_tiercache_put_device(c, "dev-b", 5, a, KiB), 0);
  assert_int_equal(gpum_tiercache_lookup(c, "dev-b", 5, &t, NULL), 0);
  assert_int_equal(t, GPUM_TIER_PINNED);
  assert_int_equal(gpum_tiercache_get_device(c, "dev-b", 5, b, KiB, NULL, &t), 0);
  assert_int_equal(t, GPUM_TIER_PINNED);
  assert_int_equal(gpum_tiercache_unpin(c, "k00000", 6), 0);
  assert_int_equal(gpum_tiercache_unpin(c, "dev-a", 5), 0);
  assert_int_equal(gpum_tiercache_put_device(c, "dev-c", 5, b, KiB), 0);
  check_key(c, "dev-b", KiB, 0);
  check_key(c, "dev-c", KiB, 0);
  /* Errors: no buffer, a short buffer (nothing copied, the size told). */
  assert_int_equal(gpum_tiercache_put_device(c, "x", 1, 0, KiB), GPUM_EINVAL);
  assert_int_equal(gpum_tiercache_get_device(c, "dev-c", 5, b, KiB / 2, &n, NULL), GPUM_ENOSPC);
  assert_int_equal(n, KiB);
  assert_int_equal(gpum_tiercache_get_device(c, "none", 4, b, KiB, NULL, NULL), GPUM_ENOENT);
  gpum_tiercache_destroy(c);
  assert_int_equal(gpum_pool_free(pool, a), 0);
  assert_int_equal(gpum_pool_free(pool, b), 0);
  gpum_pool_destroy(pool);
  gpum_pool_source_destroy(src);
}

typedef struct {
  unsigned n;
  unsigned keys[64];
  size_t sizes[64];
} evicted_t;

static void on_evict(const void *key, size_t len, size_t size, void *user) {
  evicted_t *ev = user;
  char k[16] = "";
  memcpy(k, key, len < 15 ? len : 15);
  if (ev->n < 64) {
    ev->keys[ev->n] = (unsigned)strtoul(k + 1, NULL, 10);
    ev->sizes[ev->n++] = size;
  }
}

static void test_limits_and_eviction(void **state) {
  (void)state;
  evicted_t ev = {0};
  gpum_tiercache_t *c = make(2 * KiB, 2 * KiB, 2 * KiB, on_evict, &ev);
  put_n(c, 0, 8, KiB); /* 2 + 2 + 2 held: the two coldest evicted from the host tier */
  assert_int_equal(ev.n, 2);
  assert_int_equal(ev.keys[0], 0);
  assert_int_equal(ev.keys[1], 1);
  assert_int_equal(ev.sizes[0], KiB);
  assert_int_equal(where(c, 2), GPUM_TIER_HOST);
  assert_int_equal(where(c, 4), GPUM_TIER_PINNED);
  assert_int_equal(where(c, 7), GPUM_TIER_DEVICE);
  gpum_tiercache_stats_t st;
  gpum_tiercache_stats(c, &st);
  assert_int_equal(st.tier[GPUM_TIER_HOST].evictions, 2);
  assert_int_equal(st.tier[GPUM_TIER_HOST].limit, 2 * KiB);
  for (int t = 0; t < GPUM_TIER_COUNT; t++)
    assert_int_equal(st.tier[t].bytes, 2 * KiB);
  gpum_tier_t t;
  check(c, 2, KiB, &t); /* from the host tier to the device, and everything shifts down */
  assert_int_equal(t, GPUM_TIER_HOST);
  assert_int_equal(where(c, 2), GPUM_TIER_DEVICE);
  /* k6 went down to pinned memory and k4 to the host tier, into the room k2 left there: a swap,
   * nothing evicted (every tier is as full as before). */
  assert_int_equal(ev.n, 2);
  assert_int_equal(where(c, 6), GPUM_TIER_PINNED);
  assert_int_equal(where(c, 4), GPUM_TIER_HOST);
  assert_int_equal(where(c, 3), GPUM_TIER_HOST);
  gpum_tiercache_stats(c, &st);
  assert_int_equal(st.tier[GPUM_TIER_HOST].evictions, 2);
  for (int i = 0; i < GPUM_TIER_COUNT; i++)
    assert_int_equal(st.tier[i].bytes, 2 * KiB);
  gpum_tiercache_destroy(c);

  /* Without a host tier the pinned tier is the lowest, and evicts. */
  memset(&ev, 0, sizeof ev);
  c = make(KiB, KiB, 0, on_evict, &ev);
  put_n(c, 0, 3, KiB);
  assert_int_equal(ev.n, 1);
  assert_int_equal(ev.keys[0], 0);
  gpum_tiercache_stats(c, &st);
  assert_int_equal(st.tier[GPUM_TIER_PINNED].evictions, 1);
  assert_int_equal(gpum_tiercache_get(c, "k00000", 6, NULL, 0, NULL, NULL), GPUM_ENOENT);
  gpum_tiercache_destroy(c);
}

/* ---- the defects found in review, each failing before its fix ----------------------------- */

/* A promotion is a swap: the entry moves up and the device entry it displaces moves down into
 * the room the entry leaves, even when that tier is full; nothing is evicted. */
static void test_promotion_swaps(void **state) {
  (void)state;
  evicted_t ev = {0};
  gpum_tier_t t;
  gpum_tiercache_stats_t st;
  gpum_tiercache_t *c = make(KiB, KiB, 0, on_evict, &ev);
  put_n(c, 0, 2, KiB); /* k0 went down to pinned memory: both tiers are full */
  assert_int_equal(where(c, 0), GPUM_TIER_PINNED);
  check(c, 0, KiB, &t);
  assert_int_equal(t, GPUM_TIER_PINNED);
  assert_int_equal(where(c, 0), GPUM_TIER_DEVICE);
  assert_int_equal(where(c, 1), GPUM_TIER_PINNED);
  assert_int_equal(ev.n, 0);
  gpum_tiercache_stats(c, &st);
  assert_int_equal(st.tier[GPUM_TIER_PINNED].entries, 1);
  assert_int_equal(st.tier[GPUM_TIER_PINNED].evictions, 0);
  check(c, 1, KiB, NULL); /* and back */
  assert_int_equal(where(c, 1), GPUM_TIER_DEVICE);
  assert_int_equal(where(c, 0), GPUM_TIER_PINNED);
  assert_int_equal(ev.n, 0);
  gpum_tiercache_destroy(c);

  /* Pinning promotes the same way. */
  c = make(KiB, KiB, 0, on_evict, &ev);
  put_n(c, 0, 2, KiB);
  gpum_devptr_t d = 0;
  assert_int_equal(gpum_tiercache_pin(c, "k00000", 6, &d), 0);
  assert_int_equal(where(c, 0), GPUM_TIER_DEVICE);
  assert_int_equal(where(c, 1), GPUM_TIER_PINNED);
  assert_int_equal(ev.n, 0);
  assert_int_equal(gpum_tiercache_unpin(c, "k00000", 6), 0);
  check(c, 1, KiB, NULL);
  gpum_tiercache_destroy(c);

  /* 2 on the device, 4 pinned, 6 entries: a promotion keeps all 6. */
  c = make(2 * KiB, 4 * KiB, 0, on_evict, &ev);
  put_n(c, 0, 6, KiB);
  check(c, 0, KiB, &t);
  assert_int_equal(t, GPUM_TIER_PINNED);
  assert_int_equal(ev.n, 0);
  assert_int_equal(where(c, 0), GPUM_TIER_DEVICE);
  assert_int_equal(where(c, 4), GPUM_TIER_PINNED);
  gpum_tiercache_stats(c, &st);
  assert_int_equal(st.tier[GPUM_TIER_DEVICE].entries + st.tier[GPUM_TIER_PINNED].entries, 6);
  assert_true(st.tier[GPUM_TIER_PINNED].bytes <= 4 * KiB);
  for (unsigned i = 0; i < 6; i++)
    check(c, i, KiB, NULL);
  assert_int_equal(ev.n, 0);
  gpum_tiercache_destroy(c);
}

/* A promotion that fails after it moved device entries into its tier (the device allocation
 * fails with nothing left to demote) leaves that tier within its limit again: the excess goes
 * one tier further down, nothing is evicted while the host tier has room. */
static void test_failed_promotion_settles(void **state) {
  (void)state;
  evicted_t ev = {0};
  gpum_tiercache_t *c = make(0, 1792 * KiB, 4 * KiB * KiB, on_evict, &ev);
  static unsigned char big[1536 * KiB], small[512 * KiB], got[1536 * KiB];
  tc_fill(big, sizeof big, 1, 0);
  tc_fill(small, sizeof small, 2, 0);
  assert_int_equal(gpum_tiercache_put(c, "E", 1, big, sizeof big), 0);
  assert_int_equal(gpum_tiercache_pressure(c, UINT64_MAX, NULL), 0); /* E to pinned memory */
  assert_int_equal(gpum_tiercache_put(c, "X", 1, small, sizeof small), 0);
  gpum_tier_t t;
  assert_int_equal(gpum_tiercache_lookup(c, "X", 1, &t, NULL), 0);
  assert_int_equal(t, GPUM_TIER_DEVICE);
  /* From now on the device grows no more: E (a large block) cannot be promoted, even after X
   * (a small one) was demoted to make room. */
  assert_int_equal(tc_fail_after(1), 0);
  size_t n = 0;
  assert_int_equal(gpum_tiercache_get(c, "E", 1, got, sizeof got, &n, &t), 0);
  assert_int_equal(tc_fail_after(0), 0);
  assert_int_equal(t, GPUM_TIER_PINNED);
  assert_memory_equal(got, big, sizeof big);
  gpum_tiercache_stats_t st;
  gpum_tiercache_stats(c, &st);
  assert_true(st.alloc_failures > 0);
  assert_true(st.tier[GPUM_TIER_PINNED].bytes <= st.tier[GPUM_TIER_PINNED].limit);
  assert_int_equal(gpum_tiercache_lookup(c, "E", 1, &t, NULL), 0);
  assert_int_equal(t, GPUM_TIER_PINNED);
  assert_int_equal(gpum_tiercache_lookup(c, "X", 1, &t, NULL), 0);
  assert_int_equal(t, GPUM_TIER_HOST);
  assert_int_equal(ev.n, 0);
  assert_int_equal(gpum_tiercache_get(c, "X", 1, got, sizeof got, &n, NULL), 0);
  assert_int_equal(n, sizeof small);
  assert_memory_equal(got, small, sizeof small);
  gpum_tiercache_destroy(c);
}

/* A put the device can never make room for (its pinned entries stand in the way) goes to a lower
 * tier without demoting the device's unpinned entries first. */
static void test_put_below_device_demotes_nothing(void **state) {
  (void)state;
  gpum_tiercache_t *c = make(2 * KiB, 64 * KiB, 0, NULL, NULL);
  put_n(c, 0, 2, KiB);
  assert_int_equal(gpum_tiercache_pin(c, "k00001", 6, NULL), 0);
  static unsigned char z[2 * KiB];
  assert_int_equal(gpum_tiercache_put(c, "z", 1, z, sizeof z), 0);
  gpum_tier_t t;
  assert_int_equal(gpum_tiercache_lookup(c, "z", 1, &t, NULL), 0);
  assert_int_equal(t, GPUM_TIER_PINNED);
  assert_int_equal(where(c, 0), GPUM_TIER_DEVICE);
  gpum_tiercache_stats_t st;
  gpum_tiercache_stats(c, &st);
  assert_int_equal(st.tier[GPUM_TIER_DEVICE].demotions, 0);
  /* Nor does a promotion the device cannot make room for. */
  check(c, 0, KiB, NULL);
  assert_int_equal(gpum_tiercache_get(c, "z", 1, z, sizeof z, NULL, &t), 0);
  assert_int_equal(t, GPUM_TIER_PINNED);
  assert_int_equal(gpum_tiercache_lookup(c, "z", 1, &t, NULL), 0);
  assert_int_equal(t, GPUM_TIER_PINNED);
  assert_int_equal(where(c, 0), GPUM_TIER_DEVICE);
  gpum_tiercache_stats(c, &st);
  assert_int_equal(st.tier[GPUM_TIER_DEVICE].demotions, 0);
  assert_int_equal(gpum_tiercache_unpin(c, "k00001", 6), 0);
  gpum_tiercache_destroy(c);
}

static void test_stats_null(void **state) {
  (void)state;
  gpum_tiercache_stats_t st;
  memset(&st, 0xff, sizeof st);
  gpum_tiercache_stats(NULL, &st);
  gpum_tiercache_stats_t zero;
  memset(&zero, 0, sizeof zero);
  assert_memory_equal(&st, &zero, sizeof st);
  gpum_tiercache_t *c = make(KiB, KiB, 0, NULL, NULL);
  gpum_tiercache_stats(c, NULL);
  gpum_tiercache_destroy(c);
}

/* A get refused for its small buffer counts nowhere (neither get, hit nor miss), does not
 * promote and leaves the LRU order: the caller retries with a buffer of the size it learnt. */
static void test_short_buffer_not_counted(void **state) {
  (void)state;
  gpum_tiercache_t *c = make(KiB, 64 * KiB, 0, NULL, NULL);
  put_n(c, 0, 2, KiB); /* k0 in pinned memory */
  unsigned char small[16];
  size_t n = 0;
  gpum_tier_t t = GPUM_TIER_COUNT;
  assert_int_equal(gpum_tiercache_get(c, "k00000", 6, small, sizeof small, &n, &t), GPUM_ENOSPC);
  assert_int_equal(n, KiB);
  assert_int_equal(t, GPUM_TIER_PINNED);
  assert_int_equal(where(c, 0), GPUM_TIER_PINNED);
  assert_int_equal(gpum_tiercache_get(c, "k00001", 6, small, sizeof small, &n, &t), GPUM_ENOSPC);
  gpum_tiercache_stats_t st;
  gpum_tiercache_stats(c, &st);
  assert_int_equal(st.gets, 0);
  assert_int_equal(st.misses, 0);
  for (int i = 0; i < GPUM_TIER_COUNT; i++) {
    assert_int_equal(st.tier[i].hits, 0);
    assert_int_equal(st.tier[i].misses, 0);
  }
  assert_int_equal(st.tier[GPUM_TIER_PINNED].promotions, 0);
  /* The retry counts once. */
  check(c, 0, KiB, &t);
  assert_int_equal(gpum_tiercache_get(c, "nope", 4, small, sizeof small, NULL, NULL), GPUM_ENOENT);
  gpum_tiercache_stats(c, &st);
  assert_int_equal(st.gets, 2);
  assert_int_equal(st.misses, 1);
  assert_int_equal(st.tier[GPUM_TIER_PINNED].hits, 1);
  assert_int_equal(st.tier[GPUM_TIER_DEVICE].misses, 2);
  assert_int_equal(st.tier[GPUM_TIER_PINNED].misses, 1);
  gpum_tiercache_destroy(c);
}

/* ---- 100,000 random operations against a model ------------------------------------------ */

#define NKEYS 600
#define OPS 100000
#define MAXSZ 2048

typedef struct {
  bool present;
  unsigned version;
  size_t size;
  unsigned pins;
} model_t;

static model_t model[NKEYS];

static void model_evict(const void *key, size_t len, size_t size, void *user) {
  (void)user;
  char k[16] = "";
  memcpy(k, key, len < 15 ? len : 15);
  unsigned i = (unsigned)strtoul(k + 1, NULL, 10);
  assert_true(i < NKEYS && model[i].present && model[i].size == size && !model[i].pins);
  model[i].present = false;
}

static void test_random_integrity(void **state) {
  (void)state;
  memset(model, 0, sizeof model);
  /* 64 KiB on the device, 256 KiB pinned, 128 KiB plain: ~600 keys of ~1 KiB do not fit, so
   * demotions, promotions and evictions happen all the time. */
  gpum_tiercache_t *c = make(64 * KiB, 256 * KiB, 128 * KiB, model_evict, NULL);
  uint64_t x = 88172645463325252ull;
  static unsigned char buf[MAXSZ], want[MAXSZ];
  unsigned pinned = 0;
  uint64_t pins = 0; /* successful pins: they count as hits too */
  for (unsigned op = 0; op < OPS; op++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    /* A skewed key choice: a hot tenth gets half of the operations. */
    unsigned i = (unsigned)((x >> 8) % (x & 1 ? NKEYS / 10 : NKEYS));
    unsigned what = (unsigned)((x >> 32) % 100);
    char k[16];
    key_of(k, i);
    model_t *m = &model[i];
    if (what < 40) {
      size_t n = 1 + (size_t)((x >> 40) % MAXSZ);
      tc_fill(buf, n, i, m->version + 1);
      int rc = gpum_tiercache_put(c, k, strlen(k), buf, n);
      if (m->pins) {
        assert_int_equal(rc, GPUM_EBUSY);
      } else {
        assert_int_equal(rc, 0);
        m->present = true;
        m->version++;
        m->size = n;
      }
    } else if (what < 90) {
      size_t n = 0, cap = (x >> 48) % 8 == 0 ? MAXSZ / 2 : sizeof buf; /* sometimes short */
      int rc = gpum_tiercache_get(c, k, strlen(k), buf, cap, &n, NULL);
      if (!m->present) {
        assert_int_equal(rc, GPUM_ENOENT);
        continue;
      }
      if (m->size > cap) {
        assert_int_equal(rc, GPUM_ENOSPC);
        assert_int_equal(n, m->size);
        continue;
      }
      assert_int_equal(rc, 0);
      assert_int_equal(n, m->size);
      tc_fill(want, n, i, m->version);
      assert_memory_equal(buf, want, n);
    } else if (what < 94) {
      int rc = gpum_tiercache_remove(c, k, strlen(k));
      assert_int_equal(rc, !m->present ? GPUM_ENOENT : m->pins ? GPUM_EBUSY : 0);
      if (rc == 0)
        m->present = false;
    } else if (what < 97) {
      if (!m->present || pinned >= 8)
        continue;
      gpum_devptr_t d = 0;
      int rc = gpum_tiercache_pin(c, k, strlen(k), &d);
      if (rc == GPUM_EDEVOOM)
        continue;
      assert_int_equal(rc, 0);
      assert_true(d != 0);
      m->pins++;
      pinned++;
      pins++;
    } else {
      if (!m->present || !m->pins)
        continue;
      assert_int_equal(gpum_tiercache_unpin(c, k, strlen(k)), 0);
      m->pins--;
      pinned--;
    }
    if (op % 10000 == 0)
      assert_int_equal(gpum_tiercache_pressure(c, 16 * KiB, NULL), 0);
  }
  /* The cache holds exactly the model's entries, with the model's bytes. */
  uint64_t bytes = 0, entries = 0;
  for (unsigned i = 0; i < NKEYS; i++) {
    char k[16];
    key_of(k, i);
    size_t n = 0;
    int rc = gpum_tiercache_lookup(c, k, strlen(k), NULL, &n);
    assert_int_equal(rc, model[i].present ? 0 : GPUM_ENOENT);
    if (model[i].present) {
      assert_int_equal(n, model[i].size);
      bytes += n;
      entries++;
    }
  }
  gpum_tiercache_stats_t st;
  gpum_tiercache_stats(c, &st);
  uint64_t sb = 0, se = 0, hits = 0;
  for (int t = 0; t < GPUM_TIER_COUNT; t++) {
    sb += st.tier[t].bytes;
    se += st.tier[t].entries;
    hits += st.tier[t].hits;
    if (st.tier[t].limit)
      assert_true(st.tier[t].bytes <= st.tier[t].limit);
  }
  assert_int_equal(sb, bytes);
  assert_int_equal(se, entries);
  assert_int_equal(st.gets, st.misses + hits - pins); /* every get a hit or a miss */
  assert_true(st.tier[GPUM_TIER_DEVICE].demotions > 1000);
  assert_true(st.tier[GPUM_TIER_PINNED].promotions > 1000);
  assert_true(st.tier[GPUM_TIER_HOST].evictions > 100);
  gpum_tiercache_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_put_get_replace),
      cmocka_unit_test(test_budget_demotes_and_hit_promotes),
      cmocka_unit_test(test_failed_allocations_demote),
      cmocka_unit_test(test_pressure),
      cmocka_unit_test(test_pinning),
      cmocka_unit_test(test_device_buffers),
      cmocka_unit_test(test_limits_and_eviction),
      cmocka_unit_test(test_promotion_swaps),
      cmocka_unit_test(test_failed_promotion_settles),
      cmocka_unit_test(test_put_below_device_demotes_nothing),
      cmocka_unit_test(test_stats_null),
      cmocka_unit_test(test_short_buffer_not_counted),
      cmocka_unit_test(test_random_integrity),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
