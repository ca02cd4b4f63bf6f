#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Lists that scale: 10,000 live reservations on a simulated 8xH100 node (about half GRANTED,
# half QUEUED behind a reservation that fills GPU 0; a hundred of them with labels of 127
# control characters, the longest a reservation document gets), and every face that lists
# them: the socket's list in pages (no reply over the 64 KiB message limit, cursors that go on
# after a release, bad cursors and limits refused, the filters and total, counted once per
# walk and carried by the cursors of a filtered one), status (the queue head in order, as much
# as one message holds; the first 128 ids of each device), gpum jobs (table
# and --json --all, whose documents are REST's), the REST list (every page, no duplicate, no gap, the total, the filters,
# 400 on bad values), gpum status and gpum top --once, and /metrics (promtool checks it whole;
# its counts add up, every granted reservation has its rows).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"
source "$(dirname "$0")/http_lib.sh"

PROMTOOL=$(command -v promtool || echo "$GPUM_SOURCE_DIR/.cache/tools/bin/promtool")
[ -x "$PROMTOOL" ] || t_fail "promtool not found (scripts/deps.sh extracts it into .cache/tools/bin)"
export PROMTOOL

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/8xh100.yaml"
gd_start

hp '
import subprocess, re
N = 10000
LIMIT = 65536  # the client library refuses a message of this many bytes, newline included
c = gpumd_client.Client(timeout=60.0)
me = os.getuid()

def raw_call(op, **fields):
    """The reply line as bytes, and parsed (events that come meanwhile are skipped)."""
    rid = c.next_id
    c.next_id += 1
    c.send(dict(id=rid, op=op, **fields))
    while True:
        while b"\n" not in c.buf:
            chunk = c.sock.recv(1 << 20)
            if not chunk:
                raise Fail("gpumd closed the connection")
            c.buf += chunk
        line, c.buf = c.buf.split(b"\n", 1)
        m = json.loads(line)
        if m.get("id") == rid:
            return line, m

# GPU 0 full: what asks for it alone waits.
st = c.ok("status")
cap0 = st["devices"][0]["capacity"]
c.ok("reserve", bytes_per_gpu=cap0, devices=["0"], label="fill-0")
# The rest in batches (a client that leaves 4 MiB unread is dropped): odd ones queue on GPU 0,
# even ones are granted elsewhere; every 99th has the longest label JSON can make of 127 bytes.
made = 1
while made < N:
    batch = []
    for _ in range(min(500, N - made)):
        i = made
        made += 1
        label = "\x01" * 127 if i % 99 == 0 else ("odd-%d" % i if i % 2 else "even-%d" % i)
        f = dict(bytes_per_gpu=1 << 20, label=label)
        if i % 2:
            f["devices"] = ["0"]
        batch.append(f)
    c.ok_many("reserve", batch)
c.events.clear()

# The socket list, as an old client asks for it (no limit): the first page and a cursor.
line, m = raw_call("list", all=True)
assert m["ok"] and m["total"] == N, m.get("total")
assert isinstance(m["next_cursor"], str) and len(line) + 1 < LIMIT, len(line)

def walk(**q):
    """Every page of a list query: the ids in order, the biggest reply, the totals."""
    ids, biggest, totals, cursor = [], 0, set(), None
    while True:
        f = dict(q)
        if cursor:
            f["cursor"] = cursor
        line, m = raw_call("list", **f)
        assert m["ok"], m
        biggest = max(biggest, len(line) + 1)
        totals.add(m["total"])
        ids += [r["id"] for r in m["reservations"]]
        cursor = m["next_cursor"]
        if cursor is None:
            return ids, biggest, totals

