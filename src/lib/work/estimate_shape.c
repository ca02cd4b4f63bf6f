/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Parameters and activations of transformers, recurrent networks and MLPs, from their shape.
 *
 * Parameter counts are those of the torch.nn modules the architectures are written with
 * (nn.Linear, nn.Embedding, nn.LayerNorm, nn.LSTM, ...), so they are exact, not approximate.
 * Training activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in
 * Large Transformer Models", §4.1), generalised to any element size and to grouped-query,
 * gated and cross attention: what autograd keeps for backward, tensor by tensor. Every formula
 * is written out in docs/estimate.md; the torch test checks them (within 15%) against PyTorch.
 */
#include <math.h>

#include "work/estimate_internal.h"

uint32_t gpum__head_dim(const gpum_model_t *m) {
  return m->head_dim ? m->head_dim : m->hidden / m->heads;
}

uint32_t gpum__kv_heads(const gpum_model_t *m) {
  return m->kv_heads ? m->kv_heads : m->heads;
}

uint32_t gpum__ffn(const gpum_model_t *m) {
  return m->ffn ? m->ffn : 4 * m->hidden;
}

/* ---- transformer ---- */

/* One attention block (self or cross): q, k, v, o projections. */
static void attention_params(const gpum_model_t *m, gpum__params_t *p) {
  uint64_t h = m->hidden, ad = (uint64_t)m->heads * gpum__head_dim(m);
  uint64_t kvd = (uint64_t)gpum__kv_heads(m) * gpum__head_dim(m);
  uint64_t w = h * ad * 2 + h * kvd * 2;
  uint64_t bias = m->bias ? ad + kvd + h + (m->key_bias ? kvd : 0) : 0;
  p->total += w + bias;
  p->linear += w;
  p->factored += 2 * (h + ad) + 2 * (h + kvd) + bias;
  p->lora += 2 * (h + ad) + 2 * (h + kvd);
}

static void mlp_block_params(const gpum_model_t *m, gpum__params_t *p) {
  uint64_t h = m->hidden, f = gpum__ffn(m), n = m->gated ? 3 : 2;
  uint64_t bias = m->bias ? (n - 1) * f + h : 0;
  p->total += n * h * f + bias;
  p->linear += n * h * f;
  p->factored += n * (h + f) + bias;
  p->lora += n * (h + f);
}

static void norm_params(const gpum_model_t *m, gpum__params_t *p, uint64_t count) {
  uint64_t n = count * m->hidden * (m->rmsnorm ? 1 : 2);
  p->total += n;
  p->factored += n;
}

/* Adds rows x cols of an embedding or head matrix. */
static void matrix_params(gpum__params_t *p, uint64_t rows, uint64_t cols) {
  p->total += rows * cols;
  p->factored += rows + cols;
}

void gpum__transformer_params(const gpum_model_t *m, gpum__params_t *p) {
  uint64_t h = m->hidden;
  bool encdec = m->enc_layers > 0;
  for (uint32_t i = 0; i < m->layers + m->enc_layers; i++) {
    attention_params(m, p);
    mlp_block_params(m, p);
    norm_params(m, p, 2);
    if (encdec && i < m->layers) { /* the decoder's cross-attention */
      attention_params(m, p);
      norm_params(m, p, 1);
    }
  }
  norm_params(m, p, encdec ? 2 : 1); /* the final norm of each stack */
  if (m->vocab)
    matrix_params(p, m->vocab, h);
  if (m->positions)
    matrix_params(p, m->positions, h);
  if (m->enc_positions)
    matrix_params(p, m->enc_positions, h);
  if (m->classes) {
    matrix_params(p, m->classes, h);
    p->total += m->classes;
    p->factored += m->classes;
  } else if (m->vocab && !m->tied) {
    matrix_params(p, m->vocab, h);
  }
  if (m->patch) { /* a ViT's patch embedding (a conv with bias) and its class token */
    uint64_t conv = (uint64_t)m->channels * m->patch * m->patch * h + h;
    p->total += conv + h;
    p->factored += conv + h;
  }
  p->total += m->extra_params;
  p->factored += m->extra_params;
}

/* Bytes the inputs of n linear maps reading one norm's output over s tokens keep: that output
 * once, or, where the norm's output is fp32 under autocast (Hugging Face's code), one
 * half-precision cast per map (autocast caches the casts of weights, not of activations). */
static double norm_out_saved(const gpum_model_t *m, double b, double s, double n,
                             const gpum__act_opts_t *o) {
  return (o->r == o->e ? 1 : n) * o->e * s * b * m->hidden;
}

/* Bytes an attention block saves for backward over s query tokens and t key tokens (t == s for
 * self-attention), without its inputs (norm_out_saved): Q and K (at full heads: grouped K/V
 * are repeated first), V, the output projection's input; the softmax output (sm bytes an
 * element: fp32 where it is upcast, which the product with V then saves cast back to e), with
 * dropout its 1-byte mask and the dropped copy; the residual's dropout mask. Fused (flash)
 * attention keeps no s x t matrix: its output and one fp32 log-sum-exp per head and query
 * (Dao et al. 2022); its dropout replays the RNG. */
