# SPDX-License-Identifier: Apache-2.0
# Helpers for the REST API tests (sourced after lib.sh and gpumd_lib.sh): hp runs a python3
# snippet with tests/integration/gpumd_http.py imported (call, expect, expect_err, raw, until,
# token, addr) and with gpumd_client too (Client: the Unix-socket protocol); hp_as_nobody runs
# one as uid 65534.

# The command hp runs python3 under (empty: as this test's uid; see hp_as_nobody).
HP_AS=()

# hp SCRIPT [ARGS...]: exit status is the snippet's; a Fail prints its message.
hp() {
  local script=$1
  shift
  "${HP_AS[@]}" python3 -c "import sys, os, json, time, socket, threading
from gpumd_http import *
import gpumd_client
args = sys.argv[1:]
try:
$(printf '%s\n' "$script" | sed 's/^/    /')
except (Fail, gpumd_client.Fail, AssertionError) as e:
    import traceback; traceback.print_exc()
    print('FAIL:', e, file=sys.stderr); sys.exit(1)" "$@"
}

# hp_as_nobody SCRIPT [ARGS...]: hp as uid and gid 65534 with no other groups (root only:
# setpriv), so that its HTTP connections are owned by another uid. Its GPUM_STATE_DIR holds a
# copy of http.addr only: token() fails there, so a snippet gets the token through ARGS when
# it is meant to have it.
hp_as_nobody() {
  local dir="$T_SCRATCH/nobody-state" rc=0
  mkdir -p "$dir" && cp "$GPUM_STATE_DIR/http.addr" "$dir/" && chmod 0755 "$dir" &&
    chmod 0644 "$dir/http.addr" || return 1
  HP_AS=(setpriv --reuid 65534 --regid 65534 --clear-groups env PYTHONPATH="$PYTHONPATH"
    GPUM_STATE_DIR="$dir" GPUM_SOCKET="$GPUM_SOCKET")
  hp "$@" || rc=$?
  HP_AS=()
  return $rc
}
