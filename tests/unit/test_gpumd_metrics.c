/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for gpumd's Prometheus rendering (src/gpumd/rest/metrics.c) and the counters behind it
 * (src/gpumd/obs/alerts.c): a daemon state built by hand (two devices whose uuid and model need
 * escaping, a scheduler with a granted and a queued reservation, no monitor) renders a text
 * where every family has one HELP and one TYPE line before its samples, no series repeats,
 * label values are escaped, the reservation's reserved bytes, the Xid counter, the alert
 * counter and the queue-wait histogram have their values, and device sample families are
 * absent (no sample: nothing rather than a sentinel); the cached rendering is shared by
 * reference, refreshed after a change and outlives the daemon state; a bad alert rule fails
 * the start. The live output under promtool is tested in
 * tests/integration/test_metrics_promtool.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>

#include <gpum/error.h>
#include <gpum/options.h>

#include "devices.h"
#include "engine.h"
#include "gpumd.h"
#include "net.h"
#include "obs.h"
#include "ops.h"
#include "proto.h"
#include "rest.h"

#define GIB (1024ull * 1024 * 1024)

typedef struct {
  gpumd_t d;
  char *text;
} fixture_t;

static void on_transition(void *user, const gpumd_cause_t *cause, const gpumd_resv_t *r,
                          gpumd_resv_state_t from, gpumd_resv_state_t to, uint64_t time_ns,
                          const char *reason) {
  (void)cause, (void)time_ns, (void)reason;
  gpumd_obs_transition(user, r, from, to, NULL, NULL);
}

static void add_device(gpumd_t *d, unsigned index, const char *uuid, const char *name) {
  gpumd_device_t *dev = &d->devices[d->device_count++];
  dev->index = index;
  snprintf(dev->info.uuid, sizeof dev->info.uuid, "%s", uuid);
  snprintf(dev->info.name, sizeof dev->info.name, "%s", name);
  dev->info.memory_total = 80 * GIB;
  dev->info.power_limit_mw = 400000;
  dev->info.valid =
      GPUM_INFO_UUID | GPUM_INFO_NAME | GPUM_INFO_MEMORY_TOTAL | GPUM_INFO_POWER_LIMIT;
  gpumd_sched_device_t v = {.index = index, .memory_total = 80 * GIB};
  snprintf(v.uuid, sizeof v.uuid, "%s", uuid);
  snprintf(v.name, sizeof v.name, "%s", name);
  assert_int_equal(gpumd_sched_update_device(d->sched, NULL, &v, 1000), 0);
}

static void submit(gpumd_t *d, uint64_t bytes, const char *label, uint64_t now_ns) {
  gpumd_sched_request_t req;
  gpumd_sched_request_init(&req);
  req.bytes_per_gpu = bytes;
  req.label = label;
  req.uid = 1000;
  req.pid = 4242;
  assert_int_equal(gpumd_sched_submit(d->sched, NULL, &req, now_ns, NULL), 0);
}

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  assert_non_null(f);
  gpumd_t *d = &f->d;
  assert_int_equal(gpum_config_new(&d->cfg), 0);
  d->base = event_base_new();
  assert_non_null(d->base);
  gpumd_sched_callbacks_t cb = {.on_transition = on_transition, .user = d};
  assert_int_equal(gpumd_sched_create(NULL, &cb, &d->sched), 0);
  add_device(d, 0, "GPU-a\"b\\c", "Model\nX");
  add_device(d, 1, "GPU-plain", "NVIDIA A100-SXM4-80GB");
  assert_int_equal(gpumd_obs_start(d), 0);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  gpumd_obs_stop(&f->d);
  gpumd_sched_destroy(f->d.sched);
  event_base_free(f->d.base);
  gpum_config_free(f->d.cfg);
  free(f->text);
  free(f);
  return 0;
}

