/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The requests of the op cores (ops.c, admin.c) as structs, and the socket face's decoders:
 * each reads a protocol request (a JSON object whose field names come from the protocol's
 * table, GPUM_PROTO_F_*) straight into the struct its core takes, with the checks and the
 * messages of docs/protocol.md, in the order the protocol reports them. The REST face decodes
 * its own bodies (docs/rest.md: its names and units) into the same structs (http_api.c), so a
 * request is decoded once, by the face that received it, and never re-encoded.
 *
 * Strings in a decoded struct point into the request's JSON (or into the struct): the struct
 * lives no longer than the request. Loop thread only, like the ops.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <gpum/error.h>
#include <gpum/size.h>

#include "gpumd.h"
#include "json_in.h"
#include "ops.h"

#define MAX_TTL_MS (30ull * 24 * 3600 * 1000)

/* ---- fields ------------------------------------------------------------------------------ */

/* A field's value as the decoders read it, from a JSON object's member or from a flat line's
 * (gpumd_json_parse_flat: scalars only), so that a request is decoded by the same code either
 * way. Absent: type JSON_NULL with present false. */
typedef struct {
  bool present;
  json_type type;
  json_int_t integer;
  const char *string; /* JSON_STRING: NUL-terminated */
  json_t *json;       /* the member itself when it comes from a JSON object, else NULL */
} field_t;

static field_t field_json(json_t *v) {
  field_t f = {.present = v != NULL, .type = v ? json_typeof(v) : JSON_NULL, .json = v};
  if (json_is_integer(v))
    f.integer = json_integer_value(v);
  else if (json_is_string(v))
    f.string = json_string_value(v);
  return f;
}

static field_t field_flat(const gpumd_flat_field_t *m) {
  field_t f = {.present = m != NULL, .type = m ? m->type : JSON_NULL};
  if (m) {
    f.integer = m->integer;
    f.string = m->string;
  }
  return f;
}

/* A field's value v read as what key takes; the get_* forms look key up in a JSON object. */

/* A size field: a non-negative integer (bytes) or a string such as "8GiB". */
static int size_of(const field_t *v, const char *key, uint64_t *out, bool *present) {
  *present = v->present;
  if (!v->present)
    return 0;
  if (v->type == JSON_INTEGER && v->integer >= 0) {
    *out = (uint64_t)v->integer;
    return 0;
  }
  if (v->type == JSON_STRING && gpum_size_parse(v->string, out) == 0)
    return 0;
  return gpum_error(GPUM_EINVAL, "\"%s\" must be a size in bytes or a string such as \"8GiB\"",
                    key);
}

static int get_size(json_t *req, const char *key, uint64_t *out, bool *present) {
  field_t v = field_json(json_object_get(req, key));
  return size_of(&v, key, out, present);
}

static int int_of(const field_t *v, const char *key, long long lo, long long hi, long long *out,
                  bool *present) {
  *present = v->present;
  if (!v->present)
    return 0;
  if (v->type != JSON_INTEGER || v->integer < lo || v->integer > hi)
    return gpum_error(GPUM_EINVAL, "\"%s\" must be an integer from %lld to %lld", key, lo, hi);
  *out = v->integer;
  return 0;
}

static int get_int(json_t *req, const char *key, long long lo, long long hi, long long *out,
                   bool *present) {
  field_t v = field_json(json_object_get(req, key));
  return int_of(&v, key, lo, hi, out, present);
}

static int str_of(const field_t *v, const char *key, const char **out) {
  if (!v->present)
    return 0;
  if (v->type != JSON_STRING)
    return gpum_error(GPUM_EINVAL, "\"%s\" must be a string", key);
  *out = v->string;
  return 0;
}

static int get_str(json_t *req, const char *key, const char **out) {
  field_t v = field_json(json_object_get(req, key));
  return str_of(&v, key, out);
}

/* ---- what both faces share -------------------------------------------------------------- */

