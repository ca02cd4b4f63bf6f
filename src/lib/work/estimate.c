/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The estimate itself: bytes per device for weights, gradients, optimizer state, activations,
 * KV cache, workspace, the CUDA context and the allocator's allowance; the largest batch within
 * a budget; gradient accumulation for an effective batch.
 *
 * Bytes per parameter follow the ZeRO paper (Rajbhandari et al. 2020, §3.1): with mixed
 * precision and Adam, 2 (fp16 weights) + 2 (fp16 gradients) + 12 (fp32 master weights,
 * momentum and variance); stage 1 shards the optimizer state over the data-parallel GPUs,
 * stage 2 the gradients too, stage 3 the weights too. The formulas are in docs/estimate.md.
 */
#include <math.h>
#include <stdio.h>

#include <gpum/error.h>
#include <gpum/size.h>

#include "work/estimate_internal.h"

/* cuBLAS's workspace: PyTorch's default CUBLAS_WORKSPACE_CONFIG on Hopper (":4096:8"). */
#define CUBLAS_WORKSPACE (32.0 * 1024 * 1024)

void gpum_estimate_opts_init(gpum_estimate_opts_t *o) {
  *o = (gpum_estimate_opts_t){
      .batch = 1,
      .precision = GPUM_PREC_FP32,
      .mode = GPUM_MODE_INFERENCE,
      .lora_rank = 8,
      .optimizer = GPUM_OPT_ADAMW,
      .gpus = 1,
      .cuda_context = GPUM_ESTIMATE_CUDA_CONTEXT,
      .allocator_pct = GPUM_ESTIMATE_ALLOCATOR_PCT,
      .allocator_base = GPUM_ESTIMATE_ALLOCATOR_BASE,
  };
}

static uint64_t bytes(double x) {
  if (!(x > 0))
    return 0;
  return x >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)ceil(x);
}

static uint64_t add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static int check_opts(const gpum_model_t *m, const gpum_estimate_opts_t *o) {
  bool quant = o->precision == GPUM_PREC_INT8 || o->precision == GPUM_PREC_INT4;
  if ((unsigned)o->precision > GPUM_PREC_INT4 || (unsigned)o->mode > GPUM_MODE_LORA ||
      (unsigned)o->optimizer > GPUM_OPT_ADAFACTOR)
    return gpum_error(GPUM_EINVAL, "unknown precision, mode or optimizer");
  if (o->gpus == 0)
    return gpum_error(GPUM_EINVAL, "gpus must be at least 1");
  if (o->zero_stage > 3)
    return gpum_error(GPUM_EINVAL, "zero stage %u: stages are 0 to 3", o->zero_stage);
  if (quant && o->mode == GPUM_MODE_TRAINING)
    return gpum_error(GPUM_EINVAL,
                      "%s weights cannot be trained: use mode=lora (a quantised "
                      "base with trainable adapters) or mode=inference",
                      gpum_precision_name(o->precision));
  if (o->mode == GPUM_MODE_LORA && o->lora_rank == 0)
    return gpum_error(GPUM_EINVAL, "lora_rank must be at least 1");
  if (o->mode == GPUM_MODE_LORA && m->kind != GPUM_MODEL_TRANSFORMER && m->kind != GPUM_MODEL_MLP)
    return gpum_error(GPUM_EINVAL, "mode=lora is estimated for transformers and MLPs only");
  return 0;
}

/* Optimizer state bytes per trainable parameter (before the fp32 master copy). */
static double state_bytes(const gpum_estimate_opts_t *o, const gpum__params_t *p,
                          double trainable) {
  bool half = o->precision == GPUM_PREC_FP16 || o->precision == GPUM_PREC_BF16;
  double se = half ? 2 : 4; /* torch keeps state in the parameters' dtype */
  switch (o->optimizer) {
  case GPUM_OPT_SGD:
    return 0;
  case GPUM_OPT_MOMENTUM:
    return se * trainable;
  case GPUM_OPT_ADAM:
  case GPUM_OPT_ADAMW:
    return 2 * se * trainable;
  case GPUM_OPT_ADAM8BIT: /* two 1-byte states, an fp32 absmax per 2048-value block each */
    return (2 + 8.0 / 2048) * trainable;
  case GPUM_OPT_ADAFACTOR: /* the factored second moment: rows + cols per matrix */
    return se * (o->mode == GPUM_MODE_LORA ? (double)p->lora : (double)p->factored);
  }
  return 0;
}

