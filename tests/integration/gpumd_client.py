# SPDX-License-Identifier: Apache-2.0
# A small NDJSON client of gpumd for the integration tests (python3 standard library only):
# connect to the socket, send requests with ids, read replies (events that arrive meanwhile
# are kept), wait for events with a deadline. Imported by the test_gpumd_*.sh scripts'
# python snippets (sys.path gets tests/integration).
import json
import os
import socket
import sys
import time


class Fail(Exception):
    pass


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


class Client:
    def __init__(self, path=None, timeout=10.0):
        self.path = path or os.environ["GPUM_SOCKET"]
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(self.path)
        self.buf = b""
        self.events = []
        self.next_id = 1
        self.timeout = timeout

    def close(self):
        self.sock.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, obj):
        self.send_raw((json.dumps(obj) + "\n").encode())

    def read_msg(self, deadline=None):
        """The next message, or None at end of file."""
        deadline = deadline or time.monotonic() + self.timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Fail("timed out waiting for gpumd")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                raise Fail("timed out waiting for gpumd")
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def reply(self, rid):
        while True:
            m = self.read_msg()
            if m is None:
                raise Fail("connection closed while waiting for reply %r" % (rid,))
            if "event" in m:
                self.events.append(m)
                continue
            if m.get("id") != rid:
                raise Fail("reply with id %r, expected %r: %r" % (m.get("id"), rid, m))
            return m

    def call(self, op, **fields):
        rid = self.next_id
        self.next_id += 1
        req = {"id": rid, "op": op}
        req.update(fields)
        self.send(req)
        return self.reply(rid)

    def ok(self, op, **fields):
        r = self.call(op, **fields)
        if not r.get("ok"):
            raise Fail("%s %r failed: %r" % (op, fields, r))
        return r

    def ok_many(self, op, many):
        """Sends one request of op per dict of fields in many, all in one write (pipelined),
        then reads their replies; raises Fail at the first that is not ok. Keep a batch small
        enough for its replies (gpumd drops a client that leaves 4 MiB unread)."""
        reqs = []
        for fields in many:
            req = {"id": self.next_id, "op": op}
            req.update(fields)
            self.next_id += 1
            reqs.append(req)
        self.send_raw(b"".join((json.dumps(r) + "\n").encode() for r in reqs))
        replies = [self.reply(r["id"]) for r in reqs]
        for r, m in zip(reqs, replies):
            if not m.get("ok"):
                raise Fail("%s %r failed: %r" % (op, r, m))
        return replies

    def err(self, op, code, **fields):
        r = self.call(op, **fields)
        if r.get("ok") or r["error"]["code"] != code:
            raise Fail("%s %r: expected error %s, got %r" % (op, fields, code, r))
        return r["error"]["message"]

    def wait_event(self, name, rid=None, timeout=10.0):
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e["event"] == name and (rid is None or e.get("reservation", {}).get("id") == rid):
                    return self.events.pop(i)
            m = self.read_msg(deadline)
            if m is None:
                raise Fail("connection closed while waiting for event %s" % name)
            if "event" not in m:
                raise Fail("unexpected reply %r while waiting for event %s" % (m, name))
            self.events.append(m)

    def at_eof(self, timeout=10.0):
        """True once gpumd closes the connection (data before that is dropped)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
            if not chunk:
                return True
        return False


def wait_ready(path=None, timeout=20.0):
    """Waits until gpumd answers hello on its socket (polls with a deadline)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            c = Client(path, timeout=2.0)
            r = c.ok("hello", client="test", protocol=1)
            c.close()
            return r
        except (OSError, Fail) as e:
            last = e
            time.sleep(0.02)
    fail("gpumd did not answer hello within %ss: %s" % (timeout, last))
