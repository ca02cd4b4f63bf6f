/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The memory estimator: how much GPU memory a training or inference job needs, before it runs.
 *
 * A model is described by a gpum_model_t: a preset ("llama-7b", "resnet50", ...), a shape
 * (transformer, cnn, rnn/lstm/gru, mlp) or a local Hugging Face config.json. The settings of
 * the job (batch, precision, mode, optimizer, activation checkpointing, KV cache, ZeRO sharding)
 * are a gpum_estimate_opts_t. gpum_estimate() turns both into bytes per device, component by
 * component. Every formula and its source is in docs/estimate.md; the tests check parameter
 * counts against published figures and PyTorch, and training activations against what PyTorch
 * saves for backward.
 *
 * Both structs are plain values: initialise them with gpum_model_init() / gpum_estimate_opts_init()
 * (or a preset), then set fields directly or by name with gpum_estimate_set(), which also reads
 * spec strings such as "llama-7b,mode=lora,batch=4,precision=bf16" (gpum_estimate_parse()).
 * Nothing here allocates, keeps global state or calls back: every function is thread-safe.
 */
#ifndef GPUM_ESTIMATE_H
#define GPUM_ESTIMATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GPUM_MODEL_TRANSFORMER,
  GPUM_MODEL_CNN,
  GPUM_MODEL_RNN, /* Elman RNN (tanh), as torch.nn.RNN */
  GPUM_MODEL_LSTM,
  GPUM_MODEL_GRU,
  GPUM_MODEL_MLP,
} gpum_model_kind_t;

/* How the model's modules are written, which decides what autograd keeps for backward.
 * GPUM_IMPL_TORCH: torch.nn modules and fused kernels (nn.LayerNorm, a fused RMSNorm that keeps
 * its input and 1/rms, softmax in the activations' dtype). GPUM_IMPL_HF: Hugging Face
 * transformers' eager modeling code (LlamaRMSNorm in elementwise operations on an fp32 upcast,
 * softmax upcast to fp32 in LLaMA-like and T5 models and under autocast, one half-precision
 * cast of a norm's fp32 output per linear map reading it under autocast, the logits upcast to
 * fp32 before the loss, BertForMaskedLM's head transform). docs/estimate.md lists each. */
typedef enum {
  GPUM_IMPL_TORCH,
  GPUM_IMPL_HF,
} gpum_model_impl_t;

typedef enum {
  GPUM_CNN_CONV,       /* out, k, stride, pad; a bias unless a bn follows */
  GPUM_CNN_BN,         /* batch norm over the channels */
  GPUM_CNN_RELU,       /* in place */
  GPUM_CNN_MAXPOOL,    /* k, stride, pad */
  GPUM_CNN_APOOL,      /* adaptive average pool to out x out */
  GPUM_CNN_FC,         /* fully connected to out (flattens first) */
  GPUM_CNN_DROPOUT,    /* p = 0.5 */
  GPUM_CNN_BASIC,      /* ResNet basic block: out channels, stride */
  GPUM_CNN_BOTTLENECK, /* ResNet bottleneck: width (out = 4 x width), stride */
} gpum_cnn_op_t;

typedef struct {
  gpum_cnn_op_t op;
  uint32_t out, k, stride, pad;
} gpum_cnn_layer_t;

#define GPUM_MODEL_MAX_LIST 64 /* CNN layers, MLP widths */
#define GPUM_MODEL_NAME_MAX 64

/* A model. Transformer fields: layers (decoder layers, or the only stack), enc_layers (the
 * encoder of an encoder-decoder such as T5 or Whisper, 0 otherwise), hidden, heads, kv_heads
 * (grouped-query attention; 0: heads), head_dim (0: hidden / heads), ffn (0: 4 x hidden), vocab,
 * seq (tokens per sample; the decoder's), enc_seq (the encoder's), positions / enc_positions
 * (learned position embeddings; 0: rotary or relative), classes (a classification head instead
 * of the language-model head; 0: none), decoder (causal: a KV cache applies), gated (SwiGLU
 * feed-forward: three matrices), bias (linear layers have biases), key_bias (so do the key
 * projections; Whisper's do not), rmsnorm (RMSNorm, weight only; else LayerNorm with bias),
 * tied (the head shares the token embedding), dropout (active in training), extra_params
 * (parameters the shape does not describe: Whisper's convolutional front end, T5's
 * relative-position buckets, BERT's pooler and token types), impl (how the
 * modules are written: GPUM_IMPL_TORCH for presets and shapes, GPUM_IMPL_HF for a config.json),
 * patch (a vision transformer's patch side in pixels, 0: not one): a ViT reads image too, its
 * tokens are seq = (image / patch)^2 + 1 (the class token) with one learned position each
 * (positions = seq), and its patch embedding (a channels -> hidden conv of patch x patch, with
 * bias) and class token are counted from patch and channels (default 3), not extra_params.
 * RNN fields: layers, input, hidden, seq, bidirectional. CNN: channels, image (side in pixels),
 * cnn[ncnn]. MLP: widths[nwidths] (input first, output last; ReLU between). */
