/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The REST API's internals shared by its files: http.c (start and stop), http_token.c (the
 * bearer token), http_router.c (routes, checks, dispatch), http_reply.c (responses and their
 * sending after the commit), http_conns.c (connections and their limits) and http_api.c (the
 * endpoints). Everything runs on gpumd's loop thread.
 */
#ifndef GPUMD_HTTP_INTERNAL_H
#define GPUMD_HTTP_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "gpumd.h"
#include "net.h"

struct evhttp;
struct evhttp_connection;
struct evhttp_request;
struct event_base;
struct evhttp_bound_socket;
struct bufferevent;
struct evkeyvalq;
struct gpumd_http_conn;

#define GPUMD_HTTP_TOKEN_HEX 64  /* 32 random bytes as hex */
#define GPUMD_HTTP_TOKEN_MAX 256 /* longest token accepted from a hand-written file */

/* One request being answered. A handler fills status and body (or returns an error code). */
typedef struct {
  gpumd_t *d;
  struct evhttp_request *req;
  const char *id;          /* the {ID} of /reservations/{ID}[/renew] or /devices/{ID}/..., else
                              NULL */
  struct evkeyvalq *query; /* parsed query string (may be empty) */
  json_t *body;            /* parsed JSON body (an object; {} when none) */
  bool admin;              /* showed the right token, or a peer_known caller who is root or in
                              admin_group */
  /* No token, on a loopback listener: the owner of the caller's socket was found (peer_uid),
   * and the caller acts as that uid (http_actor). false with a token: it acts as gpumd. */
  bool peer_known;
  uint32_t peer_uid;
  int status;     /* success status (default 200) */
  json_t *out;    /* success body (stolen by the router) */
  int err_status; /* error status override (0: from the code) */
  bool forked;    /* answered in a child process (http_fork.c), where it may block */
} gpumd_http_call_t;

typedef int (*gpumd_http_fn)(gpumd_http_call_t *call);

typedef struct {
  struct evhttp_request *req;
  int status;
} gpumd_http_pending_t;

struct gpumd_http {
  gpumd_t *d;
  struct evhttp *http;
  struct evhttp_bound_socket *sock;
  gpumd_accept_guard_t accept_guard; /* the listener's failed accepts (accept.c) */
  char addr[96];                     /* "127.0.0.1:8642", "[::1]:8642" */
  bool loopback;
  char token[GPUMD_HTTP_TOKEN_MAX + 1];
  char token_path[PATH_MAX];
  size_t max_body, max_conns, max_per_peer;
  gpumd_http_pending_t *pend; /* responses of this turn, sent after the commit */
  size_t npend, cappend;
  gpumd_http_pending_t *held; /* responses of turns the ledger's writer is committing */
  size_t nheld, capheld;
  struct bufferevent **fresh; /* connections accepted this turn (see http_conns.c) */
  size_t nfresh, capfresh;
  size_t live;                    /* open connections counted against max_conns */
  struct gpumd_http_conn **conns; /* the counted connections, hashed by evhttp connection */
  size_t nbuckets;
  struct gpumd_http_peer **peers; /* the remote addresses of counted connections, hashed */
  /* Counted connections waiting for a request, the one waiting longest first (http_conns.c). */
  struct gpumd_http_conn *waiting_head, *waiting_tail;
  uint64_t evicted;          /* connections closed to make room for a new one */
  struct timeval request_tv; /* http.timeout: the deadline of each request (see http_conns.c) */
  uint64_t served;           /* requests seen */
  struct gpumd_http_forked *forked; /* large reads answered by a child (net/http_fork.c) */
  size_t nforked;
  uint64_t forks_answered, forks_failed;
};

/* ---- http_api.c: the endpoints ---- */
int gpumd_http_status(gpumd_http_call_t *call);
int gpumd_http_nodes(gpumd_http_call_t *call);
int gpumd_http_validate(gpumd_http_call_t *call);
int gpumd_http_allocate(gpumd_http_call_t *call);
int gpumd_http_resv_list(gpumd_http_call_t *call);
/* Whether the list's owner filter (NULL: none) is a user name rather than a uid: its answer is
 * made in a child (the lookup may block), or refused with EAGAIN when none can be had. */
bool gpumd_http_owner_is_name(const char *owner);
int gpumd_http_resv_get(gpumd_http_call_t *call);
int gpumd_http_resv_delete(gpumd_http_call_t *call);
int gpumd_http_resv_renew(gpumd_http_call_t *call);
int gpumd_http_resv_suspend(gpumd_http_call_t *call);
int gpumd_http_resv_resume(gpumd_http_call_t *call);
int gpumd_http_setup_pytorch(gpumd_http_call_t *call);
int gpumd_http_setup_tensorflow(gpumd_http_call_t *call);
int gpumd_http_health(gpumd_http_call_t *call);
int gpumd_http_device_disable(gpumd_http_call_t *call);
int gpumd_http_device_enable(gpumd_http_call_t *call);
int gpumd_http_monitoring(gpumd_http_call_t *call);
int gpumd_http_history(gpumd_http_call_t *call);
int gpumd_http_alerts(gpumd_http_call_t *call);
int gpumd_http_config(gpumd_http_call_t *call);

/* ---- shared between the HTTP files ---- */

/* http_token.c: the token file's path (http.token_file, else STATE_DIR/http.token). 0 or
 * GPUM_EINVAL (too long). */
int gpumd__http_token_path(gpumd_t *d, char *buf, size_t len);

