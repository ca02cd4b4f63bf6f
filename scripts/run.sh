#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make run`: starts gpumd, the node daemon, in the foreground (Ctrl-C stops it). On a machine
# where the real NVML loads and finds devices it manages them; otherwise a simulated 2xH100
# node is started first (examples/sim/h100x2.yaml) and stopped again when gpumd exits. Prints
# the socket and a few commands to try from another shell (gpum run, gpum jobs, gpum status).
# Extra arguments are passed to gpumd (e.g. --log-level debug).
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
if [ -z "${GPUM_SIM_NODE:-}" ] && "$GPUM" status --backend nvml --json >/dev/null 2>&1; then
  echo "run: real GPUs found; gpumd manages them" >&2
else
  NODE=${GPUM_SIM_NODE:-${GPUM_DEMO_NODE:-gpum-demo-$$}}
  export GPUM_SIM_LIBRARY=${GPUM_SIM_LIBRARY:-$BUILD/lib/libgpum_sim.so}
  if [ -z "${GPUM_SIM_NODE:-}" ]; then
    echo "run: no real GPU driver here; starting simulated node '$NODE' (examples/sim/h100x2.yaml)" >&2
    "$GPUM" sim start examples/sim/h100x2.yaml --name "$NODE" >/dev/null
    trap '"$GPUM" sim stop "$NODE" >/dev/null 2>&1 || true' EXIT
  fi
  export GPUM_SIM_NODE=$NODE
  # A demo node gets its own ledger, so reservations of an earlier demo are not recovered.
  export GPUM_STATE_DIR=${GPUM_STATE_DIR:-$BUILD/run-state}
  SIM_ENV="GPUM_SIM_NODE=$NODE GPUM_SIM_LIBRARY=$GPUM_SIM_LIBRARY "
fi

cat >&2 <<MSG
run: gpumd socket: $SOCK
run: try in another shell:
       export GPUM_SOCKET=$SOCK
       $GPUM run --mem 20GiB -- env | grep -E 'CUDA_VISIBLE|GPUM_'
       $GPUM run --mem 70GiB --gpus 2 -- sleep 30 &   # holds both GPUs for 30 s
       $GPUM run --mem 70GiB -- sh -c 'echo granted \$CUDA_VISIBLE_DEVICES'   # waits in the queue, then runs
       $GPUM jobs --all
       ${SIM_ENV}$GPUM status
run: REST API, metrics and events on http://${GPUM_HTTP_LISTEN:-127.0.0.1:8642} (docs/rest.md):
       curl -s http://${GPUM_HTTP_LISTEN:-127.0.0.1:8642}/api/v1/gpu/status
       curl -s http://${GPUM_HTTP_LISTEN:-127.0.0.1:8642}/metrics | grep gpum_device_memory
       curl -sN http://${GPUM_HTTP_LISTEN:-127.0.0.1:8642}/api/v1/events
run: starting gpumd in the foreground (Ctrl-C to stop)
MSG
rc=0
"$GPUMD" "$@" || rc=$?
exit $rc
