/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gpumd client library: talks to the node daemon over its Unix socket (newline-delimited
 * JSON, docs/protocol.md) to reserve GPU memory, wait for grants, release, renew, list and read
 * the node's status; plus the socket and state-directory resolution the daemon itself uses, so
 * that both sides agree on the paths.
 *
 * Paths. The socket is the `socket` option (GPUM_SOCKET); when empty, /run/gpum/gpumd.sock for
 * root, else $XDG_RUNTIME_DIR/gpum/gpumd.sock, or /tmp/gpum-<uid>/gpumd.sock when
 * XDG_RUNTIME_DIR is unset. The state directory is the `state_dir` option (GPUM_STATE_DIR);
 * when empty, /var/lib/gpum for root, else $XDG_STATE_HOME/gpum or ~/.local/state/gpum.
 *
 * Calls. Every call sends one request with a fresh id and reads until the reply with that id
 * arrives (or the client's timeout passes: GPUM_ETIMEDOUT). Events the server pushes meanwhile
 * (granted, queued, failed, expired, released, pressure; node to a watcher) are queued and
 * handed to the event callback just before the call returns, or by gpum_client_process(). A
 * failed request returns the daemon's error code (GPUM_EINVAL, GPUM_EPERM, GPUM_ENOENT,
 * GPUM_ENEVERFIT, ...) with the daemon's message as the detail (gpum_last_error()).
 * GPUM_ECLOSED: the daemon closed the
 * connection (it stopped, or rejected an over-long message), or sent a message over the limit;
 * the client is then unusable (close it; connect again). A malformed message from the daemon
 * is GPUM_EPROTO and the connection stays usable.
 *
 * Polling: when a call returns, every complete message the client has read has been handed
 * out, so poll(2) on gpum_client_fd() never misses one that waits in the client's buffer.
 *
 * Thread safety: a gpum_client_t is not thread-safe. Use one connection per thread, or
 * serialise every call on a client with your own mutex. Callbacks run on the thread that
 * called into the client, inside that call; they must not call gpum_client_* on the same
 * client (they may record what they saw and let the caller act).
 *
 * Leases: a reservation made with the default lease (GPUM_LEASE_CONNECTION) is released by the
 * daemon when this connection closes, so a process that dies never leaks its reservation.
 */
#ifndef GPUM_CLIENT_H
#define GPUM_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/options.h>

#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUM_CLIENT_PROTOCOL 1
#define GPUM_CLIENT_MAX_MESSAGE (64 * 1024) /* bytes per message, newline included */
#define GPUM_CLIENT_MAX_DEVICES 16          /* devices kept per reservation */

/* --- Paths ------------------------------------------------------------------------------ */

/* The built-in default socket path (the rules above, without the option). Returns 0, or
 * GPUM_ENOSPC when len is too small (buf then holds ""). */
GPUM_API int gpum_default_socket_path(char *buf, size_t len);
/* The built-in default state directory. Returns 0, GPUM_ENOSPC, or GPUM_ENOENT when a
 * non-root user has no home directory. XDG_* variables that are not absolute are ignored. */
GPUM_API int gpum_default_state_dir(char *buf, size_t len);
/* The effective socket path: the `socket` option of cfg when set; with cfg NULL, $GPUM_SOCKET
 * when set; else the default. Same returns as gpum_default_socket_path. */
GPUM_API int gpum_socket_path(const gpum_config_t *cfg, char *buf, size_t len);
/* The effective state directory: `state_dir` of cfg, else $GPUM_STATE_DIR (cfg NULL), else the
 * default. */
GPUM_API int gpum_state_dir(const gpum_config_t *cfg, char *buf, size_t len);

/* --- Reservations ----------------------------------------------------------------------- */

typedef enum {
  GPUM_RES_UNKNOWN = 0, /* a state name this library does not know */
  GPUM_RES_QUEUED,
  GPUM_RES_GRANTED,
  GPUM_RES_RELEASED,
  GPUM_RES_EXPIRED,
  GPUM_RES_CANCELLED,
  GPUM_RES_FAILED,
  GPUM_RES_SUSPENDED, /* its job's GPU memory is in host memory (docs/suspend.md): live */
} gpum_res_state_t;

