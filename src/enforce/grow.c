/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Elastic reservations (gpum run --max-mem) are not built yet: gpumd has no resize operation,
 * so a reservation never grows and an allocation past its limit fails at once. These are the
 * two places the shim will ask gpumd (docs/enforce.md, "Not yet").
 */
#include "enforce_internal.h"

bool gpum__enf_grow(unsigned dev, uint64_t need) {
  (void)dev;
  (void)need;
  return false;
}

void gpum__enf_maybe_shrink(void) {}
