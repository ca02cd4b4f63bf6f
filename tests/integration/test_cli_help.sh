#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum's help and usage errors, one style for every command: `gpum --help` is short (at most 70
# lines), lists every command and the CLI's own options but none of gpumd's (those are in
# `gpum help options` and `gpumd --help`); every command's and subcommand's --help exits 0 with
# a usage line, a summary, its options (-h, --help last), examples and the exit status, no line
# past 79 columns; every option its help lists is one its parser takes (help and parsing come
# from one table); a mistyped option, command or subcommand gets "did you mean", and usage
# errors exit 2.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
unset GPUM_SIM_NODE GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES NO_COLOR
export GPUM_SOCKET=$T_SCRATCH/none.sock # no gpumd: nothing a test command starts reaches one
G=$GPUM_BIN

t_expect 0 "$G" --help
n=$(wc -l <"$T_OUT")
[ "$n" -le 70 ] || t_fail "gpum --help is $n lines"
commands=$(sed -n '/^commands:$/,/^$/p' "$T_OUT" | awk 'NF > 1 {print $1}')
[ "$(wc -w <<<"$commands")" -ge 18 ] || t_fail "commands listed: $commands"
for c in status top doctor sim pool monitor alerts run reserve jobs release suspend resume \
  disable enable http-token estimate slurm; do
  grep -qw "$c" <<<"$commands" || t_fail "gpum --help does not list $c"
done
for o in --config --socket --log-level --no-color --version 'help options' 'gpumd --help'; do
  grep -q -- "$o" "$T_OUT" || t_fail "gpum --help does not mention $o"
done
for o in --state-dir --socket-group --socket-mode --http-listen --queue-max --memory-fraction \
  --safety-margin --admin-group --ledger-retention; do
  ! grep -q -- "$o" "$T_OUT" || t_fail "gpum --help shows gpumd's option $o"
done
t_expect 0 "$G" help options
grep -q -- '--state-dir' "$T_OUT" && grep -q -- '--http-listen' "$T_OUT" || t_fail "help options: $(head "$T_OUT")"
t_expect 0 "$GPUM_BUILD_DIR/bin/gpumd" --help
grep -q -- '--config' "$T_OUT" && grep -q 'docs/config.md' "$T_OUT" || t_fail "gpumd --help: $(cat "$T_OUT")"
t_ok "gpum --help: $n lines, every command, the CLI's options, none of gpumd's"

# Every command's and subcommand's help, in one style.
subs="sim start|sim stop|sim status|sim list|sim inject|sim clear|sim set|sim hold|pool replay|pool gen-trace|slurm conf|slurm nodes"
IFS='|' read -ra all <<<"$(tr '\n' '|' <<<"$commands")$subs"
for cmd in "${all[@]}"; do
  [ -n "$cmd" ] || continue
  read -ra words <<<"$cmd"
  t_expect 0 "$G" "${words[@]}" --help
  head -1 "$T_OUT" | grep -q "^usage: gpum $cmd" || t_fail "gpum $cmd --help: usage line: $(head -1 "$T_OUT")"
  awk 'b {print; exit} /^$/ {b = 1}' "$T_OUT" | grep -Eq '^[A-Z].*\.$' || t_fail "gpum $cmd --help: no summary: $(head -4 "$T_OUT")"
  grep -Eq '^  -h, --help +this help$' "$T_OUT" || t_fail "gpum $cmd --help: no -h, --help line"
  grep -qx 'options:' "$T_OUT" && grep -qx 'examples:' "$T_OUT" && grep -qx 'exit status:' "$T_OUT" ||
    t_fail "gpum $cmd --help: sections: $(cat "$T_OUT")"
  long=$(awk 'length($0) > 79' "$T_OUT")
  [ -z "$long" ] || t_fail "gpum $cmd --help: lines past 79 columns: $long"
  # Each option of the help is taken by the parser: a switch before --help, a value option
  # with "=x" before --help; neither may be unknown, and nothing runs (exit 0, or 2 for x).
  sed -n '/^options:$/,/^$/p' "$T_OUT" | grep -Eo '^  (-[a-zA-Z], |    )--[a-z-]+( [^ ]+)?' |
    sed 's/^  \(-., \)\{0,1\} *//' >"$T_SCRATCH/opts"
  while read -r opt meta; do
    [ "$opt" = --help ] && continue
    arg=$opt
    [ -n "$meta" ] && arg="$opt=x"
    rc=0
    "$G" "${words[@]}" "$arg" --help >/dev/null 2>"$T_ERR" || rc=$?
    [ "$rc" -eq 0 ] || [ "$rc" -eq 2 ] || t_fail "gpum $cmd $arg --help exited $rc: $(cat "$T_ERR")"
    ! grep -q "unknown option\|takes no value" "$T_ERR" || t_fail "gpum $cmd: its help lists $opt ($meta), its parser: $(cat "$T_ERR")"
  done <"$T_SCRATCH/opts"
done
t_ok "every command's help (${#all[@]}) in one style; every option it lists is parsed"

# Did you mean, exit 2.
t_expect 2 "$G" jobs --al
grep -qx "gpum jobs: unknown option '--al'; did you mean '--all'?" "$T_ERR" || t_fail "jobs --al: $(cat "$T_ERR")"
t_expect 2 "$G" alerts --wacth
grep -q "did you mean '--watch'?" "$T_ERR" || t_fail "alerts --wacth: $(cat "$T_ERR")"
t_expect 2 "$G" stauts
grep -q "^gpum: unknown command 'stauts'; did you mean 'status'?" "$T_ERR" || t_fail "stauts: $(cat "$T_ERR")"
t_expect 2 "$G" help jbos
grep -q "did you mean 'jobs'?" "$T_ERR" || t_fail "help jbos: $(cat "$T_ERR")"
t_expect 2 "$G" sim injcet x
grep -q "^gpum sim: unknown command 'injcet'; did you mean 'inject'?" "$T_ERR" || t_fail "sim injcet: $(cat "$T_ERR")"
t_expect 2 "$G" --sockt /x status
grep -q "^gpum: unknown option '--sockt'; did you mean '--socket'?" "$T_ERR" || t_fail "--sockt: $(cat "$T_ERR")"
t_expect 2 "$G" jobs --frobnicate
grep -qx "gpum jobs: unknown option '--frobnicate'" "$T_ERR" || t_fail "no guess expected: $(cat "$T_ERR")"
t_ok "did you mean: an option, a command, a subcommand, a global option"

t_expect 2 "$G" jobs --state
grep -q "needs a value" "$T_ERR" || t_fail "jobs --state: $(cat "$T_ERR")"
t_expect 2 "$G" jobs --all=yes
grep -q "takes no value" "$T_ERR" || t_fail "jobs --all=yes: $(cat "$T_ERR")"
t_expect 2 "$G" jobs extra
t_expect 2 "$G" release
t_expect 2 "$G" run --mem 1GiB
t_expect 2 "$G" suspend --timeout 0 r-1
t_expect 2 "$G" sim stop
t_expect 2 "$G" sim
t_expect 2 "$G" disable 0 1
t_ok "usage errors exit 2"
