#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The dashboard where every read needs the token: gpumd on a non-loopback address (0.0.0.0, a
# free port) with http.token_file set. The page itself loads without the token, asks for it,
# shows nothing of the node until it has the right one (tests/browser/dashboard_token.mjs).
# Skipped (77) as test_dashboard.sh is.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"

source "$GPUM_SOURCE_DIR/tests/browser/browser_lib.sh"
browser_require

export GPUM_HTTP_LISTEN=0.0.0.0:0
export GPUM_HTTP_TOKEN_FILE=$T_SCRATCH/http.token
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
ADDR=$(cat "$GPUM_STATE_DIR/http.addr")
export DASH_URL="http://127.0.0.1:${ADDR##*:}"
export DASH_TOKEN_FILE=$GPUM_HTTP_TOKEN_FILE
export DASH_CHROMIUM=$CHROMIUM
export DASH_OUT=${GPUM_TEST_OUTPUT:-$GPUM_BUILD_DIR/test-output}/dashboard-token
mkdir -p "$DASH_OUT"
rm -f "$DASH_OUT"/*.png
node "$GPUM_SOURCE_DIR/tests/browser/dashboard_token.mjs" || t_fail "the dashboard token test failed (screenshots in $DASH_OUT)"
t_ok "the dashboard with a token for every read: screenshots in $DASH_OUT"
