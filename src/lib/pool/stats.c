/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Statistics with PyTorch's names and meanings: each counter keeps its current value, its peak
 * since creation (or the last reset), and the totals ever added (allocated) and removed
 * (freed). Counters are updated where things happen; the largest free block and fragmentation
 * are computed when asked (a look at the top TLSF list of each owner).
 */
#include <string.h>

#include <gpum/error.h>

#include "pool/pool_internal.h"

static uint64_t largest_of(const gpum__owner_t *o) {
  uint64_t best = 0;
  for (int k = 0; k < GPUM__KINDS; k++) {
    const gpum__block_t *b = gpum__tlsf_largest(&o->tlsf[k]);
    if (b != NULL && b->size > best)
      best = b->size;
  }
  return best;
}

void gpum__pool_stats_locked(gpum_pool_t *p, gpum_pool_stats_t *out) {
  *out = p->st;
  uint64_t best = largest_of(&p->shared);
  for (const gpum__owner_t *o = p->owners; o != NULL; o = o->next) {
    uint64_t b = largest_of(o);
    if (b > best)
      best = b;
  }
  out->largest_free_block = best;
  out->fragmentation = out->free_cached ? 1.0 - (double)best / (double)out->free_cached : 0.0;
  out->limit = p->limit;
  out->cache_limit = p->cache_max == UINT64_MAX ? 0 : p->cache_max;
}

int gpum_pool_stats(gpum_pool_t *p, gpum_pool_stats_t *out) {
  if (p == NULL || out == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_pool_stats: %s is NULL", p ? "out" : "pool");
  pthread_mutex_lock(&p->lock);
  gpum__pool_stats_locked(p, out);
  pthread_mutex_unlock(&p->lock);
  return 0;
}

void gpum_pool_reset_peaks(gpum_pool_t *p) {
  if (p == NULL)
    return;
  pthread_mutex_lock(&p->lock);
  gpum_pool_stat_t *all[] = {&p->st.allocated_bytes,
                             &p->st.requested_bytes,
                             &p->st.reserved_bytes,
                             &p->st.active_bytes,
                             &p->st.inactive_split_bytes,
                             &p->st.allocation,
                             &p->st.segment,
                             &p->st.active,
                             &p->st.inactive_split};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
    all[i]->peak = all[i]->current;
  pthread_mutex_unlock(&p->lock);
}
