/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's HTTP face (docs/rest.md): a libevent evhttp server on the daemon's own event loop,
 * listening on http.listen. This file holds the server's frame: the listening address (port 0
 * = any free port, written to STATE_DIR/http.addr), the limits (connections, header and body
 * size, unread input, idle timeout and a deadline per request: a slow, stalled or flooding
 * client never blocks the loop nor holds memory or a connection slot, it is dropped), the
 * bearer token (created 0600 at first start, re-read on SIGHUP, rotated over the socket
 * protocol), the router with its one error shape {"error": {"code", "message"}}, and the
 * end-of-turn flush. Every response of a loop turn is held back and sent from gpumd_end_turn
 * after the ledger's commit (gpumd_http_flush; or gpumd_http_seal and gpumd_http_release when
 * the ledger's writer thread commits it), so no HTTP client sees a state that is not durable. The
 * endpoints are in http_api.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "http_internal.h"
#include "obs_internal.h"

#define TOKEN_MAX GPUMD_HTTP_TOKEN_MAX

/* ---- the bearer token ------------------------------------------------------------------- */

static int token_path(gpumd_t *d, char *buf, size_t len) {
  const char *p = gpum_config_get_string(d->cfg, "http.token_file");
  int n = p && *p ? snprintf(buf, len, "%s", p) : snprintf(buf, len, "%s/http.token", d->state_dir);
  if (n < 0 || (size_t)n >= len)
    return gpum_error(GPUM_EINVAL, "http.token_file: path too long");
  return 0;
}

/* Writes a fresh random token to path (through a temporary file and rename, mode 0600). */
static int token_write_new(const char *path, char *out, size_t outlen) {
  unsigned char raw[GPUMD_HTTP_TOKEN_HEX / 2];
  size_t got = 0;
  while (got < sizeof raw) {
    ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return gpum_error(GPUM_EIO, "getrandom failed: %s", strerror(errno));
    got += (size_t)n;
  }
  static const char hex[] = "0123456789abcdef";
  char tok[GPUMD_HTTP_TOKEN_HEX + 2];
  for (size_t i = 0; i < sizeof raw; i++) {
    tok[2 * i] = hex[raw[i] >> 4];
    tok[2 * i + 1] = hex[raw[i] & 15];
  }
  tok[GPUMD_HTTP_TOKEN_HEX] = '\n';
  tok[GPUMD_HTTP_TOKEN_HEX + 1] = '\0';
  char tmp[PATH_MAX + 8];
  snprintf(tmp, sizeof tmp, "%s.new", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return gpum_error(GPUM_EIO, "cannot create %s: %s", tmp, strerror(errno));
  bool ok = fchmod(fd, 0600) == 0 &&
            write(fd, tok, GPUMD_HTTP_TOKEN_HEX + 1) == (ssize_t)(GPUMD_HTTP_TOKEN_HEX + 1);
  ok = fsync(fd) == 0 && ok;
  int e = errno;
  close(fd);
  if (!ok || rename(tmp, path) != 0) {
    e = ok ? errno : e;
    unlink(tmp);
    return gpum_error(GPUM_EIO, "cannot write the HTTP token to %s: %s", path, strerror(e));
  }
  snprintf(out, outlen, "%.*s", GPUMD_HTTP_TOKEN_HEX, tok);
  return 0;
}

/* Reads the token in path into out; creates the file when missing and create is set. */
int gpumd_http_token_load(const char *path, bool create, char *out, size_t outlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ENOENT && create) {
    gpum_log(GPUM_LOG_INFO, "gpumd", "creating the HTTP API token in %s", path);
    return token_write_new(path, out, outlen);
  }
  if (fd < 0)
    return gpum_error(GPUM_EIO, "cannot open the HTTP token file %s: %s", path, strerror(errno));
  struct stat st;
  char buf[TOKEN_MAX + 2];
  ssize_t n = -1;
  int e = 0;
  bool open_mode = false;
  if (fstat(fd, &st) != 0)
    e = errno;
  else if (!S_ISREG(st.st_mode))
    e = EINVAL;
  else if (st.st_mode & 077)
    open_mode = true;
  else if ((n = read(fd, buf, sizeof buf - 1)) < 0)
    e = errno;
  close(fd);
  if (open_mode)
    return gpum_error(GPUM_EPERM,
                      "the HTTP token file %s is readable by others (mode %04o): chmod 600 it",
                      path, (unsigned)(st.st_mode & 07777));
  if (e != 0 || n < 0)
    return gpum_error(GPUM_EIO, "cannot read the HTTP token file %s: %s", path,
                      strerror(e ? e : EIO));
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
    n--;
  buf[n] = '\0';
  if (n < 16 || (size_t)n >= outlen || n > TOKEN_MAX)
    return gpum_error(GPUM_EINVAL, "the HTTP token in %s must be 16 to %d characters", path,
                      TOKEN_MAX);
  for (ssize_t i = 0; i < n; i++)
    if (buf[i] <= ' ' || buf[i] > '~')
      return gpum_error(GPUM_EINVAL, "the HTTP token in %s has a space or control character", path);
  memcpy(out, buf, (size_t)n + 1);
  return 0;
}

