/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's HTTP connections and their limits: each accepted connection is counted against
 * http.max_connections (answered 503 and closed past it), given a deadline for each request
 * (http.timeout, which evhttp only applies to idle time), and closed when it sends more than
 * any request can hold.
 */
#include <errno.h>
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

#include <gpum/error.h>
#include <gpum/log.h>

#include "http_internal.h"
#include "obs_internal.h"

/* ---- connections and their limit ---------------------------------------------------------- */

/* A counted connection: its deadline for the request it is reading. evhttp's own timeout
 * (http.timeout) is an idle timeout, restarted by every byte read: a client that trickles a
 * byte at a time would hold its connection (and a slot of http.max_connections) forever. So
 * each request must also arrive whole within http.timeout of the connection being ready for
 * it (accepted, or its previous response handed to evhttp); past that the connection is
 * closed. */
struct gpumd_http_conn {
  struct gpumd_http *h;
  struct evhttp_connection *evcon;
  struct event *deadline;
  struct gpumd_http_conn *next; /* hash chain */
};

static size_t conn_bucket(const struct gpumd_http *h, const struct evhttp_connection *evcon) {
  uintptr_t k = (uintptr_t)evcon;
  return (size_t)((k >> 4) ^ (k >> 12)) % h->nbuckets;
}

static struct gpumd_http_conn **conn_slot(struct gpumd_http *h, struct evhttp_connection *evcon) {
  struct gpumd_http_conn **p = &h->conns[conn_bucket(h, evcon)];
  while (*p && (*p)->evcon != evcon)
    p = &(*p)->next;
  return p;
}

/* Forgets a counted connection (closed, or handed to the event streams). */
void gpumd__http_conn_forget(struct gpumd_http *h, struct gpumd_http_conn *c) {
  struct gpumd_http_conn **p = conn_slot(h, c->evcon);
  if (*p == c)
    *p = c->next;
  event_free(c->deadline);
  free(c);
  if (h->live > 0)
    h->live--;
}

static void on_conn_closed(struct evhttp_connection *evcon, void *arg) {
  struct gpumd_http_conn *c = arg;
  (void)evcon;
  gpumd__http_conn_forget(c->h, c);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg) {
  (void)fd, (void)what;
  struct gpumd_http_conn *c = arg;
  /* Info, not a warning: most are merely idle kept-alive connections. */
  gpum_log(GPUM_LOG_INFO, "gpumd", "HTTP: no complete request within http.timeout: closed");
  evhttp_connection_free(c->evcon); /* its close callback frees c */
}

/* Arms (or stops) the request deadline of a counted connection. */
void gpumd__http_request_deadline(struct gpumd_http *h, struct evhttp_connection *evcon, bool arm) {
  struct gpumd_http_conn *c = evcon ? *conn_slot(h, evcon) : NULL;
  if (c && arm)
    event_add(c->deadline, &h->request_tv);
  else if (c)
    event_del(c->deadline);
}

void gpumd__http_uncount(struct gpumd_http *h, struct evhttp_connection *evcon) {
  struct gpumd_http_conn *c = *conn_slot(h, evcon);
  evhttp_connection_set_closecb(evcon, NULL, NULL);
  if (c)
    gpumd__http_conn_forget(h, c);
}

/* Unread input of one connection beyond which it is closed (set at start; loop thread). */
static size_t input_limit;

void gpumd__http_set_input_limit(size_t bytes) {
  input_limit = bytes;
}

/* evhttp reads a connection's bytes into its input buffer whenever the socket is readable,
 * also while no one consumes them: while a reply is written (readers of the event stream,
 * pipelined bytes behind a request) and inside a chunk-size line, which evhttp does not
 * bound. A client that sends more than any request can hold (the header and body limits)
 * is closed, through the connection's error path (deferred: this runs inside the read). */
static void on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg) {
  if (info->n_added == 0 || evbuffer_get_length(buf) <= input_limit)
    return;
  struct bufferevent *bev = arg;
  gpum_log(GPUM_LOG_WARN, "gpumd",
           "HTTP: a client sent %zu bytes that no request can hold: "
           "closed",
           evbuffer_get_length(buf));
  bufferevent_disable(bev, EV_READ);
  bufferevent_trigger_event(bev, BEV_EVENT_READING | BEV_EVENT_ERROR, BEV_TRIG_DEFER_CALLBACKS);
}

