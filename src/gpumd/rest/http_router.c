/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's HTTP router: the table of routes (path, methods, handler, whether it changes state),
 * the checks every request goes through (connection limit, method, who calls: the token, or
 * on loopback the owner of the caller's socket, JSON body, query parameters) and the dispatch
 * to the
 * endpoints of http_api.c, /metrics (metrics.c), the event stream (sse.c) and the dashboard
 * (http_web.c).
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "http_internal.h"
#include "obs_internal.h"
#include "json_in.h"
#include "net.h"
#include "obs.h"
#include "rest.h"
#include "sched.h"
#include "web_internal.h"

/* ---- router ------------------------------------------------------------------------------ */

enum {
  M_GET = EVHTTP_REQ_GET | EVHTTP_REQ_HEAD,
  M_POST = EVHTTP_REQ_POST,
  M_DEL = EVHTTP_REQ_DELETE
};

typedef struct {
  const char *path; /* exact; "{ID}" matches one segment */
  int method;
  gpumd_http_fn fn;
  bool mutating;
  /* NULL, or whether the answer is large enough to be made in a child (http_fork.c): a GET
   * that would hold the loop for milliseconds. */
  bool (*large)(const gpumd_http_call_t *call);
} route_t;

/* A list of this many live reservations costs the loop several milliseconds to render (about
 * 10 us each); a fork costs a fraction of one. */
#define LARGE_LIST 256

static bool large_list(const gpumd_http_call_t *call) {
  /* An owner given by name is looked up in the user database (NSS: files, or an LDAP server
   * away) in a child, never on the loop, whatever the list's size. */
  if (gpumd_http_owner_is_name(evhttp_find_header(call->query, "owner")))
    return true;
  if (gpumd_sched_count(call->d->sched) < LARGE_LIST)
    return false;
  /* A page asked smaller than that is rendered at once (a bad limit too: the handler says). */
  const char *ls = evhttp_find_header(call->query, "limit");
  char *end = NULL;
  long long limit = ls ? strtoll(ls, &end, 10) : LARGE_LIST;
  return !ls || !*ls || *end || limit >= LARGE_LIST;
}

/* Up to an hour of points per device: made in a child once the points kept could make an
 * answer of about a megabyte (some 60 bytes a point); a young gpumd's or a small node's is
 * rendered at once. */
#define LARGE_HISTORY 16384
static bool large_history(const gpumd_http_call_t *call) {
  return gpumd_history_points(call->d) >= LARGE_HISTORY;
}

static int route_metrics(gpumd_http_call_t *call);
static int route_events(gpumd_http_call_t *call);

static const route_t routes[] = {
    {"/api/v1/gpu/status", M_GET, gpumd_http_status, false, NULL},
    {"/api/v1/gpu/nodes", M_GET, gpumd_http_nodes, false, NULL},
    {"/api/v1/gpu/validate", M_POST, gpumd_http_validate, false, NULL},
    {"/api/v1/gpu/allocate", M_POST, gpumd_http_allocate, true, NULL},
    {"/api/v1/reservations", M_GET, gpumd_http_resv_list, false, large_list},
    {"/api/v1/reservations/{ID}", M_GET, gpumd_http_resv_get, false, NULL},
    {"/api/v1/reservations/{ID}", M_DEL, gpumd_http_resv_delete, true, NULL},
    {"/api/v1/reservations/{ID}/renew", M_POST, gpumd_http_resv_renew, true, NULL},
    {"/api/v1/reservations/{ID}/suspend", M_POST, gpumd_http_resv_suspend, true, NULL},
    {"/api/v1/reservations/{ID}/resume", M_POST, gpumd_http_resv_resume, true, NULL},
    {"/api/v1/gpu/setup-pytorch", M_POST, gpumd_http_setup_pytorch, false, NULL},
    {"/api/v1/gpu/setup-tensorflow", M_POST, gpumd_http_setup_tensorflow, false, NULL},
    {"/api/v1/gpu/health", M_GET, gpumd_http_health, false, NULL},
    {"/api/v1/gpu/devices/{ID}/disable", M_POST, gpumd_http_device_disable, true, NULL},
    {"/api/v1/gpu/devices/{ID}/enable", M_POST, gpumd_http_device_enable, true, NULL},
    {"/api/v1/gpu/monitoring", M_GET, gpumd_http_monitoring, false, NULL},
    {"/api/v1/gpu/history", M_GET, gpumd_http_history, false, large_history},
    {"/api/v1/alerts", M_GET, gpumd_http_alerts, false, NULL},
    {"/api/v1/config", M_GET, gpumd_http_config, false, NULL},
    {"/api/v1/events", M_GET, route_events, false, NULL},
    {"/metrics", M_GET, route_metrics, false, NULL},
};

/* Matches path against pattern; the {ID} segment (at most 63 bytes) goes to id. */
bool gpumd_http_path_match(const char *pattern, const char *path, char *id, size_t idlen) {
  const char *brace = strstr(pattern, "{ID}");
  if (!brace)
    return strcmp(pattern, path) == 0;
  size_t pre = (size_t)(brace - pattern);
  if (strncmp(pattern, path, pre) != 0)
    return false;
  const char *seg = path + pre, *end = strchr(seg, '/');
  size_t n = end ? (size_t)(end - seg) : strlen(seg);
  if (n == 0 || n >= idlen || strcmp(brace + 4, end ? end : "") != 0)
    return false;
  memcpy(id, seg, n);
  id[n] = '\0';
  return true;
}

static const char *method_name(int m) {
  return m == M_GET ? "GET, HEAD" : m == M_POST ? "POST" : "DELETE";
}

int gpumd_http_tokenless_rule(bool listener_loopback, bool owner_known, bool mutating,
                              const char **msg) {
  if (!listener_loopback) {
    *msg = "gpumd listens on a non-loopback address: every call needs Authorization: Bearer "
           "TOKEN (gpum http-token shows it)";
    return 401;
  }
  if (mutating && !owner_known) {
    *msg = "this call changes state and needs Authorization: Bearer TOKEN (gpum http-token "
           "shows it): the owner of this connection's socket could not be found";
    return 401;
  }
  return 0;
}

/* Who calls, and whether they may (docs/rest.md, Security): with a token, an admin acting as
 * gpumd; without one, on a loopback listener, the owner of the caller's socket when it is
 * found (*owner), an admin when root or in admin_group. Returns 0, or the status to refuse
 * with (401, 403) and sets *msg. */
static int authorize(struct gpumd_http *h, struct evhttp_request *req, bool mutating, bool *admin,
                     gpumd_http_owner_t *owner, const char **msg) {
  const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
  *admin = false;
  memset(owner, 0, sizeof *owner);
  if (auth) {
    if (strncasecmp(auth, "Bearer ", 7) != 0) {
      *msg = "the Authorization header must be \"Bearer TOKEN\"";
      return 401;
    }
    const char *t = auth + 7;
    while (*t == ' ')
      t++;
    size_t n = strlen(t);
    while (n > 0 && t[n - 1] == ' ')
      n--;
    if (!gpumd_http_token_matches(h->token, t, n)) {
      *msg = "wrong API token";
      return 403;
    }
    *admin = true;
    return 0;
  }
  if (h->loopback)
    gpumd__http_peer_owner(h, evhttp_request_get_connection(req), owner);
  *admin = owner->known && owner->admin;
  return gpumd_http_tokenless_rule(h->loopback, owner->known, mutating, msg);
}

/* Parses the request body into call->body: an object, {} when empty. */
static int parse_body(struct gpumd_http *h, struct evhttp_request *req, json_t **out, int *status) {
  struct evbuffer *in = evhttp_request_get_input_buffer(req);
  size_t len = evbuffer_get_length(in);
  *status = 400;
  if (len > h->max_body) {
    *status = 413;
    return gpum_error(GPUM_ERANGE, "request body of %zu bytes is over http.max_body (%zu bytes)",
                      len, h->max_body);
  }
  if (len == 0) {
    *out = json_object();
    return 0;
  }
  const char *text = (const char *)evbuffer_pullup(in, -1);
  if (!text)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  if (gpumd_json_depth(text, len, GPUMD_MAX_DEPTH) > GPUMD_MAX_DEPTH)
    return gpum_error(GPUM_EPROTO, "body nested deeper than %d levels", GPUMD_MAX_DEPTH);
  json_error_t jerr;
  json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
  if (!j)
    return gpum_error(GPUM_EPARSE, "malformed JSON at byte %d: %s", jerr.position, jerr.text);
  if (!json_is_object(j)) {
    json_decref(j);
    return gpum_error(GPUM_EINVAL, "the body must be a JSON object");
  }
  *out = j;
  return 0;
}

int gpumd_http_check_query(gpumd_http_call_t *call, const char *const *allowed) {
  for (struct evkeyval *kv = call->query->tqh_first; kv; kv = kv->next.tqe_next) {
    bool ok = false;
    for (const char *const *a = allowed; *a && !ok; a++)
      ok = strcmp(*a, kv->key) == 0;
    if (!ok)
      return gpum_error(GPUM_EINVAL, "unknown query parameter '%.64s'", kv->key);
    for (struct evkeyval *o = call->query->tqh_first; o != kv; o = o->next.tqe_next)
      if (strcmp(o->key, kv->key) == 0)
        return gpum_error(GPUM_EINVAL, "query parameter '%.64s' given twice", kv->key);
  }
  return 0;
}

void gpumd_http_reply_raw(gpumd_http_call_t *call, const char *content_type) {
  struct evkeyvalq *hd = evhttp_request_get_output_headers(call->req);
  evhttp_add_header(hd, "Content-Type", content_type);
  evhttp_add_header(hd, "Cache-Control", "no-store");
  gpumd__http_queue_reply(call->d->http, call->req, 200);
  call->status = -1; /* answered */
}

static int route_metrics(gpumd_http_call_t *call) {
  struct evbuffer *out = evhttp_request_get_output_buffer(call->req);
  int rc = gpumd_metrics_render(call->d, out);
  if (rc != 0) {
    evbuffer_drain(out, evbuffer_get_length(out));
    return rc;
  }
  gpumd_http_reply_raw(call, "text/plain; version=0.0.4; charset=utf-8");
  return 0;
}

static int route_events(gpumd_http_call_t *call) {
  /* The stream module takes the connection over with its own close callback and its own
   * limit on streams: it no longer counts against http.max_connections. */
  struct gpumd_http *h = call->d->http;
  if (evhttp_request_get_command(call->req) == EVHTTP_REQ_HEAD) {
    gpumd_http_reply_raw(call, "text/event-stream; charset=utf-8"); /* the headers only */
    return 0;
  }
  struct evhttp_connection *evcon = evhttp_request_get_connection(call->req);
  gpumd_sse_open(call->d, call->req); /* takes the request over, or answers 503 */
  if (evcon && gpumd_sse_is_stream(call->d, call->req))
    gpumd__http_uncount(h, evcon); /* a refused one stays an ordinary, counted connection */
  else
    gpumd__http_request_deadline(h, evcon,
                                 true); /* answered at once: the next request's deadline */
  call->status = -1;
  return 0;
}

static void dispatch(struct gpumd_http *h, struct evhttp_request *req, const route_t *r,
                     const char *id, bool admin, const gpumd_http_owner_t *owner) {
  gpumd_http_call_t call = {.d = h->d,
                            .req = req,
                            .id = id,
                            .admin = admin,
                            .peer_known = owner->known,
                            .peer_uid = owner->uid,
                            .status = 200};
  struct evkeyvalq query;
  query.tqh_first = NULL; /* TAILQ_INIT without <sys/queue.h> */
  query.tqh_last = &query.tqh_first;
  call.query = &query;
  int status = 400, rc = 0;
  const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
  if (q && *q && evhttp_parse_query_str(q, &query) != 0)
    rc = gpum_error(GPUM_EINVAL, "malformed query string");
  else if (q && strcasestr(q, "%00")) /* decoded, it would cut the value short unseen */
    rc = gpum_error(GPUM_EINVAL, "a NUL byte (%%00) in the query string");
  if (rc == 0 && r->method == M_GET)
    call.body = json_object();
  else if (rc == 0)
    rc = parse_body(h, req, &call.body, &status);
  if (rc != 0) {
    gpumd__http_reply_error(h, req, status, rc, gpum_last_error());
  } else if (!(r->large && r->large(&call) && gpumd__http_fork(h, &call, r->fn))) {
    gpum_error_clear();
    gpumd__http_answer(h, &call, r->fn(&call));
  }
  json_decref(call.body);
  evhttp_clear_headers(&query);
}

void gpumd_rest_on_request(struct evhttp_request *req, void *arg) {
  struct gpumd_http *h = arg;
  h->served++;
  /* Its request is in: it stops waiting (and so can no longer be closed to make room) before
   * the connections accepted this turn are counted, which may close waiting ones. */
  gpumd__http_request_deadline(h, evhttp_request_get_connection(req), false);
  if (h->nfresh) /* no connection is served before it is counted */
    gpumd__http_check_fresh(h, evhttp_request_get_connection(req));
  const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
  if (path && gpumd_web_serve(h, req, path)) /* the dashboard: / and /assets/ (http_web.c) */
    return;
  int method = (int)evhttp_request_get_command(req);
  const route_t *found = NULL;
  int allowed = 0;
  char id[64] = "";
  for (size_t i = 0; path && i < sizeof routes / sizeof routes[0]; i++) {
    if (!gpumd_http_path_match(routes[i].path, path, id, sizeof id))
      continue;
    allowed |= routes[i].method;
    if (routes[i].method & method) {
      found = &routes[i];
      break;
    }
  }
  if (!found && allowed) {
    char allow[64] = "";
    for (int m = 0, k = 0; m < 3; m++) {
      int bit = m == 0 ? M_GET : m == 1 ? M_POST : M_DEL;
      if (allowed & bit)
        k += snprintf(allow + k, sizeof allow - (size_t)k, "%s%s", k ? ", " : "", method_name(bit));
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    char msg[128];
    snprintf(msg, sizeof msg, "method not allowed here (allowed: %s)", allow);
    gpumd__http_reply_error(h, req, 405, GPUM_ENOTSUP, msg);
    return;
  }
  if (!found) {
    char msg[200];
    snprintf(msg, sizeof msg, "no such endpoint: %.120s (see docs/rest.md)", path ? path : "?");
    gpumd__http_reply_error(h, req, 404, GPUM_ENOENT, msg);
    return;
  }
  bool admin = false;
  gpumd_http_owner_t owner;
  const char *why = NULL;
  int refuse = authorize(h, req, found->mutating, &admin, &owner, &why);
  if (refuse) {
    gpumd__http_reply_error(h, req, refuse, GPUM_EPERM, why);
    return;
  }
  dispatch(h, req, found, strstr(found->path, "{ID}") ? id : NULL, admin, &owner);
}
