#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GET /metrics under http.metrics_max_age (docs/metrics.md, "Staleness"): with a max age of an
# hour, a scrape after a reservation was granted gets the earlier rendering again, byte for
# byte (it still shows no granted reservation); after the file sets 0 and a SIGHUP the next
# scrapes are rendered afresh and show it; with 0 a scrape right after a second grant shows
# both at once. The cache's reuse is checked by what it serves, never by timing.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"
unset GPUM_HTTP_METRICS_MAX_AGE # the configuration file says (gpumd_lib.sh sets 0)

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
CFG=$T_SCRATCH/gpum.yaml
printf 'http:\n  metrics_max_age: 1h\n' >"$CFG"
gd_start --config "$CFG"
t_wait_file "$GPUM_STATE_DIR/http.addr"
URL="http://$(cat "$GPUM_STATE_DIR/http.addr")/metrics"
granted() { awk '$1 == "gpum_reservations{state=\"granted\"}" { print $2 }' "$1"; }
reserve() {
  gd_py 'r = Client().ok("reserve", bytes_per_gpu="1GiB", lease="ttl", ttl_ms=3600000)
assert r["reservation"]["state"] == "GRANTED", r' || t_fail "reserve failed"
}

curl -sS -f -o "$T_SCRATCH/a.txt" "$URL" || t_fail "first scrape"
[ "$(granted "$T_SCRATCH/a.txt")" = 0 ] || t_fail "granted at start: $(granted "$T_SCRATCH/a.txt")"
reserve
curl -sS -f -o "$T_SCRATCH/b.txt" "$URL" || t_fail "second scrape"
cmp -s "$T_SCRATCH/a.txt" "$T_SCRATCH/b.txt" ||
  t_fail "within max_age the rendering was not reused: granted $(granted "$T_SCRATCH/b.txt")"
t_ok "within http.metrics_max_age a scrape gets the earlier rendering, byte for byte"

printf 'http:\n  metrics_max_age: 0s\n' >"$CFG"
kill -HUP "$GD_PID"
fresh() { curl -sS -f -o "$T_SCRATCH/c.txt" "$URL" && [ "$(granted "$T_SCRATCH/c.txt")" = 1 ]; }
t_until 20 fresh || t_fail "after max_age 0 and SIGHUP: granted $(granted "$T_SCRATCH/c.txt")"
t_ok "max_age 0 (on SIGHUP): the scrape is rendered afresh and shows the grant"

reserve
curl -sS -f -o "$T_SCRATCH/d.txt" "$URL" || t_fail "fourth scrape"
[ "$(granted "$T_SCRATCH/d.txt")" = 2 ] || t_fail "a grant not shown at once: $(granted "$T_SCRATCH/d.txt")"
t_ok "with max_age 0 a scrape right after a grant shows it"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC: $(cat "$GD_ERR")"
