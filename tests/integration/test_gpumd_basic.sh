#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd basics on a simulated 2xH100 node: it starts in the foreground, answers hello and
# status, refuses a second daemon on the same socket and state directory, survives malformed,
# oversized, deeply nested and unknown input (errors, nothing changes), drops a client that
# never reads, and stops cleanly on SIGTERM and SIGINT (exit 0, socket removed).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
[ -S "$GPUM_SOCKET" ] || t_fail "no socket at $GPUM_SOCKET"

gd_py '
c = Client()
h = c.ok("hello", client="test", protocol=1)
assert h["server"] == "gpumd" and h["protocol"] == 1, h
assert h["uid"] == os.getuid() and h["pid"] == os.getpid(), h
c.err("hello", "ENOTSUP", protocol=99)
s = c.ok("status")
assert len(s["devices"]) == 2, s
d0 = s["devices"][0]
assert d0["name"].startswith("NVIDIA H100"), d0
assert d0["state"] == "AVAILABLE" and d0["memory"]["total"] == 80 * 2**30, d0
assert d0["reserved"] == 0 and d0["reservations"] == [] and s["queue"] == [], s
r = c.ok("reserve", bytes_per_gpu=1)["reservation"]
assert r["state"] == "GRANTED" and r["reason"] == "granted on GPU 0", r
r = c.ok("release", reservation=r["id"])["reservation"]
why = "released by uid %d pid %d" % (os.getuid(), os.getpid())
assert r["state"] == "RELEASED" and r["reason"] == why, r
g = c.ok("get", reservation=r["id"])["reservation"]
assert g["id"] == r["id"] and g["state"] == "RELEASED" and g["reason"] == why, g
live = c.ok("reserve", bytes_per_gpu=2**20, label="get-me")["reservation"]
other = Client()  # anyone may look, as anyone may list everyone
g = other.ok("get", reservation=live["id"])["reservation"]
listed = [x for x in other.ok("list", all=True)["reservations"] if x["id"] == live["id"]]
assert g["state"] == "GRANTED" and g["label"] == "get-me" and "token" not in g, g
assert listed and all(listed[0][k] == g[k] for k in listed[0] if k != "token"), (listed, g)
assert "no reservation r-99999" in c.err("get", "ENOENT", reservation="r-99999")
c.err("get", "EINVAL", reservation="seven")
c.err("get", "EINVAL")
assert "unknown field" in c.err("get", "EINVAL", reservation=live["id"], all=True)
c.ok("release", reservation=live["id"])
' || t_fail "hello/status"
t_ok "hello and status; a reservation granted and released with its reasons; get of one, live and ended"

t_expect 1 "$GPUMD"
grep -q "another gpumd" "$T_ERR" || { cat "$T_ERR" >&2; t_fail "second gpumd: no clear message"; }
t_ok "a second gpumd on the same socket is refused"

gd_py '
c = Client()
# Malformed JSON: an error reply, the connection stays.
c.send_raw(b"{\"id\": 1, \"op\": \n")
m = c.read_msg(); assert m["ok"] is False and m["error"]["code"] == "EPARSE" and m["id"] is None, m
c.send_raw(b"[1, 2]\n")
m = c.read_msg(); assert m["error"]["code"] == "EPROTO", m
c.send_raw(b"{\"id\": 2, \"op\": \"status\", \"x\": \"\xff\xfe\"}\n")
m = c.read_msg(); assert m["error"]["code"] == "EPARSE", m
deep = "{\"id\": 3, \"op\": \"status\", \"a\": " + "[" * 9 + "]" * 9 + "}\n"
c.send_raw(deep.encode())
m = c.read_msg(); assert m["error"]["code"] == "EPROTO" and "nested" in m["error"]["message"], m
ok8 = "{\"id\": 4, \"op\": \"status\", \"a\": " + "[" * 7 + "]" * 7 + "}\n"
c.send_raw(ok8.encode())
m = c.read_msg(); assert m["error"]["code"] == "EINVAL" and "a" in m["error"]["message"], m
assert "unknown field" in c.err("status", "EINVAL", bogus=1)
assert "unknown op" in c.err("explode", "EINVAL")
c.send_raw(b"{\"op\": \"status\"}\n")
m = c.read_msg(); assert m["error"]["code"] == "EINVAL" and "id" in m["error"]["message"], m
c.send_raw(b"{\"id\": 5, \"id\": 6, \"op\": \"status\"}\n")
m = c.read_msg(); assert m["error"]["code"] == "EPARSE", m
c.send_raw(b"\n  \n")
assert "bytes_per_gpu" in c.err("reserve", "EINVAL")
assert "gpus" in c.err("reserve", "EINVAL", bytes_per_gpu=1, gpus=0)
assert "priority" in c.err("reserve", "EINVAL", bytes_per_gpu=1, priority=101)
assert "lease" in c.err("reserve", "EINVAL", bytes_per_gpu=1, lease="forever")
assert "ttl_ms" in c.err("reserve", "EINVAL", bytes_per_gpu=1, lease="ttl")
c.err("release", "EINVAL", reservation="x-1")
c.err("release", "ENOENT", reservation="r-999")
assert c.ok("status")["node"]["reservations"] == 0
# The same connection still works after all that.
c.ok("hello")
# An over-long line: an error, then gpumd closes the connection (it may do so before it has
# read the rest of the line: then the send fails, and the error reply is still there to read).
def send_all_or_closed(c, data):
    try:
        c.send_raw(data)
    except (BrokenPipeError, ConnectionResetError):
        pass
