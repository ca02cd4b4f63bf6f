#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The dashboard in a real browser: headless Chromium (Debian's /usr/bin/chromium) driven by
# playwright-core (web/node_modules) against a real gpumd on a simulated node of two H100 and an
# MI300X (two vendors)
# (tests/browser/dashboard.mjs says what is checked). Screenshots of each state go to
# build/test-output/dashboard/. Skipped (77) without Chromium or web/node_modules, and in
# sanitizer builds (the page runs no C code of its own; test_web_assets.sh covers the serving).
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"

source "$GPUM_SOURCE_DIR/tests/browser/browser_lib.sh"
browser_require

source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

# A fixed port, so that gpumd comes back where the page looks for it after the restart.
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export GPUM_HTTP_LISTEN=127.0.0.1:$PORT

# Two H100 and an AMD MI300X: a node of two vendors (the cards' titles say which).
spec=$T_SCRATCH/h100x2-mi300x.yaml
{
  grep -v '^name:' "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
  printf '%s\n' '  - vendor: amd' '    name: "AMD Instinct MI300X"' '    memory: 192GiB'
} >"$spec"
t_sim_start "$spec"
gd_start
# The node script restarts gpumd: the pid of the one running is in this file, for cleanup.
export DASH_GPUMD_PIDFILE=$T_SCRATCH/gpumd.pid
echo "$GD_PID" >"$DASH_GPUMD_PIDFILE"
trap 'rc=$?; p=$(cat "$DASH_GPUMD_PIDFILE" 2>/dev/null || true); [ -n "$p" ] && kill -9 "$p" 2>/dev/null; (exit $rc); t_cleanup' EXIT

export DASH_URL="http://127.0.0.1:$PORT"
export DASH_TOKEN_FILE=$GPUM_STATE_DIR/http.token
export DASH_NODE=$T_NODE
export DASH_CHROMIUM=$CHROMIUM
export DASH_GPUMD=$GPUMD
export DASH_GPUMD_ERR=$GD_ERR
export DASH_SCRATCH=$T_SCRATCH
export DASH_PROGS=$GPUM_TEST_PROGS
export DASH_OUT=${GPUM_TEST_OUTPUT:-$GPUM_BUILD_DIR/test-output}/dashboard
mkdir -p "$DASH_OUT"
rm -f "$DASH_OUT"/*.png
node "$GPUM_SOURCE_DIR/tests/browser/dashboard.mjs" || {
  tail -n 20 "$GD_ERR" >&2 # what gpumd said, should it be what failed
  t_fail "the dashboard test failed (screenshots in $DASH_OUT)"
}
t_ok "the dashboard in Chromium: screenshots in $DASH_OUT"
