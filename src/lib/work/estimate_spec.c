/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Settings by name: one key=value at a time (gpum_estimate_set, which the CLI's flags use too),
 * spec strings "llama-7b,mode=lora,batch=4" (gpum_estimate_parse), and the names of the enums.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gpum/error.h>
#include <gpum/size.h>

#include "work/estimate_internal.h"

static const char *const kind_names[] = {"transformer", "cnn", "rnn", "lstm", "gru", "mlp"};
static const char *const prec_names[] = {"fp32",       "fp16", "bf16", "mixed-fp16",
                                         "mixed-bf16", "int8", "int4"};
static const char *const mode_names[] = {"inference", "training", "lora"};
static const char *const opt_names[] = {"sgd",   "momentum", "adam",
                                        "adamw", "adam8bit", "adafactor"};
static const char *const impl_names[] = {"torch", "hf"};
#define N(a) (sizeof(a) / sizeof(a)[0])

static const char *name_of(const char *const *names, size_t n, int v) {
  return v >= 0 && (size_t)v < n ? names[v] : "?";
}

const char *gpum_model_kind_name(gpum_model_kind_t kind) {
  return name_of(kind_names, N(kind_names), (int)kind);
}
const char *gpum_precision_name(gpum_precision_t p) {
  return name_of(prec_names, N(prec_names), (int)p);
}
const char *gpum_mode_name(gpum_mode_t mode) {
  return name_of(mode_names, N(mode_names), (int)mode);
}
const char *gpum_optimizer_name(gpum_optimizer_t opt) {
  return name_of(opt_names, N(opt_names), (int)opt);
}
const char *gpum_model_impl_name(gpum_model_impl_t impl) {
  return name_of(impl_names, N(impl_names), (int)impl);
}

/* Finds value among names (case-insensitive; '_' reads as '-'), else -1. */
static int lookup(const char *const *names, size_t n, const char *value) {
  char v[32];
  size_t i = 0;
  for (; value[i] && i + 1 < sizeof v; i++)
    v[i] = value[i] == '_' ? '-' : value[i];
  v[i] = '\0';
  for (size_t k = 0; k < n; k++)
    if (!strcasecmp(names[k], v))
      return (int)k;
  return -1;
}

static int bad(const char *key, const char *value, const char *want) {
  return gpum_error(GPUM_EINVAL, "%s: invalid value '%s' (expected %s)", key, value, want);
}

static int parse_u64(const char *key, const char *v, uint64_t max, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  if (*v < '0' || *v > '9')
    return bad(key, v, "a whole number");
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || *end || x > max)
    return bad(key, v, "a whole number in range");
  *out = x;
  return 0;
}

static int parse_u32(const char *key, const char *v, uint32_t *out) {
  uint64_t x = 0;
  int rc = parse_u64(key, v, UINT32_MAX, &x);
  if (rc == 0)
    *out = (uint32_t)x;
  return rc;
}

static int parse_bool(const char *key, const char *v, bool *out) {
  if (!*v || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcmp(v, "1") ||
      !strcasecmp(v, "on"))
    *out = true;
  else if (!strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcmp(v, "0") ||
           !strcasecmp(v, "off"))
    *out = false;
  else
    return bad(key, v, "true or false");
  return 0;
}

static int parse_enum(const char *key, const char *v, const char *const *names, size_t n,
                      int *out) {
  int i = lookup(names, n, v);
  if (i < 0) {
    char want[160] = "one of";
    size_t o = strlen(want);
    for (size_t k = 0; k < n && o < sizeof want; k++) {
      int w = snprintf(want + o, sizeof want - o, "%s %s", k ? "," : "", names[k]);
      o += w > 0 ? (size_t)w : 0;
    }
    return bad(key, v, want);
  }
  *out = i;
  return 0;
}

/* "784/512/10" or "784,512,10" into m->widths. */
static int parse_widths(const char *v, gpum_model_t *m) {
  uint32_t w[GPUM_MODEL_MAX_LIST];
  size_t n = 0;
  const char *p = v;
  while (*p) {
    char *end = NULL;
    errno = 0;
    unsigned long x = strtoul(p, &end, 10);
    if (end == p || errno || x == 0 || x > UINT32_MAX || (*end && *end != ',' && *end != '/') ||
        n == GPUM_MODEL_MAX_LIST)
      return bad("mlp", v, "widths such as 784/512/10");
    w[n++] = (uint32_t)x;
    p = *end ? end + 1 : end;
  }
  if (n < 2)
    return bad("mlp", v, "at least an input and an output width");
  memcpy(m->widths, w, n * sizeof w[0]);
  m->nwidths = n;
  return 0;
}