typedef enum {
  GPUM_LEASE_CONNECTION = 0, /* released when the connection closes (default) */
  GPUM_LEASE_PID,            /* released when the process exits */
  GPUM_LEASE_TTL,            /* released when not renewed within ttl_ms */
} gpum_lease_t;

typedef struct {
  unsigned index;
  char uuid[96];
  uint64_t memory_total; /* the device's memory, bytes (0 when gpumd does not say) */
  char vendor[16];       /* "nvidia", "amd", "intel", "host"; "" when gpumd does not say */
  unsigned vendor_index; /* its number among its vendor's devices (ZE_AFFINITY_MASK's) */
} gpum_res_device_t;

/* A reservation as the daemon reported it. Strings are "" when absent; numbers 0. */
typedef struct {
  char id[64];
  char token[80]; /* only shown to the owner */
  gpum_res_state_t state;
  char reason[256];
  uint32_t uid;
  int32_t pid;
  char label[128];
  uint64_t bytes_per_gpu;
  unsigned gpus;
  int priority;
  gpum_lease_t lease;
  uint64_t ttl_ms;
  uint64_t expires_ns;
  size_t ndevices;
  gpum_res_device_t devices[GPUM_CLIENT_MAX_DEVICES];
  long queue_position; /* while QUEUED: 0 = next in line; -1 otherwise */
  char waiting_for[256];
  uint64_t created_ns, granted_ns, ended_ns;
  /* Run under the enforcement shim (gpum run --enforce): what its processes hold over its GPUs
   * and the limit per GPU, as the shim counts them. fenced is false when the job is not
   * fenced (or the daemon cannot read its fence). */
  bool fenced;
  uint64_t fenced_used, fenced_limit;
  /* The Slurm job and step it was made for (gpum_spank.so): "12345" or "12345_7" (an array
   * task), and "0", "batch", "extern" or "interactive"; both "" when none. */
  char slurm_job_id[24];
  char slurm_step_id[24];
  /* Suspend (docs/suspend.md): whether the job agreed to be suspended; while SUSPENDED, since
   * when, the host memory its GPU memory takes, and whether it waits for `gpum resume` (hold)
   * rather than for room. */
  bool preemptible;
  bool hold;
  uint64_t suspended_ns;
  uint64_t host_bytes;
  char moving[16]; /* "suspending" or "resuming" while its memory moves; "" otherwise */
} gpum_reservation_t;

/* "QUEUED", "GRANTED", ...; "UNKNOWN". */
GPUM_API const char *gpum_res_state_name(gpum_res_state_t st);
/* True for RELEASED, EXPIRED, CANCELLED and FAILED. */
GPUM_API bool gpum_res_state_is_final(gpum_res_state_t st);

/* A reservation request. Zero-initialise and fill what you need: gpus 0 means 1. */
typedef struct {
  uint64_t bytes_per_gpu; /* required, > 0 */
  unsigned gpus;
  const char *model;          /* GPU type (gpum/gputype.h: "A100", "H100*"), or NULL */
  uint64_t min_memory;        /* devices with at least this much total memory; 0: any */
  const char *const *devices; /* indexes or UUIDs to choose from, or NULL */
  size_t ndevices;
  int priority;              /* -100..100, higher first */
  uint64_t queue_timeout_ms; /* the daemon's queue timeout; 0 none */
  bool wait_on_timeout;      /* on queue timeout: keep waiting (true) or be rejected */
  const char *label;         /* job name shown in listings, or NULL */
  gpum_lease_t lease;
  int32_t pid;     /* GPUM_LEASE_PID: the process; 0 = the caller */
  uint64_t ttl_ms; /* GPUM_LEASE_TTL */
  bool no_wait;    /* never queue: granted at once, or the reserve call fails with GPUM_EBUSY
                      and the daemon's reason (what it would have waited for) */
  /* The Slurm job step the reservation is for, shown by gpum jobs, the REST API and /metrics:
   * both NULL (none) or both set. The job id is digits, or an array task's "JOB_TASK"; the
   * step id digits or "batch", "extern", "interactive". gpumd refuses others (GPUM_EINVAL). */
  const char *slurm_job_id;
  const char *slurm_step_id;
  bool preemptible; /* the job may be suspended to host memory (docs/suspend.md) */
} gpum_reserve_req_t;

