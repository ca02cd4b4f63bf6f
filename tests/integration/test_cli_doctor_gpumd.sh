#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpum doctor` checks gpumd itself: with gpumd up, its socket (owner, group, mode: the caller
# may connect), its version (the same as gpum's) and its REST API at http.listen are OK; a
# socket named by the configuration but missing fails with how to start gpumd; a stale socket
# (gpumd killed) fails as "nobody listens"; a caller outside the socket's group (as root: the
# user nobody) fails with the usermod line that fixes it. The default socket missing only warns
# (gpumd is optional for status, monitor and alerts): test_cli_doctor.sh runs without gpumd.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
unset GPUM_CONFIG GPUM_COLOR NO_COLOR CUDA_VISIBLE_DEVICES
G=$GPUM_BIN

# gpumd_findings FILE SCRIPT: t_pyjson with g = doctor's "gpumd" findings, r = its "rest" ones.
gpumd_findings() {
  local file=$1 script=$2
  shift 2
  t_pyjson "$file" "g = [x for x in d[\"findings\"] if x[\"check\"] == \"gpumd\"]
r = [x for x in d[\"findings\"] if x[\"check\"] == \"rest\"]
$script" "$@"
}

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
chmod 0755 "$T_SCRATCH"
gd_start
http=$(grep -ho 'http=[^ ]*' "$T_SCRATCH"/gpumd.out.* | head -1)
export GPUM_HTTP_LISTEN=${http#http=}
[ -n "$GPUM_HTTP_LISTEN" ] || t_fail "gpumd's readiness line names no http address"

t_expect 0 "$G" doctor --json
gpumd_findings "$T_OUT" '
assert [x["status"] for x in g] == ["OK", "OK"], g
assert "may connect" in g[0]["message"] and args[0] in g[0]["message"], g
assert "the same version as gpum" in g[1]["message"], g
assert [x["status"] for x in r] == ["OK"] and "HTTP 200" in r[0]["message"], r
' "$GPUM_SOCKET" || t_fail "doctor with gpumd up: $(cat "$T_OUT")"
t_expect 0 "$G" doctor
grep -Eq "^\[OK *\] gpumd +gpumd [^ ]+ answers at $GPUM_SOCKET" "$T_OUT" || t_fail "text: $(cat "$T_OUT")"
t_ok "gpumd up: socket, access, version and REST OK"

# A caller outside the socket's group (mode 0660): it fails, and says which group to join.
if [ "$(id -u)" -eq 0 ]; then
  rc=0
  runuser -u nobody -- env GPUM_BACKEND=host "$G" doctor --json >"$T_OUT" 2>"$T_ERR" || rc=$?
  [ "$rc" -eq 1 ] || t_fail "doctor as nobody exited $rc: $(cat "$T_OUT" "$T_ERR")"
  gpumd_findings "$T_OUT" '
assert g[0]["status"] == "FAIL" and "nobody is not in group" in g[0]["message"], g
assert "usermod -aG" in g[0]["suggestion"] and " nobody" in g[0]["suggestion"], g
' || t_fail "doctor as nobody: $(cat "$T_OUT")"
  t_ok "a caller outside the socket's group: FAIL with the usermod line"
else
  echo "skip: the permission check needs another user (run as root)"
fi

# The configured socket missing: FAIL, with how to start gpumd.
GPUM_SOCKET=$T_SCRATCH/none.sock t_expect 1 "$G" doctor
grep -Eq "^\[FAIL\] gpumd +no gpumd socket at $T_SCRATCH/none.sock" "$T_OUT" || t_fail "missing: $(cat "$T_OUT")"
grep -q -- "-> start gpumd" "$T_OUT" || t_fail "no fix for the missing socket: $(cat "$T_OUT")"
t_ok "socket missing: FAIL with the fix"

# gpumd killed: its socket stays, nobody listens.
gd_stop KILL
[ -S "$GPUM_SOCKET" ] || t_fail "no stale socket left by SIGKILL"
t_expect 1 "$G" doctor --json
gpumd_findings "$T_OUT" '
assert g[-1]["status"] == "FAIL" and "nobody listens" in g[-1]["message"], g
assert "start gpumd" in g[-1]["suggestion"], g
assert r == [], r
' || t_fail "stale socket: $(cat "$T_OUT")"
t_ok "a stale socket: FAIL, nobody listens"
