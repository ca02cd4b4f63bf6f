/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The adaptive batch runner's figures read from another thread while it runs
 * (gpum_batch_figures, as a reporter's thread reads them): under ThreadSanitizer, no race; the
 * figures only move forward (done never goes back, the batch size stays within its bounds) and
 * the last read after the run equals gpum_batch_stats.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/batch.h>
#include <gpum/error.h>
#include <gpum/report.h>

#define ITEMS 200000
#define MAX_BATCH 64

typedef struct {
  gpum_batch_runner_t *r;
  atomic_bool stop;
  unsigned reads;
  bool backwards, out_of_bounds;
} reader_t;

static double fig(const gpum_figure_t *f, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(f[i].name, name))
      return f[i].value;
  return -1;
}

static void *reader(void *arg) {
  reader_t *rd = arg;
  double last = 0;
  while (!atomic_load(&rd->stop)) {
    gpum_figure_t f[GPUM_REPORT_FIGURES_MAX];
    size_t n = gpum_batch_figures(rd->r, f, GPUM_REPORT_FIGURES_MAX);
    double done = fig(f, n, "done"), size = fig(f, n, "batch_size");
    if (done < last)
      rd->backwards = true;
    if (size < 1 || size > MAX_BATCH)
      rd->out_of_bounds = true;
    last = done;
    rd->reads++;
  }
  return NULL;
}

static unsigned steps;

/* Every 7th step runs out of memory: the runner shrinks, then grows again. */
static int step(const gpum_batch_t *b, void *user) {
  (void)b;
  (void)user;
  return ++steps % 7 == 0 ? GPUM_EDEVOOM : 0;
}

static void test_figures_while_running(void **state) {
  (void)state;
  gpum_batch_opts_t o = {.items = ITEMS, .batch_size = 4, .max_batch = MAX_BATCH, .step = step};
  reader_t rd = {0};
  assert_int_equal(gpum_batch_create(&o, &rd.r), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, reader, &rd), 0);
  assert_int_equal(gpum_batch_run(rd.r), 0);
  atomic_store(&rd.stop, true);
  pthread_join(t, NULL);
  assert_false(rd.backwards);
  assert_false(rd.out_of_bounds);
  assert_true(rd.reads > 0);

  gpum_batch_stats_t s;
  gpum_batch_stats(rd.r, &s);
  gpum_figure_t f[GPUM_REPORT_FIGURES_MAX];
  size_t n = gpum_batch_figures(rd.r, f, GPUM_REPORT_FIGURES_MAX);
  assert_int_equal(n, 12);
  assert_true(fig(f, n, "done") == (double)s.done);
  assert_true(s.done == ITEMS);
  assert_true(fig(f, n, "items") == ITEMS);
  assert_true(fig(f, n, "batch_size") == (double)s.batch_size);
  assert_true(fig(f, n, "ooms") == (double)s.ooms && s.ooms > 0);
  assert_true(fig(f, n, "oom_retries") == (double)s.retries);
  assert_true(fig(f, n, "largest_batch") == (double)s.largest);
  assert_true(fig(f, n, "items_per_s") == s.items_per_s);
  /* A short buffer gets the first figures only. */
  assert_int_equal(gpum_batch_figures(rd.r, f, 2), 2);
  assert_string_equal(f[0].name, "batch_size");
  gpum_batch_destroy(rd.r);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_figures_while_running)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
