/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pointer map: address -> block node for every allocated block, so that free needs no size
 * and finds its block in O(1).
 *
 * Open addressing with linear probing over slots {address, node}, load factor at most 1/2.
 * Growth is incremental: when the table is half full a table twice the size becomes current,
 * and every later insert or remove moves a few slots of the old table across (the old table
 * only loses entries, through tombstones, so its probe chains stay intact). No operation ever
 * rehashes the whole table at once; the only O(n) work is the calloc of the new table, which
 * the kernel gives as zero pages.
 */
#ifndef GPUM_BLOCKMAP_INTERNAL_H
#define GPUM_BLOCKMAP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

struct gpum__block;

typedef struct {
  uint64_t key;
  struct gpum__block *val; /* NULL: empty; GPUM__MAP_TOMB: deleted */
} gpum__map_slot_t;

typedef struct {
  gpum__map_slot_t *cur;
  size_t cur_cap, cur_count; /* cap is a power of two */
  gpum__map_slot_t *old;     /* being migrated, or NULL */
  size_t old_cap, old_count, old_pos;
} gpum__blockmap_t;

void gpum__blockmap_init(gpum__blockmap_t *m);
void gpum__blockmap_free(gpum__blockmap_t *m);
/* Makes sure the next insert cannot fail. 0 or GPUM_ENOMEM. */
int gpum__blockmap_reserve(gpum__blockmap_t *m);
/* Inserts key (not present) -> b. Call gpum__blockmap_reserve first. */
void gpum__blockmap_insert(gpum__blockmap_t *m, uint64_t key, struct gpum__block *b);
struct gpum__block *gpum__blockmap_get(const gpum__blockmap_t *m, uint64_t key);
/* Removes key and returns its block, or NULL when absent. */
struct gpum__block *gpum__blockmap_remove(gpum__blockmap_t *m, uint64_t key);
size_t gpum__blockmap_count(const gpum__blockmap_t *m);

#endif /* GPUM_BLOCKMAP_INTERNAL_H */
