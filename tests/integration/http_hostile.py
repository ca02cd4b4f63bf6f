# SPDX-License-Identifier: Apache-2.0
# Hostile clients against gpumd's HTTP face (run by test_http_hostile.sh; also runnable by
# hand against a gpumd under valgrind: GPUM_SOCKET, GPUM_STATE_DIR and GPUMD_PID in the
# environment, gpumd started with --http-max-connections 64 --http-timeout 2s
# --http-max-body 4KiB).
# python3 standard library only, raw sockets. Phases, each followed by the same check (the
# daemon answers GET /api/v1/gpu/health and the reservations made over the socket protocol
# before everything are all still there, unchanged):
#   garbage  deterministic malformed input: request lines, header floods, NULs, non-UTF-8,
#            bad lengths, chunked bodies, numbers out of range, ambiguous queries, HEAD (no
#            body, Content-Length of the GET body, a request behind it answered as itself)
#   pipeline many requests in one write, answered in order; the same byte by byte
#   abandon  mutating requests whose client closes before the reply (FIN: carried out exactly
#            once; RST: at most once)
#   churn    many concurrent connections opening and closing abruptly; the connection count
#            does not leak (exactly http.max_connections are held afterwards, the next one
#            closing the one that waited longest)
#   sse      event streams that disconnect abruptly during a burst of events, one that
#            floods the daemon with bytes it never reads (closed, bounded memory), and
#            requests refused past the stream limit (their connections stay counted: one
#            more connection closes the one of them waiting longest)
#   slowloris clients trickling a request a byte at a time: closed after http.timeout
#   fuzz     a seeded random fuzz of a few thousand requests, bounded in time
# No response may be a 500: every bad input is the client's fault (4xx) or refused.
import json
import os
import random
import socket
import struct
import sys
import threading
import time

from gpumd_http import addr, token, Fail
import gpumd_client

MAX_CONNS = int(os.environ.get("HOSTILE_MAX_CONNS", "64"))
FUZZ_SECS = float(os.environ.get("HOSTILE_FUZZ_SECS", "15"))
FUZZ_COUNT = int(os.environ.get("HOSTILE_FUZZ_COUNT", "3000"))
SEED = int(os.environ.get("HOSTILE_SEED", "20261122"))
GPUMD_PID = int(os.environ["GPUMD_PID"])
TOK = token()
HOST, PORT = addr()


# ---- a small HTTP/1.1 response reader over raw bytes ----------------------------------------

class Conn:
    def __init__(self, timeout=10):
        self.s = socket.create_connection((HOST, PORT), timeout=timeout)
        self.buf = b""
        self.eof = False

    def send(self, data):
        self.s.sendall(data)

    def _fill(self):
        try:
            b = self.s.recv(65536)
        except ConnectionResetError:
            b = b""
        if not b:
            self.eof = True
        self.buf += b

    def _line(self):
        while b"\r\n" not in self.buf:
            if self.eof:
                return None
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _take(self, n):
        while len(self.buf) < n:
            if self.eof:
                raise Fail("connection closed inside a body (%d of %d bytes)" % (len(self.buf), n))
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def response(self, head=False):
        """(status, {header: value}, body) of the next response, or None at a clean EOF."""
        line = self._line()
        if line is None:
            if self.buf:
                raise Fail("garbage instead of a status line: %r" % self.buf[:200])
            return None
        parts = line.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise Fail("bad status line %r" % line[:200])
        status = int(parts[1])
        hdrs = {}
        while True:
            h = self._line()
            if h is None:
                raise Fail("connection closed inside the headers")
            if h == b"":
                break
            k, _, v = h.partition(b":")
            hdrs[k.strip().lower().decode()] = v.strip().decode("latin-1")
        body = b""
        if head and hdrs.get("content-type") == "text/html":
            head = False  # evhttp's own error page for a request it could not parse
        if head or status in (204, 304) or 100 <= status < 200:
            return status, hdrs, body
        if hdrs.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int(self._line().split(b";")[0], 16)
                if size == 0:
                    self._line()
                    break
                body += self._take(size)
                self._take(2)
        elif "content-length" in hdrs:
            body = self._take(int(hdrs["content-length"]))
        else:
            while not self.eof:
                self._fill()
            body, self.buf = self.buf, b""
        return status, hdrs, body

    def closed_by_peer(self, secs=0):
        """Whether gpumd closed this connection (EOF or reset), waiting up to secs."""
        import select
        r, _, _ = select.select([self.s], [], [], secs)
        if not r:
            return False
        try:
            return self.s.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def close(self):
        self.s.close()

    def reset(self):
        """Closes with an RST instead of a FIN."""
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.s.close()


def req(method, path, body=b"", headers=(), tok=None):
    h = "%s %s HTTP/1.1\r\nHost: x\r\n" % (method, path)
    if tok:
        h += "Authorization: Bearer %s\r\n" % tok
    for k, v in headers:
        h += "%s: %s\r\n" % (k, v)
    if body or method in ("POST", "PUT", "PATCH"):
        h += "Content-Length: %d\r\n" % len(body)
    return h.encode() + b"\r\n" + body


