/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reservations that ended, kept in sight for a while: a FAILED one (its GPU fell off the bus)
 * must not vanish from `gpum jobs --all` and the dashboard the moment it ends. gpumd keeps the
 * last GPUMD_ENDED_MAX reservations that reached a final state, each for GPUMD_ENDED_KEEP_NS
 * after it ended, in memory (the ledger keeps them for ledger.retention; this is what the
 * faces show): `list` with "ended": true and the REST list give them under "ended", newest
 * first, with their state and reason.
 */
#include <stdlib.h>

#include <gpum/error.h>

#include "gpumd_internal.h"

void gpumd_ended_note(gpumd_t *d, const gpumd_resv_t *r) {
  if (!d->ended && !(d->ended = calloc(GPUMD_ENDED_MAX, sizeof *d->ended)))
    return; /* out of memory: only the faces miss it, the ledger has it */
  d->ended[(d->ended_head + d->ended_n) % GPUMD_ENDED_MAX] = *r;
  if (d->ended_n < GPUMD_ENDED_MAX)
    d->ended_n++;
  else
    d->ended_head = (d->ended_head + 1) % GPUMD_ENDED_MAX;
}

json_t *gpumd_ended_json(gpumd_t *d, const gpumd_actor_t *a, bool all, uint64_t now_ns) {
  json_t *arr = json_array();
  for (size_t k = d->ended_n; arr && k-- > 0;) { /* newest first */
    const gpumd_resv_t *r = &d->ended[(d->ended_head + k) % GPUMD_ENDED_MAX];
    if (r->ended_ns + GPUMD_ENDED_KEEP_NS < now_ns)
      break; /* older ones are older still */
    if (all || r->uid == a->uid)
      json_array_append_new(arr, gpumd_engine_resv_json(d, r, false));
  }
  return arr;
}
