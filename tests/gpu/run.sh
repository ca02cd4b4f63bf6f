#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make test-gpu`: the device check (tests/gpu/device-check.sh, docs/hardware.md) on this machine,
# from a bundle of this build: on a machine with an NVIDIA GPU every check runs; without one
# each GPU check says SKIP and why. The results go to BUILD_DIR/test-output/device-check/.
# Usage: tests/gpu/run.sh BUILD_DIR [device-check options...]
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
shift || true
HERE=$(cd "$(dirname "$0")" && pwd)
"$HERE/../../scripts/device-bundle.sh" "$BUILD" "$BUILD/device-bundle"
exec "$BUILD/device-bundle/tests/gpu/device-check.sh" "$BUILD/device-bundle" \
  "$BUILD/test-output/device-check" "$@"
