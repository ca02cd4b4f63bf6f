/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The protocol's operations (docs/protocol.md): hello, status, reserve, release, renew,
 * attach, list and http_token (watch is watch.c's). The cores (gpumd_op_*) take their request
 * decoded (gpumd_*_req_t: requests.c decodes the socket's, http_api.c the REST API's), check
 * the actor's right to act (owner from SO_PEERCRED, or an admin; over HTTP the API token makes
 * an admin), call the scheduler and build the reply body; the socket handlers (op_*, sock_*)
 * and the REST API (http_api.c) both call them. The
 * cores never write the ledger: transitions, TTL expiries and resizes reach it through engine.c
 * (gpumd_engine_*), and are committed before any reply leaves (end of the loop turn).
 */
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/version.h>

#include "engine.h"
#include "gpumd.h"
#include "json_in.h"
#include "json_out.h"
#include "ledger.h"
#include "net.h"
#include "obs.h"
#include "ops.h"
#include "pidstart_internal.h"
#include "sched.h"
#include "os_internal.h"
#include "pidstart_internal.h"

static gpumd_actor_t actor_of(const gpumd_conn_t *c) {
  gpumd_actor_t a = {.uid = c->uid,
                     .pid = (int32_t)c->pid,
                     .pid_start = c->pid_start,
                     .admin = c->admin,
                     .conn = (gpumd_conn_t *)c,
                     .via = NULL};
  return a;
}

/* Finds the live reservation a request names (ref). */
static int get_resv(gpumd_t *d, const gpumd_resv_ref_t *ref, const gpumd_resv_t **out) {
  *out = gpumd_sched_find(d->sched, ref->id);
  if (*out)
    return 0;
  gpumd_resv_t old;
  if (d->ledger && gpumd_ledger_get(d->ledger, ref->id, &old) == 0)
    return gpum_error(GPUM_ENOENT, "reservation %s already ended: %s (%s)", ref->text,
                      gpumd_resv_state_name(old.state), old.reason);
  return gpum_error(GPUM_ENOENT, "no reservation %s", ref->text);
}

static bool may_change(const gpumd_actor_t *a, const gpumd_resv_t *r) {
  return a->admin || a->uid == r->uid;
}

/* 0 when a may change r (reservation rid), else GPUM_EPERM naming its owner. */
static int check_owner(const gpumd_actor_t *a, const gpumd_resv_t *r, uint64_t rid) {
  return may_change(a, r) ? 0
                          : gpum_error(GPUM_EPERM, "reservation r-%llu belongs to uid %lu",
                                       (unsigned long long)rid, (unsigned long)r->uid);
}

/* Replies to c with the core's result: body on rc 0, else the error and its detail. */
static void reply(gpumd_conn_t *c, json_t *id, int rc, json_t *body) {
  if (rc == 0)
    gpumd_reply_ok(c, id, body);
  else
    gpumd_reply_err(c, id, rc, "%s", *gpum_last_error() ? gpum_last_error() : gpum_strerror(rc));
}

/* The {"reservation": R} body, or R left in a->fast for a reply written directly. */
static void resv_body(gpumd_t *d, const gpumd_actor_t *a, const gpumd_resv_t *r, bool with_token,
                      json_t **out) {
  if (a->fast) {
    a->fast->r = *r;
    a->fast->with_token = with_token;
    a->fast->set = true;
    *out = NULL;
    return;
  }
  *out = json_pack("{s:o}", GPUM_PROTO_F_RESERVATION, gpumd_engine_resv_json(d, r, with_token));
}

/* ---- hello, status, list ------------------------------------------------------------------ */

static void op_hello(gpumd_conn_t *c, json_t *id, json_t *req) {
  static const char *const fields[] = {GPUM_PROTO_F_ID, GPUM_PROTO_F_OP, GPUM_PROTO_F_CLIENT,
                                       GPUM_PROTO_F_PROTOCOL, NULL};
  json_t *proto = json_object_get(req, GPUM_PROTO_F_PROTOCOL);
  if (gpumd_check_fields(req, fields) != 0) {
    gpumd_reply_err(c, id, GPUM_EINVAL, "%s", gpum_last_error());
    return;
  }
  if (proto && (!json_is_integer(proto) || json_integer_value(proto) < 1)) {
    gpumd_reply_err(c, id, GPUM_EINVAL, "\"protocol\" must be a positive integer");
    return;
  }
  if (proto && json_integer_value(proto) != GPUM_PROTO_VERSION) {
    gpumd_reply_err(c, id, GPUM_ENOTSUP, "protocol %lld not supported (gpumd speaks %d)",
                    (long long)json_integer_value(proto), GPUM_PROTO_VERSION);
    return;
  }
  gpumd_reply_ok(c, id,
                 json_pack("{s:s, s:s, s:i, s:I, s:I, s:b}", GPUM_PROTO_F_SERVER, "gpumd",
                           GPUM_PROTO_F_VERSION, gpum_version(), GPUM_PROTO_F_PROTOCOL,
                           GPUM_PROTO_VERSION, GPUM_PROTO_F_UID, (json_int_t)c->uid,
                           GPUM_PROTO_F_PID, (json_int_t)c->pid, GPUM_PROTO_F_ADMIN, c->admin));
}

