/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two-level segregated fit (TLSF) free lists over out-of-band block nodes.
 *
 * Sizes are counted in 512-byte units u. The first level is fls(u); each power of two is split
 * into 32 second-level lists (linear below 32 units, where each list holds one exact size).
 * A bitmap per level gives the first non-empty list at or above an index with one ffs each, so
 * insert, remove and find are O(1). find rounds the request up to the next list boundary, so
 * any block in the list it picks fits (good fit), then falls back to a bounded scan of the
 * request's own list. Blocks are linked through their prev_free/next_free fields; the TLSF
 * itself never allocates.
 */
#ifndef GPUM_TLSF_INTERNAL_H
#define GPUM_TLSF_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#define GPUM__TLSF_SL_LOG2 5
#define GPUM__TLSF_SL (1u << GPUM__TLSF_SL_LOG2)
#define GPUM__TLSF_FL 50 /* units up to 2^54: sizes up to 2^63 bytes */

struct gpum__block;

typedef struct {
  uint64_t fl_bitmap;
  uint32_t sl_bitmap[GPUM__TLSF_FL];
  struct gpum__block *heads[GPUM__TLSF_FL][GPUM__TLSF_SL];
  uint64_t count; /* blocks in the lists */
} gpum__tlsf_t;

/* How find picks among blocks of the chosen list. */
typedef enum {
  GPUM__FIT_FIRST = 0, /* the list head (most recently freed) */
  GPUM__FIT_LOW = 1,   /* the lowest address among the first few (CONSOLIDATED) */
} gpum__fit_t;

void gpum__tlsf_init(gpum__tlsf_t *t);
void gpum__tlsf_insert(gpum__tlsf_t *t, struct gpum__block *b);
void gpum__tlsf_remove(gpum__tlsf_t *t, struct gpum__block *b);
/* A block of at least size bytes (a multiple of 512), left in its list, or NULL. */
struct gpum__block *gpum__tlsf_find(const gpum__tlsf_t *t, uint64_t size, gpum__fit_t fit);
/* The largest block (scans the top non-empty list only), or NULL. */
struct gpum__block *gpum__tlsf_largest(const gpum__tlsf_t *t);
/* The list indexes of a block of size bytes. */
void gpum__tlsf_mapping(uint64_t size, unsigned *fl, unsigned *sl);
/* Checks the bitmaps against the lists and every block's list index; 0 or -1 with why. */
int gpum__tlsf_check(const gpum__tlsf_t *t, const char **why);

#endif /* GPUM_TLSF_INTERNAL_H */
