#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Other GPU managers' settings read as aliases of gpum's options (docs/config.md, Aliases):
# gpumd started with the seed's environment (SAFETY_MARGIN_MB=512, MAX_CONCURRENT_JOBS,
# JOB_TIMEOUT, GPU_DEVICE, USE_GPU) and the seed's YAML file (gpu_resource, gpu_memory_specs,
# default_gpu_resource_name, monitor_update_interval, resource_change_threshold, log_level) runs
# with the mapped values (GET /api/v1/config, and the devices' capacity in /metrics is smaller by
# the 512 MiB margin), logs one line per alias at start, and `gpum doctor` names the aliases; an
# option's own name wins over its alias; a bad alias value stops gpumd with a message naming the
# alias and the option. The seed's file is carried here: tests never read ../shared.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"
source "$(dirname "$0")/http_lib.sh"
unset GPUM_CONFIG GPUM_SAFETY_MARGIN GPUM_LOG_LEVEL GPUM_MONITOR_INTERVAL GPUM_BACKEND

# The seed's gpu_config.yaml, as its document gives it (comments included).
seed=$T_SCRATCH/gpu_config.yaml
cat >"$seed" <<'EOF'
# GPU资源配置
gpu_resource:
  gpu: "nvidia.com/gpu"
  nvidia: "nvidia.com/gpu"
  amd: "amd.com/gpu"
  intel: "intel.com/gpu"
  npu: "huawei.com/npu"

# 默认GPU资源名称
default_gpu_resource_name: "nvidia.com/gpu"

# GPU显存配置 (GB)
gpu_memory_specs:
  T4: 16.0
  V100: 32.0
  A100: 80.0
  H100: 80.0
  RTX3090: 24.0
  RTX4090: 24.0
  A6000: 48.0
  A40: 48.0

# 监控配置
monitor_update_interval: 30
resource_change_threshold: 0.05
log_level: "INFO"
EOF

# The seed's environment (002), with the safety margin of the issue.
seed_env=(USE_GPU=true GPU_DEVICE=0,1 MAX_CONCURRENT_JOBS=1 JOB_TIMEOUT=3600 SAFETY_MARGIN_MB=512)

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
export "${seed_env[@]}"
gd_start --config "$seed"

# The start log: one line per alias, at info level (the seed's log_level: INFO turns info on).
grep -q 'msg="config: alias SAFETY_MARGIN_MB read as safety_margin (MiB)" value=512 set=512MiB from=environment' "$GD_ERR" ||
  { cat "$GD_ERR"; t_fail "no start log line for SAFETY_MARGIN_MB"; }
for a in USE_GPU GPU_DEVICE MAX_CONCURRENT_JOBS JOB_TIMEOUT monitor_update_interval log_level \
  gpu_memory_specs default_gpu_resource_name gpu_resource.amd; do
  grep -q "level=info module=gpumd msg=\"config: alias $a read as " "$GD_ERR" ||
    { cat "$GD_ERR"; t_fail "no start log line for $a"; }
done
grep -q 'level=warn module=gpumd msg="config: alias resource_change_threshold ignored: gpum has no such setting"' "$GD_ERR" &&
  grep -q 'level=warn module=gpumd msg="config: alias gpu_resource.npu ignored' "$GD_ERR" &&
  grep -q 'level=warn module=gpumd msg="config: alias gpu_resource.gpu not used: resources.default is set by default_gpu_resource_name' "$GD_ERR" ||
  { cat "$GD_ERR"; t_fail "ignored and overridden aliases not logged as warnings"; }
t_ok "gpumd's start log says which aliases were read"

hp '
o = expect("GET", "/api/v1/config", 200)["options"]
want = {
    "safety_margin": ("512MiB", "environment"),
    "max_concurrent_jobs": ("1", "environment"),
    "job_timeout": ("3600s", "environment"),
    "devices": ("0,1", "environment"),
    "backend": ("auto", "environment"),
    "monitor.interval": ("30s", "file"),
    "log.level": ("info", "file"),
    "resources.default": ("nvidia.com/gpu", "file"),
    "resources.nvidia": ("nvidia.com/gpu", "file"),
    "resources.amd": ("amd.com/gpu", "file"),
    "resources.intel": ("intel.com/gpu", "file"),
    "resources.memory": ("gpum.io/gpu-memory", "default"),
    "gputype.memory": ("T4=16.0,V100=32.0,A100=80.0,H100=80.0,RTX3090=24.0,RTX4090=24.0,"
                       "A6000=48.0,A40=48.0", "file"),
}
for k, (v, src) in want.items():
    assert o[k] == {"value": v, "source": src}, (k, o[k])
# the margin is in force: each device may commit min(total x 0.95, total - driver reserved)
# less 512 MiB
devs = expect("GET", "/api/v1/gpu/status", 200)["devices"]
st, hd, text = call("GET", "/metrics")
assert st == 200, st
cap = {}
for line in text.splitlines():
    if line.startswith("gpum_device_capacity_bytes{"):
        idx = int(line.split("gpu=\"")[1].split("\"")[0])
        cap[idx] = int(float(line.rsplit(" ", 1)[1]))
