# SPDX-License-Identifier: Apache-2.0
# Helpers for the gpumd integration tests (sourced after lib.sh): a scratch socket and state
# directory, starting gpumd and waiting for its readiness line, stopping it with a signal,
# and running python snippets with the gpumd_client module (tests/integration/gpumd_client.py).
GPUMD="$GPUM_BUILD_DIR/bin/gpumd"
[ -x "$GPUMD" ] || t_fail "gpumd not built: $GPUMD"
export GPUM_SOCKET="$T_SCRATCH/gpumd.sock"
export GPUM_STATE_DIR="$T_SCRATCH/state"
# gpumd's REST API on a free port (tests run in parallel; the default 8642 would collide).
export GPUM_HTTP_LISTEN="${GPUM_HTTP_LISTEN:-127.0.0.1:0}"
# /metrics rendered afresh after every change (the default reuses a rendering for up to 1 s):
# the tests check what a change shows at once; test_metrics_cache checks the reuse.
export GPUM_HTTP_METRICS_MAX_AGE="${GPUM_HTTP_METRICS_MAX_AGE:-0}"
export PYTHONPATH="$GPUM_SOURCE_DIR/tests/integration${PYTHONPATH:+:$PYTHONPATH}"
GD_ERR="$T_SCRATCH/gpumd.err"

# gd_start [ARGS...]: starts gpumd in the background (GD_PID) and waits for "gpumd ready"
# on its stdout; fails the test when it exits first or is not ready within 20 s.
gd_start() {
  local out="$T_SCRATCH/gpumd.out.$RANDOM" i=0
  "$GPUMD" "$@" >"$out" 2>>"$GD_ERR" &
  GD_PID=$!
  T_PIDS+=("$GD_PID")
  until grep -q '^gpumd ready' "$out" 2>/dev/null; do
    if ! kill -0 "$GD_PID" 2>/dev/null; then
      cat "$GD_ERR" >&2
      t_fail "gpumd exited before it was ready"
    fi
    i=$((i + 1))
    [ $i -gt 2000 ] && t_fail "gpumd not ready within 20 s"
    sleep 0.01
  done
}

# gd_stop SIGNAL: sends SIGNAL to gpumd and waits for it; GD_RC gets its exit status.
gd_stop() {
  kill -s "$1" "$GD_PID"
  GD_RC=0
  wait "$GD_PID" || GD_RC=$?
}

# gd_pyfile NAME SCRIPT: writes SCRIPT (with gpumd_client imported, args = sys.argv[1:]) to
# $T_SCRATCH/NAME.py, for background runs with `python3 FILE ARGS &` ($! is then python).
gd_pyfile() {
  local f="$T_SCRATCH/$1.py"
  printf 'import sys, os, json, time, signal\nfrom gpumd_client import *\nargs = sys.argv[1:]\n%s\n' \
    "$2" >"$f"
  echo "$f"
}

# gd_py SCRIPT [ARGS...]: runs a python3 snippet with gpumd_client imported (Client, fail,
# wait_ready); args = ARGS. Exit status is the snippet's.
gd_py() {
  local script=$1
  shift
  python3 -c "import sys, os, json, time
from gpumd_client import *
args = sys.argv[1:]
try:
$(printf '%s\n' "$script" | sed 's/^/    /')
except Fail as e:
    fail(str(e))" "$@"
}
