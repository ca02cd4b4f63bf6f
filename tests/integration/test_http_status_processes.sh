#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The REST status's view of each GPU for the dashboard (docs/rest.md, docs/dashboard.md):
# "grantable" is the capacity less what is committed; "processes" lists, largest first, a
# job's process under gpum run with its reservation's id and memory held outside reservations
# (gpum sim hold) as unmanaged (reservation null), each with its uid, its owner's user name
# (resolved by gpumd's cache off the loop: the uid first, the name once resolved) and its
# command line.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
t_wait_file "$GPUM_STATE_DIR/http.addr"
URL="http://$(cat "$GPUM_STATE_DIR/http.addr")/api/v1/gpu/status"

GIB=1073741824
ready=$T_SCRATCH/ready
t_bg "$GPUM_BIN" run --mem 4GiB --label procs-job -q -- \
  "$GPUM_TEST_PROGS/device_cuda_alloc" 0 $GIB "$ready"
t_wait_file "$ready"
job=$(cat "$ready")
holder=$("$GPUM_BIN" sim hold "$T_NODE" --device 1 --bytes 3GiB --for 600s)

# check: the status shows both processes as described (exits 1 while it does not yet).
check() {
  curl -sf "$URL" >"$T_SCRATCH/status.json" || return 1
  python3 - "$T_SCRATCH/status.json" "$job" "$holder" "$(id -u)" "$(id -un)" "$GPUM_TEST_PROGS" <<'PY'
import json, sys
path, job, holder, uid, user, progs = sys.argv[1:]
devs = json.load(open(path))["devices"]
procs = {p["pid"]: (d, p) for d in devs for p in (d["processes"] or [])}
for d in devs:
    assert d["grantable"] == max(0, d["capacity"] - d["committed"]), d
    mems = [p["memory"] for p in d["processes"] or []]
    assert mems == sorted(mems, reverse=True), mems
d, p = procs[int(job)]
assert p["reservation"] in d["reservations"], (p, d["reservations"])
assert p["command"].startswith(progs + "/device_cuda_alloc 0 "), p
assert p["memory"] >= 1 << 30, p
d, h = procs[int(holder)]
assert d["index"] == 1 and h["reservation"] is None and "sim hold" in h["command"], h
assert h["memory"] == 3 << 30, h
for x in (p, h):
    assert x["uid"] == int(uid), x
    assert x["user"] == user, x  # null until gpumd's cache has it
PY
}
t_until 20 check || { check || true; cat "$T_SCRATCH/status.json" >&2; t_fail "the status's processes are not as expected"; }
t_ok "grantable = capacity - committed; the job's process with its reservation, the holder unmanaged, both with uid $(id -u) named $(id -un)"
