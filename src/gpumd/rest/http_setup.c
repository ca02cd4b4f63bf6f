/* SPDX-License-Identifier: Apache-2.0 */
/*
 * POST /api/v1/gpu/setup-pytorch and /setup-tensorflow (docs/rest.md): how a framework should
 * use a granted reservation ({"reservation": "r-1"}), or a GPU configuration described as the
 * seed's users describe it ({"gpu_count", "gpu_type", "memory_gb", "distributed_training",
 * "mixed_precision", "gpu_memory_fraction"}) on the devices a reservation of it would get now,
 * reserving nothing. The answer: the environment of every job (libgpum's gpum_reservation_env,
 * what gpum run sets; for a distributed PyTorch set-up also libgpum's gpum_distributed_env),
 * the framework's settings (memory, distribution, precision) and the Python lines that apply
 * them.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/session.h>

#include "devices.h"
#include "http_internal.h"
#include "json_in.h"
#include "ops.h"
#include "rest_internal.h"
#include "sched.h"

#define MAX_ENV_DEVICES GPUM_CLIENT_MAX_DEVICES

/* What a set-up answers for: a granted reservation, or a configuration placed as a dry run. */
typedef struct {
  bool reserved; /* a reservation (id), or a configuration (cfg, fits_now) */
  char id[GPUMD_RESV_ID_BUFSZ];
  gpum_reservation_t grant; /* the devices as a client sees them, for the environment */
  unsigned gpus;
  uint64_t bytes_per_gpu;
  double fraction; /* reserved / total, smallest over the devices */
  bool bf16;       /* every device computes in bfloat16 (compute capability 8+) */
  bool fits_now;
  gpumd_reserve_req_t req; /* the configuration's request (!reserved) */
  gpumd_rest_config_t cfg; /* the configuration's own fields (both) */
  json_t *devices;         /* [{"index", "uuid", "name", "memory_total", "reserved"}] */
} target_t;

/* Adds device index to t (its environment, its document, the fraction, bfloat16). */
static void add_device(gpumd_t *d, target_t *t, unsigned index) {
  gpumd_device_t *dev = gpumd_device_find(d, index);
  uint64_t total = dev ? dev->info.memory_total : 0;
  const char *uuid = dev ? dev->info.uuid : "";
  if (total && (double)t->bytes_per_gpu / (double)total < t->fraction)
    t->fraction = (double)t->bytes_per_gpu / (double)total;
  if (!dev || dev->info.cc_major < 8)
    t->bf16 = false;
  if (t->grant.ndevices < MAX_ENV_DEVICES) {
    gpum_res_device_t *gd = &t->grant.devices[t->grant.ndevices++];
    gd->index = index;
    snprintf(gd->uuid, sizeof gd->uuid, "%s", uuid);
    snprintf(gd->vendor, sizeof gd->vendor, "%s", dev && dev->info.vendor ? dev->info.vendor : "");
    gd->vendor_index = dev ? dev->info.vendor_index : 0;
  }
  json_array_append_new(t->devices,
                        json_pack("{s:i, s:s, s:s, s:I, s:I}", "index", (int)index, "uuid", uuid,
                                  "name", dev ? dev->info.name : "", "memory_total",
                                  (json_int_t)total, "reserved", (json_int_t)t->bytes_per_gpu));
}

static void target_init(target_t *t, unsigned gpus, uint64_t bytes_per_gpu) {
  memset(&t->grant, 0, sizeof t->grant);
  t->gpus = gpus;
  t->bytes_per_gpu = bytes_per_gpu;
  t->grant.state = GPUM_RES_GRANTED;
  t->grant.bytes_per_gpu = bytes_per_gpu;
  t->grant.gpus = gpus;
  t->fraction = 1.0;
  t->bf16 = true;
  t->devices = json_array();
}

/* The granted reservation the body names. */
static int from_reservation(gpumd_http_call_t *call, target_t *t) {
  static const char *const fields[] = {"reservation",          "master_port",
                                       "distributed_training", "mixed_precision",
                                       "gpu_memory_fraction",  NULL};
  json_t *v = json_object_get(call->body, "reservation");
  uint64_t id = 0;
  int rc = gpumd_check_fields(call->body, fields);
  if (rc == 0 && (!json_is_string(v) || json_string_length(v) > 32))
    rc = gpum_error(GPUM_EINVAL, "\"reservation\" must be a string of at most 32 bytes");
  if (rc == 0 && gpumd_resv_id_parse(json_string_value(v), &id) != 0)
    rc = gpum_error(GPUM_EINVAL, "\"reservation\" must be a reservation id such as \"r-1\"");
  if (rc == 0) {
    memset(&t->cfg, 0, sizeof t->cfg);
    rc = gpumd_rest_config_extras(call->body, &t->cfg);
  }
  if (rc != 0)
    return rc;
  const char *s = json_string_value(v);
  const gpumd_resv_t *r = gpumd_sched_find(call->d->sched, id);
  if (!r)
    return gpum_error(GPUM_ENOENT, "no live reservation %s", s);
  if (r->state != GPUMD_RESV_GRANTED)
    return gpum_error(GPUM_ESTATE, "reservation %s is %s, not GRANTED yet", s,
                      gpumd_resv_state_name(r->state));
  t->reserved = true;
  t->fits_now = true;
  gpumd_resv_id_format(id, t->id, sizeof t->id);
  target_init(t, r->gpus, r->bytes_per_gpu);
  memcpy(t->grant.id, t->id, sizeof t->id);
  for (unsigned i = 0; i < GPUMD_SCHED_MAX_DEVICES; i++)
    if (r->device_mask >> i & 1u)
      add_device(call->d, t, i);
  return 0;
}

