/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The names of gpumd's socket protocol (docs/protocol.md), defined once for both of its sides:
 * the client in libgpum (src/lib/client) and the daemon (src/gpumd, which has src/lib on its
 * include path and includes "client/protocol_internal.h"). Ops, fields, event names and the
 * spellings of reservation states, lease kinds, timeout actions and pressure levels are
 * string literals, so that they also join other literals ("," GPUM_PROTO_F_STATE ":"); where
 * a side maps names to its own enum, an X-macro table lists the values: XX(NAME), the name
 * being GPUM_PROTO_<KIND>_##NAME and the enum constants the side's own prefix ##NAME (the
 * client's public gpum_res_state_t GPUM_RES_##NAME, gpumd's gpumd_resv_state_t
 * GPUMD_RESV_##NAME, ...), so both sides map through the one table. Error code names are
 * those of GPUM_ERRNO_MAP (gpum/error.h): gpum_err_name() spells a code and
 * gpum__proto_err_code() reads a name back.
 *
 * Internal to libgpum and gpumd: never installed, no ABI. A new op, field or value is added
 * here and used from here by both sides.
 */
#ifndef GPUM_PROTOCOL_INTERNAL_H
#define GPUM_PROTOCOL_INTERNAL_H

#include <stdbool.h>
#include <string.h>

#include <gpum/client.h>
#include <gpum/error.h>

/* The protocol's version, hello's "protocol": the client's public GPUM_CLIENT_PROTOCOL. */
#define GPUM_PROTO_VERSION GPUM_CLIENT_PROTOCOL

/* ---- Ops ("op" of a request) -------------------------------------------------------------- */

#define GPUM_PROTO_OP_HELLO "hello"
#define GPUM_PROTO_OP_STATUS "status"
#define GPUM_PROTO_OP_LIST "list"
#define GPUM_PROTO_OP_RESERVE "reserve"
#define GPUM_PROTO_OP_RELEASE "release"
#define GPUM_PROTO_OP_RENEW "renew"
#define GPUM_PROTO_OP_RESIZE "resize"
#define GPUM_PROTO_OP_ATTACH "attach"
#define GPUM_PROTO_OP_HTTP_TOKEN "http_token"
#define GPUM_PROTO_OP_ALERTS "alerts"
#define GPUM_PROTO_OP_DISABLE "disable"
#define GPUM_PROTO_OP_ENABLE "enable"
#define GPUM_PROTO_OP_REPORT "report"
#define GPUM_PROTO_OP_WATCH "watch"
#define GPUM_PROTO_OP_SUSPEND "suspend" /* {"reservation"}: docs/suspend.md */
#define GPUM_PROTO_OP_RESUME "resume"   /* {"reservation"} */
#define GPUM_PROTO_OP_GET "get"         /* {"reservation"}: one, live or ended */

/* ---- Fields ----------------------------------------------------------------------------- */

/* Every message: requests {"id", "op", ...}, replies {"id", "ok": true, ...} or {"id", "ok":
 * false, "error": {"code", "message"}}, events {"event", ...}. */
#define GPUM_PROTO_F_ID "id"
#define GPUM_PROTO_F_OP "op"
#define GPUM_PROTO_F_OK "ok"
#define GPUM_PROTO_F_ERROR "error"
#define GPUM_PROTO_F_CODE "code"
#define GPUM_PROTO_F_MESSAGE "message"
#define GPUM_PROTO_F_EVENT "event"

/* hello: request and reply. */
#define GPUM_PROTO_F_CLIENT "client"
#define GPUM_PROTO_F_PROTOCOL "protocol"
#define GPUM_PROTO_F_SERVER "server"
#define GPUM_PROTO_F_VERSION "version"
#define GPUM_PROTO_F_ADMIN "admin"

