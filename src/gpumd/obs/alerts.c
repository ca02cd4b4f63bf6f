/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's alert engine and the device feeds of its observability state. The engine is created
 * at start from the configuration (alerts.defaults, alerts.rules, alerts.file, alerts.history,
 * alerts.xid_window: the same keys as `gpum monitor` and `gpum alerts`; rebuilt on SIGHUP when
 * they changed) and fed on the loop
 * thread from devices.c: the newest sample of every device each monitor interval, health
 * transitions and Xids. Fired and cleared alerts are counted by level and published as "alert"
 * events; samples, health changes and Xids become "sample", "health" and "xid" events; the
 * reservation transitions from engine.c become "reservation" events and feed the counters and
 * the queue-wait histogram that /metrics exports.
 */
#include <stdlib.h>
#include <string.h>

#include <gpum/log.h>

#include "obs_internal.h"
#include "devices.h"
#include "json_in.h"
#include "obs.h"
#include "sched.h"
#include "os_internal.h"
#include "core/names_internal.h"

const double gpumd_wait_bounds[GPUMD_OBS_WAIT_BUCKETS] = {0.005, 0.01, 0.05, 0.1, 0.5, 1,    5,
                                                          10,    30,   60,   300, 900, 3600, 14400};

double gpumd_obs_sample_value(const gpum_device_sample_t *s, gpum_metric_t m) {
  switch (m) {
  case GPUM_METRIC_MEMORY_TOTAL:
    return (double)s->memory_total;
  case GPUM_METRIC_MEMORY_USED:
    return (double)s->memory_used;
  case GPUM_METRIC_MEMORY_FREE:
    return (double)s->memory_free;
  case GPUM_METRIC_MEMORY_RESERVED:
    return (double)s->memory_reserved;
  case GPUM_METRIC_UTIL_GPU:
    return s->util_gpu;
  case GPUM_METRIC_UTIL_MEMORY:
    return s->util_memory;
  case GPUM_METRIC_TEMPERATURE:
    return s->temperature_c;
  case GPUM_METRIC_POWER:
    return s->power_mw;
  case GPUM_METRIC_CLOCK_SM:
    return s->clock_sm_mhz;
  case GPUM_METRIC_CLOCK_MEM:
    return s->clock_mem_mhz;
  case GPUM_METRIC_ECC_CORRECTED:
    return (double)s->ecc_corrected;
  case GPUM_METRIC_ECC_UNCORRECTED:
    return (double)s->ecc_uncorrected;
  default:
    return 0;
  }
}

static json_t *jtime(uint64_t ns) {
  return ns ? json_integer((json_int_t)ns) : json_null();
}

json_t *gpumd_obs_alert_json(const gpum_alert_t *a) {
  bool is_xid = strcmp(a->metric, "xid") == 0;
  bool is_metric = !is_xid && strcmp(a->metric, "health") != 0;
  json_t *o = json_object();
  json_object_set_new(o, "id", json_integer((json_int_t)a->id));
  json_object_set_new(o, "level", json_string(gpum_alert_level_name(a->level)));
  json_object_set_new(o, "state", json_string(a->state == GPUM_ALERT_FIRED ? "active" : "cleared"));
  json_object_set_new(o, "device", json_integer(a->device));
  json_object_set_new(o, "rule", json_integer(a->rule));
  json_object_set_new(o, "rule_text", json_string(a->rule_text));
  json_object_set_new(o, "metric", json_string(a->metric));
  json_object_set_new(o, "value", json_real(a->value));
  json_object_set_new(o, "threshold", is_metric ? json_real(a->threshold) : json_null());
  json_object_set_new(o, "clear_threshold",
                      is_metric ? json_real(a->clear_threshold) : json_null());
  json_object_set_new(o, "clear_value",
                      is_metric && a->state != GPUM_ALERT_FIRED ? json_real(a->clear_value)
                                                                : json_null());
  json_object_set_new(o, "xid", is_xid ? json_integer((json_int_t)a->xid) : json_null());
  if (is_xid) {
    gpum_xid_info_t xi = gpum_xid_info((unsigned)a->xid);
    json_object_set_new(o, "xid_name", json_string(xi.name));
    json_object_set_new(o, "repeats", json_integer(a->repeats));
  }
  json_object_set_new(o, "since_ns", jtime(a->since_ns));
  json_object_set_new(o, "fired_ns", jtime(a->fired_ns));
  json_object_set_new(o, "cleared_ns", jtime(a->cleared_ns));
  json_object_set_new(o, "message", json_string(a->message));
  return o;
}

