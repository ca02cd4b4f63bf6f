#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make device-bundle`: a self-contained folder to carry to a machine with a real GPU and run
# tests/gpu/device-check.sh there (docs/hardware.md). It holds:
#   bin/gpum, sbin/gpumd            installed by CMake, RUNPATH $ORIGIN/../lib (no build path)
#   lib/libgpum.so.0, libgpum_enforce.so, libgpum_sim.so, libgpum_torch.so
#   lib/<dependencies>              every shared library they link but the C and C++ runtimes
#                                   (jansson, libevent, libyaml, SQLite, ncurses, ...):
#                                   the GPU machine may lack them or have other versions
#   python/gpum                     the Python package (GPUM_LIBRARY points it at lib/)
#   tests/gpu                       the device check and its parts, estimate_models.py
#   bin/enforce_cudart              the CUDA runtime test program, when nvcc is here (the check
#                                   builds it on the GPU machine otherwise)
#   traces/                         the allocation traces to replay: the shared zdevito traces
#                                   when found (GPUM_TRACES, else ../shared/traces/alloc), and a
#                                   transformer trace made by `gpum pool gen-trace`
#   tools/promtool.gz               promtool, when found (PATH or .cache/tools/bin), compressed
#   MANIFEST                        version, commit, date, and every file with its size
# Refuses to finish past 64 MiB (what one call to the device tool carries).
# Usage: scripts/device-bundle.sh BUILD_DIR OUT_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: scripts/device-bundle.sh BUILD_DIR OUT_DIR" >&2; exit 2; }
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$1" && pwd)
OUT=$2
LIMIT=$((64 << 20))
say() { echo "device-bundle: $*" >&2; }

[ -x "$BUILD/bin/gpum" ] && [ -x "$BUILD/bin/gpumd" ] ||
  { say "$BUILD has no gpum/gpumd: run 'make build' first"; exit 1; }
if grep -q '^GPUM_SANITIZE:STRING=.\+' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  say "$BUILD is a sanitizer build: bundle the normal build (make device-bundle)"
  exit 1
fi

rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# 1. gpum's own files, as `cmake --install` lays them out (it rewrites RUNPATH to the install
#    one, $ORIGIN/../lib); headers, the static libraries and the Slurm plugin are not needed.
cmake --install "$BUILD" --prefix "$OUT" >/dev/null
rm -rf "$OUT/include" "$OUT"/lib/*.a "$OUT/lib/gpum"
[ -d "$OUT/lib" ] || { say "cmake --install put no lib/ in $OUT"; exit 1; }

# 2. The shared libraries they link, except the C library and the loader, which must be the
#    machine's own. Resolved with ldd against this machine; a library ldd cannot find is an error.
is_system() {
  case "$1" in
    linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | \
      librt.so.* | libresolv.so.* | libutil.so.* | libgcc_s.so.* | libstdc++.so.*) return 0 ;;
  esac
  return 1
}
copy_deps() {
  local elf=$1 name path
  while read -r name _ path _; do
    [ -n "$name" ] || continue
    is_system "$name" && continue
    [ -e "$OUT/lib/$name" ] && continue
    if [ "$path" = "not" ] || [ -z "$path" ] || [ ! -e "$path" ]; then
      say "$elf needs $name, which ldd cannot find"
      exit 1
    fi
    cp -L "$path" "$OUT/lib/$name"
    chmod 0644 "$OUT/lib/$name"
    copy_deps "$OUT/lib/$name"
  done < <(LD_LIBRARY_PATH="$OUT/lib" ldd "$elf" | grep '=>' || true)
}
for f in "$OUT"/bin/* "$OUT"/sbin/* "$OUT"/lib/*.so*; do
  [ -f "$f" ] && [ ! -L "$f" ] && copy_deps "$f"
done

# 3. The Python package, the device check, the models it builds.
mkdir -p "$OUT/python" "$OUT/tests"
cp -r "$SRC/bindings/python/gpum" "$OUT/python/gpum"
find "$OUT/python" -name __pycache__ -prune -exec rm -rf {} +
cp -r "$SRC/tests/gpu" "$OUT/tests/gpu"
find "$OUT/tests" -name __pycache__ -prune -exec rm -rf {} +
cp "$SRC/tests/integration/estimate_models.py" "$OUT/tests/gpu/estimate_models.py"
mkdir -p "$OUT/examples"
cp "$SRC/examples/sim/h100x2.yaml" "$OUT/examples/"

# 4. The CUDA runtime program, where nvcc is here (static cudart: it needs only libcuda.so.1).
NVCC=$(command -v nvcc || true)
[ -n "$NVCC" ] || { [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc; } || true
if [ -n "$NVCC" ]; then
  "$NVCC" -O2 -o "$OUT/bin/enforce_cudart" "$SRC/tests/gpu/enforce_cudart.cu" ||
    { say "nvcc could not build tests/gpu/enforce_cudart.cu"; exit 1; }
else
  say "no nvcc here: the device check builds enforce_cudart on the GPU machine"
fi

# 5. Traces to replay (never committed: the bundle is build output).
mkdir -p "$OUT/traces"
TRACES=${GPUM_TRACES:-$SRC/../shared/traces/alloc}
for t in zdevito-trace.csv zdevito-cudagraph.csv; do
  [ -f "$TRACES/$t" ] && cp "$TRACES/$t" "$OUT/traces/"
done
"$OUT/bin/gpum" pool gen-trace transformer --output "$OUT/traces/transformer.csv"

# 6. promtool, compressed (46 MB plain).
PROMTOOL=$(command -v promtool || true)
[ -n "$PROMTOOL" ] || PROMTOOL=$SRC/.cache/tools/bin/promtool
if [ -x "$PROMTOOL" ]; then
  mkdir -p "$OUT/tools"
  gzip -c "$PROMTOOL" >"$OUT/tools/promtool.gz"
else
  say "no promtool here: the device check reads /metrics without it"
fi

# 7. The manifest, and the size limit.
{
  echo "gpum device bundle"
  echo "version $("$OUT/bin/gpum" --version 2>/dev/null | head -1)"
  echo "commit $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)$(
    git -C "$SRC" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(ldd --version | head -1)"
  echo
  (cd "$OUT" && find . -type f ! -name MANIFEST -printf '%s\t%P\n' | sort -k2)
} >"$OUT/MANIFEST"
size=$(du -sb "$OUT" | cut -f1)
if [ "$size" -gt "$LIMIT" ]; then
  say "$OUT is $size bytes, over the 64 MiB a device call carries"
  exit 1
fi
say "$OUT: $((size >> 20)) MiB"
