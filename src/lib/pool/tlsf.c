/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLSF free lists (see tlsf_internal.h): mapping of sizes to lists, the two bitmap levels, and
 * the O(1) good-fit search. The search is what makes allocation O(1): one ffs on the second
 * level bitmap of the request's first level, and if that is empty one ffs on the first level.
 */
#include <stddef.h>
#include <string.h>

#include "pool/pool_internal.h"

#define UNIT_SHIFT 9 /* 512-byte units */
#define SCAN_MAX 8   /* blocks looked at in a bounded scan */

static inline unsigned fls64(uint64_t x) {
  return 63u - (unsigned)__builtin_clzll(x);
}

static inline void mapping(uint64_t size, unsigned *fl, unsigned *sl) {
  uint64_t u = size >> UNIT_SHIFT;
  if (u < GPUM__TLSF_SL) {
    *fl = 0;
    *sl = (unsigned)u;
    return;
  }
  unsigned f = fls64(u);
  *sl = (unsigned)(u >> (f - GPUM__TLSF_SL_LOG2)) & (GPUM__TLSF_SL - 1);
  *fl = f - (GPUM__TLSF_SL_LOG2 - 1);
}

void gpum__tlsf_mapping(uint64_t size, unsigned *fl, unsigned *sl) {
  mapping(size, fl, sl);
}

void gpum__tlsf_init(gpum__tlsf_t *t) {
  memset(t, 0, sizeof(*t));
}

void gpum__tlsf_insert(gpum__tlsf_t *t, gpum__block_t *b) {
  unsigned fl, sl;
  mapping(b->size, &fl, &sl);
  gpum__block_t *head = t->heads[fl][sl];
  b->prev_free = NULL;
  b->next_free = head;
  if (head != NULL)
    head->prev_free = b;
  t->heads[fl][sl] = b;
  t->sl_bitmap[fl] |= 1u << sl;
  t->fl_bitmap |= UINT64_C(1) << fl;
  t->count++;
}

void gpum__tlsf_remove(gpum__tlsf_t *t, gpum__block_t *b) {
  unsigned fl, sl;
  mapping(b->size, &fl, &sl); /* cheaper than keeping it in the node's hot line */
  if (b->prev_free != NULL)
    b->prev_free->next_free = b->next_free;
  else
    t->heads[fl][sl] = b->next_free;
  if (b->next_free != NULL)
    b->next_free->prev_free = b->prev_free;
  b->prev_free = b->next_free = NULL;
  if (t->heads[fl][sl] == NULL) {
    t->sl_bitmap[fl] &= ~(1u << sl);
    if (t->sl_bitmap[fl] == 0)
      t->fl_bitmap &= ~(UINT64_C(1) << fl);
  }
  t->count--;
}

/* The first non-empty list at or above (fl, sl), or false. */
static bool first_list(const gpum__tlsf_t *t, unsigned *fl, unsigned *sl) {
  if (*fl >= GPUM__TLSF_FL)
    return false;
  uint32_t sl_map = *sl < GPUM__TLSF_SL ? t->sl_bitmap[*fl] & (~0u << *sl) : 0;
  if (sl_map == 0) {
    uint64_t fl_map = *fl + 1 < 64 ? t->fl_bitmap & (~UINT64_C(0) << (*fl + 1)) : 0;
    if (fl_map == 0)
      return false;
    *fl = (unsigned)__builtin_ctzll(fl_map);
    sl_map = t->sl_bitmap[*fl];
  }
  *sl = (unsigned)__builtin_ctz(sl_map);
  return true;
}

static gpum__block_t *pick(gpum__block_t *head, uint64_t size, gpum__fit_t fit) {
  gpum__block_t *best = NULL;
  int n = 0;
  for (gpum__block_t *b = head; b != NULL && n < SCAN_MAX; b = b->next_free, n++) {
    if (b->size < size)
      continue;
    if (fit == GPUM__FIT_FIRST)
      return b;
    if (best == NULL || b->addr < best->addr)
      best = b;
  }
  return best;
}

gpum__block_t *gpum__tlsf_find(const gpum__tlsf_t *t, uint64_t size, gpum__fit_t fit) {
  if (t->count == 0)
    return NULL;
  /* The request's own list first: a block there that fits wastes less than 1/32. */
  unsigned fl, sl;
  mapping(size, &fl, &sl);
  gpum__block_t *b = t->heads[fl][sl] ? pick(t->heads[fl][sl], size, fit) : NULL;
  if (b != NULL)
    return b;
  /* Then the next non-empty list at or above the next list boundary: every block fits. */
  if (++sl == GPUM__TLSF_SL) {
    sl = 0;
    fl++;
  }
  if (!first_list(t, &fl, &sl))
    return NULL;
  return pick(t->heads[fl][sl], size, fit);
}

gpum__block_t *gpum__tlsf_largest(const gpum__tlsf_t *t) {
  if (t->fl_bitmap == 0)
    return NULL;
  unsigned fl = fls64(t->fl_bitmap);
  unsigned sl = 31u - (unsigned)__builtin_clz(t->sl_bitmap[fl]);
  gpum__block_t *best = NULL;
  for (gpum__block_t *b = t->heads[fl][sl]; b != NULL; b = b->next_free)
    if (best == NULL || b->size > best->size)
      best = b;
  return best;
}

int gpum__tlsf_check(const gpum__tlsf_t *t, const char **why) {
  uint64_t n = 0;
  for (unsigned fl = 0; fl < GPUM__TLSF_FL; fl++) {
    bool fl_bit = (t->fl_bitmap >> fl) & 1;
    if (fl_bit != (t->sl_bitmap[fl] != 0)) {
      *why = "first-level bitmap disagrees with the second level";
      return -1;
    }
    for (unsigned sl = 0; sl < GPUM__TLSF_SL; sl++) {
      const gpum__block_t *prev = NULL;
      bool sl_bit = (t->sl_bitmap[fl] >> sl) & 1;
      if (sl_bit != (t->heads[fl][sl] != NULL)) {
        *why = "second-level bitmap disagrees with the lists";
        return -1;
      }
      for (const gpum__block_t *b = t->heads[fl][sl]; b != NULL; b = b->next_free, n++) {
        unsigned bfl, bsl;
        gpum__tlsf_mapping(b->size, &bfl, &bsl);
        if (bfl != fl || bsl != sl) {
          *why = "a free block is in the wrong size list";
          return -1;
        }
        if (b->prev_free != prev || b->state != GPUM__B_FREE) {
          *why = "a free list is broken (back link or state)";
          return -1;
        }
        prev = b;
        if (n > t->count) {
          *why = "a free list is longer than its count (cycle?)";
          return -1;
        }
      }
    }
  }
  if (n != t->count) {
    *why = "the free-list count disagrees with the lists";
    return -1;
  }
  return 0;
}
