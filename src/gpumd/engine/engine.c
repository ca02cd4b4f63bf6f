/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The core of gpumd between the protocol and the scheduler: it owns the scheduler and the
 * ledger, and is the one writer of reservation rows: it writes every transition the scheduler
 * reports to the ledger (row + audit) and turns it into an event for the owner's connection,
 * stages the changes that are no transition (a TTL lease's expiry, a renew, a resize: the
 * gpumd_engine_* entries the ops call), feeds the scheduler the device views (monitor
 * samples and health, unmanaged memory from the process list), ends leases (connection
 * closed, pid exited, ttl passed, not re-attached after a restart), and recovers the
 * reservations from the ledger at start.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include <gpum/error.h>
#include <gpum/fence.h>
#include <gpum/log.h>

#include "devices.h"
#include "engine.h"
#include "gpumd.h"
#include "json_out.h"
#include "ledger.h"
#include "net.h"
#include "obs.h"
#include "pidstart_internal.h"
#include "sched.h"
#include "utf8_internal.h"
#include "os_internal.h"
#include "pidstart_internal.h"

/* ---- JSON of a reservation ---------------------------------------------------------------- */

/* Keys are ASCII literals and ids, tokens, state and lease names ASCII by construction:
 * they skip jansson's UTF-8 checks (a tenth of a reply's cost; gpumd_json_write still writes
 * a byte that is not UTF-8 as '?'). Label, reason and model come from clients (UUIDs from the
 * driver) and keep the check. */
static void put_ascii(json_t *o, const char *key, const char *value) {
  json_object_set_new_nocheck(o, key, json_string_nocheck(value));
}

/* A client-given or driver-given text (at most 1 KiB) as a JSON string: when it is not UTF-8,
 * each byte that is not part of a character becomes '?', as gpumd_jw_string writes it. */
static json_t *text_json(const char *s) {
  if (gpumd_utf8_valid(s, strlen(s)))
    return json_string(s);
  char clean[1024];
  gpumd_utf8_clean(s, clean, sizeof clean);
  return json_string(clean);
}

static void put_int(json_t *o, const char *key, json_int_t value) {
  json_object_set_new_nocheck(o, key, json_integer(value));
}

/* What the enforcement shim counts for a granted reservation run under it (gpum run --enforce):
 * {"used": bytes its processes hold over its GPUs, "limit": per GPU, "processes": N}, from the
 * fence the launcher made (fences.c finds it); NULL when the job is not fenced. */
static json_t *fenced_json(gpumd_t *d, const gpumd_resv_t *r);

void gpumd_engine_resv_add_fenced(gpumd_t *d, json_t *o, const gpumd_resv_t *r) {
  if (r->state != GPUMD_RESV_GRANTED || !o)
    return;
  json_t *f = fenced_json(d, r);
  json_object_set_new_nocheck(o, GPUM_PROTO_F_FENCED, f ? f : json_null());
  json_t *w = gpumd_reports_json(d, r->id);
  if (w)
    json_object_set_new_nocheck(o, GPUM_PROTO_F_WORKLOAD, w);
}

typedef struct {
  uint64_t used, limit;
  unsigned procs;
} fence_use_t;

/* What the shim counts of r's fence (see fenced_json); false when the job is not fenced. */
static bool fence_use(gpumd_t *d, const gpumd_resv_t *r, fence_use_t *out) {
  gpum_fence *f = gpumd_fences_open(d, r);
  if (!f)
    return false;
  *out = (fence_use_t){0};
  for (unsigned k = 0; k < r->gpus && k < GPUM_FENCE_MAX_DEVICES; k++) {
    gpum_fence_usage_t u;
    if (gpum_fence_usage(f, k, &u) != 0)
      continue;
    out->used += u.used;
    out->limit = u.limit;
    out->procs = u.procs > out->procs ? u.procs : out->procs;
  }
  gpum_fence_close(f);
  return true;
}

static json_t *fenced_json(gpumd_t *d, const gpumd_resv_t *r) {
  fence_use_t u;
  if (!fence_use(d, r, &u))
    return NULL;
  return json_pack("{s:I, s:I, s:i}", GPUM_PROTO_F_USED, (json_int_t)u.used, GPUM_PROTO_F_LIMIT,
                   (json_int_t)u.limit, GPUM_PROTO_F_PROCESSES, (int)u.procs);
}

static const char *moving_name(unsigned moving) {
  return moving == GPUMD_MOVING_SUSPENDING ? GPUM_PROTO_MOVING_SUSPENDING
                                           : GPUM_PROTO_MOVING_RESUMING;
}

json_t *gpumd_engine_resv_json(gpumd_t *d, const gpumd_resv_t *r, bool with_token) {
  char id[GPUMD_RESV_ID_BUFSZ];
  json_t *o = json_object();
  if (!o)
    return NULL;
  put_ascii(o, GPUM_PROTO_F_ID, gpumd_resv_id_format(r->id, id, sizeof id));
  if (with_token)
    put_ascii(o, GPUM_PROTO_F_TOKEN, r->token);
  put_ascii(o, GPUM_PROTO_F_STATE, gpumd_resv_state_name(r->state));
  json_object_set_new_nocheck(o, GPUM_PROTO_F_REASON, text_json(r->reason));
  put_int(o, GPUM_PROTO_F_UID, r->uid);
  put_int(o, GPUM_PROTO_F_PID, r->pid);
  json_object_set_new_nocheck(o, GPUM_PROTO_F_LABEL, text_json(r->label));
  json_object_set_new_nocheck(o, GPUM_PROTO_F_SLURM,
                              r->slurm_job[0]
                                  ? json_pack("{s:s, s:s}", GPUM_PROTO_F_JOB_ID, r->slurm_job,
                                              GPUM_PROTO_F_STEP_ID, r->slurm_step)
                                  : json_null());
  put_int(o, GPUM_PROTO_F_BYTES_PER_GPU, (json_int_t)r->bytes_per_gpu);
  put_int(o, GPUM_PROTO_F_GPUS, r->gpus);
  put_int(o, GPUM_PROTO_F_PRIORITY, r->priority);
  put_ascii(o, GPUM_PROTO_F_LEASE, gpumd_lease_kind_name(r->lease));
  if (r->lease == GPUMD_LEASE_PID)
    put_int(o, GPUM_PROTO_F_LEASE_PID, r->lease_pid);
  put_int(o, GPUM_PROTO_F_TTL_MS, (json_int_t)r->ttl_ms);
  put_int(o, GPUM_PROTO_F_EXPIRES_NS, (json_int_t)r->expires_ns);
  json_t *devs = json_array();
  for (unsigned i = 0; i < GPUMD_SCHED_MAX_DEVICES; i++) {
    if (!(r->device_mask >> i & 1u))
      continue;
    gpumd_sched_device_t v;
    json_t *dev = json_object();
    bool known = gpumd_sched_device(d->sched, i, &v) == 0;
    put_int(dev, GPUM_PROTO_F_INDEX, (json_int_t)i);
    json_object_set_new_nocheck(dev, GPUM_PROTO_F_UUID, text_json(known ? v.uuid : ""));
    put_int(dev, GPUM_PROTO_F_MEMORY_TOTAL, known ? (json_int_t)v.memory_total : 0);
    put_ascii(dev, GPUM_PROTO_F_VENDOR, known ? v.vendor : "");
    put_int(dev, GPUM_PROTO_F_VENDOR_INDEX, known ? (json_int_t)v.vendor_index : 0);
    json_array_append_new(devs, dev);
  }
  json_object_set_new_nocheck(o, GPUM_PROTO_F_DEVICES, devs);
  if (r->state == GPUMD_RESV_QUEUED) {
    size_t pos = 0;
    if (gpumd_sched_queue_position(d->sched, r->id, &pos) == 0)
      put_int(o, GPUM_PROTO_F_QUEUE_POSITION, (json_int_t)pos);
    char why[512];
    json_object_set_new_nocheck(
        o, GPUM_PROTO_F_WAITING_FOR,
        text_json(gpumd_sched_waiting_for(d->sched, r->id, why, sizeof why)));
  }
  put_int(o, GPUM_PROTO_F_CREATED_NS, (json_int_t)r->created_ns);
  put_int(o, GPUM_PROTO_F_GRANTED_NS, (json_int_t)r->granted_ns);
  put_int(o, GPUM_PROTO_F_ENDED_NS, (json_int_t)r->ended_ns);
  json_object_set_new_nocheck(o, GPUM_PROTO_F_PREEMPTIBLE, json_boolean(r->preemptible));
  if (r->moving)
    put_ascii(o, GPUM_PROTO_F_MOVING, moving_name(r->moving));
  if (r->state == GPUMD_RESV_SUSPENDED) {
    put_int(o, GPUM_PROTO_F_SUSPENDED_NS, (json_int_t)r->suspended_ns);
    put_int(o, GPUM_PROTO_F_HOST_BYTES, (json_int_t)r->host_bytes);
    json_object_set_new_nocheck(o, GPUM_PROTO_F_HOLD, json_boolean(r->suspend_hold));
  }
  return o;
}