/* reserve's request, and the reservation object R (with "id", "uid", "pid", "state"). */
#define GPUM_PROTO_F_BYTES_PER_GPU "bytes_per_gpu"
#define GPUM_PROTO_F_GPUS "gpus"
#define GPUM_PROTO_F_MODEL "model"
#define GPUM_PROTO_F_MIN_MEMORY "min_memory"
#define GPUM_PROTO_F_DEVICES "devices"
#define GPUM_PROTO_F_PRIORITY "priority"
#define GPUM_PROTO_F_TIMEOUT_MS "timeout_ms"
#define GPUM_PROTO_F_ON_TIMEOUT "on_timeout"
#define GPUM_PROTO_F_LABEL "label"
#define GPUM_PROTO_F_SLURM "slurm" /* {"job_id", "step_id"} (strings); null in R when none */
#define GPUM_PROTO_F_JOB_ID "job_id"
#define GPUM_PROTO_F_STEP_ID "step_id"
#define GPUM_PROTO_F_LEASE "lease"
#define GPUM_PROTO_F_PID "pid"
#define GPUM_PROTO_F_TTL_MS "ttl_ms"
#define GPUM_PROTO_F_WAIT "wait"
#define GPUM_PROTO_F_PREEMPTIBLE "preemptible" /* reserve and R: the job may be suspended */
/* R of a SUSPENDED reservation: since when, the host memory its job's device memory takes,
 * whether it waits for a resume by hand ("hold": true) or for room. */
#define GPUM_PROTO_F_SUSPENDED_NS "suspended_ns"
#define GPUM_PROTO_F_HOST_BYTES "host_bytes"
#define GPUM_PROTO_F_HOLD "hold"
/* R while its job's memory is being moved: "suspending" or "resuming" (absent otherwise). */
#define GPUM_PROTO_F_MOVING "moving"
#define GPUM_PROTO_MOVING_SUSPENDING "suspending"
#define GPUM_PROTO_MOVING_RESUMING "resuming"
#define GPUM_PROTO_F_TOKEN "token"
#define GPUM_PROTO_F_STATE "state"
#define GPUM_PROTO_F_REASON "reason"
#define GPUM_PROTO_F_UID "uid"
#define GPUM_PROTO_F_LEASE_PID "lease_pid"
#define GPUM_PROTO_F_EXPIRES_NS "expires_ns"
#define GPUM_PROTO_F_INDEX "index" /* of a device, in R's "devices" and in status */
#define GPUM_PROTO_F_UUID "uuid"
#define GPUM_PROTO_F_QUEUE_POSITION "queue_position"
#define GPUM_PROTO_F_FENCED "fenced"
#define GPUM_PROTO_F_MEMORY_TOTAL "memory_total"
#define GPUM_PROTO_F_VENDOR "vendor"
#define GPUM_PROTO_F_VENDOR_INDEX "vendor_index"
#define GPUM_PROTO_F_LIMIT "limit"
#define GPUM_PROTO_F_PROCESSES "processes"
#define GPUM_PROTO_F_WAITING_FOR "waiting_for"
#define GPUM_PROTO_F_CREATED_NS "created_ns"
#define GPUM_PROTO_F_GRANTED_NS "granted_ns"
#define GPUM_PROTO_F_ENDED_NS "ended_ns"

/* release, renew, attach, list, http_token; their replies. */
#define GPUM_PROTO_F_RESERVATION "reservation"
#define GPUM_PROTO_F_RESERVATIONS "reservations"
#define GPUM_PROTO_F_ALL "all"
#define GPUM_PROTO_F_ENDED "ended"
#define GPUM_PROTO_F_CURSOR "cursor"
#define GPUM_PROTO_F_NEXT_CURSOR "next_cursor"
/* list pages: the cursor is this prefix and the last listed id's number (docs/protocol.md). */
#define GPUM_PROTO_CURSOR_PREFIX "c1."
#define GPUM_PROTO_F_ROTATE "rotate"

/* report (a process's workload figures on its reservation) and R's "workload". */
#define GPUM_PROTO_F_SOURCE "source"
#define GPUM_PROTO_F_FIGURES "figures"
#define GPUM_PROTO_F_WORKLOAD "workload"
#define GPUM_PROTO_F_AGE_MS "age_ms"
#define GPUM_PROTO_REPORT_SOURCES_MAX 16 /* per reservation */
#define GPUM_PROTO_REPORT_FIGURES_MAX 48 /* per source */
#define GPUM_PROTO_REPORT_NAME_MAX 48    /* a source's or a figure's name, bytes */
/* Whether s is a report's source name (source: a-z 0-9 _ . -) or figure name (a-z 0-9 _), 1 to
 * GPUM_PROTO_REPORT_NAME_MAX bytes (report.c; gpumd checks with it too). */
bool gpum__report_name_ok(const char *s, bool source);

