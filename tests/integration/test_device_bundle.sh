#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The device bundle and the device check, without a GPU (docs/hardware.md): `make
# device-bundle`'s script builds a bundle under 64 MiB whose programs and libraries find each
# other through $ORIGIN alone (no build path, nothing missing, the bundle moved elsewhere); the
# check, run from the moved bundle in a clean environment (no build tree on PATH, no GPUM_*),
# reports every GPU check as SKIP with a reason and exits 0; with --sim it runs gpumd, the pool
# and the trace replays on a simulated node from the bundle (ok); a check that breaks is a FAIL
# with its evidence (exit 1); a check that hangs is stopped at its timeout; bad arguments exit 2.
# Skipped (77) in sanitizer builds: the bundle is made from the normal build.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"

if grep -q '^GPUM_SANITIZE:STRING=.\+' "$GPUM_BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
  echo "skip: a sanitizer build: the device bundle is made from the normal build"
  exit 77
fi

B0=$T_SCRATCH/b0
t_expect 0 "$GPUM_SOURCE_DIR/scripts/device-bundle.sh" "$GPUM_BUILD_DIR" "$B0"
for f in bin/gpum sbin/gpumd lib/libgpum.so.0 lib/libgpum_enforce.so lib/libgpum_sim.so lib/libgpum_torch.so \
  lib/libjansson.so.4 lib/libyaml-0.so.2 lib/libevent-2.1.so.7 lib/libsqlite3.so.0 \
  lib/libncursesw.so.6 python/gpum/__init__.py tests/gpu/checks.py tests/gpu/device-check.sh \
  tests/gpu/estimate_models.py traces/transformer.csv MANIFEST; do
  [ -e "$B0/$f" ] || t_fail "the bundle has no $f"
done
size=$(du -sb "$B0" | cut -f1)
[ "$size" -lt $((64 << 20)) ] || t_fail "the bundle is $size bytes, over 64 MiB"
t_ok "bundle built: $((size >> 20)) MiB"

# Moved away from where it was built, with the build directory out of every search path.
B=$T_SCRATCH/moved/bundle
mkdir -p "$T_SCRATCH/moved"
mv "$B0" "$B"
mapfile -t elves < <(find "$B/bin" "$B/sbin" "$B/lib" -type f)
for e in "${elves[@]}"; do
  head -c 4 "$e" | grep -q ELF || continue
  rp=$(readelf -d "$e" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p; s/.*(RPATH).*\[\(.*\)\]/\1/p')
  case "$(basename "$e")" in
  gpum | gpumd | libgpum*)
    [ "$rp" = '$ORIGIN/../lib' ] || t_fail "$e has RUNPATH '$rp', not \$ORIGIN/../lib" ;;
  *) [ -z "$rp" ] || [ "$rp" = '$ORIGIN/../lib' ] || t_fail "$e has RUNPATH '$rp'" ;;
  esac
  deps=$(env -i ldd "$e" 2>&1) || true
  ! grep -q "not found" <<<"$deps" || t_fail "$e: $(grep 'not found' <<<"$deps")"
  ! grep -q "$GPUM_BUILD_DIR" <<<"$deps" || t_fail "$e loads from the build tree: $deps"
  for lib in libgpum libjansson libyaml libevent libsqlite3 libncursesw; do
    line=$(grep "^\s*$lib" <<<"$deps" || true)
    [ -z "$line" ] || grep -q "=> $B/" <<<"$line" || t_fail "$e: $line (not the bundle's)"
  done
done
t_ok "every program and library loads the bundle's libraries through \$ORIGIN"

CLEAN=(env -i "HOME=$T_SCRATCH" "PATH=/usr/bin:/bin" "TMPDIR=$T_SCRATCH")

# No GPU here: every GPU check is skipped with its reason, the bundle itself is ok, exit 0.
O=$T_SCRATCH/out-none
t_expect 0 "${CLEAN[@]}" bash "$B/tests/gpu/device-check.sh" "$B" "$O"
for f in device-check.json device-check.txt device-check.log; do
  [ -s "$O/$f" ] || [ "$f" = device-check.log ] || t_fail "no $O/$f"
