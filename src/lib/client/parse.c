/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Turns the daemon's JSON (reservation objects, the status reply) into the client library's
 * public structs. Missing or mistyped fields give "" / 0, so that a newer daemon that adds
 * fields or an older one that lacks some never breaks a client.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>

#include "client/client_internal.h"
#include "client/protocol_internal.h"
#include "core/json_scan_internal.h"

/* States and lease kinds map to the protocol's names through its tables. */
const char *gpum_res_state_name(gpum_res_state_t st) {
  switch (st) {
#define STATE_NAME(n) \
  case GPUM_RES_##n:  \
    return GPUM_PROTO_STATE_##n;
    GPUM_PROTO_STATES(STATE_NAME)
#undef STATE_NAME
  default:
    return "UNKNOWN";
  }
}

bool gpum_res_state_is_final(gpum_res_state_t st) {
  return st == GPUM_RES_RELEASED || st == GPUM_RES_EXPIRED || st == GPUM_RES_CANCELLED ||
         st == GPUM_RES_FAILED;
}

gpum_res_state_t gpum__res_state_parse(const char *s) {
#define STATE_OF(n)                              \
  if (s && strcmp(s, GPUM_PROTO_STATE_##n) == 0) \
    return GPUM_RES_##n;
  GPUM_PROTO_STATES(STATE_OF)
#undef STATE_OF
  return GPUM_RES_UNKNOWN;
}

const char *gpum__lease_name(gpum_lease_t lease) {
  switch (lease) {
#define LEASE_NAME(n)  \
  case GPUM_LEASE_##n: \
    return GPUM_PROTO_LEASE_##n;
    GPUM_PROTO_LEASES(LEASE_NAME)
#undef LEASE_NAME
  default:
    return NULL;
  }
}

/* A lease name this library does not know reads as the default, connection. */
static gpum_lease_t lease_of(const char *s) {
#define LEASE_OF(n)                              \
  if (s && strcmp(s, GPUM_PROTO_LEASE_##n) == 0) \
    return GPUM_LEASE_##n;
  GPUM_PROTO_LEASES(LEASE_OF)
#undef LEASE_OF
  return GPUM_LEASE_CONNECTION;
}

static void str(const json_t *o, const char *key, char *buf, size_t len) {
  const char *s = json_string_value(json_object_get(o, key));
  snprintf(buf, len, "%s", s ? s : "");
}

static uint64_t u64(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  if (json_is_integer(v))
    return json_integer_value(v) < 0 ? 0 : (uint64_t)json_integer_value(v);
  if (json_is_real(v))
    return json_real_value(v) < 0 ? 0 : (uint64_t)json_real_value(v);
  return 0;
}

static int64_t i64(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

static void device_ref(const json_t *d, gpum_res_device_t *out) {
  memset(out, 0, sizeof *out);
  if (json_is_string(d)) {
    snprintf(out->uuid, sizeof out->uuid, "%s", json_string_value(d));
    return;
  }
  out->index = (unsigned)u64(d, GPUM_PROTO_F_INDEX);
  str(d, GPUM_PROTO_F_UUID, out->uuid, sizeof out->uuid);
  out->memory_total = u64(d, GPUM_PROTO_F_MEMORY_TOTAL);
  str(d, GPUM_PROTO_F_VENDOR, out->vendor, sizeof out->vendor);
  out->vendor_index = (unsigned)u64(d, GPUM_PROTO_F_VENDOR_INDEX);
}

void gpum__res_parse(const json_t *o, gpum_reservation_t *r) {
  memset(r, 0, sizeof *r);
  str(o, GPUM_PROTO_F_ID, r->id, sizeof r->id);
  str(o, GPUM_PROTO_F_TOKEN, r->token, sizeof r->token);
  r->state = gpum__res_state_parse(json_string_value(json_object_get(o, GPUM_PROTO_F_STATE)));
  str(o, GPUM_PROTO_F_REASON, r->reason, sizeof r->reason);
  r->uid = (uint32_t)u64(o, GPUM_PROTO_F_UID);
  r->pid = (int32_t)i64(o, GPUM_PROTO_F_PID);
  str(o, GPUM_PROTO_F_LABEL, r->label, sizeof r->label);
  const json_t *sl = json_object_get(o, GPUM_PROTO_F_SLURM);
  str(sl, GPUM_PROTO_F_JOB_ID, r->slurm_job_id, sizeof r->slurm_job_id);
  str(sl, GPUM_PROTO_F_STEP_ID, r->slurm_step_id, sizeof r->slurm_step_id);
  r->bytes_per_gpu = u64(o, GPUM_PROTO_F_BYTES_PER_GPU);
  r->gpus = (unsigned)u64(o, GPUM_PROTO_F_GPUS);
  r->priority = (int)i64(o, GPUM_PROTO_F_PRIORITY);
  r->lease = lease_of(json_string_value(json_object_get(o, GPUM_PROTO_F_LEASE)));
  r->ttl_ms = u64(o, GPUM_PROTO_F_TTL_MS);
  r->expires_ns = u64(o, GPUM_PROTO_F_EXPIRES_NS);
  const json_t *devs = json_object_get(o, GPUM_PROTO_F_DEVICES);
  size_t i;
  const json_t *d;
  for (i = 0; i < json_array_size(devs) && (d = json_array_get(devs, i)); i++) {
    if (r->ndevices == GPUM_CLIENT_MAX_DEVICES)
      break;
    device_ref(d, &r->devices[r->ndevices++]);
  }
  const json_t *qp = json_object_get(o, GPUM_PROTO_F_QUEUE_POSITION);
  r->queue_position =
      r->state == GPUM_RES_QUEUED && json_is_integer(qp) ? (long)json_integer_value(qp) : -1;
  str(o, GPUM_PROTO_F_WAITING_FOR, r->waiting_for, sizeof r->waiting_for);
  r->created_ns = u64(o, GPUM_PROTO_F_CREATED_NS);
  r->granted_ns = u64(o, GPUM_PROTO_F_GRANTED_NS);
  r->ended_ns = u64(o, GPUM_PROTO_F_ENDED_NS);
  r->preemptible = json_is_true(json_object_get(o, GPUM_PROTO_F_PREEMPTIBLE));
  r->hold = json_is_true(json_object_get(o, GPUM_PROTO_F_HOLD));
  r->suspended_ns = u64(o, GPUM_PROTO_F_SUSPENDED_NS);
  r->host_bytes = u64(o, GPUM_PROTO_F_HOST_BYTES);
  str(o, GPUM_PROTO_F_MOVING, r->moving, sizeof r->moving);
  const json_t *f = json_object_get(o, GPUM_PROTO_F_FENCED);
  r->fenced = json_is_object(f);
  if (r->fenced) {
    r->fenced_used = u64(f, GPUM_PROTO_F_USED);
    r->fenced_limit = u64(f, GPUM_PROTO_F_LIMIT);
  }
}

static int device_parse(const json_t *o, gpum_client_device_status_t *d) {
  d->index = (unsigned)u64(o, GPUM_PROTO_F_INDEX);
  str(o, GPUM_PROTO_F_UUID, d->uuid, sizeof d->uuid);
  str(o, GPUM_PROTO_F_NAME, d->name, sizeof d->name);
  str(o, GPUM_PROTO_F_STATE, d->state, sizeof d->state);
  str(o, GPUM_PROTO_F_REASON, d->reason, sizeof d->reason);
  const json_t *mem = json_object_get(o, GPUM_PROTO_F_MEMORY);
  d->total = u64(mem, GPUM_PROTO_F_TOTAL);
  d->used = u64(mem, GPUM_PROTO_F_USED);
  d->free = u64(mem, GPUM_PROTO_F_FREE);
  d->committed = u64(o, GPUM_PROTO_F_COMMITTED);
  d->reserved = u64(o, GPUM_PROTO_F_RESERVED);
  d->unmanaged = u64(o, GPUM_PROTO_F_UNMANAGED);
  d->jobs = (unsigned)u64(o, GPUM_PROTO_F_JOBS);
  const json_t *ids = json_object_get(o, GPUM_PROTO_F_RESERVATIONS);
  size_t n = json_array_size(ids);
  if (n == 0)
    return 0;
  d->reservations = calloc(n, sizeof *d->reservations);
  if (d->reservations == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory reading the status");
  size_t i;
  const json_t *id;
  for (i = 0; i < json_array_size(ids) && (id = json_array_get(ids, i)); i++) {
    const char *s = json_is_string(id) ? json_string_value(id)
                                       : json_string_value(json_object_get(id, GPUM_PROTO_F_ID));
    snprintf(d->reservations[d->nreservations++], sizeof d->reservations[0], "%s", s ? s : "");
  }
  return 0;
}

int gpum__status_parse(const json_t *reply, gpum_client_status_t *out) {
  memset(out, 0, sizeof *out);
  const json_t *devs = json_object_get(reply, GPUM_PROTO_F_DEVICES);
  const json_t *queue = json_object_get(reply, GPUM_PROTO_F_QUEUE);
  size_t nd = json_array_size(devs), nq = json_array_size(queue);
  out->devices = nd ? calloc(nd, sizeof *out->devices) : NULL;
  out->queue = nq ? calloc(nq, sizeof *out->queue) : NULL;
  if ((nd && out->devices == NULL) || (nq && out->queue == NULL)) {
    gpum_client_status_free(out);
    return gpum_error(GPUM_ENOMEM, "out of memory reading the status");
  }
  size_t i;
  const json_t *v;
  for (i = 0; i < json_array_size(devs) && (v = json_array_get(devs, i)); i++) {
    int rc = device_parse(v, &out->devices[out->ndevices++]);
    if (rc != 0) {
      gpum_client_status_free(out);
      return rc;
    }
  }
  for (i = 0; i < json_array_size(queue) && (v = json_array_get(queue, i)); i++)
    gpum__res_parse(v, &out->queue[out->nqueue++]);
  return 0;
}

void gpum_client_status_free(gpum_client_status_t *st) {
  if (st == NULL)
    return;
  for (size_t i = 0; i < st->ndevices; i++)
    free(st->devices[i].reservations);
  free(st->devices);
  free(st->queue);
  memset(st, 0, sizeof *st);
}

/* ---- the same from a scanner (core/json_scan_internal.h), for list pages ------------------- */

#define IS_KEY(k, n, lit) ((n) == sizeof(lit) - 1 && memcmp((k), (lit), sizeof(lit) - 1) == 0)

/* A string field as str() reads it: truncated to len, "" when it is not a string. */
static void scan_str(gpum__jscan_t *s, char *buf, size_t len) {
  const char *v;
  size_t n;
  buf[0] = '\0';
  if (!gpum__jscan_string(s, &v, &n))
    return;
  n = n < len - 1 ? n : len - 1;
  memcpy(buf, v, n);
  buf[n] = '\0';
}

/* A number field as u64() reads it: a negative one is 0, anything but a number 0. */
static uint64_t scan_u(gpum__jscan_t *s) {
  bool is_int = false;
  long long i;
  double d;
  if (!gpum__jscan_number(s, &is_int, &i, &d))
    return 0;
  if (is_int)
    return i < 0 ? 0 : (uint64_t)i;
  return d < 0 ? 0 : (uint64_t)d;
}

/* A number field as i64() reads it: integers only. */
static int64_t scan_i64(gpum__jscan_t *s) {
  bool is_int = false;
  long long i = 0;
  double d;
  return gpum__jscan_number(s, &is_int, &i, &d) && is_int ? (int64_t)i : 0;
}

/* A name (state, lease) into buf; "" when it is not a string or does not fit. */
static void scan_name(gpum__jscan_t *s, char *buf, size_t len) {
  const char *v;
  size_t n;
  buf[0] = '\0';
  if (gpum__jscan_string(s, &v, &n) && n < len) {
    memcpy(buf, v, n);
    buf[n] = '\0';
  }
}

/* A literal true; anything else (skipped) reads as false. */
static bool scan_true(gpum__jscan_t *s) {
  int v = 0;
  return gpum__jscan_literal(s, &v) && v == 1;
}

/* Enters the object ('{') or array ('[') that comes next; anything else is skipped (false). */
static bool enter(gpum__jscan_t *s, char open) {
  if (gpum__jscan_peek(s) != open) {
    gpum__jscan_skip(s);
    return false;
  }
  return open == '{' ? gpum__jscan_begin_object(s) : gpum__jscan_begin_array(s);
}

static void scan_device(gpum__jscan_t *s, gpum_res_device_t *out) {
  const char *k;
  size_t n;
  memset(out, 0, sizeof *out);
  char ch = gpum__jscan_peek(s);
  if (ch == '"') {
    scan_str(s, out->uuid, sizeof out->uuid);
    return;
  }
  if (!enter(s, '{'))
    return;
  while (gpum__jscan_key(s, &k, &n)) {
    if (IS_KEY(k, n, GPUM_PROTO_F_INDEX))
      out->index = (unsigned)scan_u(s);
    else if (IS_KEY(k, n, GPUM_PROTO_F_UUID))
      scan_str(s, out->uuid, sizeof out->uuid);
    else if (IS_KEY(k, n, GPUM_PROTO_F_MEMORY_TOTAL))
      out->memory_total = scan_u(s);
    else if (IS_KEY(k, n, GPUM_PROTO_F_VENDOR))
      scan_str(s, out->vendor, sizeof out->vendor);
    else if (IS_KEY(k, n, GPUM_PROTO_F_VENDOR_INDEX))
      out->vendor_index = (unsigned)scan_u(s);
    else
      gpum__jscan_skip(s);
  }
}

static void scan_devices(gpum__jscan_t *s, gpum_reservation_t *r) {
  if (!enter(s, '['))
    return;
  while (gpum__jscan_next(s)) {
    if (r->ndevices == GPUM_CLIENT_MAX_DEVICES)
      gpum__jscan_skip(s);
    else
      scan_device(s, &r->devices[r->ndevices++]);
  }
}

/* The Slurm ids; anything but an object reads as none. */
static void scan_slurm(gpum__jscan_t *s, gpum_reservation_t *r) {
  const char *k;
  size_t n;
  if (!enter(s, '{'))
    return;
  while (gpum__jscan_key(s, &k, &n)) {
    if (IS_KEY(k, n, GPUM_PROTO_F_JOB_ID))
      scan_str(s, r->slurm_job_id, sizeof r->slurm_job_id);
    else if (IS_KEY(k, n, GPUM_PROTO_F_STEP_ID))
      scan_str(s, r->slurm_step_id, sizeof r->slurm_step_id);
    else
      gpum__jscan_skip(s);
  }
}

/* The fence's figures; anything but an object: not fenced. */
static void scan_fenced(gpum__jscan_t *s, gpum_reservation_t *r) {
  const char *k;
  size_t n;
  if (!enter(s, '{'))
    return;
  r->fenced = true;
  while (gpum__jscan_key(s, &k, &n)) {
    if (IS_KEY(k, n, GPUM_PROTO_F_USED))
      r->fenced_used = scan_u(s);
    else if (IS_KEY(k, n, GPUM_PROTO_F_LIMIT))
      r->fenced_limit = scan_u(s);
    else
      gpum__jscan_skip(s);
  }
}

/* One field of a reservation; false when key is not one it reads. */
static bool scan_field(gpum__jscan_t *s, const char *k, size_t n, gpum_reservation_t *r) {
#define STR_FIELD(lit, field)               \
  if (IS_KEY(k, n, lit)) {                  \
    scan_str(s, r->field, sizeof r->field); \
    return true;                            \
  }
#define U64_FIELD(lit, field, type) \
  if (IS_KEY(k, n, lit)) {          \
    r->field = (type)scan_u(s);     \
    return true;                    \
  }
  STR_FIELD(GPUM_PROTO_F_ID, id)
  STR_FIELD(GPUM_PROTO_F_TOKEN, token)
  STR_FIELD(GPUM_PROTO_F_REASON, reason)
  STR_FIELD(GPUM_PROTO_F_LABEL, label)
  STR_FIELD(GPUM_PROTO_F_WAITING_FOR, waiting_for)
  STR_FIELD(GPUM_PROTO_F_MOVING, moving)
  U64_FIELD(GPUM_PROTO_F_UID, uid, uint32_t)
  U64_FIELD(GPUM_PROTO_F_BYTES_PER_GPU, bytes_per_gpu, uint64_t)
  U64_FIELD(GPUM_PROTO_F_GPUS, gpus, unsigned)
  U64_FIELD(GPUM_PROTO_F_TTL_MS, ttl_ms, uint64_t)
  U64_FIELD(GPUM_PROTO_F_EXPIRES_NS, expires_ns, uint64_t)
  U64_FIELD(GPUM_PROTO_F_CREATED_NS, created_ns, uint64_t)
  U64_FIELD(GPUM_PROTO_F_GRANTED_NS, granted_ns, uint64_t)
  U64_FIELD(GPUM_PROTO_F_ENDED_NS, ended_ns, uint64_t)
  U64_FIELD(GPUM_PROTO_F_SUSPENDED_NS, suspended_ns, uint64_t)
  U64_FIELD(GPUM_PROTO_F_HOST_BYTES, host_bytes, uint64_t)
#undef STR_FIELD
#undef U64_FIELD
  if (IS_KEY(k, n, GPUM_PROTO_F_PID))
    r->pid = (int32_t)scan_i64(s);
  else if (IS_KEY(k, n, GPUM_PROTO_F_PRIORITY))
    r->priority = (int)scan_i64(s);
  else if (IS_KEY(k, n, GPUM_PROTO_F_SLURM))
    scan_slurm(s, r);
  else if (IS_KEY(k, n, GPUM_PROTO_F_DEVICES))
    scan_devices(s, r);
  else if (IS_KEY(k, n, GPUM_PROTO_F_FENCED))
    scan_fenced(s, r);
  else if (IS_KEY(k, n, GPUM_PROTO_F_PREEMPTIBLE))
    r->preemptible = scan_true(s);
  else if (IS_KEY(k, n, GPUM_PROTO_F_HOLD))
    r->hold = scan_true(s);
  else
    return false;
  return true;
}

void gpum__res_scan(gpum__jscan_t *s, gpum_reservation_t *r) {
  const char *k;
  size_t n;
  char state[32] = "", lease[32] = "";
  bool have_qp = false;
  long long qp = -1;
  memset(r, 0, sizeof *r);
  if (!enter(s, '{')) {
    s->fail = true; /* a list item that is not an object: jansson's reading decides */
    return;
  }
  while (gpum__jscan_key(s, &k, &n)) {
    if (IS_KEY(k, n, GPUM_PROTO_F_STATE)) {
      scan_name(s, state, sizeof state);
    } else if (IS_KEY(k, n, GPUM_PROTO_F_LEASE)) {
      scan_name(s, lease, sizeof lease);
    } else if (IS_KEY(k, n, GPUM_PROTO_F_QUEUE_POSITION)) {
      bool is_int = false;
      double d;
      have_qp = gpum__jscan_number(s, &is_int, &qp, &d) && is_int;
    } else if (!scan_field(s, k, n, r)) {
      gpum__jscan_skip(s);
    }
  }
  /* As gpum__res_parse reads them: the names through the protocol's tables, the queue position
   * only while QUEUED (the fields come in any order). */
  r->state = gpum__res_state_parse(state[0] ? state : NULL);
  r->lease = lease_of(lease[0] ? lease : NULL);
  r->queue_position = r->state == GPUM_RES_QUEUED && have_qp ? (long)qp : -1;
}
