/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the memory estimator: every preset's parameter count against its published
 * figure, the byte formulas on small cases computed by hand (transformer activations, ZeRO's
 * bytes per parameter and stages, KV cache, LoRA, LSTM and MLP), spec strings and settings,
 * Hugging Face config.json files (good, malformed, incomplete, unknown), the largest batch
 * within a budget, accumulation steps, and the errors for impossible requests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/estimate.h>

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

/* Published parameter counts: the reference implementations' sum of parameter sizes (Hugging
 * Face transformers' BertModel, T5ForConditionalGeneration, WhisperForConditionalGeneration,
 * LlamaForCausalLM, MistralForCausalLM, GPT2LMHeadModel; torchvision's resnet18, resnet50,
 * vgg16, vit_b_16). lstm-2x1024 is torch.nn.LSTM(1024, 1024, 2). */
static void test_presets_published_counts(void **state) {
  (void)state;
  static const struct {
    const char *name;
    uint64_t params;
  } cases[] = {
      {"gpt2", 124439808},        {"gpt2-medium", 354823168},   {"bert-base", 109482240},
      {"bert-large", 335141888},  {"t5-base", 222903552},       {"llama-7b", 6738415616},
      {"llama-13b", 13015864320}, {"llama-70b", 68976648192},   {"mistral-7b", 7241732096},
      {"resnet18", 11689512},     {"resnet50", 25557032},       {"vgg16", 138357544},
      {"vit-b16", 86567656},      {"whisper-small", 241734912}, {"lstm-2x1024", 16793600},
  };
  size_t n = 0;
  while (gpum_model_preset_name(n))
    n++;
  assert_int_equal(n, sizeof cases / sizeof cases[0]);
  for (size_t i = 0; i < n; i++) {
    gpum_model_t m;
    gpum_estimate_opts_t o;
    gpum_estimate_t e;
    assert_int_equal(gpum_model_preset(cases[i].name, &m), 0);
    assert_string_equal(m.name, cases[i].name);
    gpum_estimate_opts_init(&o);
    assert_int_equal(gpum_estimate(&m, &o, &e), 0);
    if (e.params != cases[i].params)
      fail_msg("%s: %llu parameters, published %llu", cases[i].name, (unsigned long long)e.params,
               (unsigned long long)cases[i].params);
  }
  gpum_model_t m;
  assert_int_equal(gpum_model_preset("LLaMA-7B", &m), 0); /* case-insensitive */
}

/* A one-layer transformer small enough to count by hand (docs/estimate.md's formulas):
 * h 8, 2 heads, ffn 32, vocab 10, 4 learned positions, seq 4, batch 2, fp32, no dropout. */
static void tiny(gpum_model_t *m) {
  gpum_model_init(m, GPUM_MODEL_TRANSFORMER);
  m->layers = 1;
  m->hidden = 8;
  m->heads = 2;
  m->ffn = 32;
  m->vocab = 10;
  m->positions = 4;
  m->seq = 4;
  m->decoder = true;
}