/* --- Events ----------------------------------------------------------------------------- */

typedef enum {
  GPUM_CLIENT_EV_OTHER = 0, /* an event name this library does not know */
  GPUM_CLIENT_EV_QUEUED,    /* queued, or the queue position changed */
  GPUM_CLIENT_EV_GRANTED,
  GPUM_CLIENT_EV_FAILED, /* device lost */
  GPUM_CLIENT_EV_EXPIRED,
  GPUM_CLIENT_EV_RELEASED,
  GPUM_CLIENT_EV_PRESSURE,
  GPUM_CLIENT_EV_NODE,      /* an event of the node's, to a watcher (gpum_client_watch) */
  GPUM_CLIENT_EV_SUSPENDED, /* its job's GPU memory moved to host memory (docs/suspend.md) */
  GPUM_CLIENT_EV_RESUMED,   /* and back: GRANTED again */
} gpum_client_event_kind_t;

/* What happens on the node that a watcher can follow (gpum_client_watch): the events gpumd
 * publishes on its HTTP event stream (docs/metrics.md, GET /api/v1/events), one bit a type. */
typedef enum {
  GPUM_WATCH_RESERVATION = 1u << 0, /* every transition of every reservation */
  GPUM_WATCH_ALERT = 1u << 1,       /* an alert fired or cleared */
  GPUM_WATCH_HEALTH = 1u << 2,      /* a device changed health state */
  GPUM_WATCH_XID = 1u << 3,         /* the driver reported an Xid */
  GPUM_WATCH_SAMPLE = 1u << 4,      /* a device's figures, once a second per device */
} gpum_watch_type_t;
/* Every type but the samples: what changes the node's state. */
#define GPUM_WATCH_DEFAULT \
  (GPUM_WATCH_RESERVATION | GPUM_WATCH_ALERT | GPUM_WATCH_HEALTH | GPUM_WATCH_XID)

/* An event. Its pointers are valid during the callback only. */
typedef struct {
  gpum_client_event_kind_t kind;
  const char *name;                      /* the event's name as sent */
  const gpum_reservation_t *reservation; /* NULL for pressure; node: a "reservation" event's */
  int device;             /* pressure, node (health, xid, alert, sample): the device; else -1 */
  double used_ratio;      /* pressure */
  const char *level;      /* pressure: "high", "critical", "none" (cleared) */
  gpum_watch_type_t type; /* node: the type as a bit (0: a type this library does not know) */
  const char *type_name;  /* node: the type as sent ("reservation", "alert", ...); else NULL */
  uint64_t seq;           /* node: the event's id, the same as on the HTTP event stream */
  const char *data;       /* node: its "data" object as compact JSON text ("null" when gpumd
                             left it out: over the message limit) */
} gpum_client_event_t;

typedef void (*gpum_client_event_fn)(const gpum_client_event_t *ev, void *user);

/* --- Connection ------------------------------------------------------------------------- */

typedef struct gpum_client gpum_client_t;

/* Connects to the daemon at path (NULL: gpum_socket_path(NULL)) and says hello. timeout_ms
 * bounds the handshake (0: 5 s) and becomes the client's call timeout. Returns 0, or
 * GPUM_ENOENT / GPUM_ECLOSED ("cannot connect to gpumd at PATH: ... (is gpumd running? ...)"),
 * GPUM_EPERM (socket permissions), GPUM_ETIMEDOUT, GPUM_EPROTO. */
