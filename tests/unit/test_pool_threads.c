/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Multi-threaded stress of one pool on real host memory: four threads allocate mixed sizes on
 * their own streams, stamp each block with a pattern (head and tail), check the stamp before
 * freeing (two threads handed one block, or overlapping blocks, would break it), and pass a
 * share of their blocks to a common exchange that any thread frees (cross-thread frees).
 * Another thread reads stats and snapshots meanwhile, and an OOM callback that frees from the
 * exchange runs under a limit. At the end the consistency checker passes and the counters
 * balance. Built into the TSan run (label "threads").
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/pool.h>

#include "pool/pool_internal.h"
#include "pool_testlib.h"

#define MiB (UINT64_C(1) << 20)
#define THREADS 4
#define LIVE 64
#define EXCHANGE 256

typedef struct {
  gpum_devptr_t ptr;
  uint64_t size, stamp;
} blk_t;

typedef struct {
  gpum_pool_t *pool;
  pthread_mutex_t lock;
  blk_t exchange[EXCHANGE];
  int nexchange;
  atomic_int running;
  atomic_long ooms, cross_frees;
  long ops;
} shared_t;

typedef struct {
  shared_t *sh;
  int id;
} arg_t;

static void stamp(const blk_t *b) {
  uint64_t *head = (uint64_t *)(uintptr_t)b->ptr;
  uint64_t *tail = (uint64_t *)(uintptr_t)(b->ptr + (b->size & ~UINT64_C(7)) - 8);
  *head = b->stamp;
  *tail = ~b->stamp;
}

static bool stamped(const blk_t *b) {
  const uint64_t *head = (const uint64_t *)(uintptr_t)b->ptr;
  const uint64_t *tail = (const uint64_t *)(uintptr_t)(b->ptr + (b->size & ~UINT64_C(7)) - 8);
  return *head == b->stamp && *tail == ~b->stamp;
}

static bool release(shared_t *sh, const blk_t *b) {
  if (!stamped(b))
    return false;
  return gpum_pool_free(sh->pool, b->ptr) == 0;
}

/* Frees one block from the exchange; false when it is empty. */
static bool free_exchanged(shared_t *sh, bool *ok) {
  pthread_mutex_lock(&sh->lock);
  if (sh->nexchange == 0) {
    pthread_mutex_unlock(&sh->lock);
    return false;
  }
  blk_t b = sh->exchange[--sh->nexchange];
  pthread_mutex_unlock(&sh->lock);
  *ok = *ok && release(sh, &b);
  atomic_fetch_add(&sh->cross_frees, 1);
  return true;
}

static bool oom_cb(gpum_pool_t *pool, size_t requested, void *arg) {
  (void)pool, (void)requested;
  bool ok = true;
  return free_exchanged(arg, &ok) && ok;
}

static void *worker(void *p) {
  arg_t *a = p;
  shared_t *sh = a->sh;
  blk_t live[LIVE];
  int n = 0;
  bool ok = true;
  uint64_t s = (uint64_t)a->id * 7919 + 1;
  for (long i = 0; i < sh->ops && ok; i++) {
    s = s * 6364136223846793005u + 1442695040888963407u;
    unsigned k = (unsigned)((s >> 33) % 100);
    if (k < 50 && n < LIVE) {
      uint64_t size =
          (s >> 40) % 100 < 90 ? 16 + (s >> 44) % (256 * 1024) : MiB + (s >> 44) % (6 * MiB);
      blk_t b = {0, size, s};
      int rc = gpum_pool_alloc(sh->pool, size, (gpum_stream_t)a->id, &b.ptr);
      if (rc == GPUM_EDEVOOM) {
        atomic_fetch_add(&sh->ooms, 1);
        continue;
      }
      if (rc != 0) {
        ok = false;
        break;
      }
      stamp(&b);
      live[n++] = b;
    } else if (k < 80 && n > 0) {
      int j = (int)((s >> 20) % (unsigned)n);
      ok = release(sh, &live[j]);
      live[j] = live[--n];
    } else if (k < 92 && n > 0) { /* hand it to whoever comes next */
      int j = (int)((s >> 20) % (unsigned)n);
      pthread_mutex_lock(&sh->lock);
      bool room = sh->nexchange < EXCHANGE;
      if (room)
        sh->exchange[sh->nexchange++] = live[j];
      pthread_mutex_unlock(&sh->lock);
      if (room)
        live[j] = live[--n];
    } else {
      free_exchanged(sh, &ok);
    }
  }
  while (n > 0 && ok)
    ok = release(sh, &live[--n]);
  atomic_fetch_sub(&sh->running, 1);
  return ok ? NULL : (void *)1;
}

static void *observer(void *p) {
  shared_t *sh = p;
  for (unsigned i = 0; atomic_load(&sh->running) > 0; i++) {
    gpum_pool_stats_t st;
    if (gpum_pool_stats(sh->pool, &st) != 0)
      return (void *)1;
    if (i % 256 == 0) {
      char *js = NULL;
      if (gpum_pool_snapshot_json(sh->pool, &js) != 0)
        return (void *)1;
      free(js);
      gpum_pool_trim(sh->pool, st.reserved_bytes.current * 3 / 4, NULL);
    }
    sched_yield();
  }
  return NULL;
}

static void test_pool_threads_stress(void **state) {
  (void)state;
  gpum_pool_source_t *src = NULL;
  assert_int_equal(gpum_pool_source_host(&src), 0);
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.limit_bytes = 160 * MiB; /* tight: the ladder and the callback run now and then */
  shared_t *sh = calloc(1, sizeof(*sh));
  assert_non_null(sh);
  assert_int_equal(gpum_pool_create(src, &o, &sh->pool), 0);
  assert_int_equal(gpum_pool_add_oom_callback(sh->pool, oom_cb, sh), 0);
  pthread_mutex_init(&sh->lock, NULL);
  sh->ops = tl_scale(200000);
  atomic_store(&sh->running, THREADS);
  pthread_t th[THREADS], obs;
  arg_t args[THREADS];
  for (int i = 0; i < THREADS; i++) {
    args[i] = (arg_t){sh, i};
    assert_int_equal(pthread_create(&th[i], NULL, worker, &args[i]), 0);
  }
  assert_int_equal(pthread_create(&obs, NULL, observer, sh), 0);
  for (int i = 0; i < THREADS; i++) {
    void *ret = NULL;
    pthread_join(th[i], &ret);
    assert_null(ret);
  }
  void *ret = NULL;
  pthread_join(obs, &ret);
  assert_null(ret);
  bool ok = true;
  while (free_exchanged(sh, &ok))
    ;
  assert_true(ok);
  if (gpum__pool_check(sh->pool) != 0)
    fail_msg("%s", gpum_last_error());
  gpum_pool_stats_t st;
  assert_int_equal(gpum_pool_stats(sh->pool, &st), 0);
  assert_int_equal(st.allocation.current, 0);
  assert_int_equal(st.allocated_bytes.current, 0);
  assert_int_equal(st.allocation.allocated, st.allocation.freed);
  assert_true(st.reserved_bytes.peak <= 160 * MiB);
  print_message("%ld ops x %d threads: %ld cross-thread frees, %ld OOMs, peak reserved %.0f MiB\n",
                sh->ops, THREADS, atomic_load(&sh->cross_frees), atomic_load(&sh->ooms),
                (double)st.reserved_bytes.peak / MiB);
  gpum_pool_destroy(sh->pool);
  pthread_mutex_destroy(&sh->lock);
  free(sh);
  gpum_pool_source_destroy(src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pool_threads_stress),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