int gpumd_on_timeout_decode(const char *s, gpumd_on_timeout_t *out) {
  if (gpumd_on_timeout_parse(s, out) != 0)
    return gpum_error(GPUM_EINVAL, "\"on_timeout\": '%.32s' is not reject or wait", s);
  return 0;
}

void gpumd_reserve_req_init(gpumd_reserve_req_t *req) {
  memset(req, 0, sizeof *req);
  gpumd_sched_request_init(&req->q);
}

/* ---- reserve (and check, its dry run) ---------------------------------------------------- */

/* The reserve request's optional "slurm" object {"job_id", "step_id"}: both strings, no other
 * key; the ids themselves are checked with the rest of the request (gpumd_slurm_ids_check). */
static int parse_slurm(const field_t *f, gpumd_sched_request_t *q) {
  static const char *const fields[] = {GPUM_PROTO_F_JOB_ID, GPUM_PROTO_F_STEP_ID, NULL};
  json_t *o = f->json; /* an object comes from a JSON tree only */
  if (!f->present || f->type == JSON_NULL)
    return 0;
  if (f->type != JSON_OBJECT)
    return gpum_error(GPUM_EINVAL, "\"slurm\" must be an object {\"job_id\": \"12345\", "
                                   "\"step_id\": \"0\"}");
  for (size_t i = 0; i < 2; i++) {
    json_t *v = json_object_get(o, fields[i]);
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
      return gpum_error(GPUM_EINVAL, "\"slurm\".\"%s\" is required and must be a string",
                        fields[i]);
  }
  if (gpumd_check_fields(o, fields) != 0) {
    char why[160];
    snprintf(why, sizeof why, "%s", gpum_last_error());
    return gpum_error(GPUM_EINVAL, "\"slurm\": %s (it takes job_id and step_id)", why);
  }
  q->slurm_job = json_string_value(json_object_get(o, fields[0]));
  q->slurm_step = json_string_value(json_object_get(o, fields[1]));
  return 0;
}

static int pid_owned_by(pid_t pid, uid_t uid) {
  char path[64];
  struct stat st;
  snprintf(path, sizeof path, "/proc/%ld", (long)pid);
  if (stat(path, &st) != 0)
    return gpum_error(GPUM_ENOENT, "\"pid\": process %ld does not exist", (long)pid);
  if (st.st_uid != uid)
    return gpum_error(GPUM_EPERM, "\"pid\": process %ld belongs to another user", (long)pid);
  return 0;
}

/* The reserve request's fields, in the order of their names below (gpumd_gather_fields). */
enum {
  R_ID,
  R_OP,
  R_BYTES_PER_GPU,
  R_GPUS,
  R_MODEL,
  R_MIN_MEMORY,
  R_DEVICES,
  R_PRIORITY,
  R_TIMEOUT_MS,
  R_ON_TIMEOUT,
  R_LABEL,
  R_SLURM,
  R_LEASE,
  R_PID,
  R_TTL_MS,
  R_WAIT,
  R_PREEMPTIBLE,
  R_NFIELDS
};

static const char *const reserve_fields[R_NFIELDS + 1] = {
    [R_ID] = GPUM_PROTO_F_ID,
    [R_OP] = GPUM_PROTO_F_OP,
    [R_BYTES_PER_GPU] = GPUM_PROTO_F_BYTES_PER_GPU,
    [R_GPUS] = GPUM_PROTO_F_GPUS,
    [R_MODEL] = GPUM_PROTO_F_MODEL,
    [R_MIN_MEMORY] = GPUM_PROTO_F_MIN_MEMORY,
    [R_DEVICES] = GPUM_PROTO_F_DEVICES,
    [R_PRIORITY] = GPUM_PROTO_F_PRIORITY,
    [R_TIMEOUT_MS] = GPUM_PROTO_F_TIMEOUT_MS,
    [R_ON_TIMEOUT] = GPUM_PROTO_F_ON_TIMEOUT,
    [R_LABEL] = GPUM_PROTO_F_LABEL,
    [R_SLURM] = GPUM_PROTO_F_SLURM,
    [R_LEASE] = GPUM_PROTO_F_LEASE,
    [R_PID] = GPUM_PROTO_F_PID,
    [R_TTL_MS] = GPUM_PROTO_F_TTL_MS,
    [R_WAIT] = GPUM_PROTO_F_WAIT,
    [R_PREEMPTIBLE] = GPUM_PROTO_F_PREEMPTIBLE,
    [R_NFIELDS] = NULL};