/* Constant-time: the time depends on the presented length only. */
bool gpumd_http_token_matches(const char *want, const char *got, size_t got_len) {
  size_t wl = strlen(want);
  unsigned char diff = (unsigned char)(wl != got_len);
  for (size_t i = 0; i < got_len; i++)
    diff |= (unsigned char)(got[i] ^ want[i % (wl ? wl : 1)]);
  return diff == 0 && wl > 0;
}

void gpumd_http_reload(gpumd_t *d) {
  struct gpumd_http *h = d->http;
  if (!h)
    return;
  char path[PATH_MAX], tok[sizeof h->token];
  if (token_path(d, path, sizeof path) != 0 ||
      gpumd_http_token_load(path, false, tok, sizeof tok) != 0) {
    gpum_log(GPUM_LOG_ERROR, "gpumd", "HTTP token not reloaded, keeping the old one: %s",
             gpum_last_error());
    return;
  }
  memcpy(h->token_path, path, sizeof path);
  memcpy(h->token, tok, sizeof tok);
  gpum_log(GPUM_LOG_INFO, "gpumd", "HTTP token reloaded from %s", path);
}

int gpumd_http_token_op(gpumd_t *d, bool rotate, json_t **out) {
  struct gpumd_http *h = d->http;
  if (!h)
    return gpum_error(GPUM_ESTATE, "the HTTP API is off (http.listen)");
  if (rotate) {
    char tok[sizeof h->token];
    int rc = token_write_new(h->token_path, tok, sizeof tok);
    if (rc != 0)
      return rc;
    memcpy(h->token, tok, sizeof tok);
    gpum_log(GPUM_LOG_INFO, "gpumd", "HTTP token rotated (%s)", h->token_path);
  }
  *out = json_pack("{s:s, s:s, s:b}", "token", h->token, "token_file", h->token_path, "rotated",
                   rotate);
  return *out ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
}

/* ---- responses ---------------------------------------------------------------------------- */

static const char *phrase(int status) {
  switch (status) {
  case 200:
    return "OK";
  case 201:
    return "Created";
  case 202:
    return "Accepted";
  case 400:
    return "Bad Request";
  case 401:
    return "Unauthorized";
  case 403:
    return "Forbidden";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 409:
    return "Conflict";
  case 413:
    return "Payload Too Large";
  case 422:
    return "Unprocessable Entity";
  case 503:
    return "Service Unavailable";
  default:
    return "Internal Server Error";
  }
}

int gpumd_http_status_of(int code) {
  switch (code) {
  case GPUM_EINVAL:
  case GPUM_EPARSE:
  case GPUM_EPROTO:
  case GPUM_ERANGE:
    return 400;
  case GPUM_EPERM:
    return 403;
  case GPUM_ENOENT:
  case GPUM_ENODEV:
    return 404;
  case GPUM_ESTATE:
  case GPUM_EEXIST:
  case GPUM_EBUSY:
    return 409;
  case GPUM_ENEVERFIT:
    return 422;
  case GPUM_EAGAIN:
  case GPUM_ETIMEDOUT:
    return 503;
  default:
    return 500;
  }
}

