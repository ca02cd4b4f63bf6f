#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# metrics.dcgm_names: off by default, /metrics has no DCGM_FI_* family; on, it also carries
# dcgm-exporter's default-counter names and labels for what gpumd samples, so NVIDIA's
# published Grafana dashboard for dcgm-exporter finds every metric and label its queries use
# (the list below, extracted from that dashboard), with DCGM's units (MiB, %, W, MHz) and values
# that agree with gpumd's own series; the newest Xid's number is DCGM_FI_DEV_XID_ERRORS; promtool
# check metrics is clean without the option and notes nothing but DCGM's camelCase labels with it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

PROMTOOL=$(command -v promtool || echo "$GPUM_SOURCE_DIR/.cache/tools/bin/promtool")
[ -x "$PROMTOOL" ] || t_fail "promtool not found (scripts/deps.sh extracts it into .cache/tools/bin)"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
N=$GPUM_SIM_NODE
export GPUM_MONITOR_INTERVAL=100ms
M=$T_SCRATCH/metrics.txt
fetch() { curl -sS -f -o "$M" "http://$(cat "$GPUM_STATE_DIR/http.addr")/metrics"; }
sampled() { fetch && grep -q '^gpum_device_temperature_celsius{gpu="1"' "$M"; }

# Off by default.
gd_start
t_wait_file "$GPUM_STATE_DIR/http.addr"
t_until 20 sampled || t_fail "no sample in /metrics: $(cat "$M")"
"$PROMTOOL" check metrics <"$M" >"$T_SCRATCH/promtool.out" 2>&1 ||
  t_fail "promtool check metrics: $(cat "$T_SCRATCH/promtool.out")"
[ ! -s "$T_SCRATCH/promtool.out" ] || t_fail "promtool complained: $(cat "$T_SCRATCH/promtool.out")"
! grep -q '^DCGM_' "$M" && ! grep -q '^# TYPE DCGM_' "$M" ||
  t_fail "DCGM names without metrics.dcgm_names: $(grep DCGM "$M")"
gd_stop TERM
t_ok "without metrics.dcgm_names, /metrics has no DCGM_FI_* family"

rm -f "$GPUM_STATE_DIR/http.addr"
GPUM_METRICS_DCGM_NAMES=true gd_start
t_wait_file "$GPUM_STATE_DIR/http.addr"
"$GPUM_BIN" sim inject "$N" --device 1 --xid 13 >/dev/null || t_fail "sim inject --xid 13"
xid() { fetch && grep -q '^DCGM_FI_DEV_XID_ERRORS{gpu="1",.*} 13$' "$M" && sampled; }
t_until 20 xid || t_fail "DCGM_FI_DEV_XID_ERRORS never showed Xid 13: $(grep DCGM "$M")"
# promtool's lint wants snake_case label names; dcgm-exporter's are camelCase (modelName,
# Hostname, UUID), and dashboards query them so: that note, on DCGM_FI_* families only, is the
# one allowed (dcgm-exporter's own output gets it too). Anything else fails.
"$PROMTOOL" check metrics <"$M" >"$T_SCRATCH/promtool.out" 2>&1 || true
! grep -v "^DCGM_FI_[A-Z_]* label names should be written in 'snake_case' not 'camelCase'$" \
  "$T_SCRATCH/promtool.out" || t_fail "promtool complained: $(cat "$T_SCRATCH/promtool.out")"
t_ok "with metrics.dcgm_names, promtool check metrics notes only dcgm-exporter's camelCase labels"

python3 - "$M" "$(hostname)" <<'PY' || t_fail "DCGM names: $(grep DCGM "$M")"
import re, sys
text, host = open(sys.argv[1]).read(), sys.argv[2]
series = []
for line in text.splitlines():
    if line.startswith("#"):
        continue
    m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
    assert m, line
    series.append((m.group(1), dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or "")),
                   float(m.group(4))))
def get(name, **want):
    return [(l, v) for n, l, v in series if n == name and all(l.get(k) == x for k, x in want.items())]

