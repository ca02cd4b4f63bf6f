# SPDX-License-Identifier: Apache-2.0
# Helpers for the monitor integration tests (sourced, not run): device_lib.sh plus a
# three-GPU simulated node and m_run, which runs one scenario of
# tests/integration/progs/monitor_scenario.c (the scenario injects its own faults through the
# simulator's control API and waits on the monitor's events).
source "$GPUM_SOURCE_DIR/tests/integration/device_lib.sh"

SCENARIO="$GPUM_TEST_PROGS/monitor_scenario"

cat >"$T_SCRATCH/monitor.yaml" <<'YAML'
name: monitor
devices:
  - name: Sim GPU
    count: 3
    memory: 8GiB
    reserved: 64MiB
    ecc: true
YAML
d_sim_start "$T_SCRATCH/monitor.yaml"

# m_run SCENARIO: runs it, shows its output, fails the test if it fails.
m_run() {
  local rc=0
  "$SCENARIO" "$1" >"$T_OUT" 2>"$T_ERR" || rc=$?
  cat "$T_OUT"
  [ "$rc" -eq 0 ] || { cat "$T_ERR" >&2; t_fail "scenario $1 exited $rc"; }
}