send_all_or_closed(c, b"{\"id\": 7, \"op\": \"status\", \"pad\": \"" + b"x" * 70000 + b"\"}\n")
m = c.read_msg(); assert m["error"]["code"] == "EPROTO" and "longer" in m["error"]["message"], m
assert c.at_eof(), "connection not closed after an over-long line"
# So is one without a newline at all.
c = Client()
send_all_or_closed(c, b"x" * 200000)
m = c.read_msg(); assert m["error"]["code"] == "EPROTO", m
assert c.at_eof()
Client().ok("hello")
' || t_fail "bad input"
t_ok "malformed, oversized, nested and unknown input get errors; gpumd stays up"

gd_py '
# Framing, however the bytes arrive: a request sent a byte at a time; a line of exactly the
# limit (64 KiB, newline excluded) sent in pieces is served, one byte more is refused; many
# requests in one send are each answered, in order.
c = Client()
for b in b"{\"id\": 1, \"op\": \"hello\"}\n":
    c.send_raw(bytes([b]))
assert c.read_msg()["id"] == 1
head, tail = b"{\"id\": 2, \"op\": \"hello\"", b"}"
line = head + b" " * (65536 - len(head) - len(tail)) + tail
assert len(line) == 65536
for i in range(0, len(line), 1000):
    c.send_raw(line[i:i + 1000])
c.send_raw(b"\n")
m = c.read_msg(); assert m["ok"] is True and m["id"] == 2, m
c.send_raw(b"".join(b"{\"id\": %d, \"op\": \"hello\"}\n" % i for i in range(3, 503)))
for i in range(3, 503):
    m = c.read_msg(); assert m["ok"] is True and m["id"] == i, (i, m)
c.send_raw(head + b" " * (65537 - len(head) - len(tail)) + tail + b"\n")
m = c.read_msg(); assert m["error"]["code"] == "EPROTO" and "longer" in m["error"]["message"], m
assert c.at_eof()
' || t_fail "framing"
t_ok "a request a byte at a time, a line of exactly 64 KiB in pieces and 500 pipelined requests are served; 64 KiB + 1 is refused"

gd_py '
# Durable replies more than the socket takes at once: 1,500 reserves pipelined in one send and
# left unread until gpumd has committed them all (another connection sees them live), so the
# ledger writer, which writes a committed batch replies itself, finds the socket full, and the
# loop writes what it left. Every reply arrives, whole and in order, then the releases too.
c = Client(timeout=30)
n = 1500
label = "x" * 120
c.send_raw(b"".join(b"{\"id\": %d, \"op\": \"reserve\", \"bytes_per_gpu\": 1048576, \"label\": \"%s\"}\n"
                    % (i, label.encode()) for i in range(1, n + 1)))
w = Client()
deadline = time.monotonic() + 30
while w.ok("status")["node"]["reservations"] < n:
    if time.monotonic() > deadline:
        raise Fail("gpumd did not take the 1,500 reserves")
size = 0
ids = []
for i in range(1, n + 1):
    m = c.read_msg()
    assert m is not None and m.get("id") == i and m.get("ok") is True, (i, m)
    assert m["reservation"]["label"] == label, m
    ids.append(m["reservation"]["id"])
    size += len(json.dumps(m))
