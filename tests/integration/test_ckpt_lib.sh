#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# libgpum's gpum/checkpoint.h (docs/checkpoint.md) on a simulated node: a controller suspends a
# live CUDA process through the library (lock, checkpoint, restore onto the other GPU by UUID
# strings, unlock; the pattern intact), a lock that times out, illegal steps whose message names
# the state (tests/integration/progs/ckpt_lib.c); and a driver without the checkpoint calls
# refused at open with the version needed.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
t_expect 0 "$GPUM_TEST_PROGS/ckpt_lib"
cat "$T_OUT"

# An old driver: one that loads and initialises but has no cuCheckpointProcess* symbol.
old="$GPUM_TEST_PROGS/cuda_no_ckpt.so"
[[ -f $old ]] || t_fail "$old is missing (tests/integration/preload/cuda_no_ckpt.c)"
GPUM_CUDA_LIBRARY="$old" t_expect 0 "$GPUM_TEST_PROGS/ckpt_lib" --old
cat "$T_OUT"
t_ok "gpum_ckpt: suspend and resume onto the other GPU, lock timeout, states named, old driver"
