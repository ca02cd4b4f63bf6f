/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test program for gpumd's pressure reaching a job's batcher and tiered cache through its
 * reporter, run as a job under `gpum run` on a simulated node (GPUM_SIM_NODE, GPUM_SOCKET,
 * GPUM_RESERVATION_ID from it). Puts eight 1 MiB entries in a tiered cache on the job's GPU,
 * makes a batcher (max_batch_size 16), adds both to a reporter (period 50 ms) and prints
 * "subscribed". Then waits (30 s at most each) for the reporter to say pressure (the caller
 * pushes the GPU over pressure.high): the batcher's bound must be halved and the cache must have
 * demoted half its device tier to pinned memory with every byte intact ("pressure ..."); then
 * for it to clear (the caller lets go): the bound is whole again ("cleared ..."). Exits 0, or 1
 * with the reason.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/gpum.h>

#define ENTRY (1u << 20)
#define ENTRIES 8

static int model(void *const *in, void **out, size_t n, unsigned worker, void *user) {
  (void)worker;
  (void)user;
  memcpy(out, in, n * sizeof *out);
  return 0;
}

static int fail(const char *what) {
  fprintf(stderr, "report_pressure: %s: %s\n", what, gpum_last_error());
  return 1;
}

static bool wait_pressure(gpum_reporter_t *rep, bool want) {
  for (int i = 0; i < 3000; i++) { /* the reporter's state, polled: <= 30 s */
    if (gpum_reporter_pressure(rep) == want)
      return true;
    usleep(10000);
  }
  return false;
}

static size_t bound(gpum_batcher_t *b) {
  gpum_batcher_stats_t st;
  gpum_batcher_stats(b, &st);
  return st.bound;
}

int main(void) {
  static unsigned char buf[ENTRY], want[ENTRY];
  gpum_tiercache_opts_t co;
  gpum_tiercache_opts_init(&co);
  co.pinned_limit = 64u << 20;
  gpum_tiercache_t *cache = NULL;
  if (gpum_tiercache_create(&co, &cache) != 0)
    return fail("tiercache");
  for (unsigned k = 0; k < ENTRIES; k++) {
    memset(buf, (int)(k + 1), sizeof buf);
    if (gpum_tiercache_put(cache, &k, sizeof k, buf, sizeof buf) != 0)
      return fail("put");
  }
  gpum_batcher_opts_t bo = {.max_batch_size = 16, .fn = model};
  gpum_batcher_t *b = NULL;
  if (gpum_batcher_create(&bo, &b) != 0)
    return fail("batcher");
  gpum_reporter_opts_t ro = {.period_ms = 50};
  gpum_reporter_t *rep = NULL;
  if (gpum_reporter_create(&ro, &rep) != 0 || gpum_reporter_add_batcher(rep, "infer", b) != 0 ||
      gpum_reporter_add_tiercache(rep, "cache", cache) != 0 || gpum_reporter_flush(rep) != 0)
    return fail("reporter");
  if (bound(b) != 16 || gpum_reporter_pressure(rep))
    return fail("pressure before any");
  printf("subscribed\n");
  fflush(stdout);

  if (!wait_pressure(rep, true))
    return fail("gpumd's pressure never reached the reporter");
  gpum_tiercache_stats_t st;
  gpum_tiercache_stats(cache, &st);
  if (bound(b) != 8) {
    fprintf(stderr, "report_pressure: bound %zu under pressure, not 8\n", bound(b));
    return 1;
  }
  if (st.tier[GPUM_TIER_DEVICE].bytes > ENTRIES / 2 * ENTRY ||
      st.tier[GPUM_TIER_PINNED].bytes < ENTRIES / 2 * ENTRY) {
    fprintf(stderr, "report_pressure: device %llu, pinned %llu bytes under pressure\n",
            (unsigned long long)st.tier[GPUM_TIER_DEVICE].bytes,
            (unsigned long long)st.tier[GPUM_TIER_PINNED].bytes);
    return 1;
  }
  for (unsigned k = 0; k < ENTRIES; k++) {
    size_t got = 0;
    memset(want, (int)(k + 1), sizeof want);
    if (gpum_tiercache_get(cache, &k, sizeof k, buf, sizeof buf, &got, NULL) != 0 || got != ENTRY ||
        memcmp(buf, want, ENTRY))
      return fail("an entry did not read back intact after the demotion");
  }
  printf("pressure bound=8 device=%llu pinned=%llu\n",
         (unsigned long long)st.tier[GPUM_TIER_DEVICE].bytes,
         (unsigned long long)st.tier[GPUM_TIER_PINNED].bytes);
  fflush(stdout);

  if (!wait_pressure(rep, false))
    return fail("the pressure never cleared");
  if (bound(b) != 16)
    return fail("the bound stayed low after the pressure cleared");
  printf("cleared bound=16\n");
  gpum_reporter_destroy(rep);
  gpum_batcher_destroy(b);
  gpum_tiercache_destroy(cache);
  return 0;
}
