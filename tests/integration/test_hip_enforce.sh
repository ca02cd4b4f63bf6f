#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The enforcement shim on the HIP runtime (docs/enforce.md, "AMD (HIP)"): a HIP program linked
# with -lamdhip64 (the simulator's libamdhip64.so.5, tests/integration/progs/hip_alloc.c) on a
# simulated node with one NVIDIA and two AMD devices. Without the shim it allocates past 4 GiB;
# under it with GPUM_MEM_LIMIT=4GiB every allocation call of the hipMalloc family stops at 4 GiB
# exactly with hipErrorOutOfMemory (2), hipMemGetInfo and hipDeviceTotalMem say 4 GiB, a free
# gives the bytes back, and two devices are fenced each on its own. HIP ordinals reach the
# fence through ROCR_VISIBLE_DEVICES' UUIDs and GPUM_RESERVATION_DEVICES, as gpum run grants
# AMD devices: two processes that number one device differently share its limit; and under
# gpum run --enforce --type amd with gpumd, which reads the fenced bytes where the shim charged
# them (gpum jobs). The simulator's own HIP: visibility lists, its capacity, a lost device,
# ROCm SMI seeing the memory.
. "$(dirname "$0")/lib.sh"
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES ROCR_VISIBLE_DEVICES HIP_VISIBLE_DEVICES CUDA_VISIBLE_DEVICES GPUM_RESERVATION_DEVICES GPUM_FENCE GPUM_MEM_LIMIT
G=$GPUM_BIN
P=$GPUM_TEST_PROGS/hip_alloc
SHIM=$(t_shim_preload)
GiB=1073741824

spec=$T_SCRATCH/mixed.yaml
cat >"$spec" <<'YAML'
name: mixed
driver_version: "6.7.0"
devices:
  - name: "NVIDIA H100 80GB HBM3"
    memory: 80GiB
    compute_capability: "9.0"
  - count: 2
    vendor: amd
    name: "AMD Instinct MI210"
    memory: 16GiB
    reserved: 512MiB
YAML
t_sim_start "$spec"

# The program runs on the simulator's libamdhip64.so.5, found by name as a HIP program finds it.
readelf -d "$P" | grep -q 'NEEDED.*\[libamdhip64\.so\.5\]' || t_fail "hip_alloc does not need libamdhip64.so.5"

# The simulator's HIP: the two AMD devices only, their size, their capacity.
t_expect 0 "$P" c t=0 t=2 i
grep -qx "c 2 0" "$T_OUT" || t_fail "hipGetDeviceCount: $(cat "$T_OUT")"
grep -qx "t $((16 * GiB)) 0" "$T_OUT" || t_fail "hipDeviceTotalMem: $(cat "$T_OUT")"
grep -qx "t 0 101" "$T_OUT" || t_fail "ordinal 2: not hipErrorInvalidDevice: $(cat "$T_OUT")"
grep -qx "i $((16 * GiB - 512 * 1048576)) $((16 * GiB)) 0" "$T_OUT" || t_fail "hipMemGetInfo: $(cat "$T_OUT")"
t_expect 0 "$P" m=15G m=1G
grep -qx "m 1G 2" "$T_OUT" || t_fail "past the device: not hipErrorOutOfMemory: $(cat "$T_OUT")"
t_ok "simulator: two AMD devices of 16 GiB, hipErrorInvalidDevice, hipErrorOutOfMemory past the device"

# Visibility: ROCR first (indices or UUIDs), then HIP_VISIBLE_DEVICES among what ROCR left.
t_expect 0 "$G" --backend rocm status --json
U0=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["devices"][0]["uuid"])' "$T_OUT")
U1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["devices"][1]["uuid"])' "$T_OUT")
[ -n "$U0" ] && [ "$U0" != "$U1" ] || t_fail "no AMD UUIDs"
t_expect 0 env ROCR_VISIBLE_DEVICES=1 "$P" c
grep -qx "c 1 0" "$T_OUT" || t_fail "ROCR_VISIBLE_DEVICES=1: $(cat "$T_OUT")"
t_expect 0 env ROCR_VISIBLE_DEVICES="$U1,$U0" HIP_VISIBLE_DEVICES=1 "$P" c
grep -qx "c 1 0" "$T_OUT" || t_fail "ROCR UUIDs + HIP_VISIBLE_DEVICES: $(cat "$T_OUT")"
t_expect 0 env ROCR_VISIBLE_DEVICES=1 HIP_VISIBLE_DEVICES=1 "$P" c m=1M
grep -qx "c 0 100" "$T_OUT" || t_fail "nothing visible: not hipErrorNoDevice: $(cat "$T_OUT")"
grep -qx "m 1M 100" "$T_OUT" || t_fail "nothing visible: hipMalloc not hipErrorNoDevice: $(cat "$T_OUT")"
t_ok "ROCR_VISIBLE_DEVICES (index, UUIDs) then HIP_VISIBLE_DEVICES; none visible: hipErrorNoDevice"

