/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's state, shared by its modules: the daemon (one libevent loop, the listening socket,
 * the client connections, the leases, the scheduler and ledger, the monitor bridge), the
 * hooks through which lower modules call up, and who acts in a request. Each module declares
 * its functions in a header of its own, named after it (net.h, devices.h, obs.h, engine.h,
 * cluster.h, ops.h, proto.h, rest.h, turn.h; the leaves json_in.h, json_out.h, utf8_internal.h,
 * ...); docs/architecture.md has the map and the order in which they may call each other.
 * Everything here runs on the loop thread except the monitor callback in devices.c, which only
 * queues events for the loop, and the process-list threads of procs.c, which only publish
 * snapshots, and the refresh thread of cluster.c, which only swaps its cache under its lock.
 *
 * A loop turn is one event_base_loop(EVLOOP_ONCE). Replies and events produced during a turn
 * are staged per connection and written only after the ledger's transaction for that turn
 * has committed (gpumd_end_turn), so no client ever sees a state that is not durable. The
 * ledger's writer thread commits while the loop serves the next turn: at the end of a turn,
 * the staged output becomes held (sealed) when the turn's writes go to the writer, and held
 * output is written when the writer says they are committed; while the writer is busy, the
 * next turns' output stays staged and their writes go with the next batch. The socket
 * replies of a batch are written by the writer thread itself as soon as its commit returns
 * (copies made at the seal, gpumd_sendq_t; the loop writes what a socket did not take): the
 * clients' next requests then come while the loop is free, and their wake-ups are not the
 * loop's to pay.
 */
#ifndef GPUMD_H
#define GPUMD_H

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
#include "json_in.h"
#include "json_out.h"
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
  struct bufferevent *bev; /* the socket's writing side (and its errors) */
  struct event *rev;       /* the socket readable: read by server.c itself (on_readable) */
  char *in;                /* a line begun and not ended yet (in_len bytes; in_cap at most */
  size_t in_len, in_cap;   /* GPUMD_MAX_MESSAGE + 2), or NULL */
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
  bool sending;              /* the ledger's writer has its held output to write (sendq) */
  size_t send_slot;          /* its entry in d->sendq while sending */
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

#define GPUMD_MAX_PROCS 128          /* processes counted per device */
#define GPUMD_PROC_COMMAND_LEN 96    /* a process's command line as shown, cut (NUL included) */
#define GPUMD_PROC_NO_UID UINT32_MAX /* the pid's owner is not visible here */

/* A device's newest process list (procs.c), and its memory read with it; each process's owner
 * (uid: /proc, read by the reader) and command line, as nvitop shows them. The command lines
 * come last: a list is copied up to the last one used (gpumd_procs_len), not whole (14 KiB,
 * copied at every admission read, mostly empty). */
typedef struct {
  bool valid;
  size_t count;
  gpum_device_sample_t sample; /* the memory metrics only (valid bits say which) */
  char driver_version[32];     /* the driver's, as the reader's session says ("" unknown) */
  unsigned pid[GPUMD_MAX_PROCS];
  uint64_t memory[GPUMD_MAX_PROCS];
  uint32_t uid[GPUMD_MAX_PROCS]; /* GPUMD_PROC_NO_UID when not visible */
  char command[GPUMD_MAX_PROCS][GPUMD_PROC_COMMAND_LEN];
} gpumd_procs_t;

/* The calls a lower module makes upwards, wired once by main.c before anything starts: the
 * socket transport (server.c) hands up lines and closings, the device bridge (devices.c) the
 * monitor's news, the HTTP transport (http.c) its requests. So no lower module names a higher
 * one (docs/architecture.md). */
typedef struct {
  void (*line)(gpumd_conn_t *c, const char *line, size_t len); /* a complete line, no newline */
  void (*conn_closing)(gpumd_conn_t *c); /* c is going away: no more of the node's events */
  void (*conn_closed)(gpumd_conn_t *c);  /* c's peer is gone or going: its leases end */
  void (*device_info)(gpumd_t *d, const gpumd_device_t *dev); /* its static info was read */
  void (*device_answered)(gpumd_t *d, unsigned index);        /* a device silent so far answered */
  void (*device_event)(gpumd_t *d, const gpum_monitor_event_t *ev); /* a health change, an Xid */
  void (*device_round)(gpumd_t *d); /* every monitor interval: the newest samples are in */
  void (*http_request)(struct evhttp_request *req, void *arg); /* arg: the HTTP server's */
} gpumd_hooks_t;

