/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The watch op (docs/protocol.md): a client of the Unix socket follows the node's events, the
 * events gpumd publishes on its HTTP event stream (sse.c: reservation transitions, alerts,
 * health changes, Xids, samples), each as a "node" event {"event": "node", "type", "seq",
 * "data"} whose seq is the stream's event id and whose data is the stream's data.
 *
 * gpumd_sse_publish hands every event here once it has numbered it. Its line is written once and
 * appended to the staged output of each watcher of its type; server.c writes staged output only
 * after the turn's ledger commit, as it does the replies, so a watcher never sees a state that a
 * crash could undo, and sees the events in the order they were published, interleaved in order
 * with its replies. A watcher is held to the protocol's rule on unread output (GPUMD_MAX_OUTPUT:
 * one that does not read is disconnected, the loop never waits for it); one whose event could
 * not be staged (out of memory) is disconnected too, since a watcher counts on having them all.
 *
 * Anyone may watch, as anyone may list: the events carry nothing that list, alerts and status do
 * not show every local user (no token). The number of watchers is bounded (GPUMD_WATCH_MAX):
 * each event is copied to each of them on the loop thread.
 */
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "gpumd.h"
#include "json_in.h"
#include "json_out.h"
#include "net.h"
#include "obs.h"
#include "obs_internal.h"

static void link_watcher(gpumd_conn_t *c) {
  gpumd_t *d = c->d;
  c->wprev = NULL;
  c->wnext = d->watchers;
  if (d->watchers)
    d->watchers->wprev = c;
  d->watchers = c;
  d->watcher_count++;
}

void gpumd_watch_stop(gpumd_conn_t *c) {
  if (!c->watch)
    return;
  gpumd_t *d = c->d;
  if (c->wprev)
    c->wprev->wnext = c->wnext;
  else
    d->watchers = c->wnext;
  if (c->wnext)
    c->wnext->wprev = c->wprev;
  c->wprev = c->wnext = NULL;
  c->watch = 0;
  d->watcher_count--;
}

#define TYPES                                                                        \
  GPUM_PROTO_NODE_RESERVATION ", " GPUM_PROTO_NODE_ALERT ", " GPUM_PROTO_NODE_HEALTH \
                              ", " GPUM_PROTO_NODE_XID ", " GPUM_PROTO_NODE_SAMPLE

/* The types the request asks for (0: off), or GPUM_EINVAL with the detail. */
static int parse_types(json_t *req, unsigned *out) {
  json_t *events = json_object_get(req, GPUM_PROTO_F_EVENTS);
  json_t *off = json_object_get(req, GPUM_PROTO_F_OFF);
  if (off) {
    if (!json_is_true(off))
      return gpum_error(GPUM_EINVAL, "\"off\" must be true (to stop watching); leave it out to "
                                     "watch");
    if (events)
      return gpum_error(GPUM_EINVAL, "\"off\" and \"events\" cannot go together");
    *out = 0;
    return 0;
  }
  if (!events) {
    *out = GPUM_WATCH_DEFAULT;
    return 0;
  }
  if (!json_is_array(events) || json_array_size(events) == 0)
    return gpum_error(GPUM_EINVAL,
                      "\"events\" must be a non-empty array of event types (%s); {\"off\": "
                      "true} stops watching",
                      TYPES);
  unsigned mask = 0;
  for (size_t i = 0; i < json_array_size(events); i++) {
    json_t *e = json_array_get(events, i);
    unsigned bit = gpum__proto_node_type(json_string_value(e));
    if (!json_is_string(e))
      return gpum_error(GPUM_EINVAL, "\"events\"[%zu] is not a string: event types are %s", i,
                        TYPES);
    if (!bit)
      return gpum_error(GPUM_EINVAL, "\"events\"[%zu]: '%.32s' is not an event type (%s)", i,
                        json_string_value(e), TYPES);
    mask |= bit;
  }
  *out = mask;
  return 0;
}

/* {"events": [TYPE...], "seq": N}: what c now watches, and the newest event id published so far
 * (every event after it that c watches comes to it). */
static json_t *reply_body(gpumd_t *d, unsigned mask) {
  json_t *names = json_array();
  for (unsigned bit = 1; names && bit <= mask; bit <<= 1)
    if ((mask & bit) &&
        json_array_append_new(names, json_string(gpum__proto_node_type_name(bit))) != 0) {
      json_decref(names);
      names = NULL;
    }
  uint64_t seq = d->obs ? d->obs->event_seq : 0;
  return names ? json_pack("{s:o, s:I}", GPUM_PROTO_F_EVENTS, names, GPUM_PROTO_F_SEQ,
                           (json_int_t)seq)
               : NULL;
}