done
t_pyjson "$O/device-check.json" '
c = {x["name"]: x for x in d["checks"]}
assert d["mode"] == "none", d["mode"]
assert c["bundle"]["result"] == "ok", c["bundle"]
gpu = [n for n in c if n != "bundle"]
assert len(gpu) >= 10, gpu
for n in gpu:
    assert c[n]["result"] == "SKIP" and c[n]["detail"], c[n]
    assert "GPU" in c[n]["detail"], c[n]
assert d["summary"] == {"ok": 1, "FAIL": 0, "SKIP": len(gpu)}, d["summary"]
' || t_fail "the check without a GPU: $(cat "$O/device-check.txt")"
grep -q "^SKIP  device " "$O/device-check.txt" || t_fail "the report: $(cat "$O/device-check.txt")"
t_ok "no GPU: every GPU check SKIP with its reason, exit 0"

# On a simulated node from the bundle: gpumd, the pool's CUDA sources and the replays run.
O=$T_SCRATCH/out-sim
t_expect 0 "${CLEAN[@]}" bash "$B/tests/gpu/device-check.sh" "$B" "$O" --sim
t_pyjson "$O/device-check.json" '
c = {x["name"]: x for x in d["checks"]}
assert d["mode"] == "sim"
for n in ("bundle", "gpumd", "pool", "pool-replay"):
    assert c[n]["result"] == "ok", c[n]
g = c["gpumd"]["figures"]
assert g["reservation"].startswith("r-") and g["metrics_bytes"] > 1000, g
p = c["pool"]["figures"]
assert p["cuda_trim_released"] >= 1 << 30 and p["vmm_segments_after_4x256mib"] == 1, p
r = c["pool-replay"]["figures"]["transformer"]
assert r["gpum_cuda"]["ooms"] == 0 and r["gpum_vmm_expandable"]["peak_reserved_bytes"] > 0, r
for n, x in c.items():
    if n not in ("bundle", "gpumd", "pool", "pool-replay"):
        assert x["result"] == "SKIP", x
' || t_fail "the check on a simulated node: $(cat "$O/device-check.txt")"
t_ok "--sim: gpumd, pool and pool-replay ok on a simulated node"

# A check that breaks: FAIL with the evidence, exit 1. A check that hangs: stopped in time.
cp -a "$B" "$T_SCRATCH/broken"
BB=$T_SCRATCH/broken
printf '#!/bin/sh\necho "gpumd: cannot start: planted failure" >&2\nexit 1\n' >"$BB/sbin/gpumd"
O=$T_SCRATCH/out-broken
t_expect 1 "${CLEAN[@]}" bash "$BB/tests/gpu/device-check.sh" "$BB" "$O" --sim --only gpumd,pool
t_pyjson "$O/device-check.json" '
c = {x["name"]: x for x in d["checks"]}
assert set(c) == {"gpumd", "pool"}, list(c)
assert c["gpumd"]["result"] == "FAIL" and "planted failure" in c["gpumd"]["detail"], c["gpumd"]
assert c["pool"]["result"] == "ok", c["pool"]
' || t_fail "a broken gpumd: $(cat "$O/device-check.txt")"
printf '#!/bin/sh\nexec sleep 1000\n' >"$BB/sbin/gpumd"
O=$T_SCRATCH/out-hang
t_expect 1 "${CLEAN[@]}" timeout 120 bash "$BB/tests/gpu/device-check.sh" "$BB" "$O" --sim \
  --only gpumd --budget 25
t_pyjson "$O/device-check.json" '
c = d["checks"][0]
assert c["name"] == "gpumd" and c["result"] == "FAIL" and "did not finish within 15 s" in c["detail"], c
' || t_fail "a hanging gpumd: $(cat "$O/device-check.txt")"
t_ok "a broken check is a FAIL with its evidence, a hanging one is stopped at its timeout"

t_expect 2 "${CLEAN[@]}" bash "$B/tests/gpu/device-check.sh" "$B" "$T_SCRATCH/o2" --only nosuch
grep -q "no check nosuch" "$T_ERR" || t_fail "an unknown check: $(cat "$T_ERR")"
t_expect 2 "${CLEAN[@]}" bash "$B/tests/gpu/device-check.sh" "$T_SCRATCH/nothing" "$T_SCRATCH/o3"
t_ok "bad arguments exit 2"
