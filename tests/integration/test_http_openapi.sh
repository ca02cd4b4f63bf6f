#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# docs/openapi.yaml conformance: the spec validates against the official OpenAPI 3.1 schema,
# and every endpoint's live responses (success and error cases) on a simulated 2xH100 node
# match the spec's status codes, media types and schemas (tests/http/conform.mjs, node with
# @seriousme/openapi-schema-validator and ajv; `scripts/deps.sh` installs node, npm and the
# packages); the listed reservations include a Slurm step's. Then both GPUs are lost (XID 79)
# and health's 503 document is checked too.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

CONFORM_DIR="$GPUM_SOURCE_DIR/tests/http"
command -v node >/dev/null || t_fail "node is not installed: run scripts/deps.sh"
[ -d "$CONFORM_DIR/node_modules/ajv" ] || t_fail "tests/http/node_modules missing: run scripts/deps.sh (npm ci in tests/http)"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
export GPUMD_URL="http://$(cat "$GPUM_STATE_DIR/http.addr")"
# A Slurm step's reservation (1 byte, made over the socket as gpum_spank.so does), so that the
# listed reservations include a "slurm" object for the schema to check.
gd_py 'Client().ok("reserve", bytes_per_gpu=1, lease="ttl", ttl_ms=600000,
                   slurm={"job_id": "12345_7", "step_id": "batch"})' || t_fail "a Slurm step's reservation"
# A preemptible job holding device memory, for suspend and resume (docs/suspend.md).
mkdir -p "$T_SCRATCH/job"
mkfifo "$T_SCRATCH/job/ctl"
t_bg "$GPUM_BIN" run --mem 1GiB --preemptible --label susp -q -- "$GPUM_TEST_PROGS/suspend_job" 67108864 "$T_SCRATCH/job"
t_wait_file "$T_SCRATCH/job/ready" 30
exec {JOB_CTL}>"$T_SCRATCH/job/ctl"
SUSPEND_ID=$("$GPUM_BIN" jobs --json --all | python3 -c 'import json,sys; d=json.load(sys.stdin); rs=d["reservations"] if isinstance(d,dict) else d; print([r["id"] for r in rs if r["label"]=="susp"][0])')
export SUSPEND_ID
GPUMD_TOKEN=$(cat "$GPUM_STATE_DIR/http.token")
export GPUMD_TOKEN
(cd "$CONFORM_DIR" && node conform.mjs "$GPUM_SOURCE_DIR/docs/openapi.yaml") || t_fail "conformance (main phase)"
t_ok "every endpoint's success and error responses conform to docs/openapi.yaml"

"$GPUM_BIN" sim inject "$T_NODE" --device 0 --xid 79 >/dev/null
"$GPUM_BIN" sim inject "$T_NODE" --device 1 --xid 79 >/dev/null
health_503() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$GPUMD_URL/api/v1/gpu/health")" = 503 ]; }
t_until 20 health_503 || t_fail "health did not turn 503 after losing both GPUs"
(cd "$CONFORM_DIR" && node conform.mjs "$GPUM_SOURCE_DIR/docs/openapi.yaml" --phase unhealthy) ||
  t_fail "conformance (unhealthy phase)"
t_ok "the unhealthy 503 health document conforms too"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
