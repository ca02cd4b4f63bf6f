/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/tiercache: the tier cache (gpum/tiercache.h) on a Zipf trace, against Belady's MIN.
 *
 * A trace of OPS key accesses over KEYS keys, key k drawn with probability proportional to
 * 1 / (k + 1)^S, is played read-through: each access is a get, and a miss puts the key's payload
 * (SIZE bytes, made from the key) as a backing store would. The device tier holds DEV entries
 * (its budget), pinned memory PIN entries, no plain host tier. Every payload read is checked.
 *
 * The offline optimum is Belady's MIN on the same trace: with DEV entries, the most device hits
 * any policy could have; with DEV + PIN entries, the most hits in the cache as a whole. Printed:
 * the hit rate per tier, the optimum's, the ratios, and operations (gets + puts) per second.
 * Usage: tiercache [KEYS] [OPS] [S] [SIZE] [DEV] [PIN] [SEED].
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/error.h>
#include <gpum/tiercache.h>

static uint64_t rng = 42;

static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static void fill(unsigned char *buf, size_t n, uint32_t k) {
  for (size_t i = 0; i < n; i++)
    buf[i] = (unsigned char)(k * 131u + i * 7u);
}

/* ---- Belady's MIN: evict the entry used again farthest in the future ---------------------- */

typedef struct {
  uint32_t next; /* the position of the key's next use (UINT32_MAX: never) */
  uint32_t key;
} slot_t;

/* A max-heap on next, with stale slots skipped when popped (a key's current next is in cur). */
static void heap_push(slot_t *h, size_t *n, slot_t s) {
  size_t i = (*n)++;
  while (i > 0 && h[(i - 1) / 2].next < s.next) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = s;
}

static slot_t heap_pop(slot_t *h, size_t *n) {
  slot_t top = h[0], last = h[--*n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n)
      break;
    if (c + 1 < *n && h[c + 1].next > h[c].next)
      c++;
    if (h[c].next <= last.next)
      break;
    h[i] = h[c];
    i = c;
  }
  if (*n)
    h[i] = last;
  return top;
}

