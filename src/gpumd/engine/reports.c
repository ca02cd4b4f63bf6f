/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Workload reports: the figures a process inside a job sends about its own work (its pool, its
 * request batcher, its tiered cache; libgpum's reporter, gpum/report.h) with the "report" op.
 * gpumd keeps the latest set per (reservation, pid, source) while the reservation is granted and
 * the process lives, and shows them with the reservation ("workload" in listings and the REST
 * document, the gpum_workload_* families in /metrics, one per unit). Nothing of it goes to the
 * ledger: figures are a view, re-sent by the process every period.
 *
 * Each figure goes out with its unit, read from its name by libgpum's gpum_figure_unit (the one
 * rule, gpum/size.h: "_bytes", "_ms", ...), so that no reader repeats the rule. A report also
 * becomes a "workload" event on the event stream (the dashboard follows a job's figures without
 * polling), at most one a second per (reservation, process, source), and built only when
 * someone could get it (gpumd_sse_heard), as the other events.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/size.h>

#include "engine.h"
#include "gpumd.h"
#include "json_out.h"
#include "net.h"
#include "obs.h"
#include "sched.h"
#include "os_internal.h"

#define REPORTS_MAX 512                 /* over all reservations */
#define WORKLOAD_EVENT_NS 1000000000ull /* at most one "workload" event a second per report */

struct gpumd_report {
  uint64_t rid;
  int32_t pid;
  uint64_t at_ns;
  uint64_t event_ns; /* its last "workload" event (0: none yet) */
  char source[GPUM_PROTO_REPORT_NAME_MAX + 1];
  json_t *figures; /* {"name": number}, checked */
};

static bool pid_alive(int32_t pid) {
  return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

static void drop(gpumd_t *d, size_t i) {
  json_decref(d->reports[i].figures);
  d->reports[i] = d->reports[--d->nreports];
}

/* Drops the reports of reservations no longer granted and of processes that ended. */
static void prune(gpumd_t *d) {
  for (size_t i = 0; i < d->nreports;) {
    const gpumd_resv_t *r = gpumd_sched_find(d->sched, d->reports[i].rid);
    if (!r || r->state != GPUMD_RESV_GRANTED || !pid_alive(d->reports[i].pid))
      drop(d, i);
    else
      i++;
  }
}

static int check_figures(json_t *f) {
  if (!json_is_object(f))
    return gpum_error(GPUM_EINVAL, "\"figures\" must be an object of names and numbers");
  if (json_object_size(f) > GPUM_PROTO_REPORT_FIGURES_MAX)
    return gpum_error(GPUM_EINVAL, "at most %d figures in a report (%zu given)",
                      GPUM_PROTO_REPORT_FIGURES_MAX, json_object_size(f));
  const char *k;
  json_t *v;
  json_object_foreach(f, k, v) {
    if (!gpum__report_name_ok(k, false))
      return gpum_error(GPUM_EINVAL, "figure name '%.64s' must be 1 to %d of a-z, 0-9 and '_'", k,
                        GPUM_PROTO_REPORT_NAME_MAX);
    if (!json_is_number(v))
      return gpum_error(GPUM_EINVAL, "figure '%s' must be a number", k);
  }
  return 0;
}

/* A figure's unit as the documents carry it: "bytes", "seconds", "ratio", "per_second" or
 * "count", and the factor from the figure's value to that unit ("queue_p99_ms": 0.001). */
static const char *unit_of(const char *figure, double *scale) {
  gpum_unit_t u = gpum_figure_unit(figure, scale);
  const char *name = gpum_unit_name(u);
  return name[0] ? name : "count";
}

/* {"NAME": {"unit", "scale", "name"}, ...} for the figures of f, written; "name" is the figure's
 * name without its unit's suffix ("queue_p99" for "queue_p99_us"), as a face shows it beside the
 * value in its unit, and as /metrics labels it. */
static void write_units(gpumd_jw_t *w, json_t *f) {
  const char *k;
  json_t *v;
  bool first = true;
  GPUMD_JW_LIT(w, "{");
  json_object_foreach(f, k, v) {
    double scale = 1;
    const char *unit = unit_of(k, &scale);
    if (!first)
      GPUMD_JW_LIT(w, ",");
    first = false;
    gpumd_jw_string(w, k);
    GPUMD_JW_LIT(w, ":{" GPUMD_JSON_KEY("unit"));
    gpumd_jw_string(w, unit);
    GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY("scale"));
    json_t *sc = json_real(scale);
    gpumd_jw_value(w, sc);
    json_decref(sc);
    /* A figure's name is [a-z0-9_] (gpumd_reports_put checks it): nothing to escape. */
    GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY("name") "\"");
    gpumd_jw_raw(w, k, gpum_figure_stem_len(k));
    GPUMD_JW_LIT(w, "\"}");
  }
  GPUMD_JW_LIT(w, "}");
}