static const char *render(fixture_t *f) {
  struct evbuffer *out = evbuffer_new();
  assert_non_null(out);
  assert_int_equal(gpumd_metrics_render(&f->d, out), 0);
  size_t n = evbuffer_get_length(out);
  free(f->text);
  f->text = malloc(n + 1);
  assert_non_null(f->text);
  evbuffer_remove(out, f->text, n);
  f->text[n] = '\0';
  evbuffer_free(out);
  return f->text;
}

static bool has_line(const char *text, const char *line) {
  size_t n = strlen(line);
  for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
    if ((p == text || p[-1] == '\n') && p[n] == '\n')
      return true;
  return false;
}

/* The family a sample name belongs to: histogram suffixes map to their base. */
static void family_of(const char *name, size_t len, char *out, size_t cap) {
  static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
  snprintf(out, cap, "%.*s", (int)len, name);
  for (size_t i = 0; i < 3; i++) {
    size_t s = strlen(suffixes[i]);
    if (len > s && strcmp(out + len - s, suffixes[i]) == 0 &&
        strstr(name, "gpum_queue_wait_seconds") == name)
      out[len - s] = '\0';
  }
}

/* Every family: HELP then TYPE once, its samples right after; no series twice. */
static void check_structure(const char *text) {
  char seen_fam[128][96];
  size_t nfam = 0;
  char current[96] = "";
  char *copy = strdup(text);
  assert_non_null(copy);
  char *save = NULL;
  json_t *series = json_object();
  for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (strncmp(line, "# HELP ", 7) == 0)
      continue;
    if (strncmp(line, "# TYPE ", 7) == 0) {
      char name[96];
      assert_int_equal(sscanf(line + 7, "%95s", name), 1);
      for (size_t i = 0; i < nfam; i++)
        if (strcmp(seen_fam[i], name) == 0)
          fail_msg("family %s declared twice", name);
      assert_true(nfam < 128);
      snprintf(seen_fam[nfam++], sizeof seen_fam[0], "%s", name);
      snprintf(current, sizeof current, "%s", name);
      continue;
    }
    assert_true(line[0] != '#');
    size_t len = strcspn(line, "{ ");
    char fam[96];
    family_of(line, len, fam, sizeof fam);
    if (strcmp(fam, current) != 0)
      fail_msg("sample outside its family block: %s (current family %s)", line, current);
    char *sp = strrchr(line, ' ');
    assert_non_null(sp);
    char key[1024];
    snprintf(key, sizeof key, "%.*s", (int)(sp - line), line);
    if (json_object_get(series, key))
      fail_msg("duplicate series %s", key);
    json_object_set_new(series, key, json_true());
    /* The value parses as a number. */
    char *end = NULL;
    strtod(sp + 1, &end);
    assert_true(end && *end == '\0');
  }
  json_decref(series);
  free(copy);
}

static void test_structure_and_escaping(void **state) {
  fixture_t *f = *state;
  submit(&f->d, 10 * GIB, "lab\"el", 2000);
  const char *t = render(f);
  check_structure(t);
  assert_true(has_line(t, "gpumd_up 1"));
  assert_true(has_line(t, "gpum_reservation_reserved_bytes{reservation=\"r-1\",label=\"lab\\\"el\","
                          "slurm_job_id=\"\",slurm_step_id=\"\",gpu=\"0\",uuid=\"GPU-a\\\"b\\\\c\","
                          "model=\"Model\\nX\",vendor=\"unknown\"} 10737418240"));
  assert_true(has_line(t, "gpum_reservations{state=\"granted\"} 1"));
  assert_true(has_line(t, "gpum_queue_length 0"));
  assert_true(has_line(t, "gpum_device_power_limit_watts{gpu=\"1\",uuid=\"GPU-plain\","
                          "model=\"NVIDIA A100-SXM4-80GB\",vendor=\"nvidia\"} 400"));
}

