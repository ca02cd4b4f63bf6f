# SPDX-License-Identifier: Apache-2.0
# Per-process GPU utilisation (nvmlDeviceGetProcessUtilization) on a simulated node. The
# driver's side (sim_client): with no process there is no sample (NOT_FOUND); with one process
# holding memory on a device set to 60 % / 30 %, a NULL count is refused, a NULL or short buffer
# gets INSUFFICIENT_SIZE and the count, a buffer with room gets the process's sample (60, 30)
# taken within the last second, lastSeenTimeStamp gives only newer samples; a device whose spec
# says `unsupported: [process_utilization]` and a MIG instance answer NOT_SUPPORTED. libgpum's
# side (gpum_device_process_util through device_dump): the same sample for the pid the process
# list shows, ENOSPC with the count for no room, ENOTSUP for the unsupported device and for a
# driver without the call, and no sample (0, not an error) once the device is idle.
source "$(dirname "$0")/lib.sh"
C="$GPUM_TEST_PROGS/sim_client"
DUMP="$GPUM_TEST_PROGS/device_dump"

cat >"$T_SCRATCH/spec.yaml" <<'YAML'
name: putil
devices:
  - name: "NVIDIA H100 80GB HBM3"
    memory: 80GiB
  - name: "NVIDIA H100 80GB HBM3"
    memory: 80GiB
    unsupported: [process_utilization]
YAML
t_sim_start "$T_SCRATCH/spec.yaml"
NOT_FOUND=6 # NVML_ERROR_NOT_FOUND (sim_client's NOT_FOUND is CUDA's)

"$C" nvml-init nvml-putil-expect 0 $NOT_FOUND || t_fail "a sample with no process"
"$GPUM_BIN" sim set "$T_NODE" --device 0 --util 60 --mem-util 30 >/dev/null || t_fail "sim set"
"$C" nvml-init nvml-putil-expect 0 $NOT_FOUND || t_fail "a sample with no process, device busy"
"$C" nvml-init cu-init cu-ctx 0 cu-alloc 1GiB nvml-putil 0 self 60 30 \
  nvml-putil-expect 1 NOT_SUPPORTED || t_fail "nvmlDeviceGetProcessUtilization"
t_ok "NVML: counts, buffers, lastSeenTimeStamp and NOT_SUPPORTED as documented"

HOLD=$("$GPUM_BIN" sim hold "$T_NODE" --device 0 --bytes 20GiB) || t_fail "sim hold"
OUT=$("$DUMP" --backend nvml --putil)
grep -q "^proc 0 pid=$HOLD " <<<"$OUT" || { echo "$OUT" >&2; t_fail "the holder is not listed"; }
grep -q "^putil 0 rc=OK count=1 cap0=ENOSPC count0=1$" <<<"$OUT" ||
  { echo "$OUT" >&2; t_fail "gpum_device_process_util on device 0"; }
grep -qE "^putil 0 pid=$HOLD sm=60 mem=30 enc=0 dec=0 ts=[0-9]+$" <<<"$OUT" ||
  { echo "$OUT" >&2; t_fail "the holder's sample"; }
grep -q "^putil 1 rc=ENOTSUP " <<<"$OUT" || { echo "$OUT" >&2; t_fail "device 1 is not ENOTSUP"; }
OUT=$(GPUM_TEST_NVML_HIDE=nvmlDeviceGetProcessUtilization "$DUMP" --backend nvml --putil)
grep -q "^putil 0 rc=ENOTSUP " <<<"$OUT" || { echo "$OUT" >&2; t_fail "a driver without the call"; }
"$GPUM_BIN" sim set "$T_NODE" --device 0 --util 0 --mem-util 0 >/dev/null || t_fail "sim set"
OUT=$("$DUMP" --backend nvml --putil)
grep -q "^putil 0 rc=OK count=0 " <<<"$OUT" || { echo "$OUT" >&2; t_fail "an idle device"; }
t_ok "libgpum: the holder's sample, ENOSPC, ENOTSUP, and none on an idle device"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100-mig.yaml" "m$T_NODE"
"$C" nvml-init nvml-putil-expect 0 NOT_SUPPORTED || t_fail "a GPU in MIG mode"
OUT=$("$DUMP" --backend nvml --putil --no-procs)
grep -q "^putil 0 rc=ENOTSUP " <<<"$OUT" || { echo "$OUT" >&2; t_fail "a MIG instance"; }
t_ok "MIG: no per-process utilisation"