/* watch: request {"events": [TYPE...]} or {"off": true}; reply {"events": [TYPE...], "seq"};
 * then "node" events {"type": TYPE, "seq", "data"} ("data": null and "too_large": true when the
 * event would pass the message limit). */
#define GPUM_PROTO_F_EVENTS "events"
#define GPUM_PROTO_F_OFF "off"
#define GPUM_PROTO_F_SEQ "seq"
#define GPUM_PROTO_F_TYPE "type"
#define GPUM_PROTO_F_DATA "data"
#define GPUM_PROTO_F_TOO_LARGE "too_large"

/* alerts: request {"limit"}; reply {"enabled", "active": [...], "history": [...], "counters"}. */
#define GPUM_PROTO_F_LIMIT "limit"

/* status's reply: {"node": {...}, "devices": [D...], "queue": [R...]}. */
#define GPUM_PROTO_F_NODE "node"
#define GPUM_PROTO_F_HOSTNAME "hostname"
#define GPUM_PROTO_F_STARTED_NS "started_ns"
#define GPUM_PROTO_F_QUEUED "queued"
#define GPUM_PROTO_F_SUSPENDED "suspended" /* status's node: SUSPENDED reservations */
#define GPUM_PROTO_F_CLIENTS "clients"
#define GPUM_PROTO_F_QUEUE "queue"
#define GPUM_PROTO_F_NAME "name"
#define GPUM_PROTO_F_MEMORY "memory"
#define GPUM_PROTO_F_TOTAL "total"
#define GPUM_PROTO_F_USED "used"
#define GPUM_PROTO_F_FREE "free"
#define GPUM_PROTO_F_CAPACITY "capacity"
#define GPUM_PROTO_F_COMMITTED "committed"
#define GPUM_PROTO_F_RESERVED "reserved"
#define GPUM_PROTO_F_UNMANAGED "unmanaged"
#define GPUM_PROTO_F_OVERCOMMIT "overcommit"
#define GPUM_PROTO_F_GRANTABLE "grantable"
#define GPUM_PROTO_F_JOBS "jobs"
#define GPUM_PROTO_F_PRESSURE "pressure"

/* The "pressure" event: {"device", "used_ratio", "level"}. */
#define GPUM_PROTO_F_DEVICE "device"
#define GPUM_PROTO_F_USED_RATIO "used_ratio"
#define GPUM_PROTO_F_LEVEL "level"

/* ---- Events ("event" of a message without an id) ----------------------------------------- */

#define GPUM_PROTO_EV_QUEUED "queued"
#define GPUM_PROTO_EV_GRANTED "granted"
#define GPUM_PROTO_EV_FAILED "failed"
#define GPUM_PROTO_EV_EXPIRED "expired"
#define GPUM_PROTO_EV_RELEASED "released"
#define GPUM_PROTO_EV_SUSPENDED "suspended" /* GRANTED -> SUSPENDED */
#define GPUM_PROTO_EV_RESUMED "resumed"     /* SUSPENDED -> GRANTED */
#define GPUM_PROTO_EV_PRESSURE "pressure"
#define GPUM_PROTO_EV_NODE "node" /* to watchers (the watch op): an event of the node's */
/* XX(NAME): every event (the client's GPUM_CLIENT_EV_##NAME). */
#define GPUM_PROTO_EVENTS(XX) \
  XX(QUEUED)                  \
  XX(GRANTED) XX(FAILED) XX(EXPIRED) XX(RELEASED) XX(PRESSURE) XX(NODE) XX(SUSPENDED) XX(RESUMED)

/* The types of the node's events (a "node" event's "type", the watch op's "events"): the
 * events gpumd publishes on its HTTP event stream (docs/metrics.md). XX(NAME): the client's
 * public bit GPUM_WATCH_##NAME. */
#define GPUM_PROTO_NODE_RESERVATION "reservation"
#define GPUM_PROTO_NODE_ALERT "alert"
#define GPUM_PROTO_NODE_HEALTH "health"
#define GPUM_PROTO_NODE_XID "xid"
#define GPUM_PROTO_NODE_SAMPLE "sample"
#define GPUM_PROTO_NODE_TYPES(XX) XX(RESERVATION) XX(ALERT) XX(HEALTH) XX(XID) XX(SAMPLE)