# Without the shim each way passes 4 GiB; with it each stops at 4 GiB exactly.
WAYS="m k e a p x"
for w in $WAYS; do
  t_expect 0 "$P" $w=1G $w=1G $w=1G $w=1G $w=1G
  [ "$(grep -c "^$w 1G 0\$" "$T_OUT")" -eq 5 ] || t_fail "$w without the shim: $(cat "$T_OUT")"
done
t_ok "without the shim: six ways reach 5 GiB"
if ! grep -qw dlsym <<<"$(nm -D --defined-only "$GPUM_BUILD_DIR/lib/libgpum_enforce.so")"; then
  echo "note: this sanitizer build's shim does not replace dlsym (src/enforce/CMakeLists.txt): the dlsym way is checked in the other builds"
  WAYS=${WAYS/ x/}
fi
for w in $WAYS; do
  t_expect 0 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB "$P" $w=1G $w=1G $w=1G $w=1G $w=1G
  [ "$(grep -c "^$w 1G 0\$" "$T_OUT")" -eq 4 ] && grep -qx "$w 1G 2" "$T_OUT" ||
    t_fail "$w under the shim: $(cat "$T_OUT")"
done
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB "$P" P=1024 P=1024 P=1024 P=1024 P=1024
[ "$(grep -c '^P 1024 0$' "$T_OUT")" -eq 4 ] && grep -qx "P 1024 2" "$T_OUT" || t_fail "pitched: $(cat "$T_OUT")"
grep -q 'GPUM_MEM_LIMIT: out of memory on device 0: limit 4.00 GiB, used 4.00 GiB, asked 1.00 GiB (hipErrorOutOfMemory)' "$T_ERR" || { cat "$T_ERR"; t_fail "no OOM line naming hipErrorOutOfMemory"; }
t_ok "ways $WAYS and pitched: stopped at 4 GiB with hipErrorOutOfMemory"

# What the program is told, and frees: 3 GiB held leaves 1 GiB; a free of 2 GiB makes 2 GiB fit.
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB "$P" t=0 i m=1G m=2G i m=2G f m=2G i
cat >"$T_SCRATCH/want" <<EOF2
t $((4 * GiB)) 0
i $((4 * GiB)) $((4 * GiB)) 0
m 1G 0
m 2G 0
i $((1 * GiB)) $((4 * GiB)) 0
m 2G 2
f - 0
m 2G 0
i $((1 * GiB)) $((4 * GiB)) 0
EOF2
diff "$T_SCRATCH/want" "$T_OUT" || t_fail "limit as total, free gives back"
t_ok "hipMemGetInfo and hipDeviceTotalMem say 4 GiB; a free gives the bytes back"

# 64 threads allocating and freeing at random never hold more than the limit; nothing is left.
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=512MiB "$P" T=64
grep -qx "T 64 ok" "$T_OUT" || t_fail "threads: $(cat "$T_OUT")"
t_ok "64 threads: never past 512 MiB, all given back"

# Two devices, each fenced on its own (ROCR_VISIBLE_DEVICES by index, no reservation list).
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB ROCR_VISIBLE_DEVICES=1,0 "$P" d=0 m=4G m=4K d=1 m=4G m=4K i
[ "$(grep -c '^m 4G 0$' "$T_OUT")" -eq 2 ] && [ "$(grep -c '^m 4K 2$' "$T_OUT")" -eq 2 ] ||
  t_fail "two devices: $(cat "$T_OUT")"
grep -qx "i 0 $((4 * GiB)) 0" "$T_OUT" || t_fail "device 1 full: $(cat "$T_OUT")"
t_ok "two devices through ROCR_VISIBLE_DEVICES: 4 GiB each"

