#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Hostile and broken HTTP input against gpumd: malformed JSON, bodies that are not objects,
# deep nesting, invalid UTF-8, wrong types and unknown fields (400 naming the field), a
# memory_gb missing, not above 0 or below one byte (each said as such), a body
# just over http.max_body (413 in the error shape) and a huge one (413, connection closed), an
# over-long header block, more connections than http.max_connections (the one waiting longest
# for a request is closed to make room; test_http_idle_conns for more), and a slow client
# that sends half a request and stalls: gpumd keeps serving others meanwhile (a concurrent
# request succeeds), drops the staller after http.timeout, and nothing changes. Last, an
# allocate answered 201 survives a SIGKILL of gpumd right after the answer.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"
source "$(dirname "$0")/http_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start --http-max-connections 6 --http-timeout 3s --http-max-body 4KiB

hp '
tok = token()
P = "/api/v1/gpu/allocate"
J = {"Content-Type": "application/json"}
expect_err("POST", P, 400, "EPARSE", "malformed JSON", tok=tok, raw_body=b"{\"memory_gb\": ", headers=J)
expect_err("POST", P, 400, "EPARSE", None, tok=tok, raw_body=b"{\"label\": \"\xff\xfe\", \"memory_gb\": 1}")
expect_err("POST", P, 400, "EPARSE", None, tok=tok, raw_body=b"{\"memory_gb\": 1, \"memory_gb\": 2}")
expect_err("POST", P, 400, "EINVAL", "JSON object", tok=tok, raw_body=b"[1, 2]")
expect_err("POST", P, 400, "EINVAL", "JSON object", tok=tok, raw_body=b"42")
deep = b"{\"memory_gb\": 1, \"label\": " + b"[" * 20 + b"]" * 20 + b"}"
expect_err("POST", P, 400, "EPROTO", "nested", tok=tok, raw_body=deep)
for body, field in [({"memory_gb": "8GiB"}, "memory_gb"), ({"memory_gb": True}, "memory_gb"),
                    ({"memory_gb": 1, "gpu_count": "2"}, "gpu_count"),
                    ({"memory_gb": 1, "gpu_type": 100}, "gpu_type"),
                    ({"memory_gb": 1, "priority": 1.5}, "priority"),
                    ({"memory_gb": 1, "timeout": -1}, "timeout"),
                    ({"memory_gb": 1, "ttl": "10m"}, "ttl"),
                    ({"memory_gb": 1, "label": ["x"]}, "label"),
                    ({"memory_gb": 1, "devices": [0.5]}, "devices"),
                    ({"memory_gb": 1, "gpus": 2}, "gpus"),
                    ({"memory_gb": 1, "bytes_per_gpu": 5}, "bytes_per_gpu")]:
    expect_err("POST", P, 400, "EINVAL", field, tok=tok, body=body)
    expect_err("POST", "/api/v1/gpu/validate", 400, "EINVAL", field, body=body)
# memory_gb: missing, not above 0, and below one byte are three different mistakes.
for body, says in [({"label": "x"}, "\"memory_gb\" is required"),
                   ({"memory_gb": 0}, "\"memory_gb\" must be above 0"),
                   ({"memory_gb": -0.0}, "\"memory_gb\" must be above 0"),
                   ({"memory_gb": 1e-300}, "\"memory_gb\" 1e-300 is below the smallest size, 1 byte"),
                   ({"memory_gb": 5e-10}, "is below the smallest size, 1 byte")]:
    expect_err("POST", P, 400, "EINVAL", says, tok=tok, body=body)
    expect_err("POST", "/api/v1/gpu/validate", 400, "EINVAL", says, body=body)
assert expect("POST", "/api/v1/gpu/validate", 200, body={"memory_gb": 1 / 1073741824})["could_fit"]
expect_err("POST", "/api/v1/gpu/setup-pytorch", 400, "EINVAL", "framework",
           body={"reservation": "r-1", "framework": "jax"})
expect_err("POST", "/api/v1/gpu/setup-tensorflow", 400, "EINVAL", "reservation",
           body={"reservation": 1})
# a body just over http.max_body: 413 in the error shape
big = json.dumps({"memory_gb": 1, "label": "x" * 5000}).encode()
expect_err("POST", P, 413, "ERANGE", "http.max_body", tok=tok, raw_body=big)
# a huge body (10 MiB announced): refused with 413 before it is read, connection closed
hdr = ("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
       "Content-Length: 10485760\r\n\r\n" % (P, tok)).encode()
s = socket.create_connection(addr(), timeout=10)
s.sendall(hdr)
try:
    for _ in range(40):
        s.sendall(b"{" * 262144)
except OSError:
    pass
resp = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        resp += b
except OSError:
    pass