static double attention_saved(const gpum_model_t *m, double b, double s, double t,
                              const gpum__act_opts_t *o, double drop) {
  double h = m->hidden, ad = (double)m->heads * gpum__head_dim(m), a = m->heads, e = o->e;
  double per = o->sm + (drop > 0 ? 1 + e : (o->sm != e ? e : 0));
  double scores = o->flash ? 4 * a * s * b : a * s * t * b * per;
  return 2 * e * s * b * ad + 2 * e * t * b * ad + scores + drop * s * b * h;
}

/* Bytes a norm saves: its input and its statistics (fp32 mean and 1/std; RMSNorm: 1/rms).
 * Hugging Face's LlamaRMSNorm, in elementwise operations, keeps the fp32 upcast of its input
 * (pow's), 1/rms, and the normalised input in the input's dtype (the weight's product's). */
static double norm_saved(const gpum_model_t *m, double b, double s, const gpum__act_opts_t *o) {
  double sbh = s * b * m->hidden;
  if (o->hf && m->rmsnorm)
    return 4 * sbh + o->r * sbh + 4 * s * b;
  return o->r * sbh + (m->rmsnorm ? 4 : 8) * s * b;
}

/* One self-attention layer's saved bytes (training), s tokens: two norms, the attention with
 * its q, k, v projections' input, the feed-forward with its input; GeLU's input and output
 * (gated: gate, SiLU output, up, product). */
static double layer_saved(const gpum_model_t *m, double b, double s, const gpum__act_opts_t *o) {
  double h = m->hidden, f = gpum__ffn(m), e = o->e, drop = m->dropout ? 1 : 0;
  double mlp = norm_out_saved(m, b, s, m->gated ? 2 : 1, o) + e * s * b * (m->gated ? 4 : 2) * f +
               drop * s * b * h;
  double lora = 0;
  if (o->lora_rank) /* A's output, kept by B, for each adapted linear map */
    lora = (4 + (m->gated ? 3 : 2)) * e * s * b * o->lora_rank;
  return 2 * norm_saved(m, b, s, o) + norm_out_saved(m, b, s, 3, o) +
         attention_saved(m, b, s, s, o, drop) + mlp + lora;
}

/* The cross-attention a decoder layer adds (its own norm, Q over s, K and V over t). */
static double cross_saved(const gpum_model_t *m, double b, double s, double t,
                          const gpum__act_opts_t *o) {
  double drop = m->dropout ? 1 : 0;
  /* the K and V projections' input is the encoder's output, counted once per stack unless
   * each layer casts it (fp32 under autocast in Hugging Face's code) */
  double kv_in = o->r == o->e ? 0 : 2 * o->e * t * b * m->hidden;
  double lora = o->lora_rank ? 4 * o->e * s * b * o->lora_rank : 0;
  return norm_saved(m, b, s, o) + norm_out_saved(m, b, s, 1, o) + kv_in +
         attention_saved(m, b, s, t, o, drop) + lora;
}

/* A stack of n layers in training (checkpointing keeps each layer's input and recomputes one
 * layer at a time), with cross-attention over t encoder tokens when t > 0. */
static double stack_saved(const gpum_model_t *m, uint32_t n, double b, double s, double t,
                          const gpum__act_opts_t *o, double *layer) {
  double one = layer_saved(m, b, s, o) + (t > 0 ? cross_saved(m, b, s, t, o) : 0);
  if (one > *layer)
    *layer = one;
  if (o->checkpointing)
    return n * o->r * s * b * m->hidden + one;
  return n * one;
}

/* The largest set of live tensors while one layer runs forward (inference). */
static double layer_peak(const gpum_model_t *m, double b, double s, double t, double e,
                         bool flash) {
  double h = m->hidden, f = gpum__ffn(m), a = m->heads;
  double ad = a * gpum__head_dim(m), kvd = (double)gpum__kv_heads(m) * gpum__head_dim(m);
  /* Q, K, V and the scores with their softmax (fused attention: its output instead) */
  double attn = s * ad + 2 * t * kvd + (flash ? s * ad : 2 * a * s * t);
  double mlp = s * (m->gated ? 3 : 2) * f;
  return e * b * (2 * s * h + fmax(attn, mlp));
}

