#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Kubernetes-style resource names and the GPU memory table of the configuration (the seed's
# gpu_resource and gpu_memory_specs, docs/config.md) reach what gpumd shows, on a simulated node
# with two Tesla T4 and two Tesla V100 32GB: each device's vendor, gpu_type and resource in the
# status (socket and REST) and as labels of gpum_device_info in /metrics; a family's memory from
# gpu_memory_specs where the device's name states none (the T4), the name's own figure where it
# does (the V100's 32 GB wins over the file's 40).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"
source "$(dirname "$0")/http_lib.sh"

cat >"$T_SCRATCH/gpum.yaml" <<'YAML'
gpu_resource:
  nvidia: "example.com/gpu"
gpu_memory_specs:
  T4: 24.0
  V100: 40.0
YAML
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/mixed-t4-v100.yaml"
gd_start --config "$T_SCRATCH/gpum.yaml"

hp '
s = expect("GET", "/api/v1/gpu/status", 200)
for d in s["devices"]:
    assert d["vendor"] == "nvidia" and d["resource"] == "example.com/gpu", d
    assert d["gpu_type"] == ("T4" if "T4" in d["name"] else "V100"), d
mem = {n["gpu_type"]: n["memory_per_gpu"] for n in s["available_nodes"]}
assert mem == {"T4": 24.0, "V100": 32.0}, s["available_nodes"]
st, hd, text = call("GET", "/metrics")
info = [l for l in text.splitlines() if l.startswith("gpum_device_info{")]
assert len(info) == 4 and all("resource=\"example.com/gpu\"" in l and "vendor=\"nvidia\"" in l for l in info), info
assert sum("gpu_type=\"T4\"" in l for l in info) == 2, info
c = gpumd_client.Client()
assert all(d["resource"] == "example.com/gpu" for d in c.ok("status")["devices"])
' || t_fail "resource names and memory table"
t_ok "resource, vendor and gpu_type in status and /metrics; gpu_memory_specs for a T4, the name for a V100"
