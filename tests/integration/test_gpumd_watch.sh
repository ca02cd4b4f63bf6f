#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The watch op (docs/protocol.md) on a simulated two-GPU node. libgpum (progs/watch_events.c):
# gpum_client_watch(GPUM_WATCH_DEFAULT) receives a reserve's grant, its release, an injected
# Xid 13 and its alert as GPUM_CLIENT_EV_NODE events with growing ids, the reservation and
# device read from them, and no samples; a watcher of "xid" alone gets only the Xid; an unknown
# bit is EINVAL. The protocol (Python): after {"op": "watch"} a connection receives
# {"event": "node", "type", "seq", "data"} for each event gpumd publishes (a grant, a release,
# an Xid 31 and its alert), in order, each the
# same (id and data) as the HTTP event stream's, with the reservation's state after the
# transition (GRANTED with its devices, then RELEASED), never its token, each the document the
# reserve's or the release's reply carries (with the token there); "events" filters (a
# "sample" watcher gets samples and nothing else); other connections get none; {"off": true}
# stops them (nothing after the reply); malformed requests (wrong types, unknown names, a list
# with one bad name, off false, off with events, unknown fields) are EINVAL and change nothing
# (a watcher keeps its types, a non-watcher stays one). At most 128 watchers: the 129th is
# EAGAIN until one stops or leaves. A watcher that never reads is disconnected once its unread
# output passes the protocol's 4 MiB, while another watcher gets every event in order and
# requests are answered. A grant seen by a watcher is durable: gpumd killed (SIGKILL) right
# after the event and started again still has the reservation. Deadlines, no sleeps.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
export GPUM_MONITOR_INTERVAL=100ms
gd_start
t_wait_file "$GPUM_STATE_DIR/http.addr"
export ADDR
ADDR=$(cat "$GPUM_STATE_DIR/http.addr")

# ---- libgpum: gpum_client_watch, GPUM_CLIENT_EV_NODE ----
PROG=$GPUM_TEST_PROGS/watch_events
LIB=$T_SCRATCH/lib
t_bg "$PROG" default alert >"$LIB.all" 2>"$LIB.all.err"
P1=$T_LAST_PID
t_bg "$PROG" xid xid >"$LIB.xid" 2>"$LIB.xid.err"
P2=$T_LAST_PID
t_until 10 grep -q '^watching [0-9]' "$LIB.all" || t_fail "watch_events default: $(cat "$LIB.all.err")"
t_until 10 grep -q '^watching [0-9]' "$LIB.xid" || t_fail "watch_events xid: $(cat "$LIB.xid.err")"
R=$("$GPUM_BIN" reserve --mem 1GiB --label lib --ttl 10m) || t_fail "gpum reserve"
"$GPUM_BIN" release "$R" >/dev/null || t_fail "gpum release"
"$GPUM_BIN" sim inject "$T_NODE" --device 0 --xid 13 >/dev/null || t_fail "sim inject"
wait "$P1" || t_fail "watch_events default: $(cat "$LIB.all" "$LIB.all.err")"
wait "$P2" || t_fail "watch_events xid: $(cat "$LIB.xid" "$LIB.xid.err")"
expect_line() { grep -qE -- "$2" "$1" || t_fail "no line /$2/ in $1: $(cat "$1")"; }
expect_line "$LIB.all" "^node reservation [0-9]+ device=-1 reservation=$R:GRANTED data=\{\"transition\":\"granted\""
expect_line "$LIB.all" "^node reservation [0-9]+ device=-1 reservation=$R:RELEASED data=\{\"transition\":\"released\""
expect_line "$LIB.all" '^node xid [0-9]+ device=0 reservation=-:- data=\{.*"xid":13'
expect_line "$LIB.all" '^node alert [0-9]+ device=0 reservation=-:- data=\{.*"event":"fired"'
expect_line "$LIB.all" '^off [0-9]+$'
grep -q '^node sample' "$LIB.all" && t_fail "samples without asking for them: $(cat "$LIB.all")"
expect_line "$LIB.xid" '^node xid [0-9]+ device=0 reservation=-:- data=\{.*"xid":13'
[ "$(grep -c '^node ' "$LIB.xid")" -eq 1 ] || t_fail "a watcher of xid got other events: $(cat "$LIB.xid")"
t_expect 0 "$PROG" bad x
grep -qx EINVAL "$T_OUT" || t_fail "an unknown watch bit: $(cat "$T_OUT")"
t_ok "libgpum: node events with their reservation and device, in order; filtered; bad bits refused"

