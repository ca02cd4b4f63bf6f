# SPDX-License-Identifier: Apache-2.0
"""Decoders and encoders written the way Hugging Face transformers writes them (eager
attention), for tests/integration/test_estimate_torch.sh: what they save for backward is what
gpum's `impl=hf` counts.

transformers is not imported (nor installed): each module below mirrors its modeling code
(transformers 4.4x, modeling_llama.py and modeling_bert.py) operation by operation, because
what autograd keeps depends on exactly those operations:
- LlamaRMSNorm in elementwise operations with an fp32 upcast: hidden.to(float32),
  pow(2).mean(-1, keepdim=True) (the mean as PyTorch 2 saves it: mean_last below),
  rsqrt(variance + eps), hidden * rsqrt, weight * hidden.to(input_dtype);
- rotary embeddings (cos and sin computed once per forward, in fp32, then cast to the
  activations' dtype; rotate_half) applied to q and k;
- eager attention with softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype) and
  repeat_kv for grouped-query attention;
- the SwiGLU MLP down(act_fn(gate(x)) * up(x));
- LlamaForCausalLM's logits upcast, lm_head(h).float(), and the shifted cross entropy;
- BERT: nn.LayerNorm modules, GELU, softmax without upcast, dropout on the probabilities and
  after each sub-layer (post-norm), BertForMaskedLM's head (dense, GELU, LayerNorm, the tied
  decoder with its bias), and the logits upcast to fp32 before the loss (transformers' loss
  functions, ForCausalLMLoss and ForMaskedLMLoss, upcast them).
Dropout is torch.native_dropout, the fused kernel nn.Dropout runs on CUDA (a 1-byte mask), as
in estimate_models.py. Under autocast, layer_norm and softmax run as CUDA's autocast runs them,
in fp32 (cuda_fp32 below): PyTorch 1.13's CPU autocast runs both in bfloat16 (and its
layer_norm refuses a bfloat16 input with an fp32 weight), which no GPU run does.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from estimate_models import Dropout


def cuda_fp32(fn, x, *args, **kwargs):
    """fn(x, ...) as CUDA's autocast runs the ops of its fp32 list (softmax, layer_norm): the
    input cast to fp32, autocast off. Without autocast, fn(x, ...) itself."""
    if not torch.is_autocast_cpu_enabled():
        return fn(x, *args, **kwargs)
    with torch.autocast("cpu", enabled=False):
        return fn(x.float(), *args, **kwargs)


def mean_last(x):
    """x.mean(-1, keepdim=True) as PyTorch >= 2.0's autograd keeps it: nothing but sizes.
    PyTorch 1.13's MeanBackward keeps its whole input (here the fp32 square, 4 bytes per
    element a norm), which no GPU run with a current PyTorch keeps; sum / n measures the same
    as torch 2's mean does."""
    return x.sum(-1, keepdim=True) / x.shape[-1]


class LayerNorm(nn.LayerNorm):
    def forward(self, x):
        return cuda_fp32(F.layer_norm, x, self.normalized_shape, self.weight, self.bias, self.eps)


# ---- LLaMA (modeling_llama.py) ----

class LlamaRMSNorm(nn.Module):
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = mean_last(hidden_states.pow(2))
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        with torch.autocast(device_type=x.device.type, enabled=False):
            freqs = (inv_freq.float() @ pos.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos(), emb.sin()
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(hidden_states, n_rep):
    b, kv, s, d = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(b, kv, n_rep, s, d)
    return hidden_states.reshape(b, kv * n_rep, s, d)


class LlamaAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, self.a = cfg["hidden"], cfg["heads"]
        self.kv = cfg.get("kv_heads") or self.a
        self.d = h // self.a
        self.q_proj = nn.Linear(h, self.a * self.d, bias=False)
        self.k_proj = nn.Linear(h, self.kv * self.d, bias=False)
        self.v_proj = nn.Linear(h, self.kv * self.d, bias=False)
        self.o_proj = nn.Linear(self.a * self.d, h, bias=False)
        self.attention_dropout = 0.0

    def forward(self, hidden_states, position_embeddings, causal_mask):
        b, s, _ = hidden_states.shape
        q = self.q_proj(hidden_states).view(b, s, self.a, self.d).transpose(1, 2)
        k = self.k_proj(hidden_states).view(b, s, self.kv, self.d).transpose(1, 2)
        v = self.v_proj(hidden_states).view(b, s, self.kv, self.d).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k, v = repeat_kv(k, self.a // self.kv), repeat_kv(v, self.a // self.kv)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.d)
        w = w + causal_mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        w = F.dropout(w, p=self.attention_dropout, training=self.training)
        out = torch.matmul(w, v).transpose(1, 2).contiguous().reshape(b, s, -1)
        return self.o_proj(out)


class LlamaMLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, f = cfg["hidden"], cfg["ffn"]
        self.gate_proj = nn.Linear(h, f, bias=False)
        self.up_proj = nn.Linear(h, f, bias=False)
        self.down_proj = nn.Linear(f, h, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self_attn, self.mlp = LlamaAttention(cfg), LlamaMLP(cfg)
        self.input_layernorm = LlamaRMSNorm(cfg["hidden"])
        self.post_attention_layernorm = LlamaRMSNorm(cfg["hidden"])

    def forward(self, hidden_states, position_embeddings, causal_mask):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, position_embeddings, causal_mask)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.mlp(self.post_attention_layernorm(hidden_states))
        return residual + hidden_states


class LlamaForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden"]
        self.embed_tokens = nn.Embedding(cfg["vocab"], h)
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg) for _ in range(cfg["layers"]))
        self.norm = LlamaRMSNorm(h)
        self.rotary_emb = LlamaRotaryEmbedding(h // cfg["heads"])
        self.lm_head = nn.Linear(h, cfg["vocab"], bias=False)

    def forward(self, input_ids, labels):
        b, s = input_ids.shape
        x = self.embed_tokens(input_ids)
        position_ids = torch.arange(s).unsqueeze(0)
        position_embeddings = self.rotary_emb(x, position_ids)
        mask = torch.full((s, s), torch.finfo(x.dtype).min, dtype=x.dtype).triu(1)
        mask = mask[None, None].expand(b, 1, s, s)
        for layer in self.layers:
            x = layer(x, position_embeddings, mask)
        logits = self.lm_head(self.norm(x)).float()
        shift_logits = logits[..., :-1, :].contiguous()
        shift_labels = labels[..., 1:].contiguous()
        return F.cross_entropy(shift_logits.view(-1, shift_logits.shape[-1]),
                               shift_labels.view(-1))


# ---- BERT (modeling_bert.py) ----

class BertSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, self.a = cfg["hidden"], cfg["heads"]
        self.d = h // self.a
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.dropout = Dropout(cfg["dropout"])

    def transpose_for_scores(self, x):
        return x.view(x.shape[:-1] + (self.a, self.d)).permute(0, 2, 1, 3)

    def forward(self, hidden_states):
        q = self.transpose_for_scores(self.query(hidden_states))
        k = self.transpose_for_scores(self.key(hidden_states))
        v = self.transpose_for_scores(self.value(hidden_states))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d)
        probs = self.dropout(cuda_fp32(F.softmax, scores, dim=-1))
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(ctx.shape[:-2] + (self.a * self.d,))


