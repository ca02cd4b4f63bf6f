#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum_device_memory_health on simulated devices: Ampere and later report remapped rows and no
# page retirement, older GPUs the other way round, and a device with neither reports nothing
# valid (never "not pending"). XID 63 and double-bit ECC errors leave a remap or retirement
# pending, XID 64 a remap failure; a reset (sim clear) applies pending remaps but keeps the
# failure. Missing NVML symbols leave the fields invalid; a lost device is GPUM_ELOST.
source "$GPUM_SOURCE_DIR/tests/integration/device_lib.sh"

cat >"$T_SCRATCH/spec.yaml" <<'YAML'
name: memhealth
devices:
  - name: Sim A100
    memory: 8GiB
    compute_capability: "8.0"
  - name: Sim V100
    memory: 8GiB
    compute_capability: "7.0"
  - name: Sim consumer
    memory: 8GiB
    compute_capability: "8.6"
    ecc: false
    unsupported: [remapped_rows]
YAML
d_sim_start "$T_SCRATCH/spec.yaml"

mh() { "$DUMP" --backend nvml --no-procs | grep "^memhealth $1 " || t_fail "no memhealth line for $1"; }
no_remap="remapped_corr=null remapped_unc=null remap_pending=null remap_failure=null"

d_expect "$(mh 0)" "^memhealth 0 rc=OK retired_pending=null remapped_corr=0 remapped_unc=0 remap_pending=0 remap_failure=0$" \
  "Ampere: remapped rows, no page retirement"
d_expect "$(mh 1)" "^memhealth 1 rc=OK retired_pending=0 $no_remap$" \
  "V100: page retirement, no remapped rows"
d_expect "$(mh 2)" "^memhealth 2 rc=OK retired_pending=null $no_remap$" \
  "neither: nothing valid, still OK"
t_ok "support follows the generation; unsupported is invalid, not 0"

"$SIMCTL" inject "$T_NODE" 0 xid 63 || t_fail "inject xid 63"
"$SIMCTL" inject "$T_NODE" 1 xid 63 || t_fail "inject xid 63"
d_expect "$(mh 0)" "rc=OK retired_pending=null remapped_corr=0 remapped_unc=1 remap_pending=1 remap_failure=0$" \
  "XID 63 on Ampere: a remap is pending"
d_expect "$(mh 1)" "rc=OK retired_pending=1 $no_remap$" "XID 63 on V100: a retirement is pending"
"$SIMCTL" inject "$T_NODE" 0 xid 64 || t_fail "inject xid 64"
d_expect "$(mh 0)" "remap_pending=1 remap_failure=1$" "XID 64: remap failure"
t_ok "XID 63 pending, XID 64 failure"

# A reset applies pending remaps and retirements (the row count stays); the failure stays.
"$SIMCTL" clear "$T_NODE" 0 || t_fail "clear 0"
"$SIMCTL" clear "$T_NODE" 1 || t_fail "clear 1"
d_expect "$(mh 0)" "remapped_unc=1 remap_pending=0 remap_failure=1$" "reset keeps the failure"
d_expect "$(mh 1)" "rc=OK retired_pending=0 " "reset applies the retirement"
t_ok "clear applies pending work, keeps the recorded failure"

# Double-bit ECC errors leave a retirement pending (pre-Ampere) or a remap (Ampere, ECC on).
"$SIMCTL" inject "$T_NODE" 1 ecc_double 1 || t_fail "inject ecc double"
d_expect "$(mh 1)" "rc=OK retired_pending=1 " "DBE on V100: retirement pending"
"$SIMCTL" inject "$T_NODE" 0 ecc_single 5 || t_fail "inject ecc single"
d_expect "$(mh 0)" "remapped_unc=1 remap_pending=0 " "single-bit errors remap nothing"
"$SIMCTL" inject "$T_NODE" 0 ecc_double 2 || t_fail "inject ecc double"
d_expect "$(mh 0)" "remapped_unc=2 remap_pending=1 " "DBE on Ampere: a remap is pending"
t_ok "double-bit ECC errors"

# Optional symbols: a driver without them is fine, the fields are just invalid.
out=$(GPUM_TEST_NVML_HIDE=nvmlDeviceGetRemappedRows,nvmlDeviceGetRetiredPagesPendingStatus \
  "$DUMP" --backend nvml --no-procs)
for i in 0 1 2; do
  d_expect "$out" "^memhealth $i rc=OK retired_pending=null $no_remap$" "no symbols: device $i"
done
t_ok "missing symbols leave the fields invalid"

# A lost device fails the read (nothing valid); the others still answer.
"$SIMCTL" inject "$T_NODE" 1 xid 79 || t_fail "inject xid 79"
d_expect "$(mh 1)" "^memhealth 1 rc=ELOST retired_pending=null $no_remap$" "lost device"
d_expect "$(mh 0)" "^memhealth 0 rc=OK " "the other device still answers"
t_ok "a lost device is ELOST"
