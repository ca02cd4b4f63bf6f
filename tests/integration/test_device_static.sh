# SPDX-License-Identifier: Apache-2.0
# Device layer on the shipped 8xA100 simulated node: the nvml backend loads libgpum_sim.so
# because GPUM_SIM_NODE is set, finds 8 devices with the spec's static info (name, unique UUIDs
# and PCI bus ids, 40 GiB, compute capability 8.0, power limit, thresholds, ECC), and reads
# memory through nvmlDeviceGetMemoryInfo_v2: used excludes the driver's reserve, and
# used + free + reserved = total. auto picks nvml here.
source "$GPUM_SOURCE_DIR/tests/integration/device_lib.sh"

spec="$GPUM_SOURCE_DIR/examples/sim/a100x8.yaml"
[ -f "$spec" ] || t_fail "missing $spec"
d_sim_start "$spec"

out=$("$DUMP" --backend nvml --no-procs) || t_fail "device_dump failed: $out"
d_expect "$out" "^session backend=nvml simulated=1 count=8 driver=[0-9]" "8 simulated devices"
d_expect "$out" "simulated node '$T_NODE'" "the detail names the node"
[ "$(grep -Ec '^info [0-7] rc=OK name="NVIDIA A100-SXM4-40GB" ' <<<"$out")" = 8 ] ||
  t_fail "8 A100 names: $out"
[ "$(grep -Eo ' uuid=GPU-[0-9a-f-]+' <<<"$out" | sort -u | wc -l)" = 8 ] || t_fail "8 unique UUIDs"
[ "$(grep -Eo ' pci=[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.0' <<<"$out" | sort -u | wc -l)" = 8 ] ||
  t_fail "8 unique PCI bus ids"
[ "$(grep -Ec '^info .* total=42949672960 cc=8\.0 power_limit_mw=400000 slowdown=[0-9]+ shutdown=[0-9]+ ecc=1 is_host=0 vendor=nvidia$' <<<"$out")" = 8 ] ||
  { echo "$out" >&2; t_fail "static info of every device"; }
t_ok "static info of 8 devices"

for i in 0 1 2 3 4 5 6 7; do
  line=$(grep "^sample $i " <<<"$out")
  [ "$(d_val "$line" rc)" = OK ] || t_fail "sample $i: $line"
  total=$(d_val "$line" memory_total)
  used=$(d_val "$line" memory_used)
  free=$(d_val "$line" memory_free)
  reserved=$(d_val "$line" memory_driver_reserved)
  [ "$total" = 42949672960 ] || t_fail "device $i total $total"
  [ "$reserved" != null ] && [ "$reserved" -gt 0 ] || t_fail "device $i reserved from v2: $reserved"
  [ $((used + free + reserved)) -eq "$total" ] || t_fail "device $i: used+free+reserved != total"
  [ "$used" -lt "$reserved" ] || t_fail "device $i: used ($used) must not include the reserve"
  for m in utilization_gpu temperature power clock_sm clock_mem ecc_corrected ecc_uncorrected; do
    [ "$(d_val "$line" $m)" != null ] || t_fail "device $i: $m invalid on a full-featured device"
  done
done
t_ok "memory v2 on 8 devices"

out=$("$DUMP" --no-procs)
d_expect "$out" "^session backend=nvml simulated=1 count=8 " "auto picks nvml on a simulated node"
