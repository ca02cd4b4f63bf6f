#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum reserve (held in the foreground until SIGINT; or with --ttl, detached), gpum jobs,
# gpum release (own and unknown ids) and gpum status showing gpumd's reserved bytes and
# reservations under each GPU (and nothing extra when no daemon answers).
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
G="$GPUM_BIN"

# No daemon yet: status works and shows no gpumd section; jobs fails clearly.
t_expect 0 "$G" status --no-color
grep -q "gpumd" "$T_OUT" && t_fail "status shows a gpumd section without a daemon"
t_expect 0 "$G" status --json
t_pyjson "$T_OUT" 'sys.exit(0 if d["gpumd"] is None else 1)' || t_fail "status --json: gpumd not null"
t_expect 1 "$G" jobs
grep -q "is gpumd running?" "$T_ERR" || t_fail "jobs without daemon: $(cat "$T_ERR")"
t_ok "no daemon: status unchanged, jobs explains"

gd_start

# Foreground reserve: stdout gets the id, held until SIGINT.
t_bg "$G" reserve --mem 10GiB --label holder >"$T_SCRATCH/id" 2>"$T_SCRATCH/reserve.err"
RES=$T_LAST_PID
t_wait_file "$T_SCRATCH/id" 20
ID=$(cat "$T_SCRATCH/id")
[[ "$ID" =~ ^r-[0-9]+$ ]] || t_fail "gpum reserve printed '$ID'"
grep -q "export CUDA_VISIBLE_DEVICES=GPU-" "$T_SCRATCH/reserve.err" || t_fail "no export line"

t_expect 0 "$G" jobs
grep -q "^$ID  *GRANTED .*holder" "$T_OUT" || { cat "$T_OUT" >&2; t_fail "jobs does not list $ID"; }
t_expect 0 "$G" status --no-color
grep -q "gpumd: reserved 10.00 GiB" "$T_OUT" || { cat "$T_OUT" >&2; t_fail "status: no reserved bytes"; }
grep -q "$ID .*holder" "$T_OUT" || { cat "$T_OUT" >&2; t_fail "status: $ID not under its GPU"; }
t_expect 0 "$G" status --json
t_pyjson "$T_OUT" '
devs = d["gpumd"]["devices"]
held = [x for x in devs if args[0] in x["reservations"]]
sys.exit(0 if len(held) == 1 and held[0]["reserved"] == 10 << 30 else 1)' "$ID" ||
  { cat "$T_OUT" >&2; t_fail "status --json: gpumd.devices does not show $ID with 10 GiB"; }
t_ok "reserve $ID: in jobs and in status"

kill -INT "$RES"
rc=0
wait "$RES" || rc=$?
[ $rc -eq 0 ] || { cat "$T_SCRATCH/reserve.err" >&2; t_fail "gpum reserve exited $rc on SIGINT"; }
grep -q "$ID released" "$T_SCRATCH/reserve.err" || t_fail "no release message"
t_expect 0 "$G" jobs
grep -q "no reservations" "$T_OUT" || { cat "$T_OUT" >&2; t_fail "still listed after Ctrl-C"; }
t_ok "reserve released on SIGINT"

# --ttl: detached; gpum release ends it.
t_expect 0 "$G" reserve --mem 1GiB --ttl 1h -q
ID2=$(cat "$T_OUT")
t_expect 0 "$G" jobs --json
t_pyjson "$T_OUT" '
r = [x for x in d["reservations"] if x["id"] == args[0]]
sys.exit(0 if r and r[0]["state"] == "GRANTED" and r[0]["lease"] == "ttl" else 1)' "$ID2" ||
  { cat "$T_OUT" >&2; t_fail "--ttl reservation $ID2 not held after gpum reserve exited"; }
t_expect 0 "$G" release "$ID2"
grep -q "^$ID2 RELEASED$" "$T_OUT" || t_fail "release output: $(cat "$T_OUT")"
t_expect 0 "$G" jobs
grep -q "no reservations" "$T_OUT" || t_fail "still listed after release"
t_ok "reserve --ttl $ID2, released by gpum release"

# Bad input.
t_expect 1 "$G" release r-99999
grep -q "r-99999" "$T_ERR" || t_fail "unknown id: $(cat "$T_ERR")"
t_expect 2 "$G" release
t_expect 2 "$G" reserve
t_expect 2 "$G" reserve --mem 1GiB --ttl never
t_expect 2 "$G" reserve --mem 1GiB extra
t_expect 2 "$G" jobs --bogus
t_expect 1 "$G" reserve --mem 500GiB
t_ok "bad input rejected"
