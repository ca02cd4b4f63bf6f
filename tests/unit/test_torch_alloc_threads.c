/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for gpum's pool as PyTorch's allocator (src/lib/pool/torch_alloc.c,
 * gpum/torch.h) on the simulated driver (a node of two 1 GiB devices made by the test): the
 * memory gpum_torch_malloc hands out is the device's and usable; gpum_torch_free gives it back
 * to the pool; the reservation's limit (GPUM_MEM_LIMIT, as gpum run sets it) stops an
 * allocation with NULL and an out-of-memory reason; each device has its own pool; a bad device
 * or size is NULL with a reason; 8 threads allocating and freeing at once (ThreadSanitizer too:
 * the _threads suffix). Also the batch runner's device memory callback
 * (gpum_batch_memory_from_device), with these pools standing for a framework's allocator.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <gpum/batch.h>
#include <gpum/device.h>
#include <gpum/error.h>
#include <gpum/pool.h>
#include <gpum/torch.h>

#define MiB (1024 * 1024)

typedef int (*sim_create_fn)(const char *, const char *, char *, size_t);
typedef int (*sim_destroy_fn)(const char *);

static struct {
  void *sim;
  sim_destroy_fn destroy;
  char node[64];
} g;

static int group_setup(void **state) {
  (void)state;
  const char *lib = getenv("GPUM_SIM_LIBRARY");
  if (!lib || !(g.sim = dlopen(lib, RTLD_NOW | RTLD_LOCAL))) {
    fprintf(stderr, "cannot load the simulator (GPUM_SIM_LIBRARY=%s)\n", lib ? lib : "");
    return -1;
  }
  sim_create_fn create;
  void *p = dlsym(g.sim, "gpum_sim_create");
  memcpy(&create, &p, sizeof p);
  p = dlsym(g.sim, "gpum_sim_destroy");
  memcpy(&g.destroy, &p, sizeof p);
  if (!create || !g.destroy)
    return -1;
  char spec[] = "/tmp/gpum-test-torch-alloc-XXXXXX";
  int fd = mkstemp(spec);
  if (fd < 0)
    return -1;
  const char text[] = "name: torchalloc\ndevices:\n"
                      "  - {count: 2, name: Sim GPU, memory: 1GiB, reserved: 256MiB}\n";
  ssize_t w = write(fd, text, sizeof text - 1);
  close(fd);
  snprintf(g.node, sizeof g.node, "ttal%d", (int)getpid());
  int rc = w == (ssize_t)(sizeof text - 1) ? create(spec, g.node, NULL, 0) : -1;
  unlink(spec);
  if (rc)
    return -1;
  setenv("GPUM_SIM_NODE", g.node, 1);
  unsetenv("GPUM_CUDA_LIBRARY");
  /* As under gpum run --mem 96MiB: the pools' default limit. */
  setenv("GPUM_MEM_LIMIT", "100663296", 1);
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  if (g.destroy)
    g.destroy(g.node);
  return 0;
}

static void test_alloc_use_free(void **state) {
  (void)state;
  unsigned char *p = gpum_torch_malloc(16 * MiB, 0, NULL);
  assert_non_null(p);
  /* The simulator backs device memory with this process's memory: it can be written. */
  memset(p, 0xab, 16 * MiB);
  assert_int_equal(p[16 * MiB - 1], 0xab);
  gpum_pool_t *pool;
  assert_int_equal(gpum_torch_pool(0, &pool), 0);
  gpum_pool_stats_t st;
  assert_int_equal(gpum_pool_stats(pool, &st), 0);
  assert_true(st.allocated_bytes.current >= 16 * MiB);
  assert_int_equal(st.limit, 96 * MiB);
  gpum_torch_free(p, 16 * MiB, 0, NULL);
  assert_int_equal(gpum_pool_stats(pool, &st), 0);
  assert_int_equal(st.allocated_bytes.current, 0);
  /* The block is cached: the same size comes back from the pool, not the driver. */
  uint64_t segs = st.num_source_allocs;
  void *q = gpum_torch_malloc(16 * MiB, 0, NULL);
  assert_non_null(q);
  assert_int_equal(gpum_pool_stats(pool, &st), 0);
  assert_int_equal(st.num_source_allocs, segs);
  gpum_torch_free(q, 16 * MiB, 0, NULL);
}

