#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# "wait": false reservations: granted at once when there is room, else refused with EBUSY and
# what they would have waited for, never queued (not even counted against queue.max, which
# still refuses waiting requests); a bad "wait" is EINVAL; the client library and
# `gpum reserve/run --no-wait` pass it on and fail with the daemon's reason.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
export GPUM_QUEUE_MAX=1
gd_start
G="$GPUM_BIN"

gd_py '
c = Client()
big = c.ok("reserve", bytes_per_gpu="70GiB", gpus=2, wait=False, lease="ttl",
            ttl_ms=600000)["reservation"]
assert big["state"] == "GRANTED" and big["id"] == "r-1", big
msg = c.err("reserve", "EBUSY", bytes_per_gpu="10GiB", wait=False)
assert "would wait for 10.00 GiB free on 1 device" in msg, msg
assert [r["id"] for r in c.ok("list")["reservations"]] == ["r-1"]
assert "\"wait\" must be true or false" in c.err("reserve", "EINVAL", bytes_per_gpu=1, wait="no")
assert "ENEVERFIT" == c.call("reserve", bytes_per_gpu="100GiB", wait=False)["error"]["code"]
# A waiting request queues (wait: true is the default) ...
q = c.ok("reserve", bytes_per_gpu="10GiB", wait=True)["reservation"]
assert q["state"] == "QUEUED" and q["id"] == "r-2", q
# ... and fills the queue (queue.max 1): waiting requests are refused, no-wait ones are not.
assert "queue is full" in c.err("reserve", "EAGAIN", bytes_per_gpu="1GiB")
small = c.ok("reserve", bytes_per_gpu="1GiB", wait=False)["reservation"]
assert small["state"] == "GRANTED" and small["id"] == "r-3", small
c.ok("release", reservation="r-3")
c.ok("release", reservation="r-2")
' || t_fail "protocol"
t_ok "wait false: granted at once or EBUSY with the reason; not queued"

# The CLI: r-1 (a ttl lease) still holds 70 GiB on both GPUs.
rc=0
"$G" reserve --mem 10GiB --no-wait >"$T_SCRATCH/res.out" 2>"$T_SCRATCH/res.err" || rc=$?
[ $rc -eq 1 ] || t_fail "gpum reserve --no-wait exited $rc"
grep -q "would wait for 10.00 GiB free" "$T_SCRATCH/res.err" ||
  { cat "$T_SCRATCH/res.err" >&2; t_fail "gpum reserve --no-wait did not say why"; }
[ ! -s "$T_SCRATCH/res.out" ] || t_fail "gpum reserve --no-wait printed an id"
rc=0
"$G" run --mem 10GiB --no-wait -- true 2>"$T_SCRATCH/run.err" || rc=$?
[ $rc -eq 1 ] || t_fail "gpum run --no-wait exited $rc"
grep -q "EBUSY\|would wait for" "$T_SCRATCH/run.err" || t_fail "gpum run --no-wait: no reason"
out=$("$G" run --mem 1GiB --no-wait -- sh -c 'echo "$GPUM_RESERVATION_ID"')
[ "$out" = "r-4" ] || t_fail "gpum run --no-wait with room: got '$out'"
"$G" jobs --json >"$T_SCRATCH/jobs.json"
t_pyjson "$T_SCRATCH/jobs.json" '
sys.exit(0 if [r["id"] for r in d["reservations"]] == ["r-1"] else 1)' ||
  { cat "$T_SCRATCH/jobs.json" >&2; t_fail "reservations left by the CLI"; }
# The help is read whole before it is searched: grep -q leaves at the first match, and under
# pipefail a help longer than one write (gpum run's is over 4 KiB) then dies of SIGPIPE.
grep -q -- "--no-wait" <<<"$("$G" reserve --help)" || t_fail "gpum reserve --help lacks --no-wait"
grep -q -- "--no-wait" <<<"$("$G" run --help)" || t_fail "gpum run --help lacks --no-wait"
t_ok "gpum reserve/run --no-wait"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exit $GD_RC"
