/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Convolutional networks as a list of layers ("conv:64:7:2:3,bn,relu,maxpool:3:2:1,basic:64,
 * ...,apool:1,fc:1000"): parsing the list, counting its parameters as torch.nn.Conv2d,
 * BatchNorm2d and Linear hold them, and its activations by walking the shapes layer by layer.
 *
 * Training activations are what autograd keeps for backward, each tensor once: a conv, pool or
 * linear layer keeps its input; a batch norm its input and two fp32 vectors per channel; an
 * in-place ReLU its output (the same storage as its input); a max pool also its int64 indices;
 * a dropout its 1-byte mask. ResNet's blocks are walked as torchvision writes them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>

#include "work/estimate_internal.h"

static const char *const op_names[] = {
    [GPUM_CNN_CONV] = "conv",
    [GPUM_CNN_BN] = "bn",
    [GPUM_CNN_RELU] = "relu",
    [GPUM_CNN_MAXPOOL] = "maxpool",
    [GPUM_CNN_APOOL] = "apool",
    [GPUM_CNN_FC] = "fc",
    [GPUM_CNN_DROPOUT] = "dropout",
    [GPUM_CNN_BASIC] = "basic",
    [GPUM_CNN_BOTTLENECK] = "bottleneck",
};
#define NOPS (sizeof op_names / sizeof op_names[0])

/* How many numbers each op takes: at least, at most. */
static const unsigned char op_args[NOPS][2] = {
    [GPUM_CNN_CONV] = {2, 4},    [GPUM_CNN_BN] = {0, 0},    [GPUM_CNN_RELU] = {0, 0},
    [GPUM_CNN_MAXPOOL] = {1, 3}, [GPUM_CNN_APOOL] = {1, 1}, [GPUM_CNN_FC] = {1, 1},
    [GPUM_CNN_DROPOUT] = {0, 0}, [GPUM_CNN_BASIC] = {1, 2}, [GPUM_CNN_BOTTLENECK] = {1, 2},
};

/* Parses one item "op[:n[:n...]]" of length len. */
static int parse_item(const char *item, size_t len, gpum_cnn_layer_t *l) {
  char buf[64];
  if (len == 0 || len >= sizeof buf)
    return gpum_error(GPUM_EINVAL, "cnn: bad layer '%.*s'", (int)len, item);
  memcpy(buf, item, len);
  buf[len] = '\0';
  size_t nl = strcspn(buf, ":");
  size_t op = 0;
  while (op < NOPS && (strlen(op_names[op]) != nl || strncmp(buf, op_names[op], nl) != 0))
    op++;
  if (op == NOPS)
    return gpum_error(GPUM_EINVAL,
                      "cnn: unknown layer '%s' (conv, bn, relu, maxpool, apool, fc, dropout, "
                      "basic, bottleneck)",
                      buf);
  uint32_t v[4] = {0, 0, 0, 0};
  unsigned n = 0;
  for (const char *p = buf + nl; *p == ':'; n++) {
    char *end = NULL;
    unsigned long x = strtoul(p + 1, &end, 10);
    if (n >= 4 || end == p + 1 || x == 0 || x > UINT32_MAX || (*end && *end != ':'))
      return gpum_error(GPUM_EINVAL, "cnn: bad numbers in '%s'", buf);
    v[n] = (uint32_t)x;
    p = end;
  }
  if (n < op_args[op][0] || n > op_args[op][1])
    return gpum_error(GPUM_EINVAL, "cnn: '%s' takes %u to %u numbers", buf, op_args[op][0],
                      op_args[op][1]);
  *l = (gpum_cnn_layer_t){.op = (gpum_cnn_op_t)op, .out = v[0]};
  switch (l->op) {
  case GPUM_CNN_CONV: /* out, k, stride (1), pad (k / 2) */
    l->k = v[1];
    l->stride = n > 2 ? v[2] : 1;
    l->pad = n > 3 ? v[3] : v[1] / 2;
    break;
  case GPUM_CNN_MAXPOOL: /* k, stride (k), pad (0) */
    l->out = 0;
    l->k = v[0];
    l->stride = n > 1 ? v[1] : v[0];
    l->pad = n > 2 ? v[2] : 0;
    break;
  case GPUM_CNN_BASIC:
  case GPUM_CNN_BOTTLENECK:
    l->stride = n > 1 ? v[1] : 1;
    break;
  default:
    break;
  }
  return 0;
}

int gpum__cnn_parse(const char *list, gpum_model_t *m) {
  gpum_cnn_layer_t layers[GPUM_MODEL_MAX_LIST];
  size_t n = 0;
  const char *p = list;
  while (*p) {
    size_t len = strcspn(p, ",/");
    if (n == GPUM_MODEL_MAX_LIST)
      return gpum_error(GPUM_EINVAL, "cnn: more than %d layers", GPUM_MODEL_MAX_LIST);
    int rc = parse_item(p, len, &layers[n++]);
    if (rc != 0)
      return rc;
    p += len;
    if (*p)
      p++;
  }
  if (n == 0)
    return gpum_error(GPUM_EINVAL, "cnn: no layers");
  memcpy(m->cnn, layers, n * sizeof layers[0]);
  m->ncnn = n;
  return 0;
}

/* The walk's state: channels, side, whether flattened, and the tensor in hand (elements per
 * sample) with whether something already keeps it. */
typedef struct {
  double c, side, cur;
  bool flat, kept;
  double saved, fixed, peak; /* bytes per sample kept; bytes independent of the batch */
  gpum__params_t *p;
  double e;
} walk_t;

static void keep(walk_t *w) {
  if (!w->kept)
    w->saved += w->e * w->cur;
  w->kept = true;
}

/* A new tensor of c x side x side comes out of a layer. */
static void produce(walk_t *w) {
  double out = w->flat ? w->c : w->c * w->side * w->side;
  w->peak = fmax(w->peak, w->e * (w->cur + out));
  w->cur = out;
  w->kept = false;
}

static void conv(walk_t *w, uint32_t out, uint32_t k, uint32_t stride, uint32_t pad, bool bias) {
  uint64_t wts = (uint64_t)out * (uint64_t)w->c * k * k;
  w->p->total += wts + (bias ? out : 0);
  w->p->linear += wts;
  /* Adafactor factors the last two dimensions: rows out*in*k, cols out*in*k */
  w->p->factored += 2 * (uint64_t)out * (uint64_t)w->c * k + (bias ? out : 0);
  keep(w);
  w->c = out;
  w->side = floor((w->side + 2.0 * pad - k) / stride) + 1;
  produce(w);
}

static void bn(walk_t *w) {
  w->p->total += 2 * (uint64_t)w->c;
  w->p->factored += 2 * (uint64_t)w->c;
  keep(w);
  w->fixed += 8 * w->c; /* save_mean and save_invstd, fp32 */
  produce(w);
}

/* In place: the output replaces the input in the same storage, and ReLU keeps it. */
static void relu(walk_t *w) {
  keep(w);
}

/* A residual add of the block's main path (in hand) and the shortcut, then ReLU in place. */
static void add_relu(walk_t *w) {
  produce(w);
  keep(w);
}

/* torchvision's BasicBlock / Bottleneck; the shortcut is a 1x1 conv + bn when the shape
 * changes. */
static void block(walk_t *w, const gpum_cnn_layer_t *l) {
  bool neck = l->op == GPUM_CNN_BOTTLENECK;
  double out = neck ? 4.0 * l->out : l->out;
  walk_t in = *w; /* the block's input, for the shortcut */
  bool down = l->stride != 1 || w->c != out;
  if (neck) {
    conv(w, l->out, 1, 1, 0, false);
    bn(w);
    relu(w);
    conv(w, l->out, 3, l->stride, 1, false);
    bn(w);
    relu(w);
    conv(w, (uint32_t)out, 1, 1, 0, false);
    bn(w);
  } else {
    conv(w, l->out, 3, l->stride, 1, false);
    bn(w);
    relu(w);
    conv(w, l->out, 3, 1, 1, false);
    bn(w);
  }
  if (down) { /* the shortcut conv keeps the block's input, already kept by the first conv */
    walk_t s = *w;
    s.c = in.c;
    s.side = in.side;
    s.cur = in.cur;
    s.kept = true;
    conv(&s, (uint32_t)out, 1, l->stride, 0, false);
    bn(&s);
    w->saved = s.saved;
    w->fixed = s.fixed;
    w->peak = fmax(w->peak, s.peak);
  }
  add_relu(w);
}

static void walk(const gpum_model_t *m, double e, gpum__params_t *p, walk_t *w) {
  *w = (walk_t){.c = m->channels, .side = m->image, .e = e, .p = p};
  w->cur = w->c * w->side * w->side;
  for (size_t i = 0; i < m->ncnn; i++) {
    const gpum_cnn_layer_t *l = &m->cnn[i];
    switch (l->op) {
    case GPUM_CNN_CONV:
      conv(w, l->out, l->k, l->stride, l->pad, i + 1 >= m->ncnn || m->cnn[i + 1].op != GPUM_CNN_BN);
      break;
    case GPUM_CNN_BN:
      bn(w);
      break;
    case GPUM_CNN_RELU:
      relu(w);
      break;
    case GPUM_CNN_MAXPOOL:
      keep(w);
      w->side = floor((w->side + 2.0 * l->pad - l->k) / l->stride) + 1;
      produce(w);
      w->saved += 8 * w->cur; /* the int64 indices of the maxima */
      break;
    case GPUM_CNN_APOOL:
      keep(w);
      w->side = l->out;
      produce(w);
      break;
    case GPUM_CNN_FC: {
      if (!w->flat) { /* flatten: a view of the same storage */
        w->c *= w->side * w->side;
        w->side = 1;
        w->flat = true;
      }
      uint64_t in = (uint64_t)w->c;
      p->total += in * l->out + l->out;
      p->linear += in * l->out;
      p->factored += in + 2 * (uint64_t)l->out;
      p->lora += in + l->out;
      keep(w);
      w->c = l->out;
      produce(w);
      break;
    }
    case GPUM_CNN_DROPOUT:
      w->saved += w->cur; /* a 1-byte mask; the output is a new tensor */
      produce(w);
      break;
    case GPUM_CNN_BASIC:
    case GPUM_CNN_BOTTLENECK:
      block(w, l);
      break;
    }
  }
}

void gpum__cnn_params(const gpum_model_t *m, gpum__params_t *p) {
  walk_t w;
  walk(m, 4, p, &w);
}

double gpum__cnn_acts(const gpum_model_t *m, double b, const gpum__act_opts_t *o, double *layer) {
  gpum__params_t p = {0};
  walk_t w;
  walk(m, o->e, &p, &w);
  *layer = w.peak * b;
  if (!o->training)
    return w.peak * b;
  /* the log-probabilities of the loss over the last layer's outputs, and int64 targets */
  return w.saved * b + w.fixed + o->logp * b * w.cur + 8 * b;
}
