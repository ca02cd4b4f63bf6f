/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's HTTP connections and their limits: each accepted connection is counted against
 * http.max_connections and its remote address's http.max_connections_per_peer (past either,
 * the connection that has waited longest for a request makes room, or the new one is answered
 * 503 when every one is busy), given a deadline for each request (http.timeout, which evhttp
 * only applies to idle time), and closed when it sends more than any request can hold; and who
 * a loopback caller is (the owner of its socket), found once per connection.
 */
#include <arpa/inet.h>
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

#include "os_internal.h"
#include "http_internal.h"
#include "obs_internal.h"
#include "accept_internal.h"
#include "net.h"

/* ---- connections and their limit ---------------------------------------------------------- */

/* A counted connection: its deadline for the request it is reading. evhttp's own timeout
 * (http.timeout) is an idle timeout, restarted by every byte read: a client that trickles a
 * byte at a time would hold its connection (and a slot of http.max_connections) forever. So
 * each request must also arrive whole within http.timeout of the connection being ready for
 * it (accepted, or its previous response handed to evhttp); past that the connection is
 * closed.
 *
 * While it waits for a request (its deadline armed), a connection is on two lists in the
 * order it began waiting: every waiting connection, and its peer's. When a new connection
 * would pass http.max_connections_per_peer, its address's connection waiting longest that has
 * nothing left to write is closed to make room; past http.max_connections, the one waiting
 * longest of the address holding the most connections. So idle connections cannot lock the
 * API out, whoever opens them and however often they reconnect: an address that floods makes
 * room with its own connections. Only when every connection concerned is busy with a request
 * is the new one refused (503). */
struct gpumd_http_conn {
  struct gpumd_http *h;
  struct evhttp_connection *evcon;
  struct event *deadline;
  struct gpumd_http_conn *next; /* hash chain */
  struct gpumd_http_peer *peer;
  bool waiting;                          /* on the waiting lists */
  uint64_t waiting_ns;                   /* when it began waiting (monotonic) */
  struct gpumd_http_conn *wprev, *wnext; /* every waiting connection */
  struct gpumd_http_conn *pprev, *pnext; /* its peer's waiting connections */
  bool owner_looked;                     /* owner was looked up (gpumd__http_peer_owner) */
  gpumd_http_owner_t owner;
};

/* A remote address with counted connections: an IPv4 address, or an IPv6 address's /64
 * (one host is commonly given a whole /64, so its addresses are one peer). */
struct gpumd_http_peer {
  unsigned char key[9];                /* family (4 or 6), then 4 or 8 bytes of address */
  size_t count;                        /* counted connections */
  struct gpumd_http_conn *head, *tail; /* its waiting connections, longest waiting first */
  struct gpumd_http_peer *next;        /* hash chain */
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

/* The peer key of a connected socket; false when it has no IP peer address. */
static bool peer_key(int fd, unsigned char key[9]) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  memset(key, 0, 9);
  if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0)
    return false;
  if (ss.ss_family == AF_INET) {
    key[0] = 4;
    memcpy(key + 1, &((struct sockaddr_in *)&ss)->sin_addr, 4);
    return true;
  }
  if (ss.ss_family != AF_INET6)
    return false;
  const unsigned char *a = ((struct sockaddr_in6 *)&ss)->sin6_addr.s6_addr;
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (memcmp(a, mapped, sizeof mapped) == 0) { /* ::ffff:a.b.c.d is the IPv4 peer a.b.c.d */
    key[0] = 4;
    memcpy(key + 1, a + 12, 4);
  } else {
    key[0] = 6;
    memcpy(key + 1, a, 8);
  }
  return true;
}

static const char *peer_name(const struct gpumd_http_peer *p, char *buf, size_t len) {
  unsigned char a[16] = {0};
  memcpy(a, p->key + 1, p->key[0] == 4 ? 4 : 8);
  if (!inet_ntop(p->key[0] == 4 ? AF_INET : AF_INET6, a, buf, (socklen_t)len))
    snprintf(buf, len, "?");
  else if (p->key[0] == 6 && strlen(buf) + 4 <= len)
    memcpy(buf + strlen(buf), "/64", 4);
  return buf;
}

