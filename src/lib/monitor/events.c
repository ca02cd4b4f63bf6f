/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Monitor events: the ring of the last GPUM_MONITOR_EVENT_KEEP events (health transitions,
 * XIDs, ECC events, re-probes, static info read), the cursor-based wait for pollers, and
 * delivery to the subscribers and the alert engine. Delivery runs in event order under one
 * lock, on the thread that produced the events (the sampler, or an operator calling
 * set_disabled); a thread already delivering does not re-enter (its loop picks up what it
 * produced).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <gpum/alert.h>
#include <gpum/error.h>
#include <gpum/monitor.h>
#include <gpum/xid.h>

#include "monitor/monitor_internal.h"
#include "core/names_internal.h"

static _Thread_local const gpum_monitor_t *tl_delivering;

const char *gpum_monitor_event_kind_name(gpum_monitor_event_kind_t kind) {
  static const char *const names[] = {[GPUM_MONEV_HEALTH] = "health",
                                      [GPUM_MONEV_XID] = "xid",
                                      [GPUM_MONEV_ECC] = "ecc",
                                      [GPUM_MONEV_PROBE] = "probe",
                                      [GPUM_MONEV_INFO] = "info"};
  return GPUM__NAME_OF(names, kind, "unknown");
}

bool gpum__mon_xid_critical(uint64_t xid, char *buf, size_t cap) {
  gpum_xid_info_t info = gpum_xid_info(xid > 0xffffffffu ? 0 : (unsigned)xid);
  if (buf != NULL && cap > 0)
    snprintf(buf, cap, "XID %llu: %s", (unsigned long long)xid, info.name);
  return info.critical;
}

static uint64_t oldest_seq(const gpum_monitor_t *mon) {
  return mon->last_seq > GPUM_MONITOR_EVENT_KEEP ? mon->last_seq - GPUM_MONITOR_EVENT_KEEP + 1 : 1;
}

void gpum__mon_emit(gpum_monitor_t *mon, gpum_monitor_event_t *ev) {
  ev->seq = ++mon->last_seq;
  if (ev->time_ns == 0)
    ev->time_ns = gpum__mon_now(CLOCK_REALTIME);
  mon->events[(ev->seq - 1) % GPUM_MONITOR_EVENT_KEEP] = *ev;
  pthread_cond_broadcast(&mon->ev_cond);
}

void gpum__mon_emit_hsm(gpum_monitor_t *mon, unsigned device, const gpum__hsm_out_t *out,
                        uint64_t now_real) {
  gpum_monitor_event_t ev;
  if (out->probe) {
    memset(&ev, 0, sizeof ev);
    ev.kind = GPUM_MONEV_PROBE;
    ev.device = device;
    ev.time_ns = now_real;
    ev.rc = out->probe_rc;
    snprintf(ev.reason, sizeof ev.reason, "%s", out->reason);
    gpum__mon_emit(mon, &ev);
  }
  if (out->transition) {
    gpum__mdev_t *md = gpum__mon_dev(mon, device);
    memset(&ev, 0, sizeof ev);
    ev.kind = GPUM_MONEV_HEALTH;
    ev.device = device;
    ev.time_ns = now_real;
    ev.from = out->from;
    ev.to = out->to;
    snprintf(ev.reason, sizeof ev.reason, "%s", md != NULL ? md->hsm.reason : out->reason);
    gpum__mon_emit(mon, &ev);
  }
}

/* Copies the next undelivered event. */
static bool next_undelivered(gpum_monitor_t *mon, gpum_monitor_event_t *ev) {
  bool have = false;
  pthread_mutex_lock(&mon->lock);
  if (mon->delivered_seq < mon->last_seq) {
    uint64_t seq = mon->delivered_seq + 1;
    if (seq < oldest_seq(mon))
      seq = oldest_seq(mon);
    *ev = mon->events[(seq - 1) % GPUM_MONITOR_EVENT_KEEP];
    mon->delivered_seq = seq;
    have = true;
  }
  pthread_mutex_unlock(&mon->lock);
  return have;
}

