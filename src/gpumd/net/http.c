/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's HTTP face (docs/rest.md): a libevent evhttp server on the daemon's own event loop,
 * listening on http.listen. This file starts and stops it: the listening address (port 0 =
 * any free port, written to STATE_DIR/http.addr), the limits taken from the configuration,
 * and the hooks into evhttp. The pieces:
 *   http_token.c   the bearer token (created 0600 at first start, re-read on SIGHUP, rotated
 *                  over the socket protocol)
 *   http_router.c  the routes, the request checks (auth, body, query) and the dispatch to the
 *                  endpoints of http_api.c
 *   http_reply.c   responses with their one error shape {"error": {"code", "message"}}, held
 *                  for the end of the turn and sent after the ledger's commit
 *                  (gpumd_http_flush; or gpumd_http_seal and gpumd_http_release when the
 *                  ledger's writer thread commits it), so no HTTP client sees a state that is
 *                  not durable
 *   http_conns.c   connections and their limits (count, unread input, a deadline per request:
 *                  a slow, stalled or flooding client never blocks the loop nor holds memory or
 *                  a connection slot, it is dropped)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/http.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "http_internal.h"
#include "obs_internal.h"
#include "accept_internal.h"
#include "net.h"

/* ---- start and stop ---------------------------------------------------------------------- */

/* Splits "HOST:PORT" / "[V6]:PORT" into host and port; tells whether host is loopback. */
int gpumd_http_parse_listen(const char *s, char *host, size_t hlen, unsigned *port,
                            bool *loopback) {
  const char *colon = strrchr(s, ':');
  if (!colon || colon == s)
    return gpum_error(GPUM_EINVAL, "http.listen '%s': expected HOST:PORT such as 127.0.0.1:8642",
                      s);
  const char *h0 = s, *h1 = colon;
  if (*s == '[') {
    if (colon[-1] != ']')
      return gpum_error(GPUM_EINVAL, "http.listen '%s': expected [IPV6]:PORT", s);
    h0 = s + 1;
    h1 = colon - 1;
  }
  size_t n = (size_t)(h1 - h0);
  if (n == 0 || n >= hlen)
    return gpum_error(GPUM_EINVAL, "http.listen '%s': bad host", s);
  if (*s != '[' && memchr(h0, ':', n))
    return gpum_error(GPUM_EINVAL, "http.listen '%s': write an IPv6 address as [ADDR]:PORT", s);
  memcpy(host, h0, n);
  host[n] = '\0';
  if (!strcmp(host, "localhost"))
    memcpy(host, "127.0.0.1", 10);
  char *end = NULL;
  errno = 0;
  unsigned long p = strtoul(colon + 1, &end, 10);
  if (!colon[1] || errno || *end || p > 65535)
    return gpum_error(GPUM_EINVAL, "http.listen '%s': port must be 0 to 65535", s);
  *port = (unsigned)p;
  struct in_addr a4;
  struct in6_addr a6;
  if (inet_pton(AF_INET, host, &a4) == 1)
    *loopback = (ntohl(a4.s_addr) >> 24) == 127;
  else if (inet_pton(AF_INET6, host, &a6) == 1)
    *loopback = IN6_IS_ADDR_LOOPBACK(&a6);
  else
    return gpum_error(GPUM_EINVAL, "http.listen '%s': the host must be an IP address or localhost",
                      s);
  return 0;
}

/* Records the bound address in h->addr and STATE_DIR/http.addr. */
static int note_addr(gpumd_t *d, struct gpumd_http *h, const char *host) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getsockname(evhttp_bound_socket_get_fd(h->sock), (struct sockaddr *)&ss, &len) != 0)
    return gpum_error(GPUM_EIO, "getsockname: %s", strerror(errno));
  unsigned port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)&ss)->sin_port);
  bool v6 = strchr(host, ':') != NULL;
  snprintf(h->addr, sizeof h->addr, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "", port);
  char path[PATH_MAX + 16], tmp[PATH_MAX + 24];
  snprintf(path, sizeof path, "%s/http.addr", d->state_dir);
  snprintf(tmp, sizeof tmp, "%s.new", path);
  FILE *f = fopen(tmp, "we");
  if (!f || fprintf(f, "%s\n", h->addr) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
    gpum_log(GPUM_LOG_WARN, "gpumd", "cannot write %s: %s", path, strerror(errno));
  return 0;
}