/* ,"key": as one piece (key a string literal). */
#define W_KEY(w, key) GPUMD_JW_LIT((w), "," GPUMD_JSON_KEY(key))

#define W_INT(w, key, v)    \
  do {                      \
    W_KEY(w, key);          \
    gpumd_jw_int((w), (v)); \
  } while (0)

#define W_BOOL(w, key, v)         \
  do {                            \
    W_KEY(w, key);                \
    if (v)                        \
      GPUMD_JW_LIT((w), "true");  \
    else                          \
      GPUMD_JW_LIT((w), "false"); \
  } while (0)

/* A client-given or driver-given string (text_json's: gpumd_jw_string writes a byte that is
 * not UTF-8 as '?'). */
#define W_TEXT(w, key, v)      \
  do {                         \
    W_KEY(w, key);             \
    gpumd_jw_string((w), (v)); \
  } while (0)

/* r's document without its closing brace, so that a list can add the usage fields. */
static void resv_write_fields(gpumd_t *d, gpumd_jw_t *w, const gpumd_resv_t *r, bool with_token) {
  /* "r-<n>", as gpumd_resv_id_format writes it: ASCII digits, nothing to escape */
  GPUMD_JW_LIT(w, "{" GPUMD_JSON_KEY(GPUM_PROTO_F_ID) "\"r-");
  gpumd_jw_int(w, (long long)r->id);
  GPUMD_JW_LIT(w, "\"");
  if (with_token) {
    W_KEY(w, GPUM_PROTO_F_TOKEN);
    gpumd_jw_string(w, r->token);
  }
  W_KEY(w, GPUM_PROTO_F_STATE);
  gpumd_jw_name(w, gpumd_resv_state_name(r->state));
  W_TEXT(w, GPUM_PROTO_F_REASON, r->reason);
  W_INT(w, GPUM_PROTO_F_UID, r->uid);
  W_INT(w, GPUM_PROTO_F_PID, r->pid);
  W_TEXT(w, GPUM_PROTO_F_LABEL, r->label);
  W_KEY(w, GPUM_PROTO_F_SLURM);
  if (r->slurm_job[0]) { /* checked at submit: digits and names, nothing to escape */
    GPUMD_JW_LIT(w, "{" GPUMD_JSON_KEY(GPUM_PROTO_F_JOB_ID));
    gpumd_jw_string(w, r->slurm_job);
    W_KEY(w, GPUM_PROTO_F_STEP_ID);
    gpumd_jw_string(w, r->slurm_step);
    gpumd_jw_raw(w, "}", 1);
  } else {
    GPUMD_JW_LIT(w, "null");
  }
  W_INT(w, GPUM_PROTO_F_BYTES_PER_GPU, (long long)r->bytes_per_gpu);
  W_INT(w, GPUM_PROTO_F_GPUS, r->gpus);
  W_INT(w, GPUM_PROTO_F_PRIORITY, r->priority);
  W_KEY(w, GPUM_PROTO_F_LEASE);
  gpumd_jw_name(w, gpumd_lease_kind_name(r->lease));
  if (r->lease == GPUMD_LEASE_PID)
    W_INT(w, GPUM_PROTO_F_LEASE_PID, r->lease_pid);
  W_INT(w, GPUM_PROTO_F_TTL_MS, (long long)r->ttl_ms);
  W_INT(w, GPUM_PROTO_F_EXPIRES_NS, (long long)r->expires_ns);
  W_KEY(w, GPUM_PROTO_F_DEVICES);
  gpumd_jw_raw(w, "[", 1);
  bool first = true;
  for (uint64_t m = r->device_mask; m; m &= m - 1) { /* its set bits, lowest first */
    unsigned i = (unsigned)__builtin_ctzll(m);
    gpumd_sched_device_t v;
    bool known = gpumd_sched_device(d->sched, i, &v) == 0;
    const char *uuid = known ? v.uuid : "";
    if (first)
      GPUMD_JW_LIT(w, "{" GPUMD_JSON_KEY(GPUM_PROTO_F_INDEX));
    else
      GPUMD_JW_LIT(w, ",{" GPUMD_JSON_KEY(GPUM_PROTO_F_INDEX));
    first = false;
    gpumd_jw_int(w, i);
    W_TEXT(w, GPUM_PROTO_F_UUID, uuid);
    W_INT(w, GPUM_PROTO_F_MEMORY_TOTAL, known ? (long long)v.memory_total : 0);
    W_KEY(w, GPUM_PROTO_F_VENDOR); /* the device layer's word: nothing to escape */
    gpumd_jw_string(w, known ? v.vendor : "");
    W_INT(w, GPUM_PROTO_F_VENDOR_INDEX, known ? (long long)v.vendor_index : 0);
    gpumd_jw_raw(w, "}", 1);
  }
  gpumd_jw_raw(w, "]", 1);
  if (r->state == GPUMD_RESV_QUEUED) {
    size_t pos = 0;
    if (gpumd_sched_queue_position(d->sched, r->id, &pos) == 0)
      W_INT(w, GPUM_PROTO_F_QUEUE_POSITION, (long long)pos);
    char why[512];
    W_TEXT(w, GPUM_PROTO_F_WAITING_FOR, gpumd_sched_waiting_for(d->sched, r->id, why, sizeof why));
  }
  W_INT(w, GPUM_PROTO_F_CREATED_NS, (long long)r->created_ns);
  W_INT(w, GPUM_PROTO_F_GRANTED_NS, (long long)r->granted_ns);
  W_INT(w, GPUM_PROTO_F_ENDED_NS, (long long)r->ended_ns);
  W_BOOL(w, GPUM_PROTO_F_PREEMPTIBLE, r->preemptible);
  if (r->moving) {
    W_KEY(w, GPUM_PROTO_F_MOVING);
    gpumd_jw_name(w, moving_name(r->moving));
  }
  if (r->state == GPUMD_RESV_SUSPENDED) {
    W_INT(w, GPUM_PROTO_F_SUSPENDED_NS, (long long)r->suspended_ns);
    W_INT(w, GPUM_PROTO_F_HOST_BYTES, (long long)r->host_bytes);
    W_BOOL(w, GPUM_PROTO_F_HOLD, r->suspend_hold);
  }
}

