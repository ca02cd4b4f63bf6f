/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The REST API's endpoints (docs/rest.md, docs/openapi.yaml). Each handler reads its query
 * and JSON body, checks them (unknown fields and parameters are 400 naming them), and builds
 * the response body; reservation and device requests are decoded from the REST names and units
 * straight into the op cores' request structs (gpumd_*_req_t) and go through the same op cores
 * as the Unix socket (ops.c, admin.c), so scheduling, ownership and ledger writes are the same
 * code. A caller with the API token acts as gpumd's own uid, an admin; a loopback caller
 * without it as the owner of its socket (http_router.c; docs/rest.md, "Who calls"), with gpumd's
 * pid. Reservations made over HTTP are TTL-bound (ttl, default 10 minutes). Bodies in the
 * seed's GPU configurations (distributed_training, mixed_precision, gpu_memory_fraction;
 * memory_gb as a card's class) are read here too (gpumd_rest_config_decode), and the status and
 * nodes answers carry the seed's fields beside gpum's.
 */
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <gpum/alert.h>
#include <gpum/error.h>
#include <gpum/gputype.h>
#include <gpum/session.h>
#include <gpum/size.h>

#include "http_internal.h"
#include "obs_internal.h"
#include "cluster.h"
#include "devices.h"
#include "engine.h"
#include "json_in.h"
#include "json_out.h"
#include "ledger.h"
#include "obs.h"
#include "ops.h"
#include "pidstart_internal.h"
#include "rest.h"
#include "rest_internal.h"
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

