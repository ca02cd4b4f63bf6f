#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum run on a simulated 2xH100 node gives a job of several GPUs what torchrun and
# torch.distributed need (libgpum's gpum_distributed_env, the table of gpumd's setup-pytorch
# answer): --gpus 2 sets WORLD_SIZE=2, LOCAL_WORLD_SIZE, PET_NPROC_PER_NODE, PET_NNODES=1,
# MASTER_ADDR, MASTER_PORT=29500 and TORCH_NCCL_ASYNC_ERROR_HANDLING; --gpus 1 sets none of them
# unless --distributed; --no-distributed and --master-port; a value the user set wins; and the
# variables equal those gpumd's setup-pytorch answers for the same reservation.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
G="$GPUM_BIN"
DIST="WORLD_SIZE LOCAL_WORLD_SIZE PET_NPROC_PER_NODE PET_NNODES MASTER_ADDR MASTER_PORT
TORCH_NCCL_ASYNC_ERROR_HANDLING"
# Runs gpum run ARGS -- env, in an environment without the distributed variables, and leaves
# the lines of CMD's environment that name one of them in $T_OUT (sorted).
dist_env() {
  local unset=() v
  for v in $DIST; do unset+=(-u "$v"); done
  env "${unset[@]}" "$@" >"$T_SCRATCH/env.out" 2>"$T_ERR" ||
    { cat "$T_ERR" >&2; t_fail "$*: exit status $?"; }
  grep -E "^($(echo $DIST | tr ' ' '|'))=" "$T_SCRATCH/env.out" | sort >"$T_OUT" || true
}

WANT2="LOCAL_WORLD_SIZE=2
MASTER_ADDR=127.0.0.1
MASTER_PORT=29500
PET_NNODES=1
PET_NPROC_PER_NODE=2
TORCH_NCCL_ASYNC_ERROR_HANDLING=1
WORLD_SIZE=2"

dist_env "$G" run --mem 1GiB --gpus 2 -- env
[ "$(cat "$T_OUT")" = "$WANT2" ] || { cat "$T_OUT" >&2; t_fail "--gpus 2: the distributed variables"; }
t_ok "--gpus 2: WORLD_SIZE=2, PET_NPROC_PER_NODE=2, MASTER_ADDR=127.0.0.1, MASTER_PORT=29500, ..."

dist_env "$G" run --mem 1GiB --gpus 1 -- env
[ ! -s "$T_OUT" ] || { cat "$T_OUT" >&2; t_fail "--gpus 1 sets distributed variables"; }
dist_env "$G" run --mem 1GiB --gpus 2 --no-distributed -- env
[ ! -s "$T_OUT" ] || { cat "$T_OUT" >&2; t_fail "--no-distributed sets distributed variables"; }
t_ok "--gpus 1 and --no-distributed: none of them"

dist_env "$G" run --mem 1GiB --distributed --master-port 29611 -- env
grep -qx "WORLD_SIZE=1" "$T_OUT" && grep -qx "MASTER_PORT=29611" "$T_OUT" &&
  [ "$(wc -l <"$T_OUT")" -eq 7 ] || { cat "$T_OUT" >&2; t_fail "--distributed --master-port"; }
t_ok "--gpus 1 --distributed --master-port 29611: WORLD_SIZE=1, MASTER_PORT=29611"

dist_env env MASTER_PORT=31000 WORLD_SIZE=2 "$G" run --mem 1GiB --gpus 2 --master-port 29612 -- env
grep -qx "MASTER_PORT=31000" "$T_OUT" && grep -qx "MASTER_ADDR=127.0.0.1" "$T_OUT" ||
  { cat "$T_OUT" >&2; t_fail "a MASTER_PORT the user set does not win"; }
t_ok "a MASTER_PORT the user set wins over gpum run's (and --master-port)"

for bad in 0 65536 x ""; do
  t_expect 2 "$G" run --mem 1GiB --master-port "$bad" -- true
  grep -q -- "--master-port needs a port" "$T_ERR" || t_fail "--master-port '$bad': $(cat "$T_ERR")"
done
t_ok "--master-port outside 1-65535 is a usage error"

# The same variables as gpumd's setup-pytorch answer for the job's own reservation.
cat >"$T_SCRATCH/same.py" <<'PY'
import os, sys
from gpumd_http import expect
env = expect("POST", "/api/v1/gpu/setup-pytorch", 200,
             body={"reservation": os.environ["GPUM_RESERVATION_ID"]})["env"]
names = ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "PET_NPROC_PER_NODE", "PET_NNODES", "MASTER_ADDR",
         "MASTER_PORT", "TORCH_NCCL_ASYNC_ERROR_HANDLING")
for k in names:
    if env.get(k) != os.environ.get(k):
        sys.exit("%s=%r under gpum run, %r in the REST answer" % (k, os.environ.get(k), env.get(k)))
print("same", len(names))
PY
dist_env "$G" run --mem 1GiB --gpus 2 -- python3 "$T_SCRATCH/same.py"
grep -q '^same 7$' "$T_SCRATCH/env.out" || t_fail "same: $(cat "$T_SCRATCH/env.out")"
t_ok "gpum run's distributed variables = gpumd's setup-pytorch answer's"

t_expect 0 "$G" jobs --all --json
t_pyjson "$T_OUT" 'sys.exit(0 if d["reservations"] == [] else 1)' || t_fail "reservations left"