static void test_transformer_by_hand(void **state) {
  (void)state;
  gpum_model_t m;
  gpum_estimate_opts_t o;
  gpum_estimate_t e;
  tiny(&m);
  gpum_estimate_opts_init(&o);
  o.batch = 2;
  o.mode = GPUM_MODE_TRAINING;
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  /* attention 4*64 + 4*8, mlp 2*8*32 + 32 + 8, two norms 2*16, final norm 16, tokens 80,
   * positions 32, tied head */
  assert_int_equal(e.params, 288 + 552 + 32 + 16 + 80 + 32);
  assert_int_equal(e.trainable_params, 1000);
  assert_int_equal(e.weights, 4000);
  assert_int_equal(e.gradients, 4000);
  assert_int_equal(e.optimizer, 8000); /* adamw, fp32: two 4-byte states */
  /* per layer: norms 2*(4*sbh + 8*sb) = 640; attention 4*sb*(h + 4*h) + a*s*s*b*4 = 1536;
   * mlp 4*sb*(h + 2f) = 2304: 4480. Then ids 8*sb = 64, final norm 320, head input 256,
   * log-probs 4*sb*v + targets 8*sb = 384. */
  assert_int_equal(e.activations, 4480 + 64 + 320 + 256 + 384);
  assert_int_equal(e.workspace, 32 * MiB + 4480 + 320);
  assert_int_equal(e.kv_cache, 0);
  assert_int_equal(e.context, GPUM_ESTIMATE_CUDA_CONTEXT);
  uint64_t sum = e.weights + e.gradients + e.optimizer + e.activations + e.workspace;
  assert_int_equal(e.allocator, (sum * 10 + 99) / 100 + 256 * MiB);
  assert_int_equal(e.total, sum + e.allocator + e.context);

  /* dropout adds the 1-byte masks and the dropped copy of the scores (Korthikanti's 5as^2b at
   * 2 bytes becomes a*s*s*b*(4 + 1 + 4) at 4 bytes), two residual masks and one after the
   * embeddings */
  gpum_estimate_t d;
  m.dropout = true;
  assert_int_equal(gpum_estimate(&m, &o, &d), 0);
  assert_int_equal(d.activations - e.activations, 2 * 16 * 2 * 5 + 2 * 64 + 64);

  /* checkpointing keeps one layer's input per layer plus one layer */
  m.dropout = false;
  m.layers = 3;
  o.checkpointing = true;
  assert_int_equal(gpum_estimate(&m, &o, &d), 0);
  assert_int_equal(d.activations, 3 * 256 + 4480 + 64 + 320 + 256 + 384);
  o.checkpointing = false;
  assert_int_equal(gpum_estimate(&m, &o, &d), 0);
  assert_int_equal(d.activations, 3 * 4480 + 64 + 320 + 256 + 384);
}

/* impl=hf, Hugging Face's eager code, by hand on a one-layer LLaMA-like decoder: h 8, 2 heads
 * (d 4), ffn 16 (SwiGLU), vocab 10, seq 4, batch 2: sb 8, sbh 64, sbf 128, astb 64. */
static void test_hf_impl_by_hand(void **state) {
  (void)state;
  gpum_model_t m;
  gpum_estimate_opts_t o;
  gpum_estimate_t e;
  assert_int_equal(gpum_estimate_parse("transformer,hidden=8,heads=2,ffn=16,vocab=10,seq=4,"
                                       "decoder,gated,rmsnorm,bias=false,tied=false,batch=2,"
                                       "mode=training",
                                       &m, &o),
                   0);
  assert_int_equal(m.impl, GPUM_IMPL_TORCH);
  /* torch: norms 2*(4*sbh + 4*sb) = 576, q/k/v input 256, Q, K, V, o input 4*4*sb*h = 1024,
   * scores 4*astb = 256, mlp input and 4f 2304; ids 64, final norm 288, head input 256, log-probs
   * and targets (4*10 + 8)*sb = 384 */
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.activations, 576 + 256 + 1280 + 2304 + 64 + 288 + 256 + 384);
  /* hf, fp32: LlamaRMSNorm keeps the fp32 input, 1/rms and the normalised input, 2*(4*sbh +
   * 4*sbh + 4*sb) = 1088; the loss covers s - 1 shifted tokens, (4*10 + 8)*b*3 = 288 */
  assert_int_equal(gpum_estimate_set(&m, &o, "impl", "hf"), 0);
  assert_string_equal(gpum_model_impl_name(m.impl), "hf");
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.activations, 1088 + 256 + 1280 + 2304 + 64 + 544 + 256 + 288);
  /* bf16: the norms' fp32 upcast 4*sbh beside the bf16 normalised input, 2*(6*sbh + 4*sb) =
   * 832; inputs at 2 bytes 128; Q, K, V, o input 512; the softmax upcast to fp32 and its bf16
   * copy, 6*astb = 384; mlp 128 + 1024; the logits upcast before the loss: log-probs in fp32 */
  o.precision = GPUM_PREC_BF16;
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.activations, 832 + 128 + 896 + 1152 + 64 + 416 + 128 + 288);
  /* the logits, their fp32 upcast and the shifted copy: (2 + 4 + 4)*sbv, and one layer */
  assert_int_equal(e.workspace, 32 * MiB + 10 * 80 + 832 + 128 + 896 + 1152);
  /* mixed-bf16: the residual stream and the norms are fp32 (2*(8*sbh + 4*sb) = 1088); each
   * linear map reading a norm keeps its own bf16 cast: 3 (q, k, v) and 2 (gate, up) x 2*sbh */
  o.precision = GPUM_PREC_MIXED_BF16;
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.activations, 1088 + 384 + 896 + (256 + 1024) + 64 + 544 + 128 + 288);
  /* impl applies to transformers only, and takes torch or hf */
  assert_int_equal(gpum_estimate_set(&m, &o, "impl", "jax"), GPUM_EINVAL);
  assert_int_equal(gpum_estimate_parse("resnet18,impl=hf", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "impl=hf does not apply"));
}