void gpumd_engine_resv_write(gpumd_t *d, gpumd_jw_t *w, const gpumd_resv_t *r, bool with_token) {
  resv_write_fields(d, w, r, with_token);
  gpumd_jw_raw(w, "}", 1);
}

void gpumd_engine_resv_write_used(gpumd_t *d, gpumd_jw_t *w, const gpumd_resv_t *r,
                                  bool with_token) {
  resv_write_fields(d, w, r, with_token);
  if (r->state == GPUMD_RESV_GRANTED) { /* as gpumd_engine_resv_add_fenced adds them */
    fence_use_t u;
    W_KEY(w, GPUM_PROTO_F_FENCED);
    if (fence_use(d, r, &u)) {
      GPUMD_JW_LIT(w, "{" GPUMD_JSON_KEY(GPUM_PROTO_F_USED));
      gpumd_jw_int(w, (long long)u.used);
      W_INT(w, GPUM_PROTO_F_LIMIT, (long long)u.limit);
      W_INT(w, GPUM_PROTO_F_PROCESSES, (long long)u.procs);
      gpumd_jw_raw(w, "}", 1);
    } else {
      GPUMD_JW_LIT(w, "null");
    }
    json_t *wl = gpumd_reports_json(d, r->id);
    if (wl) {
      W_KEY(w, GPUM_PROTO_F_WORKLOAD);
      gpumd_jw_value(w, wl);
      json_decref(wl);
    }
  }
  gpumd_jw_raw(w, "}", 1);
}

/* ---- events ---------------------------------------------------------------------------- */

/* Sends an event about r to its bound connection, else to every connection of its owner. A
 * connection the server is closing gets no more events, and none goes where the reply to the
 * request that caused it tells the same (see gpumd_cause_t). */
static void event_to_owner(gpumd_t *d, const gpumd_cause_t *cause, const gpumd_resv_t *r,
                           const char *name) {
  gpumd_lease_t *l = gpumd_lease_get(d, r->id);
  if (cause && cause->about == r->id &&
      (cause->submit || (l && l->conn == (cause->actor ? cause->actor->conn : NULL))))
    return;
  if (l && l->conn && l->conn->closing)
    return;
  if (l && l->conn) {
    gpumd_send_event(
        l->conn, name,
        json_pack("{s:o}", GPUM_PROTO_F_RESERVATION, gpumd_engine_resv_json(d, r, true)));
    return;
  }
  for (gpumd_conn_t *c = d->conns; c; c = c->next)
    if (!c->dead && !c->closing && c->uid == r->uid)
      gpumd_send_event(
          c, name,
          json_pack("{s:o}", GPUM_PROTO_F_RESERVATION, gpumd_engine_resv_json(d, r, true)));
}

static const char *event_name(gpumd_resv_state_t from, gpumd_resv_state_t to) {
  switch (to) {
  case GPUMD_RESV_QUEUED:
    return GPUM_PROTO_EV_QUEUED;
  case GPUMD_RESV_GRANTED:
    return from == GPUMD_RESV_SUSPENDED ? GPUM_PROTO_EV_RESUMED : GPUM_PROTO_EV_GRANTED;
  case GPUMD_RESV_EXPIRED:
    return GPUM_PROTO_EV_EXPIRED;
  case GPUMD_RESV_FAILED:
    return GPUM_PROTO_EV_FAILED;
  case GPUMD_RESV_SUSPENDED:
    return GPUM_PROTO_EV_SUSPENDED;
  default: /* RELEASED, and CANCELLED (released while queued) */
    return GPUM_PROTO_EV_RELEASED;
  }
}

/* Stages r's row, and the audit row a when not NULL, in the turn's ledger transaction: the one
 * place gpumd writes reservation rows. A failed write fails the turn (d->ledger_failed: its
 * output is never sent). Returns 0 or the write's error. */
static int stage_resv(gpumd_t *d, const gpumd_resv_t *r, const gpumd_ledger_audit_t *a) {
  gpumd_resv_doc_forget(d); /* r's document in the slot may be stale now */
  int rc = gpumd_ledger_put(d->ledger, r);
  if (rc == 0 && a)
    rc = gpumd_ledger_audit(d->ledger, a);
  if (rc != 0)
    d->ledger_failed = true;
  return rc;
}

typedef struct {
  gpumd_t *d;
  const gpumd_resv_t *r;
} resv_doc_t;

/* The reservation's document as events show it (without its token), written once per
 * transition (resv_reply.c). */
static void write_resv_doc(gpumd_jw_t *w, const void *arg) {
  const resv_doc_t *a = arg;
  gpumd_resv_doc_write(a->d, w, a->r);
}

static void on_transition(void *user, const gpumd_cause_t *cause, const gpumd_resv_t *r,
                          gpumd_resv_state_t from, gpumd_resv_state_t to, uint64_t time_ns,
                          const char *reason) {
  gpumd_t *d = user;
  const gpumd_actor_t *actor = cause ? cause->actor : NULL; /* NULL: gpumd itself */
  gpumd_ledger_audit_t a = {.reservation = r->id,
                            .from = from,
                            .to = to,
                            .time_ns = time_ns,
                            .reason = reason,
                            .uid = actor ? actor->uid : 0,
                            .pid = actor ? actor->pid : 0};
  if (stage_resv(d, r, &a) != 0)
    gpum_log(GPUM_LOG_ERROR, "gpumd", "ledger write failed: %s", gpum_last_error());
  gpum_log(GPUM_LOG_DEBUG, "gpumd", "r-%llu %s -> %s: %s", (unsigned long long)r->id,
           gpumd_resv_state_name(from), gpumd_resv_state_name(to), reason ? reason : "");
  if ((from == GPUMD_RESV_QUEUED) != (to == GPUMD_RESV_QUEUED)) {
    size_t rank = d->sched ? gpumd_sched_queue_rank(d->sched, r) : 0;
    if (!d->queue_changed || rank < d->queue_moved_from)
      d->queue_moved_from = rank;
    d->queue_changed = true;
  }
  if (from != GPUMD_RESV_NEW)
    event_to_owner(d, cause, r, event_name(from, to));
  /* The event's document is written (with the fast writer, once for every channel) only when
   * someone could get it: this runs at every reservation's every transition. */
  resv_doc_t doc = {d, r};
  gpumd_resv_doc_set(d, cause, r);
  gpumd_obs_transition(d, r, from, to, write_resv_doc, &doc);
  gpumd_suspend_changed(d);
  if (gpumd_resv_state_final(to)) {
    if (from == GPUMD_RESV_SUSPENDED || r->moving)
      gpum_log(GPUM_LOG_WARN, "gpumd",
               "r-%llu ended %s: its processes (%u) stay as the driver has them; end them to "
               "free the host memory they take",
               (unsigned long long)r->id, r->moving ? "while being moved" : "while suspended",
               r->nprocs);
    if (cause && cause->final && cause->about == r->id)
      *cause->final = *r;
    gpumd_lease_remove(d, r->id);
    gpumd_ended_note(d, r);
    gpumd_fences_ended(d, r); /* nothing outlives its reservation */
  }
}

