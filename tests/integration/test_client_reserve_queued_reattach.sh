#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd is SIGKILLed and restarted while `gpum reserve` waits in the queue: gpum reserve
# reconnects, re-attaches the QUEUED reservation with its token (same id, still queued), is
# granted once the memory it waits for is released, and releases it on SIGINT. gpumd not back
# within lease.grace while it waits ends gpum reserve with exit 1.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
export GPUM_LEASE_GRACE=5s
gd_start
G="$GPUM_BIN"

# A ttl reservation (it outlives gpumd's restart by itself) takes most of both GPUs.
HOLD=$(gd_py '
r = Client().ok("reserve", bytes_per_gpu="70GiB", gpus=2, lease="ttl", ttl_ms=120000)
print(r["reservation"]["id"])
') || t_fail "holder"

t_bg "$G" reserve --mem 70GiB --label waiter >"$T_SCRATCH/res.out" 2>"$T_SCRATCH/res.err"
RES=$T_LAST_PID
t_until 20 grep -q "queued at position 1" "$T_SCRATCH/res.err" ||
  { cat "$T_SCRATCH/res.err" >&2; t_fail "gpum reserve did not queue"; }

gd_stop KILL
gd_start
t_until 20 grep -q "re-attached (QUEUED)" "$T_SCRATCH/res.err" ||
  { cat "$T_SCRATCH/res.err" "$GD_ERR" >&2; t_fail "gpum reserve did not re-attach its queued reservation"; }
gd_py '
c = Client()
q = c.ok("status")["queue"]
assert [x["label"] for x in q] == ["waiter"], q
c.ok("release", reservation=args[0])
' "$HOLD" || t_fail "queue after the restart"
t_until 20 grep -q "holding" "$T_SCRATCH/res.err" ||
  { cat "$T_SCRATCH/res.err" "$GD_ERR" >&2; t_fail "not granted after the holder left"; }
ID=$(cat "$T_SCRATCH/res.out")
t_ok "a queued gpum reserve re-attached after gpumd was killed, then was granted ($ID)"

kill -INT "$RES"
rc=0
wait "$RES" || rc=$?
[ $rc -eq 0 ] || { cat "$T_SCRATCH/res.err" >&2; t_fail "gpum reserve exited $rc after SIGINT"; }
gd_py 'assert Client().ok("list", all=True)["reservations"] == []' || t_fail "not released"
t_ok "released on SIGINT"

# Queued again, and gpumd stays away past lease.grace: exit 1 with the reason.
HOLD=$(gd_py '
r = Client().ok("reserve", bytes_per_gpu="70GiB", gpus=2, lease="ttl", ttl_ms=120000)
print(r["reservation"]["id"])
') || t_fail "second holder"
t_bg "$G" reserve --mem 70GiB >"$T_SCRATCH/res2.out" 2>"$T_SCRATCH/res2.err"
RES=$T_LAST_PID
t_until 20 grep -q "queued at position 1" "$T_SCRATCH/res2.err" || t_fail "second waiter"
gd_stop KILL
rc=0
wait "$RES" || rc=$?
[ $rc -eq 1 ] && grep -q "did not come back within 5000 ms" "$T_SCRATCH/res2.err" ||
  { cat "$T_SCRATCH/res2.err" >&2; t_fail "gpumd away past the grace: exit $rc"; }
t_ok "a queued gpum reserve gives up when gpumd stays away past lease.grace"
