#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Slurm job and step ids of a reservation (reserve's "slurm" object): hostile values (wrong
# types, unknown keys, signs, spaces, newlines, other digits, too long, half given) are refused
# with EINVAL naming the field and create nothing; good ones ("12345"/"0", an array task
# "12345_7"/"batch") show in the reserve reply, list, the REST reservation documents, the SSE
# reservation event, gpum jobs (table and --json) and /metrics (slurm_job_id, slurm_step_id;
# empty for a reservation without), and survive a SIGKILL and restart of gpumd.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"
source "$(dirname "$0")/http_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
t_wait_file "$GPUM_STATE_DIR/http.addr"

gd_py '
c = Client()
bad = [
    ("not an object", "12345"), ("a list", ["12345", "0"]), ("number ids", {"job_id": 12345, "step_id": 0}),
    ("no step", {"job_id": "12345"}), ("no job", {"step_id": "0"}),
    ("null job", {"job_id": None, "step_id": "0"}),
    ("unknown key", {"job_id": "1", "step_id": "0", "user": "x"}),
    ("empty job", {"job_id": "", "step_id": "0"}), ("empty step", {"job_id": "1", "step_id": ""}),
    ("sign", {"job_id": "-1", "step_id": "0"}), ("plus", {"job_id": "+1", "step_id": "0"}),
    ("space", {"job_id": "12345 ", "step_id": "0"}), ("hex", {"job_id": "0x10", "step_id": "0"}),
    ("newline step", {"job_id": "1", "step_id": "batch\n"}),
    ("label injection", {"job_id": "1\",evil=\"x", "step_id": "0"}),
    ("capitals", {"job_id": "1", "step_id": "BATCH"}), ("other name", {"job_id": "1", "step_id": "extern2"}),
    ("other digits", {"job_id": "\u0661\u0662", "step_id": "0"}),
    ("11 digits", {"job_id": "12345678901", "step_id": "0"}),
    ("11 digit step", {"job_id": "1", "step_id": "12345678901"}),
    ("array no task", {"job_id": "12345_", "step_id": "0"}), ("array no job", {"job_id": "_7", "step_id": "0"}),
    ("array twice", {"job_id": "1_2_3", "step_id": "0"}), ("array range", {"job_id": "1_[1-3]", "step_id": "0"}),
    ("step with dot", {"job_id": "1", "step_id": "0.1"}),
    ("huge", {"job_id": "9" * 30000, "step_id": "0"}),
]
for what, v in bad:
    msg = c.err("reserve", "EINVAL", bytes_per_gpu="1GiB", slurm=v)
    assert "slurm" in msg.lower(), (what, msg)
    msg = c.err("check", "EINVAL", bytes_per_gpu="1GiB", slurm=v)
assert c.ok("list", all=True)["reservations"] == [], "a refused reserve created something"
' || t_fail "hostile slurm ids"
t_ok "hostile slurm ids: EINVAL naming the field, nothing created"

gd_py '
c = Client()
a = c.ok("reserve", bytes_per_gpu="1GiB", label="train", lease="ttl", ttl_ms=600000,
         slurm={"job_id": "12345", "step_id": "0"})["reservation"]
b = c.ok("reserve", bytes_per_gpu="2GiB", lease="ttl", ttl_ms=600000,
         slurm={"job_id": "4294967295_7", "step_id": "batch"})["reservation"]
n = c.ok("reserve", bytes_per_gpu="3GiB", lease="ttl", ttl_ms=600000, slurm=None)["reservation"]
assert (a["id"], b["id"], n["id"]) == ("r-1", "r-2", "r-3"), (a, b, n)
assert a["slurm"] == {"job_id": "12345", "step_id": "0"}, a
assert b["slurm"] == {"job_id": "4294967295_7", "step_id": "batch"}, b
assert "slurm" in n and n["slurm"] is None, n
' || t_fail "reserve with slurm ids"
t_ok "the reserve reply carries the ids (null without)"

