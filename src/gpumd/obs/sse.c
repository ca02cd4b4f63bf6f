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
 * grows memory. Every event published also goes to the Unix socket's watchers (watch.c), staged
 * with the connections' output of the same turn, which waits for the same commit.
 *
 * Replay: every event is also kept in a ring bounded by bytes (http.event_replay, evring.c),
 * whether or not a stream is open. Event ids are integers; a run's ids start above its start
 * time in microseconds since the epoch, so an id below that is of an earlier run. A stream that
 * opens with Last-Event-ID (or ?last_event_id=) naming an event of this run still in the ring
 * catches up first: the events after it that were already sent to the streams are written from
 * the ring, at most half the output bound at a time (a timer tops it up as the reader reads),
 * and the stream takes live events once it has caught up; so nothing is written twice or out of
 * order, and the output bound holds. Any other id gives a "reset" event first. Every stream's
 * first lines carry the newest id sent ("id: N" without data: it sets the client's last id
 * without dispatching an event), so that a client that saw no event can still resume.
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
#include "json_out.h"
#include "obs.h"
#include "os_internal.h"

#define SSE_WRITE_TIMEOUT_S 30
#define SSE_CATCHUP_MS 10 /* how often a catching-up stream is topped up */

struct gpumd_sse_stream {
  struct evhttp_request *req;
  struct gpumd_sse_stream *prev, *next;
  uint64_t id;
  bool catching_up; /* still writing the ring's events from cursor, not yet live ones */
  uint64_t cursor;  /* while catching up: the next event id to write */
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

/* Writes data to every stream; live_only: not to those still catching up (events: they get
 * them from the ring). */
static void write_all(struct gpumd_obs *o, const void *data, size_t len, bool live_only) {
  struct gpumd_sse_stream *s = o->streams;
  while (s) {
    struct gpumd_sse_stream *next = s->next;
    if (!live_only || !s->catching_up)
      stream_write(o, s, data, len);
    s = next;
  }
}

static size_t unread(struct gpumd_sse_stream *s) {
  struct evhttp_connection *conn = evhttp_request_get_connection(s->req);
  return evbuffer_get_length(bufferevent_get_output(evhttp_connection_get_bufferevent(conn)));
}

/* Writes the ring's events from s's cursor up to the newest sent, while s's unread output stays
 * under half the bound. Returns false when s is gone (closed, or dropped: its next event is no
 * longer in the ring). */
static bool catch_up(struct gpumd_obs *o, struct gpumd_sse_stream *s) {
  if (reap_if_closed(o, s))
    return false;
  while (s->cursor <= o->sent_seq) {
    const char *text;
    size_t len;
    if (!gpumd_evring_get(&o->ring, s->cursor, &text, &len)) {
      drop(o, s, "its next event is no longer kept (reader too slow)");
      return false;
    }
    if (unread(s) + len > GPUMD_SSE_MAX_OUTPUT / 2)
      return true;
    if (!stream_write(o, s, text, len))
      return false;
    s->cursor++;
  }
  s->catching_up = false;
  return true;
}

/* Tops up every catching-up stream; keeps the timer going while one still is. */
static void catch_up_all(struct gpumd_obs *o) {
  bool more = false;
  struct gpumd_sse_stream *s = o->streams;
  while (s) {
    struct gpumd_sse_stream *next = s->next;
    if (s->catching_up && catch_up(o, s))
      more |= s->catching_up;
    s = next;
  }
  if (more && !evtimer_pending(o->catchup, NULL)) {
    struct timeval tv = {.tv_sec = 0, .tv_usec = SSE_CATCHUP_MS * 1000};
    evtimer_add(o->catchup, &tv);
  }
}

static void on_catchup(evutil_socket_t fd, short what, void *arg) {
  (void)fd, (void)what;
  gpumd_t *d = arg;
  catch_up_all(d->obs);
}

static void on_keepalive(evutil_socket_t fd, short what, void *arg) {
  (void)fd, (void)what;
  gpumd_t *d = arg;
  static const char ka[] = ": keep-alive\n\n";
  write_all(d->obs, ka, sizeof ka - 1, false);
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
  o->catchup = evtimer_new(d->base, on_catchup, d);
  if (!o->pending || !o->held || !o->keepalive || !o->catchup)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  /* This run's ids start above its start time in microseconds: above any earlier run's. */
  o->event_seq = o->sent_seq = o->sealed_seq = gpum__os_real_ns() / 1000u;
  o->run_base = o->event_seq;
  uint64_t ring = gpum_config_get_size(d->cfg, "http.event_replay");
  gpumd_evring_init(&o->ring, ring > SIZE_MAX ? SIZE_MAX : (size_t)ring, o->event_seq + 1);
  struct timeval tv = {.tv_sec = GPUMD_SSE_KEEPALIVE_S, .tv_usec = 0};
  event_add(o->keepalive, &tv);
  return 0;
}

void gpumd_sse_stop(gpumd_t *d) {
  struct gpumd_obs *o = d->obs;
  gpumd_sse_close_all(d);
  if (o->keepalive)
    event_free(o->keepalive);
  if (o->catchup)
    event_free(o->catchup);
  o->catchup = NULL;
  gpumd_evring_free(&o->ring);
  if (o->pending)
    evbuffer_free(o->pending);
  if (o->held)
    evbuffer_free(o->held);
  free(o->scratch.data);
  memset(&o->scratch, 0, sizeof o->scratch);
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

/* The id a reconnecting client names, copied to buf (cut short when longer: still no id): the
 * Last-Event-ID header, else the last_event_id query parameter (an EventSource reconnecting to a
 * URL with the parameter sends the header with a newer id). NULL when neither is given. */
static const char *last_event_id(struct evhttp_request *req, char *buf, size_t len) {
  const char *v = evhttp_find_header(evhttp_request_get_input_headers(req), "Last-Event-ID");
  if (v) {
    snprintf(buf, len, "%s", v);
    return buf;
  }
  const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
  if (!q || !strstr(q, "last_event_id="))
    return NULL;
  struct evkeyvalq query;
  query.tqh_first = NULL; /* TAILQ_INIT without <sys/queue.h> */
  query.tqh_last = &query.tqh_first;
  const char *found = NULL;
  if (evhttp_parse_query_str(q, &query) == 0 &&
      (v = evhttp_find_header(&query, "last_event_id")) != NULL) {
    snprintf(buf, len, "%s", v);
    found = buf;
  }
  evhttp_clear_headers(&query);
  return found;
}

/* Whether last names an event of this run that can be replayed; else the reset's code and
 * reason. */
static bool resumable(const struct gpumd_obs *o, const char *last, uint64_t *id, const char **code,
                      char *why, size_t whylen) {
  char *end = NULL;
  unsigned long long v = 0;
  if (*last >= '0' && *last <= '9' && strlen(last) <= 20)
    v = strtoull(last, &end, 10);
  if (!end || *end) {
    char shown[41]; /* printable ASCII only: the reason must be valid JSON text */
    size_t i = 0;
    for (; i < sizeof shown - 1 && last[i]; i++)
      shown[i] = last[i] >= 0x20 && last[i] < 0x7f ? last[i] : '?';
    shown[i] = '\0';
    *code = "malformed";
    snprintf(why, whylen, "Last-Event-ID '%s' is not an event id (a decimal integer)", shown);
    return false;
  }
  uint64_t first = gpumd_evring_first(&o->ring);
  if (v < o->run_base) {
    *code = "other_run";
    snprintf(why, whylen, "event %llu is not of this gpumd run (its ids start at %llu)", v,
             (unsigned long long)o->run_base + 1);
  } else if (v > o->sent_seq) {
    *code = "unknown";
    snprintf(why, whylen, "event %llu was never sent by this gpumd run (the newest is %llu)", v,
             (unsigned long long)o->sent_seq);
  } else if (v + 1 < first) {
    *code = "too_old";
    snprintf(why, whylen, "the events after %llu are no longer kept (the oldest kept is %llu)", v,
             (unsigned long long)first);
  } else {
    *id = v;
    return true;
  }
  return false;
}

/* The stream's first lines: the hello comment, the retry delay and, unless it resumes, the
 * newest id sent; then a "reset" event when last (the client's last id, or NULL) cannot be
 * resumed, or else the catch-up from the event after it. */
static void start_stream(struct gpumd_obs *o, struct gpumd_sse_stream *s, const char *last) {
  uint64_t from = 0;
  const char *code = NULL;
  char why[160];
  bool resume = last && resumable(o, last, &from, &code, why, sizeof why);
  char hello[160];
  int n = snprintf(hello, sizeof hello, ": gpumd event stream %llu\nretry: 2000\n",
                   (unsigned long long)s->id);
  if (!resume)
    n += snprintf(hello + n, sizeof hello - (size_t)n, "id: %llu\n",
                  (unsigned long long)o->sent_seq);
  hello[n++] = '\n';
  bool ok = stream_write(o, s, hello, (size_t)n);
  if (ok && code) {
    gpum_log(GPUM_LOG_DEBUG, "gpumd", "event stream %llu: reset: %s", (unsigned long long)s->id,
             why);
    json_t *data = json_pack("{s:s, s:s}", "code", code, "reason", why);
    struct evbuffer *b = evbuffer_new();
    if (b && data && evbuffer_add_printf(b, "event: reset\ndata: ") >= 0 &&
        gpumd_json_write(b, data) == 0 && evbuffer_add(b, "\n\n", 2) == 0) {
      const unsigned char *p = evbuffer_pullup(b, -1);
      if (p)
        stream_write(o, s, p, evbuffer_get_length(b));
    }
    json_decref(data);
    if (b)
      evbuffer_free(b);
  } else if (ok && resume) {
    s->cursor = from + 1;
    s->catching_up = true;
    catch_up_all(o);
  }
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
  char last[64];
  start_stream(o, s, last_event_id(req, last, sizeof last));
}

bool gpumd_sse_is_stream(gpumd_t *d, struct evhttp_request *req) {
  for (struct gpumd_sse_stream *s = d->obs ? d->obs->streams : NULL; s; s = s->next)
    if (s->req == req)
      return true;
  return false;
}

bool gpumd_sse_heard(const gpumd_t *d) {
  const struct gpumd_obs *o = d ? d->obs : NULL;
  return o && o->pending && (o->stream_count > 0 || d->watchers || o->ring.max_bytes > 0);
}

size_t gpumd_sse_event_head(char *buf, size_t len, uint64_t id, const char *event) {
  char digits[20];
  size_t nd = gpumd_dec_u64(digits, id);
  size_t ne = strlen(event);
  size_t need = 4 + nd + 8 + ne + 7; /* "id: " N "\nevent: " NAME "\ndata: " */
  if (need >= len) {
    if (len)
      buf[0] = '\0';
    return 0;
  }
  char *p = buf;
  memcpy(p, "id: ", 4);
  p += 4;
  memcpy(p, digits, nd);
  p += nd;
  memcpy(p, "\nevent: ", 8);
  p += 8;
  memcpy(p, event, ne);
  p += ne;
  memcpy(p, "\ndata: ", 7);
  p += 7;
  *p = '\0';
  return (size_t)(p - buf);
}

void gpumd_sse_publish_with(gpumd_t *d, const char *event, gpumd_obs_write_fn write,
                            const void *arg) {
  struct gpumd_obs *o = d ? d->obs : NULL;
  if (!o || !o->pending)
    return;
  /* Formatted once ("id: N\nevent: NAME\ndata: JSON\n\n"), in memory kept from event to
   * event, the data written as the replies are (compact, control characters escaped: one
   * line) straight from the caller's state, no JSON tree between. The same bytes go to the
   * streams' pending output, to the ring (kept even with no stream open: a client reconnecting
   * gets what it missed) and, the data part, to the socket's watchers. An event that cannot be
   * written whole is dropped whole. */
  uint64_t id = o->event_seq + 1;
  char head[96];
  size_t hn = gpumd_sse_event_head(head, sizeof head, id, event);
  gpumd_jw_t w;
  gpumd_jw_init_mem(&w, &o->scratch);
  gpumd_jw_raw(&w, head, hn);
  write(&w, arg);
  GPUMD_JW_LIT(&w, "\n\n");
  if (hn == 0 || gpumd_jw_end(&w) != 0)
    return;
  const char *text = o->scratch.data;
  size_t len = o->scratch.len;
  if (evbuffer_add(o->pending, text, len) == 0) {
    o->event_seq = id;
    /* On failure the ring empties and goes on after id: a resume from before it is reset. */
    gpumd_evring_push(&o->ring, id, text, len);
    /* The socket's watchers get it too, with the same id, staged with this turn's output:
     * written after the turn's commit, as the streams get it. */
    gpumd_watch_publish(d, event, id, text + hn, len - hn - 2);
  }
}

static void write_json(gpumd_jw_t *w, const void *arg) {
  gpumd_jw_value(w, (json_t *)arg);
}

void gpumd_sse_publish(gpumd_t *d, const char *event, json_t *data) {
  if (data)
    gpumd_sse_publish_with(d, event, write_json, data);
  json_decref(data);
}

/* Writes the events in buf (up to event upto) to every live stream and empties it; the streams
 * catching up take them from the ring. */
static void send_events(struct gpumd_obs *o, struct evbuffer *buf, uint64_t upto) {
  size_t len = evbuffer_get_length(buf);
  if (o->stream_count > 0)
    reap_closed(o);
  if (upto > o->sent_seq)
    o->sent_seq = upto;
  if (len == 0)
    return;
  if (o->stream_count > 0) {
    const unsigned char *p = evbuffer_pullup(buf, -1);
    if (p)
      write_all(o, p, len, true);
    catch_up_all(o);
  }
  evbuffer_drain(buf, len);
}

void gpumd_sse_flush(gpumd_t *d) {
  struct gpumd_obs *o = d ? d->obs : NULL;
  if (o && o->pending)
    send_events(o, o->pending, o->event_seq);
}

void gpumd_sse_seal(gpumd_t *d) {
  struct gpumd_obs *o = d ? d->obs : NULL;
  if (o && o->pending) {
    evbuffer_add_buffer(o->held, o->pending);
    o->sealed_seq = o->event_seq;
  }
}

void gpumd_sse_release(gpumd_t *d) {
  struct gpumd_obs *o = d ? d->obs : NULL;
  if (o && o->held)
    send_events(o, o->held, o->sealed_seq);
}