static void test_limit_and_errors(void **state) {
  (void)state;
  /* Past the reservation: NULL, and the pool's out-of-memory reason. */
  assert_null(gpum_torch_malloc(128 * MiB, 0, NULL));
  assert_non_null(strstr(gpum_last_error(), "limit"));
  void *a = gpum_torch_malloc(64 * MiB, 0, NULL);
  assert_non_null(a);
  assert_null(gpum_torch_malloc(64 * MiB, 0, NULL)); /* 128 MiB > 96 MiB together */
  /* Device 1 has a pool of its own, with its own 96 MiB. */
  void *b = gpum_torch_malloc(64 * MiB, 1, NULL);
  assert_non_null(b);
  gpum_pool_t *p0, *p1;
  assert_int_equal(gpum_torch_pool(0, &p0), 0);
  assert_int_equal(gpum_torch_pool(1, &p1), 0);
  assert_ptr_not_equal(p0, p1);
  gpum_torch_free(a, 64 * MiB, 0, NULL);
  gpum_torch_free(b, 64 * MiB, 1, NULL);
  /* A device the driver does not have, one past what gpum serves, a bad size. */
  assert_null(gpum_torch_malloc(MiB, 7, NULL));
  assert_null(gpum_torch_malloc(MiB, 64, NULL));
  assert_null(gpum_torch_malloc(0, 0, NULL));
  assert_null(gpum_torch_malloc(-5, 0, NULL));
  gpum_torch_free(NULL, 0, 0, NULL); /* ignored, as free(NULL) */
}

static void *worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  for (int i = 0; i < 500; i++) {
    size_t n = (size_t)(1 + rand_r(&seed) % 4) * MiB;
    void *p = gpum_torch_malloc((ssize_t)n, (int)(seed % 2), NULL);
    if (!p)
      return (void *)1;
    gpum_torch_free(p, (ssize_t)n, (int)(seed % 2), NULL);
  }
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  pthread_t t[8];
  for (uintptr_t i = 0; i < 8; i++)
    assert_int_equal(pthread_create(&t[i], NULL, worker, (void *)(i + 1)), 0);
  for (int i = 0; i < 8; i++) {
    void *rc;
    pthread_join(t[i], &rc);
    assert_null(rc);
  }
  gpum_pool_t *pool;
  gpum_pool_stats_t st;
  assert_int_equal(gpum_torch_pool(0, &pool), 0);
  assert_int_equal(gpum_pool_stats(pool, &st), 0);
  assert_int_equal(st.allocated_bytes.current, 0);
}

static void test_batch_memory_from_device(void **state) {
  (void)state;
  gpum_device_session_t *s;
  assert_int_equal(gpum_device_open(NULL, &s), 0);
  void *p = gpum_torch_malloc(48 * MiB, 0, NULL);
  assert_non_null(p);
  gpum_batch_device_t d = {.session = s, .index = 0};
  gpum_batch_memory_t m;
  assert_int_equal(gpum_batch_memory_from_device(&m, &d), 0);
  assert_true(m.peak >= 48 * MiB); /* this process's memory, as the driver counts it */
  assert_int_equal(m.total, 1024 * MiB);
  assert_true(m.limit >= m.peak && m.limit <= 768 * MiB); /* free + ours; 256 MiB reserved */
  d.limit = 96 * MiB;                                     /* under gpum run: the reservation */
  assert_int_equal(gpum_batch_memory_from_device(&m, &d), 0);
  assert_int_equal(m.limit, 96 * MiB);
  d.pid = 1; /* a process without memory there */
  assert_int_equal(gpum_batch_memory_from_device(&m, &d), 0);
  assert_int_equal(m.peak, 0);
  d.index = 9;
  assert_int_equal(gpum_batch_memory_from_device(&m, &d), GPUM_ENODEV);
  gpum_torch_free(p, 48 * MiB, 0, NULL);
  gpum_device_close(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_alloc_use_free),
      cmocka_unit_test(test_limit_and_errors),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_batch_memory_from_device),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