/* The socket's status is one message: each device's "reservations" keeps its first
 * GPUMD_STATUS_DEVICE_IDS ids ("jobs" counts them all) and "queue" the head of the queue, as
 * much of it as the message has room for ("node"."queued" counts it all; list gives it all). */
#define GPUMD_STATUS_DEVICE_IDS 128

/* The queue in service order into st's "queue", while st stays within budget bytes (0: the
 * whole queue): only the documents sent are built. */
static int status_queue(gpumd_t *d, const gpumd_actor_t *a, size_t budget, json_t *st) {
  json_t *queue = json_array();
  if (json_object_set_new(st, GPUM_PROTO_F_QUEUE, queue) != 0)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  size_t qn = gpumd_sched_queue_length(d->sched);
  size_t used = budget ? gpumd_json_size(st) : 0;
  for (size_t i = 0; i < qn; i++) {
    const gpumd_resv_t *r = gpumd_sched_queue_at(d->sched, i);
    json_t *o = gpumd_engine_resv_json(d, r, a->conn && r->uid == a->uid);
    if (budget) {
      size_t b = gpumd_json_size(o) + 1; /* and its comma */
      if (used + b > budget) {
        json_decref(o);
        break;
      }
      used += b;
    }
    json_array_append_new(queue, o);
  }
  return 0;
}

int gpumd_op_status(gpumd_t *d, const gpumd_actor_t *a, size_t budget, json_t **out) {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  size_t qn = gpumd_sched_queue_length(d->sched);
  size_t suspended = gpumd_sched_suspended(d->sched, NULL);
  json_t *node = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", GPUM_PROTO_F_HOSTNAME, host,
                           GPUM_PROTO_F_VERSION, gpum_version(), GPUM_PROTO_F_PID,
                           (json_int_t)getpid(), GPUM_PROTO_F_STARTED_NS, (json_int_t)d->start_ns,
                           GPUM_PROTO_F_RESERVATIONS, (json_int_t)gpumd_sched_count(d->sched),
                           GPUM_PROTO_F_QUEUED, (json_int_t)qn, GPUM_PROTO_F_SUSPENDED,
                           (json_int_t)suspended, GPUM_PROTO_F_CLIENTS, (json_int_t)d->conn_count);
  json_t *devices = budget ? gpumd_engine_devices_json_head(d, GPUMD_STATUS_DEVICE_IDS)
                           : gpumd_engine_devices_json(d);
  *out = json_pack("{s:o, s:o}", GPUM_PROTO_F_NODE, node, GPUM_PROTO_F_DEVICES, devices);
  int rc = *out ? status_queue(d, a, budget, *out) : gpum_error(GPUM_ENOMEM, "out of memory");
  if (rc != 0) {
    json_decref(*out);
    *out = NULL;
  }
  return rc;
}

/* Whether r passes the list's filters (the cursor aside). */
static bool list_match(const gpumd_actor_t *a, const gpumd_list_req_t *req, const gpumd_resv_t *r) {
  if (req->uid_set ? r->uid != req->uid : !req->all && r->uid != a->uid)
    return false;
  if (req->states && !(req->states & (1u << r->state)))
    return false;
  if (req->label) {
    size_t n = strlen(req->label);
    if (n > 0 && req->label[n - 1] == '*')
      return strncmp(r->label, req->label, n - 1) == 0;
    return strcmp(r->label, req->label) == 0;
  }
  return true;
}

/* Whether the list is everyone's, by state at most: its total is the scheduler's counts. */
static bool list_counted(const gpumd_list_req_t *req) {
  return req->all && !req->uid_set && !req->label;
}

/* The list's total. Everyone's (by state at most) from the scheduler's counts, always current;
 * a filtered one's (a uid, a label, the caller's own) from one pass over the live reservations
 * on the first page, which its cursors carry: a walk of n costs one pass for its total, not
 * one per page. */
static size_t list_total(gpumd_t *d, const gpumd_actor_t *a, const gpumd_list_req_t *req) {
  size_t n = gpumd_sched_count(d->sched);
  if (list_counted(req)) {
    size_t queued = gpumd_sched_queue_length(d->sched);
    size_t suspended = gpumd_sched_suspended(d->sched, NULL);
    const unsigned q = 1u << GPUMD_RESV_QUEUED, g = 1u << GPUMD_RESV_GRANTED,
                   s = 1u << GPUMD_RESV_SUSPENDED;
    size_t by = (req->states & q ? queued : 0) + (req->states & s ? suspended : 0) +
                (req->states & g ? n - queued - suspended : 0);
    return !req->states ? n : by;
  }
  if (req->total_set)
    return req->total;
  size_t total = 0;
  for (size_t i = 0; i < n; i++)
    total += list_match(a, req, gpumd_sched_at(d->sched, i));
  return total;
}

/* What ended lately, for the first page: newest first, as much of it as takes no more than
 * half the budget (its bytes added to *used). */
