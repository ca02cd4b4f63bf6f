#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages gpum's build and tests need. Quick no-op when all are present.
# `scripts/deps.sh bench` also installs the BENCH list (the allocators bench/pool compares the
# pool with; `make bench` asks for it). Uses apt-get (with sudo when not root). Nothing else is
# downloaded.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config
  libyaml-dev libjansson-dev libcmocka-dev libevent-dev libsqlite3-dev
  clang-format cppcheck clang-tidy
  procps python3
)

# Only for `make bench` (bench/pool: the hot path beside jemalloc and mimalloc; bench/broker:
# gpumd beside redis-server).
BENCH=(libjemalloc-dev libmimalloc-dev redis-server redis-tools)

case "${1:-}" in
  "") ;;
  bench) PKGS+=("${BENCH[@]}") ;;
  *) echo "usage: scripts/deps.sh [bench]" >&2; exit 2 ;;
esac

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
