/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Elastic reservations (gpum run --max-mem, docs/enforce.md): an allocation that would pass the
 * limit asks gpumd to grow the reservation first, up to GPUM_MEM_MAX, waiting at most
 * GPUM_GROW_TIMEOUT (default 2s) for the answer; gpumd grants from free memory under its
 * admission rules or says no, and the allocation then fails as without growth. When gpumd
 * reports pressure on the job's GPUs, its launcher sets the fence's "shrink wanted" flag, and
 * the next free gives back what the job holds above its base.
 *
 * One request at a time per process (grow_mu); the fence's limit is only raised after gpumd
 * granted, and lowered before gpumd is told, so the job never holds more than gpumd reserved
 * for it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/client.h>
#include <gpum/clock.h>
#include <gpum/size.h>

#include "enforce_internal.h"

#define STEP_MIN (256ULL << 20)       /* the least a reservation grows by */
#define ROUND (2ULL << 20)            /* sizes asked for are multiples of a granule */
#define REFUSED_QUIET_NS 500000000ULL /* after a refusal, no new request for this long */

static pthread_mutex_t grow_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t refused_at; /* grow_mu */

static unsigned grow_timeout_ms(void) {
  const char *s = getenv("GPUM_GROW_TIMEOUT");
  uint64_t ms = 2000;
  if (s && *s && gpum_duration_parse(s, &ms) != 0)
    ms = 2000;
  return ms > 60000 ? 60000 : (unsigned)ms;
}

/* Asks gpumd to resize the reservation to bytes per GPU; the size granted on success. */
static int ask(uint64_t bytes, uint64_t *granted) {
  char id[32];
  snprintf(id, sizeof id, "r-%llu", (unsigned long long)gpum__enf.reservation);
  gpum_client_t *c = NULL;
  unsigned t = grow_timeout_ms();
  int rc = gpum_client_connect(NULL, t, &c);
  if (rc == 0) {
    gpum_client_set_timeout(c, t);
    gpum_reservation_t r;
    rc = gpum_client_resize(c, id, bytes, &r);
    if (rc == 0)
      *granted = r.bytes_per_gpu;
  }
  gpum_client_close(c);
  return rc;
}

static uint64_t round_up(uint64_t n) {
  return (n + ROUND - 1) / ROUND * ROUND;
}

bool gpum__enf_grow(unsigned dev, uint64_t need) {
  gpum_fence *f = gpum__enf_fence();
  if (!f || !gpum__enf.reservation || dev >= GPUM_FENCE_MAX_DEVICES)
    return false;
  gpum_fence_usage_t u;
  if (gpum_fence_usage(f, dev, &u) != 0 || u.max_limit == 0)
    return false;
  pthread_mutex_lock(&grow_mu);
  bool ok = false;
  uint64_t limit, used = gpum_fence_charged(f, dev, &limit);
  uint64_t now = gpum_clock_mono_ns();
  if (used + need <= limit) {
    ok = true; /* another thread grew it meanwhile */
  } else if (used + need <= u.max_limit && !(refused_at && now - refused_at < REFUSED_QUIET_NS)) {
    uint64_t base = gpum_fence_base_limit(f);
    uint64_t step = base / 4 > STEP_MIN ? base / 4 : STEP_MIN;
    uint64_t want = round_up(used + need > limit + step ? used + need : limit + step);
    if (want > u.max_limit)
      want = u.max_limit;
    uint64_t granted = 0, least = round_up(used + need);
    int rc = ask(want, &granted);
    if (rc != 0 && want > least) { /* no room for a whole step: just what this allocation needs */
      gpum_error_clear();
      want = least;
      rc = ask(want, &granted);
    }
    if (rc == 0 && granted > limit) {
      gpum_fence_set_limit(f, GPUM_FENCE_ALL_DEVICES, granted);
      ok = used + need <= granted;
      refused_at = 0;
    } else {
      char w[GPUM_SIZE_BUFSZ];
      gpum__enf_log("reservation r-%llu: gpumd did not grow it to %s: %s",
                    (unsigned long long)gpum__enf.reservation, gpum_size_format(want, w, sizeof w),
                    rc ? gpum_last_error() : "not granted");
      gpum_error_clear();
      refused_at = now ? now : 1;
    }
  }
  pthread_mutex_unlock(&grow_mu);
  return ok;
}

void gpum__enf_maybe_shrink(void) {
  gpum_fence *f = gpum__enf_fence();
  if (!f || !gpum__enf.reservation || !gpum_fence_take_shrink(f))
    return;
  pthread_mutex_lock(&grow_mu);
  uint64_t base = gpum_fence_base_limit(f), limit = 0, held = 0;
  for (unsigned d = 0; d < GPUM_FENCE_MAX_DEVICES; d++) {
    uint64_t l, u = gpum_fence_charged(f, d, &l);
    held = u > held ? u : held;
    limit = l > limit ? l : limit;
  }
  uint64_t want = round_up(held > base ? held : base);
  if (want < limit) {
    /* The fence first, so that nothing is charged past what gpumd will hold for the job. */
    gpum_fence_set_limit(f, GPUM_FENCE_ALL_DEVICES, want);
    uint64_t now_held = 0;
    for (unsigned d = 0; d < GPUM_FENCE_MAX_DEVICES; d++) {
      uint64_t u = gpum_fence_charged(f, d, NULL);
      now_held = u > now_held ? u : now_held;
    }
    uint64_t granted = 0;
    if (now_held > want || ask(want, &granted) != 0) {
      gpum_fence_set_limit(f, GPUM_FENCE_ALL_DEVICES, limit); /* as it was */
      gpum_error_clear();
    }
  }
  pthread_mutex_unlock(&grow_mu);
}
