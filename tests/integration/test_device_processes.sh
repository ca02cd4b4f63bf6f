# SPDX-License-Identifier: Apache-2.0
# Per-process memory: a real process allocates 1 GiB through libgpum's CUDA loader on a
# simulated device; gpum_device_processes shows its pid with at least those bytes, its user
# and its command line, on that device only; every process-list path gives the same answer
# (nvmlDeviceGetRunningProcessDetailList, then with it hidden _v3, _v2 and v1), also on a
# device with the early-R535 32-byte _v3 stride; and the memory of the killed process is
# given back.
source "$GPUM_SOURCE_DIR/tests/integration/device_lib.sh"

GIB=1073741824
make_spec() { # FILE STRIDE
  cat >"$1" <<YAML
name: procs
devices:
  - name: Sim GPU
    count: 2
    memory: 16GiB
    process_stride: $2
YAML
}
make_spec "$T_SCRATCH/s24.yaml" 24
make_spec "$T_SCRATCH/s32.yaml" 32

# check_proc OUT LABEL PID GIBS READY: the pid is listed on device 1 with GIBS GiB (plus at most
# 1 GiB of context), our user and its command line.
check_proc() {
  local line mem
  line=$(grep -E "^proc 1 pid=$3 " <<<"$1") ||
    { echo "$1" >&2; t_fail "$2: pid $3 not listed on device 1"; }
  mem=$(d_val "$line" memory)
  [ "$mem" != null ] && [ "$mem" -ge $(($4 * GIB)) ] && [ "$mem" -lt $((($4 + 1) * GIB)) ] ||
    t_fail "$2: memory $mem of pid $3 for a $4 GiB allocation"
  [ "$(d_val "$line" user)" = "$(id -un)" ] || t_fail "$2: user in $line"
  grep -q "command=\"$GPUM_TEST_PROGS/device_cuda_alloc 1 $(($4 * GIB)) $5\"" <<<"$line" ||
    t_fail "$2: command in $line"
  d_reject "$1" "^proc 0 pid=$3 " "$2: pid $3 is not on device 0"
}

# Two processes, so that a wrong entry stride would shift the second one.
check_node() { # LABEL
  local ra="$T_SCRATCH/ready-$1-a" rb="$T_SCRATCH/ready-$1-b" a b
  t_bg "$GPUM_TEST_PROGS/device_cuda_alloc" 1 $GIB "$ra"
  a=$T_LAST_PID
  t_bg "$GPUM_TEST_PROGS/device_cuda_alloc" 1 $((2 * GIB)) "$rb"
  b=$T_LAST_PID
  t_wait_file "$ra"
  t_wait_file "$rb"
  [ "$(cat "$ra")" = "$a" ] || t_fail "ready file names pid $(cat "$ra"), not $a"
  for hide in "" nvmlDeviceGetRunningProcessDetailList \
    nvmlDeviceGetRunningProcessDetailList,nvmlDeviceGetComputeRunningProcesses_v3 \
    nvmlDeviceGetRunningProcessDetailList,nvmlDeviceGetComputeRunningProcesses_v3,nvmlDeviceGetComputeRunningProcesses_v2; do
    local out used
    out=$(GPUM_TEST_NVML_HIDE=$hide "$DUMP" --backend nvml)
    check_proc "$out" "$1 hide=[$hide]" "$a" 1 "$ra"
    check_proc "$out" "$1 hide=[$hide]" "$b" 2 "$rb"
    [ "$(grep -c "^proc 1 " <<<"$out")" = 2 ] || t_fail "$1 hide=[$hide]: two processes on device 1"
    used=$(d_val "$(grep '^sample 1 ' <<<"$out")" memory_used)
    [ "$used" -ge $((3 * GIB)) ] || t_fail "$1: device 1 memory_used $used"
  done
  # GPUM_PROCESSES_NO_USER (gpumd's readers): the same list, no user name looked up.
  out=$("$DUMP" --backend nvml --no-user)
  line=$(grep -E "^proc 1 pid=$a " <<<"$out") || t_fail "$1 no-user: pid $a not listed"
  [ "$(d_val "$line" user)" = null ] || t_fail "$1 no-user: a user name in $line"
  grep -q "command=\"$GPUM_TEST_PROGS/device_cuda_alloc 1 $GIB $ra\"" <<<"$line" ||
    t_fail "$1 no-user: command in $line"
  t_ok "$1: processes listed with bytes, user and command on every path; no name with NO_USER"
  kill -9 "$a"
  wait "$a" 2>/dev/null || true
  t_until 10 bash -c "! \"$DUMP\" --backend nvml | grep -q '^proc 1 pid=$a '" ||
    t_fail "$1: memory of the killed process not given back"
  out=$("$DUMP" --backend nvml)
  check_proc "$out" "$1 after kill" "$b" 2 "$rb"
  kill -9 "$b"
  wait "$b" 2>/dev/null || true
  t_ok "$1: killed process gone from the list"
}

d_sim_start "$T_SCRATCH/s24.yaml"
check_node stride24
d_sim_start "$T_SCRATCH/s32.yaml" "${T_NODE}-32"
check_node stride32
