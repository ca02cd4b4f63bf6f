#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpum jobs` (text) writes sizes and durations as people read them: MEM/GPU as "2.50 GiB",
# the workload figures a job reports with the unit their names carry (_bytes: "2.50 GiB",
# _us: "11.4 ms", _ratio, counts), never a C %g of bytes ("2.68435e+09").
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
unset GPUM_CONFIG GPUM_COLOR NO_COLOR

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start

# A job that reserves and reports, and stays until it is killed at the end (its reports live
# with it).
job=$(gd_pyfile job '
c = Client()
r = c.ok("reserve", bytes_per_gpu="2560MiB", label="units")
c.ok("report", reservation=r["reservation"]["id"], source="pool",
     figures={"reserved_bytes": 2684354560, "e2e_p99_us": 11400, "queued": 3,
              "hit_ratio": 0.25, "tokens_per_s": 12345.6, "mean_batch": 1234.5})
print(r["reservation"]["id"], flush=True)
signal.pause()
')
t_bg python3 "$job" >"$T_SCRATCH/job.out" 2>"$T_SCRATCH/job.err"
t_wait_file "$T_SCRATCH/job.out" 20
rid=$(cat "$T_SCRATCH/job.out")

t_expect 0 "$GPUM_BIN" jobs
row=$(grep "^$rid " "$T_OUT") || t_fail "no row for $rid: $(cat "$T_OUT")"
grep -q ' 2.50 GiB ' <<<"$row" || t_fail "MEM/GPU not 2.50 GiB: $row"
fig=$(grep -E '^    pool \(pid [0-9]+\):' "$T_OUT") || t_fail "no figures line: $(cat "$T_OUT")"
for want in 'reserved 2.50 GiB' 'e2e_p99 11.4 ms' 'queued 3' 'hit 25' 'tokens 12.3k/s' 'mean_batch 1234'; do
  grep -qF "$want" <<<"$fig" || t_fail "figures line lacks '$want': $fig"
done
! grep -Eq '[0-9]e[+-][0-9]' "$T_OUT" || t_fail "a %g figure: $(cat "$T_OUT")"
t_ok "gpum jobs: sizes and figures with their units ($fig)"
