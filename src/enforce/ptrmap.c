/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What each allocation of this process was charged, so that its free gives back exactly that:
 * a hash map in 64 shards, each with its own lock, held only for the map operation (never
 * across a driver call), so that 64 threads allocating at once seldom meet. Also the device of
 * each memory pool the program made or asked for.
 */
#include <pthread.h>
#include <stdlib.h>

#include "enforce_internal.h"

#define SHARDS 64
#define BUCKETS 512
#define MAX_SPARE 256

struct ent {
  uint64_t key;
  uint64_t bytes;
  unsigned dev, kind;
  struct ent *next;
};

static struct shard {
  pthread_mutex_t mu;
  struct ent *b[BUCKETS];
  struct ent *spare; /* entries given back, reused before malloc */
  unsigned nspare;   /* at most MAX_SPARE */
} shards[SHARDS] = {
#define S1 \
  { .mu = PTHREAD_MUTEX_INITIALIZER }
#define S8 S1, S1, S1, S1, S1, S1, S1, S1
    S8, S8, S8, S8, S8,
    S8, S8, S8
#undef S8
#undef S1
};
_Static_assert(SHARDS == 64, "the initializer above names 64 shards");

static uint64_t mix(uint64_t k, unsigned kind) {
  k ^= kind;
  k *= 0x9e3779b97f4a7c15ULL;
  return k ^ (k >> 29);
}

int gpum__enf_map_put(unsigned kind, uint64_t key, uint64_t bytes, unsigned dev) {
  uint64_t h = mix(key, kind);
  struct shard *s = &shards[h % SHARDS];
  pthread_mutex_lock(&s->mu);
  struct ent *e = s->spare;
  if (e) {
    s->spare = e->next;
    s->nspare--;
  } else if (!(e = malloc(sizeof *e))) {
    pthread_mutex_unlock(&s->mu);
    return -1;
  }
  *e = (struct ent){.key = key, .bytes = bytes, .dev = dev, .kind = kind};
  struct ent **head = &s->b[(h / SHARDS) % BUCKETS];
  e->next = *head;
  *head = e;
  pthread_mutex_unlock(&s->mu);
  return 0;
}

bool gpum__enf_map_take(unsigned kind, uint64_t key, uint64_t *bytes, unsigned *dev) {
  uint64_t h = mix(key, kind);
  struct shard *s = &shards[h % SHARDS];
  pthread_mutex_lock(&s->mu);
  struct ent **pp = &s->b[(h / SHARDS) % BUCKETS];
  while (*pp && ((*pp)->key != key || (*pp)->kind != kind))
    pp = &(*pp)->next;
  struct ent *e = *pp, *drop = NULL;
  if (e) {
    *pp = e->next;
    *bytes = e->bytes;
    *dev = e->dev;
    if (s->nspare < MAX_SPARE) {
      e->next = s->spare;
      s->spare = e;
      s->nspare++;
    } else {
      drop = e;
    }
  }
  pthread_mutex_unlock(&s->mu);
  free(drop);
  return e != NULL;
}

/* After fork, in the child: one thread, the locks' holders gone with the parent's threads. */
void gpum__enf_map_clear(void) {
  for (unsigned i = 0; i < SHARDS; i++) {
    pthread_mutex_init(&shards[i].mu, NULL);
    for (unsigned j = 0; j < BUCKETS; j++) {
      struct ent *e = shards[i].b[j];
      while (e) {
        struct ent *next = e->next;
        free(e);
        e = next;
      }
      shards[i].b[j] = NULL;
    }
    while (shards[i].spare) {
      struct ent *next = shards[i].spare->next;
      free(shards[i].spare);
      shards[i].spare = next;
    }
    shards[i].nspare = 0;
  }
}

/* Pools: few, looked up on each pool allocation. */
#define MAX_POOLS 256
static pthread_mutex_t pools_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  const void *pool;
  int dev;
} pools[MAX_POOLS];
static unsigned npools;

void gpum__enf_pool_note(const void *pool, int dev) {
  pthread_mutex_lock(&pools_mu);
  unsigned i = 0;
  while (i < npools && pools[i].pool != pool)
    i++;
  if (i < MAX_POOLS) {
    pools[i].pool = pool;
    pools[i].dev = dev;
    if (i == npools)
      npools++;
  }
  pthread_mutex_unlock(&pools_mu);
}

int gpum__enf_pool_dev(const void *pool) {
  pthread_mutex_lock(&pools_mu);
  int dev = -1;
  for (unsigned i = 0; i < npools && dev < 0; i++)
    if (pools[i].pool == pool)
      dev = pools[i].dev;
  pthread_mutex_unlock(&pools_mu);
  return dev;
}