/* ---- changes without a transition: a TTL lease's expiry, a resize ------------------------- */

void gpumd_engine_note(gpumd_t *d, const gpumd_resv_t *r, const gpumd_actor_t *a, const char *why) {
  gpumd_ledger_audit_t row = {.reservation = r->id,
                              .from = r->state,
                              .to = r->state,
                              .time_ns = gpum__os_real_ns(),
                              .reason = why,
                              .uid = a ? a->uid : 0,
                              .pid = a ? a->pid : 0};
  stage_resv(d, r, &row);
}

const gpumd_resv_t *gpumd_engine_set_ttl(gpumd_t *d, uint64_t rid, uint64_t expires_ns) {
  gpumd_sched_set_expiry(d->sched, rid, expires_ns);
  gpumd_lease_t *l = gpumd_lease_add(d, rid);
  if (l)
    gpumd_lease_arm_ttl(d, l, expires_ns);
  const gpumd_resv_t *r = gpumd_sched_find(d->sched, rid);
  if (r)
    stage_resv(d, r, NULL);
  return r;
}

const gpumd_resv_t *gpumd_engine_renew(gpumd_t *d, uint64_t rid, uint64_t ttl_ms) {
  return gpumd_engine_set_ttl(d, rid, gpum__os_real_ns() + ttl_ms * 1000000ull);
}

int gpumd_engine_resize(gpumd_t *d, const gpumd_actor_t *a, uint64_t rid, uint64_t bytes,
                        const gpumd_resv_t **out) {
  gpumd_cause_t cause = {.actor = a, .about = rid};
  char why[GPUMD_RESV_REASON_LEN];
  uint64_t now = gpum__os_real_ns();
  int rc = gpumd_sched_resize(d->sched, &cause, rid, bytes, now, why, sizeof why);
  if (rc != 0)
    return rc;
  const gpumd_resv_t *r = gpumd_sched_find(d->sched, rid);
  gpumd_ledger_audit_t row = {.reservation = rid,
                              .from = GPUMD_RESV_GRANTED,
                              .to = GPUMD_RESV_GRANTED,
                              .time_ns = now,
                              .reason = why,
                              .uid = a->uid,
                              .pid = a->pid};
  stage_resv(d, r, &row);
  gpum_log(GPUM_LOG_INFO, "gpumd", "r-%llu %s (uid %lu)", (unsigned long long)rid, why,
           (unsigned long)a->uid);
  *out = r;
  return 0;
}

bool gpumd_engine_conn_watches_device(gpumd_t *d, gpumd_conn_t *c, unsigned device) {
  for (gpumd_lease_t *l = c->leases; l; l = l->cnext) {
    const gpumd_resv_t *r = gpumd_sched_find(d->sched, l->id);
    if (r && (r->device_mask >> device & 1u))
      return true;
  }
  for (unsigned i = 0; i < c->nreported; i++) {
    const gpumd_resv_t *r = gpumd_sched_find(d->sched, c->reported[i]);
    if (r && r->state == GPUMD_RESV_GRANTED && (r->device_mask >> device & 1u))
      return true;
  }
  return false;
}

/* Every change of a device's pressure level, up or down ("none": it cleared), goes to each
 * connection bound to a reservation on the device or reporting on one, once each. */
static void on_pressure(void *user, unsigned device, double used_ratio, gpumd_pressure_t from,
                        gpumd_pressure_t to) {
  gpumd_t *d = user;
  if (to == from)
    return;
  gpum_log(GPUM_LOG_INFO, "gpumd", "device %u memory pressure %s (%.0f%% used)", device,
           gpumd_pressure_name(to), used_ratio * 100.0);
  for (gpumd_conn_t *c = d->conns; c; c = c->next)
    if (!c->dead && gpumd_engine_conn_watches_device(d, c, device))
      gpumd_send_event(c, GPUM_PROTO_EV_PRESSURE,
                       json_pack("{s:i, s:f, s:s}", GPUM_PROTO_F_DEVICE, (int)device,
                                 GPUM_PROTO_F_USED_RATIO, used_ratio, GPUM_PROTO_F_LEVEL,
                                 gpumd_pressure_name(to)));
}

void gpumd_engine_turn_events(gpumd_t *d) {
  if (!d->queue_changed || !d->sched)
    return;
  d->queue_changed = false;
  /* Only the positions from the first change on can have moved: a reserve granted at once
   * passes through the queue's tail and moves nobody's, whatever the queue's length. */
  size_t n = gpumd_sched_queue_length(d->sched);
  for (size_t pos = d->queue_moved_from; pos < n; pos++) {
    const gpumd_resv_t *r = gpumd_sched_queue_at(d->sched, pos);
    gpumd_lease_t *l = gpumd_lease_get(d, r->id);
    if (!l || l->told_position == pos + 1)
      continue;
    l->told_position = pos + 1;
    if (l->conn)
      gpumd_send_event(
          l->conn, GPUM_PROTO_EV_QUEUED,
          json_pack("{s:o}", GPUM_PROTO_F_RESERVATION, gpumd_engine_resv_json(d, r, true)));
  }
}

/* ---- device views ------------------------------------------------------------------------ */

/* The GRANTED reservations by the pids that hold them (owner, pid lease, connection's peer),
 * for a batch of lookups between gpumd_engine_pids_begin and _end, in which nothing changes:
 * looking a process up scanned every reservation for it and each of its ancestors, so a fresh
 * read with P processes on a node of N reservations cost P x N (5,000 reservations and 64
 * processes made a reserve+release 12 times slower). Built at the batch's first lookup, in
 * O(N); a chain per hash bucket, in the scheduler's order, as the scan found them. */
#define PIDS_NIL UINT32_MAX

static struct {
  unsigned depth; /* nested batches open */
  bool built;
  struct {
    int32_t pid;
    uint32_t next;
    const gpumd_resv_t *r;
  } * e;
  size_t n, cap;
  uint32_t *head; /* nb buckets, a power of two */
  size_t nb;
} pids;

void gpumd_engine_pids_begin(gpumd_t *d) {
  (void)d;
  pids.depth++;
}

void gpumd_engine_pids_end(gpumd_t *d) {
  (void)d;
  if (pids.depth > 0 && --pids.depth == 0)
    pids.built = false;
}

static void pids_free(void) {
  free(pids.e);
  free(pids.head);
  memset(&pids, 0, sizeof pids);
}

static size_t pid_bucket(int32_t pid) {
  return ((uint32_t)pid * 2654435761u) & (pids.nb - 1);
}

static bool pids_add(int32_t pid, const gpumd_resv_t *r) {
  if (pids.n == pids.cap) {
    size_t cap = pids.cap ? 2 * pids.cap : 256;
    void *e = realloc(pids.e, cap * sizeof *pids.e);
    if (!e)
      return false;
    pids.e = e;
    pids.cap = cap;
  }
  size_t b = pid_bucket(pid);
  pids.e[pids.n].pid = pid;
  pids.e[pids.n].r = r;
  pids.e[pids.n].next = pids.head[b];
  pids.head[b] = (uint32_t)pids.n++;
  return true;
}

/* The pids that hold r, each once: its owner, its pid lease's pid, its connection's peer. The
 * one rule for both ways of looking a process up (the index and the scan). */
