#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum estimate: text and --json (one key per component, in bytes, adding up to the total),
# spec strings and flags giving the same estimate, --budget (the largest batch that fits, and
# the next one does not), --effective-batch, --hf-config, and clear errors with exit 2 for
# usage (unknown preset or flag, batch 0) and 1 for failures (bad config.json, a budget below
# the weights); then gpum run --estimate against gpumd on a simulated node: the reservation is
# the estimate's total plus estimate.margin percent.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
G=$GPUM_BIN

t_expect 0 "$G" estimate --help
for w in --preset --hf-config --budget --effective-batch --json llama-70b whisper-small; do
  grep -q -- "$w" "$T_OUT" || t_fail "estimate --help does not mention $w"
done
t_expect 0 "$G" estimate llama-7b --mode lora --batch 4 --precision bf16
for w in weights gradients optimizer activations 'kv cache' workspace 'cuda context' allocator total; do
  grep -q "^  $w " "$T_OUT" || t_fail "text output has no '$w' line: $(cat "$T_OUT")"
done
grep -q '6738415616 parameters' "$T_OUT" || t_fail "text output: $(head -2 "$T_OUT")"
t_ok "text output"

t_expect 0 "$G" estimate 'llama-7b,mode=lora,batch=4,precision=bf16' --json
cp "$T_OUT" "$T_SCRATCH/spec.json"
t_expect 0 "$G" estimate --preset llama-7b --mode=lora --batch 4 --precision bf16 --json
cmp -s "$T_OUT" "$T_SCRATCH/spec.json" || t_fail "spec and flags differ"
t_pyjson "$T_OUT" '
parts = ["weights", "gradients", "optimizer", "activations", "kv_cache", "workspace", "context", "allocator"]
assert all(isinstance(d[k], int) for k in parts + ["total", "params"]), d
assert sum(d[k] for k in parts) == d["total"], d
assert d["params"] == 6738415616 and d["mode"] == "lora" and d["batch"] == 4, d
assert d["trainable_params"] == 19988480, d' || t_fail "--json: $(cat "$T_OUT")"
t_ok "--json components add up to the total; spec and flags agree"

# --budget: the largest batch fits, one more does not.
t_expect 0 "$G" estimate gpt2 --mode training --precision mixed-fp16 --budget 24GiB --effective-batch 512 --json
b=$(t_pyjson "$T_OUT" 'print(d["max_batch"])')
t_pyjson "$T_OUT" 'assert d["total"] <= 24 << 30 and d["batch"] == d["max_batch"]
import math
assert d["accumulation_steps"] == math.ceil(512 / d["max_batch"]), d
assert d["micro_batch"] * d["accumulation_steps"] >= 512 > (d["micro_batch"] - 1) * d["accumulation_steps"], d' ||
  t_fail "--budget/--effective-batch: $(cat "$T_OUT")"
t_expect 0 "$G" estimate gpt2 --mode training --precision mixed-fp16 --batch $((b + 1)) --json
t_pyjson "$T_OUT" 'assert d["total"] > 24 << 30' || t_fail "batch $((b + 1)) fits too"
t_expect 0 "$G" estimate gpt2 --mode training --budget 24GiB --effective-batch 512
grep -q 'largest batch within 24.00 GiB' "$T_OUT" || t_fail "budget text: $(cat "$T_OUT")"
grep -q 'accumulation steps of micro-batch' "$T_OUT" || t_fail "accumulation text: $(cat "$T_OUT")"
t_ok "--budget 24GiB: batch $b fits, $((b + 1)) does not; --effective-batch"

# A GPU type as the budget: a card of its class (libgpum's memory table), as its GiB would say.
t_expect 0 "$G" estimate gpt2 --mode training --budget RTX4090 --json
cp "$T_OUT" "$T_SCRATCH/by_type.json"
t_expect 0 "$G" estimate gpt2 --mode training --budget 24GiB --json
cmp -s "$T_OUT" "$T_SCRATCH/by_type.json" || t_fail "--budget RTX4090 is not --budget 24GiB"
t_expect 2 "$G" estimate gpt2 --budget Z9000
grep -q "neither a size (e.g. 80GiB) nor a GPU type" "$T_ERR" || t_fail "bad budget: $(cat "$T_ERR")"
t_ok "--budget RTX4090 is a 24 GB card's budget; an unknown type is a usage error"

# A vision transformer reads --image: (image / patch)^2 + 1 tokens, one learned position each
# (torchvision's vit_b_16(image_size=384): a (1, 577, 768) position embedding).
t_expect 0 "$G" estimate vit-b16 --image 384 --json
t_pyjson "$T_OUT" 'assert d["seq"] == 577 and d["params"] == 86567656 + (577 - 197) * 768, d' ||
  t_fail "vit-b16 --image 384: $(cat "$T_OUT")"