/* A vision transformer's tokens follow its image and patch: (image / patch)^2 + 1, one learned
 * position each (torchvision's vit_b_16(image_size=384) has a (1, 577, 768) pos_embedding). */
static void test_vit_image(void **state) {
  (void)state;
  gpum_model_t m;
  gpum_estimate_opts_t o;
  gpum_estimate_t e;
  assert_int_equal(gpum_estimate_parse("vit-b16,image=384", &m, &o), 0);
  assert_int_equal(m.seq, 577);
  assert_int_equal(m.positions, 577);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.params, 86567656 + (577 - 197) * 768);
  /* ViT-B/32 at 224 px: 50 tokens; torchvision's vit_b_32 has 88,224,232 parameters */
  assert_int_equal(gpum_estimate_parse("vit-b16,patch=32", &m, &o), 0);
  assert_int_equal(m.seq, 50);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.params, 88224232);
  /* the images are what the patch conv keeps: 4*b*3*image^2 more than without them */
  gpum_estimate_t big;
  assert_int_equal(gpum_estimate_parse("vit-b16,mode=training", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(gpum_estimate_parse("vit-b16,mode=training,image=384", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &big), 0);
  assert_true(big.activations > 2 * e.activations);
  /* a seq that disagrees, an image the patches do not tile, an image without patches */
  assert_int_equal(gpum_estimate_parse("vit-b16,seq=300", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "197 tokens"));
  assert_int_equal(gpum_estimate_parse("vit-b16,image=390", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "not a multiple of patch"));
  assert_int_equal(gpum_estimate_parse("gpt2,image=384", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "image does not apply"));
  assert_int_equal(gpum_estimate_parse("gpt2,patch=16", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), GPUM_EINVAL); /* no image to cut */
}

/* ZeRO (Rajbhandari et al. 2020): mixed precision Adam is 2 + 2 + 12 bytes per parameter;
 * stage 1 divides the 12 by the GPUs, stage 2 the gradients too, stage 3 the weights too. */
static void test_zero_bytes_per_param(void **state) {
  (void)state;
  gpum_model_t m;
  gpum_estimate_opts_t o;
  gpum_estimate_t e;
  assert_int_equal(gpum_model_preset("llama-7b", &m), 0);
  uint64_t P = 6738415616;
  gpum_estimate_parse("llama-7b,mode=training,precision=mixed-bf16,optimizer=adam", &m, &o);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.weights, 2 * P);
  assert_int_equal(e.gradients, 2 * P);
  assert_int_equal(e.optimizer, 12 * P);
  o.gpus = 4;
  for (uint32_t stage = 1; stage <= 3; stage++) {
    o.zero_stage = stage;
    assert_int_equal(gpum_estimate(&m, &o, &e), 0);
    assert_int_equal(e.optimizer, 3 * P);
    assert_int_equal(e.gradients, stage >= 2 ? P / 2 : 2 * P);
    assert_int_equal(e.weights, stage >= 3 ? P / 2 : 2 * P);
  }
  o.zero_stage = 0;
  static const struct {
    gpum_optimizer_t opt;
    uint64_t bytes; /* per parameter, with the fp32 master copy */
  } opts[] = {{GPUM_OPT_SGD, 4}, {GPUM_OPT_MOMENTUM, 8}, {GPUM_OPT_ADAMW, 12}};
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
    o.optimizer = opts[i].opt;
    assert_int_equal(gpum_estimate(&m, &o, &e), 0);
    assert_int_equal(e.optimizer, opts[i].bytes * P);
  }
  o.optimizer = GPUM_OPT_ADAM8BIT; /* 2 bytes + 8 per 2048, + the 4-byte master */
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_true(e.optimizer > 6 * P && e.optimizer < 6 * P + P / 200);
  o.optimizer = GPUM_OPT_ADAFACTOR; /* factored: far below Adam's 8 */
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_true(e.optimizer > 4 * P && e.optimizer < 4 * P + P / 100);
  /* pure bf16: weights, gradients and Adam's two states at 2 bytes */
  o.precision = GPUM_PREC_BF16;
  o.optimizer = GPUM_OPT_ADAM;
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.weights + e.gradients + e.optimizer, 8 * P);
}

