#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The dashboard's files as gpumd serves them (src/gpumd/rest/http_web.c): GET / is the page and
# /assets/NAME each embedded file, byte for byte the ones in web/ and uPlot's dist, with
# Content-Type, a strong ETag (304 on If-None-Match), no-cache, nosniff and the CSP; HEAD has
# the headers and no body; an unknown name is 404, another method 405 with Allow. No token is
# needed for them, while the API's own rules stay as they were.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
A="http://$(cat "$GPUM_STATE_DIR/http.addr")"
H=$T_SCRATCH/headers
B=$T_SCRATCH/body

# get METHOD PATH [CURL ARGS...]: status code on stdout, headers in $H, body in $B.
get() {
  local m=$1 p=$2
  rm -f "$B"
  shift 2
  if [ "$m" = HEAD ]; then
    curl -s -I -D "$H" -o "$B" -w '%{http_code}' "$@" "$A$p"
  else
    curl -s -X "$m" -D "$H" -o "$B" -w '%{http_code}' "$@" "$A$p"
  fi
}
header() { grep -i "^$1:" "$H" | head -1 | cut -d: -f2- | sed 's/^ //; s/\r$//'; }

check_file() { # PATH FILE TYPE
  local st
  st=$(get GET "$1")
  [ "$st" = 200 ] || t_fail "GET $1: $st"
  cmp -s "$B" "$2" || t_fail "GET $1: the body is not $2"
  [ "$(header Content-Type)" = "$3" ] || t_fail "GET $1: Content-Type '$(header Content-Type)', expected '$3'"
  local sha
  sha=$(sha256sum "$2" | cut -d' ' -f1)
  [ "$(header ETag)" = "\"$sha\"" ] || t_fail "GET $1: ETag '$(header ETag)' is not the file's SHA-256"
  [ "$(header Cache-Control)" = "no-cache" ] || t_fail "GET $1: Cache-Control '$(header Cache-Control)'"
  [ "$(header X-Content-Type-Options)" = "nosniff" ] || t_fail "GET $1: no nosniff"
  header Content-Security-Policy | grep -q "script-src 'self'" || t_fail "GET $1: CSP '$(header Content-Security-Policy)'"
  header Content-Security-Policy | grep -q "default-src 'none'" || t_fail "GET $1: CSP without default-src 'none'"
}

W=$GPUM_SOURCE_DIR/web
U=$W/node_modules/uplot
check_file / "$W/index.html" "text/html; charset=utf-8"
check_file /assets/index.html "$W/index.html" "text/html; charset=utf-8"
check_file /assets/app.js "$W/app.js" "text/javascript; charset=utf-8"
check_file /assets/style.css "$W/style.css" "text/css; charset=utf-8"
check_file /assets/icon.svg "$W/icon.svg" "image/svg+xml"
check_file /assets/uPlot.iife.min.js "$U/dist/uPlot.iife.min.js" "text/javascript; charset=utf-8"
check_file /assets/uPlot.min.css "$U/dist/uPlot.min.css" "text/css; charset=utf-8"
check_file /assets/uPlot-LICENSE.txt "$U/LICENSE" "text/plain; charset=utf-8"
t_ok "/ and every /assets/ file: the embedded bytes, Content-Type, ETag (SHA-256), no-cache, nosniff, CSP"

etag=$(sha256sum "$W/app.js" | cut -d' ' -f1)
st=$(get GET /assets/app.js -H "If-None-Match: \"$etag\"")
[ "$st" = 304 ] || t_fail "If-None-Match with the ETag: $st, expected 304"
[ ! -s "$B" ] || t_fail "304 with a body"
[ "$(header ETag)" = "\"$etag\"" ] || t_fail "304 without its ETag"
st=$(get GET /assets/app.js -H "If-None-Match: \"nope\", W/\"$etag\"")
[ "$st" = 304 ] || t_fail "If-None-Match with a list holding the weak ETag: $st, expected 304"
st=$(get GET /assets/app.js -H "If-None-Match: \"nope\"")
[ "$st" = 200 ] || t_fail "If-None-Match with another ETag: $st, expected 200"
st=$(get GET /assets/app.js -H "If-None-Match: *")
[ "$st" = 304 ] || t_fail "If-None-Match: * : $st, expected 304"
t_ok "If-None-Match: 304 for the ETag (strong, weak, in a list, *), 200 for another"

st=$(get HEAD /assets/app.js)
[ "$st" = 200 ] || t_fail "HEAD: $st"
[ "$(header Content-Length)" = "$(stat -c %s "$W/app.js")" ] || t_fail "HEAD: Content-Length '$(header Content-Length)'"
cmp -s "$B" "$H" || t_fail "HEAD: more than the headers came back" # curl -I: headers to -o too
t_ok "HEAD: the headers and the length, no body"

for p in /assets/nope.js /assets/ /assets/../index.html /assets/app.js/x "/assets/%2e%2e%2fapp.js" /index.html; do
  st=$(get GET "$p" --path-as-is)
  [ "$st" = 404 ] || t_fail "GET $p: $st, expected 404"
  grep -q '"ENOENT"' "$B" || t_fail "GET $p: not the error shape: $(cat "$B")"
done
t_ok "unknown names (and ../, %2e%2e, subpaths) are 404 in the error shape"

for m in POST DELETE PUT; do
  for p in / /assets/app.js; do
    st=$(get "$m" "$p")
    [ "$st" = 405 ] || t_fail "$m $p: $st, expected 405"
    [ "$(header Allow)" = "GET, HEAD" ] || t_fail "$m $p: Allow '$(header Allow)'"
  done
done
t_ok "other methods: 405 with Allow: GET, HEAD"

# The API's own rules stay: a malformed Authorization header is 401; without a token curl on
# loopback acts as the uid owning its socket (this test's), so deleting a reservation that does
# not exist is 404, not 401.
st=$(get DELETE /api/v1/reservations/r-1 -H "Authorization: Basic dXNlcjpwdw==")
[ "$st" = 401 ] || t_fail "DELETE with a Basic header: $st, expected 401"
st=$(get DELETE /api/v1/reservations/r-1)
[ "$st" = 404 ] || t_fail "DELETE without a token from loopback: $st, expected 404"
st=$(get GET /api/v1/gpu/status)
[ "$st" = 200 ] || t_fail "GET status: $st"
t_ok "the API's token rules apply beside the dashboard's files"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
