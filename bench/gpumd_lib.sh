# SPDX-License-Identifier: Apache-2.0
# Shared by the gpumd benchmarks (sourced by bench/broker, bench/http and bench/scale): a
# simulated node and a scratch state directory, gpumd started and waited for, and a cleanup
# that stops gpumd, the baseline servers listed in BENCH_PIDS and the node.
# bench_node NAME SIM_CONFIG: sets NODE and TMP, exports the GPUM_* variables, starts the node.
bench_node() {
  export GPUM_SIM_LIBRARY=${GPUM_SIM_LIBRARY:-$BUILD/lib/libgpum_sim.so}
  unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY
  NODE="$1-$$"
  TMP=$(mktemp -d)
  export GPUM_SIM_NODE=$NODE GPUM_SOCKET=$TMP/gpumd.sock GPUM_STATE_DIR=$TMP/state
  "$GPUM" sim start "$2" --name "$NODE" >/dev/null
  trap bench_cleanup EXIT
}

GD=""
BENCH_PIDS=()
bench_cleanup() {
  local p
  for p in "$GD" "${BENCH_PIDS[@]}"; do
    [ -n "$p" ] && kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
  done
  "$GPUM" sim stop "$NODE" >/dev/null 2>&1 || true
  rm -rf "$TMP"
}

# bench_gpumd [CMD...]: starts gpumd (GD), under CMD when given (valgrind --tool=callgrind
# ...: GD is then that process), and waits for its readiness line (and http.addr when HTTP is
# on): 20 s, or 120 s under CMD.
bench_gpumd() {
  # Emptied here: the background job's redirection truncates it only once that job runs, and
  # the wait below must not find an earlier gpumd's readiness line (a bench's second gpumd).
  : >"$TMP/gpumd.out"
  "$@" "$GPUMD" >"$TMP/gpumd.out" 2>"$TMP/gpumd.err" &
  GD=$!
  local i=0 limit=2000
  [ $# -gt 0 ] && limit=12000
  until grep -qs '^gpumd ready' "$TMP/gpumd.out" &&
    { [ "${GPUM_HTTP_LISTEN:-}" = off ] || [ -s "$GPUM_STATE_DIR/http.addr" ]; }; do
    i=$((i + 1))
    [ $i -gt $limit ] && { tail "$TMP/gpumd.err" >&2; echo "gpumd not ready" >&2; exit 1; }
    sleep 0.01
  done
}
