/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The requests (ops.c, admin.c, requests.c): each op core takes a request decoded into its
 * struct (the socket's by requests.c, the REST API's by http_api.c), checks it, asks the engine
 * and returns its reply's body; both faces (proto.c, the REST API) call them.
 */
#ifndef GPUMD_OPS_H
#define GPUMD_OPS_H

#include "gpumd.h"
#include "obs.h"

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
  char model[128];                               /* the GPU type a face was given (REST gpu_type) */
} gpumd_reserve_req_t;
/* An empty request: gpumd_sched_request_init's defaults, nothing given. */
void gpumd_reserve_req_init(gpumd_reserve_req_t *req);
/* The socket's reserve request. a: a non-admin's "pid" must be its own process. */
int gpumd_reserve_decode(const gpumd_actor_t *a, json_t *j, gpumd_reserve_req_t *out);
/* The same for a flat line (gpumd_json_parse_flat): the same struct, or the same error, as the
 * line parsed whole gives; strings point into line. */
int gpumd_reserve_decode_flat(const gpumd_actor_t *a, const gpumd_flat_t *line,
                              gpumd_reserve_req_t *out);
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
int gpumd_release_decode_flat(const gpumd_flat_t *line, gpumd_release_req_t *out);
int gpumd_renew_decode(json_t *j, gpumd_renew_req_t *out);
int gpumd_resize_decode(json_t *j, gpumd_resize_req_t *out);
int gpumd_attach_decode(json_t *j, gpumd_attach_req_t *out);
int gpumd_report_decode(json_t *j, gpumd_report_req_t *out);

/* list: the actor's reservations, or everyone's (all); with those that ended lately (ended),
 * on the first page only. A page: the live reservations with ids above after that match the
 * filters, in id order, at most limit of them and, when budget is set (the socket's list,
 * written in ops.c's op_list), as many as fit in budget bytes of JSON (at least one).
 * gpumd_op_list builds REST's page, bounded by its limit alone. */
#define GPUMD_LIST_LIMIT_DEFAULT 1000u /* the socket's and REST's page without "limit" */
#define GPUMD_LIST_LIMIT_MAX 10000u
/* The bytes a socket list reply may take with its reservations (and ended): the message
 * limit less room for the envelope ("id" is measured apart, the rest is under 200 bytes). */
#define GPUMD_LIST_ENVELOPE 256u
typedef struct {
  bool all;
  bool ended;
  unsigned states; /* 1u << GPUMD_RESV_QUEUED / GRANTED; 0: both */
  bool uid_set;    /* only uid's (anyone's: implies all) */
  uint32_t uid;
  const char *label; /* only this label ("" none); ends with '*': the labels it begins */
  size_t limit;      /* 1..GPUMD_LIST_LIMIT_MAX */
  uint64_t after;    /* the cursor: ids above this (0: from the first) */
  bool total_set;    /* the cursor carries a filtered walk's total (counted on its first page) */
  size_t total;
  size_t budget; /* bytes for the lists (0: no bound) */
} gpumd_list_req_t;
int gpumd_list_decode(json_t *j, gpumd_list_req_t *out);
/* The list filters shared by the socket and REST ("state", "label", "cursor", "limit"), from
 * their text; each returns 0 or GPUM_EINVAL with the reason. */
int gpumd_list_state_add(const char *s, gpumd_list_req_t *out);
int gpumd_list_label_set(const char *s, gpumd_list_req_t *out);
int gpumd_list_cursor_set(const char *s, gpumd_list_req_t *out);
/* alerts (its core is obs's: gpumd_obs_op_alerts). */
int gpumd_alerts_decode(json_t *j, gpumd_alerts_req_t *out);
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

/* The status body. budget: the bytes the reply may take (the socket's: one message), filled
 * with the queue's head, each device listing its first ids only; 0: the whole queue and every
 * id (REST). */
int gpumd_op_status(gpumd_t *d, const gpumd_actor_t *a, size_t budget, json_t **out);
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
/* Suspend and resume a reservation's job (docs/suspend.md), the owner or an admin; the request
 * names a reservation as release's does. */
int gpumd_op_suspend(gpumd_t *d, const gpumd_actor_t *a, const gpumd_release_req_t *req,
                     json_t **out);
int gpumd_op_resume(gpumd_t *d, const gpumd_actor_t *a, const gpumd_release_req_t *req,
                    json_t **out);
/* One reservation by id, live or ended (the ledger keeps the ended ones for ledger.retention):
 * {"reservation": R} with its fenced use as the REST document has it. Anyone may look, as
 * anyone may list everyone's. ENOENT when there is none. */
int gpumd_op_get(gpumd_t *d, const gpumd_actor_t *a, const gpumd_release_req_t *req, json_t **out);
int gpumd_op_report(gpumd_t *d, const gpumd_actor_t *a, const gpumd_report_req_t *req,
                    json_t **out);
/* The operator's switch (admin.c): {"device": index or UUID, "reason"} makes the device
 * DISABLED (no new grants on it; grants there keep running), stored in the ledger so that it
 * survives restarts; "enable" {"device"} gives it back to the health rules. Admins only
 * (EPERM). Reply: {"device": D} as in status. */
int gpumd_op_disable(gpumd_t *d, const gpumd_actor_t *a, const gpumd_switch_req_t *req,
                     json_t **out);
int gpumd_op_enable(gpumd_t *d, const gpumd_actor_t *a, const gpumd_switch_req_t *req,
                    json_t **out);
/* Dispatches a parsed request (an object with a valid op). */
void gpumd_op_dispatch(gpumd_conn_t *c, json_t *id, const char *op, json_t *req);
/* Serves a flat request line (gpumd_json_parse_flat) of a hot op (reserve, release) without a
 * JSON tree: the same reply as gpumd_proto_line gives for the line. False (nothing done) for
 * any other line: parse it whole. */
bool gpumd_op_dispatch_flat(gpumd_conn_t *c, const gpumd_flat_t *line);

#endif /* GPUMD_OPS_H */