/* The lease part of a reserve request: "lease", "pid", "ttl_ms" (f: the request's fields). */
static int parse_lease(const gpumd_actor_t *a, const field_t *f, gpumd_sched_request_t *req) {
  const char *s = NULL;
  bool has;
  long long v = 0;
  int rc = str_of(&f[R_LEASE], GPUM_PROTO_F_LEASE, &s);
  if (rc != 0)
    return rc;
  if (s && gpumd_lease_kind_parse(s, &req->lease) != 0)
    return gpum_error(GPUM_EINVAL, "\"lease\": '%.32s' is not connection, pid or ttl", s);
  if ((rc = int_of(&f[R_PID], GPUM_PROTO_F_PID, 1, 0x7fffffff, &v, &has)) != 0)
    return rc;
  if (has && req->lease != GPUMD_LEASE_PID)
    return gpum_error(GPUM_EINVAL, "\"pid\" is only for \"lease\": \"pid\"");
  req->lease_pid = has ? (int32_t)v : 0; /* 0: the actor's (gpumd_op_reserve) */
  if (req->lease == GPUMD_LEASE_PID && has && !a->admin &&
      (rc = pid_owned_by((pid_t)v, a->uid)) != 0)
    return rc;
  if ((rc = int_of(&f[R_TTL_MS], GPUM_PROTO_F_TTL_MS, 1, (long long)MAX_TTL_MS, &v, &has)) != 0)
    return rc;
  if (has != (req->lease == GPUMD_LEASE_TTL))
    return gpum_error(GPUM_EINVAL, has ? "\"ttl_ms\" is only for \"lease\": \"ttl\""
                                       : "\"lease\": \"ttl\" needs \"ttl_ms\"");
  req->ttl_ms = has ? (uint64_t)v : 0;
  return 0;
}

/* The reserve request's "devices": 1 to GPUMD_SCHED_MAX_DEVICES strings (indices or UUIDs). */
static int parse_devices(const field_t *f, gpumd_reserve_req_t *out) {
  json_t *dv = f->json; /* an array comes from a JSON tree only */
  if (!f->present)
    return 0;
  const size_t cap = GPUMD_SCHED_MAX_DEVICES;
  if (f->type != JSON_ARRAY || json_array_size(dv) > cap || json_array_size(dv) == 0)
    return gpum_error(GPUM_EINVAL,
                      "\"devices\" must be a list of 1 to %zu device indices "
                      "or UUIDs (strings)",
                      cap);
  for (size_t i = 0; i < json_array_size(dv); i++) {
    json_t *e = json_array_get(dv, i);
    if (!json_is_string(e))
      return gpum_error(GPUM_EINVAL,
                        "\"devices\"[%zu] must be a string such as \"0\" or a "
                        "UUID",
                        i);
    out->devices[i] = json_string_value(e);
  }
  out->q.devices = out->devices;
  out->q.device_count = json_array_size(dv);
  return 0;
}

