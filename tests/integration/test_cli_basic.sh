#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum's command line without devices: --help and --version, help for every command, exit code
# 2 for unknown commands, unknown options, malformed values and bad configuration, and the
# precedence flag > environment > file of the options table, seen through the CLI.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
unset GPUM_SIM_NODE GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY NO_COLOR
G=$GPUM_BIN
out=$T_OUT err=$T_ERR

# t_expect CODE CMD...: runs CMD with stdout in $out and stderr in $err, checks its exit code.

# --version and --help
t_expect 0 "$G" --version
grep -Eq '^gpum [0-9]+\.[0-9]+\.[0-9]+$' "$out" || t_fail "--version printed: $(cat "$out")"
t_expect 0 "$G" --help
for word in status doctor sim --backend --devices --color --config GPUM_BACKEND 'help options'; do
  grep -q -- "$word" "$out" || t_fail "gpum --help does not mention $word"
done
t_expect 0 "$G" help options # every option of the table, gpumd's too
for word in --nvml-library --backend GPUM_BACKEND --socket-group; do
  grep -q -- "$word" "$out" || t_fail "gpum help options does not mention $word"
done
t_expect 0 "$G" -h
grep -q 'usage: gpum' "$out" || t_fail "-h prints no usage"
t_ok "--version and --help"

for cmd in status doctor sim; do
  t_expect 0 "$G" "$cmd" --help
  grep -q "usage: gpum $cmd" "$out" || t_fail "gpum $cmd --help: $(head -3 "$out")"
  t_expect 0 "$G" help "$cmd"
  grep -q "usage: gpum $cmd" "$out" || t_fail "gpum help $cmd: $(head -3 "$out")"
done
t_expect 0 "$G" status --help
for word in --json --watch --devices --no-color; do
  grep -q -- "$word" "$out" || t_fail "gpum status --help does not mention $word"
done
t_ok "help for every command"

# Usage errors exit 2 with a message naming the culprit.
t_expect 2 "$G"
t_expect 2 "$G" frobnicate
grep -q "unknown command 'frobnicate'" "$err" || t_fail "unknown command message: $(cat "$err")"
grep -q 'usage: gpum' "$err" || t_fail "unknown command prints no usage"
t_expect 2 "$G" help frobnicate
t_expect 2 "$G" --frobnicate status
grep -q "frobnicate" "$err" || t_fail "unknown global option not named: $(cat "$err")"
t_expect 2 "$G" status --frobnicate
grep -q "unknown option '--frobnicate'" "$err" || t_fail "status option message: $(cat "$err")"
t_expect 2 "$G" doctor --frobnicate
t_expect 2 "$G" status extra-argument
t_expect 2 "$G" status --watch 0
t_expect 2 "$G" status --watch=-1
t_expect 2 "$G" status --watch abc
t_ok "unknown commands and options exit 2"

# Malformed device lists are usage errors (2), from a flag or from the environment.
for bad in '0,,2' 'x' '1-' '3-1' '-1' '0;1'; do
  t_expect 2 "$G" status --backend host --devices="$bad"
  grep -q -- "$bad" "$err" || t_fail "--devices '$bad': message does not name it: $(cat "$err")"
done
GPUM_DEVICES=abc t_expect 2 "$G" status --backend host
t_ok "malformed --devices exits 2"

# Bad configuration: exit 2 with the key named.
t_expect 2 "$G" --backend cuda status
grep -q 'backend' "$err" || t_fail "bad --backend: $(cat "$err")"
GPUM_BACKEND=cuda t_expect 2 "$G" status
grep -q 'GPUM_BACKEND\|backend' "$err" || t_fail "bad GPUM_BACKEND: $(cat "$err")"
printf 'backnd: host\n' >"$T_SCRATCH/typo.yaml"
t_expect 2 "$G" --config "$T_SCRATCH/typo.yaml" status
grep -q 'backnd' "$err" || t_fail "unknown key in file not named: $(cat "$err")"
t_expect 2 "$G" --config "$T_SCRATCH/missing.yaml" status
grep -q 'missing.yaml' "$err" || t_fail "missing config not named: $(cat "$err")"
GPUM_CONFIG=$T_SCRATCH/typo.yaml t_expect 2 "$G" status
t_expect 2 "$G" status --config
t_ok "configuration errors exit 2 with the key named"

# Precedence flag > environment > file, with options that change what status does:
# nvml.library pointing nowhere makes backend nvml fail (exit 1), backend host succeeds.
cat >"$T_SCRATCH/cfg.yaml" <<YAML
backend: nvml
nvml:
  library: $T_SCRATCH/no-such-libnvidia-ml.so
YAML
t_expect 1 "$G" --config "$T_SCRATCH/cfg.yaml" status
grep -q 'no-such-libnvidia-ml' "$err" || t_fail "file's nvml.library not used: $(cat "$err")"
GPUM_BACKEND=host t_expect 0 "$G" --config "$T_SCRATCH/cfg.yaml" status
grep -q 'cpu (host)' "$out" || t_fail "env backend=host did not override the file: $(cat "$out")"
GPUM_BACKEND=host t_expect 1 "$G" --config "$T_SCRATCH/cfg.yaml" status --backend nvml
GPUM_BACKEND=nvml t_expect 0 "$G" status --config="$T_SCRATCH/cfg.yaml" --backend=host
GPUM_CONFIG=$T_SCRATCH/cfg.yaml t_expect 1 "$G" status
t_ok "precedence flag > environment > file"

# Option flags work before and after the command name, but not after "--".
t_expect 0 "$G" --backend host status --json
t_expect 0 "$G" status --json --backend host
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["backend"]=="host", d' "$out" ||
  t_fail "status --json --backend host: $(cat "$out")"
t_expect 2 "$G" status --json -- --backend host
t_ok "option flags before and after the command"

# Logging is configured from log.level: debug lines appear on stderr only when asked.
t_expect 0 "$G" status --backend host --log-level off
[ ! -s "$err" ] || t_fail "log.level off still logs: $(cat "$err")"
t_expect 0 "$G" status --log-level debug
grep -q 'level=' "$err" || t_fail "log.level debug logs nothing (the backend choice is logged)"
t_ok "logging follows log.level"