cat >"$T_SCRATCH/watch.py" <<'PY'
import http.client, json, os, socket, subprocess, sys, threading, time
from gpumd_client import Client, Fail, fail

host, port = os.environ["ADDR"].rsplit(":", 1)
DEFAULT = ["reservation", "alert", "health", "xid"]


def nodes(c, clear=True):
    """The node events c has read so far (taken off its list when clear)."""
    ev = [e for e in c.events if e["event"] == "node"]
    if clear:
        c.events = [e for e in c.events if e["event"] != "node"]
    return ev


def sync(c):
    """Reads what gpumd staged for c before now: the reply to a request made now follows it."""
    c.ok("hello")


def wait_node(c, pred, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    seen = 0
    while True:
        for e in c.events[seen:]:
            if e["event"] == "node" and pred(e):
                return e
        seen = len(c.events)
        m = c.read_msg(deadline)
        if m is None:
            raise Fail("connection closed while waiting for %s" % what)
        if "event" not in m:
            raise Fail("unexpected reply %r while waiting for %s" % (m, what))
        c.events.append(m)


def sse_since(after, upto):
    """{id: (type, data)} of the HTTP event stream's events after `after` up to `upto` (replay)."""
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", "/api/v1/events", headers={"Last-Event-ID": str(after)})
    resp = conn.getresponse()
    assert resp.status == 200, resp.status
    out, cur, ev = {}, None, None
    while upto not in out:
        line = resp.readline().decode().rstrip("\n")
        if line.startswith("id: "):
            cur = int(line[4:])
        elif line.startswith("event: "):
            ev = line[7:]
        elif line.startswith("data: ") and ev:
            out[cur] = (ev, json.loads(line[6:]))
            if ev == "reset":
                raise Fail("the stream could not replay: %r" % (out[cur],))
            ev = None
    conn.close()
    return out


def inject(device, xid):
    subprocess.run([os.environ["GPUM_BIN"], "sim", "inject", os.environ["GPUM_SIM_NODE"],
                    "--device", str(device), "--xid", str(xid)], check=True,
                   stdout=subprocess.DEVNULL)


try:
    # ---- every event, in order, after-commit content, the same as the HTTP stream's ----
    w = Client()
    r = w.ok("watch")
    assert r["events"] == DEFAULT and isinstance(r["seq"], int), r
    seq0 = r["seq"]
    f = Client()
    assert f.ok("watch", events=["reservation", "reservation"])["events"] == ["reservation"]
    s = Client()
    s.ok("watch", events=["sample"])
    n = Client()  # never watches
    a = Client()
    res = a.ok("reserve", bytes_per_gpu="1GiB", label="w1")["reservation"]
    released = a.ok("release", reservation=res["id"])["reservation"]
    inject(0, 31)  # (Xid 13's alert on GPU 0 fired above and is still active)
    xid = wait_node(w, lambda e: e["type"] == "xid", "xid")
    alert = wait_node(w, lambda e: e["type"] == "alert", "alert")
    for c in (w, f, n, s):
        sync(c)
    ev = nodes(w)
    for e in ev:
        assert set(e) == {"event", "type", "seq", "data"}, e
    seqs = [e["seq"] for e in ev]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) and seqs[0] > seq0, seqs
    assert {e["type"] for e in ev} <= set(DEFAULT), ev
    mine = [e["data"] for e in ev if e["type"] == "reservation"
            and e["data"]["reservation"]["id"] == res["id"]]
    trans = [d["transition"] for d in mine]
    assert trans[-2:] == ["granted", "released"] and trans[0] in ("queued", "granted"), trans
    g, rel = mine[-2], mine[-1]
    assert g["reservation"]["state"] == "GRANTED" and g["reservation"]["devices"], g
    assert g["reservation"]["label"] == "w1" and g["reservation"]["granted_ns"] > 0, g
    assert rel["from"] == "granted" and rel["reservation"]["state"] == "RELEASED", rel
    assert rel["reservation"]["ended_ns"] > 0 and "released by uid" in rel["reservation"]["reason"]
    assert all("token" not in d["reservation"] for d in mine), mine
    assert xid["data"]["xid"] == 31 and xid["data"]["gpu"] == 0, xid
    assert alert["data"]["event"] == "fired" and alert["data"]["xid"] == 31, alert
    assert xid["seq"] < alert["seq"], (xid, alert)
    print("ok: a watcher gets the grant, the release, the Xid and its alert in order, as committed")
    # The reply tells the state of its request's last transition: the event's document, token
    # put in (gpumd writes it once for both).
    for reply, event in ((res, g["reservation"]), (released, rel["reservation"])):
        assert "token" in reply, reply
        assert {k: v for k, v in reply.items() if k != "token"} == event, (reply, event)
        assert list(reply) == ["id", "token"] + list(event)[1:], (list(reply), list(event))
    print("ok: the reserve's and the release's replies carry their events' documents")

    sse = sse_since(seq0, seqs[-1])
    for e in ev:
        assert sse.get(e["seq"]) == (e["type"], e["data"]), (e, sse.get(e["seq"]))
    missed = [i for i, (t, d) in sse.items() if t in DEFAULT and i not in seqs]
    assert not missed, "events of the stream the watcher did not get: %r" % missed
    print("ok: the same events, ids and data as the HTTP event stream (%d events)" % len(ev))

    fe = nodes(f)
    assert fe and all(e["type"] == "reservation" for e in fe), fe
    assert [e["seq"] for e in fe] == [e["seq"] for e in ev if e["type"] == "reservation"]
    assert not nodes(n), "a connection that did not watch got node events"
    wait_node(s, lambda e: e["type"] == "sample", "sample")
    sync(s)
    se = nodes(s)
    assert se and all(e["type"] == "sample" and "gpu" in e["data"] for e in se), se
    print("ok: \"events\" filters (reservation alone, sample alone); others get nothing")

    # ---- off ----
    r = w.ok("watch", off=True)
    assert r["events"] == [] and r["seq"] >= seqs[-1], r
    nodes(w)
    res = a.ok("reserve", bytes_per_gpu="1GiB")["reservation"]
    a.ok("release", reservation=res["id"])
    sync(w)
    assert not nodes(w), "events after off"
    assert w.ok("watch", events=["xid"])["events"] == ["xid"]
    print("ok: {\"off\": true} stops the events; watching again works")

    # ---- bad requests: EINVAL, nothing changes ----
    bad = [dict(events="reservation"), dict(events=[]), dict(events=["bogus"]), dict(events=[1]),
           dict(events=[["reservation"]]), dict(events=None), dict(events={"reservation": 1}),
           dict(events=["xid", "nope"]), dict(events=["RESERVATION"]), dict(off=False),
           dict(off="yes"), dict(off=1), dict(off=True, events=["xid"]), dict(x=1),
           dict(events=["xid"], all=True)]
    for c in (f, n):
        for b in bad:
            c.err("watch", "EINVAL", **b)
    nodes(f)
    res = a.ok("reserve", bytes_per_gpu="1GiB")["reservation"]
    a.ok("release", reservation=res["id"])
    inject(1, 13)
    wait_node(w, lambda e: e["type"] == "xid" and e["data"]["gpu"] == 1, "xid on GPU 1")
    for c in (f, n):
        sync(c)
    fe = nodes(f)
    assert fe and all(e["type"] == "reservation" for e in fe), fe
    assert any(e["data"]["reservation"]["id"] == res["id"] for e in fe), fe
    assert not nodes(n), "a refused watch made a watcher"
    print("ok: %d malformed watch requests are EINVAL and change nothing" % len(bad))
    for c in (w, f, s, n, a):
        c.close()

    # ---- at most 128 watchers ----
    many = [Client() for _ in range(128)]
    for c in many:
        c.ok("watch")
    extra = Client()
    msg = extra.err("watch", "EAGAIN")
    assert "too many watchers (at most 128)" in msg, msg
    many[0].ok("watch", events=["xid"])  # changing its types takes no second place
    many[0].ok("watch", off=True)
    extra.ok("watch")
    extra2 = Client()
    extra2.err("watch", "EAGAIN")
    many[1].close()
    deadline = time.monotonic() + 10
    while not extra2.call("watch").get("ok"):
        if time.monotonic() > deadline:
            raise Fail("a watcher that left still counts")
    for c in many + [extra, extra2]:
        c.close()
    print("ok: at most 128 watchers (EAGAIN beyond); off and leaving free a place")

    # ---- a watcher that never reads is dropped; another one gets everything ----
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.connect(os.environ["GPUM_SOCKET"])
    slow.sendall(b'{"id":1,"op":"watch"}\n')
    good = Client(timeout=30)
    good.ok("watch", events=["reservation"])
    got, done = [], threading.Event()

    def read_good():
        while not done.is_set():
            try:
                m = good.read_msg(time.monotonic() + 0.5)
            except Fail:
                continue
            if m is None:
                got.append(None)
                return
            got.append(m)

    th = threading.Thread(target=read_good, daemon=True)
    th.start()
    gen = Client(timeout=30)
    clients0 = gen.ok("status")["node"]["clients"]
    made, batch = [], 400
    while gen.ok("status")["node"]["clients"] == clients0:
        if len(made) > 20000:
            raise Fail("the watcher that never reads is still connected after %d reservations"
                        % len(made))
        base = gen.next_id
        gen.send_raw(b"".join(
            (json.dumps({"id": base + i, "op": "reserve", "bytes_per_gpu": 1048576,
                         "label": "s" * 120}) + "\n").encode() for i in range(batch)))
        ids = []
        for i in range(batch):
            ids.append(gen.reply(base + i)["reservation"]["id"])
        gen.next_id = base + batch
        base = gen.next_id
        gen.send_raw(b"".join((json.dumps({"id": base + i, "op": "release", "reservation": rid})
                               + "\n").encode() for i, rid in enumerate(ids)))
        for i in range(batch):
            assert gen.reply(base + i)["ok"]
        gen.next_id = base + batch
        made += ids
    last = made[-1]
    deadline = time.monotonic() + 30
    while not any(m and m.get("event") == "node" and m["data"]["reservation"]["id"] == last
                  and m["data"]["transition"] == "released" for m in got[-5:]):
        if time.monotonic() > deadline or (got and got[-1] is None):
            raise Fail("the reading watcher did not get the last release")
        time.sleep(0.05)
    done.set()
    th.join()
    ev = [m for m in got if m and m.get("event") == "node"]
    seqs = [e["seq"] for e in ev]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "out of order"
    ended = {e["data"]["reservation"]["id"] for e in ev if e["data"]["transition"] == "released"}
    granted = {e["data"]["reservation"]["id"] for e in ev if e["data"]["transition"] == "granted"}
    assert set(made) <= ended and set(made) <= granted, "the reading watcher missed events"
    # The dropped one: what it had been sent, then the end of the connection.
    slow.settimeout(10)
    total = 0
    while True:
        chunk = slow.recv(1 << 20)
        if not chunk:
            break
        total += len(chunk)
    assert total < 6 << 20, total
    print("ok: a watcher that never reads is dropped (after %d reservations); the other got "
          "all %d events in order" % (len(made), len(ev)))
