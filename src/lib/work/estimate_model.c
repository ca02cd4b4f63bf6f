/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Model descriptions: the defaults, the presets and the check that a shape is complete, and
 * the dispatch of parameter and activation counts to each kind (estimate_shape.c,
 * estimate_cnn.c).
 *
 * Each preset is the architecture of its paper and reference implementation; its parameter
 * count equals the published one (docs/estimate.md lists both; tests/unit/test_estimate.c
 * checks them, tests/integration/test_estimate_torch.sh checks them against torch.nn).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <gpum/error.h>

#include "work/estimate_internal.h"

void gpum_model_init(gpum_model_t *m, gpum_model_kind_t kind) {
  memset(m, 0, sizeof *m);
  m->kind = kind;
  snprintf(m->name, sizeof m->name, "%s", gpum_model_kind_name(kind));
  m->bias = m->key_bias = m->tied = true;
  m->layers = 1;
  if (kind == GPUM_MODEL_CNN)
    m->channels = 3;
}

typedef enum { GPT2, BERT, T5, LLAMA, VIT, WHISPER } family_t;

typedef struct {
  const char *name;
  family_t family;
  uint32_t layers, hidden, heads, kv_heads, ffn, seq;
} tf_preset_t;

/* Published configurations: GPT-2 (Radford et al. 2019), BERT (Devlin et al. 2019), T5
 * (Raffel et al. 2020), LLaMA (Touvron et al. 2023), Llama 2 70B, Mistral 7B (Jiang et al.
 * 2023), ViT-B/16 (Dosovitskiy et al. 2021), Whisper small (Radford et al. 2022). */
static const tf_preset_t tf_presets[] = {
    {"gpt2", GPT2, 12, 768, 12, 0, 3072, 1024},
    {"gpt2-medium", GPT2, 24, 1024, 16, 0, 4096, 1024},
    {"bert-base", BERT, 12, 768, 12, 0, 3072, 512},
    {"bert-large", BERT, 24, 1024, 16, 0, 4096, 512},
    {"t5-base", T5, 12, 768, 12, 0, 3072, 512},
    {"llama-7b", LLAMA, 32, 4096, 32, 0, 11008, 2048},
    {"llama-13b", LLAMA, 40, 5120, 40, 0, 13824, 2048},
    {"llama-70b", LLAMA, 80, 8192, 64, 8, 28672, 4096},
    {"mistral-7b", LLAMA, 32, 4096, 32, 8, 14336, 4096},
    {"vit-b16", VIT, 12, 768, 12, 0, 3072, 197},
    {"whisper-small", WHISPER, 12, 768, 12, 0, 3072, 448},
};
#define NTF (sizeof tf_presets / sizeof tf_presets[0])

static const char *const other_presets[] = {"resnet18", "resnet50", "vgg16", "lstm-2x1024"};
#define NOTHER (sizeof other_presets / sizeof other_presets[0])

const char *gpum_model_preset_name(size_t i) {
  if (i < NTF)
    return tf_presets[i].name;
  return i < NTF + NOTHER ? other_presets[i - NTF] : NULL;
}

static void tf_preset(const tf_preset_t *t, gpum_model_t *m) {
  uint64_t h = t->hidden;
  gpum_model_init(m, GPUM_MODEL_TRANSFORMER);
  m->layers = t->layers;
  m->hidden = t->hidden;
  m->heads = t->heads;
  m->kv_heads = t->kv_heads;
  m->ffn = t->ffn;
  m->seq = t->seq;
  switch (t->family) {
  case GPT2:
    m->vocab = 50257;
    m->positions = 1024;
    m->decoder = m->dropout = true;
    break;
  case BERT: /* BertModel: token types (2 x h) and the pooler (h x h + h) are extra */
    m->vocab = 30522;
    m->positions = 512;
    m->dropout = true;
    m->extra_params = 2 * h + h * h + h;
    break;
  case T5: /* relative-position buckets: 32 per head, in each stack's first layer */
    m->enc_layers = t->layers;
    m->enc_seq = t->seq;
    m->vocab = 32128;
    m->decoder = m->dropout = m->rmsnorm = true;
    m->bias = m->key_bias = false;
    m->extra_params = 2 * 32 * (uint64_t)t->heads;
    break;
  case LLAMA:
    m->vocab = 32000;
    m->decoder = m->gated = m->rmsnorm = true;
    m->bias = m->key_bias = m->tied = false;
    break;
  case VIT: /* 224 px images in 16x16 patches of 3 channels, the class token; 1000 classes */
    m->image = 224;
    m->patch = 16;
    m->channels = 3;
    m->positions = t->seq;
    m->classes = 1000;
    break;
  case WHISPER: /* two conv1d (80 mel bins -> h, h -> h, kernel 3, with bias); keys unbiased */
    m->enc_layers = t->layers;
    m->enc_seq = m->enc_positions = 1500;
    m->positions = 448;
    m->vocab = 51865;
    m->decoder = true;
    m->key_bias = false;
    m->extra_params = 80 * h * 3 + h + h * h * 3 + h;
    break;
  }
}