/* The peer of key, created when missing (NULL: out of memory). */
static struct gpumd_http_peer *peer_get(struct gpumd_http *h, const unsigned char key[9]) {
  uint64_t x = 0xcbf29ce484222325ULL; /* FNV-1a */
  for (int i = 0; i < 9; i++)
    x = (x ^ key[i]) * 0x100000001b3ULL;
  struct gpumd_http_peer **p = &h->peers[x % h->nbuckets];
  while (*p && memcmp((*p)->key, key, 9) != 0)
    p = &(*p)->next;
  if (!*p) {
    *p = calloc(1, sizeof **p);
    if (*p)
      memcpy((*p)->key, key, 9);
  }
  return *p;
}

/* Drops one connection's hold on peer, which goes with the last one. */
static void peer_put(struct gpumd_http *h, struct gpumd_http_peer *peer) {
  if (!peer || --peer->count > 0)
    return;
  uint64_t x = 0xcbf29ce484222325ULL;
  for (int i = 0; i < 9; i++)
    x = (x ^ peer->key[i]) * 0x100000001b3ULL;
  struct gpumd_http_peer **p = &h->peers[x % h->nbuckets];
  while (*p && *p != peer)
    p = &(*p)->next;
  if (*p)
    *p = peer->next;
  free(peer);
}

static void waiting_del(struct gpumd_http *h, struct gpumd_http_conn *c) {
  if (!c->waiting)
    return;
  *(c->wprev ? &c->wprev->wnext : &h->waiting_head) = c->wnext;
  *(c->wnext ? &c->wnext->wprev : &h->waiting_tail) = c->wprev;
  if (c->peer) {
    *(c->pprev ? &c->pprev->pnext : &c->peer->head) = c->pnext;
    *(c->pnext ? &c->pnext->pprev : &c->peer->tail) = c->pprev;
  }
  c->wprev = c->wnext = c->pprev = c->pnext = NULL;
  c->waiting = false;
}

/* Puts c at the tail of the waiting lists: it begins waiting now. */
static void waiting_add(struct gpumd_http *h, struct gpumd_http_conn *c) {
  waiting_del(h, c);
  c->waiting = true;
  c->waiting_ns = gpum__os_mono_ns();
  c->wprev = h->waiting_tail;
  *(h->waiting_tail ? &h->waiting_tail->wnext : &h->waiting_head) = c;
  h->waiting_tail = c;
  if (c->peer) {
    c->pprev = c->peer->tail;
    *(c->peer->tail ? &c->peer->tail->pnext : &c->peer->head) = c;
    c->peer->tail = c;
  }
}

/* Forgets a counted connection (closed, or handed to the event streams). */
void gpumd__http_conn_forget(struct gpumd_http *h, struct gpumd_http_conn *c) {
  struct gpumd_http_conn **p = conn_slot(h, c->evcon);
  if (*p == c)
    *p = c->next;
  waiting_del(h, c);
  peer_put(h, c->peer);
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
  if (c && arm) {
    event_add(c->deadline, &h->request_tv);
    waiting_add(h, c);
  } else if (c) {
    event_del(c->deadline);
    waiting_del(h, c);
  }
}

void gpumd__http_uncount(struct gpumd_http *h, struct evhttp_connection *evcon) {
  struct gpumd_http_conn *c = *conn_slot(h, evcon);
  evhttp_connection_set_closecb(evcon, NULL, NULL);
  if (c)
    gpumd__http_conn_forget(h, c);
}

/* The connection waiting longest, of peer (or of all when NULL), that has nothing left to
 * write (a response still going out is not cut off); NULL when none. */
static struct gpumd_http_conn *longest_waiting(struct gpumd_http *h, struct gpumd_http_peer *peer) {
  for (struct gpumd_http_conn *c = peer ? peer->head : h->waiting_head; c;
       c = peer ? c->pnext : c->wnext) {
    struct bufferevent *bev = evhttp_connection_get_bufferevent(c->evcon);
    if (!bev || evbuffer_get_length(bufferevent_get_output(bev)) == 0)
      return c;
  }
  return NULL;
}

/* The connection to close to make room under http.max_connections: the one waiting longest
 * of the address that holds the most connections, so that an address that keeps reconnecting
 * makes room with its own connections and not with a newcomer's (whose request is still on
 * its way). NULL when every connection is busy. */
