/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the pool allocator, shared by its modules (tlsf.c, blockmap.c, hostmem.c,
 * segment.c, streams.c, pool.c, oom.c, strategy.c, stats.c, snapshot.c, eventlog.c, check.c)
 * and its unit tests.
 *
 * Data model: a pool holds segments taken from its source; a segment is covered, end to end,
 * by blocks linked in address order (the physical list). Blocks are out-of-band nodes taken
 * from a slab; the pool never touches the memory it manages. A block is allocated (in the
 * pointer map), awaiting free (freed by the user but waiting on events of streams named with
 * record_stream) or free. A free block sits in exactly one free list: the TLSF lists of its
 * owner, which is either a stream (the block may be reused at once on that stream only) or the
 * shared owner (usable on any stream). Adjacent free blocks with the same owner are always
 * merged. Everything is protected by the pool's mutex.
 */
#ifndef GPUM_POOL_INTERNAL_H
#define GPUM_POOL_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/pool.h>

#include "pool/blockmap_internal.h"
#include "pool/tlsf_internal.h"

/* Sizes (PyTorch's constants). */
#define GPUM__POOL_ROUND ((uint64_t)512)            /* every block is a multiple of this */
#define GPUM__POOL_SMALL_MAX ((uint64_t)1 << 20)    /* requests up to here: small pool */
#define GPUM__POOL_SMALL_SEG ((uint64_t)2 << 20)    /* small segments */
#define GPUM__POOL_LARGE_SEG ((uint64_t)20 << 20)   /* large segments for 1..10 MiB */
#define GPUM__POOL_OWN_SEG_MIN ((uint64_t)10 << 20) /* from here: own segment, 2 MiB steps */
#define GPUM__POOL_GRANULE ((uint64_t)2 << 20)      /* rounding of own segments, map unit */
#define GPUM__POOL_MAX_REQUEST ((uint64_t)1 << 56)  /* larger requests can never succeed */
#define GPUM__POOL_MAX_CALLBACKS 16
#define GPUM__POOL_NAME_MAX 64

enum { GPUM__KIND_SMALL = 0, GPUM__KIND_LARGE = 1, GPUM__KINDS = 2 };
enum { GPUM__B_FREE = 0, GPUM__B_ALLOC = 1, GPUM__B_AWAIT = 2 };

typedef struct gpum__seg gpum__seg_t;
typedef struct gpum__owner gpum__owner_t;

/* A block node: 128 bytes, cache-line aligned. The first line holds everything that free-list
 * operations and the merge checks of a neighbour touch, so that touching a neighbour or a list
 * member costs one cache line; the second line holds what only the block's own alloc and free
 * read. owner is set only while the block is free (so "n->owner == o" alone says that a
 * neighbour is free and mergeable); an allocated block's stream owner is alloc_owner. */
typedef struct gpum__block {
  /* Line 1: hot. */
  _Alignas(64) gpum_devptr_t addr;
  uint64_t size; /* bytes, a multiple of 512 */
  struct gpum__block *prev_phys, *next_phys;
  /* Free: the TLSF list. Awaiting: the pool's deferred list. Unused node: the slab list. */
  struct gpum__block *prev_free, *next_free;
  gpum__seg_t *seg;
  gpum__owner_t *owner; /* free: the owner whose lists hold it; NULL otherwise */
  /* Line 2: the block's own details. */
  uint64_t requested;   /* bytes asked for (allocated and awaiting blocks) */
  gpum_stream_t stream; /* the stream it was allocated on */
  union {
    struct {          /* free and owned by a stream: its place in that stream's free order */
      uint64_t stamp; /* the owner's sequence number at free */
      struct gpum__block *prev_age, *next_age;
    };
    struct {                      /* allocated or awaiting */
      gpum__owner_t *alloc_owner; /* the allocating stream's owner, or NULL */
      gpum_stream_t *uses;        /* record_stream streams (malloc'd), nuses of cap_uses */
      void **events;              /* awaiting: events still pending (malloc'd), nevents */
      uint32_t nuses, cap_uses, nevents;
    };
  };
  uint8_t state; /* GPUM__B_* */
} gpum__block_t;

_Static_assert(sizeof(gpum__block_t) == 128, "a block node is two cache lines");
_Static_assert(offsetof(gpum__block_t, requested) == 64, "the hot fields fill the first line");

struct gpum__seg {
  gpum_devptr_t base;
  uint64_t size;    /* bytes held from the source (mapped bytes for an expandable one) */
  uint64_t va_size; /* expandable: the reserved address range; 0 for a plain segment */
  int kind;
  uint32_t used; /* blocks allocated or awaiting free */
  gpum__block_t *first, *last;
  gpum__seg_t *prev, *next;             /* every segment of the pool */
  gpum__seg_t *prev_empty, *next_empty; /* segments with used == 0, oldest first */
  bool in_empty;
};