static size_t holders_of(gpumd_t *d, const gpumd_resv_t *r, int32_t out[3]) {
  size_t n = 0;
  out[n++] = r->pid;
  if (r->lease == GPUMD_LEASE_PID && r->lease_pid > 0 && r->lease_pid != r->pid)
    out[n++] = r->lease_pid;
  gpumd_lease_t *l = gpumd_lease_get(d, r->id);
  int32_t peer = l && l->conn ? (int32_t)l->conn->pid : 0;
  if (peer > 0 && peer != out[0] && (n == 1 || peer != out[1]))
    out[n++] = peer;
  return n;
}

/* Builds the index; false without memory (the lookups then scan, as without a batch). */
static bool pids_build(gpumd_t *d) {
  size_t n = gpumd_sched_count(d->sched), nb = 64;
  while (nb < 2 * n && nb < (1u << 24))
    nb *= 2;
  if (nb > pids.nb) {
    uint32_t *h = realloc(pids.head, nb * sizeof *h);
    if (!h)
      return false;
    pids.head = h;
    pids.nb = nb;
  }
  memset(pids.head, 0xff, pids.nb * sizeof *pids.head);
  pids.n = 0;
  for (size_t i = n; i-- > 0;) { /* added at the chains' heads: the scheduler's order */
    const gpumd_resv_t *r = gpumd_sched_at(d->sched, i);
    if (r->state != GPUMD_RESV_GRANTED)
      continue;
    int32_t who[3];
    for (size_t k = 0, m = holders_of(d, r, who); k < m; k++)
      if (!pids_add(who[k], r))
        return false;
  }
  pids.built = true;
  return true;
}

/* The GRANTED reservation on device that process pid itself holds (owner, lease pid or its
 * connection's peer), or NULL: from the batch's index, else by a scan of them all. */
static const gpumd_resv_t *resv_held_by(gpumd_t *d, unsigned device, int32_t pid) {
  if (pids.depth > 0 && (pids.built || pids_build(d))) {
    for (uint32_t j = pids.head[pid_bucket(pid)]; j != PIDS_NIL; j = pids.e[j].next)
      if (pids.e[j].pid == pid && pids.e[j].r->device_mask >> device & 1u)
        return pids.e[j].r;
    return NULL;
  }
  size_t n = gpumd_sched_count(d->sched);
  for (size_t i = 0; i < n; i++) {
    const gpumd_resv_t *r = gpumd_sched_at(d->sched, i);
    if (r->state != GPUMD_RESV_GRANTED || !(r->device_mask >> device & 1u))
      continue;
    int32_t who[3];
    for (size_t k = 0, m = holders_of(d, r, who); k < m; k++)
      if (who[k] == pid)
        return r;
  }
  return NULL;
}

/* A process is the reservation's when it or one of its ancestors holds it: a job's processes
 * are the children of what holds the reservation (gpum run's CMD, the tasks of a Slurm step
 * under its slurmstepd's pid lease), and their memory is the reservation's, not memory on top
 * of it. */
const gpumd_resv_t *gpumd_engine_resv_of_pid(gpumd_t *d, unsigned device, int32_t pid) {
  for (int depth = 0; pid > 1 && depth < 32; depth++, pid = gpumd_pid_parent(pid)) {
    const gpumd_resv_t *r = resv_held_by(d, device, pid);
    if (r)
      return r;
  }
  return NULL;
}

static uint64_t unmanaged_bytes(gpumd_t *d, unsigned device, const gpumd_procs_t *procs) {
  uint64_t sum = 0;
  gpumd_engine_pids_begin(d);
  for (size_t i = 0; i < procs->count; i++)
    if (!gpumd_engine_resv_of_pid(d, device, (int32_t)procs->pid[i]))
      sum += procs->memory[i];
  gpumd_engine_pids_end(d);
  return sum;
}

/* The memory metrics s holds, into v. */
static void take_memory(gpumd_sched_device_t *v, const gpum_device_sample_t *s) {
  if (gpum_sample_valid(s, GPUM_METRIC_MEMORY_USED))
    v->memory_used = s->memory_used;
  if (gpum_sample_valid(s, GPUM_METRIC_MEMORY_TOTAL) && s->memory_total)
    v->memory_total = s->memory_total;
  if (gpum_sample_valid(s, GPUM_METRIC_MEMORY_RESERVED))
    v->memory_reserved = s->memory_reserved;
}

bool gpumd_engine_device_view(gpumd_t *d, unsigned index, const gpum_device_sample_t *sample,
                              bool procs, gpumd_sched_device_t *out) {
  gpumd_device_t *dev = gpumd_device_find(d, index);
  if (!dev || index >= GPUMD_SCHED_MAX_DEVICES)
    return false;
  gpumd_sched_device_t v;
  memset(&v, 0, sizeof v);
  gpumd_sched_device_t old;
  bool have_old = gpumd_sched_device(d->sched, index, &old) == 0;
  v.index = index;
  snprintf(v.uuid, sizeof v.uuid, "%s", dev->info.uuid);
  snprintf(v.name, sizeof v.name, "%s", dev->info.name);
  snprintf(v.vendor, sizeof v.vendor, "%s", dev->info.vendor ? dev->info.vendor : "");
  v.vendor_index = dev->info.vendor_index;
  v.memory_total = dev->info.memory_total;
  gpum_device_sample_t s;
  if (!sample && gpum_monitor_latest(d->mon, index, &s) == 0)
    sample = &s;
  if (have_old) { /* what the last view had, until something newer says otherwise */
    v.memory_used = old.memory_used;
    v.memory_reserved = old.memory_reserved;
  }
  static gpumd_procs_t pl; /* loop thread only; too big for the stack */
  bool have_pl = gpumd_procs_get(d, index, &pl) == 0;
  /* Memory from the newer of the sample and the process readers' read. */
  const gpum_device_sample_t *mem = sample;
  if (have_pl && (!sample || pl.sample.timestamp_ns > sample->timestamp_ns))
    mem = &pl.sample;
  if (mem)
    take_memory(&v, mem);
  if (sample) {
    v.util_valid = gpum_sample_valid(sample, GPUM_METRIC_UTIL_GPU);
    v.util_gpu_pct = sample->util_gpu;
    v.temp_valid = gpum_sample_valid(sample, GPUM_METRIC_TEMPERATURE);
    v.temperature_c = sample->temperature_c;
  }
  v.unmanaged =
      procs ? (have_pl ? unmanaged_bytes(d, index, &pl) : 0) : (have_old ? old.unmanaged : 0);
  /* Read afresh this turn (admission.c): the scheduler may grant on it until the turn ends. */
  v.fresh = d->fresh_mask >> index & 1u;
  v.unanswered = d->unanswered_mask >> index & 1u;
  gpum_device_health_t h;
  if (!dev->answered) { /* silent since start: nothing may be granted on it */
    v.health = GPUM_HEALTH_ERROR;
    snprintf(v.reason, sizeof v.reason, "%s", GPUMD_SILENT_REASON);
  } else if (gpum_monitor_health(d->mon, index, &h) == 0) {
    v.health = h.state;
    v.gone = h.gone;
    snprintf(v.reason, sizeof v.reason, "%s", h.reason);
  }
  *out = v;
  return true;
}

/* Builds the view of device index from the monitor and hands it to the scheduler. */
static void feed_device(gpumd_t *d, unsigned index, const gpum_device_sample_t *sample,
                        bool procs) {
  gpumd_sched_device_t v;
  if (gpumd_engine_device_view(d, index, sample, procs, &v))
    gpumd_sched_update_device(d->sched, NULL, &v, gpum__os_real_ns()); /* gpumd's own news */
}

