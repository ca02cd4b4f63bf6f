#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Idle connections cannot lock the REST API out. One address that opens 256 connections and
# sends nothing (no token needed) holds at most http.max_connections_per_peer of them: each
# one past it closes that address's connection waiting longest. Several addresses together
# filling http.max_connections: a newcomer closes the connection waiting longest of the
# address that holds the most, and is served.
# An attacker that keeps reconnecting does not lock others out either. Every eviction is
# counted in /metrics. The peers are distinct loopback addresses (127.0.0.2, ...), which Linux
# routes to the host.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/http_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start --http-max-connections 8 --http-max-connections-per-peer 4 --http-timeout 60s --log-level info
t_wait_file "$GPUM_STATE_DIR/http.addr"

cat >"$T_SCRATCH/idle.py" <<'PY'
import select, socket, threading, time
from gpumd_http import addr, Fail, until

def idle(peer, n):
    """n connections from the address peer that send nothing."""
    return [socket.create_connection(addr(), timeout=10, source_address=(peer, 0))
            for _ in range(n)]

def closed(s):
    """Whether gpumd closed s (EOF or reset), without waiting."""
    r, _, _ = select.select([s], [], [], 0)
    if not r:
        return False
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True

def open_count(socks):
    return sum(not closed(s) for s in socks)

def get(path, peer="127.0.0.1"):
    """GET path from peer on a fresh connection: the whole answer (b"" if none)."""
    s = socket.create_connection(addr(), timeout=10, source_address=(peer, 0))
    s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    return data

def health(peer="127.0.0.1"):
    """GET /api/v1/gpu/health from peer on a fresh connection: the status."""
    data = get(b"/api/v1/gpu/health", peer)
    return int(data.split(b" ", 2)[1]) if data else 0

def evicted():
    data = get(b"/metrics")
    for line in data.decode().splitlines():
        if line.startswith("gpumd_http_connections_evicted_total "):
            return int(line.split()[1])
    raise Fail("no gpumd_http_connections_evicted_total in /metrics")
PY
export PYTHONPATH="$T_SCRATCH:$PYTHONPATH"

hp '
from idle import *
# The attack of the issue: 256 idle connections from one address, no token.
socks = idle("127.0.0.2", 256)
# Each one past the fourth closes the oldest of that address: four stay open, the newest.
until(lambda: open_count(socks) == 4, 20, "the address held to 4 connections")
assert [closed(s) for s in socks[-4:]] == [False] * 4, "not the newest four kept"
assert health() == 200, "others are locked out"
assert evicted() == 252, evicted()
for s in socks:
    s.close()
' || t_fail "256 idle connections from one address"
t_ok "256 idle connections from one address: it holds 4 (http.max_connections_per_peer), others are served"

hp '
from idle import *
base = evicted()
until(lambda: health() == 200, 10, "the closed connections gone")
# Three addresses, four idle connections each: twelve past http.max_connections (8).
groups = [idle("127.0.0.%d" % k, 4) for k in (3, 4, 5)]
flat = [s for g in groups for s in g]
# Each one past the limit closed a connection of the address holding the most: 8 stay open,
# and no address lost all of its connections to the others.
until(lambda: open_count(flat) == 8, 20, "8 connections open")
held = [open_count(g) for g in groups]
assert min(held) >= 2, held
# A newcomer closes the connection waiting longest of an address holding the most, and is
# served.
assert health("127.0.0.6") == 200
until(lambda: open_count(flat) == 7, 20, "one more closed for the newcomer")
after = [open_count(g) for g in groups]
assert sum(after) == 7 and max(held) - 1 in [a for a, b in zip(after, held) if a < b], (held, after)
assert evicted() >= base + 5, (evicted(), base)
for s in flat:
    s.close()
' || { grep HTTP "$GD_ERR" | tail -30 >&2; t_fail "idle connections from several addresses"; }
t_ok "idle connections filling http.max_connections: a newcomer closes one of the address holding most and is served"

hp '
from idle import *
until(lambda: health() == 200, 10, "the closed connections gone")
# An attacker that reconnects as fast as it can, from two addresses.
stop = threading.Event()
opened = [0]
def attack(peer):
    held = []
    while not stop.is_set():
        try:
            held.append(socket.create_connection(addr(), timeout=5, source_address=(peer, 0)))
            opened[0] += 1
        except OSError:
            pass
        if len(held) > 64:
            held.pop(0).close()
    for s in held:
        s.close()
ts = [threading.Thread(target=attack, args=(p,)) for p in ("127.0.0.7", "127.0.0.8")]
[t.start() for t in ts]
try:
    until(lambda: opened[0] > 200, 20, "the attack under way")
    got = [health() for _ in range(20)]
finally:
    stop.set()
    [t.join() for t in ts]
assert got == [200] * 20, got
' || t_fail "a reconnecting attacker"
t_ok "an attacker reconnecting from two addresses does not lock others out"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
