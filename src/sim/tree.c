/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An ordered map from 64-bit keys to nodes embedded in the caller's structs (a treap), for the
 * simulated driver's per-process bookkeeping: cuMemAlloc blocks and VMM mappings by address
 * (the block containing a pointer is the one with the greatest start at or below it),
 * reservations by base, physical allocations by handle, free file extents by size. Every
 * operation is O(log n) expected, so a process with hundreds of thousands of allocations pays
 * no more per call than one with a few.
 *
 * Priorities are a hash of the key, not random numbers: the shape is deterministic and
 * balanced in expectation for any insertion order (handles are numbered in sequence).
 * Keys are unique within a tree. The caller serialises access.
 */
#include <stddef.h>

#include "sim_internal.h"

/* splitmix64's finaliser. */
static uint64_t prio_of(uint64_t key) {
  key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9ull;
  key = (key ^ (key >> 27)) * 0x94d049bb133111ebull;
  return key ^ (key >> 31);
}

/* Splits t into the keys below key (*lo) and the keys at or above it (*hi). */
static void split(struct gpum__sim_tnode *t, uint64_t key, struct gpum__sim_tnode **lo,
                  struct gpum__sim_tnode **hi) {
  if (!t) {
    *lo = *hi = NULL;
  } else if (t->key < key) {
    split(t->right, key, &t->right, hi);
    *lo = t;
  } else {
    split(t->left, key, lo, &t->left);
    *hi = t;
  }
}

/* Joins two treaps, every key of a below every key of b. */
static struct gpum__sim_tnode *merge(struct gpum__sim_tnode *a, struct gpum__sim_tnode *b) {
  if (!a)
    return b;
  if (!b)
    return a;
  if (a->prio > b->prio) {
    a->right = merge(a->right, b);
    return a;
  }
  b->left = merge(a, b->left);
  return b;
}

void gpum__sim_tree_insert(struct gpum__sim_tnode **root, struct gpum__sim_tnode *node,
                           uint64_t key) {
  node->key = key;
  node->prio = prio_of(key);
  struct gpum__sim_tnode **at = root;
  while (*at && (*at)->prio > node->prio)
    at = key < (*at)->key ? &(*at)->left : &(*at)->right;
  split(*at, key, &node->left, &node->right);
  *at = node;
}

void gpum__sim_tree_remove(struct gpum__sim_tnode **root, struct gpum__sim_tnode *node) {
  struct gpum__sim_tnode **at = root;
  while (*at && *at != node)
    at = node->key < (*at)->key ? &(*at)->left : &(*at)->right;
  if (*at)
    *at = merge(node->left, node->right);
  node->left = node->right = NULL;
}

struct gpum__sim_tnode *gpum__sim_tree_find(struct gpum__sim_tnode *t, uint64_t key) {
  while (t && t->key != key)
    t = key < t->key ? t->left : t->right;
  return t;
}

struct gpum__sim_tnode *gpum__sim_tree_floor(struct gpum__sim_tnode *t, uint64_t key) {
  struct gpum__sim_tnode *best = NULL;
  while (t) {
    if (t->key <= key) {
      best = t;
      t = t->right;
    } else {
      t = t->left;
    }
  }
  return best;
}

struct gpum__sim_tnode *gpum__sim_tree_ceil(struct gpum__sim_tnode *t, uint64_t key) {
  struct gpum__sim_tnode *best = NULL;
  while (t) {
    if (t->key >= key) {
      best = t;
      t = t->left;
    } else {
      t = t->right;
    }
  }
  return best;
}