void gpumd_engine_device_health(gpumd_t *d, unsigned index, gpum_health_t to, const char *reason) {
  (void)to, (void)reason; /* the monitor's current state is read again in feed_device */
  feed_device(d, index, NULL, false);
}

static void ledger_devices(gpumd_t *d);

void gpumd_engine_device_answered(gpumd_t *d, unsigned index) {
  if (d->ledger)
    ledger_devices(d); /* grants on it are stored with its UUID from now on */
  if (d->sched)
    feed_device(d, index, NULL, false);
}

void gpumd_engine_device_sample(gpumd_t *d, unsigned index, const gpum_device_sample_t *s) {
  feed_device(d, index, s, true);
}

void gpumd_engine_device_json(gpumd_t *d, unsigned index, json_t *o, size_t max_ids) {
  gpumd_sched_device_stats_t st;
  if (gpumd_sched_device_stats(d->sched, index, &st) != 0)
    return;
  json_object_set_new(o, GPUM_PROTO_F_CAPACITY, json_integer((json_int_t)st.capacity));
  json_object_set_new(o, GPUM_PROTO_F_COMMITTED, json_integer((json_int_t)st.committed));
  json_object_set_new(o, GPUM_PROTO_F_RESERVED, json_integer((json_int_t)st.reserved));
  json_object_set_new(o, GPUM_PROTO_F_UNMANAGED, json_integer((json_int_t)st.unmanaged));
  json_object_set_new(o, GPUM_PROTO_F_OVERCOMMIT, json_integer((json_int_t)st.overcommit));
  /* What a reservation may still get here: the capacity less what is committed. */
  json_object_set_new(
      o, GPUM_PROTO_F_GRANTABLE,
      json_integer(st.committed < st.capacity ? (json_int_t)(st.capacity - st.committed) : 0));
  /* Memory taken after the grants put it over its capacity: what is wrong with a device that
   * is otherwise up (ERROR and DISABLED say more). */
  const char *state = json_string_value(json_object_get(o, GPUM_PROTO_F_STATE));
  if (st.overcommit > 0 && state &&
      (!strcmp(state, gpum_health_state_name(GPUM_HEALTH_AVAILABLE)) ||
       !strcmp(state, gpum_health_state_name(GPUM_HEALTH_BUSY)))) {
    char what[128], why[192];
    snprintf(why, sizeof why, "%s: memory taken outside reservations after they were granted",
             gpumd_admission_overcommit_text(&st, what, sizeof what));
    json_object_set_new(o, GPUM_PROTO_F_STATE, json_string(GPUMD_STATE_OVERCOMMITTED));
    json_object_set_new(o, GPUM_PROTO_F_REASON, json_string(why));
  }
  json_object_set_new(o, GPUM_PROTO_F_JOBS, json_integer(st.jobs));
  json_object_set_new(o, GPUM_PROTO_F_PRESSURE, json_string(gpumd_pressure_name(st.pressure)));
  json_t *ids = json_array();
  size_t n = gpumd_sched_count(d->sched);
  for (size_t i = 0; i < n && json_array_size(ids) < max_ids; i++) {
    const gpumd_resv_t *r = gpumd_sched_at(d->sched, i);
    char id[GPUMD_RESV_ID_BUFSZ];
    if (r->state == GPUMD_RESV_GRANTED && (r->device_mask >> index & 1u))
      json_array_append_new(ids, json_string(gpumd_resv_id_format(r->id, id, sizeof id)));
  }
  json_object_set_new(o, GPUM_PROTO_F_RESERVATIONS, ids);
}

/* ---- timers and lease ends ---------------------------------------------------------------- */

static void arm_tick(gpumd_t *d, uint64_t next_ns) {
  if (next_ns == UINT64_MAX) {
    event_del(d->tick_timer);
    return;
  }
  uint64_t now = gpum__os_real_ns();
  uint64_t left = next_ns > now ? next_ns - now : 0;
  struct timeval tv = {.tv_sec = (time_t)(left / 1000000000ull),
                       .tv_usec = (suseconds_t)((left % 1000000000ull) / 1000 + 1)};
  event_add(d->tick_timer, &tv);
}

void gpumd_engine_tick(gpumd_t *d) {
  uint64_t next = UINT64_MAX;
  gpumd_sched_tick(d->sched, NULL, gpum__os_real_ns(), &next); /* timeouts: gpumd acts */
  arm_tick(d, next);
}

static void on_tick(evutil_socket_t fd, short what, void *arg) {
  (void)fd, (void)what;
  gpumd_engine_tick(arg);
}

void gpumd_engine_lease_ended(gpumd_t *d, uint64_t id, gpumd_resv_state_t to, const char *reason) {
  /* Its fence, if it had one, goes with it (on_transition). */
  if (gpumd_sched_end(d->sched, NULL, id, to, gpum__os_real_ns(), reason) != 0)
    gpumd_lease_remove(d, id); /* already final */
  gpumd_engine_tick(d);
}

void gpumd_engine_conn_closed(gpumd_conn_t *c) {
  gpumd_t *d = c->d;
  char reason[128];
  snprintf(reason, sizeof reason, "client disconnected (uid %lu pid %ld)", (unsigned long)c->uid,
           (long)c->pid);
  /* The peer acts: the audit rows name its uid and pid. */
  gpumd_actor_t peer = {.uid = c->uid, .pid = (int32_t)c->pid, .conn = c};
  gpumd_cause_t cause = {.actor = &peer};
  if (c->leases && gpumd_sched_queue_length(d->sched) > 0) {
    /* What its releases let in is granted in their name. */
    gpumd_sched_freed_t f;
    gpumd_sched_freed_init(&f);
    for (gpumd_lease_t *l = c->leases; l; l = l->cnext) {
      const gpumd_resv_t *r = gpumd_sched_find(d->sched, l->id);
      if (r && r->lease == GPUMD_LEASE_CONNECTION)
        gpumd_sched_freed_add(d->sched, &f, l->id);
    }
    gpumd_admission_read_for_ends(d, &f);
  }
  while (c->leases) {
    gpumd_lease_t *l = c->leases;
    const gpumd_resv_t *r = gpumd_sched_find(d->sched, l->id);
    if (r && r->lease == GPUMD_LEASE_CONNECTION) {
      uint64_t id = l->id;
      if (gpumd_sched_release(d->sched, &cause, id, gpum__os_real_ns(), reason) != 0)
        gpumd_lease_remove(d, id);
    } else {
      gpumd_lease_bind(l, NULL);
    }
  }
  gpumd_engine_tick(d);
}

static void on_grace(evutil_socket_t fd, short what, void *arg) {
  (void)fd, (void)what;
  gpumd_t *d = arg;
  size_t n = gpumd_sched_count(d->sched), k = 0;
  uint64_t *ids = calloc(n ? n : 1, sizeof *ids);
  if (!ids)
    return;
  for (size_t i = 0; i < n; i++) {
    const gpumd_resv_t *r = gpumd_sched_at(d->sched, i);
    gpumd_lease_t *l = gpumd_lease_get(d, r->id);
    if (l && l->awaiting_attach)
      ids[k++] = r->id;
  }
  for (size_t i = 0; i < k; i++)
    gpumd_engine_lease_ended(d, ids[i], GPUMD_RESV_RELEASED,
                             "client did not re-attach within lease.grace after a gpumd restart");
  free(ids);
}

