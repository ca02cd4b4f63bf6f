#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/http: gpumd's HTTP face (issue 6) under wrk, on a simulated 8x A100 node
# (examples/sim/a100x8.yaml) holding 100 reservations, beside a local nginx serving static
# copies of the same responses (same size) in the same run:
#   GET /api/v1/gpu/status and GET /metrics from gpumd, then the same bytes as static files
#   from nginx (one worker, started as the user from a scratch config: own pid, logs and temp
#   paths, no system service). Prints requests/s and p99 latency of each, the ratios, and
#   MEETS/MISSES for the aims: at least a third of nginx's requests/s, p99 under 5 ms.
# Needs wrk and nginx (scripts/deps.sh bench). Usage: bench/http/run.sh BUILD_DIR [SECONDS]
# [CONNECTIONS]. About 4 x SECONDS + 5 s. Not in `make test`.
set -euo pipefail
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [SECONDS] [CONNECTIONS]}" && pwd)
SECS=${2:-5}
CONNS=${3:-16}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
GPUM=$BUILD/bin/gpum
GPUMD=$BUILD/bin/gpumd
[ -x "$GPUM" ] && [ -x "$GPUMD" ] || { echo "bench/http: $BUILD is not built" >&2; exit 1; }
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if ! command -v wrk >/dev/null || [ ! -x "$NGINX" ]; then
  echo "bench/http: skipped: wrk and nginx are needed (scripts/deps.sh bench)"
  exit 0
fi
export GPUM_HTTP_LISTEN=127.0.0.1:0 GPUM_LOG_LEVEL=error
source "$HERE/../gpumd_lib.sh"
bench_node bench-http "$SRC/examples/sim/a100x8.yaml"
chmod 0755 "$TMP" # nginx workers started by root run as nobody and read www/
bench_gpumd
GADDR=$(cat "$GPUM_STATE_DIR/http.addr")

# 100 reservations (ttl leases, so they outlive the client): 1-, 2- and 4-GPU, 1 GiB a GPU
# (the last 4-GPU ones may queue: the status reply then has a queue too).
PYTHONPATH="$SRC/tests/integration" python3 - <<'PY'
from gpumd_client import Client
c = Client()
for i in range(100):
    r = c.ok("reserve", bytes_per_gpu="1GiB", gpus=(1, 2, 4)[i % 3], label="bench-%d" % i,
             lease="ttl", ttl_ms=3600000)
    assert r["reservation"]["state"] in ("GRANTED", "QUEUED"), r
PY

# nginx: the same bytes as static files, one worker, everything in the scratch directory.
mkdir -p "$TMP/www" "$TMP/nginx"
curl -sS -f -o "$TMP/www/status.json" "http://$GADDR/api/v1/gpu/status"
curl -sS -f -o "$TMP/www/metrics.txt" "http://$GADDR/metrics"
chmod -R a+rX "$TMP/www"
NPORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$TMP/nginx/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $TMP/nginx/body;
  proxy_temp_path $TMP/nginx/proxy;
  fastcgi_temp_path $TMP/nginx/fastcgi;
  uwsgi_temp_path $TMP/nginx/uwsgi;
  scgi_temp_path $TMP/nginx/scgi;
  types { application/json json; text/plain txt; }
  server {
    listen 127.0.0.1:$NPORT;
    root $TMP/www;
  }
}
CONF
"$NGINX" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -e "$TMP/nginx/error.log" 2>"$TMP/nginx/stderr" &
NG=$!
BENCH_PIDS+=("$NG")
i=0
until curl -s -f -o /dev/null "http://127.0.0.1:$NPORT/status.json"; do
  i=$((i + 1))
  [ $i -gt 500 ] && { cat "$TMP/nginx/stderr" "$TMP/nginx/error.log" >&2; echo "nginx did not start" >&2; exit 1; }
  kill -0 "$NG" 2>/dev/null || { cat "$TMP/nginx/stderr" >&2; echo "nginx exited" >&2; exit 1; }
  sleep 0.01
done

# run NAME URL: wrk for SECS seconds; sets RPS and P99 (ms).
run() {
  local out
  out=$(wrk -t2 -c"$CONNS" -d"${SECS}s" --latency "$2")
  RPS=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' <<<"$out")
  P99=$(awk '$1 == "99%" { v = $2; if (v ~ /us$/) { sub(/us$/, "", v); v /= 1000 }
         else if (v ~ /ms$/) { sub(/ms$/, "", v) } else if (v ~ /s$/) { sub(/s$/, "", v); v *= 1000 }
         printf "%.3f", v }' <<<"$out")
  local errs
  errs=$(awk '/Non-2xx|Socket errors/' <<<"$out")
  printf '%-28s %8s req/s  p99 %7s ms  %s\n' "$1" "$RPS" "$P99" "$errs"
}

echo "gpumd HTTP on a simulated 8x A100 node, 100 reservations ($(nproc) CPUs), wrk -t2 -c$CONNS, ${SECS}s each"
echo "  /api/v1/gpu/status: $(stat -c %s "$TMP/www/status.json") bytes; /metrics: $(stat -c %s "$TMP/www/metrics.txt") bytes"
run "gpumd GET /api/v1/gpu/status" "http://$GADDR/api/v1/gpu/status"
GS=$RPS GSP=$P99
run "gpumd GET /metrics" "http://$GADDR/metrics"
GM=$RPS GMP=$P99
run "nginx static status.json" "http://127.0.0.1:$NPORT/status.json"
NS=$RPS
run "nginx static metrics.txt" "http://127.0.0.1:$NPORT/metrics.txt"
NM=$RPS

verdict() { # NAME RPS NGINX_RPS P99
  awk -v n="$1" -v r="$2" -v b="$3" -v p="$4" 'BEGIN {
    ratio = b > 0 ? r / b : 0
    ok = ratio >= 1 / 3 && p < 5
    printf "%-22s ratio vs nginx %.2f (aim >= 0.33), p99 %.3f ms (aim < 5): %s\n", n, ratio, p,
      ok ? "MEETS" : "MISSES" }'
}
verdict "/api/v1/gpu/status" "$GS" "$NS" "$GSP"
verdict "/metrics" "$GM" "$NM" "$GMP"
