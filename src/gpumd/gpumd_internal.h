/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's internals shared by its modules: the daemon state (one libevent loop, the listening
 * socket, the client connections, the leases, the scheduler and ledger, the monitor bridge),
 * and the functions each module offers the others (main.c: start/stop/signals; server.c:
 * socket, connections, framing, end of turn; proto.c: lines, replies, events; ops.c: the
 * requests; engine.c: scheduler + ledger + events + recovery; leases.c: connection/pid/ttl
 * leases; devices.c: monitor bridge; procs.c: process lists). Everything here runs on the
 * loop thread except the monitor callback in devices.c, which only queues events for the
 * loop, and the process-list threads of procs.c, which only publish snapshots.
 *
 * A loop turn is one event_base_loop(EVLOOP_ONCE). Replies and events produced during a turn
 * are staged per connection and written only after the ledger's transaction for that turn
 * has committed (gpumd_end_turn), so no client ever sees a state that is not durable. The
 * ledger's writer thread commits while the loop serves the next turn: at the end of a turn,
 * the staged output becomes held (sealed) when the turn's writes go to the writer, and held
 * output is written when the writer says they are committed; while the writer is busy, the
 * next turns' output stays staged and their writes go with the next batch.
 */
#ifndef GPUMD_INTERNAL_H
#define GPUMD_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include <jansson.h>

#include <gpum/alert.h>
#include <gpum/monitor.h>
#include <gpum/options.h>

#include "accept_internal.h"
#include "client/protocol_internal.h"
#include "fences_internal.h"
#include "ledger.h"
#include "paths_internal.h"
#include "sched.h"
#include "utf8_internal.h"

struct event_base;
struct event;
struct bufferevent;
struct evbuffer;
struct evconnlistener;
struct evhttp_request;
struct gpumd_obs;

#define GPUMD_MAX_MESSAGE (64u * 1024u)       /* bytes per message, newline excluded */
#define GPUMD_MAX_DEPTH 8                     /* nesting of arrays/objects */
#define GPUMD_MAX_OUTPUT (4u * 1024u * 1024u) /* unread output before a client is dropped */
#define GPUMD_MAX_DEVICES 64

typedef struct gpumd gpumd_t;
typedef struct gpumd_conn gpumd_conn_t;
typedef struct gpumd_lease gpumd_lease_t;

#define GPUMD_LEASE_BUCKETS 4096 /* power of two */

/* The daemon's side of a live reservation (leases.c). */
struct gpumd_lease {
  gpumd_t *d;
  uint64_t id;
  gpumd_conn_t *conn;           /* bound connection (events go there), or NULL */
  gpumd_lease_t *cprev, *cnext; /* in conn->leases */
  int pidfd;
  int32_t pid;
  struct event *pid_ev;
  struct event *ttl_ev;
  uint64_t expires_ns;
  bool awaiting_attach; /* restored connection lease: ends at the grace unless attached, or
                           when its owner (pidfd) exits first */
  size_t told_position; /* queue position + 1 the client last learnt; 0 = none */
  gpumd_lease_t *next;  /* hash chain */
};

struct gpumd_conn {
  gpumd_t *d;
  struct bufferevent *bev;
  struct evbuffer *staged; /* replies/events of this turn, written after the commit */
  struct evbuffer *held;   /* of turns the ledger's writer is committing, written after it */
  uint64_t id;             /* 1, 2, ... per daemon run */
  uid_t uid;
  gid_t gid;
  pid_t pid;
  uint64_t pid_start;        /* the peer's start time read at connect (0 = unknown) */
  bool admin;                /* root or a member of admin_group */
  bool closing;              /* close once the output is written */
  bool dead;                 /* closed; freed at the end of the turn */
  bool dirty;                /* on the dirty list */
  bool in_held;              /* on the held list */
  gpumd_lease_t *leases;     /* reservations bound to this connection */
  uint64_t reported[8];      /* reservations this connection reported on (report op): it gets */
  unsigned nreported;        /* their devices' pressure events too (reports.c) */
  gpumd_conn_t *prev, *next; /* all connections */
  gpumd_conn_t *dirty_next;  /* connections with staged output */
  gpumd_conn_t *held_next;   /* connections with held output */
  const char *close_why;     /* to be closed next turn, why (on the to_close list) */
  gpumd_conn_t *close_next;
  unsigned watch;              /* node event types it watches (GPUM_WATCH_* bits; watch.c) */
  gpumd_conn_t *wprev, *wnext; /* on the watchers list while watch != 0 */
};

/* A monitor event queued by the sampler thread for the loop. */
typedef struct gpumd_monq {
  gpum_monitor_event_t ev;
  struct gpumd_monq *next;
} gpumd_monq_t;

typedef struct {
  unsigned index;
  gpum_device_info_t info; /* valid once answered */
  bool answered;           /* the monitor read its static info (or the read failed at once) */
  uint64_t overcommit;     /* committed - capacity when last checked (admission.c); 0: not over */
} gpumd_device_t;

