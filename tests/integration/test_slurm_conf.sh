#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum slurm conf: the gres.conf and slurm.conf lines from the simulated node's GPUs (types,
# device files, one shard per unit of what gpumd may grant, per GPU, in gpumd's order), the
# options and their errors; and a loopback slurmd (scripts/slurm-test-cluster.sh) accepts the
# lines: the node comes up idle with those gres counts.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
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
Name=gpu Type=t4 File=/dev/nvidia0
Name=gpu Type=t4 File=/dev/nvidia1
Name=gpu Type=v100_32gb File=/dev/nvidia2
Name=gpu Type=v100_32gb File=/dev/nvidia3
Name=shard Count=14 File=/dev/nvidia0
Name=shard Count=14 File=/dev/nvidia1
Name=shard Count=30 File=/dev/nvidia2
Name=shard Count=30 File=/dev/nvidia3

GresTypes=gpu,shard
SelectType=select/cons_tres
NodeName=n1 Gres=gpu:t4:2,gpu:v100_32gb:2,shard:88
W
grep -v '^#' "$T_OUT" | diff "$T_SCRATCH/want" - || t_fail "gpum slurm conf printed other lines"
t_ok "gres.conf and slurm.conf lines for a mixed node"

# With slurmd on PATH: slurmd -C's NodeName line (its hardware), renamed, with the Gres=.
if command -v slurmd >/dev/null; then
  hw=$(timeout 5 slurmd -C | sed -n 's/^NodeName=[^ ]* \(.*\)/\1/p')
  [ -n "$hw" ] || t_fail "slurmd -C printed no NodeName line"
  t_expect 0 "$G" slurm conf --node n1 --slurm
  grep -qx "NodeName=n1 $hw Gres=gpu:t4:2,gpu:v100_32gb:2,shard:88" "$T_OUT" || { cat "$T_OUT"; t_fail "not slurmd -C's line with the Gres="; }
  grep -q 'merge\|add its Gres' "$T_OUT" && t_fail "a comment to merge a complete line"
  # A slurmd that prints nothing usable: the line to merge, as without slurmd.
  mkdir -p "$T_SCRATCH/bin"
  printf '#!/bin/sh\necho UpTime=0-01:00:00\n' >"$T_SCRATCH/bin/slurmd"
  chmod +x "$T_SCRATCH/bin/slurmd"
  t_expect 0 env PATH="$T_SCRATCH/bin:$PATH" "$G" slurm conf --node n1 --slurm
  grep -qx 'NodeName=n1 Gres=gpu:t4:2,gpu:v100_32gb:2,shard:88' "$T_OUT" || { cat "$T_OUT"; t_fail "a useless slurmd -C: not the line to merge"; }
  t_ok "slurmd -C's hardware on the NodeName line: $hw"
fi

t_expect 0 "$G" slurm conf --node n1 --shard-unit 2GiB --dev-dir /x/dev/ --gres
grep -qx 'Name=shard Count=15 File=/x/dev/nvidia2' "$T_OUT" || { cat "$T_OUT"; t_fail "--shard-unit 2GiB / --dev-dir"; }
grep -q 'GresTypes' "$T_OUT" && t_fail "--gres printed slurm.conf lines"
t_expect 0 env GPUM_MEMORY_FRACTION=0.5 GPUM_SAFETY_MARGIN=0 $NOSLURMD "$G" slurm conf --node n1 --slurm
grep -qx 'NodeName=n1 Gres=gpu:t4:2,gpu:v100_32gb:2,shard:46' "$T_OUT" || { cat "$T_OUT"; t_fail "memory_fraction / safety_margin not in the shard counts"; }
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

