/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tiered cache's insides (library-internal), shared by tiercache.c (the calls, the key table,
 * the lists) and tiercache_move.c (the tiers' pools, allocation with demotion or eviction, and
 * the copies through the CUDA driver). Every gpum__tc_* function runs with the cache's mutex
 * held.
 */
#ifndef GPUM_TIERCACHE_INTERNAL_H
#define GPUM_TIERCACHE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include <gpum/pool.h>
#include <gpum/tiercache.h>

#include "pool/source_cuda_internal.h"

typedef struct gpum__tc_entry gpum__tc_entry_t;

struct gpum__tc_entry {
  gpum__tc_entry_t *hnext;       /* the hash chain */
  gpum__tc_entry_t *prev, *next; /* its tier's list: prev is hotter */
  uint64_t hash;
  gpum_devptr_t addr; /* its block in its tier's pool (a host address for the host tiers) */
  size_t size, klen;
  unsigned pins;
  bool busy; /* being placed or moved: not a victim */
  gpum_tier_t tier;
  unsigned char key[];
};

typedef struct {
  gpum__tc_entry_t *head, *tail; /* hottest, coldest */
  gpum_pool_source_t *src;
  gpum_pool_t *pool;
} gpum__tc_tier_t;

struct gpum_tiercache {
  pthread_mutex_t mu;
  gpum_tiercache_opts_t o;
  gpum__tc_tier_t t[GPUM_TIER_COUNT];
  int ntiers; /* 2, or 3 with a host tier */
  gpum__tc_entry_t **buckets;
  size_t nbuckets, count; /* nbuckets: a power of two */
  gpum__cuda_src_t *cu;   /* the driver and the device's retained context, for the copies */
  CUstream stream;        /* the copies' stream, in that context */
  /* Payload bytes of each tier that an entry being promoted out of it still holds: room made in
   * that tier meanwhile may count them as free (the promotion is a swap), see gpum__tc_promote. */
  uint64_t leaving[GPUM_TIER_COUNT];
  uint64_t pinned_bytes; /* payload bytes of the pinned entries (all on the device) */
  gpum_tiercache_stats_t st;
};

/* Opens the sources, pools and stream of c->o's tiers; undone by gpum__tc_close_tiers (which
 * leaves the entries alone: free their blocks first). */
int gpum__tc_open_tiers(gpum_tiercache_t *c);
void gpum__tc_close_tiers(gpum_tiercache_t *c);

/* A block of size bytes in tier t, room made by demoting (the lowest tier: evicting) its coldest
 * entries that are neither pinned nor busy, until the tier's bytes plus size are within its
 * limit plus c->leaving[t]. GPUM_ENOSPC when the tier cannot make room (size over its limit, or
 * over what its pinned entries leave of it: then nothing is moved; or nothing left to move),
 * GPUM_EDEVOOM when the device allocation fails with nothing left to demote, or another error. */
int gpum__tc_alloc(gpum_tiercache_t *c, gpum_tier_t t, size_t size, gpum_devptr_t *addr);
/* A caller's buffer: host memory, or (device) an address on the cache's device. */
typedef struct {
  uintptr_t addr;
  bool device;
} gpum__tc_buf_t;
#define GPUM__TC_HOST(p) ((gpum__tc_buf_t){(uintptr_t)(p), false})

/* Copies between a block of tier t and a buffer (through the driver, on the cache's stream and
 * synchronised, where the device is on either side; memcpy between host memory). */
int gpum__tc_copy_in(gpum_tiercache_t *c, gpum_tier_t t, gpum_devptr_t dst, gpum__tc_buf_t src,
                     size_t size);
int gpum__tc_copy_out(gpum_tiercache_t *c, gpum_tier_t t, gpum_devptr_t src, gpum__tc_buf_t dst,
                      size_t size);
/* The coldest entry of tier t that may move (not pinned, not busy), or NULL. */
gpum__tc_entry_t *gpum__tc_victim(gpum_tiercache_t *c, gpum_tier_t t);
/* Moves e to the highest lower tier that can make room; an entry no lower tier can hold is
 * evicted (the callback is told). 0 or a copy's error (e then stays). */
int gpum__tc_demote(gpum_tiercache_t *c, gpum__tc_entry_t *e);
/* Moves e (on a lower tier) to the device, the device entries demoted to make room taking the
 * room e leaves in its tier: 0, GPUM_ENOSPC / GPUM_EDEVOOM (no room: e stays, and its tier is
 * brought back within its limit), or a copy's error (the same). */
int gpum__tc_promote(gpum_tiercache_t *c, gpum__tc_entry_t *e);

/* The lists (stats' bytes and entries follow) and dropping an entry (table, list, block). */
void gpum__tc_list_push(gpum_tiercache_t *c, gpum__tc_entry_t *e, gpum_tier_t t);
void gpum__tc_list_unlink(gpum_tiercache_t *c, gpum__tc_entry_t *e);
void gpum__tc_drop(gpum_tiercache_t *c, gpum__tc_entry_t *e);

#endif /* GPUM_TIERCACHE_INTERNAL_H */
