#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU manager API the users of seed 004 already call (docs/rest.md, "Coming from a
# Kubernetes-style GPU manager"): every curl line of its guide, as it is written there but for
# the address, run with curl against gpumd on a simulated node with two V100 32GB and two A100
# 80GB, with no token (a local caller is known by its socket), and each answer checked for the
# fields that guide shows, beside gpum's own: status (utilization, available_nodes, total_nodes,
# timestamp), nodes (gpu_type and min_memory_gb filters), allocate (success, node_name,
# gpu_config; 32.0 GB of a V100 is the card, whose capacity gpumd reserves), validate,
# setup-tensorflow and setup-pytorch for a configuration (distributed, mixed precision, memory
# fraction), health and monitoring. The requests are carried here: nothing is read from the
# seed at test time.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"
source "$(dirname "$0")/http_lib.sh"

cat >"$T_SCRATCH/seed.yaml" <<'SPEC'
name: seed004
driver_version: "550.54.15"
cuda_version: "12.4"
devices:
  - count: 2
    name: "Tesla V100-SXM2-32GB"
    memory: 32GiB
    reserved: 320MiB
    compute_capability: "7.0"
  - count: 2
    name: "NVIDIA A100-SXM4-80GB"
    memory: 80GiB
    reserved: 512MiB
    compute_capability: "8.0"
SPEC
t_sim_start "$T_SCRATCH/seed.yaml"
gd_start
A=$(cat "$GPUM_STATE_DIR/http.addr")
PORT=${A##*:}
# The guide's lines, with its http://localhost:8000 pointed at gpumd.
seed() {
  sed "s#http://localhost:8000#http://127.0.0.1:$PORT#" >"$T_SCRATCH/cmd"
  bash "$T_SCRATCH/cmd" 2>>"$T_SCRATCH/curl.err"
}
j() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); $1" "$2"; }

seed >"$T_SCRATCH/status.json" <<'CURL'
curl -X GET "http://localhost:8000/api/v1/gpu/status"
CURL
j '
u = d["utilization"]; assert 0 <= u["gpu_utilization"] <= 1 and 0 <= u["gpu_memory_usage"] <= 1, u
types = sorted(n["gpu_type"] for n in d["available_nodes"])
assert types == ["A100", "V100"], d["available_nodes"]
for n in d["available_nodes"]:
    assert n["available_gpus"] == 2 and n["node_name"] and 0 <= n["utilization"] <= 1, n
    assert n["memory_per_gpu"] == (32 if "V100" in n["gpu_type"] else 80), n
assert d["total_nodes"] == 1 and len(d["timestamp"]) == 19, d' "$T_SCRATCH/status.json" ||
  t_fail "status: $(cat "$T_SCRATCH/status.json")"
t_ok "GET status: utilization, available_nodes (one per GPU type), total_nodes, timestamp"

seed >"$T_SCRATCH/nodes.json" <<'CURL'
curl -X GET "http://localhost:8000/api/v1/gpu/nodes?gpu_type=V100&min_memory_gb=16"
CURL
j '
n = d["nodes"]; assert len(n) == 1, n
assert n[0]["gpu_type"] == "V100" and n[0]["available_gpus"] == 2, n
assert n[0]["memory_per_gpu"] == 32 and len(n[0]["devices"]) == 2, n' "$T_SCRATCH/nodes.json" ||
  t_fail "nodes: $(cat "$T_SCRATCH/nodes.json")"
t_ok "GET nodes?gpu_type=V100&min_memory_gb=16: the V100s"

seed >"$T_SCRATCH/alloc.json" <<'CURL'
curl -X POST "http://localhost:8000/api/v1/gpu/allocate" \
  -H "Content-Type: application/json" \
  -d '{
    "gpu_count": 2,
    "gpu_type": "V100",
    "memory_gb": 32.0,
    "distributed_training": true,
    "mixed_precision": true
  }'
CURL
j '
assert d["success"] is True and d["node_name"], d
g = d["gpu_config"]
assert g["gpu_count"] == 2 and g["gpu_type"] == "V100" and g["memory_gb"] == 32.0, g
assert g["distributed_training"] is True and g["mixed_precision"] is True, g
r = d["reservation"]; assert r["state"] == "GRANTED" and len(r["devices"]) == 2, r
assert sorted(x["index"] for x in r["devices"]) == [0, 1], r  # the V100s
# 32.0 names the card: what a V100 can grant, below 32 GiB, is reserved, and said
assert g["reserved_bytes_per_gpu"] == r["bytes_per_gpu"] < 32 * 2**30, (g, r)
assert "V100" in g["note"] and "32" in g["note"], g' "$T_SCRATCH/alloc.json" ||
  t_fail "allocate: $(cat "$T_SCRATCH/alloc.json")"
t_ok "POST allocate 2 x V100 32.0 GB: success, node_name, gpu_config; the cards' capacity reserved"

seed >"$T_SCRATCH/valid.json" <<'CURL'
curl -X POST "http://localhost:8000/api/v1/gpu/validate" \
  -H "Content-Type: application/json" \
  -d '{
    "gpu_count": 1,
    "gpu_type": "A100",
    "memory_gb": 80.0
  }'