static void test_kv_cache_and_quantised(void **state) {
  (void)state;
  gpum_model_t m;
  gpum_estimate_opts_t o;
  gpum_estimate_t e;
  /* 2 (K and V) x 32 layers x 4096 tokens x 4096 x 2 bytes = 2 GiB per sequence */
  assert_int_equal(gpum_estimate_parse("llama-7b,precision=fp16,context=4096", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.kv_cache, 2 * GiB);
  assert_int_equal(e.weights, 2 * UINT64_C(6738415616));
  o.batch = 3;
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.kv_cache, 6 * GiB);
  /* grouped-query attention: Mistral's 8 KV heads of 128 */
  assert_int_equal(gpum_estimate_parse("mistral-7b,precision=bf16,context=4096", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.kv_cache, 2 * GiB / 4);
  /* int8: the layers' linear maps at 1 byte, embeddings, head and norms at 2 */
  assert_int_equal(gpum_estimate_parse("llama-7b,precision=int8", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  uint64_t lin = 32 * (4 * UINT64_C(4096) * 4096 + 3 * UINT64_C(4096) * 11008);
  assert_int_equal(e.weights, lin + 2 * (UINT64_C(6738415616) - lin));
  /* an encoder has no KV cache */
  assert_int_equal(gpum_estimate_parse("bert-base,precision=fp16", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.kv_cache, 0);
}

static void test_lora(void **state) {
  (void)state;
  gpum_model_t m;
  gpum_estimate_opts_t o;
  gpum_estimate_t e;
  assert_int_equal(gpum_estimate_parse("llama-7b,mode=lora,batch=4,precision=bf16", &m, &o), 0);
  assert_int_equal(o.mode, GPUM_MODE_LORA);
  assert_int_equal(o.batch, 4);
  assert_int_equal(o.precision, GPUM_PREC_BF16);
  assert_int_equal(o.lora_rank, 8);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  /* rank 8 on q, k, v, o (4 x (4096 + 4096)) and the three MLP maps (3 x (4096 + 11008)) */
  uint64_t t = 32 * 8 * (4 * 8192 + 3 * (4096 + 11008));
  assert_int_equal(e.trainable_params, t);
  assert_int_equal(e.weights, 2 * UINT64_C(6738415616) + 2 * t);
  assert_int_equal(e.gradients, 2 * t);
  assert_int_equal(e.optimizer, 2 * 2 * t); /* Adam's states in the adapters' bf16 */
  o.precision = GPUM_PREC_INT4;             /* QLoRA: fp32 adapters and states */
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.gradients, 4 * t);
  assert_int_equal(e.optimizer, 2 * 4 * t);
  o.precision = GPUM_PREC_BF16;
  o.lora_rank = 16;
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.trainable_params, 2 * t);
}

static void test_rnn_mlp_cnn_by_hand(void **state) {
  (void)state;
  gpum_model_t m;
  gpum_estimate_opts_t o;
  gpum_estimate_t e;
  /* torch.nn.LSTM(3, 2): 4 gates x (2x3 + 2x2 + 2 + 2) */
  assert_int_equal(gpum_estimate_parse("lstm,input=3,hidden=2,seq=5,batch=2,mode=training", &m, &o),
                   0);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.params, 56);
  /* the input once, then 7h per step: 4 x b x s x (3 + 14) */
  assert_int_equal(e.activations, 4 * 2 * 5 * 17);
  assert_int_equal(gpum_estimate_parse("gru,input=3,hidden=2,seq=5,bidirectional", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.params, 2 * 3 * 2 * (3 + 2 + 2));
  /* mlp 4 -> 3 -> 2: (12 + 3) + (6 + 2); training keeps the input, the hidden ReLU's output,
   * the log-probabilities and int64 targets */
  assert_int_equal(gpum_estimate_parse("mlp=4/3/2,batch=5,mode=training,optimizer=sgd", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.params, 23);
  assert_int_equal(e.optimizer, 0);
  assert_int_equal(e.activations, 4 * 5 * (4 + 3) + 4 * 5 * 2 + 8 * 5);
  /* conv 3->4 k3 (bias: no bn follows) on 6x6, relu, maxpool 2, fc 36->2 */
  assert_int_equal(
      gpum_estimate_parse("cnn=conv:4:3/relu/maxpool:2/fc:2,image=6,mode=training", &m, &o), 0);
  assert_int_equal(m.ncnn, 4);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.params, 4 * 3 * 9 + 4 + 36 * 2 + 2);
  /* the image 108, the ReLU's output 144, the pool's output 36 and its int64 indices,
   * log-probs 2, targets */
  assert_int_equal(e.activations, 4 * (108 + 144 + 36 + 2) + 8 * 36 + 8);
}

static void test_spec_and_set_errors(void **state) {
  (void)state;
  gpum_model_t m;
  gpum_estimate_opts_t o;
  gpum_estimate_t e;
  assert_int_equal(gpum_estimate_parse("gpt3-175b", &m, &o), GPUM_ENOENT);
  assert_non_null(strstr(gpum_last_error(), "unknown model preset 'gpt3-175b'"));
  assert_non_null(strstr(gpum_last_error(), "llama-70b")); /* the list of presets */
  assert_int_equal(gpum_estimate_parse("", &m, &o), GPUM_EINVAL);
  assert_int_equal(gpum_estimate_parse("batch=4", &m, &o), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "names no model"));
  assert_int_equal(gpum_estimate_parse("gpt2,precision=fp12", &m, &o), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "fp12"));
  assert_int_equal(gpum_estimate_parse("gpt2,frobnicate=1", &m, &o), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "frobnicate"));
  assert_int_equal(gpum_estimate_parse("gpt2,batch=-1", &m, &o), GPUM_EINVAL);
  assert_int_equal(gpum_estimate_parse("gpt2,batch=4x", &m, &o), GPUM_EINVAL);
  assert_int_equal(gpum_estimate_parse("cnn=conv:4", &m, &o), GPUM_EINVAL);
  assert_int_equal(gpum_estimate_parse("cnn=pool:2", &m, &o), GPUM_EINVAL);
  assert_int_equal(gpum_estimate_parse("mlp=4", &m, &o), GPUM_EINVAL);
  /* batch 0 and other impossible settings fail at the estimate, with the reason */
  assert_int_equal(gpum_estimate_parse("gpt2,batch=0", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "batch"));
  assert_int_equal(gpum_estimate_parse("gpt2,precision=int4,mode=training", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "lora"));
  assert_int_equal(gpum_estimate_parse("gpt2,precision=int4,mode=lora", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0); /* QLoRA */
  assert_int_equal(gpum_estimate_parse("resnet18,mode=lora", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), GPUM_EINVAL);
  assert_int_equal(gpum_estimate_parse("gpt2,zero=4", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), GPUM_EINVAL);
  assert_int_equal(
      gpum_estimate_parse("transformer,layers=2,hidden=10,heads=3,vocab=5,seq=4", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "multiple"));
  assert_int_equal(gpum_estimate_parse("transformer,layers=2,hidden=8", &m, &o), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "heads"));
  /* settings by name, '-' read as '_', flags without a value */
  assert_int_equal(gpum_estimate_parse("gpt2,lora-rank=4,checkpointing,kv-heads=4", &m, &o), 0);
  assert_int_equal(o.lora_rank, 4);
  assert_true(o.checkpointing);
  assert_int_equal(m.kv_heads, 4);
  assert_int_equal(gpum_estimate_set(&m, &o, "preset", "vgg16"), 0);
  assert_int_equal(m.kind, GPUM_MODEL_CNN);
  assert_string_equal(gpum_precision_name(GPUM_PREC_MIXED_BF16), "mixed-bf16");
  assert_string_equal(gpum_optimizer_name(GPUM_OPT_ADAM8BIT), "adam8bit");
  assert_string_equal(gpum_mode_name(GPUM_MODE_LORA), "lora");
  assert_string_equal(gpum_model_kind_name(GPUM_MODEL_GRU), "gru");
}

