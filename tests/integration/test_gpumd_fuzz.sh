#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd against random input (fixed seed, GPUM_FUZZ_SEED for others): random bytes, random JSON
# values, requests of every op with random field names and values of random types, and
# requests with a backslash before a non-ASCII character put in at a random place. Every line
# gets exactly one well-formed reply, valid UTF-8 (checked by a hello with an id of its own
# after each line, whose reply must come next), a JSON value that is not an object gets
# EPROTO, gpumd stays up (under ASan in the sanitizer build), and afterwards nothing is left
# reserved once the connections that got grants are gone.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
SEED=${GPUM_FUZZ_SEED:-1}
echo "seed $SEED (set GPUM_FUZZ_SEED to try others)"

gd_py '
import random
rng = random.Random(int(args[0]))
OPS = ["hello", "status", "reserve", "release", "renew", "attach", "list", "nope", ""]
FIELDS = ["bytes_per_gpu", "gpus", "model", "min_memory", "devices", "priority", "timeout_ms",
          "on_timeout", "label", "lease", "pid", "ttl_ms", "wait", "reservation", "token", "all",
          "client", "protocol", "x", "id", "op"]
def value(depth=0):
    k = rng.randrange(9 if depth < 3 else 6)
    if k == 0: return None
    if k == 1: return rng.choice([True, False])
    if k == 2: return rng.choice([0, -1, 1, 2**31, 2**63 - 1, -2**63, rng.randrange(-1000, 10**12)])
    if k == 3: return rng.random() * 1e6
    if k == 4: return rng.choice(["", "r-1", "r-0", "r-99999999999999999999999", "1GiB", "-5", "ttl",
                                  "pid", "connection", "wait", "reject", "0", "*", "x" * 300, "\u00e9\u2603"])
    if k == 5: return "".join(chr(rng.randrange(1, 0x2FF)) for _ in range(rng.randrange(20)))
    if k == 6: return [value(depth + 1) for _ in range(rng.randrange(4))]
    if k == 7: return {rng.choice(FIELDS): value(depth + 1) for _ in range(rng.randrange(4))}
    return rng.randrange(100)
NON_ASCII = "\u00e9\u4e2d\U0001f600\u0800\u00ff\u2028"
def next_reply():
    m = c.read_msg()  # json.loads of the raw line: fails unless it is UTF-8
    while m is not None and "event" in m:
        m = c.read_msg()
    return m
c = Client(timeout=20)
sent = 0
for i in range(3000):
    kind = rng.randrange(10)
    value_on_top = None
    if kind == 0:
        line = bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 200))).replace(b"\n", b" ")
    elif kind == 1:
        value_on_top = value()
        line = json.dumps(value_on_top).encode()
    else:
        req = {"id": i, "op": rng.choice(OPS)}
        for _ in range(rng.randrange(5)):
            req[rng.choice(FIELDS)] = value()
        if rng.randrange(3) == 0:
            req.pop("id", None)
        line = json.dumps(req, ensure_ascii=rng.randrange(2) == 0).encode()
        if kind == 2:  # a backslash before a non-ASCII character, at a random place
            at = rng.randrange(len(line) + 1)
            line = line[:at] + b"\\" + rng.choice(NON_ASCII).encode() + line[at:]
    if line.strip() == b"":
        continue
    c.send_raw(line + b"\n")
    m = next_reply()
    assert m is not None, "connection closed after %r" % line[:200]
    assert isinstance(m.get("ok"), bool) and "id" in m, m
    if not m["ok"]:
        assert isinstance(m["error"]["code"], str) and isinstance(m["error"]["message"], str), m
    if kind == 1 and not isinstance(value_on_top, dict):
        assert m["error"]["code"] == "EPROTO", (line[:200], m)
    # Exactly one reply: the next one answers this hello.
    c.send({"id": "sync-%d" % i, "op": "hello"})
    m = next_reply()
    assert m is not None and m.get("id") == "sync-%d" % i, ("after %r" % line[:200], m)
    sent += 1
print("%d messages, all answered once" % sent)
c.close()
deadline = time.monotonic() + 10
c = Client()
while True:
    left = [r for r in c.ok("list", all=True)["reservations"] if r["lease"] == "connection"]
    if not left:
        break
    assert time.monotonic() < deadline, left
' "$SEED" || t_fail "fuzz (seed $SEED)"
t_ok "random input: every line answered, gpumd up"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || { cat "$GD_ERR" >&2; t_fail "exit $GD_RC"; }