class BertSublayerOutput(nn.Module):
    """BertSelfOutput and BertOutput: dense, dropout, LayerNorm(x + input)."""

    def __init__(self, cfg, fan_in):
        super().__init__()
        self.dense = nn.Linear(fan_in, cfg["hidden"])
        self.LayerNorm = LayerNorm(cfg["hidden"], eps=1e-12)
        self.dropout = Dropout(cfg["dropout"])

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, f = cfg["hidden"], cfg.get("ffn") or 4 * cfg["hidden"]
        self.attention = BertSelfAttention(cfg)
        self.attention_output = BertSublayerOutput(cfg, h)
        self.intermediate = nn.Linear(h, f)
        self.output = BertSublayerOutput(cfg, f)

    def forward(self, x):
        x = self.attention_output(self.attention(x), x)
        return self.output(F.gelu(self.intermediate(x)), x)


class BertForMaskedLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden"]
        self.word_embeddings = nn.Embedding(cfg["vocab"], h)
        self.position_embeddings = nn.Embedding(cfg["positions"], h)
        self.token_type_embeddings = nn.Embedding(2, h)
        self.LayerNorm = LayerNorm(h, eps=1e-12)
        self.dropout = Dropout(cfg["dropout"])
        self.layers = nn.ModuleList(BertLayer(cfg) for _ in range(cfg["layers"]))
        self.transform = nn.Linear(h, h)          # cls.predictions.transform
        self.transform_norm = LayerNorm(h, eps=1e-12)
        self.decoder_bias = nn.Parameter(torch.zeros(cfg["vocab"]))

    def forward(self, input_ids, labels):
        b, s = input_ids.shape
        types = torch.zeros_like(input_ids)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(types)
        x = x + self.position_embeddings(torch.arange(s).unsqueeze(0))
        x = self.dropout(self.LayerNorm(x))
        for layer in self.layers:
            x = layer(x)
        x = self.transform_norm(F.gelu(self.transform(x)))
        scores = F.linear(x, self.word_embeddings.weight, self.decoder_bias).float()
        return F.cross_entropy(scores.view(-1, scores.shape[-1]), labels.view(-1))


def is_weight_copy(t):
    """Whether t is a cast of a parameter (autocast's half copy of a weight, saved as such or as
    its transpose): up a chain of single-input functions, a copy of a leaf. Those copies are
    the mixed-precision weights the estimator counts as weights, not activations."""
    fn = t.grad_fn
    for _ in range(4):
        nexts = [f for f, _ in fn.next_functions if f is not None] if fn is not None else []
        if len(nexts) != 1:
            return False
        if type(fn).__name__.startswith("ToCopyBackward"):
            return type(nexts[0]).__name__ == "AccumulateGrad"
        fn = nexts[0]
    return False


def hf_saved_bytes(model, ids, precision):
    """Bytes autograd saves for backward in one training forward of model on ids (labels: the
    ids) in precision: fp32; bf16 (bf16 weights and activations); mixed-bf16 (fp32 weights
    under torch.autocast("cpu", dtype=torch.bfloat16)). Distinct storages; the parameters and
    autocast's copies of them excepted."""
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    model.train()
    params = {p.storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        ptr = t.storage().data_ptr()
        if ptr not in params and ptr not in seen and not is_weight_copy(t):
            seen[ptr] = t.storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        if precision == "mixed-bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(ids, ids)
        else:
            loss = model(ids, ids)
    loss.backward()
    return sum(seen.values())
