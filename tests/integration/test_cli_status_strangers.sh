#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum status pairs gpumd's devices with the devices it sees by UUID, not by index: run without
# GPUM_SIM_NODE beside a gpumd that manages a simulated node, it sees the host's CPU, and must
# neither show the CPU holding the H100s' reservations nor stay silent about them: it says that
# gpumd's GPUs are not among the devices seen here, and lists their reservations under them.
# With the same node, the reservations are under their own GPU, by UUID.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
t_expect 0 "$GPUM_BIN" reserve --mem 20GiB --ttl 5m -q
ID=$(cat "$T_OUT")

# The same node: the reservation is under GPU 0's line.
t_expect 0 "$GPUM_BIN" status --no-color
python3 - "$T_OUT" "$ID" <<'PY' || t_fail "with the node: $(cat "$T_OUT")"
import sys
lines = open(sys.argv[1]).read().splitlines()
g0 = [i for i, l in enumerate(lines) if l.startswith("[0] NVIDIA H100")][0]
r = [i for i, l in enumerate(lines) if l.strip().startswith(sys.argv[2])][0]
assert r > g0 and not lines[g0 + 1].startswith("[1]"), lines
assert not [l for l in lines if "not among the devices seen here" in l], lines
PY

# Another driver (the host backend): gpumd's GPUs are said to be others.
t_expect 0 env -u GPUM_SIM_NODE GPUM_BACKEND=host "$GPUM_BIN" status --no-color
python3 - "$T_OUT" "$ID" <<'PY' || t_fail "without the node: $(cat "$T_OUT")"
import sys
text = open(sys.argv[1]).read()
lines = text.splitlines()
cpu = [i for i, l in enumerate(lines) if l.startswith("[0]")][0]
assert "H100" not in lines[cpu], lines[cpu]
assert "gpumd: reserved" not in lines[cpu + 1], "the CPU is shown with gpumd's GPU 0: %r" % lines
s = [i for i, l in enumerate(lines) if "not among the devices seen here" in l]
assert len(s) == 2 and "NVIDIA H100 80GB HBM3, GPU-" in lines[s[0]], lines
r = [i for i, l in enumerate(lines) if l.strip().startswith(sys.argv[2])][0]
assert s[0] < r < s[1], lines
PY
t_ok "gpumd's devices paired by UUID; another driver's are said to be others"