opt = lambda o: c.sock.getsockopt(socket.SOL_SOCKET, o)
buffered = opt(socket.SO_RCVBUF) + opt(socket.SO_SNDBUF)
assert size > 2 * buffered, ("the replies fit the socket buffers", size, buffered)
c.next_id = n + 1
c.ok_many("release", [{"reservation": r} for r in ids])
assert w.ok("status")["node"]["reservations"] == 0
' || t_fail "pipelined durable replies"
t_ok "1,500 pipelined reserves left unread until committed: every reply arrives whole and in order"

gd_py '
# Clients that go while their durable replies are on their way (the ledger writer writes them
# as a batch commits; a write to a closed socket fails and the loop ends the connection): 300
# connections each send up to four reserves (bound to the connection) and close, some at once,
# some after reading one reply. Their reservations all end with them; gpumd serves on.
w = Client()
socks = []
for i in range(300):
    c = Client()
    c.send_raw(b"".join(b"{\"id\": %d, \"op\": \"reserve\", \"bytes_per_gpu\": 1048576}\n" % k
                        for k in range(1, 1 + i % 5)))
    if i % 3 == 0:
        c.close()
    else:
        socks.append(c)
    if i % 3 == 1 and i % 5 >= 2:
        assert c.read_msg()["ok"] is True
for c in socks:
    c.close()
deadline = time.monotonic() + 30
while w.ok("status")["node"]["reservations"] != 0:
    if time.monotonic() > deadline:
        raise Fail("reservations of closed connections still live: %r" % w.ok("status")["node"])
assert w.ok("reserve", bytes_per_gpu=1048576)["reservation"]["state"] == "GRANTED"
' || t_fail "clients gone while written to"
t_ok "300 clients that close with durable replies unread or half read: their reservations end, gpumd serves on"

gd_py '
c = Client(timeout=5)
# A backslash before a non-ASCII character: jansson quotes the bad escape up to its first
# byte, which is no UTF-8; the reply must still come, as one valid line. A JSON value that
# is not an object is EPROTO, not EPARSE (docs/protocol.md).
cases = [(b"[\"\\\xc3\xa9\"]", "EPARSE"),
         (b"{\"id\":\"\\\xe4\xb8\xad\",\"op\":\"hello\"}", "EPARSE"),
         (b"{\"id\":1,\"op\":\"hello\",\"client\":\"\\\xf0\x9f\x98\x80\"}", "EPARSE"),
         (b"[\"\\\xc3\"]", "EPARSE"),
         (b"[\"\xe4\xb8\"]", "EPARSE"),
         (b"1", "EPROTO"), (b"\"x\"", "EPROTO"), (b"null", "EPROTO"), (b"true", "EPROTO"),
         (b"-2.5", "EPROTO"), (b"\"\xc3\xa9\"", "EPROTO"), (b"[]", "EPROTO")]
for line, code in cases:
    c.send_raw(line + b"\n")
    m = c.read_msg()  # json.loads of the raw bytes: fails unless the line is UTF-8
    assert m is not None, line
    assert m["ok"] is False and m["id"] is None and m["error"]["code"] == code, (line, m)
    # Exactly one reply: the next reply is the one to the next request.
    c.ok("hello")
' || t_fail "one reply per bad line"
t_ok "a bad escape before non-ASCII text and a non-object value each get exactly one error reply"

gd_py '
import socket
lazy = Client()
lazy.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
other = Client()
req = (json.dumps({"id": 1, "op": "status"}) + "\n").encode() * 64
lazy.sock.settimeout(20)
dropped = False
for i in range(20000):
    try:
        lazy.send_raw(req)
    except (BrokenPipeError, ConnectionResetError):
        dropped = True
        break
    except socket.timeout:
        break
    if i % 50 == 0:
        other.ok("hello")  # the loop is not stalled by the lazy reader
if not dropped:
    dropped = lazy.at_eof(5)
assert dropped, "a client that never reads was not disconnected"
other.ok("hello")
' || t_fail "non-reading client"
t_ok "a client that never reads is disconnected; others are served meanwhile"