/* The model's integer fields by key. */
static uint32_t *shape_field(gpum_model_t *m, const char *key) {
  static const struct {
    const char *key;
    size_t off;
  } f[] = {
      {"layers", offsetof(gpum_model_t, layers)},
      {"enc_layers", offsetof(gpum_model_t, enc_layers)},
      {"hidden", offsetof(gpum_model_t, hidden)},
      {"heads", offsetof(gpum_model_t, heads)},
      {"kv_heads", offsetof(gpum_model_t, kv_heads)},
      {"head_dim", offsetof(gpum_model_t, head_dim)},
      {"ffn", offsetof(gpum_model_t, ffn)},
      {"vocab", offsetof(gpum_model_t, vocab)},
      {"seq", offsetof(gpum_model_t, seq)},
      {"enc_seq", offsetof(gpum_model_t, enc_seq)},
      {"positions", offsetof(gpum_model_t, positions)},
      {"enc_positions", offsetof(gpum_model_t, enc_positions)},
      {"classes", offsetof(gpum_model_t, classes)},
      {"input", offsetof(gpum_model_t, input)},
      {"channels", offsetof(gpum_model_t, channels)},
      {"image", offsetof(gpum_model_t, image)},
      {"patch", offsetof(gpum_model_t, patch)},
  };
  for (size_t i = 0; i < N(f); i++)
    if (!strcmp(f[i].key, key))
      return (uint32_t *)(void *)((char *)m + f[i].off);
  return NULL;
}

static bool *flag_field(gpum_model_t *m, gpum_estimate_opts_t *o, const char *key) {
  if (!strcmp(key, "decoder"))
    return &m->decoder;
  if (!strcmp(key, "gated"))
    return &m->gated;
  if (!strcmp(key, "bias"))
    return &m->bias;
  if (!strcmp(key, "rmsnorm"))
    return &m->rmsnorm;
  if (!strcmp(key, "tied"))
    return &m->tied;
  if (!strcmp(key, "dropout"))
    return &m->dropout;
  if (!strcmp(key, "bidirectional"))
    return &m->bidirectional;
  if (!strcmp(key, "checkpointing"))
    return &o->checkpointing;
  if (!strcmp(key, "flash_attention"))
    return &o->flash_attention;
  return NULL;
}

/* The job's settings: 1 when key is not one of them. */
static int set_job(gpum_estimate_opts_t *o, const char *key, const char *v) {
  int e = 0, rc = 0;
  uint64_t x = 0;
  if (!strcmp(key, "batch"))
    return parse_u64(key, v, UINT32_MAX, &o->batch);
  if (!strcmp(key, "context"))
    return parse_u64(key, v, UINT32_MAX, &o->context);
  if (!strcmp(key, "lora_rank"))
    return parse_u32(key, v, &o->lora_rank);
  if (!strcmp(key, "zero"))
    return parse_u32(key, v, &o->zero_stage);
  if (!strcmp(key, "gpus"))
    return parse_u32(key, v, &o->gpus);
  if (!strcmp(key, "allocator"))
    return parse_u32(key, v, &o->allocator_pct);
  if (!strcmp(key, "allocator_base")) {
    if (gpum_size_parse(v, &x) != 0)
      return bad(key, v, "a size such as 256MiB");
    o->allocator_base = x;
    return 0;
  }
  if (!strcmp(key, "cuda_context")) {
    if (gpum_size_parse(v, &x) != 0)
      return bad(key, v, "a size such as 512MiB");
    o->cuda_context = x;
    return 0;
  }
  if (!strcmp(key, "precision")) {
    if ((rc = parse_enum(key, v, prec_names, N(prec_names), &e)) == 0)
      o->precision = (gpum_precision_t)e;
    return rc;
  }
  if (!strcmp(key, "mode")) {
    if ((rc = parse_enum(key, v, mode_names, N(mode_names), &e)) == 0)
      o->mode = (gpum_mode_t)e;
    return rc;
  }
  if (!strcmp(key, "optimizer")) {
    if ((rc = parse_enum(key, v, opt_names, N(opt_names), &e)) == 0)
      o->optimizer = (gpum_optimizer_t)e;
    return rc;
  }
  return 1;
}