/* A device's state in gpumd's documents when its committed memory is over its capacity and
 * its health is AVAILABLE or BUSY (docs/protocol.md). */
#define GPUMD_STATE_OVERCOMMITTED "OVERCOMMITTED"

/* The reason of a device that has not answered since start (its view is ERROR). */
#define GPUMD_SILENT_REASON "no answer since gpumd started"

#define GPUMD_MAX_PROCS 128 /* processes counted per device */

/* A device's newest process list (procs.c), and its memory read with it. */
typedef struct {
  bool valid;
  size_t count;
  unsigned pid[GPUMD_MAX_PROCS];
  uint64_t memory[GPUMD_MAX_PROCS];
  gpum_device_sample_t sample; /* the memory metrics only (valid bits say which) */
} gpumd_procs_t;

struct gpumd {
  gpum_config_t *cfg;
  struct event_base *base;
  struct evconnlistener *listener;
  struct event *sig_term, *sig_int, *sig_hup, *pressure_timer;
  gpumd_accept_guard_t accept_guard; /* the socket's failed accepts (accept.c) */
  struct event *kick; /* makes the loop turn once more (work left for the next turn) */
  char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  char state_dir[PATH_MAX];
  int state_lock_fd, socket_lock_fd;
  bool socket_bound;

  gpumd_conn_t *conns;
  gpumd_conn_t *dirty;
  gpumd_conn_t *held;     /* connections with output held for the ledger's writer */
  gpumd_conn_t *to_close; /* connections to close at the start of the next turn */
  gpumd_conn_t *watchers; /* connections that follow the node's events (watch.c) */
  size_t watcher_count;
  uint64_t next_conn_id;
  size_t conn_count;

  /* Devices and the monitor bridge (devices.c). */
  gpum_monitor_t *mon;
  gpumd_device_t devices[GPUMD_MAX_DEVICES];
  unsigned device_count;
  int mon_fds[2]; /* socketpair: [1] written by the sampler thread, [0] read by the loop */
  struct event *mon_ev;
  pthread_mutex_t monq_lock;
  gpumd_monq_t *monq_head, *monq_tail;
  unsigned monq_len;

  /* Reloadable settings (SIGHUP). */
  gid_t admin_gid;
  bool admin_gid_set;
  uint64_t job_timeout_ms; /* job_timeout and queue.max, read per request (gpumd_engine_reload) */
  int64_t queue_max;

  /* Scheduler, ledger and leases (ops.c, leases.c). */
  gpumd_sched_t *sched;
  gpumd_ledger_t *ledger;
  bool ledger_failed; /* a write of this turn failed: the turn must not be sent */
  bool commit_failed; /* a commit failed: gpumd stops, sending nothing more */
  gpumd_lease_t *leases[GPUMD_LEASE_BUCKETS];
  struct event *tick_timer;    /* queue timeouts */
  struct event *grace_timer;   /* end of lease.grace after a restart */
  uint64_t grace_start_ns;     /* when that grace period began (SIGHUP re-arms it from there) */
  struct event *prune_timer;   /* ledger.retention: deletes old finished reservations */
  struct gpumd_fences *fences; /* the reservations' fence regions (fences.c) */
  struct event *ledger_ev;     /* the ledger's writer has committed a batch */
  /* Process lists for unmanaged memory, read on a thread per device (procs.c). */
  gpum_device_readers_t *procs;
  /* Admission (admission.c): the devices read afresh this turn, whether that read was made,
   * and how long it may take (admission.read_timeout). */
  uint64_t fresh_mask, unanswered_mask; /* unanswered: the last fresh read failed */
  /* Reservations that ended lately (ended.c): a ring of GPUMD_ENDED_MAX, made at the first. */
  gpumd_resv_t *ended;
  size_t ended_head, ended_n;
  unsigned monitor_interval_ms; /* the monitor's sampling interval */
  bool fresh_done;
  unsigned admission_timeout_ms;
  /* Obsolete and read by nothing: who causes a transition now travels with each scheduler
   * call (gpumd_cause_t). http.c's dispatch still clears these two; remove them together with
   * those two lines. */
  gpumd_conn_t *actor_conn;
  uint64_t submit_id;
  bool queue_changed; /* queue positions may have moved this turn */

  /* Observability (metrics.c, sse.c, alerts.c): SSE streams, alert engine, counters. */
  struct gpumd_obs *obs;
  /* Workload figures processes report on their reservations (reports.c). */
  struct gpumd_report *reports;
  size_t nreports;

  bool stop;
  int exit_code;
  uint64_t start_ns;

  struct gpumd_http *http; /* the HTTP face (http.c); NULL when http.listen is off */
};

/* ---- server.c ---- */
int gpumd_server_start(gpumd_t *d);
void gpumd_server_stop(gpumd_t *d);
/* Appends one JSON message (plus '\n') to conn's staged output. Steals msg. Returns 0 (also
 * when c is closed: nothing is sent), or -1 when msg is NULL or could not be staged (out of
 * memory; nothing of it is). */