/* A Slurm step's reservation carries its job and step ids as labels. */
static void test_slurm_ids(void **state) {
  fixture_t *f = *state;
  gpumd_sched_request_t req;
  gpumd_sched_request_init(&req);
  req.bytes_per_gpu = 2 * GIB;
  req.label = "slurm job 12345 step 0";
  req.slurm_job = "12345_7";
  req.slurm_step = "batch";
  assert_int_equal(gpumd_sched_submit(f->d.sched, NULL, &req, 1000, NULL), 0);
  const char *t = render(f);
  check_structure(t);
  assert_true(has_line(
      t, "gpum_reservation_reserved_bytes{reservation=\"r-1\",label=\"slurm job "
         "12345 step 0\",slurm_job_id=\"12345_7\",slurm_step_id=\"batch\","
         "gpu=\"0\",uuid=\"GPU-a\\\"b\\\\c\",model=\"Model\\nX\",vendor=\"unknown\"} 2147483648"));
}

/* A label value that is not UTF-8 (a damaged ledger row that got through) is written with '?'
 * for each byte that is not part of a character, never raw: Prometheus rejects the whole
 * scrape for one invalid byte. */
static void test_label_not_utf8(void **state) {
  fixture_t *f = *state;
  submit(&f->d, 10 * GIB, "bad \xff\xc3 \xc3\xa9t\xe9", 2000);
  const char *t = render(f);
  check_structure(t);
  assert_true(gpumd_utf8_valid(t, strlen(t)));
  assert_true(has_line(t,
                       "gpum_reservation_reserved_bytes{reservation=\"r-1\",label=\"bad ?? "
                       "\xc3\xa9t?\",slurm_job_id=\"\",slurm_step_id=\"\",gpu=\"0\",uuid="
                       "\"GPU-a\\\"b\\\\c\",model=\"Model\\nX\",vendor=\"unknown\"} 10737418240"));
}

static void test_no_sample_no_series(void **state) {
  fixture_t *f = *state;
  const char *t = render(f);
  /* No monitor, so no sample: the sample families are left out entirely. */
  static const char *const absent[] = {
      "gpum_device_memory_used_bytes", "gpum_device_temperature_celsius",
      "gpum_device_power_watts",       "gpum_device_utilization_ratio",
      "gpum_device_ecc_errors_total",  "gpum_device_memory_utilization_ratio",
      "gpum_device_health_state{",
  };
  for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
    if (strstr(t, absent[i]))
      fail_msg("%s present without a sample", absent[i]);
}

static void test_counters(void **state) {
  fixture_t *f = *state;
  gpumd_t *d = &f->d;
  /* Fills device 0 (80 GiB x 0.95 - 256 MiB), then queues one, then frees it: queued 5 s. */
  submit(d, 70 * GIB, "big", 1000000000ull);
  submit(d, 70 * GIB, "big2", 1000000000ull);
  submit(d, 70 * GIB, "waits", 1000000000ull);
  const char *t = render(f);
  assert_true(has_line(t, "gpum_queue_length 1"));
  assert_true(has_line(t, "gpum_reservations{state=\"queued\"} 1"));
  assert_int_equal(gpumd_sched_release(d->sched, NULL, 1, 6000000000ull, NULL), 0);
  gpum_monitor_event_t ev = {.kind = GPUM_MONEV_XID, .device = 1, .xid = 79, .time_ns = 7000};
  gpumd_obs_monitor_event(d, &ev);
  ev.xid = 13;
  gpumd_obs_monitor_event(d, &ev);
  gpumd_obs_monitor_event(d, &ev);
  t = render(f);
  check_structure(t);
  assert_true(has_line(t, "gpum_queue_length 0"));
  assert_true(has_line(t, "gpum_queue_wait_seconds_count 3"));
  assert_true(has_line(t, "gpum_queue_wait_seconds_bucket{le=\"1\"} 2"));
  assert_true(has_line(t, "gpum_queue_wait_seconds_bucket{le=\"5\"} 3"));
  assert_true(has_line(t, "gpum_queue_wait_seconds_bucket{le=\"+Inf\"} 3"));
  assert_true(has_line(t, "gpum_queue_wait_seconds_sum 5"));
  assert_true(has_line(t, "gpum_reservation_transitions_total{state=\"released\"} 1"));
  const char *dev1 =
      "gpu=\"1\",uuid=\"GPU-plain\",model=\"NVIDIA A100-SXM4-80GB\",vendor=\"nvidia\"";
  char line[512];
  snprintf(line, sizeof line, "gpum_xid_errors_total{%s,xid=\"79\"} 1", dev1);
  assert_true(has_line(t, line));
  snprintf(line, sizeof line, "gpum_xid_errors_total{%s,xid=\"13\"} 2", dev1);
  assert_true(has_line(t, line));
  /* Default rules: "xid any auto": 79 is critical, 13 an ERROR (its repeat refreshes the
   * active alert instead of firing again). */
  assert_true(has_line(t, "gpum_alerts_total{level=\"CRITICAL\"} 1"));
  assert_true(has_line(t, "gpum_alerts_total{level=\"ERROR\"} 1"));
  assert_true(has_line(t, "gpum_alerts_active{level=\"ERROR\"} 1"));
}

