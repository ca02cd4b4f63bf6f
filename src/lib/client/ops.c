/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gpumd client's operations: each builds its request object, makes the call (conn.c) and
 * reads the reply into the public structs (parse.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>

#include "client/client_internal.h"
#include "client/protocol_internal.h"

/* Builds {"op": op} (+ one string field when key is set). NULL on allocation failure. */
static json_t *request(const char *op, const char *key, const char *value) {
  json_t *req = json_object();
  if (req == NULL)
    return NULL;
  if (json_object_set_new(req, GPUM_PROTO_F_OP, json_string(op)) != 0 ||
      (key && json_object_set_new(req, key, json_string(value)) != 0)) {
    json_decref(req);
    return NULL;
  }
  return req;
}

/* Makes the call and parses the reply's "reservation" into out (may be NULL). Consumes req. */
static int call_res(gpum_client_t *c, json_t *req, gpum_reservation_t *out) {
  json_t *reply = NULL;
  int rc = gpum__client_call_consume(c, req, &reply);
  if (rc != 0)
    return rc;
  const json_t *r = json_object_get(reply, GPUM_PROTO_F_RESERVATION);
  if (!json_is_object(r))
    rc = gpum_error(GPUM_EPROTO, "gpumd's reply has no reservation");
  else if (out)
    gpum__res_parse(r, out);
  json_decref(reply);
  return rc;
}

static int set_u64(json_t *o, const char *key, uint64_t v) {
  if (v > (uint64_t)INT64_MAX)
    return gpum_error(GPUM_ERANGE, "%s %llu is too large", key, (unsigned long long)v);
  return json_object_set_new(o, key, json_integer((json_int_t)v)) ? GPUM_ENOMEM : 0;
}

static int reserve_fields(json_t *o, const gpum_reserve_req_t *q) {
  const char *lease = gpum__lease_name(q->lease);
  if (q->bytes_per_gpu == 0)
    return gpum_error(GPUM_EINVAL, "a reservation needs bytes_per_gpu > 0");
  if (lease == NULL)
    return gpum_error(GPUM_EINVAL, "unknown lease kind %d", (int)q->lease);
  int rc = set_u64(o, GPUM_PROTO_F_BYTES_PER_GPU, q->bytes_per_gpu);
  rc = rc ? rc : set_u64(o, GPUM_PROTO_F_GPUS, q->gpus ? q->gpus : 1);
  if (rc == 0 && json_object_set_new(o, GPUM_PROTO_F_PRIORITY, json_integer(q->priority)))
    rc = GPUM_ENOMEM;
  if (rc == 0 && q->model && json_object_set_new(o, GPUM_PROTO_F_MODEL, json_string(q->model)))
    rc = GPUM_ENOMEM;
  if (rc == 0 && q->min_memory)
    rc = set_u64(o, GPUM_PROTO_F_MIN_MEMORY, q->min_memory);
  if (rc == 0 && q->queue_timeout_ms) {
    rc = set_u64(o, GPUM_PROTO_F_TIMEOUT_MS, q->queue_timeout_ms);
    const char *action =
        q->wait_on_timeout ? GPUM_PROTO_ON_TIMEOUT_WAIT : GPUM_PROTO_ON_TIMEOUT_REJECT;
    if (rc == 0 && json_object_set_new(o, GPUM_PROTO_F_ON_TIMEOUT, json_string(action)))
      rc = GPUM_ENOMEM;
  }
  if (rc == 0 && q->label && json_object_set_new(o, GPUM_PROTO_F_LABEL, json_string(q->label)))
    rc = GPUM_ENOMEM;
  if (rc == 0 && (q->slurm_job_id || q->slurm_step_id)) {
    if (!q->slurm_job_id || !q->slurm_step_id)
      return gpum_error(GPUM_EINVAL, "a Slurm job needs both slurm_job_id and slurm_step_id");
    json_t *sl = json_pack("{s:s, s:s}", GPUM_PROTO_F_JOB_ID, q->slurm_job_id, GPUM_PROTO_F_STEP_ID,
                           q->slurm_step_id);
    if (sl == NULL || json_object_set_new(o, GPUM_PROTO_F_SLURM, sl) != 0)
      rc = GPUM_ENOMEM;
  }
  if (rc == 0 && json_object_set_new(o, GPUM_PROTO_F_LEASE, json_string(lease)))
    rc = GPUM_ENOMEM;
  if (rc == 0 && q->lease == GPUM_LEASE_PID && q->pid > 0)
    rc = set_u64(o, GPUM_PROTO_F_PID, (uint64_t)q->pid);
  if (rc == 0 && q->lease == GPUM_LEASE_TTL)
    rc = set_u64(o, GPUM_PROTO_F_TTL_MS, q->ttl_ms);
  if (rc == 0 && q->preemptible && json_object_set_new(o, GPUM_PROTO_F_PREEMPTIBLE, json_true()))
    rc = GPUM_ENOMEM;
  if (rc == 0 && q->no_wait && json_object_set_new(o, GPUM_PROTO_F_WAIT, json_false()))
    rc = GPUM_ENOMEM;
  if (rc == 0 && q->ndevices) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < q->ndevices; i++)
      if (json_array_append_new(a, json_string(q->devices[i])) != 0)
        rc = GPUM_ENOMEM;
    if (a == NULL || json_object_set_new(o, GPUM_PROTO_F_DEVICES, a) != 0)
      rc = GPUM_ENOMEM;
  }
  if (rc == GPUM_ENOMEM)
    return gpum_error(GPUM_ENOMEM, "out of memory building a request");
  return rc;
}

