/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A model from a local Hugging Face config.json (the file beside a checkpoint's weights):
 * model_type tells the architecture, the fields its shape, with the transformers library's
 * defaults for fields a config leaves out. Nothing is downloaded.
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include <gpum/error.h>

#include "work/estimate_internal.h"

typedef struct {
  json_t *doc;
  const char *path;
  int rc;
} cfg_t;

/* Reads an integer field into *out; def (when >= 0) stands in for a missing or null one. An
 * error is remembered in c->rc (the first one wins) and later reads do nothing. */
static void field(cfg_t *c, const char *key, long long def, uint32_t *out) {
  if (c->rc)
    return;
  json_t *v = json_object_get(c->doc, key);
  if ((v == NULL || json_is_null(v)) && def >= 0) {
    *out = (uint32_t)def;
    return;
  }
  if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX) {
    c->rc = gpum_error(GPUM_EINVAL, "%s: '%s' %s", c->path, key,
                       v ? "is not a whole number" : "is missing");
    return;
  }
  *out = (uint32_t)json_integer_value(v);
}

static bool flag(cfg_t *c, const char *key, bool def) {
  json_t *v = json_object_get(c->doc, key);
  return json_is_boolean(v) ? json_is_true(v) : def;
}

static const char *text(cfg_t *c, const char *key) {
  const char *s = json_string_value(json_object_get(c->doc, key));
  return s ? s : "";
}

/* LLaMA and its kin: RMSNorm, SwiGLU, rotary positions, no biases, an untied head unless the
 * config ties it (Qwen2 has biases on q, k and v only: counted as extra). */
static void llama_like(cfg_t *c, gpum_model_t *m, bool qkv_bias) {
  uint32_t pos = 0;
  m->decoder = m->gated = m->rmsnorm = true;
  m->bias = m->key_bias = m->dropout = false;
  m->tied = flag(c, "tie_word_embeddings", false);
  field(c, "hidden_size", -1, &m->hidden);
  field(c, "num_hidden_layers", -1, &m->layers);
  field(c, "num_attention_heads", -1, &m->heads);
  field(c, "num_key_value_heads", m->heads, &m->kv_heads);
  field(c, "head_dim", 0, &m->head_dim);
  field(c, "intermediate_size", -1, &m->ffn);
  field(c, "vocab_size", -1, &m->vocab);
  field(c, "max_position_embeddings", 2048, &pos);
  m->seq = pos;
  if (qkv_bias && c->rc == 0 && m->heads) {
    uint64_t d = m->head_dim ? m->head_dim : m->hidden / m->heads;
    m->extra_params = (uint64_t)m->layers * d * (m->heads + 2ull * m->kv_heads);
  }
}

static void gpt2(cfg_t *c, gpum_model_t *m) {
  m->decoder = m->dropout = true;
  m->tied = flag(c, "tie_word_embeddings", true);
  field(c, "n_embd", -1, &m->hidden);
  field(c, "n_layer", -1, &m->layers);
  field(c, "n_head", -1, &m->heads);
  field(c, "n_inner", 0, &m->ffn);
  field(c, "vocab_size", -1, &m->vocab);
  field(c, "n_positions", -1, &m->positions);
  m->seq = m->positions;
}

static void bert(cfg_t *c, gpum_model_t *m) {
  uint32_t types = 0;
  m->dropout = true;
  field(c, "hidden_size", -1, &m->hidden);
  field(c, "num_hidden_layers", -1, &m->layers);
  field(c, "num_attention_heads", -1, &m->heads);
  field(c, "intermediate_size", -1, &m->ffn);
  field(c, "vocab_size", -1, &m->vocab);
  field(c, "max_position_embeddings", -1, &m->positions);
  field(c, "type_vocab_size", 2, &types);
  m->seq = m->positions > 512 ? 512 : m->positions; /* RoBERTa's 514 rows hold 512 tokens */
  uint64_t h = m->hidden;
  m->extra_params = types * h + h * h + h; /* token types and the pooler */
}