static json_t *list_ended(gpumd_t *d, const gpumd_actor_t *a, const gpumd_list_req_t *req,
                          size_t *used) {
  json_t *ended = gpumd_ended_json(d, a, req->all || req->uid_set, gpum__os_real_ns());
  for (size_t k = json_array_size(ended); req->uid_set && k-- > 0;) /* uid's only */
    if (json_integer_value(json_object_get(json_array_get(ended, k), GPUM_PROTO_F_UID)) !=
        (json_int_t)req->uid)
      json_array_remove(ended, k);
  if (ended && req->budget) {
    size_t k = 0, eb = 2;
    for (; k < json_array_size(ended); k++) {
      size_t b = gpumd_json_size(json_array_get(ended, k)) + 1;
      if (eb + b > req->budget / 2)
        break;
      eb += b;
    }
    while (json_array_size(ended) > k)
      json_array_remove(ended, json_array_size(ended) - 1);
    *used += eb;
  }
  return ended;
}

/* A page of the list: what list_walk put on it, and whether matches follow. */
typedef struct {
  size_t count;
  uint64_t last; /* the id of its last reservation */
  bool more;
} list_page_t;

/* Offers r to the page (first: the page has none yet); false when it does not fit there (the
 * page then ends before it). */
typedef bool (*list_emit_fn)(void *user, const gpumd_resv_t *r, bool first);

/* The page: from the cursor (a binary search) to the first match past limit, or the first
 * that emit refuses. */
static list_page_t list_walk(gpumd_t *d, const gpumd_actor_t *a, const gpumd_list_req_t *req,
                             list_emit_fn emit, void *user) {
  list_page_t pg = {0};
  size_t n = gpumd_sched_count(d->sched);
  for (size_t i = gpumd_sched_lower_bound(d->sched, req->after + 1); i < n; i++) {
    const gpumd_resv_t *r = gpumd_sched_at(d->sched, i);
    if (!list_match(a, req, r))
      continue;
    if (pg.count == req->limit || !emit(user, r, pg.count == 0)) {
      pg.more = true;
      break;
    }
    pg.count++;
    pg.last = r->id;
  }
  return pg;
}

/* The page's next_cursor into buf; false when it is the last page. A filtered walk's cursors
 * carry its total. */
static bool list_cursor(const gpumd_list_req_t *req, const list_page_t *pg, size_t total, char *buf,
                        size_t len) {
  if (!pg->more)
    return false;
  if (list_counted(req))
    snprintf(buf, len, GPUM_PROTO_CURSOR_PREFIX "%" PRIu64, pg->last);
  else
    snprintf(buf, len, GPUM_PROTO_CURSOR_PREFIX "%" PRIu64 ".%zu", pg->last, total);
  return true;
}

/* ---- the list as a JSON value (REST) ---- */

typedef struct {
  gpumd_t *d;
  const gpumd_actor_t *a;
  json_t *arr;
} list_tree_t;

/* REST's pages are bounded by their limit alone (no byte budget): every document fits. */
static bool emit_tree(void *user, const gpumd_resv_t *r, bool first) {
  (void)first;
  list_tree_t *t = user;
  json_t *o = gpumd_engine_resv_json(t->d, r, t->a->conn && r->uid == t->a->uid);
  gpumd_engine_resv_add_fenced(t->d, o, r);
  json_array_append_new(t->arr, o);
  return true;
}

int gpumd_op_list(gpumd_t *d, const gpumd_actor_t *a, const gpumd_list_req_t *req, json_t **out) {
  list_tree_t t = {.d = d, .a = a, .arr = json_array()};
  json_t *ended = NULL;
  size_t total = list_total(d, a, req);
  size_t used = 0;
  if (req->ended && req->after == 0)
    ended = list_ended(d, a, req, &used);
  list_page_t pg = list_walk(d, a, req, emit_tree, &t);
  char cur[64];
  json_t *next = list_cursor(req, &pg, total, cur, sizeof cur) ? json_string(cur) : json_null();
  *out = json_pack("{s:o, s:o, s:I}", GPUM_PROTO_F_RESERVATIONS, t.arr, GPUM_PROTO_F_NEXT_CURSOR,
                   next, GPUM_PROTO_F_TOTAL, (json_int_t)total);
  if (*out && ended)
    json_object_set_new(*out, GPUM_PROTO_F_ENDED, ended);
  else
    json_decref(ended);
  return *out ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
}

/* ---- the list written as it is walked (the socket) ---- */

/* The socket's pages are read by gpum jobs, top and status in a loop: the documents are
 * written straight from the reservations (no JSON tree, written once) into memory, and a
 * document past the byte budget is cut off again. */
typedef struct {
  gpumd_t *d;
  const gpumd_actor_t *a;
  const gpumd_list_req_t *req;
  gpumd_jw_t w; /* into the page's memory */
  size_t used;  /* the budget's bytes taken: ended, then the documents with their commas */
  size_t keep;  /* the bytes of the documents on the page */
} list_text_t;

static bool emit_text(void *user, const gpumd_resv_t *r, bool first) {
  list_text_t *t = user;
  size_t before = gpumd_jw_pos(&t->w);
  if (!first)
    gpumd_jw_raw(&t->w, ",", 1);
  gpumd_engine_resv_write_used(t->d, &t->w, r, t->a->conn && r->uid == t->a->uid);
  size_t b = gpumd_jw_pos(&t->w) - before + (first ? 1 : 0); /* each with its comma */
  if (t->req->budget && !first && t->used + b > t->req->budget)
    return false;
  t->used += b;
  t->keep = gpumd_jw_pos(&t->w);
  return true;
}