s.close()
assert resp == b"" or resp.startswith(b"HTTP/1.1 413"), resp[:200]
# an over-long header block: refused, connection closed
resp = raw(b"GET /api/v1/gpu/status HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
assert resp == b"" or resp.split(b" ")[1][:1] == b"4", resp[:200]
# nothing of that changed anything, and gpumd still serves
assert expect("GET", "/api/v1/reservations", 200)["reservations"] == []
assert expect("GET", "/api/v1/gpu/health", 200)["healthy"]
' || t_fail "bad input"
t_ok "malformed JSON, non-objects, nesting, bad UTF-8, wrong types, unknown fields, 413s, big headers: errors, nothing changed"

hp '
tok = token()
# A slow client sends half a request header and stalls; another half-sends a mutating call.
slow = socket.create_connection(addr(), timeout=20)
slow.sendall(b"GET /api/v1/gpu/status HTTP/1.1\r\nHost: x\r\nX-Slow: ")
half = socket.create_connection(addr(), timeout=20)
body = json.dumps({"memory_gb": 1}).encode()
half.sendall(("POST /api/v1/gpu/allocate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
              "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (tok, len(body))).encode()
             + body[:5])
# Meanwhile others are served at once, concurrently.
results = []
def worker():
    t0 = time.monotonic()
    st, _, doc = call("GET", "/api/v1/gpu/status", timeout=2)
    results.append((st, time.monotonic() - t0))
ts = [threading.Thread(target=worker) for _ in range(3)]
[t.start() for t in ts]
[t.join() for t in ts]
assert len(results) == 3 and all(st == 200 and dt < 2 for st, dt in results), results
# After http.timeout (3 s) gpumd drops both stallers; the half-sent allocate never happened.
t0 = time.monotonic()
for s in (slow, half):
    s.settimeout(20)
    data = b""
    try:
        while True:
            b = s.recv(4096)
            if not b:
                break
            data += b
    except ConnectionResetError:
        pass
    s.close()
assert time.monotonic() - t0 < 15, "stalled clients were not dropped"
assert expect("GET", "/api/v1/reservations", 200)["reservations"] == []
assert gpumd_client.Client().ok("status")["node"]["reservations"] == 0
' || t_fail "slow client"
t_ok "a client stalled mid-header (and one mid-body) does not stop others; dropped after http.timeout; nothing changed"

hp '
# http.max_connections = 6: six kept-alive connections are served; a seventh is served too, and
# the connection that has waited longest for its next request is closed to make room.
conns = []
for i in range(6):
    c = http.client.HTTPConnection(*addr(), timeout=5)
    c.request("GET", "/api/v1/gpu/health")
    r = c.getresponse(); r.read()
    assert r.status == 200, r.status
    conns.append(c)
resp = raw(b"GET /api/v1/gpu/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
assert resp.startswith(b"HTTP/1.1 200"), resp[:200]
conns[0].sock.settimeout(10)
assert conns[0].sock.recv(1) == b"", "the longest waiting connection is still open"
for c in conns[1:]:  # the others are still served on their connections
    c.request("GET", "/api/v1/gpu/health")
    r = c.getresponse(); r.read()
    assert r.status == 200, r.status
for c in conns:
    c.close()
' || t_fail "too many connections"
t_ok "a connection past http.max_connections is served: the one waiting longest makes room"

# curl sends "Expect: 100-continue" for bodies over 1 KiB: answered, then the body is read.
addr=$(cat "$GPUM_STATE_DIR/http.addr")
pad=$(printf '%*s' 2000 '')
code=$(curl -s -o "$T_OUT" -w '%{http_code}' "http://$addr/api/v1/gpu/validate" \
  -H 'Content-Type: application/json' -d "{\"memory_gb\": 1$pad}")
[ "$code" = 200 ] && grep -q '"could_fit":true' "$T_OUT" || { cat "$T_OUT"; t_fail "curl 100-continue: $code"; }
code=$(curl -s -o "$T_OUT" -w '%{http_code}' "http://$addr/api/v1/gpu/validate" -d "{\"memory_gb\": 1$pad$pad$pad}")
[ "$code" = 413 ] && grep -q '"ERANGE"' "$T_OUT" || { cat "$T_OUT"; t_fail "curl 413: $code"; }
t_ok "curl with Expect: 100-continue: a 2 KB body is served, a 6 KB one gets the JSON 413"

# A 201 means committed: SIGKILL right after the answer, restart, the reservation is there.
hp '
r = expect("POST", "/api/v1/gpu/allocate", 201, tok=token(), body={"memory_gb": 2, "label": "durable"})
open(args[0], "w").write(r["reservation"]["id"])
' "$T_SCRATCH/durable.id" || t_fail "allocate before SIGKILL"
gd_stop KILL
gd_start --http-max-connections 6 --http-timeout 3s --http-max-body 4KiB
hp '
r = expect("GET", "/api/v1/reservations/" + open(args[0]).read(), 200)["reservation"]
assert r["state"] == "GRANTED" and r["label"] == "durable" and r["lease"] == "ttl", r
' "$T_SCRATCH/durable.id" || t_fail "reservation lost across SIGKILL"
t_ok "an allocate answered 201 survives a SIGKILL of gpumd (answers leave after the commit)"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
t_ok "gpumd survived it all and stops cleanly"