def check_response(r, what):
    """Fails on a 500 or a malformed error document."""
    if r is None:
        return
    status, hdrs, body = r
    if status >= 500 and status not in (501, 503):  # 501: the HTTP layer, unknown method
        raise Fail("%s: answered %d: %r" % (what, status, body[:300]))
    if status >= 400 and body and hdrs.get("content-type", "").startswith("application/json"):
        doc = json.loads(body)
        if set(doc) != {"error"} or set(doc["error"]) != {"code", "message"}:
            raise Fail("%s: not the error shape: %r" % (what, doc))


def exchange(data, what, head=False, timeout=10, shut=True):
    """Sends data on a fresh connection (then a FIN when shut); returns every response until
    the peer closes."""
    c = Conn(timeout)
    out = []
    try:
        c.send(data)
        if shut:
            c.s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    try:
        while True:
            r = c.response(head=head and not out)
            if r is None:
                break
            check_response(r, what)
            out.append(r)
    except (ConnectionResetError, BrokenPipeError):
        pass
    c.close()
    return out


def get_json(path, tok=None, status=200):
    c = Conn()
    c.send(req("GET", path, tok=tok, headers=[("Connection", "close")]))
    st, h, body = c.response()
    c.close()
    if st != status:
        raise Fail("GET %s: %d, expected %d: %r" % (path, st, status, body[:300]))
    return json.loads(body) if body else None


def metric(name):
    c = Conn()
    c.send(req("GET", "/metrics", headers=[("Connection", "close")]))
    st, h, body = c.response()
    c.close()
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise Fail(name + " missing from /metrics")


def rss_kib():
    with open("/proc/%d/status" % GPUMD_PID) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise Fail("no VmRSS")


def until(fn, secs=10, what="condition"):
    end = time.monotonic() + secs
    last = None
    while time.monotonic() < end:
        try:
            if fn():
                return
        except (OSError, Fail) as e:
            last = e
        time.sleep(0.02)
    raise Fail("timed out waiting for %s (%s)" % (what, last))


# ---- the protected reservations and the check after each phase -----------------------------

sock = gpumd_client.Client()
protected = {}


def make_protected():
    for i in range(3):
        r = sock.ok("reserve", bytes_per_gpu="1GiB", label="keep-ttl-%d" % i, lease="ttl",
                    ttl_ms=3600 * 1000)["reservation"]
        protected[r["id"]] = None
    r = sock.ok("reserve", bytes_per_gpu="2GiB", gpus=2, label="keep-conn")["reservation"]
    protected[r["id"]] = None
    for r in get_json("/api/v1/reservations")["reservations"]:
        if r["id"] in protected:
            protected[r["id"]] = r
    assert all(protected.values()), protected


def check(phase):
    def healthy():
        return get_json("/api/v1/gpu/health")["healthy"]
    until(healthy, 15, "GET /api/v1/gpu/health after " + phase)
    now = {r["id"]: r for r in get_json("/api/v1/reservations")["reservations"]}
    for rid, r in protected.items():
        if now.get(rid) != r:
            raise Fail("after %s: reservation %s changed: %r -> %r" % (phase, rid, r, now.get(rid)))
    st = sock.ok("status")
    assert st["node"]["reservations"] >= len(protected), st
    os.kill(GPUMD_PID, 0)
    print("ok: %s: gpumd healthy, the %d protected reservations unchanged" % (phase, len(protected)))
    sys.stdout.flush()


# ---- garbage ----------------------------------------------------------------------------------

