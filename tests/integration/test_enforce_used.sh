#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What a job used that the driver's checkpoint cannot take (docs/enforce.md, "What the job
# used"): programs under the enforcement shim on a simulated node, fenced by a region made
# beforehand as gpum run --enforce makes it, call cuMemAllocManaged (linked, and through
# cuGetProcAddress_v2 as cudaMallocManaged does), cuIpcGetMemHandle, and HIP's hipMallocManaged
# and hipIpcGetMemHandle; a reader that opens the region read-only, as gpumd does, sees each
# flag with the pid of the first process that set it. Calls the driver refuses (an IPC handle
# of zeroes, the process's own handle, the shareable-handle exports the simulator does not
# offer) mark nothing, and nothing is marked without the shim. The calls the simulator cannot
# make succeed (opening another process's memory, the shareable handles) succeed on a driver
# preloaded after the shim (preload/ipc_peer.c): each marks IPC, and passes through unchanged.
. "$(dirname "$0")/lib.sh"
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES ROCR_VISIBLE_DEVICES HIP_VISIBLE_DEVICES CUDA_VISIBLE_DEVICES GPUM_RESERVATION_DEVICES GPUM_FENCE GPUM_MEM_LIMIT
P=$GPUM_TEST_PROGS/enforce_probe
H=$GPUM_TEST_PROGS/hip_alloc
F=$GPUM_TEST_PROGS/fence_used
SHIM=$(t_shim_preload)

spec=$T_SCRATCH/mixed.yaml
cat >"$spec" <<'YAML'
name: mixed
devices:
  - name: "NVIDIA H100 80GB HBM3"
    memory: 80GiB
    compute_capability: "9.0"
  - name: "AMD Instinct MI210"
    vendor: amd
    memory: 16GiB
YAML
t_sim_start "$spec"

FENCE="gpum-fence-t$$-$RANDOM"
FENCE2="gpum-fence-t$$-$RANDOM-hip"
FENCE3="gpum-fence-t$$-$RANDOM-peer"
cleanup_fences() { for f in "$FENCE" "$FENCE2" "$FENCE3"; do "$F" rm "$f" 2>/dev/null || true; done; }
# Removed however the test ends; t_cleanup then exits with the test's status.
trap 'rc=$?; cleanup_fences; set +e; (exit "$rc"); t_cleanup' EXIT
t_expect 0 "$F" create "$FENCE"
t_expect 0 "$F" show "$FENCE"
grep -qx 'flags 0 managed_pid 0 ipc_pid 0' "$T_OUT" || t_fail "a new region: $(cat "$T_OUT")"

# shown FLAGS MANAGED_PID IPC_PID: what the reader sees in region $R (patterns of grep).
R=$FENCE
shown() {
  t_expect 0 "$F" show "$R"
  grep -qx "flags $1 managed_pid $2 ipc_pid $3" "$T_OUT" ||
    t_fail "expected flags $1 managed_pid $2 ipc_pid $3, read: $(cat "$T_OUT")"
}
# code WAY CODE: the probe's last run printed WAY CODE.
code() { grep -qx "$1 $2" "$T_OUT" || { cat "$T_OUT" "$T_ERR"; t_fail "$1: expected code $2"; }; }

# Without the shim, a job's managed memory marks nothing.
t_expect 0 env GPUM_FENCE="$FENCE" "$P" used managed ipc-get
code managed 0
code ipc-get 0
shown 0 0 0
t_ok "without the shim nothing is marked"

# Calls the driver refuses mark nothing: a handle of zeroes (CUDA_ERROR_INVALID_HANDLE, 400);
# the shareable-handle calls (CUDA_ERROR_NOT_SUPPORTED, 801: the simulated devices offer no
# shareable handles).
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_FENCE="$FENCE" "$P" used ipc-open-bad ipc-open-peer export import pool-export pool-import
code ipc-open-bad 400
code ipc-open-peer 400
for w in export import pool-export pool-import; do code "$w" 801; done
shown 0 0 0
t_ok "refused calls mark nothing"