/* http_reply.c */
/* The reason phrase of an HTTP status ("Not Found"). */
const char *gpumd__http_phrase(int status);
/* Queues req's response (headers and body already set) for the end of the turn. */
void gpumd__http_queue_reply(struct gpumd_http *h, struct evhttp_request *req, int status);
/* Sets body (stolen; NULL: out of memory) as req's JSON response and queues it. */
void gpumd__http_reply_json(struct gpumd_http *h, struct evhttp_request *req, int status,
                            json_t *body);
/* Queues the error response {"error": {"code", "message"}} (msg made valid UTF-8; NULL or "":
 * gpum_strerror(code)). */
void gpumd__http_reply_error(struct gpumd_http *h, struct evhttp_request *req, int status, int code,
                             const char *msg);
/* The answer to call from its handler's return code rc, as dispatch gives it: the error, the
 * JSON body (call->out, taken), or nothing (the handler answered itself). */
void gpumd__http_answer(struct gpumd_http *h, gpumd_http_call_t *call, int rc);

/* net/http_fork.c: answers call with fn run in a child process forked now, from gpumd's state
 * as it is (docs/operations.md, "Readers"); true when a child answers it (call->status is then
 * -1), false when the caller must run fn itself (not a GET, GPUMD_HTTP_FORK_MAX children
 * already running, or fork failed). */
bool gpumd__http_fork(struct gpumd_http *h, gpumd_http_call_t *call, gpumd_http_fn fn);
/* net/http_fork.c: ends the children still running and answers their requests 503. */
void gpumd__http_fork_stop(struct gpumd_http *h);

/* http_conns.c */
struct gpumd_http_conn;
/* Who a caller is, from the owner of its socket (a loopback peer only). */
typedef struct {
  bool known;   /* false: not a loopback peer, or its socket's owner could not be found */
  uint32_t uid; /* the uid that owns the peer socket */
  bool admin;   /* uid is root or in admin_group (gpumd_server_is_admin) */
} gpumd_http_owner_t;
/* The owner of the socket at the other end of evcon when that end is 127.0.0.0/8 or ::1 (the
 * same network namespace), found through sock_diag (at most 50 ms) or /proc/net/tcp
 * (gpum__os_tcp_peer_owner) at its first call for a counted connection and remembered for the
 * connection's life; each failure is logged once and leaves known false. */
void gpumd__http_peer_owner(struct gpumd_http *h, struct evhttp_connection *evcon,
                            gpumd_http_owner_t *out);
/* evhttp's bufferevent factory (arg: the struct gpumd_http): remembers the connection as
 * fresh, to be counted or refused by gpumd__http_check_fresh. */
struct bufferevent *gpumd__http_make_bev(struct event_base *base, void *arg);
/* Counts the connections accepted this turn, or refuses them past http.max_connections;
 * current (a connection whose request is being served, or NULL) is always counted. */
void gpumd__http_check_fresh(struct gpumd_http *h, struct evhttp_connection *current);
/* Forgets a counted connection (closed, or handed to the event streams). */
void gpumd__http_conn_forget(struct gpumd_http *h, struct gpumd_http_conn *c);
/* Arms (or stops) the request deadline of a counted connection. */
void gpumd__http_request_deadline(struct gpumd_http *h, struct evhttp_connection *evcon, bool arm);
/* Stops counting evcon (its close callback cleared): handed to the event streams. */
void gpumd__http_uncount(struct gpumd_http *h, struct evhttp_connection *evcon);
/* Unread input of one connection beyond which it is closed. */
void gpumd__http_set_input_limit(size_t bytes);

/* ---- pieces with unit tests (tests/unit/test_gpumd_http.c) ---- */
/* Splits http.listen ("HOST:PORT", "[V6]:PORT", host an IP address or localhost) into host
 * and port, and tells whether the host is loopback. 0 or GPUM_EINVAL naming s. */
int gpumd_http_parse_listen(const char *s, char *host, size_t hlen, unsigned *port, bool *loopback);
/* Reads the token in path into out (16..256 printable characters, trailing newline
 * stripped); a missing file is created with a fresh random token when create. GPUM_EPERM
 * when the file is readable by group or others, GPUM_EINVAL for a bad token, GPUM_EIO. */
int gpumd_http_token_load(const char *path, bool create, char *out, size_t outlen);
/* Constant-time comparison of a presented token (got, got_len bytes) with want. */
bool gpumd_http_token_matches(const char *want, const char *got, size_t got_len);
/* Matches path against a route pattern where "{ID}" stands for one segment (copied to id,
 * at most idlen - 1 bytes). */
bool gpumd_http_path_match(const char *pattern, const char *path, char *id, size_t idlen);
/* The rule for a call without a token: on a non-loopback listener none is allowed; on a
 * loopback one a call that changes state (mutating) needs the caller's owner known (it then
 * acts as that uid), while a read-only one is allowed either way. 0 (allowed) or 401 with *msg
 * saying why. */
int gpumd_http_tokenless_rule(bool listener_loopback, bool owner_known, bool mutating,
                              const char **msg);
/* The HTTP status of a gpum error code (EINVAL 400, EPERM 403, ENOENT 404, ESTATE/EBUSY 409,
 * ENEVERFIT 422, EAGAIN 503, others 500). */
int gpumd_http_status_of(int code);

/* Answers call with the 200 body already in the request's output buffer (a rendering that
 * is not JSON built by the handler, such as a cached one). */
void gpumd_http_reply_raw(gpumd_http_call_t *call, const char *content_type);

/* Checks that the query has only the named parameters (NULL-terminated). 0 or GPUM_EINVAL
 * naming the first unknown one. */
int gpumd_http_check_query(gpumd_http_call_t *call, const char *const *allowed);

#endif /* GPUMD_HTTP_INTERNAL_H */