def phase_garbage():
    cases = [
        b"\x00\x01\x02\x03\r\n\r\n",
        b"GET\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"GARBAGE /api/v1/gpu/status HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /api/v1/gpu/status HTTP/1.1\r\n" + b"X: y\r\n" * 5000 + b"\r\n",
        b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\n\r\n",
        b"GET /api/v1/gpu/st\x00atus HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /api/v1/gpu/status HTTP/1.1\r\nHost: x\x00y\r\nX-\x00: \x00\r\n\r\n",
        b"GET /api/v1/gpu/status HTTP/1.1\r\nno colon here\r\n\r\n",
        b"GET /api/v1/gpu/status HTTP/1.1\r\n: empty name\r\n\r\n",
        b"GET /api/v1/gpu/status HTTP/1.1\r\n\tfolded: x\r\n\r\n",
        b"POST /api/v1/gpu/validate HTTP/1.1\r\nContent-Length: -5\r\n\r\n{}",
        b"POST /api/v1/gpu/validate HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n{}",
        b"POST /api/v1/gpu/validate HTTP/1.1\r\nContent-Length: 12x\r\n\r\n{}",
        b"POST /api/v1/gpu/validate HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"memory_gb\": 1}",
        b"POST /api/v1/gpu/validate HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        b"POST /api/v1/gpu/validate HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"ffffffffffffffff\r\n{}\r\n0\r\n\r\n",
        b"POST /api/v1/gpu/validate HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
        b"3\r\n{}\n\r\n0\r\n\r\n",
        b"POST /api/v1/gpu/validate HTTP/1.1\r\nContent-Length: 17\r\n\r\n{\"memory_gb\":\x00 1}",
        b"POST /api/v1/gpu/validate HTTP/1.1\r\nContent-Length: 4\r\n\r\n\xff\xfe\x00\x00",
        b"POST /api/v1/gpu/validate HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n{}",
        b"POST /api/v1/gpu/validate HTTP/1.1\r\nContent-Length: 2\r\nExpect: something\r\n\r\n{}",
        b"DELETE /api/v1/reservations/r-1 HTTP/1.1\r\nAuthorization: Bearer\r\n\r\n",
        b"DELETE /api/v1/reservations/r-1 HTTP/1.1\r\nAuthorization: Bearer " + TOK.encode()[:-1]
        + b"\r\n\r\n",
        b"DELETE /api/v1/reservations/r-1 HTTP/1.1\r\nAuthorization: Bearer " + TOK.encode()
        + b"x\r\n\r\n",
        b"DELETE /api/v1/reservations/r-1 HTTP/1.1\r\nAuthorization: Basic Zm9vOmJhcg==\r\n\r\n",
        b"GET /api/v1/gpu/nodes?min_memory_gb=%FF HTTP/1.1\r\n\r\n",
        b"GET /api/v1/gpu/nodes?gpu_type=%C3 HTTP/1.1\r\n\r\n",
        b"GET /api/v1/gpu/nodes?gpu_type=A%00B&min_memory_gb=1e308 HTTP/1.1\r\n\r\n",
        b"GET /api/v1/gpu/nodes?min_memory_gb=nan HTTP/1.1\r\n\r\n",
        b"GET /api/v1/gpu/nodes?min_memory_gb=-0 HTTP/1.1\r\n\r\n",
        b"GET /api/v1/gpu/nodes?gpu_type=" + b"*?" * 50 + b" HTTP/1.1\r\n\r\n",
        b"GET /api/v1/gpu/status?\xff\xfe=1 HTTP/1.1\r\n\r\n",
        b"GET /api/v1/gpu/status?a&&b==c HTTP/1.1\r\n\r\n",
        b"GET /api/v1/\xff\xfe HTTP/1.1\r\n\r\n",
        b"GET /" + b"a" * 119 + "\u00e9".encode() + b" HTTP/1.1\r\n\r\n",
        b"GET /api/v1/reservations/" + b"\xc3\xa9" * 31 + b" HTTP/1.1\r\n\r\n",
        b"GET /api/v1/reservations/" + b"9" * 60 + b" HTTP/1.1\r\n\r\n",
        b"GET /api/v1/reservations/r-" + b"9" * 40 + b" HTTP/1.1\r\n\r\n",
        b"GET /api/v1/reservations/r-18446744073709551616 HTTP/1.1\r\n\r\n",
        b"GET /api/v1/reservations/" + b"x" * 200 + b" HTTP/1.1\r\n\r\n",
        b"GET /api/v1/alerts?limit=99999999999999999999 HTTP/1.1\r\n\r\n",
        b"GET /api/v1/gpu/monitoring?window=99999999999999999999h HTTP/1.1\r\n\r\n",
        b"OPTIONS * HTTP/1.1\r\n\r\n",
        b"OPTIONS /api/v1/gpu/status HTTP/1.1\r\n\r\n",
        b"PUT /api/v1/gpu/allocate HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
        b"CONNECT 127.0.0.1:22 HTTP/1.1\r\n\r\n",
        b"TRACE / HTTP/1.1\r\n\r\n",
        b"GET http://evil.example/api/v1/gpu/status HTTP/1.1\r\n\r\n",
        b"GET /api/v1/gpu/status HTTP/1.0\r\n\r\n",
        b"GET /api/v1/gpu/status\r\n\r\n",
    ]
    for data in cases:
        exchange(data, "garbage %r" % data[:80])
    # Bodies: numbers where integers are expected, NaN/inf spellings, huge, -0, duplicates.
    bodies = [b'{"memory_gb": NaN}', b'{"memory_gb": Infinity}', b'{"memory_gb": -Infinity}',
              b'{"memory_gb": 1e308}', b'{"memory_gb": 1e400}', b'{"memory_gb": -0}',
              b'{"memory_gb": -0.0}', b'{"memory_gb": 1, "ttl": 1e308}',
              b'{"memory_gb": 1, "ttl": 0.0000001}', b'{"memory_gb": 1, "timeout": 1e18}',
              b'{"memory_gb": 1, "gpu_count": 2.0}', b'{"memory_gb": 1, "gpu_count": 1e2}',
              b'{"memory_gb": 1, "priority": 99999999999999999999999}',
              b'{"memory_gb": 1e-300}', b'{"memory_gb": 1, "min_memory_gb": 1e300}',
              b'{"memory_gb": 1, "devices": [99999999999999]}',
              b'{"memory_gb": 1, "devices": ["' + b"G" * 5000 + b'"]}',
              b'{"memory_gb": 1, "devices": ["\\u00e9' + "\u00e9".encode() * 2000 + b'"]}',
              b'{"memory_gb": 1, "label": "a\\u0000b"}', b'{"memory_gb": 1, "memory_gb": 1}',
              b'{"' + "\u00e9".encode() * 1500 + b'": 1}',
              b'{"memory_gb": 1, "on_timeout": "\xff"}', b'{"memory_gb": 1, "wait": null}']
    for b in bodies:
        for path in ("/api/v1/gpu/validate",):
            exchange(req("POST", path, b, headers=[("Connection", "close")]), "body %r" % b[:60])
    # HEAD: the headers of GET, with its Content-Length, and no body (a pipelined request
    # after it is answered as itself).
    get = exchange(req("GET", "/api/v1/config", headers=[("Connection", "close")]), "GET config")
    out = exchange(req("HEAD", "/api/v1/config") +
                   req("GET", "/api/v1/gpu/health", headers=[("Connection", "close")]),
                   "HEAD config", head=True, shut=False)
    if len(out) != 2 or out[0][0] != 200 or out[0][2] != b"" or out[1][0] != 200:
        raise Fail("HEAD then GET: %r" % (out,))
    if out[0][1].get("content-length") != str(len(get[0][2])):
        raise Fail("HEAD Content-Length %r, GET body %d bytes" %
                   (out[0][1].get("content-length"), len(get[0][2])))
    json.loads(out[1][2])
    for path in ("/api/v1/gpu/nodes?gpu=1", "/nope", "/api/v1/events", "/metrics"):
        out = exchange(req("HEAD", path) +
                       req("GET", "/api/v1/gpu/health", headers=[("Connection", "close")]),
                       "HEAD " + path, head=True, shut=False)
        if len(out) != 2 or out[0][2] != b"" or out[1][0] != 200:
            raise Fail("HEAD %s then GET: %r" % (path, out))
    # Error messages naming non-UTF-8 input are still JSON (4xx, never 500).
    out = exchange(b"GET /api/v1/gpu/nodes?min_memory_gb=%FF HTTP/1.1\r\nConnection: close\r\n\r\n",
                   "non-UTF-8 query")
    if out[0][0] != 400 or json.loads(out[0][2])["error"]["code"] != "EINVAL":
        raise Fail("non-UTF-8 query value: %r" % (out,))
    # Ambiguous queries: a parameter given twice, a NUL that would cut a value short.
    for q, what in [(b"gpu_type=A100&gpu_type=H100", b"twice"), (b"gpu_type=H%00x", b"NUL"),
                    (b"min_memory_gb=1&min_memory_gb=1", b"twice")]:
        out = exchange(b"GET /api/v1/gpu/nodes?" + q + b" HTTP/1.1\r\nConnection: close\r\n\r\n",
                       "query " + q.decode())
        if out[0][0] != 400 or what not in out[0][2]:
            raise Fail("query %r: %r" % (q, out))
    out = exchange(b"GET /api/v1/\xff HTTP/1.1\r\nConnection: close\r\n\r\n", "non-UTF-8 path")
    if out[0][0] != 404:
        raise Fail("non-UTF-8 path: %r" % (out,))
    print("ok: garbage: %d malformed requests and %d bodies: 4xx or refused, never 500" %
          (len(cases), len(bodies)))


