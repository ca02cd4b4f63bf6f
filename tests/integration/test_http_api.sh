#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd's REST API on a simulated 2xH100 node: every endpoint's success and its error cases
# (status, nodes with filters, validate, allocate granted/queued/never-fit, reservations get,
# list, renew, delete, setup-pytorch/tensorflow for granted and queued reservations, health,
# monitoring, alerts, config, /metrics, unknown paths and methods), the readiness line and
# http.addr, and that HTTP reservations are the same ledger entries the socket protocol sees.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"
source "$(dirname "$0")/http_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
out=$(ls "$T_SCRATCH"/gpumd.out.*)
addr=$(cat "$GPUM_STATE_DIR/http.addr")
grep -q "^gpumd ready: .* http=$addr\$" "$out" || { cat "$out"; t_fail "readiness line lacks http=$addr"; }
[[ $addr =~ ^127\.0\.0\.1:[0-9]+$ ]] || t_fail "http.addr '$addr'"
t_ok "readiness line and http.addr give the bound address ($addr)"

"$GPUM_BIN" sim set "$GPUM_SIM_NODE" --device 0 --util 47 >/dev/null || t_fail "sim set"
hp '
s = expect("GET", "/api/v1/gpu/status", 200)
assert len(s["devices"]) == 2 and s["queue"] == [], s
sm = s["summary"]
assert sm["devices"] == 2 and sm["usable"] == 2 and sm["memory_total"] == 2 * 80 * 2**30, sm
assert 0 <= sm["memory_used_ratio"] <= 1 and sm["memory_reserved_ratio"] == 0, sm
assert s["devices"][0]["state"] == "AVAILABLE" and "utilization_ratio" in s["devices"][0], s
assert s["node"]["reservations"] == 0, s
# the memory of a device is the view of the driver: free as NVML says (not total - used), with the
# own share of the driver as driver_reserved, the same figures as gpum status --json
import subprocess
cli = json.loads(subprocess.run([os.environ["GPUM_BIN"], "status", "--json"], check=True,
                                capture_output=True).stdout)["devices"]
for dev in s["devices"]:
    m, c = dev["memory"], cli[dev["index"]]["memory"]
    assert m["driver_reserved"] > 0 and m["used"] + m["free"] + m["driver_reserved"] == m["total"], m
    assert (m["free"], m["driver_reserved"]) == (c["free"], c["driver_reserved"]), (m, c)
# reals are written in their shortest form (0.47, never 0.46999999999999997): device 0 runs at
# 47% (set below, before this snippet), which the status shows as utilization_ratio 0.47
import re
deadline = time.monotonic() + 15
while expect("GET", "/api/v1/gpu/status", 200)["devices"][0]["utilization_ratio"] != 0.47:
    assert time.monotonic() < deadline, "utilization 0.47 not seen"
text = raw(b"GET /api/v1/gpu/status HTTP/1.0\r\n\r\n").decode().split("\r\n\r\n", 1)[1]
reals = re.findall(r"[-0-9.]+(?:e[-+]?[0-9]+)?(?=[,}\]])", text)
assert "0.47" in reals, text
for x in reals:
    if "." in x or "e" in x:
        assert x == repr(float(x)), "float noise: %s in %s" % (x, text)