/* evhttp asks us for each accepted connection's bufferevent: it is remembered as fresh and
 * checked against http.max_connections at the end of the turn (its first read normally needs
 * another turn of the loop), or before a request on it is served if one is read sooner
 * (libevent may poll again within a turn). evhttp can free a connection before that (its
 * client closed at once): the reference held here keeps the bufferevent valid until the
 * check, which then finds its callbacks cleared. */
#define GPUMD_HTTP_MAX_SINGLE_WRITE (4u << 20)

struct bufferevent *gpumd__http_make_bev(struct event_base *base, void *arg) {
  struct gpumd_http *h = arg;
  gpumd_accept_guard_ok(&h->accept_guard);
  struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
  if (!bev)
    return NULL;
  if (!evbuffer_add_cb(bufferevent_get_input(bev), on_input, bev)) {
    bufferevent_free(bev);
    return NULL;
  }
  /* A response goes to the kernel in one write, not in libevent's default 16 KiB pieces:
   * evhttp closes a connection whose client half-closed (shutdown after its requests) as soon
   * as it reads that EOF, and what was still queued behind the first piece was lost (a
   * /metrics of more than 16 KiB came out cut). What the socket's buffer cannot take at once
   * remains exposed to that; docs/rest.md says so. */
  (void)bufferevent_set_max_single_write(bev, GPUMD_HTTP_MAX_SINGLE_WRITE);
  if (h->nfresh == h->capfresh) {
    size_t cap = h->capfresh ? h->capfresh * 2 : 16;
    struct bufferevent **p = realloc(h->fresh, cap * sizeof *p);
    if (!p)
      return bev; /* not counted: evhttp still serves it */
    h->fresh = p;
    h->capfresh = cap;
  }
  bufferevent_incref(bev);
  h->fresh[h->nfresh++] = bev;
  return bev;
}

/* Counts a new connection (until on_conn_closed), or refuses it past the limit when it may. */
static void admit(struct gpumd_http *h, struct bufferevent *bev, struct evhttp_connection *evcon,
                  bool may_refuse, const char *busy, size_t busy_len) {
  /* Responses go out whole: without this, a reply of more than one segment waits for the
   * client's delayed ACK (about 40 ms) before its last piece leaves. */
  int one = 1;
  if (setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
    gpum_log(GPUM_LOG_DEBUG, "gpumd", "HTTP: TCP_NODELAY: %s", strerror(errno));
  if (may_refuse && h->live >= h->max_conns) {
    ssize_t w = send(bufferevent_getfd(bev), busy, busy_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w; /* a fresh socket's buffer takes it; if not, the close says enough */
    gpum_log(GPUM_LOG_WARN, "gpumd",
             "HTTP: %zu connections open (http.max_connections): one "
             "refused",
             h->live);
    evhttp_connection_free(evcon);
    return;
  }
  struct gpumd_http_conn *c = calloc(1, sizeof *c);
  if (c)
    c->deadline = evtimer_new(bufferevent_get_base(bev), on_deadline, c);
  if (!c || !c->deadline) {
    free(c);
    gpum_log(GPUM_LOG_ERROR, "gpumd", "HTTP: out of memory: a connection refused");
    evhttp_connection_free(evcon);
    return;
  }
  c->h = h;
  c->evcon = evcon;
  struct gpumd_http_conn **slot = conn_slot(h, evcon);
  c->next = *slot;
  *slot = c;
  event_add(c->deadline, &h->request_tv);
  evhttp_connection_set_closecb(evcon, on_conn_closed, c);
  h->live++;
}

/* The connections accepted this turn: counted (until on_conn_closed), or answered 503 and
 * closed past the limit; current (the connection of a request being served, or NULL) is
 * always counted: its request is in hand. */
void gpumd__http_check_fresh(struct gpumd_http *h, struct evhttp_connection *current) {
  static const char body[] = "{\"error\":{\"code\":\"EAGAIN\",\"message\":\"too many connections "
                             "(http.max_connections)\"}}\n";
  char busy[512];
  int n = snprintf(busy, sizeof busy,
                   "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                   "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
                   sizeof body - 1, body);
  for (size_t i = 0; i < h->nfresh; i++) {
    bufferevent_data_cb rd, wr;
    bufferevent_event_cb ev;
    void *cbarg = NULL;
    bufferevent_getcb(h->fresh[i], &rd, &wr, &ev, &cbarg);
    struct evhttp_connection *evcon = cbarg; /* evhttp's callback argument; NULL: freed */
    if (evcon)
      admit(h, h->fresh[i], evcon, evcon != current, busy, (size_t)n);
    bufferevent_decref(h->fresh[i]);
  }
  h->nfresh = 0;
}
