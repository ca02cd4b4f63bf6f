/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Blocks and segments: the node slab (so that the hot path never calls malloc), free-list
 * membership with merging of free neighbours, splitting a block for a request, taking segments
 * from the source and giving them back, and the expandable segment (one reserved address range
 * whose tail is mapped and unmapped in 2 MiB granules).
 */
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "pool/pool_internal.h"

/* Chunks of nodes grow from 64 nodes (8 KiB) by doubling up to 16384 (2 MiB, one huge page). */
#define CHUNK_MIN_LOG2 6
#define CHUNK_MAX_LOG2 14

static size_t chunk_nodes(size_t i) {
  return (size_t)1 << (CHUNK_MIN_LOG2 + i < CHUNK_MAX_LOG2 ? CHUNK_MIN_LOG2 + i : CHUNK_MAX_LOG2);
}

/* ---- Node slab ---- */

int gpum__pool_nodes_reserve(gpum_pool_t *p, size_t n) {
  while (p->node_avail < n) {
    if (p->nchunks == p->cap_chunks) {
      size_t cap = p->cap_chunks ? p->cap_chunks * 2 : 16;
      void **c = realloc(p->chunks, cap * sizeof(*c));
      if (c == NULL)
        return gpum_error(GPUM_ENOMEM, "pool '%s': out of host memory for block nodes", p->name);
      p->chunks = c;
      p->cap_chunks = cap;
    }
    size_t count = chunk_nodes(p->nchunks);
    gpum__block_t *chunk = gpum__pool_hostmem_alloc(count * sizeof(*chunk));
    if (chunk == NULL)
      return gpum_error(GPUM_ENOMEM, "pool '%s': out of host memory for %zu block nodes", p->name,
                        count);
    p->chunks[p->nchunks++] = chunk;
    /* Pushed in reverse so that nodes are handed out in address order. */
    for (size_t i = count; i-- > 0;) {
      chunk[i].next_free = p->node_free;
      p->node_free = &chunk[i];
    }
    p->node_avail += count;
  }
  return 0;
}

gpum__block_t *gpum__pool_node_get(gpum_pool_t *p) {
  gpum__block_t *b = p->node_free;
  p->node_free = b->next_free;
  p->node_avail--;
  /* Field by field: a whole-struct clear compiles to rep stos. uses and events are NULL
   * already (node_put). */
  b->addr = b->size = b->requested = 0;
  b->prev_phys = b->next_phys = b->prev_free = b->next_free = NULL;
  b->seg = NULL;
  b->owner = b->alloc_owner = NULL;
  b->stream = 0;
  b->nuses = b->cap_uses = b->nevents = 0;
  b->state = GPUM__B_FREE;
  return b;
}

/* Returns a node known to be free (so with no uses or events) to the slab. */
static inline void node_recycle(gpum_pool_t *p, gpum__block_t *b) {
  b->uses = NULL; /* the union held the age links */
  b->events = NULL;
  b->next_free = p->node_free;
  p->node_free = b;
  p->node_avail++;
}

void gpum__pool_node_put(gpum_pool_t *p, gpum__block_t *b) {
  if (b->state != GPUM__B_FREE) {
    free(b->uses);
    free(b->events);
  }
  node_recycle(p, b);
}

void gpum__pool_nodes_free(gpum_pool_t *p) {
  for (size_t i = 0; i < p->nchunks; i++)
    gpum__pool_hostmem_free(p->chunks[i], chunk_nodes(i) * sizeof(gpum__block_t));
  free(p->chunks);
  p->chunks = NULL;
  p->nchunks = p->cap_chunks = p->node_avail = 0;
  p->node_free = NULL;
}

/* ---- Sizes ---- */

uint64_t gpum__pool_round(uint64_t size) {
  return size < GPUM__POOL_ROUND ? GPUM__POOL_ROUND
                                 : (size + GPUM__POOL_ROUND - 1) & ~(GPUM__POOL_ROUND - 1);
}

int gpum__pool_kind(uint64_t rsize) {
  return rsize <= GPUM__POOL_SMALL_MAX ? GPUM__KIND_SMALL : GPUM__KIND_LARGE;
}

/* ---- Free lists ---- */

static inline bool is_split(const gpum__block_t *b) {
  return b->prev_phys != NULL || b->next_phys != NULL;
}

static void age_unlink(gpum__owner_t *o, gpum__block_t *b) {
  if (b->prev_age)
    b->prev_age->next_age = b->next_age;
  else
    o->age_head = b->next_age;
  if (b->next_age)
    b->next_age->prev_age = b->prev_age;
  else
    o->age_tail = b->prev_age;
  b->prev_age = b->next_age = NULL;
}

