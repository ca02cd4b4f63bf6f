/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The REST API's endpoints (docs/rest.md, docs/openapi.yaml). Each handler reads its query
 * and JSON body, checks them (unknown fields and parameters are 400 naming them), and builds
 * the response body; reservation and device requests are decoded from the REST names and units
 * straight into the op cores' request structs (gpumd_*_req_t) and go through the same op cores
 * as the Unix socket (ops.c, admin.c), so scheduling, ownership and ledger writes are the same
 * code. HTTP callers act as gpumd's own uid and pid; the API token makes them admins.
 * Reservations made over HTTP are TTL-bound (ttl, default 10 minutes).
 */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <gpum/alert.h>
#include <gpum/error.h>
#include <gpum/session.h>
#include <gpum/size.h>

#include "http_internal.h"
#include "obs_internal.h"
#include "devices.h"
#include "engine.h"
#include "json_in.h"
#include "json_out.h"
#include "ledger.h"
#include "obs.h"
#include "ops.h"
#include "pidstart_internal.h"
#include "rest.h"
#include "sched.h"
#include "os_internal.h"
#include "pidstart_internal.h"

#define GIB 1073741824.0
#define MAX_SECONDS (30.0 * 24 * 3600)
#define DEFAULT_TTL_S 600

/* gpumd itself (its uid and pid), as an admin when admin: how HTTP callers act, but for the
 * uid of a tokenless loopback caller whose socket's owner is known (http_actor). */
static gpumd_actor_t actor_as_daemon(bool admin) {
  static uint64_t self_start;
  if (!self_start)
    self_start = gpumd_pid_start_or_zero((int32_t)getpid());
  gpumd_actor_t a = {.uid = (uint32_t)getuid(),
                     .pid = (int32_t)getpid(),
                     .pid_start = self_start,
                     .admin = admin,
                     .conn = NULL,
                     .via = "HTTP"};
  return a;
}

/* The caller of call: with the token, gpumd as an admin; without one, the owner of its loopback
 * socket when the router found it (an admin when root or in admin_group), as the socket's
 * SO_PEERCRED makes its peer the actor, else gpumd as no admin. The pid stays gpumd's: the
 * caller's process is not known (the audit reason says "over HTTP"). */
static gpumd_actor_t http_actor(const gpumd_http_call_t *call) {
  gpumd_actor_t a = actor_as_daemon(call->admin);
  if (call->peer_known)
    a.uid = call->peer_uid;
  return a;
}

/* A number field within [lo, hi] (integers or reals). */
static int get_number(json_t *o, const char *key, double lo, double hi, double *out, bool *has) {
  json_t *v = json_object_get(o, key);
  *has = v != NULL;
  if (!v)
    return 0;
  if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < lo ||
      json_number_value(v) > hi)
    return gpum_error(GPUM_EINVAL, "\"%s\" must be a number from %g to %g", key, lo, hi);
  *out = json_number_value(v);
  return 0;
}

static int get_integer(json_t *o, const char *key, long long lo, long long hi, long long *out,
                       bool *has) {
  json_t *v = json_object_get(o, key);
  *has = v != NULL;
  if (!v)
    return 0;
  if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
    return gpum_error(GPUM_EINVAL, "\"%s\" must be an integer from %lld to %lld", key, lo, hi);
  *out = json_integer_value(v);
  return 0;
}

static int get_string(json_t *o, const char *key, size_t max, const char **out) {
  json_t *v = json_object_get(o, key);
  if (!v)
    return 0;
  if (!json_is_string(v) || json_string_length(v) > max)
    return gpum_error(GPUM_EINVAL, "\"%s\" must be a string of at most %zu bytes", key, max);
  *out = json_string_value(v);
  return 0;
}

/* "A100" matches names containing A100; a pattern with * ? [ is used as given (fnmatch). */
static void type_pattern(const char *t, char *buf, size_t len) {
  if (strpbrk(t, "*?["))
    snprintf(buf, len, "%s", t);
  else
    snprintf(buf, len, "*%s*", t);
}

/* Decodes an allocate/validate body into the reserve request (the REST names and units: GiB,
 * seconds; a TTL lease always, "http" the label unless given). */