assert len(cap) == 2, text
for d in devs:
    m = d["memory"]
    expect_cap = min(int(m["total"] * 0.95), m["total"] - m["driver_reserved"]) - 512 * 2**20
    assert abs(cap[d["index"]] - expect_cap) < 2**20, (d["index"], cap, expect_cap, m)
'
t_ok "gpumd runs with the values the aliases give (config and capacity)"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exit $GD_RC"

# gpum doctor, in the same environment and with the same file, names every alias. (Without
# GPUM_SOCKET: gpumd is stopped, and a socket named but missing fails doctor's gpumd check.)
t_expect 0 env -u GPUM_SOCKET "$GPUM_BIN" doctor --config "$seed"
grep -Eq '^\[OK *\] alias +SAFETY_MARGIN_MB=512 \(environment\) read as safety_margin=512MiB \(MiB\)$' "$T_OUT" ||
  t_fail "doctor: SAFETY_MARGIN_MB: $(cat "$T_OUT")"
grep -Eq '^\[OK *\] alias +monitor_update_interval=30 \(.*gpu_config.yaml:24:1\) read as monitor.interval=30s \(seconds\)$' "$T_OUT" ||
  t_fail "doctor: monitor_update_interval: $(cat "$T_OUT")"
t_expect 0 env -u GPUM_SOCKET "$GPUM_BIN" doctor --json --config "$seed"
t_pyjson "$T_OUT" '
f = [x for x in d["findings"] if x["check"] == "alias"]
names = {x["message"].split("=")[0]: x for x in f}
assert set(names) == {"USE_GPU", "GPU_DEVICE", "MAX_CONCURRENT_JOBS", "JOB_TIMEOUT",
                      "SAFETY_MARGIN_MB", "gpu_resource.gpu", "gpu_resource.nvidia",
                      "gpu_resource.amd", "gpu_resource.intel", "gpu_resource.npu",
                      "default_gpu_resource_name", "gpu_memory_specs", "monitor_update_interval",
                      "resource_change_threshold", "log_level"}, sorted(names)
warned = {n for n, x in names.items() if x["status"] == "WARN"}
assert warned == {"gpu_resource.gpu", "gpu_resource.npu", "resource_change_threshold"}, warned
assert all(names[n]["suggestion"] for n in warned), f
' || t_fail "doctor --json alias findings: $(cat "$T_OUT")"
t_ok "gpum doctor names the aliases"

# gpum's own name wins, whatever its source: the file's safety_margin over SAFETY_MARGIN_MB.
printf 'safety_margin: 1GiB\nlog_level: "INFO"\n' >"$T_SCRATCH/own.yaml"
t_expect 0 env -u GPUM_SOCKET "$GPUM_BIN" doctor --config "$T_SCRATCH/own.yaml"
grep -Eq '^\[WARN\] alias +SAFETY_MARGIN_MB=512 \(environment\) not used: safety_margin is set by its own name \(file\), which wins$' "$T_OUT" ||
  t_fail "doctor: overridden alias: $(cat "$T_OUT")"
gd_start --config "$T_SCRATCH/own.yaml"
hp '
o = expect("GET", "/api/v1/config", 200)["options"]
assert o["safety_margin"] == {"value": "1GiB", "source": "file"}, o["safety_margin"]
'
grep -q 'level=warn module=gpumd msg="config: alias SAFETY_MARGIN_MB not used: safety_margin is set by its own name, which wins" value=512 from=environment' "$GD_ERR" ||
  { cat "$GD_ERR"; t_fail "overridden alias not logged"; }
gd_stop TERM
t_ok "the option's own name wins over its alias, and says so"

# A bad alias value stops gpumd (exit 2) with the alias and its option named.
t_expect 2 env SAFETY_MARGIN_MB=lots "$GPUMD" --config "$seed"
grep -q "alias SAFETY_MARGIN_MB of option 'safety_margin' (from environment): 'lots' is not a number of MiB" "$T_ERR" ||
  t_fail "bad alias message: $(cat "$T_ERR")"
printf 'monitor_update_interval: 30s\n' >"$T_SCRATCH/bad.yaml"
t_expect 2 "$GPUMD" --config "$T_SCRATCH/bad.yaml"
grep -q "alias monitor_update_interval of option 'monitor.interval' (from $T_SCRATCH/bad.yaml:1:1): '30s' is not a number of seconds" "$T_ERR" ||
  t_fail "bad file alias message: $(cat "$T_ERR")"
t_ok "a bad alias value is a configuration error naming the alias and its option"

# USE_GPU=false is the host backend.
t_expect 0 env -u GPU_DEVICE USE_GPU=false "$GPUM_BIN" status --json
t_pyjson "$T_OUT" 'assert d["backend"] == "host", d.get("backend")' ||
  t_fail "USE_GPU=false: $(head -c 400 "$T_OUT")"
t_ok "USE_GPU=false selects the host backend"
