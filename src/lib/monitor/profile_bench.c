/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The benchmark helper: warm-up runs, then timed runs each timed on its own, summarised as
 * median, mean, min, max and throughput. The median is the figure to quote: it ignores the
 * occasional run stretched by a page fault or a context switch.
 */
#include <stdio.h>
#include <stdlib.h>

#include <gpum/error.h>
#include <gpum/profile.h>

#include "monitor/profile_internal.h"

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

int gpum_bench_run(const char *name, gpum_bench_fn fn, void *arg, unsigned warmup_runs,
                   unsigned timed_runs, uint64_t items_per_run, gpum_bench_result_t *out) {
  if (fn == NULL || out == NULL || timed_runs == 0)
    return gpum_error(GPUM_EINVAL, "bench %s: %s", name ? name : "",
                      timed_runs == 0 ? "timed_runs must be at least 1" : "NULL argument");
  uint64_t *t = malloc(timed_runs * sizeof *t);
  if (t == NULL)
    return gpum_error(GPUM_ENOMEM, "bench %s: out of memory", name ? name : "");
  for (unsigned i = 0; i < warmup_runs; i++)
    fn(arg);
  long double total = 0;
  for (unsigned i = 0; i < timed_runs; i++) {
    uint64_t start = gpum__profile_now();
    fn(arg);
    uint64_t end = gpum__profile_now();
    t[i] = end > start ? end - start : 0;
    total += t[i];
    if (name != NULL)
      gpum_profile_record(name, t[i]);
  }
  qsort(t, timed_runs, sizeof *t, cmp_u64);
  out->runs = timed_runs;
  out->min_ns = t[0];
  out->max_ns = t[timed_runs - 1];
  out->median_ns = timed_runs % 2 ? t[timed_runs / 2]
                                  : t[timed_runs / 2 - 1] / 2 + t[timed_runs / 2] / 2 +
                                        (t[timed_runs / 2 - 1] % 2 + t[timed_runs / 2] % 2) / 2;
  out->mean_ns = (uint64_t)(total / timed_runs + 0.5L);
  out->items_per_run = items_per_run;
  out->throughput =
      items_per_run && out->median_ns ? (double)items_per_run * 1e9 / (double)out->median_ns : 0;
  free(t);
  return 0;
}

/* "812.3 k", "12.0" for throughputs. */
static void si(double v, char *buf, size_t len) {
  if (v >= 1e9)
    snprintf(buf, len, "%.1f G", v / 1e9);
  else if (v >= 1e6)
    snprintf(buf, len, "%.1f M", v / 1e6);
  else if (v >= 1e3)
    snprintf(buf, len, "%.1f k", v / 1e3);
  else
    snprintf(buf, len, "%.1f", v);
}

char *gpum_bench_format(const char *name, const gpum_bench_result_t *r, char *buf, size_t len) {
  char med[24], mean[24], mn[24], mx[24], tp[48] = "";
  if (buf == NULL || len == 0)
    return buf;
  if (r->items_per_run) {
    char s[24];
    si(r->throughput, s, sizeof s);
    snprintf(tp, sizeof tp, ", %s items/s", s);
  }
  snprintf(buf, len, "%s: median %s, mean %s, min %s, max %s%s (%u runs)", name ? name : "bench",
           gpum__profile_format_ns((double)r->median_ns, med, sizeof med),
           gpum__profile_format_ns((double)r->mean_ns, mean, sizeof mean),
           gpum__profile_format_ns((double)r->min_ns, mn, sizeof mn),
           gpum__profile_format_ns((double)r->max_ns, mx, sizeof mx), tp, r->runs);
  return buf;
}
