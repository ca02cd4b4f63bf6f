#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GET /api/v1/events (Server-Sent Events) on a simulated node: a reader receives the
# text/event-stream headers, "sample" events, a "reservation" event within a second of the
# reserve call (granted, with the reservation object without its token) and one for the
# release, a "workload" event with each figure's unit for a report (at most one a second per
# process and source), and an "alert" event (Xid 13, ERROR) within a second of the injection; a fatal Xid
# (79) gives "xid", "health" (to ERROR) and a CRITICAL "alert". A reader that connects and
# never reads does not block anyone: while thousands of events are produced, the good reader
# gets every one in order and requests keep being answered promptly; the stalled stream is
# dropped (gpumd_event_streams_dropped_total). At most 64 streams: the 65th is answered 503
# EAGAIN, and streams whose peers closed are reaped. A stream outlives http.timeout. Deadlines
# everywhere, no sleeps as synchronisation.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
# http.timeout 1s: an event stream must outlive it (the client never sends anything more).
export GPUM_HTTP_LISTEN=127.0.0.1:0 GPUM_MONITOR_INTERVAL=100ms GPUM_HTTP_TIMEOUT=1s
gd_start
t_wait_file "$GPUM_STATE_DIR/http.addr"
ADDR=$(cat "$GPUM_STATE_DIR/http.addr")

cat >"$T_SCRATCH/sse.py" <<'PY'
import http.client, json, os, socket, subprocess, sys, threading, time
from gpumd_client import Client, Fail, fail

host, port = os.environ["ADDR"].rsplit(":", 1)

class Reader(threading.Thread):
    """Reads one SSE stream into a list of (monotonic time, event, data)."""
    def __init__(self):
        super().__init__(daemon=True)
        self.cv = threading.Condition()
        self.events = []
        self.conn = http.client.HTTPConnection(host, int(port), timeout=30)
        self.conn.request("GET", "/api/v1/events")
        self.resp = self.conn.getresponse()
        self.ids = []
    def add(self, ev, data):
        with self.cv:
            self.events.append((time.monotonic(), ev, data))
            self.cv.notify_all()
    def run(self):
        ev, data = None, None
        while True:
            line = self.resp.readline()
            if not line:
                self.add("EOF", None)
                return
            line = line.decode().rstrip("\n")
            if line.startswith("event: "):
                ev = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
            elif line.startswith("id: "):
                self.ids.append(int(line[4:]))
            elif line == "" and ev:
                self.add(ev, data)
                ev, data = None, None
    def wait(self, pred, deadline, what):
        """The first event received so far or until deadline that pred accepts."""
        seen = 0
        with self.cv:
            while True:
                for t, ev, data in self.events[seen:]:
                    if ev == "EOF":
                        raise Fail("stream ended while waiting for %s" % what)
                    if pred(ev, data):
                        return t, data
                seen = len(self.events)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Fail("no %s event in time" % what)
                self.cv.wait(left)

def metrics():
    c = http.client.HTTPConnection(host, int(port), timeout=5)
    c.request("GET", "/metrics")
    r = c.getresponse()
    body = r.read().decode()
    assert r.status == 200, r.status
    return body

def metric(body, name):
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise Fail(name + " missing")