GPUM_API int gpum_client_connect(const char *path, unsigned timeout_ms, gpum_client_t **out);
/* Closes the connection (connection-bound reservations are released by the daemon) and frees
 * the client. NULL is fine. */
GPUM_API void gpum_client_close(gpum_client_t *c);

/* How long a call waits for its reply (ms, > 0). */
GPUM_API void gpum_client_set_timeout(gpum_client_t *c, unsigned timeout_ms);
GPUM_API void gpum_client_set_event_cb(gpum_client_t *c, gpum_client_event_fn fn, void *user);
/* The connection's file descriptor, for poll(2) (POLLIN: call gpum_client_process). */
GPUM_API int gpum_client_fd(const gpum_client_t *c);
/* What the daemon said in hello. */
GPUM_API const char *gpum_client_server_version(const gpum_client_t *c);
GPUM_API const char *gpum_client_socket(const gpum_client_t *c);

/* Reads what has arrived (waiting up to timeout_ms for something when nothing is pending; 0:
 * do not wait, -1: forever) and dispatches the events. Returns the number of events
 * dispatched (>= 0), or GPUM_ECLOSED / GPUM_EPROTO. */
GPUM_API int gpum_client_process(gpum_client_t *c, int timeout_ms);

/* --- Operations ------------------------------------------------------------------------- */

/* Follows the node's events on this connection: from the reply on, every event gpumd publishes
 * of the types in types (GPUM_WATCH_* bits; GPUM_WATCH_DEFAULT is every type but samples)
 * reaches the event callback as a GPUM_CLIENT_EV_NODE event, in order, each after the state it
 * shows is durable. types 0 stops them (no event of the node's comes after the reply). seq
 * (may be NULL) gets the id of the newest event published before the reply: the events that
 * follow have larger ones. Anyone may watch. An event that arrives between calls waits on the
 * socket: poll gpum_client_fd() and call gpum_client_process(). A watcher that does not read
 * is disconnected by gpumd (256 KiB unread; docs/protocol.md). Returns 0, GPUM_EINVAL (a bit
 * this library does not know), GPUM_EAGAIN (gpumd has as many watchers as it takes), or the
 * client's errors. Not thread-safe (as every call on a client). */
GPUM_API int gpum_client_watch(gpum_client_t *c, unsigned types, uint64_t *seq);

/* Asks for a reservation and returns at once with it in *out: GRANTED, or QUEUED (then wait
 * for the "granted" event with gpum_client_process or gpum_client_wait). */
GPUM_API int gpum_client_reserve_async(gpum_client_t *c, const gpum_reserve_req_t *req,
                                       gpum_reservation_t *out);
/* Waits until reservation id leaves QUEUED (dispatching events meanwhile), up to timeout_ms
 * (-1: forever; 0: only take what has already arrived, e.g. after poll(2) said POLLIN). *out gets
 * its latest state. Returns 0 when GRANTED; GPUM_ETIMEDOUT when still queued; GPUM_ESTATE when it
 * ended otherwise (expired, cancelled, failed; the reason is the detail); GPUM_ECLOSED. */
GPUM_API int gpum_client_wait(gpum_client_t *c, const char *id, int timeout_ms,
                              gpum_reservation_t *out);
/* reserve_async + wait. When the wait times out the queued reservation is cancelled and
 * GPUM_ETIMEDOUT returned. */
GPUM_API int gpum_client_reserve(gpum_client_t *c, const gpum_reserve_req_t *req, int timeout_ms,
                                 gpum_reservation_t *out);
/* Releases (GRANTED) or cancels (QUEUED) a reservation. out may be NULL. */
GPUM_API int gpum_client_release(gpum_client_t *c, const char *id, gpum_reservation_t *out);
/* Renews a TTL lease (ttl_ms 0: keep the current TTL). out may be NULL. */
GPUM_API int gpum_client_renew(gpum_client_t *c, const char *id, uint64_t ttl_ms,
                               gpum_reservation_t *out);