# What NVIDIA's dashboard for dcgm-exporter queries: the "expr" of each panel and the
# template variables' label_values() of grafana/dcgm-exporter-dashboard.json in
# github.com/NVIDIA/dcgm-exporter (the Grafana 9 revision, grafana.com dashboard 12239), and the
# GPU_UTIL panel of its earlier revision. Extracted by hand; the names only, no part of the file.
DASHBOARD_METRICS = ["DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_SM_CLOCK",
                     "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_UTIL"]
DASHBOARD_LABELS = ["Hostname", "gpu", "UUID"]
# Its profiling panels (Tensor Core Utilization; GPU Utilization in the Grafana 9 revision) read
# DCP fields that need DCGM's profiling module: gpumd does not measure them and exports no
# stand-in (docs/metrics.md). GPU_I_ID / GPU_I_PROFILE are MIG instances' labels, and the
# dashboard's by(uuid) names a label dcgm-exporter itself does not export.
NOT_EXPORTED = ["DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"]
# The rest of dcgm-exporter's default counters that gpumd samples, and its labels.
OTHERS = ["DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_XID_ERRORS"]
LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"]

types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
for name in DASHBOARD_METRICS + OTHERS:
    rows = get(name)
    assert len(rows) == 2, (name, rows)  # one per GPU
    assert types[name] == "gauge", (name, types.get(name))
    for l, v in rows:
        assert set(DASHBOARD_LABELS) <= set(l) and set(l) == set(LABELS), (name, l)
        assert l["Hostname"] == host and l["device"] == "nvidia" + l["gpu"], l
        assert l["modelName"] == "NVIDIA H100 80GB HBM3" and l["DCGM_FI_DRIVER_VERSION"], l
for name in NOT_EXPORTED:
    assert not get(name) and name not in types, name

# Values in DCGM's units agree with gpumd's own series of the same rendering.
for gpu in ("0", "1"):
    uuid = get("gpum_device_info", gpu=gpu)[0][0]["uuid"]
    d = dict(gpu=gpu, UUID=uuid)
    one = lambda name, **kw: get(name, **kw)[0][1]
    assert get("DCGM_FI_DEV_FB_USED", **d), (gpu, uuid)
    assert one("DCGM_FI_DEV_FB_USED", **d) == one("gpum_device_memory_used_bytes", gpu=gpu) // 2**20
    assert one("DCGM_FI_DEV_FB_FREE", **d) == one("gpum_device_memory_free_bytes", gpu=gpu) // 2**20
    assert one("DCGM_FI_DEV_GPU_TEMP", **d) == one("gpum_device_temperature_celsius", gpu=gpu)
    assert one("DCGM_FI_DEV_POWER_USAGE", **d) == one("gpum_device_power_watts", gpu=gpu)
    assert abs(one("DCGM_FI_DEV_GPU_UTIL", **d) - 100 * one("gpum_device_utilization_ratio", gpu=gpu)) < 1e-9
    assert one("DCGM_FI_DEV_SM_CLOCK", **d) * 1e6 == one("gpum_device_sm_clock_hertz", gpu=gpu)
    assert one("DCGM_FI_DEV_MEM_CLOCK", **d) * 1e6 == one("gpum_device_memory_clock_hertz", gpu=gpu)
    assert get("gpum_device_info", gpu=gpu)[0][0]["pci_bus_id"] == get("DCGM_FI_DEV_FB_USED", **d)[0][0]["pci_bus_id"]
assert get("DCGM_FI_DEV_XID_ERRORS", gpu="0")[0][1] == 0
assert get("DCGM_FI_DEV_XID_ERRORS", gpu="1")[0][1] == 13
PY
t_ok "every metric and label of NVIDIA's dcgm-exporter dashboard is there, in DCGM's units"

# The newest Xid wins.
"$GPUM_BIN" sim inject "$N" --device 1 --xid 31 >/dev/null || t_fail "sim inject --xid 31"
xid31() { fetch && grep -q '^DCGM_FI_DEV_XID_ERRORS{gpu="1",.*} 31$' "$M"; }
t_until 20 xid31 || t_fail "DCGM_FI_DEV_XID_ERRORS after Xid 31: $(grep XID "$M")"
t_ok "DCGM_FI_DEV_XID_ERRORS is the newest Xid's number"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
