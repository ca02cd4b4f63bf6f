#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The cluster's GPU nodes from Slurm (docs/slurm.md, "The cluster's GPU nodes"). Without Slurm:
# gpumd with no slurm.conf lists nothing and says why; with a slurm.conf whose controller is not
# there, or one that libslurm cannot parse (libslurm ends the process that reads it), gpumd
# warns and serves on; `gpum slurm nodes` says Slurm is not available. In a loopback cluster
# whose node has typed GPUs (2 a100_80gb, 1 tesla_v100): `gpum slurm nodes` and gpumd's cache
# (its debug line on each change) show the gres counts, a job's GPU as used and the node mixed,
# and the GPU free again after scancel; with libslurm.so.38 hidden (a mount namespace), both say
# Slurm is not available and gpumd serves on.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/http_lib.sh"
G=$GPUM_BIN
S=$T_SCRATCH

cat >"$S/node.yaml" <<'Y'
name: nodes1
devices:
  - count: 1
    name: "NVIDIA L40S"
    memory: 48GiB
Y
t_sim_start "$S/node.yaml"
export GPUM_LOG_LEVEL=debug GPUM_CLUSTER_SLURM_REFRESH=1s

# log_has TEXT: gpumd's log has a line with TEXT.
log_has() { grep -qF -- "$1" "$GD_ERR"; }
# gave_up: gpumd's cluster thread failed to read Slurm, or found no libslurm (a machine without
# Slurm's packages), and said so.
gave_up() {
  log_has "cannot read the cluster's nodes from Slurm" ||
    log_has "the cluster's nodes are not listed: Slurm not available"
}
# serves: gpumd answers on its socket.
serves() { "$G" jobs --all >/dev/null; }

# --- Without Slurm ---------------------------------------------------------------------------
export SLURM_CONF=$S/none/slurm.conf
t_expect 1 "$G" slurm nodes
grep -q '^gpum slurm nodes: Slurm not available: no slurm.conf' "$T_ERR" || t_fail "$(cat "$T_ERR")"
gd_start
log_has "the cluster's nodes are not listed: no slurm.conf" || t_fail "no reason logged: $(cat "$GD_ERR")"
serves || t_fail "gpumd does not serve"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
t_ok "no slurm.conf: nothing listed, the reason logged, gpumd serves"

# A controller that is not there: a port nobody listens on.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$S/away"
printf 'ClusterName=away\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=%s\nAuthType=auth/none\nCredType=cred/none\nNodeName=n1 Gres=gpu:1\nPartitionName=p Nodes=n1\n' \
  "$port" >"$S/away/slurm.conf"
export SLURM_CONF=$S/away/slurm.conf
: >"$GD_ERR"
gd_start
t_until 30 gave_up || t_fail "no warning: $(cat "$GD_ERR")"
serves || t_fail "gpumd does not serve while Slurm is away"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
t_ok "a controller that is not there: warned ($(grep -Eo '(from Slurm|not listed): [^"]*' "$GD_ERR" | head -n 1)), gpumd serves"

# A slurm.conf libslurm cannot parse: it ends the query's process, not gpumd.
echo 'Bogus line here' >"$S/away/slurm.conf"
: >"$GD_ERR"
gd_start
t_until 30 gave_up || t_fail "no warning: $(cat "$GD_ERR")"
kill -0 "$GD_PID" || t_fail "gpumd ended with the query"
serves || t_fail "gpumd does not serve after a broken slurm.conf"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
t_ok "a broken slurm.conf: warned ($(grep -Eo '(from Slurm|not listed): [^"]*' "$GD_ERR" | head -n 1)), gpumd serves"

# --- A loopback cluster ----------------------------------------------------------------------
source "$GPUM_SOURCE_DIR/tests/integration/slurm_lib.sh"
s_require
s_dir
D=$S_DIR/c
cat >"$S/gres.conf" <<EOF
AutoDetect=off
Name=gpu Type=a100_80gb File=$D/dev/nvidia0
Name=gpu Type=a100_80gb File=$D/dev/nvidia1
Name=gpu Type=tesla_v100 File=$D/dev/nvidia2
EOF
printf 'GresTypes=gpu\nNodeName=gnode Gres=gpu:a100_80gb:2,gpu:tesla_v100:1\n' >"$S/slurm.lines"
s_start "$S/gres.conf" "$S/slurm.lines"
cd "$S"

# nodes_are STATE A100_USED V100_USED: `gpum slurm nodes --json` lists gnode so.
nodes_are() {
  "$G" slurm nodes --json >"$S/nodes.json" && t_pyjson "$S/nodes.json" '
n = [x for x in d["nodes"] if x["name"] == "gnode"]
assert len(n) == 1, d
n = n[0]
want = [{"type": "a100_80gb", "total": 2, "used": int(args[1])},
        {"type": "tesla_v100", "total": 1, "used": int(args[2])}]
assert n["state"] == args[0] and n["usable"] and n["gpus"] == want, n' "$@"
}
nodes_are idle 0 0 || t_fail "gpum slurm nodes: $(cat "$S/nodes.json")"
t_expect 0 "$G" slurm nodes
grep -Eq '^gnode +idle +a100_80gb +2 +0 +2$' "$T_OUT" || t_fail "table: $(cat "$T_OUT")"
t_ok "gpum slurm nodes: gnode idle with 2 a100_80gb and 1 tesla_v100, none used"

