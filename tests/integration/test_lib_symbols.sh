#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# libgpum.so exports its public API and nothing else: every function and variable declared with
# GPUM_API in include/gpum is exported, and every exported symbol is one of them (no gpum__
# internals, no symbols of the libraries it uses). A program built with only <gpum/gpum.h>
# links and sees the same version as the library.
source "$(dirname "$0")/lib.sh"

lib="$GPUM_BUILD_DIR/lib/libgpum.so"
[ -f "$lib" ] || t_fail "no $lib"

# (AddressSanitizer adds an __odr_asan.NAME indicator beside each exported variable.)
nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ && $3 !~ /^__odr_asan\./ {print $3}' |
  sort -u >"$T_SCRATCH/exported"
# The declared API: the name declared by each GPUM_API declaration (comments stripped).
python3 - "$GPUM_SOURCE_DIR"/include/gpum/*.h "$GPUM_BUILD_DIR"/include/gpum/version.h <<'PY' |
import re, sys
for path in sys.argv[1:]:
    text = re.sub(r"/\*.*?\*/", " ", open(path).read(), flags=re.S)
    text = re.sub(r"^#.*$", " ", text, flags=re.M)
    for decl in re.findall(r"\bGPUM_API\b([^;]*);", text):
        head = decl.split("(")[0] if "(" in decl else decl
        print(re.findall(r"[A-Za-z_]\w*", head.replace("[]", ""))[-1])
PY
  sort -u >"$T_SCRATCH/declared"
[ "$(wc -l <"$T_SCRATCH/declared")" -gt 150 ] || t_fail "too few GPUM_API declarations found"

extra=$(comm -23 "$T_SCRATCH/exported" "$T_SCRATCH/declared")
[ -z "$extra" ] || t_fail "exported but not declared with GPUM_API: $(tr '\n' ' ' <<<"$extra")"
missing=$(comm -13 "$T_SCRATCH/exported" "$T_SCRATCH/declared")
[ -z "$missing" ] || t_fail "declared with GPUM_API but not exported (not defined?): $(tr '\n' ' ' <<<"$missing")"
t_ok "$(wc -l <"$T_SCRATCH/exported") symbols exported, each declared with GPUM_API"

# Every prototype in the public headers carries the mark (sim.h belongs to libgpum_sim).
unmarked=$(grep -nE '^[a-z][a-z0-9_ *]*\bgpum_[a-z0-9_]+\(' "$GPUM_SOURCE_DIR"/include/gpum/*.h |
  grep -v '/sim.h:' | grep -vE ':[0-9]+:(static|typedef)' || true)
[ -z "$unmarked" ] || t_fail "public prototypes without GPUM_API: $unmarked"
t_ok "every public prototype is marked"

out=$("$GPUM_TEST_PROGS/lib_umbrella") || t_fail "umbrella program: $out"
case "$out" in "header "*" library "*" 8.00 GiB") ;; *) t_fail "umbrella program said: $out" ;; esac
t_ok "a program built with <gpum/gpum.h> runs: $out"
