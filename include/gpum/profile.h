/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Operation profiling and a micro-benchmark helper, for any program that links libgpum.
 *
 * Profiling: named timers aggregated process-wide into count, total, min, max, mean and
 * percentiles (p50, p95, p99). Time a block with
 *
 *   { GPUM_PROFILE_SCOPE("step"); ... }                    (GNU C: __attribute__((cleanup)),
 *                                                             supported by GCC and Clang)
 * or with an explicit pair
 *
 *   gpum_profile_timer_t t = gpum_profile_begin("step"); ...; gpum_profile_end(&t);
 *
 * Names should be string literals or otherwise outlive the process's use of the profiler: the
 * first pointer seen for a name is kept. At most GPUM_PROFILE_MAX_NAMES distinct names are
 * tracked; further names are counted in gpum_profile_dropped() and otherwise ignored.
 * Durations come from CLOCK_MONOTONIC. Count, total, min and max are exact; percentiles come
 * from a log-linear histogram (16 sub-buckets per power of two), so a reported percentile is
 * within 1/32 (about 3%) of a value of the recorded set at that rank, and clamped to
 * [min, max]; below 16 ns it is exact. The mean is total / count.
 *
 * Cost: two clock reads and one short mutex-protected update per timed block (tens of ns).
 * All functions are thread-safe.
 */
#ifndef GPUM_PROFILE_H
#define GPUM_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUM_PROFILE_MAX_NAMES 256
#define GPUM_PROFILE_NAME_LEN 64

typedef struct {
  const char *name;
  uint64_t start_ns;
} gpum_profile_timer_t;

/* Starts a timer (no allocation, nothing recorded yet). */
GPUM_API gpum_profile_timer_t gpum_profile_begin(const char *name);
/* Records the time since begin under the timer's name; returns it in ns. A timer ended twice
 * records once (the second call returns 0). */
GPUM_API uint64_t gpum_profile_end(gpum_profile_timer_t *t);
/* Records a duration measured elsewhere. */
GPUM_API void gpum_profile_record(const char *name, uint64_t ns);

/* Used by GPUM_PROFILE_SCOPE; not to be called directly. */
GPUM_API void gpum_profile_scope_end(gpum_profile_timer_t *t);
#define GPUM__PROFILE_CAT2(a, b) a##b
#define GPUM__PROFILE_CAT(a, b) GPUM__PROFILE_CAT2(a, b)
/* Times the rest of the enclosing block under name. */
#define GPUM_PROFILE_SCOPE(name)                                         \
  gpum_profile_timer_t GPUM__PROFILE_CAT(gpum__profile_scope_, __LINE__) \
      __attribute__((cleanup(gpum_profile_scope_end), unused)) = gpum_profile_begin(name)

typedef struct {
  char name[GPUM_PROFILE_NAME_LEN];
  uint64_t count;
  uint64_t total_ns, min_ns, max_ns;
  double mean_ns;
  uint64_t p50_ns, p95_ns, p99_ns;
} gpum_profile_stat_t;

/* Copies the aggregates (in first-seen order) into out[0..cap) and their number into *count.
 * Returns 0 or GPUM_ENOSPC when cap < *count (the first cap are filled). */
GPUM_API int gpum_profile_stats(gpum_profile_stat_t *out, size_t cap, size_t *count);
/* One name's aggregate. Returns 0 or GPUM_ENOENT. */
GPUM_API int gpum_profile_get(const char *name, gpum_profile_stat_t *out);
/* A report of every name into a malloc'd string the caller frees: an aligned text table
 * (json false) or a JSON array of objects {name, count, total_ns, mean_ns, min_ns, p50_ns,
 * p95_ns, p99_ns, max_ns} (json true). Returns 0 or GPUM_ENOMEM. */
GPUM_API int gpum_profile_report(bool json, char **out);
/* Forgets every name and aggregate. */
GPUM_API void gpum_profile_reset(void);
/* Names ignored because the table was full. */
GPUM_API uint64_t gpum_profile_dropped(void);

/* Benchmark helper: calls fn(arg) warmup_runs times untimed, then timed_runs times, each call
 * timed on its own. */
typedef void (*gpum_bench_fn)(void *arg);

typedef struct {
  unsigned runs; /* timed runs */
  uint64_t median_ns, mean_ns, min_ns, max_ns;
  uint64_t items_per_run;
  double throughput; /* items per second at the median run time (0 when items_per_run is 0) */
} gpum_bench_result_t;

/* Runs the benchmark; with name non-NULL the timed runs are also recorded in the profiler
 * under name. Returns 0, GPUM_EINVAL (fn or out NULL, timed_runs 0) or GPUM_ENOMEM. */
GPUM_API int gpum_bench_run(const char *name, gpum_bench_fn fn, void *arg, unsigned warmup_runs,
                            unsigned timed_runs, uint64_t items_per_run, gpum_bench_result_t *out);
/* "name: median 1.23 us, mean 1.30 us, min 1.10 us, max 2.00 us, 812.3 k items/s (100 runs)"
 * into buf (always NUL-terminated). Returns buf. */
GPUM_API char *gpum_bench_format(const char *name, const gpum_bench_result_t *r, char *buf,
                                 size_t len);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_PROFILE_H */