/* A reserve request's fields (f, indexed by R_*) into out. */
static int reserve_fields_decode(const gpumd_actor_t *a, const field_t *f,
                                 gpumd_reserve_req_t *out) {
  gpumd_reserve_req_init(out);
  gpumd_sched_request_t *req = &out->q;
  bool has;
  long long v = 0;
  uint64_t u;
  int rc;
  if ((rc = size_of(&f[R_BYTES_PER_GPU], GPUM_PROTO_F_BYTES_PER_GPU, &req->bytes_per_gpu, &has)) !=
      0)
    return rc;
  if (!has || req->bytes_per_gpu == 0)
    return gpum_error(GPUM_EINVAL, "\"bytes_per_gpu\" is required and must be above 0");
  if ((rc = int_of(&f[R_GPUS], GPUM_PROTO_F_GPUS, 1, GPUMD_SCHED_MAX_DEVICES, &v, &has)) != 0)
    return rc;
  if (has)
    req->gpus = (unsigned)v;
  if ((rc = str_of(&f[R_MODEL], GPUM_PROTO_F_MODEL, &req->model)) != 0)
    return rc;
  if ((rc = size_of(&f[R_MIN_MEMORY], GPUM_PROTO_F_MIN_MEMORY, &u, &has)) != 0)
    return rc;
  req->min_memory = has ? u : 0;
  if ((rc = parse_devices(&f[R_DEVICES], out)) != 0)
    return rc;
  if ((rc = int_of(&f[R_PRIORITY], GPUM_PROTO_F_PRIORITY, -100, 100, &v, &has)) != 0)
    return rc;
  req->priority = has ? (int)v : 0;
  if ((rc = int_of(&f[R_TIMEOUT_MS], GPUM_PROTO_F_TIMEOUT_MS, 0, (long long)MAX_TTL_MS, &v,
                   &has)) != 0)
    return rc;
  out->timeout_set = has;
  req->timeout_ms = has ? (uint64_t)v : 0;
  const char *s = NULL;
  if ((rc = str_of(&f[R_ON_TIMEOUT], GPUM_PROTO_F_ON_TIMEOUT, &s)) != 0)
    return rc;
  if (s && (rc = gpumd_on_timeout_decode(s, &req->on_timeout)) != 0)
    return rc;
  if ((rc = str_of(&f[R_LABEL], GPUM_PROTO_F_LABEL, &req->label)) != 0 ||
      (rc = parse_slurm(&f[R_SLURM], req)) != 0)
    return rc;
  const field_t *w = &f[R_WAIT];
  if (w->present && w->type != JSON_TRUE && w->type != JSON_FALSE)
    return gpum_error(GPUM_EINVAL, "\"wait\" must be true or false");
  req->no_wait = w->present && w->type == JSON_FALSE; /* grant now or EBUSY, never queue */
  const field_t *pe = &f[R_PREEMPTIBLE];
  if (pe->present && pe->type != JSON_TRUE && pe->type != JSON_FALSE)
    return gpum_error(GPUM_EINVAL, "\"preemptible\" must be true or false");
  req->preemptible = pe->present && pe->type == JSON_TRUE;
  return parse_lease(a, f, req);
}

int gpumd_reserve_decode(const gpumd_actor_t *a, json_t *j, gpumd_reserve_req_t *out) {
  json_t *v[R_NFIELDS]; /* read in one pass: no lookup per field */
  int rc = gpumd_gather_fields(j, reserve_fields, v);
  if (rc != 0)
    return rc;
  field_t f[R_NFIELDS];
  for (size_t i = 0; i < R_NFIELDS; i++)
    f[i] = field_json(v[i]);
  return reserve_fields_decode(a, f, out);
}

int gpumd_reserve_decode_flat(const gpumd_actor_t *a, const gpumd_flat_t *line,
                              gpumd_reserve_req_t *out) {
  int at[R_NFIELDS];
  int rc = gpumd_flat_gather(line, reserve_fields, at);
  if (rc != 0)
    return rc;
  field_t f[R_NFIELDS];
  for (size_t i = 0; i < R_NFIELDS; i++)
    f[i] = field_flat(at[i] < 0 ? NULL : &line->field[at[i]]);
  return reserve_fields_decode(a, f, out);
}

/* ---- the reservation a request names; errors reported after its lookup ------------------ */

int gpumd_resv_ref_decode(const char *s, gpumd_resv_ref_t *out) {
  out->id = 0;
  out->text = s;
  if (!s)
    return gpum_error(GPUM_EINVAL, "\"reservation\" must be a reservation id such as \"r-1\"");
  if (gpumd_resv_id_parse(s, &out->id) != 0)
    return gpum_error(GPUM_EINVAL, "\"reservation\": '%.64s' is not an id such as \"r-1\"", s);
  return 0;
}

