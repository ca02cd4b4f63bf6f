#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum run against a real gpumd on a simulated 2xH100 node: CMD sees CUDA_VISIBLE_DEVICES with
# the granted GPUs' UUIDs, GPUM_RESERVATION_ID and GPUM_MEM_LIMIT, and exactly the environment
# that gpumd's REST setup answers give for its grant; gpum run exits with CMD's
# status (128+N when CMD is killed by signal N) and releases the reservation; requests that
# can never fit, bad flags, a missing command and a missing daemon fail with a clear message.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
G="$GPUM_BIN"

"$G" status --json >"$T_SCRATCH/status.json" || t_fail "gpum status"
mapfile -t UUIDS < <(t_pyjson "$T_SCRATCH/status.json" 'print("\n".join(x["uuid"] for x in d["devices"]))')
[ ${#UUIDS[@]} -eq 2 ] || t_fail "expected 2 simulated GPUs, got ${#UUIDS[@]}"

# 1 GPU: the environment, CMD's exit status, and the release afterwards.
ENVF="$T_SCRATCH/env1"
t_expect 7 "$G" run --mem 20GiB --label envtest -- sh -c \
  'printf "%s\n%s\n%s\n" "$CUDA_VISIBLE_DEVICES" "$GPUM_RESERVATION_ID" "$GPUM_MEM_LIMIT" >"$1"; exit 7' sh "$ENVF"
mapfile -t E <"$ENVF"
[[ " ${UUIDS[*]} " == *" ${E[0]} "* ]] || t_fail "CUDA_VISIBLE_DEVICES '${E[0]}' is not one of ${UUIDS[*]}"
[[ "${E[1]}" =~ ^r-[0-9]+$ ]] || t_fail "GPUM_RESERVATION_ID '${E[1]}'"
[ "${E[2]}" = 21474836480 ] || t_fail "GPUM_MEM_LIMIT '${E[2]}', expected 21474836480 (20 GiB)"
t_ok "run: CUDA_VISIBLE_DEVICES=${E[0]}, id ${E[1]}, limit ${E[2]}, exit status 7"

t_expect 0 "$G" jobs --all --json
t_pyjson "$T_OUT" 'sys.exit(0 if d["reservations"] == [] else 1)' ||
  { cat "$T_OUT" >&2; t_fail "reservations left after gpum run exited"; }
t_ok "released when CMD exits"

# 2 GPUs: both UUIDs, comma-separated.
t_expect 0 "$G" run --mem 1GiB --gpus 2 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"'
got=$(cat "$T_OUT")
[ "$got" = "${UUIDS[0]},${UUIDS[1]}" ] || [ "$got" = "${UUIDS[1]},${UUIDS[0]}" ] ||
  t_fail "--gpus 2: CUDA_VISIBLE_DEVICES '$got'"
t_ok "--gpus 2 gives both UUIDs"

# The environment under gpum run is the one the REST setup answers give for the same grant
# (both come from libgpum's gpum_reservation_env): CMD asks gpumd for its own reservation.
cat >"$T_SCRATCH/sameenv.py" <<'PY'
import os, sys
from gpumd_http import expect
rid = os.environ["GPUM_RESERVATION_ID"]
for path in ("/api/v1/gpu/setup-pytorch", "/api/v1/gpu/setup-tensorflow"):
    env = expect("POST", path, 200, body={"reservation": rid})["env"]
    base = {k: v for k, v in env.items() if k not in ("WORLD_SIZE", "LOCAL_WORLD_SIZE",
            "PET_NPROC_PER_NODE", "PET_NNODES", "MASTER_ADDR", "MASTER_PORT",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING")}
    for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "GPUM_RESERVATION_ID", "GPUM_MEM_LIMIT",
              "GPUM_RESERVATION_DEVICES", "TF_FORCE_GPU_ALLOW_GROWTH", "XLA_PYTHON_CLIENT_PREALLOCATE"):
        if k not in base:
            sys.exit("%s: %s missing from the REST env" % (path, k))
    for k, v in base.items():
        if os.environ.get(k) != v:
            sys.exit("%s: %s=%r under gpum run, %r in the REST answer" % (path, k, os.environ.get(k), v))
print("same", len(base))
PY
env -u TF_FORCE_GPU_ALLOW_GROWTH -u XLA_PYTHON_CLIENT_PREALLOCATE \
  "$G" run --mem 1GiB --gpus 2 -- python3 "$T_SCRATCH/sameenv.py" >"$T_OUT" 2>"$T_ERR" ||
  { cat "$T_OUT" "$T_ERR" >&2; t_fail "the environment under gpum run differs from REST's"; }
grep -q '^same 7$' "$T_OUT" || t_fail "sameenv: $(cat "$T_OUT")"
t_ok "gpum run's environment = the REST setup answers' ($(cat "$T_OUT"))"

# A framework variable the user set wins; gpum's own variables are always the grant's.
t_expect 0 env TF_FORCE_GPU_ALLOW_GROWTH=false GPUM_MEM_LIMIT=1 CUDA_DEVICE_ORDER=FASTEST_FIRST \
  "$G" run --mem 1GiB -- sh -c 'echo "$TF_FORCE_GPU_ALLOW_GROWTH $GPUM_MEM_LIMIT $CUDA_DEVICE_ORDER"'
[ "$(cat "$T_OUT")" = "false 1073741824 PCI_BUS_ID" ] || t_fail "precedence: $(cat "$T_OUT")"
t_ok "the user's framework settings are kept, gpum's are the grant's"

# --type filters by name: no such GPU can ever fit.
t_expect 1 "$G" run --mem 1GiB --type 'A100*' -- true
grep -q "cannot reserve" "$T_ERR" || { cat "$T_ERR" >&2; t_fail "--type A100*: no reason"; }
t_expect 0 "$G" run --mem 1GiB --type 'NVIDIA H100*' -- true
t_ok "--type"

# CMD killed by a signal: 128 + N.
t_expect 137 "$G" run --mem 1GiB -- sh -c 'kill -KILL $$'
t_ok "CMD killed by SIGKILL: exit 137"

# Never fits: 200 GiB on an 80 GB GPU.
t_expect 1 "$G" run --mem 200GiB -- true
grep -q "cannot reserve" "$T_ERR" || { cat "$T_ERR" >&2; t_fail "never-fit: no reason"; }
t_ok "never-fit request rejected: $(head -1 "$T_ERR")"

# Usage errors and CMD problems.
t_expect 2 "$G" run -- true
grep -q -- "--mem SIZE is required" "$T_ERR" || t_fail "missing --mem: $(cat "$T_ERR")"
t_expect 2 "$G" run --mem 8XB -- true
grep -q "invalid value '8XB'" "$T_ERR" || t_fail "bad --mem: $(cat "$T_ERR")"
t_expect 2 "$G" run --mem 1GiB --gpus 0 -- true
t_expect 2 "$G" run --mem 1GiB --priority 101 -- true
t_expect 2 "$G" run --mem 1GiB --timeout soon -- true
t_expect 2 "$G" run --mem 1GiB
grep -q "no command given" "$T_ERR" || t_fail "no command: $(cat "$T_ERR")"
t_expect 2 "$G" run --mem 1GiB --bogus -- true
t_expect 127 "$G" run --mem 1GiB -- /nonexistent/cmd
grep -q "cannot run '/nonexistent/cmd'" "$T_ERR" || t_fail "missing CMD: $(cat "$T_ERR")"
t_expect 0 "$G" run --help
t_ok "usage errors"

# gpum itself works inside a job: the grant's variables are not mistaken for gpum's options
# (GPUM_DEVICES is the devices option; the job's devices are GPUM_RESERVATION_DEVICES).
t_expect 0 "$G" run --mem 1GiB -q -- "$G" status --json
t_pyjson "$T_OUT" 'sys.exit(0 if d["device_count"] >= 1 else 1)' || t_fail "gpum status inside a job"
t_ok "gpum status runs inside gpum run's job"

t_expect 0 "$G" jobs --all --json
t_pyjson "$T_OUT" 'sys.exit(0 if d["reservations"] == [] else 1)' || t_fail "reservations left"

# No daemon: a clear message naming the socket.
GPUM_SOCKET="$T_SCRATCH/none.sock" t_expect 1 "$G" run --mem 1GiB -- true
grep -q "cannot connect to gpumd at $T_SCRATCH/none.sock" "$T_ERR" &&
  grep -q "is gpumd running?" "$T_ERR" || t_fail "no-daemon message: $(cat "$T_ERR")"
t_ok "no daemon: $(cat "$T_ERR")"