/* Engine callback, on the loop thread (the engine is fed only there). */
static void on_alert(const gpum_alert_t *a, void *arg) {
  gpumd_t *d = arg;
  bool fired = a->state == GPUM_ALERT_FIRED;
  gpumd_obs_changed(d->obs);
  if (fired && (unsigned)a->level < 4)
    d->obs->alerts_fired[a->level]++;
  gpum_log(fired ? GPUM_LOG_WARN : GPUM_LOG_INFO, "gpumd", "alert %s: %s",
           fired ? "fired" : "cleared", a->message);
  json_t *o = gpumd_obs_alert_json(a);
  json_object_set_new(o, "event", json_string(fired ? "fired" : "cleared"));
  gpumd_sse_publish(d, "alert", o);
}

/* A configured engine for d (rules, callback, device info), or a negative code. */
static int build_engine(gpumd_t *d, gpum_alert_engine_t **out) {
  gpum_alert_engine_opts_t eo;
  gpum_alert_engine_opts_from_config(&eo, d->cfg);
  gpum_alert_engine_t *e = NULL;
  int rc = gpum_alert_engine_create(&eo, &e);
  if (rc == 0)
    rc = gpum_alert_engine_configure(e, d->cfg);
  if (rc == 0)
    rc = gpum_alert_engine_add_callback(e, on_alert, d);
  if (rc != 0) {
    gpum_alert_engine_destroy(e);
    return rc;
  }
  for (unsigned i = 0; i < d->device_count; i++) /* a silent device's info comes when it answers */
    if (d->devices[i].answered)
      gpum_alert_engine_set_device_info(e, d->devices[i].index, &d->devices[i].info);
  *out = e;
  return 0;
}

int gpumd_obs_start(gpumd_t *d) {
  struct gpumd_obs *o = calloc(1, sizeof *o);
  if (!o)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  d->obs = o;
  gpum_alert_engine_opts_from_config(&o->alert_opts, d->cfg);
  int rc = build_engine(d, &o->alerts);
  if (rc != 0)
    return rc;
  return gpumd_sse_start(d);
}

static bool same_rules(gpum_alert_engine_t *a, gpum_alert_engine_t *b) {
  size_t n = gpum_alert_engine_rule_count(a);
  if (n != gpum_alert_engine_rule_count(b))
    return false;
  for (unsigned i = 0; i < n; i++) {
    char ta[GPUM_ALERT_RULE_LEN], tb[GPUM_ALERT_RULE_LEN];
    if (gpum_alert_engine_rule_text(a, i, ta, sizeof ta) != 0 ||
        gpum_alert_engine_rule_text(b, i, tb, sizeof tb) != 0 || strcmp(ta, tb) != 0)
      return false;
  }
  return true;
}

void gpumd_obs_reload(gpumd_t *d) {
  struct gpumd_obs *o = d->obs;
  if (!o)
    return;
  gpum_alert_engine_t *e = NULL;
  gpum_error_clear();
  if (build_engine(d, &e) != 0) {
    gpum_log(GPUM_LOG_ERROR, "gpumd", "alert rules not reloaded, keeping the old ones: %s",
             gpum_last_error());
    return;
  }
  gpum_alert_engine_opts_t eo;
  gpum_alert_engine_opts_from_config(&eo, d->cfg);
  if (same_rules(e, o->alerts) && eo.history_cap == o->alert_opts.history_cap &&
      eo.xid_window_ms == o->alert_opts.xid_window_ms) {
    gpum_alert_engine_destroy(e);
    return;
  }
  gpum_alert_engine_destroy(o->alerts);
  o->alerts = e;
  o->alert_opts = eo;
  gpumd_obs_changed(o);
  gpum_log(GPUM_LOG_INFO, "gpumd", "alert rules reloaded: %zu rules (active alerts start over)",
           gpum_alert_engine_rule_count(e));
}

