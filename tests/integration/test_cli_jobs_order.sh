#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum jobs lists granted reservations by id number (r-2 before r-10), not as text.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
gd_py '
c = Client()
for i in range(11):
    c.ok("reserve", bytes_per_gpu="1MiB", lease="ttl", ttl_ms=600000)
' || t_fail "reserve"
t_expect 0 "$GPUM_BIN" jobs
got=$(awk 'NR > 1 {print $1}' "$T_OUT" | tr '\n' ' ')
[ "$got" = "r-1 r-2 r-3 r-4 r-5 r-6 r-7 r-8 r-9 r-10 r-11 " ] || t_fail "order: $got"
t_ok "ids in number order: $got"