/* The document of the reservation whose transition came last (resv_reply.c): written once
 * (without the token), for the events of every channel and for the reply that tells the same
 * state. Any other transition or row write takes the slot over (a new serial). */
typedef struct {
  uint64_t serial;          /* bumped at every transition and row write */
  uint64_t rid;             /* whose document the slot is for (0: none) */
  gpumd_resv_state_t state; /* in it */
  bool written;             /* text holds it */
  size_t id_end;            /* where a token goes: after {"id":"r-N" */
  gpumd_jw_mem_t text;
} gpumd_resv_doc_t;

/* The socket replies the ledger's writer thread writes as soon as the batch that made them
 * durable is committed (server.c): copies of the connections' held output, put here by
 * gpumd_conns_seal before the batch is handed over, and how much each socket took, read by
 * gpumd_conns_release once the batch is collected. The writer touches nothing else. */
typedef struct {
  struct gpumd_send {
    int fd;
    size_t off, len, sent;
  } * e;
  size_t n, cap;
  char *buf;
  size_t used, buf_cap;
} gpumd_sendq_t;

struct gpumd {
  gpumd_hooks_t hooks;
  gpum_config_t *cfg;
  struct event_base *base;
  struct evconnlistener *listener;
  char *rbuf; /* GPUMD_MAX_MESSAGE + 2: what a socket read brings (server.c, loop thread) */
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
  gpumd_sendq_t sendq;    /* what of it the writer writes itself */
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
  uint64_t metrics_max_age_ns; /* http.metrics_max_age: how stale a /metrics may be */
  bool metrics_dcgm;           /* metrics.dcgm_names: dcgm-exporter's families too */

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
  struct gpumd_suspend *susp;  /* suspend and resume (suspend.c) */
  struct event *ledger_ev;     /* the ledger's writer has committed a batch */
  /* Process lists for unmanaged memory, read on a thread per device (procs.c). */
  gpum_device_readers_t *procs;
  /* User names of the processes' uids, resolved on a thread of their own (util/users.h). */
  struct gpumd_users *users;
  /* Admission (admission.c): the devices read afresh this turn, whether that read was made,
   * and how long it may take (admission.read_timeout). */
  uint64_t fresh_mask, unanswered_mask; /* unanswered: the last fresh read failed */
  /* Reservations that ended lately (ended.c): a ring of GPUMD_ENDED_MAX, made at the first. */
  gpumd_resv_t *ended;
  size_t ended_head, ended_n;
  unsigned monitor_interval_ms; /* the monitor's sampling interval */
  bool fresh_done;
  unsigned admission_timeout_ms;
  /* Queue positions from queue_moved_from on may have moved this turn (a reservation joined or
   * left the queue there); the ones before it did not (gpumd_engine_turn_events). */
  bool queue_changed;
  size_t queue_moved_from;

  gpumd_resv_doc_t resv_doc; /* the latest transition's document (resv_reply.c) */

  /* Observability (metrics.c, sse.c, alerts.c): SSE streams, alert engine, counters. */
  struct gpumd_obs *obs;
  /* Workload figures processes report on their reservations (reports.c). */
  struct gpumd_report *reports;
  size_t nreports;

  bool stop;
  int exit_code;
  uint64_t start_ns;

  struct gpumd_http *http; /* the HTTP face (http.c); NULL when http.listen is off */

  /* The cluster's GPU nodes from Slurm (cluster.c); NULL when they are not listed. */
  struct gpumd_cluster *cluster;
};

/* Who asks for an operation: a socket peer (conn set, identity from SO_PEERCRED) or an HTTP
 * caller (conn NULL; gpumd's own uid and pid, admin when it showed the API token). The op
 * cores (ops.h) are shared by the socket protocol and the REST API: each takes its request as
 * each face decoded it (the request structs of ops.h; alerts' of obs.h), acts,
 * and returns 0 with *out = the reply body, or a negative code with the detail in
 * gpum_last_error(). Transitions reach the ledger through the engine and are committed at the
 * end of the turn, before any reply leaves. */
/* Where a socket reserve or release leaves its reservation instead of building the
 * {"reservation": R} body: the reply is then written directly (gpumd_engine_resv_write). */
typedef struct {
  gpumd_resv_t r;
  bool with_token;
  bool set;
  /* The serial of the document slot (gpumd_resv_doc_t) when it took the document of r's
   * latest transition in this request, else 0: the reply then copies it (resv_reply.c). */
  uint64_t doc_serial;
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

#endif /* GPUMD_H */