gd_py '
import socket
c = Client()
c.send_raw(b"{\"id\": 1, \"op\": \"hello\"}\n{\"id\": 2, \"op\": \"reserve\", \"bytes_per_gpu\": 1}\n")
c.sock.shutdown(socket.SHUT_WR)
assert c.read_msg()["id"] == 1
r = c.read_msg()
assert r["id"] == 2 and r["reservation"]["state"] == "GRANTED", r
assert c.read_msg() is None
deadline = time.monotonic() + 10
while Client().ok("list", all=True)["reservations"]:
    assert time.monotonic() < deadline, "the half-closed client kept its reservation"
' || t_fail "half-closed client"
t_ok "a client that shuts down its writing side still gets its replies; its lease ends"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || { cat "$GD_ERR" >&2; t_fail "SIGTERM: exit $GD_RC"; }
[ ! -e "$GPUM_SOCKET" ] || t_fail "socket left behind after SIGTERM"
t_ok "SIGTERM: exit 0, socket removed"

gd_start
gd_py 'Client().ok("hello")' || t_fail "restart"
if command -v prlimit >/dev/null; then
  # Out of descriptors: gpumd pauses accepting instead of spinning or dying, and serves the
  # waiting clients once others leave.
  prlimit --pid "$GD_PID" --nofile=48:48 || t_fail "prlimit"
  gd_py '
cs = [Client() for _ in range(60)]
for c in cs:
    c.send({"id": 1, "op": "hello"})
answered, waiting = [], []
for c in cs:
    try:
        c.read_msg(time.monotonic() + 0.05)
        answered.append(c)
    except Fail:
        waiting.append(c)
assert answered and waiting, (len(answered), len(waiting))
for c in answered:
    c.close()
for c in waiting:  # each leaves once answered, making room for the next (there may be more
    m = c.read_msg(time.monotonic() + 10)  # waiting clients than free descriptors)
    assert m and m["ok"], m
    c.close()
' || { tail -3 "$GD_ERR" >&2; t_fail "descriptor exhaustion"; }
  grep -q "socket: accept failed: .*accepting pauses 100 ms" "$GD_ERR" || t_fail "accept failures not logged"
  t_ok "out of descriptors: accept pauses, waiting clients are served later"
fi
gd_stop INT
[ "$GD_RC" -eq 0 ] || t_fail "SIGINT: exit $GD_RC"
[ ! -e "$GPUM_SOCKET" ] || t_fail "socket left behind after SIGINT"
t_ok "SIGINT: exit 0, socket removed"

# Start-up failures name the culprit and exit 1.
GPUM_STATE_DIR=/dev/null/state t_expect 1 "$GPUMD"
grep -q "/dev/null" "$T_ERR" || { cat "$T_ERR" >&2; t_fail "bad state_dir not named"; }
long="$T_SCRATCH/$(printf 'x%.0s' {1..120}).sock"
GPUM_SOCKET=$long t_expect 1 "$GPUMD"
grep -qi "socket" "$T_ERR" || { cat "$T_ERR" >&2; t_fail "long socket path not reported"; }
mkdir -p "$T_SCRATCH/bad"
head -c 8192 /dev/urandom >"$T_SCRATCH/bad/ledger.db"
GPUM_STATE_DIR=$T_SCRATCH/bad t_expect 1 "$GPUMD"
grep -q "ledger.db" "$T_ERR" || { cat "$T_ERR" >&2; t_fail "corrupt ledger not named"; }
[ ! -e "$GPUM_SOCKET" ] || t_fail "a failed start left its socket"
GPUM_SOCKET_MODE=abc t_expect 1 "$GPUMD"
grep -q "socket_mode 'abc'" "$T_ERR" || { cat "$T_ERR" >&2; t_fail "bad socket_mode not named"; }
t_ok "start-up failures: bad state_dir, socket path, corrupt ledger, socket_mode"

# Only the configured devices are managed.
gd_start --devices 1
gd_py '
c = Client()
s = c.ok("status")
assert [d["index"] for d in s["devices"]] == [1], s["devices"]
r = c.ok("reserve", bytes_per_gpu="1GiB")["reservation"]
assert r["devices"][0]["index"] == 1, r
c.err("reserve", "ENEVERFIT", bytes_per_gpu=1, devices=["0"])
' || t_fail "devices option"
gd_stop TERM
t_ok "devices: only the listed devices are managed"

t_expect 2 "$GPUMD" --no-such-flag
grep -q "no-such-flag" "$T_ERR" || t_fail "bad flag not named"
t_expect 0 "$GPUMD" --help
grep -q "usage: gpumd" "$T_OUT" || t_fail "--help"
t_ok "flags"