typedef struct {
  gpum_model_kind_t kind;
  char name[GPUM_MODEL_NAME_MAX]; /* the preset's name, or the kind's */
  uint32_t layers, enc_layers, hidden, heads, kv_heads, head_dim, ffn, vocab, seq, enc_seq;
  uint32_t positions, enc_positions, classes;
  bool decoder, gated, bias, key_bias, rmsnorm, tied, dropout;
  uint64_t extra_params;
  uint32_t input;
  bool bidirectional;
  uint32_t channels, image;
  size_t ncnn;
  gpum_cnn_layer_t cnn[GPUM_MODEL_MAX_LIST];
  size_t nwidths;
  uint32_t widths[GPUM_MODEL_MAX_LIST];
  gpum_model_impl_t impl;
  uint32_t patch;
} gpum_model_t;

typedef enum {
  GPUM_PREC_FP32,
  GPUM_PREC_FP16,
  GPUM_PREC_BF16,
  GPUM_PREC_MIXED_FP16, /* fp16 compute, fp32 master weights (ZeRO's mixed precision) */
  GPUM_PREC_MIXED_BF16,
  GPUM_PREC_INT8, /* int8 weights: inference, or LoRA on a quantised base */
  GPUM_PREC_INT4, /* int4 weights with an fp16 scale per 64: inference or QLoRA */
} gpum_precision_t;

typedef enum {
  GPUM_MODE_INFERENCE,
  GPUM_MODE_TRAINING,
  GPUM_MODE_LORA, /* frozen base, trainable low-rank adapters on every linear layer */
} gpum_mode_t;

typedef enum {
  GPUM_OPT_SGD,
  GPUM_OPT_MOMENTUM,
  GPUM_OPT_ADAM,
  GPUM_OPT_ADAMW,
  GPUM_OPT_ADAM8BIT,
  GPUM_OPT_ADAFACTOR,
} gpum_optimizer_t;

/* The job's settings. batch: samples per GPU per step (a micro-batch); context: tokens the KV
 * cache holds per sequence (decoder inference; 0: the model's seq); zero_stage 0..3 shards over
 * gpus data-parallel GPUs; cuda_context: the CUDA context's bytes per device (with the framework's
 * libraries loaded); allocator_pct and allocator_base: the caching allocator's allowance,
 * allocator_pct percent of the rest plus allocator_base bytes. */
typedef struct {
  uint64_t batch;
  gpum_precision_t precision;
  gpum_mode_t mode;
  uint32_t lora_rank;
  gpum_optimizer_t optimizer;
  bool checkpointing;
  bool flash_attention; /* fused attention (FlashAttention, SDPA): no s x s scores kept */
  uint64_t context;
  uint32_t zero_stage, gpus;
  uint64_t cuda_context;
  uint32_t allocator_pct;
  uint64_t allocator_base;
} gpum_estimate_opts_t;

/* The estimate, in bytes per device (params and trainable_params are counts). */
typedef struct {
  uint64_t params, trainable_params;
  uint64_t weights, gradients, optimizer, activations, kv_cache, workspace, context, allocator;
  uint64_t total;
} gpum_estimate_t;

/* The defaults, measured with PyTorch 2.11 on an H100 (CUDA 13, driver 580; docs/hardware.md):
 * a process's memory beside what PyTorch's allocator holds was 762-766 MiB, and the allocator
 * held 4-39% (189 MiB to 1.1 GiB) more than its tensors at their peak. */
#define GPUM_ESTIMATE_CUDA_CONTEXT (UINT64_C(768) << 20)   /* default cuda_context */
#define GPUM_ESTIMATE_ALLOCATOR_PCT 10                     /* default allocator_pct */
#define GPUM_ESTIMATE_ALLOCATOR_BASE (UINT64_C(256) << 20) /* default allocator_base */

/* Sets m to an empty model of kind with the common defaults (bias, LayerNorm, tied head, one
 * layer of nothing): callers then set the shape. Never fails. */
GPUM_API void gpum_model_init(gpum_model_t *m, gpum_model_kind_t kind);

/* Sets o to the defaults: batch 1, fp32, inference, rank 8, adamw, no checkpointing, no ZeRO,
 * 1 GPU, GPUM_ESTIMATE_CUDA_CONTEXT, GPUM_ESTIMATE_ALLOCATOR_PCT, GPUM_ESTIMATE_ALLOCATOR_BASE.
 * Never fails. */
GPUM_API void gpum_estimate_opts_init(gpum_estimate_opts_t *o);