/* Resizes a granted reservation to bytes_per_gpu (elastic reservations: the enforcement shim
 * grows one within its maximum and gives memory back). Growing needs room on every GPU it
 * holds and no queued request of at least its priority waiting for them: else GPUM_EBUSY with
 * the reason. The owner or an admin only (GPUM_EPERM). out may be NULL. */
GPUM_API int gpum_client_resize(gpum_client_t *c, const char *id, uint64_t bytes_per_gpu,
                                gpum_reservation_t *out);
/* Suspend and resume a preemptible reservation's job (docs/suspend.md), the owner or an admin.
 * Each starts the work and returns at once with the reservation as it is then: the driver moves
 * the job's GPU memory in the background (seconds per GiB on a real GPU); the reservation
 * becomes SUSPENDED, or GRANTED again, when it is done, or stays with the reason in its "reason"
 * (its "moving" says "suspending" or "resuming" meanwhile: docs/protocol.md). Suspend: GPUM_ESTATE
 * (not GRANTED, or a suspend or resume already under way), GPUM_ENOTSUP (not preemptible; managed
 * or IPC memory; no process to suspend; a driver without checkpoints), GPUM_EBUSY (over the node's
 * host memory bound). Resume: GPUM_ESTATE (not SUSPENDED); with no room now it waits for room (no
 * longer held) and returns 0, the reason saying what it waits for. */
GPUM_API int gpum_client_suspend(gpum_client_t *c, const char *id, gpum_reservation_t *out);
GPUM_API int gpum_client_resume(gpum_client_t *c, const char *id, gpum_reservation_t *out);
/* One reservation by id ("r-7"), anyone's, live or ended (gpumd's ledger keeps ended ones for
 * its ledger.retention): what `list` shows of it, without walking the list. GPUM_ENOENT when
 * gpumd knows none of that id, GPUM_EINVAL for an id that is none, or the client's errors. */
GPUM_API int gpum_client_get(gpum_client_t *c, const char *id, gpum_reservation_t *out);
/* Rebinds a connection-bound reservation to this connection (after a daemon restart). */
GPUM_API int gpum_client_attach(gpum_client_t *c, const char *id, const char *token,
                                gpum_reservation_t *out);
/* The caller's live (QUEUED, GRANTED and SUSPENDED) reservations (all: everyone's), in id order,
 * in a malloc'd array (*out, *n) the caller frees with free(). gpumd answers a list in pages (each
 * reply is one message, docs/protocol.md); this call asks for every page in turn, so a node's
 * whole list comes back, however long. The pages are read one after another, not at one
 * instant: a reservation made or ended meanwhile may or may not be in it. */
GPUM_API int gpum_client_list(gpum_client_t *c, bool all, gpum_reservation_t **out, size_t *n);

/* One page of a list (gpum_client_list_page). Zero-initialise and fill what you need. */
#define GPUM_LIST_CURSOR_MAX 64 /* bytes a cursor takes, NUL included */
typedef struct {
  bool all;        /* everyone's; else the caller's (ignored when by_uid) */
  unsigned states; /* bits (1u << GPUM_RES_QUEUED), GRANTED, SUSPENDED; 0: every live one */
  bool by_uid;     /* only uid's reservations */
  uint32_t uid;
  const char *label;  /* only this label; ending with '*': the labels that begin so; NULL any */
  size_t limit;       /* at most this many (1..10000); 0: gpumd's default (1000). A page also
                         stops where one more would pass the message limit */
  const char *cursor; /* NULL or "": the first page; else the previous page's next_cursor */
} gpum_list_query_t;

/* A page of the live reservations that match q (NULL: the caller's), in id order, in a
 * malloc'd array (*out, *n: free() it; never NULL on success, *n may be 0). next_cursor
 * (cap bytes, GPUM_LIST_CURSOR_MAX suffice) gets the cursor of the next page, or "" at the
 * end; total (may be NULL) how many reservations match q now, all pages together. A cursor
 * stays valid while gpumd runs, whatever is made or ended meanwhile: the next page starts
 * after the last id listed, so none is listed twice, and every reservation that lived
 * through the walk is listed once. Returns 0, GPUM_EINVAL (a bad cursor, states or label),
 * GPUM_ERANGE (cap too small) or the client's errors. */
