/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/pool hot path: the time of an alloc+free pair on one precomputed sequence, for the gpum
 * pool (simulated source, warmed first so every segment is cached) or for the process's malloc
 * (glibc, or jemalloc / mimalloc through LD_PRELOAD: the same binary, the same sequence).
 *
 * The sequence: a live set of N blocks; each pair frees a block chosen at random from the set
 * and allocates a new one in its place, with sizes from a mix shaped like a training step's
 * tensors (see MIX below). With --window W the victims are drawn from W fixed slots of the set
 * only: the other N - W blocks stay allocated throughout (weights, optimizer state) while the
 * churn touches a small, recently used part of the pool, as a training step does; this
 * separates the cost of the algorithm from the cache misses of touching N random blocks. One
 * untimed pass warms the allocator; then batches of pairs are timed and the median batch gives ns
 * per pair. With --threads T, T threads run the same number of pairs each, on their own live sets,
 * against one pool (or malloc), and the result is the aggregate pairs per second. With
 * --capacity-mib C the simulated source has a capacity of C MiB and reports it as the device's
 * size, so the pool's default cache bound (1/8 of the device) is on; without it the source
 * reports no device and the pool has no cache bound.
 *
 * Usage: pool_hotpath gpum|malloc [--live N] [--window W] [--batches B] [--batch P]
 *                     [--threads T] [--capacity-mib C]
 * Prints one line: "ns_per_pair=X pairs_per_sec=Y". Built by bench/pool/run.sh.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/error.h>
#include <gpum/pool.h>

#define SEQ_LEN (1u << 16) /* sizes and victims, reused cyclically */

/* The size mix: share (percent) and log-uniform range of each class. */
static const struct {
  unsigned pct;
  uint64_t lo, hi;
} MIX[] = {
    {50, 512, 64 << 10},     /* biases, norms, small activations */
    {35, 64 << 10, 1 << 20}, /* mid-size activations and weights */
    {13, 1 << 20, 8 << 20},  /* large activations */
    {2, 8 << 20, 16 << 20},  /* the occasional big buffer */
};

typedef struct {
  int use_pool;
  gpum_pool_t *pool;
  unsigned live, batches, batch;
  uint64_t seed;
  uint64_t *sizes;
  uint32_t *victims;
  double *batch_ns; /* per batch: ns per pair */
  uint64_t elapsed_ns;
  int err;
} worker_t;

static pthread_barrier_t start_line;