t_expect 0 "$G" estimate 'vit-b16,image=384' --json
t_pyjson "$T_OUT" 'assert d["seq"] == 577, d' || t_fail "vit-b16,image=384: $(cat "$T_OUT")"
t_expect 0 "$G" estimate vit-b16 --patch 32 --json # ViT-B/32: 50 tokens, a 32x32 patch conv
t_pyjson "$T_OUT" 'assert d["seq"] == 50 and d["params"] == 86567656 - 147 * 768 + 3 * 768 * (32 * 32 - 16 * 16), d' ||
  t_fail "vit-b16 --patch 32: $(cat "$T_OUT")"
t_expect 0 "$G" estimate vit-b16 --image 384
grep -q "seq 577 (image 384, patch 16)" "$T_OUT" || t_fail "vit text: $(cat "$T_OUT")"
t_expect 2 "$G" estimate vit-b16 --image 390
grep -q "image 390 is not a multiple of patch 16" "$T_ERR" || t_fail "vit 390: $(cat "$T_ERR")"
t_expect 2 "$G" estimate vit-b16 --seq 300
grep -q "is 197 tokens (with the class token), but seq is 300" "$T_ERR" || t_fail "vit --seq: $(cat "$T_ERR")"
t_ok "vit-b16 --image 384: 577 tokens and their positions; --patch 32; a seq that disagrees is refused"

# An option the model's kind does not read is refused, never ignored: a transformer without
# patches has no image.
t_expect 2 "$G" estimate gpt2 --image 384
grep -q "transformer model: image does not apply to it (it would be ignored): only a vision transformer" "$T_ERR" ||
  t_fail "gpt2 --image: $(cat "$T_ERR")"
t_expect 2 "$G" estimate resnet50 --impl hf
grep -q "cnn model: impl=hf does not apply to it" "$T_ERR" || t_fail "resnet --impl: $(cat "$T_ERR")"
t_expect 2 "$G" estimate resnet50 --seq 128
grep -q "cnn model: seq does not apply to it" "$T_ERR" || t_fail "resnet --seq: $(cat "$T_ERR")"
t_expect 2 "$G" estimate lstm-2x1024 --heads 8
grep -q "heads does not apply to it (it would be ignored): a transformer's" "$T_ERR" || t_fail "lstm --heads: $(cat "$T_ERR")"
t_ok "options a model's kind would ignore are refused (gpt2 --image, resnet --impl, --seq, lstm --heads)"

# Shapes by flags, and a Hugging Face config.json.
t_expect 0 "$G" estimate --kind transformer --layers 12 --hidden 768 --heads 12 --vocab 50257 \
  --positions 1024 --seq 1024 --decoder --json
t_pyjson "$T_OUT" 'assert d["params"] == 124439808, d' || t_fail "gpt2 by shape: $(cat "$T_OUT")"
t_expect 0 "$G" estimate --kind lstm --layers 2 --input 1024 --hidden 1024 --seq 128 --json
t_pyjson "$T_OUT" 'assert d["params"] == 16793600, d' || t_fail "lstm by shape"
t_expect 0 "$G" estimate --cnn 'conv:16:3,bn,relu,maxpool:2,basic:32:2,apool:1,fc:10' --image 32 --json
t_expect 0 "$G" estimate --mlp 784,512,10 --mode training --json
t_pyjson "$T_OUT" 'assert d["params"] == 784 * 512 + 512 + 512 * 10 + 10, d' || t_fail "mlp"
cat >"$T_SCRATCH/config.json" <<'JSON'
{"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
 "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
 "vocab_size": 32000, "max_position_embeddings": 32768, "tie_word_embeddings": false}
JSON
t_expect 0 "$G" estimate --hf-config "$T_SCRATCH/config.json" --json
t_pyjson "$T_OUT" 'assert d["params"] == 7241732096 and d["impl"] == "hf", d' || t_fail "--hf-config: $(cat "$T_OUT")"
t_ok "shapes by flags (transformer, lstm, cnn, mlp) and --hf-config"