static void test_budget_and_accumulation(void **state) {
  (void)state;
  gpum_model_t m;
  gpum_estimate_opts_t o;
  gpum_estimate_t e;
  uint64_t b = 0;
  assert_int_equal(gpum_estimate_parse("gpt2,mode=training,precision=mixed-fp16", &m, &o), 0);
  assert_int_equal(gpum_estimate_max_batch(&m, &o, 24 * GiB, &b), 0);
  assert_true(b > 1);
  o.batch = b;
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_true(e.total <= 24 * GiB);
  o.batch = b + 1;
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_true(e.total > 24 * GiB);
  /* below the weights: no batch fits, and the message says so */
  assert_int_equal(gpum_estimate_max_batch(&m, &o, 1 * GiB, &b), GPUM_ERANGE);
  assert_non_null(strstr(gpum_last_error(), "before any batch"));
  /* above the weights, below one sample */
  o.batch = 1;
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(gpum_estimate_max_batch(&m, &o, e.total - 1, &b), GPUM_ERANGE);
  assert_non_null(strstr(gpum_last_error(), "batch of 1"));
  assert_int_equal(gpum_estimate_max_batch(&m, &o, e.total, &b), 0);
  assert_int_equal(b, 1);

  uint64_t micro = 0, steps = 0;
  assert_int_equal(gpum_estimate_accumulation(64, 12, 1, &micro, &steps), 0);
  assert_int_equal(steps, 6);
  assert_int_equal(micro, 11);
  assert_int_equal(gpum_estimate_accumulation(64, 16, 2, &micro, &steps), 0);
  assert_int_equal(steps, 2);
  assert_int_equal(micro, 16);
  assert_int_equal(gpum_estimate_accumulation(10, 64, 1, &micro, &steps), 0);
  assert_int_equal(steps, 1);
  assert_int_equal(micro, 10);
  assert_int_equal(gpum_estimate_accumulation(0, 8, 1, &micro, &steps), GPUM_EINVAL);
  assert_int_equal(gpum_estimate_accumulation(8, 0, 1, &micro, &steps), GPUM_EINVAL);
}