# As gpum run grants AMD devices: ROCR names them by UUID, GPUM_RESERVATION_DEVICES lists every
# granted device (its positions are the fence's devices). One process sees U1 as HIP device 0,
# another sees it as HIP device 1: they share U1's 4 GiB, and the other device is apart.
export GPUM_FENCE="gpum-fence-t$$-$RANDOM" GPUM_RESERVATION_DEVICES="GPU-nvidia-stand-in,$U0,$U1"
LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB ROCR_VISIBLE_DEVICES="$U1" HIP_VISIBLE_DEVICES=0 t_bg "$P" m=3G w="$T_SCRATCH/held"
HOLDER=$T_LAST_PID
t_wait_file "$T_SCRATCH/held"
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB ROCR_VISIBLE_DEVICES="$U0,$U1" HIP_VISIBLE_DEVICES=0,1 "$P" d=1 m=2G m=1G d=0 m=4G
cat >"$T_SCRATCH/want" <<EOF2
d 1 0
m 2G 2
m 1G 0
d 0 0
m 4G 0
EOF2
diff "$T_SCRATCH/want" "$T_OUT" || t_fail "UUID mapping across processes"
t_ok "ROCR_VISIBLE_DEVICES UUIDs: one device's limit shared by two processes that number it apart"

# ROCm SMI (gpum status) sees the holder's 3 GiB on U1, and the process with it.
t_expect 0 "$G" --backend rocm status --json
t_pyjson "$T_OUT" '
GiB = 1 << 30
d1 = [x for x in d["devices"] if x["uuid"] == args[0]][0]
assert d1["memory"]["used"] == 512 * (1 << 20) + 3 * GiB, d1["memory"]
p = d1["processes"]
assert len(p) == 1 and p[0]["pid"] == int(args[1]) and p[0]["memory"] == 3 * GiB, p
' "$U1" "$HOLDER" || t_fail "gpum status: $(cat "$T_OUT")"
kill -9 "$HOLDER"
wait "$HOLDER" 2>/dev/null || true
rm -f "/dev/shm/$GPUM_FENCE"
unset GPUM_FENCE GPUM_RESERVATION_DEVICES
t_ok "gpum --backend rocm status shows the HIP allocation and its process"

# gpum run --enforce on the AMD GPUs: the grant names them in ROCR_VISIBLE_DEVICES (UUIDs) and
# HIP_VISIBLE_DEVICES; each is fenced at the reservation's 4 GiB, and gpumd reads what the job
# holds from the fence where the shim charged it (gpum jobs).
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
# A sanitizer build's shim needs its runtime preloaded first; gpum run passes LD_PRELOAD on.
RT=$(t_shim_preload | awk 'NF == 2 {print $1}')
if [ -n "$RT" ]; then RUN=(env "LD_PRELOAD=$RT" "$G" run); else RUN=("$G" run); fi
gd_start
t_expect 0 "${RUN[@]}" --mem 4GiB --gpus 2 --type amd --enforce -q -- "$P" c d=0 m=3G m=2G d=1 m=4G m=1M i
cat >"$T_SCRATCH/want" <<EOF2
c 2 0
d 0 0
m 3G 0
m 2G 2
d 1 0
m 4G 0
m 1M 2
i 0 $((4 * GiB)) 0
EOF2
diff "$T_SCRATCH/want" "$T_OUT" || t_fail "gpum run --enforce on two AMD GPUs"
grep -q 'reservation r-[0-9]*: out of memory on device 0: limit 4.00 GiB, used 3.00 GiB, asked 2.00 GiB (hipErrorOutOfMemory)' "$T_ERR" ||
  { cat "$T_ERR"; t_fail "no OOM line naming the reservation"; }
t_bg "${RUN[@]}" --mem 4GiB --type amd --enforce -q --label hipjob -- "$P" m=3G w="$T_SCRATCH/held2"
RUNNER=$T_LAST_PID
t_wait_file "$T_SCRATCH/held2"
t_expect 0 "$G" jobs
# Columns: ID STATE USER PID GPUS MEM/GPU (2 words) FENCED (2 words) ...
[ "$(awk '/hipjob/ {print $8, $9}' "$T_OUT")" = "3.00 GiB" ] || { cat "$T_OUT"; t_fail "gpum jobs' FENCED is not the 3 GiB the HIP job holds"; }
kill -9 "$(cat "$T_SCRATCH/held2")" 2>/dev/null || true
wait "$RUNNER" 2>/dev/null || true
t_ok "gpum run --enforce --type amd: each GPU fenced at 4 GiB with hipErrorOutOfMemory; gpum jobs shows the fenced bytes"

# A lost device (XID 79): hipMalloc on it fails with hipErrorNoDevice; the other still works.
"$G" sim inject "$GPUM_SIM_NODE" --device 1 --xid 79 >/dev/null || t_fail "inject --xid 79"
t_expect 0 "$P" d=0 m=1M d=1 m=1M
grep -qx "m 1M 100" "$T_OUT" && grep -qx "m 1M 0" "$T_OUT" || t_fail "lost device: $(cat "$T_OUT")"
t_ok "a lost device: hipErrorNoDevice"
