#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make run`, first form (until gpumd exists): watch the GPUs. On a machine where the real NVML
# loads and finds devices, `gpum status --watch` on them; otherwise a simulated 2xH100 node is
# started (and stopped again on exit) and watched instead.
set -euo pipefail
BUILD=${1:-build}
shift || true
cd "$(dirname "$0")/.."
GPUM="$BUILD/bin/gpum"
[ -x "$GPUM" ] || { echo "run: $GPUM not built (run 'make build')" >&2; exit 1; }

if [ -z "${GPUM_SIM_NODE:-}" ] && "$GPUM" status --backend nvml --json >/dev/null 2>&1; then
  echo "run: real GPUs found; watching them (Ctrl-C to stop)" >&2
  exec "$GPUM" status --watch "$@"
fi

NODE=${GPUM_RUN_NODE:-gpum-demo-$$}
export GPUM_SIM_LIBRARY=${GPUM_SIM_LIBRARY:-$PWD/$BUILD/lib/libgpum_sim.so}
if [ -z "${GPUM_SIM_NODE:-}" ]; then
  echo "run: no real GPU driver here; starting simulated node '$NODE' (examples/sim/h100x2.yaml)" >&2
  "$GPUM" sim start examples/sim/h100x2.yaml --name "$NODE" >/dev/null
  trap '"$GPUM" sim stop "$NODE" >/dev/null 2>&1 || true' EXIT
  export GPUM_SIM_NODE=$NODE
  echo "run: try in another shell: GPUM_SIM_NODE=$NODE $GPUM sim hold $NODE --device 0 --bytes 20GiB" >&2
fi
"$GPUM" status --watch "$@"
