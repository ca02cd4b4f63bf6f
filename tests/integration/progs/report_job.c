/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test program for workload reports, run as a job under `gpum run` (GPUM_RESERVATION_ID and
 * GPUM_SOCKET from it): serves 100 requests through a batcher, reports the batcher's figures
 * (source "infer"), an adaptive batch runner's (source "fit") and one custom figure (source
 * "train", batch_size 32) on the reservation
 * with a manual reporter, and checks what gpumd's listing then shows for the reservation: the
 * two sources under this pid with those figures. Checks the reporter's errors (a bad source or
 * figure name, a figure that is not finite, a duplicate source). Then prints "ready" and waits
 * for stdin to close, so that the caller can read /metrics while the job lives; a last report
 * goes at exit. Exits 0, or 1 with the reason.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/gpum.h>
#include <jansson.h>

static int model(void *const *in, void **out, size_t n, unsigned worker, void *user) {
  (void)worker;
  (void)user;
  for (size_t i = 0; i < n; i++)
    out[i] = (void *)((intptr_t)in[i] * 2);
  return 0;
}

static size_t train_fn(void *user, gpum_figure_t *out, size_t cap) {
  (void)user;
  if (cap < 1)
    return 0;
  out[0] = (gpum_figure_t){"batch_size", 32};
  return 1;
}

static int ticks;

static size_t tick_fn(void *user, gpum_figure_t *out, size_t cap) {
  (void)user;
  if (cap < 1)
    return 0;
  out[0] = (gpum_figure_t){"ticks", ++ticks}; /* on the reporter's thread only */
  return 1;
}

static int ok_step(const gpum_batch_t *b, void *user) {
  (void)b;
  (void)user;
  return 0;
}

static int fail(const char *what) {
  fprintf(stderr, "report_job: %s: %s\n", what, gpum_last_error());
  return 1;
}

/* The figure name of source src in this pid's workload entries of reservation id. */
static double figure(json_t *list, const char *id, const char *src, const char *name) {
  size_t i, j;
  json_t *r, *w;
  json_array_foreach(json_object_get(list, "reservations"), i, r) {
    if (strcmp(json_string_value(json_object_get(r, "id")), id))
      continue;
    json_array_foreach(json_object_get(r, "workload"), j, w) {
      if (json_integer_value(json_object_get(w, "pid")) == getpid() &&
          !strcmp(json_string_value(json_object_get(w, "source")), src))
        return json_number_value(json_object_get(json_object_get(w, "figures"), name));
    }
  }
  return NAN;
}