expect_err("GET", "/api/v1/gpu/status?x=1", 400, "EINVAL", "x")
# the seed's status keys beside gpum's: device 0 at 47%, device 1 idle
st = expect("GET", "/api/v1/gpu/status", 200)
u = st["utilization"]
assert abs(u["gpu_utilization"] - (0.47 + st["devices"][1]["utilization_ratio"]) / 2) < 1e-9, st
assert u["gpu_memory_usage"] == st["summary"]["memory_used_ratio"], st
assert st["total_nodes"] == 1 and re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$", st["timestamp"]), st
an = st["available_nodes"]
assert len(an) == 1 and an[0]["gpu_type"] == "H100" and an[0]["available_gpus"] == 2, an
n = expect("GET", "/api/v1/gpu/nodes?gpu_type=H100&min_memory_gb=80", 200)
assert len(n["nodes"]) == 1 and len(n["nodes"][0]["devices"]) == 2, n
nd = n["nodes"][0]  # the seed's fields beside gpum's
assert nd["node_name"] == nd["hostname"] and nd["gpu_type"] == "H100", nd
assert nd["available_gpus"] == 2 and nd["memory_per_gpu"] == 80 and 0 <= nd["utilization"] <= 1, nd
# a filter that matches nothing lists no node (it was a node with no devices)
assert expect("GET", "/api/v1/gpu/nodes?gpu_type=A100", 200)["nodes"] == []
assert expect("GET", "/api/v1/gpu/nodes?min_memory_gb=81", 200)["nodes"] == []
assert len(expect("GET", "/api/v1/gpu/nodes?gpu_type=*H100*", 200)["nodes"][0]["devices"]) == 2
expect_err("GET", "/api/v1/gpu/nodes?min_memory_gb=lots", 400, "EINVAL", "min_memory_gb")
expect_err("GET", "/api/v1/gpu/nodes?min_memory_gb=-1", 400, "EINVAL", "min_memory_gb")
expect_err("GET", "/api/v1/gpu/nodes?gpu=1", 400, "EINVAL", "gpu")
' || t_fail "status and nodes"
t_ok "status (summary ratios, devices, queue) and nodes (gpu_type, min_memory_gb) with errors"

hp '
v = expect("POST", "/api/v1/gpu/validate", 200, body={"memory_gb": 10, "gpu_count": 2})
assert v["could_fit"] and v["fits_now"] and v["devices"] == [0, 1] and v["reason"] == "", v
v = expect("POST", "/api/v1/gpu/validate", 200, body={"memory_gb": 100})
assert not v["could_fit"] and not v["fits_now"] and "75.75 GiB" in v["reason"], v
v = expect("POST", "/api/v1/gpu/validate", 200, body={"memory_gb": 1, "gpu_count": 3})
assert not v["could_fit"], v
v = expect("POST", "/api/v1/gpu/validate", 200, body={"memory_gb": 1, "gpu_type": "A100"})
assert not v["could_fit"], v
expect_err("POST", "/api/v1/gpu/validate", 400, "EINVAL", "memory_gb", body={})
expect_err("POST", "/api/v1/gpu/validate", 400, "EINVAL", "memory_gb", body={"memory_gb": "8"})
expect_err("POST", "/api/v1/gpu/validate", 400, "EINVAL", "gpu_count",
           body={"memory_gb": 8, "gpu_count": 1.5})
expect_err("POST", "/api/v1/gpu/validate", 400, "EINVAL", "colour",
           body={"memory_gb": 8, "colour": "red"})
expect_err("GET", "/api/v1/gpu/validate", 405, "ENOTSUP", "POST")
# validate changes nothing
assert expect("GET", "/api/v1/reservations", 200)["reservations"] == []
' || t_fail "validate"
t_ok "validate: fits now, never fits (too big, too many GPUs, no such model), bad input"

hp '
tok = token()
r = expect("POST", "/api/v1/gpu/allocate", 201, tok=tok,
           body={"memory_gb": 60, "gpu_count": 2, "label": "train", "ttl": 120, "priority": 5})