# --install DIR: gres.conf written (an old one with other lines kept), the plugin line added
# once, slurm.conf never touched, each file said; bad uses refused.
E=$T_SCRATCH/etc
mkdir -p "$E"
printf 'Name=gpu File=/dev/old\n' >"$E/gres.conf"
printf '# site plugins\noptional /x/other.so' >"$E/plugstack.conf" # no final newline
printf 'ClusterName=site\n' >"$E/slurm.conf"
t_expect 0 $NOSLURMD "$G" slurm conf --node n1 --install "$E"
grep -qx "$E/gres.conf: written (the one it replaces is $E/gres.conf.old)" "$T_OUT" || { cat "$T_OUT"; t_fail "--install: no word on gres.conf"; }
grep -qx "$E/plugstack.conf: added 'required $(grep -o '/[^ ]*gpum_spank.so' <<<"$("$G" slurm conf --help)")'" "$T_OUT" || { cat "$T_OUT"; t_fail "--install: no word on plugstack.conf"; }
grep -qx 'slurm.conf: not changed; add these lines to it .*' "$T_OUT" || t_fail "--install: no word on slurm.conf"
grep -qx 'NodeName=n1 Gres=gpu:t4:2,gpu:v100_32gb:2,shard:88' "$T_OUT" || t_fail "--install: no slurm.conf lines"
grep -qx 'Name=gpu File=/dev/old' "$E/gres.conf.old" || t_fail "the old gres.conf is not kept"
grep -v '^#' "$E/gres.conf" | head -n 9 | diff <(head -n 9 "$T_SCRATCH/want") - || t_fail "--install wrote other gres.conf lines"
[ "$(cat "$E/plugstack.conf")" = "$(printf '# site plugins\noptional /x/other.so\nrequired %s' "$("$G" slurm conf --help | grep -o '/[^ ]*gpum_spank.so')")" ] || { cat "$E/plugstack.conf"; t_fail "plugstack.conf: not the old lines and the plugin's"; }
[ "$(cat "$E/slurm.conf")" = "ClusterName=site" ] || t_fail "--install changed slurm.conf"
cp "$E/plugstack.conf" "$T_SCRATCH/plugstack.before"
t_expect 0 $NOSLURMD "$G" slurm conf --node n1 --install "$E/" --plugin "/opt/gpum_spank.so wait=9s"
grep -qx "$E/gres.conf: unchanged (it holds these lines already)" "$T_OUT" || { cat "$T_OUT"; t_fail "a second --install: gres.conf"; }
grep -qx "$E/plugstack.conf: unchanged (it names gpum_spank.so already)" "$T_OUT" || { cat "$T_OUT"; t_fail "a second --install: plugstack.conf"; }
cmp -s "$E/plugstack.conf" "$T_SCRATCH/plugstack.before" || t_fail "a second --install changed plugstack.conf"
rm "$E/plugstack.conf"
t_expect 0 "$G" slurm conf --node n1 --install "$E" --plugin "/opt/gpum_spank.so wait=9s"
[ "$(cat "$E/plugstack.conf")" = "required /opt/gpum_spank.so wait=9s" ] || t_fail "--plugin: plugstack.conf"
t_expect 1 "$G" slurm conf --install "$E/none"
grep -q "is not a directory" "$T_ERR" || { cat "$T_ERR"; t_fail "--install into nothing: no reason"; }
for bad in "--install $E --gres" "--install $E --slurm" "--plugin /x/gpum_spank.so" "--install $E --plugin /x/other.so"; do
  # shellcheck disable=SC2086
  t_expect 2 "$G" slurm conf $bad
  grep -q 'gpum slurm conf: --' "$T_ERR" || t_fail "no reason for '$bad'"
done
t_ok "--install: gres.conf written, the plugin line added once, slurm.conf untouched, each said"

# The set-up of docs/slurm.md against the loopback cluster's own configuration directory:
# `gpum slurm conf --install` writes gres.conf and plugstack.conf there, its slurm.conf lines
# (slurmd -C's NodeName line with the Gres=) go into the cluster's slurm.conf; slurmd accepts
# them, the node is idle with the gres counts, and the plugin's --gpu-mem works in a step.
s_require
PLUGIN=$GPUM_BUILD_DIR/lib/gpum_spank.so
s_dir
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml" "${T_NODE}h"
C=$S_DIR/c/etc
mkdir -p "$C"
plugin_opt=()
[ -f "$PLUGIN" ] && plugin_opt=(--plugin "$PLUGIN wait=5s")
t_expect 0 "$G" slurm conf --node gnode --dev-dir "$S_DIR/c/dev" --install "$C" "${plugin_opt[@]}"
sed '1,/^slurm.conf: not changed/d' "$T_OUT" >"$T_SCRATCH/slurm.lines"
grep -q "^NodeName=gnode CPUs=[0-9]* .*RealMemory=[0-9]* Gres=" "$T_SCRATCH/slurm.lines" || { cat "$T_OUT"; t_fail "the set-up printed no complete NodeName line"; }
[ -f "$PLUGIN" ] || : >"$C/plugstack.conf" # no plugin built: the gres only
gd_start # slurmd and its steps inherit its GPUM_SOCKET, where the plugin finds it
s_start "$C/gres.conf" "$T_SCRATCH/slurm.lines" "$C/plugstack.conf"
sinfo -h -N -n gnode -o '%t %G' >"$T_OUT"
shards=$(sed -n 's/^NodeName=gnode .*Gres=.*shard:\([0-9]*\)$/\1/p' "$T_SCRATCH/slurm.lines")
[ "$shards" -gt 100 ] || t_fail "few shards: $shards"
grep -qx "idle gpu:h100_80gb:2,shard:h100_80gb:$shards" "$T_OUT" || { cat "$T_OUT" "$C"/*.conf; t_fail "slurmd's node is not idle with the gres of gpum slurm conf"; }
t_ok "slurmd accepts the set-up's files and lines: $(cat "$T_OUT")"
if [ ! -f "$PLUGIN" ]; then
  echo "skip: $PLUGIN was not built (libslurm-dev's slurm/spank.h was not found): no --gpu-mem step"
  exit 0
fi
timeout 60 srun --gres=shard:20 --gpu-mem=20GiB --gpu-mem-enforce "$GPUM_TEST_PROGS/enforce_probe" info >"$T_SCRATCH/info" 2>"$T_SCRATCH/srun.err" || { cat "$T_SCRATCH/srun.err"; t_fail "srun --gpu-mem failed"; }
t_pyjson "$T_SCRATCH/info" 'assert d["cu_total"] == 20 << 30, d' || t_fail "the step does not see 20 GiB: the plugin line was not taken"
t_ok "an srun --gpu-mem step sees 20 GiB: the plugin line --install added was taken"
