# SPDX-License-Identifier: Apache-2.0
"""The models of gpum's estimator presets written in plain torch.nn, and the measurement of what
PyTorch saves for backward (tests/integration/test_estimate_torch.sh).

Nothing is downloaded: each architecture is written out here from its paper and reference code
(GPT-2, BERT, T5, LLaMA/Mistral, Whisper, ViT, ResNet, VGG, LSTM), so that torch itself counts the
parameters. Large presets are built on the 'meta' device (shapes without storage).

Tensors are made on the device of the model's input, so the same models run on a GPU (the
device check, tests/gpu/checks.py). Two choices make the measured bytes those of a GPU run on a CPU:
- Dropout uses torch.native_dropout, the fused kernel nn.Dropout runs on CUDA, which keeps a
  1-byte mask; on CPU nn.Dropout would keep a mask of the activation's dtype instead.
- RMSNorm is a function that saves its input and the reciprocal RMS, as fused kernels do (apex,
  Triton, torch >= 2.4); a norm spelled out in elementwise operations keeps more.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Dropout(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        return torch.native_dropout(x, self.p, True)[0]


class _RMSNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, eps):
        rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, w, rstd)
        return (x * rstd).to(x.dtype) * w

    @staticmethod
    def backward(ctx, g):
        x, w, rstd = ctx.saved_tensors
        xn = x * rstd
        gw = (g * xn).sum(dim=tuple(range(g.dim() - 1)))
        gx = g * w
        gx = rstd * (gx - xn * (gx * xn).mean(-1, keepdim=True))
        return gx, gw, None


class RMSNorm(nn.Module):
    def __init__(self, h, eps=1e-6, device=None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h, device=device))
        self.eps = eps

    def forward(self, x):
        return _RMSNormFn.apply(x, self.weight, self.eps)


def norm(cfg, h, dev):
    return RMSNorm(h, device=dev) if cfg.get("rmsnorm") else nn.LayerNorm(h, device=dev)


def rotate(x, s):
    """Rotary position embedding (RoFormer) of x (b, heads, s, d): parameter-free."""
    d = x.shape[-1]
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d))
    f = torch.outer(torch.arange(s, dtype=torch.float32, device=x.device), inv)
    emb = torch.cat((f, f), dim=-1).to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()


class Attention(nn.Module):
    """Multi-head (or grouped-query) attention as GPT-2, BERT, LLaMA and ViT compute it."""

    def __init__(self, cfg, cross=False, dev=None):
        super().__init__()
        h, a = cfg["hidden"], cfg["heads"]
        kv = cfg.get("kv_heads") or a
        d = cfg.get("head_dim") or h // a
        bias = cfg.get("bias", True)
        self.a, self.kv, self.d, self.cfg, self.cross = a, kv, d, cfg, cross
        self.q = nn.Linear(h, a * d, bias=bias, device=dev)
        self.k = nn.Linear(h, kv * d, bias=bias and cfg.get("key_bias", True), device=dev)
        self.v = nn.Linear(h, kv * d, bias=bias, device=dev)
        self.o = nn.Linear(a * d, h, bias=bias, device=dev)
        p = cfg.get("dropout", 0.0)
        self.attn_drop, self.resid_drop = Dropout(p), Dropout(p)

    def forward(self, x, mem=None, causal=False):
        b, s, _ = x.shape
        src = x if mem is None else mem
        t = src.shape[1]
        q = self.q(x).view(b, s, self.a, self.d).transpose(1, 2)
        k = self.k(src).view(b, t, self.kv, self.d).transpose(1, 2)
        v = self.v(src).view(b, t, self.kv, self.d).transpose(1, 2)
        if self.cfg.get("rotary"):
            q, k = rotate(q, s), rotate(k, t)
        if self.kv != self.a:
            r = self.a // self.kv
            k = k[:, :, None].expand(b, self.kv, r, t, self.d).reshape(b, self.a, t, self.d)
            v = v[:, :, None].expand(b, self.kv, r, t, self.d).reshape(b, self.a, t, self.d)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.d))
        if causal:
            mask = torch.ones(s, t, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, s, self.a * self.d)
        return self.resid_drop(self.o(y))


class MLP(nn.Module):
    def __init__(self, cfg, dev=None):
        super().__init__()
        h = cfg["hidden"]
        f = cfg.get("ffn") or 4 * h
        bias = cfg.get("bias", True)
        self.gated = cfg.get("gated", False)
        self.up = nn.Linear(h, f, bias=bias, device=dev)
        if self.gated:
            self.gate = nn.Linear(h, f, bias=bias, device=dev)
        self.down = nn.Linear(f, h, bias=bias, device=dev)
        self.drop = Dropout(cfg.get("dropout", 0.0))

    def forward(self, x):
        if self.gated:
            return self.drop(self.down(F.silu(self.gate(x)) * self.up(x)))
        return self.drop(self.down(F.gelu(self.up(x))))


class Layer(nn.Module):
    """One transformer layer: pre-norm (GPT-2, LLaMA, T5, Whisper, ViT) or post-norm (BERT);
    with cross-attention in the decoder of an encoder-decoder."""

    def __init__(self, cfg, cross=False, dev=None):
        super().__init__()
        h = cfg["hidden"]
        self.post = cfg.get("post_norm", False)
        self.n1, self.attn = norm(cfg, h, dev), Attention(cfg, dev=dev)
        if cross:
            self.nx, self.xattn = norm(cfg, h, dev), Attention(cfg, cross=True, dev=dev)
        self.n2, self.mlp = norm(cfg, h, dev), MLP(cfg, dev)
        self.cross, self.causal = cross, cfg.get("causal", False)

    def forward(self, x, mem=None):
        if self.post:
            x = self.n1(x + self.attn(x, causal=self.causal))
            return self.n2(x + self.mlp(x))
        x = x + self.attn(self.n1(x), causal=self.causal)
        if self.cross:
            x = x + self.xattn(self.nx(x), mem=mem)
        return x + self.mlp(self.n2(x))


class Transformer(nn.Module):
    """cfg: the estimator's transformer fields (hidden, heads, kv_heads, head_dim, ffn, layers,
    enc_layers, vocab, positions, enc_positions, classes, bias, key_bias, rmsnorm, gated, tied,
    causal, post_norm, dropout, rotary); extra: the modules the shape does not describe (a ViT's
    patch embedding, Whisper's front end, BERT's pooler), counted but not run."""

    def __init__(self, cfg, dev=None, extra=None):
        super().__init__()
        h, p = cfg["hidden"], cfg.get("dropout", 0.0)
        self.cfg = cfg
        self.tok = nn.Embedding(cfg["vocab"], h, device=dev) if cfg.get("vocab") else None
        self.pos = nn.Embedding(cfg["positions"], h, device=dev) if cfg.get("positions") else None
        self.drop = Dropout(p)
        if cfg.get("enc_layers"):
            ecfg = dict(cfg, causal=False)
            self.enc = nn.ModuleList(Layer(ecfg, dev=dev) for _ in range(cfg["enc_layers"]))
            self.enc_norm = norm(cfg, h, dev)
            if cfg.get("enc_positions"):
                self.enc_pos = nn.Embedding(cfg["enc_positions"], h, device=dev)
        self.layers = nn.ModuleList(
            Layer(cfg, cross=bool(cfg.get("enc_layers")), dev=dev) for _ in range(cfg["layers"]))
        self.final = norm(cfg, h, dev)
        self.head = None
        if cfg.get("classes"):
            self.head = nn.Linear(h, cfg["classes"], device=dev)
        elif cfg.get("vocab") and not cfg.get("tied", True):
            self.head = nn.Linear(h, cfg["vocab"], bias=False, device=dev)
        self.extra = extra

    def forward(self, ids):
        b, s = ids.shape
        x = self.tok(ids)
        if self.pos is not None:
            x = x + self.pos(torch.arange(s, device=ids.device))
        x = self.drop(x)
        if self.cfg.get("post_norm"):  # BERT: the embeddings' norm stands where others end
            x = self.final(x)
        for layer in self.layers:
            x = layer(x)
        if not self.cfg.get("post_norm"):
            x = self.final(x)
        if self.cfg.get("classes"):
            return self.head(x[:, 0])
        w = self.tok.weight if self.head is None else self.head.weight
        return F.linear(x, w)


def loss_of(model, cfg, ids):
    out = model(ids)
    if cfg.get("classes"):
        return F.cross_entropy(out, torch.zeros(ids.shape[0], dtype=torch.long, device=ids.device))
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), ids.reshape(-1))


# ---- convolutional networks, from the estimator's layer lists ----

class Basic(nn.Module):
    def __init__(self, cin, out, stride, dev=None):
        super().__init__()
        self.c1 = nn.Conv2d(cin, out, 3, stride, 1, bias=False, device=dev)
        self.b1 = nn.BatchNorm2d(out, device=dev)
        self.c2 = nn.Conv2d(out, out, 3, 1, 1, bias=False, device=dev)
        self.b2 = nn.BatchNorm2d(out, device=dev)
        self.down = None
        if stride != 1 or cin != out:
            self.down = nn.Sequential(nn.Conv2d(cin, out, 1, stride, bias=False, device=dev),
                                      nn.BatchNorm2d(out, device=dev))

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)), inplace=True)))
        return F.relu(y + (x if self.down is None else self.down(x)), inplace=True)


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride, dev=None):
        super().__init__()
        out = width * 4
        self.c1 = nn.Conv2d(cin, width, 1, bias=False, device=dev)
        self.b1 = nn.BatchNorm2d(width, device=dev)
        self.c2 = nn.Conv2d(width, width, 3, stride, 1, bias=False, device=dev)
        self.b2 = nn.BatchNorm2d(width, device=dev)
        self.c3 = nn.Conv2d(width, out, 1, bias=False, device=dev)
        self.b3 = nn.BatchNorm2d(out, device=dev)
        self.down = None
        if stride != 1 or cin != out:
            self.down = nn.Sequential(nn.Conv2d(cin, out, 1, stride, bias=False, device=dev),
                                      nn.BatchNorm2d(out, device=dev))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)), inplace=True)
        y = F.relu(self.b2(self.c2(y)), inplace=True)
        y = self.b3(self.c3(y))
        return F.relu(y + (x if self.down is None else self.down(x)), inplace=True)


class Flatten(nn.Module):
    def forward(self, x):
        return x.flatten(1)


def cnn(channels, image, layers, dev=None):
    """layers: the estimator's CNN list as (op, args...) tuples, for images of channels x image
    x image. A conv has a bias unless a batch norm follows it (as torchvision writes ResNet and
    VGG)."""
    mods, c, side, flat = [], channels, image, False
    for i, (op, *a) in enumerate(layers):
        nxt = layers[i + 1][0] if i + 1 < len(layers) else None
        if op == "conv":
            out, k = a[0], a[1]
            s = a[2] if len(a) > 2 else 1
            p = a[3] if len(a) > 3 else k // 2
            mods.append(nn.Conv2d(c, out, k, s, p, bias=nxt != "bn", device=dev))
            c, side = out, (side + 2 * p - k) // s + 1
        elif op == "bn":
            mods.append(nn.BatchNorm2d(c, device=dev))
        elif op == "relu":
            mods.append(nn.ReLU(inplace=True))
        elif op == "maxpool":
            k = a[0]
            s = a[1] if len(a) > 1 else k
            p = a[2] if len(a) > 2 else 0
            mods.append(nn.MaxPool2d(k, s, p))
            side = (side + 2 * p - k) // s + 1
        elif op == "apool":
            mods.append(nn.AdaptiveAvgPool2d(a[0]))
            side = a[0]
        elif op == "fc":
            if not flat:
                mods.append(Flatten())
                c, side, flat = c * side * side, 1, True
            mods.append(nn.Linear(c, a[0], device=dev))
            c = a[0]
        elif op == "dropout":
            mods.append(Dropout(0.5))
        elif op in ("basic", "bottleneck"):
            s = a[1] if len(a) > 1 else 1
            block = Basic if op == "basic" else Bottleneck
            mods.append(block(c, a[0], s, dev))
            c = a[0] * (4 if op == "bottleneck" else 1)
            side = (side - 1) // s + 1
    return nn.Sequential(*mods)


def count(model):
    return sum(p.numel() for p in model.parameters())


def saved_bytes(model, step):
    """Bytes of the distinct storages autograd saves for backward while step() runs the forward
    pass and the loss, the parameters' storages excepted (they are weights, not activations)."""
    params = {p.storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        st = t.storage()
        ptr = st.data_ptr()
        if ptr not in params and ptr not in seen:
            seen[ptr] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = step()
    loss.backward()
    return sum(seen.values())


class ClassToken(nn.Module):
    def __init__(self, h, dev=None):
        super().__init__()
        self.token = nn.Parameter(torch.zeros(1, 1, h, device=dev))


def _resnet(block, depth):
    layers = [("conv", 64, 7, 2, 3), ("bn",), ("relu",), ("maxpool", 3, 2, 1)]
    for stage, n in enumerate(depth):
        for i in range(n):
            layers.append((block, 64 << stage) + ((2,) if i == 0 and stage > 0 else ()))
    return layers + [("apool", 1), ("fc", 1000)]


def _vgg16():
    layers = []
    for v in [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]:
        layers += [("maxpool", 2)] if v == "M" else [("conv", v, 3), ("relu",)]
    tail = [("fc", 4096), ("relu",), ("dropout",)]
    return layers + [("apool", 7)] + tail + tail + [("fc", 1000)]


def preset(name, dev="meta"):
    """The preset called name, built from torch.nn on dev."""
    gpt2 = dict(vocab=50257, positions=1024, causal=True, dropout=0.1)
    bert = dict(vocab=30522, positions=512, post_norm=True, dropout=0.1)
    llama = dict(vocab=32000, causal=True, gated=True, rmsnorm=True, bias=False, tied=False,
                 rotary=True)
    shapes = {
        "gpt2": dict(gpt2, layers=12, hidden=768, heads=12),
        "gpt2-medium": dict(gpt2, layers=24, hidden=1024, heads=16),
        "bert-base": dict(bert, layers=12, hidden=768, heads=12),
        "bert-large": dict(bert, layers=24, hidden=1024, heads=16),
        "t5-base": dict(layers=12, enc_layers=12, hidden=768, heads=12, vocab=32128, causal=True,
                        rmsnorm=True, bias=False, dropout=0.1),
        "llama-7b": dict(llama, layers=32, hidden=4096, heads=32, ffn=11008),
        "llama-13b": dict(llama, layers=40, hidden=5120, heads=40, ffn=13824),
        "llama-70b": dict(llama, layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672),
        "mistral-7b": dict(llama, layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336),
        "vit-b16": dict(layers=12, hidden=768, heads=12, positions=197, classes=1000),
        "whisper-small": dict(layers=12, enc_layers=12, hidden=768, heads=12, vocab=51865,
                              positions=448, enc_positions=1500, causal=True, key_bias=False),
    }
    if name in shapes:
        cfg, h = shapes[name], shapes[name]["hidden"]
        extra = None
        if name.startswith("bert"):  # token types and the pooler
            extra = nn.ModuleList([nn.Embedding(2, h, device=dev), nn.Linear(h, h, device=dev)])
        elif name == "t5-base":  # relative-position buckets in each stack's first layer
            extra = nn.ModuleList([nn.Embedding(32, cfg["heads"], device=dev) for _ in range(2)])
        elif name == "vit-b16":  # 16x16 patches and the class token
            extra = nn.ModuleList([nn.Conv2d(3, h, 16, 16, device=dev), ClassToken(h, dev)])
        elif name == "whisper-small":  # the convolutional front end over 80 mel bins
            extra = nn.ModuleList([nn.Conv1d(80, h, 3, padding=1, device=dev),
                                   nn.Conv1d(h, h, 3, stride=2, padding=1, device=dev)])
        return Transformer(cfg, dev, extra)
    if name == "resnet18":
        return cnn(3, 224, _resnet("basic", [2, 2, 2, 2]), dev)
    if name == "resnet50":
        return cnn(3, 224, _resnet("bottleneck", [3, 4, 6, 3]), dev)
    if name == "vgg16":
        return cnn(3, 224, _vgg16(), dev)
    if name == "lstm-2x1024":
        return nn.LSTM(1024, 1024, 2, device=dev)
    raise KeyError(name)


def cnn_layers(spec):
    """'conv:16:3/bn/relu' -> [('conv', 16, 3), ('bn',), ('relu',)]"""
    out = []
    for item in spec.replace(",", "/").split("/"):
        op, *nums = item.split(":")
        out.append((op,) + tuple(int(n) for n in nums))
    return out
