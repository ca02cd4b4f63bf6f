# SPDX-License-Identifier: Apache-2.0
# The host backend and backend selection: with GPUM_NVML_LIBRARY pointing at a missing file,
# auto falls back to the host device "cpu" (flagged as host, RAM as memory, no temperature or
# power) and says why at info level; backend nvml then fails with GPUM_EDRIVER naming the
# library; a GPUM_SIM_NODE that does not exist also falls back to host; and a running
# simulated node makes auto pick nvml.
source "$GPUM_SOURCE_DIR/tests/integration/device_lib.sh"

missing="$T_SCRATCH/nope/libnvidia-ml.so.1"
out=$(GPUM_NVML_LIBRARY=$missing "$DUMP" --log 2>"$T_SCRATCH/err") || t_fail "auto must not fail"
d_expect "$out" "^session backend=host simulated=0 count=1 driver=null detail=\"host" "host backend"
d_expect "$out" '^info 0 rc=OK name="cpu" uuid=host-[^ ]+ pci=null total=[0-9]+ cc=null power_limit_mw=null .* is_host=1 vendor=host$' \
  "host device info"
s0=$(grep '^sample 0 ' <<<"$out")
for m in temperature power clock_sm ecc_corrected memory_driver_reserved; do
  [ "$(d_val "$s0" $m)" = null ] || t_fail "host: $m must be invalid: $s0"
done
for m in memory_total memory_used memory_free utilization_gpu; do
  [ "$(d_val "$s0" $m)" != null ] || t_fail "host: $m must be valid: $s0"
done
grep -q "backend=host" "$T_SCRATCH/err" && grep -q "nope/libnvidia-ml.so.1" "$T_SCRATCH/err" ||
  t_fail "auto must log the choice and the reason: $(cat "$T_SCRATCH/err")"
t_ok "auto falls back to host"

if out=$(GPUM_NVML_LIBRARY=$missing "$DUMP" --backend nvml); then t_fail "nvml must fail"; fi
d_expect "$out" "^open rc=EDRIVER msg=.*GPUM_NVML_LIBRARY.*nope/libnvidia-ml.so.1" \
  "EDRIVER naming the library and where it came from"
t_ok "explicit nvml fails clearly"

out=$(GPUM_SIM_NODE="no-such-node-$T_NODE" "$DUMP")
d_expect "$out" "^session backend=host " "a missing simulated node falls back to host"
if out=$(GPUM_SIM_NODE="no-such-node-$T_NODE" "$DUMP" --backend nvml); then
  t_fail "nvml on a missing node must fail"
fi
d_expect "$out" "^open rc=EDRIVER msg=.*nvmlInit" "init failure is EDRIVER with NVML's message"

cat >"$T_SCRATCH/spec.yaml" <<'YAML'
name: hostsel
devices:
  - name: Sim GPU
    memory: 4GiB
YAML
d_sim_start "$T_SCRATCH/spec.yaml"
out=$("$DUMP" --no-procs)
d_expect "$out" "^session backend=nvml simulated=1 count=1 " "auto picks nvml on a running node"
out=$("$DUMP" --backend host --no-procs)
d_expect "$out" "^session backend=host " "host on request even with GPUs"
t_ok "backend selection"