gpumd_actor_t gpumd_rest_actor(const gpumd_http_call_t *call) {
  return http_actor(call);
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

int gpumd_rest_config_extras(json_t *b, gpumd_rest_config_t *cfg) {
  static const char *const flags[] = {"distributed_training", "mixed_precision"};
  bool *vals[] = {&cfg->distributed, &cfg->mixed};
  bool *has[] = {&cfg->has_distributed, &cfg->has_mixed};
  for (size_t i = 0; i < 2; i++) {
    json_t *v = json_object_get(b, flags[i]);
    *has[i] = v != NULL;
    if (v && !json_is_boolean(v))
      return gpum_error(GPUM_EINVAL, "\"%s\" must be true or false", flags[i]);
    *vals[i] = json_is_true(v);
  }
  cfg->fraction = 1.0;
  int rc = get_number(b, "gpu_memory_fraction", 0, 1, &cfg->fraction, &cfg->has_fraction);
  if (rc == 0 && cfg->has_fraction && cfg->fraction <= 0)
    rc = gpum_error(GPUM_EINVAL, "\"gpu_memory_fraction\" must be above 0 and at most 1");
  return rc;
}

/* Decodes an allocate/validate body into the reserve request (the REST names and units: GiB,
 * seconds; a TTL lease always, "http" the label unless given), and the GPU configuration's
 * fields that are not the reservation's (distributed_training, mixed_precision,
 * gpu_memory_fraction: the seed's TrainingGPUConfig) into cfg. */
static int reserve_decode(json_t *b, gpumd_reserve_req_t *out, gpumd_rest_config_t *cfg,
                          bool setup) {
#define RESERVE_FIELDS                                                                     \
  "gpu_count", "gpu_type", "memory_gb", "min_memory_gb", "devices", "priority", "timeout", \
      "on_timeout", "ttl", "label", "wait", "distributed_training", "mixed_precision",     \
      "gpu_memory_fraction", "preemptible"
  static const char *const fields[] = {RESERVE_FIELDS, NULL};
  static const char *const setup_fields[] = {RESERVE_FIELDS, "master_port", NULL};
#undef RESERVE_FIELDS
  int rc = gpumd_check_fields(b, setup ? setup_fields : fields);
  if (rc == 0)
    rc = gpumd_rest_config_extras(b, cfg);
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
  json_t *preempt = json_object_get(b, "preemptible");
  if (rc == 0 && preempt && !json_is_boolean(preempt))
    rc = gpum_error(GPUM_EINVAL, "\"preemptible\" must be true or false");
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
  q->preemptible = json_is_true(preempt);
  if (type && *type) {
    snprintf(out->model, sizeof out->model, "%s", type); /* as given: gpum_gpu_type_matches */
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

/* The memory a card of device dev's class is sold with, in GB as people write it (32 for a
 * 32 GB V100, 16 for a T4 whose driver shows 15 GiB): what its name states or its family's
 * (gpum_gpu_type_memory_gb), else its total rounded up to whole GiB. */
static double card_class_gb(gpumd_t *d, json_t *dev) {
  double total =
      (double)json_integer_value(json_object_get(json_object_get(dev, "memory"), "total"));
  double gb = ceil(total / GIB - 1e-9), named = 0;
  const char *name = json_string_value(json_object_get(dev, "name"));
  if (name && gpumd_engine_class_gb(d, name, &named) == 0 && named > gb)
    gb = named;
  return gb;
}

/* Whether a device of gpumd_engine_devices_json is of GPU type want: by its name, and by its
 * vendor for a vendor word. */
static bool device_is_of_type(const json_t *dev, const char *want) {
  const char *name = json_string_value(json_object_get(dev, "name"));
  const char *vendor = json_string_value(json_object_get(dev, "vendor"));
  return gpum_gpu_type_matches_device(want, name ? name : "", vendor);
}

/* "memory_gb" as the seed means it: a number up to a card's class (32.0 of a 32 GB V100) asks
 * for that card, not for 32 GiB, which no V100 can grant (the driver and gpumd's margin keep
 * some of it). When every matching device's capacity is below what was asked and some matching
 * device's class reaches it, gpum reserves the smallest capacity among the devices of that
 * class, and cfg->note says so. Otherwise the request is left as it is. */
static void whole_card(gpumd_t *d, gpumd_reserve_req_t *req, gpumd_rest_config_t *cfg) {
  uint64_t asked = req->q.bytes_per_gpu, grant = 0;
  double asked_gb = (double)asked / GIB;
  const char *model = NULL;
  json_t *all = gpumd_engine_devices_json(d);
  size_t i;
  json_t *dev;
  json_array_foreach(all, i, dev) {
    if (!device_is_of_type(dev, req->q.model))
      continue;
    uint64_t cap = (uint64_t)json_integer_value(json_object_get(dev, GPUM_PROTO_F_CAPACITY));
    if (cap >= asked) { /* a device that can grant it as asked: nothing to interpret */
      grant = 0;
      break;
    }
    if (card_class_gb(d, dev) + 1e-9 >= asked_gb && cap > 0 && (grant == 0 || cap < grant)) {
      grant = cap;
      model = json_string_value(json_object_get(dev, "name"));
    }
  }
  if (grant) {
    req->q.bytes_per_gpu = grant;
    char sz[32];
    gpum_size_format(grant, sz, sizeof sz);
    snprintf(cfg->note, sizeof cfg->note,
             "memory_gb %g names the memory of a %s card: gpumd reserves what it can grant of "
             "one, %s per GPU",
             asked_gb, model ? model : "GPU", sz);
    cfg->whole_card = true;
  }
  json_decref(all);
}

int gpumd_rest_config_decode(gpumd_t *d, json_t *body, bool setup, gpumd_reserve_req_t *req,
                             gpumd_rest_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  int rc = reserve_decode(body, req, cfg, setup);
  if (rc != 0)
    return rc;
  json_t *mem = json_object_get(body, "memory_gb");
  cfg->memory_gb = json_number_value(mem);
  cfg->gpu_type = json_string_value(json_object_get(body, "gpu_type"));
  whole_card(d, req, cfg);
  return 0;
}

json_t *gpumd_rest_config_json(const gpumd_reserve_req_t *req, const gpumd_rest_config_t *cfg) {
  json_t *o = json_pack("{s:I, s:s?, s:f, s:b}", "gpu_count", (json_int_t)req->q.gpus, "gpu_type",
                        cfg->gpu_type, "memory_gb", cfg->memory_gb, "distributed_training",
                        cfg->distributed);
  if (o && cfg->has_mixed)
    json_object_set_new(o, "mixed_precision", json_boolean(cfg->mixed));
  if (o && cfg->has_fraction)
    json_object_set_new(o, "gpu_memory_fraction", json_real(cfg->fraction));
  if (o)
    json_object_set_new(o, "reserved_bytes_per_gpu",
                        json_integer((json_int_t)req->q.bytes_per_gpu));
  if (o && cfg->whole_card)
    json_object_set_new(o, "note", json_string(cfg->note));
  return o;
}

/* ---- status, nodes ------------------------------------------------------------------------ */

/* A GPU type as the seed's users write it, for grouping and answers: the family the device's
 * document carries ("V100" for "Tesla V100-SXM2-32GB"; engine_devices.c reads it from the name),
 * or the name when it names none. */
#define TYPE_LEN 128
static const char *type_of(json_t *dev, char buf[TYPE_LEN]) {
  const char *t = json_string_value(json_object_get(dev, "gpu_type"));
  if (!t)
    t = json_string_value(json_object_get(dev, "name"));
  snprintf(buf, TYPE_LEN, "%s", t ? t : "");
  return buf;
}

/* Whether devices a and b are of one GPU type. */
static bool same_type(json_t *a, json_t *b) {
  char ta[TYPE_LEN], tb[TYPE_LEN];
  return strcmp(type_of(a, ta), type_of(b, tb)) == 0;
}

/* Whether a device can take a whole new job: AVAILABLE or BUSY, and nothing reserved on it
 * (the seed's "available GPUs"). */
static bool available(json_t *dev) {
  const char *st = json_string_value(json_object_get(dev, "state"));
  return st && (!strcmp(st, "AVAILABLE") || !strcmp(st, "BUSY")) &&
         json_integer_value(json_object_get(dev, "jobs")) == 0 &&
         json_integer_value(json_object_get(dev, "reserved")) == 0;
}

/* The GPU utilisation of a device's newest measured sample, 0 to 1; -1 when unknown. */
static double util_of(gpumd_t *d, json_t *dev) {
  gpum_device_sample_t s;
  unsigned idx = (unsigned)json_integer_value(json_object_get(dev, "index"));
  if (gpumd_device_measured(d, idx, &s) && gpum_sample_valid(&s, GPUM_METRIC_UTIL_GPU))
    return s.util_gpu / 100.0;
  return -1;
}

/* The seed's node entry for the devices of devs whose type is type:
 * {"node_name", "gpu_type", "available_gpus", "memory_per_gpu" (GB, the card's class),
 * "utilization" (0 to 1, mean over those with a sample)}. */
static json_t *seed_node(gpumd_t *d, const char *host, json_t *devs, const char *type) {
  unsigned avail = 0, nutil = 0;
  double util = 0, class_gb = 0;
  size_t i;
  json_t *dev;
  json_array_foreach(devs, i, dev) {
    char t[TYPE_LEN];
    if (strcmp(type_of(dev, t), type) != 0)
      continue;
    avail += available(dev);
    double u = util_of(d, dev), gb = card_class_gb(d, dev);
    if (u >= 0) {
      util += u;
      nutil++;
    }
    if (gb > class_gb)
      class_gb = gb;
  }
  return json_pack("{s:s, s:s, s:I, s:f, s:f}", "node_name", host, "gpu_type", type,
                   "available_gpus", (json_int_t)avail, "memory_per_gpu", class_gb, "utilization",
                   nutil ? util / nutil : 0.0);
}

/* The seed's status fields: "utilization" {"gpu_utilization", "gpu_memory_usage"} (0 to 1),
 * "available_nodes" (this node once per GPU type with an available GPU, then the cluster's
 * nodes with a free GPU where Slurm runs), "total_nodes" (this node and the cluster's others)
 * and "timestamp" (local time, ISO 8601 to the second). */
static void seed_status(gpumd_t *d, json_t *body, double util, uint64_t used, uint64_t total) {
  char host[256] = "", stamp[32] = "";
  gethostname(host, sizeof host - 1);
  time_t now = time(NULL);
  struct tm tm;
  if (localtime_r(&now, &tm))
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  json_t *devs = json_object_get(body, "devices"), *nodes = json_array();
  size_t i, j;
  json_t *dev, *prev;
  json_array_foreach(devs, i, dev) {
    bool seen = false;
    for (j = 0; j < i && !seen; j++) {
      prev = json_array_get(devs, j);
      seen = same_type(prev, dev);
    }
    char t[TYPE_LEN];
    json_t *n = seen ? NULL : seed_node(d, host, devs, type_of(dev, t));
    if (n && json_integer_value(json_object_get(n, "available_gpus")) > 0)
      json_array_append(nodes, n);
    json_decref(n);
  }
  json_object_set_new(body, "utilization",
                      json_pack("{s:f, s:f}", "gpu_utilization", util, "gpu_memory_usage",
                                total ? (double)used / (double)total : 0.0));
  /* Where Slurm runs, the cluster's other GPU nodes too (cluster/cluster.h): those with a GPU
   * free among the available ones, every one of them in the count. */
  json_t *free_there = gpumd_cluster_seed_nodes(d, NULL, 0, 1);
  json_t *all_there = gpumd_cluster_seed_nodes(d, NULL, 0, 0);
  json_array_extend(nodes, free_there);
  json_int_t total_nodes = 1;
  json_array_foreach(all_there, i, dev) {
    bool seen = false;
    for (j = 0; j < i && !seen; j++)
      seen = json_equal(json_object_get(dev, "node_name"),
                        json_object_get(json_array_get(all_there, j), "node_name"));
    total_nodes += !seen;
  }
  json_decref(free_there);
  json_decref(all_there);
  json_object_set_new(body, "available_nodes", nodes);
  json_object_set_new(body, "total_nodes", json_integer(total_nodes));
  json_object_set_new(body, "timestamp", json_string(stamp));
}

static json_t *ratio(uint64_t part, uint64_t total) {
  return total ? json_real((double)part / (double)total) : json_real(0);
}

/* The status body: the protocol's status (the queue without tokens: HTTP callers own none)
 * plus per-device utilisation and a node summary. The same for every caller, so it is
 * rendered once per change (gpumd_render_cached). */
static int render_status(gpumd_t *d, struct evbuffer *out) {
  gpumd_actor_t a = actor_as_daemon(false);
  json_t *body = NULL;
  int rc = gpumd_op_status(d, &a, 0, &body); /* the whole queue: no message limit here */
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
    json_t *procs = gpumd_engine_device_procs_json(d, idx);
    json_object_set_new(dev, "processes", procs ? procs : json_null());
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
  seed_status(d, body, nutil ? util / nutil : 0.0, used, total);
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
  rc = gpumd_render_cached(d, d->obs ? &d->obs->status_cache : NULL, render_status, 0, out);
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
  json_t *all = gpumd_engine_devices_json(call->d), *keep = json_array();
  size_t i;
  json_t *dev;
  json_array_foreach(all, i, dev) {
    double total =
        (double)json_integer_value(json_object_get(json_object_get(dev, "memory"), "total"));
    if (device_is_of_type(dev, type) && total >= min_gb * GIB)
      json_array_append(keep, dev);
  }
  json_decref(all);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  /* A filter that matches nothing here lists no node. The node's seed fields are those of its
   * most common GPU type among the devices listed. */
  json_t *cluster = gpumd_cluster_seed_nodes(call->d, type, min_gb, 0);
  if (!cluster) {
    json_decref(keep);
    return gpum_error(GPUM_ENOMEM, "out of memory");
  }
  if (json_array_size(keep) == 0) {
    json_decref(keep);
    call->out = json_pack("{s:o}", "nodes", cluster);
    return call->out ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
  }
  json_t *most = json_array_get(keep, 0);
  size_t best = 0;
  json_array_foreach(keep, i, dev) {
    size_t n = 0, j;
    json_t *other;
    json_array_foreach(keep, j, other) n += same_type(other, dev);
    if (n > best) {
      best = n;
      most = dev;
    }
  }
  char most_type[TYPE_LEN];
  type_of(most, most_type);
  json_t *node = seed_node(call->d, host, keep, most_type);
  if (node) {
    json_object_set_new(node, "hostname", json_string(host));
    json_object_set_new(node, "devices", keep);
  } else {
    json_decref(keep);
  }
  /* This node first, then the cluster's others as Slurm knows them (cluster/cluster.h). */
  if (node && json_array_insert_new(cluster, 0, node) != 0)
    node = NULL;
  call->out = node ? json_pack("{s:o}", "nodes", cluster) : NULL;
  if (!node)
    json_decref(cluster);
  return call->out ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
}

/* ---- validate, allocate --------------------------------------------------------------------- */

/* The seed's fields beside gpum's own in validate's and allocate's answers: what was asked
 * (gpu_config, with what gpum reserves for it) and the verdict. */
static int config_answer(gpumd_http_call_t *call, const gpumd_reserve_req_t *req,
                         const gpumd_rest_config_t *cfg, const char *verdict, bool yes) {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  json_t *gc = gpumd_rest_config_json(req, cfg);
  if (!gc || json_object_set_new(call->out, "gpu_config", gc) != 0 ||
      json_object_set_new(call->out, verdict, json_boolean(yes)) != 0 ||
      json_object_set_new(call->out, "node_name", json_string(host)) != 0)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  return 0;
}

/* Whether any device here is of type (gpum_gpu_type_matches_device). */
static bool node_has_type(gpumd_t *d, const char *type) {
  bool any = false;
  json_t *all = gpumd_engine_devices_json(d);
  size_t i;
  json_t *dev;
  json_array_foreach(all, i, dev) {
    any = any || device_is_of_type(dev, type);
  }
  json_decref(all);
  return any;
}

/* A type this node does not have: what it would take, from the type table ("would_need":
 * {"gpu_type", "gpus", "memory_per_gpu"}), and the reason says it. */
static void type_absent(gpumd_http_call_t *call, const gpumd_reserve_req_t *req,
                        const gpumd_rest_config_t *cfg) {
  double gb = 0;
  if (!cfg->gpu_type || !*cfg->gpu_type || node_has_type(call->d, cfg->gpu_type) ||
      gpumd_engine_class_gb(call->d, cfg->gpu_type, &gb) != 0)
    return;
  char why[512];
  snprintf(why, sizeof why, "this node has no %s; it would take %u %s card%s (%g GB each)",
           cfg->gpu_type, req->q.gpus, cfg->gpu_type, req->q.gpus == 1 ? "" : "s", gb);
  json_object_set_new(call->out, "reason", json_string(why));
  json_object_set_new(call->out, "would_need",
                      json_pack("{s:s, s:I, s:f}", "gpu_type", cfg->gpu_type, "gpus",
                                (json_int_t)req->q.gpus, "memory_per_gpu", gb));
}

int gpumd_http_validate(gpumd_http_call_t *call) {
  gpumd_actor_t a = http_actor(call);
  gpumd_reserve_req_t req;
  gpumd_rest_config_t cfg;
  int rc = gpumd_rest_config_decode(call->d, call->body, false, &req, &cfg);
  if (rc == 0)
    rc = gpumd_op_check(call->d, &a, &req, &call->out);
  if (rc == 0)
    rc = config_answer(call, &req, &cfg, "valid",
                       json_is_true(json_object_get(call->out, "could_fit")));
  if (rc == 0 && !json_is_true(json_object_get(call->out, "could_fit")))
    type_absent(call, &req, &cfg);
  return rc;
}

int gpumd_http_allocate(gpumd_http_call_t *call) {
  gpumd_actor_t a = http_actor(call);
  gpumd_reserve_req_t req;
  gpumd_rest_config_t cfg;
  int rc = gpumd_rest_config_decode(call->d, call->body, false, &req, &cfg);
  if (rc == 0)
    rc = gpumd_op_reserve(call->d, &a, &req, &call->out);
  if (rc == 0) {
    const char *st = json_string_value(
        json_object_get(json_object_get(call->out, GPUM_PROTO_F_RESERVATION), GPUM_PROTO_F_STATE));
    bool granted = st && !strcmp(st, GPUM_PROTO_STATE_GRANTED);
    call->status = granted ? 201 : 202;
    rc = config_answer(call, &req, &cfg, "success", granted);
  }
  return rc;
}

/* ---- reservations --------------------------------------------------------------------------- */

bool gpumd_http_owner_is_name(const char *owner) {
  char *end = NULL;
  if (!owner)
    return false;
  (void)strtoll(owner, &end, 10);
  return !*owner || *end;
}

/* The uid of the list's owner filter: a uid as it is; a user name from the user database,
 * which may block (NSS: an LDAP server away), so only in a child answering for the loop
 * (http_router.c forks for every owner given by name). On the loop, when no child could be
 * had, it is refused (EAGAIN: 503) rather than looked up there. */
static int owner_uid(const gpumd_http_call_t *call, const char *os, uint32_t *uid) {
  if (!gpumd_http_owner_is_name(os)) {
    long long v = strtoll(os, NULL, 10);
    if (v < 0 || v >= (long long)UINT32_MAX)
      return gpum_error(GPUM_EINVAL, "owner '%.32s' must be a user id or name", os);
    *uid = (uint32_t)v;
    return 0;
  }
  if (!call->forked)
    return gpum_error(GPUM_EAGAIN,
                      "owner '%.64s': user names are looked up outside gpumd's loop and no "
                      "reader is free now; retry, or give the uid",
                      os);
  struct passwd pw, *res = NULL;
  char pbuf[4096];
  if (!*os || getpwnam_r(os, &pw, pbuf, sizeof pbuf, &res) != 0 || !res)
    return gpum_error(GPUM_EINVAL, "owner '%.64s' is no user id or name on this node", os);
  *uid = (uint32_t)pw.pw_uid;
  return 0;
}

int gpumd_http_resv_list(gpumd_http_call_t *call) {
  static const char *const params[] = {"limit", "cursor", "state", "owner", "label", NULL};
  gpumd_actor_t a = http_actor(call);
  /* everyone's, and on the first page what ended lately; pages of limit, no byte bound */
  gpumd_list_req_t req = {.all = true, .ended = true, .limit = GPUMD_LIST_LIMIT_DEFAULT};
  int rc = gpumd_http_check_query(call, params);
  if (rc != 0)
    return rc;
  const char *ls = evhttp_find_header(call->query, "limit");
  const char *cs = evhttp_find_header(call->query, "cursor");
  const char *ss = evhttp_find_header(call->query, "state");
  const char *os = evhttp_find_header(call->query, "owner");
  const char *lb = evhttp_find_header(call->query, "label");
  if (ls) {
    char *end = NULL;
    long long limit = strtoll(ls, &end, 10);
    if (!*ls || *end || limit < 1 || limit > GPUMD_LIST_LIMIT_MAX)
      return gpum_error(GPUM_EINVAL, "limit '%.32s' must be an integer from 1 to %u", ls,
                        GPUMD_LIST_LIMIT_MAX);
    req.limit = (size_t)limit;
  }
  if (cs && (rc = gpumd_list_cursor_set(cs, &req)) != 0)
    return rc;
  if (ss) { /* "QUEUED", "GRANTED" or both, comma-separated */
    char buf[64];
    if (strlen(ss) >= sizeof buf || !*ss)
      return gpum_error(GPUM_EINVAL, "state '%.32s' must be QUEUED, GRANTED or QUEUED,GRANTED", ss);
    snprintf(buf, sizeof buf, "%s", ss);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
      if ((rc = gpumd_list_state_add(t, &req)) != 0)
        return rc;
  }
  if (os && (rc = owner_uid(call, os, &req.uid)) != 0)
    return rc;
  req.uid_set = os != NULL;
  if (lb && (rc = gpumd_list_label_set(lb, &req)) != 0)
    return rc;
  return gpumd_op_list(call->d, &a, &req, &call->out);
}

/* The reservation the path names ({ID}), with the protocol's messages. An id that is not UTF-8
 * reads as none ("must be a reservation id"), as it did when it went through a JSON request. */
static int path_resv(const gpumd_http_call_t *call, gpumd_resv_ref_t *out) {
  bool text = gpumd_utf8_valid(call->id, strlen(call->id));
  return gpumd_resv_ref_decode(text ? call->id : NULL, out);
}

int gpumd_http_resv_get(gpumd_http_call_t *call) {
  gpumd_actor_t a = http_actor(call);
  gpumd_release_req_t req;
  int rc = path_resv(call, &req.resv);
  return rc != 0 ? rc : gpumd_op_get(call->d, &a, &req, &call->out);
}

/* A call on the reservation of the path that takes no body (DELETE, suspend, resume): the
 * socket's op of the same request. */
typedef int (*resv_op_fn)(gpumd_t *d, const gpumd_actor_t *a, const gpumd_release_req_t *req,
                          json_t **out);
static int bodyless_resv_op(gpumd_http_call_t *call, resv_op_fn op) {
  gpumd_actor_t a = http_actor(call);
  gpumd_release_req_t req;
  int rc = json_object_size(call->body) ? gpum_error(GPUM_EINVAL, "this call takes no body") : 0;
  if (rc == 0)
    rc = path_resv(call, &req.resv);
  if (rc == 0)
    rc = op(call->d, &a, &req, &call->out);
  return rc;
}

int gpumd_http_resv_delete(gpumd_http_call_t *call) {
  return bodyless_resv_op(call, gpumd_op_release);
}

/* POST /api/v1/reservations/{ID}/suspend and /resume, no body: the socket's ops. */
int gpumd_http_resv_suspend(gpumd_http_call_t *call) {
  return bodyless_resv_op(call, gpumd_op_suspend);
}

int gpumd_http_resv_resume(gpumd_http_call_t *call) {
  return bodyless_resv_op(call, gpumd_op_resume);
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
        devs, json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:I, s:b, s:i, s:I}", "index",
                        (int)dev->index, "uuid", dev->info.uuid, "name", dev->info.name, "vendor",
                        gpumd_engine_vendor_of(dev), "state", gpum_health_state_name(h.state),
                        "reason", h.reason, "since_ns", (json_int_t)h.since_ns, "responsive",
                        h.responsive, "consecutive_failures", (int)h.consecutive_failures,
                        "last_xid", (json_int_t)h.last_xid));
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
    json_array_append_new(devs,
                          json_pack("{s:i, s:s, s:s, s:s, s:o, s:o}", "index", (int)dev->index,
                                    "uuid", dev->info.uuid, "name", dev->info.name, "vendor",
                                    gpumd_engine_vendor_of(dev), "latest", latest, "stats", stats));
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