/* The GPUM_WATCH_* bit of a node event type's name; 0 for NULL or a name not in the table. */
static inline unsigned gpum__proto_node_type(const char *name) {
#define GPUM__PROTO_NODE_BIT(n)                               \
  if (name != NULL && strcmp(name, GPUM_PROTO_NODE_##n) == 0) \
    return GPUM_WATCH_##n;
  GPUM_PROTO_NODE_TYPES(GPUM__PROTO_NODE_BIT)
#undef GPUM__PROTO_NODE_BIT
  return 0;
}

/* The name of a GPUM_WATCH_* bit (one bit); NULL for any other value. */
static inline const char *gpum__proto_node_type_name(unsigned bit) {
#define GPUM__PROTO_NODE_NAME(n)       \
  if (bit == (unsigned)GPUM_WATCH_##n) \
    return GPUM_PROTO_NODE_##n;
  GPUM_PROTO_NODE_TYPES(GPUM__PROTO_NODE_NAME)
#undef GPUM__PROTO_NODE_NAME
  return NULL;
}

/* Every GPUM_WATCH_* bit. */
#define GPUM__PROTO_NODE_ALL                                                                   \
  ((unsigned)(GPUM_WATCH_RESERVATION | GPUM_WATCH_ALERT | GPUM_WATCH_HEALTH | GPUM_WATCH_XID | \
              GPUM_WATCH_SAMPLE))

/* ---- Values ------------------------------------------------------------------------------- */

/* A reservation's "state" (GPUM_RES_##NAME in the client, GPUMD_RESV_##NAME in gpumd). */
#define GPUM_PROTO_STATE_QUEUED "QUEUED"
#define GPUM_PROTO_STATE_GRANTED "GRANTED"
#define GPUM_PROTO_STATE_RELEASED "RELEASED"
#define GPUM_PROTO_STATE_EXPIRED "EXPIRED"
#define GPUM_PROTO_STATE_CANCELLED "CANCELLED"
#define GPUM_PROTO_STATE_FAILED "FAILED"
#define GPUM_PROTO_STATE_SUSPENDED "SUSPENDED"
#define GPUM_PROTO_STATES(XX) \
  XX(QUEUED) XX(GRANTED) XX(RELEASED) XX(EXPIRED) XX(CANCELLED) XX(FAILED) XX(SUSPENDED)

/* A reservation's "lease" (GPUM_LEASE_##NAME in the client, GPUMD_LEASE_##NAME in gpumd). */
#define GPUM_PROTO_LEASE_CONNECTION "connection"
#define GPUM_PROTO_LEASE_PID "pid"
#define GPUM_PROTO_LEASE_TTL "ttl"
#define GPUM_PROTO_LEASES(XX) XX(CONNECTION) XX(PID) XX(TTL)

/* reserve's "on_timeout" (GPUMD_ON_TIMEOUT_##NAME in gpumd). */
#define GPUM_PROTO_ON_TIMEOUT_REJECT "reject"
#define GPUM_PROTO_ON_TIMEOUT_WAIT "wait"
#define GPUM_PROTO_ON_TIMEOUTS(XX) XX(REJECT) XX(WAIT)

/* A device's "pressure" in status and the "level" of a pressure event (GPUMD_PRESSURE_##NAME
 * in gpumd). */
#define GPUM_PROTO_PRESSURE_NONE "none"
#define GPUM_PROTO_PRESSURE_HIGH "high"
#define GPUM_PROTO_PRESSURE_CRITICAL "critical"
#define GPUM_PROTO_PRESSURES(XX) XX(NONE) XX(HIGH) XX(CRITICAL)

/* ---- Error codes ------------------------------------------------------------------------ */

/* The GPUM_E* code of an error reply's "code" ("EINVAL"), from GPUM_ERRNO_MAP; GPUM_EPROTO
 * for NULL or a name the table does not have. */
static inline int gpum__proto_err_code(const char *name) {
  if (name == NULL)
    return GPUM_EPROTO;
#define GPUM__PROTO_ERR(n, value, msg) \
  if (strcmp(name, #n) == 0)           \
    return (value);
  GPUM_ERRNO_MAP(GPUM__PROTO_ERR)
#undef GPUM__PROTO_ERR
  return GPUM_EPROTO;
}

#endif /* GPUM_PROTOCOL_INTERNAL_H */
