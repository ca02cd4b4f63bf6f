/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The estimator's pieces shared between its files: parameter counts with the breakdown the
 * byte formulas need (estimate_model.c) and activation bytes (estimate_act.c).
 */
#ifndef GPUM_ESTIMATE_INTERNAL_H
#define GPUM_ESTIMATE_INTERNAL_H

#include <gpum/estimate.h>

typedef struct {
  uint64_t total;    /* every parameter, as torch's sum(p.numel() for p in model.parameters()) */
  uint64_t linear;   /* weights of the repeated layers' linear maps: what int8/int4 quantise */
  uint64_t factored; /* Adafactor's second moment: rows + cols per matrix, size per vector */
  uint64_t lora;     /* sum of in + out over the linear maps LoRA adapts (times rank: adapters) */
} gpum__params_t;

/* How activations are counted. e: bytes of an activation element; logp: bytes of an element of
 * the loss's log-probabilities. Training: what autograd saves for backward (checkpointing: each
 * layer's input plus one layer recomputed); inference: the peak of live tensors. */
typedef struct {
  double e, logp;
  bool training, checkpointing, flash;
  uint32_t lora_rank; /* LoRA: its adapters' intermediates */
  /* Transformers (docs/estimate.md): r, bytes of an element of the residual stream and of the
   * norms' inputs and outputs (fp32 under autocast in Hugging Face's code, else e); sm, bytes
   * of an element of the softmax's output (4 where it is upcast); hf, Hugging Face's modeling
   * code (impl=hf). */
  double r, sm;
  bool hf;
} gpum__act_opts_t;

/* Per kind (estimate_shape.c, estimate_cnn.c): the parameters, and the activation bytes of a
 * batch of b, with *layer the largest single layer's share (the transient of its backward). */
void gpum__transformer_params(const gpum_model_t *m, gpum__params_t *p);
double gpum__transformer_acts(const gpum_model_t *m, double b, const gpum__act_opts_t *a,
                              double *layer);
void gpum__rnn_params(const gpum_model_t *m, gpum__params_t *p);
double gpum__rnn_acts(const gpum_model_t *m, double b, const gpum__act_opts_t *a, double *layer);
void gpum__mlp_params(const gpum_model_t *m, gpum__params_t *p);
double gpum__mlp_acts(const gpum_model_t *m, double b, const gpum__act_opts_t *a, double *layer);
void gpum__cnn_params(const gpum_model_t *m, gpum__params_t *p);
double gpum__cnn_acts(const gpum_model_t *m, double b, const gpum__act_opts_t *a, double *layer);

/* Reads a CNN layer list ("conv:64:7:2:3,bn,relu,maxpool:3:2:1,basic:64,apool:1,fc:1000"; ','
 * or '/' between layers) into m->cnn. Returns 0 or GPUM_EINVAL naming the bad item. */
int gpum__cnn_parse(const char *list, gpum_model_t *m);

/* The transformer's head dimension, KV heads and FFN width with the defaults applied. */
uint32_t gpum__head_dim(const gpum_model_t *m);
uint32_t gpum__kv_heads(const gpum_model_t *m);
uint32_t gpum__ffn(const gpum_model_t *m);

/* A vision transformer's tokens per image, (image / patch)^2 + 1 (m->patch must be above 0). */
uint32_t gpum__vit_tokens(const gpum_model_t *m);

/* Returns 0 when m's shape has every size it needs, else GPUM_EINVAL with the reason. */
int gpum__model_check(const gpum_model_t *m);

/* Counts m's parameters (m must pass gpum__model_check). */
void gpum__model_params(const gpum_model_t *m, gpum__params_t *p);

/* Activation bytes of m for a batch of b (m must pass gpum__model_check). */
double gpum__activations(const gpum_model_t *m, double b, const gpum__act_opts_t *a, double *layer);

#endif /* GPUM_ESTIMATE_INTERNAL_H */
