/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GET /api/v1/events: Server-Sent Events. http_router.c routes the request here after its auth and
 * limit checks; gpumd_sse_open takes it over as a chunked text/event-stream reply. Events are
 * published with gpumd_sse_publish at any point of a loop turn, formatted once
 * ("id: N\nevent: NAME\ndata: JSON\n\n") into a pending buffer, and written to every stream
 * after the turn's ledger commit: by gpumd_sse_flush at the end of the turn, or, when the
 * ledger's writer thread commits it, held (gpumd_sse_seal) until it has (gpumd_sse_release).
 * A "reservation" event never shows a state that is not durable. A comment line every
 * GPUMD_SSE_KEEPALIVE_S seconds keeps idle streams (and proxies) alive and finds closed peers
 * (reaped at the next write or flush: the connection's close callback belongs to http_conns.c).
 * Each stream's output is bounded: a reader with more than GPUMD_SSE_MAX_OUTPUT bytes unread (or
 * whose writes stall for the write timeout) is dropped, so a slow reader never stalls the loop or
 * grows memory.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <gpum/log.h>

#include "obs_internal.h"

#define SSE_WRITE_TIMEOUT_S 30

struct gpumd_sse_stream {
  struct evhttp_request *req;
  struct gpumd_sse_stream *prev, *next;
  uint64_t id;
};

static uint64_t next_stream_id;

static void unlink_stream(struct gpumd_obs *o, struct gpumd_sse_stream *s) {
  if (s->prev)
    s->prev->next = s->next;
  else
    o->streams = s->next;
  if (s->next)
    s->next->prev = s->prev;
  o->stream_count--;
}

/* The connection's close callback belongs to http_conns.c (it counts connections), so a closed
 * stream is found here instead: when the peer closes, or a write fails or times out, libevent
 * frees the connection but detaches and keeps a request its user still holds. Such a request
 * is ours to free (evhttp_send_reply_end frees a detached request). */
static bool reap_if_closed(struct gpumd_obs *o, struct gpumd_sse_stream *s) {
  if (evhttp_request_get_connection(s->req) != NULL)
    return false;
  gpum_log(GPUM_LOG_DEBUG, "gpumd", "event stream %llu closed", (unsigned long long)s->id);
  unlink_stream(o, s);
  gpumd_obs_changed(o);
  evhttp_send_reply_end(s->req);
  free(s);
  return true;
}

static void reap_closed(struct gpumd_obs *o) {
  struct gpumd_sse_stream *s = o->streams;
  while (s) {
    struct gpumd_sse_stream *next = s->next;
    reap_if_closed(o, s);
    s = next;
  }
}

/* Drops a stream whose reader does not keep up: the connection is closed at once (its close
 * callback runs; the request is freed with it). */
static void drop(struct gpumd_obs *o, struct gpumd_sse_stream *s, const char *why) {
  gpum_log(GPUM_LOG_WARN, "gpumd", "event stream %llu: %s: dropped", (unsigned long long)s->id,
           why);
  struct evhttp_connection *conn = evhttp_request_get_connection(s->req);
  o->streams_dropped++;
  gpumd_obs_changed(o);
  unlink_stream(o, s);
  free(s);
  evhttp_connection_free(conn);
}

/* Writes len bytes to stream s; drops it when its unread output would pass the bound. Returns
 * false when s is gone (closed or dropped). */
static bool stream_write(struct gpumd_obs *o, struct gpumd_sse_stream *s, const void *data,
                         size_t len) {
  if (reap_if_closed(o, s))
    return false;
  struct evhttp_connection *conn = evhttp_request_get_connection(s->req);
  struct bufferevent *bev = evhttp_connection_get_bufferevent(conn);
  if (evbuffer_get_length(bufferevent_get_output(bev)) + len > GPUMD_SSE_MAX_OUTPUT) {
    drop(o, s, "reader too slow");
    return false;
  }
  struct evbuffer *b = evbuffer_new();
  if (!b || evbuffer_add(b, data, len) != 0) {
    evbuffer_free(b);
    drop(o, s, "out of memory");
    return false;
  }
  evhttp_send_reply_chunk(s->req, b);
  evbuffer_free(b);
  return true;
}

static void write_all(struct gpumd_obs *o, const void *data, size_t len) {
  struct gpumd_sse_stream *s = o->streams;
  while (s) {
    struct gpumd_sse_stream *next = s->next;
    stream_write(o, s, data, len);
    s = next;
  }
}

static void on_keepalive(evutil_socket_t fd, short what, void *arg) {
  (void)fd, (void)what;
  gpumd_t *d = arg;
  static const char ka[] = ": keep-alive\n\n";
  write_all(d->obs, ka, sizeof ka - 1);
}

void gpumd_sse_close_all(gpumd_t *d) {
  struct gpumd_obs *o = d ? d->obs : NULL;
  while (o && o->streams) {
    struct gpumd_sse_stream *s = o->streams;
    unlink_stream(o, s);
    /* Ends the chunked reply; libevent frees the request (and a detached one at once). */
    evhttp_send_reply_end(s->req);
    free(s);
  }
}

int gpumd_sse_start(gpumd_t *d) {
  struct gpumd_obs *o = d->obs;
  o->pending = evbuffer_new();
  o->held = evbuffer_new();
  o->keepalive = event_new(d->base, -1, EV_PERSIST, on_keepalive, d);
  if (!o->pending || !o->held || !o->keepalive)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  struct timeval tv = {.tv_sec = GPUMD_SSE_KEEPALIVE_S, .tv_usec = 0};
  event_add(o->keepalive, &tv);
  return 0;
}

