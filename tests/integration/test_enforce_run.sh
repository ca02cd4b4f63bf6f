#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum run --enforce: the reservation fences CMD and every process it starts (the shim is
# preloaded, the fence made by gpum run and named after gpumd's socket and the reservation);
# gpum jobs and gpumd's reservation documents show what the job's processes hold; the fence is
# removed when CMD ends; without --enforce (the default, run.enforce) nothing is fenced; a shim
# that cannot be found stops gpum run before CMD starts, with the reason.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
G=$GPUM_BIN
P=$GPUM_TEST_PROGS/enforce_probe
GiB=1073741824
# A sanitizer build's shim needs its runtime preloaded first (t_shim_preload).
# gpum run passes LD_PRELOAD on with the shim after it.
RT=$(t_shim_preload | awk 'NF == 2 {print $1}')
if [ -n "$RT" ]; then RUN=(env "LD_PRELOAD=$RT" "$G" run); else RUN=("$G" run); fi
export GPUM_HTTP_LISTEN=127.0.0.1:0
gd_start
t_wait_file "$GPUM_STATE_DIR/http.addr"

# Every way into the driver stops at the reservation's 4 GiB.
t_expect 0 "${RUN[@]}" --mem 4GiB --enforce -q -- "$P" fill 256M 6G
WAYS="linked dlsym getproc getproc-self async-ptsz async managed pitch pool vmm"
grep -qw dlsym <<<"$(nm -D --defined-only "$GPUM_BUILD_DIR/lib/libgpum_enforce.so")" || WAYS=${WAYS/dlsym /}
for way in $WAYS; do
  grep -qx "$way $((4 * GiB)) 2" "$T_OUT" || { cat "$T_OUT" "$T_ERR"; t_fail "$way: not fenced at 4 GiB"; }
done
grep -q 'reservation r-[0-9]*: out of memory on device 0: limit 4.00 GiB' "$T_ERR" || { cat "$T_ERR"; t_fail "no OOM line naming the reservation"; }
t_ok "gpum run --enforce: every way stops at 4 GiB"

# The job is told 4 GiB by CUDA.
t_expect 0 "${RUN[@]}" --mem 4GiB --enforce -q -- "$P" info
t_pyjson "$T_OUT" 'assert d["cu_total"]==4<<30 and d["cu_device_total"]==4<<30, d' || t_fail "CUDA does not report the reservation"
t_ok "CUDA reports the reservation as the GPU's size"

# One limit for all of the job's processes.
t_expect 3 "${RUN[@]}" --mem 4GiB --enforce -q -- "$P" exec 3G -- "$P" try 2G
t_ok "a child of CMD shares the reservation's limit"

# gpum jobs shows what the job holds under the shim; the fence goes away with the job.
t_bg "${RUN[@]}" --mem 4GiB --enforce -q --label fenced -- "$P" hold 3G "$T_SCRATCH/held"
RUNPID=$T_LAST_PID
t_wait_file "$T_SCRATCH/held" 30
t_expect 0 "$G" jobs
grep -E 'fenced' "$T_OUT" | grep -q '3.00 GiB' || { cat "$T_OUT"; t_fail "gpum jobs does not show the 3 GiB held under the shim"; }
t_expect 0 "$G" status --no-color
grep -q 'fenced (fenced, holds 3.00 GiB)' "$T_OUT" || { cat "$T_OUT"; t_fail "gpum status does not show the fenced usage"; }
t_expect 0 "$G" jobs --json
t_pyjson "$T_OUT" 'rs=[r for r in (d["reservations"] if isinstance(d,dict) else d) if r["label"]=="fenced"]
assert rs and rs[0]["fenced"]["used"]==3<<30 and rs[0]["fenced"]["limit"]==4<<30 and rs[0]["fenced"]["processes"]==1, rs' || t_fail "jobs --json: fenced"
/usr/bin/python3 - "http://$(cat "$GPUM_STATE_DIR/http.addr")/metrics" <<'PY' || t_fail "/metrics: gpum_reservation_fenced_bytes"
import re, sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
rows = [l for l in text.splitlines() if l.startswith("gpum_reservation_fenced_bytes{") and 'label="fenced"' in l]
assert len(rows) == 1 and float(rows[0].rsplit(" ", 1)[1]) == 3 << 30, rows
PY
# This gpumd's regions only (their prefix is its socket's): other tests make regions of their
# own in /dev/shm meanwhile.
PREFIX=$("$GPUM_TEST_PROGS/fence_used" prefix "$GPUM_SOCKET") || t_fail "fence prefix"
mine() { ls /dev/shm | grep -c "^$PREFIX" || true; }
[ "$(mine)" -ge 1 ] || t_fail "no fence region of this gpumd while the job runs"
kill -TERM "$RUNPID"
wait "$RUNPID" 2>/dev/null || true
[ "$(mine)" = 0 ] || t_fail "the fence was left behind: $(ls /dev/shm | grep "^$PREFIX")"
t_ok "gpum jobs, gpum status and /metrics show the fenced usage; the fence is removed with the job"

# Not enforced by default: the job may pass its reservation (run.enforce is false).
t_expect 0 "${RUN[@]}" --mem 4GiB -q -- "$P" try 5G
t_expect 3 env GPUM_RUN_ENFORCE=1 "${RUN[@]}" --mem 4GiB -q -- "$P" try 5G
t_expect 0 env GPUM_RUN_ENFORCE=1 "${RUN[@]}" --mem 4GiB --no-enforce -q -- "$P" try 5G
t_ok "run.enforce / GPUM_RUN_ENFORCE / --no-enforce"

# A missing shim: gpum run says so and does not start CMD unfenced.
t_expect 1 env GPUM_ENFORCE_LIBRARY=/nonexistent/libgpum_enforce.so "${RUN[@]}" --mem 4GiB --enforce -q -- "$P" try 1G
grep -q 'GPUM_ENFORCE_LIBRARY names /nonexistent/libgpum_enforce.so' "$T_ERR" || { cat "$T_ERR"; t_fail "no reason for the missing shim"; }
t_ok "a missing shim stops gpum run with the reason"