/* The estimate for a batch of b (0: the part that does not depend on the batch). */
static void compute(const gpum_model_t *m, const gpum_estimate_opts_t *o, uint64_t b,
                    gpum_estimate_t *out) {
  gpum__params_t p;
  gpum__model_params(m, &p);
  bool train = o->mode != GPUM_MODE_INFERENCE, lora = o->mode == GPUM_MODE_LORA;
  bool fp32 = o->precision == GPUM_PREC_FP32;
  bool mixed = o->precision == GPUM_PREC_MIXED_FP16 || o->precision == GPUM_PREC_MIXED_BF16;
  double e = fp32 ? 4 : 2, P = (double)p.total, lin = (double)p.linear;
  double w;
  if (o->precision == GPUM_PREC_INT8) /* quantised linear maps; the rest stays 16-bit */
    w = lin + 2 * (P - lin);
  else if (o->precision == GPUM_PREC_INT4) /* and an fp16 scale per group of 64 */
    w = lin * (0.5 + 2.0 / 64) + 2 * (P - lin);
  else
    w = P * e;
  double trainable = train ? (lora ? (double)o->lora_rank * (double)p.lora : P) : 0;
  /* LoRA adapters on a quantised or fp32 base are fp32; else in the compute dtype */
  double ab = lora ? (o->precision >= GPUM_PREC_INT8 || fp32 ? 4 : 2) : e;
  if (lora)
    w += trainable * ab;
  double grads = trainable * ab;
  double opt = train ? state_bytes(o, &p, trainable) + (mixed ? 4 * trainable : 0) : 0;
  double g = o->gpus;
  if (o->zero_stage >= 1)
    opt /= g;
  if (o->zero_stage >= 2)
    grads /= g;
  if (o->zero_stage >= 3)
    w /= g;

  /* Hugging Face's code (impl=hf): under autocast the residual stream and the norms are fp32
   * (the embeddings' fp32 output, LayerNorm in autocast's fp32 list, LlamaRMSNorm's upcast and
   * fp32 weight); softmax is upcast under autocast and in the RMSNorm models (LLaMA and kin,
   * T5), whose code asks for it; the logits are upcast before the loss. */
  bool hf = m->kind == GPUM_MODEL_TRANSFORMER && m->impl == GPUM_IMPL_HF;
  gpum__act_opts_t a = {.e = e,
                        .logp = mixed || hf ? 4 : e,
                        .training = train,
                        .checkpointing = train && o->checkpointing,
                        .flash = o->flash_attention,
                        .lora_rank = lora ? o->lora_rank : 0,
                        .r = hf && mixed ? 4 : e,
                        .sm = hf && (mixed || m->rmsnorm) ? 4 : e,
                        .hf = hf};
  double layer = 0, acts = 0, kv = 0, ws = CUBLAS_WORKSPACE;
  if (b > 0)
    acts = gpum__activations(m, (double)b, &a, &layer);
  if (m->kind == GPUM_MODEL_TRANSFORMER) {
    double kvd = (double)gpum__kv_heads(m) * gpum__head_dim(m);
    double ctx = o->context ? (double)o->context : m->seq;
    if (!train && m->decoder) /* K and V per layer and token (and the encoder's for cross) */
      kv = 2.0 * m->layers * (double)b * (ctx + (m->enc_layers ? m->enc_seq : 0)) * kvd * e;
    /* the logits beside their log-probabilities; Hugging Face's loss also holds their fp32
     * upcast and, for a causal LM, the shifted copy */
    if (train && m->vocab && !m->classes)
      ws +=
          (e + (hf && e != 4 ? 4 : 0) + (hf && m->decoder ? 4 : 0)) * (double)b * m->seq * m->vocab;
  }
  if (train) /* one layer's backward: gradients the size of what it kept */
    ws += layer;

  *out = (gpum_estimate_t){.params = p.total, .trainable_params = bytes(trainable)};
  out->weights = bytes(w);
  out->gradients = bytes(grads);
  out->optimizer = bytes(opt);
  out->activations = bytes(acts);
  out->kv_cache = bytes(kv);
  out->workspace = bytes(ws);
  out->context = o->cuda_context;
  uint64_t sum = 0;
  sum = add(sum, out->weights);
  sum = add(sum, out->gradients);
  sum = add(sum, out->optimizer);
  sum = add(sum, out->activations);
  sum = add(sum, out->kv_cache);
  sum = add(sum, out->workspace);
  out->allocator = add(bytes((double)sum * o->allocator_pct / 100.0), o->allocator_base);
  out->total = add(add(sum, out->allocator), out->context);
}