num = lambda rid: int(rid[2:])
ids, biggest, totals = walk(all=True)
assert len(ids) == N and len(set(ids)) == N, (len(ids), len(set(ids)))
assert [num(i) for i in ids] == sorted(num(i) for i in ids)
assert totals == {N} and biggest < LIMIT, (totals, biggest)
# Pages of the longest documents: near the limit, never over it.
ids_l, biggest_l, _ = walk(all=True, label="\x01" * 127, limit=10000)
assert len(ids_l) == len([i for i in range(1, N) if i % 99 == 0]) and biggest_l < LIMIT
assert biggest_l > LIMIT // 2, biggest_l
# Filters: state (one or a list), uid, label (exact, and a prefix with *), and the total.
q_ids, _, q_tot = walk(all=True, state="QUEUED")
g_ids, _, g_tot = walk(all=True, state=["GRANTED"])
assert q_tot == {len(q_ids)} and g_tot == {len(g_ids)} and len(q_ids) + len(g_ids) == N
assert len(q_ids) > 4000 and len(g_ids) > 4000, (len(q_ids), len(g_ids))
total = lambda **q: raw_call("list", limit=1, **q)[1]["total"]  # one page: the total
assert total(all=True, state=["QUEUED", "GRANTED"]) == N and total(uid=me) == N
assert walk(uid=me + 1)[0] == []
assert walk(label="odd-1")[0] == ["r-2"], walk(label="odd-1")[0]
odd = walk(label="odd-*", state="QUEUED")[0]
assert len(odd) == len([i for i in range(1, N) if i % 2 and i % 99]), len(odd)
# A cursor whose reservation was released goes on after it; one released ahead is skipped.
# (GRANTED ones: a queued one leaving moves every position behind it, an event each.)
_, m = raw_call("list", all=True, limit=9)
page1 = [r["id"] for r in m["reservations"]]
assert m["reservations"][-1]["state"] == "GRANTED", m["reservations"][-1]
cur = m["next_cursor"]
_, m2 = raw_call("list", all=True, limit=9, cursor=cur)
ahead = [r["id"] for r in m2["reservations"][1:] if r["state"] == "GRANTED"][0]
# A filtered list (a uid, a label, or without all: the caller own) counts its total once, on
# the first page of a walk, and its cursors carry it (no pass over them all per page); the
# list of everyone comes from the scheduler counts, current on every page, its cursors bare.
_, f1 = raw_call("list", uid=me, limit=9)
assert f1["total"] == N and f1["next_cursor"] == "c1.%d.%d" % (num(f1["reservations"][-1]["id"]), N)
assert re.fullmatch(r"c1\.[1-9][0-9]*", cur), cur
c.ok("release", reservation=page1[-1])
c.ok("release", reservation=ahead)
_, f2 = raw_call("list", uid=me, limit=9, cursor=f1["next_cursor"])
assert f2["total"] == N and f2["next_cursor"].endswith(".%d" % N), (f2["total"], f2["next_cursor"])
assert raw_call("list", uid=me, limit=9)[1]["total"] == N - 2  # a new walk counts again
assert raw_call("list", uid=me, limit=9, cursor=cur)[1]["total"] == N - 2  # a cursor of none
_, m3 = raw_call("list", all=True, limit=9, cursor=cur)
page2 = [r["id"] for r in m3["reservations"]]
want = [r["id"] for r in m2["reservations"] if r["id"] != ahead]
assert page2[:8] == want and num(page2[8]) > num(want[-1]), (page2, want)
assert m3["total"] == N - 2
# Bad cursors and limits are refused.
for bad in ["garbage", "c1.", "c1.0", "c1.12x", "c1.99999999999999999999999", "r-5", 12,
            "c1.12.", "c1.12.0", "c1.12.07", "c1.12.3.4", "c1.12.99999999999999999999999"]:
    e = c.err("list", "EINVAL", all=True, cursor=bad)
    assert "cursor" in e, e
for bad in [0, 10001, "5", -1]:
    assert "limit" in c.err("list", "EINVAL", limit=bad)
for bad in ["RELEASED", "QUEUEDX", 5, [1]]:
    assert "state" in c.err("list", "EINVAL", state=bad)
c.err("list", "EINVAL", uid=-1)
c.err("list", "EINVAL", label="x" * 200)
# status is one message too: the head of the queue, and every count.
line, m = raw_call("status")
assert m["ok"] and len(line) + 1 < LIMIT and m["node"]["queued"] == len(q_ids)
assert 0 < len(m["queue"]) < len(q_ids)
# ... the head in service order, as much as fits (the next one would not: a queued document
# here is under 1 KiB), and each device its first 128 granted ids with "jobs" counting all.
assert [r["id"] for r in m["queue"]] == q_ids[:len(m["queue"])]
assert [r["queue_position"] for r in m["queue"]] == list(range(len(m["queue"])))
assert len(line) + 1 > LIMIT - 1024, len(line)
on, cursor = {}, None  # device index -> its granted ids, in id order
while True:
    _, g = raw_call("list", all=True, state="GRANTED", **({"cursor": cursor} if cursor else {}))
    for r in g["reservations"]:
        for x in r["devices"]:
            on.setdefault(x["index"], []).append(r["id"])
    cursor = g["next_cursor"]
    if cursor is None:
        break