void gpum__pool_free_remove(gpum_pool_t *p, gpum__block_t *b) {
  gpum__owner_t *o = b->owner;
  gpum__tlsf_remove(&o->tlsf[b->seg->kind], b);
  if (!o->shared)
    age_unlink(o, b);
  p->st.free_cached -= b->size;
  if (is_split(b)) {
    gpum__stat_sub(&p->st.inactive_split, 1);
    gpum__stat_sub(&p->st.inactive_split_bytes, b->size);
  }
}

/* Adds a free block to its owner's lists (no merging). */
static void list_add(gpum_pool_t *p, gpum__block_t *b, gpum__owner_t *o) {
  b->owner = o;
  b->state = GPUM__B_FREE;
  gpum__tlsf_insert(&o->tlsf[b->seg->kind], b);
  if (!o->shared) {
    b->stamp = ++o->seq;
    b->next_age = NULL;
    b->prev_age = o->age_tail;
    if (o->age_tail)
      o->age_tail->next_age = b;
    else
      o->age_head = b;
    o->age_tail = b;
  }
  p->st.free_cached += b->size;
  if (is_split(b)) {
    gpum__stat_add(&p->st.inactive_split, 1);
    gpum__stat_add(&p->st.inactive_split_bytes, b->size);
  }
}

gpum__block_t *gpum__pool_free_insert(gpum_pool_t *p, gpum__block_t *b, gpum__owner_t *owner) {
  gpum__seg_t *s = b->seg;
  gpum__block_t *n = b->prev_phys;
  if (n != NULL && n->owner == owner) { /* owner is set on free blocks only */
    gpum__pool_free_remove(p, n);
    b->addr = n->addr;
    b->size += n->size;
    b->prev_phys = n->prev_phys;
    if (b->prev_phys)
      b->prev_phys->next_phys = b;
    else
      s->first = b;
    node_recycle(p, n);
    p->st.num_merges++;
  }
  n = b->next_phys;
  if (n != NULL && n->owner == owner) {
    gpum__pool_free_remove(p, n);
    b->size += n->size;
    b->next_phys = n->next_phys;
    if (b->next_phys)
      b->next_phys->prev_phys = b;
    else
      s->last = b;
    node_recycle(p, n);
    p->st.num_merges++;
  }
  list_add(p, b, owner);
  if (!owner->shared && owner->event == NULL)
    gpum__pool_owner_arm(p, owner);
  return b;
}

/* ---- Taking and releasing blocks ---- */

void gpum__pool_seg_mark(gpum_pool_t *p, gpum__seg_t *s) {
  if (s->va_size != 0)
    return; /* the expandable segment shrinks by its tail instead */
  if (s->used == 0 && !s->in_empty) {
    s->next_empty = NULL;
    s->prev_empty = p->empty_tail;
    if (p->empty_tail)
      p->empty_tail->next_empty = s;
    else
      p->empty_head = s;
    p->empty_tail = s;
    s->in_empty = true;
  } else if (s->used != 0 && s->in_empty) {
    if (s->prev_empty)
      s->prev_empty->next_empty = s->next_empty;
    else
      p->empty_head = s->next_empty;
    if (s->next_empty)
      s->next_empty->prev_empty = s->prev_empty;
    else
      p->empty_tail = s->prev_empty;
    s->prev_empty = s->next_empty = NULL;
    s->in_empty = false;
  }
}

void gpum__pool_take(gpum_pool_t *p, gpum__block_t *b, uint64_t rsize, uint64_t size,
                     gpum_stream_t stream, gpum__owner_t *owner) {
  gpum__owner_t *from = b->owner;
  gpum__seg_t *s = b->seg;
  gpum__pool_free_remove(p, b);
  if (gpum__pool_should_split(p, b, rsize)) {
    gpum__block_t *r = gpum__pool_node_get(p); /* reserved by the caller */
    r->addr = b->addr + rsize;
    r->size = b->size - rsize;
    r->seg = s;
    r->prev_phys = b;
    r->next_phys = b->next_phys;
    if (r->next_phys)
      r->next_phys->prev_phys = r;
    else
      s->last = r;
    b->next_phys = r;
    b->size = rsize;
    list_add(p, r, from);
    if (!from->shared && from->event == NULL)
      gpum__pool_owner_arm(p, from);
    p->st.num_splits++;
  }
  b->state = GPUM__B_ALLOC;
  b->requested = size;
  b->stream = stream;
  b->owner = NULL;
  b->alloc_owner = owner;
  b->uses = NULL;
  b->events = NULL;
  b->nuses = b->cap_uses = b->nevents = 0;
  if (s->used++ == 0)
    gpum__pool_seg_mark(p, s);
  gpum__blockmap_insert(&p->map, b->addr, b); /* reserved by the caller */
  gpum__stat_add(&p->st.allocated_bytes, b->size);
  gpum__stat_add(&p->st.requested_bytes, size);
  gpum__stat_add(&p->st.allocation, 1);
  gpum__stat_add(&p->st.active_bytes, b->size);
  gpum__stat_add(&p->st.active, 1);
}

