# SPDX-License-Identifier: Apache-2.0
# Sourced by the browser tests (after tests/integration/lib.sh): browser_require exits 77
# (skipped) in a sanitizer build (the page runs no C code of its own; test_web_assets.sh
# covers the serving), and without Chromium, web/node_modules or node; else sets CHROMIUM.
browser_require() {
  if [ -n "${GPUM_SANITIZE:-}" ]; then
    echo "skip: a sanitizer build ($GPUM_SANITIZE): the browser test runs in the normal build only"
    exit 77
  fi
  CHROMIUM=${GPUM_CHROMIUM:-/usr/bin/chromium}
  [ -x "$CHROMIUM" ] || { echo "skip: no Chromium at $CHROMIUM (scripts/deps.sh installs Debian's chromium)"; exit 77; }
  [ -d "$GPUM_SOURCE_DIR/web/node_modules/playwright-core" ] ||
    { echo "skip: web/node_modules is missing (scripts/deps.sh runs npm ci in web/)"; exit 77; }
  command -v node >/dev/null || { echo "skip: node is not installed (scripts/deps.sh)"; exit 77; }
}
