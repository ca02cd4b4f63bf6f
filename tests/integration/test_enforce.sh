#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The enforcement shim (libgpum_enforce.so) on a simulated node, fenced by GPUM_MEM_LIMIT alone:
# a program that reaches the driver every way (linked symbol, dlsym, cuGetProcAddress,
# cuGetProcAddress for cuGetProcAddress, the per-thread-stream variants, managed, pitched, pool
# and virtual-memory allocations) is stopped at the limit to the byte with
# CUDA_ERROR_OUT_OF_MEMORY, and is told the limit as the device's size by CUDA and NVML; the
# processes of one job share the limit (exec, and by name); SIGKILL of one gives its share back
# at once; 64 threads never pass the limit and leave nothing charged; the shim passes through
# when turned off, when the limit is unreadable, and in programs that never touch CUDA.
. "$(dirname "$0")/lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
P=$GPUM_TEST_PROGS/enforce_probe
SHIM=$(t_shim_preload)
GiB=1073741824
FENCES_BEFORE=$(ls /dev/shm | grep -c '^gpum-fence-p' || true)

# Every way in reaches 6 GiB without the shim: the program does try to pass 4 GiB.
t_expect 0 "$P" fill 256M 6G
[ "$(awk '$2 == 6*1073741824 && $3 == 0' "$T_OUT" | wc -l)" -eq 10 ] || { cat "$T_OUT"; t_fail "without the shim every way reaches 6 GiB"; }
t_ok "without the shim: 10 ways, 6 GiB each"

# With it, each stops at 4 GiB exactly, with CUDA_ERROR_OUT_OF_MEMORY (2).
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB "$P" fill 256M 6G
cat "$T_OUT"
WAYS="linked dlsym getproc getproc-self async-ptsz async managed pitch pool vmm"
if ! grep -qw dlsym <<<"$(nm -D --defined-only "$GPUM_BUILD_DIR/lib/libgpum_enforce.so")"; then
  echo "note: this sanitizer build's shim does not replace dlsym (src/enforce/CMakeLists.txt): the dlsym way is checked in the other builds"
  WAYS=${WAYS/dlsym /}
fi
for way in $WAYS; do
  grep -qx "$way $((4 * GiB)) 2" "$T_OUT" || t_fail "$way: not stopped at 4 GiB with CUDA_ERROR_OUT_OF_MEMORY"
done
grep -q 'GPUM_MEM_LIMIT: out of memory on device 0: limit 4.00 GiB, used 4.00 GiB, asked 256.00 MiB (CUDA_ERROR_OUT_OF_MEMORY)' "$T_ERR" || { cat "$T_ERR"; t_fail "no OOM line on stderr"; }
[ "$(grep -c 'out of memory' "$T_ERR")" -le 3 ] || t_fail "the OOM line is not rate-limited"
t_ok "every way stops at 4 GiB with CUDA_ERROR_OUT_OF_MEMORY, one line on stderr"

# What the program is told: CUDA and NVML say 4 GiB.
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB "$P" info
t_pyjson "$T_OUT" 'g=4<<30
assert d["cu_total"]==g and d["cu_device_total"]==g and d["cu_free"]==g, d
assert d["nvml_total"]==g and d["nvml2_total"]==g and d["nvml_used"]==0 and d["nvml2_free"]==g, d' || t_fail "memory info"
t_ok "cuMemGetInfo, cuDeviceTotalMem, nvmlDeviceGetMemoryInfo(_v2) report 4 GiB"

# The processes of a job share one limit: a child exec'd by a process holding 3 GiB gets no 2 GiB.
t_expect 3 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB "$P" exec 3G -- "$P" try 2G
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB "$P" exec 1G -- "$P" try 2G
t_ok "exec: the child shares its parent's limit"

# By name, between unrelated processes; SIGKILL of one gives its 3 GiB back at once.
export GPUM_FENCE="gpum-fence-t$$-$RANDOM"
LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB t_bg "$P" hold 3G "$T_SCRATCH/held"
HOLDER=$T_LAST_PID
t_wait_file "$T_SCRATCH/held"
t_expect 3 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB "$P" try 2G
kill -9 "$HOLDER"
wait "$HOLDER" 2>/dev/null || true
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB "$P" try 4G
t_ok "a SIGKILLed process's share is back at once"
rm -f "/dev/shm/$GPUM_FENCE"
unset GPUM_FENCE

# 64 threads allocating and freeing at random never hold more than the limit; nothing is left.
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=512MiB "$P" threads 64 400 512M
grep -q 'threads ok' "$T_OUT" || t_fail "threads"
t_ok "64 threads: never past 512 MiB, all free at the end"

# Never worse than no shim: turned off, or a limit it cannot read, it fences nothing.
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB GPUM_ENFORCE=0 "$P" try 5G
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=banana "$P" try 5G
grep -q "GPUM_MEM_LIMIT 'banana' is not a size" "$T_ERR" || t_fail "no warning for a bad limit"
# Programs that never touch CUDA run as before (the shim's dlsym passes their lookups through).
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB ASAN_OPTIONS=detect_leaks=0 /usr/bin/python3 -c 'import ctypes; print(ctypes.CDLL(None).getpid() > 0)'
grep -qx True "$T_OUT" || t_fail "python under the shim"
[ ! -s "$T_ERR" ] || { cat "$T_ERR"; t_fail "the shim spoke in a program without CUDA"; }
t_ok "pass-through: off, bad limit, no CUDA"

# A driver newer than the CUDA ABI the shim knows (13.x): it wraps nothing and says so once.
sed 's/cuda_version: "12.4"/cuda_version: "14.0"/' "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml" >"$T_SCRATCH/cuda14.yaml"
grep -q 'cuda_version: "14.0"' "$T_SCRATCH/cuda14.yaml" || t_fail "no cuda 14 spec"
t_sim_start "$T_SCRATCH/cuda14.yaml" "${T_NODE}-14"
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB "$P" try 5G
grep -q 'the CUDA driver is version 14.0, newer than the shim knows (13.x): not fencing' "$T_ERR" || { cat "$T_ERR"; t_fail "no warning for an unknown driver"; }
[ "$(grep -c . "$T_ERR")" -eq 1 ] || { cat "$T_ERR"; t_fail "more than one line for an unknown driver"; }
t_ok "pass-through: a driver newer than the shim knows"

# The regions the processes made themselves are gone with them.
[ "$(ls /dev/shm | grep -c '^gpum-fence-p' || true)" -le "$FENCES_BEFORE" ] || { ls /dev/shm; t_fail "a fence region was left behind"; }
t_ok "no region left behind"
