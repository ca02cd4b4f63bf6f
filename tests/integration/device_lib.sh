# SPDX-License-Identifier: Apache-2.0
# Helpers for the device-layer integration tests (sourced, not run): lib.sh plus a simulated
# node driven through libgpum_sim.so's control API (tests/integration/progs/device_simctl.c),
# so these tests depend on the simulator library only. Every node started here is stopped on
# exit, after the test's processes are killed.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"

SIMCTL="$GPUM_TEST_PROGS/device_simctl"
DUMP="$GPUM_TEST_PROGS/device_dump"
D_NODES=()

d_cleanup() {
  local rc=$?
  for p in "${T_PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  for n in "${D_NODES[@]:-}"; do [ -n "$n" ] && "$SIMCTL" stop "$n" >/dev/null 2>&1 || true; done
  (exit $rc)
  t_cleanup
}
trap d_cleanup EXIT

# d_sim_start SPEC [NAME]: starts a node (default $T_NODE) and exports GPUM_SIM_NODE.
d_sim_start() {
  local name=${2:-$T_NODE}
  "$SIMCTL" start "$1" "$name" || t_fail "cannot start a simulated node from $1"
  D_NODES+=("$name")
  export GPUM_SIM_NODE="$name"
}

# d_expect TEXT PATTERN WHAT: fails unless TEXT has a line matching the extended regex PATTERN.
d_expect() {
  grep -Eq -- "$2" <<<"$1" || { echo "$1" >&2; t_fail "$3 (no line matches: $2)"; }
}

# d_reject TEXT PATTERN WHAT: fails if TEXT has a line matching PATTERN.
d_reject() {
  if grep -Eq -- "$2" <<<"$1"; then echo "$1" >&2; t_fail "$3 (unexpected: $2)"; fi
}

# d_val LINE KEY: the value of KEY=VALUE in LINE (unquoted values only).
d_val() {
  sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1" | head -n1
}
