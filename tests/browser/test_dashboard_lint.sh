#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The dashboard's code passes its linters: eslint (recommended rules) on web/app.js and on the
# browser test's driver, html-validate (recommended rules) on web/index.html. The tools come
# from web/node_modules (scripts/deps.sh runs npm ci): skipped (77) without them, and in
# sanitizer builds (no C code here).
set -euo pipefail
: "${GPUM_SOURCE_DIR:?run through ctest}"
if [ -n "${GPUM_SANITIZE:-}" ]; then
  echo "skip: a sanitizer build ($GPUM_SANITIZE): the lint runs in the normal build only"
  exit 77
fi
WEB=$GPUM_SOURCE_DIR/web
BIN=$WEB/node_modules/.bin
if [ ! -x "$BIN/eslint" ] || [ ! -x "$BIN/html-validate" ]; then
  echo "skip: web/node_modules is missing (scripts/deps.sh runs npm ci in web/)"
  exit 77
fi
command -v node >/dev/null || { echo "skip: node is not installed (scripts/deps.sh)"; exit 77; }

(cd "$WEB" && "$BIN/eslint" --max-warnings 0 .) || { echo "FAIL: eslint in web/" >&2; exit 1; }
echo "ok: eslint: web/app.js, web/eslint.config.js"
(cd "$GPUM_SOURCE_DIR/tests/browser" && "$BIN/eslint" --max-warnings 0 .) ||
  { echo "FAIL: eslint in tests/browser/" >&2; exit 1; }
echo "ok: eslint: tests/browser/*.mjs"
(cd "$WEB" && "$BIN/html-validate" index.html) || { echo "FAIL: html-validate web/index.html" >&2; exit 1; }
echo "ok: html-validate: web/index.html"