/* The same as a tree, for the reservation documents. */
static json_t *units_json(json_t *f) {
  json_t *o = json_object();
  const char *k;
  json_t *v;
  json_object_foreach(f, k, v) {
    double scale = 1;
    const char *unit = unit_of(k, &scale);
    json_object_set_new(o, k,
                        json_pack("{s:s, s:f, s:s%}", "unit", unit, "scale", scale, "name", k,
                                  gpum_figure_stem_len(k)));
  }
  return o;
}

/* The "workload" event's data: {"reservation", "pid", "source", "figures", "units"}. */
static void write_workload(gpumd_jw_t *w, const void *arg) {
  const struct gpumd_report *e = arg;
  char id[GPUMD_RESV_ID_BUFSZ];
  GPUMD_JW_LIT(w, "{" GPUMD_JSON_KEY("reservation"));
  gpumd_jw_string(w, gpumd_resv_id_format(e->rid, id, sizeof id));
  GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY(GPUM_PROTO_F_PID));
  gpumd_jw_int(w, e->pid);
  GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY(GPUM_PROTO_F_SOURCE));
  gpumd_jw_string(w, e->source);
  GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY(GPUM_PROTO_F_FIGURES));
  gpumd_jw_value(w, e->figures);
  GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY("units"));
  write_units(w, e->figures);
  GPUMD_JW_LIT(w, "}");
}

/* Publishes e as a "workload" event unless one went out for it within the last second. */
static void publish(gpumd_t *d, struct gpumd_report *e) {
  if (!gpumd_sse_heard(d))
    return;
  uint64_t now = gpum__os_mono_ns();
  if (e->event_ns && now - e->event_ns < WORKLOAD_EVENT_NS)
    return;
  e->event_ns = now;
  gpumd_sse_publish_with(d, "workload", write_workload, e);
}

int gpumd_reports_put(gpumd_t *d, uint64_t rid, int32_t pid, const char *source, json_t *figures) {
  if (!gpum__report_name_ok(source, true))
    return gpum_error(GPUM_EINVAL,
                      "\"source\" '%.64s' must be 1 to %d of a-z, 0-9, '_', '.' and '-'", source,
                      GPUM_PROTO_REPORT_NAME_MAX);
  int rc = check_figures(figures);
  if (rc != 0)
    return rc;
  prune(d);
  size_t same = 0, at = d->nreports;
  for (size_t i = 0; i < d->nreports; i++) {
    if (d->reports[i].rid != rid)
      continue;
    same++;
    if (d->reports[i].pid == pid && !strcmp(d->reports[i].source, source))
      at = i;
  }
  if (at == d->nreports) {
    if (same >= GPUM_PROTO_REPORT_SOURCES_MAX)
      return gpum_error(GPUM_EBUSY, "reservation r-%llu has %d reporting sources already",
                        (unsigned long long)rid, GPUM_PROTO_REPORT_SOURCES_MAX);
    if (d->nreports >= REPORTS_MAX)
      return gpum_error(GPUM_EBUSY, "gpumd holds %d workload reports already", REPORTS_MAX);
    if (!d->reports && !(d->reports = calloc(REPORTS_MAX, sizeof *d->reports)))
      return gpum_error(GPUM_ENOMEM, "out of memory");
    struct gpumd_report *e = &d->reports[d->nreports++];
    memset(e, 0, sizeof *e);
    e->rid = rid;
    e->pid = pid;
    snprintf(e->source, sizeof e->source, "%s", source); /* checked: it fits */
  }
  struct gpumd_report *e = &d->reports[at];
  json_t *copy = json_deep_copy(figures);
  if (!copy)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  json_decref(e->figures);
  e->figures = copy;
  e->at_ns = gpum__os_real_ns();
  publish(d, e);
  return 0;
}