# ---- pipelining -------------------------------------------------------------------------------

def phase_pipeline():
    reqs, want = b"", []
    for i in range(60):
        k = i % 6
        if k == 0:
            reqs += req("GET", "/api/v1/gpu/health"); want.append(200)
        elif k == 1:
            reqs += req("POST", "/api/v1/gpu/validate", b'{"memory_gb": 1}'); want.append(200)
        elif k == 2:
            reqs += req("GET", "/nope/%d" % i); want.append(404)
        elif k == 3:
            reqs += req("POST", "/api/v1/gpu/validate", b'{"memory_gb": '); want.append(400)
        elif k == 4:
            # No token: the caller acts as the owner of its loopback socket (looked up once for
            # the connection), so a reservation that does not exist is 404, not 401.
            reqs += req("DELETE", "/api/v1/reservations/r-999999"); want.append(404)
        else:
            reqs += req("GET", "/api/v1/reservations/r-999999"); want.append(404)
    c = Conn()
    c.send(reqs)
    got = []
    for i in range(len(want)):
        r = c.response()
        if r is None:
            raise Fail("pipeline: EOF after %d of %d responses" % (i, len(want)))
        check_response(r, "pipelined #%d" % i)
        got.append(r[0])
    c.close()
    if got != want:
        raise Fail("pipeline: statuses %r, expected %r" % (got, want))
    # The same again one byte at a time, then a pipeline cut off by an RST mid-request.
    c = Conn()
    small = req("GET", "/api/v1/gpu/health") + req("GET", "/nope")
    for i in range(len(small)):
        c.send(small[i:i + 1])
    assert [c.response()[0], c.response()[0]] == [200, 404]
    c.send(reqs[:len(reqs) // 2])
    c.reset()
    print("ok: pipeline: %d requests in one write answered in order; byte-by-byte too" % len(want))


# ---- mutating requests abandoned before the reply ------------------------------------------

def http_reservations():
    return get_json("/api/v1/reservations")["reservations"]


def phase_abandon():
    n = 20
    for i in range(n):
        body = json.dumps({"memory_gb": 0.01, "label": "fin-%d" % i, "ttl": 600}).encode()
        c = Conn()
        c.send(req("POST", "/api/v1/gpu/allocate", body, tok=TOK))
        c.s.shutdown(socket.SHUT_WR)  # FIN right behind the complete request
        c.close()
        body = json.dumps({"memory_gb": 0.01, "label": "rst-%d" % i, "ttl": 600}).encode()
        c = Conn()
        c.send(req("POST", "/api/v1/gpu/allocate", body, tok=TOK))
        c.reset()
    # A complete request followed by a FIN is carried out: exactly once each.
    def all_fin():
        labels = [r["label"] for r in http_reservations()]
        return all(labels.count("fin-%d" % i) == 1 for i in range(n))
    until(all_fin, 15, "the %d FIN-closed allocations" % n)
    # Abandoned DELETEs: the reservation ends exactly once, the others are untouched.
    fins = [r for r in http_reservations() if r["label"].startswith("fin-")]
    for r in fins[:10]:
        c = Conn()
        c.send(req("DELETE", "/api/v1/reservations/" + r["id"], tok=TOK))
        c.reset() if int(r["id"][2:]) % 2 else (c.s.shutdown(socket.SHUT_WR), c.close())
    # A barrier: a request on a new connection is answered after gpumd read the others'
    # complete requests (the FIN ones); the RST ones may or may not have been read.
    until(lambda: sum(1 for r in http_reservations() if r["id"] in {f["id"] for f in fins[:10]}
                      and int(r["id"][2:]) % 2 == 0) == 0, 15, "the FIN-closed DELETEs")
    rs = http_reservations()
    labels = [r["label"] for r in rs]
    for lab in set(labels):
        if labels.count(lab) > 1 and lab.startswith(("fin-", "rst-")):
            raise Fail("reservation %s exists %d times" % (lab, labels.count(lab)))
    sock_ids = {r["id"] for r in sock.ok("list", all=True)["reservations"]}
    if sock_ids != {r["id"] for r in rs}:
        raise Fail("HTTP and socket lists differ: %r vs %r" % (sock_ids, [r["id"] for r in rs]))
    # Clean up what the phase made (so later phases have room).
    for r in rs:
        if r["label"].startswith(("fin-", "rst-")):
            c = Conn()
            c.send(req("DELETE", "/api/v1/reservations/" + r["id"], tok=TOK,
                       headers=[("Connection", "close")]))
            st = c.response()[0]
            c.close()
            if st not in (200, 404):
                raise Fail("DELETE %s: %d" % (r["id"], st))
    print("ok: abandon: FIN-closed allocations carried out exactly once, RST-closed at most "
          "once; HTTP and socket lists agree")


# ---- connection churn -------------------------------------------------------------------------

def phase_churn():
    stop = time.monotonic() + 3
    errors = []

    def worker(seed):
        rnd = random.Random(seed)
        try:
            while time.monotonic() < stop:
                try:
                    c = Conn(timeout=5)
                except OSError:
                    continue
                k = rnd.randrange(6)
                try:
                    if k == 1:
                        c.send(b"GET /api/v1/gpu/hea")
                    elif k == 2:
                        c.send(req("GET", "/api/v1/gpu/health"))
                    elif k == 3:
                        c.send(req("GET", "/api/v1/gpu/health"))
                        r = c.response()
                        if r is not None and r[0] not in (200, 503):
                            errors.append("churn: status %d" % r[0])
                    elif k == 4:
                        c.send(req("POST", "/api/v1/gpu/validate", b'{"memory_gb": 1}')[:-3])
                except OSError:
                    pass
                if rnd.random() < 0.5:
                    c.reset()
                else:
                    c.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    ts = [threading.Thread(target=worker, args=(SEED + i,)) for i in range(24)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    if errors:
        raise Fail("; ".join(errors[:5]))

    # Exactly http.max_connections kept-alive connections are held; the next one is served by
    # closing the one that waited longest: the count neither leaked up (a connection closed
    # before the limit) nor down (none closed past it).
    def all_slots():
        conns = []
        try:
            for i in range(MAX_CONNS):
                c = Conn(timeout=5)
                conns.append(c)
                c.send(req("GET", "/api/v1/gpu/health"))
                r = c.response()
                if r is None or r[0] != 200:
                    return False
            if any(c.closed_by_peer() for c in conns):
                raise Fail("a connection closed before %d were open" % MAX_CONNS)
            extra = Conn(timeout=5)
            extra.send(req("GET", "/api/v1/gpu/health"))
            r = extra.response()
            extra.close()
            if r is None or r[0] != 200:
                raise Fail("connection %d of %d: %r" % (MAX_CONNS + 1, MAX_CONNS, r))
            if not conns[0].closed_by_peer(5) or any(c.closed_by_peer() for c in conns[1:]):
                raise Fail("connection %d did not close exactly the one waiting longest" %
                           (MAX_CONNS + 1))
            return True
        finally:
            for c in conns:
                c.close()
    until(all_slots, 15, "%d connection slots after the churn" % MAX_CONNS)
    print("ok: churn: 24 threads opening and closing for 3 s; exactly %d connections held "
          "afterwards" % MAX_CONNS)


# ---- event streams ------------------------------------------------------------------------

def sse_open():
    c = Conn()
    c.send(req("GET", "/api/v1/events"))
    st, h, _ = c.response(head=True)  # the headers; the chunked body streams on
    if st != 200:
        raise Fail("events: %d" % st)
    return c


def phase_sse():
    base = metric("gpumd_event_streams")
    streams = [sse_open() for _ in range(20)]
    until(lambda: metric("gpumd_event_streams") == base + 20, 10, "20 streams")
    rnd = random.Random(SEED)
    for i in range(200):
        r = sock.ok("reserve", bytes_per_gpu="1MiB", label="burst")["reservation"]
        sock.ok("release", reservation=r["id"])
        if i % 10 == 0 and streams:
            c = streams.pop(rnd.randrange(len(streams)))
            c.reset() if rnd.random() < 0.5 else c.close()
    for c in streams:
        c.reset()
    until(lambda: metric("gpumd_event_streams") == base, 20, "the closed streams reaped")
    # A stream whose client floods it with bytes: gpumd stops reading, memory stays bounded.
    c = sse_open()
    before = rss_kib()
    c.s.setblocking(False)
    chunk = b"x" * 65536
    sent, limit, idle_since = 0, 256 << 20, time.monotonic()
    import select
    while sent < limit and time.monotonic() - idle_since < 1.5:
        _, w, _ = select.select([], [c.s], [], 0.5)
        if not w:
            continue
        try:
            sent += c.s.send(chunk)
            idle_since = time.monotonic()
        except BlockingIOError:
            pass
        except OSError:
            break
    grew = rss_kib() - before
    c.reset()
    if sent >= limit or grew > 64 * 1024:
        raise Fail("an event-stream client sent %d MiB unread; gpumd grew %d MiB" %
                   (sent >> 20, grew >> 10))
    until(lambda: metric("gpumd_event_streams") == base, 20, "the flooding stream reaped")
    # With every stream taken, a refused GET /api/v1/events leaves an ordinary connection,
    # still counted against http.max_connections (not one that escapes the limit).
    full = [sse_open() for _ in range(64 - int(base))]
    until(lambda: metric("gpumd_event_streams") == 64, 10, "64 streams")
    refused = []
    for i in range(MAX_CONNS):
        c = Conn()
        c.send(req("GET", "/api/v1/events"))
        r = c.response()
        if r[0] != 503 or json.loads(r[2])["error"]["code"] != "EAGAIN":
            raise Fail("stream %d past the limit: %r" % (65 + i, r))
        refused.append(c)
    # The refused streams' connections are counted: one more connection closes the one of
    # them that waited longest.
    extra = Conn()
    extra.send(req("GET", "/api/v1/gpu/health"))
    r = extra.response()
    extra.close()
    if r is None or r[0] != 200 or not refused[0].closed_by_peer(5):
        raise Fail("connection %d with %d refused streams kept alive: %r" %
                   (MAX_CONNS + 1, MAX_CONNS, r))
    for c in refused + full:
        c.reset()
    until(lambda: metric("gpumd_event_streams") == base, 20, "the 64 streams reaped")
    print("ok: sse: 20 streams closed abruptly during 400 events reaped; a flooding client "
          "is not read (%d MiB sent, gpumd grew %d MiB)" % (sent >> 20, grew >> 10))


# ---- slow clients -----------------------------------------------------------------------------

TIMEOUT_S = float(os.environ.get("HOSTILE_TIMEOUT_S", "2"))


def phase_slowloris():
    """Clients that trickle a request a byte at a time (each byte restarts an idle timeout)
    are closed once their request is not complete within http.timeout; meanwhile others are
    served. A kept-alive connection gets the same deadline for its next request."""
    results = {}

    def trickle(k, data):
        c = Conn(timeout=30)
        t0 = time.monotonic()
        try:
            for i in range(len(data)):
                c.send(data[i:i + 1])
                time.sleep(0.2)  # the pace of the client under test, not synchronisation
                if time.monotonic() - t0 > TIMEOUT_S + 3:
                    break
            results[k] = ("still open", time.monotonic() - t0)
        except OSError:
            results[k] = ("closed", time.monotonic() - t0)
        c.close()

    slow_hdr = b"GET /api/v1/gpu/health HTTP/1.1\r\nX-Slow: " + b"s" * 60 + b"\r\n\r\n"
    body = b'{"memory_gb": 1, "label": "' + b"b" * 40 + b'"}'
    slow_body = req("POST", "/api/v1/gpu/validate", b"")[:-2].replace(
        b"Content-Length: 0", b"Content-Length: %d" % len(body)) + b"\r\n" + body
    ts = [threading.Thread(target=trickle, args=(i, slow_hdr if i % 2 else slow_body))
          for i in range(4)]
    [t.start() for t in ts]
    for _ in range(20):  # others are served meanwhile
        get_json("/api/v1/gpu/health")
    [t.join() for t in ts]
    for k, (how, secs) in results.items():
        if how != "closed" or secs > TIMEOUT_S + 3:
            raise Fail("slow client %d: %s after %.1f s (http.timeout %.0f s)" %
                       (k, how, secs, TIMEOUT_S))
    # A kept-alive connection that trickles its second request is closed the same way.
    c = Conn(timeout=30)
    c.send(req("GET", "/api/v1/gpu/health"))
    if c.response()[0] != 200:
        raise Fail("keep-alive: first request")
    t0 = time.monotonic()
    try:
        for i in range(len(slow_hdr)):
            c.send(slow_hdr[i:i + 1])
            time.sleep(0.2)
            if time.monotonic() - t0 > TIMEOUT_S + 3:
                break
        how = "still open"
    except OSError:
        how = "closed"
    secs = time.monotonic() - t0
    c.close()
    if how != "closed" or secs > TIMEOUT_S + 3:
        raise Fail("kept-alive slow client: %s after %.1f s" % (how, secs))
    print("ok: slowloris: clients trickling a request (headers or body) are closed after "
          "http.timeout although they never stall; others are served meanwhile")


# ---- fuzz ---------------------------------------------------------------------------------

PATHS = ["/api/v1/gpu/status", "/api/v1/gpu/nodes", "/api/v1/gpu/validate",
         "/api/v1/gpu/allocate", "/api/v1/reservations", "/api/v1/reservations/r-%d",
         "/api/v1/reservations/r-%d/renew", "/api/v1/gpu/setup-pytorch",
         "/api/v1/gpu/setup-tensorflow", "/api/v1/gpu/health", "/api/v1/gpu/monitoring",
         "/api/v1/alerts", "/api/v1/config", "/metrics", "/nope"]
METHODS = ["GET", "POST", "DELETE", "HEAD", "PUT", "OPTIONS", "PATCH", "G\x00T", "get"]
FIELDS = ["memory_gb", "gpu_count", "gpu_type", "min_memory_gb", "devices", "priority",
          "timeout", "on_timeout", "ttl", "label", "wait", "reservation", "master_port", "x"]
VALUES = [0, -0.0, 1, -1, 0.5, 1e308, -1e308, 2 ** 63 - 1, -2 ** 63, 2 ** 31, 1e-300, "", "x",
          "\u00e9" * 40, "\x00", "r-1", "r-0", "r-99999999999999999999", True, False, None, [],
          {}, [0], ["GPU-x"], [0, 0], "*", "[", "A100", 3600, 2592000.001, 1e6]


def rand_bytes(rnd, n):
    return bytes(rnd.randrange(256) for _ in range(n))


def fuzz_one(rnd, created):
    path = rnd.choice(PATHS + ["/api/v1/gpu/allocate", "/api/v1/gpu/validate"] * 3)
    if rnd.random() < 0.25:
        method = rnd.choice(METHODS)
    elif path.endswith(("allocate", "validate", "renew", "pytorch", "tensorflow")):
        method = "POST"
    elif path.endswith("%d"):
        method = rnd.choice(["GET", "DELETE"])
    else:
        method = "GET"
    if "%d" in path:
        # Never the protected reservations: they must survive the fuzz.
        ids = [i for i in created] or [999999]
        path = path % (rnd.choice(ids) if rnd.random() < 0.7 else rnd.randrange(10 ** 6, 10 ** 7))
    p = path.encode()
    k = rnd.random()
    if k < 0.1:
        p += b"?" + rand_bytes(rnd, rnd.randrange(1, 40)).replace(b" ", b"+").replace(b"\r", b"")
    elif k < 0.2:
        p = p[:rnd.randrange(len(p) + 1)] + rand_bytes(rnd, rnd.randrange(1, 8)).replace(b" ", b"")
    elif k < 0.3:
        p += rnd.choice([b"?gpu_type=", b"?min_memory_gb=", b"?limit=", b"?window="]) + \
             str(rnd.choice(VALUES)).encode("utf-8", "replace").replace(b" ", b"%20")
    p = p.replace(b"\r", b"").replace(b"\n", b"")
    body = {}
    for _ in range(rnd.randrange(0, 5)):
        body[rnd.choice(FIELDS)] = rnd.choice(VALUES)
    if rnd.random() < 0.6:
        body.setdefault("memory_gb", rnd.choice([0.001, 0.01, 1, 50, 100, 1e6]))
    data = json.dumps(body).encode()
    m = rnd.random()
    if m < 0.15:
        data = data[:rnd.randrange(len(data) + 1)]
    elif m < 0.25 and data:
        i = rnd.randrange(len(data))
        data = data[:i] + rand_bytes(rnd, rnd.randrange(1, 4)) + data[i + 1:]
    elif m < 0.3:
        data = b"[" * rnd.randrange(1, 50) + data
    elif m < 0.32:
        data = b"{\"label\": \"" + b"x" * rnd.randrange(4000, 9000) + b"\"}"
    hdrs = "%s %s HTTP/1.1\r\nHost: x\r\n" % (method, p.decode("latin-1"))
    use_tok = rnd.random() < 0.5
    if use_tok:
        hdrs += "Authorization: Bearer %s\r\n" % (TOK if rnd.random() < 0.8 else TOK[:10])
    t = rnd.random()
    if t < 0.7:
        hdrs += "Content-Length: %d\r\n" % len(data)
        wire = hdrs.encode("latin-1") + b"\r\n" + data
    elif t < 0.85:
        hdrs += "Transfer-Encoding: chunked\r\n"
        wire = hdrs.encode("latin-1") + b"\r\n"
        i = 0
        while i < len(data):
            n = rnd.randrange(1, 64)
            wire += b"%x\r\n" % len(data[i:i + n]) + data[i:i + n] + b"\r\n"
            i += n
        wire += b"0\r\n\r\n"
    else:
        hdrs += "Content-Length: %d\r\n" % rnd.choice([0, len(data) + 5, max(0, len(data) - 3)])
        wire = hdrs.encode("latin-1") + b"\r\n" + data
    close = rnd.random()
    c = Conn(timeout=10)
    try:
        if close < 0.05:
            c.send(wire[:rnd.randrange(len(wire) + 1)])
            c.reset()
            return None
        c.send(wire + b"GET /api/v1/gpu/health HTTP/1.1\r\nConnection: close\r\n\r\n")
        if close < 0.1:
            c.reset()
            return None
        c.s.shutdown(socket.SHUT_WR)
        out = []
        while True:
            r = c.response(head=(method == "HEAD" and not out))
            if r is None:
                break
            if os.environ.get("HOSTILE_DEBUG"):
                print("fuzz", wire[:200], r[:2])
            check_response(r, "fuzz %r" % wire[:200])
            out.append(r)
            if r[0] in (201, 202) and b"/allocate" in p:
                try:
                    created.append(int(json.loads(r[2])["reservation"]["id"][2:]))
                except (ValueError, KeyError):
                    pass
        return out
    except socket.timeout:
        raise Fail("fuzz: no answer within 10 s to %r" % wire[:200])
    except OSError:
        return None  # refused or closed by gpumd first: fine
    finally:
        c.close()


def phase_fuzz():
    rnd = random.Random(SEED)
    created = []
    deadline = time.monotonic() + FUZZ_SECS
    n = 0
    while n < FUZZ_COUNT and time.monotonic() < deadline:
        fuzz_one(rnd, created)
        n += 1
    # What the fuzz made is removable, and then gone.
    for rid in created:
        c = Conn()
        c.send(req("DELETE", "/api/v1/reservations/r-%d" % rid, tok=TOK,
                   headers=[("Connection", "close")]))
        r = c.response()
        c.close()
        check_response(r, "cleanup DELETE r-%d" % rid)
    print("ok: fuzz: %d random requests (seed %d), %d reservations made and removed, never a 500"
          % (n, SEED, len(created)))


PHASES = {"garbage": phase_garbage, "pipeline": phase_pipeline, "abandon": phase_abandon,
          "churn": phase_churn, "sse": phase_sse, "slowloris": phase_slowloris,
          "fuzz": phase_fuzz}

if __name__ == "__main__":
    try:
        make_protected()
        check("start")
        for name in sys.argv[1:] or list(PHASES):
            PHASES[name]()
            check(name)
    except (Fail, gpumd_client.Fail, AssertionError) as e:
        import traceback
        traceback.print_exc()
        print("FAIL:", e, file=sys.stderr)
        sys.exit(1)