# impl: a config.json is run with Hugging Face's code (its fp32 upcasts keep more for backward)
# unless --impl torch says otherwise; a preset is torch.nn unless --impl hf.
args=(--mode training --precision bf16 --seq 512 --json)
t_expect 0 "$G" estimate --hf-config "$T_SCRATCH/config.json" "${args[@]}"
hf=$(t_pyjson "$T_OUT" 'print(d["activations"])')
t_expect 0 "$G" estimate --hf-config "$T_SCRATCH/config.json" --impl torch "${args[@]}"
t_pyjson "$T_OUT" 'assert d["impl"] == "torch", d' || t_fail "--impl torch: $(cat "$T_OUT")"
plain=$(t_pyjson "$T_OUT" 'print(d["activations"])')
[ "$hf" -gt "$plain" ] || t_fail "impl=hf keeps $hf bytes, impl=torch $plain: hf should keep more"
t_expect 0 "$G" estimate mistral-7b --impl hf "${args[@]}"
t_pyjson "$T_OUT" "assert d['impl'] == 'hf' and d['activations'] == $hf, d" || t_fail "mistral-7b --impl hf: $(cat "$T_OUT")"
t_expect 0 "$G" estimate 'mistral-7b,impl=torch,mode=training,precision=bf16,seq=512' --json
t_pyjson "$T_OUT" "assert d['activations'] == $plain, d" || t_fail "preset impl=torch: $(cat "$T_OUT")"
t_expect 2 "$G" estimate gpt2 --impl jax
grep -q "impl: invalid value 'jax' (expected one of torch, hf)" "$T_ERR" || t_fail "bad impl: $(cat "$T_ERR")"
t_expect 0 "$G" estimate --help
grep -q -- "--impl hf|torch" "$T_OUT" || t_fail "--help does not mention --impl"
t_ok "--impl: hf by default for a config.json, torch for presets, either by flag or spec key"

# Errors.
t_expect 2 "$G" estimate gpt3-175b
grep -q "unknown model preset 'gpt3-175b'" "$T_ERR" || t_fail "unknown preset: $(cat "$T_ERR")"
t_expect 2 "$G" estimate gpt2 --batch 0
grep -q "batch must be at least 1" "$T_ERR" || t_fail "batch 0: $(cat "$T_ERR")"
t_expect 2 "$G" estimate gpt2 --precision fp12
grep -q "fp12" "$T_ERR" || t_fail "bad precision: $(cat "$T_ERR")"
t_expect 2 "$G" estimate gpt2 --frobnicate 1
t_expect 2 "$G" estimate
grep -q "no model" "$T_ERR" || t_fail "no model: $(cat "$T_ERR")"
t_expect 1 "$G" estimate llama-7b --mode training --budget 8GiB
grep -q "below what the model needs before any batch" "$T_ERR" || t_fail "budget: $(cat "$T_ERR")"
echo '{"model_type": "llama", "hidden_size": ' >"$T_SCRATCH/bad.json"
t_expect 1 "$G" estimate --hf-config "$T_SCRATCH/bad.json"
grep -q "bad.json: not JSON" "$T_ERR" || t_fail "bad config.json: $(cat "$T_ERR")"
echo '{"model_type": "llama", "hidden_size": 4096}' >"$T_SCRATCH/short.json"
t_expect 1 "$G" estimate --hf-config "$T_SCRATCH/short.json"
grep -q "num_hidden_layers" "$T_ERR" || t_fail "incomplete config.json: $(cat "$T_ERR")"
t_expect 1 "$G" estimate --hf-config "$T_SCRATCH/missing.json"
t_ok "errors: unknown preset, batch 0, bad values (2); budget, bad config.json (1)"

# gpum run --estimate: the reservation is the estimate plus the margin.
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
SPEC='gpt2,mode=training,batch=8,precision=mixed-bf16'
t_expect 0 "$G" estimate "$SPEC" --json
total=$(t_pyjson "$T_OUT" 'print(d["total"])')
t_expect 0 "$G" run --estimate "$SPEC" -- sh -c 'echo "$GPUM_MEM_LIMIT"'
want=$(python3 -c "print(int($total * 1.10))")
[ "$(cat "$T_OUT")" = "$want" ] || t_fail "run --estimate reserved $(cat "$T_OUT"), expected $want (total $total + 10%)"
GPUM_ESTIMATE_MARGIN=0 t_expect 0 "$G" run --estimate "$SPEC" -- sh -c 'echo "$GPUM_MEM_LIMIT"'
[ "$(cat "$T_OUT")" = "$total" ] || t_fail "margin 0 reserved $(cat "$T_OUT"), expected $total"
t_expect 2 "$G" run --estimate "$SPEC" --mem 1GiB -- true
grep -q "not both" "$T_ERR" || t_fail "--mem with --estimate: $(cat "$T_ERR")"
t_expect 2 "$G" run --estimate 'nosuchmodel' -- true
grep -q "unknown model preset" "$T_ERR" || t_fail "run --estimate bad spec: $(cat "$T_ERR")"
t_expect 1 "$G" run --estimate 'llama-70b,mode=training' --no-wait -- true
t_ok "run --estimate reserves the estimate plus estimate.margin"