/* Fills *m with the preset called name (case-insensitive). Returns 0 or GPUM_ENOENT (the detail
 * lists the presets). */
GPUM_API int gpum_model_preset(const char *name, gpum_model_t *m);

/* The i-th preset's name, NULL past the last: for listing them. */
GPUM_API const char *gpum_model_preset_name(size_t i);

/* Reads a Hugging Face config.json (model_type llama, mistral, qwen2, gpt2, bert, roberta, t5,
 * whisper) into *m, with impl GPUM_IMPL_HF (the modeling code such a checkpoint runs with).
 * Nothing is downloaded. Returns 0, GPUM_ENOENT (no such file), GPUM_EPARSE
 * (not JSON), GPUM_EINVAL (a field missing or out of range) or GPUM_ENOTSUP (another model
 * type); the detail names the file and the field. *m is untouched on error. */
GPUM_API int gpum_model_from_hf_config(const char *path, gpum_model_t *m);

/* Sets one setting by name, as spec strings and the CLI's flags name them: the job's (batch,
 * precision, mode, lora_rank, optimizer, checkpointing, flash_attention, context, zero, gpus,
 * cuda_context, allocator) and the model's shape (layers, enc_layers, hidden, heads, kv_heads,
 * head_dim, ffn, vocab, seq, enc_seq, positions, enc_positions, classes, decoder, gated, bias,
 * rmsnorm, tied, dropout, impl "torch" or "hf", input, bidirectional, channels, image, patch,
 * mlp "784/512/10", cnn "conv:16:3/bn/relu/fc:10"; ',' also separates list items); '-' in key
 * is read as '_'. Setting image or patch on a vision transformer (patch above 0) also sets its
 * seq and positions to (image / patch)^2 + 1 when image is a multiple of patch. "preset"
 * replaces m by a preset, "kind" by an empty model of that kind, "hf" by a config.json. Returns 0,
 * GPUM_EINVAL (unknown key, bad value: the detail names both) or what gpum_model_preset /
 * gpum_model_from_hf_config return. */
GPUM_API int gpum_estimate_set(gpum_model_t *m, gpum_estimate_opts_t *o, const char *key,
                               const char *value);

/* Reads a spec "MODEL[,KEY=VALUE]...": MODEL is a preset or a kind (transformer, cnn, rnn, lstm,
 * gru, mlp), or is left out when a key such as hf= gives the model; then each setting as for
 * gpum_estimate_set. m and o are first set to the defaults. Returns as gpum_estimate_set, or
 * GPUM_EINVAL for an empty spec or one without a model. */
GPUM_API int gpum_estimate_parse(const char *spec, gpum_model_t *m, gpum_estimate_opts_t *o);

/* Checks m against o (a shape with zeros where sizes are needed, a field m's kind does not
 * read, a vision transformer whose seq or positions are not (image / patch)^2 + 1, batch 0,
 * int8/int4 full training, LoRA on a non-transformer, zero_stage > 3, gpus 0) and, when they hold,
 * fills *out. Returns 0 or GPUM_EINVAL with the reason. */
GPUM_API int gpum_estimate(const gpum_model_t *m, const gpum_estimate_opts_t *o,
                           gpum_estimate_t *out);

/* The largest batch (from 1 to 2^31) whose estimate's total fits budget bytes, into *batch;
 * o->batch is ignored. Returns 0, GPUM_ERANGE when even a batch of 1 does not fit (the detail
 * says whether the weights, gradients and optimizer state alone exceed the budget), or what
 * gpum_estimate returns. */
GPUM_API int gpum_estimate_max_batch(const gpum_model_t *m, const gpum_estimate_opts_t *o,
                                     uint64_t budget, uint64_t *batch);

/* Gradient accumulation that reaches an effective batch of effective samples per optimizer step
 * with micro-batches of at most max_micro on each of gpus GPUs: the fewest *steps, and the
 * smallest micro-batch *micro that reaches effective in that many steps (micro x steps x gpus
 * >= effective, by less than steps x gpus: the window's last micro-batch may be short).
 * Returns 0 or GPUM_EINVAL (a zero argument). */
GPUM_API int gpum_estimate_accumulation(uint64_t effective, uint64_t max_micro, uint32_t gpus,
                                        uint64_t *micro, uint64_t *steps);

/* Names as spec strings spell them ("transformer", "bf16", "lora", "adamw", "hf"); "?" when
 * unknown. */
GPUM_API const char *gpum_model_kind_name(gpum_model_kind_t kind);
GPUM_API const char *gpum_precision_name(gpum_precision_t p);
GPUM_API const char *gpum_mode_name(gpum_mode_t mode);
GPUM_API const char *gpum_optimizer_name(gpum_optimizer_t opt);
GPUM_API const char *gpum_model_impl_name(gpum_model_impl_t impl);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_ESTIMATE_H */
