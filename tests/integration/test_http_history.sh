#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GET /api/v1/gpu/history on a simulated 2xH100 node: the document's shape (interval_ms,
# window_s, fields, every device with its points oldest first, one a second); the reserved
# column follows a reservation (POST /api/v1/gpu/allocate) and the unmanaged column a process
# holding memory without one (gpum sim hold), on that device only; the "sample" events carry
# the same memory_reserved and memory_unmanaged; ?window= keeps only the points of that last
# stretch; HEAD answers the headers; bad windows and unknown parameters are 400 EINVAL.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"
source "$(dirname "$0")/http_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
export GPUM_MONITOR_INTERVAL=100ms
gd_start
GIB=$((1 << 30))

hp '
def hist(q=""):
    return expect("GET", "/api/v1/gpu/history" + q, 200)
def enough():
    h = hist()
    return all(len(d["points"]) >= 3 for d in h["devices"])
until(enough, 20, "three points per device")
h = hist()
assert h["interval_ms"] == 1000 and h["window_s"] == 3600, h
assert h["fields"] == ["t", "memory_used", "memory_reserved", "memory_unmanaged", "memory_total",
                       "utilization_gpu", "temperature", "power"], h["fields"]
assert [d["index"] for d in h["devices"]] == [0, 1], h
st = expect("GET", "/api/v1/gpu/status", 200)
for d, sd in zip(h["devices"], st["devices"]):
    assert d["uuid"] == sd["uuid"] and d["uuid"].startswith("GPU-"), (d["uuid"], sd["uuid"])
    ts = [p[0] for p in d["points"]]
    assert ts == sorted(ts) and len(set(ts)) == len(ts), ts
    # one point a second (the monitor samples every 100 ms; one up to 50 ms early counts)
    assert all(b - a >= 950 for a, b in zip(ts, ts[1:])), ts
    assert abs(ts[-1] / 1000 - time.time()) < 10, ts[-1]
    for p in d["points"]:
        assert len(p) == 8, p
        t, used, resv, unm, total, util, temp, power = p
        assert total == 80 * 2**30 and 0 <= used <= total, p
        assert resv == 0 and unm == 0, p
        assert 0 <= util <= 100 and 0 < temp < 120 and power > 0, p
print("ok: one point a second for every device, oldest first, the contract columns")
'
t_ok "history shape"

holder=$("$GPUM_BIN" sim hold "$GPUM_SIM_NODE" --device 1 --bytes 30GiB) || t_fail "sim hold"
[[ "$holder" =~ ^[0-9]+$ ]] || t_fail "sim hold printed '$holder'"
T_PIDS+=("$holder")
hp '
tok = token()
r = expect("POST", "/api/v1/gpu/allocate", 201, tok=tok,
           body={"memory_gb": 20, "devices": [0], "label": "hist"})["reservation"]
def last(i):
    return expect("GET", "/api/v1/gpu/history?window=10s", 200)["devices"][i]["points"][-1]
G = 2**30
# device 0: 20 GiB reserved, nothing unmanaged; device 1: the holder, 30 GiB unmanaged
until(lambda: last(0)[2] == 20 * G and last(1)[3] >= 30 * G, 20, "reserved and unmanaged columns")
p0, p1 = last(0), last(1)
assert p0[3] == 0 and p1[2] == 0 and p1[1] >= 30 * G, (p0, p1)
st = expect("GET", "/api/v1/gpu/status", 200)["devices"]
assert st[0]["reserved"] == 20 * G and st[1]["unmanaged"] == p1[3], st
print("ok: reserved column after an allocation, unmanaged after gpum sim hold")

# The live sample events carry the same two columns.
host, port = addr()
c = http.client.HTTPConnection(host, port, timeout=10)
c.request("GET", "/api/v1/events")
resp = c.getresponse()
seen, ev = {}, None
deadline = time.time() + 10
while len(seen) < 2 and time.time() < deadline:
    line = resp.readline().decode().rstrip("\n")
    if line.startswith("event: "):
        ev = line[7:]
    elif line.startswith("data: ") and ev == "sample":
        d = json.loads(line[6:])
        seen[d["gpu"]] = d
c.close()
assert set(seen) == {0, 1}, seen
assert seen[0]["memory_reserved"] == 20 * G and seen[0]["memory_unmanaged"] == 0, seen[0]
assert seen[1]["memory_reserved"] == 0 and seen[1]["memory_unmanaged"] >= 30 * G, seen[1]
assert "time_ns" in seen[0] and "memory_used" in seen[0], seen[0]
print("ok: sample events carry memory_reserved and memory_unmanaged")
expect("DELETE", "/api/v1/reservations/" + r["id"], 200, tok=tok)
until(lambda: last(0)[2] == 0, 20, "reserved back to 0 after the release")
print("ok: reserved column back to 0 after the release")
'
t_ok "reserved and unmanaged columns"
kill -9 "$holder"

hp '
# window: after 12 s of points, the 10 s window holds only the points of the last 10 s.
until(lambda: (lambda p: p[-1][0] - p[0][0] >= 12000)(
    expect("GET", "/api/v1/gpu/history", 200)["devices"][0]["points"]), 30, "12 s of points")
t0 = time.time()
h10 = expect("GET", "/api/v1/gpu/history?window=10s", 200)
h1h = expect("GET", "/api/v1/gpu/history?window=1h", 200)
assert h10["window_s"] == 10 and h1h["window_s"] == 3600, (h10["window_s"], h1h["window_s"])
for d10, d1h in zip(h10["devices"], h1h["devices"]):
    assert 1 <= len(d10["points"]) <= 11, len(d10["points"])
    assert all(p[0] >= (t0 - 10.5) * 1000 for p in d10["points"]), d10["points"][0]
    assert len(d1h["points"]) > len(d10["points"]), (len(d1h["points"]), len(d10["points"]))
    assert all(p in d1h["points"] for p in d10["points"]), "the windows disagree"
print("ok: window=10s keeps the last 10 s, window=1h everything")

st, hd, body = call("HEAD", "/api/v1/gpu/history")
assert st == 200 and hd["content-type"].startswith("application/json") and body == "", (st, hd, body)
print("ok: HEAD")
for w in ["5s", "9s", "2h", "61m", "abc", "", "-10s", "10x", "9999999999999999999999h"]:
    expect_err("GET", "/api/v1/gpu/history?window=" + w, 400, "EINVAL", "window")
expect_err("GET", "/api/v1/gpu/history?limit=3", 400, "EINVAL")
print("ok: bad windows and unknown parameters are 400 EINVAL")
'
t_ok "history window, HEAD and bad windows"
