# SPDX-License-Identifier: Apache-2.0
# Helpers for the Slurm tests (sourced after lib.sh): a loopback cluster from
# scripts/slurm-test-cluster.sh under its own directory, stopped at exit. The Slurm tests run
# on the normal build only (they run Slurm's daemons, and the gpum code they reach is covered
# by the other tests under the sanitizers), as root, with Debian's Slurm packages.

# s_require: exits 0 with the reason when this test cannot run here.
s_require() {
  local rt c
  rt=$(ldd "$GPUM_BUILD_DIR/lib/libgpum.so" | awk '/lib(asan|tsan)\.so/ {print $3; exit}')
  if [ -n "$rt" ]; then
    echo "skip: a sanitizer build; the Slurm tests run on the normal build only"
    exit 77
  fi
  for c in munged slurmctld slurmd srun sinfo squeue scancel; do
    if ! command -v "$c" >/dev/null; then
      echo "skip: $c is not installed (scripts/deps.sh installs slurmctld slurmd slurm-client munge)"
      exit 77
    fi
  done
  if [ "$(id -u)" -ne 0 ]; then
    echo "skip: the Slurm tests run slurmd, which needs root"
    exit 77
  fi
}

# s_plugin_node NAME: the SPANK plugin built (PLUGIN; else skip, 77) and a simulated node NAME of
# one NVIDIA L40S with 48 GiB started (t_sim_start), as the Slurm tests' cluster uses.
s_plugin_node() {
  PLUGIN=$GPUM_BUILD_DIR/lib/gpum_spank.so
  if [ ! -f "$PLUGIN" ]; then
    echo "skip: $PLUGIN was not built (libslurm-dev's slurm/spank.h was not found)"
    exit 77
  fi
  printf '%s\n' "name: $1" 'driver_version: "550.54.15"' 'cuda_version: "12.4"' 'devices:' \
    '  - count: 1' '    name: "NVIDIA L40S"' '    memory: 48GiB' >"$T_SCRATCH/node.yaml"
  t_sim_start "$T_SCRATCH/node.yaml"
}

S_DIR=""
s_cleanup() {
  local rc=$?
  if [ -n "$S_DIR" ]; then
    "$GPUM_SOURCE_DIR/scripts/slurm-test-cluster.sh" stop "$S_DIR/c" >/dev/null 2>&1 || true
    rm -rf "$S_DIR"
  fi
  set +e # (set -e would end the shell at the subshell's status, before t_cleanup)
  (exit $rc)
  t_cleanup
}
trap s_cleanup EXIT

# s_dir: the cluster's directory (made, reachable by the munge user), in S_DIR.
s_dir() {
  S_DIR=$(mktemp -d /tmp/gpum-slurm.XXXXXX)
  chmod 0755 "$S_DIR"
}

# s_start GRES_CONF SLURM_LINES [PLUGSTACK]: starts the cluster in S_DIR and exports SLURM_CONF.
s_start() {
  [ -n "$S_DIR" ] || s_dir
  "$GPUM_SOURCE_DIR/scripts/slurm-test-cluster.sh" start "$S_DIR/c" "$@" >"$T_SCRATCH/slurm.env" ||
    t_fail "the Slurm cluster did not start"
  export SLURM_CONF=$S_DIR/c/etc/slurm.conf
}
