#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum slurm conf: the gres.conf and slurm.conf lines from the simulated node's GPUs (types,
# device files, one shard per unit of what gpumd may grant, per GPU, in gpumd's order), the
# options and their errors; and a loopback slurmd (scripts/slurm-test-cluster.sh) accepts the
# lines: the node comes up idle with those gres counts.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/slurm_lib.sh"
G=$GPUM_BIN

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/mixed-t4-v100.yaml"
# What gpumd may grant: total x 0.95 - 256 MiB (the defaults): 15 GiB T4s give 14 shards,
# 32 GiB V100s 30.
# Without slurmd on PATH: the NodeName line has only the Gres=, under a comment to merge it.
NOSLURMD="env PATH=/usr/bin:/bin"
t_expect 0 $NOSLURMD "$G" slurm conf --node n1
grep -qx "# slurm.conf lines for node n1 (gpum slurm conf): add its Gres= to the node's NodeName line" "$T_OUT" || { cat "$T_OUT"; t_fail "no comment saying to merge the Gres="; }
cat >"$T_SCRATCH/want" <<'W'
AutoDetect=off
Name=gpu Type=tesla_t4 File=/dev/nvidia0
Name=gpu Type=tesla_t4 File=/dev/nvidia1
Name=gpu Type=tesla_v100-sxm2-32gb File=/dev/nvidia2
Name=gpu Type=tesla_v100-sxm2-32gb File=/dev/nvidia3
Name=shard Count=14 File=/dev/nvidia0
Name=shard Count=14 File=/dev/nvidia1
Name=shard Count=30 File=/dev/nvidia2
Name=shard Count=30 File=/dev/nvidia3

GresTypes=gpu,shard
SelectType=select/cons_tres
NodeName=n1 Gres=gpu:tesla_t4:2,gpu:tesla_v100-sxm2-32gb:2,shard:88
W
grep -v '^#' "$T_OUT" | diff "$T_SCRATCH/want" - || t_fail "gpum slurm conf printed other lines"
t_ok "gres.conf and slurm.conf lines for a mixed node"

# With slurmd on PATH: slurmd -C's NodeName line (its hardware), renamed, with the Gres=.
if command -v slurmd >/dev/null; then
  hw=$(timeout 5 slurmd -C | sed -n 's/^NodeName=[^ ]* \(.*\)/\1/p')
  [ -n "$hw" ] || t_fail "slurmd -C printed no NodeName line"
  t_expect 0 "$G" slurm conf --node n1 --slurm
  grep -qx "NodeName=n1 $hw Gres=gpu:tesla_t4:2,gpu:tesla_v100-sxm2-32gb:2,shard:88" "$T_OUT" || { cat "$T_OUT"; t_fail "not slurmd -C's line with the Gres="; }
  grep -q 'merge\|add its Gres' "$T_OUT" && t_fail "a comment to merge a complete line"
  # A slurmd that prints nothing usable: the line to merge, as without slurmd.
  mkdir -p "$T_SCRATCH/bin"
  printf '#!/bin/sh\necho UpTime=0-01:00:00\n' >"$T_SCRATCH/bin/slurmd"
  chmod +x "$T_SCRATCH/bin/slurmd"
  t_expect 0 env PATH="$T_SCRATCH/bin:$PATH" "$G" slurm conf --node n1 --slurm
  grep -qx 'NodeName=n1 Gres=gpu:tesla_t4:2,gpu:tesla_v100-sxm2-32gb:2,shard:88' "$T_OUT" || { cat "$T_OUT"; t_fail "a useless slurmd -C: not the line to merge"; }
  t_ok "slurmd -C's hardware on the NodeName line: $hw"
fi

t_expect 0 "$G" slurm conf --node n1 --shard-unit 2GiB --dev-dir /x/dev/ --gres
grep -qx 'Name=shard Count=15 File=/x/dev/nvidia2' "$T_OUT" || { cat "$T_OUT"; t_fail "--shard-unit 2GiB / --dev-dir"; }
grep -q 'GresTypes' "$T_OUT" && t_fail "--gres printed slurm.conf lines"
t_expect 0 env GPUM_MEMORY_FRACTION=0.5 GPUM_SAFETY_MARGIN=0 $NOSLURMD "$G" slurm conf --node n1 --slurm
grep -qx 'NodeName=n1 Gres=gpu:tesla_t4:2,gpu:tesla_v100-sxm2-32gb:2,shard:46' "$T_OUT" || { cat "$T_OUT"; t_fail "memory_fraction / safety_margin not in the shard counts"; }
grep -q 'Name=gpu' "$T_OUT" && t_fail "--slurm printed gres.conf lines"
t_expect 0 "$G" slurm conf --slurm
grep -qx "NodeName=$(hostname -s) .*Gres=.*" "$T_OUT" || { cat "$T_OUT"; t_fail "the default node name is not the host's"; }
t_ok "--shard-unit, --dev-dir, --gres, --slurm, gpumd's admission options, the host's name"

for bad in "--shard-unit 5" "--shard-unit lots" "--node a=b" "--dev-dir dev" "--gres --slurm" "--bogus"; do
  # shellcheck disable=SC2086
  t_expect 2 "$G" slurm conf $bad
  grep -q 'gpum slurm' "$T_ERR" || t_fail "no reason for '$bad'"
done
t_expect 2 "$G" slurm
t_expect 2 "$G" slurm bogus
t_expect 0 "$G" slurm conf --help
grep -q 'shard-unit' "$T_OUT" || t_fail "no --help"
t_expect 1 "$G" --backend host slurm conf
grep -q 'no GPU on this node' "$T_ERR" || { cat "$T_ERR"; t_fail "the host backend: no reason"; }
t_ok "bad options exit 2 with the reason; a node without GPUs exits 1"

# slurmd accepts the lines: the node is idle with 2 GPUs and the shards (fake device files).
s_require
s_dir
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml" "${T_NODE}h"
"$G" slurm conf --node gnode --dev-dir "$S_DIR/c/dev" --gres >"$T_SCRATCH/gres.conf"
"$G" slurm conf --node gnode --slurm >"$T_SCRATCH/slurm.lines"
s_start "$T_SCRATCH/gres.conf" "$T_SCRATCH/slurm.lines"
sinfo -h -N -n gnode -o '%t %G' >"$T_OUT"
shards=$(sed -n 's/^NodeName=gnode .*Gres=.*shard:\([0-9]*\)$/\1/p' "$T_SCRATCH/slurm.lines")
[ "$shards" -gt 100 ] || t_fail "few shards: $shards"
grep -qx "idle gpu:h100_80gb_hbm3:2,shard:h100_80gb_hbm3:$shards" "$T_OUT" || { cat "$T_OUT" "$T_SCRATCH"/*.conf; t_fail "slurmd's node is not idle with the gres of gpum slurm conf"; }
t_ok "slurmd accepts gpum slurm conf's lines: $(cat "$T_OUT")"
