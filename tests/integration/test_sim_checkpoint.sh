#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The simulated driver's CUDA checkpoint API (tests/integration/progs/sim_ckpt.c, docs/sim.md
# "Checkpoint and restore"): a controller locks, checkpoints, restores onto the other GPU and
# unlocks a target process that keeps calling CUDA; the states, the error codes, the lock's
# timeout, a restore without room and the injected checkpoint and restore faults.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
t_expect 0 "$GPUM_TEST_PROGS/sim_ckpt"
cat "$T_OUT"

# The restore fault through the CLI, on a fresh node: the flag reaches the driver.
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml" "${T_NODE}b"
t_expect 0 "$GPUM_BIN" sim inject "${T_NODE}b" --device 0 --restore-fail 1
t_expect 0 "$GPUM_TEST_PROGS/sim_ckpt" --restore-fault-injected
t_ok "lock, checkpoint, remapped restore and unlock of a live CUDA process; errors and faults"