/* A request's "reservation" v (a string "r-<n>"). */
static int ref_of(const field_t *v, gpumd_resv_ref_t *out) {
  const char *s = NULL;
  if (str_of(v, GPUM_PROTO_F_RESERVATION, &s) != 0)
    s = NULL; /* not a string: the same message as none */
  return gpumd_resv_ref_decode(s, out);
}

/* The request's "reservation", looked up. */
static int get_ref(json_t *j, gpumd_resv_ref_t *out) {
  field_t v = field_json(json_object_get(j, GPUM_PROTO_F_RESERVATION));
  return ref_of(&v, out);
}

/* Keeps the error rc just raised (its detail) for the core to report later, unless an earlier
 * one is kept already; returns 0. */
static int keep_late(gpumd_req_error_t *late, int rc) {
  if (late->rc == 0) {
    late->rc = rc;
    snprintf(late->message, sizeof late->message, "%s", gpum_last_error());
  }
  return 0;
}

int gpumd_req_error_raise(const gpumd_req_error_t *late) {
  return late->rc ? gpum_error(late->rc, "%s", late->message) : 0;
}

/* ---- release, renew, resize, attach, report ----------------------------------------------- */

static const char *const release_fields[] = {GPUM_PROTO_F_ID, GPUM_PROTO_F_OP,
                                             GPUM_PROTO_F_RESERVATION, NULL};

int gpumd_release_decode(json_t *j, gpumd_release_req_t *out) {
  json_t *v[3];
  memset(out, 0, sizeof *out);
  int rc = gpumd_gather_fields(j, release_fields, v);
  field_t ref = field_json(rc == 0 ? v[2] : NULL);
  return rc != 0 ? rc : ref_of(&ref, &out->resv);
}

int gpumd_release_decode_flat(const gpumd_flat_t *line, gpumd_release_req_t *out) {
  int at[3];
  memset(out, 0, sizeof *out);
  int rc = gpumd_flat_gather(line, release_fields, at);
  field_t ref = field_flat(rc == 0 && at[2] >= 0 ? &line->field[at[2]] : NULL);
  return rc != 0 ? rc : ref_of(&ref, &out->resv);
}

int gpumd_renew_decode(json_t *j, gpumd_renew_req_t *out) {
  static const char *const fields[] = {GPUM_PROTO_F_ID, GPUM_PROTO_F_OP, GPUM_PROTO_F_RESERVATION,
                                       GPUM_PROTO_F_TTL_MS, NULL};
  memset(out, 0, sizeof *out);
  long long ttl = 0;
  int rc = gpumd_check_fields(j, fields);
  if (rc == 0)
    rc = get_ref(j, &out->resv);
  if (rc != 0)
    return rc;
  if ((rc = get_int(j, GPUM_PROTO_F_TTL_MS, 1, (long long)MAX_TTL_MS, &ttl, &out->ttl_set)) != 0)
    return keep_late(&out->late, rc);
  out->ttl_ms = out->ttl_set ? (uint64_t)ttl : 0;
  return 0;
}

int gpumd_resize_decode(json_t *j, gpumd_resize_req_t *out) {
  static const char *const fields[] = {GPUM_PROTO_F_ID, GPUM_PROTO_F_OP, GPUM_PROTO_F_RESERVATION,
                                       GPUM_PROTO_F_BYTES_PER_GPU, NULL};
  memset(out, 0, sizeof *out);
  bool has = false;
  int rc = gpumd_check_fields(j, fields);
  if (rc == 0)
    rc = get_ref(j, &out->resv);
  if (rc != 0)
    return rc;
  if ((rc = get_size(j, GPUM_PROTO_F_BYTES_PER_GPU, &out->bytes_per_gpu, &has)) != 0)
    return keep_late(&out->late, rc);
  if (!has || out->bytes_per_gpu == 0)
    return keep_late(&out->late,
                     gpum_error(GPUM_EINVAL, "\"bytes_per_gpu\" is required and must be above 0"));
  return 0;
}