typedef struct {
  json_t *id;
  const char *docs; /* the page's documents, keep bytes */
  size_t keep, total;
  const char *next; /* NULL: the last page */
  json_t *ended;
} list_reply_t;

/* The same bytes as gpumd_reply_ok(c, id, gpumd_op_list's body). */
static void fill_list_reply(gpumd_jw_t *w, void *arg) {
  const list_reply_t *l = arg;
  GPUMD_JW_LIT(w, "{" GPUMD_JSON_KEY(GPUM_PROTO_F_RESERVATIONS) "[");
  gpumd_jw_raw(w, l->docs, l->keep);
  GPUMD_JW_LIT(w, "]," GPUMD_JSON_KEY(GPUM_PROTO_F_NEXT_CURSOR));
  if (l->next)
    gpumd_jw_string(w, l->next);
  else
    GPUMD_JW_LIT(w, "null");
  GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY(GPUM_PROTO_F_TOTAL));
  gpumd_jw_int(w, (long long)l->total);
  if (l->ended) {
    GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY(GPUM_PROTO_F_ENDED));
    gpumd_jw_value(w, l->ended);
  }
  gpumd_reply_ok_end(w, l->id);
}

static void op_list(gpumd_conn_t *c, json_t *id, json_t *j) {
  gpumd_t *d = c->d;
  gpumd_actor_t a = actor_of(c);
  gpumd_list_req_t req;
  int rc = gpumd_list_decode(j, &req);
  if (rc != 0) {
    reply(c, id, rc, NULL);
    return;
  }
  gpumd_jw_mem_t docs = {0};
  list_text_t t = {.d = d, .a = &a, .req = &req};
  list_reply_t l = {.id = id, .total = list_total(d, &a, &req)};
  if (req.ended && req.after == 0)
    l.ended = list_ended(d, &a, &req, &t.used);
  gpumd_jw_init_mem(&t.w, &docs);
  list_page_t pg = list_walk(d, &a, &req, emit_text, &t);
  char cur[64];
  l.next = list_cursor(&req, &pg, l.total, cur, sizeof cur) ? cur : NULL;
  l.docs = docs.data ? docs.data : "";
  l.keep = t.keep;
  if (gpumd_jw_end(&t.w) != 0 || gpumd_conn_send_with(c, fill_list_reply, &l) != 0)
    gpumd_reply_oom(c, id);
  json_decref(l.ended);
  free(docs.data);
}

/* ---- reserve ------------------------------------------------------------------------------ */

/* The scheduler's request of r from actor a: gpumd's job_timeout unless r gives one, and the
 * actor's uid and pid (and its pid as the lease's unless r names another). */
static gpumd_sched_request_t sched_request(gpumd_t *d, const gpumd_actor_t *a,
                                           const gpumd_reserve_req_t *r) {
  gpumd_sched_request_t q = r->q;
  if (!r->timeout_set)
    q.timeout_ms = d->job_timeout_ms;
  if (q.lease_pid == 0)
    q.lease_pid = a->pid;
  q.uid = a->uid;
  q.pid = a->pid;
  return q;
}

int gpumd_op_reserve(gpumd_t *d, const gpumd_actor_t *a, const gpumd_reserve_req_t *rq,
                     json_t **out) {
  gpumd_sched_request_t req = sched_request(d, a, rq);
  /* Start times identify the processes across pid reuse (0 = unknown). */
  req.pid_start = a->pid_start; /* req.pid is the actor's pid */
  if (req.lease == GPUMD_LEASE_PID)
    req.lease_pid_start =
        req.lease_pid == req.pid ? req.pid_start : gpumd_pid_start_or_zero(req.lease_pid);
  int64_t qmax = d->queue_max;
  if (!req.no_wait && (int64_t)gpumd_sched_queue_length(d->sched) >= qmax)
    return gpum_error(GPUM_EAGAIN, "the queue is full (%lld requests, queue.max)", (long long)qmax);
  /* Decided on the devices as they are now (admission.c). */
  gpumd_admission_read(d);
  /* The new reservation's state is in the reply: no event about it while it is made, nor to
   * the actor's connection when it ends at once below. */
  gpumd_cause_t cause = {.actor = a, .about = gpumd_sched_next_id(d->sched), .submit = true};
  uint64_t now = gpum__os_real_ns();
  const gpumd_resv_t *r = NULL;
  int rc = gpumd_sched_submit(d->sched, &cause, &req, now, &r);
  if (rc != 0)
    return rc;
  uint64_t rid = r->id;
  cause.about = rid;
  cause.submit = false;
  gpumd_lease_t *l = gpumd_lease_add(d, rid);
  if (!l) {
    gpumd_sched_release(d->sched, &cause, rid, now, "out of memory");
    return gpum_error(GPUM_ENOMEM, "out of memory");
  }
  if (a->conn)
    gpumd_lease_bind(l, a->conn);
  if (req.lease == GPUMD_LEASE_PID &&
      gpumd_lease_watch_pid(d, l, req.lease_pid, req.lease_pid_start) != 0) {
    char why[256];
    snprintf(why, sizeof why, "%s", gpum_last_error());
    gpumd_sched_release(d->sched, &cause, rid, now, "lease process gone");
    return gpum_error(GPUM_ENOENT, "%s", why);
  }
  if (req.lease == GPUMD_LEASE_TTL)
    gpumd_engine_set_ttl(d, rid, now + req.ttl_ms * 1000000ull);
  r = gpumd_sched_find(d->sched, rid);
  size_t pos = 0;
  if (r && r->state == GPUMD_RESV_QUEUED && gpumd_sched_queue_position(d->sched, rid, &pos) == 0)
    l->told_position = pos + 1; /* the reply tells it */
  rc = 0;
  if (r)
    resv_body(d, a, r, a->conn != NULL, out);
  else
    rc = gpum_error(GPUM_EINTERNAL, "reservation ended at once");
  gpumd_engine_tick(d);
  return rc;
}

