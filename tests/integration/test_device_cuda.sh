# SPDX-License-Identifier: Apache-2.0
# The CUDA driver loader against the simulated driver: it loads libgpum_sim.so because
# GPUM_SIM_NODE is set, resolves required and optional symbols, enters the primary context,
# round-trips data, maps an impossible allocation to GPUM_EDEVOOM; GPUM_CUDA_LIBRARY pointing
# at a missing file fails with GPUM_EDRIVER naming it.
source "$GPUM_SOURCE_DIR/tests/integration/device_lib.sh"

cat >"$T_SCRATCH/spec.yaml" <<'YAML'
name: cuda
devices:
  - name: Sim GPU
    memory: 4GiB
YAML
d_sim_start "$T_SCRATCH/spec.yaml"
"$GPUM_TEST_PROGS/device_cuda_check" || t_fail "CUDA loader checks"
t_ok "CUDA loader on the simulated driver"

if err=$(GPUM_CUDA_LIBRARY="$T_SCRATCH/missing-libcuda.so.1" \
  "$GPUM_TEST_PROGS/device_cuda_alloc" 0 1024 "$T_SCRATCH/r" 2>&1); then
  t_fail "a missing CUDA library must fail"
fi
grep -q "EDRIVER.*GPUM_CUDA_LIBRARY.*missing-libcuda.so.1" <<<"$err" || t_fail "message: $err"
t_ok "missing CUDA library reported"
