# SPDX-License-Identifier: Apache-2.0
# Helpers for the REST API tests (sourced after lib.sh and gpumd_lib.sh): hp runs a python3
# snippet with tests/integration/gpumd_http.py imported (call, expect, expect_err, raw, until,
# token, addr) and with gpumd_client too (Client: the Unix-socket protocol).

# hp SCRIPT [ARGS...]: exit status is the snippet's; a Fail prints its message.
hp() {
  local script=$1
  shift
  python3 -c "import sys, os, json, time, socket, threading
from gpumd_http import *
import gpumd_client
args = sys.argv[1:]
try:
$(printf '%s\n' "$script" | sed 's/^/    /')
except (Fail, gpumd_client.Fail, AssertionError) as e:
    import traceback; traceback.print_exc()
    print('FAIL:', e, file=sys.stderr); sys.exit(1)" "$@"
}
