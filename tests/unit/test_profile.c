/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the profiler and the benchmark helper, on an injected clock so durations are
 * known exactly: begin/end and GPUM_PROFILE_SCOPE record the right durations, aggregates (count,
 * total, min, max, mean exact; percentiles within the documented 1/32) equal values computed
 * here from the same data, names are matched by content, the table bound and drop count,
 * reset, text and JSON reports (the JSON parsed back), concurrent recording loses nothing,
 * and the bench helper's median, mean, min, max and throughput on known run times, plus a
 * real workload counted by calls.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <pthread.h>

#include <gpum/error.h>
#include <gpum/profile.h>

#include "monitor/profile_internal.h"

static uint64_t fake_now;

static uint64_t fake_clock(void) {
  return fake_now;
}

static int setup(void **state) {
  (void)state;
  gpum_profile_reset();
  fake_now = 1000000;
  gpum__profile_set_clock(fake_clock);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  gpum__profile_set_clock(NULL);
  gpum_profile_reset();
  return 0;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* The nearest-rank percentile of sorted v[0..n). */
static uint64_t exact_pct(const uint64_t *v, size_t n, double p) {
  size_t rank = (size_t)(p / 100.0 * (double)n);
  if ((double)rank < p / 100.0 * (double)n)
    rank++;
  return v[rank ? rank - 1 : 0];
}

static void assert_close(uint64_t got, uint64_t want) {
  double err = got > want ? (double)(got - want) : (double)(want - got);
  if (err > (double)want / 32.0)
    fail_msg("percentile %llu is not within 1/32 of %llu", (unsigned long long)got,
             (unsigned long long)want);
}

static void test_begin_end(void **state) {
  (void)state;
  gpum_profile_timer_t t = gpum_profile_begin("step");
  fake_now += 1500;
  assert_int_equal(gpum_profile_end(&t), 1500);
  assert_int_equal(gpum_profile_end(&t), 0); /* ended twice: recorded once */
  t = gpum_profile_begin("step");
  fake_now += 500;
  gpum_profile_end(&t);
  gpum_profile_stat_t s;
  assert_int_equal(gpum_profile_get("step", &s), 0);
  assert_string_equal(s.name, "step");
  assert_int_equal(s.count, 2);
  assert_int_equal(s.total_ns, 2000);
  assert_int_equal(s.min_ns, 500);
  assert_int_equal(s.max_ns, 1500);
  assert_true(s.mean_ns == 1000.0);
  assert_int_equal(gpum_profile_get("other", &s), GPUM_ENOENT);
  assert_int_equal(gpum_profile_end(NULL), 0);
}

static void scoped_work(uint64_t ns) {
  GPUM_PROFILE_SCOPE("scoped");
  fake_now += ns;
}

static void test_scope(void **state) {
  (void)state;
  scoped_work(100);
  scoped_work(300);
  {
    GPUM_PROFILE_SCOPE("outer");
    fake_now += 10;
    {
      GPUM_PROFILE_SCOPE("inner");
      fake_now += 5;
    }
  }
  gpum_profile_stat_t s;
  assert_int_equal(gpum_profile_get("scoped", &s), 0);
  assert_int_equal(s.count, 2);
  assert_int_equal(s.total_ns, 400);
  assert_int_equal(gpum_profile_get("outer", &s), 0);
  assert_int_equal(s.total_ns, 15);
  assert_int_equal(gpum_profile_get("inner", &s), 0);
  assert_int_equal(s.total_ns, 5);
}

static void test_aggregates_match_independent(void **state) {
  (void)state;
  enum { N = 1000 };
  uint64_t v[N], total = 0;
  uint64_t x = 88172645463325252ull; /* xorshift: fixed, reproducible data */
  for (size_t i = 0; i < N; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v[i] = 100 + x % 5000000; /* 100 ns .. 5 ms */
    total += v[i];
    gpum_profile_record("data", v[i]);
  }
  qsort(v, N, sizeof v[0], cmp_u64);
  gpum_profile_stat_t s;
  assert_int_equal(gpum_profile_get("data", &s), 0);
  assert_int_equal(s.count, N);
  assert_int_equal(s.total_ns, total);
  assert_int_equal(s.min_ns, v[0]);
  assert_int_equal(s.max_ns, v[N - 1]);
  assert_true(s.mean_ns == (double)total / N);
  assert_close(s.p50_ns, exact_pct(v, N, 50));
  assert_close(s.p95_ns, exact_pct(v, N, 95));
  assert_close(s.p99_ns, exact_pct(v, N, 99));
}

static void test_small_values_exact(void **state) {
  (void)state;
  for (uint64_t i = 1; i <= 10; i++)
    gpum_profile_record("tiny", i);
  gpum_profile_stat_t s;
  assert_int_equal(gpum_profile_get("tiny", &s), 0);
  assert_int_equal(s.p50_ns, 5);
  assert_int_equal(s.p95_ns, 10);
  assert_int_equal(s.p99_ns, 10);
  /* A single value: every percentile is that value (clamped to [min, max]). */
  gpum_profile_record("one", 123457);
  assert_int_equal(gpum_profile_get("one", &s), 0);
  assert_int_equal(s.p50_ns, 123457);
  assert_int_equal(s.p99_ns, 123457);
}

static void test_buckets(void **state) {
  (void)state;
  for (uint64_t v = 0; v < 16; v++)
    assert_int_equal(gpum__profile_bucket_value(gpum__profile_bucket(v)), v);
  unsigned prev = 0;
  for (uint64_t v = 16; v < (1ull << 62); v = v + v / 7 + 1) {
    unsigned b = gpum__profile_bucket(v);
    assert_true(b >= prev); /* monotonic */
    prev = b;
    assert_close(gpum__profile_bucket_value(b), v);
  }
  assert_true(gpum__profile_bucket(UINT64_MAX) < 16 + 60 * 16);
}

static void test_names_by_content(void **state) {
  (void)state;
  char a[8] = "load", b[8] = "load";
  gpum_profile_record(a, 10);
  gpum_profile_record(b, 20);
  size_t n = 0;
  gpum_profile_stat_t s[2];
  assert_int_equal(gpum_profile_stats(s, 2, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(s[0].count, 2);
  gpum_profile_record("save", 1);
  assert_int_equal(gpum_profile_stats(s, 1, &n), GPUM_ENOSPC);
  assert_int_equal(n, 2);
  assert_string_equal(s[0].name, "load"); /* first-seen order */
  gpum_profile_reset();
  assert_int_equal(gpum_profile_stats(s, 2, &n), 0);
  assert_int_equal(n, 0);
}

static void test_table_bound(void **state) {
  (void)state;
  static char names[GPUM_PROFILE_MAX_NAMES + 2][16];
  for (int i = 0; i < GPUM_PROFILE_MAX_NAMES + 2; i++) {
    snprintf(names[i], sizeof names[i], "n%d", i);
    gpum_profile_record(names[i], 1);
  }
  size_t n = 0;
  gpum_profile_stats(NULL, 0, &n);
  assert_int_equal(n, GPUM_PROFILE_MAX_NAMES);
  assert_int_equal(gpum_profile_dropped(), 2);
  gpum_profile_record(names[0], 1); /* known names still count */
  gpum_profile_stat_t s;
  assert_int_equal(gpum_profile_get("n0", &s), 0);
  assert_int_equal(s.count, 2);
}

static void test_reports(void **state) {
  (void)state;
  gpum_profile_record("alloc \"fast\"", 1000);
  gpum_profile_record("alloc \"fast\"", 3000);
  gpum_profile_record("free", 2500000);
  char *text = NULL, *js = NULL;
  assert_int_equal(gpum_profile_report(false, &text), 0);
  assert_non_null(strstr(text, "name"));
  assert_non_null(strstr(text, "p95"));
  assert_non_null(strstr(text, "alloc \"fast\""));
  assert_non_null(strstr(text, "2.00 us")); /* mean of alloc */
  assert_non_null(strstr(text, "2.50 ms"));
  assert_int_equal(gpum_profile_report(true, &js), 0);
  json_error_t err;
  json_t *root = json_loads(js, 0, &err);
  if (root == NULL)
    fail_msg("bad JSON: %s\n%s", err.text, js);
  assert_true(json_is_array(root));
  assert_int_equal(json_array_size(root), 2);
  json_t *o = json_array_get(root, 0);
  assert_string_equal(json_string_value(json_object_get(o, "name")), "alloc \"fast\"");
  assert_int_equal(json_integer_value(json_object_get(o, "count")), 2);
  assert_int_equal(json_integer_value(json_object_get(o, "total_ns")), 4000);
  assert_int_equal(json_integer_value(json_object_get(o, "min_ns")), 1000);
  assert_int_equal(json_integer_value(json_object_get(o, "max_ns")), 3000);
  assert_true(json_real_value(json_object_get(o, "mean_ns")) == 2000.0);
  json_decref(root);
  free(text);
  free(js);
  gpum_profile_reset();
  assert_int_equal(gpum_profile_report(true, &js), 0);
  assert_string_equal(js, "[]\n");
  free(js);
}

typedef struct {
  int iterations;
} thread_arg_t;

static void *recorder(void *p) {
  thread_arg_t *a = p;
  for (int i = 0; i < a->iterations; i++)
    gpum_profile_record("shared", 2);
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  enum { THREADS = 4, ITER = 20000 };
  pthread_t th[THREADS];
  thread_arg_t arg = {ITER};
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_create(&th[i], NULL, recorder, &arg), 0);
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  gpum_profile_stat_t s;
  assert_int_equal(gpum_profile_get("shared", &s), 0);
  assert_int_equal(s.count, THREADS * ITER);
  assert_int_equal(s.total_ns, 2 * THREADS * ITER);
}

/* ---- Benchmarks ------------------------------------------------------------------------- */

typedef struct {
  const uint64_t *durations; /* per call, cycled */
  size_t n, calls;
} fake_work_t;

static void fake_work(void *p) {
  fake_work_t *w = p;
  fake_now += w->durations[w->calls % w->n];
  w->calls++;
}

static void test_bench_known_times(void **state) {
  (void)state;
  /* Two warm-up calls take 9999 ns each and must not count; then 5 timed runs. */
  static const uint64_t d[] = {9999, 9999, 500, 100, 300, 200, 400};
  fake_work_t w = {d, 7, 0};
  gpum_bench_result_t r;
  assert_int_equal(gpum_bench_run("fake", fake_work, &w, 2, 5, 1000, &r), 0);
  assert_int_equal(w.calls, 7);
  assert_int_equal(r.runs, 5);
  assert_int_equal(r.median_ns, 300);
  assert_int_equal(r.mean_ns, 300);
  assert_int_equal(r.min_ns, 100);
  assert_int_equal(r.max_ns, 500);
  assert_int_equal(r.items_per_run, 1000);
  assert_true(r.throughput > 3333333333.0 && r.throughput < 3333333334.0); /* 1000 / 300 ns */
  /* The timed runs were recorded under the name. */
  gpum_profile_stat_t s;
  assert_int_equal(gpum_profile_get("fake", &s), 0);
  assert_int_equal(s.count, 5);
  assert_int_equal(s.total_ns, 1500);
  char buf[160];
  gpum_bench_format("fake", &r, buf, sizeof buf);
  assert_string_equal(buf, "fake: median 300 ns, mean 300 ns, min 100 ns, max 500 ns, 3.3 G "
                           "items/s (5 runs)");
  /* An even number of runs: the median is the mean of the middle two. */
  static const uint64_t e[] = {100, 400, 200, 301};
  fake_work_t w2 = {e, 4, 0};
  assert_int_equal(gpum_bench_run(NULL, fake_work, &w2, 0, 4, 0, &r), 0);
  assert_int_equal(r.median_ns, 250);
  assert_true(r.throughput == 0.0);
  gpum_bench_format(NULL, &r, buf, sizeof buf);
  assert_string_equal(buf, "bench: median 250 ns, mean 250 ns, min 100 ns, max 400 ns (4 runs)");
}

static volatile uint64_t sink;

static void real_work(void *p) {
  size_t *calls = p;
  uint64_t acc = 0;
  for (int i = 0; i < 10000; i++)
    acc += (uint64_t)i * (uint64_t)i;
  sink = acc;
  (*calls)++;
}

static void test_bench_real_workload(void **state) {
  (void)state;
  gpum__profile_set_clock(NULL);
  size_t calls = 0;
  gpum_bench_result_t r;
  assert_int_equal(gpum_bench_run(NULL, real_work, &calls, 3, 21, 10000, &r), 0);
  assert_int_equal(calls, 24);
  assert_int_equal(r.runs, 21);
  assert_true(r.min_ns > 0);
  assert_true(r.min_ns <= r.median_ns && r.median_ns <= r.max_ns);
  assert_true(r.min_ns <= r.mean_ns && r.mean_ns <= r.max_ns);
  assert_true(r.throughput > 0);
  assert_int_equal(gpum_bench_run(NULL, real_work, &calls, 0, 0, 1, &r), GPUM_EINVAL);
  assert_int_equal(gpum_bench_run(NULL, NULL, &calls, 0, 1, 1, &r), GPUM_EINVAL);
  assert_int_equal(gpum_bench_run(NULL, real_work, &calls, 0, 1, 1, NULL), GPUM_EINVAL);
  assert_int_equal(calls, 24);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_begin_end),
      T(test_scope),
      T(test_aggregates_match_independent),
      T(test_small_values_exact),
      T(test_buckets),
      T(test_names_by_content),
      T(test_table_bound),
      T(test_reports),
      T(test_threads),
      T(test_bench_known_times),
      T(test_bench_real_workload),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