void gpumd_obs_stop(gpumd_t *d) {
  if (!d->obs)
    return;
  gpumd_sse_stop(d);
  gpumd_history_free(d->obs);
  gpumd_render_cache_free(&d->obs->metrics_cache);
  gpumd_render_cache_free(&d->obs->status_cache);
  gpum_alert_engine_destroy(d->obs->alerts);
  free(d->obs);
  d->obs = NULL;
}

void gpumd_obs_device_info(gpumd_t *d, const gpumd_device_t *dev) {
  gpum_alert_engine_t *e = gpumd_obs_alerts(d);
  if (e)
    gpum_alert_engine_set_device_info(e, dev->index, &dev->info);
}

gpum_alert_engine_t *gpumd_obs_alerts(gpumd_t *d) {
  return d && d->obs ? d->obs->alerts : NULL;
}

/* The engine wants one non-decreasing clock; samples and events carry CLOCK_REALTIME
 * stamps taken on different threads, so a stamp older than the newest fed is raised to it. */
static uint64_t feed_time(struct gpumd_obs *o, uint64_t ns) {
  if (ns > o->alert_now_ns)
    o->alert_now_ns = ns;
  return o->alert_now_ns;
}

/* The "sample" event: the device's metrics and the scheduler's reserved, unmanaged and
 * overcommitted memory and capacity (st; NULL: not known, left out), as a point of GET
 * /api/v1/gpu/history. */
static json_t *sample_json(const gpumd_device_t *dev, const gpum_device_sample_t *s,
                           const gpumd_sched_device_stats_t *st) {
  json_t *o = json_pack("{s:i, s:s, s:s, s:I}", "gpu", (int)dev->index, "uuid", dev->info.uuid,
                        "model", dev->info.name, "time_ns", (json_int_t)s->timestamp_ns);
  for (int m = 0; o && m < GPUM_METRIC_COUNT; m++)
    if (gpum_sample_valid(s, (gpum_metric_t)m))
      json_object_set_new(o, gpum_metric_name((gpum_metric_t)m),
                          json_integer((json_int_t)gpumd_obs_sample_value(s, (gpum_metric_t)m)));
  if (o && st) {
    json_object_set_new(o, "memory_reserved", json_integer((json_int_t)st->reserved));
    json_object_set_new(o, "memory_unmanaged", json_integer((json_int_t)st->unmanaged));
    json_object_set_new(o, "memory_overcommit", json_integer((json_int_t)st->overcommit));
    json_object_set_new(o, "memory_capacity", json_integer((json_int_t)st->capacity));
  }
  return o;
}

/* The points of device slot i among the samples taken since the previous round (prev: the
 * newest sample of that round), at most one a second: each a point of the history and a
 * "sample" event, published with no stream open too, so that a client that reconnects gets the
 * samples it missed. All the samples, not only the newest: the round's timer and the sampler
 * tick apart, and a sample taken just after one round would otherwise be skipped for the next. */
static void add_points(gpumd_t *d, unsigned i, uint64_t prev, const gpum_device_sample_t *latest,
                       uint64_t every_ns) {
  struct gpumd_obs *o = d->obs;
  const gpumd_device_t *dev = &d->devices[i];
  gpum_device_sample_t batch[8];
  size_t n = 0;
  if (gpum_monitor_history(d->mon, dev->index, prev, batch, 8, &n) != 0 || n == 0 || n > 8) {
    batch[0] = *latest; /* more than 8 (the first round) or none: the newest alone */
    n = 1;
  }
  gpumd_sched_device_stats_t st;
  bool have = d->sched && gpumd_sched_device_stats(d->sched, dev->index, &st) == 0;
  for (size_t k = 0; k < n; k++) {
    const gpum_device_sample_t *s = &batch[k];
    if (s->timestamp_ns < o->last_event_ns[i] + every_ns)
      continue;
    o->last_event_ns[i] = s->timestamp_ns;
    gpumd_history_add(o, i, s, have ? &st : NULL);
    gpumd_sse_publish(d, "sample", sample_json(dev, s, have ? &st : NULL));
  }
}