int gpum_estimate(const gpum_model_t *m, const gpum_estimate_opts_t *o, gpum_estimate_t *out) {
  int rc = gpum__model_check(m);
  if (rc == 0)
    rc = check_opts(m, o);
  if (rc != 0)
    return rc;
  if (o->batch == 0)
    return gpum_error(GPUM_EINVAL, "batch must be at least 1");
  compute(m, o, o->batch, out);
  return 0;
}

int gpum_estimate_max_batch(const gpum_model_t *m, const gpum_estimate_opts_t *o, uint64_t budget,
                            uint64_t *batch) {
  const uint64_t cap = UINT64_C(1) << 31;
  char need[GPUM_SIZE_BUFSZ], have[GPUM_SIZE_BUFSZ];
  gpum_estimate_t est;
  int rc = gpum__model_check(m);
  if (rc == 0)
    rc = check_opts(m, o);
  if (rc != 0)
    return rc;
  compute(m, o, 0, &est);
  if (est.total > budget)
    return gpum_error(GPUM_ERANGE,
                      "budget %s is below what the model needs before any batch: %s (weights, "
                      "gradients, optimizer state, workspace and CUDA context)",
                      gpum_size_format(budget, have, sizeof have),
                      gpum_size_format(est.total, need, sizeof need));
  compute(m, o, 1, &est);
  if (est.total > budget)
    return gpum_error(GPUM_ERANGE, "budget %s is below what a batch of 1 needs: %s",
                      gpum_size_format(budget, have, sizeof have),
                      gpum_size_format(est.total, need, sizeof need));
  uint64_t lo = 1, hi = 2; /* total(lo) fits; find the first hi that does not */
  for (;; hi *= 2) {
    if (hi > cap) {
      hi = cap + 1;
      break;
    }
    compute(m, o, hi, &est);
    if (est.total > budget)
      break;
    lo = hi;
  }
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    compute(m, o, mid, &est);
    if (est.total <= budget)
      lo = mid;
    else
      hi = mid;
  }
  *batch = lo;
  return 0;
}

int gpum_estimate_accumulation(uint64_t effective, uint64_t max_micro, uint32_t gpus,
                               uint64_t *micro, uint64_t *steps) {
  if (effective == 0 || max_micro == 0 || gpus == 0)
    return gpum_error(GPUM_EINVAL, "effective batch, micro-batch and GPUs must be at least 1");
  uint64_t per_step = max_micro * gpus; /* samples of one micro-step over all GPUs */
  uint64_t n = (effective + per_step - 1) / per_step;
  uint64_t per_gpu = (effective + gpus - 1) / gpus;
  *steps = n;
  *micro = (per_gpu + n - 1) / n;
  return 0;
}
