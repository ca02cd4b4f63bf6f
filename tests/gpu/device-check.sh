#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The device check: what gpum does, on a machine with a real NVIDIA GPU (docs/hardware.md).
#
#   tests/gpu/device-check.sh BUNDLE OUT [--sim] [--only NAME,...] [--budget SECONDS]
#
# BUNDLE is what `make device-bundle` built (build/device-bundle); OUT a folder for the results:
# device-check.json (every figure, per check), device-check.txt (a short report) and
# device-check.log (what each check printed). Runs with what the machine has: its own python3
# on PATH (with its PyTorch and torchvision), nvcc, nvidia-smi; nothing from a build tree. Each
# check is ok, FAIL with its evidence, or SKIP with the reason (no GPU, no PyTorch with CUDA,
# out of time); each has a timeout and the whole run a budget (default 450 s), so it never
# hangs. --sim runs the checks that need no vendor tool on a simulated node from the bundle
# instead (how the check itself is tested without a GPU); --only runs the named checks.
# Exit status: 0 when no check failed, 1 when one did, 2 for bad arguments.
set -uo pipefail
usage() { echo "usage: device-check.sh BUNDLE OUT [--sim] [--only NAME,...] [--budget SECONDS]" >&2; exit 2; }
[ $# -ge 2 ] || usage
[ -d "$1" ] || { echo "device-check: no bundle at $1 (make device-bundle)" >&2; exit 2; }
BUNDLE=$(cd "$1" && pwd)
mkdir -p "$2" || exit 2
OUT=$(cd "$2" && pwd)
shift 2
CHECKS=$BUNDLE/tests/gpu/checks.py
[ -f "$CHECKS" ] || CHECKS=$(cd "$(dirname "$0")" && pwd)/checks.py

# The machine's own python3 (the first on PATH, which holds its PyTorch), never the bundle's.
PY=$(command -v python3 || true)
if [ -z "$PY" ]; then
  now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  {
    echo "gpum device check, $now: no python3 on PATH, every check skipped"
  } >"$OUT/device-check.txt"
  printf '{"schema": 1, "date": "%s", "mode": "none", "checks": [], "skipped_all": "no python3 on PATH"}\n' \
    "$now" >"$OUT/device-check.json"
  : >"$OUT/device-check.log"
  cat "$OUT/device-check.txt"
  exit 0
fi
# A last guard over the checks' own timeouts: the run stops 60 s past its budget whatever happens.
budget=450
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [ "${args[$i]}" = "--budget" ] && budget=${args[$((i + 1))]:-450}
done
[[ "$budget" =~ ^[0-9]+$ ]] || usage
exec timeout -k 10 $((budget + 60)) "$PY" "$CHECKS" --bundle "$BUNDLE" --out "$OUT" "$@"