json_t *gpumd_reports_json(gpumd_t *d, uint64_t rid) {
  json_t *arr = NULL;
  uint64_t now = gpum__os_real_ns();
  for (size_t i = 0; i < d->nreports; i++) {
    const struct gpumd_report *e = &d->reports[i];
    if (e->rid != rid || !pid_alive(e->pid))
      continue;
    if (!arr && !(arr = json_array()))
      return NULL;
    uint64_t age = now > e->at_ns ? (now - e->at_ns) / 1000000 : 0;
    json_array_append_new(arr, json_pack("{s:i, s:s, s:I, s:O, s:o}", GPUM_PROTO_F_PID, (int)e->pid,
                                         GPUM_PROTO_F_SOURCE, e->source, GPUM_PROTO_F_AGE_MS,
                                         (json_int_t)age, GPUM_PROTO_F_FIGURES, e->figures, "units",
                                         units_json(e->figures)));
  }
  return arr;
}

size_t gpumd_reports_count(gpumd_t *d) {
  prune(d);
  return d->nreports;
}

const struct gpumd_report *gpumd_report_at(gpumd_t *d, size_t i, uint64_t *rid, int32_t *pid,
                                           const char **source, json_t **figures) {
  if (i >= d->nreports)
    return NULL;
  const struct gpumd_report *e = &d->reports[i];
  *rid = e->rid;
  *pid = e->pid;
  *source = e->source;
  *figures = e->figures;
  return e;
}

void gpumd_reports_free(gpumd_t *d) {
  while (d->nreports)
    drop(d, d->nreports - 1);
  free(d->reports);
  d->reports = NULL;
}

void gpumd_reports_subscribe(gpumd_t *d, gpumd_conn_t *c, const gpumd_resv_t *r) {
  for (unsigned i = 0; i < c->nreported; i++)
    if (c->reported[i] == r->id)
      return;
  unsigned n = sizeof c->reported / sizeof c->reported[0];
  for (unsigned i = 0; i < c->nreported; i++) { /* forget ended reservations first */
    const gpumd_resv_t *x = gpumd_sched_find(d->sched, c->reported[i]);
    if (!x || x->state != GPUMD_RESV_GRANTED)
      c->reported[i--] = c->reported[--c->nreported];
  }
  if (c->nreported >= n)
    return;
  c->reported[c->nreported++] = r->id;
  for (unsigned k = 0; k < GPUMD_SCHED_MAX_DEVICES; k++) {
    gpumd_sched_device_stats_t st;
    if (!(r->device_mask >> k & 1u) || gpumd_sched_device_stats(d->sched, k, &st) != 0 ||
        st.pressure == GPUMD_PRESSURE_NONE)
      continue;
    gpumd_send_event(c, GPUM_PROTO_EV_PRESSURE,
                     json_pack("{s:i, s:f, s:s}", GPUM_PROTO_F_DEVICE, (int)k,
                               GPUM_PROTO_F_USED_RATIO, st.used_ratio, GPUM_PROTO_F_LEVEL,
                               gpumd_pressure_name(st.pressure)));
  }
}