struct gpum__owner {
  gpum_stream_t stream;
  bool shared;
  gpum__tlsf_t tlsf[GPUM__KINDS];
  gpum__block_t *age_head, *age_tail;
  uint64_t seq;       /* stamps of frees on this stream */
  void *event;        /* outstanding event recorded on the stream, or NULL */
  uint64_t event_seq; /* the event covers blocks with stamp <= this */
  gpum__owner_t *next;
};

typedef struct {
  gpum_pool_oom_fn fn;
  void *arg;
} gpum__oom_cb_t;

struct gpum_pool {
  pthread_mutex_t lock;
  gpum_pool_source_t *src;
  const gpum_pool_source_ops_t *ops;
  void *ctx;
  bool has_events, has_vmm;
  uint64_t device_total; /* from mem_info at create; 0 when unknown */

  /* Options, effective values. */
  char name[GPUM__POOL_NAME_MAX];
  gpum_pool_opts_t opts; /* as given (name points into this struct) */
  gpum_pool_strategy_t strategy;
  uint64_t limit;       /* 0 = none */
  uint64_t cache_max;   /* most bytes kept cached; UINT64_MAX = no bound */
  uint64_t max_split;   /* 0 = none */
  double gc_threshold;  /* 0 = off */
  bool expandable;      /* use an expandable segment for the large pool */
  uint64_t greedy_step; /* GREEDY: size of the next large segment */
  FILE *log;
  uint64_t log_sec; /* event log clock cache */
  char log_hms[16];

  /* Free lists. */
  gpum__owner_t shared;
  gpum__owner_t *owners, *last_owner;

  /* Blocks. */
  gpum__blockmap_t map;
  gpum__block_t *node_free;
  size_t node_avail;
  void **chunks; /* chunk i holds 64 << min(i, 8) nodes (segment.c) */
  size_t nchunks, cap_chunks;
  gpum__block_t *deferred; /* awaiting blocks */

  /* Segments. */
  gpum__seg_t *segs;
  gpum__seg_t *empty_head, *empty_tail;
  gpum__seg_t *xseg; /* the expandable segment, or NULL */

  gpum__oom_cb_t callbacks[GPUM__POOL_MAX_CALLBACKS];
  size_t ncallbacks;

  gpum_pool_stats_t st; /* every counter except the computed ones */
};

struct gpum_pool_source {
  gpum_pool_source_ops_t ops;
  void *ctx;
  char name[32];
  /* Its memory is host memory (host, pinned) or no memory (simulated), not a GPU's: the
   * reservation (GPUM_MEM_LIMIT, GPU bytes) is not its pools' default limit. */
  bool host_memory;
};

/* ---- hostmem.c: zeroed, cache-line aligned host memory for nodes and the pointer map;
 * from 2 MiB up, 2 MiB aligned and advised to use transparent huge pages (fewer TLB misses
 * when the pool holds many blocks) ---- */
void *gpum__pool_hostmem_alloc(size_t bytes); /* NULL when out of memory */
void gpum__pool_hostmem_free(void *ptr, size_t bytes);

/* ---- segment.c: nodes, segments, free-list membership, split and merge ---- */
int gpum__pool_nodes_reserve(gpum_pool_t *p, size_t n); /* 0 or GPUM_ENOMEM */
gpum__block_t *gpum__pool_node_get(gpum_pool_t *p);     /* after a reserve: never NULL */
void gpum__pool_node_put(gpum_pool_t *p, gpum__block_t *b);
void gpum__pool_nodes_free(gpum_pool_t *p);
int gpum__pool_kind(uint64_t rsize);
uint64_t gpum__pool_round(uint64_t size);
/* Puts b (state FREE, not in any list) into owner's lists, merging free neighbours of the same
 * owner; returns the block now holding b's bytes. */
gpum__block_t *gpum__pool_free_insert(gpum_pool_t *p, gpum__block_t *b, gpum__owner_t *owner);
void gpum__pool_free_remove(gpum_pool_t *p, gpum__block_t *b);
/* Takes free block b for a request of rsize (rounded) / size bytes on stream. */
void gpum__pool_take(gpum_pool_t *p, gpum__block_t *b, uint64_t rsize, uint64_t size,
                     gpum_stream_t stream, gpum__owner_t *owner);