int gpum_client_reserve_async(gpum_client_t *c, const gpum_reserve_req_t *req,
                              gpum_reservation_t *out) {
  json_t *o = request(GPUM_PROTO_OP_RESERVE, NULL, NULL);
  if (o == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory building a request");
  int rc = reserve_fields(o, req);
  json_t *reply = NULL;
  if (rc == 0)
    rc = gpum__client_call_nodispatch(c, o, &reply);
  json_decref(o);
  const json_t *r = json_object_get(reply, GPUM_PROTO_F_RESERVATION);
  if (rc == 0 && !json_is_object(r))
    rc = gpum_error(GPUM_EPROTO, "gpumd's reply has no reservation");
  gpum_reservation_t res;
  if (rc == 0) {
    /* A grant (or an end) that arrived with the reply is already part of the answer. */
    gpum__res_parse(r, &res);
    gpum__client_latest(c, &res);
    if (out)
      *out = res;
  }
  json_decref(reply);
  gpum__client_dispatch_pending(c);
  return rc;
}

int gpum_client_reserve(gpum_client_t *c, const gpum_reserve_req_t *req, int timeout_ms,
                        gpum_reservation_t *out) {
  gpum_reservation_t r;
  int rc = gpum_client_reserve_async(c, req, &r);
  if (rc != 0)
    return rc;
  if (r.state == GPUM_RES_QUEUED) {
    rc = gpum_client_wait(c, r.id, timeout_ms, &r);
    if (rc == GPUM_ETIMEDOUT) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", gpum_last_error());
      gpum_client_release(c, r.id, NULL);
      gpum_error(GPUM_ETIMEDOUT, "%s; cancelled", msg);
    }
  } else if (r.state != GPUM_RES_GRANTED) {
    rc = gpum_error(GPUM_ESTATE, "reservation %s is %s%s%s", r.id, gpum_res_state_name(r.state),
                    r.reason[0] ? ": " : "", r.reason);
  }
  if (out)
    *out = r;
  return rc;
}

int gpum_client_release(gpum_client_t *c, const char *id, gpum_reservation_t *out) {
  return call_res(c, request(GPUM_PROTO_OP_RELEASE, GPUM_PROTO_F_RESERVATION, id), out);
}

int gpum_client_renew(gpum_client_t *c, const char *id, uint64_t ttl_ms, gpum_reservation_t *out) {
  json_t *o = request(GPUM_PROTO_OP_RENEW, GPUM_PROTO_F_RESERVATION, id);
  if (o && ttl_ms && set_u64(o, GPUM_PROTO_F_TTL_MS, ttl_ms) != 0) {
    json_decref(o);
    return gpum_error(GPUM_ERANGE, "ttl %llu ms out of range", (unsigned long long)ttl_ms);
  }
  return call_res(c, o, out);
}

int gpum_client_resize(gpum_client_t *c, const char *id, uint64_t bytes_per_gpu,
                       gpum_reservation_t *out) {
  json_t *o = request(GPUM_PROTO_OP_RESIZE, GPUM_PROTO_F_RESERVATION, id);
  if (o && set_u64(o, GPUM_PROTO_F_BYTES_PER_GPU, bytes_per_gpu) != 0) {
    json_decref(o);
    return gpum_error(GPUM_ERANGE, "size %llu out of range", (unsigned long long)bytes_per_gpu);
  }
  return call_res(c, o, out);
}

