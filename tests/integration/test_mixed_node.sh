#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A node of several vendors through backend auto (docs/devices.md, "Nodes of several vendors"):
# the simulated node lists its AMD devices before its NVIDIA ones, and auto still shows NVIDIA
# (NVML) first, then AMD (ROCm SMI), each vendor in its own order, with the vendor and its own
# number in `gpum status` (text and JSON), `gpum top --once`, gpumd's status (socket and REST),
# /metrics (a vendor label on every device row, promtool-clean) and the reservations; the same
# indexes and UUIDs on a second run. Reservations on any vendor: --type amd is granted an AMD
# GPU and the job gets ROCR_VISIBLE_DEVICES (UUIDs) and HIP_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES
# empty; an NVIDIA grant gets CUDA_VISIBLE_DEVICES and no ROCm variable; a two-GPU reservation
# is of one vendor, and three GPUs of one vendor never fit a node with two of each. `gpum slurm
# conf` writes the AMD GPUs as render nodes with each line's env flag. rocm_smi.library names
# the library; auto without it shows the NVIDIA devices alone, and a node where no vendor
# library loads falls back to the host.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/http_lib.sh"
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY GPUM_ROCM_SMI_LIBRARY GPUM_COLOR NO_COLOR
G=$GPUM_BIN
out=$T_OUT

spec=$T_SCRATCH/mixed.yaml
cat >"$spec" <<'YAML'
name: mixed
driver_version: "6.7.0"
devices:
  - vendor: amd
    name: "AMD Instinct MI300X"
    memory: 192GiB
  - count: 2
    name: "NVIDIA H100 80GB HBM3"
    memory: 80GiB
    compute_capability: "9.0"
  - vendor: amd
    name: "AMD Instinct MI300X"
    memory: 192GiB
YAML
t_sim_start "$spec"

# gpum sim status numbers the node's devices in spec order and says each one's vendor and its
# number there (what the --device of gpum sim set/inject/hold means on a mixed node).
t_expect 0 "$G" sim status "$T_NODE"
grep -Eq '^  \[0\] amd 0  AMD Instinct MI300X ' "$out" || t_fail "sim status node device 0: $(cat "$out")"
grep -Eq '^  \[1\] nvidia 0  NVIDIA H100' "$out" || t_fail "sim status node device 1: $(cat "$out")"
grep -Eq '^  \[3\] amd 1  AMD Instinct MI300X ' "$out" || t_fail "sim status node device 3: $(cat "$out")"
t_expect 0 "$G" sim status "$T_NODE" --json
t_pyjson "$out" '
got = [(x["index"], x["vendor"], x["vendor_index"]) for x in d["devices"]]
assert got == [(0, "amd", 0), (1, "nvidia", 0), (2, "nvidia", 1), (3, "amd", 1)], got
' || t_fail "sim status --json vendors"
t_ok "gpum sim status: spec order, each device's vendor and number there"

t_expect 0 "$G" status
[ "$(grep -c '^\[[0-9]\] ' "$out")" -eq 4 ] || t_fail "expected 4 device lines: $(cat "$out")"
grep -Eq '^\[0\] NVIDIA H100 80GB HBM3 \(nvidia 0\) ' "$out" || t_fail "device 0: $(cat "$out")"
grep -Eq '^\[1\] NVIDIA H100 80GB HBM3 \(nvidia 1\) ' "$out" || t_fail "device 1: $(cat "$out")"
grep -Eq '^\[2\] AMD Instinct MI300X \(amd 0\) ' "$out" || t_fail "device 2: $(cat "$out")"
grep -Eq '^\[3\] AMD Instinct MI300X \(amd 1\) ' "$out" || t_fail "device 3: $(cat "$out")"
grep -q 'mixed: nvml: .*; rocm: ' "$out" || t_fail "the header names both backends: $(cat "$out")"
t_ok "gpum status: NVIDIA first, then AMD, each with its vendor and number"

t_expect 0 "$G" status --json
cp "$out" "$T_SCRATCH/first.json"
t_pyjson "$out" '
assert d["backend"] == "mixed", d["backend"]
devs = d["devices"]
assert [(x["index"], x["vendor"], x["vendor_index"]) for x in devs] == [
    (0, "nvidia", 0), (1, "nvidia", 1), (2, "amd", 0), (3, "amd", 1)], devs
