# SPDX-License-Identifier: Apache-2.0
# The pool on the CUDA memory sources of a simulated node, watched from another process through
# NVML (`gpum status --json`): what the pool reserves is this process's memory on the GPU, freed
# blocks stay cached (still held), and gpum_pool_trim gives them back so that NVML shows the
# memory free - for cuMemAlloc segments ("cuda") and for unmapped granules of expandable
# segments ("cuda-vmm"). Pinned memory is host memory: NVML shows none. Bad device ordinals and
# a missing driver fail with their names. The program is tests/integration/progs/pool_cuda_steps.c.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
STEPS="$GPUM_TEST_PROGS/pool_cuda_steps"

cat >"$T_SCRATCH/spec.yaml" <<'YAML'
name: poolcuda
devices:
  - name: Sim GPU
    count: 2
    memory: 4GiB
YAML
t_sim_start "$T_SCRATCH/spec.yaml"

# nvml_bytes PID DEVICE: the GPU memory NVML reports for PID on DEVICE (0 when not listed).
nvml_bytes() {
  "$GPUM_BIN" status --json >"$T_SCRATCH/status.json" || t_fail "gpum status --json"
  t_pyjson "$T_SCRATCH/status.json" '
pid, dev = int(args[0]), int(args[1])
procs = [p for d in d["devices"] if d["index"] == dev for p in (d["processes"] or [])]
print(sum(p["memory"] or 0 for p in procs if p["pid"] == pid))' "$1" "$2"
}

# run_steps SOURCE DEVICE PINNED(0|1): runs pool_cuda_steps, talking to it through two FIFOs,
# and checks NVML after each of its steps.
run_steps() {
  local source=$1 dev=$2 host=$3 line word value pid used reserved=0
  rm -f "$T_SCRATCH/to" "$T_SCRATCH/from"
  mkfifo "$T_SCRATCH/to" "$T_SCRATCH/from"
  "$STEPS" "$source" "$dev" <"$T_SCRATCH/to" >"$T_SCRATCH/from" 2>"$T_SCRATCH/steps.err" &
  pid=$!
  T_PIDS+=("$pid")
  exec 7>"$T_SCRATCH/to" 8<"$T_SCRATCH/from"
  for want in allocated cached trimmed; do
    read -r -t 30 line <&8 || t_fail "$source: no '$want' line: $(cat "$T_SCRATCH/steps.err")"
    read -r word value <<<"$line"
    [ "$word" = "$want" ] || t_fail "$source: expected '$want', got '$line'"
    used=$(nvml_bytes "$pid" "$dev")
    case "$want:$host" in
    allocated:0)
      [ "$value" -ge $((31 * 1048576)) ] || t_fail "$source: reserved $value < 31 MiB"
      [ "$used" -eq "$value" ] || t_fail "$source: NVML shows $used bytes, the pool reserved $value"
      reserved=$value ;;
    cached:0)
      [ "$value" -eq "$reserved" ] || t_fail "$source: reserved changed on free ($value)"
      [ "$used" -eq "$reserved" ] || t_fail "$source: cached memory not held: NVML shows $used" ;;
    trimmed:0)
      [ "$value" -eq "$reserved" ] || t_fail "$source: trim released $value of $reserved"
      [ "$used" -eq 0 ] || t_fail "$source: NVML still shows $used bytes after trim" ;;
    *:1)
      [ "$used" -eq 0 ] || t_fail "$source: pinned memory shows as $used bytes of GPU memory" ;;
    esac
    echo go >&7
  done
  read -r -t 30 line <&8 || true
  [ "$line" = done ] || t_fail "$source: expected 'done', got '$line'"
  exec 7>&- 8<&-
  wait "$pid" || t_fail "$source: pool_cuda_steps exited $?"
}

run_steps cuda 0 0
t_ok "cuda: cached memory held, trimmed memory free in NVML"
run_steps cuda 1 0
t_ok "cuda on device 1"
run_steps cuda-vmm 0 0
t_ok "cuda-vmm: unmapped granules free in NVML"
run_steps pinned 0 1
t_ok "pinned: host memory, not GPU memory"

t_expect 1 "$STEPS" cuda 2
grep -q "error: ENODEV: cuda pool source: no CUDA device 2: .* sees 2 devices (0-1)" "$T_ERR" ||
  t_fail "bad device message: $(cat "$T_ERR")"
t_expect 1 "$STEPS" cuda-vmm 9
grep -q "ENODEV: cuda-vmm pool source: no CUDA device 9" "$T_ERR" || t_fail "$(cat "$T_ERR")"
t_ok "bad device ordinals: ENODEV"

t_expect 1 env -u GPUM_SIM_NODE GPUM_CUDA_LIBRARY=/nonexistent/libcuda.so.1 "$STEPS" cuda 0
grep -q "error: EDRIVER: cuda pool source: .*/nonexistent/libcuda.so.1" "$T_ERR" ||
  t_fail "no driver message: $(cat "$T_ERR")"
t_ok "no driver: EDRIVER naming the library"