# One process of the job allocates managed memory: the reader sees the flag and its pid.
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_FENCE="$FENCE" "$P" used managed
code managed 0
A=$(awk '$1 == "pid" {print $2}' "$T_OUT")
shown 1 "$A" 0
t_ok "cuMemAllocManaged: flag managed, pid $A"

# Another, through cuGetProcAddress_v2 as the runtime calls the driver: managed keeps its first
# user; its IPC handle (the runtime's cudaIpcGetMemHandle path) sets IPC with its own pid.
# Opening its own handle is refused by the driver (CUDA_ERROR_INVALID_CONTEXT, 201).
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_FENCE="$FENCE" "$P" used managed-getproc ipc-get ipc-open-self
code managed-getproc 0
code ipc-get 0
code ipc-open-self 201
B=$(awk '$1 == "pid" {print $2}' "$T_OUT")
[ "$A" != "$B" ] || t_fail "the two processes have one pid"
shown 3 "$A" "$B"
t_ok "cuGetProcAddress paths: managed stays with $A, IPC set by $B"

# The flags stay for the region's life: a later process that uses neither changes nothing.
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_FENCE="$FENCE" "$P" try 1G
shown 3 "$A" "$B"
t_ok "flags are never cleared"

# HIP, on a region of its own: a refused open marks nothing (hipErrorInvalidHandle, 400),
# hipIpcGetMemHandle sets IPC, hipMallocManaged sets managed.
t_expect 0 "$F" create "$FENCE2"
R=$FENCE2
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_FENCE="$FENCE2" "$H" o m=2M g
grep -qx 'o - 400' "$T_OUT" || { cat "$T_OUT" "$T_ERR"; t_fail "hipIpcOpenMemHandle of zeroes"; }
grep -qx 'g - 0' "$T_OUT" || { cat "$T_OUT" "$T_ERR"; t_fail "hipIpcGetMemHandle"; }
shown 2 0 '[0-9]*'
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_FENCE="$FENCE2" "$H" k=2M
grep -qx 'k 2M 0' "$T_OUT" || { cat "$T_OUT" "$T_ERR"; t_fail "hipMallocManaged"; }
shown 3 '[0-9]*' '[0-9]*'
t_expect 0 "$F" show "$FENCE2"
read -r _ _ _ mpid _ ipid <"$T_OUT"
[ "$mpid" -gt 0 ] && [ "$ipid" -gt 0 ] && [ "$mpid" != "$ipid" ] || t_fail "HIP pids: $(cat "$T_OUT")"
t_ok "HIP: hipIpcGetMemHandle and hipMallocManaged marked, by two processes"

# Where the driver says yes (preload/ipc_peer.c after the shim): each call marks IPC on a region
# of its own, with its process's pid, and the program gets what that driver answered.
PEER="$SHIM $GPUM_TEST_PROGS/ipc_peer.so"
R=$FENCE3
for w in ipc-open-peer export import pool-export pool-import; do
  t_expect 0 "$F" create "$FENCE3"
  t_expect 0 env LD_PRELOAD="$PEER" GPUM_FENCE="$FENCE3" "$P" used "$w"
  code "$w" 0
  shown 2 0 "$(awk '$1 == "pid" {print $2}' "$T_OUT")"
  t_expect 0 "$F" rm "$FENCE3"
done
t_expect 0 "$F" create "$FENCE3"
t_expect 0 env LD_PRELOAD="$PEER" GPUM_FENCE="$FENCE3" "$H" o
grep -qx 'o 0x5ee0000 0' "$T_OUT" || { cat "$T_OUT" "$T_ERR"; t_fail "hipIpcOpenMemHandle on the peer driver"; }
shown 2 0 '[0-9]*'
t_ok "opens and shareable handles that succeed mark IPC, and pass through unchanged"
