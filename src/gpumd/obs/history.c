/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's own history of each device, behind GET /api/v1/gpu/history (the dashboard's charts):
 * one point per "sample" event (each monitor round, at most one a second per device) holding the
 * columns of the reply, memory used, reserved and unmanaged (the scheduler's view at that round)
 * and total, utilisation, temperature and power, in a ring of GPUMD_HISTORY_POINTS per device
 * (an hour at one point a second; sizeof(point_t) = 48 bytes, 169 KiB per device), allocated at
 * a device's first point. Loop thread only.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include <gpum/error.h>

#include "obs_internal.h"
#include "json_out.h"
#include "obs.h"
#include "os_internal.h"

enum { V_USED = 1, V_TOTAL = 2, V_UTIL = 4, V_TEMP = 8, V_POWER = 16, V_SCHED = 32 };

typedef struct {
  uint64_t t_ms; /* Unix epoch milliseconds */
  uint64_t used, reserved, unmanaged, total;
  uint32_t power_mw;
  int16_t temp_c;
  uint8_t util_pct;
  uint8_t valid; /* V_* */
} point_t;

struct gpumd_hist {
  point_t p[GPUMD_HISTORY_POINTS]; /* circular; p[head] is the oldest */
  size_t head, count;
};

void gpumd_history_add(struct gpumd_obs *o, unsigned slot, const gpum_device_sample_t *s,
                       const gpumd_sched_device_stats_t *st) {
  if (slot >= GPUMD_MAX_DEVICES)
    return;
  struct gpumd_hist *h = o->hist[slot];
  if (!h && !(h = o->hist[slot] = calloc(1, sizeof *h)))
    return; /* out of memory: this device's history starts later */
  point_t pt = {.t_ms = s->timestamp_ns / 1000000u};
  if (gpum_sample_valid(s, GPUM_METRIC_MEMORY_USED)) {
    pt.used = s->memory_used;
    pt.valid |= V_USED;
  }
  if (gpum_sample_valid(s, GPUM_METRIC_MEMORY_TOTAL)) {
    pt.total = s->memory_total;
    pt.valid |= V_TOTAL;
  }
  if (gpum_sample_valid(s, GPUM_METRIC_UTIL_GPU)) {
    pt.util_pct = (uint8_t)(s->util_gpu > 100 ? 100 : s->util_gpu);
    pt.valid |= V_UTIL;
  }
  if (gpum_sample_valid(s, GPUM_METRIC_TEMPERATURE)) {
    int t = s->temperature_c;
    pt.temp_c = (int16_t)(t < INT16_MIN ? INT16_MIN : t > INT16_MAX ? INT16_MAX : t);
    pt.valid |= V_TEMP;
  }
  if (gpum_sample_valid(s, GPUM_METRIC_POWER)) {
    pt.power_mw = s->power_mw;
    pt.valid |= V_POWER;
  }
  if (st) {
    pt.reserved = st->reserved;
    pt.unmanaged = st->unmanaged;
    pt.valid |= V_SCHED;
  }
  if (h->count == GPUMD_HISTORY_POINTS) {
    h->p[h->head] = pt;
    h->head = (h->head + 1) % GPUMD_HISTORY_POINTS;
  } else {
    h->p[(h->head + h->count++) % GPUMD_HISTORY_POINTS] = pt;
  }
}

void gpumd_history_free(struct gpumd_obs *o) {
  for (unsigned i = 0; i < GPUMD_MAX_DEVICES; i++) {
    free(o->hist[i]);
    o->hist[i] = NULL;
  }
}

static int put_u64(struct evbuffer *out, bool valid, uint64_t v) {
  return valid ? evbuffer_add_printf(out, ",%llu", (unsigned long long)v)
               : evbuffer_add(out, ",null", 5);
}

static int put_point(struct evbuffer *out, const point_t *p, bool first) {
  int rc = evbuffer_add_printf(out, "%s[%llu", first ? "" : ",", (unsigned long long)p->t_ms);
  bool sched = p->valid & V_SCHED;
  if (rc < 0 || put_u64(out, p->valid & V_USED, p->used) < 0 ||
      put_u64(out, sched, p->reserved) < 0 || put_u64(out, sched, p->unmanaged) < 0 ||
      put_u64(out, p->valid & V_TOTAL, p->total) < 0 ||
      put_u64(out, p->valid & V_UTIL, p->util_pct) < 0)
    return -1;
  if (p->valid & V_TEMP ? evbuffer_add_printf(out, ",%d", p->temp_c) < 0
                        : evbuffer_add(out, ",null", 5) < 0)
    return -1;
  if (put_u64(out, p->valid & V_POWER, p->power_mw) < 0)
    return -1;
  return evbuffer_add(out, "]", 1);
}

static int put_device(struct evbuffer *out, const gpumd_device_t *dev, const struct gpumd_hist *h,
                      uint64_t since_ms, bool first) {
  json_t *uuid = json_string(dev->info.uuid);
  int rc =
      evbuffer_add_printf(out, "%s{\"index\":%u,\"uuid\":", first ? "" : ",", dev->index) < 0 ||
              !uuid || gpumd_json_write(out, uuid) != 0 ||
              evbuffer_add(out, ",\"points\":[", 11) != 0
          ? -1
          : 0;
  json_decref(uuid);
  bool none = true;
  for (size_t i = 0; rc == 0 && h && i < h->count; i++) {
    const point_t *p = &h->p[(h->head + i) % GPUMD_HISTORY_POINTS];
    if (p->t_ms < since_ms)
      continue;
    rc = put_point(out, p, none);
    none = false;
  }
  return rc == 0 ? evbuffer_add(out, "]}", 2) : rc;
}

size_t gpumd_history_points(gpumd_t *d) {
  size_t n = 0;
  for (unsigned i = 0; d->obs && i < d->device_count && i < GPUMD_MAX_DEVICES; i++)
    n += d->obs->hist[i] ? d->obs->hist[i]->count : 0;
  return n;
}

int gpumd_history_render(gpumd_t *d, uint64_t window_ms, struct evbuffer *out) {
  struct gpumd_obs *o = d->obs;
  uint64_t iv = gpum_config_get_duration(d->cfg, "monitor.interval");
  if (iv < GPUMD_SSE_SAMPLE_MS)
    iv = GPUMD_SSE_SAMPLE_MS;
  uint64_t now_ms = gpum__os_real_ns() / 1000000u;
  uint64_t since = now_ms > window_ms ? now_ms - window_ms : 0;
  int rc = evbuffer_add_printf(out,
                               "{\"interval_ms\":%llu,\"window_s\":%llu,\"fields\":[\"t\","
                               "\"memory_used\",\"memory_reserved\",\"memory_unmanaged\","
                               "\"memory_total\",\"utilization_gpu\",\"temperature\",\"power\"],"
                               "\"devices\":[",
                               (unsigned long long)iv, (unsigned long long)(window_ms / 1000u));
  for (unsigned i = 0; rc >= 0 && i < d->device_count; i++)
    rc = put_device(out, &d->devices[i], o && i < GPUMD_MAX_DEVICES ? o->hist[i] : NULL, since,
                    i == 0);
  if (rc >= 0)
    rc = evbuffer_add(out, "]}\n", 3);
  return rc < 0 ? gpum_error(GPUM_ENOMEM, "out of memory") : 0;
}
