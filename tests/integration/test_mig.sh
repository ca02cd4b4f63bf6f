#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# NVIDIA MIG and MPS on a simulated node (examples/sim/h100-mig.yaml: GPU 0 in MIG mode as
# 3g.40gb + 2 x 2g.20gb, GPU 1 whole). gpum status lists the three instances (MIG- UUIDs, their
# parent) in place of GPU 0, and GPU 1 unchanged; the simulated CUDA honours
# CUDA_VISIBLE_DEVICES=MIG-... and an instance holds only its own memory; gpumd places a
# reservation on an instance and the grant's CUDA_VISIBLE_DEVICES names it; the simulator's
# MPS server (mps: true on GPU 1) marks that GPU as served by MPS, and a job run as an MPS
# client is still fenced by the shim.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100-mig.yaml"
G=$GPUM_BIN
P=$GPUM_TEST_PROGS/enforce_probe
GiB=1073741824

# --- gpum status: the instances in place of their GPU ---
t_expect 0 "$G" status --json
cp "$T_OUT" "$T_SCRATCH/status.json"
t_pyjson "$T_OUT" '
devs = d["devices"]
assert len(devs) == 4, len(devs)
mig, whole = devs[:3], devs[3]
assert [x["name"] for x in mig] == ["NVIDIA H100 80GB HBM3 MIG 3g.40gb",
    "NVIDIA H100 80GB HBM3 MIG 2g.20gb", "NVIDIA H100 80GB HBM3 MIG 2g.20gb"], mig
assert all(x["uuid"].startswith("MIG-") for x in mig), mig
assert len({x["uuid"] for x in mig}) == 3
assert [x["memory"]["total"] for x in mig] == [40 << 30, 20 << 30, 20 << 30]
parent = mig[0]["parent_uuid"]
assert parent.startswith("GPU-") and all(x["parent_uuid"] == parent for x in mig)
assert [x["mig"]["gpu_instance"] for x in mig] == [1, 2, 3], mig
assert all(x["mig"]["parent_index"] == 0 and x["mig"]["compute_instance"] == 0 for x in mig)
assert all(x["utilization"]["gpu"] is None for x in mig), "an instance has no utilisation"
assert all(x["temperature_c"] is not None for x in mig), "the parent GPU temperature"
assert whole["uuid"].startswith("GPU-") and whole["uuid"] != parent
assert whole["parent_uuid"] is None and whole["mig"] is None
assert whole["name"] == "NVIDIA H100 80GB HBM3" and whole["memory"]["total"] == 80 << 30
assert whole["utilization"]["gpu"] is not None
assert whole["mps"] is True and not any(x["mps"] for x in mig), "mps: true on GPU 1 only"
srv = [p for p in whole["processes"] if p["mps_server"]]
assert len(srv) == 1 and srv[0]["command"] == "nvidia-cuda-mps-server", whole["processes"]
assert srv[0]["memory"] == 64 << 20, srv
' || t_fail "status --json of the MIG node"
mapfile -t U < <(t_pyjson "$T_SCRATCH/status.json" 'print("\n".join(x["uuid"] for x in d["devices"]))')
t_expect 0 "$G" status --no-color
grep -q '^\[0\] NVIDIA H100 80GB HBM3 MIG 3g.40gb of GPU 0 ' "$T_OUT" || { cat "$T_OUT"; t_fail "no MIG line naming GPU 0"; }
grep '^\[3\] ' "$T_OUT" | grep -q -v 'MIG\|of GPU' || { cat "$T_OUT"; t_fail "the whole GPU's line"; }
t_ok "status: three MIG instances of GPU 0 (MIG- UUIDs, parent, GI ids) and GPU 1 whole"

# --- CUDA sees an instance, with the instance's memory ---
t_expect 0 env CUDA_VISIBLE_DEVICES="${U[1]}" "$P" info
t_pyjson "$T_OUT" 'assert d["cu_device_total"] == 20 << 30, d' || t_fail "CUDA on ${U[1]}: not 20 GiB"
t_expect 3 env CUDA_VISIBLE_DEVICES="${U[1]}" "$P" try 21G
t_expect 0 env CUDA_VISIBLE_DEVICES="${U[1]}" "$P" try 19G
# One MIG instance per process: the first listed.
t_expect 0 env CUDA_VISIBLE_DEVICES="${U[0]},${U[1]}" "$P" info
t_pyjson "$T_OUT" 'assert d["cu_device_total"] == 40 << 30, d' || t_fail "first MIG instance listed"
t_ok "CUDA_VISIBLE_DEVICES=MIG-...: the instance's 20 GiB, and no more"