static void add_cnn(gpum_model_t *m, gpum_cnn_op_t op, uint32_t out, uint32_t k, uint32_t stride,
                    uint32_t pad) {
  m->cnn[m->ncnn++] = (gpum_cnn_layer_t){op, out, k, stride, pad};
}

/* torchvision's ResNet (He et al. 2016): the stem, four stages, global pooling, 1000 classes. */
static void resnet(gpum_model_t *m, gpum_cnn_op_t block, const uint32_t depth[4]) {
  gpum_model_init(m, GPUM_MODEL_CNN);
  m->image = 224;
  add_cnn(m, GPUM_CNN_CONV, 64, 7, 2, 3);
  add_cnn(m, GPUM_CNN_BN, 0, 0, 0, 0);
  add_cnn(m, GPUM_CNN_RELU, 0, 0, 0, 0);
  add_cnn(m, GPUM_CNN_MAXPOOL, 0, 3, 2, 1);
  for (uint32_t stage = 0; stage < 4; stage++)
    for (uint32_t i = 0; i < depth[stage]; i++)
      add_cnn(m, block, 64u << stage, 0, i == 0 && stage > 0 ? 2 : 1, 0);
  add_cnn(m, GPUM_CNN_APOOL, 1, 0, 0, 0);
  add_cnn(m, GPUM_CNN_FC, 1000, 0, 0, 0);
}

/* VGG-16 (Simonyan and Zisserman 2015, configuration D) as torchvision writes it. */
static void vgg16(gpum_model_t *m) {
  static const uint32_t cfg[] = {64, 64,  0,   128, 128, 0,   256, 256, 256,
                                 0,  512, 512, 512, 0,   512, 512, 512, 0};
  gpum_model_init(m, GPUM_MODEL_CNN);
  m->image = 224;
  for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
    if (cfg[i] == 0) {
      add_cnn(m, GPUM_CNN_MAXPOOL, 0, 2, 2, 0);
      continue;
    }
    add_cnn(m, GPUM_CNN_CONV, cfg[i], 3, 1, 1);
    add_cnn(m, GPUM_CNN_RELU, 0, 0, 0, 0);
  }
  add_cnn(m, GPUM_CNN_APOOL, 7, 0, 0, 0);
  for (int i = 0; i < 2; i++) {
    add_cnn(m, GPUM_CNN_FC, 4096, 0, 0, 0);
    add_cnn(m, GPUM_CNN_RELU, 0, 0, 0, 0);
    add_cnn(m, GPUM_CNN_DROPOUT, 0, 0, 0, 0);
  }
  add_cnn(m, GPUM_CNN_FC, 1000, 0, 0, 0);
}