static int reserve_decode(json_t *b, gpumd_reserve_req_t *out) {
  static const char *const fields[] = {"gpu_count", "gpu_type", "memory_gb", "min_memory_gb",
                                       "devices",   "priority", "timeout",   "on_timeout",
                                       "ttl",       "label",    "wait",      NULL};
  int rc = gpumd_check_fields(b, fields);
  double mem = 0, minmem = 0, timeout = 0, ttl = DEFAULT_TTL_S;
  long long gpus = 1, prio = 0;
  bool has_mem = false, has;
  const char *type = NULL, *on_timeout = NULL, *label = NULL;
  if (rc == 0)
    rc = get_number(b, "memory_gb", 0, 1e6, &mem, &has_mem);
  if (rc == 0 && !has_mem)
    rc = gpum_error(GPUM_EINVAL, "\"memory_gb\" is required: GiB per GPU, above 0");
  else if (rc == 0 && mem <= 0)
    rc = gpum_error(GPUM_EINVAL, "\"memory_gb\" must be above 0 (GiB per GPU), not %g", mem);
  else if (rc == 0 && mem * GIB < 1)
    rc = gpum_error(GPUM_EINVAL,
                    "\"memory_gb\" %g is below the smallest size, 1 byte (%.3g GiB) per GPU", mem,
                    1 / GIB);
  if (rc == 0)
    rc = get_integer(b, "gpu_count", 1, GPUMD_SCHED_MAX_DEVICES, &gpus, &has);
  if (rc == 0)
    rc = get_string(b, "gpu_type", 100, &type);
  if (rc == 0)
    rc = get_number(b, "min_memory_gb", 0, 1e6, &minmem, &has);
  if (rc == 0)
    rc = get_integer(b, "priority", -100, 100, &prio, &has);
  if (rc == 0)
    rc = get_number(b, "timeout", 0, MAX_SECONDS, &timeout, &has);
  if (rc == 0)
    rc = get_string(b, "on_timeout", 16, &on_timeout);
  if (rc == 0)
    rc = get_number(b, "ttl", 0.001, MAX_SECONDS, &ttl, &has);
  if (rc == 0)
    rc = get_string(b, "label", GPUMD_RESV_LABEL_LEN - 1, &label);
  json_t *wait = json_object_get(b, "wait");
  if (rc == 0 && wait && !json_is_boolean(wait))
    rc = gpum_error(GPUM_EINVAL, "\"wait\" must be true or false");
  json_t *devs = json_object_get(b, "devices");
  if (rc == 0 && devs &&
      (!json_is_array(devs) || json_array_size(devs) == 0 ||
       json_array_size(devs) > GPUMD_SCHED_MAX_DEVICES))
    rc = gpum_error(GPUM_EINVAL, "\"devices\" must be a list of 1 to %d device indices or UUIDs",
                    GPUMD_SCHED_MAX_DEVICES);
  if (rc != 0)
    return rc;
  gpumd_reserve_req_init(out);
  gpumd_sched_request_t *q = &out->q;
  q->bytes_per_gpu = (uint64_t)(json_int_t)(mem * GIB);
  q->gpus = (unsigned)gpus;
  q->min_memory = (uint64_t)(json_int_t)(minmem * GIB);
  q->priority = (int)prio;
  q->timeout_ms = (uint64_t)(json_int_t)(timeout * 1000); /* 0 unless given: no job_timeout */
  out->timeout_set = true;
  q->label = label ? label : "http";
  q->lease = GPUMD_LEASE_TTL;
  q->ttl_ms = (uint64_t)(json_int_t)(ttl * 1000 < 1 ? 1 : ttl * 1000);
  q->no_wait = json_is_false(wait);
  if (type && *type) {
    type_pattern(type, out->model, sizeof out->model);
    q->model = out->model;
  }
  for (size_t i = 0; devs && i < json_array_size(devs); i++) {
    json_t *e = json_array_get(devs, i);
    if (json_is_integer(e) && json_integer_value(e) >= 0) {
      snprintf(out->device_text[i], sizeof out->device_text[i], "%lld",
               (long long)json_integer_value(e));
      out->devices[i] = out->device_text[i];
    } else if (json_is_string(e)) {
      out->devices[i] = json_string_value(e);
    } else {
      return gpum_error(GPUM_EINVAL, "\"devices\"[%zu] must be an index or a UUID", i);
    }
  }
  if (devs) {
    q->devices = out->devices;
    q->device_count = json_array_size(devs);
  }
  return on_timeout ? gpumd_on_timeout_decode(on_timeout, &q->on_timeout) : 0;
}

