#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages gpum's build and tests need. Quick no-op when all are present.
# `scripts/deps.sh bench` also installs the BENCH list (the allocators bench/pool compares the
# pool with; `make bench` asks for it). Uses apt-get (with sudo when not root); the REST API's
# conformance test also gets its node packages with `npm ci` (tests/http/package-lock.json).
set -euo pipefail

PKGS=(
  build-essential clang cmake pkg-config
  libyaml-dev libjansson-dev libcmocka-dev libevent-dev libsqlite3-dev
  clang-format cppcheck clang-tidy
  procps python3 curl
  libncurses-dev tmux
  chromium
  python3-torch python3-pytest python3-mypy
  librocm-smi-dev libamdhip64-dev
  libze-dev
)

# chromium: the dashboard's browser test (tests/browser/, headless through playwright-core).
# libncurses-dev: the live screen of `gpum top`; tmux: its test (tests/integration/test_top.sh)
# drives the screen in a detached tmux session.
# python3-torch: tests/integration/test_estimate_torch.sh checks the memory estimator against
# PyTorch on the CPU (Debian's build, run as /usr/bin/python3).
# python3-pytest: the Python package's tests (bindings/python/tests, tests/integration/test_python.sh).
# librocm-smi-dev: rocm_smi/rocm_smi.h, against which tests/abi/check_rocm_smi_abi.c checks our
# ROCm SMI declarations (src/abi/rocm_smi_abi.h); libgpum itself never includes it.
# libamdhip64-dev: hip/hip_runtime_api.h, against which tests/abi/check_hip_abi.c checks our HIP
# runtime declarations (src/abi/hip_abi.h). It brings Debian's real libamdhip64.so.5 along; the
# tests never load it (their HIP programs find the simulator's libamdhip64.so.5 by RUNPATH).
# libze-dev: level_zero/ze_api.h and zes_api.h (1.8.12), against which tests/abi/check_ze_abi.c
# checks our Level Zero declarations (src/abi/ze_abi.h); no test loads the real loader.
# python3-mypy: `make check` type-checks the Python package (bindings/python/gpum) with it.

# Slurm (tests/integration/test_slurm*.sh, src/slurm/gpum_spank.c, docs/slurm.md): Debian's
# slurmctld, slurmd and slurm-client with munge run a loopback cluster in the tests, and
# libslurm-dev's <slurm/spank.h> builds the SPANK plugin. Optional: when they cannot be
# installed the build skips the plugin and the Slurm tests skip, each saying why.
SLURM=(slurmctld slurmd slurm-client libslurm-dev munge)

# Only for `make bench` (bench/pool: the hot path beside jemalloc and mimalloc; bench/broker:
# gpumd beside redis-server; bench/http: wrk against gpumd's HTTP face beside nginx; bench/broker,
# bench/monitor and bench/scale: valgrind's callgrind for instruction counts beside the wall times).
BENCH=(libjemalloc-dev libmimalloc-dev redis-server redis-tools wrk nginx-light valgrind)

# promtool (tests/integration/test_metrics_promtool.sh) comes from Debian's `prometheus`
# package, which would also install and start a Prometheus server: only the promtool binary
# is extracted from the downloaded .deb into .cache/tools/bin (git-ignored), no service.
TOOLS_DIR="$(cd "$(dirname "$0")/.." && pwd)/.cache/tools"
install_promtool() {
  command -v promtool >/dev/null && return 0
  [ -x "$TOOLS_DIR/bin/promtool" ] && return 0
  local tmp
  tmp=$(mktemp -d)
  echo "deps: extracting promtool from Debian's prometheus package into $TOOLS_DIR/bin" >&2
  if (cd "$tmp" && apt-get download -qq prometheus 2>/dev/null && dpkg-deb -x prometheus_*.deb x); then
    mkdir -p "$TOOLS_DIR/bin"
    install -m 0755 "$tmp/x/usr/bin/promtool" "$TOOLS_DIR/bin/promtool"
  else
    echo "deps: could not download the prometheus package (apt-get download prometheus)" >&2
  fi
  rm -rf "$tmp"
}

# The REST API's conformance test (tests/integration/test_http_openapi.sh) runs node with the
# packages pinned in tests/http/package-lock.json: node and npm from Debian when missing (a
# node that brings its own npm is kept), then `npm ci` from the npm registry into
# tests/http/node_modules (git-ignored).
install_http_conformance() {
  local dir sudo=""
  dir="$(cd "$(dirname "$0")/.." && pwd)/tests/http"
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    echo "deps: installing nodejs npm" >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm
  fi
  if [ ! -d "$dir/node_modules/ajv" ]; then
    echo "deps: npm ci in $dir" >&2
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) ||
      echo "deps: npm ci failed in $dir (is the npm registry reachable?)" >&2
  fi
}

# The web dashboard (web/, docs/dashboard.md): its chart library uPlot is embedded into gpumd
# at build time from web/node_modules, and its lint (eslint, html-validate) and browser test
# (playwright-core driving Debian's chromium, headless) run from there too. node and npm come
# from Debian when missing (a node that brings its own npm is kept; chromium is in PKGS); then
# `npm ci` in web/ when web/node_modules is missing or older than web/package-lock.json.
install_dashboard() {
  local dir sudo="" want=()
  dir="$(cd "$(dirname "$0")/.." && pwd)/web"
  command -v node >/dev/null || want+=(nodejs)
  command -v npm >/dev/null || want+=(npm)
  if [ ${#want[@]} -gt 0 ]; then
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    echo "deps: installing ${want[*]}" >&2
    { $sudo apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${want[@]}"; } ||
      echo "deps: could not install ${want[*]} (the dashboard's browser test will be skipped)" >&2
  fi
  if [ ! -f "$dir/node_modules/.package-lock.json" ] ||
    [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    echo "deps: npm ci in $dir" >&2
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) ||
      echo "deps: npm ci failed in $dir (is the npm registry reachable?)" >&2
  fi
}

case "${1:-}" in
  "") ;;
  bench) PKGS+=("${BENCH[@]}") ;;
  *) echo "usage: scripts/deps.sh [bench]" >&2; exit 2 ;;
esac

# Installs the Slurm packages that are missing; a failure is reported, not fatal. The packages
# install systemd units: no Slurm or munge service is started here (the tests run their own).
install_slurm() {
  local p sudo="" want=()
  for p in "${SLURM[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || want+=("$p")
  done
  [ ${#want[@]} -eq 0 ] && return 0
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "deps: installing ${want[*]}" >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${want[@]}" ||
    echo "deps: could not install ${want[*]}: the Slurm plugin and tests will be skipped" >&2
}

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  install_slurm
  install_promtool
  install_http_conformance
  install_dashboard
  exit 0
fi

echo "deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# bench/http runs its own nginx as the user (scratch config, pid and logs); the system service
# the package starts is not wanted.
if [[ " ${missing[*]} " == *" nginx-light "* ]] && [ -d /run/systemd/system ]; then
  $SUDO systemctl disable --now nginx >/dev/null 2>&1 || true
fi
install_slurm
install_promtool
install_http_conformance
install_dashboard
