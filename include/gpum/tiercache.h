/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tiered cache: keyed byte buffers kept on the GPU while it has room and spilled to pinned
 * host memory (then, optionally, plain host memory) when it is short, instead of failing
 * (docs/tiercache.md).
 *
 * Tiers, hottest first: the device (blocks of a gpum pool on the CUDA source of one device),
 * pinned host memory (a pool on gpum_pool_source_pinned), and an optional plain host tier (a pool
 * on gpum_pool_source_host). Each tier keeps its entries in LRU order. An entry lives in exactly
 * one tier.
 *   - put places the entry on the device, demoting the coldest unpinned device entries one tier
 *     down when the device budget or a failed device allocation says there is no room; an entry
 *     larger than the device budget, or one that cannot be made room for (the pinned entries
 *     leave too little of the budget: then no entry is demoted for it), goes to the highest
 *     lower tier it fits in.
 *   - get copies the entry out (a device-to-host copy when it is on the device) and, for an entry
 *     on a lower tier, promotes it to the device, demoting colder device entries to make room; a
 *     promotion that still finds no room leaves the entry where it is (the get succeeds).
 *     A promotion is a swap: the entries it demotes may take the room the promoted entry leaves
 *     in its tier, so it evicts nothing that the tiers have room for.
 *   - Demotion copies device to host with the driver's async copy on the cache's stream and
 *     synchronises that stream before the device block is freed: no data is lost. A lower tier
 *     that is full makes room by demoting its own coldest entries further down; only the lowest
 *     tier evicts, coldest first, calling the eviction callback with the key and size.
 *   - Pressure: a failed device allocation, gpum_tiercache_pressure (what a gpumd pressure event
 *     should trigger), or the configured device budget.
 *   - Pinning: a pinned entry is on the device and stays there (it is never demoted, evicted,
 *     replaced or removed) until unpinned as many times as it was pinned; its device pointer is
 *     valid for GPU code meanwhile.
 *
 * Thread safety: every call is thread-safe. One mutex per cache guards its table, lists and
 * stats; it is held across the pool calls and the copies of the call that needs them (an entry
 * must not move or be freed while its bytes are copied), so calls on one cache run one at a time
 * and a slow copy delays the others. No global state: caches are independent.
 */
#ifndef GPUM_TIERCACHE_H
#define GPUM_TIERCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/export.h>
#include <gpum/pool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GPUM_TIER_DEVICE = 0,
  GPUM_TIER_PINNED = 1,
  GPUM_TIER_HOST = 2,
} gpum_tier_t;

#define GPUM_TIER_COUNT 3

/* "device", "pinned", "host"; "?" for anything else. */
GPUM_API const char *gpum_tier_name(gpum_tier_t tier);

/* Called when the lowest tier evicts an entry (its data is gone), with the cache's lock held:
 * it must not call the cache. key is valid during the call only. */
typedef void (*gpum_tiercache_evict_fn)(const void *key, size_t key_len, size_t size, void *user);

typedef struct {
  int device;             /* CUDA device ordinal of the device tier (default 0) */
  uint64_t device_budget; /* most payload bytes on the device; 0: no budget (up to what the
                             device pool can allocate) */
  uint64_t pinned_limit;  /* most payload bytes in pinned host memory (required, > 0) */
  uint64_t host_limit;    /* most payload bytes in plain host memory; 0: no host tier */
  gpum_tiercache_evict_fn on_evict; /* optional */
  void *user;                       /* passed to on_evict */
} gpum_tiercache_opts_t;

/* Per tier. Payload bytes (the caller's sizes), not the pools' rounded blocks. */
typedef struct {
  uint64_t hits;       /* gets and pins that found the entry in this tier */
  uint64_t misses;     /* gets that looked past this tier (the entry was lower, or absent) */
  uint64_t promotions; /* entries moved up into the device from this tier */
  uint64_t demotions;  /* entries moved down out of this tier */
  uint64_t evictions;  /* entries dropped from this tier (the lowest one) */
  uint64_t bytes;      /* payload bytes held now */
  uint64_t entries;    /* entries held now */
  uint64_t limit;      /* the tier's byte limit (0: none, or no such tier) */
} gpum_tier_stats_t;

typedef struct {
  gpum_tier_stats_t tier[GPUM_TIER_COUNT];
  uint64_t puts;
  uint64_t gets;   /* gets that hit (copied the entry out) or missed; see gpum_tiercache_get */
  uint64_t misses; /* gets of a key not in the cache */
  uint64_t alloc_failures; /* device allocations that failed (each one demoted entries) */
  uint64_t pressure_calls; /* gpum_tiercache_pressure calls */
} gpum_tiercache_stats_t;

typedef struct gpum_tiercache gpum_tiercache_t;

/* Defaults: device 0, no device budget, pinned_limit 256 MiB, no host tier. */
GPUM_API void gpum_tiercache_opts_init(gpum_tiercache_opts_t *opts);

/* Creates a cache on opts (copied): loads the CUDA driver, opens the device's and the pinned
 * sources and pools, and a stream for the copies. Returns 0, GPUM_EINVAL (bad options, the detail
 * says which), GPUM_ENOMEM, or the sources' errors (GPUM_EDRIVER, GPUM_ENODEV). Free with
 * gpum_tiercache_destroy. */
