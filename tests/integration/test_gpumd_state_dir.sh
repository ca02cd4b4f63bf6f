#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd's state directory: created 0700 (it holds the ledger with every token, and the API
# token), an existing one that others may enter is reported in the log (and left as it is);
# a file system that turns read-only under the running ledger is named as such when the
# commit fails, not as a full disk or a bare I/O error.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
export GPUM_HTTP_LISTEN=off

# A state directory gpumd creates, with a parent it creates too, is 0700 whatever the umask.
export GPUM_STATE_DIR="$T_SCRATCH/new/state"
(umask 022 && gd_start && gd_stop TERM && [ "$GD_RC" -eq 0 ]) || t_fail "gpumd on a new state directory"
[ "$(stat -c %a "$GPUM_STATE_DIR")" = 700 ] || t_fail "state directory created $(stat -c %a "$GPUM_STATE_DIR")"
grep -q "state directory .* is mode" "$GD_ERR" && t_fail "a warning about a directory gpumd made itself"
t_ok "a new state directory is created 0700"

# An existing 0755 one: gpumd starts, says what is wrong and how to fix it, changes nothing.
export GPUM_STATE_DIR="$T_SCRATCH/open"
mkdir -m 0755 "$GPUM_STATE_DIR"
gd_start
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
grep -q "state directory $GPUM_STATE_DIR is mode 0755: .*chmod 700" "$GD_ERR" ||
  { cat "$GD_ERR" >&2; t_fail "no warning about the 0755 state directory"; }
[ "$(stat -c %a "$GPUM_STATE_DIR")" = 755 ] || t_fail "the operator's mode was changed"
t_ok "an existing 0755 state directory is reported with the fix"

# The file system goes read-only under the ledger (preload/erofs_writes.c: every write under
# the state directory fails with EROFS once the flag file exists).
export GPUM_STATE_DIR="$T_SCRATCH/ro"
INJECT=$GPUM_TEST_PROGS/erofs_writes.so
[ -f "$INJECT" ] || t_fail "no $INJECT"
RT=$(ldd "$GPUMD" | awk '/lib(asan|tsan)\.so/ {print $3; exit}')
export GPUM_TEST_EROFS_DIR="$GPUM_STATE_DIR" GPUM_TEST_EROFS_FLAG="$T_SCRATCH/ro.flag"
LD_PRELOAD="${RT:+$RT }$INJECT" gd_start
gd_py 'Client().ok("reserve", bytes_per_gpu="1GiB", lease="ttl", ttl_ms=600000)' || t_fail "reserve before"
touch "$GPUM_TEST_EROFS_FLAG"
gd_py '
c = Client()
c.send_raw(b"{\"id\": 1, \"op\": \"reserve\", \"bytes_per_gpu\": 1, \"label\": \"ro\"}\n")
assert c.read_msg() is None, "a reply of a batch that was not committed"
' || t_fail "reserve on the read-only file system"
t_until 20 bash -c "! kill -0 $GD_PID" || t_fail "gpumd did not stop after the failed commit"
GD_RC=0
wait "$GD_PID" || GD_RC=$?
[ "$GD_RC" -eq 1 ] || t_fail "gpumd exited $GD_RC (want 1)"
grep -q "ledger commit failed: .*the file system is read-only (EROFS" "$GD_ERR" ||
  { cat "$GD_ERR" >&2; t_fail "the failed commit is not reported as a read-only file system"; }
grep "ledger commit failed" "$GD_ERR" | grep -q "disk is full" && t_fail "reported as a full disk"
t_ok "a file system turned read-only is reported as read-only (EROFS)"