r = r["reservation"]
assert r["state"] == "GRANTED" and r["lease"] == "ttl" and r["ttl_ms"] == 120000, r
assert r["label"] == "train" and r["bytes_per_gpu"] == 60 * 2**30 and len(r["devices"]) == 2, r
assert "token" not in r, r
q = expect("POST", "/api/v1/gpu/allocate", 202, tok=tok, body={"memory_gb": 40})["reservation"]
assert q["state"] == "QUEUED" and q["queue_position"] == 0 and q["label"] == "http", q
assert q["ttl_ms"] == 600000, q
v = expect("POST", "/api/v1/gpu/validate", 200, body={"memory_gb": 40})
assert v["could_fit"] and not v["fits_now"] and v["reason"], v
expect_err("POST", "/api/v1/gpu/allocate", 422, "ENEVERFIT", "GiB", tok=tok, body={"memory_gb": 90})
expect_err("POST", "/api/v1/gpu/allocate", 409, "EBUSY", None, tok=tok, body={"memory_gb": 40, "wait": False})
expect_err("POST", "/api/v1/gpu/allocate", 400, "EINVAL", "wait", tok=tok, body={"memory_gb": 1, "wait": "no"})
expect_err("POST", "/api/v1/gpu/allocate", 400, "EINVAL", "ttl", tok=tok,
           body={"memory_gb": 1, "ttl": 0})
expect_err("POST", "/api/v1/gpu/allocate", 400, "EINVAL", "priority", tok=tok,
           body={"memory_gb": 1, "priority": 500})
expect_err("POST", "/api/v1/gpu/allocate", 400, "EINVAL", "on_timeout", tok=tok,
           body={"memory_gb": 1, "on_timeout": "later"})
expect_err("POST", "/api/v1/gpu/allocate", 400, "EINVAL", "devices", tok=tok,
           body={"memory_gb": 1, "devices": "0"})
expect_err("POST", "/api/v1/gpu/allocate", 400, "EINVAL", "lease", tok=tok,
           body={"memory_gb": 1, "lease": "pid"})
# the status (a cached rendering) follows every change: the grant and the queued request
s = expect("GET", "/api/v1/gpu/status", 200)
assert s["node"]["reservations"] == 2 and [x["id"] for x in s["queue"]] == [q["id"]], s
assert s["summary"]["memory_reserved"] == 2 * 60 * 2**30, s
assert all(r["id"] in d["reservations"] for d in s["devices"]), s
# list and get; the socket protocol sees the same reservations (owned by gpumd, ttl leases)
lst = expect("GET", "/api/v1/reservations", 200)["reservations"]
assert [x["id"] for x in lst] == [r["id"], q["id"]], lst
g = expect("GET", "/api/v1/reservations/" + r["id"], 200)["reservation"]
assert g["state"] == "GRANTED" and g["id"] == r["id"], g
c = gpumd_client.Client()
sock = c.ok("list", all=True)["reservations"]
assert [x["id"] for x in sock] == [r["id"], q["id"]] and sock[0]["lease"] == "ttl", sock
expect_err("GET", "/api/v1/reservations/r-999", 404, "ENOENT", "r-999")
expect_err("GET", "/api/v1/reservations/bogus", 400, "EINVAL", "bogus")
expect_err("GET", "/api/v1/reservations?all=1", 400, "EINVAL", "all")
# renew
n = expect("POST", "/api/v1/reservations/%s/renew" % r["id"], 200, tok=tok, body={"ttl": 300})
assert n["reservation"]["expires_ns"] > r["expires_ns"], n
expect("POST", "/api/v1/reservations/%s/renew" % r["id"], 200, tok=tok)
expect_err("POST", "/api/v1/reservations/%s/renew" % r["id"], 400, "EINVAL", "ttl", tok=tok,
           body={"ttl": "long"})
expect_err("POST", "/api/v1/reservations/%s/renew" % r["id"], 400, "EINVAL", "extra", tok=tok,
           body={"extra": 1})
expect_err("POST", "/api/v1/reservations/r-999/renew", 404, "ENOENT", None, tok=tok)
# a socket reservation with a connection lease cannot be renewed
cr = c.ok("reserve", bytes_per_gpu=2**30)["reservation"]
expect_err("POST", "/api/v1/reservations/%s/renew" % cr["id"], 400, "EINVAL", "connection",
           tok=tok)
