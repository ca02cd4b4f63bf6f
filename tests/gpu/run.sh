#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make test-gpu`: the checks that need a real NVIDIA GPU, skipped with a clear message where
# there is none. Each is complete and self-checking:
#   1. a CUDA runtime program built with nvcc (tests/gpu/enforce_cudart.cu) under the enforcement
#      shim with a 1 GiB limit: cudaMemGetInfo says 1 GiB; cudaMalloc, cudaMallocAsync and
#      cudaMallocManaged stop there with cudaErrorMemoryAllocation and give everything back;
#   2. PyTorch (Debian's python3-torch with CUDA, or any torch on /usr/bin/python3) under the
#      shim with 2 GiB: torch.cuda.mem_get_info() says 2 GiB, a 3 GiB tensor raises
#      torch.cuda.OutOfMemoryError, and a 1 GiB one then fits (PyTorch's own OOM path ran);
#   3. gpum's pool as PyTorch's allocator (gpum.torch.use_gpum_allocator) with a 2 GiB
#      reservation: tensors come from the pool (its statistics grow), a 3 GiB one raises
#      torch.cuda.OutOfMemoryError, and freed memory is reused.
# Usage: tests/gpu/run.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
SHIM=$BUILD/lib/libgpum_enforce.so
[ -f "$SHIM" ] || { echo "test-gpu: $SHIM not built (make build)" >&2; exit 1; }
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1' || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: no NVIDIA GPU driver here (libcuda.so.1 / nvidia-smi): nothing to check"
  exit 0
fi
unset GPUM_SIM_NODE GPUM_CUDA_LIBRARY GPUM_NVML_LIBRARY GPUM_FENCE
status=0
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$NVCC" ]; then
  "$NVCC" -O2 -o "$BUILD/enforce_cudart" "$HERE/enforce_cudart.cu"
  if LD_PRELOAD=$SHIM GPUM_MEM_LIMIT=1073741824 "$BUILD/enforce_cudart" 1073741824; then
    echo "ok: CUDA runtime program fenced at 1 GiB"
  else
    echo "FAIL: CUDA runtime program under the shim"; status=1
  fi
else
  echo "SKIP: nvcc not found: the CUDA runtime program is not built"
fi
if /usr/bin/python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  if LD_PRELOAD=$SHIM GPUM_MEM_LIMIT=2GiB /usr/bin/python3 - <<'PY'
import torch
free, total = torch.cuda.mem_get_info()
assert total == 2 << 30, f"mem_get_info total {total}"
try:
    x = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
    raise SystemExit("a 3 GiB tensor was allocated past the 2 GiB limit")
except torch.cuda.OutOfMemoryError as e:
    assert "out of memory" in str(e)
y = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
print("ok: PyTorch fenced at 2 GiB, its OOM error raised, 1 GiB fits after")
PY
  then :; else echo "FAIL: PyTorch under the shim"; status=1; fi
  if PYTHONPATH=$HERE/../../bindings/python GPUM_LIBRARY=$BUILD/lib/libgpum.so \
    GPUM_MEM_LIMIT=2147483648 /usr/bin/python3 - <<'PY'
import ctypes
import torch
import gpum
import gpum.torch as gt
gt.use_gpum_allocator()
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
pool = ctypes.c_void_p()
assert gpum._lib.lib.gpum_torch_pool(0, ctypes.byref(pool)) == 0 and pool.value
try:
    y = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
    raise SystemExit("a 3 GiB tensor came from a pool limited to 2 GiB")
except torch.cuda.OutOfMemoryError:
    pass
del x
z = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
print("ok: gpum's pool as PyTorch's allocator, limited to the reservation")
PY
  then :; else echo "FAIL: gpum's pool as PyTorch's allocator"; status=1; fi
else
  echo "SKIP: no PyTorch with CUDA on /usr/bin/python3"
fi
exit $status