/* ---- status, nodes ------------------------------------------------------------------------ */

static json_t *ratio(uint64_t part, uint64_t total) {
  return total ? json_real((double)part / (double)total) : json_real(0);
}

/* The status body: the protocol's status (the queue without tokens: HTTP callers own none)
 * plus per-device utilisation and a node summary. The same for every caller, so it is
 * rendered once per change (gpumd_render_cached). */
static int render_status(gpumd_t *d, struct evbuffer *out) {
  gpumd_actor_t a = actor_as_daemon(false);
  json_t *body = NULL;
  int rc = gpumd_op_status(d, &a, &body);
  if (rc != 0)
    return rc;
  uint64_t total = 0, used = 0, reserved = 0;
  unsigned usable = 0, nutil = 0;
  double util = 0;
  size_t i;
  json_t *dev;
  json_array_foreach(json_object_get(body, "devices"), i, dev) {
    json_t *mem = json_object_get(dev, "memory");
    total += (uint64_t)json_integer_value(json_object_get(mem, "total"));
    used += (uint64_t)json_integer_value(json_object_get(mem, "used"));
    reserved += (uint64_t)json_integer_value(json_object_get(dev, "reserved"));
    const char *st = json_string_value(json_object_get(dev, "state"));
    usable += st && (!strcmp(st, "AVAILABLE") || !strcmp(st, "BUSY"));
    gpum_device_sample_t s;
    unsigned idx = (unsigned)json_integer_value(json_object_get(dev, "index"));
    if (gpumd_device_measured(d, idx, &s) && gpum_sample_valid(&s, GPUM_METRIC_UTIL_GPU)) {
      json_object_set_new(dev, "utilization_ratio", json_real(s.util_gpu / 100.0));
      util += s.util_gpu / 100.0;
      nutil++;
    } else {
      json_object_set_new(dev, "utilization_ratio", json_null());
    }
  }
  json_t *sum = json_pack(
      "{s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o}", "devices",
      (json_int_t)json_array_size(json_object_get(body, "devices")), "usable", (json_int_t)usable,
      "memory_total", (json_int_t)total, "memory_used", (json_int_t)used, "memory_reserved",
      (json_int_t)reserved, "memory_used_ratio", ratio(used, total), "memory_reserved_ratio",
      ratio(reserved, total), "utilization_ratio", nutil ? json_real(util / nutil) : json_null());
  json_object_set_new(body, "summary", sum);
  rc = gpumd_json_write(out, body) == 0 && evbuffer_add(out, "\n", 1) == 0
           ? 0
           : gpum_error(GPUM_ENOMEM, "out of memory writing the status");
  json_decref(body);
  return rc;
}

int gpumd_http_status(gpumd_http_call_t *call) {
  static const char *const params[] = {NULL};
  int rc = gpumd_http_check_query(call, params);
  if (rc != 0)
    return rc;
  gpumd_t *d = call->d;
  struct evbuffer *out = evhttp_request_get_output_buffer(call->req);
  rc = gpumd_render_cached(d, d->obs ? &d->obs->status_cache : NULL, render_status, out);
  if (rc != 0)
    return rc;
  gpumd_http_reply_raw(call, "application/json");
  return 0;
}

int gpumd_http_nodes(gpumd_http_call_t *call) {
  static const char *const params[] = {"gpu_type", "min_memory_gb", NULL};
  int rc = gpumd_http_check_query(call, params);
  if (rc != 0)
    return rc;
  const char *type = evhttp_find_header(call->query, "gpu_type");
  const char *mins = evhttp_find_header(call->query, "min_memory_gb");
  double min_gb = 0;
  if (mins) {
    char *end = NULL;
    min_gb = strtod(mins, &end);
    if (!*mins || *end || !isfinite(min_gb) || min_gb < 0)
      return gpum_error(GPUM_EINVAL, "min_memory_gb '%.32s' must be a number of GiB, 0 or more",
                        mins);
  }
  if (type && (!*type || strlen(type) > 100))
    return gpum_error(GPUM_EINVAL, "gpu_type must be 1 to 100 characters");
  char pat[128] = "*";
  if (type)
    type_pattern(type, pat, sizeof pat);
  json_t *all = gpumd_engine_devices_json(call->d), *keep = json_array();
  size_t i;
  json_t *dev;
  json_array_foreach(all, i, dev) {
    const char *name = json_string_value(json_object_get(dev, "name"));
    double total =
        (double)json_integer_value(json_object_get(json_object_get(dev, "memory"), "total"));
    if (fnmatch(pat, name ? name : "", 0) == 0 && total >= min_gb * GIB)
      json_array_append(keep, dev);
  }
  json_decref(all);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  call->out = json_pack("{s:[{s:s, s:o}]}", "nodes", "hostname", host, "devices", keep);
  return call->out ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
}

