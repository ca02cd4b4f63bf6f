#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GPU types as people write them, end to end on a simulated node of two A100-SXM4-40GB, one
# A100-SXM4-80GB and one A10: REST's gpu_type (nodes, validate, allocate) and gpum run --type
# match a family without case (a100 selects the A100s), never a longer family that starts the
# same (A10 is not an A100), family and memory (A100-80GB), a vendor, and shell patterns on the
# whole name or the family; a word that is no type (SXM4) matches nothing.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"
source "$(dirname "$0")/http_lib.sh"

cat >"$T_SCRATCH/types.yaml" <<'YAML'
name: types
devices:
  - count: 2
    name: "NVIDIA A100-SXM4-40GB"
    memory: 40GiB
  - name: "NVIDIA A100-SXM4-80GB"
    memory: 80GiB
  - name: "NVIDIA A10"
    memory: 24GiB
YAML
t_sim_start "$T_SCRATCH/types.yaml"
gd_start

hp '
def nodes(t):
    q = "/api/v1/gpu/nodes?gpu_type=" + t.replace("*", "%2A").replace("?", "%3F").replace(" ", "%20")
    n = expect("GET", q, 200)["nodes"]  # no node at all when nothing matches
    return sorted(d["index"] for d in n[0]["devices"]) if n else []
cases = [("a100", [0, 1, 2]), ("A100", [0, 1, 2]), ("NVIDIA A100", [0, 1, 2]),
         ("A10", [3]), ("a10", [3]), ("A100-80GB", [2]), ("a100 40gb", [0, 1]),
         ("A100-SXM4-80GB", [2]), ("nvidia", [0, 1, 2, 3]), ("amd", []),
         ("A100*", [0, 1, 2]), ("*A100*", [0, 1, 2]), ("*a100*", [0, 1, 2]),
         ("*A10*", [0, 1, 2, 3]), ("A10?", [0, 1, 2]), ("NVIDIA A10", [3]),
         ("SXM4", []), ("H100", [])]
for t, want in cases:
    got = nodes(t)
    assert got == want, "gpu_type=%s: devices %s, expected %s" % (t, got, want)
' || t_fail "nodes?gpu_type"
t_ok "nodes: gpu_type a100 selects the A100s, A10 only the A10, A100-80GB the 80 GB one"

hp '
def validate(t, n):
    return expect("POST", "/api/v1/gpu/validate", 200,
                  body={"memory_gb": 1, "gpu_count": n, "gpu_type": t})
v = validate("a100", 3)
assert v["could_fit"] and sorted(v["devices"]) == [0, 1, 2], v
v = validate("A10", 1)
assert v["could_fit"] and v["devices"] == [3], v
v = validate("A10", 2)
assert not v["could_fit"] and "A10" in v["reason"], v
v = validate("A100-80GB", 2)
assert not v["could_fit"], v
tok = token()
r = expect("POST", "/api/v1/gpu/allocate", 201, tok=tok,
           body={"memory_gb": 1, "gpu_count": 3, "gpu_type": "a100"})["reservation"]
assert sorted(x["index"] for x in r["devices"]) == [0, 1, 2], r
expect("DELETE", "/api/v1/reservations/" + r["id"], 200, tok=tok)
expect_err("POST", "/api/v1/gpu/allocate", 422, "ENEVERFIT", "A10", tok=tok,
           body={"memory_gb": 1, "gpu_count": 2, "gpu_type": "A10"})
' || t_fail "validate and allocate with gpu_type"
t_ok "validate and allocate: a100 takes the three A100s, two A10s never fit"

# gpum run --type: the same rules through the socket protocol's model.
G="$GPUM_BIN"
"$G" status --json >"$T_SCRATCH/status.json" || t_fail "gpum status"
mapfile -t UUIDS < <(t_pyjson "$T_SCRATCH/status.json" 'print("\n".join(x["uuid"] for x in d["devices"]))')
[ ${#UUIDS[@]} -eq 4 ] || t_fail "expected 4 simulated GPUs, got ${#UUIDS[@]}"
t_expect 0 "$G" run --mem 1GiB --type a10 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"'
[ "$(cat "$T_OUT")" = "${UUIDS[3]}" ] || t_fail "--type a10 got '$(cat "$T_OUT")', not the A10"
t_expect 0 "$G" run --mem 1GiB --type A100-80GB -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"'
[ "$(cat "$T_OUT")" = "${UUIDS[2]}" ] || t_fail "--type A100-80GB got '$(cat "$T_OUT")'"
t_expect 1 "$G" run --mem 1GiB --gpus 2 --type A10 -- true
grep -q "cannot reserve" "$T_ERR" || { cat "$T_ERR" >&2; t_fail "--type A10 --gpus 2: no reason"; }
t_ok "gpum run --type: a10 gets the A10, A100-80GB the 80 GB A100, two A10s never fit"