/* A dry run of reserve (the same request, from the same decoders), nothing changes. Body:
 * {"could_fit", "fits_now", "queue_first", "devices": [index...], "reason"}. */
int gpumd_op_check(gpumd_t *d, const gpumd_actor_t *a, const gpumd_reserve_req_t *rq,
                   json_t **out) {
  gpumd_sched_request_t req = sched_request(d, a, rq);
  gpumd_sched_check_t chk;
  gpumd_admission_read(d); /* "fits now" on the devices as they are now */
  int rc = gpumd_sched_check(d->sched, &req, gpum__os_real_ns(), &chk);
  if (rc != 0)
    return rc;
  json_t *ids = json_array();
  for (unsigned i = 0; i < GPUMD_SCHED_MAX_DEVICES; i++)
    if (chk.device_mask >> i & 1u)
      json_array_append_new(ids, json_integer(i));
  *out =
      json_pack("{s:b, s:b, s:b, s:o, s:s}", "could_fit", chk.could_fit, "fits_now", chk.fits_now,
                "queue_first", chk.queue_first, "devices", ids, "reason", chk.reason);
  return *out ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
}

/* ---- release, renew, attach ----------------------------------------------------------------- */

/* "VERB over HTTP" or "VERB by uid U pid P" into buf: who asked, for a transition's reason
 * (without printf: a release is on the hot path). Returns buf. */
static const char *asked_by(const gpumd_actor_t *a, const char *verb, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  gpumd_cat(buf, len, &off, verb);
  if (a->via) {
    gpumd_cat(buf, len, &off, " over ");
    gpumd_cat(buf, len, &off, a->via);
    return buf;
  }
  gpumd_cat(buf, len, &off, " by uid ");
  gpumd_cat_u64(buf, len, &off, a->uid);
  gpumd_cat(buf, len, &off, " pid ");
  if (a->pid < 0)
    gpumd_cat(buf, len, &off, "-");
  gpumd_cat_u64(buf, len, &off, (uint64_t)llabs((long long)a->pid));
  return buf;
}

int gpumd_op_release(gpumd_t *d, const gpumd_actor_t *a, const gpumd_release_req_t *req,
                     json_t **out) {
  const gpumd_resv_t *r = NULL;
  uint64_t rid = req->resv.id;
  int rc = get_resv(d, &req->resv, &r);
  if (rc == 0)
    rc = check_owner(a, r, rid);
  if (rc != 0)
    return rc;
  bool own = a->conn && r->uid == a->uid;
  /* No event to the actor's connection about it (the reply says it), and its final state
   * for the reply. */
  gpumd_resv_t final = {.id = 0};
  gpumd_cause_t cause = {.actor = a, .about = rid, .final = &final};
  char reason[96];
  asked_by(a, "released", reason, sizeof reason);
  gpumd_admission_read_for_end(d, rid); /* what the release lets in is granted in its name */
  rc = gpumd_sched_release(d->sched, &cause, rid, gpum__os_real_ns(), reason);
  if (rc != 0 || final.id != rid)
    return rc ? rc : gpum_error(GPUM_EINTERNAL, "release left no final state");
  resv_body(d, a, &final, own, out);
  gpumd_engine_tick(d);
  return 0;
}

int gpumd_op_get(gpumd_t *d, const gpumd_actor_t *a, const gpumd_release_req_t *req, json_t **out) {
  (void)a;
  const gpumd_resv_t *r = gpumd_sched_find(d->sched, req->resv.id);
  gpumd_resv_t old;
  if (!r && d->ledger && gpumd_ledger_get(d->ledger, req->resv.id, &old) == 0)
    r = &old;
  if (!r) {
    char idb[GPUMD_RESV_ID_BUFSZ];
    return gpum_error(GPUM_ENOENT, "no reservation %s",
                      gpumd_resv_id_format(req->resv.id, idb, sizeof idb));
  }
  json_t *o = gpumd_engine_resv_json(d, r, false);
  gpumd_engine_resv_add_fenced(d, o, r);
  *out = json_pack("{s:o}", GPUM_PROTO_F_RESERVATION, o);
  return 0;
}

/* ---- suspend, resume (suspend.c; docs/suspend.md) ------------------------------------------ */

/* A suspend (by hand: held until a resume by hand) or a resume of rid, the owner or an admin;
 * the reservation as it is once the work has started. */