/* A configuration, placed as validate places it (nothing reserved). One that can never fit on
 * this node is refused with validate's reason. */
static int from_config(gpumd_http_call_t *call, const gpumd_actor_t *a, target_t *t) {
  int rc = gpumd_rest_config_decode(call->d, call->body, true, &t->req, &t->cfg);
  json_t *chk = NULL;
  if (rc == 0)
    rc = gpumd_op_check(call->d, a, &t->req, &chk);
  if (rc != 0)
    return rc;
  if (!json_is_true(json_object_get(chk, "could_fit"))) {
    rc = gpum_error(GPUMD_SCHED_ENEVERFIT, "this configuration can never fit on this node: %s",
                    json_string_value(json_object_get(chk, "reason")));
    json_decref(chk);
    return rc;
  }
  t->reserved = false;
  t->fits_now = json_is_true(json_object_get(chk, "fits_now"));
  target_init(t, t->req.q.gpus, t->req.q.bytes_per_gpu);
  size_t i;
  json_t *dev;
  json_array_foreach(json_object_get(chk, "devices"), i, dev) {
    if (json_is_integer(dev))
      add_device(call->d, t, (unsigned)json_integer_value(dev));
  }
  json_decref(chk);
  return 0;
}

/* The set-up's target: the reservation the body names, or the configuration it describes. */
static int target_of(gpumd_http_call_t *call, target_t *t) {
  memset(t, 0, sizeof *t);
  gpumd_actor_t a = gpumd_rest_actor(call);
  return json_object_get(call->body, "reservation") ? from_reservation(call, t)
                                                    : from_config(call, &a, t);
}

/* The environment of every job (libgpum's gpum_reservation_env, the variables gpum run sets),
 * as a JSON object. Without a reservation, only the devices' variables: nothing enforces a
 * limit nobody reserved. */
static json_t *job_env(const target_t *t) {
  gpum_env_var_t vars[GPUM_RESERVATION_ENV_MAX];
  size_t n = 0;
  json_t *env = json_object();
  if (!env || t->grant.ndevices == 0)
    return env;
  gpum_reservation_t g = t->grant;
  if (!t->reserved)
    snprintf(g.id, sizeof g.id, "%s", "unreserved");
  if (gpum_reservation_env(&g, vars, GPUM_RESERVATION_ENV_MAX, &n) != 0)
    return env;
  for (size_t i = 0; i < n; i++) {
    if (!t->reserved && strncmp(vars[i].name, "GPUM_", 5) == 0)
      continue;
    json_object_set_new(env, vars[i].name, json_string(vars[i].value));
  }
  return env;
}

/* What both set-ups answer beside their framework's part. */
static json_t *answer(const target_t *t, const char *framework, json_t *env, json_t *settings,
                      const char *code) {
  json_t *o = json_pack("{s:s?, s:s, s:b, s:b, s:o, s:o, s:s}", "reservation",
                        t->reserved ? t->id : NULL, "framework", framework, "reserved", t->reserved,
                        "fits_now", t->fits_now, "env", env, "settings", settings, "python", code);
  if (o && !t->reserved) {
    json_object_set_new(o, "gpu_config", gpumd_rest_config_json(&t->req, &t->cfg));
    json_object_set_new(
        o, "note",
        json_string(t->fits_now ? "nothing is reserved: POST /api/v1/gpu/allocate holds it"
                                : "no devices have room for it now: POST /api/v1/gpu/allocate "
                                  "queues it"));
  }
  return o;
}

/* Whether the set-up is for several processes: distributed_training when given, else more
 * than one GPU. */
static bool distributed(const target_t *t) {
  return t->cfg.has_distributed ? t->cfg.distributed : t->gpus > 1;
}

