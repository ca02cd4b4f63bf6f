/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pool's consistency checker, for tests and debugging (O(blocks)): every segment is
 * covered end to end by its blocks, segments do not overlap (so neither do blocks), physical
 * links agree, no two adjacent free blocks have the same owner (merging is complete), every
 * free block is in its owner's TLSF lists and the lists hold nothing else, the bitmaps agree
 * with the lists, stream lists are in stamp order, allocated blocks are exactly the pointer
 * map's, awaiting blocks exactly the deferred list, empty segments exactly the empty list, and
 * the counters equal what the blocks say.
 */
#include <stdlib.h>

#include <gpum/error.h>

#include "pool/pool_internal.h"

typedef struct {
  uint64_t alloc_bytes, requested, nalloc, nawait, await_bytes, free_bytes, nfree;
  uint64_t split_free, split_free_bytes, reserved, nsegs;
} totals_t;

#define FAIL(...) return gpum_error(GPUM_EINTERNAL, __VA_ARGS__)

static int check_block(gpum_pool_t *p, const gpum__seg_t *s, const gpum__block_t *b, totals_t *t) {
  unsigned long long a = (unsigned long long)b->addr;
  if (b->seg != s || b->size == 0 || b->size % GPUM__POOL_ROUND != 0)
    FAIL("block 0x%llx: wrong segment or size %llu", a, (unsigned long long)b->size);
  const gpum__block_t *n = b->next_phys;
  if (n != NULL && (n->prev_phys != b || n->addr != b->addr + b->size))
    FAIL("block 0x%llx: its next block 0x%llx does not follow it", a, (unsigned long long)n->addr);
  bool split = b->prev_phys != NULL || n != NULL;
  if (b->state != GPUM__B_FREE && b->owner != NULL)
    FAIL("block 0x%llx is not free but has a free-list owner", a);
  switch (b->state) {
  case GPUM__B_ALLOC:
    if (gpum__blockmap_get(&p->map, b->addr) != b)
      FAIL("allocated block 0x%llx is not in the pointer map", a);
    t->alloc_bytes += b->size;
    t->requested += b->requested;
    t->nalloc++;
    break;
  case GPUM__B_AWAIT:
    t->nawait++;
    t->await_bytes += b->size;
    break;
  case GPUM__B_FREE:
    if (b->owner == NULL)
      FAIL("free block 0x%llx has no owner", a);
    if (n != NULL && n->state == GPUM__B_FREE && n->owner == b->owner)
      FAIL("free blocks 0x%llx and 0x%llx of one owner are adjacent (not merged)", a,
           (unsigned long long)n->addr);
    if (gpum__blockmap_get(&p->map, b->addr) != NULL)
      FAIL("free block 0x%llx is still in the pointer map", a);
    t->free_bytes += b->size;
    t->nfree++;
    if (split) {
      t->split_free++;
      t->split_free_bytes += b->size;
    }
    break;
  default:
    FAIL("block 0x%llx has a bad state %d", a, b->state);
  }
  return 0;
}

static int check_segment(gpum_pool_t *p, const gpum__seg_t *s, totals_t *t) {
  unsigned long long base = (unsigned long long)s->base;
  if (s->va_size != 0 ? s->size > s->va_size || s != p->xseg : s->size == 0)
    FAIL("segment 0x%llx: bad size %llu", base, (unsigned long long)s->size);
  if (s->first == NULL
          ? s->size != 0 || s->last != NULL
          : s->first->addr != s->base || s->first->prev_phys != NULL ||
                s->last->next_phys != NULL || s->last->addr + s->last->size != s->base + s->size)
    FAIL("segment 0x%llx: its blocks do not cover it end to end", base);
  uint32_t used = 0;
  for (const gpum__block_t *b = s->first; b != NULL; b = b->next_phys) {
    int rc = check_block(p, s, b, t);
    if (rc != 0)
      return rc;
    used += b->state != GPUM__B_FREE;
  }
  if (used != s->used)
    FAIL("segment 0x%llx: %u blocks in use, counted %u", base, used, s->used);
  if (s->va_size == 0 && s->in_empty != (used == 0))
    FAIL("segment 0x%llx: on the empty list is %d with %u blocks in use", base, s->in_empty, used);
  t->reserved += s->size;
  t->nsegs++;
  return 0;
}

static int cmp_seg(const void *a, const void *b) {
  const gpum__seg_t *x = *(const gpum__seg_t *const *)a, *y = *(const gpum__seg_t *const *)b;
  return x->base < y->base ? -1 : x->base > y->base;
}

static int check_overlap(gpum_pool_t *p, size_t n) {
  const gpum__seg_t **v = malloc((n ? n : 1) * sizeof(*v));
  if (v == NULL)
    return gpum_error(GPUM_ENOMEM, "check: out of memory");
  size_t i = 0;
  for (const gpum__seg_t *s = p->segs; s != NULL; s = s->next)
    v[i++] = s;
  qsort(v, n, sizeof(*v), cmp_seg);
  int rc = 0;
  for (i = 1; i < n && rc == 0; i++) {
    uint64_t end = v[i - 1]->base + (v[i - 1]->va_size ? v[i - 1]->va_size : v[i - 1]->size);
    if (end > v[i]->base)
      rc = gpum_error(GPUM_EINTERNAL, "segments 0x%llx and 0x%llx overlap",
                      (unsigned long long)v[i - 1]->base, (unsigned long long)v[i]->base);
  }
  free(v);
  return rc;
}