static void t5(cfg_t *c, gpum_model_t *m) {
  uint32_t buckets = 0;
  m->decoder = m->dropout = m->rmsnorm = true;
  m->bias = m->key_bias = false;
  m->tied = flag(c, "tie_word_embeddings", true);
  m->gated = strstr(text(c, "feed_forward_proj"), "gated") != NULL;
  field(c, "d_model", -1, &m->hidden);
  field(c, "num_heads", -1, &m->heads);
  field(c, "d_kv", -1, &m->head_dim);
  field(c, "d_ff", -1, &m->ffn);
  field(c, "num_layers", -1, &m->enc_layers);
  field(c, "num_decoder_layers", m->enc_layers, &m->layers);
  field(c, "vocab_size", -1, &m->vocab);
  field(c, "relative_attention_num_buckets", 32, &buckets);
  m->seq = m->enc_seq = 512;
  m->extra_params = 2ull * buckets * m->heads;
}

static void whisper(cfg_t *c, gpum_model_t *m) {
  uint32_t mels = 0;
  m->decoder = true;
  m->key_bias = false;
  field(c, "d_model", -1, &m->hidden);
  field(c, "encoder_layers", -1, &m->enc_layers);
  field(c, "decoder_layers", -1, &m->layers);
  field(c, "decoder_attention_heads", -1, &m->heads);
  field(c, "decoder_ffn_dim", -1, &m->ffn);
  field(c, "vocab_size", -1, &m->vocab);
  field(c, "max_source_positions", 1500, &m->enc_positions);
  field(c, "max_target_positions", 448, &m->positions);
  field(c, "num_mel_bins", 80, &mels);
  m->enc_seq = m->enc_positions;
  m->seq = m->positions;
  uint64_t h = m->hidden;
  m->extra_params = mels * h * 3 + h + h * h * 3 + h; /* the two conv1d of the front end */
}

int gpum_model_from_hf_config(const char *path, gpum_model_t *out) {
  json_error_t jerr;
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return gpum_error(GPUM_ENOENT, "cannot open Hugging Face config '%s'", path);
  cfg_t c = {.doc = json_loadf(f, 0, &jerr), .path = path};
  fclose(f);
  if (c.doc == NULL)
    return gpum_error(GPUM_EPARSE, "%s: not JSON: line %d: %s", path, jerr.line, jerr.text);
  if (!json_is_object(c.doc)) {
    json_decref(c.doc);
    return gpum_error(GPUM_EPARSE, "%s: not a JSON object", path);
  }
  gpum_model_t m;
  gpum_model_init(&m, GPUM_MODEL_TRANSFORMER);
  m.impl = GPUM_IMPL_HF; /* run with transformers' modeling code */
  const char *type = text(&c, "model_type");
  if (!strcmp(type, "llama") || !strcmp(type, "mistral") || !strcmp(type, "qwen2"))
    llama_like(&c, &m, !strcmp(type, "qwen2"));
  else if (!strcmp(type, "gpt2"))
    gpt2(&c, &m);
  else if (!strcmp(type, "bert") || !strcmp(type, "roberta"))
    bert(&c, &m);
  else if (!strcmp(type, "t5"))
    t5(&c, &m);
  else if (!strcmp(type, "whisper"))
    whisper(&c, &m);
  else
    c.rc = gpum_error(GPUM_ENOTSUP,
                      "%s: model_type '%s' is not known (llama, mistral, qwen2, gpt2, bert, "
                      "roberta, t5, whisper); give the shape with flags instead",
                      path, *type ? type : "(none)");
  snprintf(m.name, sizeof m.name, "%s", *type ? type : "hf");
  json_decref(c.doc);
  if (c.rc)
    return c.rc;
  int rc = gpum__model_check(&m);
  if (rc != 0) {
    char why[512];
    snprintf(why, sizeof why, "%s", gpum_last_error());
    return gpum_error(rc, "%s: %s", path, why);
  }
  *out = m;
  return 0;
}