for dev in m["devices"]:
    mine = on.get(dev["index"], [])
    assert dev["jobs"] == len(mine) and dev["reservations"] == mine[:128], (dev["index"], dev["jobs"])
assert max(len(v) for v in on.values()) > 128

# The CLI (libgpum follows the cursors).
env = dict(os.environ)
run = lambda *a: subprocess.run([os.environ["GPUM_BIN"], *a], env=env, capture_output=True,
                                text=True, timeout=120)
p = run("jobs")
assert p.returncode == 0, p.stderr
rows = [l for l in p.stdout.splitlines() if l.startswith("r-")]
assert len(rows) == N - 2, len(rows)
p = run("jobs", "--json", "--all")
assert p.returncode == 0, p.stderr
doc = json.loads(p.stdout)
got = [r["id"] for r in doc["reservations"]]
assert len(got) == N - 2 and len(set(got)) == N - 2, len(got)
assert {page1[-1], ahead} & set(got) == set()
assert len(doc["ended"]) >= 2
p = run("jobs", "--state", "QUEUED", "--label", "odd-*")
assert p.returncode == 0, p.stderr
odd_now = walk(label="odd-*", state="QUEUED")[0]
assert [l.split()[0] for l in p.stdout.splitlines() if l.startswith("r-")] == odd_now
p = run("jobs", "--state", "RELEASED")
assert p.returncode == 2, (p.returncode, p.stderr)
p = run("status")
assert p.returncode == 0 and "queued" in p.stdout, p.stderr
p = run("top", "--once")
assert p.returncode == 0, p.stderr
# The Python package reads every page too.
py = "import gpum, json; print(json.dumps([r[\"id\"] for r in gpum.reservations(state=\"QUEUED\")]))"
penv = dict(env, GPUM_LIBRARY=os.path.join(os.environ["GPUM_BUILD_DIR"], "lib", "libgpum.so"),
            PYTHONPATH=os.path.join(os.environ["GPUM_SOURCE_DIR"], "bindings", "python"))
