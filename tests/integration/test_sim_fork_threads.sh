#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The simulated driver in children forked without exec while threads of the parent use it
# (tests/integration/progs/sim_fork.c): no child hangs on a lock a parent thread held at the
# fork; a child of a process that had called cuInit gets CUDA_ERROR_NOT_INITIALIZED from
# every CUDA call, as from NVIDIA's driver, and NVML stays usable; a child forked before cuInit
# uses CUDA normally.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
t_expect 0 "$GPUM_TEST_PROGS/sim_fork" 300 8
cat "$T_OUT"
t_ok "300 children forked while 8 threads use the driver: none hung, each told CUDA_ERROR_NOT_INITIALIZED"
