#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GET /metrics on a simulated node whose second GPU cannot read temperature, power, utilisation
# or clocks: with reservations (one 2-GPU, one whose lease pid holds memory on GPU 1), a foreign
# process holding memory (gpum sim hold) and an injected Xid 13, the live output passes
# Prometheus' own `promtool check metrics` with no complaint, and its values are right: reserved
# bytes equal the reservations, the Xid counter is 1, the foreign process is listed with its
# bytes and no reservation, the lease-pid process with its reservation (whose used bytes are
# its memory), an ERROR alert was counted, and the unsupported fields of GPU 1 are absent (not
# exported as sentinels) while GPU 0 has them. Every family is documented in docs/metrics.md.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

PROMTOOL=$(command -v promtool || echo "$GPUM_SOURCE_DIR/.cache/tools/bin/promtool")
[ -x "$PROMTOOL" ] || t_fail "promtool not found (scripts/deps.sh extracts it into .cache/tools/bin)"

spec=$T_SCRATCH/node.yaml
cat >"$spec" <<'YAML'
name: metrics
devices:
  - {name: "NVIDIA A100-SXM4-40GB", memory: 40GiB, power_limit: 400}
  - {name: "NVIDIA A100-SXM4-40GB", memory: 40GiB, power_limit: 400,
     unsupported: [temperature, power, utilization, clocks]}
YAML
t_sim_start "$spec"
N=$GPUM_SIM_NODE
export GPUM_HTTP_LISTEN=127.0.0.1:0 GPUM_MONITOR_INTERVAL=100ms
gd_start
t_wait_file "$GPUM_STATE_DIR/http.addr"
URL="http://$(cat "$GPUM_STATE_DIR/http.addr")/metrics"
M=$T_SCRATCH/metrics.txt

gd_py '
c = Client()
r1 = c.ok("reserve", bytes_per_gpu="10GiB", label="train \"a\"", lease="ttl", ttl_ms=600000)
r2 = c.ok("reserve", bytes_per_gpu="5GiB", gpus=2, label="pair", lease="ttl", ttl_ms=600000)
assert r1["reservation"]["state"] == "GRANTED" and r2["reservation"]["state"] == "GRANTED"
' || t_fail "reservations"
hold_pid=$("$GPUM_BIN" sim hold "$N" --device 0 --bytes 3GiB) || t_fail "sim hold"
# A second process on GPU 1 belongs to a reservation (its lease pid).
held_pid=$("$GPUM_BIN" sim hold "$N" --device 1 --bytes 2GiB) || t_fail "sim hold"
gd_py '
c = Client()
r = c.ok("reserve", bytes_per_gpu="4GiB", devices=["1"], lease="pid", pid=int(args[0]))
assert r["reservation"]["state"] == "GRANTED" and r["reservation"]["id"] == "r-3", r
' "$held_pid" || t_fail "reservation with a lease pid"
"$GPUM_BIN" sim inject "$N" --device 0 --xid 13 >/dev/null || t_fail "sim inject --xid 13"

fetch() { curl -sS -f -o "$M" "$URL"; }
ready() {
  fetch && grep -q '^gpum_xid_errors_total{.*xid="13"} 1$' "$M" &&
    grep -q "^gpum_process_memory_used_bytes{.*pid=\"$hold_pid\",user=\"$(id -un)\"" "$M" &&
    grep -q "^gpum_process_memory_used_bytes{.*pid=\"$held_pid\",.*reservation=\"r-3\"" "$M" &&
    grep -q '^gpum_alerts_total{level="ERROR"} 1$' "$M" &&
    grep -q '^gpum_device_temperature_celsius{gpu="0"' "$M"
}
t_until 20 ready || t_fail "metrics never showed the Xid, the hold process and a sample: $(cat "$M")"
t_ok "Xid, hold process (with its user name, from the users cache) and samples reach /metrics"

curl -sS -D "$T_SCRATCH/headers" -o /dev/null "$URL"
grep -qi '^content-type: text/plain; version=0.0.4' "$T_SCRATCH/headers" ||
  t_fail "content type: $(cat "$T_SCRATCH/headers")"
"$PROMTOOL" check metrics <"$M" >"$T_SCRATCH/promtool.out" 2>&1 ||
  t_fail "promtool check metrics: $(cat "$T_SCRATCH/promtool.out")"
[ ! -s "$T_SCRATCH/promtool.out" ] || t_fail "promtool complained: $(cat "$T_SCRATCH/promtool.out")"
t_ok "promtool check metrics passes cleanly"

python3 - "$M" "$hold_pid" "$held_pid" <<'PY' || t_fail "metric values: $(cat "$M")"
import re, sys
text, hold, held = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
series = {}
for line in text.splitlines():
    if line.startswith("#"):
        continue
    m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
    assert m, line
    labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
    key = (m.group(1), tuple(sorted(labels.items())))
    assert key not in series, "duplicate series " + line
    series[key] = float(m.group(4))
def get(name, **want):
    out = [(dict(l), v) for (n, l), v in series.items()
           if n == name and all(dict(l).get(k) == w for k, w in want.items())]
    return out