int gpumd_conn_send(gpumd_conn_t *c, json_t *msg);
/* Appends v to out as compact JSON, byte for byte what json_dumps(v, JSON_COMPACT) gives, without
 * jansson's loop-detection cost. Returns 0, or -1 when out cannot grow (out may then hold a
 * partial value). */
int gpumd_json_write(struct evbuffer *out, json_t *v);
/* Writes v in the shortest form (15 to 17 significant digits) that reads back as v, with ".0"
 * on a whole number as jansson writes it ("0.95", "1e-05", "3.0"), into buf; returns its
 * length (0 and "" when len is too small; GPUMD_REAL_BUFSZ always suffices). Reals in
 * gpumd's replies, REST bodies and events are written this way, never as jansson's %.17g. */
#define GPUMD_REAL_BUFSZ 32
size_t gpumd_json_real(double v, char *buf, size_t len);
/* A JSON writer with the output of gpumd_json_write, for messages written without building
 * jansson values first (the hot replies): pieces gather in a buffer and reach out in few adds.
 * gpumd_jw_end flushes and returns 0, or -1 when out could not grow. */
typedef struct {
  struct evbuffer *out;
  size_t used;
  int rc;
  char buf[4096];
} gpumd_jw_t;
void gpumd_jw_init(gpumd_jw_t *w, struct evbuffer *out);
void gpumd_jw_raw(gpumd_jw_t *w, const char *s, size_t n); /* as is */
/* A string literal as is, and "key": for a key that is a string literal (a protocol name):
 * GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY(GPUM_PROTO_F_STATE)). */
#define GPUMD_JW_LIT(w, lit) gpumd_jw_raw((w), (lit), sizeof(lit) - 1)
#define GPUMD_JSON_KEY(key) "\"" key "\":"
void gpumd_jw_string(gpumd_jw_t *w, const char *s); /* quoted and escaped */
void gpumd_jw_int(gpumd_jw_t *w, long long v);
void gpumd_jw_value(gpumd_jw_t *w, json_t *v);
int gpumd_jw_end(gpumd_jw_t *w);
/* Appends one message written by fill (plus '\n') to c's staged output. Returns as
 * gpumd_conn_send. */
int gpumd_conn_send_with(gpumd_conn_t *c, void (*fill)(gpumd_jw_t *w, void *arg), void *arg);
/* Marks c for closing after its staged output is written. */
void gpumd_conn_close_after_flush(gpumd_conn_t *c);
/* Drops c, a reader too slow (logged with why, a string literal): it reads nothing more, its
 * output of this turn is still written, and it closes at the start of the next turn (its
 * connection leases end then). */
void gpumd_conn_drop(gpumd_conn_t *c, const char *why);
/* End of a loop turn: commit (or hand the writes to the ledger's writer), write the output
 * that is committed, free closed connections. */
void gpumd_end_turn(gpumd_t *d);
/* Closes the connections that writing their output at the end of the last turn found gone
 * or hopeless (from the kick event, at the start of a turn). */
void gpumd_close_deferred(gpumd_t *d);
/* The last turns before stopping: waits for the ledger's writer until all is committed and
 * written. */
void gpumd_finish_turns(gpumd_t *d);
uint64_t gpumd_now_ns(void); /* CLOCK_REALTIME */

/* ---- proto.c ---- */
/* Deepest nesting of arrays/objects in a JSON text (strings skipped), stopping early once it
 * passes limit. */
int gpumd_json_depth(const char *s, size_t len, int limit);
/* Parses a request as json_loadb(s, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, err) does,
 * with the same result (value, or NULL and err) for every input; faster for the common shape
 * of requests (json_fast.c). Any value is taken on top (the caller checks for an object). The
 * caller owns the value. */
json_t *gpumd_json_parse(const char *s, size_t len, json_error_t *err);
/* Its fast path alone: the value, or NULL when the input is not of the shape it takes. */
json_t *gpumd_json_parse_fast(const char *s, size_t len);
/* Handles one complete line from c (without the newline). */
void gpumd_proto_line(gpumd_conn_t *c, const char *line, size_t len);
/* Replies: every request gets exactly one. id may be NULL (the request had none or could not
 * be parsed): then "id": null. A reply that cannot be staged (out of memory) is replaced by a
 * short ENOMEM error. gpumd_reply_ok steals body; a NULL body (building it failed: out of
 * memory, or text that is not UTF-8) makes the reply an EINTERNAL error. */
void gpumd_reply_ok(gpumd_conn_t *c, json_t *id, json_t *body);
/* gpumd_reply_ok with the body {"reservation": R}, written without building it. */
void gpumd_reply_ok_resv(gpumd_conn_t *c, json_t *id, const gpumd_resv_t *r, bool with_token);
/* The message (cut at 1 KiB before a character, marked "...") may quote a client's bytes: what
 * is not UTF-8 is written as '?'. */
