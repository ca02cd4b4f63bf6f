#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Static checks behind `make check`: formatting (clang-format, dry run), cppcheck and clang-tidy
# (.clang-tidy) over the compilation database, mypy over the Python package (bindings/python),
# the order of the modules (scripts/layers.py), the banned-function grep, and the SPDX header
# on every source file.
# Usage: scripts/check.sh BUILD_DIR   (BUILD_DIR holds compile_commands.json)
# Prints each problem found and exits non-zero if there was any.
set -uo pipefail

build=${1:-build}
cd "$(dirname "$0")/.." || exit 2
failed=0
problem() {
  echo "check: $*" >&2
  failed=1
}

# Source files: tracked ones plus new ones not ignored by .gitignore (not yet committed).
mapfile -t sources < <(git ls-files --cached --others --exclude-standard -- '*.c' '*.h' '*.cc' | sort -u |
  while read -r f; do [ -f "$f" ] && echo "$f"; done)
mapfile -t scripts < <(git ls-files --cached --others --exclude-standard -- '*.sh' '*CMakeLists.txt' \
  Makefile | sort -u | while read -r f; do [ -f "$f" ] && echo "$f"; done)

echo "check: clang-format on ${#sources[@]} files"
for f in "${sources[@]}"; do
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
    problem "$f is not clang-formatted (run: clang-format -i $f)"
  fi
done

echo "check: cppcheck"
if [ ! -f "$build/compile_commands.json" ]; then
  problem "$build/compile_commands.json is missing: configure the build first (make build)"
else
  # cppcheck reads -I but not -iquote, which gpumd's module folders are named with (its
  # sched.h must not shadow <sched.h> when the compiler looks): a copy of the database with
  # -I in their place.
  sed 's/-iquote /-I/g' "$build/compile_commands.json" >"$build/cppcheck_commands.json"
  cppcheck_out=$(cppcheck --enable=warning,performance,portability --inline-suppr \
    --error-exitcode=1 --suppress=missingIncludeSystem -q \
    --project="$build/cppcheck_commands.json" 2>&1)
  if [ $? -ne 0 ]; then
    echo "$cppcheck_out" >&2
    problem "cppcheck found problems (above)"
  fi
fi

# The Python package, with Debian's mypy (python3-mypy) and the configuration in its
# pyproject.toml; the cache goes into the build directory, out of the source tree.
echo "check: mypy on bindings/python/gpum and its build backend"
if ! /usr/bin/python3 -m mypy --version >/dev/null 2>&1; then
  problem "mypy is not installed for /usr/bin/python3 (scripts/deps.sh installs python3-mypy)"
elif ! mypy_out=$(/usr/bin/python3 -m mypy --config-file bindings/python/pyproject.toml \
  --cache-dir "$build/mypy-cache" bindings/python/gpum bindings/python/_gpum_build 2>&1); then
  echo "$mypy_out" >&2
  problem "mypy found problems in bindings/python (above)"
fi
# The example service is kept as clean, with the package's configuration (gpum found through
# MYPYPATH, as the example finds it through PYTHONPATH).
echo "check: mypy on examples/service"
if /usr/bin/python3 -m mypy --version >/dev/null 2>&1 && \
  ! mypy_out=$(cache=$(realpath -m "$build/mypy-cache") && cd examples/service && \
    MYPYPATH=../../bindings/python /usr/bin/python3 -m mypy \
    --config-file ../../bindings/python/pyproject.toml --cache-dir "$cache" pulse service.py 2>&1); then
  echo "$mypy_out" >&2
  problem "mypy found problems in examples/service (above)"
fi

# clang-tidy with the committed .clang-tidy over the same compilation database: the sources of
# src/, tests/ and bench/ (not the generated ones in the build directory) and this tree's
# headers, JOBS at a time (default: every core; about half a minute on two).
echo "check: clang-tidy"
if [ ! -f "$build/compile_commands.json" ]; then
  : # said above
elif ! command -v run-clang-tidy >/dev/null; then
  problem "run-clang-tidy is not installed (scripts/deps.sh installs clang-tidy)"
else
  root=$(pwd | sed 's/[][\\.*^$+?(){}|]/\\&/g') # the tree's path as a regular expression
  if ! tidy_out=$(run-clang-tidy -p "$build" -j "${JOBS:-$(nproc)}" -quiet \
    -header-filter="^$root/(src|include|tests|bench)/" "^$root/(src|tests|bench)/" 2>&1); then
    # The diagnostics only: no colours, commands or counts of suppressed warnings.
    sed -E 's/\x1b\[[0-9;]*m//g' <<<"$tidy_out" |
      grep -vE '^(clang-tidy|[0-9]+ warnings? generated|Suppressed|Use -header-filter)' >&2
    problem "clang-tidy found problems (above)"
  fi
fi

# Whole-word calls only: snprintf, vsnprintf, strtok_r and fgets do not match.
# The order in which gpumd's modules call each other, and no circle between libgpum's
# (docs/architecture.md), read from the build's objects.
echo "check: module layers"
if ! layers_out=$(/usr/bin/python3 scripts/layers.py "$build" 2>&1); then
  echo "$layers_out" >&2
  problem "modules call each other against their order (above)"
fi

echo "check: banned functions"
banned='\b(sprintf|vsprintf|strcpy|strcat|atoi|strtok|gets)[[:space:]]*\('
dirs=()
for d in src include tests bench; do [ -d "$d" ] && dirs+=("$d"); done
if hits=$(grep -rnE --include='*.c' --include='*.h' "$banned" "${dirs[@]}"); then
  while IFS= read -r line; do
    problem "banned function: $line"
  done <<<"$hits"
fi

echo "check: SPDX headers"
for f in "${sources[@]}" "${scripts[@]}"; do
  if ! head -n 2 "$f" | grep -q 'SPDX-License-Identifier: Apache-2.0'; then
    problem "$f lacks the SPDX-License-Identifier line at the top"
  fi
done

if [ "$failed" -ne 0 ]; then
  echo "check: FAILED" >&2
  exit 1
fi
echo "check: all clean"
