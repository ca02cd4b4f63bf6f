#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Event stream replay (GET /api/v1/events with Last-Event-ID or ?last_event_id=) on a simulated
# node: a stream's first lines carry the newest id; a reader that closes, misses events and
# reconnects with the id of the last event it read gets exactly the missed events, in order,
# then live ones, with consecutive ids and no "reset"; the same with the query parameter; a
# replay larger than a stream's output bound (256 KiB) arrives whole. A malformed id, one never
# sent, one of an earlier run (gpumd restarted) and one whose successors the ring no longer
# holds (http.event_replay 256KiB) each give a "reset" event first, then live events. A reader
# that resumes and then reads nothing is dropped as any slow reader, holding no one up.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"
source "$(dirname "$0")/http_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
export GPUM_MONITOR_INTERVAL=100ms
gd_start

cat >"$T_SCRATCH/sse_lib.py" <<'PY'
import http.client, json, time
from gpumd_http import addr, Fail

class Stream:
    """One event stream, read block by block: dicts with id, event, data, comment, retry."""
    def __init__(self, last=None, query=""):
        host, port = addr()
        self.c = http.client.HTTPConnection(host, port, timeout=10)
        h = {"Last-Event-ID": last} if last is not None else {}
        self.c.request("GET", "/api/v1/events" + query, headers=h)
        self.r = self.c.getresponse()
        if self.r.status != 200:
            raise Fail("status %d" % self.r.status)
        self.hello = self.block()
    def block(self):
        b = {}
        while True:
            line = self.r.readline()
            if not line:
                raise Fail("stream ended")
            line = line.decode().rstrip("\n")
            if line == "":
                if b:
                    return b
                continue
            k, _, v = line.partition(":")
            v = v[1:] if v.startswith(" ") else v
            if k == "data":
                v = json.loads(v)
            b.setdefault(k or "comment", v)
    def event(self, pred=lambda b: True, secs=10):
        """The next event block (skipping keep-alives) that pred accepts."""
        end = time.time() + secs
        while time.time() < end:
            b = self.block()
            if "event" in b and pred(b):
                return b
        raise Fail("no such event in time")
    def close(self):
        self.c.close()

def is_resv(rid, tr):
    return lambda b: b["event"] == "reservation" and b["data"]["reservation"]["id"] == rid \
        and b["data"]["transition"] == tr
PY
export PYTHONPATH="$T_SCRATCH:$PYTHONPATH"

hp '
from sse_lib import Stream, is_resv
from gpumd_client import Client
c = Client()
s = Stream()
assert "id" in s.hello and int(s.hello["id"]) > 1500000000 * 10**6, s.hello  # above the start time in us
assert s.hello["retry"] == "2000", s.hello
r1 = c.ok("reserve", bytes_per_gpu="1GiB", label="one")["reservation"]
b = s.event(is_resv(r1["id"], "granted"))
last = int(b["id"])
s.close()
# Missed while disconnected: r2 granted and released, r1 released.
r2 = c.ok("reserve", bytes_per_gpu="2GiB", label="two")["reservation"]
c.ok("release", reservation=r2["id"])
c.ok("release", reservation=r1["id"])
def resumed(s):
    assert "id" not in s.hello and "retry" in s.hello, s.hello
    want = [(r2["id"], "queued"), (r2["id"], "granted"), (r2["id"], "released"),
            (r1["id"], "released")]
    got, ids = [], []
    while len(got) < len(want):
        b = s.event()
        assert b["event"] != "reset", b
        ids.append(int(b["id"]))
        if b["event"] == "reservation":
            got.append((b["data"]["reservation"]["id"], b["data"]["transition"]))
    assert got == want, got
    # then live ones, the ids still consecutive from the one after last
    r3 = c.ok("reserve", bytes_per_gpu="1GiB", label="three")["reservation"]
    while True:
        b = s.event()
        ids.append(int(b["id"]))
        if is_resv(r3["id"], "granted")(b):
            break
    assert ids == list(range(last + 1, last + 1 + len(ids))), (last, ids)
    c.ok("release", reservation=r3["id"])
    s.close()
resumed(Stream(last=str(last)))
print("ok: Last-Event-ID: the missed events in order, then live ones, ids consecutive")
resumed(Stream(query="?last_event_id=%d" % last))
print("ok: ?last_event_id= does the same")
# The header wins over the query parameter (an EventSource reconnecting to such a URL).
s = Stream(last=str(last), query="?last_event_id=abc")
b = s.event()
assert b["event"] != "reset" and int(b["id"]) == last + 1, b
s.close()
print("ok: Last-Event-ID wins over ?last_event_id=")

