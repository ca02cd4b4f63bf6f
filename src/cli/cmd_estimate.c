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

#include "cli.h"
#include "client_cli.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: gpum estimate [MODEL | SPEC] [--preset NAME] [--hf-config FILE] [FLAGS]\n"
          "\n"
          "Estimates the GPU memory a model needs per GPU: weights, gradients, optimizer state,\n"
          "activations, KV cache, workspace, the CUDA context and the allocator's allowance.\n"
          "MODEL is a preset, or a spec 'MODEL,KEY=VALUE,...' whose keys are the flags below\n"
          "without '--' (e.g. 'llama-7b,mode=lora,batch=4,precision=bf16'). Formulas and their\n"
          "sources: docs/estimate.md.\n"
          "\n"
          "model:\n"
          "  --preset NAME          a preset: ");
  for (size_t i = 0; gpum_model_preset_name(i); i++)
    fprintf(out, "%s%s", i ? (i % 6 ? ", " : ",\n                         ") : "",
            gpum_model_preset_name(i));
  fprintf(
      out,
      "\n"
      "  --hf-config FILE       a local Hugging Face config.json (nothing is downloaded)\n"
      "  --kind KIND            transformer, cnn, rnn, lstm, gru or mlp, shaped by flags:\n"
      "  transformer: --layers N --hidden N --heads N [--kv-heads N] [--head-dim N] [--ffn N]\n"
      "               --vocab N --seq N [--positions N] [--enc-layers N --enc-seq N]\n"
      "               [--classes N] [--decoder | --encoder] [--gated] [--rmsnorm]\n"
      "               [--no-bias] [--untied] [--dropout] [--patch N --image N]\n"
      "               (--patch: a vision transformer, (image / patch)^2 + 1 tokens; vit-b16\n"
      "               is patch 16 at --image 224, and --image 384 makes it 577 tokens)\n"
      "  --impl hf|torch        how a transformer is written: torch (presets, shapes:\n"
      "                         torch.nn modules, fused norms) or hf (--hf-config's default:\n"
      "                         Hugging Face's eager code, fp32 upcasts in norms, softmax\n"
      "                         and logits, which keep more for backward)\n"
      "  rnn/lstm/gru: --layers N --input N --hidden N --seq N [--bidirectional]\n"
      "  cnn:         --cnn LAYERS [--channels N] --image N, LAYERS such as\n"
      "               'conv:32:3,bn,relu,maxpool:2,basic:64:2,bottleneck:32,apool:1,fc:10'\n"
      "  mlp:         --mlp WIDTHS, such as 784,512,10\n"
      "\n"
      "settings:\n"
      "  --batch N              samples per GPU per step (default 1)\n"
      "  --precision P          fp32 (default), fp16, bf16, mixed-fp16, mixed-bf16, int8, int4\n"
      "  --mode M               inference (default), training, lora\n"
      "  --lora-rank R          LoRA adapters' rank (default 8)\n"
      "  --optimizer O          sgd, momentum, adam, adamw (default), adam8bit, adafactor\n"
      "  --checkpointing        activation checkpointing (recompute each layer in backward)\n"
      "  --flash-attention      fused attention (FlashAttention, PyTorch SDPA): no s x s\n"
      "                         attention scores kept (default: eager attention)\n"
      "  --context N            tokens the KV cache holds per sequence (default: --seq)\n"
      "  --zero STAGE           ZeRO stage 0-3: shard optimizer state / gradients / weights\n"
      "  --gpus N               over N data-parallel GPUs (default 1)\n"
      "  --cuda-context SIZE    the CUDA context per GPU (default 768MiB)\n"
      "  --allocator PCT        the caching allocator's allowance: PCT percent of the rest\n"
      "  --allocator-base SIZE  ... plus SIZE (defaults 10 and 256MiB)\n"
      "\n"
      "output:\n"
      "  --budget SIZE|TYPE     the largest batch whose total fits SIZE (e.g. 80GiB) or a card\n"
      "                         of GPU type TYPE (e.g. A100-40GB, V100: libgpum's memory table)\n"
      "  --effective-batch N    gradient-accumulation steps to reach N samples per step\n"
      "  --json                 one key per component, in bytes\n"
      "\n"
      "Exit status: 0; 1 when the estimate fails (unreadable config.json, nothing fits the\n"
      "budget); 2 for usage errors (unknown preset or flag, bad value, batch 0).\n");
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

/* Two passes: the model (positional spec, --preset, --hf-config, --kind, --cnn, --mlp), then
 * every other setting in order, so that flags adjust the model whatever their position. */
static int parse(int argc, char **argv, est_args_t *a) {
  const char *spec = NULL;
  gpum_model_init(&a->m, GPUM_MODEL_TRANSFORMER);
  gpum_estimate_opts_init(&a->o);
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1 && spec) {
      gpum_model_t m = a->m;
      int rc = gpum_estimate_parse(spec, &a->m, &a->o);
      if (rc != 0)
        return failed(rc, NULL);
      if (a->have_model) /* --preset etc. beside a spec: the flag's model wins */
        a->m = m;
      a->have_model = true;
    }
    for (int i = 1; i < argc; i++) {
      const char *arg = argv[i];
      if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
        usage(stdout);
        return CLI_EXIT_OK;
      }
      if (arg[0] != '-' || arg[1] != '-') {
        if (arg[0] == '-')
          return cli_bad_option("estimate", arg);
        if (spec && spec != arg) {
          fprintf(stderr, "gpum estimate: unexpected argument '%s'\n", arg);
          return CLI_EXIT_USAGE;
        }
        spec = arg;
        continue;
      }
      if (!strcmp(arg, "--json")) {
        a->json = true;
        continue;
      }
      size_t s = 0;
      while (s < sizeof switches / sizeof switches[0] && strcmp(arg, switches[s].flag))
        s++;
      if (s < sizeof switches / sizeof switches[0]) {
        int rc = pass == 1 ? apply(a, switches[s].key, switches[s].value) : 0;
        if (rc)
          return rc;
        continue;
      }
      char key[64];
      const char *eq = strchr(arg, '=');
      size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
      snprintf(key, sizeof key, "%.*s", (int)(n - 2), arg + 2);
      const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
      if (v == NULL) {
        fprintf(stderr, "gpum estimate: %.*s needs a value\n", (int)n, arg);
        return CLI_EXIT_USAGE;
      }
      int rc = 0;
      if (!strcmp(key, "budget")) {
        a->have_budget = true;
        double gb = 0;
        if (gpum_size_parse(v, &a->budget) == 0 && a->budget > 0) {
          /* a size */
        } else if (gpum_gpu_type_memory_gb(v, &gb) == 0 && gb > 0) {
          a->budget = (uint64_t)(gb * 1073741824.0); /* the card's GB as gpum reads memory_gb */
        } else {
          fprintf(stderr,
                  "gpum estimate: --budget: '%s' is neither a size (e.g. 80GiB) nor a GPU type "
                  "of the memory table (e.g. A100-40GB)\n",
                  v);
          return CLI_EXIT_USAGE;
        }
      } else if (!strcmp(key, "effective-batch")) {
        char *end = NULL;
        unsigned long long x = strtoull(v, &end, 10);
        if (*v < '1' || *v > '9' || *end || x == 0) {
          fprintf(stderr, "gpum estimate: --effective-batch: invalid value '%s'\n", v);
          return CLI_EXIT_USAGE;
        }
        a->effective = x;
      } else if (is_model_flag(key) == (pass == 0)) {
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
