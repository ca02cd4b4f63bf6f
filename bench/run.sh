#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make bench`: runs every benchmark (bench/*/run.sh BUILD_DIR). Benchmarks print their figure
# beside a baseline measured in the same run; they are never part of `make test`.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")"
status=0
for b in */run.sh; do
  echo "== bench/${b%/run.sh}"
  bash "$b" "$BUILD" || status=1
done
exit $status