/* ---- validate, allocate --------------------------------------------------------------------- */

int gpumd_http_validate(gpumd_http_call_t *call) {
  gpumd_actor_t a = http_actor(call);
  gpumd_reserve_req_t req;
  int rc = reserve_decode(call->body, &req);
  if (rc == 0)
    rc = gpumd_op_check(call->d, &a, &req, &call->out);
  return rc;
}

int gpumd_http_allocate(gpumd_http_call_t *call) {
  gpumd_actor_t a = http_actor(call);
  gpumd_reserve_req_t req;
  int rc = reserve_decode(call->body, &req);
  if (rc == 0)
    rc = gpumd_op_reserve(call->d, &a, &req, &call->out);
  if (rc == 0) {
    const char *st = json_string_value(
        json_object_get(json_object_get(call->out, GPUM_PROTO_F_RESERVATION), GPUM_PROTO_F_STATE));
    call->status = st && !strcmp(st, GPUM_PROTO_STATE_GRANTED) ? 201 : 202;
  }
  return rc;
}

/* ---- reservations --------------------------------------------------------------------------- */

int gpumd_http_resv_list(gpumd_http_call_t *call) {
  static const char *const params[] = {NULL};
  gpumd_actor_t a = http_actor(call);
  const gpumd_list_req_t req = {.all = true, .ended = true}; /* everyone's, and what ended lately */
  int rc = gpumd_http_check_query(call, params);
  if (rc == 0)
    rc = gpumd_op_list(call->d, &a, &req, &call->out);
  return rc;
}

int gpumd_http_resv_get(gpumd_http_call_t *call) {
  uint64_t id = 0;
  if (gpumd_resv_id_parse(call->id, &id) != 0)
    return gpum_error(GPUM_EINVAL, "'%.64s' is not a reservation id such as r-1", call->id);
  const gpumd_resv_t *r = gpumd_sched_find(call->d->sched, id);
  gpumd_resv_t old;
  if (!r && call->d->ledger && gpumd_ledger_get(call->d->ledger, id, &old) == 0)
    r = &old;
  if (!r)
    return gpum_error(GPUM_ENOENT, "no reservation %s", call->id);
  json_t *o = gpumd_engine_resv_json(call->d, r, false);
  gpumd_engine_resv_add_fenced(call->d, o, r);
  call->out = json_pack("{s:o}", "reservation", o);
  return 0;
}

/* The reservation the path names ({ID}), with the protocol's messages. An id that is not UTF-8
 * reads as none ("must be a reservation id"), as it did when it went through a JSON request. */
static int path_resv(const gpumd_http_call_t *call, gpumd_resv_ref_t *out) {
  bool text = gpumd_utf8_valid(call->id, strlen(call->id));
  return gpumd_resv_ref_decode(text ? call->id : NULL, out);
}

int gpumd_http_resv_delete(gpumd_http_call_t *call) {
  gpumd_actor_t a = http_actor(call);
  gpumd_release_req_t req;
  int rc = json_object_size(call->body) ? gpum_error(GPUM_EINVAL, "DELETE takes no body") : 0;
  if (rc == 0)
    rc = path_resv(call, &req.resv);
  if (rc == 0)
    rc = gpumd_op_release(call->d, &a, &req, &call->out);
  return rc;
}

int gpumd_http_resv_renew(gpumd_http_call_t *call) {
  static const char *const fields[] = {"ttl", NULL};
  gpumd_actor_t a = http_actor(call);
  gpumd_renew_req_t req;
  memset(&req, 0, sizeof req);
  double ttl = 0;
  int rc = gpumd_check_fields(call->body, fields);
  if (rc == 0)
    rc = get_number(call->body, "ttl", 0.001, MAX_SECONDS, &ttl, &req.ttl_set);
  if (rc == 0)
    rc = path_resv(call, &req.resv);
  if (rc != 0)
    return rc;
  req.ttl_ms = req.ttl_set ? (uint64_t)(json_int_t)(ttl * 1000 < 1 ? 1 : ttl * 1000) : 0;
  return gpumd_op_renew(call->d, &a, &req, &call->out);
}