void gpumd_obs_round(gpumd_t *d) {
  struct gpumd_obs *o = d->obs;
  if (!o)
    return;
  gpumd_obs_changed(o); /* new samples, process lists, scheduler views */
  /* A sample a little early (the sampler's clock jitters) still counts as a second later: else
   * a 1 s monitor would leave a gap of 2 s now and then. Half the monitor interval at most, so
   * that a faster monitor still gives one a second. */
  uint64_t slack_ms = gpum_config_get_duration(d->cfg, "monitor.interval") / 2;
  if (slack_ms > GPUMD_SSE_SAMPLE_MS / 10)
    slack_ms = GPUMD_SSE_SAMPLE_MS / 10;
  uint64_t every_ns = (GPUMD_SSE_SAMPLE_MS - slack_ms) * 1000000u;
  for (unsigned i = 0; i < d->device_count; i++) {
    const gpumd_device_t *dev = &d->devices[i];
    gpum_device_sample_t s;
    uint64_t prev = o->last_sample_ns[i];
    if (gpum_monitor_latest(d->mon, dev->index, &s) != 0 || s.timestamp_ns <= prev)
      continue;
    o->last_sample_ns[i] = s.timestamp_ns;
    gpum_alert_engine_feed_sample(o->alerts, dev->index, &s, feed_time(o, s.timestamp_ns));
    add_points(d, i, prev, &s, every_ns);
  }
  gpum_alert_engine_advance(o->alerts, feed_time(o, gpum__os_real_ns()));
}

static void count_xid(struct gpumd_obs *o, unsigned device, uint64_t xid) {
  for (size_t i = 0; i < o->xid_count; i++)
    if (o->xids[i].device == device && o->xids[i].xid == xid) {
      o->xids[i].count++;
      o->xids[i].seq = ++o->xid_seq;
      return;
    }
  if (o->xid_count == GPUMD_OBS_MAX_XIDS) {
    gpum_log(GPUM_LOG_WARN, "gpumd", "more than %d distinct Xid counters: Xid %llu not counted",
             GPUMD_OBS_MAX_XIDS, (unsigned long long)xid);
    return;
  }
  o->xids[o->xid_count++] =
      (gpumd_xid_count_t){.device = device, .xid = xid, .count = 1, .seq = ++o->xid_seq};
}

void gpumd_obs_monitor_event(gpumd_t *d, const gpum_monitor_event_t *ev) {
  struct gpumd_obs *o = d->obs;
  if (!o)
    return;
  gpumd_obs_changed(o);
  const gpumd_device_t *dev = gpumd_device_find(d, ev->device);
  const char *uuid = dev ? dev->info.uuid : "";
  if (ev->kind == GPUM_MONEV_HEALTH) {
    gpum_alert_engine_feed_health(o->alerts, ev->device, (int)ev->to, ev->reason,
                                  feed_time(o, ev->time_ns));
    gpumd_sse_publish(d, "health",
                      json_pack("{s:i, s:s, s:s, s:s, s:s, s:I}", "gpu", (int)ev->device, "uuid",
                                uuid, "from", gpum_health_state_name(ev->from), "to",
                                gpum_health_state_name(ev->to), "reason", ev->reason, "time_ns",
                                (json_int_t)ev->time_ns));
  } else if (ev->kind == GPUM_MONEV_XID) {
    count_xid(o, ev->device, ev->xid);
    gpum_xid_info_t xi = gpum_xid_info((unsigned)ev->xid);
    gpumd_sse_publish(d, "xid",
                      json_pack("{s:i, s:s, s:I, s:s, s:b, s:I}", "gpu", (int)ev->device, "uuid",
                                uuid, "xid", (json_int_t)ev->xid, "name", xi.name, "critical",
                                xi.critical, "time_ns", (json_int_t)ev->time_ns));
    gpum_alert_engine_feed_xid(o->alerts, ev->device, ev->xid, feed_time(o, ev->time_ns));
  }
}

