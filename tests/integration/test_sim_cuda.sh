# SPDX-License-Identifier: Apache-2.0
# The simulated CUDA driver: copies really copy, capacity is enforced (including other
# processes and the driver's reserve), contexts, streams, events, VMM rules, pinned memory,
# error names, cuGetProcAddress, and CUDA_VISIBLE_DEVICES (CUDA only; NVML is system-wide).
source "$(dirname "$0")/lib.sh"
C="$GPUM_TEST_PROGS/sim_client"
S=$T_SCRATCH
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"

"$C" cu-uninit cu-init cu-count 2 cu-noctx cu-ctx 0 cu-copy 1000003 || t_fail "copies"
t_ok "data written with HtoD reads back with DtoH; bad pointers are refused"
"$C" cu-init cu-ctx 1 cu-misc || t_fail "streams, events, host memory, error names, proc address"
"$C" cu-init cu-ctx 0 cu-vmm 0 || t_fail "VMM"
t_ok "misc and VMM"

# Capacity: 80 GiB - 512 MiB reserved - what another process holds.
t_bg "$C" cu-init cu-ctx 0 cu-alloc 10GiB ready "$S/other" block
t_wait_file "$S/other"
"$C" cu-init cu-ctx 0 cu-expect-free $((80 * 1024 - 512 - 10 * 1024))MiB cu-free-max ||
  t_fail "out of memory at capacity"
t_ok "OOM at capacity"

# A released primary context takes its memory with it.
"$C" cu-init cu-ctx 1 cu-alloc 1GiB cu-ctx-release 1 nvml-init nvml-expect-used 1 0 ||
  t_fail "context release frees its memory"

# CUDA_VISIBLE_DEVICES.
D0=0000:18:00.0 D1=0000:25:00.0
CUDA_VISIBLE_DEVICES=1 "$C" cu-init cu-count 1 cu-pci 0 $D1 nvml-init nvml-count 2 ||
  t_fail "CUDA_VISIBLE_DEVICES=1"
CUDA_VISIBLE_DEVICES=1,0 "$C" cu-init cu-count 2 cu-pci 0 $D1 cu-pci 1 $D0 ||
  t_fail "CUDA_VISIBLE_DEVICES=1,0"
CUDA_VISIBLE_DEVICES=0,7,1 "$C" cu-init cu-count 1 cu-pci 0 $D0 ||
  t_fail "CUDA_VISIBLE_DEVICES stops at the first invalid entry"
CUDA_VISIBLE_DEVICES=1,1 "$C" cu-init cu-count 1 || t_fail "a repeated entry ends the list"
UUID1=$("$GPUM_BIN" sim status "$T_NODE" --json | grep '"uuid"' | sed -n 2p | cut -d'"' -f4)
CUDA_VISIBLE_DEVICES=${UUID1:0:12} "$C" cu-init cu-count 1 cu-pci 0 $D1 ||
  t_fail "CUDA_VISIBLE_DEVICES by UUID prefix ${UUID1:0:12}"
CUDA_VISIBLE_DEVICES= "$C" cu-init-expect NO_DEVICE || t_fail "empty CUDA_VISIBLE_DEVICES"
CUDA_VISIBLE_DEVICES=-1 "$C" cu-init-expect NO_DEVICE nvml-init nvml-count 2 ||
  t_fail "CUDA_VISIBLE_DEVICES=-1"
t_ok "CUDA_VISIBLE_DEVICES"

# No node: the driver is not there.
GPUM_SIM_NODE="nonexistent-$T_NODE" "$C" cu-init-expect NO_DEVICE nvml-init-expect DRIVER_NOT_LOADED ||
  t_fail "missing node"
t_ok "missing node"
