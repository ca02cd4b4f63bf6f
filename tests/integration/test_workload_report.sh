#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Workload reports (gpum/report.h, the "report" op): a job under gpum run serves requests
# through a batcher and reports the batcher's figures and a custom one on its reservation
# (progs/report_job.c checks what the listing shows, and that a reporter with a thread reports by
# itself); while it runs, /metrics carries them as
# gpum_workload_value, _seconds, _per_second (the unit read from each figure's name, the figure
# label its name without the unit; promtool check metrics clean), the REST document of the reservation
# shows them, and gpum jobs prints them. gpumd refuses hostile reports with a clear error and
# changes nothing (bad names, non-numbers, too many figures, an ungranted or unknown
# reservation, another uid's when run as root); when the job ends its reports are gone.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

PROMTOOL=$(command -v promtool || echo "$GPUM_SOURCE_DIR/.cache/tools/bin/promtool")
[ -x "$PROMTOOL" ] || t_fail "promtool not found (scripts/deps.sh extracts it into .cache/tools/bin)"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
t_wait_file "$GPUM_STATE_DIR/http.addr"
BASE="http://$(cat "$GPUM_STATE_DIR/http.addr")"

# The job: its stdin a fifo held open here, so it lives until this script closes it.
mkfifo "$T_SCRATCH/in"
"$GPUM_BIN" run --mem 2GiB --label served -- "$GPUM_TEST_PROGS/report_job" \
  <"$T_SCRATCH/in" >"$T_SCRATCH/job.out" 2>"$T_SCRATCH/job.err" &
JOB=$!
T_PIDS+=("$JOB")
exec 7>"$T_SCRATCH/in"
t_until 30 grep -q '^ready$' "$T_SCRATCH/job.out" ||
  { cat "$T_SCRATCH/job.err" >&2; t_fail "the job never reported: $(cat "$T_SCRATCH/job.out")"; }
t_ok "a job's batcher, adaptive runner and custom figures show in its reservation's listing"