static const char *transition_name(gpumd_resv_state_t to) {
  static const char *const names[] = {
      [GPUMD_RESV_QUEUED] = "queued",       [GPUMD_RESV_GRANTED] = "granted",
      [GPUMD_RESV_RELEASED] = "released",   [GPUMD_RESV_EXPIRED] = "expired",
      [GPUMD_RESV_CANCELLED] = "cancelled", [GPUMD_RESV_FAILED] = "failed",
      [GPUMD_RESV_SUSPENDED] = "suspended"};
  return GPUM__NAME_OF(names, to, "unknown");
}

typedef struct {
  const char *transition, *from;
  gpumd_obs_write_fn doc;
  const void *doc_arg;
} transition_ev_t;

/* {"transition": ..., "from": ..., "reservation": {...}} */
static void write_transition(gpumd_jw_t *w, const void *arg) {
  const transition_ev_t *t = arg;
  GPUMD_JW_LIT(w, "{" GPUMD_JSON_KEY("transition"));
  gpumd_jw_name(w, t->transition);
  GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY("from"));
  gpumd_jw_name(w, t->from);
  GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY("reservation"));
  t->doc(w, t->doc_arg);
  GPUMD_JW_LIT(w, "}");
}

void gpumd_obs_transition(gpumd_t *d, const gpumd_resv_t *r, gpumd_resv_state_t from,
                          gpumd_resv_state_t to, gpumd_obs_write_fn doc, const void *doc_arg) {
  struct gpumd_obs *o = d->obs;
  if (!o || to < GPUMD_RESV_QUEUED || to > GPUMD_RESV_SUSPENDED)
    return;
  gpumd_obs_changed(o);
  o->transitions[to]++;
  if (to == GPUMD_RESV_GRANTED && from == GPUMD_RESV_QUEUED) {
    double wait = r->granted_ns > r->created_ns ? (double)(r->granted_ns - r->created_ns) / 1e9 : 0;
    for (int i = 0; i < GPUMD_OBS_WAIT_BUCKETS; i++)
      if (wait <= gpumd_wait_bounds[i])
        o->wait_buckets[i]++;
    o->wait_count++;
    o->wait_sum += wait;
  }
  /* Published with no stream open too: the ring keeps it for a client that reconnects. Not
   * built at all when nobody could get it (no stream, no watcher, http.event_replay 0). */
  if (!doc || !gpumd_sse_heard(d))
    return;
  transition_ev_t t = {transition_name(to), from == GPUMD_RESV_NEW ? "new" : transition_name(from),
                       doc, doc_arg};
  gpumd_sse_publish_with(d, "reservation", write_transition, &t);
}

/* Copies the active alerts or the history into a JSON array (newest last, at most limit). */
static json_t *alert_list(gpum_alert_engine_t *e, bool history, size_t limit) {
  json_t *arr = json_array();
  size_t n = 0;
  if (history)
    gpum_alert_engine_history(e, NULL, 0, &n);
  else
    gpum_alert_engine_active(e, NULL, 0, &n);
  if (n == 0 || !arr)
    return arr;
  gpum_alert_t *a = calloc(n, sizeof *a);
  if (!a)
    return arr;
  size_t got = n;
  if (history)
    gpum_alert_engine_history(e, a, n, &got);
  else
    gpum_alert_engine_active(e, a, n, &got);
  if (got > n)
    got = n;
  for (size_t i = got > limit ? got - limit : 0; i < got; i++)
    json_array_append_new(arr, gpumd_obs_alert_json(&a[i]));
  free(a);
  return arr;
}

int gpumd_obs_op_alerts(gpumd_t *d, const gpumd_actor_t *a, const gpumd_alerts_req_t *req,
                        json_t **out) {
  (void)a; /* anyone may read it */
  gpum_alert_engine_t *e = gpumd_obs_alerts(d);
  gpum_alert_counters_t cnt = {0, 0, 0};
  if (e)
    gpum_alert_engine_counters(e, &cnt);
  *out = json_pack("{s:b, s:o, s:o, s:{s:I, s:I}}", "enabled", e != NULL, "active",
                   e ? alert_list(e, false, SIZE_MAX) : json_array(), "history",
                   e ? alert_list(e, true, req->limit) : json_array(), "counters", "fired",
                   (json_int_t)cnt.fired, "cleared", (json_int_t)cnt.cleared);
  return *out ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
}
