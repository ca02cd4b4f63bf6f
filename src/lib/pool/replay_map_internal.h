/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small hash map from 64-bit keys (log pointers, thread and stream ids) to 32-bit values, for
 * reading allocation logs: open addressing with linear probing, backward-shift deletion (no
 * tombstones, so a long log with millions of frees keeps short probe chains), grown at 50% load.
 * Header-only: static inline functions, used by replay_csv.c. Not thread-safe.
 */
#ifndef GPUM_POOL_REPLAY_MAP_INTERNAL_H
#define GPUM_POOL_REPLAY_MAP_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <gpum/error.h>

typedef struct {
  uint64_t key;
  uint32_t val;
  uint32_t used;
} rmap_entry_t;

typedef struct {
  rmap_entry_t *e;
  size_t mask; /* capacity - 1 (a power of two) */
  size_t n;
} rmap_t;

static inline uint64_t rmap_hash(uint64_t x) {
  /* splitmix64's finaliser: pointers differ in their middle bits, this spreads them. */
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

static inline void rmap_free(rmap_t *m) {
  free(m->e);
  m->e = NULL;
  m->mask = 0;
  m->n = 0;
}

/* The entry for key, or NULL. */
static inline rmap_entry_t *rmap_find(const rmap_t *m, uint64_t key) {
  if (!m->e)
    return NULL;
  for (size_t i = rmap_hash(key) & m->mask;; i = (i + 1) & m->mask) {
    if (!m->e[i].used)
      return NULL;
    if (m->e[i].key == key)
      return &m->e[i];
  }
}

static inline int rmap_grow(rmap_t *m) {
  size_t cap = m->e ? (m->mask + 1) * 2 : 64;
  rmap_entry_t *e = calloc(cap, sizeof *e);
  if (!e)
    return gpum_error(GPUM_ENOMEM, "out of memory for a map of %zu entries", cap);
  for (size_t j = 0; m->e && j <= m->mask; j++) {
    if (!m->e[j].used)
      continue;
    size_t i = rmap_hash(m->e[j].key) & (cap - 1);
    while (e[i].used)
      i = (i + 1) & (cap - 1);
    e[i] = m->e[j];
  }
  free(m->e);
  m->e = e;
  m->mask = cap - 1;
  return 0;
}

/* Inserts key (absent) with val. Returns 0 or GPUM_ENOMEM. */
static inline int rmap_put(rmap_t *m, uint64_t key, uint32_t val) {
  if (!m->e || (m->n + 1) * 2 > m->mask + 1) {
    int rc = rmap_grow(m);
    if (rc)
      return rc;
  }
  size_t i = rmap_hash(key) & m->mask;
  while (m->e[i].used)
    i = (i + 1) & m->mask;
  m->e[i] = (rmap_entry_t){.key = key, .val = val, .used = 1};
  m->n++;
  return 0;
}

/* Removes the entry e (from rmap_find), shifting later members of its probe chain back. */
static inline void rmap_del(rmap_t *m, rmap_entry_t *e) {
  size_t hole = (size_t)(e - m->e);
  for (size_t i = (hole + 1) & m->mask; m->e[i].used; i = (i + 1) & m->mask) {
    size_t home = rmap_hash(m->e[i].key) & m->mask;
    /* Entry i may fill the hole if its home is not in the cyclic range (hole, i]. */
    bool in_range = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
    if (!in_range) {
      m->e[hole] = m->e[i];
      hole = i;
    }
  }
  m->e[hole].used = 0;
  m->n--;
}

#endif /* GPUM_POOL_REPLAY_MAP_INTERNAL_H */