int gpum_model_preset(const char *name, gpum_model_t *m) {
  static const uint32_t r18[4] = {2, 2, 2, 2}, r50[4] = {3, 4, 6, 3};
  gpum_model_t t;
  size_t i = 0;
  while (name && gpum_model_preset_name(i) && strcasecmp(name, gpum_model_preset_name(i)) != 0)
    i++;
  if (name == NULL || gpum_model_preset_name(i) == NULL) {
    char list[512] = "";
    size_t o = 0;
    for (size_t k = 0; gpum_model_preset_name(k) && o < sizeof list; k++) {
      int n = snprintf(list + o, sizeof list - o, "%s%s", k ? ", " : "", gpum_model_preset_name(k));
      o += n > 0 ? (size_t)n : 0;
    }
    return gpum_error(GPUM_ENOENT, "unknown model preset '%s' (presets: %s)", name ? name : "",
                      list);
  }
  if (i < NTF) {
    tf_preset(&tf_presets[i], &t);
  } else if (!strcmp(other_presets[i - NTF], "resnet18")) {
    resnet(&t, GPUM_CNN_BASIC, r18);
  } else if (!strcmp(other_presets[i - NTF], "resnet50")) {
    resnet(&t, GPUM_CNN_BOTTLENECK, r50);
  } else if (!strcmp(other_presets[i - NTF], "vgg16")) {
    vgg16(&t);
  } else { /* lstm-2x1024: two LSTM layers of 1024 over inputs of 1024, 128 steps */
    gpum_model_init(&t, GPUM_MODEL_LSTM);
    t.layers = 2;
    t.input = t.hidden = 1024;
    t.seq = 128;
  }
  snprintf(t.name, sizeof t.name, "%s", gpum_model_preset_name(i));
  *m = t;
  return 0;
}

static int need(uint64_t v, const char *kind, const char *what) {
  return v ? 0 : gpum_error(GPUM_EINVAL, "%s model: %s must be given (and above 0)", kind, what);
}

/* An error when set: a field the kind does not read, which would otherwise be ignored. */
static int unused(bool set, const char *kind, const char *what, const char *hint) {
  return set ? gpum_error(GPUM_EINVAL, "%s model: %s does not apply to it (it would be ignored)%s",
                          kind, what, hint)
             : 0;
}

/* The fields other kinds read, refused where this kind would ignore them. */
static int check_unused(const gpum_model_t *m, const char *k) {
  bool tf = m->kind == GPUM_MODEL_TRANSFORMER, cnn = m->kind == GPUM_MODEL_CNN,
       mlp = m->kind == GPUM_MODEL_MLP, rnn = !tf && !cnn && !mlp, vit = tf && m->patch;
  int rc = 0;
  if (!cnn && ((rc = unused(m->ncnn != 0, k, "a layer list (cnn)", "")) ||
               (rc = unused(m->patch != 0 && !tf, k, "patch", ": a vision transformer's"))))
    return rc;
  if (!cnn && !vit &&
      ((rc = unused(m->image != 0, k, "image",
                    tf ? ": only a vision transformer (patch=N, as vit-b16) reads image; "
                         "another transformer's tokens are its seq"
                       : "")) ||
       (rc = unused(m->channels != 0, k, "channels", ""))))
    return rc;
  if (!mlp && (rc = unused(m->nwidths != 0, k, "widths (mlp)", "")))
    return rc;
  if (!tf && (rc = unused(m->impl != GPUM_IMPL_TORCH, k, "impl=hf", ": a transformer's")))
    return rc;
  if (!rnn && ((rc = unused(m->input != 0, k, "input", "")) ||
               (rc = unused(m->bidirectional, k, "bidirectional", ""))))
    return rc;
  if (!tf) {
    static const char *const tf_only = ": a transformer's";
    if ((rc = unused(m->enc_layers != 0, k, "enc_layers", tf_only)) ||
        (rc = unused(m->heads != 0, k, "heads", tf_only)) ||
        (rc = unused(m->kv_heads != 0, k, "kv_heads", tf_only)) ||
        (rc = unused(m->head_dim != 0, k, "head_dim", tf_only)) ||
        (rc = unused(m->ffn != 0, k, "ffn", tf_only)) ||
        (rc = unused(m->vocab != 0, k, "vocab", tf_only)) ||
        (rc = unused(m->enc_seq != 0, k, "enc_seq", tf_only)) ||
        (rc = unused(m->positions != 0, k, "positions", tf_only)) ||
        (rc = unused(m->enc_positions != 0, k, "enc_positions", tf_only)) ||
        (rc = unused(m->classes != 0, k, "classes", tf_only)))
      return rc;
  }
  if ((cnn || mlp) &&
      ((rc = unused(m->hidden != 0, k, "hidden", "")) || (rc = unused(m->seq != 0, k, "seq", ""))))
    return rc;
  return 0;
}

uint32_t gpum__vit_tokens(const gpum_model_t *m) {
  uint64_t side = m->image / m->patch, n = side * side + 1;
  return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* A vision transformer's image, patch and tokens agree (torchvision's VisionTransformer: the
 * image divides into patches, one token each plus the class token, one learned position per
 * token); gpum_estimate_set keeps seq and positions in step with image and patch. */
