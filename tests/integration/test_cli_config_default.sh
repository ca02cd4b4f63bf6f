#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum reads the default configuration file ($XDG_CONFIG_HOME/gpum/gpum.yaml for a user) as
# --help and docs/cli.md say, and gpum doctor names the file it read; GPUM_CONFIG replaces
# it; without a file there, doctor says none was read.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"

if [ "$(id -u)" -eq 0 ]; then
  # root's default is /etc/gpum/gpum.yaml, which a test must not write: run as nobody
  command -v runuser >/dev/null || { echo "SKIP: root without runuser"; exit 0; }
  as_user() { runuser -u nobody -- "$@"; }
  chmod 0755 "$T_SCRATCH"
else
  as_user() { "$@"; }
fi
mkdir -p "$T_SCRATCH/xdg/gpum" "$T_SCRATCH/empty"
printf 'status:\n  timeout: 7s\n' >"$T_SCRATCH/xdg/gpum/gpum.yaml"
printf 'status.timeout: 9s\n' >"$T_SCRATCH/other.yaml"
chmod -R a+rX "$T_SCRATCH"
unset GPUM_CONFIG
doctor() { as_user env -u GPUM_CONFIG HOME="$T_SCRATCH" GPUM_BACKEND=host "$@" "$GPUM_BIN" doctor --json; }

doctor XDG_CONFIG_HOME="$T_SCRATCH/xdg" >"$T_OUT" 2>"$T_ERR" || true
t_pyjson "$T_OUT" '
f = [x for x in d["findings"] if x["check"] == "config"][0]
want = args[0] + "/xdg/gpum/gpum.yaml"
assert f["message"].startswith("loaded " + want) and "status.timeout (file)" in f["message"], f
' "$T_SCRATCH" || t_fail "default file: $(cat "$T_OUT" "$T_ERR")"
t_ok "the default file is read and named by doctor"

doctor XDG_CONFIG_HOME="$T_SCRATCH/xdg" GPUM_CONFIG="$T_SCRATCH/other.yaml" >"$T_OUT" 2>"$T_ERR" || true
t_pyjson "$T_OUT" '
f = [x for x in d["findings"] if x["check"] == "config"][0]
assert f["message"].startswith("loaded " + args[0] + "/other.yaml"), f
' "$T_SCRATCH" || t_fail "GPUM_CONFIG: $(cat "$T_OUT" "$T_ERR")"
t_ok "GPUM_CONFIG replaces it"

doctor XDG_CONFIG_HOME="$T_SCRATCH/empty" >"$T_OUT" 2>"$T_ERR" || true
t_pyjson "$T_OUT" '
f = [x for x in d["findings"] if x["check"] == "config"][0]
assert f["message"].startswith("no configuration file"), f
' || t_fail "no file: $(cat "$T_OUT" "$T_ERR")"
t_ok "no file at the default place: none read, and doctor says so"