void gpumd_watch_op(gpumd_conn_t *c, json_t *id, json_t *req) {
  static const char *const fields[] = {GPUM_PROTO_F_ID, GPUM_PROTO_F_OP, GPUM_PROTO_F_EVENTS,
                                       GPUM_PROTO_F_OFF, NULL};
  gpumd_t *d = c->d;
  unsigned mask = 0;
  int rc = gpumd_check_fields(req, fields);
  if (rc == 0)
    rc = parse_types(req, &mask);
  if (rc == 0 && mask && !c->watch && d->watcher_count >= GPUMD_WATCH_MAX)
    rc = gpum_error(GPUM_EAGAIN, "too many watchers (at most %d)", GPUMD_WATCH_MAX);
  if (rc == 0 && mask && (!d->obs || !d->obs->pending))
    rc = gpum_error(GPUM_ESTATE, "gpumd publishes no events (its event streams are not running)");
  if (rc != 0) {
    gpumd_reply_err(c, id, rc, "%s", gpum_last_error());
    return;
  }
  json_t *body = reply_body(d, mask);
  if (!body) {
    gpumd_reply_err(c, id, GPUM_ENOMEM, "out of memory");
    return;
  }
  bool was = c->watch != 0;
  if (!mask) {
    gpumd_watch_stop(c);
  } else {
    if (!was)
      link_watcher(c);
    c->watch = mask;
  }
  if (was != (mask != 0))
    gpum_log(GPUM_LOG_DEBUG, "gpumd", "client %llu (uid %lu pid %ld) %s the node's events",
             (unsigned long long)c->id, (unsigned long)c->uid, (long)c->pid,
             mask ? "watches" : "stopped watching");
  gpumd_reply_ok(c, id, body);
}

/* The event's line (without the newline) into b, data its JSON text (len bytes): data NULL
 * writes "data": null and "too_large": true. Returns 0 or -1 (out of memory). */
static int write_line(struct evbuffer *b, const char *type, uint64_t seq, const char *data,
                      size_t len) {
  gpumd_jw_t w;
  gpumd_jw_init(&w, b);
  GPUMD_JW_LIT(&w, "{" GPUMD_JSON_KEY(GPUM_PROTO_F_EVENT) "\"" GPUM_PROTO_EV_NODE
                                                          "\"," GPUMD_JSON_KEY(GPUM_PROTO_F_TYPE));
  gpumd_jw_string(&w, type);
  GPUMD_JW_LIT(&w, "," GPUMD_JSON_KEY(GPUM_PROTO_F_SEQ));
  gpumd_jw_int(&w, (long long)seq);
  GPUMD_JW_LIT(&w, "," GPUMD_JSON_KEY(GPUM_PROTO_F_DATA));
  if (data)
    gpumd_jw_raw(&w, data, len);
  else
    GPUMD_JW_LIT(&w, "null," GPUMD_JSON_KEY(GPUM_PROTO_F_TOO_LARGE) "true");
  GPUMD_JW_LIT(&w, "}");
  return gpumd_jw_end(&w);
}

typedef struct {
  const char *text;
  size_t len;
} line_t;

static void fill_line(gpumd_jw_t *w, void *arg) {
  const line_t *l = arg;
  gpumd_jw_raw(w, l->text, l->len);
}

void gpumd_watch_publish(gpumd_t *d, const char *type, uint64_t seq, const char *data, size_t len) {
  unsigned bit = gpum__proto_node_type(type);
  gpumd_conn_t *c = d->watchers;
  while (c && !(c->watch & bit))
    c = c->wnext;
  if (!c)
    return; /* nobody watches it: nothing to write */
  struct evbuffer *b = evbuffer_new();
  int rc = b ? write_line(b, type, seq, data, len) : -1;
  if (rc == 0 && evbuffer_get_length(b) > GPUMD_MAX_MESSAGE) {
    /* Over the protocol's message limit, which clients enforce too: the watchers still learn
     * that it happened and can read the state. */
    evbuffer_drain(b, evbuffer_get_length(b));
    rc = write_line(b, type, seq, NULL, 0);
  }
  line_t line = {NULL, 0};
  if (rc == 0) {
    line.len = evbuffer_get_length(b);
    line.text = (const char *)evbuffer_pullup(b, -1);
  }
  while (c) {
    gpumd_conn_t *next = c->wnext; /* a drop takes c off the list */
    if ((c->watch & bit) && (!line.text || gpumd_conn_send_with(c, fill_line, &line) != 0))
      gpumd_conn_drop(c, "missed an event it watches (out of memory)");
    c = next;
  }
  if (b)
    evbuffer_free(b);
}