int gpumd_http_start(gpumd_t *d) {
  const char *listen = gpum_config_get_string(d->cfg, "http.listen");
  if (!listen || !*listen || !strcmp(listen, "off"))
    return 0;
  char host[64];
  unsigned port = 0;
  bool loopback = false;
  int rc = gpumd_http_parse_listen(listen, host, sizeof host, &port, &loopback);
  if (rc != 0)
    return rc;
  if (!loopback && gpum_config_source(d->cfg, "http.token_file") == GPUM_OPT_SRC_DEFAULT)
    return gpum_error(GPUM_EINVAL,
                      "http.listen %s is not a loopback address: set http.token_file (every "
                      "call then needs its token), or listen on 127.0.0.1",
                      listen);
  struct gpumd_http *h = calloc(1, sizeof *h);
  if (!h)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  d->http = h;
  h->d = d;
  h->loopback = loopback;
  h->max_body = (size_t)gpum_config_get_size(d->cfg, "http.max_body");
  h->max_conns = (size_t)gpum_config_get_int(d->cfg, "http.max_connections");
  h->max_per_peer = (size_t)gpum_config_get_int(d->cfg, "http.max_connections_per_peer");
  rc = gpumd__http_token_path(d, h->token_path, sizeof h->token_path);
  if (rc == 0)
    rc = gpumd_http_token_load(h->token_path, true, h->token, sizeof h->token);
  if (rc != 0)
    return rc;
  h->http = evhttp_new(d->base);
  if (!h->http)
    return gpum_error(GPUM_ENOMEM, "cannot create the HTTP server");
  /* evhttp's own limit is a backstop above max_body (bounded memory per connection); bodies
   * between the two get our JSON 413. */
  uint64_t hdr = gpum_config_get_size(d->cfg, "http.max_header");
  evhttp_set_max_headers_size(h->http, (ev_ssize_t)(hdr ? hdr : 1));
  evhttp_set_max_body_size(h->http, (ev_ssize_t)(h->max_body * 4 + 4096));
  gpumd__http_set_input_limit((size_t)hdr + h->max_body * 4 + 4096 + 65536);
  uint64_t to = gpum_config_get_duration(d->cfg, "http.timeout");
  struct timeval tv = {.tv_sec = (time_t)(to / 1000), .tv_usec = (suseconds_t)(to % 1000) * 1000};
  if (to == 0)
    tv.tv_sec = 10;
  evhttp_set_timeout_tv(h->http, &tv);
  h->request_tv = tv;
  h->nbuckets = 1024;
  h->conns = calloc(h->nbuckets, sizeof *h->conns);
  h->peers = calloc(h->nbuckets, sizeof *h->peers);
  if (!h->conns || !h->peers)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                                          EVHTTP_REQ_DELETE | EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH |
                                          EVHTTP_REQ_OPTIONS);
  evhttp_set_gencb(h->http, d->hooks.http_request, h);
  evhttp_set_bevcb(h->http, gpumd__http_make_bev, h);
  h->sock = evhttp_bind_socket_with_handle(h->http, host, (ev_uint16_t)port);
  if (!h->sock)
    return gpum_error(GPUM_EIO, "cannot listen on http.listen %s: %s", listen, strerror(errno));
  /* Without an error callback libevent logs every failed accept and tries again at once: out
   * of descriptors, that spins the loop. */
  rc = gpumd_accept_guard_init(&h->accept_guard, d, evhttp_bound_socket_get_listener(h->sock),
                               "HTTP");
  if (rc != 0)
    return rc;
  rc = note_addr(d, h, host);
  if (rc != 0)
    return rc;
  gpum_log(GPUM_LOG_INFO, "gpumd", "REST API on http://%s (token in %s)", h->addr, h->token_path);
  return 0;
}

void gpumd_http_stop(gpumd_t *d) {
  struct gpumd_http *h = d->http;
  if (!h)
    return;
  gpumd_accept_guard_free(&h->accept_guard);
  gpumd__http_fork_stop(h);
  if (h->http)
    evhttp_free(h->http); /* closes the connections; unsent replies go with them */
  for (size_t i = 0; i < h->nfresh; i++)
    bufferevent_decref(h->fresh[i]);
  for (size_t i = 0; h->conns && i < h->nbuckets; i++)
    while (h->conns[i]) /* none: evhttp_free closed them all (their close callbacks ran) */
      gpumd__http_conn_forget(h, h->conns[i]);
  free(h->conns);
  free(h->peers); /* empty: each peer went with its last connection */
  if (h->addr[0]) {
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/http.addr", d->state_dir);
    unlink(path); /* no stale address for the next reader */
  }
  free(h->pend);
  free(h->held);
  free(h->fresh);
  explicit_bzero(h->token, sizeof h->token);
  free(h);
  d->http = NULL;
}

uint64_t gpumd_http_accept_failures(gpumd_t *d) {
  return d->http ? d->http->accept_guard.failures : 0;
}

uint64_t gpumd_http_evicted(gpumd_t *d) {
  return d->http ? d->http->evicted : 0;
}

void gpumd_http_forked_reads(gpumd_t *d, uint64_t *answered, uint64_t *failed) {
  *answered = d->http ? d->http->forks_answered : 0;
  *failed = d->http ? d->http->forks_failed : 0;
}

const char *gpumd_http_addr(gpumd_t *d) {
  return d->http && d->http->addr[0] ? d->http->addr : NULL;
}
