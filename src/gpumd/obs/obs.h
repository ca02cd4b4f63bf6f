/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What gpumd shows as it happens (the obs module): the alert engine and its device feeds
 * (alerts.c), the event streams (sse.c) and socket watchers (watch.c), the history of samples
 * (history.c), the cached renderings (render_cache.c). Its private state: obs_internal.h.
 */
#ifndef GPUMD_OBS_H
#define GPUMD_OBS_H

#include "gpumd.h"
#include "json_out.h"

/* The alert engine's state (alerts.c): {"enabled", "active": [A...], "history": [A...] (the
 * newest "limit" entries, default 100, at most 100000), "counters": {"fired", "cleared"}}.
 * Anyone may read it. */
/* Its request, as both faces decode it: the newest history entries to show. */
#define GPUMD_ALERTS_LIMIT_DEFAULT 100
#define GPUMD_ALERTS_LIMIT_MAX 100000
typedef struct {
  size_t limit; /* 0 to GPUMD_ALERTS_LIMIT_MAX */
} gpumd_alerts_req_t;
int gpumd_obs_op_alerts(gpumd_t *d, const gpumd_actor_t *a, const gpumd_alerts_req_t *req,
                        json_t **out);
#define GPUMD_WATCH_MAX 128 /* watchers at once */
/* The watch op (socket only): {"events": [TYPE...]} (default: every type but "sample") or
 * {"off": true}. Anyone may watch. */
void gpumd_watch_op(gpumd_conn_t *c, json_t *id, json_t *req);
/* An event gpumd publishes (sse.c, after it numbered it seq): a "node" event to every watcher of
 * type, staged with the turn's output (so written after the turn's commit). data: the event's
 * data as JSON text (len bytes, borrowed), as the streams get it. */
void gpumd_watch_publish(gpumd_t *d, const char *type, uint64_t seq, const char *data, size_t len);
/* c watches nothing more (it is closing, or asked it off). */
void gpumd_watch_stop(gpumd_conn_t *c);
/* Creates / frees d->obs (the alert engine configured from d->cfg, SSE streams, counters).
 * Returns 0 or a negative code (a bad alert rule: the detail names it). */
int gpumd_obs_start(gpumd_t *d);
void gpumd_obs_stop(gpumd_t *d);
/* SIGHUP: rebuilds the alert engine from d->cfg when its rules or options changed (active
 * alerts and the history start over); rules that do not parse are logged, the old kept. */
void gpumd_obs_reload(gpumd_t *d);
/* Takes over req as a Server-Sent Events stream (it sends the headers itself). It leaves the
 * connection's close callback to http_conns.c; a stream's connection must not be freed other than
 * by sse.c (a slow reader) or evhttp_free after gpumd_sse_close_all. */
void gpumd_sse_open(gpumd_t *d, struct evhttp_request *req);
/* Publishes an event to every SSE stream; data is stolen. Reservation events published during a
 * turn go out only after that turn's commit (gpumd_sse_flush from gpumd_end_turn). */
void gpumd_sse_publish(gpumd_t *d, const char *event, json_t *data);
/* Writes an event's data (one JSON value, with the fast writer) from arg. */
typedef void (*gpumd_obs_write_fn)(gpumd_jw_t *w, const void *arg);
/* As gpumd_sse_publish, the data written by write(w, arg) instead of taken from a JSON tree: the
 * event is formatted once for the streams, the replay ring and the watchers. write is called
 * once, or not at all when the event streams are not running. */
void gpumd_sse_publish_with(gpumd_t *d, const char *event, gpumd_obs_write_fn write,
                            const void *arg);
/* An event's first lines, "id: ID\nevent: EVENT\ndata: ", into buf (NUL-terminated); returns
 * their length, or 0 (and "") when len is too small. */
size_t gpumd_sse_event_head(char *buf, size_t len, uint64_t id, const char *event);
/* Whether a published event would reach anyone: an open stream, a socket watcher or the replay
 * ring (http.event_replay > 0). A caller may skip building an event nobody can get. */
bool gpumd_sse_heard(const gpumd_t *d);
void gpumd_sse_flush(gpumd_t *d);
/* As gpumd_http_seal and gpumd_http_release, for the events. */
void gpumd_sse_seal(gpumd_t *d);
void gpumd_sse_release(gpumd_t *d);
/* Ends every stream (before the HTTP server is freed at stop). */
void gpumd_sse_close_all(gpumd_t *d);
/* gpumd's alert engine (created at start, fed from devices.c); may be NULL. */
gpum_alert_engine_t *gpumd_obs_alerts(gpumd_t *d);
/* The JSON of an alert, as "alert" events and GET /api/v1/alerts show it. */
json_t *gpumd_obs_alert_json(const gpum_alert_t *a);
/* Hooks. devices.c: every monitor interval (feeds the newest samples to the alert engine,
 * publishes "sample" events) and every monitor event taken on the loop (health, Xid). engine.c:
 * every reservation transition ("reservation" events, counters, the queue-wait histogram). */
void gpumd_obs_round(gpumd_t *d);
/* A device's static info was read: the alert engine learns it. */
void gpumd_obs_device_info(gpumd_t *d, const gpumd_device_t *dev);
void gpumd_obs_monitor_event(gpumd_t *d, const gpum_monitor_event_t *ev);
/* doc: writes r's document for the "reservation" event (doc(w, doc_arg)); called only when
 * someone could get the event (gpumd_sse_heard), so nothing is built otherwise. */
void gpumd_obs_transition(gpumd_t *d, const gpumd_resv_t *r, gpumd_resv_state_t from,
                          gpumd_resv_state_t to, gpumd_obs_write_fn doc, const void *doc_arg);

#endif /* GPUMD_OBS_H */
