# SPDX-License-Identifier: Apache-2.0
# Helpers of the suspend tests (test_gpumd_suspend.sh, test_slurm_suspend.sh; sourced after
# lib.sh): a reservation's document by its label, one of its fields, its settled state, the
# simulated GPU's used memory. GPUM_BIN is the gpum that asks gpumd.

# resv_of LABEL: the reservation with that label, as gpum jobs --json gives it ({} when none).
resv_of() {
  "$GPUM_BIN" jobs --json --all >"$T_SCRATCH/jobs.json"
  python3 -c "import json,sys
d=json.load(open(sys.argv[1])); rs=d['reservations'] if isinstance(d,dict) else d
r=[r for r in rs if r['label']==sys.argv[2]]
print(json.dumps(r[0]) if r else '{}')" "$T_SCRATCH/jobs.json" "$1"
}

# field DOC NAME: a field of a reservation's document (devices: their indices, "0,1"; None when
# absent).
field() {
  python3 -c "import json,sys; v=json.loads(sys.argv[1]).get(sys.argv[2]); print(v if not isinstance(v,list) else ','.join(str(x['index']) for x in v))" "$1" "$2"
}

# is_state LABEL STATE [HOLD]: the reservation is in STATE with no move under way (and held,
# True, or not, False, when HOLD is given).
is_state() {
  local r
  r=$(resv_of "$1")
  [ "$(field "$r" state)" = "$2" ] && [ "$(field "$r" moving)" = None ] &&
    { [ -z "${3:-}" ] || [ "$(field "$r" hold)" = "$3" ]; }
}

# gpu_used [INDEX]: the memory used on GPU INDEX (default 0), as gpum status --json reads it.
gpu_used() {
  "$GPUM_BIN" status --json >"$T_SCRATCH/st.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print([x for x in d['devices'] if x['index']==int(sys.argv[2])][0]['memory']['used'])" "$T_SCRATCH/st.json" "${1:-0}"
}