/* Queues req's response (headers and body already set) for the end of the turn. The answer
 * to HEAD is GET's without its body: evhttp would send a body it is given (and then no
 * Content-Length), which the client would read as the start of the next response. */
static void queue_reply(struct gpumd_http *h, struct evhttp_request *req, int status) {
  if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
    struct evbuffer *out = evhttp_request_get_output_buffer(req);
    char len[24];
    snprintf(len, sizeof len, "%zu", evbuffer_get_length(out));
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Length", len);
    evbuffer_drain(out, evbuffer_get_length(out));
  }
  if (h->npend == h->cappend) {
    size_t cap = h->cappend ? h->cappend * 2 : 16;
    gpumd_http_pending_t *p = realloc(h->pend, cap * sizeof *p);
    if (!p) {
      evhttp_send_reply(req, 500, phrase(500), NULL); /* nothing to order it behind */
      return;
    }
    h->pend = p;
    h->cappend = cap;
  }
  h->pend[h->npend++] = (gpumd_http_pending_t){.req = req, .status = status};
}

static void reply_json(struct gpumd_http *h, struct evhttp_request *req, int status, json_t *body) {
  struct evbuffer *out = evhttp_request_get_output_buffer(req);
  evbuffer_drain(out, evbuffer_get_length(out));
  if (!body || gpumd_json_write(out, body) != 0 || evbuffer_add(out, "\n", 1) != 0) {
    evbuffer_drain(out, evbuffer_get_length(out));
    evbuffer_add_printf(out, "{\"error\":{\"code\":\"ENOMEM\",\"message\":\"out of memory\"}}\n");
    status = 500;
  }
  json_decref(body);
  struct evkeyvalq *hd = evhttp_request_get_output_headers(req);
  evhttp_add_header(hd, "Content-Type", "application/json");
  evhttp_add_header(hd, "Cache-Control", "no-store");
  queue_reply(h, req, status);
}

/* Error messages quote the client's bytes (paths, query parameters, ids), which need not be
 * UTF-8 and may have been cut inside a character; a JSON string cannot hold those. */
void gpumd_http_utf8_clean(const char *msg, char *out, size_t outlen) {
  const unsigned char *s = (const unsigned char *)msg;
  size_t n = strlen(msg), o = 0;
  for (size_t i = 0; i < n && o + 1 < outlen;) {
    size_t k = gpumd_utf8_seq(s + i, n - i);
    if (k == 0) {
      out[o++] = '?';
      i++;
    } else if (o + k < outlen) {
      memcpy(out + o, s + i, k);
      o += k;
      i += k;
    } else {
      break;
    }
  }
  out[o] = '\0';
}

static void reply_error(struct gpumd_http *h, struct evhttp_request *req, int status, int code,
                        const char *msg) {
  const char *name = gpum_err_name(code);
  char clean[1024];
  gpumd_http_utf8_clean(msg && *msg ? msg : gpum_strerror(code), clean, sizeof clean);
  json_t *body = json_pack("{s:{s:s, s:s}}", "error", "code", name, "message", clean);
  if (status == 401)
    evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
                      "Bearer realm=\"gpumd\"");
  reply_json(h, req, status, body);
}

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
} route_t;

static int route_metrics(gpumd_http_call_t *call);
static int route_events(gpumd_http_call_t *call);
static void check_fresh(struct gpumd_http *h, struct evhttp_connection *current);
static void uncount(struct gpumd_http *h, struct evhttp_connection *evcon);
static void request_deadline(struct gpumd_http *h, struct evhttp_connection *evcon, bool arm);

