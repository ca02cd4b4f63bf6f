#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The dashboard on a node of 10,000 live reservations (tests/browser/dashboard_scale.mjs says
# what is checked): a simulated 8xH100 node, one reservation filling GPU 0, then 4,999 more
# waiting for it and 5,000 granted on the other GPUs, each with a TTL lease of an hour so that
# they outlive the client that made them. Screenshots go to build/test-output/dashboard-scale/.
# Skipped (77) as test_dashboard.sh is.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"

source "$GPUM_SOURCE_DIR/tests/browser/browser_lib.sh"
browser_require

export GPUM_HTTP_LISTEN=127.0.0.1:0
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/8xh100.yaml"
gd_start
t_wait_file "$GPUM_STATE_DIR/http.addr"

N=10000
gd_py '
N = int(args[0])
c = Client(timeout=60.0)
cap0 = c.ok("status")["devices"][0]["capacity"]
ttl = dict(lease="ttl", ttl_ms=3600 * 1000)
c.ok("reserve", bytes_per_gpu=cap0, devices=["0"], label="fill-0", **ttl)
# In batches (a client that leaves 4 MiB unread is dropped): odd ones wait for GPU 0, even
# ones are granted on the others.
made = 1
while made < N:
    batch = []
    for _ in range(min(500, N - made)):
        f = dict(bytes_per_gpu=1 << 20, label=("odd-%d" if made % 2 else "even-%d") % made, **ttl)
        if made % 2:
            f["devices"] = ["0"]
        made += 1
        batch.append(f)
    c.ok_many("reserve", batch)
' "$N" || t_fail "could not make $N reservations"

export DASH_URL="http://$(cat "$GPUM_STATE_DIR/http.addr")"
export DASH_TOKEN_FILE=$GPUM_STATE_DIR/http.token
export DASH_CHROMIUM=$CHROMIUM
export DASH_N=$N
export DASH_OUT=${GPUM_TEST_OUTPUT:-$GPUM_BUILD_DIR/test-output}/dashboard-scale
mkdir -p "$DASH_OUT"
rm -f "$DASH_OUT"/*.png
node "$GPUM_SOURCE_DIR/tests/browser/dashboard_scale.mjs" || {
  tail -n 20 "$GD_ERR" >&2
  t_fail "the dashboard scale test failed (screenshots in $DASH_OUT)"
}
t_ok "the dashboard over $N reservations: screenshots in $DASH_OUT"