static int move_op(gpumd_t *d, const gpumd_actor_t *a, const gpumd_release_req_t *req, json_t **out,
                   bool suspend) {
  const gpumd_resv_t *r = NULL;
  uint64_t rid = req->resv.id;
  int rc = get_resv(d, &req->resv, &r);
  if (rc == 0)
    rc = check_owner(a, r, rid);
  char why[96], idb[GPUMD_RESV_ID_BUFSZ];
  if (rc == 0)
    rc = suspend ? gpumd_suspend_begin(d, a, rid, true, asked_by(a, "suspended", why, sizeof why))
                 : gpumd_resume_begin(d, a, rid);
  if (rc == 0 && (r = gpumd_sched_find(d->sched, rid)) == NULL)
    rc = gpum_error(GPUM_ENOENT, "reservation %s has ended",
                    gpumd_resv_id_format(rid, idb, sizeof idb));
  if (rc != 0)
    return rc;
  *out = json_pack("{s:o}", GPUM_PROTO_F_RESERVATION,
                   gpumd_engine_resv_json(d, r, a->conn && r->uid == a->uid));
  gpumd_engine_tick(d);
  return 0;
}

int gpumd_op_suspend(gpumd_t *d, const gpumd_actor_t *a, const gpumd_release_req_t *req,
                     json_t **out) {
  return move_op(d, a, req, out, true);
}

int gpumd_op_resume(gpumd_t *d, const gpumd_actor_t *a, const gpumd_release_req_t *req,
                    json_t **out) {
  return move_op(d, a, req, out, false);
}

/* The live reservation ref names, for an op its owner or an admin may make: the lookup, then
 * the request's late field error, then the owner check (the protocol's order). */
static int owned_resv(gpumd_t *d, const gpumd_actor_t *a, const gpumd_resv_ref_t *ref,
                      const gpumd_req_error_t *late, const gpumd_resv_t **r) {
  int rc = get_resv(d, ref, r);
  if (rc == 0)
    rc = gpumd_req_error_raise(late);
  if (rc == 0)
    rc = check_owner(a, *r, ref->id);
  return rc;
}

int gpumd_op_renew(gpumd_t *d, const gpumd_actor_t *a, const gpumd_renew_req_t *req, json_t **out) {
  const gpumd_resv_t *r = NULL;
  uint64_t rid = req->resv.id;
  int rc = owned_resv(d, a, &req->resv, &req->late, &r);
  if (rc == 0 && r->lease != GPUMD_LEASE_TTL)
    rc = gpum_error(GPUM_EINVAL, "reservation r-%llu has a %s lease, not a ttl",
                    (unsigned long long)rid, gpumd_lease_kind_name(r->lease));
  if (rc != 0)
    return rc;
  r = gpumd_engine_renew(d, rid, req->ttl_set ? req->ttl_ms : r->ttl_ms);
  *out = json_pack("{s:o}", GPUM_PROTO_F_RESERVATION,
                   gpumd_engine_resv_json(d, r, a->conn && r->uid == a->uid));
  return 0;
}

/* Resizes a granted reservation (elastic reservations under the enforcement shim): the owner or
 * an admin; growing under admission's rules (gpumd_sched_resize), each resize a ledger audit
 * row GRANTED -> GRANTED with the old and new size and who asked. */
int gpumd_op_resize(gpumd_t *d, const gpumd_actor_t *a, const gpumd_resize_req_t *req,
                    json_t **out) {
  const gpumd_resv_t *r = NULL;
  uint64_t rid = req->resv.id, bytes = req->bytes_per_gpu;
  int rc = owned_resv(d, a, &req->resv, &req->late, &r);
  if (rc != 0)
    return rc;
  if (bytes > r->bytes_per_gpu)
    gpumd_admission_read(d);           /* grown on the devices as they are now (admission.c) */
  r = gpumd_sched_find(d->sched, rid); /* the read's pass may have changed the table */
  if (r == NULL) {
    char idb[GPUMD_RESV_ID_BUFSZ];
    return gpum_error(GPUM_ENOENT, "reservation %s has ended",
                      gpumd_resv_id_format(rid, idb, sizeof idb));
  }
  if ((rc = gpumd_engine_resize(d, a, rid, bytes, &r)) != 0)
    return rc;
  resv_body(d, a, r, a->conn && r->uid == a->uid, out);
  gpumd_engine_tick(d);
  return 0;
}

/* A process's workload figures on a granted reservation (reports.c): the owner's processes or
 * an admin's. The reply is empty; the figures show in listings, the REST API and /metrics. */
int gpumd_op_report(gpumd_t *d, const gpumd_actor_t *a, const gpumd_report_req_t *req,
                    json_t **out) {
  const gpumd_resv_t *r = NULL;
  uint64_t rid = req->resv.id;
  int rc = owned_resv(d, a, &req->resv, &req->late, &r);
  if (rc == 0 && r->state != GPUMD_RESV_GRANTED)
    rc = gpum_error(GPUM_ESTATE, "reservation r-%llu is %s: only a granted one takes reports",
                    (unsigned long long)rid, gpumd_resv_state_name(r->state));
  if (rc == 0 && a->pid <= 0)
    rc = gpum_error(GPUM_EINVAL, "a report comes from a local process (its pid names it)");
  if (rc == 0)
    rc = gpumd_reports_put(d, rid, a->pid, req->source, req->figures);
  if (rc != 0)
    return rc;
  if (a->conn)
    gpumd_reports_subscribe(d, a->conn, r);
  *out = json_object();
  return 0;
}