void gpumd_reply_err(gpumd_conn_t *c, json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Checks that obj has only the named fields (NULL-terminated list). Returns 0, or GPUM_EINVAL
 * with the detail naming the first unknown field. */
int gpumd_check_fields(json_t *obj, const char *const *allowed);
/* {"event": name, ...body} to c. Steals body (may be NULL). */
void gpumd_send_event(gpumd_conn_t *c, const char *name, json_t *body);

/* ---- ops.c ---- */
/* Who asks for an operation: a socket peer (conn set, identity from SO_PEERCRED) or an HTTP
 * caller (conn NULL; gpumd's own uid and pid, admin when it showed the API token). The op
 * cores below are shared by the socket protocol and the REST API: each takes its request as
 * each face decoded it (requests.c's structs below; alerts still takes the protocol's JSON),
 * acts, and returns 0 with *out = the reply body, or a negative code with the detail in
 * gpum_last_error(). Transitions reach the ledger through engine.c and are committed at the end
 * of the turn, before any reply leaves. */
/* Where a socket reserve or release leaves its reservation instead of building the
 * {"reservation": R} body: the reply is then written directly (gpumd_engine_resv_write). */
typedef struct {
  gpumd_resv_t r;
  bool with_token;
  bool set;
} gpumd_resv_reply_t;

typedef struct {
  uint32_t uid;
  int32_t pid;
  uint64_t pid_start; /* start time of pid; 0 = look it up when needed */
  bool admin;
  gpumd_conn_t *conn;       /* socket peer, or NULL over HTTP */
  const char *via;          /* "HTTP" for audit reasons; NULL on the socket */
  gpumd_resv_reply_t *fast; /* reserve/release: fill this, leave *out NULL (may be NULL) */
} gpumd_actor_t;

/* The cause handed with every scheduler call that may change reservations (sched.h) and
 * passed back to engine.c's on_transition with each transition: who acts (the audit row's
 * uid and pid) and what the reply to that actor will itself say, so that no event repeats
 * it. A NULL cause is gpumd itself (timers, devices, leases): uid 0, pid 0, every event sent. */
struct gpumd_cause {
  const gpumd_actor_t *actor; /* NULL: gpumd itself */
  /* The reservation the actor's reply is about (0: none): no event about it goes to the
   * actor's connection (to no connection when that is NULL: over HTTP). */
  uint64_t about;
  /* about is the reservation being submitted (its id is gpumd_sched_next_id() before the
   * call): no event about it goes anywhere, the reply tells its state. */
  bool submit;
  /* When not NULL: receives about's state as it reaches a final state (its id stays 0
   * until then). */
  gpumd_resv_t *final;
};

/* ---- requests.c: the op cores' requests, each face decoding into them (issue 23) ---- */
/* Each op core takes its request as a struct. The socket face decodes a protocol request (field
 * names GPUM_PROTO_F_*) with the gpumd_*_decode functions of requests.c; the REST face decodes
 * its own bodies (docs/rest.md) into the same structs in http_api.c. A decoder checks what the
 * protocol checks before the core acts, in the same order and with the same messages, and
 * returns 0 or GPUM_EINVAL (EPERM/ENOENT for a reserve's "pid") with the detail set. Strings
 * point into the request's JSON or into the struct: a struct lives no longer than its request. */

/* reserve, and check (its dry run). */
typedef struct {
  gpumd_sched_request_t q; /* uid, pid and pid_start are the actor's (filled by the core), and
                              so is lease_pid when 0 */
  bool timeout_set;        /* q.timeout_ms was given; else the core takes job_timeout */
  const char *devices[GPUMD_SCHED_MAX_DEVICES];  /* q.devices points here */
  char device_text[GPUMD_SCHED_MAX_DEVICES][24]; /* indices a face spelt out (REST's numbers) */
  char model[128];                               /* a pattern a face made (REST's gpu_type) */
} gpumd_reserve_req_t;
/* An empty request: gpumd_sched_request_init's defaults, nothing given. */
void gpumd_reserve_req_init(gpumd_reserve_req_t *req);
/* The socket's reserve request. a: a non-admin's "pid" must be its own process. */
int gpumd_reserve_decode(const gpumd_actor_t *a, json_t *j, gpumd_reserve_req_t *out);
/* reserve's "on_timeout" value ("reject" or "wait"), with the protocol's message naming it (REST
 * gives the same value under the same name). */
int gpumd_on_timeout_decode(const char *s, gpumd_on_timeout_t *out);

/* The reservation a request names: its id, and the text that named it (quoted by messages). */
typedef struct {
  uint64_t id;
  const char *text;
} gpumd_resv_ref_t;
/* Reads "r-<n>" (s NULL: none given). EINVAL in the protocol's words ("reservation"), which
 * both faces use. */
int gpumd_resv_ref_decode(const char *s, gpumd_resv_ref_t *out);
/* An error of a field that the protocol reports only after the op's first check (the lookup of
 * the reservation it names; the admin check of disable/enable): the decoder keeps it here and
 * returns 0, and the core raises it at that point (gpumd_req_error_raise: 0 when rc is 0). */
typedef struct {
  int rc;
  char message[1024]; /* the detail, as gpum_error keeps it (1 KiB) */
} gpumd_req_error_t;
int gpumd_req_error_raise(const gpumd_req_error_t *late);

typedef struct {
  gpumd_resv_ref_t resv;
} gpumd_release_req_t;
typedef struct {
  gpumd_resv_ref_t resv;
  bool ttl_set; /* else the reservation's own ttl_ms */
  uint64_t ttl_ms;
  gpumd_req_error_t late;
} gpumd_renew_req_t;
typedef struct {
  gpumd_resv_ref_t resv;
  uint64_t bytes_per_gpu; /* > 0 */
  gpumd_req_error_t late;
} gpumd_resize_req_t;
typedef struct {
  gpumd_resv_ref_t resv;
  const char *token;
} gpumd_attach_req_t;
typedef struct {
  gpumd_resv_ref_t resv;
  const char *source;
  json_t *figures; /* borrowed from the request; checked by gpumd_reports_put */
  gpumd_req_error_t late;
} gpumd_report_req_t;
/* The socket's requests of these ops. */
int gpumd_release_decode(json_t *j, gpumd_release_req_t *out);
int gpumd_renew_decode(json_t *j, gpumd_renew_req_t *out);
int gpumd_resize_decode(json_t *j, gpumd_resize_req_t *out);
int gpumd_attach_decode(json_t *j, gpumd_attach_req_t *out);
int gpumd_report_decode(json_t *j, gpumd_report_req_t *out);

/* list: the actor's reservations, or everyone's (all); with those that ended lately (ended). */
typedef struct {
  bool all;
  bool ended;
} gpumd_list_req_t;
int gpumd_list_decode(json_t *j, gpumd_list_req_t *out);
/* status takes nothing: its decoder only refuses other fields. */
int gpumd_status_decode(json_t *j);

/* disable / enable (admin.c): the device and, for disable, the operator's reason. Every field
 * error comes after the admin check (late). */
typedef struct {
  const char *device;     /* an index or a UUID as spelt (NULL: late says why) */
  char device_text[128];  /* an index given as a number, spelt out; also the longest spelling */
  const char *reason;     /* NULL: none given, or "" (the default reason) */
  gpumd_req_error_t late; /* a bad "reason" (first) or "device" */
} gpumd_switch_req_t;
/* The socket's request (disable takes "reason", enable does not). */
int gpumd_switch_decode(json_t *j, bool disable, gpumd_switch_req_t *out);
/* A disable's "reason" (why: its JSON value, NULL when none), for both faces. */
void gpumd_switch_reason_decode(json_t *why, gpumd_switch_req_t *out);

int gpumd_op_status(gpumd_t *d, const gpumd_actor_t *a, json_t **out);
int gpumd_op_list(gpumd_t *d, const gpumd_actor_t *a, const gpumd_list_req_t *req, json_t **out);
int gpumd_op_reserve(gpumd_t *d, const gpumd_actor_t *a, const gpumd_reserve_req_t *req,
                     json_t **out);
/* A dry run of reserve (nothing changes): {"could_fit", "fits_now", "queue_first", "devices",
 * "reason"}. */
int gpumd_op_check(gpumd_t *d, const gpumd_actor_t *a, const gpumd_reserve_req_t *req,
                   json_t **out);
int gpumd_op_release(gpumd_t *d, const gpumd_actor_t *a, const gpumd_release_req_t *req,
                     json_t **out);
int gpumd_op_renew(gpumd_t *d, const gpumd_actor_t *a, const gpumd_renew_req_t *req, json_t **out);
int gpumd_op_resize(gpumd_t *d, const gpumd_actor_t *a, const gpumd_resize_req_t *req,
                    json_t **out);
int gpumd_op_report(gpumd_t *d, const gpumd_actor_t *a, const gpumd_report_req_t *req,
                    json_t **out);
/* The alert engine's state (alerts.c): {"enabled", "active": [A...], "history": [A...] (the
 * newest "limit" entries, default 100, at most 100000), "counters": {"fired", "cleared"}}.
 * Anyone may read it. */
int gpumd_obs_op_alerts(gpumd_t *d, const gpumd_actor_t *a, json_t *req, json_t **out);
/* The operator's switch (admin.c): {"device": index or UUID, "reason"} makes the device
 * DISABLED (no new grants on it; grants there keep running), stored in the ledger so that it
 * survives restarts; "enable" {"device"} gives it back to the health rules. Admins only
 * (EPERM). Reply: {"device": D} as in status. */
int gpumd_op_disable(gpumd_t *d, const gpumd_actor_t *a, const gpumd_switch_req_t *req,
                     json_t **out);
int gpumd_op_enable(gpumd_t *d, const gpumd_actor_t *a, const gpumd_switch_req_t *req,
                    json_t **out);
/* Applies the ledger's disabled devices to the devices that have answered (at start, and when
 * a silent device answers). */
void gpumd_engine_apply_disabled(gpumd_t *d);
/* Dispatches a parsed request (an object with a valid op). */
void gpumd_op_dispatch(gpumd_conn_t *c, json_t *id, const char *op, json_t *req);
/* Called when c closes (connection leases end). */
void gpumd_engine_conn_closed(gpumd_conn_t *c);
/* Device news from devices.c, on the loop: a health transition, a fresh sample (every
 * monitor interval), a pressure level reached (1 high, 2 critical). */
void gpumd_engine_device_health(gpumd_t *d, unsigned index, gpum_health_t to, const char *reason);
void gpumd_engine_device_sample(gpumd_t *d, unsigned index, const gpum_device_sample_t *s);
/* The scheduler's view of device index from what gpumd knows: the monitor's sample (NULL: its
 * latest), the newest process list and memory (procs: unmanaged memory recomputed from it, else
 * kept), health, and whether it was read afresh this turn. False for an unknown device. */
bool gpumd_engine_device_view(gpumd_t *d, unsigned index, const gpum_device_sample_t *sample, bool procs,
                       gpumd_sched_device_t *out);

/* ---- ended.c ---- */
#define GPUMD_ENDED_MAX 256
#define GPUMD_ENDED_KEEP_NS (600ull * 1000000000ull) /* 10 minutes */
/* Keeps a copy of r, which has just reached a final state. */
void gpumd_ended_note(gpumd_t *d, const gpumd_resv_t *r);
/* The reservations that ended within GPUMD_ENDED_KEEP_NS before now, newest first: the actor's
 * own, or everyone's with all (no tokens). */
json_t *gpumd_ended_json(gpumd_t *d, const gpumd_actor_t *a, bool all, uint64_t now_ns);

/* ---- admission.c ---- */
/* Before a grant or a growth is decided: every device read afresh (once per turn), its view
 * handed to the scheduler as fresh, then one scheduling pass. */
void gpumd_admission_read(gpumd_t *d);
/* The same when something waits in the queue: before a change that may grant it (a release),
 * so that the grant is decided with the change, in its actor's name. */
void gpumd_admission_read_if_queued(gpumd_t *d);
/* At the end of a turn: a read for what a pass would have granted on stale views, then every
 * view stale again. */
void gpumd_admission_end_turn(gpumd_t *d);
/* "committed X is Y over its capacity of Z" for a device whose st.overcommit > 0: the words
 * of its reason in documents and of its alert. Returns buf. */
char *gpumd_admission_overcommit_text(const gpumd_sched_device_stats_t *st, char *buf, size_t len);
/* A device that was silent answered (its info is in gpumd_device_find(d, index)): the ledger
 * learns its UUID and the scheduler its view, with its health from then on. */
void gpumd_engine_device_answered(gpumd_t *d, unsigned index);
/* Runs the scheduler's timers (queue timeouts) and re-arms its timer. */
void gpumd_engine_tick(gpumd_t *d);
/* The protocol's reservation object (token only when with_token). */
/* Adds "fenced" (what the job holds under the enforcement shim, or null) to a GRANTED
 * reservation's document o: for listings and the REST document, not for replies and events
 * (which the fast writer must produce byte for byte the same). */
void gpumd_engine_resv_add_fenced(gpumd_t *d, json_t *o, const gpumd_resv_t *r);
/* The GRANTED reservation on device that process pid, or its nearest ancestor, holds (gpum
 * run's CMD and a Slurm step's tasks count as their holder's), or NULL. Reads /proc. */
const gpumd_resv_t *gpumd_engine_resv_of_pid(gpumd_t *d, unsigned device, int32_t pid);

/* ---- engine.c: the one writer of reservation rows (issue 23) ---- */
/* Every reservation row and audit row reaches the ledger through engine.c: a transition the
 * scheduler reports (on_transition), the recovery at start, and the changes below, which are
 * no transition. Each stages its rows in the turn's ledger transaction (committed before any
 * reply of the turn leaves); a failed write fails the turn (ledger_failed). Loop thread only. */
/* Sets the live TTL reservation rid's expiry to expires_ns (the reserve that made it): the
 * scheduler's expires_ns, its lease's timer (the lease is made when missing) and its row.
 * Returns the reservation, or NULL when rid is not live (nothing staged). */
const gpumd_resv_t *gpumd_engine_set_ttl(gpumd_t *d, uint64_t rid, uint64_t expires_ns);
/* A renew: gpumd_engine_set_ttl with the expiry ttl_ms from now. */
const gpumd_resv_t *gpumd_engine_renew(gpumd_t *d, uint64_t rid, uint64_t ttl_ms);
/* Resizes the GRANTED reservation rid to bytes per GPU for the actor a (gpumd_sched_resize:
 * growing under admission's rules; shrinking may grant what waits, in a's name), stages its row
 * and a GRANTED -> GRANTED audit row with the old and new size and a's uid and pid, and logs it.
 * Returns 0 with *out the reservation, or gpumd_sched_resize's error (nothing changed). */
int gpumd_engine_resize(gpumd_t *d, const gpumd_actor_t *a, uint64_t rid, uint64_t bytes,
                        const gpumd_resv_t **out);

/* ---- watch.c: connections that follow the node's events ---- */
#define GPUMD_WATCH_MAX 128 /* watchers at once */
/* The watch op (socket only): {"events": [TYPE...]} (default: every type but "sample") or
 * {"off": true}. Anyone may watch. */
void gpumd_watch_op(gpumd_conn_t *c, json_t *id, json_t *req);
/* An event gpumd publishes (sse.c, after it numbered it seq): a "node" event to every watcher of
 * type, staged with the turn's output (so written after the turn's commit). data is borrowed. */
void gpumd_watch_publish(gpumd_t *d, const char *type, uint64_t seq, json_t *data);
/* c watches nothing more (it is closing, or asked it off). */
void gpumd_watch_stop(gpumd_conn_t *c);

/* ---- reports.c: workload figures reported by the processes of a job ---- */
/* Keeps figures ({"name": number}, checked: names, count) as pid's latest for source on the
 * granted reservation rid. GPUM_EINVAL (bad names or values), GPUM_EBUSY (too many sources). */
int gpumd_reports_put(gpumd_t *d, uint64_t rid, int32_t pid, const char *source, json_t *figures);
/* [{"pid", "source", "age_ms", "figures"}] of rid's live processes; NULL when none. */
json_t *gpumd_reports_json(gpumd_t *d, uint64_t rid);
/* The number of reports after dropping those of ended reservations and processes, and the
 * i-th of them (NULL past the end). */
size_t gpumd_reports_count(gpumd_t *d);
const struct gpumd_report *gpumd_report_at(gpumd_t *d, size_t i, uint64_t *rid, int32_t *pid,
                                           const char **source, json_t **figures);
void gpumd_reports_free(gpumd_t *d);
/* Remembers that c reported on rid (up to 8 reservations) and, the first time, sends it the
 * pressure of rid's devices that are under pressure now. */
void gpumd_reports_subscribe(gpumd_t *d, gpumd_conn_t *c, const gpumd_resv_t *r);
/* Whether c holds a lease on, or reported on, a live reservation on device. */
bool gpumd_engine_conn_watches_device(gpumd_t *d, gpumd_conn_t *c, unsigned device);
json_t *gpumd_engine_resv_json(gpumd_t *d, const gpumd_resv_t *r, bool with_token);
/* The same object written straight to w, byte for byte what gpumd_json_write gives for
 * gpumd_engine_resv_json (the hot replies skip building it). */
void gpumd_engine_resv_write(gpumd_t *d, gpumd_jw_t *w, const gpumd_resv_t *r, bool with_token);
/* Adds the scheduler's fields ("committed", "reserved", "unmanaged", "jobs", "reservations")
 * to a device object of the status reply. */
void gpumd_engine_device_json(gpumd_t *d, unsigned index, json_t *o);
/* A lease ended (pid exit, ttl): end the reservation with state to. */
void gpumd_engine_lease_ended(gpumd_t *d, uint64_t id, gpumd_resv_state_t to, const char *reason);
/* Opens the ledger, restores its reservations (recovery) and feeds the devices. */
int gpumd_engine_start(gpumd_t *d);
void gpumd_engine_stop(gpumd_t *d);
/* Rebuilds the scheduler options from the config (start and SIGHUP). */
int gpumd_engine_reload(gpumd_t *d);
/* End of turn, before the commit: "queued" events to clients whose queue position moved. */
void gpumd_engine_turn_events(gpumd_t *d);
/* Commits the ledger writes of this turn (and of the turns before it that waited for the
 * writer thread), if any. Returns 0 (committed, or nothing to commit: the output may go), 1
 * (handed to the writer thread: the output waits for gpumd_ledger_poll) or a negative code.
 * Not while gpumd_ledger_writing(). */
int gpumd_engine_commit(gpumd_t *d);

/* ---- procs.c ---- */
/* Starts a process-list thread per device (each with a session opened with dopts; a device
 * without one: its unmanaged memory is not counted, logged). Returns 0 or GPUM_ENOMEM. */
int gpumd_procs_start(gpumd_t *d, const gpum_device_open_opts_t *dopts, unsigned interval_ms);
void gpumd_procs_stop(gpumd_t *d);
/* Copies device index's newest process list. Returns 0, GPUM_ENOENT (none yet or unreadable)
 * or GPUM_ENODEV. */
int gpumd_procs_get(gpumd_t *d, unsigned index, gpumd_procs_t *out);
/* Reads every device's process list and memory afresh (reads that begin now), waiting up to
 * timeout_ms; rcs[i] is 0, or GPUM_ETIMEDOUT / the read's error for d->devices[i]. The results
 * are also each device's newest (gpumd_procs_get). Returns 0 or GPUM_ENOENT (no readers). */
int gpumd_procs_read_all(gpumd_t *d, unsigned timeout_ms, int *rcs);

/* ---- leases.c ---- */
gpumd_lease_t *gpumd_lease_get(gpumd_t *d, uint64_t id);
/* The lease of id, created when missing (NULL: out of memory). */
gpumd_lease_t *gpumd_lease_add(gpumd_t *d, uint64_t id);
void gpumd_lease_bind(gpumd_lease_t *l, gpumd_conn_t *c); /* c NULL: unbind */
/* Watches pid (the process with start time start_time, 0 = unknown) through a pidfd: when it
 * exits, the lease ends (RELEASED; the reason names the lease process, or, while the lease
 * awaits a re-attach, the owner). Returns 0, GPUM_ENOENT (no such process, or its pid now names
 * another) or GPUM_EIO. */
int gpumd_lease_watch_pid(gpumd_t *d, gpumd_lease_t *l, int32_t pid, uint64_t start_time);
/* Stops watching the lease's pid (none watched: nothing). */
void gpumd_lease_unwatch_pid(gpumd_lease_t *l);
int gpumd_lease_arm_ttl(gpumd_t *d, gpumd_lease_t *l, uint64_t expires_ns);
void gpumd_lease_remove(gpumd_t *d, uint64_t id);
void gpumd_leases_free_all(gpumd_t *d);

/* ---- devices.c ---- */
/* Creates and starts the monitor, then waits up to monitor.start_timeout for the devices'
 * static info; a device still silent is left !answered (unusable until its info arrives). */
int gpumd_devices_start(gpumd_t *d);
void gpumd_devices_stop(gpumd_t *d);
/* The "devices" array of the status reply. */
json_t *gpumd_engine_devices_json(gpumd_t *d);
gpumd_device_t *gpumd_device_find(gpumd_t *d, unsigned index);
/* The device's newest sample into s when it is still a measurement: taken within the last
 * three monitor intervals (at least 5 s), and the device not in ERROR for being gone or hung.
 * False when its values are no longer measured (a lost GPU keeps its last sample). */
bool gpumd_device_measured(gpumd_t *d, unsigned index, gpum_device_sample_t *s);

/* ---- metrics.c / sse.c / alerts.c ---- */
/* Creates / frees d->obs (the alert engine configured from d->cfg, SSE streams, counters).
 * Returns 0 or a negative code (a bad alert rule: the detail names it). */
int gpumd_obs_start(gpumd_t *d);
void gpumd_obs_stop(gpumd_t *d);
/* SIGHUP: rebuilds the alert engine from d->cfg when its rules or options changed (active
 * alerts and the history start over); rules that do not parse are logged, the old kept. */
void gpumd_obs_reload(gpumd_t *d);
/* Renders the Prometheus text format 0.0.4 into out. Returns 0 or a negative code. */
int gpumd_metrics_render(gpumd_t *d, struct evbuffer *out);
/* Takes over req as a Server-Sent Events stream (it sends the headers itself). It leaves the
 * connection's close callback to http_conns.c; a stream's connection must not be freed other than
 * by sse.c (a slow reader) or evhttp_free after gpumd_sse_close_all. */
void gpumd_sse_open(gpumd_t *d, struct evhttp_request *req);
/* Publishes an event to every SSE stream; data is stolen. Reservation events published during a
 * turn go out only after that turn's commit (gpumd_sse_flush from gpumd_end_turn). */
void gpumd_sse_publish(gpumd_t *d, const char *event, json_t *data);
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
void gpumd_obs_monitor_event(gpumd_t *d, const gpum_monitor_event_t *ev);
void gpumd_obs_transition(gpumd_t *d, const gpumd_resv_t *r, gpumd_resv_state_t from,
                          gpumd_resv_state_t to);

/* ---- http*.c (REST API; docs/rest.md) ---- */
/* Starts the HTTP server per http.listen (nothing when "off"); creates or reads the API token.
 * Returns 0 or a negative code (bad address, non-loopback without http.token_file, ...). */
int gpumd_http_start(gpumd_t *d);
void gpumd_http_stop(gpumd_t *d);
/* End of turn: sends the HTTP responses staged so far (their turns are committed). */
void gpumd_http_flush(gpumd_t *d);
/* End of turn: the staged responses wait for the ledger's writer (held), and
 * gpumd_http_release sends them once it has committed. */
void gpumd_http_seal(gpumd_t *d);
void gpumd_http_release(gpumd_t *d);
/* SIGHUP: re-reads the token file. */
void gpumd_http_reload(gpumd_t *d);
/* "ADDR:PORT" the server listens on, or NULL when off. */
/* Failed accepts on the HTTP listener since start (0 when http.listen is off). */
uint64_t gpumd_http_accept_failures(gpumd_t *d);
/* HTTP connections closed to make room for a new one (http.max_connections, _per_peer). */
uint64_t gpumd_http_evicted(gpumd_t *d);
const char *gpumd_http_addr(gpumd_t *d);
/* Replaces the token with a fresh random one (written to the token file first) when rotate,
 * and returns {"token", "token_file"} in *out. Returns 0, GPUM_ESTATE (HTTP off) or GPUM_EIO. */
int gpumd_http_token_op(gpumd_t *d, bool rotate, json_t **out);

#endif /* GPUMD_INTERNAL_H */