assert all(x["state"] == "AVAILABLE" for x in devs), devs
assert all(x["uuid"].startswith("GPU-") for x in devs), devs
assert len({x["uuid"] for x in devs}) == 4, devs
' || t_fail "status --json"
t_expect 0 "$G" status --json
python3 - "$T_SCRATCH/first.json" "$out" <<'PY' || t_fail "a second run numbers the devices differently"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
ids = lambda d: [(x["index"], x["uuid"], x["vendor"], x["vendor_index"]) for x in d["devices"]]
assert ids(a) == ids(b), (ids(a), ids(b))
PY
t_ok "status --json: backend mixed, vendor and vendor_index; the same on a second run"

COLUMNS=160 t_expect 0 "$G" top --once --no-color
grep -Eq '^ +2 amd:0 AMD Instin ' "$out" || t_fail "top: the AMD device: $(cat "$out")"
grep -Eq '^ +0 nvidia:0 NVIDIA ' "$out" || t_fail "top: the NVIDIA device: $(cat "$out")"
t_ok "gpum top --once shows each GPU's vendor and number"

t_expect 0 "$G" slurm conf --node n1
grep -qx 'Name=gpu Type=h100_80gb File=/dev/nvidia0 Flags=nvidia_gpu_env' "$out" || t_fail "slurm conf nvidia: $(cat "$out")"
grep -qx 'Name=gpu Type=mi300x File=/dev/dri/renderD128 Flags=amd_gpu_env' "$out" || t_fail "slurm conf amd 0: $(cat "$out")"
grep -qx 'Name=gpu Type=mi300x File=/dev/dri/renderD129 Flags=amd_gpu_env' "$out" || t_fail "slurm conf amd 1: $(cat "$out")"
grep -q 'Gres=gpu:h100_80gb:2,gpu:mi300x:2,shard:' "$out" || t_fail "slurm conf Gres: $(cat "$out")"
t_ok "gpum slurm conf: AMD GPUs as render nodes, each line with its vendor's env flag"

# rocm_smi.library (--rocm-smi-library) chooses the ROCm SMI library, as nvml.library NVML's.
t_expect 1 "$G" --backend rocm --rocm-smi-library /nonexistent/librocm_smi64.so.1 status
grep -q 'cannot load the ROCm SMI library (chosen by option): /nonexistent/librocm_smi64.so.1' "$T_ERR" ||
  t_fail "--rocm-smi-library: $(cat "$T_ERR")"
t_expect 0 "$G" --rocm-smi-library /nonexistent/librocm_smi64.so.1 status --json
t_pyjson "$out" 'assert d["backend"] == "nvml" and len(d["devices"]) == 2, d["backend"]' ||
  t_fail "auto without a loadable ROCm SMI: the NVIDIA devices alone"
t_ok "rocm_smi.library chooses the library; auto goes on without it"

# No vendor library: the host.
GPUM_SIM_NODE= GPUM_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 \
  GPUM_ROCM_SMI_LIBRARY=/nonexistent/librocm_smi64.so.1 t_expect 0 "$G" status --json
t_pyjson "$out" '
assert d["backend"] == "host", d["backend"]
assert [x["vendor"] for x in d["devices"]] == ["host"], d["devices"]
' || t_fail "no vendor library: not the host"
t_ok "no vendor library loads: the host backend"

gd_start
t_wait_file "$GPUM_STATE_DIR/http.addr"
hp '
s = expect("GET", "/api/v1/gpu/status", 200)
got = [(d["index"], d["vendor"], d["vendor_index"]) for d in s["devices"]]
assert got == [(0, "nvidia", 0), (1, "nvidia", 1), (2, "amd", 0), (3, "amd", 1)], got
st, hd, text = call("GET", "/metrics")
used = [l for l in text.splitlines() if l.startswith("gpum_device_memory_used_bytes{")]
assert len(used) == 4, used
assert sum("vendor=\"amd\"" in l for l in used) == 2 and sum("vendor=\"nvidia\"" in l for l in used) == 2, used
open(args[0], "w").write(text)
c = gpumd_client.Client()
assert [d["vendor"] for d in c.ok("status")["devices"]] == ["nvidia", "nvidia", "amd", "amd"]
' "$T_SCRATCH/metrics.txt" || t_fail "gpumd status, REST and /metrics"
PROMTOOL=$(command -v promtool || echo "$GPUM_SOURCE_DIR/.cache/tools/bin/promtool")
[ -x "$PROMTOOL" ] || t_fail "promtool not found (scripts/deps.sh extracts it into .cache/tools/bin)"
"$PROMTOOL" check metrics <"$T_SCRATCH/metrics.txt" >"$T_SCRATCH/promtool.out" 2>&1 ||
  t_fail "promtool check metrics: $(cat "$T_SCRATCH/promtool.out")"
t_ok "gpumd: vendor in its status (socket, REST) and on every device row of /metrics"