GPUM_API int gpum_tiercache_create(const gpum_tiercache_opts_t *opts, gpum_tiercache_t **out);
/* Frees every entry (no eviction callbacks), the pools, sources and stream. Pinned entries are
 * freed too: their device pointers become invalid. NULL is fine. Not concurrently with other
 * calls on the cache. */
GPUM_API void gpum_tiercache_destroy(gpum_tiercache_t *c);

/* Stores size bytes of data under key (key_len bytes, 1..4096), replacing an existing entry of
 * that key. Returns 0; GPUM_EINVAL for a NULL argument, key_len 0 or too long, size 0, or a size
 * no tier can ever hold; GPUM_EBUSY when the key's entry is pinned; GPUM_ENOSPC when no tier can
 * make room (its entries are pinned); GPUM_ENOMEM; a driver error of a copy (the entry is then
 * not stored). */
GPUM_API int gpum_tiercache_put(gpum_tiercache_t *c, const void *key, size_t key_len,
                                const void *data, size_t size);
/* The same from a device buffer: size bytes at src, an address on the cache's device (a block of
 * a gpum pool, say: a KV block or an embedding computed there), copied device to device when the
 * entry goes to the device tier, device to host when it goes lower. src stays the caller's. */
GPUM_API int gpum_tiercache_put_device(gpum_tiercache_t *c, const void *key, size_t key_len,
                                       gpum_devptr_t src, size_t size);

/* Copies key's bytes into buf (cap bytes); *size (may be NULL) gets the entry's size and *tier
 * (may be NULL) the tier it was found in (before any promotion). Returns 0 (a hit); GPUM_ENOENT
 * for an unknown key (a miss); GPUM_ENOSPC when cap is below the size (*size and *tier set,
 * nothing copied); GPUM_EINVAL; a driver error of the copy. Only a hit or a miss counts (in
 * stats' gets, and hits or misses): a get refused for its buffer or failed by its copy counts
 * nowhere, does not change the LRU order and promotes nothing, so that the retry with a buffer
 * of the size learnt is the one access counted. */
GPUM_API int gpum_tiercache_get(gpum_tiercache_t *c, const void *key, size_t key_len, void *buf,
                                size_t cap, size_t *size, gpum_tier_t *tier);
/* The same into a device buffer: cap bytes at dst, an address on the cache's device (to feed a
 * kernel without a trip through host memory when the entry is on the device). */
GPUM_API int gpum_tiercache_get_device(gpum_tiercache_t *c, const void *key, size_t key_len,
                                       gpum_devptr_t dst, size_t cap, size_t *size,
                                       gpum_tier_t *tier);

/* Whether key is cached, and where: 0 with *tier and *size (either may be NULL), or GPUM_ENOENT.
 * Neither a hit nor a miss, and the LRU order does not change. */
GPUM_API int gpum_tiercache_lookup(gpum_tiercache_t *c, const void *key, size_t key_len,
                                   gpum_tier_t *tier, size_t *size);

/* Drops key's entry (no eviction callback). 0, GPUM_ENOENT, GPUM_EBUSY (pinned), GPUM_EINVAL. */
GPUM_API int gpum_tiercache_remove(gpum_tiercache_t *c, const void *key, size_t key_len);

/* Pins key's entry on the device, promoting it first when it is on a lower tier (demoting
 * colder entries to make room), and gives its device pointer in *dptr (may be NULL): valid, and
 * the entry's bytes there, until the matching unpin. Pins nest (a count). Returns 0,
 * GPUM_ENOENT, GPUM_EDEVOOM (the device has no room for it even with every unpinned entry
 * demoted; it stays where it was, and when the pinned entries leave too little of the device
 * budget no entry was demoted for it), GPUM_EINVAL, or a driver error. Counts as a hit. GPU code
 * that writes through the pointer changes the entry's bytes. */
GPUM_API int gpum_tiercache_pin(gpum_tiercache_t *c, const void *key, size_t key_len,
                                gpum_devptr_t *dptr);
/* Undoes one pin. 0, GPUM_ENOENT, GPUM_ESTATE (not pinned), GPUM_EINVAL. */
GPUM_API int gpum_tiercache_unpin(gpum_tiercache_t *c, const void *key, size_t key_len);

/* Memory pressure on the device (a gpumd pressure event, say): demotes the coldest unpinned
 * device entries until at least bytes_to_free payload bytes left the device (or none is left to
 * demote), then gives the device pool's cached segments back to the driver. *freed (may be
 * NULL) gets the payload bytes demoted. Returns 0 (also when it freed less than asked), or a
 * driver error of a copy (what was demoted before it stays demoted). */
GPUM_API int gpum_tiercache_pressure(gpum_tiercache_t *c, uint64_t bytes_to_free, uint64_t *freed);

/* A snapshot of the counters in *out. A NULL cache gives all zeros (as for a cache that did
 * nothing and has no tiers); a NULL out does nothing. Thread-safe. */
GPUM_API void gpum_tiercache_stats(gpum_tiercache_t *c, gpum_tiercache_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* GPUM_TIERCACHE_H */