CURL
j '
assert d["valid"] is True and d["could_fit"] is True and d["fits_now"] is True, d
assert d["gpu_config"]["gpu_type"] == "A100" and d["gpu_config"]["reserved_bytes_per_gpu"] < 80 * 2**30, d' \
  "$T_SCRATCH/valid.json" || t_fail "validate: $(cat "$T_SCRATCH/valid.json")"
t_ok "POST validate 1 x A100 80.0 GB: valid"

# A type this node does not have: validate says what it would take (the type table).
hp '
v = expect("POST", "/api/v1/gpu/validate", 200, body={"gpu_count": 2, "gpu_type": "H100", "memory_gb": 80.0})
assert v["valid"] is False and v["would_need"] == {"gpu_type": "H100", "gpus": 2, "memory_per_gpu": 80.0}, v
assert v["reason"] == "this node has no H100; it would take 2 H100 cards (80 GB each)", v
' || t_fail "validate of an absent type"
t_ok "POST validate 2 x H100 on a node without: would_need 2 cards of 80 GB"

seed >"$T_SCRATCH/tf.json" <<'CURL'
curl -X POST "http://localhost:8000/api/v1/gpu/setup-tensorflow" \
  -H "Content-Type: application/json" \
  -d '{
    "gpu_count": 1,
    "gpu_type": "V100",
    "memory_gb": 32.0,
    "gpu_memory_fraction": 0.9
  }'
CURL
# Both V100s are held by the allocation above: the configuration fits no device now.
j '
assert d["framework"] == "tensorflow" and d["reserved"] is False and d["reservation"] is None, d
assert d["fits_now"] is False and "allocate" in d["note"], d
assert d["gpu_config"]["gpu_memory_fraction"] == 0.9, d
assert d["env"]["TF_FORCE_GPU_ALLOW_GROWTH"] == "true" and "CUDA_VISIBLE_DEVICES" not in d["env"], d' \
  "$T_SCRATCH/tf.json" || t_fail "setup-tensorflow: $(cat "$T_SCRATCH/tf.json")"
t_ok "POST setup-tensorflow 1 x V100 (both held): the settings, nothing reserved, fits not now"

seed >"$T_SCRATCH/pt.json" <<'CURL'
curl -X POST "http://localhost:8000/api/v1/gpu/setup-pytorch" \
  -H "Content-Type: application/json" \
  -d '{
    "gpu_count": 2,
    "gpu_type": "A100",
    "memory_gb": 80.0,
    "distributed_training": true
  }'
CURL
j '
assert d["framework"] == "pytorch" and d["reserved"] is False and d["fits_now"] is True, d
e = d["env"]; assert e["WORLD_SIZE"] == "2" and e["MASTER_ADDR"] == "127.0.0.1", e
assert len(e["CUDA_VISIBLE_DEVICES"].split(",")) == 2 and not any(k.startswith("GPUM_") for k in e), e
s = d["settings"]; assert s["distributed_backend"] == "nccl" and "--nproc-per-node=2" in s["launch"], s
assert all("A100" in x["name"] for x in s["devices"]), s' "$T_SCRATCH/pt.json" ||
  t_fail "setup-pytorch: $(cat "$T_SCRATCH/pt.json")"
t_ok "POST setup-pytorch 2 x A100 distributed: torchrun and NCCL settings on the A100s"

# Mixed precision: bfloat16 on the A100s (compute capability 8), float16 with a loss scaler on
# the V100s; a granted reservation's set-up takes the same fields.
hp '
p = expect("POST", "/api/v1/gpu/setup-pytorch", 200,
           body={"gpu_count": 1, "gpu_type": "A100", "memory_gb": 40, "mixed_precision": True})
assert p["settings"]["mixed_precision"] == {"autocast_dtype": "bfloat16", "grad_scaler": False}, p
r = expect("GET", "/api/v1/reservations", 200)["reservations"][0]
t = expect("POST", "/api/v1/gpu/setup-tensorflow", 200,
           body={"reservation": r["id"], "mixed_precision": True, "gpu_memory_fraction": 0.5})
assert t["settings"]["mixed_precision_policy"] == "mixed_float16", t
assert t["settings"]["memory_limit_mib"] == (r["bytes_per_gpu"] >> 20) // 2, t
assert "set_global_policy(\"mixed_float16\")" in t["python"], t
' || t_fail "mixed precision"
t_ok "mixed precision: bfloat16 on A100, float16 on V100; the memory fraction of a reservation"

for path in health monitoring; do
  seed >"$T_SCRATCH/$path.json" <<CURL
curl -X GET "http://localhost:8000/api/v1/gpu/$path"
CURL
  # an error answer is a dict too: each document's own keys
  j 'assert "error" not in d and ({"status", "healthy"} <= set(d) or {"window_s", "devices"} <= set(d)), d' \
    "$T_SCRATCH/$path.json" || t_fail "$path: $(cat "$T_SCRATCH/$path.json")"
done
t_ok "GET health and monitoring"
