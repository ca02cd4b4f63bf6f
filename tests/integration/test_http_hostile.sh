#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Hostile clients against gpumd's REST API (tests/integration/http_hostile.py, raw sockets):
# garbage request lines, header floods, NUL bytes, non-UTF-8 paths and queries, bad lengths
# and chunked bodies, HEAD, pipelining, mutating requests whose client closes before the
# reply, connection churn, event streams closed abruptly during a burst of events or flooded
# by their client, refused streams that must stay counted connections, clients trickling a
# request byte by byte (closed after http.timeout), and a seeded random fuzz of a few thousand
# requests bounded in time. After
# every phase gpumd answers GET /api/v1/gpu/health and the reservations made over the socket
# protocol before it all are still there unchanged; no answer is ever a 500; gpumd then stops
# cleanly (under ASan: without leaks).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
export GPUM_MONITOR_INTERVAL=100ms
gd_start --http-max-connections 64 --http-timeout 2s --http-max-body 4KiB
t_wait_file "$GPUM_STATE_DIR/http.addr"

GPUMD_PID=$GD_PID HOSTILE_MAX_CONNS=64 HOSTILE_SEED=${HOSTILE_SEED:-20261122} \
  python3 "$GPUM_SOURCE_DIR/tests/integration/http_hostile.py" || {
  tail -20 "$GD_ERR" >&2
  t_fail "hostile clients"
}

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC: $(tail -20 "$GD_ERR")"
t_ok "gpumd survived the hostile clients and stops cleanly"
