#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The estimator against PyTorch itself (Debian's python3-torch, on the CPU; /usr/bin/python3,
# which may not be the first python3 on PATH): every preset built from torch.nn
# (tests/integration/estimate_models.py, on the meta device) has exactly the parameters gpum
# counts, and for small transformers (GPT-2-, BERT- and LLaMA-like), CNNs (ResNet blocks, a VGG
# head with dropout), LSTM/GRU/RNN and an MLP, over several shapes and batches, gpum's training
# activations are within 15% of the bytes autograd saves for backward (saved_tensors_hooks);
# decoders and encoders written as Hugging Face writes them (estimate_hf_models.py) are within
# 10% of impl=hf's figure in fp32, bf16 and mixed-bf16 (autocast); vit-b16 at 384 px counts as
# torchvision's vit_b_16(image_size=384) does.
# Fails when torch cannot be imported although the package is installable (scripts/deps.sh
# installs it); skips, saying so, only when Debian has no python3-torch for this machine.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
PY=/usr/bin/python3

if ! "$PY" -c 'import torch' 2>"$T_ERR"; then
  if ! grep -q 'Candidate: [0-9]' <<<"$(apt-cache policy python3-torch 2>/dev/null)"; then
    echo "SKIP: Debian has no python3-torch package for this machine; the PyTorch comparison did not run"
    exit 0
  fi
  cat "$T_ERR" >&2
  t_fail "$PY cannot import torch: install python3-torch (scripts/deps.sh does)"
fi

cat >"$T_SCRATCH/compare.py" <<'PY'
import json, subprocess, sys
import torch
import torch.nn.functional as F
from estimate_models import *

G = sys.argv[1]
torch.manual_seed(0)
torch.set_num_threads(2)
failed = []


