#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Python package (bindings/python) with pytest, as Debian's /usr/bin/python3 runs it, over
# this build's libgpum: its tests start their own simulated node and gpumd.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"

PY=/usr/bin/python3
"$PY" -c 'import pytest' 2>/dev/null || t_fail "pytest is not installed for $PY (scripts/deps.sh installs python3-pytest)"
export GPUM_LIBRARY=$GPUM_BUILD_DIR/lib/libgpum.so
export PYTHONPATH=$GPUM_SOURCE_DIR/bindings/python${PYTHONPATH:+:$PYTHONPATH}
# A sanitizer build's libgpum needs its runtime loaded first in the interpreter.
RT=$(ldd "$GPUM_LIBRARY" | awk '/lib(asan|tsan)\.so/ {print $3; exit}')
case "$RT" in
*tsan*) echo "note: a ThreadSanitizer build: the interpreter cannot run under it; the C code these tests reach is covered by the TSan unit tests"; exit 0 ;;
*asan*) export LD_PRELOAD=$RT ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 ;;
esac
cd "$T_SCRATCH"
"$PY" -m pytest -q -p no:cacheprovider "$GPUM_SOURCE_DIR/bindings/python/tests"