GPUM_API int gpum_client_list_page(gpum_client_t *c, const gpum_list_query_t *q,
                                   gpum_reservation_t **out, size_t *n, char *next_cursor,
                                   size_t cap, size_t *total);

/* What gpum_client_list_each hands its callback: a live reservation of a page, or one that
 * ended lately (asked for with ended). */
typedef enum {
  GPUM_LIST_LIVE = 0, /* QUEUED, GRANTED or SUSPENDED, in id order, page after page */
  GPUM_LIST_ENDED,    /* reached a final state in the last ten minutes, newest first */
} gpum_list_part_t;
/* Called for each reservation with its struct and its JSON document (compact, len bytes, not
 * NUL-terminated: the bytes gpumd sent), both valid during the call only. Returns 0 to go on;
 * anything else stops the walk, and gpum_client_list_each returns it. */
typedef int (*gpum_list_fn)(void *user, gpum_list_part_t part, const gpum_reservation_t *r,
                            const char *doc, size_t len);
/* Walks every page of the list q asks for (NULL: the caller's; q->cursor: where to start,
 * NULL or "" the first page; q->limit: the most per page) and hands each reservation to fn as
 * it comes, page after page, without holding more than one page: the way to list a node of
 * many reservations. ended (and q->cursor NULL or ""): also the reservations of q's user, or
 * everyone's with q->all, that ended in the last ten minutes, after the first page's live ones
 * (gpumd keeps the last 256; docs/protocol.md, `list`). total (may be NULL) gets the last
 * page's count of the live reservations that match q. Each page is read once, straight from
 * gpumd's message into the structs (no JSON tree). Returns 0, fn's non-zero return, or
 * gpum_client_list_page's errors. Thread safety: that of the client. */
GPUM_API int gpum_client_list_each(gpum_client_t *c, const gpum_list_query_t *q, bool ended,
                                   gpum_list_fn fn, void *user, size_t *total);

/* The daemon's view of one device. */
typedef struct {
  unsigned index;
  char uuid[96];
  char name[128];
  char state[32];
  char reason[256];
  uint64_t total, used, free;
  uint64_t committed, reserved, unmanaged;
  unsigned jobs;
  size_t nreservations;
  char (*reservations)[64]; /* their ids */
} gpum_client_device_status_t;

typedef struct {
  size_t ndevices;
  gpum_client_device_status_t *devices;
  size_t nqueue;
  gpum_reservation_t *queue;
} gpum_client_status_t;

GPUM_API int gpum_client_status(gpum_client_t *c, gpum_client_status_t *out);
GPUM_API void gpum_client_status_free(gpum_client_status_t *st);

/* Operator switch (admins only: root or gpumd's admin_group): disabled true makes device
 * (gpumd's index as a string, "0", or its UUID) DISABLED with reason (NULL or "": "disabled by
 * the operator"): gpumd grants nothing new on it, reservations already there run on, and the
 * switch is kept across gpumd's restarts. disabled false gives it back to the health rules.
 * state (may be NULL) gets the device's state afterwards ("DISABLED", "AVAILABLE", ...).
 * Returns 0, GPUM_EPERM (not an admin), GPUM_ENODEV (no such device), GPUM_ESTATE (a device
 * that has not answered yet), or the client's errors. */
GPUM_API int gpum_client_set_device_disabled(gpum_client_t *c, const char *device, bool disabled,
                                             const char *reason, char *state, size_t state_len);

/* Sends {"id": <fresh>, "op": op, ...args} where args_json is a JSON object text (or NULL)
 * and returns the whole reply as JSON text in *reply (malloc'd; the caller frees): the line
 * gpumd sent, as it sent it, for tools that want the raw document (gpum jobs --json). A reply with
 * ok false returns the daemon's error like every other call. */
GPUM_API int gpum_client_call_json(gpum_client_t *c, const char *op, const char *args_json,
                                   char **reply);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_CLIENT_H */