# envof FILE NAME: the value of NAME in env(1) output FILE; "<unset>" when it is not there.
envof() { grep -m1 "^$2=" "$1" | cut -d= -f2- || echo "<unset>"; }
uuid_of() { t_pyjson "$T_SCRATCH/first.json" "print(d['devices'][$1]['uuid'])"; }

t_expect 0 "$G" run --mem 1GiB --type amd -q -- env
cp "$out" "$T_SCRATCH/amd.env"
[ "$(envof "$T_SCRATCH/amd.env" HIP_VISIBLE_DEVICES)" = 0 ] || t_fail "HIP_VISIBLE_DEVICES: $(cat "$T_SCRATCH/amd.env")"
[ "$(envof "$T_SCRATCH/amd.env" CUDA_VISIBLE_DEVICES)" = "" ] || t_fail "CUDA_VISIBLE_DEVICES is not empty for an AMD grant"
rocr=$(envof "$T_SCRATCH/amd.env" ROCR_VISIBLE_DEVICES)
[ "$rocr" = "$(uuid_of 2)" ] || [ "$rocr" = "$(uuid_of 3)" ] || t_fail "ROCR_VISIBLE_DEVICES '$rocr' is not an AMD GPU's UUID"
[ "$(envof "$T_SCRATCH/amd.env" GPUM_RESERVATION_DEVICES)" = "$rocr" ] || t_fail "GPUM_RESERVATION_DEVICES"
t_ok "--type amd: an AMD GPU, named by ROCR_VISIBLE_DEVICES (UUID) and HIP_VISIBLE_DEVICES=0; CUDA sees none"

t_expect 0 "$G" run --mem 1GiB --type nvidia -q -- env
cuda=$(envof "$out" CUDA_VISIBLE_DEVICES)
[ "$cuda" = "$(uuid_of 0)" ] || [ "$cuda" = "$(uuid_of 1)" ] || t_fail "CUDA_VISIBLE_DEVICES '$cuda'"
[ "$(envof "$out" ROCR_VISIBLE_DEVICES)" = "<unset>" ] || t_fail "an NVIDIA grant sets ROCR_VISIBLE_DEVICES"
t_ok "--type nvidia: CUDA_VISIBLE_DEVICES, no ROCm variable"

t_expect 0 "$G" run --mem 1GiB --gpus 2 --type amd -q -- env
[ "$(envof "$out" HIP_VISIBLE_DEVICES)" = "0,1" ] || t_fail "two AMD GPUs: HIP_VISIBLE_DEVICES $(envof "$out" HIP_VISIBLE_DEVICES)"
r2=$(envof "$out" ROCR_VISIBLE_DEVICES)
[ "$r2" = "$(uuid_of 2),$(uuid_of 3)" ] || [ "$r2" = "$(uuid_of 3),$(uuid_of 2)" ] || t_fail "two AMD GPUs: ROCR_VISIBLE_DEVICES '$r2'"
for i in 1 2 3; do
  t_expect 0 "$G" run --mem 1GiB --gpus 2 -q -- env
  c=$(envof "$out" CUDA_VISIBLE_DEVICES) r=$(envof "$out" ROCR_VISIBLE_DEVICES)
  if [ "$c" = "" ]; then
    [ "$(tr ',' '\n' <<<"$r" | grep -c '^GPU-')" -eq 2 ] || t_fail "two GPUs, round $i: '$c' '$r'"
  else
    [ "$r" = "<unset>" ] && [ "$(tr ',' '\n' <<<"$c" | grep -c '^GPU-')" -eq 2 ] || t_fail "two GPUs, round $i: '$c' '$r'"
  fi
done
t_expect 1 "$G" run --mem 1GiB --gpus 3 --no-wait -q -- true
grep -q 'needs 3 GPUs of one vendor but this node has at most 2 of one vendor' "$T_ERR" ||
  t_fail "three GPUs: $(cat "$T_ERR")"
t_ok "a reservation's GPUs are of one vendor; three of one vendor never fit"

id=$("$G" reserve --mem 1GiB --type amd --ttl 1h -q 2>/dev/null)
[ -n "$id" ] || t_fail "gpum reserve printed no id"
t_expect 0 "$G" jobs --json
t_pyjson "$out" '
r = [x for x in (d if isinstance(d, list) else d["reservations"]) if x["id"] == "'"$id"'"][0]
assert [(x["vendor"], x["index"] in (2, 3)) for x in r["devices"]] == [("amd", True)], r["devices"]
assert r["devices"][0]["vendor_index"] == r["devices"][0]["index"] - 2, r["devices"]
' || t_fail "gpum jobs --json: the reservation's device vendor"
t_ok "gpum jobs --json: a reservation's devices with vendor and vendor_index"