def estimate(spec):
    out = subprocess.run([G, "estimate", spec, "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


# Exact parameter counts for every preset.
names = subprocess.run([G, "estimate", "--help"], capture_output=True, text=True).stdout
presets = ["gpt2", "gpt2-medium", "bert-base", "bert-large", "t5-base", "llama-7b", "llama-13b",
           "llama-70b", "mistral-7b", "vit-b16", "whisper-small", "resnet18", "resnet50",
           "vgg16", "lstm-2x1024"]
for name in presets:
    assert name in names, name + " missing from gpum estimate --help"
    want, got = count(preset(name)), estimate(name)["params"]
    print("params %-14s torch %12d gpum %12d" % (name, want, got))
    if want != got:
        failed.append("%s: torch counts %d parameters, gpum %d" % (name, want, got))


def compare(label, spec, model, step):
    model.train()
    measured = saved_bytes(model, step)
    est = estimate(spec + ",mode=training")["activations"]
    ratio = est / measured
    print("acts   %-40s torch %10d gpum %10d  %.3f" % (label, measured, est, ratio))
    if abs(ratio - 1) > 0.15:
        failed.append("%s: gpum %d bytes, PyTorch saves %d (%.1f%%)" % (label, est, measured,
                                                                      100 * (ratio - 1)))


TF = {
    "gpt": (dict(layers=2, hidden=64, heads=4, vocab=500, positions=256, causal=True, dropout=0.1),
            "transformer,layers=2,hidden=64,heads=4,vocab=500,positions=256,decoder,dropout"),
    "bert": (dict(layers=3, hidden=96, heads=6, vocab=400, positions=256, post_norm=True, dropout=0.1),
             "transformer,layers=3,hidden=96,heads=6,vocab=400,positions=256,dropout"),
    "llama": (dict(layers=2, hidden=64, heads=8, kv_heads=2, ffn=172, vocab=500, causal=True,
                   gated=True, rmsnorm=True, bias=False, tied=False, rotary=True),
              "transformer,layers=2,hidden=64,heads=8,kv_heads=2,ffn=172,vocab=500,decoder,gated,"
              "rmsnorm,bias=false,tied=false"),
    "wide": (dict(layers=1, hidden=128, heads=2, vocab=1000, positions=64, causal=True),
             "transformer,layers=1,hidden=128,heads=2,vocab=1000,positions=64,decoder"),
}
for name, (cfg, spec) in TF.items():
    for b, s in [(1, 16), (4, 32), (2, 64)]:
        m = Transformer(cfg)
        ids = torch.randint(0, cfg["vocab"], (b, s))
        compare("%s b=%d s=%d" % (name, b, s), "%s,seq=%d,batch=%d" % (spec, s, b), m,
                lambda: loss_of(m, cfg, ids))

CNNS = ["conv:16:3/bn/relu/maxpool:2/basic:32:2/bottleneck:8/apool:1/fc:10",
        "conv:8:3/relu/conv:8:3/relu/maxpool:2/conv:16:3/relu/maxpool:2/apool:2/fc:32/relu/dropout/fc:10",
        "conv:16:7:2:3/bn/relu/maxpool:3:2:1/basic:16/basic:32:2/apool:1/fc:10"]
for spec in CNNS:
    for img, b in [(32, 2), (64, 3)]:
        m = cnn(3, img, cnn_layers(spec))
        x = torch.randn(b, 3, img, img)
        y = torch.zeros(b, dtype=torch.long)
        compare("cnn%d img=%d b=%d" % (CNNS.index(spec), img, b),
                "cnn=%s,image=%d,batch=%d" % (spec, img, b), m, lambda: F.cross_entropy(m(x), y))

for kind in ["LSTM", "GRU", "RNN"]:
    for layers, inp, h, b, s in [(1, 32, 64, 2, 10), (2, 64, 48, 4, 20)]:
        m = getattr(nn, kind)(inp, h, layers, batch_first=True)
        x = torch.randn(b, s, inp)
        compare("%s l=%d h=%d b=%d s=%d" % (kind.lower(), layers, h, b, s),
                "%s,layers=%d,input=%d,hidden=%d,seq=%d,batch=%d" % (kind.lower(), layers, inp, h, s, b),
                m, lambda: m(x)[0].sum())

for widths, b in [([100, 200, 50, 10], 8), ([784, 512, 256, 10], 32)]:
    mods = []
    for a, c in zip(widths, widths[1:]):
        mods += [nn.Linear(a, c), nn.ReLU()]
    m = nn.Sequential(*mods[:-1])
    x, y = torch.randn(b, widths[0]), torch.zeros(b, dtype=torch.long)
    compare("mlp %s b=%d" % (widths, b), "mlp=%s,batch=%d" % ("/".join(map(str, widths)), b), m,
            lambda: F.cross_entropy(m(x), y))

# ViT at another image size: torchvision's VisionTransformer(image_size=384) has a (1, 577, h)
# position embedding; the rest is the preset's. Counted as torchvision builds it.
vit = preset("vit-b16")
vit.pos = nn.Embedding(577, 768, device="meta")
want, got = count(vit), estimate("vit-b16,image=384")["params"]
print("params %-14s torch %12d gpum %12d" % ("vit-b16 @384", want, got))
if want != got:
    failed.append("vit-b16 image=384: torch counts %d parameters, gpum %d" % (want, got))

# Hugging Face's modeling code (estimate_hf_models.py) against impl=hf, in fp32, bf16 and
# mixed-bf16 (autocast), within 10%; impl=torch's figure beside it, for the record.
from estimate_hf_models import LlamaForCausalLM, BertForMaskedLM, hf_saved_bytes
HF = {
    "hf-llama": (LlamaForCausalLM, dict(layers=2, hidden=64, heads=8, kv_heads=2, ffn=172, vocab=500),
                 "transformer,layers=2,hidden=64,heads=8,kv_heads=2,ffn=172,vocab=500,decoder,"
                 "gated,rmsnorm,bias=false,tied=false,dropout=false"),
    "hf-bert": (BertForMaskedLM, dict(layers=2, hidden=96, heads=6, vocab=400, positions=256, dropout=0.1),
                "transformer,layers=2,hidden=96,heads=6,vocab=400,positions=256,dropout"),
}
for name, (cls, cfg, spec) in HF.items():
    for b, s in [(1, 16), (4, 32), (2, 48)]:
        for prec in ["fp32", "bf16", "mixed-bf16"]:
            torch.manual_seed(0)
            m = cls(cfg)
            ids = torch.randint(0, cfg["vocab"], (b, s))
            measured = hf_saved_bytes(m, ids, prec)
            job = "%s,seq=%d,batch=%d,mode=training,precision=%s" % (spec, s, b, prec)
            est = estimate(job + ",impl=hf")["activations"]
            plain = estimate(job + ",impl=torch")["activations"]
            ratio = est / measured
            label = "%s %s b=%d s=%d" % (name, prec, b, s)
            print("acts   %-40s torch %10d gpum %10d  %.3f  (impl=torch %.3f)" %
                  (label, measured, est, ratio, plain / measured))
            if abs(ratio - 1) > 0.10:
                failed.append("%s: gpum impl=hf %d bytes, PyTorch saves %d (%.1f%%)" %
                              (label, est, measured, 100 * (ratio - 1)))

if failed:
    print("\n".join("FAIL: " + f for f in failed), file=sys.stderr)
    sys.exit(1)
PY
PYTHONPATH="$GPUM_SOURCE_DIR/tests/integration" "$PY" "$T_SCRATCH/compare.py" "$GPUM_BIN" ||
  t_fail "the estimate disagrees with PyTorch (above)"
t_ok "parameter counts exact for every preset (and vit-b16 at 384 px); training activations within 15% of PyTorch's, Hugging Face-style decoders and encoders (impl=hf) within 10% in fp32, bf16 and mixed-bf16"