int gpumd_attach_decode(json_t *j, gpumd_attach_req_t *out) {
  static const char *const fields[] = {GPUM_PROTO_F_ID, GPUM_PROTO_F_OP, GPUM_PROTO_F_RESERVATION,
                                       GPUM_PROTO_F_TOKEN, NULL};
  memset(out, 0, sizeof *out);
  int rc = gpumd_check_fields(j, fields);
  if (rc == 0)
    rc = get_str(j, GPUM_PROTO_F_TOKEN, &out->token);
  if (rc == 0 && !out->token)
    rc = gpum_error(GPUM_EINVAL, "\"token\" is required");
  return rc != 0 ? rc : get_ref(j, &out->resv);
}

int gpumd_report_decode(json_t *j, gpumd_report_req_t *out) {
  static const char *const fields[] = {GPUM_PROTO_F_ID,          GPUM_PROTO_F_OP,
                                       GPUM_PROTO_F_RESERVATION, GPUM_PROTO_F_SOURCE,
                                       GPUM_PROTO_F_FIGURES,     NULL};
  memset(out, 0, sizeof *out);
  int rc = gpumd_check_fields(j, fields);
  if (rc == 0)
    rc = get_ref(j, &out->resv);
  if (rc != 0)
    return rc;
  if ((rc = get_str(j, GPUM_PROTO_F_SOURCE, &out->source)) != 0)
    return keep_late(&out->late, rc);
  if (!out->source)
    return keep_late(&out->late, gpum_error(GPUM_EINVAL, "a report needs \"source\", such as "
                                                         "\"batcher.infer\""));
  out->figures = json_object_get(j, GPUM_PROTO_F_FIGURES);
  return 0;
}

/* ---- status, list ------------------------------------------------------------------------- */

int gpumd_status_decode(json_t *j) {
  static const char *const fields[] = {GPUM_PROTO_F_ID, GPUM_PROTO_F_OP, NULL};
  return gpumd_check_fields(j, fields);
}

int gpumd_list_state_add(const char *s, gpumd_list_req_t *out) {
  gpumd_resv_state_t st;
  if (!s || gpumd_resv_state_parse(s, &st) != 0 ||
      (st != GPUMD_RESV_QUEUED && st != GPUMD_RESV_GRANTED && st != GPUMD_RESV_SUSPENDED))
    return gpum_error(GPUM_EINVAL,
                      "state '%.32s' is not one a live reservation has (QUEUED, GRANTED or "
                      "SUSPENDED)",
                      s ? s : "");
  out->states |= 1u << st;
  return 0;
}

int gpumd_list_label_set(const char *s, gpumd_list_req_t *out) {
  if (strlen(s) > GPUMD_RESV_LABEL_LEN) /* a label and its '*' */
    return gpum_error(GPUM_EINVAL, "label filter of %zu bytes is over the %d a label takes",
                      strlen(s), GPUMD_RESV_LABEL_LEN - 1);
  out->label = s;
  return 0;
}

/* A decimal number from 1 at *p (no sign, no leading zero) up to the first '.' or the end:
 * true with *v set and *p past it, or false. */
static bool cursor_number(const char **p, uint64_t *v) {
  const char *s = *p;
  *v = 0;
  if (*s < '1' || *s > '9')
    return false;
  for (; *s && *s != '.'; s++) {
    if (*s < '0' || *s > '9' || *v > (UINT64_MAX - 9) / 10)
      return false;
    *v = *v * 10 + (uint64_t)(*s - '0');
  }
  *p = s;
  return true;
}

/* "c1.ID" (everyone's list) or "c1.ID.TOTAL" (a filtered one: the total its first page
 * counted, carried so that no later page counts again). */
