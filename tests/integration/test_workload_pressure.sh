#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd's memory pressure reaches a job's batcher and tiered cache through its reporter (a
# connection that reports on a reservation gets the pressure events of its devices): a job
# under gpum run (progs/report_pressure.c) reports; a foreign process pushes its GPU over
# pressure.high; the batcher's batches are halved and the cache demotes half its device tier to
# pinned memory, every byte intact; when the foreign process lets go, gpumd says the pressure
# cleared and the batcher takes whole batches again.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start --pressure-high 0.5 --monitor-interval 100ms

mkfifo "$T_SCRATCH/out"
"$GPUM_BIN" run --mem 2GiB --label pressured -- "$GPUM_TEST_PROGS/report_pressure" \
  >"$T_SCRATCH/out" 2>"$T_ERR" &
JOB=$!
T_PIDS+=("$JOB")
exec 8<"$T_SCRATCH/out"
next_line() { # the job's next line on stdout (30 s at most)
  local line
  read -r -t 30 -u 8 line || { cat "$T_ERR" >&2; t_fail "the job said nothing more (after: $1)"; }
  echo "$line"
}
[ "$(next_line start)" = subscribed ] || t_fail "the job did not subscribe: $(cat "$T_ERR")"
gpu=$(gd_py '
rs = [r for r in Client().ok("list")["reservations"] if r["label"] == "pressured"]
print(rs[0]["devices"][0]["index"])
') || t_fail "the job's GPU"

hold=$("$GPUM_BIN" sim hold "$GPUM_SIM_NODE" --device "$gpu" --bytes 50GiB) || t_fail "sim hold"
line=$(next_line subscribed)
case "$line" in
"pressure bound=8 "*) t_ok "under pressure: $line" ;;
*) t_fail "under pressure: '$line' $(cat "$T_ERR")" ;;
esac

kill "$hold"
line=$(next_line pressure)
[ "$line" = "cleared bound=16" ] || t_fail "after the pressure: '$line' $(cat "$T_ERR")"
wait "$JOB" || { cat "$T_ERR" >&2; t_fail "the job failed"; }
t_ok "the pressure cleared: whole batches again"
