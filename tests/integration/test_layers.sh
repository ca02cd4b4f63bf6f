#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The order of gpumd's modules (docs/architecture.md), read from the build's objects by
# scripts/layers.py: each module calls only those below it, libgpum's modules call each other
# in no circle. And the checker itself: objects planted with a call upwards and with a circle
# are refused, each with the calls that break the order named.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
PY=/usr/bin/python3
LAYERS=$GPUM_SOURCE_DIR/scripts/layers.py

t_expect 0 "$PY" "$LAYERS" "$GPUM_BUILD_DIR"
grep -q '^layers: gpumd: 12 modules, .* in order$' "$T_OUT" || t_fail "gpumd not checked: $(cat "$T_OUT")"
grep -q '^layers: libgpum: .* in order$' "$T_OUT" || t_fail "libgpum not checked: $(cat "$T_OUT")"
t_ok "gpumd's and libgpum's modules call each other in order"

# Planted: low calls up into high (a call against the order), and a and b call each other.
P=$T_SCRATCH/planted
mkdir -p "$P/low" "$P/high" "$P/a" "$P/b"
printf 'int high_fn(void);\nint low_fn(void) { return high_fn(); }\n' >"$P/low/low.c"
printf 'int high_fn(void) { return 1; }\n' >"$P/high/high.c"
printf 'int b_fn(void);\nint a_fn(void) { return b_fn(); }\n' >"$P/a/a.c"
printf 'int a_fn(void);\nint b_fn(void) { return a_fn(); }\n' >"$P/b/b.c"
for f in low/low high/high a/a b/b; do
  cc -c -o "$P/$f.c.o" "$P/$f.c" || t_fail "cannot compile $f.c"
done
t_expect 1 "$PY" "$LAYERS" --objects "$P" --order low,high,a,b
grep -q '^layers: objects: low calls high, which is above it: high_fn$' "$T_OUT" ||
  t_fail "the call upwards was not named: $(cat "$T_OUT")"
grep -q '^layers: objects: modules that call each other in a circle: a b$' "$T_OUT" ||
  t_fail "the circle was not named: $(cat "$T_OUT")"
t_ok "a call upwards and a circle are refused, named"

# A module the order does not know is refused too.
t_expect 1 "$PY" "$LAYERS" --objects "$P" --order high,low
grep -q "module 'a' is not in the order" "$T_OUT" || t_fail "an unknown module passed: $(cat "$T_OUT")"
t_ok "a module outside the order is refused"