static bool token_equal(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  unsigned char diff = (unsigned char)(la != lb);
  for (size_t i = 0; i < la && i < lb; i++)
    diff |= (unsigned char)(a[i] ^ b[i]);
  return diff == 0;
}

static void op_attach(gpumd_conn_t *c, json_t *id, json_t *j) {
  gpumd_t *d = c->d;
  const gpumd_resv_t *r = NULL;
  gpumd_attach_req_t req;
  int rc = gpumd_attach_decode(j, &req);
  uint64_t rid = req.resv.id;
  if (rc == 0)
    rc = get_resv(d, &req.resv, &r);
  gpumd_actor_t a = actor_of(c);
  if (rc == 0 && (!may_change(&a, r) || !token_equal(req.token, r->token)))
    rc = gpum_error(GPUM_EPERM, "wrong token for reservation r-%llu or not its owner",
                    (unsigned long long)rid);
  if (rc != 0) {
    gpumd_reply_err(c, id, rc, "%s", gpum_last_error());
    return;
  }
  gpumd_lease_t *l = gpumd_lease_add(d, rid);
  if (!l) {
    gpumd_reply_err(c, id, GPUM_ENOMEM, "out of memory");
    return;
  }
  gpumd_lease_bind(l, c);
  if (l->awaiting_attach && r->lease == GPUMD_LEASE_CONNECTION)
    gpumd_lease_unwatch_pid(l); /* bound to c now: its close ends it, whoever made it */
  l->awaiting_attach = false;
  gpumd_reply_ok(c, id,
                 json_pack("{s:o}", GPUM_PROTO_F_RESERVATION, gpumd_engine_resv_json(d, r, true)));
}

/* The REST API's bearer token (docs/rest.md): shown, or rotated, for admins only. */
static void op_http_token(gpumd_conn_t *c, json_t *id, json_t *j) {
  static const char *const fields[] = {GPUM_PROTO_F_ID, GPUM_PROTO_F_OP, GPUM_PROTO_F_ROTATE, NULL};
  json_t *rot = json_object_get(j, GPUM_PROTO_F_ROTATE);
  json_t *body = NULL;
  int rc = gpumd_check_fields(j, fields);
  if (rc == 0 && rot && !json_is_boolean(rot))
    rc = gpum_error(GPUM_EINVAL, "\"rotate\" must be true or false");
  if (rc == 0 && !c->admin)
    rc = gpum_error(GPUM_EPERM, "only an admin (root or admin_group) may see or rotate the HTTP "
                                "API token");
  if (rc == 0)
    rc = gpumd_http_token_op(c->d, json_is_true(rot), &body);
  reply(c, id, rc, body);
}

/* ---- the socket face: each op's request decoded (requests.c), then its core --------------- */

typedef int (*op_core_fn)(gpumd_t *d, const gpumd_actor_t *a, json_t *req, json_t **out);

/* The socket's status: the message limit less the envelope and the request's id. */
static int sock_status(gpumd_t *d, const gpumd_actor_t *a, json_t *j, json_t **out) {
  int rc = gpumd_status_decode(j);
  if (rc != 0)
    return rc;
  json_t *id = json_object_get(j, GPUM_PROTO_F_ID);
  size_t idlen = id ? json_dumpb(id, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY) : 0;
  size_t budget = GPUMD_MAX_MESSAGE - GPUMD_LIST_ENVELOPE;
  budget = idlen + 1024 < budget ? budget - idlen : 1024;
  return gpumd_op_status(d, a, budget, out);
}

/* sock_NAME: the socket's request of an op decoded into its struct (decode_args end with
 * &req), then the op's core. */
#define SOCK_OP(name, type, decode, decode_args, core)                                  \
  static int sock_##name(gpumd_t *d, const gpumd_actor_t *a, json_t *j, json_t **out) { \
    type req;                                                                           \
    int rc = decode decode_args;                                                        \
    return rc != 0 ? rc : core(d, a, &req, out);                                        \
  }
SOCK_OP(reserve, gpumd_reserve_req_t, gpumd_reserve_decode, (a, j, &req), gpumd_op_reserve)
SOCK_OP(release, gpumd_release_req_t, gpumd_release_decode, (j, &req), gpumd_op_release)
SOCK_OP(renew, gpumd_renew_req_t, gpumd_renew_decode, (j, &req), gpumd_op_renew)
SOCK_OP(resize, gpumd_resize_req_t, gpumd_resize_decode, (j, &req), gpumd_op_resize)
SOCK_OP(alerts, gpumd_alerts_req_t, gpumd_alerts_decode, (j, &req), gpumd_obs_op_alerts)
SOCK_OP(disable, gpumd_switch_req_t, gpumd_switch_decode, (j, true, &req), gpumd_op_disable)
SOCK_OP(enable, gpumd_switch_req_t, gpumd_switch_decode, (j, false, &req), gpumd_op_enable)
SOCK_OP(report, gpumd_report_req_t, gpumd_report_decode, (j, &req), gpumd_op_report)
SOCK_OP(suspend, gpumd_release_req_t, gpumd_release_decode, (j, &req), gpumd_op_suspend)
SOCK_OP(resume, gpumd_release_req_t, gpumd_release_decode, (j, &req), gpumd_op_resume)
SOCK_OP(get, gpumd_release_req_t, gpumd_release_decode, (j, &req), gpumd_op_get)