/* ---- start, recovery, reload ------------------------------------------------------------- */

/* Arms ev to fire in ms milliseconds (0: at the next loop turn). */
static void arm_ms(struct event *ev, uint64_t ms) {
  struct timeval tv = {.tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000};
  event_add(ev, &tv);
}

/* (Re-)arms the end of the grace period: lease.grace after it began, at once when that
 * passed (a SIGHUP that shortens lease.grace). */
static void arm_grace(gpumd_t *d) {
  uint64_t grace = gpum_config_get_duration(d->cfg, "lease.grace");
  uint64_t grace_ns = grace > UINT64_MAX / 2000000ull ? UINT64_MAX / 2 : grace * 1000000ull;
  uint64_t end = d->grace_start_ns + grace_ns, now = gpum__os_real_ns();
  uint64_t left_ms = end > now ? (end - now + 999999) / 1000000 : 0;
  arm_ms(d->grace_timer, left_ms);
  gpum_log(GPUM_LOG_INFO, "gpumd",
           "lease.grace %llu ms: the grace period after the restart ends "
           "in %llu ms",
           (unsigned long long)grace, (unsigned long long)left_ms);
}

#define PRUNE_BATCH 256                      /* finished reservations deleted per turn */
#define PRUNE_PERIOD_MAX_MS (3600ull * 1000) /* prune at least hourly */

/* ledger.retention: deletes a batch of finished reservations older than the retention; the
 * next batch follows at the next turn when this one was full, else after min(1 h,
 * retention / 2) (at least 100 ms). */
static void on_prune(evutil_socket_t fd, short what, void *arg) {
  (void)fd, (void)what;
  gpumd_t *d = arg;
  uint64_t keep_ms = gpum_config_get_duration(d->cfg, "ledger.retention");
  if (keep_ms == 0 || !d->ledger)
    return;
  uint64_t now = gpum__os_real_ns();
  uint64_t keep_ns = keep_ms > UINT64_MAX / 1000000ull ? UINT64_MAX : keep_ms * 1000000ull;
  size_t n = 0;
  bool more = false;
  if (now > keep_ns && gpumd_ledger_prune(d->ledger, now - keep_ns, PRUNE_BATCH, &n, &more) != 0) {
    gpum_log(GPUM_LOG_ERROR, "gpumd", "ledger pruning failed: %s", gpum_last_error());
    d->ledger_failed = true;
    return;
  }
  if (n > 0)
    gpum_log(GPUM_LOG_DEBUG, "gpumd", "ledger.retention: pruned %zu finished reservations", n);
  uint64_t period = keep_ms / 2 < 100 ? 100 : keep_ms / 2;
  arm_ms(d->prune_timer, more ? 0 : period < PRUNE_PERIOD_MAX_MS ? period : PRUNE_PERIOD_MAX_MS);
}

/* SIGHUP: a new lease.grace moves the end of a running grace period; a new ledger.retention
 * applies from the next turn. */
static void reload_timers(gpumd_t *d) {
  if (d->grace_timer && event_pending(d->grace_timer, EV_TIMEOUT, NULL))
    arm_grace(d);
  if (d->prune_timer) {
    if (gpum_config_get_duration(d->cfg, "ledger.retention") > 0)
      arm_ms(d->prune_timer, 0);
    else
      event_del(d->prune_timer);
  }
}

/* Tells the ledger this run's device UUIDs (grants are stored by UUID and mapped back). */
static void ledger_devices(gpumd_t *d) {
  const char *uuids[GPUMD_SCHED_MAX_DEVICES] = {0};
  unsigned count = 0;
  for (unsigned i = 0; i < d->device_count; i++) {
    unsigned idx = d->devices[i].index;
    if (idx >= GPUMD_SCHED_MAX_DEVICES || !d->devices[i].answered)
      continue; /* a silent device has no UUID yet: grants stored on it do not map to it */
    uuids[idx] = d->devices[i].info.uuid;
    count = idx + 1 > count ? idx + 1 : count;
  }
  if (gpumd_ledger_set_devices(d->ledger, uuids, count) != 0)
    gpum_log(GPUM_LOG_WARN, "gpumd", "grants are stored by device index only: %s",
             gpum_last_error());
  gpumd_engine_apply_disabled(d);
}

int gpumd_engine_reload(gpumd_t *d) {
  gpumd_sched_opts_t o;
  gpumd_sched_opts_init(&o);
  o.memory_fraction = gpum_config_get_double(d->cfg, "memory_fraction");
  o.safety_margin = gpum_config_get_size(d->cfg, "safety_margin");
  o.max_concurrent_jobs = (unsigned)gpum_config_get_int(d->cfg, "max_concurrent_jobs");
  const char *p = gpum_config_get_string(d->cfg, "placement");
  if (gpumd_placement_parse(p, &o.placement) != 0)
    return gpum_error(GPUM_EINVAL, "placement '%s': expected pack, spread or score", p);
  uint64_t bound = gpum_config_get_duration(d->cfg, "queue.backfill_bound");
  o.backfill = bound > 0;
  o.backfill_bound_ns = bound * 1000000ull;
  o.pressure_high = gpum_config_get_double(d->cfg, "pressure.high");
  o.pressure_critical = gpum_config_get_double(d->cfg, "pressure.critical");
  o.require_fresh = true; /* grants are decided on devices read afresh (admission.c) */
  d->admission_timeout_ms = (unsigned)gpum_config_get_duration(d->cfg, "admission.read_timeout");
  if (gpumd_sched_opts_check(&o) != 0)
    return GPUM_EINVAL;
  d->job_timeout_ms = gpum_config_get_duration(d->cfg, "job_timeout");
  d->queue_max = gpum_config_get_int(d->cfg, "queue.max");
  d->metrics_max_age_ns = gpum_config_get_duration(d->cfg, "http.metrics_max_age") * 1000000ull;
  d->metrics_dcgm = gpum_config_get_bool(d->cfg, "metrics.dcgm_names");
  if (!d->sched) {
    gpumd_sched_callbacks_t cb = {
        .on_transition = on_transition, .on_pressure = on_pressure, .user = d};
    return gpumd_sched_create(&o, &cb, &d->sched);
  }
  int rc = gpumd_sched_set_opts(d->sched, &o);
  if (rc == 0)
    gpumd_engine_tick(d);
  if (rc == 0)
    reload_timers(d);
  return rc;
}

static bool pid_alive(void *user, int32_t pid, uint64_t start_time) {
  (void)user;
  return gpumd_pid_is_alive(pid, start_time);
}

/* Devices that have not answered since start (their UUIDs are unknown). */
static unsigned silent_devices(const gpumd_t *d) {
  unsigned n = 0;
  for (unsigned i = 0; i < d->device_count; i++)
    n += !d->devices[i].answered;
  return n;
}

/* Restores one loaded reservation as the recovery policy says. Returns true when it waits
 * for a re-attach. */