static const route_t routes[] = {
    {"/api/v1/gpu/status", M_GET, gpumd_http_status, false},
    {"/api/v1/gpu/nodes", M_GET, gpumd_http_nodes, false},
    {"/api/v1/gpu/validate", M_POST, gpumd_http_validate, false},
    {"/api/v1/gpu/allocate", M_POST, gpumd_http_allocate, true},
    {"/api/v1/reservations", M_GET, gpumd_http_resv_list, false},
    {"/api/v1/reservations/{ID}", M_GET, gpumd_http_resv_get, false},
    {"/api/v1/reservations/{ID}", M_DEL, gpumd_http_resv_delete, true},
    {"/api/v1/reservations/{ID}/renew", M_POST, gpumd_http_resv_renew, true},
    {"/api/v1/gpu/setup-pytorch", M_POST, gpumd_http_setup_pytorch, false},
    {"/api/v1/gpu/setup-tensorflow", M_POST, gpumd_http_setup_tensorflow, false},
    {"/api/v1/gpu/health", M_GET, gpumd_http_health, false},
    {"/api/v1/gpu/monitoring", M_GET, gpumd_http_monitoring, false},
    {"/api/v1/alerts", M_GET, gpumd_http_alerts, false},
    {"/api/v1/config", M_GET, gpumd_http_config, false},
    {"/api/v1/events", M_GET, route_events, false},
    {"/metrics", M_GET, route_metrics, false},
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

/* The token check. Returns 0, or the status to refuse with (401, 403) and sets *msg. */
static int authorize(struct gpumd_http *h, struct evhttp_request *req, bool mutating, bool *admin,
                     const char **msg) {
  const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
  *admin = false;
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
  if (!h->loopback) {
    *msg = "gpumd listens on a non-loopback address: every call needs Authorization: Bearer "
           "TOKEN (gpum http-token shows it)";
    return 401;
  }
  if (mutating) {
    *msg = "this call changes state and needs Authorization: Bearer TOKEN (gpum http-token "
           "shows it)";
    return 401;
  }
  return 0;
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
  queue_reply(call->d->http, call->req, 200);
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
    uncount(h, evcon); /* a refused one stays an ordinary, counted connection */
  else
    request_deadline(h, evcon, true); /* answered at once: the next request's deadline */
  call->status = -1;
  return 0;
}

static void dispatch(struct gpumd_http *h, struct evhttp_request *req, const route_t *r,
                     const char *id, bool admin) {
  gpumd_http_call_t call = {.d = h->d, .req = req, .id = id, .admin = admin, .status = 200};
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
  if (rc == 0) {
    gpum_error_clear();
    rc = r->fn(&call);
    status = call.err_status ? call.err_status : gpumd_http_status_of(rc);
  }
  if (rc != 0)
    reply_error(h, req, status, rc, gpum_last_error());
  else if (call.status > 0)
    reply_json(h, req, call.status, call.out);
  else
    json_decref(call.out);
  json_decref(call.body);
  evhttp_clear_headers(&query);
  h->d->actor_conn = NULL;
  h->d->submit_id = 0;
}

static void on_request(struct evhttp_request *req, void *arg) {
  struct gpumd_http *h = arg;
  h->served++;
  if (h->nfresh) /* no connection is served before it is counted */
    check_fresh(h, evhttp_request_get_connection(req));
  request_deadline(h, evhttp_request_get_connection(req), false); /* it is in */
  const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
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
    reply_error(h, req, 405, GPUM_ENOTSUP, msg);
    return;
  }
  if (!found) {
    char msg[200];
    snprintf(msg, sizeof msg, "no such endpoint: %.120s (see docs/rest.md)", path ? path : "?");
    reply_error(h, req, 404, GPUM_ENOENT, msg);
    return;
  }
  bool admin = false;
  const char *why = NULL;
  int refuse = authorize(h, req, found->mutating, &admin, &why);
  if (refuse) {
    reply_error(h, req, refuse, GPUM_EPERM, why);
    return;
  }
  dispatch(h, req, found, strstr(found->path, "{ID}") ? id : NULL, admin);
}

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
static void conn_forget(struct gpumd_http *h, struct gpumd_http_conn *c) {
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
  conn_forget(c->h, c);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg) {
  (void)fd, (void)what;
  struct gpumd_http_conn *c = arg;
  /* Info, not a warning: most are merely idle kept-alive connections. */
  gpum_log(GPUM_LOG_INFO, "gpumd", "HTTP: no complete request within http.timeout: closed");
  evhttp_connection_free(c->evcon); /* its close callback frees c */
}

/* Arms (or stops) the request deadline of a counted connection. */
static void request_deadline(struct gpumd_http *h, struct evhttp_connection *evcon, bool arm) {
  struct gpumd_http_conn *c = evcon ? *conn_slot(h, evcon) : NULL;
  if (c && arm)
    event_add(c->deadline, &h->request_tv);
  else if (c)
    event_del(c->deadline);
}