static struct gpumd_http_conn *victim_for_room(struct gpumd_http *h) {
  struct gpumd_http_conn *best = NULL;
  size_t best_count = 0;
  for (size_t b = 0; b < h->nbuckets; b++)
    for (struct gpumd_http_peer *p = h->peers[b]; p; p = p->next) {
      if (p->count < best_count || !p->head)
        continue;
      struct gpumd_http_conn *c = longest_waiting(h, p);
      if (c && (p->count > best_count || c->waiting_ns < best->waiting_ns)) {
        best = c;
        best_count = p->count;
      }
    }
  return best ? best : longest_waiting(h, NULL);
}

/* Closes victim to make room under the limit named; it is waiting, so no request of it is in
 * gpumd's hands. */
static void evict(struct gpumd_http *h, struct gpumd_http_conn *victim, const char *limit) {
  char who[INET6_ADDRSTRLEN + 4] = "?";
  if (victim->peer)
    peer_name(victim->peer, who, sizeof who);
  uint64_t waited = gpum__os_mono_ns() - victim->waiting_ns;
  gpum_log(GPUM_LOG_INFO, "gpumd",
           "HTTP: closed a connection from %s that waited %.1f s for a request, to make room "
           "(%s)",
           who, (double)waited / 1e9, limit);
  h->evicted++;
  gpumd_obs_changed(h->d->obs);          /* /metrics counts it */
  evhttp_connection_free(victim->evcon); /* its close callback forgets it */
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

/* Answers a connection refused because every connection concerned is busy, and closes it. */
static void refuse(struct gpumd_http *h, struct evhttp_connection *evcon, int fd,
                   const struct gpumd_http_peer *peer, const char *limit) {
  char body[160], busy[512], who[INET6_ADDRSTRLEN + 4] = "?";
  if (peer)
    peer_name(peer, who, sizeof who);
  int m = snprintf(body, sizeof body,
                   "{\"error\":{\"code\":\"EAGAIN\",\"message\":\"too many connections, every one "
                   "busy with a request (%s)\"}}\n",
                   limit);
  int n = snprintf(busy, sizeof busy,
                   "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                   "Connection: close\r\nContent-Length: %d\r\n\r\n%s",
                   m, body);
  ssize_t w = send(fd, busy, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)w; /* a fresh socket's buffer takes it; if not, the close says enough */
  gpum_log(GPUM_LOG_WARN, "gpumd",
           "HTTP: %zu connections open (%zu from %s), every one busy with a request (%s): a new "
           "one refused",
           h->live, peer ? peer->count - 1 : 0, who, limit);
  evhttp_connection_free(evcon);
}

/* Counts a new connection (until on_conn_closed): past a limit, a waiting connection is closed
 * to make room; when none can be, the new one is refused, unless its request is being served
 * (in_request), which then counts it as busy rather than waiting. */
static void admit(struct gpumd_http *h, struct bufferevent *bev, struct evhttp_connection *evcon,
                  bool in_request) {
  /* Responses go out whole: without this, a reply of more than one segment waits for the
   * client's delayed ACK (about 40 ms) before its last piece leaves. */
  int fd = bufferevent_getfd(bev), one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
    gpum_log(GPUM_LOG_DEBUG, "gpumd", "HTTP: TCP_NODELAY: %s", strerror(errno));
  unsigned char key[9];
  struct gpumd_http_peer *peer = peer_key(fd, key) ? peer_get(h, key) : NULL;
  if (peer)
    peer->count++; /* the newcomer's hold: an eviction below never frees its peer */
  const char *limit = NULL;
  struct gpumd_http_conn *victim = NULL;
  if (peer && peer->count > h->max_per_peer) {
    limit = "http.max_connections_per_peer";
    victim = longest_waiting(h, peer);
  } else if (h->live >= h->max_conns) {
    limit = "http.max_connections";
    victim = victim_for_room(h);
  }
  if (limit && !victim && !in_request) {
    refuse(h, evcon, fd, peer, limit);
    peer_put(h, peer);
    return;
  }
  if (victim)
    evict(h, victim, limit);
  struct gpumd_http_conn *c = calloc(1, sizeof *c);
  if (c)
    c->deadline = evtimer_new(bufferevent_get_base(bev), on_deadline, c);
  if (!c || !c->deadline) {
    free(c);
    gpum_log(GPUM_LOG_ERROR, "gpumd", "HTTP: out of memory: a connection refused");
    peer_put(h, peer);
    evhttp_connection_free(evcon);
    return;
  }
  c->h = h;
  c->evcon = evcon;
  c->peer = peer;
  struct gpumd_http_conn **slot = conn_slot(h, evcon);
  c->next = *slot;
  *slot = c;
  evhttp_connection_set_closecb(evcon, on_conn_closed, c);
  h->live++;
  if (!in_request) { /* else it waits from when its response is handed over */
    event_add(c->deadline, &h->request_tv);
    waiting_add(h, c);
  }
}

/* The connections accepted this turn: counted (until on_conn_closed), making room past a
 * limit, or answered 503 and closed when none can be made; current (the connection of a request
 * being served, or NULL) is always counted: its request is in hand. */
void gpumd__http_check_fresh(struct gpumd_http *h, struct evhttp_connection *current) {
  for (size_t i = 0; i < h->nfresh; i++) {
    bufferevent_data_cb rd, wr;
    bufferevent_event_cb ev;
    void *cbarg = NULL;
    bufferevent_getcb(h->fresh[i], &rd, &wr, &ev, &cbarg);
    struct evhttp_connection *evcon = cbarg; /* evhttp's callback argument; NULL: freed */
    if (evcon)
      admit(h, h->fresh[i], evcon, evcon == current);
    bufferevent_decref(h->fresh[i]);
  }
  h->nfresh = 0;
}

/* ---- who a loopback caller is ---------------------------------------------------------------- */

/* How long sock_diag may take to answer (it answers within the request; this only bounds a
 * kernel that does not). */
#define GPUMD_HTTP_OWNER_TIMEOUT_MS 50

/* 127.0.0.0/8, ::1 or ::ffff:127.x.y.z: a peer in gpumd's own network namespace. */
static bool loopback_peer(const struct sockaddr_storage *ss) {
  if (ss->ss_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
  if (ss->ss_family != AF_INET6)
    return false;
  const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
  return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

static void owner_lookup(struct gpumd_http *h, struct evhttp_connection *evcon,
                         gpumd_http_owner_t *out) {
  memset(out, 0, sizeof *out);
  struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
  int fd = bev ? bufferevent_getfd(bev) : -1;
  struct sockaddr_storage local, remote;
  socklen_t llen = sizeof local, rlen = sizeof remote;
  if (fd < 0 || getsockname(fd, (struct sockaddr *)&local, &llen) != 0 ||
      getpeername(fd, (struct sockaddr *)&remote, &rlen) != 0 || !loopback_peer(&remote))
    return;
  char *host = NULL;
  ev_uint16_t port = 0;
  evhttp_connection_get_peer(evcon, &host, &port);
  gpum__os_sock_owner_t o;
  int rc = gpum__os_tcp_peer_owner((struct sockaddr *)&local, (struct sockaddr *)&remote,
                                   GPUM__OS_SOCK_NETLINK | GPUM__OS_SOCK_PROC,
                                   GPUMD_HTTP_OWNER_TIMEOUT_MS, &o);
  if (rc != 0) {
    gpum_log(GPUM_LOG_INFO, "gpumd",
             "HTTP: the owner of the socket of %s:%u is unknown (%s): its calls that change "
             "state need the API token",
             host ? host : "?", (unsigned)port, strerror(-rc));
    return;
  }
  out->known = true;
  out->uid = o.uid;
  out->admin = gpumd_server_is_admin(h->d, (uid_t)o.uid, (gid_t)-1);
  gpum_log(GPUM_LOG_DEBUG, "gpumd", "HTTP: %s:%u is uid %lu (socket inode %llu)%s",
           host ? host : "?", (unsigned)port, (unsigned long)o.uid, (unsigned long long)o.inode,
           out->admin ? " (admin)" : "");
}

void gpumd__http_peer_owner(struct gpumd_http *h, struct evhttp_connection *evcon,
                            gpumd_http_owner_t *out) {
  struct gpumd_http_conn *c = evcon ? *conn_slot(h, evcon) : NULL;
  if (c && c->owner_looked) {
    *out = c->owner;
    return;
  }
  if (evcon)
    owner_lookup(h, evcon, out);
  else
    memset(out, 0, sizeof *out);
  if (c) {
    c->owner = *out;
    c->owner_looked = true;
  }
}