void gpumd_sse_stop(gpumd_t *d) {
  struct gpumd_obs *o = d->obs;
  gpumd_sse_close_all(d);
  if (o->keepalive)
    event_free(o->keepalive);
  if (o->pending)
    evbuffer_free(o->pending);
  if (o->held)
    evbuffer_free(o->held);
  o->keepalive = NULL;
  o->pending = o->held = NULL;
}

static void reply_error(struct evhttp_request *req, int status, const char *reason,
                        const char *code, const char *message) {
  struct evbuffer *b = evbuffer_new();
  if (b) {
    json_t *e = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", message);
    char *text = e ? json_dumps(e, JSON_COMPACT) : NULL;
    if (text)
      evbuffer_add_printf(b, "%s\n", text);
    free(text);
    json_decref(e);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
  }
  evhttp_send_reply(req, status, reason, b);
  evbuffer_free(b);
}

void gpumd_sse_open(gpumd_t *d, struct evhttp_request *req) {
  struct gpumd_obs *o = d->obs;
  struct evhttp_connection *conn = evhttp_request_get_connection(req);
  if (!o || !o->pending || !conn) {
    reply_error(req, 503, "Service Unavailable", "EAGAIN", "event streams are not running");
    return;
  }
  reap_closed(o);
  if (o->stream_count >= GPUMD_SSE_MAX_STREAMS) {
    char msg[64];
    snprintf(msg, sizeof msg, "too many event streams (at most %d)", GPUMD_SSE_MAX_STREAMS);
    reply_error(req, 503, "Service Unavailable", "EAGAIN", msg);
    return;
  }
  struct gpumd_sse_stream *s = calloc(1, sizeof *s);
  if (!s) {
    reply_error(req, 503, "Service Unavailable", "ENOMEM", "out of memory");
    return;
  }
  s->req = req;
  s->id = ++next_stream_id;
  struct evkeyvalq *h = evhttp_request_get_output_headers(req);
  evhttp_add_header(h, "Content-Type", "text/event-stream; charset=utf-8");
  evhttp_add_header(h, "Cache-Control", "no-cache");
  evhttp_add_header(h, "X-Accel-Buffering", "no");
  evhttp_send_reply_start(req, 200, "OK");
  /* No read timeout (the client sends nothing more); a write that stalls drops the stream. */
  struct timeval wt = {.tv_sec = SSE_WRITE_TIMEOUT_S, .tv_usec = 0};
  struct bufferevent *bev = evhttp_connection_get_bufferevent(conn);
  bufferevent_set_timeouts(bev, NULL, &wt);
  /* Events are small writes that must leave at once, not wait for the peer's delayed ACK. */
  int one = 1;
  setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  s->next = o->streams;
  if (o->streams)
    o->streams->prev = s;
  o->streams = s;
  o->stream_count++;
  gpumd_obs_changed(o);
  gpum_log(GPUM_LOG_DEBUG, "gpumd", "event stream %llu opened", (unsigned long long)s->id);
  char hello[96];
  int n = snprintf(hello, sizeof hello, ": gpumd event stream %llu\nretry: 2000\n\n",
                   (unsigned long long)s->id);
  stream_write(o, s, hello, (size_t)n);
}

bool gpumd_sse_is_stream(gpumd_t *d, struct evhttp_request *req) {
  for (struct gpumd_sse_stream *s = d->obs ? d->obs->streams : NULL; s; s = s->next)
    if (s->req == req)
      return true;
  return false;
}

void gpumd_sse_publish(gpumd_t *d, const char *event, json_t *data) {
  struct gpumd_obs *o = d ? d->obs : NULL;
  if (!o || !o->pending || o->stream_count == 0 || !data) {
    json_decref(data);
    return;
  }
  /* Written as the replies are (gpumd_json_write): compact, control characters escaped, so
   * the data is one line. An event that cannot be written whole is dropped whole. */
  struct evbuffer *ev = evbuffer_new();
  bool ok =
      ev &&
      evbuffer_add_printf(ev, "id: %llu\nevent: %s\ndata: ", (unsigned long long)(o->event_seq + 1),
                          event) >= 0 &&
      gpumd_json_write(ev, data) == 0 && evbuffer_add(ev, "\n\n", 2) == 0 &&
      evbuffer_add_buffer(o->pending, ev) == 0;
  json_decref(data);
  if (ev)
    evbuffer_free(ev);
  if (ok)
    o->event_seq++;
}

/* Writes the events in buf to every stream and empties it. */
static void send_events(struct gpumd_obs *o, struct evbuffer *buf) {
  size_t len = evbuffer_get_length(buf);
  if (o->stream_count > 0)
    reap_closed(o);
  if (len == 0)
    return;
  if (o->stream_count > 0) {
    const unsigned char *p = evbuffer_pullup(buf, -1);
    if (p)
      write_all(o, p, len);
  }
  evbuffer_drain(buf, len);
}

void gpumd_sse_flush(gpumd_t *d) {
  struct gpumd_obs *o = d ? d->obs : NULL;
  if (o && o->pending)
    send_events(o, o->pending);
}

void gpumd_sse_seal(gpumd_t *d) {
  struct gpumd_obs *o = d ? d->obs : NULL;
  if (o && o->pending)
    evbuffer_add_buffer(o->held, o->pending);
}

void gpumd_sse_release(gpumd_t *d) {
  struct gpumd_obs *o = d ? d->obs : NULL;
  if (o && o->held)
    send_events(o, o->held);
}