int gpum_estimate_set(gpum_model_t *m, gpum_estimate_opts_t *o, const char *key,
                      const char *value) {
  char k[32];
  size_t i = 0;
  if (key == NULL || value == NULL)
    return gpum_error(GPUM_EINVAL, "a setting needs a key and a value");
  for (; key[i] && i + 1 < sizeof k; i++)
    k[i] = key[i] == '-' ? '_' : key[i];
  k[i] = '\0';
  int rc = set_job(o, k, value);
  if (rc <= 0)
    return rc;
  if (!strcmp(k, "preset"))
    return gpum_model_preset(value, m);
  if (!strcmp(k, "hf"))
    return gpum_model_from_hf_config(value, m);
  if (!strcmp(k, "kind")) {
    int e = 0;
    if ((rc = parse_enum(k, value, kind_names, N(kind_names), &e)) == 0)
      gpum_model_init(m, (gpum_model_kind_t)e);
    return rc;
  }
  if (!strcmp(k, "mlp")) {
    m->kind = GPUM_MODEL_MLP;
    return parse_widths(value, m);
  }
  if (!strcmp(k, "cnn")) {
    m->kind = GPUM_MODEL_CNN;
    if (m->channels == 0)
      m->channels = 3;
    return gpum__cnn_parse(value, m);
  }
  if (!strcmp(k, "impl")) {
    int e = 0;
    if ((rc = parse_enum(k, value, impl_names, N(impl_names), &e)) == 0)
      m->impl = (gpum_model_impl_t)e;
    return rc;
  }
  uint32_t *u = shape_field(m, k);
  if (u) {
    rc = parse_u32(k, value, u);
    if (rc == 0 && m->kind == GPUM_MODEL_TRANSFORMER && m->patch &&
        (!strcmp(k, "image") || !strcmp(k, "patch")) && m->image % m->patch == 0) {
      /* a vision transformer: one token per patch plus the class token, a position each */
      if (m->channels == 0)
        m->channels = 3;
      m->seq = m->positions = gpum__vit_tokens(m);
    }
    return rc;
  }
  bool *b = flag_field(m, o, k);
  if (b) {
    rc = parse_bool(k, value, b);
    if (rc == 0 && !strcmp(k, "bias"))
      m->key_bias = m->bias;
    return rc;
  }
  return gpum_error(GPUM_EINVAL, "unknown setting '%s'", key);
}

int gpum_estimate_parse(const char *spec, gpum_model_t *m, gpum_estimate_opts_t *o) {
  char buf[1024];
  gpum_model_t tm;
  gpum_estimate_opts_t to;
  if (spec == NULL || *spec == '\0')
    return gpum_error(GPUM_EINVAL, "empty estimate spec (expected MODEL[,KEY=VALUE]...)");
  if (strlen(spec) >= sizeof buf)
    return gpum_error(GPUM_EINVAL, "estimate spec longer than %zu bytes", sizeof buf - 1);
  snprintf(buf, sizeof buf, "%s", spec);
  gpum_model_init(&tm, GPUM_MODEL_TRANSFORMER);
  gpum_estimate_opts_init(&to);
  bool have_model = false;
  char *save = NULL;
  for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    int rc;
    if (eq == NULL && !have_model) {
      int kind = lookup(kind_names, N(kind_names), item);
      if (kind >= 0) {
        gpum_model_init(&tm, (gpum_model_kind_t)kind);
        rc = 0;
      } else {
        rc = gpum_model_preset(item, &tm);
      }
      have_model = true;
    } else if (eq == NULL) {
      rc = gpum_estimate_set(&tm, &to, item, ""); /* a bare flag: checkpointing */
    } else {
      *eq = '\0';
      rc = gpum_estimate_set(&tm, &to, item, eq + 1);
      if (rc == 0 && (!strcmp(item, "preset") || !strcmp(item, "hf") || !strcmp(item, "kind") ||
                      !strcmp(item, "mlp") || !strcmp(item, "cnn")))
        have_model = true;
    }
    if (rc != 0)
      return rc;
  }
  if (!have_model)
    return gpum_error(GPUM_EINVAL, "estimate spec '%s' names no model", spec);
  *m = tm;
  *o = to;
  return 0;
}