# --- gpumd: a reservation on an instance ---
# A sanitizer build's shim needs its runtime preloaded first (t_shim_preload); gpum run passes
# LD_PRELOAD on with the shim after it (runs with --enforce only).
RT=$(t_shim_preload | awk 'NF == 2 {print $1}')
if [ -n "$RT" ]; then RUN=(env "LD_PRELOAD=$RT" "$G" run); else RUN=("$G" run); fi
gd_start
t_expect 0 "$G" reserve --mem 70GiB --ttl 5m -q # only the whole GPU holds 70 GiB
HELD=$(cat "$T_OUT")
ENVF="$T_SCRATCH/env"
t_expect 0 "$G" run --mem 30GiB -q -- sh -c 'echo "$CUDA_VISIBLE_DEVICES" >"$1"; "$2" info' sh "$ENVF" "$P"
[ "$(cat "$ENVF")" = "${U[0]}" ] || t_fail "30 GiB granted on '$(cat "$ENVF")', expected the 3g.40gb ${U[0]}"
t_pyjson "$T_OUT" 'assert d["cu_device_total"] == 40 << 30, d' || t_fail "the job's CUDA is not the 40 GiB instance"
t_expect 3 "$G" run --mem 30GiB -q -- "$P" try 41G
t_expect 3 "${RUN[@]}" --mem 30GiB --enforce -q -- "$P" try 31G
t_expect 0 "${RUN[@]}" --mem 30GiB --enforce -q -- "$P" try 29G
t_expect 0 "$G" release "$HELD"
t_ok "gpumd grants the 3g.40gb instance: CUDA_VISIBLE_DEVICES=${U[0]}, refused past it and past the fence"

# --- MPS: the simulated server on GPU 1 (mps: true), and a client still fenced ---
MPSDIR="$T_SCRATCH/mps"
mkdir -p "$MPSDIR"
t_expect 0 "$G" status --no-color
grep -q '^\[3\] NVIDIA H100 80GB HBM3 \[MPS\]' "$T_OUT" || { cat "$T_OUT"; t_fail "status text: no [MPS] on GPU 1"; }
grep -q '^\[0\] .*MPS' "$T_OUT" && { cat "$T_OUT"; t_fail "status text: [MPS] on a MIG instance"; }
MPSENV=(env CUDA_MPS_PIPE_DIRECTORY="$MPSDIR" CUDA_MPS_LOG_DIRECTORY="$MPSDIR" CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50)
t_expect 3 "${MPSENV[@]}" "${RUN[@]}" --mem 50GiB --enforce -q -- "$P" try 51G
t_expect 0 "${MPSENV[@]}" "${RUN[@]}" --mem 50GiB --enforce -q -- sh -c 'echo "$CUDA_VISIBLE_DEVICES" >"$1"; "$2" try 49G' sh "$ENVF" "$P"
[ "$(cat "$ENVF")" = "${U[3]}" ] || t_fail "50 GiB granted on '$(cat "$ENVF")', expected the whole GPU ${U[3]}"
t_ok "MPS: the server is shown on GPU 1; an MPS client is still fenced at its 50 GiB"

# --- Events: an XID on GPU 0 is reported on its first instance (gpum's device 0) ---
EV="$T_SCRATCH/events.txt"
t_bg bash -c "\"$GPUM_TEST_PROGS/device_events\" \"$T_SCRATCH/ev.ready\" 1 10000 >\"$EV\""
t_wait_file "$T_SCRATCH/ev.ready"
"$G" sim inject "$T_NODE" --device 0 --xid 43 >/dev/null || t_fail "sim inject --xid 43"
t_until 10 grep -q '^event ' "$EV" || t_fail "no XID event: $(cat "$EV")"
grep -q '^event kind=xid device=0 xid=43$' "$EV" || { cat "$EV"; t_fail "XID 43 of GPU 0 not on device 0"; }
t_ok "an XID of the MIG GPU is reported on its first instance"

# The stand-in server ends with the node.
SRV=$(t_pyjson "$T_SCRATCH/status.json" 'print([p["pid"] for p in d["devices"][3]["processes"] if p["mps_server"]][0])')
kill -0 "$SRV" || t_fail "the MPS stand-in $SRV is not running"
"$G" sim stop "$T_NODE" >/dev/null || t_fail "sim stop"
t_until 10 bash -c "! kill -0 $SRV 2>/dev/null" || t_fail "the MPS stand-in outlived its node"
t_ok "the MPS stand-in stops with the node"

# --- Spec errors name the line ---
cat >"$T_SCRATCH/bad.yaml" <<'YAML'
name: badmig
devices:
  - name: "NVIDIA H100 80GB HBM3"
    memory: 80GiB
    mig: [4g.40gb, 4g.40gb]
YAML
t_expect 1 "$G" sim start "$T_SCRATCH/bad.yaml" --name "b$T_NODE"
grep -q "bad.yaml:5: the MIG profiles need more than the GPU's 7 slices" "$T_ERR" || { cat "$T_ERR"; t_fail "slices over 7"; }
sed -i 's/\[4g.40gb, 4g.40gb\]/[3g.40gb, 7x.10gb]/' "$T_SCRATCH/bad.yaml"
t_expect 1 "$G" sim start "$T_SCRATCH/bad.yaml" --name "b$T_NODE"
grep -q "bad value '7x.10gb' for 'mig'" "$T_ERR" || { cat "$T_ERR"; t_fail "bad profile"; }
t_ok "bad MIG specs are refused, naming the line"