static uint64_t belady_hits(const uint32_t *trace, const uint32_t *nextpos, size_t ops,
                            uint32_t keys, size_t cap) {
  uint32_t *cur = malloc(keys * sizeof *cur); /* the key's next use while cached, else 0 */
  unsigned char *in = calloc(keys, 1);
  slot_t *h = malloc((ops + 1) * sizeof *h);
  size_t hn = 0, held = 0;
  uint64_t hits = 0;
  for (size_t i = 0; i < ops; i++) {
    uint32_t k = trace[i];
    if (in[k]) {
      hits++;
    } else {
      if (held == cap) {
        for (;;) {
          slot_t s = heap_pop(h, &hn);
          if (in[s.key] && cur[s.key] == s.next) {
            in[s.key] = 0;
            held--;
            break;
          }
        }
      }
      in[k] = 1;
      held++;
    }
    cur[k] = nextpos[i];
    heap_push(h, &hn, (slot_t){nextpos[i], k});
  }
  free(cur);
  free(in);
  free(h);
  return hits;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  uint32_t keys = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 20000;
  size_t ops = argc > 2 ? strtoul(argv[2], NULL, 10) : 300000;
  double s = argc > 3 ? strtod(argv[3], NULL) : 0.99;
  size_t size = argc > 4 ? strtoul(argv[4], NULL, 10) : 4096;
  size_t dev = argc > 5 ? strtoul(argv[5], NULL, 10) : 1000;
  size_t pin = argc > 6 ? strtoul(argv[6], NULL, 10) : 4000;
  rng = argc > 7 ? strtoull(argv[7], NULL, 10) | 1 : 42;
  if (!keys || !ops || !size || !dev || !pin) {
    fprintf(stderr, "usage: tiercache [KEYS] [OPS] [S] [SIZE] [DEV] [PIN] [SEED]\n");
    return 2;
  }
  /* The trace. */
  double *cdf = malloc(keys * sizeof *cdf);
  uint32_t *trace = malloc(ops * sizeof *trace), *nextpos = malloc(ops * sizeof *nextpos);
  uint32_t *last = malloc(keys * sizeof *last);
  unsigned char *buf = malloc(size), *want = malloc(size);
  if (!cdf || !trace || !nextpos || !last || !buf || !want)
    return 1;
  double sum = 0;
  for (uint32_t k = 0; k < keys; k++)
    cdf[k] = (sum += 1.0 / pow(k + 1.0, s));
  for (size_t i = 0; i < ops; i++) {
    double u = (double)(next_rand() >> 11) / 9007199254740992.0 * sum;
    uint32_t lo = 0, hi = keys - 1;
    while (lo < hi) {
      uint32_t mid = lo + (hi - lo) / 2;
      if (cdf[mid] < u)
        lo = mid + 1;
      else
        hi = mid;
    }
    trace[i] = lo;
  }
  for (uint32_t k = 0; k < keys; k++)
    last[k] = UINT32_MAX;
  for (size_t i = ops; i-- > 0;) {
    nextpos[i] = last[trace[i]];
    last[trace[i]] = (uint32_t)i;
  }
  /* The cache. */
  gpum_tiercache_opts_t o;
  gpum_tiercache_opts_init(&o);
  o.device_budget = (uint64_t)dev * size;
  o.pinned_limit = (uint64_t)pin * size;
  gpum_tiercache_t *c;
  if (gpum_tiercache_create(&o, &c) != 0) {
    fprintf(stderr, "tiercache: %s\n", gpum_last_error());
    return 1;
  }
  uint64_t puts = 0, bad = 0;
  double t0 = now();
  for (size_t i = 0; i < ops; i++) {
    uint32_t k = trace[i];
    char key[16];
    int kl = snprintf(key, sizeof key, "key%u", k);
    size_t n = 0;
    int rc = gpum_tiercache_get(c, key, (size_t)kl, buf, size, &n, NULL);
    if (rc == GPUM_ENOENT) {
      fill(buf, size, k);
      if (gpum_tiercache_put(c, key, (size_t)kl, buf, size) != 0) {
        fprintf(stderr, "tiercache: put: %s\n", gpum_last_error());
        return 1;
      }
      puts++;
    } else if (rc != 0) {
      fprintf(stderr, "tiercache: get: %s\n", gpum_last_error());
      return 1;
    } else {
      fill(want, size, k);
      bad += n != size || memcmp(buf, want, size) != 0;
    }
  }
  double secs = now() - t0;
  gpum_tiercache_stats_t st;
  gpum_tiercache_stats(c, &st);
  gpum_tiercache_destroy(c);
  uint64_t opt_dev = belady_hits(trace, nextpos, ops, keys, dev);
  uint64_t opt_all = belady_hits(trace, nextpos, ops, keys, dev + pin);
  double n = (double)ops;
  double hd = (double)st.tier[GPUM_TIER_DEVICE].hits / n;
  double hp = (double)st.tier[GPUM_TIER_PINNED].hits / n;
  printf("trace: %zu gets over %u keys, Zipf s=%.2f, %zu-byte payloads; device %zu entries, "
         "pinned %zu entries\n",
         ops, keys, s, size, dev, pin);
  printf("device hit rate   %.4f   Belady MIN (%zu entries)  %.4f   ratio %.3f\n", hd, dev,
         (double)opt_dev / n, hd / ((double)opt_dev / n));
  printf("pinned hit rate   %.4f\n", hp);
  printf("cache hit rate    %.4f   Belady MIN (%zu entries)  %.4f   ratio %.3f\n", hd + hp,
         dev + pin, (double)opt_all / n, (hd + hp) / ((double)opt_all / n));
  printf("misses %.4f; promotions %llu, demotions %llu, evictions %llu; corrupt reads %llu\n",
         (double)st.misses / n, (unsigned long long)st.tier[GPUM_TIER_PINNED].promotions,
         (unsigned long long)st.tier[GPUM_TIER_DEVICE].demotions,
         (unsigned long long)st.tier[GPUM_TIER_PINNED].evictions, (unsigned long long)bad);
  printf("operations/s      %.0f   (%zu gets + %llu puts in %.3f s, simulated driver)\n",
         (double)(ops + puts) / secs, ops, (unsigned long long)puts, secs);
  free(cdf);
  free(trace);
  free(nextpos);
  free(last);
  free(buf);
  free(want);
  return bad ? 1 : 0;
}
