# SPDX-License-Identifier: Apache-2.0
# A small HTTP client of gpumd's REST API for the integration tests (python3 standard library
# only): the address comes from STATE_DIR/http.addr, the token from STATE_DIR/http.token.
# call() returns (status, headers, parsed JSON or raw text); raw() sends bytes as they are.
import http.client
import json
import os
import socket
import time


class Fail(Exception):
    pass


def state_dir():
    return os.environ["GPUM_STATE_DIR"]


def addr():
    with open(os.path.join(state_dir(), "http.addr")) as f:
        a = f.read().strip()
    host, port = a.rsplit(":", 1)
    return host.strip("[]"), int(port)


def token():
    with open(os.path.join(state_dir(), "http.token")) as f:
        return f.read().strip()


def call(method, path, body=None, tok=None, raw_body=None, headers=None, timeout=10):
    """One request on a fresh connection. body: a JSON value; raw_body: bytes as they are."""
    host, port = addr()
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    h = dict(headers or {})
    data = raw_body
    if body is not None:
        data = json.dumps(body).encode()
        h.setdefault("Content-Type", "application/json")
    if tok:
        h["Authorization"] = "Bearer " + tok
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    text = r.read().decode("utf-8", "replace")
    hdrs = {k.lower(): v for k, v in r.getheaders()}
    c.close()
    doc = text
    if hdrs.get("content-type", "").startswith("application/json") and text:
        doc = json.loads(text)
    return r.status, hdrs, doc


def expect(method, path, status, body=None, tok=None, **kw):
    st, h, doc = call(method, path, body=body, tok=tok, **kw)
    if st != status:
        raise Fail("%s %s: status %d, expected %d: %s" % (method, path, st, status, doc))
    return doc


def expect_err(method, path, status, code, contains=None, body=None, tok=None, **kw):
    """An error response: the one shape {"error": {"code", "message"}}."""
    doc = expect(method, path, status, body=body, tok=tok, **kw)
    if not isinstance(doc, dict) or set(doc) != {"error"} or set(doc["error"]) != {"code", "message"}:
        raise Fail("%s %s: not the error shape: %r" % (method, path, doc))
    if doc["error"]["code"] != code:
        raise Fail("%s %s: code %s, expected %s: %r" % (method, path, doc["error"]["code"], code, doc))
    if contains and contains not in doc["error"]["message"]:
        raise Fail("%s %s: message %r lacks %r" % (method, path, doc["error"]["message"], contains))
    return doc["error"]["message"]


def raw(data, read=True, timeout=10):
    """Sends bytes on a fresh socket; returns what comes back until the peer closes."""
    s = socket.create_connection(addr(), timeout=timeout)
    s.sendall(data)
    out = b""
    if read:
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                out += b
        except (ConnectionResetError, socket.timeout):
            pass
    s.close()
    return out


def until(fn, secs=10, what="condition"):
    end = time.time() + secs
    while time.time() < end:
        try:
            if fn():
                return
        except (OSError, Fail):
            pass
        time.sleep(0.02)
    raise Fail("timed out waiting for " + what)