static int check_vit(const gpum_model_t *m) {
  int rc;
  if ((rc = need(m->image, "vision transformer", "image")) ||
      (rc = need(m->channels, "vision transformer", "channels")))
    return rc;
  if (m->image % m->patch)
    return gpum_error(GPUM_EINVAL, "vision transformer: image %u is not a multiple of patch %u",
                      m->image, m->patch);
  uint32_t n = gpum__vit_tokens(m);
  if (m->seq != n || m->positions != n)
    return gpum_error(GPUM_EINVAL,
                      "vision transformer: image %u at patch %u is %u tokens (with the class "
                      "token), but seq is %u and positions %u: set image or patch, which set "
                      "both",
                      m->image, m->patch, n, m->seq, m->positions);
  return 0;
}

int gpum__model_check(const gpum_model_t *m) {
  const char *k = gpum_model_kind_name(m->kind);
  if ((unsigned)m->impl > GPUM_IMPL_HF)
    return gpum_error(GPUM_EINVAL, "unknown model impl %d", (int)m->impl);
  int rc = check_unused(m, k);
  if (rc != 0)
    return rc;
  switch (m->kind) {
  case GPUM_MODEL_TRANSFORMER:
    if ((rc = need(m->layers, k, "layers")) || (rc = need(m->hidden, k, "hidden")) ||
        (rc = need(m->heads, k, "heads")) || (rc = need(m->seq, k, "seq")) ||
        (rc = need(m->vocab || m->classes, k, "vocab or classes")) ||
        (rc = need(m->enc_layers == 0 || m->enc_seq, k, "enc_seq (with enc_layers)")))
      return rc;
    if (m->head_dim == 0 && m->hidden % m->heads)
      return gpum_error(GPUM_EINVAL, "transformer: hidden %u is not a multiple of heads %u",
                        m->hidden, m->heads);
    if (m->heads % gpum__kv_heads(m))
      return gpum_error(GPUM_EINVAL, "transformer: heads %u is not a multiple of kv_heads %u",
                        m->heads, m->kv_heads);
    return m->patch ? check_vit(m) : 0;
  case GPUM_MODEL_CNN:
    if ((rc = need(m->ncnn, k, "a layer list (cnn)")) || (rc = need(m->channels, k, "channels")))
      return rc;
    return need(m->image, k, "image");
  case GPUM_MODEL_RNN:
  case GPUM_MODEL_LSTM:
  case GPUM_MODEL_GRU:
    if ((rc = need(m->layers, k, "layers")) || (rc = need(m->input, k, "input")) ||
        (rc = need(m->hidden, k, "hidden")))
      return rc;
    return need(m->seq, k, "seq");
  case GPUM_MODEL_MLP:
    return m->nwidths >= 2 ? 0
                           : gpum_error(GPUM_EINVAL, "mlp model: widths must list at least an "
                                                     "input and an output (mlp=784/512/10)");
  }
  return gpum_error(GPUM_EINVAL, "unknown model kind %d", (int)m->kind);
}

void gpum__model_params(const gpum_model_t *m, gpum__params_t *p) {
  memset(p, 0, sizeof *p);
  switch (m->kind) {
  case GPUM_MODEL_TRANSFORMER:
    gpum__transformer_params(m, p);
    break;
  case GPUM_MODEL_CNN:
    gpum__cnn_params(m, p);
    break;
  case GPUM_MODEL_RNN:
  case GPUM_MODEL_LSTM:
  case GPUM_MODEL_GRU:
    gpum__rnn_params(m, p);
    break;
  case GPUM_MODEL_MLP:
    gpum__mlp_params(m, p);
    break;
  }
}

double gpum__activations(const gpum_model_t *m, double b, const gpum__act_opts_t *a,
                         double *layer) {
  switch (m->kind) {
  case GPUM_MODEL_TRANSFORMER:
    return gpum__transformer_acts(m, b, a, layer);
  case GPUM_MODEL_CNN:
    return gpum__cnn_acts(m, b, a, layer);
  case GPUM_MODEL_MLP:
    return gpum__mlp_acts(m, b, a, layer);
  default:
    return gpum__rnn_acts(m, b, a, layer);
  }
}
