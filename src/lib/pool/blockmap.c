/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pointer map (see blockmap_internal.h): an open-addressing hash table from block address
 * to block node with incremental growth.
 */
#include <stdbool.h>
#include <stdlib.h>

#include <gpum/error.h>

#include "pool/blockmap_internal.h"
#include "pool/pool_internal.h"

#define MAP_MIN_CAP 64
/* Old slots moved per insert or remove: migration ends long before the next growth. */
#define MIGRATE_STEP 8
#define TOMB ((struct gpum__block *)(uintptr_t)1)

static inline size_t slot_of(uint64_t key, size_t cap) {
  /* Fibonacci hashing of the 512-byte unit (the top bits of the product): neighbouring blocks
   * spread over the table. */
  return (size_t)(((key >> 9) * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - __builtin_ctzll(cap)));
}

void gpum__blockmap_init(gpum__blockmap_t *m) {
  *m = (gpum__blockmap_t){0};
}

/* Tables come zeroed from hostmem.c: from 2 MiB up, on huge pages, zero-filled by the kernel as
 * they are first touched. */
static gpum__map_slot_t *table_new(size_t cap) {
  return gpum__pool_hostmem_alloc(cap * sizeof(gpum__map_slot_t));
}

static void table_free(gpum__map_slot_t *t, size_t cap) {
  gpum__pool_hostmem_free(t, cap * sizeof(gpum__map_slot_t));
}

void gpum__blockmap_free(gpum__blockmap_t *m) {
  table_free(m->cur, m->cur_cap);
  table_free(m->old, m->old_cap);
  *m = (gpum__blockmap_t){0};
}

static void put(gpum__map_slot_t *t, size_t cap, uint64_t key, struct gpum__block *b) {
  size_t i = slot_of(key, cap);
  while (t[i].val != NULL)
    i = (i + 1) & (cap - 1);
  t[i].key = key;
  t[i].val = b;
}

static void migrate(gpum__blockmap_t *m, size_t steps) {
  while (m->old != NULL && steps-- > 0) {
    if (m->old_count == 0) {
      table_free(m->old, m->old_cap);
      m->old = NULL;
      m->old_cap = m->old_pos = 0;
      return;
    }
    gpum__map_slot_t *s = &m->old[m->old_pos];
    if (s->val != NULL && s->val != TOMB) {
      put(m->cur, m->cur_cap, s->key, s->val);
      m->cur_count++;
      m->old_count--;
      s->val = TOMB;
    }
    if (++m->old_pos == m->old_cap) {
      table_free(m->old, m->old_cap);
      m->old = NULL;
      m->old_cap = m->old_count = m->old_pos = 0;
    }
  }
}

int gpum__blockmap_reserve(gpum__blockmap_t *m) {
  size_t total = m->cur_count + m->old_count + 1;
  if (m->cur != NULL && (m->cur_count + 1) * 2 <= m->cur_cap)
    return 0;
  if (m->old != NULL)
    migrate(m, SIZE_MAX); /* should not happen: migration outpaces growth */
  if (m->cur != NULL && (m->cur_count + 1) * 2 <= m->cur_cap)
    return 0;
  size_t cap = m->cur_cap ? m->cur_cap * 2 : MAP_MIN_CAP;
  while (total * 2 > cap)
    cap *= 2;
  gpum__map_slot_t *t = table_new(cap);
  if (t == NULL)
    return gpum_error(GPUM_ENOMEM, "pool: out of host memory for the pointer map (%zu slots)", cap);
  m->old = m->cur;
  m->old_cap = m->cur_cap;
  m->old_count = m->cur_count;
  m->old_pos = 0;
  if (m->old_count == 0) {
    table_free(m->old, m->old_cap);
    m->old = NULL;
    m->old_cap = 0;
  }
  m->cur = t;
  m->cur_cap = cap;
  m->cur_count = 0;
  return 0;
}

void gpum__blockmap_insert(gpum__blockmap_t *m, uint64_t key, struct gpum__block *b) {
  put(m->cur, m->cur_cap, key, b);
  m->cur_count++;
  migrate(m, MIGRATE_STEP);
}

static gpum__map_slot_t *lookup(gpum__map_slot_t *t, size_t cap, uint64_t key) {
  if (t == NULL)
    return NULL;
  for (size_t i = slot_of(key, cap);; i = (i + 1) & (cap - 1)) {
    if (t[i].val == NULL)
      return NULL;
    if (t[i].val != TOMB && t[i].key == key)
      return &t[i];
  }
}

struct gpum__block *gpum__blockmap_get(const gpum__blockmap_t *m, uint64_t key) {
  gpum__map_slot_t *s = lookup(m->cur, m->cur_cap, key);
  if (s == NULL)
    s = lookup(m->old, m->old_cap, key);
  return s ? s->val : NULL;
}

/* Deletes slot i of the current table by shifting later members of its probe chain back, so
 * the current table never holds tombstones. */
static void erase_cur(gpum__blockmap_t *m, size_t i) {
  size_t cap = m->cur_cap;
  gpum__map_slot_t *t = m->cur;
  size_t j = i;
  for (;;) {
    j = (j + 1) & (cap - 1);
    if (t[j].val == NULL)
      break;
    size_t home = slot_of(t[j].key, cap);
    /* Move j into the hole at i unless its home lies cyclically in (i, j]. */
    bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!stays) {
      t[i] = t[j];
      i = j;
    }
  }
  t[i].val = NULL;
  t[i].key = 0;
  m->cur_count--;
}

struct gpum__block *gpum__blockmap_remove(gpum__blockmap_t *m, uint64_t key) {
  struct gpum__block *b = NULL;
  gpum__map_slot_t *s = lookup(m->cur, m->cur_cap, key);
  if (s != NULL) {
    b = s->val;
    erase_cur(m, (size_t)(s - m->cur));
  } else if ((s = lookup(m->old, m->old_cap, key)) != NULL) {
    b = s->val;
    s->val = TOMB;
    m->old_count--;
  } else {
    return NULL;
  }
  migrate(m, MIGRATE_STEP);
  return b;
}

size_t gpum__blockmap_count(const gpum__blockmap_t *m) {
  return m->cur_count + m->old_count;
}
