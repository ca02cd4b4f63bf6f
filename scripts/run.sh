#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make run`: starts gpumd, the node daemon, in the foreground (Ctrl-C stops it). On a machine
# where the real NVML loads and finds devices it manages them; otherwise a simulated 2xH100
# node is started first (examples/sim/h100x2.yaml) and stopped again when gpumd exits. Once
# gpumd is ready it prints, first, the dashboard's address (the one gpumd listens on, from its
# readiness line), then the socket and a few commands to try from another shell (gpum run,
# gpum jobs, gpum status). Extra arguments are passed to gpumd (e.g. --log-level debug).
set -euo pipefail
BUILD=${1:-build}
shift || true
cd "$(dirname "$0")/.."
[[ "$BUILD" == /* ]] || BUILD=$PWD/$BUILD
GPUM="$BUILD/bin/gpum"
GPUMD="$BUILD/bin/gpumd"
for b in "$GPUM" "$GPUMD"; do
  [ -x "$b" ] || { echo "run: $b not built (run 'make build')" >&2; exit 1; }
done

# The socket gpumd will listen on: the rules of gpum_default_socket_path (docs/operations.md).
if [ -n "${GPUM_SOCKET:-}" ]; then
  SOCK=$GPUM_SOCKET
elif [ "$(id -u)" -eq 0 ]; then
  SOCK=/run/gpum/gpumd.sock
elif [[ "${XDG_RUNTIME_DIR:-}" == /* ]]; then
  SOCK=$XDG_RUNTIME_DIR/gpum/gpumd.sock
else
  SOCK=/tmp/gpum-$(id -u)/gpumd.sock
fi
export GPUM_SOCKET=$SOCK

SIM_ENV=""
NOTE="" # printed after the dashboard's address
SIM_STARTED=""
READY=$(mktemp "${TMPDIR:-/tmp}/gpum-run.XXXXXX")
cleanup() {
  rm -f "$READY"
  [ -z "$SIM_STARTED" ] || "$GPUM" sim stop "$SIM_STARTED" >/dev/null 2>&1 || true
}
trap cleanup EXIT
if [ -z "${GPUM_SIM_NODE:-}" ] && "$GPUM" status --backend nvml --json >/dev/null 2>&1; then
  NOTE="run: real GPUs found; gpumd manages them"
else
  NODE=${GPUM_SIM_NODE:-${GPUM_DEMO_NODE:-gpum-demo-$$}}
  export GPUM_SIM_LIBRARY=${GPUM_SIM_LIBRARY:-$BUILD/lib/libgpum_sim.so}
  if [ -z "${GPUM_SIM_NODE:-}" ]; then
    NOTE="run: no real GPU driver here; started simulated node '$NODE' (examples/sim/h100x2.yaml)"
    "$GPUM" sim start examples/sim/h100x2.yaml --name "$NODE" >/dev/null
    SIM_STARTED=$NODE
  fi
  export GPUM_SIM_NODE=$NODE
  # A demo node gets its own ledger, so reservations of an earlier demo are not recovered.
  export GPUM_STATE_DIR=${GPUM_STATE_DIR:-$BUILD/run-state}
  SIM_ENV="GPUM_SIM_NODE=$NODE GPUM_SIM_LIBRARY=$GPUM_SIM_LIBRARY "
fi

# gpumd in the background, its stdout (the readiness line) into $READY and from there to ours;
# Ctrl-C and SIGTERM are passed on to it (a background job of a script ignores SIGINT).
"$GPUMD" "$@" >"$READY" &
GD=$!
trap 'kill -INT "$GD" 2>/dev/null || true' INT
trap 'kill -TERM "$GD" 2>/dev/null || true' TERM
until grep -q '^gpumd ready' "$READY"; do
  if ! kill -0 "$GD" 2>/dev/null; then
    rc=0
    wait "$GD" || rc=$?
    cat "$READY"
    echo "run: gpumd exited ($rc) before it was ready" >&2
    exit $rc
  fi
  sleep 0.05
done
HTTP=$(sed -n 's/^gpumd ready: .* http=\([^ ]*\).*$/\1/p' "$READY" | head -n 1)
if [ -n "$HTTP" ]; then
  echo "run: dashboard: http://$HTTP/" >&2
else
  echo "run: dashboard: off (http.listen is off)" >&2
fi
[ -z "$NOTE" ] || echo "$NOTE" >&2
cat >&2 <<MSG
run: gpumd socket: $SOCK
run: try in another shell:
       export GPUM_SOCKET=$SOCK
       $GPUM run --mem 20GiB -- env | grep -E 'CUDA_VISIBLE|GPUM_'
       $GPUM run --mem 70GiB --gpus 2 -- sleep 30 &   # holds both GPUs for 30 s
       $GPUM run --mem 70GiB -- sh -c 'echo granted \$CUDA_VISIBLE_DEVICES'   # waits in the queue, then runs
       $GPUM jobs --all
       ${SIM_ENV}$GPUM status
MSG
if [ -n "$HTTP" ]; then
  cat >&2 <<MSG
run: REST API, metrics and events on http://$HTTP (docs/rest.md):
       curl -s http://$HTTP/api/v1/gpu/status
       curl -s http://$HTTP/metrics | grep gpum_device_memory
       curl -sN http://$HTTP/api/v1/events
MSG
fi
echo "run: gpumd is running in the foreground (Ctrl-C to stop)" >&2
tail -n +1 -f --pid="$GD" "$READY" &
TAIL=$!
# wait returns early (> 128) when a trapped signal arrives: wait again while gpumd runs; once it
# has exited, wait gives its status (127: already collected by the wait before).
while :; do
  rc=0
  wait "$GD" || rc=$?
  [ $rc -gt 128 ] && kill -0 "$GD" 2>/dev/null && continue
  if [ $rc -gt 128 ]; then
    r=0
    wait "$GD" || r=$?
    [ $r -eq 127 ] || rc=$r
  fi
  break
done
wait "$TAIL" 2>/dev/null || true
exit $rc