ldd = subprocess.run(["ldd", penv["GPUM_LIBRARY"]], capture_output=True, text=True).stdout
if not re.search(r"lib[at]san", ldd):  # an interpreter cannot load a sanitizer late
    p = subprocess.run([sys.executable, "-c", py], env=penv, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == q_ids

# REST: pages of limit, every one, no duplicate, no gap, the total; filters; 400s.
def rest_walk(q):
    ids, cursor, totals = [], None, set()
    while True:
        path = "/api/v1/reservations?" + q + ("&cursor=" + cursor if cursor else "")
        b = expect("GET", path, 200, timeout=120)  # a child at SCHED_IDLE: slow on a busy machine
        totals.add(b["total"])
        ids += [r["id"] for r in b["reservations"]]
        cursor = b["next_cursor"]
        if cursor is None:
            return ids, totals
# gpum jobs --json --all streams the pages (each written as it comes): one document, laid out
# as json_dumps(JSON_INDENT(2)) lays it out (as json.dumps(indent=2) does), every reservation
# once and each the document REST lists (which shows no token), the ended ones as REST does.
def rest_docs(q):
    docs, cursor, ended, totals = [], None, None, set()
    while True:
        b = expect("GET", "/api/v1/reservations?" + q + ("&cursor=" + cursor if cursor else ""), 200,
                   timeout=120)  # a child at SCHED_IDLE: slow on a busy machine
        docs += b["reservations"]
        ended = b["ended"] if ended is None else ended
        totals.add(b["total"])
        cursor = b["next_cursor"]
        if cursor is None:
            return docs, ended, totals
p = run("jobs", "--json", "--all")
assert p.returncode == 0, p.stderr
doc = json.loads(p.stdout)
assert p.stdout == json.dumps(doc, indent=2) + "\n", "not the JSON_INDENT(2) layout"
assert list(doc) == ["reservations", "ended"], list(doc)
r_docs, r_ended, r_tot = rest_docs("limit=777")
notoken = lambda rs: [{k: v for k, v in r.items() if k != "token"} for r in rs]
assert len(doc["reservations"]) == N - 2 and notoken(doc["reservations"]) == r_docs, len(r_docs)
assert notoken(doc["ended"]) == r_ended and len(r_ended) >= 2, r_ended[:2]
assert sum(1 for r in doc["reservations"] if r["label"] == "\x01" * 127) > 50
r_ids = [r["id"] for r in r_docs]
live = [i for i in ids if i not in (page1[-1], ahead)]
assert r_ids == live and r_tot == {N - 2}, (len(r_ids), r_tot)
b = expect("GET", "/api/v1/reservations", 200, timeout=120)
assert len(b["reservations"]) == 1000 and b["total"] == N - 2 and b["next_cursor"]
assert "ended" in b
rq, rq_tot = rest_walk("limit=5000&state=QUEUED&label=odd-*&owner=%d" % me)
assert rq == odd_now and rq_tot == {len(rq)}
assert rest_walk("owner=%d&limit=10" % (me + 1))[0] == []
import pwd
name = pwd.getpwuid(me).pw_name
assert rest_walk("owner=%s&state=GRANTED,QUEUED&limit=10000" % name)[1] == {N - 2}
for q, says in [("limit=0", "limit"), ("limit=10001", "limit"), ("limit=x", "limit"),
                ("cursor=zz", "cursor"), ("cursor=c1.0", "cursor"), ("state=ENDED", "state"),
                ("owner=no-such-user-here", "owner"), ("owner=-3", "owner"),
                ("label=" + "y" * 200, "label"), ("sort=id", "sort")]:
    expect_err("GET", "/api/v1/reservations?" + q, 400, "EINVAL", says)

# /metrics: whole (promtool reads it without a complaint), its counts add up to the live
# reservations, and every granted one has its rows (one per device it holds). It may be as old
# as metrics.max_age: read until it shows the state of now (nothing changes meanwhile).
docs, cursor = [], ""
while cursor is not None:
    b = expect("GET", "/api/v1/reservations?state=GRANTED&limit=10000" + cursor, 200, timeout=120)
    docs += b["reservations"]
    cursor = b["next_cursor"] and "&cursor=" + b["next_cursor"]
devs = {r["id"]: [str(x["index"]) for x in r["devices"]] for r in docs}
assert len(devs) == len(g_ids) - 2, (len(devs), len(g_ids))  # two were released
def scrape():
    st, h, text = call("GET", "/metrics", timeout=60)
    assert st == 200 and h["content-type"].startswith("text/plain; version=0.0.4"), (st, h)
    series = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        assert m, line
        labels = tuple(re.findall(r"(\w+)=\"((?:[^\"\\]|\\.)*)\"", m.group(3) or ""))
        key = (m.group(1), labels)
        assert key not in series, "duplicate series " + line
        series[key] = float(m.group(4))
    return text, series
def one(series, name, **want):
    got = [v for (n, l), v in series.items() if n == name and
           all(dict(l).get(k) == w for k, w in want.items())]
    assert len(got) == 1, (name, want, got)
    return got[0]
seen = []
def current():
    seen[:] = scrape()
    return (one(seen[1], "gpum_reservations", state="granted") == len(devs) and
            one(seen[1], "gpum_reservations", state="queued") == len(q_ids))
until(current, 30, "/metrics counting the live reservations")
text, series = seen
p = subprocess.run([os.environ["PROMTOOL"], "check", "metrics"], input=text, capture_output=True,
                   text=True, timeout=120)
assert p.returncode == 0 and not (p.stdout + p.stderr).strip(), p.stdout + p.stderr
assert one(series, "gpum_queue_length") == len(q_ids)
rows = {}
for (n, l), v in series.items():
    if n == "gpum_reservation_reserved_bytes":
        d = dict(l)
        rows.setdefault(d["reservation"], []).append(d["gpu"])
        assert v == (cap0 if d["label"] == "fill-0" else 1 << 20), (l, v)
assert {k: sorted(v) for k, v in rows.items()} == {k: sorted(v) for k, v in devs.items()}
used = {dict(l)["reservation"] for (n, l), v in series.items() if n == "gpum_reservation_used_bytes"}
assert used == set(devs), len(used ^ set(devs))
reserved = sum(v for (n, l), v in series.items() if n == "gpum_device_reserved_bytes")
assert reserved == cap0 + (len(devs) - 1) * (1 << 20), (reserved, len(devs))
' || t_fail "a list face failed at 10,000 reservations"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
t_ok "every list face pages through 10,000 reservations"