/* The reply of a socket op's core (rc, and its body or the reservation left in fast). */
static void answer(gpumd_conn_t *c, json_t *id, int rc, const gpumd_resv_reply_t *fast,
                   json_t *body) {
  if (rc == 0 && fast->set)
    gpumd_reply_ok_resv(c, id, fast);
  else
    reply(c, id, rc, body);
}

bool gpumd_op_dispatch_flat(gpumd_conn_t *c, const gpumd_flat_t *line) {
  const gpumd_flat_field_t *id = gpumd_flat_get(line, GPUM_PROTO_F_ID);
  const gpumd_flat_field_t *op = gpumd_flat_get(line, GPUM_PROTO_F_OP);
  /* What gpumd_proto_line checks of every request, and the two hot ops; anything else (and
   * every error of those checks) takes the whole path. */
  if (!id || !op || op->type != JSON_STRING ||
      !(id->type == JSON_INTEGER || (id->type == JSON_STRING && id->length <= 256)))
    return false;
  bool reserve = strcmp(op->string, GPUM_PROTO_OP_RESERVE) == 0;
  if (!reserve && strcmp(op->string, GPUM_PROTO_OP_RELEASE) != 0)
    return false;
  json_t *jid = id->type == JSON_INTEGER ? json_integer(id->integer)
                                         : json_stringn_nocheck(id->string, id->length);
  if (!jid)
    return false;
  gpum_error_clear();
  gpumd_actor_t a = actor_of(c);
  gpumd_resv_reply_t fast = {.set = false};
  a.fast = &fast;
  json_t *body = NULL;
  int rc;
  if (reserve) {
    gpumd_reserve_req_t req;
    rc = gpumd_reserve_decode_flat(&a, line, &req);
    rc = rc != 0 ? rc : gpumd_op_reserve(c->d, &a, &req, &body);
  } else {
    gpumd_release_req_t req;
    rc = gpumd_release_decode_flat(line, &req);
    rc = rc != 0 ? rc : gpumd_op_release(c->d, &a, &req, &body);
  }
  answer(c, jid, rc, &fast, body);
  json_decref(jid);
  return true;
}

void gpumd_op_dispatch(gpumd_conn_t *c, json_t *id, const char *op, json_t *req) {
  /* An op is either a socket-only handler or a core shared with the REST API (its request
   * decoded by sock_*), called with the peer as actor and answered
   * with its body or error. */
  static const struct {
    const char *name;
    void (*fn)(gpumd_conn_t *, json_t *, json_t *);
    op_core_fn core;
  } ops[] = {{GPUM_PROTO_OP_HELLO, op_hello, NULL},
             {GPUM_PROTO_OP_STATUS, NULL, sock_status},
             {GPUM_PROTO_OP_RESERVE, NULL, sock_reserve},
             {GPUM_PROTO_OP_RELEASE, NULL, sock_release},
             {GPUM_PROTO_OP_RENEW, NULL, sock_renew},
             {GPUM_PROTO_OP_RESIZE, NULL, sock_resize},
             {GPUM_PROTO_OP_ATTACH, op_attach, NULL},
             {GPUM_PROTO_OP_LIST, op_list, NULL},
             {GPUM_PROTO_OP_HTTP_TOKEN, op_http_token, NULL},
             {GPUM_PROTO_OP_ALERTS, NULL, sock_alerts},
             {GPUM_PROTO_OP_DISABLE, NULL, sock_disable},
             {GPUM_PROTO_OP_ENABLE, NULL, sock_enable},
             {GPUM_PROTO_OP_REPORT, NULL, sock_report},
             {GPUM_PROTO_OP_WATCH, gpumd_watch_op, NULL},
             {GPUM_PROTO_OP_SUSPEND, NULL, sock_suspend},
             {GPUM_PROTO_OP_RESUME, NULL, sock_resume},
             {GPUM_PROTO_OP_GET, NULL, sock_get}};
  const size_t n = sizeof ops / sizeof ops[0];
  gpum_error_clear();
  for (size_t i = 0; i < n; i++) {
    if (strcmp(op, ops[i].name) != 0)
      continue;
    if (ops[i].fn) {
      ops[i].fn(c, id, req);
    } else {
      gpumd_actor_t a = actor_of(c);
      gpumd_resv_reply_t fast = {.set = false};
      a.fast = &fast;
      json_t *body = NULL;
      int rc = ops[i].core(c->d, &a, req, &body);
      answer(c, id, rc, &fast, body);
    }
    return;
  }
  char known[256] = "";
  size_t off = 0;
  for (size_t i = 0; i < n; i++) {
    gpumd_cat(known, sizeof known, &off, i ? ", " : "");
    gpumd_cat(known, sizeof known, &off, ops[i].name);
  }
  gpumd_reply_err(c, id, GPUM_EINVAL, "unknown op '%.64s' (%s)", op, known);
}