try:
    rd = Reader()
    opened = time.monotonic()
    assert rd.resp.status == 200, rd.resp.status
    assert rd.resp.getheader("Content-Type").startswith("text/event-stream"), rd.resp.getheaders()
    rd.start()
    rd.wait(lambda e, d: e == "sample", time.monotonic() + 10, "sample")

    # A reservation change: within a second of the call.
    c = Client()
    t0 = time.monotonic()
    r = c.ok("reserve", bytes_per_gpu="1GiB", label="sse")["reservation"]
    t, d = rd.wait(lambda e, d: e == "reservation" and d["reservation"]["id"] == r["id"]
                   and d["transition"] == "granted", t0 + 1.0, "granted reservation")
    assert d["from"] == "queued" and d["reservation"]["state"] == "GRANTED", d
    assert "token" not in d["reservation"], d
    t0 = time.monotonic()
    c.ok("release", reservation=r["id"])
    rd.wait(lambda e, d: e == "reservation" and d["reservation"]["id"] == r["id"]
            and d["transition"] == "released", t0 + 1.0, "released reservation")
    print("ok: reservation events within a second")

    # A workload report: a "workload" event with the figures and each one's unit, read from
    # its name by gpum_figure_unit. A burst of reports from one source gives at most one event a
    # second (counted against the time the burst took), the first at once.
    w = c.ok("reserve", bytes_per_gpu="1GiB", label="sse-workload")["reservation"]
    t0 = time.monotonic()
    figs = {"allocated_bytes": 1024, "queue_p99_us": 11400, "hit_ratio": 0.5, "batch_size": 8}
    c.ok("report", reservation=w["id"], source="main", figures=figs)
    t, d = rd.wait(lambda e, d: e == "workload" and d["reservation"] == w["id"], t0 + 5.0, "workload")
    assert d["source"] == "main" and d["pid"] == os.getpid() and d["figures"] == figs, d
    assert d["units"] == {"allocated_bytes": {"unit": "bytes", "scale": 1.0, "name": "allocated"},
                          "queue_p99_us": {"unit": "seconds", "scale": 1e-06, "name": "queue_p99"},
                          "hit_ratio": {"unit": "ratio", "scale": 1.0, "name": "hit"},
                          "batch_size": {"unit": "count", "scale": 1.0, "name": "batch_size"}}, d["units"]
    doc = c.ok("list")["reservations"]
    doc = [x for x in doc if x["id"] == w["id"]][0]
    assert doc["workload"][0]["units"] == d["units"], doc
    burst0 = time.monotonic()
    for i in range(50):
        c.ok("report", reservation=w["id"], source="main", figures={"batch_size": i})
    c.ok("report", reservation=w["id"], source="marker", figures={"batch_size": 1})
    burst = time.monotonic() - burst0
    rd.wait(lambda e, d: e == "workload" and d["source"] == "marker", time.monotonic() + 5.0, "marker")
    with rd.cv:
        main = [x for x in rd.events if x[1] == "workload" and x[2]["source"] == "main"]
    assert 1 <= len(main) <= 2 + int(burst), (len(main), burst)
    c.ok("release", reservation=w["id"])
    print("ok: a workload event with units; %d for a burst of 50 reports over %.2f s" % (len(main), burst))

    # An alert: Xid 13 on device 0 ("xid any auto": ERROR), within a second of the injection.
    t0 = time.monotonic()
    subprocess.run([os.environ["GPUM_BIN"], "sim", "inject", os.environ["GPUM_SIM_NODE"],
                    "--device", "0", "--xid", "13"], check=True, stdout=subprocess.DEVNULL)
    t, d = rd.wait(lambda e, d: e == "alert" and d["metric"] == "xid", t0 + 1.0, "alert")
    assert d["event"] == "fired" and d["level"] == "ERROR" and d["xid"] == 13 and d["device"] == 0, d
    print("ok: alert event within a second of the Xid")

    # A fatal Xid on device 1: "xid" and "health" (to ERROR) events, and a CRITICAL alert.
    t0 = time.monotonic()
    subprocess.run([os.environ["GPUM_BIN"], "sim", "inject", os.environ["GPUM_SIM_NODE"],
                    "--device", "1", "--xid", "79"], check=True, stdout=subprocess.DEVNULL)
    t, d = rd.wait(lambda e, d: e == "xid" and d["gpu"] == 1, t0 + 1.0, "xid")
    assert d["xid"] == 79 and d["critical"] is True and d["uuid"].startswith("GPU-"), d
    t, d = rd.wait(lambda e, d: e == "health" and d["gpu"] == 1, t0 + 5.0, "health")
    assert d["to"] == "ERROR" and d["from"] in ("AVAILABLE", "BUSY") and d["reason"], d
    rd.wait(lambda e, d: e == "alert" and d["level"] == "CRITICAL" and d["device"] == 1,
            t0 + 5.0, "CRITICAL alert")
    print("ok: xid, health and CRITICAL alert events for a fatal Xid")

    # A stalled reader: connects, asks for the stream, never reads.
    st = socket.socket()
    st.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    st.connect((host, int(port)))
    st.sendall(b"GET /api/v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
    deadline = time.monotonic() + 10
    while metric(metrics(), "gpumd_event_streams") < 2:
        if time.monotonic() > deadline:
            raise Fail("the stalled stream was never opened")
    # Many events: reserve and release in a loop; every round trip is answered promptly.
    worst = 0
    for i in range(1500):
        t0 = time.monotonic()
        r = c.ok("reserve", bytes_per_gpu="1MiB", label="x" * 100)["reservation"]
        c.ok("release", reservation=r["id"])
        worst = max(worst, time.monotonic() - t0)
        if i % 300 == 0:
            t0 = time.monotonic()
            metrics()
            worst = max(worst, time.monotonic() - t0)
    last = r["id"]
    assert worst < 1.0, "a request took %.3f s while a reader stalled" % worst
    rd.wait(lambda e, d: e == "reservation" and d["reservation"]["id"] == last
            and d["transition"] == "released", time.monotonic() + 10, "last release")
    assert rd.ids == sorted(rd.ids) and len(set(rd.ids)) == len(rd.ids), "ids out of order"
    body = metrics()
    assert metric(body, "gpumd_event_streams_dropped_total") >= 1, body
    assert metric(body, "gpumd_event_streams") == 1, body
    st.close()
    print("ok: a stalled reader is dropped; the other reader and clients are not held up")

    # The stream limit: 64 at once, the 65th gets 503 EAGAIN; closed streams are reaped.
    extra = []
    for i in range(63):
        s = socket.create_connection((host, int(port)))
        s.sendall(b"GET /api/v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
        extra.append(s)
    deadline = time.monotonic() + 10
    while metric(metrics(), "gpumd_event_streams") < 64:
        if time.monotonic() > deadline:
            raise Fail("64 streams never opened: %s" % metric(metrics(), "gpumd_event_streams"))
    c65 = http.client.HTTPConnection(host, int(port), timeout=5)
    c65.request("GET", "/api/v1/events")
    r65 = c65.getresponse()
    body = json.loads(r65.read())
    assert r65.status == 503 and body["error"]["code"] == "EAGAIN", (r65.status, body)
    for s in extra:
        s.close()
    deadline = time.monotonic() + 10
    while metric(metrics(), "gpumd_event_streams") != 1:
        if time.monotonic() > deadline:
            raise Fail("closed streams were not reaped")
    print("ok: at most 64 streams (503 EAGAIN beyond); closed streams are reaped")

    # The stream outlives http.timeout (1 s) although its client sends nothing.
    rd.wait(lambda e, d: e == "sample" and time.monotonic() > opened + 2.5,
            opened + 10, "sample after 2.5 s")
    print("ok: an event stream is not cut by http.timeout")
except Fail as e:
    fail(str(e))
PY
ADDR=$ADDR PYTHONPATH=$PYTHONPATH python3 "$T_SCRATCH/sse.py" || t_fail "SSE"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC: $(cat "$GD_ERR")"
