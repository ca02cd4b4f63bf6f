/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Window statistics: min, max, mean and nearest-rank percentiles of a set of values. The
 * monitor collects the values of one metric over a time range from a device's history ring
 * and hands them here.
 *
 * Percentiles use the nearest-rank method: with the n values sorted ascending, the p-th
 * percentile is the value at 1-based rank ceil(p/100 * n) (rank 1 for tiny p). It is always
 * one of the samples, never an interpolation.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/monitor.h>

#include "monitor/monitor_internal.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double gpum__percentile_sorted(const double *sorted, size_t n, double p) {
  if (n == 0)
    return 0.0;
  double r = ceil(p / 100.0 * (double)n);
  size_t rank = r < 1.0 ? 1 : (size_t)r;
  if (rank > n)
    rank = n;
  return sorted[rank - 1];
}

int gpum__stats_sort_in_place(double *v, size_t n, gpum_window_stats_t *out) {
  memset(out, 0, sizeof(*out));
  if (n == 0)
    return 0;
  qsort(v, n, sizeof(*v), cmp_double);
  double sum = 0.0;
  for (size_t i = 0; i < n; i++)
    sum += v[i];
  out->count = n;
  out->min = v[0];
  out->max = v[n - 1];
  out->mean = sum / (double)n;
  out->p50 = gpum__percentile_sorted(v, n, 50.0);
  out->p95 = gpum__percentile_sorted(v, n, 95.0);
  out->p99 = gpum__percentile_sorted(v, n, 99.0);
  return 0;
}

int gpum_stats_compute(const double *values, size_t n, gpum_window_stats_t *out) {
  if (out == NULL || (values == NULL && n > 0))
    return gpum_error(GPUM_EINVAL, "statistics: NULL argument");
  if (n == 0) {
    memset(out, 0, sizeof(*out));
    return 0;
  }
  double *copy = malloc(n * sizeof(*copy));
  if (copy == NULL)
    return gpum_error(GPUM_ENOMEM, "statistics: cannot allocate %zu values", n);
  memcpy(copy, values, n * sizeof(*copy));
  int rc = gpum__stats_sort_in_place(copy, n, out);
  free(copy);
  return rc;
}