int gpumd_list_cursor_set(const char *s, gpumd_list_req_t *out) {
  const size_t np = sizeof GPUM_PROTO_CURSOR_PREFIX - 1;
  const char *p = s + np;
  uint64_t id = 0, total = 0;
  bool ok = strncmp(s, GPUM_PROTO_CURSOR_PREFIX, np) == 0 && cursor_number(&p, &id);
  bool with_total = ok && *p == '.';
  if (with_total) {
    p++;
    ok = cursor_number(&p, &total);
  }
  if (!ok || *p)
    return gpum_error(GPUM_EINVAL,
                      "cursor '%.40s' is not one gpumd gave: pass a page's next_cursor as it came",
                      s);
  out->after = id;
  out->total_set = with_total;
  out->total = (size_t)total;
  return 0;
}

int gpumd_list_decode(json_t *j, gpumd_list_req_t *out) {
  static const char *const fields[] = {GPUM_PROTO_F_ID,    GPUM_PROTO_F_OP,
                                       GPUM_PROTO_F_ALL,   GPUM_PROTO_F_ENDED,
                                       GPUM_PROTO_F_LIMIT, GPUM_PROTO_F_CURSOR,
                                       GPUM_PROTO_F_STATE, GPUM_PROTO_F_UID,
                                       GPUM_PROTO_F_LABEL, NULL};
  json_t *all = json_object_get(j, GPUM_PROTO_F_ALL);
  json_t *ended = json_object_get(j, GPUM_PROTO_F_ENDED);
  json_t *limit = json_object_get(j, GPUM_PROTO_F_LIMIT);
  json_t *cursor = json_object_get(j, GPUM_PROTO_F_CURSOR);
  json_t *state = json_object_get(j, GPUM_PROTO_F_STATE);
  json_t *uid = json_object_get(j, GPUM_PROTO_F_UID);
  json_t *label = json_object_get(j, GPUM_PROTO_F_LABEL);
  memset(out, 0, sizeof *out);
  out->limit = GPUMD_LIST_LIMIT_DEFAULT;
  int rc = gpumd_check_fields(j, fields);
  if (rc != 0)
    return rc;
  if (all && !json_is_boolean(all))
    return gpum_error(GPUM_EINVAL, "\"all\" must be true or false");
  if (ended && !json_is_boolean(ended))
    return gpum_error(GPUM_EINVAL, "\"ended\" must be true or false");
  out->all = json_is_true(all);
  out->ended = json_is_true(ended);
  if (limit && !json_is_null(limit)) {
    if (!json_is_integer(limit) || json_integer_value(limit) < 1 ||
        json_integer_value(limit) > GPUMD_LIST_LIMIT_MAX)
      return gpum_error(GPUM_EINVAL, "\"limit\" must be an integer from 1 to %u",
                        GPUMD_LIST_LIMIT_MAX);
    out->limit = (size_t)json_integer_value(limit);
  }
  if (cursor && !json_is_null(cursor)) {
    if (!json_is_string(cursor))
      return gpum_error(GPUM_EINVAL, "\"cursor\" must be a page's next_cursor (a string)");
    if ((rc = gpumd_list_cursor_set(json_string_value(cursor), out)) != 0)
      return rc;
  }
  if (json_is_array(state) && json_array_size(state) > 0) {
    size_t i;
    json_t *v;
    json_array_foreach(state, i, v) {
      if ((rc = gpumd_list_state_add(json_string_value(v), out)) != 0)
        return rc;
    }
  } else if (state && !json_is_null(state)) {
    if (!json_is_string(state))
      return gpum_error(GPUM_EINVAL, "\"state\" must be \"QUEUED\", \"GRANTED\" or a list of them");
    if ((rc = gpumd_list_state_add(json_string_value(state), out)) != 0)
      return rc;
  }
  if (uid && !json_is_null(uid)) {
    if (!json_is_integer(uid) || json_integer_value(uid) < 0 ||
        json_integer_value(uid) > (json_int_t)UINT32_MAX - 1)
      return gpum_error(GPUM_EINVAL, "\"uid\" must be a user id (an integer from 0)");
    out->uid_set = true;
    out->uid = (uint32_t)json_integer_value(uid);
  }
  if (label && !json_is_null(label)) {
    if (!json_is_string(label))
      return gpum_error(GPUM_EINVAL, "\"label\" must be a string (ending with '*': a prefix)");
    if ((rc = gpumd_list_label_set(json_string_value(label), out)) != 0)
      return rc;
  }
  /* One reply is one message: the lists get what the envelope and the request's id leave. */
  json_t *id = json_object_get(j, GPUM_PROTO_F_ID);
  size_t idlen = id ? json_dumpb(id, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY) : 0;
  size_t overhead = GPUMD_LIST_ENVELOPE + idlen;
  out->budget = overhead + 1024 < GPUMD_MAX_MESSAGE ? GPUMD_MAX_MESSAGE - overhead : 1024;
  return 0;
}