void gpum__mon_deliver(gpum_monitor_t *mon) {
  if (tl_delivering == mon)
    return;
  pthread_mutex_lock(&mon->cb_lock);
  tl_delivering = mon;
  gpum_monitor_event_t ev;
  while (next_undelivered(mon, &ev)) {
    for (unsigned i = 0; i < mon->nsubs; i++)
      mon->subs[i].fn(&ev, mon->subs[i].user);
    if (mon->alerts == NULL)
      continue;
    if (ev.kind == GPUM_MONEV_HEALTH)
      gpum_alert_engine_feed_health(mon->alerts, ev.device, (int)ev.to, ev.reason, ev.time_ns);
    else if (ev.kind == GPUM_MONEV_XID)
      gpum_alert_engine_feed_xid(mon->alerts, ev.device, ev.xid, ev.time_ns);
  }
  tl_delivering = NULL;
  pthread_mutex_unlock(&mon->cb_lock);
}

int gpum_monitor_subscribe(gpum_monitor_t *mon, gpum_monitor_event_fn fn, void *user,
                           unsigned *id) {
  if (mon == NULL || fn == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_monitor_subscribe: NULL argument");
  if (tl_delivering == mon)
    return gpum_error(GPUM_ESTATE, "gpum_monitor_subscribe called from a monitor callback");
  int rc = 0;
  pthread_mutex_lock(&mon->cb_lock);
  if (mon->nsubs == GPUM__MON_MAX_SUBS) {
    rc = gpum_error(GPUM_ENOMEM, "more than %d monitor subscribers", GPUM__MON_MAX_SUBS);
  } else {
    gpum__sub_t *s = &mon->subs[mon->nsubs++];
    s->id = ++mon->next_sub_id;
    s->fn = fn;
    s->user = user;
    if (id != NULL)
      *id = s->id;
  }
  pthread_mutex_unlock(&mon->cb_lock);
  return rc;
}

int gpum_monitor_unsubscribe(gpum_monitor_t *mon, unsigned id) {
  if (mon == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_monitor_unsubscribe: monitor is NULL");
  if (tl_delivering == mon)
    return gpum_error(GPUM_ESTATE, "gpum_monitor_unsubscribe called from a monitor callback");
  int rc = gpum_error(GPUM_ENOENT, "no monitor subscriber %u", id);
  pthread_mutex_lock(&mon->cb_lock);
  for (unsigned i = 0; i < mon->nsubs; i++) {
    if (mon->subs[i].id == id) {
      memmove(&mon->subs[i], &mon->subs[i + 1], (mon->nsubs - i - 1) * sizeof(mon->subs[0]));
      mon->nsubs--;
      rc = 0;
      gpum_error_clear();
      break;
    }
  }
  pthread_mutex_unlock(&mon->cb_lock);
  return rc;
}

int gpum_monitor_event_wait(gpum_monitor_t *mon, uint64_t *cursor, gpum_monitor_event_t *ev,
                            unsigned timeout_ms) {
  if (mon == NULL || cursor == NULL || ev == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_monitor_event_wait: NULL argument");
  uint64_t deadline = gpum__mon_now(CLOCK_MONOTONIC) + (uint64_t)timeout_ms * 1000000ull;
  struct timespec ts = {(time_t)(deadline / 1000000000ull), (long)(deadline % 1000000000ull)};
  int rc = 0;
  pthread_mutex_lock(&mon->lock);
  while (mon->last_seq <= *cursor) {
    if (pthread_cond_timedwait(&mon->ev_cond, &mon->lock, &ts) != 0 && mon->last_seq <= *cursor) {
      rc = GPUM_ETIMEDOUT;
      break;
    }
  }
  if (rc == 0) {
    uint64_t seq = *cursor + 1;
    if (seq < oldest_seq(mon))
      seq = oldest_seq(mon);
    *ev = mon->events[(seq - 1) % GPUM_MONITOR_EVENT_KEEP];
    *cursor = seq;
  }
  pthread_mutex_unlock(&mon->lock);
  if (rc != 0)
    return gpum_error(rc, "no monitor event within %u ms", timeout_ms);
  return 0;
}