void gpum__pool_block_release(gpum_pool_t *p, gpum__block_t *b) {
  gpum__seg_t *s = b->seg;
  gpum__stat_sub(&p->st.active_bytes, b->size);
  gpum__stat_sub(&p->st.active, 1);
  if (b->uses != NULL) {
    free(b->uses);
    b->uses = NULL;
    b->nuses = b->cap_uses = 0;
  }
  b->requested = 0;
  gpum__owner_t *o = (p->has_events && b->alloc_owner != NULL) ? b->alloc_owner : &p->shared;
  b->alloc_owner = NULL;
  b->events = NULL;
  b->state = GPUM__B_FREE;
  gpum__pool_free_insert(p, b, o);
  if (--s->used == 0) {
    gpum__pool_seg_mark(p, s);
    gpum__pool_on_empty(p, s); /* may release s */
  } else if (s == p->xseg) {
    gpum__pool_on_empty(p, s);
  }
}

/* ---- Segments ---- */

static void seg_link(gpum_pool_t *p, gpum__seg_t *s) {
  s->prev = NULL;
  s->next = p->segs;
  if (p->segs)
    p->segs->prev = s;
  p->segs = s;
  gpum__stat_add(&p->st.segment, 1);
}

static void seg_unlink(gpum_pool_t *p, gpum__seg_t *s) {
  if (s->in_empty) {
    s->used = 1; /* leave the empty list */
    gpum__pool_seg_mark(p, s);
  }
  if (s->prev)
    s->prev->next = s->next;
  else
    p->segs = s->next;
  if (s->next)
    s->next->prev = s->prev;
  gpum__stat_sub(&p->st.segment, 1);
}

int gpum__pool_seg_new(gpum_pool_t *p, int kind, uint64_t size, gpum__block_t **out) {
  gpum_devptr_t addr = 0;
  int rc = p->ops->alloc(p->ctx, size, &addr);
  if (rc != 0)
    return rc;
  gpum__seg_t *s = calloc(1, sizeof(*s));
  if (s == NULL) {
    p->ops->free(p->ctx, addr, size);
    return gpum_error(GPUM_ENOMEM, "pool '%s': out of host memory for a segment", p->name);
  }
  gpum__block_t *b = gpum__pool_node_get(p); /* reserved by the caller */
  s->base = addr;
  s->size = size;
  s->kind = kind;
  s->first = s->last = b;
  b->addr = addr;
  b->size = size;
  b->seg = s;
  seg_link(p, s);
  gpum__pool_seg_mark(p, s);
  p->st.num_source_allocs++;
  gpum__stat_add(&p->st.reserved_bytes, size);
  *out = gpum__pool_free_insert(p, b, &p->shared);
  return 0;
}

void gpum__pool_seg_release(gpum_pool_t *p, gpum__seg_t *s) {
  gpum__block_t *b = s->first;
  while (b != NULL) {
    gpum__block_t *next = b->next_phys;
    if (b->state == GPUM__B_FREE)
      gpum__pool_free_remove(p, b);
    gpum__pool_node_put(p, b);
    b = next;
  }
  seg_unlink(p, s);
  int rc = 0;
  if (s->va_size != 0) {
    if (s->size != 0) {
      rc = p->ops->unmap(p->ctx, s->base, s->size);
      p->st.num_unmaps++;
    }
    p->ops->unreserve(p->ctx, s->base, s->va_size);
    if (p->xseg == s)
      p->xseg = NULL;
  } else {
    rc = p->ops->free(p->ctx, s->base, s->size);
    p->st.num_source_frees++;
  }
  if (rc != 0)
    gpum_log(GPUM_LOG_WARN, "pool", "pool '%s': the source failed to give back 0x%llx: %s", p->name,
             (unsigned long long)s->base, gpum_last_error());
  gpum__stat_sub(&p->st.reserved_bytes, s->size);
  free(s);
}

/* ---- The expandable segment ---- */

static uint64_t round_up(uint64_t x, uint64_t to) {
  return (x + to - 1) / to * to;
}

