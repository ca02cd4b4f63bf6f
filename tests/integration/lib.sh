# SPDX-License-Identifier: Apache-2.0
# Shared helpers for integration tests (sourced, not run). Each test gets a scratch directory
# and a unique simulated-node name; everything it starts is stopped on exit.
set -euo pipefail

: "${GPUM_BIN:?run through ctest (GPUM_BIN unset)}"
: "${GPUM_SOURCE_DIR:?}"
: "${GPUM_TEST_PROGS:?}"
export GPUM_SIM_LIBRARY GPUM_BIN
# Other GPU managers' variables are read as aliases of gpum's options (docs/config.md, Aliases):
# a test sets the ones it means, none comes from the caller's environment.
unset USE_GPU GPU_DEVICE MAX_CONCURRENT_JOBS JOB_TIMEOUT SAFETY_MARGIN_MB

T_SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/gpum-test.XXXXXX")
T_NODE="t$$-$RANDOM"
T_PIDS=()
T_NODES=()

t_cleanup() {
  local rc=$?
  for p in "${T_PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  for n in "${T_NODES[@]:-}"; do [ -n "$n" ] && "$GPUM_BIN" sim stop "$n" >/dev/null 2>&1 || true; done
  rm -rf "$T_SCRATCH"
  exit $rc
}
trap t_cleanup EXIT

t_fail() { echo "FAIL: $*" >&2; exit 1; }
t_ok() { echo "ok: $*"; }

# t_sim_start SPEC [NAME]: starts a simulated node (registered for cleanup), exports GPUM_SIM_NODE.
t_sim_start() {
  local spec=$1 name=${2:-$T_NODE}
  "$GPUM_BIN" sim start "$spec" --name "$name" >/dev/null || t_fail "sim start $spec"
  T_NODES+=("$name")
  export GPUM_SIM_NODE="$name"
}

# t_bg CMD...: runs CMD in the background, remembers its pid in T_LAST_PID (killed at exit).
t_bg() {
  "$@" &
  T_LAST_PID=$!
  T_PIDS+=("$T_LAST_PID")
}

# t_wait_file FILE [SECONDS]: waits until FILE exists and is non-empty (a readiness signal written
# by the process under test; polling a file is synchronisation, not a sleep standing in for it).
t_wait_file() {
  local f=$1 secs=${2:-10} i=0
  while [ ! -s "$f" ]; do
    i=$((i + 1))
    [ $i -gt $((secs * 100)) ] && t_fail "timed out waiting for $f"
    sleep 0.01
  done
}

# t_until SECONDS CMD...: retries CMD until it succeeds or SECONDS pass.
t_until() {
  local secs=$1 i=0
  shift
  until "$@" >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -gt $((secs * 50)) ] && return 1
    sleep 0.02
  done
}

T_OUT=$T_SCRATCH/out
T_ERR=$T_SCRATCH/err

# t_expect CODE CMD...: runs CMD with stdout in $T_OUT and stderr in $T_ERR and fails the test
# (showing both) unless CMD exits with CODE.
t_expect() {
  local want=$1 rc=0
  shift
  "$@" >"$T_OUT" 2>"$T_ERR" || rc=$?
  [ "$rc" -eq "$want" ] || { cat "$T_OUT" "$T_ERR" >&2; t_fail "'$*' exited $rc, expected $want"; }
}

# t_pyjson FILE SCRIPT [ARGS...]: runs a python3 snippet (standard library only) with d = the JSON
# document in FILE and args = ARGS; the snippet's exit status is the result.
t_pyjson() {
  local file=$1 script=$2
  shift 2
  python3 -c "import json, sys
d = json.load(open(sys.argv[1]))
args = sys.argv[2:]
$script" "$file" "$@"
}

# t_shim_preload: the LD_PRELOAD value that loads the enforcement shim. A sanitizer build's shim
# needs its sanitizer runtime loaded before it (the runtime must come first), so it is named too.
t_shim_preload() {
  local shim=$GPUM_BUILD_DIR/lib/libgpum_enforce.so rt
  [ -f "$shim" ] || t_fail "no $shim"
  rt=$(ldd "$shim" | awk '/lib(asan|tsan)\.so/ {print $3; exit}')
  echo "${rt:+$rt }$shim"
}