/* A block left the allocated/awaiting state: make it free on its owner (or shared). */
void gpum__pool_block_release(gpum_pool_t *p, gpum__block_t *b);
/* New segment of size bytes for kind; its one free block goes to the shared owner. */
int gpum__pool_seg_new(gpum_pool_t *p, int kind, uint64_t size, gpum__block_t **out);
/* Gives an empty segment (used == 0) back to the source. */
void gpum__pool_seg_release(gpum_pool_t *p, gpum__seg_t *s);
void gpum__pool_seg_mark(gpum_pool_t *p, gpum__seg_t *s); /* updates the empty list */
/* Expandable segment: grow the mapped part so that a shared free tail of rsize exists;
 * unmap free tail granules beyond keep bytes (returns the bytes unmapped). */
int gpum__pool_xseg_grow(gpum_pool_t *p, uint64_t rsize, gpum__block_t **out);
uint64_t gpum__pool_xseg_shrink(gpum_pool_t *p, uint64_t want, uint64_t keep);
void gpum__pool_xseg_release(gpum_pool_t *p);

/* ---- streams.c: owners, stream-ordered reuse, deferred frees ---- */
gpum__owner_t *gpum__pool_owner(gpum_pool_t *p, gpum_stream_t stream); /* NULL: ENOMEM */
void gpum__pool_owners_free(gpum_pool_t *p);
/* Records the stream's event when it has free blocks and no outstanding event. */
void gpum__pool_owner_arm(gpum_pool_t *p, gpum__owner_t *o);
/* Polls every stream's event and moves the blocks it covers to the shared owner. */
void gpum__pool_streams_poll(gpum_pool_t *p);
/* Synchronizes the source (when it can) and moves every stream-owned block to the shared
 * owner, completing awaiting frees. */
void gpum__pool_streams_sync(gpum_pool_t *p);
/* Frees a block with record_stream'd streams: records events, defers. Returns false when the
 * free may complete at once. */
bool gpum__pool_defer(gpum_pool_t *p, gpum__block_t *b);
void gpum__pool_deferred_poll(gpum_pool_t *p);
void gpum__pool_deferred_drop(gpum_pool_t *p); /* destroy: forget events */
int gpum__pool_block_use(gpum_pool_t *p, gpum__block_t *b, gpum_stream_t stream);

/* ---- strategy.c ---- */
uint64_t gpum__pool_segment_size(gpum_pool_t *p, int kind, uint64_t rsize);
gpum__block_t *gpum__pool_find(gpum_pool_t *p, gpum__owner_t *o, int kind, uint64_t rsize);
bool gpum__pool_should_split(const gpum_pool_t *p, const gpum__block_t *b, uint64_t rsize);
/* Called when a segment becomes empty (after the release of a block). */
void gpum__pool_on_empty(gpum_pool_t *p, gpum__seg_t *s);
/* The cache bound: gives empty segments back, oldest first (and the expandable segment's free
 * tail), while the pool's cached bytes plus grow pass cache_max. */
void gpum__pool_cache_bound(gpum_pool_t *p, uint64_t grow);
/* FRAGMENTATION_AWARE / gc_threshold: frees old cached segments before growing by grow. */
void gpum__pool_gc(gpum_pool_t *p, uint64_t grow);
/* Grows the pool for a request; out gets a free shared block of at least rsize. */
int gpum__pool_grow(gpum_pool_t *p, int kind, uint64_t rsize, gpum__block_t **out);
/* Frees every empty segment (and the free tail of the expandable one) while reserved >
 * target. Returns bytes released. */
uint64_t gpum__pool_release_cached(gpum_pool_t *p, uint64_t target);

/* ---- oom.c ---- */
int gpum__pool_oom_error(gpum_pool_t *p, uint64_t size, gpum_stream_t stream, bool over_limit);

/* ---- stats.c ---- */
static inline void gpum__stat_add(gpum_pool_stat_t *s, uint64_t n) {
  s->current += n;
  s->allocated += n;
  if (s->current > s->peak)
    s->peak = s->current;
}

static inline void gpum__stat_sub(gpum_pool_stat_t *s, uint64_t n) {
  s->current -= n;
  s->freed += n;
}
void gpum__pool_stats_locked(gpum_pool_t *p, gpum_pool_stats_t *out);

/* ---- eventlog.c ---- */
void gpum__pool_log_header(gpum_pool_t *p);
void gpum__pool_log(gpum_pool_t *p, const char *action, gpum_devptr_t ptr, uint64_t size,
                    gpum_stream_t stream);

/* ---- check.c ---- */
/* Checks every invariant of the pool (see the file). Returns 0, or GPUM_EINTERNAL with the
 * detail naming the first violation. Takes the lock. */
int gpum__pool_check(gpum_pool_t *p);

#endif /* GPUM_POOL_INTERNAL_H */