static int xseg_create(gpum_pool_t *p) {
  uint64_t va = p->limit          ? p->limit
                : p->device_total ? p->device_total + p->device_total / 8
                                  : (uint64_t)256 << 30;
  va = round_up(va, GPUM__POOL_GRANULE);
  gpum_devptr_t base = 0;
  int rc = p->ops->reserve(p->ctx, va, &base);
  if (rc != 0)
    return rc;
  gpum__seg_t *s = calloc(1, sizeof(*s));
  if (s == NULL) {
    p->ops->unreserve(p->ctx, base, va);
    return gpum_error(GPUM_ENOMEM, "pool '%s': out of host memory for a segment", p->name);
  }
  s->base = base;
  s->va_size = va;
  s->kind = GPUM__KIND_LARGE;
  seg_link(p, s);
  p->xseg = s;
  return 0;
}

int gpum__pool_xseg_grow(gpum_pool_t *p, uint64_t rsize, gpum__block_t **out) {
  if (p->xseg == NULL) {
    int rc = xseg_create(p);
    if (rc != 0)
      return rc;
  }
  gpum__seg_t *s = p->xseg;
  gpum__block_t *tail = s->last;
  bool tail_free = tail != NULL && tail->state == GPUM__B_FREE;
  uint64_t have = tail_free && tail->owner == &p->shared ? tail->size : 0;
  uint64_t need = round_up(rsize > have ? rsize - have : 1, GPUM__POOL_GRANULE);
  if (s->size + need > s->va_size)
    return gpum_error(GPUM_EDEVOOM, "pool '%s': the expandable segment is full", p->name);
  if (p->limit && p->st.reserved_bytes.current + need > p->limit)
    return gpum_error(GPUM_EDEVOOM, "pool '%s': growing by %llu bytes would pass the limit",
                      p->name, (unsigned long long)need);
  int rc = p->ops->map(p->ctx, s->base + s->size, need);
  if (rc != 0)
    return rc;
  gpum__block_t *n = gpum__pool_node_get(p); /* reserved by the caller */
  n->addr = s->base + s->size;
  n->size = need;
  n->seg = s;
  n->state = GPUM__B_FREE; /* owner NULL: merges with nothing until inserted */
  gpum__owner_t *tail_owner = tail_free ? tail->owner : NULL;
  if (tail_free)
    gpum__pool_free_remove(p, tail); /* its split state changes below */
  n->prev_phys = tail;
  if (tail)
    tail->next_phys = n;
  else
    s->first = n;
  s->last = n;
  if (tail_free)
    list_add(p, tail, tail_owner);
  s->size += need;
  p->st.num_maps++;
  gpum__stat_add(&p->st.reserved_bytes, need);
  *out = gpum__pool_free_insert(p, n, &p->shared);
  return 0;
}

void gpum__pool_xseg_release(gpum_pool_t *p) {
  if (p->xseg != NULL && p->xseg->used == 0)
    gpum__pool_seg_release(p, p->xseg);
}

uint64_t gpum__pool_xseg_shrink(gpum_pool_t *p, uint64_t want, uint64_t keep) {
  gpum__seg_t *s = p->xseg;
  if (s == NULL || want == 0)
    return 0;
  if (s->first == NULL) {
    gpum__pool_seg_release(p, s);
    return 0;
  }
  gpum__block_t *t = s->last;
  if (t->state != GPUM__B_FREE || t->owner != &p->shared)
    return 0;
  uint64_t start = round_up(t->addr - s->base, GPUM__POOL_GRANULE);
  if (start >= s->size)
    return 0;
  uint64_t avail = s->size - start;
  keep = round_up(keep, GPUM__POOL_GRANULE);
  if (avail <= keep)
    return 0;
  avail -= keep;
  uint64_t amount = want >= avail ? avail : round_up(want, GPUM__POOL_GRANULE);
  if (amount > avail)
    amount = avail;
  uint64_t cut = s->size - amount;
  if (p->ops->unmap(p->ctx, s->base + cut, amount) != 0) {
    gpum_log(GPUM_LOG_WARN, "pool", "pool '%s': unmapping %llu bytes failed: %s", p->name,
             (unsigned long long)amount, gpum_last_error());
    return 0;
  }
  gpum__pool_free_remove(p, t);
  if (s->base + cut == t->addr) {
    gpum__block_t *prev = t->prev_phys;
    bool prev_free = prev != NULL && prev->state == GPUM__B_FREE;
    if (prev_free)
      gpum__pool_free_remove(p, prev); /* its split state changes */
    if (prev)
      prev->next_phys = NULL;
    else
      s->first = NULL;
    s->last = prev;
    gpum__pool_node_put(p, t);
    if (prev_free)
      list_add(p, prev, prev->owner);
  } else {
    t->size = s->base + cut - t->addr;
    list_add(p, t, &p->shared);
  }
  s->size = cut;
  p->st.num_unmaps++;
  gpum__stat_sub(&p->st.reserved_bytes, amount);
  if (s->size == 0)
    gpum__pool_seg_release(p, s);
  return amount;
}
