/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum estimate MODEL [FLAGS]`: how much GPU memory a model needs to train or serve, component
 * by component (libgpum's gpum/estimate.h), as text or --json; with --budget the largest batch
 * that fits and with --effective-batch the gradient-accumulation steps. Also the estimate
 * behind `gpum run --estimate SPEC` (cli_estimate_bytes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/estimate.h>
#include <gpum/gputype.h>
#include <gpum/size.h>
#include <jansson.h>

#include "args.h"
#include "cli.h"
#include "client_cli.h"

enum {
  E_PRESET = 1,
  E_HF_CONFIG,
  E_KIND,
  E_LAYERS,
  E_HIDDEN,
  E_HEADS,
  E_KV_HEADS,
  E_HEAD_DIM,
  E_FFN,
  E_VOCAB,
  E_SEQ,
  E_POSITIONS,
  E_ENC_LAYERS,
  E_ENC_SEQ,
  E_CLASSES,
  E_DECODER,
  E_ENCODER,
  E_GATED,
  E_RMSNORM,
  E_NO_BIAS,
  E_UNTIED,
  E_DROPOUT,
  E_PATCH,
  E_IMAGE,
  E_IMPL,
  E_INPUT,
  E_BIDIRECTIONAL,
  E_CNN,
  E_CHANNELS,
  E_MLP,
  E_BATCH,
  E_PRECISION,
  E_MODE,
  E_LORA_RANK,
  E_OPTIMIZER,
  E_CHECKPOINTING,
  E_FLASH_ATTENTION,
  E_CONTEXT,
  E_ZERO,
  E_GPUS,
  E_CUDA_CONTEXT,
  E_ALLOCATOR,
  E_ALLOCATOR_BASE,
  E_BUDGET,
  E_EFFECTIVE_BATCH,
  E_JSON,
};

static const cli_arg_t est_args[] = {
    {E_PRESET, "--preset", 0, "NAME", "a preset (listed above)", 0},
    {E_HF_CONFIG, "--hf-config", 0, "FILE",
     "a local Hugging Face config.json (nothing is downloaded)", 0},
    {E_KIND, "--kind", 0, "KIND",
     "transformer, cnn, rnn, lstm, gru or mlp, shaped by the flags below", 0},
    {E_LAYERS, "--layers", 0, "N", "layers (transformer, rnn/lstm/gru)", 0},
    {E_HIDDEN, "--hidden", 0, "N", "hidden size", 0},
    {E_HEADS, "--heads", 0, "N", "attention heads", 0},
    {E_KV_HEADS, "--kv-heads", 0, "N", "key/value heads (grouped-query attention; default --heads)",
     0},
    {E_HEAD_DIM, "--head-dim", 0, "N", "per head (default hidden / heads)", 0},
    {E_FFN, "--ffn", 0, "N", "the feed-forward width (default 4 x hidden)", 0},
    {E_VOCAB, "--vocab", 0, "N", "vocabulary size", 0},
    {E_SEQ, "--seq", 0, "N", "sequence length", 0},
    {E_POSITIONS, "--positions", 0, "N", "learned position embeddings (0: rotary or relative)", 0},
    {E_ENC_LAYERS, "--enc-layers", 0, "N", "an encoder-decoder's encoder layers", 0},
    {E_ENC_SEQ, "--enc-seq", 0, "N", "and its sequence length", 0},
    {E_CLASSES, "--classes", 0, "N", "a classifier's classes instead of a vocabulary", 0},
    {E_DECODER, "--decoder", 0, NULL, "a decoder (causal)", 0},
    {E_ENCODER, "--encoder", 0, NULL, "an encoder", 0},
    {E_GATED, "--gated", 0, NULL, "a gated feed-forward (SwiGLU)", 0},
    {E_RMSNORM, "--rmsnorm", 0, NULL, "RMSNorm instead of LayerNorm", 0},
    {E_NO_BIAS, "--no-bias", 0, NULL, "no biases", 0},
    {E_UNTIED, "--untied", 0, NULL, "output embedding not tied to the input's", 0},
    {E_DROPOUT, "--dropout", 0, NULL, "dropout layers (their masks are kept for backward)", 0},
    {E_PATCH, "--patch", 0, "N",
     "a vision transformer: (image / patch)^2 + 1 tokens (vit-b16: patch 16 at --image 224; "
     "--image 384 makes it 577 tokens)",
     0},
    {E_IMAGE, "--image", 0, "N", "image side in pixels (vision transformer, cnn)", 0},
    {E_IMPL, "--impl", 0, "hf|torch",
     "how a transformer is written: torch (presets, shapes: torch.nn modules, fused norms) or hf "
     "(--hf-config's default: Hugging Face's eager code, fp32 upcasts in norms, softmax and "
     "logits, which keep more for backward)",
     0},
    {E_INPUT, "--input", 0, "N", "rnn/lstm/gru: input size", 0},
    {E_BIDIRECTIONAL, "--bidirectional", 0, NULL, "rnn/lstm/gru: both directions", 0},
    {E_CNN, "--cnn", 0, "LAYERS",
     "a cnn's layers, such as 'conv:32:3,bn,relu,maxpool:2,basic:64:2,fc:10' (docs/estimate.md)",
     0},
    {E_CHANNELS, "--channels", 0, "N", "a cnn's input channels (default 3)", 0},
    {E_MLP, "--mlp", 0, "WIDTHS", "an mlp's widths, such as 784,512,10", 0},
    {E_BATCH, "--batch", 0, "N", "samples per GPU per step (default 1)", 0},
    {E_PRECISION, "--precision", 0, "P",
     "fp32 (default), fp16, bf16, mixed-fp16, mixed-bf16, int8, int4", 0},
    {E_MODE, "--mode", 0, "M", "inference (default), training, lora", 0},
    {E_LORA_RANK, "--lora-rank", 0, "R", "LoRA adapters' rank (default 8)", 0},
    {E_OPTIMIZER, "--optimizer", 0, "O",
     "sgd, momentum, adam, adamw (default), adam8bit, adafactor", 0},
    {E_CHECKPOINTING, "--checkpointing", 0, NULL,
     "activation checkpointing (recompute each layer in backward)", 0},
    {E_FLASH_ATTENTION, "--flash-attention", 0, NULL,
     "fused attention (FlashAttention, PyTorch SDPA): no s x s attention scores kept (default: "
     "eager attention)",
     0},
    {E_CONTEXT, "--context", 0, "N", "tokens the KV cache holds per sequence (default: --seq)", 0},
    {E_ZERO, "--zero", 0, "STAGE", "ZeRO stage 0-3: shard optimizer state / gradients / weights",
     0},
    {E_GPUS, "--gpus", 0, "N", "over N data-parallel GPUs (default 1)", 0},
    {E_CUDA_CONTEXT, "--cuda-context", 0, "SIZE", "the CUDA context per GPU (default 768MiB)", 0},
    {E_ALLOCATOR, "--allocator", 0, "PCT",
     "the caching allocator's allowance: PCT percent of the rest (default 10)", 0},
    {E_ALLOCATOR_BASE, "--allocator-base", 0, "SIZE", "... plus SIZE (default 256MiB)", 0},
    {E_BUDGET, "--budget", 0, "SIZE|TYPE",
     "the largest batch whose total fits SIZE (e.g. 80GiB) or a card of GPU type TYPE (e.g. "
     "A100-40GB, V100: libgpum's memory table)",
     0},
    {E_EFFECTIVE_BATCH, "--effective-batch", 0, "N",
     "gradient-accumulation steps to reach N samples per step", 0},
    {E_JSON, "--json", 0, NULL, "one key per component, in bytes", 0},
    {0},
};

static char est_text[1536];

static cli_cmd_spec_t est_spec = {
    .name = "estimate",
    .usage = "[MODEL | SPEC] [--preset NAME] [--hf-config FILE] [--kind KIND] [SHAPE...]\n"
             " [--batch N] [--precision P] [--mode M] [SETTING...] [--budget SIZE|TYPE]\n"
             " [--effective-batch N] [--json]",
    .summary = "Estimate the GPU memory a model needs per GPU to train or serve.",
    .text = est_text, /* with the presets, set by est_help_text() */
    .args = est_args,
    .examples = "gpum estimate llama-7b --mode lora --batch 4 --precision bf16\n"
                "gpum estimate 'llama-7b,mode=training,zero=2,gpus=8' --json\n"
                "gpum estimate --hf-config config.json --budget A100-40GB",
    .exit_status = "0; 1 when the estimate fails (unreadable config.json, nothing fits the "
                   "budget); 2 for usage errors (unknown preset or flag, bad value, batch 0).",
};

static void est_help_text(void) {
  int n = snprintf(est_text, sizeof est_text, "%s",
                   "Weights, gradients, optimizer state, activations, KV cache, workspace, the "
                   "CUDA context and the allocator's allowance. MODEL is a preset, or a spec "
                   "'MODEL,KEY=VALUE,...' whose keys are the options below without '--' (e.g. "
                   "'llama-7b,mode=lora,batch=4,precision=bf16'). A transformer's shape: "
                   "--layers --hidden --heads --vocab --seq and the optional ones; rnn/lstm/gru: "
                   "--layers --input --hidden --seq; cnn: --cnn --image; mlp: --mlp. Formulas "
                   "and their sources: docs/estimate.md.\n\nPresets:");
  for (size_t i = 0; gpum_model_preset_name(i) && n > 0 && (size_t)n < sizeof est_text; i++)
    n += snprintf(est_text + n, sizeof est_text - (size_t)n, "%s %s", i ? "," : "",
                  gpum_model_preset_name(i));
}

/* Flags that take no value, as the setting each one stands for. */
static const struct {
  const char *flag, *key, *value;
} switches[] = {
    {"--checkpointing", "checkpointing", "true"},
    {"--decoder", "decoder", "true"},
    {"--flash-attention", "flash_attention", "true"},
    {"--encoder", "decoder", "false"},
    {"--gated", "gated", "true"},
    {"--rmsnorm", "rmsnorm", "true"},
    {"--no-bias", "bias", "false"},
    {"--untied", "tied", "false"},
    {"--dropout", "dropout", "true"},
    {"--bidirectional", "bidirectional", "true"},
};

/* Flags that give the model itself: applied before the shape flags. */
static bool is_model_flag(const char *key) {
  return !strcmp(key, "preset") || !strcmp(key, "hf-config") || !strcmp(key, "kind") ||
         !strcmp(key, "cnn") || !strcmp(key, "mlp");
}

typedef struct {
  gpum_model_t m;
  gpum_estimate_opts_t o;
  uint64_t budget, effective;
  bool json, have_budget, have_model;
} est_args_t;

/* A library error: a usage error (2) for a bad setting or an unknown preset; a failure (1)
 * when what names the flag at fault (a config.json, the budget). */
static int failed(int rc, const char *what) {
  fprintf(stderr, "gpum estimate: %s%s%s\n", what ? what : "", what ? ": " : "", cli_reason(rc));
  if (what)
    return CLI_EXIT_FAIL;
  return rc == GPUM_EINVAL || rc == GPUM_ENOENT ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
}

static int apply(est_args_t *a, const char *key, const char *v) {
  int rc;
  if (!strcmp(key, "hf-config")) {
    rc = gpum_model_from_hf_config(v, &a->m);
    return rc ? failed(rc, "--hf-config") : 0;
  }
  rc = gpum_estimate_set(&a->m, &a->o, key, v);
  return rc ? failed(rc, NULL) : 0;
}

/* Three passes: the words (help, unknown options, the positional spec), the model (--preset,
 * --hf-config, --kind, --cnn, --mlp), then the spec and every other setting in order, so that
 * flags adjust the model whatever their position. */
static int parse(int argc, char **argv, est_args_t *a) {
  const char *spec = NULL;
  gpum_model_init(&a->m, GPUM_MODEL_TRANSFORMER);
  gpum_estimate_opts_init(&a->o);
  est_help_text();
  /* Pass 0 only checks the words (help, unknown options, arguments): nothing is read before
   * the whole command line is known good. */
  for (int pass = 0; pass < 3; pass++) {
    if (pass == 2 && spec) {
      gpum_model_t m = a->m;
      int rc = gpum_estimate_parse(spec, &a->m, &a->o);
      if (rc != 0)
        return failed(rc, NULL);
      if (a->have_model) /* --preset etc. beside a spec: the flag's model wins */
        a->m = m;
      a->have_model = true;
    }
    cli_args_t p;
    cli_args_init(&p, &est_spec, argc, argv);
    for (int id; (id = cli_args_next(&p)) != CLI_ARGS_END;) {
      if (id == CLI_ARGS_HELP || id == CLI_ARGS_ERR) /* pass 0's: the help is printed once */
        return id == CLI_ARGS_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
      if (pass == 0 && id != CLI_ARGS_POS)
        continue;
      const char *arg = p.value;
      if (id == CLI_ARGS_POS) {
        if (spec && spec != arg)
          return cli_args_error(&est_spec, "unexpected argument '%s'", arg);
        spec = arg;
        continue;
      }
      if (id == E_JSON) {
        a->json = true;
        continue;
      }
      const char *flag = est_args[id - 1].name, *v = p.value;
      size_t s = 0;
      while (s < sizeof switches / sizeof switches[0] && strcmp(flag, switches[s].flag))
        s++;
      if (s < sizeof switches / sizeof switches[0]) {
        int rc = pass == 2 ? apply(a, switches[s].key, switches[s].value) : 0;
        if (rc)
          return rc;
        continue;
      }
      const char *key = flag + 2;
      int rc = 0;
      if (id == E_BUDGET) {
        a->have_budget = true;
        double gb = 0;
        if (gpum_size_parse(v, &a->budget) == 0 && a->budget > 0) {
          /* a size */
        } else if (gpum_gpu_type_memory_gb(v, &gb) == 0 && gb > 0) {
          a->budget = (uint64_t)(gb * 1073741824.0); /* the card's GB as gpum reads memory_gb */
        } else {
          return cli_args_error(&est_spec,
                                "--budget: '%s' is neither a size (e.g. 80GiB) nor a GPU type "
                                "of the memory table (e.g. A100-40GB)",
                                v);
        }
      } else if (id == E_EFFECTIVE_BATCH) {
        char *end = NULL;
        unsigned long long x = strtoull(v, &end, 10);
        if (*v < '1' || *v > '9' || *end || x == 0)
          return cli_args_error(&est_spec, "--effective-batch: invalid value '%s'", v);
        a->effective = x;
      } else if (is_model_flag(key) == (pass == 1)) {
        rc = apply(a, key, v);
        a->have_model = true;
      }
      if (rc)
        return rc;
    }
  }
  if (!a->have_model) {
    fprintf(stderr, "gpum estimate: no model: give a preset, a spec, --hf-config or --kind "
                    "(see gpum estimate --help)\n");
    return CLI_EXIT_USAGE;
  }
  return -1;
}

static void print_text(const est_args_t *a, const gpum_estimate_t *e) {
  char b[GPUM_SIZE_BUFSZ];
  const gpum_estimate_opts_t *o = &a->o;
  printf("model        %s (%s), %llu parameters", a->m.name, gpum_model_kind_name(a->m.kind),
         (unsigned long long)e->params);
  if (o->mode != GPUM_MODE_INFERENCE)
    printf(", %llu trainable", (unsigned long long)e->trainable_params);
  printf("\nsettings     batch %llu, %s, %s", (unsigned long long)o->batch,
         gpum_precision_name(o->precision), gpum_mode_name(o->mode));
  if (o->mode == GPUM_MODE_LORA)
    printf(" (rank %u)", o->lora_rank);
  if (o->mode != GPUM_MODE_INFERENCE)
    printf(", %s%s", gpum_optimizer_name(o->optimizer), o->checkpointing ? ", checkpointing" : "");
  if (o->flash_attention)
    printf(", flash attention");
  if (a->m.seq && a->m.kind != GPUM_MODEL_CNN && a->m.kind != GPUM_MODEL_MLP)
    printf(", seq %u", a->m.seq);
  if (a->m.patch)
    printf(" (image %u, patch %u)", a->m.image, a->m.patch);
  if (a->m.impl == GPUM_IMPL_HF)
    printf(", Hugging Face code");
  if (o->zero_stage)
    printf(", ZeRO-%u over %u GPUs", o->zero_stage, o->gpus);
  printf("\n\n");
  static const char *const names[] = {"weights",  "gradients", "optimizer",    "activations",
                                      "kv cache", "workspace", "cuda context", "allocator"};
  const uint64_t v[] = {e->weights,  e->gradients, e->optimizer, e->activations,
                        e->kv_cache, e->workspace, e->context,   e->allocator};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    printf("  %-14s %12s\n", names[i], gpum_size_format(v[i], b, sizeof b));
  printf("  %-14s %12s per GPU\n", "total", gpum_size_format(e->total, b, sizeof b));
}

static void print_json(const est_args_t *a, const gpum_estimate_t *e, uint64_t micro,
                       uint64_t steps) {
  const gpum_estimate_opts_t *o = &a->o;
  json_t *j = json_object();
  json_object_set_new(j, "model", json_string(a->m.name));
  json_object_set_new(j, "kind", json_string(gpum_model_kind_name(a->m.kind)));
  json_object_set_new(j, "batch", json_integer((json_int_t)o->batch));
  json_object_set_new(j, "precision", json_string(gpum_precision_name(o->precision)));
  json_object_set_new(j, "mode", json_string(gpum_mode_name(o->mode)));
  json_object_set_new(j, "optimizer", json_string(gpum_optimizer_name(o->optimizer)));
  if (a->m.kind == GPUM_MODEL_TRANSFORMER) {
    json_object_set_new(j, "impl", json_string(gpum_model_impl_name(a->m.impl)));
    json_object_set_new(j, "seq", json_integer(a->m.seq));
  }
  json_object_set_new(j, "params", json_integer((json_int_t)e->params));
  json_object_set_new(j, "trainable_params", json_integer((json_int_t)e->trainable_params));
  static const char *const keys[] = {"weights",     "gradients", "optimizer",
                                     "activations", "kv_cache",  "workspace",
                                     "context",     "allocator", "total"};
  const uint64_t v[] = {e->weights,   e->gradients, e->optimizer, e->activations, e->kv_cache,
                        e->workspace, e->context,   e->allocator, e->total};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    json_object_set_new(j, keys[i], json_integer(v[i] > INT64_MAX ? INT64_MAX : (json_int_t)v[i]));
  if (a->have_budget) {
    json_object_set_new(j, "budget", json_integer((json_int_t)a->budget));
    json_object_set_new(j, "max_batch", json_integer((json_int_t)o->batch));
  }
  if (a->effective) {
    json_object_set_new(j, "effective_batch", json_integer((json_int_t)a->effective));
    json_object_set_new(j, "micro_batch", json_integer((json_int_t)micro));
    json_object_set_new(j, "accumulation_steps", json_integer((json_int_t)steps));
  }
  json_dumpf(j, stdout, JSON_INDENT(2));
  putchar('\n');
  json_decref(j);
}

int cmd_estimate(gpum_config_t *cfg, int argc, char **argv) {
  (void)cfg;
  static est_args_t a; /* static: the model holds long lists */
  memset(&a, 0, sizeof a);
  int code = parse(argc, argv, &a);
  if (code >= 0)
    return code;
  gpum_estimate_t e;
  int rc;
  if (a.have_budget) {
    rc = gpum_estimate_max_batch(&a.m, &a.o, a.budget, &a.o.batch);
    if (rc != 0)
      return failed(rc == GPUM_EINVAL ? rc : GPUM_ERANGE, rc == GPUM_EINVAL ? NULL : "--budget");
  }
  rc = gpum_estimate(&a.m, &a.o, &e);
  if (rc != 0)
    return failed(rc, NULL);
  uint64_t micro = 0, steps = 0;
  if (a.effective &&
      (rc = gpum_estimate_accumulation(a.effective, a.o.batch, a.o.gpus, &micro, &steps)) != 0)
    return failed(rc, NULL);
  if (a.json) {
    print_json(&a, &e, micro, steps);
    return CLI_EXIT_OK;
  }
  print_text(&a, &e);
  char b[GPUM_SIZE_BUFSZ];
  if (a.have_budget)
    printf("\nlargest batch within %s: %llu\n", gpum_size_format(a.budget, b, sizeof b),
           (unsigned long long)a.o.batch);
  if (a.effective)
    printf("effective batch %llu: %llu accumulation steps of micro-batch %llu on %u GPU%s\n",
           (unsigned long long)a.effective, (unsigned long long)steps, (unsigned long long)micro,
           a.o.gpus, a.o.gpus == 1 ? "" : "s");
  return CLI_EXIT_OK;
}

int cli_estimate_bytes(const char *cmd, const char *spec, int64_t margin_pct, uint64_t *bytes) {
  static gpum_model_t m;
  gpum_estimate_opts_t o;
  gpum_estimate_t e;
  int rc = gpum_estimate_parse(spec, &m, &o);
  if (rc == 0)
    rc = gpum_estimate(&m, &o, &e);
  if (rc != 0) {
    fprintf(stderr, "gpum %s: --estimate '%s': %s\n", cmd, spec, cli_reason(rc));
    return rc == GPUM_EINVAL || rc == GPUM_ENOENT ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
  }
  double with = (double)e.total * (1.0 + (double)margin_pct / 100.0);
  *bytes = with >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)with;
  return 0;
}