c.ok("release", reservation=cr["id"])
# a ttl reservation made over the socket can be renewed and released over HTTP too
tr = c.ok("reserve", bytes_per_gpu=2**30, lease="ttl", ttl_ms=60000)["reservation"]
expect("POST", "/api/v1/reservations/%s/renew" % tr["id"], 200, tok=tok, body={"ttl": 120})
d = expect("DELETE", "/api/v1/reservations/" + tr["id"], 200, tok=tok)["reservation"]
assert d["state"] == "RELEASED" and d["uid"] == os.getuid(), d
# setup for a granted reservation; 409 for a queued one
p = expect("POST", "/api/v1/gpu/setup-pytorch", 200, body={"reservation": r["id"]})
uuids = ",".join(d["uuid"] for d in r["devices"])
assert p["env"]["CUDA_VISIBLE_DEVICES"] == uuids and uuids.startswith("GPU-"), p
assert p["env"]["WORLD_SIZE"] == "2" and p["env"]["LOCAL_WORLD_SIZE"] == "2", p
assert p["env"]["PET_NPROC_PER_NODE"] == "2" and p["env"]["MASTER_PORT"] == "29500", p
assert p["env"]["GPUM_RESERVATION_ID"] == r["id"], p
assert abs(p["settings"]["per_process_memory_fraction"] - 0.75) < 1e-6, p
assert p["settings"]["nproc_per_node"] == 2 and "--nproc-per-node=2" in p["settings"]["launch"], p
assert "set_per_process_memory_fraction(0.7500" in p["python"], p
t = expect("POST", "/api/v1/gpu/setup-tensorflow", 200, body={"reservation": r["id"]})
assert t["env"]["CUDA_VISIBLE_DEVICES"] == uuids and t["env"]["TF_FORCE_GPU_ALLOW_GROWTH"] == "true", t
assert t["settings"]["memory_limit_mib"] == 60 * 1024 and t["settings"]["memory_growth"] is True, t
assert "memory_limit=61440" in t["python"] and "MirroredStrategy" in t["python"], t
expect_err("POST", "/api/v1/gpu/setup-pytorch", 409, "ESTATE", "QUEUED", body={"reservation": q["id"]})
expect_err("POST", "/api/v1/gpu/setup-tensorflow", 404, "ENOENT", None, body={"reservation": "r-999"})
# no reservation: a GPU configuration, which needs memory_gb as allocate does
expect_err("POST", "/api/v1/gpu/setup-pytorch", 400, "EINVAL", "memory_gb", body={})
expect_err("POST", "/api/v1/gpu/setup-tensorflow", 422, "ENEVERFIT", "can never fit on this node",
           body={"memory_gb": 100})
expect_err("POST", "/api/v1/gpu/setup-pytorch", 400, "EINVAL", "reservation",
           body={"reservation": 7})
expect_err("POST", "/api/v1/gpu/setup-pytorch", 400, "EINVAL", "master_port",
           body={"reservation": r["id"], "master_port": 70000})
# delete: the queued one is granted once the first goes
d = expect("DELETE", "/api/v1/reservations/" + r["id"], 200, tok=tok)["reservation"]
assert d["state"] == "RELEASED" and d["reason"] == "released over HTTP", d
until(lambda: expect("GET", "/api/v1/reservations/" + q["id"], 200)["reservation"]["state"] == "GRANTED",
      what="the queued reservation to be granted")
g = expect("GET", "/api/v1/reservations/" + r["id"], 200)["reservation"]
assert g["state"] == "RELEASED", g
s = expect("GET", "/api/v1/gpu/status", 200)
assert s["queue"] == [] and s["summary"]["memory_reserved"] == 40 * 2**30, s
expect_err("DELETE", "/api/v1/reservations/" + r["id"], 404, "ENOENT", "already ended", tok=tok)
expect_err("DELETE", "/api/v1/reservations/r-999", 404, "ENOENT", None, tok=tok)
expect_err("DELETE", "/api/v1/reservations/" + q["id"], 400, "EINVAL", "body", tok=tok, body={"x": 1})
s1 = expect("POST", "/api/v1/gpu/setup-pytorch", 200, body={"reservation": q["id"]})
assert "WORLD_SIZE" not in s1["env"] and s1["settings"]["nproc_per_node"] == 1, s1
expect("DELETE", "/api/v1/reservations/" + q["id"], 200, tok=tok)
assert c.ok("status")["devices"][0]["reserved"] == 0
' || t_fail "allocate / reservations / setup"
t_ok "allocate (201 granted, 202 queued, 422 never fits, 400s), list/get/renew/delete, setup-pytorch/tensorflow (409 queued)"