/* ---- framework setup ------------------------------------------------------------------------ */

typedef struct {
  const gpumd_resv_t *r;
  char id[GPUMD_RESV_ID_BUFSZ];
  gpum_reservation_t grant; /* r as a client sees it, for its environment */
  double fraction;          /* reserved / total, smallest over the devices */
  json_t *devices;
} granted_t;

/* The granted reservation named by the body's "reservation" (fields: allowed). */
static int find_granted(gpumd_http_call_t *call, const char *const *fields, granted_t *g) {
  const char *s = NULL;
  uint64_t id = 0;
  int rc = gpumd_check_fields(call->body, fields);
  if (rc == 0)
    rc = get_string(call->body, "reservation", 32, &s);
  if (rc == 0 && (!s || gpumd_resv_id_parse(s, &id) != 0))
    rc = gpum_error(GPUM_EINVAL, "\"reservation\" must be a reservation id such as \"r-1\"");
  if (rc != 0)
    return rc;
  g->r = gpumd_sched_find(call->d->sched, id);
  if (!g->r)
    return gpum_error(GPUM_ENOENT, "no live reservation %s", s);
  if (g->r->state != GPUMD_RESV_GRANTED)
    return gpum_error(GPUM_ESTATE, "reservation %s is %s, not GRANTED yet", s,
                      gpumd_resv_state_name(g->r->state));
  gpumd_resv_id_format(id, g->id, sizeof g->id);
  memset(&g->grant, 0, sizeof g->grant);
  memcpy(g->grant.id, g->id, sizeof g->id);
  g->grant.state = GPUM_RES_GRANTED;
  g->grant.bytes_per_gpu = g->r->bytes_per_gpu;
  g->grant.gpus = g->r->gpus;
  g->fraction = 1.0;
  g->devices = json_array();
  for (unsigned i = 0; i < GPUMD_SCHED_MAX_DEVICES; i++) {
    if (!(g->r->device_mask >> i & 1u))
      continue;
    gpumd_device_t *dev = gpumd_device_find(call->d, i);
    uint64_t total = dev ? dev->info.memory_total : 0;
    const char *uuid = dev ? dev->info.uuid : "";
    if (total && (double)g->r->bytes_per_gpu / (double)total < g->fraction)
      g->fraction = (double)g->r->bytes_per_gpu / (double)total;
    if (g->grant.ndevices < GPUM_CLIENT_MAX_DEVICES) {
      gpum_res_device_t *gd = &g->grant.devices[g->grant.ndevices++];
      gd->index = i;
      snprintf(gd->uuid, sizeof gd->uuid, "%s", uuid);
    }
    json_array_append_new(g->devices, json_pack("{s:i, s:s, s:s, s:I, s:I}", "index", (int)i,
                                                "uuid", uuid, "name", dev ? dev->info.name : "",
                                                "memory_total", (json_int_t)total, "reserved",
                                                (json_int_t)g->r->bytes_per_gpu));
  }
  g->fraction = floor(g->fraction * 10000.0) / 10000.0;
  return 0;
}

/* The environment of every job of the grant (libgpum's gpum_reservation_env, the same
 * variables gpum run sets), as a JSON object. */
static json_t *base_env(const granted_t *g) {
  gpum_env_var_t vars[GPUM_RESERVATION_ENV_MAX];
  size_t n = 0;
  json_t *env = json_object();
  if (env && gpum_reservation_env(&g->grant, vars, GPUM_RESERVATION_ENV_MAX, &n) == 0)
    for (size_t i = 0; i < n; i++)
      json_object_set_new(env, vars[i].name, json_string(vars[i].value));
  return env;
}

