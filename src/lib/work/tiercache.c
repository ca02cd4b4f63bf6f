/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tiered cache (gpum/tiercache.h, docs/tiercache.md): the public calls, the key table and
 * the per-tier LRU lists. Moving entries between tiers (allocation with demotion or eviction,
 * the copies) is in tiercache_move.c.
 *
 * Entries are found through a chained hash table over their keys (FNV-1a, doubled when it holds
 * two entries a bucket); each tier keeps a doubly-linked list of its entries, hottest at the
 * head. Every call takes the cache's one mutex for its whole duration (see the header).
 */
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/tiercache.h>

#include "work/tiercache_internal.h"
#include "core/names_internal.h"

#define KEY_MAX 4096
#define FIRST_BUCKETS 256
#define DEFAULT_PINNED_LIMIT (256ull << 20)

const char *gpum_tier_name(gpum_tier_t tier) {
  static const char *const names[] = {
      [GPUM_TIER_DEVICE] = "device", [GPUM_TIER_PINNED] = "pinned", [GPUM_TIER_HOST] = "host"};
  return GPUM__NAME_OF(names, tier, "?");
}

void gpum_tiercache_opts_init(gpum_tiercache_opts_t *opts) {
  memset(opts, 0, sizeof *opts);
  opts->pinned_limit = DEFAULT_PINNED_LIMIT;
}

/* ---- the key table and the lists --------------------------------------------------------- */