# A replay larger than the output bound of a stream arrives whole, in order.
s = Stream()
newest = int(s.hello["id"])
s.close()
for i in range(400):
    r = c.ok("reserve", bytes_per_gpu="1MiB", label="x" * 100)["reservation"]
    c.ok("release", reservation=r["id"])
s = Stream(last=str(newest))
ids, n = [], 0
while True:
    b = s.event()
    assert b["event"] != "reset", b
    ids.append(int(b["id"]))
    n += len(json.dumps(b["data"]))
    if is_resv(r["id"], "released")(b):
        break
assert ids == list(range(newest + 1, newest + 1 + len(ids))), "ids not consecutive"
assert n > 300 * 1024, n
s.close()
print("ok: a replay of %d KiB (%d events) arrives whole" % (n // 1024, len(ids)))

def reset(last=None, query="", code=None):
    s = Stream(last=last, query=query)
    assert int(s.hello["id"]) > 0, s.hello
    b = s.event()
    assert b["event"] == "reset" and b["data"]["code"] == code and b["data"]["reason"], b
    assert "id" not in b, b
    nxt = s.event()  # then live events, after the newest id of the hello
    assert nxt["event"] != "reset" and int(nxt["id"]) > int(s.hello["id"]), nxt
    s.close()
    return b["data"]["reason"]
for bad in ["abc", "", "-1", "+5", "1e5", "12a", "1" * 25, "0x10"]:
    reset(last=bad, code="malformed")
reset(query="?last_event_id=x", code="malformed")
reset(query="?last_event_id=%FF%FE", code="malformed")  # not UTF-8: still a clean reset
reset(last="\xff1", code="malformed")
print("ok: a malformed id gives reset (malformed)")
s = Stream()
newest = int(s.hello["id"])
s.close()
reset(last=str(newest + 10**6), code="unknown")
reset(last="5", code="other_run")
print("ok: an id never sent gives reset (unknown), one below the run its start reset (other_run)")
with open(args[0], "w") as f:
    f.write(str(newest))
' "$T_SCRATCH/last_id" || t_fail "replay"
t_ok "replay and reset"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC: $(cat "$GD_ERR")"
GPUM_HTTP_EVENT_REPLAY=256KiB gd_start
hp '
from sse_lib import Stream, is_resv
from gpumd_client import Client
old = open(args[0]).read()
s = Stream(last=old)
b = s.event()
assert b["event"] == "reset" and b["data"]["code"] == "other_run", b
assert int(s.hello["id"]) > int(old), (s.hello, old)
s.close()
print("ok: after a gpumd restart an id of the earlier run gives reset (other_run)")

def metric(name):
    st, h, body = call("GET", "/metrics")
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise Fail(name + " missing")
def churn(n):
    for i in range(n):
        r = c.ok("reserve", bytes_per_gpu="1MiB", label="y" * 100)["reservation"]
        c.ok("release", reservation=r["id"])
c = Client()
s = Stream()
newest = int(s.hello["id"])
s.close()
churn(100)  # about 160 KiB of events: more than one catch-up step (128 KiB), less than the ring
# A reader that resumes and never reads is bounded as any other: the events go on (and other
# clients are answered promptly) until it is dropped, by the 256 KiB rule or because the ring
# no longer holds its next event, whichever the kernel buffers let come first.
host, port = addr()
st = socket.socket()
st.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
st.connect((host, port))
st.sendall(b"GET /api/v1/events HTTP/1.1\r\nHost: x\r\nLast-Event-ID: %d\r\n\r\n" % newest)
until(lambda: metric("gpumd_event_streams") == 1, 10, "the stalled stream to open")
dropped = metric("gpumd_event_streams_dropped_total")
worst = 0
for i in range(30):
    t0 = time.monotonic()
    churn(100)
    worst = max(worst, (time.monotonic() - t0) / 100)
    if metric("gpumd_event_streams_dropped_total") == dropped + 1:
        break
assert metric("gpumd_event_streams_dropped_total") == dropped + 1, "the stalled reader stays"
assert metric("gpumd_event_streams") == 0
assert worst < 1.0, "reserve and release took %.3f s on average" % worst
st.close()
print("ok: a stalled reader that resumed is dropped, others are not held up")
s = Stream(last=str(newest))
b = s.event()
assert b["event"] == "reset" and b["data"]["code"] == "too_old", b
s.close()
print("ok: an id whose successors are no longer kept gives reset (too_old)")
' "$T_SCRATCH/last_id" || t_fail "reset after restart"
t_ok "reset after a restart and for events no longer kept"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC: $(cat "$GD_ERR")"
