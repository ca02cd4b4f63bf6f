#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Grafana dashboards of docs/grafana/*.json: each is a dashboard Grafana imports (JSON with
# a schemaVersion, a ${DS_PROMETHEUS} datasource input that every panel and query uses), and
# every metric named by its queries (each "expr", and each template variable's query) is one
# gpumd exports: on a simulated node with granted and queued reservations, a process under no
# reservation, and a workload report carrying a figure of every unit, so every workload family
# exists.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

shopt -s nullglob
dashboards=("$GPUM_SOURCE_DIR"/docs/grafana/*.json)
[ ${#dashboards[@]} -gt 0 ] || t_fail "no dashboard in docs/grafana"

# The metric names of each dashboard's queries, one "file name" per line.
python3 - "${dashboards[@]}" >"$T_SCRATCH/names" <<'PY' || t_fail "the dashboards do not parse"
import json, os, re, sys

# PromQL words that are no metric: functions are followed by "(", so only these need naming.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "inf", "nan"}

def names(expr):
    """The metric names of a PromQL expression: identifiers that are not functions, keywords,
    label names (inside {...} or the lists of by/without/on/ignoring/group_*), strings,
    durations ([5m]) or Grafana variables ($gpu, $__rate_interval)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)   # strings
    e = re.sub(r"\{[^}]*\}", " ", e)                                      # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)                                     # ranges
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\$\{?\w+\}?", " ", e)                                    # variables
    out = []
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)", e):
        rest = e[m.end():].lstrip()
        word = m.group(1)
        if rest.startswith("(") or word.lower() in KEYWORDS:
            continue  # a function, or a keyword
        out.append(word)
    return out

def walk(node, found):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "expr" and isinstance(v, str):
                found.append(v)
            else:
                walk(v, found)
    elif isinstance(node, list):
        for v in node:
            walk(v, found)

assert names('histogram_quantile(0.95, sum by (le) (rate(a_bucket{x=~"$y"}[$__rate_interval])))') == ["a_bucket"]
assert names('clamp_min(a{g="1"} - b, 0) / on (gpu) group_left c') == ["a", "b", "c"]
assert names('max by (gpu, state) (h{i=~"$instance"}) == 1') == ["h"]

for path in sys.argv[1:]:
    d = json.load(open(path))
    f = os.path.basename(path)
    assert isinstance(d.get("schemaVersion"), int) and d["schemaVersion"] >= 36, (f, "schemaVersion")
    assert d.get("title") and d.get("uid"), (f, "title and uid")
    inputs = {i["name"]: i for i in d.get("__inputs", [])}
    assert inputs.get("DS_PROMETHEUS", {}).get("pluginId") == "prometheus", (f, "__inputs")
    exprs = []
    panels = d["panels"] + [p for r in d["panels"] for p in r.get("panels", [])]
    for p in panels:
        if p.get("type") == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}, (f, p["title"])
        assert p["targets"], (f, p["title"], "no query")
        for t in p["targets"]:
            assert t.get("datasource", p["datasource"])["uid"] == "${DS_PROMETHEUS}", (f, p["title"])
    walk(d["panels"], exprs)
    for v in d.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            m = re.match(r"label_values\((.*),\s*\w+\)$", q)
            exprs.append(m.group(1) if m else q)
    assert exprs, (f, "no query")
    for e in exprs:
        ns = names(e)
        assert ns, (f, "a query without a metric", e)
        for n in ns:
            print(f, n)
PY
[ -s "$T_SCRATCH/names" ] || t_fail "no metric names found in the dashboards"
t_ok "the dashboards parse: schemaVersion, the DS_PROMETHEUS input, $(wc -l <"$T_SCRATCH/names") metric names in their queries"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
N=$GPUM_SIM_NODE
export GPUM_MONITOR_INTERVAL=100ms
gd_start
t_wait_file "$GPUM_STATE_DIR/http.addr"
M=$T_SCRATCH/metrics.txt

gd_py '
c = Client()
r = c.ok("reserve", bytes_per_gpu="60GiB", gpus=2, label="big", lease="ttl", ttl_ms=600000)
assert r["reservation"]["state"] == "GRANTED", r
q = c.ok("reserve", bytes_per_gpu="60GiB", gpus=2, label="waits", lease="ttl", ttl_ms=600000)
assert q["reservation"]["state"] == "QUEUED", q
' || t_fail "reservations"
"$GPUM_BIN" sim hold "$N" --device 0 --bytes 1GiB >/dev/null || t_fail "sim hold"
# A process that reports a figure of every unit on r-1 and lives until its stdin closes (a
# report lasts as long as its process).
mkfifo "$T_SCRATCH/in"
reporter=$(gd_pyfile reporter '
c = Client()
c.ok("report", reservation="r-1", source="job", figures={
    "allocated_bytes": 2**30, "queue_p99_us": 11400, "hit_ratio": 0.5,
    "tokens_per_s": 812.5, "completed": 100})
print("reported", flush=True)
sys.stdin.read()
')
python3 "$reporter" <"$T_SCRATCH/in" >"$T_SCRATCH/reporter.out" 2>&1 &
T_PIDS+=($!)
exec 7>"$T_SCRATCH/in"
t_until 20 grep -q '^reported$' "$T_SCRATCH/reporter.out" ||
  t_fail "the reporter: $(cat "$T_SCRATCH/reporter.out")"

ready() {
  curl -sS -f -o "$M" "http://$(cat "$GPUM_STATE_DIR/http.addr")/metrics" &&
    grep -q '^gpum_workload_value{' "$M" && grep -q '^gpum_device_utilization_ratio{gpu="1"' "$M" &&
    grep -q '^gpum_process_memory_used_bytes{.*reservation=""' "$M"
}
t_until 20 ready || t_fail "/metrics never showed the workload, a sample and the held memory: $(cat "$M")"

python3 - "$M" "$T_SCRATCH/names" <<'PY' || t_fail "dashboard queries name metrics gpumd does not export"
import re, sys
text = open(sys.argv[1]).read()
samples = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", text, re.M))
# A family gpumd declares whose series need what this node lacks (fenced bytes need a job under
# the enforcement shim, Xid counters an Xid): declared with HELP and TYPE, no sample yet.
declared = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
missing = []
for line in open(sys.argv[2]):
    f, name = line.split()
    if name not in samples and name not in declared:
        missing.append((f, name))
assert not missing, missing
families = ("bytes", "seconds", "ratio", "per_second", "value")
assert all("gpum_workload_" + u in samples for u in families), sorted(samples)
PY
t_ok "every metric the dashboards query is one gpumd exports"

exec 7>&-
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
