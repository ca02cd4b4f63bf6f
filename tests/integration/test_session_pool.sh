#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A libgpum pool attached to a reservation session gives its cached memory back when gpumd
# reports pressure on its device: a program caches 4 GiB in a pool over the simulated CUDA
# driver, a foreign process pushes device 0 over pressure.high, and the pool is trimmed to
# nothing.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start --pressure-high 0.5 --monitor-interval 100ms

dev0_used() { # the simulated device 0's used bytes, as NVML reports them
  "$GPUM_BIN" status --json >"$T_SCRATCH/st.json" &&
    t_pyjson "$T_SCRATCH/st.json" 'print(d["devices"][0]["memory"]["used"])'
}

"$GPUM_TEST_PROGS/session_pool" 8GiB 4 "$T_SCRATCH/ready" >"$T_OUT" 2>"$T_ERR" &
prog=$!
T_PIDS+=("$prog")
t_wait_file "$T_SCRATCH/ready"
grep -q '^cached 4294967296$' "$T_SCRATCH/ready" || t_fail "pool cache before: $(cat "$T_SCRATCH/ready")"
before=$(dev0_used)
[ "$before" -ge $((4 << 30)) ] || t_fail "device 0 uses $before bytes with 4 GiB cached"
t_ok "the pool caches 4 GiB on device 0"

"$GPUM_BIN" sim hold "$GPUM_SIM_NODE" --device 0 --bytes 45GiB >/dev/null || t_fail "sim hold"
wait "$prog" || { cat "$T_OUT" "$T_ERR" >&2; t_fail "session_pool failed"; }
read -r _ trimmed reserved <"$T_OUT"
[ "$trimmed" = "trimmed=4294967296" ] && [ "$reserved" = "reserved=0" ] ||
  t_fail "after pressure: $(cat "$T_OUT")"
t_ok "pressure trimmed the pool: $(cat "$T_OUT")"