/* ---- alerts ------------------------------------------------------------------------------ */

int gpumd_alerts_decode(json_t *j, gpumd_alerts_req_t *out) {
  static const char *const fields[] = {GPUM_PROTO_F_ID, GPUM_PROTO_F_OP, GPUM_PROTO_F_LIMIT, NULL};
  json_t *l = json_object_get(j, GPUM_PROTO_F_LIMIT);
  out->limit = GPUMD_ALERTS_LIMIT_DEFAULT;
  int rc = gpumd_check_fields(j, fields);
  if (rc != 0)
    return rc;
  if (l && (!json_is_integer(l) || json_integer_value(l) < 0 ||
            json_integer_value(l) > GPUMD_ALERTS_LIMIT_MAX))
    return gpum_error(GPUM_EINVAL, "\"limit\" must be an integer from 0 to 100000");
  if (l)
    out->limit = (size_t)json_integer_value(l);
  return 0;
}

/* ---- disable, enable ---------------------------------------------------------------------- */

void gpumd_switch_reason_decode(json_t *why, gpumd_switch_req_t *out) {
  if (why && (!json_is_string(why) || json_string_length(why) >= GPUMD_RESV_REASON_LEN ||
              strlen(json_string_value(why)) != json_string_length(why))) {
    keep_late(&out->late, gpum_error(GPUM_EINVAL, "\"reason\" must be a text of at most %d bytes",
                                     GPUMD_RESV_REASON_LEN - 1));
    return;
  }
  out->reason = why && json_string_length(why) ? json_string_value(why) : NULL;
}

/* The request's "device": an index (a number, or a string of one) or a UUID. */
static void device_decode(json_t *v, gpumd_switch_req_t *out) {
  if (json_is_integer(v) && json_integer_value(v) >= 0) {
    snprintf(out->device_text, sizeof out->device_text, "%lld", (long long)json_integer_value(v));
    out->device = out->device_text;
  } else if (json_is_string(v) && json_string_length(v) > 0 &&
             json_string_length(v) < sizeof out->device_text) {
    out->device = json_string_value(v);
  } else {
    keep_late(&out->late, gpum_error(GPUM_EINVAL, "\"device\" must be a device index or UUID"));
  }
}

int gpumd_switch_decode(json_t *j, bool disable, gpumd_switch_req_t *out) {
  static const char *const dis_fields[] = {GPUM_PROTO_F_ID, GPUM_PROTO_F_OP, GPUM_PROTO_F_DEVICE,
                                           GPUM_PROTO_F_REASON, NULL};
  static const char *const en_fields[] = {GPUM_PROTO_F_ID, GPUM_PROTO_F_OP, GPUM_PROTO_F_DEVICE,
                                          NULL};
  memset(out, 0, sizeof *out);
  int rc = gpumd_check_fields(j, disable ? dis_fields : en_fields);
  if (rc != 0)
    return rc;
  gpumd_switch_reason_decode(json_object_get(j, GPUM_PROTO_F_REASON), out);
  device_decode(json_object_get(j, GPUM_PROTO_F_DEVICE), out);
  return 0;
}
