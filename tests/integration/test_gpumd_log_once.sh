#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd opens a device session per reader and per monitor worker; the backend it selected is
# logged once, not once per session.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start --log-level info
# A status round trip: every device has been read by then.
gd_py 'assert len(Client().ok("status")["devices"]) == 2' || t_fail "status"
gd_stop TERM
n=$(grep -c 'backend selected' "$GD_ERR" || true)
[ "$n" -eq 1 ] || t_fail "'backend selected' logged $n times: $(grep 'backend selected' "$GD_ERR")"
t_ok "backend selected logged once"