rid=$(gd_py '
rs = [r for r in Client().ok("list")["reservations"] if r["label"] == "served"]
assert len(rs) == 1, rs
print(rs[0]["id"])
') || t_fail "the job's reservation"

M=$T_SCRATCH/metrics.txt
curl -sS -f -o "$M" "$BASE/metrics" || t_fail "GET /metrics"
"$PROMTOOL" check metrics <"$M" >"$T_SCRATCH/promtool.out" 2>&1 ||
  t_fail "promtool check metrics: $(cat "$T_SCRATCH/promtool.out")"
[ ! -s "$T_SCRATCH/promtool.out" ] || t_fail "promtool complained: $(cat "$T_SCRATCH/promtool.out")"
grep -q "^gpum_workload_value{reservation=\"$rid\",pid=\"[0-9]*\",source=\"infer\",figure=\"completed\"} 100$" "$M" ||
  t_fail "no completed figure in /metrics: $(grep workload "$M")"
grep -q "^gpum_workload_value{reservation=\"$rid\",.*source=\"train\",figure=\"batch_size\"} 32$" "$M" ||
  t_fail "no custom figure in /metrics: $(grep workload "$M")"
python3 - "$M" <<'PY' || t_fail "figures by unit: $(grep workload "$M")"
import re, sys
text = open(sys.argv[1]).read()
rows = re.findall(r'^(gpum_workload_\w+)\{.*source="infer",figure="(\w+)"\} (\S+)$', text, re.M)
unit = {f: n for n, f, v in rows}
value = {f: float(v) for n, f, v in rows}
assert unit["queue_p99"] == "gpum_workload_seconds" and unit["e2e_p50"] == "gpum_workload_seconds", unit
assert 0 < value["e2e_p99"] < 60, value  # seconds now, from microseconds
assert unit["throughput"] == "gpum_workload_per_second" and value["throughput"] > 0, unit
assert unit["completed"] == "gpum_workload_value", unit
assert "gpum_workload_figure" not in text
for fam in set(unit.values()):
    assert len(re.findall("^# TYPE %s gauge$" % fam, text, re.M)) == 1, fam
PY
t_ok "/metrics carries the figures by unit, per reservation, pid, source and figure; promtool is clean"

curl -sS -f -o "$T_SCRATCH/resv.json" "$BASE/api/v1/reservations/$rid" || t_fail "GET reservation"
t_pyjson "$T_SCRATCH/resv.json" '
w = d["reservation"]["workload"]
assert sorted(x["source"] for x in w) == ["fit", "infer", "periodic", "train"], w
infer = [x for x in w if x["source"] == "infer"][0]
assert infer["figures"]["completed"] == 100 and infer["figures"]["e2e_p99_us"] > 0, infer
assert infer["figures"]["throughput_per_s"] > 0 and "throughput" not in infer["figures"], infer
assert infer["age_ms"] >= 0
' || t_fail "REST document: $(cat "$T_SCRATCH/resv.json")"
t_ok "the REST document of the reservation has the workload"

t_expect 0 "$GPUM_BIN" jobs
grep -q "infer (pid [0-9]*): .*completed 100," "$T_OUT" || t_fail "gpum jobs: $(cat "$T_OUT")"
t_ok "gpum jobs prints the workload under its reservation"

# Hostile reports: each refused with its reason; the reservation's workload stays as it was.
gd_py '
c = Client()
rid = args[0]
def bad(code, text, **kw):
    msg = c.err("report", code, **kw)
    assert text in msg, (text, msg)
bad("EINVAL", "source", reservation=rid, figures={"a": 1})
bad("EINVAL", "\"source\"", reservation=rid, source="Bad Source", figures={"a": 1})
bad("EINVAL", "\"source\"", reservation=rid, source="x" * 49, figures={"a": 1})
bad("EINVAL", "figure name", reservation=rid, source="s", figures={"A": 1})
bad("EINVAL", "must be a number", reservation=rid, source="s", figures={"a": "1"})
bad("EINVAL", "must be a number", reservation=rid, source="s", figures={"a": None})
bad("EINVAL", "at most 48 figures", reservation=rid, source="s",
    figures={"f%d" % i: i for i in range(49)})
bad("EINVAL", "\"figures\"", reservation=rid, source="s", figures=[1, 2])
bad("EINVAL", "unknown field", reservation=rid, source="s", figures={}, extra=1)
bad("ENOENT", "no reservation", reservation="r-999", source="s", figures={"a": 1})
q = c.ok("reserve", bytes_per_gpu="75GiB", gpus=2, lease="ttl", ttl_ms=60000)["reservation"]
assert q["state"] == "QUEUED", q
bad("ESTATE", "only a granted one", reservation=q["id"], source="s", figures={"a": 1})
c.ok("release", reservation=q["id"])
# Sixteen sources per reservation at most (four are the job'"'"'s).
for i in range(12):
    c.ok("report", reservation=rid, source="s%d" % i, figures={"i": i})
bad("EBUSY", "16 reporting sources", reservation=rid, source="one_more", figures={"a": 1})
r = [x for x in c.ok("list")["reservations"] if x["id"] == rid][0]
assert len(r["workload"]) == 16, r["workload"]
' "$rid" || t_fail "hostile reports"
t_ok "hostile reports get a clear error and change nothing"

if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
  chmod 0755 "$T_SCRATCH"
  chmod 0666 "$GPUM_SOCKET"
  other=$(gd_pyfile other '
c = Client()
assert "belongs to uid 0" in c.err("report", "EPERM", reservation=args[0], source="x", figures={"a": 1})
')
  chmod 0644 "$other"
  setpriv --reuid=65534 --regid=65534 --clear-groups -- env PYTHONPATH="$PYTHONPATH" \
    GPUM_SOCKET="$GPUM_SOCKET" python3 "$other" "$rid" >"$T_OUT" 2>&1 ||
    { cat "$T_OUT" >&2; t_fail "another uid reported on the job's reservation"; }
  t_ok "another uid cannot report on the reservation"
fi

# The job ends (stdin closed): gpum run releases, the reports are gone.
exec 7>&-
wait "$JOB" || { cat "$T_SCRATCH/job.err" >&2; t_fail "the job failed"; }
grep -q '^done$' "$T_SCRATCH/job.out" || t_fail "the job did not finish: $(cat "$T_SCRATCH/job.out")"
curl -sS -f -o "$M" "$BASE/metrics" || t_fail "GET /metrics"
! grep -q "^gpum_workload_[a-z_]*{" "$M" || t_fail "figures outlived the job: $(grep workload "$M")"
t_ok "the figures go with the reservation"
