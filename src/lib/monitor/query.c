/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Read-side queries of the monitor, callable from any thread: the latest sample, history
 * since a time, sample counts, window statistics over a time range, a device's health, and
 * the operator's DISABLED switch. Each takes the monitor lock briefly and makes no driver
 * call.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/error.h>
#include <gpum/monitor.h>

#include "monitor/monitor_internal.h"

static int lookup(gpum_monitor_t *mon, unsigned device, const void *out, const char *fn,
                  gpum__mdev_t **md) {
  if (mon == NULL || out == NULL)
    return gpum_error(GPUM_EINVAL, "%s: NULL argument", fn);
  *md = gpum__mon_dev(mon, device);
  if (*md == NULL)
    return gpum_error(GPUM_ENODEV, "the monitor does not watch device %u", device);
  return 0;
}

int gpum_monitor_latest(gpum_monitor_t *mon, unsigned device, gpum_device_sample_t *out) {
  gpum__mdev_t *md;
  int rc = lookup(mon, device, out, "gpum_monitor_latest", &md);
  if (rc != 0)
    return rc;
  pthread_mutex_lock(&mon->lock);
  if (md->ring.len == 0)
    rc = gpum_error(GPUM_ENOENT, "no sample of device %u yet", device);
  else
    gpum__hrec_unpack(gpum__ring_at(&md->ring, md->ring.len - 1), out);
  pthread_mutex_unlock(&mon->lock);
  return rc;
}

int gpum_monitor_history(gpum_monitor_t *mon, unsigned device, uint64_t since_ns,
                         gpum_device_sample_t *out, size_t cap, size_t *count) {
  gpum__mdev_t *md;
  int rc = lookup(mon, device, count, "gpum_monitor_history", &md);
  if (rc != 0)
    return rc;
  if (out == NULL && cap > 0)
    return gpum_error(GPUM_EINVAL, "gpum_monitor_history: out is NULL with cap %zu", cap);
  pthread_mutex_lock(&mon->lock);
  size_t first = gpum__ring_after(&md->ring, since_ns);
  size_t n = md->ring.len - first;
  size_t k = n < cap ? n : cap;
  for (size_t i = 0; i < k; i++)
    gpum__hrec_unpack(gpum__ring_at(&md->ring, first + i), &out[i]);
  pthread_mutex_unlock(&mon->lock);
  *count = n;
  if (n > cap)
    return gpum_error(GPUM_ENOSPC, "%zu samples of device %u, room for %zu", n, device, cap);
  return 0;
}

int gpum_monitor_sample_count(gpum_monitor_t *mon, unsigned device, uint64_t *count) {
  gpum__mdev_t *md;
  int rc = lookup(mon, device, count, "gpum_monitor_sample_count", &md);
  if (rc != 0)
    return rc;
  pthread_mutex_lock(&mon->lock);
  *count = md->ring.total;
  pthread_mutex_unlock(&mon->lock);
  return 0;
}

size_t gpum_monitor_memory_usage(const gpum_monitor_t *mon) {
  if (mon == NULL)
    return 0;
  size_t bytes = sizeof(*mon) + GPUM_MONITOR_EVENT_KEEP * sizeof(gpum_monitor_event_t) +
                 mon->ndev * (sizeof(gpum__mdev_t) + 2 * sizeof(gpum__wres_t));
  for (unsigned i = 0; i < mon->ndev; i++)
    bytes += mon->devs[i].ring.cap * sizeof(gpum__hrec_t);
  return bytes;
}

static double metric_of(const gpum__hrec_t *r, gpum_metric_t m) {
  gpum_device_sample_t s;
  double v = 0.0;
  gpum__hrec_unpack(r, &s);
  gpum_sample_get(&s, m, &v);
  return v;
}

