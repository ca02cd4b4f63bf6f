# SPDX-License-Identifier: Apache-2.0
# One device session serves several threads: four threads sample while a fifth waits for events,
# and the waiter does not block the samplers. Labelled "threads", so `make test` also runs it
# under ThreadSanitizer.
source "$GPUM_SOURCE_DIR/tests/integration/device_lib.sh"

cat >"$T_SCRATCH/spec.yaml" <<'YAML'
name: threads
devices:
  - name: Sim GPU
    count: 2
    memory: 8GiB
YAML
d_sim_start "$T_SCRATCH/spec.yaml"

out=$("$GPUM_TEST_PROGS/device_threads") || t_fail "threads: $out"
d_expect "$out" "^ok samplers=4 rounds=50 waiter=blocked$" "sampling during an event wait"
t_ok "thread-safe session"
