/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's observability state (struct gpumd_obs, behind d->obs), shared by alerts.c (the alert
 * engine and the device feeds), metrics.c (the Prometheus text), sse.c (the Server-Sent
 * Events streams and their replay ring, evring.c) and history.c (the per-device points of
 * GET /api/v1/gpu/history). Everything here is touched on the loop thread only: the alert engine is
 * fed from the loop (devices.c), so its callbacks run there too.
 */
#ifndef GPUMD_OBS_INTERNAL_H
#define GPUMD_OBS_INTERNAL_H

#include <gpum/error.h>

#include "evring.h"
#include "gpumd.h"
#include "obs.h"

#define GPUMD_OBS_MAX_XIDS 256       /* distinct (device, Xid) counters */
#define GPUMD_OBS_WAIT_BUCKETS 14    /* queue-wait histogram buckets, +Inf excluded */
#define GPUMD_SSE_MAX_STREAMS 64     /* concurrent event streams */
#define GPUMD_SSE_MAX_OUTPUT 262144u /* unread bytes before a stream is dropped */
#define GPUMD_SSE_KEEPALIVE_S 15     /* comment line when idle */
#define GPUMD_SSE_SAMPLE_MS 1000     /* at most one "sample" event per device per second */
#define GPUMD_HISTORY_POINTS 3600    /* per device: an hour at one point a second */

/* Upper bounds of the queue-wait histogram, seconds (metrics.c). */
extern const double gpumd_wait_bounds[GPUMD_OBS_WAIT_BUCKETS];

typedef struct {
  unsigned device;
  uint64_t xid;
  uint64_t count;
  uint64_t seq; /* the newest of a device's Xids has the highest (DCGM_FI_DEV_XID_ERRORS) */
} gpumd_xid_count_t;

struct gpumd_sse_stream;
struct gpumd_render_blob;
struct gpumd_hist;

/* A rendered response body reused while nothing it shows has changed (metrics.c): valid while
 * the observed generation and the client count are those it was rendered at, or (with a
 * max_age) while it is younger than that. Responses point at the same bytes (evbuffer
 * references), the last one frees them. */
typedef struct {
  struct gpumd_render_blob *blob; /* NULL: none */
  uint64_t generation;
  size_t clients;
  uint64_t rendered_ns; /* CLOCK_MONOTONIC */
} gpumd_render_cache_t;

typedef int (*gpumd_render_fn)(gpumd_t *d, struct evbuffer *out);
/* Adds the body to out: the cached rendering when it is current or was rendered less than
 * max_age_ns ago (0: only when current), else a fresh one from fn (which becomes the cache).
 * Returns 0 or fn's / GPUM_ENOMEM's code (out then unchanged). */
int gpumd_render_cached(gpumd_t *d, gpumd_render_cache_t *c, gpumd_render_fn fn,
                        uint64_t max_age_ns, struct evbuffer *out);
/* Drops the cached rendering (responses still being sent keep it alive). */
void gpumd_render_cache_free(gpumd_render_cache_t *c);

struct gpumd_obs {
  /* alerts.c */
  gpum_alert_engine_t *alerts;
  gpum_alert_engine_opts_t alert_opts; /* what alerts was created with */
  uint64_t alerts_fired[4];            /* by gpum_alert_level_t */
  uint64_t alert_now_ns;               /* newest time fed to the engine (kept non-decreasing) */
  uint64_t last_sample_ns[GPUMD_MAX_DEVICES]; /* per device slot: newest sample fed */
  uint64_t last_event_ns[GPUMD_MAX_DEVICES];  /* per device slot: newest "sample" event */
  gpumd_xid_count_t xids[GPUMD_OBS_MAX_XIDS];
  size_t xid_count;
  uint64_t xid_seq; /* Xids counted so far: the seq of the newest */
  /* engine.c hooks (counted in alerts.c) */
  uint64_t transitions[GPUMD_RESV_SUSPENDED + 1]; /* by the state entered */
  uint64_t wait_buckets[GPUMD_OBS_WAIT_BUCKETS];
  uint64_t wait_count;
  double wait_sum;
  /* The last renderings of /metrics and of /api/v1/gpu/status (http_api.c), reused while
   * nothing they show has changed. */
  uint64_t generation; /* bumped by every change they show (see gpumd_obs_changed) */
  gpumd_render_cache_t metrics_cache, status_cache;
  /* history.c: per device slot, NULL until its first point */
  struct gpumd_hist *hist[GPUMD_MAX_DEVICES];
  /* sse.c */
  struct gpumd_sse_stream *streams;
  size_t stream_count;
  uint64_t streams_dropped;
  uint64_t event_seq;  /* id of the newest event published */
  uint64_t run_base;   /* this run's ids are above it (its start, microseconds since the epoch) */
  uint64_t sent_seq;   /* id of the newest event written to the streams */
  uint64_t sealed_seq; /* id of the newest event in held */
  struct evbuffer *pending; /* this turn's events, sent after the commit */
  struct evbuffer *held;    /* events of turns the ledger's writer is committing */
  gpumd_jw_mem_t scratch;   /* the event being formatted (reused: no allocation per event) */
  struct event *keepalive;
  struct event *catchup; /* tops up the streams catching up from the ring */
  gpumd_evring_t ring;   /* the events published, newest last, for replay */
};

/* The value of metric m of s, in the device layer's unit (bytes, percent, celsius, milliwatts,
 * MHz, count); check gpum_sample_valid first. */
double gpumd_obs_sample_value(const gpum_device_sample_t *s, gpum_metric_t m);

/* Something /metrics or the status shows changed: the cached renderings are stale. */
static inline void gpumd_obs_changed(struct gpumd_obs *o) {
  o->generation++;
}

/* sse.c: whether req is an open event stream (gpumd_sse_open took it over rather than
 * refusing it). */
bool gpumd_sse_is_stream(gpumd_t *d, struct evhttp_request *req);
/* sse.c: frees the streams (ends their replies) and the pending events. */
void gpumd_sse_stop(gpumd_t *d);
int gpumd_sse_start(gpumd_t *d);

/* history.c: adds a point to device slot's history from sample s and the scheduler's stats of
 * the device at this round (NULL: not known, the reserved and unmanaged columns are null). */
void gpumd_history_add(struct gpumd_obs *o, unsigned slot, const gpum_device_sample_t *s,
                       const gpumd_sched_device_stats_t *st);
/* history.c: writes the GET /api/v1/gpu/history document for the points of the last window_ms
 * to out. Returns 0 or GPUM_ENOMEM (out may then hold part of it). */
int gpumd_history_render(gpumd_t *d, uint64_t window_ms, struct evbuffer *out);
/* history.c: the points kept, all devices together (what a render of the whole window writes,
 * at most). */
size_t gpumd_history_points(gpumd_t *d);
/* history.c: frees every device's points. */
void gpumd_history_free(struct gpumd_obs *o);

#endif /* GPUMD_OBS_INTERNAL_H */