static uint64_t rng(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t draw_size(uint64_t *s) {
  unsigned r = (unsigned)(rng(s) % 100), acc = 0;
  size_t k = 0;
  for (; k < sizeof MIX / sizeof MIX[0] - 1; k++)
    if (r < (acc += MIX[k].pct))
      break;
  /* log-uniform in [lo, hi): lo * (hi/lo)^u */
  double u = (double)(rng(s) >> 11) / (double)(1ull << 53);
  double lo = (double)MIX[k].lo, hi = (double)MIX[k].hi;
  uint64_t x = (uint64_t)(lo * pow(hi / lo, u));
  return x < MIX[k].lo ? MIX[k].lo : x >= MIX[k].hi ? MIX[k].hi - 1 : x;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline int do_alloc(worker_t *w, uint64_t size, uintptr_t *p) {
  if (w->use_pool) {
    gpum_devptr_t d;
    int rc = gpum_pool_alloc(w->pool, size, 0, &d);
    *p = (uintptr_t)d;
    return rc;
  }
  void *m = malloc(size);
  *p = (uintptr_t)m;
  return m ? 0 : -1;
}

static inline void do_free(worker_t *w, uintptr_t p) {
  if (w->use_pool)
    gpum_pool_free(w->pool, (gpum_devptr_t)p);
  else
    free((void *)p);
}

/* One pass of n pairs starting at sequence index *k. */
static int pairs(worker_t *w, uintptr_t *ptr, unsigned n, unsigned *k) {
  for (unsigned j = 0; j < n; j++) {
    unsigned i = (*k)++ & (SEQ_LEN - 1);
    uint32_t v = w->victims[i];
    do_free(w, ptr[v]);
    if (do_alloc(w, w->sizes[i], &ptr[v]))
      return -1;
  }
  return 0;
}

static void *work(void *arg) {
  worker_t *w = arg;
  uintptr_t *ptr = calloc(w->live, sizeof *ptr);
  unsigned k = 0;
  if (!ptr) {
    w->err = 1;
    pthread_barrier_wait(&start_line);
    return NULL;
  }
  for (unsigned i = 0; i < w->live && !w->err; i++)
    w->err = do_alloc(w, w->sizes[i & (SEQ_LEN - 1)], &ptr[i]) != 0;
  if (!w->err) /* warm-up: a whole sequence, untimed */
    w->err = pairs(w, ptr, SEQ_LEN, &k) != 0;
  pthread_barrier_wait(&start_line);
  uint64_t t0 = now_ns();
  for (unsigned b = 0; b < w->batches && !w->err; b++) {
    uint64_t s = now_ns();
    w->err = pairs(w, ptr, w->batch, &k) != 0;
    w->batch_ns[b] = (double)(now_ns() - s) / w->batch;
  }
  w->elapsed_ns = now_ns() - t0;
  for (unsigned i = 0; i < w->live; i++)
    if (ptr[i])
      do_free(w, ptr[i]);
  free(ptr);
  return NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static unsigned arg_uint(int argc, char **argv, const char *name, unsigned def) {
  for (int i = 2; i + 1 < argc; i++)
    if (!strcmp(argv[i], name)) {
      char *end;
      unsigned long v = strtoul(argv[i + 1], &end, 10);
      if (*end || v == 0 || v > 100000000ul) {
        fprintf(stderr, "pool_hotpath: bad %s '%s'\n", name, argv[i + 1]);
        exit(2);
      }
      return (unsigned)v;
    }
  return def;
}

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "gpum") && strcmp(argv[1], "malloc"))) {
    fprintf(stderr, "usage: pool_hotpath gpum|malloc [--live N] [--window W] [--batches B] "
                    "[--batch P] [--threads T] [--capacity-mib C]\n");
    return 2;
  }
  unsigned live = arg_uint(argc, argv, "--live", 100);
  unsigned window = arg_uint(argc, argv, "--window", live);
  if (window > live) {
    fprintf(stderr, "pool_hotpath: --window %u is larger than --live %u\n", window, live);
    return 2;
  }
  unsigned batches = arg_uint(argc, argv, "--batches", 300);
  unsigned batch = arg_uint(argc, argv, "--batch", 1000);
  unsigned nthreads = arg_uint(argc, argv, "--threads", 1);
  uint64_t capacity = (uint64_t)arg_uint(argc, argv, "--capacity-mib", 0) << 20; /* 0: none */
  gpum_pool_source_t *src = NULL;
  gpum_pool_t *pool = NULL;
  int use_pool = !strcmp(argv[1], "gpum");
  if (use_pool &&
      (gpum_pool_source_simulated(capacity, &src) || gpum_pool_create(src, NULL, &pool))) {
    fprintf(stderr, "pool_hotpath: cannot create the pool: %s\n", gpum_last_error());
    return 1;
  }
  worker_t *w = calloc(nthreads, sizeof *w);
  pthread_t *th = calloc(nthreads, sizeof *th);
  if (!w || !th)
    return 1;
  pthread_barrier_init(&start_line, NULL, nthreads + 1);
  for (unsigned t = 0; t < nthreads; t++) {
    w[t] = (worker_t){.use_pool = use_pool,
                      .pool = pool,
                      .live = live,
                      .batches = batches,
                      .batch = batch,
                      .seed = 42 + t};
    w[t].sizes = malloc(SEQ_LEN * sizeof *w[t].sizes);
    w[t].victims = malloc(SEQ_LEN * sizeof *w[t].victims);
    w[t].batch_ns = malloc(batches * sizeof *w[t].batch_ns);
    if (!w[t].sizes || !w[t].victims || !w[t].batch_ns)
      return 1;
    uint64_t s = w[t].seed;
    for (unsigned i = 0; i < SEQ_LEN; i++) {
      w[t].sizes[i] = draw_size(&s);
      w[t].victims[i] = (uint32_t)(rng(&s) % window);
    }
    pthread_create(&th[t], NULL, work, &w[t]);
  }
  pthread_barrier_wait(&start_line);
  for (unsigned t = 0; t < nthreads; t++)
    pthread_join(th[t], NULL);
  uint64_t wall = 0; /* the slowest thread's timed loop */
  int err = 0;
  for (unsigned t = 0; t < nthreads; t++) {
    err |= w[t].err;
    wall = w[t].elapsed_ns > wall ? w[t].elapsed_ns : wall;
  }
  if (err) {
    fprintf(stderr, "pool_hotpath: an allocation failed: %s\n",
            use_pool ? gpum_last_error() : "malloc returned NULL");
    return 1;
  }
  qsort(w[0].batch_ns, batches, sizeof(double), cmp_double);
  double median = w[0].batch_ns[batches / 2];
  double pps = (double)nthreads * batches * batch / ((double)wall / 1e9);
  printf("ns_per_pair=%.1f pairs_per_sec=%.0f\n", median, pps);
  for (unsigned t = 0; t < nthreads; t++) {
    free(w[t].sizes);
    free(w[t].victims);
    free(w[t].batch_ns);
  }
  free(w);
  free(th);
  gpum_pool_destroy(pool);
  gpum_pool_source_destroy(src);
  pthread_barrier_destroy(&start_line);
  return 0;
}