int gpum_monitor_range_stats(gpum_monitor_t *mon, unsigned device, gpum_metric_t metric,
                             uint64_t from_ns, uint64_t to_ns, gpum_window_stats_t *out) {
  gpum__mdev_t *md;
  int rc = lookup(mon, device, out, "gpum_monitor_range_stats", &md);
  if (rc != 0)
    return rc;
  if ((unsigned)metric >= GPUM_METRIC_COUNT)
    return gpum_error(GPUM_EINVAL, "no metric number %d", (int)metric);
  if (from_ns > to_ns)
    return gpum_error(GPUM_EINVAL, "statistics range ends (%llu) before it starts (%llu)",
                      (unsigned long long)to_ns, (unsigned long long)from_ns);
  memset(out, 0, sizeof(*out));
  pthread_mutex_lock(&mon->lock);
  size_t first = from_ns > 0 ? gpum__ring_after(&md->ring, from_ns - 1) : 0;
  size_t last = gpum__ring_after(&md->ring, to_ns); /* one past */
  size_t n = last > first ? last - first : 0;
  double *v = n > 0 ? malloc(n * sizeof(*v)) : NULL;
  size_t k = 0;
  if (n > 0 && v == NULL) {
    pthread_mutex_unlock(&mon->lock);
    return gpum_error(GPUM_ENOMEM, "statistics: cannot allocate %zu values", n);
  }
  for (size_t i = first; i < last; i++) {
    const gpum__hrec_t *r = gpum__ring_at(&md->ring, i);
    if ((r->valid >> metric) & 1u)
      v[k++] = metric_of(r, metric);
  }
  pthread_mutex_unlock(&mon->lock);
  rc = gpum__stats_sort_in_place(v, k, out);
  free(v);
  return rc;
}

int gpum_monitor_window_stats(gpum_monitor_t *mon, unsigned device, gpum_metric_t metric,
                              double seconds, gpum_window_stats_t *out) {
  if (!(seconds > 0) || seconds > 1e9)
    return gpum_error(GPUM_EINVAL, "statistics window of %g s (must be > 0)", seconds);
  uint64_t now = gpum__mon_now(CLOCK_REALTIME);
  uint64_t span = (uint64_t)(seconds * 1e9);
  return gpum_monitor_range_stats(mon, device, metric, span < now ? now - span : 0, now, out);
}

int gpum_monitor_health(gpum_monitor_t *mon, unsigned device, gpum_device_health_t *out) {
  gpum__mdev_t *md;
  int rc = lookup(mon, device, out, "gpum_monitor_health", &md);
  if (rc != 0)
    return rc;
  uint64_t mono = gpum__mon_now(CLOCK_MONOTONIC), real = gpum__mon_now(CLOCK_REALTIME);
  memset(out, 0, sizeof(*out));
  pthread_mutex_lock(&mon->lock);
  const gpum__hsm_t *h = &md->hsm;
  out->state = h->shown;
  memcpy(out->reason, h->reason, sizeof out->reason);
  out->since_ns = h->since_ns;
  out->responsive = h->responsive;
  out->consecutive_failures = h->failures;
  out->healthy_probes = h->healthy_probes;
  if (h->next_attempt_mono != 0)
    out->next_probe_ns = h->next_attempt_mono > mono ? real + (h->next_attempt_mono - mono) : real;
  out->last_rc = h->last_rc;
  out->gone = h->shown == GPUM_HEALTH_ERROR && h->gone;
  out->last_xid = h->last_xid;
  pthread_mutex_unlock(&mon->lock);
  return 0;
}

int gpum_monitor_set_disabled(gpum_monitor_t *mon, unsigned device, bool disabled,
                              const char *reason) {
  gpum__mdev_t *md;
  int rc = lookup(mon, device, mon, "gpum_monitor_set_disabled", &md);
  if (rc != 0)
    return rc;
  uint64_t real = gpum__mon_now(CLOCK_REALTIME);
  gpum__hsm_out_t o;
  pthread_mutex_lock(&mon->lock);
  gpum__hsm_set_disabled(&md->hsm, disabled, reason, real, &o);
  gpum__mon_emit_hsm(mon, device, &o, real);
  pthread_mutex_unlock(&mon->lock);
  gpum__mon_deliver(mon);
  return 0;
}