int gpum_client_suspend(gpum_client_t *c, const char *id, gpum_reservation_t *out) {
  return call_res(c, request(GPUM_PROTO_OP_SUSPEND, GPUM_PROTO_F_RESERVATION, id), out);
}

int gpum_client_resume(gpum_client_t *c, const char *id, gpum_reservation_t *out) {
  return call_res(c, request(GPUM_PROTO_OP_RESUME, GPUM_PROTO_F_RESERVATION, id), out);
}

int gpum_client_get(gpum_client_t *c, const char *id, gpum_reservation_t *out) {
  return call_res(c, request(GPUM_PROTO_OP_GET, GPUM_PROTO_F_RESERVATION, id), out);
}

int gpum_client_attach(gpum_client_t *c, const char *id, const char *token,
                       gpum_reservation_t *out) {
  json_t *o = request(GPUM_PROTO_OP_ATTACH, GPUM_PROTO_F_RESERVATION, id);
  if (o && json_object_set_new(o, GPUM_PROTO_F_TOKEN, json_string(token ? token : "")) != 0) {
    json_decref(o);
    o = NULL;
  }
  return call_res(c, o, out);
}

int gpum_client_status(gpum_client_t *c, gpum_client_status_t *out) {
  json_t *reply = NULL;
  int rc = gpum__client_call_consume(c, request(GPUM_PROTO_OP_STATUS, NULL, NULL), &reply);
  if (rc != 0)
    return rc;
  rc = gpum__status_parse(reply, out);
  json_decref(reply);
  return rc;
}

int gpum_client_call_json(gpum_client_t *c, const char *op, const char *args_json, char **reply) {
  json_t *o = NULL;
  if (args_json && *args_json) {
    json_error_t jerr;
    o = json_loads(args_json, 0, &jerr);
    if (!json_is_object(o)) {
      json_decref(o);
      return gpum_error(GPUM_EINVAL, "request arguments are not a JSON object: %s",
                        o ? "not an object" : jerr.text);
    }
  } else {
    o = json_object();
  }
  if (o != NULL && json_object_set_new(o, GPUM_PROTO_F_OP, json_string(op)) != 0) {
    json_decref(o);
    o = NULL;
  }
  if (o == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory building a request");
  json_t *r = NULL;
  /* The reply's own line, not its parse written out again. Kept only around the call itself:
   * the events dispatched after it may call the client again. */
  c->keep_raw = true;
  int rc = gpum__client_call_nodispatch(c, o, &r);
  c->keep_raw = false;
  json_decref(o);
  free(c->raw);
  c->raw = NULL;
  char *raw = c->reply_raw;
  c->reply_raw = NULL;
  gpum__client_dispatch_pending(c);
  if (rc != 0) {
    free(raw);
    return rc;
  }
  *reply = raw ? raw : json_dumps(r, JSON_COMPACT);
  json_decref(r);
  return *reply ? 0 : gpum_error(GPUM_ENOMEM, "out of memory encoding the reply");
}

int gpum_client_watch(gpum_client_t *c, unsigned types, uint64_t *seq) {
  if (types & ~GPUM__PROTO_NODE_ALL)
    return gpum_error(GPUM_EINVAL, "unknown watch types 0x%x", types & ~GPUM__PROTO_NODE_ALL);
  json_t *req = request(GPUM_PROTO_OP_WATCH, NULL, NULL);
  json_t *names = json_array();
  int bad = req == NULL || names == NULL;
  for (unsigned bit = 1; !bad && bit <= types; bit <<= 1)
    if ((types & bit) && json_array_append_new(names, json_string(gpum__proto_node_type_name(bit))))
      bad = 1;
  if (!bad && types)
    bad = json_object_set_new(req, GPUM_PROTO_F_EVENTS, json_incref(names));
  else if (!bad)
    bad = json_object_set_new(req, GPUM_PROTO_F_OFF, json_true());
  json_decref(names);
  if (bad) {
    json_decref(req);
    req = NULL; /* the call says ENOMEM */
  }
  json_t *reply = NULL;
  int rc = gpum__client_call_consume(c, req, &reply);
  if (rc != 0)
    return rc;
  const json_t *s = json_object_get(reply, GPUM_PROTO_F_SEQ);
  if (seq)
    *seq = json_is_integer(s) && json_integer_value(s) > 0 ? (uint64_t)json_integer_value(s) : 0;
  json_decref(reply);
  return 0;
}