/* The rendering is cached and shared by reference: a response still holding the old text
 * keeps it valid after a change re-renders, and after the daemon state is gone (ASan checks). */
static void test_cache_shared_and_refreshed(void **state) {
  fixture_t *f = *state;
  struct evbuffer *a = evbuffer_new(), *b = evbuffer_new(), *c = evbuffer_new();
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(c);
  assert_int_equal(gpumd_metrics_render(&f->d, a), 0);
  assert_int_equal(gpumd_metrics_render(&f->d, b), 0);
  size_t n = evbuffer_get_length(a);
  assert_int_equal(evbuffer_get_length(b), n);
  assert_memory_equal(evbuffer_pullup(a, -1), evbuffer_pullup(b, -1), n);
  submit(&f->d, 1 * GIB, "new", 3000); /* a transition: the next render is fresh */
  assert_int_equal(gpumd_metrics_render(&f->d, c), 0);
  char *text = strndup((const char *)evbuffer_pullup(c, -1), evbuffer_get_length(c));
  assert_non_null(text);
  assert_true(has_line(text, "gpum_reservations{state=\"granted\"} 1"));
  free(text);
  text = strndup((const char *)evbuffer_pullup(a, -1), evbuffer_get_length(a));
  assert_true(has_line(text, "gpum_reservations{state=\"granted\"} 0"));
  free(text);
  evbuffer_free(b);
  gpumd_obs_stop(&f->d); /* a and c still refer to renderings */
  evbuffer_free(a);
  evbuffer_free(c);
}

static void test_publish_without_streams(void **state) {
  fixture_t *f = *state;
  /* No stream: the data is freed (ASan checks), nothing is pending. */
  gpumd_sse_publish(&f->d, "alert", json_pack("{s:i}", "x", 1));
  gpumd_sse_flush(&f->d);
  gpumd_sse_publish(NULL, "alert", json_pack("{s:i}", "x", 1));
  assert_non_null(gpumd_obs_alerts(&f->d));
  assert_null(gpumd_obs_alerts(NULL));
}

static void test_bad_rule_fails_start(void **state) {
  (void)state;
  gpumd_t d;
  memset(&d, 0, sizeof d);
  assert_int_equal(gpum_config_new(&d.cfg), 0);
  assert_int_equal(
      gpum_config_set(d.cfg, "alerts.rules", "temperature > 80 LOUD", GPUM_OPT_SRC_API), 0);
  d.base = event_base_new();
  assert_int_equal(gpumd_obs_start(&d), GPUM_EPARSE);
  assert_non_null(strstr(gpum_last_error(), "LOUD"));
  gpumd_obs_stop(&d);
  assert_null(d.obs);
  event_base_free(d.base);
  gpum_config_free(d.cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_structure_and_escaping, setup, teardown),
      cmocka_unit_test_setup_teardown(test_slurm_ids, setup, teardown),
      cmocka_unit_test_setup_teardown(test_label_not_utf8, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_sample_no_series, setup, teardown),
      cmocka_unit_test_setup_teardown(test_counters, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cache_shared_and_refreshed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_publish_without_streams, setup, teardown),
      cmocka_unit_test(test_bad_rule_fails_start),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
