#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Large REST reads answered by a child process (docs/operations.md, "Readers"): with 300 live
# reservations (past the 256 from which the list is made in a child), GET /api/v1/reservations
# lists every one of them, and after a release the next list lacks it (each list shows the
# state of its request, not an old copy); a bad query parameter is refused 400 by the child as
# by the loop; HEAD is answered on the loop with no body; eight lists at once (more than the
# four children that may run) all come back whole; a page asked small (limit=10) is answered
# on the loop (no child); gpumd_http_forked_reads_total counts the
# children's answers (and no failure); the history of a young gpumd (a few points a device, far
# from the 16,384 points from which a child makes it) is answered on the loop.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
t_wait_file "$GPUM_STATE_DIR/http.addr"
BASE="http://$(cat "$GPUM_STATE_DIR/http.addr")"
gd_py '
import urllib.request, urllib.error, concurrent.futures
base = args[0]
def get(path, method="GET"):
    req = urllib.request.Request(base + path, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
def forked():
    st, body = get("/metrics")
    out = {}
    for line in body.decode().splitlines():
        if line.startswith("gpumd_http_forked_reads_total{"):
            out[line.split("\"")[1]] = int(line.split()[-1])
    return out
before = forked()
if before != {"answered": 0, "failed": 0}:
    fail("forked reads before any: %r" % before)
c = Client()
ids = set()
for i in range(300):
    r = c.ok("reserve", bytes_per_gpu="1MiB", label="big-%d" % i, lease="ttl", ttl_ms=3600000)
    ids.add(r["reservation"]["id"])
def listed():
    st, body = get("/api/v1/reservations")
    if st != 200:
        fail("list: %d %r" % (st, body[:200]))
    return {r["id"]: r for r in json.loads(body)["reservations"]}
got = listed()
if set(got) != ids:
    fail("list of %d reservations, %d made, %d missing" % (len(got), len(ids), len(ids - set(got))))
if any(r["state"] != "GRANTED" or not r["label"].startswith("big-") for r in got.values()):
    fail("a reservation listed wrong: %r" % next(iter(got.values())))
gone = sorted(ids)[0]
c.ok("release", reservation=gone)
ids.discard(gone)
got = listed()
if gone in got or set(got) != ids:
    fail("after releasing %s the list has %d (released one listed: %s)" % (gone, len(got), gone in got))
st, body = get("/api/v1/reservations?bogus=1")
err = json.loads(body).get("error", {})
if st != 400 or err.get("code") != "EINVAL" or "bogus" not in err.get("message", ""):
    fail("bad parameter: %d %r" % (st, body[:200]))
st, body = get("/api/v1/reservations", method="HEAD")
if st != 200 or body:
    fail("HEAD: %d with %d bytes" % (st, len(body)))
with concurrent.futures.ThreadPoolExecutor(8) as ex:
    lists = list(ex.map(lambda _: listed(), range(8)))
if any(set(l) != ids for l in lists):
    fail("a concurrent list differs: %r" % [len(l) for l in lists])
mid = forked()
st, body = get("/api/v1/reservations?limit=10")
page = json.loads(body)
if st != 200 or len(page["reservations"]) != 10 or forked() != mid:
    fail("a page of 10: %d, %d reservations, forked %r then %r" % (st, len(page.get("reservations", [])), mid, forked()))
before = forked()
st, body = get("/api/v1/gpu/history?window=10s")
if st != 200 or "devices" not in json.loads(body):
    fail("history: %d %r" % (st, body[:200]))
after = forked()
if after != before:
    fail("the history of a young gpumd was made in a child: %r then %r" % (before, after))
# the lists (3 alone, up to 8 at once, of which at least 4 in children)
if after["failed"] != 0 or after["answered"] < 3 + 4:
    fail("forked reads: %r" % after)
print("forked reads:", after)
' "$BASE" || t_fail "large reads"
t_ok "the list of 300 reservations answered by children, each as of its request; a small history on the loop"
grep -q "child answering an HTTP read failed" "$GD_ERR" && t_fail "a child failed: $(cat "$GD_ERR")"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC: $(cat "$GD_ERR")"
t_ok "gpumd stops cleanly"
