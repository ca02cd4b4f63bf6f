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
RT=$(ldd "$GPUM_LIBRARY" | awk '/lib(asan|tsan)\.so/ && !f {print $3; f = 1}')
case "$RT" in
*tsan*) echo "note: a ThreadSanitizer build: the interpreter cannot run under it; the C code these tests reach is covered by the TSan unit tests"; exit 0 ;;
*asan*)
  # libstdc++ too, ahead of torch: ASan's __cxa_throw interceptor finds the real one only if
  # libstdc++ is loaded when ASan starts (python is C, torch loads it later), else the first
  # C++ exception torch throws, even a caught one, stops the interpreter ("CHECK failed ...
  # real___cxa_throw").
  # (awk reads to the end: leaving early would kill ldconfig with SIGPIPE under pipefail)
  CXX=$(ldconfig -p 2>/dev/null | awk '$1 == "libstdc++.so.6" && /x86-64/ && !f {print $NF; f = 1}')
  export LD_PRELOAD="$RT${CXX:+ $CXX}" ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
  ;;
esac
cd "$T_SCRATCH"
"$PY" -m pytest -q -p no:cacheprovider "$GPUM_SOURCE_DIR/bindings/python/tests"