# check_all FILE-PREFIX: list, REST, gpum jobs and /metrics show them.
check_all() {
  gd_py '
c = Client()
got = {r["id"]: r["slurm"] for r in c.ok("list", all=True)["reservations"]}
assert got == {"r-1": {"job_id": "12345", "step_id": "0"},
               "r-2": {"job_id": "4294967295_7", "step_id": "batch"}, "r-3": None}, got
' || t_fail "list ($1)"
  hp '
docs = expect("GET", "/api/v1/reservations", 200)["reservations"]
got = {r["id"]: r["slurm"] for r in docs}
assert got["r-1"] == {"job_id": "12345", "step_id": "0"} and got["r-3"] is None, got
one = expect("GET", "/api/v1/reservations/r-2", 200)["reservation"]
assert one["slurm"] == {"job_id": "4294967295_7", "step_id": "batch"}, one
' || t_fail "REST ($1)"
  t_expect 0 "$GPUM_BIN" jobs --all
  grep -q '^r-1 .* train \[slurm 12345\.0\] ' "$T_OUT" || t_fail "gpum jobs table ($1): $(cat "$T_OUT")"
  grep -q '^r-2 .*\[slurm 4294967295_7\.batch\] ' "$T_OUT" || t_fail "gpum jobs table ($1): $(cat "$T_OUT")"
  ! grep -q '^r-3 .*slurm' "$T_OUT" || t_fail "gpum jobs shows slurm ids for r-3 ($1): $(cat "$T_OUT")"
  t_expect 0 "$GPUM_BIN" jobs --all --json
  t_pyjson "$T_OUT" '
got = {r["id"]: r["slurm"] for r in d["reservations"]}
assert got["r-1"] == {"job_id": "12345", "step_id": "0"} and got["r-3"] is None, got
' || t_fail "gpum jobs --json ($1): $(cat "$T_OUT")"
  curl -sS -f -o "$T_SCRATCH/metrics" "http://$(cat "$GPUM_STATE_DIR/http.addr")/metrics" ||
    t_fail "GET /metrics ($1)"
  python3 - "$T_SCRATCH/metrics" <<'PY' || t_fail "/metrics ($1): $(grep reservation_reserved "$T_SCRATCH/metrics")"
import re, sys
want = {"r-1": ("12345", "0"), "r-2": ("4294967295_7", "batch"), "r-3": ("", "")}
seen = {}
for line in open(sys.argv[1]):
    if not line.startswith("gpum_reservation_reserved_bytes{"):
        continue
    labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
    seen[labels["reservation"]] = (labels["slurm_job_id"], labels["slurm_step_id"])
assert seen == want, seen
PY
}
check_all "live"
t_ok "list, REST, gpum jobs (table, --json) and /metrics show the ids"

# The SSE reservation event carries the same document.
hp '
host, port = addr()
s = http.client.HTTPConnection(host, port, timeout=10)
s.request("GET", "/api/v1/events")
resp = s.getresponse()
c = gpumd_client.Client()
r = c.ok("reserve", bytes_per_gpu="1GiB", lease="ttl", ttl_ms=600000,
         slurm={"job_id": "77", "step_id": "interactive"})["reservation"]
ev, found, deadline = None, None, time.time() + 10
while found is None and time.time() < deadline:
    line = resp.readline().decode().rstrip("\n")
    if line.startswith("event: "):
        ev = line[7:]
    elif line.startswith("data: ") and ev == "reservation":
        d = json.loads(line[6:])
        if d["reservation"]["id"] == r["id"]:
            found = d["reservation"]
s.close()
assert found is not None, "no reservation event"
assert found["slurm"] == {"job_id": "77", "step_id": "interactive"}, found
c.ok("release", reservation=r["id"])
' || t_fail "SSE reservation event"
t_ok "the SSE reservation event carries the ids"

kill -9 "$GD_PID"
wait "$GD_PID" 2>/dev/null || true
gd_start
t_wait_file "$GPUM_STATE_DIR/http.addr"
check_all "after restart"
t_ok "the ids survive a SIGKILL and restart of gpumd"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