: >"$GD_ERR"
gd_start
t_until 20 log_has "Slurm's GPU nodes: gnode a100_80gb 0/2 used, tesla_v100 0/1 used, idle" ||
  t_fail "gpumd's cache: $(grep cluster "$GD_ERR")"
log_has "1 GPU node from Slurm" || t_fail "no count logged: $(grep cluster "$GD_ERR")"
t_ok "gpumd's cache lists gnode with its gres counts"

job=$(sbatch --parsable -o /dev/null --gres=gpu:a100_80gb:1 --wrap 'sleep 300')
t_until 30 log_has "Slurm's GPU nodes: gnode a100_80gb 1/2 used, tesla_v100 0/1 used, mixed" ||
  t_fail "the job's GPU is not used in gpumd's cache: $(grep cluster "$GD_ERR"; squeue)"
nodes_are mixed 1 0 || t_fail "gpum slurm nodes with a job: $(cat "$S/nodes.json")"
t_ok "job $job's a100_80gb is used in gpumd's cache and gpum slurm nodes, the node mixed"

# REST's nodes: this node's L40S first, then gnode from Slurm, filtered by type as the seed does.
hp '
n = expect("GET", "/api/v1/gpu/nodes", 200)["nodes"]
assert n[0]["gpu_type"] == "L40S" and "devices" in n[0], n
g = [x for x in n if x.get("source") == "slurm" and x["node_name"] == "gnode"]
assert {x["gpu_type"] for x in g} == {"a100_80gb", "tesla_v100"}, n
a = [x for x in g if x["gpu_type"] == "a100_80gb"][0]
assert a["gpus_total"] == 2 and a["gpus_used"] == 1 and a["available_gpus"] == 1, a
assert a["memory_per_gpu"] == 80 and a["utilization"] is None and a["state"] == "mixed", a
f = expect("GET", "/api/v1/gpu/nodes?gpu_type=A100", 200)["nodes"]
assert [x["gpu_type"] for x in f] == ["a100_80gb"], f  # no local A100: only the cluster entry
st = expect("GET", "/api/v1/gpu/status", 200)
assert st["total_nodes"] == 2, st["total_nodes"]  # this node and gnode
an = [(x["node_name"], x["gpu_type"]) for x in st["available_nodes"]]
assert ("gnode", "a100_80gb") in an and ("gnode", "tesla_v100") in an, an
' || t_fail "REST nodes with the cluster"
t_ok "GET /api/v1/gpu/nodes lists this node, then gnode's A100s and V100 from Slurm; gpu_type=A100 only gnode's"

: >"$GD_ERR"
scancel "$job"
t_until 30 log_has "Slurm's GPU nodes: gnode a100_80gb 0/2 used, tesla_v100 0/1 used, idle" ||
  t_fail "the GPU is not free again: $(grep cluster "$GD_ERR"; squeue)"
t_ok "after scancel the GPU is free again in gpumd's cache"
serves || t_fail "gpumd does not serve"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"

# --- The same with libslurm.so.38 hidden ------------------------------------------------------
LIB=$(ldconfig -p | awk '$1 == "libslurm.so.38" && !f {print $NF; f = 1}')
if [ -z "$LIB" ] || ! unshare -m true 2>/dev/null; then
  t_ok "skipped: libslurm.so.38 cannot be hidden here (no ldconfig entry or no mount namespace)"
  exit 0
fi
# hidden CMD...: CMD in a mount namespace where libslurm.so.38 is an empty file.
hidden() { unshare -m bash -c 'mount --bind /dev/null "$0" && exec "$@"' "$LIB" "$@"; }
t_expect 1 hidden "$G" slurm nodes
grep -q '^gpum slurm nodes: Slurm not available: libslurm.so.38' "$T_ERR" || t_fail "$(cat "$T_ERR")"
GPUMD_REAL=$GPUMD
printf '#!/usr/bin/env bash\nexec unshare -m bash -c '\''mount --bind /dev/null "$0" && exec "$@"'\'' %q %q "$@"\n' \
  "$LIB" "$GPUMD_REAL" >"$S/gpumd-hidden"
chmod +x "$S/gpumd-hidden"
GPUMD=$S/gpumd-hidden
: >"$GD_ERR"
gd_start
t_until 20 log_has "the cluster's nodes are not listed: Slurm not available: libslurm.so.38" ||
  t_fail "no reason logged: $(cat "$GD_ERR")"
serves || t_fail "gpumd does not serve without libslurm"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
GPUMD=$GPUMD_REAL
t_ok "libslurm.so.38 hidden: gpum slurm nodes and gpumd say Slurm is not available, gpumd serves"