int gpumd_http_setup_pytorch(gpumd_http_call_t *call) {
  static const char *const fields[] = {"reservation", "master_port", NULL};
  granted_t g;
  long long port = 29500;
  bool has;
  int rc = find_granted(call, fields, &g);
  if (rc != 0)
    return rc;
  rc = get_integer(call->body, "master_port", 1, 65535, &port, &has);
  if (rc != 0) {
    json_decref(g.devices);
    return rc;
  }
  unsigned n = g.r->gpus;
  json_t *env = base_env(&g);
  char num[24], code[512];
  if (n > 1) {
    snprintf(num, sizeof num, "%u", n);
    json_object_set_new(env, "WORLD_SIZE", json_string(num));
    json_object_set_new(env, "LOCAL_WORLD_SIZE", json_string(num));
    json_object_set_new(env, "PET_NPROC_PER_NODE", json_string(num));
    json_object_set_new(env, "PET_NNODES", json_string("1"));
    json_object_set_new(env, "MASTER_ADDR", json_string("127.0.0.1"));
    snprintf(num, sizeof num, "%lld", port);
    json_object_set_new(env, "MASTER_PORT", json_string(num));
    json_object_set_new(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING", json_string("1"));
  }
  snprintf(code, sizeof code,
           "import torch\nfor i in range(torch.cuda.device_count()):\n"
           "    torch.cuda.set_per_process_memory_fraction(%.4f, i)\n",
           g.fraction);
  char run[128];
  snprintf(run, sizeof run, "torchrun --standalone --nnodes=1 --nproc-per-node=%u TRAIN.py", n);
  call->out = json_pack("{s:s, s:s, s:o, s:{s:f, s:I, s:s*, s:s, s:o}, s:s}", "reservation", g.id,
                        "framework", "pytorch", "env", env, "settings",
                        "per_process_memory_fraction", g.fraction, "nproc_per_node", (json_int_t)n,
                        "distributed_backend", n > 1 ? "nccl" : NULL, "launch",
                        n > 1 ? run : "python TRAIN.py", "devices", g.devices, "python", code);
  return call->out ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
}

int gpumd_http_setup_tensorflow(gpumd_http_call_t *call) {
  static const char *const fields[] = {"reservation", NULL};
  granted_t g;
  int rc = find_granted(call, fields, &g);
  if (rc != 0)
    return rc;
  unsigned n = g.r->gpus;
  json_int_t mib = (json_int_t)(g.r->bytes_per_gpu >> 20);
  json_t *env = base_env(&g);
  json_object_set_new(env, "TF_FORCE_GPU_ALLOW_GROWTH", json_string("true"));
  char code[640];
  snprintf(code, sizeof code,
           "import tensorflow as tf\nfor gpu in tf.config.list_physical_devices(\"GPU\"):\n"
           "    tf.config.set_logical_device_configuration(\n"
           "        gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=%lld)])\n%s",
           (long long)mib,
           n > 1 ? "strategy = tf.distribute.MirroredStrategy(\n"
                   "    cross_device_ops=tf.distribute.NcclAllReduce())\n"
                 : "");
  call->out = json_pack("{s:s, s:s, s:o, s:{s:b, s:I, s:I, s:s, s:o}, s:s}", "reservation", g.id,
                        "framework", "tensorflow", "env", env, "settings", "memory_growth", 1,
                        "memory_limit_mib", mib, "gpus", (json_int_t)n, "strategy",
                        n > 1 ? "MirroredStrategy(NcclAllReduce)" : "default", "devices", g.devices,
                        "python", code);
  return call->out ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
}

/* ---- the operator's switch per device ------------------------------------------------------ */

/* POST /api/v1/gpu/devices/{ID}/disable {"reason"} and /enable {}: the socket's ops. */
static int device_switch(gpumd_http_call_t *call, bool disable) {
  static const char *const dis_fields[] = {"reason", NULL};
  static const char *const en_fields[] = {NULL};
  int rc = gpumd_check_fields(call->body, disable ? dis_fields : en_fields);
  if (rc != 0)
    return rc;
  /* The id is 1 to 63 bytes of the path, not always UTF-8: matched as it is, it names no
   * device (ENODEV, its bytes quoted as '?' where they are not text). */
  gpumd_switch_req_t req;
  memset(&req, 0, sizeof req);
  req.device = call->id;
  if (disable)
    gpumd_switch_reason_decode(json_object_get(call->body, "reason"), &req);
  gpumd_actor_t a = http_actor(call);
  return disable ? gpumd_op_disable(call->d, &a, &req, &call->out)
                 : gpumd_op_enable(call->d, &a, &req, &call->out);
}

int gpumd_http_device_disable(gpumd_http_call_t *call) {
  return device_switch(call, true);
}

int gpumd_http_device_enable(gpumd_http_call_t *call) {
  return device_switch(call, false);
}

/* ---- health, monitoring, alerts, config ---------------------------------------------------- */

int gpumd_http_health(gpumd_http_call_t *call) {
  static const char *const params[] = {NULL};
  int rc = gpumd_http_check_query(call, params);
  if (rc != 0)
    return rc;
  gpumd_t *d = call->d;
  json_t *devs = json_array();
  unsigned usable = 0, bad = 0;
  for (unsigned i = 0; i < d->device_count; i++) {
    gpumd_device_t *dev = &d->devices[i];
    gpum_device_health_t h;
    memset(&h, 0, sizeof h);
    gpum_monitor_health(d->mon, dev->index, &h);
    usable += h.state == GPUM_HEALTH_AVAILABLE || h.state == GPUM_HEALTH_BUSY;
    bad += h.state == GPUM_HEALTH_ERROR || !h.responsive;
    json_array_append_new(
        devs, json_pack("{s:i, s:s, s:s, s:s, s:s, s:I, s:b, s:i, s:I}", "index", (int)dev->index,
                        "uuid", dev->info.uuid, "name", dev->info.name, "state",
                        gpum_health_state_name(h.state), "reason", h.reason, "since_ns",
                        (json_int_t)h.since_ns, "responsive", h.responsive, "consecutive_failures",
                        (int)h.consecutive_failures, "last_xid", (json_int_t)h.last_xid));
  }
  const char *status = "ok", *reason = "every device is usable";
  bool healthy = false;
  if (d->ledger_failed) {
    status = "unhealthy";
    reason = "a ledger write failed";
  } else if (usable == 0) {
    status = "unhealthy";
    reason = d->device_count ? "no device is usable (ERROR or DISABLED)" : "no devices";
  } else {
    healthy = true;
    if (bad > 0) {
      status = "degraded";
      reason = "some devices are in ERROR or unresponsive";
    }
  }
  call->out = json_pack("{s:s, s:b, s:s, s:I, s:I, s:o}", "status", status, "healthy", healthy,
                        "reason", reason, "uptime_s",
                        (json_int_t)((gpum__os_real_ns() - d->start_ns) / 1000000000ull),
                        "usable_devices", (json_int_t)usable, "devices", devs);
  call->status = healthy ? 200 : 503;
  return call->out ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
}

static json_t *stats_json(const gpum_window_stats_t *w) {
  if (w->count == 0)
    return json_pack("{s:i}", "count", 0);
  return json_pack("{s:I, s:f, s:f, s:f, s:f, s:f, s:f}", "count", (json_int_t)w->count, "min",
                   w->min, "max", w->max, "mean", w->mean, "p50", w->p50, "p95", w->p95, "p99",
                   w->p99);
}

int gpumd_http_monitoring(gpumd_http_call_t *call) {
  static const char *const params[] = {"window", NULL};
  static const gpum_metric_t stat_metrics[] = {GPUM_METRIC_UTIL_GPU, GPUM_METRIC_UTIL_MEMORY,
                                               GPUM_METRIC_MEMORY_USED, GPUM_METRIC_TEMPERATURE,
                                               GPUM_METRIC_POWER};
  int rc = gpumd_http_check_query(call, params);
  if (rc != 0)
    return rc;
  const char *ws = evhttp_find_header(call->query, "window");
  uint64_t window_ms = 60000;
  if (ws && (gpum_duration_parse(ws, &window_ms) != 0 || window_ms < 1000 || window_ms > 600000))
    return gpum_error(GPUM_EINVAL, "window '%.32s' must be a duration from 1s to 10m", ws);
  gpumd_t *d = call->d;
  json_t *devs = json_array(), *units = json_object();
  for (int m = 0; m < GPUM_METRIC_COUNT; m++)
    json_object_set_new(units, gpum_metric_name((gpum_metric_t)m),
                        json_string(gpum_metric_unit((gpum_metric_t)m)));
  for (unsigned i = 0; i < d->device_count; i++) {
    gpumd_device_t *dev = &d->devices[i];
    gpum_device_sample_t s;
    json_t *latest = json_null();
    if (gpum_monitor_latest(d->mon, dev->index, &s) == 0) {
      latest = json_pack("{s:I}", "timestamp_ns", (json_int_t)s.timestamp_ns);
      for (int m = 0; m < GPUM_METRIC_COUNT; m++) {
        double v;
        if (gpum_sample_get(&s, (gpum_metric_t)m, &v))
          json_object_set_new(latest, gpum_metric_name((gpum_metric_t)m),
                              json_integer((json_int_t)v));
      }
    }
    json_t *stats = json_object();
    for (size_t k = 0; k < sizeof stat_metrics / sizeof stat_metrics[0]; k++) {
      gpum_window_stats_t w;
      if (gpum_monitor_window_stats(d->mon, dev->index, stat_metrics[k], window_ms / 1000.0, &w) ==
          0)
        json_object_set_new(stats, gpum_metric_name(stat_metrics[k]), stats_json(&w));
    }
    json_array_append_new(devs, json_pack("{s:i, s:s, s:s, s:o, s:o}", "index", (int)dev->index,
                                          "uuid", dev->info.uuid, "name", dev->info.name, "latest",
                                          latest, "stats", stats));
  }
  uint64_t iv = gpum_config_get_duration(d->cfg, "monitor.interval");
  call->out = json_pack("{s:f, s:I, s:o, s:o}", "window_s", window_ms / 1000.0, "interval_ms",
                        (json_int_t)iv, "units", units, "devices", devs);
  return call->out ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
}

/* GET /api/v1/gpu/history: gpumd's own per-device points (history.c), written straight to the
 * reply (up to GPUMD_HISTORY_POINTS points a device: no JSON tree for them). */
int gpumd_http_history(gpumd_http_call_t *call) {
  static const char *const params[] = {"window", NULL};
  int rc = gpumd_http_check_query(call, params);
  if (rc != 0)
    return rc;
  const char *ws = evhttp_find_header(call->query, "window");
  uint64_t window_ms = 3600000;
  if (ws && (gpum_duration_parse(ws, &window_ms) != 0 || window_ms < 10000 || window_ms > 3600000))
    return gpum_error(GPUM_EINVAL, "window '%.32s' must be a duration from 10s to 1h", ws);
  struct evbuffer *out = evhttp_request_get_output_buffer(call->req);
  rc = gpumd_history_render(call->d, window_ms, out);
  if (rc != 0) {
    evbuffer_drain(out, evbuffer_get_length(out));
    return rc;
  }
  gpumd_http_reply_raw(call, "application/json");
  return 0;
}

int gpumd_http_alerts(gpumd_http_call_t *call) {
  static const char *const params[] = {"limit", NULL};
  int rc = gpumd_http_check_query(call, params);
  if (rc != 0)
    return rc;
  const char *ls = evhttp_find_header(call->query, "limit");
  gpumd_alerts_req_t req = {.limit = GPUMD_ALERTS_LIMIT_DEFAULT};
  if (ls) {
    char *end = NULL;
    long long limit = strtoll(ls, &end, 10);
    if (!*ls || *end || limit < 0 || limit > GPUMD_ALERTS_LIMIT_MAX)
      return gpum_error(GPUM_EINVAL, "limit '%.32s' must be an integer from 0 to 100000", ls);
    req.limit = (size_t)limit;
  }
  gpumd_actor_t a = http_actor(call);
  return gpumd_obs_op_alerts(call->d, &a, &req, &call->out);
}

int gpumd_http_config(gpumd_http_call_t *call) {
  static const char *const params[] = {NULL};
  int rc = gpumd_http_check_query(call, params);
  if (rc != 0)
    return rc;
  gpumd_t *d = call->d;
  json_t *opts = json_object();
  for (size_t i = 0; i < gpum_option_count(); i++) {
    const gpum_option_def_t *def = gpum_option_at(i);
    gpum_opt_source_t src = gpum_config_source(d->cfg, def->key);
    json_object_set_new(
        opts, def->key,
        json_pack("{s:s, s:s}", "value",
                  def->secret ? "(hidden)" : gpum_config_get_string(d->cfg, def->key), "source",
                  gpum_opt_source_name(src)));
  }
  call->out = json_pack("{s:s?, s:s, s:s, s:o}", "config_file", gpum_config_file(d->cfg),
                        "state_dir", d->state_dir, "socket", d->socket_path, "options", opts);
  return call->out ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
}
