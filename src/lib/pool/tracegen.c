/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A synthetic allocation log of transformer training (include/gpum/pool_replay.h), for replay
 * benchmarks and tests that must not depend on recorded traces.
 *
 * The model is a GPT-style decoder (pre-LayerNorm blocks of attention and a 4x MLP, a separate
 * LM head) trained with mixed precision and Adam, allocating tensor by tensor as an eager
 * framework does: parameters and fp32 master weights first; per step the forward pass saves
 * what backward needs and frees its temporaries at once; the loss upcasts the logits to fp32;
 * backward walks the layers from the top, freeing each layer's saved tensors as it goes and
 * allocating weight gradients that live until zero_grad; the optimizer allocates its two moments
 * on the first step and short-lived scratch per parameter. The sequence length changes every
 * step, so activation sizes vary and a caching allocator must reuse blocks of other sizes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/pool_replay.h>

#define BASE_ADDR 0x7f0000000000ull
#define MAX_PARAMS 16

typedef struct {
  uint64_t ptr, size;
} tensor_t;

typedef struct {
  FILE *out;
  uint64_t time, next_addr, rng, events;
  int err;
} gen_t;

static uint64_t rng_next(gen_t *g) {
  uint64_t z = (g->rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void row(gen_t *g, const char *action, const tensor_t *t) {
  if (g->err)
    return;
  if (fprintf(g->out, "0,%llu,%s,0x%llx,%llu,0\n", (unsigned long long)g->time++, action,
              (unsigned long long)t->ptr, (unsigned long long)t->size) < 0)
    g->err = gpum_error(GPUM_EIO, "cannot write the trace");
  g->events++;
}

/* Addresses are never reused, so every pointer is unique in the log. */
static tensor_t t_alloc(gen_t *g, uint64_t size) {
  tensor_t t = {.ptr = g->next_addr, .size = size ? size : 1};
  g->next_addr += (t.size + 1023) / 512 * 512;
  row(g, "allocate", &t);
  return t;
}

static void t_free(gen_t *g, tensor_t *t) {
  if (t->ptr)
    row(g, "free", t);
  t->ptr = 0;
}

/* Shapes of one step. */
typedef struct {
  const gpum_tracegen_transformer_t *p;
  uint64_t tok, h, dt, ss; /* tokens (batch x seq), hidden, dtype bytes, batch x heads x seq^2 */
  uint64_t att_ws;         /* attention workspace */
} shape_t;

/* Per-layer parameter shapes (elements): ln1 w+b, qkv w, qkv b, out w, out b, ln2 w+b, ff1 w,
 * ff1 b, ff2 w, ff2 b. */
static unsigned layer_params(uint64_t h, uint64_t *n) {
  uint64_t v[] = {2 * h, 3 * h * h, 3 * h, h * h, h, 2 * h, 4 * h * h, 4 * h, 4 * h * h, h};
  memcpy(n, v, sizeof v);
  return sizeof v / sizeof v[0];
}

/* What a layer's forward pass keeps for backward. */
typedef struct {
  tensor_t in, ln1, ln1_stats, qkv, probs, mask, lse, attn, drop1, x1, ln2, ln2_stats, ff1, gelu,
      drop2;
} saved_t;

static void forward_layer(gen_t *g, const shape_t *s, tensor_t in, saved_t *sv) {
  uint64_t th = s->tok * s->h * s->dt;
  memset(sv, 0, sizeof *sv);
  sv->in = in;
  sv->ln1 = t_alloc(g, th);
  sv->ln1_stats = t_alloc(g, s->tok * 8);
  sv->qkv = t_alloc(g, 3 * th);
  if (s->p->flash_attention) {
    tensor_t ws = t_alloc(g, s->att_ws);
    sv->attn = t_alloc(g, th);
    sv->lse = t_alloc(g, s->tok * s->p->heads * 4);
    t_free(g, &ws);
  } else {
    tensor_t scores = t_alloc(g, s->ss * s->dt);
    sv->probs = t_alloc(g, s->ss * s->dt);
    t_free(g, &scores);
    sv->mask = t_alloc(g, s->ss);
    sv->attn = t_alloc(g, th);
  }
  tensor_t proj = t_alloc(g, th);
  sv->drop1 = t_alloc(g, s->tok * s->h);
  sv->x1 = t_alloc(g, th);
  t_free(g, &proj);
  sv->ln2 = t_alloc(g, th);
  sv->ln2_stats = t_alloc(g, s->tok * 8);
  sv->ff1 = t_alloc(g, 4 * th);
  sv->gelu = t_alloc(g, 4 * th);
  sv->drop2 = t_alloc(g, s->tok * s->h);
}

/* Backward of one layer: takes the gradient of its output, returns that of its input. */
static tensor_t backward_layer(gen_t *g, const shape_t *s, saved_t *sv, tensor_t gout,
                               tensor_t *grads) {
  uint64_t th = s->tok * s->h * s->dt, n[MAX_PARAMS];
  layer_params(s->h, n);
  /* MLP */
  tensor_t g_ff2_in = t_alloc(g, 4 * th);
  grads[9] = t_alloc(g, n[9] * s->dt);
  grads[8] = t_alloc(g, n[8] * s->dt);
  t_free(g, &sv->drop2);
  t_free(g, &sv->gelu);
  tensor_t g_ff1 = t_alloc(g, 4 * th);
  t_free(g, &g_ff2_in);
  grads[7] = t_alloc(g, n[7] * s->dt);
  grads[6] = t_alloc(g, n[6] * s->dt);
  t_free(g, &sv->ff1);
  tensor_t g_ln2 = t_alloc(g, th);
  t_free(g, &g_ff1);
  grads[5] = t_alloc(g, n[5] * s->dt);
  t_free(g, &sv->ln2);
  t_free(g, &sv->ln2_stats);
  tensor_t g_x1 = t_alloc(g, th);
  t_free(g, &g_ln2);
  t_free(g, &gout);
  /* attention */
  tensor_t g_attn = t_alloc(g, th);
  grads[4] = t_alloc(g, n[4] * s->dt);
  grads[3] = t_alloc(g, n[3] * s->dt);
  t_free(g, &sv->drop1);
  t_free(g, &sv->x1);
  tensor_t g_qkv;
  if (s->p->flash_attention) {
    tensor_t ws = t_alloc(g, 2 * s->att_ws);
    g_qkv = t_alloc(g, 3 * th);
    t_free(g, &ws);
    t_free(g, &sv->lse);
  } else {
    tensor_t g_probs = t_alloc(g, s->ss * s->dt);
    t_free(g, &sv->mask);
    tensor_t g_scores = t_alloc(g, s->ss * s->dt);
    t_free(g, &g_probs);
    t_free(g, &sv->probs);
    g_qkv = t_alloc(g, 3 * th);
    t_free(g, &g_scores);
  }
  t_free(g, &sv->attn);
  t_free(g, &g_attn);
  grads[2] = t_alloc(g, n[2] * s->dt);
  grads[1] = t_alloc(g, n[1] * s->dt);
  t_free(g, &sv->qkv);
  tensor_t g_ln1 = t_alloc(g, th);
  t_free(g, &g_qkv);
  grads[0] = t_alloc(g, n[0] * s->dt);
  t_free(g, &sv->ln1);
  t_free(g, &sv->ln1_stats);
  tensor_t g_in = t_alloc(g, th);
  t_free(g, &g_ln1);
  t_free(g, &g_x1);
  t_free(g, &sv->in);
  return g_in;
}

/* Model-level tensors: embedding, final LayerNorm, LM head, then per layer. */
typedef struct {
  tensor_t *w, *master, *m, *v, *grad;
  uint64_t *numel;
  unsigned n;
} params_t;

static void alloc_params(gen_t *g, const gpum_tracegen_transformer_t *p, params_t *pr) {
  uint64_t h = p->hidden, n[MAX_PARAMS];
  unsigned k = 0, np = layer_params(h, n);
  pr->numel[k++] = (uint64_t)p->vocab * h; /* embedding */
  pr->numel[k++] = 2 * h;                  /* final LayerNorm */
  pr->numel[k++] = (uint64_t)p->vocab * h; /* LM head */
  for (unsigned l = 0; l < p->layers; l++)
    for (unsigned i = 0; i < np; i++)
      pr->numel[k++] = n[i];
  pr->n = k;
  for (unsigned i = 0; i < k; i++) {
    pr->w[i] = t_alloc(g, pr->numel[i] * p->dtype_bytes);
    if (p->dtype_bytes < 4)
      pr->master[i] = t_alloc(g, pr->numel[i] * 4);
  }
}

static void optimizer_step(gen_t *g, params_t *pr, bool first) {
  tensor_t norm = t_alloc(g, 4 * pr->n); /* per-tensor grad norms for clipping */
  tensor_t total = t_alloc(g, 4);
  t_free(g, &norm);
  t_free(g, &total);
  for (unsigned i = 0; i < pr->n; i++) {
    if (first) {
      pr->m[i] = t_alloc(g, pr->numel[i] * 4);
      pr->v[i] = t_alloc(g, pr->numel[i] * 4);
    }
    tensor_t g32 = t_alloc(g, pr->numel[i] * 4); /* the gradient upcast to fp32 */
    tensor_t upd = t_alloc(g, pr->numel[i] * 4);
    t_free(g, &g32);
    t_free(g, &upd);
  }
  for (unsigned i = 0; i < pr->n; i++) /* zero_grad(set_to_none=True) */
    t_free(g, &pr->grad[i]);
}

static void train_step(gen_t *g, const gpum_tracegen_transformer_t *p, params_t *pr, saved_t *sv,
                       bool first) {
  unsigned half = p->seq / 2 < 8 ? 8 : p->seq / 2;
  uint64_t seq = half + rng_next(g) % (p->seq - half + 1);
  seq = seq < 16 ? 8 : seq / 8 * 8;
  shape_t s = {.p = p, .tok = seq * p->batch, .h = p->hidden, .dt = p->dtype_bytes};
  s.ss = (uint64_t)p->batch * p->heads * seq * seq;
  s.att_ws = s.tok * p->heads * 16;
  uint64_t th = s.tok * s.h * s.dt, tv = s.tok * p->vocab;
  tensor_t ids = t_alloc(g, s.tok * 8), labels = t_alloc(g, s.tok * 8);
  tensor_t x = t_alloc(g, th); /* embedding output */
  for (unsigned l = 0; l < p->layers; l++) {
    forward_layer(g, &s, x, &sv[l]);
    x = t_alloc(g, th); /* the block's output (residual) */
  }
  tensor_t ln_f = t_alloc(g, th), logits = t_alloc(g, tv * s.dt);
  tensor_t logits32 = t_alloc(g, tv * 4), logp = t_alloc(g, tv * 4);
  t_free(g, &logits32);
  tensor_t loss = t_alloc(g, 4);
  /* backward */
  tensor_t g_logp = t_alloc(g, tv * 4);
  t_free(g, &logp);
  tensor_t g_logits = t_alloc(g, tv * s.dt);
  t_free(g, &g_logp);
  t_free(g, &logits);
  pr->grad[2] = t_alloc(g, pr->numel[2] * s.dt);
  tensor_t gx = t_alloc(g, th);
  t_free(g, &g_logits);
  pr->grad[1] = t_alloc(g, pr->numel[1] * s.dt);
  t_free(g, &ln_f);
  t_free(g, &x);
  uint64_t n[MAX_PARAMS];
  unsigned np = layer_params(s.h, n);
  for (unsigned l = p->layers; l-- > 0;)
    gx = backward_layer(g, &s, &sv[l], gx, &pr->grad[3 + l * np]);
  pr->grad[0] = t_alloc(g, pr->numel[0] * s.dt);
  t_free(g, &gx);
  t_free(g, &ids);
  t_free(g, &labels);
  t_free(g, &loss);
  optimizer_step(g, pr, first);
}

void gpum_tracegen_transformer_init(gpum_tracegen_transformer_t *p) {
  if (!p)
    return;
  *p = (gpum_tracegen_transformer_t){.layers = 12,
                                     .hidden = 1024,
                                     .heads = 16,
                                     .seq = 1024,
                                     .batch = 8,
                                     .vocab = 32000,
                                     .steps = 4,
                                     .dtype_bytes = 2,
                                     .flash_attention = false,
                                     .seed = 1};
}

static int check(const char *name, uint64_t v, uint64_t lo, uint64_t hi) {
  if (v < lo || v > hi)
    return gpum_error(GPUM_EINVAL, "transformer trace: %s %llu out of range [%llu, %llu]", name,
                      (unsigned long long)v, (unsigned long long)lo, (unsigned long long)hi);
  return 0;
}

static int check_params(const gpum_tracegen_transformer_t *p) {
  int rc;
  if ((rc = check("layers", p->layers, 1, 1024)) || (rc = check("hidden", p->hidden, 8, 65536)) ||
      (rc = check("heads", p->heads, 1, 1024)) || (rc = check("seq", p->seq, 8, 131072)) ||
      (rc = check("batch", p->batch, 1, 4096)) || (rc = check("vocab", p->vocab, 1, 1000000)) ||
      (rc = check("steps", p->steps, 1, 100000)))
    return rc;
  if (p->hidden % p->heads)
    return gpum_error(GPUM_EINVAL, "transformer trace: hidden %u is not a multiple of heads %u",
                      p->hidden, p->heads);
  if (p->dtype_bytes != 2 && p->dtype_bytes != 4)
    return gpum_error(GPUM_EINVAL, "transformer trace: dtype of %u bytes (expected 2 or 4)",
                      p->dtype_bytes);
  return 0;
}

int gpum_tracegen_transformer(const gpum_tracegen_transformer_t *p, FILE *out, uint64_t *events) {
  if (!p || !out)
    return gpum_error(GPUM_EINVAL, "gpum_tracegen_transformer: NULL argument");
  int rc = check_params(p);
  if (rc)
    return rc;
  size_t nparams = 3 + (size_t)p->layers * MAX_PARAMS;
  tensor_t *t = calloc(nparams * 5, sizeof *t);
  uint64_t *numel = calloc(nparams, sizeof *numel);
  saved_t *sv = calloc(p->layers, sizeof *sv);
  if (!t || !numel || !sv) {
    rc = gpum_error(GPUM_ENOMEM, "out of memory for %zu parameters", nparams);
    goto out_free;
  }
  params_t pr = {.w = t,
                 .master = t + nparams,
                 .m = t + 2 * nparams,
                 .v = t + 3 * nparams,
                 .grad = t + 4 * nparams,
                 .numel = numel};
  gen_t g = {.out = out, .next_addr = BASE_ADDR, .rng = p->seed};
  if (fprintf(out, "Thread,Time,Action,Pointer,Size,Stream\n") < 0)
    g.err = gpum_error(GPUM_EIO, "cannot write the trace");
  alloc_params(&g, p, &pr);
  for (unsigned k = 0; k < p->steps && !g.err; k++)
    train_step(&g, p, &pr, sv, k == 0);
  if (!g.err && fflush(out))
    g.err = gpum_error(GPUM_EIO, "cannot write the trace");
  rc = g.err;
  if (events)
    *events = g.events;
out_free:
  free(sv);
  free(numel);
  free(t);
  return rc;
}