int gpumd_http_setup_pytorch(gpumd_http_call_t *call) {
  target_t t;
  int rc = target_of(call, &t);
  json_t *port_v = json_object_get(call->body, "master_port");
  if (rc == 0 && port_v &&
      (!json_is_integer(port_v) || json_integer_value(port_v) < 1 ||
       json_integer_value(port_v) > 65535))
    rc = gpum_error(GPUM_EINVAL, "\"master_port\" must be an integer from 1 to 65535");
  if (rc != 0) {
    json_decref(t.devices);
    return rc;
  }
  long long port = port_v ? json_integer_value(port_v) : GPUM_DISTRIBUTED_MASTER_PORT;
  unsigned n = t.gpus;
  bool dist = distributed(&t);
  double fraction = floor(t.fraction * t.cfg.fraction * 10000.0) / 10000.0;
  json_t *env = job_env(&t);
  char code[1024], run[128];
  gpum_env_var_t dvars[GPUM_DISTRIBUTED_ENV_MAX];
  size_t ndvars = 0;
  if (dist && env &&
      gpum_distributed_env(n, (unsigned)port, dvars, GPUM_DISTRIBUTED_ENV_MAX, &ndvars) == 0)
    for (size_t i = 0; i < ndvars; i++) /* libgpum's table, as gpum run sets it */
      json_object_set_new(env, dvars[i].name, json_string(dvars[i].value));
  const char *dtype = t.bf16 ? "bfloat16" : "float16";
  int len = snprintf(code, sizeof code,
                     "import torch\nfor i in range(torch.cuda.device_count()):\n"
                     "    torch.cuda.set_per_process_memory_fraction(%.4f, i)\n",
                     fraction);
  if (t.cfg.mixed && len > 0 && (size_t)len < sizeof code)
    snprintf(code + len, sizeof code - (size_t)len,
             "# mixed precision: run the forward pass under autocast%s\n"
             "autocast = torch.autocast(\"cuda\", dtype=torch.%s)\n%s",
             t.bf16 ? "" : ", scale the loss", dtype,
             t.bf16 ? "" : "scaler = torch.cuda.amp.GradScaler()\n");
  snprintf(run, sizeof run, "torchrun --standalone --nnodes=1 --nproc-per-node=%u TRAIN.py", n);
  json_t *settings =
      json_pack("{s:f, s:I, s:s*, s:s, s:o}", "per_process_memory_fraction", fraction,
                "nproc_per_node", (json_int_t)n, "distributed_backend", dist ? "nccl" : NULL,
                "launch", dist ? run : "python TRAIN.py", "devices", t.devices);
  if (settings && t.cfg.has_mixed)
    json_object_set_new(
        settings, "mixed_precision",
        t.cfg.mixed ? json_pack("{s:s, s:b}", "autocast_dtype", dtype, "grad_scaler", !t.bf16)
                    : json_false());
  call->out = answer(&t, "pytorch", env, settings, code);
  return call->out ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
}

int gpumd_http_setup_tensorflow(gpumd_http_call_t *call) {
  target_t t;
  int rc = target_of(call, &t);
  if (rc == 0 && json_object_get(call->body, "master_port"))
    rc = gpum_error(GPUM_EINVAL, "unknown field 'master_port'");
  if (rc != 0) {
    json_decref(t.devices);
    return rc;
  }
  unsigned n = t.gpus;
  bool dist = distributed(&t);
  json_int_t mib = (json_int_t)((double)(t.bytes_per_gpu >> 20) * t.cfg.fraction);
  const char *policy = t.bf16 ? "mixed_bfloat16" : "mixed_float16";
  json_t *env = job_env(&t);
  json_object_set_new(env, "TF_FORCE_GPU_ALLOW_GROWTH", json_string("true"));
  char code[1024];
  snprintf(code, sizeof code,
           "import tensorflow as tf\nfor gpu in tf.config.list_physical_devices(\"GPU\"):\n"
           "    tf.config.set_logical_device_configuration(\n"
           "        gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=%lld)])\n%s%s%s%s",
           (long long)mib, t.cfg.mixed ? "tf.keras.mixed_precision.set_global_policy(\"" : "",
           t.cfg.mixed ? policy : "", t.cfg.mixed ? "\")\n" : "",
           dist ? "strategy = tf.distribute.MirroredStrategy(\n"
                  "    cross_device_ops=tf.distribute.NcclAllReduce())\n"
                : "");
  json_t *settings =
      json_pack("{s:b, s:I, s:I, s:s, s:o}", "memory_growth", 1, "memory_limit_mib", mib, "gpus",
                (json_int_t)n, "strategy", dist ? "MirroredStrategy(NcclAllReduce)" : "default",
                "devices", t.devices);
  if (settings && t.cfg.has_mixed)
    json_object_set_new(settings, "mixed_precision_policy",
                        json_string(t.cfg.mixed ? policy : "float32"));
  call->out = answer(&t, "tensorflow", env, settings, code);
  return call->out ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
}