double gpum__transformer_acts(const gpum_model_t *m, double b, const gpum__act_opts_t *o,
                              double *layer) {
  double s = m->seq, t = m->enc_layers ? m->enc_seq : 0, h = m->hidden, e = o->e;
  double drop = m->dropout ? 1 : 0;
  /* the head: the final norm's output, then the log-probabilities the loss keeps and its
   * targets (int64) */
  double logits = 0;
  if (m->classes)
    logits = o->logp * b * m->classes + 8 * b;
  else if (m->vocab) /* Hugging Face's causal LM loss predicts s - 1 shifted tokens */
    logits = (o->logp * m->vocab + 8) * b * (o->hf && m->decoder && s > 1 ? s - 1 : s);
  if (!o->training) {
    double peak = layer_peak(m, b, s, s, e, o->flash);
    if (t > 0)
      peak = fmax(peak,
                  fmax(layer_peak(m, b, t, t, e, o->flash), layer_peak(m, b, s, t, e, o->flash)));
    *layer = peak;
    return peak + (m->classes ? e * b * m->classes : e * s * b * m->vocab);
  }
  *layer = 0;
  double total = 0;
  if (t > 0) /* the encoder stack, its final norm, and its output (K/V input of every layer) */
    total += stack_saved(m, m->enc_layers, b, t, 0, o, layer) + norm_saved(m, b, t, o) +
             (o->r == e ? e * t * b * h : 0) + (m->dropout ? t * b * h : 0);
  total += stack_saved(m, m->layers, b, s, t, o, layer);
  /* token ids (int64) kept by the embedding (a ViT's patch conv: the images), its dropout mask,
   * the final norm, the head's input (its output when a head is there) */
  if (m->patch)
    total += e * b * m->channels * (double)m->image * m->image;
  total += (m->vocab ? 8 * s * b : 0) + drop * s * b * h + norm_saved(m, b, s, o);
  if (m->classes || m->vocab)
    total += e * s * b * h + logits;
  /* BertForMaskedLM's head transform (dense, GeLU, LayerNorm) before the decoder: GeLU's and
   * the norm's inputs, its statistics, the decoder's input */
  if (o->hf && m->vocab && !m->classes && !m->decoder && !m->enc_layers)
    total += (2 * e + o->r) * s * b * h + 8 * s * b;
  return total;
}

/* ---- recurrent networks (torch.nn.RNN, LSTM, GRU) ---- */

static uint64_t gates(const gpum_model_t *m) {
  return m->kind == GPUM_MODEL_LSTM ? 4 : m->kind == GPUM_MODEL_GRU ? 3 : 1;
}

void gpum__rnn_params(const gpum_model_t *m, gpum__params_t *p) {
  uint64_t g = gates(m), h = m->hidden, dirs = m->bidirectional ? 2 : 1;
  for (uint32_t l = 0; l < m->layers; l++) {
    uint64_t in = l == 0 ? m->input : dirs * h;
    /* per direction: W_ih (g*h x in), W_hh (g*h x h), b_ih and b_hh (g*h each) */
    p->total += dirs * g * h * (in + h + 2);
    p->linear += dirs * g * h * (in + h);
    p->factored += dirs * ((g * h + in) + (g * h + h) + 2 * g * h);
  }
}

double gpum__rnn_acts(const gpum_model_t *m, double b, const gpum__act_opts_t *o, double *layer) {
  double h = m->hidden, s = m->seq, e = o->e, dirs = m->bidirectional ? 2 : 1;
  double g = (double)gates(m), total = 0;
  *layer = 0;
  for (uint32_t l = 0; l < m->layers; l++) {
    double in = l == 0 ? m->input : dirs * h, one;
    if (!o->training) {
      one = e * b * (s * in + 2 * s * dirs * h + g * dirs * h);
      *layer = fmax(*layer, one);
      continue;
    }
    /* The layer's input once; per step and direction, LSTM keeps h, the four gates, c and
     * tanh(c) (7h), GRU its hidden state, three gates and two products (7h), a tanh RNN its
     * output (h), plus the initial state. */
    if (m->kind == GPUM_MODEL_RNN)
      one = e * b * (s * in + dirs * (s * h + h));
    else
      one = e * b * (s * in + dirs * s * 7 * h);
    *layer = fmax(*layer, one);
    total += one;
  }
  return o->training ? total : *layer;
}

/* ---- multi-layer perceptrons ---- */

void gpum__mlp_params(const gpum_model_t *m, gpum__params_t *p) {
  for (size_t i = 0; i + 1 < m->nwidths; i++) {
    uint64_t in = m->widths[i], out = m->widths[i + 1];
    p->total += in * out + out;
    p->linear += in * out;
    p->factored += in + 2 * out;
    p->lora += in + out;
  }
}

double gpum__mlp_acts(const gpum_model_t *m, double b, const gpum__act_opts_t *o, double *layer) {
  double total = 0, last = m->widths[m->nwidths - 1];
  *layer = 0;
  for (size_t i = 0; i + 1 < m->nwidths; i++) {
    double in = m->widths[i], out = m->widths[i + 1];
    /* each linear map keeps its input (the previous ReLU's output, which that ReLU keeps) */
    total += o->e * b * in;
    *layer = fmax(*layer, o->e * b * (in + out));
  }
  if (!o->training)
    return *layer;
  return total + o->logp * b * last + 8 * b; /* log-probabilities and int64 targets */
}