/* Writes text to a scratch file; returns its path (static buffer). */
static const char *scratch(const char *text) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/gpum-test-estimate-%d.json", (int)getpid());
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

static void test_hf_config(void **state) {
  (void)state;
  gpum_model_t m, preset;
  gpum_estimate_opts_t o;
  gpum_estimate_t e, p;
  gpum_estimate_opts_init(&o);
  const char *path = scratch(
      "{\"model_type\": \"llama\", \"hidden_size\": 4096, \"intermediate_size\": 11008,"
      " \"num_attention_heads\": 32, \"num_hidden_layers\": 32, \"num_key_value_heads\": 32,"
      " \"vocab_size\": 32000, \"max_position_embeddings\": 2048, \"tie_word_embeddings\": false,"
      " \"rms_norm_eps\": 1e-06}");
  assert_int_equal(gpum_model_from_hf_config(path, &m), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(gpum_model_preset("llama-7b", &preset), 0);
  assert_int_equal(gpum_estimate(&preset, &o, &p), 0);
  assert_int_equal(e.params, p.params);
  assert_int_equal(e.total, p.total);
  path = scratch("{\"model_type\": \"gpt2\", \"n_embd\": 768, \"n_head\": 12, \"n_layer\": 12,"
                 " \"n_positions\": 1024, \"vocab_size\": 50257, \"n_inner\": null}");
  assert_int_equal(gpum_model_from_hf_config(path, &m), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.params, 124439808);
  path = scratch("{\"model_type\": \"t5\", \"d_model\": 768, \"d_kv\": 64, \"d_ff\": 3072,"
                 " \"num_heads\": 12, \"num_layers\": 12, \"vocab_size\": 32128,"
                 " \"feed_forward_proj\": \"relu\"}");
  assert_int_equal(gpum_model_from_hf_config(path, &m), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.params, 222903552);
  path = scratch("{\"model_type\": \"whisper\", \"d_model\": 768, \"encoder_layers\": 12,"
                 " \"decoder_layers\": 12, \"decoder_attention_heads\": 12,"
                 " \"decoder_ffn_dim\": 3072, \"vocab_size\": 51865}");
  assert_int_equal(gpum_model_from_hf_config(path, &m), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.params, 241734912);
  path = scratch("{\"model_type\": \"bert\", \"hidden_size\": 768, \"num_hidden_layers\": 12,"
                 " \"num_attention_heads\": 12, \"intermediate_size\": 3072,"
                 " \"vocab_size\": 30522, \"max_position_embeddings\": 512}");
  assert_int_equal(gpum_model_from_hf_config(path, &m), 0);
  assert_int_equal(gpum_estimate(&m, &o, &e), 0);
  assert_int_equal(e.params, 109482240);
  assert_int_equal(m.impl, GPUM_IMPL_HF); /* run with transformers' modeling code */

  /* errors leave *m alone and say what is wrong */
  gpum_model_t keep = m;
  path = scratch("{\"model_type\": \"llama\", \"hidden_size\": 4096,");
  assert_int_equal(gpum_model_from_hf_config(path, &m), GPUM_EPARSE);
  assert_non_null(strstr(gpum_last_error(), "not JSON"));
  path = scratch("{\"model_type\": \"llama\", \"hidden_size\": 4096}");
  assert_int_equal(gpum_model_from_hf_config(path, &m), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "num_hidden_layers"));
  path = scratch("{\"model_type\": \"llama\", \"hidden_size\": \"big\", \"num_hidden_layers\": 1}");
  assert_int_equal(gpum_model_from_hf_config(path, &m), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "hidden_size"));
  path = scratch("{\"model_type\": \"mamba\"}");
  assert_int_equal(gpum_model_from_hf_config(path, &m), GPUM_ENOTSUP);
  assert_non_null(strstr(gpum_last_error(), "mamba"));
  path = scratch("[1, 2]");
  assert_int_equal(gpum_model_from_hf_config(path, &m), GPUM_EPARSE);
  unlink(path);
  assert_int_equal(gpum_model_from_hf_config(path, &m), GPUM_ENOENT);
  assert_memory_equal(&m, &keep, sizeof m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_presets_published_counts),
      cmocka_unit_test(test_transformer_by_hand),
      cmocka_unit_test(test_hf_impl_by_hand),
      cmocka_unit_test(test_vit_image),
      cmocka_unit_test(test_zero_bytes_per_param),
      cmocka_unit_test(test_kv_cache_and_quantised),
      cmocka_unit_test(test_lora),
      cmocka_unit_test(test_rnn_mlp_cnn_by_hand),
      cmocka_unit_test(test_spec_and_set_errors),
      cmocka_unit_test(test_budget_and_accumulation),
      cmocka_unit_test(test_hf_config),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