GiB = 2**30
r = get("gpum_reservation_reserved_bytes", reservation="r-1")
assert len(r) == 1 and r[0][1] == 10 * GiB and r[0][0]["label"] == 'train \\"a\\"', r
r = get("gpum_reservation_reserved_bytes", reservation="r-2")
assert sorted(l["gpu"] for l, v in r) == ["0", "1"] and all(v == 5 * GiB for l, v in r), r
assert get("gpum_reservations", state="granted")[0][1] == 3
assert get("gpum_queue_length")[0][1] == 0
x = get("gpum_xid_errors_total", xid="13")
assert len(x) == 1 and x[0][1] == 1 and x[0][0]["gpu"] == "0" and x[0][0]["uuid"].startswith("GPU-"), x
assert x[0][0]["model"] == "NVIDIA A100-SXM4-40GB", x
p = get("gpum_process_memory_used_bytes", pid=hold)
assert len(p) == 1 and p[0][1] == 3 * GiB and p[0][0]["reservation"] == "" and p[0][0]["gpu"] == "0", p
assert get("gpum_device_reserved_bytes", gpu="0")[0][1] == 15 * GiB
p = get("gpum_process_memory_used_bytes", pid=held)
assert len(p) == 1 and p[0][1] == 2 * GiB and p[0][0]["reservation"] == "r-3" and p[0][0]["gpu"] == "1", p
u = get("gpum_reservation_used_bytes", reservation="r-3")
assert len(u) == 1 and u[0][0]["gpu"] == "1" and u[0][1] == 2 * GiB, u
assert get("gpum_reservation_reserved_bytes", reservation="r-3")[0][1] == 4 * GiB
assert all(v == 0 for l, v in get("gpum_reservation_used_bytes", reservation="r-1")), "r-1 has no process"
for name in ("gpum_device_temperature_celsius", "gpum_device_power_watts",
             "gpum_device_utilization_ratio", "gpum_device_sm_clock_hertz"):
    assert get(name, gpu="0"), name + " missing on GPU 0"
    assert not get(name, gpu="1"), name + " exported for GPU 1, which cannot read it"
for name in ("gpum_device_memory_used_bytes", "gpum_device_memory_total_bytes"):
    assert len(get(name)) == 2, name
assert get("gpum_device_memory_total_bytes", gpu="1")[0][1] == 40 * GiB
u = get("gpum_device_utilization_ratio", gpu="0")[0][1]
assert 0 <= u <= 1, u
h = get("gpum_device_health_state", gpu="1")
assert sorted(l["state"] for l, v in h) == ["AVAILABLE", "BUSY", "DISABLED", "ERROR"] and sum(v for l, v in h) == 1, h
assert [v for l, v in get("gpum_device_up")] == [1, 1], get("gpum_device_up")
assert get("gpum_queue_wait_seconds_count")[0][1] == 3
assert get("gpum_queue_wait_seconds_bucket", le="+Inf")[0][1] == 3
# No sentinel anywhere: no negative, NaN or 2^32-1 / 2^64-1 style values.
for (n, l), v in series.items():
    assert v == v and v >= 0 and v not in (4294967295, 18446744073709551615), (n, l, v)
PY
t_ok "values: reserved bytes, Xid counter, hold process, unsupported fields absent"

# docs/metrics.md lists every family the live output has.
python3 - "$M" "$GPUM_SOURCE_DIR/docs/metrics.md" <<'PY' || t_fail "docs/metrics.md is missing metrics"
import re, sys
fams = re.findall(r"^# TYPE (\S+) ", open(sys.argv[1]).read(), re.M)
doc = open(sys.argv[2]).read()
missing = [f for f in fams if "`%s`" % f not in doc]
assert not missing, missing
PY
t_ok "every metric family is documented in docs/metrics.md"

# A lost GPU's values are no measurement: gpum_device_up 0 and its sample series left out (not
# frozen at their last values); GPU 0 goes on; the REST status has no utilisation for it.
grep -q '^gpum_device_up{gpu="0",.*} 1$' "$M" && grep -q '^gpum_device_up{gpu="1",.*} 1$' "$M" ||
  t_fail "gpum_device_up: $(grep gpum_device_up "$M")"
"$GPUM_BIN" sim inject "$N" --device 1 --xid 79 >/dev/null || t_fail "sim inject --xid 79"
lost() { fetch && grep -q '^gpum_device_up{gpu="1",.*} 0$' "$M"; }
t_until 20 lost || t_fail "GPU 1 still up after Xid 79: $(grep gpum_device_up "$M")"
for name in gpum_device_memory_used_bytes gpum_device_memory_total_bytes gpum_device_power_watts; do
  ! grep -q "^$name{gpu=\"1\"" "$M" || t_fail "$name still exported for the lost GPU 1"
done
grep -q '^gpum_device_memory_used_bytes{gpu="0"' "$M" &&
  grep -q '^gpum_device_last_sample_timestamp_seconds{gpu="1"' "$M" ||
  t_fail "GPU 0's series or GPU 1's last sample time are gone: $(cat "$M")"
curl -sS -f "http://$(cat "$GPUM_STATE_DIR/http.addr")/api/v1/gpu/status" >"$T_OUT" || t_fail "status"
python3 -c 'import json,sys
d = [x for x in json.load(open(sys.argv[1]))["devices"] if x["index"] == 1][0]
assert d["state"] == "ERROR" and d["utilization_ratio"] is None, d' "$T_OUT" ||
  t_fail "the REST status of the lost GPU: $(cat "$T_OUT")"
t_ok "a lost GPU: gpum_device_up 0, its series left out, GPU 0 unaffected"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