int main(void) {
  const char *id = getenv("GPUM_RESERVATION_ID");
  if (!id)
    return fail("no GPUM_RESERVATION_ID: run me under gpum run");
  gpum_batcher_opts_t o = {.max_batch_size = 8, .max_queue_delay_us = 1000, .fn = model};
  gpum_batcher_t *b = NULL;
  if (gpum_batcher_create(&o, &b) != 0)
    return fail("batcher");
  gpum_batcher_req_t *req[100];
  for (int i = 0; i < 100; i++)
    if (gpum_batcher_submit(b, (void *)(intptr_t)i, NULL, &req[i]) != 0)
      return fail("submit");
  for (int i = 0; i < 100; i++) {
    void *out = NULL;
    if (gpum_batcher_wait(req[i], -1, &out) != 0 || (intptr_t)out != 2 * i)
      return fail("a request's answer");
    gpum_batcher_req_free(req[i]);
  }
  gpum_reporter_opts_t ro = {.period_ms = GPUM_REPORTER_MANUAL};
  gpum_reporter_t *rep = NULL;
  if (gpum_reporter_create(&ro, &rep) != 0)
    return fail("reporter");
  /* An adaptive runner's figures (source "fit"): 100 items from batches of 4, growing. */
  gpum_batch_opts_t bo = {.items = 100, .batch_size = 4, .max_batch = 16, .step = ok_step};
  gpum_batch_runner_t *runner = NULL;
  if (gpum_batch_create(&bo, &runner) != 0 || gpum_batch_run(runner) != 0)
    return fail("adaptive runner");
  gpum_batch_stats_t bs;
  gpum_batch_stats(runner, &bs);
  if (gpum_reporter_add_batcher(rep, "infer", b) != 0 ||
      gpum_reporter_add(rep, "train", train_fn, NULL) != 0 ||
      gpum_reporter_add_batch(rep, "fit", runner) != 0)
    return fail("adding sources");
  if (gpum_reporter_add(rep, "train", train_fn, NULL) != GPUM_EEXIST ||
      gpum_reporter_add(rep, "Bad Name", train_fn, NULL) != GPUM_EINVAL)
    return fail("a duplicate or badly named source was taken");
  if (gpum_reporter_flush(rep) != 0)
    return fail("flush");

  gpum_client_t *c = NULL;
  if (gpum_client_connect(getenv("GPUM_SOCKET"), 5000, &c) != 0)
    return fail("connect");
  gpum_figure_t bad[] = {{"ok", 1}, {"NotOk", 2}};
  if (gpum_client_report(c, id, "x", bad, 2) != GPUM_EINVAL)
    return fail("a figure name with capitals was sent");
  gpum_figure_t nan[] = {{"x", NAN}};
  if (gpum_client_report(c, id, "x", nan, 1) != GPUM_EINVAL)
    return fail("a NaN figure was sent");
  char *text = NULL;
  if (gpum_client_call_json(c, "list", NULL, &text) != 0)
    return fail("list");
  json_t *list = json_loads(text, 0, NULL);
  free(text);
  double completed = figure(list, id, "infer", "completed");
  double batches = figure(list, id, "infer", "batches");
  double bsize = figure(list, id, "train", "batch_size");
  double x = figure(list, id, "x", "ok");
  double fit_done = figure(list, id, "fit", "done");
  double fit_size = figure(list, id, "fit", "batch_size");
  json_decref(list);
  if (completed != 100 || !(batches >= 13 && batches <= 100) || bsize != 32 || !isnan(x) ||
      fit_done != 100 || fit_size != (double)bs.batch_size) {
    fprintf(stderr,
            "report_job: listed completed=%g batches=%g batch_size=%g x.ok=%g fit.done=%g "
            "fit.batch_size=%g (runner: %zu)\n",
            completed, batches, bsize, x, fit_done, fit_size, bs.batch_size);
    return 1;
  }
  /* A reporter with a thread: its reports arrive by themselves. */
  gpum_reporter_opts_t po = {.period_ms = 20};
  gpum_reporter_t *periodic = NULL;
  if (gpum_reporter_create(&po, &periodic) != 0 ||
      gpum_reporter_add(periodic, "periodic", tick_fn, NULL) != 0)
    return fail("periodic reporter");
  double seen = NAN;
  for (int tries = 0; tries < 1000 && !(seen >= 2); tries++) { /* polls gpumd: <= 10 s */
    if (gpum_client_call_json(c, "list", NULL, &text) != 0)
      return fail("list");
    list = json_loads(text, 0, NULL);
    free(text);
    seen = figure(list, id, "periodic", "ticks");
    json_decref(list);
    if (!(seen >= 2))
      usleep(10000);
  }
  if (!(seen >= 2))
    return fail("the periodic reporter's figures never reached gpumd");
  gpum_reporter_destroy(periodic);
  gpum_client_close(c);
  printf("ready\n");
  fflush(stdout);
  char buf[64];
  while (fread(buf, 1, sizeof buf, stdin) > 0) {
  }
  if (gpum_reporter_remove(rep, "train") != 0 || gpum_reporter_remove(rep, "train") != GPUM_ENOENT)
    return fail("remove");
  gpum_reporter_destroy(rep);
  gpum_batch_destroy(runner);
  gpum_batcher_destroy(b);
  printf("done\n");
  return 0;
}