static bool recover_one(gpumd_t *d, gpumd_ledger_row_t *row, uint64_t now) {
  gpumd_resv_t *r = &row->r;
  gpumd_recover_decision_t dec;
  gpumd_ledger_recover_decide_row(row, now, pid_alive, NULL, &dec);
  unsigned silent = silent_devices(d);
  if (dec.action == GPUMD_RECOVER_END && row->gone[0] != '\0' && silent > 0 &&
      !gpumd_resv_state_final(r->state))
    snprintf(dec.reason, sizeof dec.reason,
             "device %.96s not found after restart: gone, or one of the %u devices that did "
             "not answer within monitor.start_timeout",
             row->gone, silent);
  char id[GPUMD_RESV_ID_BUFSZ];
  gpumd_resv_id_format(r->id, id, sizeof id);
  if (dec.action != GPUMD_RECOVER_END && gpumd_sched_restore(d->sched, r) == 0) {
    gpumd_lease_t *l = gpumd_lease_add(d, r->id);
    if (l && r->lease == GPUMD_LEASE_PID &&
        gpumd_lease_watch_pid(d, l, r->lease_pid, r->lease_pid_start) != 0) {
      gpumd_engine_lease_ended(d, r->id, GPUMD_RESV_RELEASED, "lease process exited");
      return false;
    }
    if (l && r->lease == GPUMD_LEASE_TTL)
      gpumd_lease_arm_ttl(d, l, r->expires_ns);
    if (l && dec.action == GPUMD_RECOVER_AWAIT_ATTACH) {
      l->awaiting_attach = true;
      /* Its owner lives now, but its client may never come back (a crash lost the reply that
       * had the token): the owner's exit ends the wait, as a pid lease's end does. */
      int wrc = r->lease == GPUMD_LEASE_CONNECTION
                    ? gpumd_lease_watch_pid(d, l, r->pid, r->pid_start)
                    : 0;
      if (wrc == GPUM_ENOENT) {
        char why[GPUMD_RESV_REASON_LEN];
        snprintf(why, sizeof why, "owner pid %d exited while gpumd was down", (int)r->pid);
        gpumd_engine_lease_ended(d, r->id, GPUMD_RESV_RELEASED, why);
        return false;
      }
      if (wrc != 0) /* no pidfd: the grace alone ends the wait */
        gpum_log(GPUM_LOG_WARN, "gpumd", "%s: owner pid %d not watched: %s", id, (int)r->pid,
                 gpum_last_error());
    }
    gpum_log(GPUM_LOG_INFO, "gpumd", "recovered %s (%s, %s)%s", id, gpumd_resv_state_name(r->state),
             gpumd_lease_kind_name(r->lease),
             dec.action == GPUMD_RECOVER_AWAIT_ATTACH ? ": waiting for its client" : "");
    return l && l->awaiting_attach;
  }
  gpumd_resv_state_t from = r->state;
  r->state = dec.action == GPUMD_RECOVER_END ? dec.to : GPUMD_RESV_RELEASED;
  snprintf(r->reason, sizeof r->reason, "%s",
           dec.action == GPUMD_RECOVER_END ? dec.reason : "could not be restored");
  r->ended_ns = now;
  gpumd_ledger_audit_t a = {
      .reservation = r->id, .from = from, .to = r->state, .time_ns = now, .reason = r->reason};
  stage_resv(d, r, &a);
  gpum_log(GPUM_LOG_INFO, "gpumd", "recovery: %s %s: %s", id, gpumd_resv_state_name(r->state),
           r->reason);
  return false;
}

/* The loop is woken when the writer thread has committed a batch; gpumd_end_turn, right
 * after this callback's turn, sends what waited for it. */
static void on_ledger_written(evutil_socket_t fd, short what, void *arg) {
  (void)what, (void)arg;
  uint64_t n;
  ssize_t r = read(fd, &n, sizeof n); /* clears the eventfd; EAGAIN: nothing new */
  (void)r;
}

/* Turns' ledger writes go to the writer thread from now on (recovery committed on this one). */
static int start_writer(gpumd_t *d) {
  /* The socket replies a batch made durable are written by the writer as it finishes. */
  gpumd_ledger_set_after_commit(d->ledger, gpumd_conns_send_committed, d);
  int rc = gpumd_ledger_start_writer(d->ledger);
  if (rc != 0)
    return rc;
  d->ledger_ev = event_new(d->base, gpumd_ledger_writer_fd(d->ledger), EV_READ | EV_PERSIST,
                           on_ledger_written, d);
  if (!d->ledger_ev || event_add(d->ledger_ev, NULL) != 0)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  return 0;
}

int gpumd_engine_start(gpumd_t *d) {
  int rc = gpumd_engine_reload(d);
  if (rc != 0)
    return rc;
  d->tick_timer = event_new(d->base, -1, 0, on_tick, d);
  d->grace_timer = event_new(d->base, -1, 0, on_grace, d);
  d->prune_timer = event_new(d->base, -1, 0, on_prune, d);
  if (!d->tick_timer || !d->grace_timer || !d->prune_timer)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  rc = gpumd_ledger_open(d->state_dir, NULL, &d->ledger);
  if (rc != 0)
    return rc;
  ledger_devices(d);
  for (unsigned i = 0; i < d->device_count; i++)
    feed_device(d, d->devices[i].index, NULL, false);
  gpumd_ledger_row_t *rs = NULL;
  size_t n = 0;
  rc = gpumd_ledger_load_rows(d->ledger, &rs, &n);
  if (rc != 0)
    return rc;
  uint64_t max_id = 0, now = gpum__os_real_ns();
  size_t waiting = 0;
  rc = gpumd_ledger_begin_turn(d->ledger);
  for (size_t i = 0; rc == 0 && i < n; i++)
    waiting += recover_one(d, &rs[i], now);
  free(rs);
  if (rc == 0)
    rc = gpumd_ledger_max_id(d->ledger, &max_id);
  if (rc != 0)
    return rc;
  gpumd_sched_set_next_id(d->sched, max_id + 1);
  gpumd_engine_tick(d);
  if (waiting) {
    d->grace_start_ns = now;
    arm_grace(d);
    gpum_log(GPUM_LOG_INFO, "gpumd", "%zu reservations wait up to %llu ms for their clients",
             waiting, (unsigned long long)gpum_config_get_duration(d->cfg, "lease.grace"));
  }
  if (gpum_config_get_duration(d->cfg, "ledger.retention") > 0)
    arm_ms(d->prune_timer, 0); /* the first batch at the first turn */
  rc = gpumd_engine_commit(d);
  if (rc == 0)
    rc = start_writer(d);
  if (rc == 0) /* after the recovery: regions of what ended while gpumd was down go now */
    rc = gpumd_fences_start(d);
  if (rc == 0)
    rc = gpumd_suspend_start(d);
  return rc;
}

void gpumd_engine_stop(gpumd_t *d) {
  gpumd_suspend_stop(d);
  gpumd_fences_stop(d);
  gpumd_reports_free(d);
  gpumd_leases_free_all(d);
  if (d->tick_timer)
    event_free(d->tick_timer);
  if (d->grace_timer)
    event_free(d->grace_timer);
  if (d->prune_timer)
    event_free(d->prune_timer);
  if (d->ledger_ev)
    event_free(d->ledger_ev);
  d->tick_timer = d->grace_timer = d->prune_timer = d->ledger_ev = NULL;
  gpumd_sched_destroy(d->sched);
  d->sched = NULL;
  pids_free();
  free(d->ended);
  d->ended = NULL;
  d->ended_n = d->ended_head = 0;
  gpumd_ledger_close(d->ledger);
  d->ledger = NULL;
  gpumd_resv_doc_free(d);
}

int gpumd_engine_commit(gpumd_t *d) {
  if (!d->ledger)
    return 0;
  if (d->ledger_failed) {
    gpumd_ledger_rollback_turn(d->ledger);
    return gpum_error(GPUM_EIO, "a ledger write of this turn failed");
  }
  return gpumd_ledger_commit_async(d->ledger);
}