hp '
h = expect("GET", "/api/v1/gpu/health", 200)
assert h["status"] == "ok" and h["healthy"] and len(h["devices"]) == 2, h
assert h["devices"][0]["state"] == "AVAILABLE" and h["devices"][0]["responsive"], h
until(lambda: expect("GET", "/api/v1/gpu/monitoring?window=30s", 200)["devices"][0]["stats"]["utilization_gpu"]["count"] > 0,
      what="samples in the monitoring window")
m = expect("GET", "/api/v1/gpu/monitoring?window=30s", 200)
assert m["window_s"] == 30 and m["units"]["memory_used"] == "bytes", m
d0 = m["devices"][0]
assert d0["latest"]["memory_total"] == 80 * 2**30 and d0["latest"]["timestamp_ns"] > 0, d0
st = d0["stats"]["memory_used"]
assert st["count"] >= 1 and st["min"] <= st["mean"] <= st["max"], st
expect_err("GET", "/api/v1/gpu/monitoring?window=soon", 400, "EINVAL", "window")
expect_err("GET", "/api/v1/gpu/monitoring?window=1h", 400, "EINVAL", "window")
a = expect("GET", "/api/v1/alerts", 200)
assert a["enabled"] is True and a["active"] == [] and isinstance(a["history"], list), a
expect_err("GET", "/api/v1/alerts?limit=-3", 400, "EINVAL", "limit")
cfg = expect("GET", "/api/v1/config", 200)
o = cfg["options"]
assert o["http.listen"] == {"value": "127.0.0.1:0", "source": "environment"}, o["http.listen"]
assert o["memory_fraction"]["source"] == "default" and cfg["state_dir"] == os.environ["GPUM_STATE_DIR"], cfg
assert token() not in json.dumps(cfg), "the token leaked into /api/v1/config"
st, hd, text = call("GET", "/metrics")
assert st == 200 and hd["content-type"].startswith("text/plain; version=0.0.4") and "# TYPE" in text, (st, hd)
expect_err("GET", "/api/v1/nothing", 404, "ENOENT", "/api/v1/nothing")
expect_err("PUT", "/api/v1/gpu/status", 405, "ENOTSUP", "GET")
st, hd, _ = call("DELETE", "/api/v1/gpu/allocate")
assert st == 405 and hd["allow"] == "POST", (st, hd)
st, hd, body = call("HEAD", "/api/v1/gpu/status")
assert st == 200 and body == "", (st, body)
' || t_fail "health, monitoring, alerts, config, metrics, 404, 405"
t_ok "health, monitoring (latest + window stats), alerts, config (token hidden), /metrics, 404, 405"

# Health turns 503 when no device is usable: XID 79 makes both GPUs fall off the bus.
"$GPUM_BIN" sim inject "$T_NODE" --device 0 --xid 79 >/dev/null
"$GPUM_BIN" sim inject "$T_NODE" --device 1 --xid 79 >/dev/null
hp '
until(lambda: call("GET", "/api/v1/gpu/health")[0] == 503, secs=20, what="health 503")
h = expect("GET", "/api/v1/gpu/health", 503)
assert h["status"] == "unhealthy" and not h["healthy"] and h["usable_devices"] == 0, h
assert all(d["state"] == "ERROR" for d in h["devices"]), h
' || t_fail "health 503"
t_ok "health answers 503 when no device is usable"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
[ -e "$GPUM_STATE_DIR/http.addr" ] && t_fail "http.addr left behind after a clean stop"
t_ok "gpumd stops cleanly with HTTP on (http.addr removed)"