static uint64_t hash_key(const void *key, size_t len) {
  const unsigned char *p = key;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static gpum__tc_entry_t *find(gpum_tiercache_t *c, const void *key, size_t len) {
  uint64_t h = hash_key(key, len);
  for (gpum__tc_entry_t *e = c->buckets[h & (c->nbuckets - 1)]; e; e = e->hnext)
    if (e->hash == h && e->klen == len && !memcmp(e->key, key, len))
      return e;
  return NULL;
}

static int grow(gpum_tiercache_t *c) {
  size_t n = c->nbuckets * 2;
  gpum__tc_entry_t **b = calloc(n, sizeof *b);
  if (!b)
    return gpum_error(GPUM_ENOMEM, "cannot grow the tier cache's table to %zu buckets", n);
  for (size_t i = 0; i < c->nbuckets; i++) {
    gpum__tc_entry_t *e = c->buckets[i];
    while (e) {
      gpum__tc_entry_t *next = e->hnext;
      e->hnext = b[e->hash & (n - 1)];
      b[e->hash & (n - 1)] = e;
      e = next;
    }
  }
  free(c->buckets);
  c->buckets = b;
  c->nbuckets = n;
  return 0;
}

static void table_unlink(gpum_tiercache_t *c, gpum__tc_entry_t *e) {
  gpum__tc_entry_t **pp = &c->buckets[e->hash & (c->nbuckets - 1)];
  while (*pp != e)
    pp = &(*pp)->hnext;
  *pp = e->hnext;
  c->count--;
}

void gpum__tc_list_push(gpum_tiercache_t *c, gpum__tc_entry_t *e, gpum_tier_t t) {
  gpum__tc_tier_t *tier = &c->t[t];
  e->tier = t;
  e->prev = NULL;
  e->next = tier->head;
  if (tier->head)
    tier->head->prev = e;
  else
    tier->tail = e;
  tier->head = e;
  c->st.tier[t].bytes += e->size;
  c->st.tier[t].entries++;
}

void gpum__tc_list_unlink(gpum_tiercache_t *c, gpum__tc_entry_t *e) {
  gpum__tc_tier_t *tier = &c->t[e->tier];
  if (e->prev)
    e->prev->next = e->next;
  else
    tier->head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    tier->tail = e->prev;
  e->prev = e->next = NULL;
  c->st.tier[e->tier].bytes -= e->size;
  c->st.tier[e->tier].entries--;
}

static void touch(gpum_tiercache_t *c, gpum__tc_entry_t *e) {
  if (c->t[e->tier].head == e)
    return;
  gpum_tier_t t = e->tier;
  gpum__tc_list_unlink(c, e);
  gpum__tc_list_push(c, e, t);
}

/* Takes e out of the table and its tier, frees its block and e. */
void gpum__tc_drop(gpum_tiercache_t *c, gpum__tc_entry_t *e) {
  table_unlink(c, e);
  gpum__tc_list_unlink(c, e);
  if (gpum_pool_free(c->t[e->tier].pool, e->addr) != 0)
    gpum_log(GPUM_LOG_WARN, "tiercache", "freeing a %s block: %s", gpum_tier_name(e->tier),
             gpum_last_error());
  free(e);
}

/* ---- create and destroy ------------------------------------------------------------------ */

static int check_opts(const gpum_tiercache_opts_t *o) {
  if (o->pinned_limit == 0)
    return gpum_error(GPUM_EINVAL, "the tier cache needs a pinned_limit above 0");
  if (o->device < 0)
    return gpum_error(GPUM_EINVAL, "the tier cache's device must be a CUDA ordinal, not %d",
                      o->device);
  return 0;
}

int gpum_tiercache_create(const gpum_tiercache_opts_t *opts, gpum_tiercache_t **out) {
  if (!opts || !out)
    return gpum_error(GPUM_EINVAL, "gpum_tiercache_create: NULL argument");
  *out = NULL;
  int rc = check_opts(opts);
  if (rc)
    return rc;
  gpum_tiercache_t *c = calloc(1, sizeof *c);
  if (!c)
    return gpum_error(GPUM_ENOMEM, "cannot allocate the tier cache");
  c->o = *opts;
  c->nbuckets = FIRST_BUCKETS;
  c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
  if (!c->buckets) {
    rc = gpum_error(GPUM_ENOMEM, "cannot allocate the tier cache's table");
    goto out_free;
  }
  if (pthread_mutex_init(&c->mu, NULL) != 0) {
    rc = gpum_error(GPUM_ENOMEM, "cannot create the tier cache's mutex");
    goto out_buckets;
  }
  c->st.tier[GPUM_TIER_DEVICE].limit = opts->device_budget;
  c->st.tier[GPUM_TIER_PINNED].limit = opts->pinned_limit;
  c->st.tier[GPUM_TIER_HOST].limit = opts->host_limit;
  if ((rc = gpum__tc_open_tiers(c)) != 0)
    goto out_mutex;
  *out = c;
  return 0;
out_mutex:
  pthread_mutex_destroy(&c->mu);
out_buckets:
  free(c->buckets);
out_free:
  free(c);
  return rc;
}

void gpum_tiercache_destroy(gpum_tiercache_t *c) {
  if (!c)
    return;
  for (size_t i = 0; i < c->nbuckets; i++) {
    gpum__tc_entry_t *e = c->buckets[i];
    while (e) {
      gpum__tc_entry_t *next = e->hnext;
      gpum_pool_free(c->t[e->tier].pool, e->addr);
      free(e);
      e = next;
    }
  }
  gpum__tc_close_tiers(c);
  pthread_mutex_destroy(&c->mu);
  free(c->buckets);
  free(c);
}

/* ---- the calls --------------------------------------------------------------------------- */

static int check_key(const char *call, const void *key, size_t len) {
  if (!key)
    return gpum_error(GPUM_EINVAL, "%s: NULL key", call);
  if (len == 0 || len > KEY_MAX)
    return gpum_error(GPUM_EINVAL, "%s: a key is 1 to %d bytes, not %zu", call, KEY_MAX, len);
  return 0;
}

/* The largest entry some tier could hold (SIZE_MAX when the device has no budget). */
static uint64_t largest_entry(const gpum_tiercache_t *c) {
  if (c->o.device_budget == 0)
    return UINT64_MAX;
  uint64_t m = c->o.device_budget;
  if (c->o.pinned_limit > m)
    m = c->o.pinned_limit;
  if (c->o.host_limit > m)
    m = c->o.host_limit;
  return m;
}

/* Stores a new entry for key (none exists): the device first, then each lower tier. */
static int insert(gpum_tiercache_t *c, const void *key, size_t klen, gpum__tc_buf_t data,
                  size_t size) {
  if (c->count >= c->nbuckets * 2) {
    int rc = grow(c);
    if (rc)
      return rc;
  }
  gpum__tc_entry_t *e = calloc(1, sizeof *e + klen);
  if (!e)
    return gpum_error(GPUM_ENOMEM, "cannot allocate a tier cache entry");
  memcpy(e->key, key, klen);
  e->klen = klen;
  e->size = size;
  e->hash = hash_key(key, klen);
  e->busy = true; /* not a victim while room is made for it */
  int rc = GPUM_ENOSPC;
  for (int t = 0; t < c->ntiers; t++) {
    rc = gpum__tc_alloc(c, (gpum_tier_t)t, size, &e->addr);
    if (rc == GPUM_ENOSPC || rc == GPUM_EDEVOOM)
      continue;
    if (rc == 0 && (rc = gpum__tc_copy_in(c, (gpum_tier_t)t, e->addr, data, size)) != 0)
      gpum_pool_free(c->t[t].pool, e->addr);
    if (rc == 0) {
      e->busy = false;
      e->hnext = c->buckets[e->hash & (c->nbuckets - 1)];
      c->buckets[e->hash & (c->nbuckets - 1)] = e;
      c->count++;
      gpum__tc_list_push(c, e, (gpum_tier_t)t);
      return 0;
    }
    break;
  }
  free(e);
  if (rc == GPUM_ENOSPC || rc == GPUM_EDEVOOM)
    return gpum_error(GPUM_ENOSPC, "no tier of the cache can make room for %zu bytes", size);
  return rc;
}

static int put(gpum_tiercache_t *c, const char *fn, const void *key, size_t key_len,
               gpum__tc_buf_t data, size_t size) {
  int rc;
  if (!c || !data.addr)
    return gpum_error(GPUM_EINVAL, "%s: NULL argument", fn);
  if ((rc = check_key(fn, key, key_len)) != 0)
    return rc;
  if (size == 0)
    return gpum_error(GPUM_EINVAL, "%s: size 0", fn);
  if ((uint64_t)size > largest_entry(c))
    return gpum_error(GPUM_EINVAL, "%s: %zu bytes exceed every tier's limit", fn, size);
  pthread_mutex_lock(&c->mu);
  c->st.puts++;
  gpum__tc_entry_t *old = find(c, key, key_len);
  if (old && old->pins) {
    rc = gpum_error(GPUM_EBUSY, "%s: the key's entry is pinned", fn);
  } else {
    if (old) /* the old bytes go first: their room may be needed for the new ones */
      gpum__tc_drop(c, old);
    rc = insert(c, key, key_len, data, size);
  }
  pthread_mutex_unlock(&c->mu);
  return rc;
}

int gpum_tiercache_put(gpum_tiercache_t *c, const void *key, size_t key_len, const void *data,
                       size_t size) {
  return put(c, "gpum_tiercache_put", key, key_len, GPUM__TC_HOST(data), size);
}

int gpum_tiercache_put_device(gpum_tiercache_t *c, const void *key, size_t key_len,
                              gpum_devptr_t src, size_t size) {
  return put(c, "gpum_tiercache_put_device", key, key_len, (gpum__tc_buf_t){src, true}, size);
}

static int get(gpum_tiercache_t *c, const char *fn, const void *key, size_t key_len,
               gpum__tc_buf_t buf, size_t cap, size_t *size, gpum_tier_t *tier) {
  int rc;
  if (!c || (!buf.addr && cap))
    return gpum_error(GPUM_EINVAL, "%s: NULL argument", fn);
  if ((rc = check_key(fn, key, key_len)) != 0)
    return rc;
  pthread_mutex_lock(&c->mu);
  /* gets counts hits and misses only, so gets = misses + the tiers' hits of gets: a get refused
   * for its short buffer (the caller retries with the size it learnt) or failed by its copy
   * counts nowhere, and moves nothing. */
  gpum__tc_entry_t *e = find(c, key, key_len);
  if (!e) {
    c->st.gets++;
    c->st.misses++;
    for (int t = 0; t < c->ntiers; t++)
      c->st.tier[t].misses++;
    rc = gpum_error(GPUM_ENOENT, "%s: no such key", fn);
    goto out;
  }
  if (size)
    *size = e->size;
  if (tier)
    *tier = e->tier;
  if (cap < e->size) {
    rc = gpum_error(GPUM_ENOSPC, "%s: the entry has %zu bytes, the buffer %zu", fn, e->size, cap);
    goto out;
  }
  if ((rc = gpum__tc_copy_out(c, e->tier, e->addr, buf, e->size)) != 0)
    goto out;
  c->st.gets++;
  c->st.tier[e->tier].hits++;
  for (int t = 0; t < (int)e->tier; t++)
    c->st.tier[t].misses++;
  touch(c, e);
  if (e->tier != GPUM_TIER_DEVICE) {
    int prc = gpum__tc_promote(c, e);
    if (prc && prc != GPUM_ENOSPC && prc != GPUM_EDEVOOM)
      gpum_log(GPUM_LOG_WARN, "tiercache", "promotion failed (the entry stays): %s",
               gpum_last_error());
  }
out:
  pthread_mutex_unlock(&c->mu);
  return rc;
}

int gpum_tiercache_get(gpum_tiercache_t *c, const void *key, size_t key_len, void *buf, size_t cap,
                       size_t *size, gpum_tier_t *tier) {
  return get(c, "gpum_tiercache_get", key, key_len, GPUM__TC_HOST(buf), cap, size, tier);
}

int gpum_tiercache_get_device(gpum_tiercache_t *c, const void *key, size_t key_len,
                              gpum_devptr_t dst, size_t cap, size_t *size, gpum_tier_t *tier) {
  return get(c, "gpum_tiercache_get_device", key, key_len, (gpum__tc_buf_t){dst, true}, cap, size,
             tier);
}

int gpum_tiercache_lookup(gpum_tiercache_t *c, const void *key, size_t key_len, gpum_tier_t *tier,
                          size_t *size) {
  int rc;
  if (!c)
    return gpum_error(GPUM_EINVAL, "gpum_tiercache_lookup: NULL cache");
  if ((rc = check_key("gpum_tiercache_lookup", key, key_len)) != 0)
    return rc;
  pthread_mutex_lock(&c->mu);
  gpum__tc_entry_t *e = find(c, key, key_len);
  if (e) {
    if (tier)
      *tier = e->tier;
    if (size)
      *size = e->size;
  } else {
    rc = gpum_error(GPUM_ENOENT, "gpum_tiercache_lookup: no such key");
  }
  pthread_mutex_unlock(&c->mu);
  return rc;
}

int gpum_tiercache_remove(gpum_tiercache_t *c, const void *key, size_t key_len) {
  int rc;
  if (!c)
    return gpum_error(GPUM_EINVAL, "gpum_tiercache_remove: NULL cache");
  if ((rc = check_key("gpum_tiercache_remove", key, key_len)) != 0)
    return rc;
  pthread_mutex_lock(&c->mu);
  gpum__tc_entry_t *e = find(c, key, key_len);
  if (!e)
    rc = gpum_error(GPUM_ENOENT, "gpum_tiercache_remove: no such key");
  else if (e->pins)
    rc = gpum_error(GPUM_EBUSY, "gpum_tiercache_remove: the entry is pinned");
  else
    gpum__tc_drop(c, e);
  pthread_mutex_unlock(&c->mu);
  return rc;
}

int gpum_tiercache_pin(gpum_tiercache_t *c, const void *key, size_t key_len, gpum_devptr_t *dptr) {
  int rc;
  if (!c)
    return gpum_error(GPUM_EINVAL, "gpum_tiercache_pin: NULL cache");
  if ((rc = check_key("gpum_tiercache_pin", key, key_len)) != 0)
    return rc;
  pthread_mutex_lock(&c->mu);
  gpum__tc_entry_t *e = find(c, key, key_len);
  if (!e) {
    rc = gpum_error(GPUM_ENOENT, "gpum_tiercache_pin: no such key");
    goto out;
  }
  gpum_tier_t was = e->tier;
  if (e->tier != GPUM_TIER_DEVICE) {
    rc = gpum__tc_promote(c, e);
    if (rc == GPUM_ENOSPC || rc == GPUM_EDEVOOM)
      rc = gpum_error(GPUM_EDEVOOM, "gpum_tiercache_pin: no room on the device for %zu bytes",
                      e->size);
    if (rc)
      goto out;
  }
  c->st.tier[was].hits++;
  for (int t = 0; t < (int)was; t++)
    c->st.tier[t].misses++;
  touch(c, e);
  if (e->pins++ == 0)
    c->pinned_bytes += e->size;
  if (dptr)
    *dptr = e->addr;
out:
  pthread_mutex_unlock(&c->mu);
  return rc;
}

int gpum_tiercache_unpin(gpum_tiercache_t *c, const void *key, size_t key_len) {
  int rc;
  if (!c)
    return gpum_error(GPUM_EINVAL, "gpum_tiercache_unpin: NULL cache");
  if ((rc = check_key("gpum_tiercache_unpin", key, key_len)) != 0)
    return rc;
  pthread_mutex_lock(&c->mu);
  gpum__tc_entry_t *e = find(c, key, key_len);
  if (!e)
    rc = gpum_error(GPUM_ENOENT, "gpum_tiercache_unpin: no such key");
  else if (!e->pins)
    rc = gpum_error(GPUM_ESTATE, "gpum_tiercache_unpin: the entry is not pinned");
  else if (--e->pins == 0)
    c->pinned_bytes -= e->size;
  pthread_mutex_unlock(&c->mu);
  return rc;
}

int gpum_tiercache_pressure(gpum_tiercache_t *c, uint64_t bytes_to_free, uint64_t *freed) {
  if (!c)
    return gpum_error(GPUM_EINVAL, "gpum_tiercache_pressure: NULL cache");
  uint64_t done = 0;
  int rc = 0;
  pthread_mutex_lock(&c->mu);
  c->st.pressure_calls++;
  while (done < bytes_to_free) {
    gpum__tc_entry_t *v = gpum__tc_victim(c, GPUM_TIER_DEVICE);
    if (!v)
      break;
    size_t n = v->size;
    if ((rc = gpum__tc_demote(c, v)) != 0)
      break;
    done += n;
  }
  /* What was demoted is free in the pool but still the driver's: give it back. */
  if (gpum_pool_trim(c->t[GPUM_TIER_DEVICE].pool, 0, NULL) != 0)
    gpum_log(GPUM_LOG_WARN, "tiercache", "trimming the device pool: %s", gpum_last_error());
  pthread_mutex_unlock(&c->mu);
  if (freed)
    *freed = done;
  return rc;
}

void gpum_tiercache_stats(gpum_tiercache_t *c, gpum_tiercache_stats_t *out) {
  if (!out)
    return;
  if (!c) {
    memset(out, 0, sizeof *out);
    return;
  }
  pthread_mutex_lock(&c->mu);
  *out = c->st;
  pthread_mutex_unlock(&c->mu);
}