static int check_owner(const gpum__owner_t *o, uint64_t *nfree) {
  const char *why = NULL;
  for (int k = 0; k < GPUM__KINDS; k++) {
    if (gpum__tlsf_check(&o->tlsf[k], &why) != 0)
      FAIL("free lists of %s %llu: %s", o->shared ? "the shared owner" : "stream",
           (unsigned long long)o->stream, why);
    for (unsigned fl = 0; fl < GPUM__TLSF_FL; fl++)
      for (unsigned sl = 0; sl < GPUM__TLSF_SL; sl++)
        for (const gpum__block_t *b = o->tlsf[k].heads[fl][sl]; b != NULL; b = b->next_free)
          if (b->owner != o || b->seg->kind != k)
            FAIL("free block 0x%llx is in the lists of another owner or pool kind",
                 (unsigned long long)b->addr);
    *nfree += o->tlsf[k].count;
  }
  if (o->shared)
    return o->age_head == NULL ? 0 : gpum_error(GPUM_EINTERNAL, "the shared owner has an age list");
  uint64_t n = 0, stamp = 0;
  for (const gpum__block_t *b = o->age_head; b != NULL; b = b->next_age, n++) {
    if (b->owner != o || b->state != GPUM__B_FREE || b->stamp < stamp)
      FAIL("stream %llu: its free-order list is broken at 0x%llx", (unsigned long long)o->stream,
           (unsigned long long)b->addr);
    stamp = b->stamp;
  }
  if (n != o->tlsf[0].count + o->tlsf[1].count)
    FAIL("stream %llu: %llu blocks in free order, %llu in its lists", (unsigned long long)o->stream,
         (unsigned long long)n, (unsigned long long)(o->tlsf[0].count + o->tlsf[1].count));
  return 0;
}

static int check_stat(const char *name, uint64_t have, uint64_t want) {
  if (have != want)
    FAIL("stat %s is %llu, the blocks say %llu", name, (unsigned long long)have,
         (unsigned long long)want);
  return 0;
}

static int check_totals(gpum_pool_t *p, const totals_t *t) {
  const gpum_pool_stats_t *st = &p->st;
  int rc = 0;
  rc = rc ? rc : check_stat("allocated_bytes", st->allocated_bytes.current, t->alloc_bytes);
  rc = rc ? rc : check_stat("requested_bytes", st->requested_bytes.current, t->requested);
  rc = rc ? rc : check_stat("allocation", st->allocation.current, t->nalloc);
  rc = rc ? rc : check_stat("active", st->active.current, t->nalloc + t->nawait);
  rc = rc ? rc
          : check_stat("active_bytes", st->active_bytes.current, t->alloc_bytes + t->await_bytes);
  rc = rc ? rc : check_stat("reserved_bytes", st->reserved_bytes.current, t->reserved);
  rc = rc ? rc : check_stat("segment", st->segment.current, t->nsegs);
  rc = rc ? rc : check_stat("free_cached", st->free_cached, t->free_bytes);
  rc = rc ? rc : check_stat("inactive_split", st->inactive_split.current, t->split_free);
  rc = rc ? rc
          : check_stat("inactive_split_bytes", st->inactive_split_bytes.current,
                       t->split_free_bytes);
  rc = rc ? rc : check_stat("pointer map entries", gpum__blockmap_count(&p->map), t->nalloc);
  return rc;
}

static int check_lists(gpum_pool_t *p, const totals_t *t) {
  uint64_t nfree = 0, n = 0;
  int rc = check_owner(&p->shared, &nfree);
  for (const gpum__owner_t *o = p->owners; o != NULL && rc == 0; o = o->next)
    rc = check_owner(o, &nfree);
  if (rc != 0)
    return rc;
  if (nfree != t->nfree)
    FAIL("%llu blocks in free lists, %llu free blocks", (unsigned long long)nfree,
         (unsigned long long)t->nfree);
  for (const gpum__block_t *b = p->deferred; b != NULL; b = b->next_free, n++)
    if (b->state != GPUM__B_AWAIT)
      FAIL("block 0x%llx is on the deferred list but not awaiting", (unsigned long long)b->addr);
  if (n != t->nawait)
    FAIL("%llu blocks on the deferred list, %llu awaiting", (unsigned long long)n,
         (unsigned long long)t->nawait);
  n = 0;
  for (const gpum__seg_t *s = p->empty_head; s != NULL; s = s->next_empty, n++)
    if (!s->in_empty || s->used != 0)
      FAIL("segment 0x%llx is on the empty list but in use", (unsigned long long)s->base);
  n = 0;
  for (const gpum__block_t *b = p->node_free; b != NULL; b = b->next_free)
    n++;
  if (n != p->node_avail)
    FAIL("%llu spare nodes, counted %zu", (unsigned long long)n, p->node_avail);
  return 0;
}

int gpum__pool_check(gpum_pool_t *p) {
  if (p == NULL)
    return gpum_error(GPUM_EINVAL, "gpum__pool_check: pool is NULL");
  pthread_mutex_lock(&p->lock);
  totals_t t = {0};
  int rc = 0;
  for (const gpum__seg_t *s = p->segs; s != NULL && rc == 0; s = s->next)
    rc = check_segment(p, s, &t);
  if (rc == 0)
    rc = check_overlap(p, t.nsegs);
  if (rc == 0)
    rc = check_lists(p, &t);
  if (rc == 0)
    rc = check_totals(p, &t);
  pthread_mutex_unlock(&p->lock);
  return rc;
}
