#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd out of descriptors: a connection waiting on each listener (the socket and HTTP) cannot
# be accepted (EMFILE); gpumd pauses accepting after each failure, counts every failure in
# /metrics (gpumd_accept_failures_total) and logs them at most once per 10 s per listener (it
# logged one line per 100 ms pause, and the HTTP listener spun), then accepts the waiting
# connections once descriptors are free again and says so once.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

command -v prlimit >/dev/null || { echo "skip: no prlimit"; exit 77; }
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start --log-level info
t_wait_file "$GPUM_STATE_DIR/http.addr"

python3 - "$GD_PID" "$(cat "$GPUM_STATE_DIR/http.addr")" "$GD_ERR" "$GPUM_SOCKET" <<'PY' || t_fail "out of descriptors"
import http.client, os, re, socket, subprocess, sys, time
pid, addr, log, sock_path = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
host, port = addr.rsplit(":", 1)
# Opened before the limit: the way to read /metrics while gpumd can accept nothing.
kept = http.client.HTTPConnection(host, int(port), timeout=10)

def failures():
    kept.request("GET", "/metrics")
    body = kept.getresponse().read().decode()
    got = dict(re.findall(r'^gpumd_accept_failures_total\{listener="(\w+)"\} (\d+)$', body, re.M))
    return {k: int(v) for k, v in got.items()}

def lines():  # what gpumd logged about failed accepts (libevent's own warning included)
    text = open(log, errors="replace").read()
    return {"socket": len(re.findall(r"socket: accept failed", text)),
            "http": len(re.findall(r"HTTP: accept failed|Error from accept", text))}

failures()  # connects the kept-alive connection now, while gpumd can accept it
hard = subprocess.run(["prlimit", "--pid", pid, "--nofile", "--raw", "--noheadings", "--output", "HARD"],
                      capture_output=True, text=True, check=True).stdout.strip()
in_use = len(os.listdir("/proc/%s/fd" % pid))
subprocess.run(["prlimit", "--pid", pid, "--nofile=%d:" % in_use], check=True)
t0 = time.monotonic()
waiting = []
try:
    # Into the backlogs: gpumd cannot accept them. Eight of each, as a descriptor that gpumd
    # had open for a moment when it was counted may let one in.
    for _ in range(8):
        u = socket.socket(socket.AF_UNIX)
        u.connect(sock_path)
        waiting.append((u, socket.create_connection((host, int(port)), timeout=10)))
    # Until each listener has failed 25 times (2.5 s of 100 ms pauses), or, where failures
    # are not counted, until one of them has logged 25 lines.
    deadline = time.monotonic() + 60
    while True:
        f, n = failures(), lines()
        if min(f.get("socket", 0), f.get("http", 0)) >= 25 or max(n.values()) >= 25:
            break
        assert time.monotonic() < deadline, "accepts did not fail: %r %r" % (f, n)
        time.sleep(0.02)
finally:
    subprocess.run(["prlimit", "--pid", pid, "--nofile=%s:" % hard], check=True)
held = time.monotonic() - t0
n = lines()
allowed = 1 + int(held // 10)  # the first failure, then one line per 10 s at most
assert all(v <= allowed for v in n.values()), \
    "failed accepts logged %r times in %.1f s (at most %d each)" % (n, held, allowed)
# Descriptors are free again: the waiting connections are served.
for u, t in waiting:
    t.sendall(b"GET /api/v1/gpu/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert t.recv(12).startswith(b"HTTP/1.1 200"), "a waiting HTTP connection"
    u.sendall(b'{"id": 1, "op": "status"}\n')
    u.settimeout(10)
    assert b'"ok":true' in u.recv(65536), "a waiting socket connection"
deadline = time.monotonic() + 20
while not all(s in open(log).read() for s in ("socket: accepting again", "HTTP: accepting again")):
    assert time.monotonic() < deadline, "no 'accepting again' line"
    time.sleep(0.02)
f = failures()
assert f["socket"] >= 25 and f["http"] >= 25, f
print("ok: %r failed accepts in %.1f s logged %r times" % (f, held, n))
PY
t_ok "out of descriptors: failed accepts counted, logged at most once per 10 s, served after"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
