# SPDX-License-Identifier: Apache-2.0
# NVML details of the simulated driver: init reference counting, short buffers, the memory_v2
# version check and v1/v2 "used", NOT_SUPPORTED metrics from the spec, the early-R535 32-byte
# process stride quirk, and the refusal of a node with another layout.
source "$(dirname "$0")/lib.sh"
C="$GPUM_TEST_PROGS/sim_client"
S=$T_SCRATCH
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/mixed-t4-v100.yaml"

"$C" nvml-uninit || t_fail "init reference counting"
"$C" nvml-init nvml-count 4 cu-init cu-ctx 2 cu-alloc 1GiB nvml-short-buffers 2 \
  nvml-mem-versions 2 nvml-stride 2 24 || t_fail "buffers, versions, stride"
"$C" nvml-init nvml-print 0 | grep -q '^Tesla T4|GPU-' || t_fail "T4 name"
"$C" nvml-init nvml-print 3 | grep -q '^Tesla V100-SXM2-32GB|' || t_fail "V100 name"
"$C" nvml-init nvml-expect 0 remapped_rows NOT_SUPPORTED nvml-expect 0 ecc SUCCESS \
  nvml-expect 3 remapped_rows NOT_SUPPORTED nvml-expect 0 power SUCCESS || t_fail "NOT_SUPPORTED"
t_ok "NVML basics"

cat >"$S/quirk.yaml" <<'YAML'
name: quirk
devices:
  - name: "NVIDIA A100-SXM4-80GB"
    memory: 80GiB
    process_stride: 32
    unsupported: [power, clocks, memory_v2]
    ecc: false
YAML
t_sim_start "$S/quirk.yaml" "q$T_NODE"
"$C" nvml-init cu-init cu-ctx 0 cu-alloc 1MiB nvml-stride 0 32 nvml-expect 0 power NOT_SUPPORTED \
  nvml-expect 0 clocks NOT_SUPPORTED nvml-expect 0 memory_v2 NOT_SUPPORTED \
  nvml-expect 0 memory SUCCESS nvml-expect 0 ecc NOT_SUPPORTED nvml-expect 0 eccmode SUCCESS ||
  t_fail "quirky device"
t_ok "process_stride 32 and unsupported metrics"

# A segment from another layout is refused with a clear error, and can still be stopped.
BAD="bad$T_NODE"
T_NODES+=("$BAD")
printf "NOTASIMNODE%.0s" $(seq 400) >"/dev/shm/gpum-sim-$BAD"
GPUM_SIM_NODE=$BAD "$C" nvml-init-expect LIB_RM_VERSION_MISMATCH || t_fail "foreign segment"
if "$GPUM_BIN" sim status "$BAD" 2>"$S/err"; then t_fail "status of a foreign segment"; fi
grep -q "not a gpum simulated node" "$S/err" || t_fail "unclear error: $(cat "$S/err")"
"$GPUM_BIN" sim stop "$BAD" || t_fail "stop of a foreign segment"
t_ok "layout check"
