#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum status with one GPU whose driver calls hang (device 1 slowed to 60 s per NVML call):
# each device is read on its own thread, so status prints after status.timeout (1s here)
# instead of hanging with the device, with device 0 as usual and device 1 as ERROR "no
# answer within 1000 ms", in text and JSON; --watch keeps drawing frames without waiting
# again for the device still stuck in its call; once the fault is cleared, both devices are
# read again.
source "$(dirname "$0")/lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
"$GPUM_BIN" sim inject "$T_NODE" --device 1 --slow 60000 >/dev/null || t_fail "sim inject --slow"
export GPUM_STATUS_TIMEOUT=1s

t0=$(date +%s%N)
t_expect 0 "$GPUM_BIN" status --no-color
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$ms" -lt 30000 ] || t_fail "gpum status took $ms ms with a hung device (the hang is 60 s)"
grep -q '^\[0\] NVIDIA H100.*AVAILABLE' "$T_OUT" || { cat "$T_OUT" >&2; t_fail "device 0 not shown"; }
grep -q '^\[1\] .*ERROR .*no answer within 1000 ms' "$T_OUT" ||
  { cat "$T_OUT" >&2; t_fail "device 1 not shown as not answering"; }
t_ok "gpum status prints with device 1 hung: device 0 AVAILABLE, device 1 ERROR (no answer)"

t_expect 0 "$GPUM_BIN" status --json
python3 - "$T_OUT" <<'PY' || t_fail "JSON with a hung device"
import json, sys
d = json.load(open(sys.argv[1]))
devs = {x["index"]: x for x in d["devices"]}
assert devs[0]["state"] == "AVAILABLE", devs[0]
assert devs[1]["state"] == "ERROR" and "no answer within 1000 ms" in devs[1]["reason"], devs[1]
PY
t_ok "gpum status --json: the same"

# Three frames at 0.2 s: the first waits for status.timeout, the next ones do not wait again
# for the device still in its call (three would take over 3 s if each waited).
frames=$(timeout 20 "$GPUM_BIN" status --watch 0.2 --json | head -n 3) || true
[ "$(printf '%s\n' "$frames" | grep -c '"no answer within 1000 ms')" = 3 ] ||
  { printf '%s\n' "$frames" >&2; t_fail "--watch did not draw 3 frames with device 1 hung"; }
t_ok "gpum status --watch keeps drawing frames with device 1 hung"

"$GPUM_BIN" sim clear "$T_NODE" >/dev/null || t_fail "sim clear"
t_expect 0 "$GPUM_BIN" status --no-color
grep -q '^\[1\] NVIDIA H100.*AVAILABLE' "$T_OUT" || { cat "$T_OUT" >&2; t_fail "device 1 not back"; }
t_ok "once the fault is cleared, device 1 is read again"