static void uncount(struct gpumd_http *h, struct evhttp_connection *evcon) {
  struct gpumd_http_conn *c = *conn_slot(h, evcon);
  evhttp_connection_set_closecb(evcon, NULL, NULL);
  if (c)
    conn_forget(h, c);
}

/* Unread input of one connection beyond which it is closed (set at start; loop thread). */
static size_t input_limit;

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
static struct bufferevent *make_bev(struct event_base *base, void *arg) {
  struct gpumd_http *h = arg;
  struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
  if (!bev)
    return NULL;
  if (!evbuffer_add_cb(bufferevent_get_input(bev), on_input, bev)) {
    bufferevent_free(bev);
    return NULL;
  }
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
static void check_fresh(struct gpumd_http *h, struct evhttp_connection *current) {
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

/* Sends n queued responses. A request whose client went away meanwhile is still valid
 * (evhttp detaches it from its connection; sending frees it). */
static void send_queued(struct gpumd_http *h, const gpumd_http_pending_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    /* The connection reads its next request from now on (after this response). */
    request_deadline(h, evhttp_request_get_connection(p[i].req), true);
    evhttp_send_reply(p[i].req, p[i].status, phrase(p[i].status), NULL);
  }
}

void gpumd_http_flush(gpumd_t *d) {
  struct gpumd_http *h = d->http;
  if (!h)
    return;
  if (h->nfresh)
    check_fresh(h, NULL);
  send_queued(h, h->pend, h->npend);
  h->npend = 0;
}

void gpumd_http_seal(gpumd_t *d) {
  struct gpumd_http *h = d->http;
  if (!h)
    return;
  if (h->nfresh)
    check_fresh(h, NULL);
  /* The held responses went out before the writer took this batch: swap the arrays. */
  gpumd_http_pending_t *p = h->held;
  size_t cap = h->capheld;
  h->held = h->pend;
  h->capheld = h->cappend;
  h->nheld = h->npend;
  h->pend = p;
  h->cappend = cap;
  h->npend = 0;
}

void gpumd_http_release(gpumd_t *d) {
  struct gpumd_http *h = d->http;
  if (!h)
    return;
  send_queued(h, h->held, h->nheld);
  h->nheld = 0;
}

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
  rc = token_path(d, h->token_path, sizeof h->token_path);
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
  input_limit = (size_t)hdr + h->max_body * 4 + 4096 + 65536;
  uint64_t to = gpum_config_get_duration(d->cfg, "http.timeout");
  struct timeval tv = {.tv_sec = (time_t)(to / 1000), .tv_usec = (suseconds_t)(to % 1000) * 1000};
  if (to == 0)
    tv.tv_sec = 10;
  evhttp_set_timeout_tv(h->http, &tv);
  h->request_tv = tv;
  h->nbuckets = 1024;
  h->conns = calloc(h->nbuckets, sizeof *h->conns);
  if (!h->conns)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                                          EVHTTP_REQ_DELETE | EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH |
                                          EVHTTP_REQ_OPTIONS);
  evhttp_set_gencb(h->http, on_request, h);
  evhttp_set_bevcb(h->http, make_bev, h);
  h->sock = evhttp_bind_socket_with_handle(h->http, host, (ev_uint16_t)port);
  if (!h->sock)
    return gpum_error(GPUM_EIO, "cannot listen on http.listen %s: %s", listen, strerror(errno));
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
  if (h->http)
    evhttp_free(h->http); /* closes the connections; unsent replies go with them */
  for (size_t i = 0; i < h->nfresh; i++)
    bufferevent_decref(h->fresh[i]);
  for (size_t i = 0; h->conns && i < h->nbuckets; i++)
    while (h->conns[i]) /* none: evhttp_free closed them all (their close callbacks ran) */
      conn_forget(h, h->conns[i]);
  free(h->conns);
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

const char *gpumd_http_addr(gpumd_t *d) {
  return d->http && d->http->addr[0] ? d->http->addr : NULL;
}