except Fail as e:
    fail(str(e))
PY
python3 "$T_SCRATCH/watch.py" || t_fail "watch"
grep -q 'does not read its replies: disconnected' "$GD_ERR" || t_fail "no log line for the dropped watcher"
gd_stop TERM # (a sanitizer build: with its leak check)
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC: $(cat "$GD_ERR")"

# ---- a grant a watcher saw survives a crash ----
gd_start
t_expect 0 gd_py "
w = Client(); w.ok('watch', events=['reservation'])
a = Client()
a.send({'id': 1, 'op': 'reserve', 'bytes_per_gpu': '1GiB', 'label': 'durable', 'lease': 'ttl', 'ttl_ms': 600000})
e = None
while not e:
    m = w.read_msg()
    if m is None:
        raise SystemExit('gpumd closed the watch connection before the grant')
    if m.get('event') == 'node' and m['data']['transition'] == 'granted' and m['data']['reservation']['label'] == 'durable':
        e = m
os.kill(int(args[0]), 9)
print(e['data']['reservation']['id'])
" "$GD_PID"
RD=$(cat "$T_OUT")
wait "$GD_PID" 2>/dev/null || true
gd_start
t_expect 0 "$GPUM_BIN" jobs --all
grep -qE "^$RD .*GRANTED" "$T_OUT" || t_fail "$RD, seen granted by a watcher, is gone after a crash: $(cat "$T_OUT")"
t_ok "a grant a watcher saw is durable: still GRANTED after SIGKILL and restart"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC: $(cat "$GD_ERR")"
