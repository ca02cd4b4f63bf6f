/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the CUDA memory sources of the pool (src/lib/pool/source_cuda*.c) on the
 * simulated driver: the test starts its own simulated node (two 1 GiB devices, 768 MiB
 * allocatable each, the second without virtual memory management) through libgpum_sim.so's control
 * API and checks, through libgpum's device layer (the simulator's NVML), that this process's device
 * memory follows what the sources do.
 *
 * Source level (ops called directly): cuMemAlloc segments appear in and leave NVML; cuda-vmm maps
 * and unmaps granules (any granule-aligned sub-range, across map calls), enforces the
 * granularity, refuses double maps and unmaps of unmapped ranges, rolls back a map that runs out
 * of memory, and gives everything back at destroy; pinned memory is host memory; events on a
 * stream held with the simulator's gpum_sim_debug_stream_hold stay pending (GPUM_EAGAIN) until
 * released; cuda-vmm on a device without virtual memory management is GPUM_ENOTSUP; ops run on
 * threads without a current context and leave the caller's context alone; bad device ordinals give
 * GPUM_ENODEV and a missing driver GPUM_EDRIVER with their names.
 *
 * Pool level (gpum_pool_* on these sources): trimming gives memory back to the device as NVML
 * sees it (cuda and cuda-vmm expandable segments); stream-ordered reuse with a held stream; the
 * OOM ladder frees cached segments and retries, and a request that cannot fit fails with
 * GPUM_EDEVOOM and the pool's full message.
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

#include <gpum/device.h>
#include <gpum/error.h>
#include <gpum/pool.h>

#include "device/cuda_loader.h"
#include "pool/source_cuda_internal.h"

#define MiB (1024ull * 1024)
#define GiB (1024 * MiB)

typedef int (*sim_create_fn)(const char *, const char *, char *, size_t);
typedef int (*sim_destroy_fn)(const char *);
typedef int (*sim_hold_fn)(void *, int);

static struct {
  void *sim;
  sim_destroy_fn destroy;
  sim_hold_fn hold;
  char node[64];
  gpum_device_session_t *dev;
  gpum__cuda_t *cu; /* the test's own handle on the driver, for streams and copies */
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
  p = dlsym(g.sim, "gpum_sim_debug_stream_hold");
  memcpy(&g.hold, &p, sizeof p);
  if (!create || !g.destroy || !g.hold)
    return -1;
  char spec[] = "/tmp/gpum-test-pool-cuda-XXXXXX";
  int fd = mkstemp(spec);
  if (fd < 0)
    return -1;
  const char text[] =
      "name: poolcuda\ndevices:\n"
      "  - {name: Sim GPU, memory: 1GiB, reserved: 256MiB}\n"
      "  - {name: Old GPU, memory: 1GiB, reserved: 256MiB, virtual_memory: false}\n";
  ssize_t w = write(fd, text, sizeof text - 1);
  close(fd);
  snprintf(g.node, sizeof g.node, "tpsc%d", (int)getpid());
  int rc = w == (ssize_t)(sizeof text - 1) ? create(spec, g.node, NULL, 0) : -1;
  unlink(spec);
  if (rc)
    return -1;
  setenv("GPUM_SIM_NODE", g.node, 1);
  unsetenv("GPUM_CUDA_LIBRARY");
  unsetenv("GPUM_NVML_LIBRARY");
  if (gpum_device_open(NULL, &g.dev) || gpum__cuda_load(NULL, &g.cu) ||
      gpum__cuda_context_enter(g.cu, 0, NULL)) {
    fprintf(stderr, "setup: %s\n", gpum_last_error());
    return -1;
  }
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  if (g.cu) {
    gpum__cuda_context_release(g.cu, 0);
    gpum__cuda_unload(g.cu);
  }
  gpum_device_close(g.dev);
  if (g.destroy)
    g.destroy(g.node);
  if (g.sim)
    dlclose(g.sim);
  return 0;
}

/* This process's memory on device index as the device layer (NVML) reports it. */
static uint64_t nvml_usage(unsigned index) {
  gpum_process_t procs[32];
  size_t n = 0;
  assert_int_equal(gpum_device_processes(g.dev, index, procs, 32, &n), 0);
  for (size_t i = 0; i < n; i++)
    if (procs[i].pid == (unsigned)getpid())
      return procs[i].memory;
  return 0;
}

static void assert_msg(const char *want) {
  if (!strstr(gpum_last_error(), want))
    fail_msg("message \"%s\" lacks \"%s\"", gpum_last_error(), want);
}

static CUstream new_stream(void) {
  CUstream st = NULL;
  assert_int_equal(g.cu->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  return st;
}

/* ---- source level -------------------------------------------------------------------------- */

static void test_cuda_alloc_free(void **state) {
  (void)state;
  gpum_pool_source_ops_t ops;
  void *ctx;
  assert_int_equal(gpum__pool_cuda_ops(0, &ops, &ctx), 0);
  assert_string_equal(ops.name, "cuda");
  assert_null(ops.reserve);
  uint64_t before = nvml_usage(0), f0, t0, f1, t1;
  assert_int_equal(ops.mem_info(ctx, &f0, &t0), 0);
  assert_int_equal(t0, GiB);
  gpum_devptr_t a = 0, b = 0;
  assert_int_equal(ops.alloc(ctx, 20 * MiB, &a), 0);
  assert_int_equal(ops.alloc(ctx, 2 * MiB, &b), 0);
  assert_true(a != 0 && b != 0 && a != b);
  assert_int_equal(nvml_usage(0), before + 22 * MiB);
  assert_int_equal(nvml_usage(1), 0);
  assert_int_equal(ops.mem_info(ctx, &f1, &t1), 0);
  assert_int_equal(f0 - f1, 22 * MiB);
  /* The memory is real: a round trip through it. */
  char out[8] = "gpumsrc", in[8] = "";
  assert_int_equal(g.cu->cuMemcpyHtoD_v2(a + 1000, out, sizeof out), CUDA_SUCCESS);
  assert_int_equal(g.cu->cuMemcpyDtoH_v2(in, a + 1000, sizeof in), CUDA_SUCCESS);
  assert_string_equal(in, "gpumsrc");
  assert_int_equal(ops.free(ctx, a, 20 * MiB), 0);
  assert_int_equal(nvml_usage(0), before + 2 * MiB);
  assert_int_equal(ops.free(ctx, b, 2 * MiB), 0);
  assert_int_equal(nvml_usage(0), before);
  /* A pointer the driver never gave out. */
  assert_int_equal(ops.free(ctx, a, 20 * MiB), GPUM_EINVAL);
  assert_msg("cuMemFree_v2");
  ops.destroy(ctx);
}

static void test_cuda_second_device_and_oom(void **state) {
  (void)state;
  gpum_pool_source_ops_t ops;
  void *ctx;
  assert_int_equal(gpum__pool_cuda_ops(1, &ops, &ctx), 0);
  gpum_devptr_t a = 0;
  assert_int_equal(ops.alloc(ctx, 8 * MiB, &a), 0);
  assert_int_equal(nvml_usage(1), 8 * MiB);
  assert_int_equal(ops.alloc(ctx, 2 * GiB, &a), GPUM_EDEVOOM);
  assert_msg("cuMemAlloc_v2(2.00 GiB) on CUDA device 1 (cuda pool source)");
  assert_msg("CUDA_ERROR_OUT_OF_MEMORY");
  ops.destroy(ctx); /* releasing the last context reference frees what is left, as CUDA does */
  assert_int_equal(nvml_usage(1), 0);
}

static void test_bad_device(void **state) {
  (void)state;
  gpum_pool_source_ops_t ops;
  void *ctx = NULL;
  assert_int_equal(gpum__pool_cuda_ops(2, &ops, &ctx), GPUM_ENODEV);
  assert_msg("cuda pool source: no CUDA device 2");
  assert_msg("sees 2 devices (0-1)");
  assert_int_equal(gpum__pool_cuda_vmm_ops(-1, &ops, &ctx), GPUM_ENODEV);
  assert_msg("cuda-vmm pool source: no CUDA device -1");
  gpum_pool_source_t *src = (gpum_pool_source_t *)&ops;
  assert_int_equal(gpum_pool_source_cuda(99, &src), GPUM_ENODEV);
  assert_null(src);
  assert_msg("no CUDA device 99");
  assert_int_equal(gpum_pool_source_cuda_vmm(7, &src), GPUM_ENODEV);
  assert_null(src);
  assert_int_equal(gpum_pool_source_cuda(0, NULL), GPUM_EINVAL);
  /* CUDA_VISIBLE_DEVICES is named when it hides devices. The simulator reads it at its first
   * cuInit, long done here, so only the message is checked. */
  setenv("CUDA_VISIBLE_DEVICES", "1", 1);
  assert_int_equal(gpum__pool_cuda_ops(5, &ops, &ctx), GPUM_ENODEV);
  assert_msg("CUDA_VISIBLE_DEVICES=\"1\"");
  unsetenv("CUDA_VISIBLE_DEVICES");
}

static void test_no_driver(void **state) {
  (void)state;
  gpum_pool_source_ops_t ops;
  void *ctx;
  unsetenv("GPUM_SIM_NODE");
  setenv("GPUM_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  int rc[3] = {gpum__pool_cuda_ops(0, &ops, &ctx), 0, 0};
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", gpum_last_error());
  rc[1] = gpum__pool_cuda_vmm_ops(0, &ops, &ctx);
  gpum_pool_source_t *src = NULL;
  rc[2] = gpum_pool_source_pinned(&src);
  unsetenv("GPUM_CUDA_LIBRARY");
  setenv("GPUM_SIM_NODE", g.node, 1);
  assert_int_equal(rc[0], GPUM_EDRIVER);
  assert_int_equal(rc[1], GPUM_EDRIVER);
  assert_int_equal(rc[2], GPUM_EDRIVER);
  assert_null(src);
  if (!strstr(msg, "cuda pool source:") || !strstr(msg, "/nonexistent/libcuda.so.1"))
    fail_msg("message: %s", msg);
  assert_msg("pinned pool source:");
}

static void test_events_and_stream_hold(void **state) {
  (void)state;
  gpum_pool_source_ops_t ops;
  void *ctx;
  assert_int_equal(gpum__pool_cuda_ops(0, &ops, &ctx), 0);
  CUstream a = new_stream(), b = new_stream();
  void *ea, *eb, *e0;
  assert_int_equal(g.hold(a, 1), 0);
  assert_int_equal(ops.event_record(ctx, (gpum_stream_t)(uintptr_t)a, &ea), 0);
  assert_int_equal(ops.event_record(ctx, (gpum_stream_t)(uintptr_t)b, &eb), 0);
  assert_int_equal(ops.event_record(ctx, 0, &e0), 0);
  assert_int_equal(ops.event_query(ctx, ea), GPUM_EAGAIN);
  assert_int_equal(ops.event_query(ctx, ea), GPUM_EAGAIN); /* stays pending, no timing involved */
  assert_int_equal(ops.event_query(ctx, eb), 0);
  assert_int_equal(ops.event_query(ctx, e0), 0);
  assert_int_equal(g.hold(a, 0), 0);
  assert_int_equal(ops.event_query(ctx, ea), 0);
  /* Destroyed events are reused: a recycled event recorded on a held stream is pending again. */
  ops.event_destroy(ctx, ea);
  ops.event_destroy(ctx, eb);
  assert_int_equal(g.hold(NULL, 1), 0); /* the default stream */
  assert_int_equal(ops.event_record(ctx, 0, &ea), 0);
  assert_int_equal(ops.event_query(ctx, ea), GPUM_EAGAIN);
  assert_int_equal(ops.event_query(ctx, e0), 0); /* recorded before the hold */
  assert_int_equal(g.hold(NULL, 0), 0);
  assert_int_equal(ops.event_query(ctx, ea), 0);
  assert_int_equal(ops.synchronize(ctx), 0);
  ops.event_destroy(ctx, ea);
  ops.event_destroy(ctx, e0);
  /* A stream that is not one: the driver's error, with the call named. */
  assert_int_equal(ops.event_record(ctx, 0xdead0, &ea), GPUM_EINVAL);
  assert_msg("cuEventRecord(stream 0xdead0) on CUDA device 0 (cuda pool source)");
  assert_int_equal(g.hold((void *)0xdead0, 1), GPUM_EINVAL);
  assert_int_equal(g.cu->cuStreamDestroy_v2(a), CUDA_SUCCESS);
  assert_int_equal(g.cu->cuStreamDestroy_v2(b), CUDA_SUCCESS);
  ops.destroy(ctx);
}

struct thread_arg {
  gpum_pool_source_ops_t *ops;
  void *ctx;
  int rc;
  CUcontext current_after;
};

static void *alloc_on_thread(void *p) {
  struct thread_arg *t = p;
  gpum_devptr_t a = 0;
  t->rc = t->ops->alloc(t->ctx, 4 * MiB, &a);
  if (t->rc == 0)
    t->rc = t->ops->free(t->ctx, a, 4 * MiB);
  g.cu->cuCtxGetCurrent(&t->current_after);
  return NULL;
}

static void test_context_handling(void **state) {
  (void)state;
  gpum_pool_source_ops_t ops;
  void *ctx;
  assert_int_equal(gpum__pool_cuda_ops(0, &ops, &ctx), 0);
  /* A thread that never had a context. */
  struct thread_arg t = {.ops = &ops, .ctx = ctx, .rc = -1000};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, alloc_on_thread, &t), 0);
  pthread_join(th, NULL);
  assert_int_equal(t.rc, 0);
  assert_null(t.current_after); /* left as it was */
  /* The caller's current context is put back (here: device 1's). */
  CUcontext mine = NULL, now = NULL;
  assert_int_equal(gpum__cuda_context_enter(g.cu, 1, &mine), 0);
  gpum_devptr_t a;
  assert_int_equal(ops.alloc(ctx, 2 * MiB, &a), 0);
  assert_int_equal(g.cu->cuCtxGetCurrent(&now), CUDA_SUCCESS);
  assert_ptr_equal(now, mine);
  assert_int_equal(nvml_usage(0), 2 * MiB);
  assert_int_equal(nvml_usage(1), 0);
  assert_int_equal(ops.free(ctx, a, 2 * MiB), 0);
  gpum__cuda_context_release(g.cu, 1);
  assert_int_equal(gpum__cuda_context_enter(g.cu, 0, NULL), 0);
  ops.destroy(ctx);
}

static void test_vmm_map_unmap(void **state) {
  (void)state;
  gpum_pool_source_ops_t ops;
  void *ctx;
  assert_int_equal(gpum__pool_cuda_vmm_ops(0, &ops, &ctx), 0);
  assert_string_equal(ops.name, "cuda-vmm");
  const size_t gr = gpum__pool_cuda_vmm_granularity(ctx);
  assert_int_equal(gr, 2 * MiB);
  gpum_devptr_t base = 0;
  assert_int_equal(ops.reserve(ctx, 64 * MiB, &base), 0);
  assert_int_equal(base % gr, 0);
  assert_int_equal(nvml_usage(0), 0); /* address space only */
  assert_int_equal(ops.map(ctx, base, 4 * MiB), 0);
  assert_int_equal(nvml_usage(0), 4 * MiB);
  assert_int_equal(ops.map(ctx, base + 4 * MiB, 6 * MiB), 0);
  assert_int_equal(nvml_usage(0), 10 * MiB);
  char out[4] = "vmm", in[4] = "";
  assert_int_equal(g.cu->cuMemcpyHtoD_v2(base + 5 * MiB, out, sizeof out), CUDA_SUCCESS);
  /* A sub-range across the two maps. */
  assert_int_equal(ops.unmap(ctx, base + 2 * MiB, 4 * MiB), 0);
  assert_int_equal(nvml_usage(0), 6 * MiB);
  assert_int_equal(g.cu->cuMemcpyDtoH_v2(in, base + 2 * MiB, 1), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(g.cu->cuMemcpyDtoH_v2(in, base + 8 * MiB, 1), CUDA_SUCCESS);
  /* Granularity: sizes and addresses. */
  assert_int_equal(ops.map(ctx, base + 2 * MiB, 1 * MiB), GPUM_EINVAL);
  assert_msg("multiples of the allocation granularity 2.00 MiB");
  assert_int_equal(ops.map(ctx, base + 3 * MiB, 2 * MiB), GPUM_EINVAL);
  assert_int_equal(ops.unmap(ctx, base, 3 * MiB), GPUM_EINVAL);
  assert_int_equal(nvml_usage(0), 6 * MiB);
  /* Mapped twice, unmapped twice, outside the reservation. */
  assert_int_equal(ops.map(ctx, base, 4 * MiB), GPUM_EEXIST);
  assert_msg("already mapped");
  assert_int_equal(ops.unmap(ctx, base + 2 * MiB, 2 * MiB), GPUM_EINVAL);
  assert_msg("not mapped");
  assert_int_equal(ops.map(ctx, base + 64 * MiB, 2 * MiB), GPUM_EINVAL);
  assert_msg("not inside a reserved range");
  assert_int_equal(nvml_usage(0), 6 * MiB);
  /* The gap can be mapped again; unreserve gives back what is still mapped. */
  assert_int_equal(ops.map(ctx, base + 2 * MiB, 4 * MiB), 0);
  assert_int_equal(nvml_usage(0), 10 * MiB);
  ops.unreserve(ctx, base, 64 * MiB);
  assert_int_equal(nvml_usage(0), 0);
  ops.destroy(ctx);
}

static void test_vmm_plain_segments_and_oom(void **state) {
  (void)state;
  gpum_pool_source_ops_t ops;
  void *ctx;
  assert_int_equal(gpum__pool_cuda_vmm_ops(0, &ops, &ctx), 0);
  gpum_devptr_t a = 0, b = 0, base = 0;
  assert_int_equal(ops.alloc(ctx, 3 * MiB, &a), 0); /* rounded up to the granularity */
  assert_int_equal(nvml_usage(0), 4 * MiB);
  assert_int_equal(ops.free(ctx, a + 2 * MiB, 3 * MiB), GPUM_EINVAL);
  assert_msg("not a segment of this source");
  /* A map that runs out of memory half-way is undone: all or nothing. */
  assert_int_equal(ops.reserve(ctx, 1 * GiB, &base), 0);
  assert_int_equal(ops.map(ctx, base, 800 * MiB), GPUM_EDEVOOM);
  assert_msg("cuMemCreate(2.00 MiB) on CUDA device 0 (cuda-vmm pool source)");
  assert_msg("CUDA_ERROR_OUT_OF_MEMORY");
  assert_int_equal(nvml_usage(0), 4 * MiB);
  assert_int_equal(ops.alloc(ctx, 900 * MiB, &b), GPUM_EDEVOOM);
  assert_int_equal(nvml_usage(0), 4 * MiB);
  assert_int_equal(ops.map(ctx, base, 100 * MiB), 0);
  assert_int_equal(nvml_usage(0), 104 * MiB);
  assert_int_equal(ops.free(ctx, a, 3 * MiB), 0);
  assert_int_equal(nvml_usage(0), 100 * MiB);
  /* Destroyed with a reservation still mapped: everything goes back. */
  ops.destroy(ctx);
  assert_int_equal(nvml_usage(0), 0);
}

static void test_vmm_unsupported(void **state) {
  (void)state;
  gpum_pool_source_ops_t ops;
  void *ctx = NULL;
  assert_int_equal(gpum__pool_cuda_vmm_ops(1, &ops, &ctx), GPUM_ENOTSUP);
  assert_msg("CUDA device 1 does not support virtual memory management");
  assert_msg("use the 'cuda' source");
  gpum_pool_source_t *src = NULL;
  assert_int_equal(gpum_pool_source_cuda_vmm(1, &src), GPUM_ENOTSUP);
  assert_null(src);
  /* The plain source works there, and nothing was left behind. */
  assert_int_equal(gpum__pool_cuda_ops(1, &ops, &ctx), 0);
  ops.destroy(ctx);
  assert_int_equal(nvml_usage(1), 0);
}

static void test_pinned(void **state) {
  (void)state;
  gpum_pool_source_ops_t ops;
  void *ctx;
  assert_int_equal(gpum__pool_pinned_ops(&ops, &ctx), 0);
  assert_string_equal(ops.name, "pinned");
  gpum_devptr_t a = 0;
  assert_int_equal(ops.alloc(ctx, 1 * MiB, &a), 0);
  memset((void *)(uintptr_t)a, 0x5a, 1 * MiB); /* host memory, usable by the CPU */
  assert_int_equal(nvml_usage(0), 0);          /* and not device memory */
  uint64_t f = 0, t = 0;
  assert_int_equal(ops.mem_info(ctx, &f, &t), 0);
  assert_true(t > 64 * MiB && f <= t && t != GiB); /* host RAM, not the 1 GiB device */
  void *ev;
  assert_int_equal(ops.event_record(ctx, 0, &ev), 0);
  assert_int_equal(ops.event_query(ctx, ev), 0);
  ops.event_destroy(ctx, ev);
  assert_int_equal(ops.free(ctx, a, 1 * MiB), 0);
  ops.destroy(ctx);
}

/* ---- pool level ---------------------------------------------------------------------------- */

/* While the pool core is still a stub ("not implemented yet"), the pool-level tests are skipped. */
static void skip_if_core_missing(int rc) {
  if (rc == GPUM_ENOTSUP && strstr(gpum_last_error(), "not implemented"))
    skip();
}

static gpum_pool_source_t *open_source(const char *name) {
  gpum_pool_source_t *src = NULL;
  int rc = gpum_pool_source_open(name, 0, 0, &src);
  skip_if_core_missing(rc);
  assert_int_equal(rc, 0);
  assert_string_equal(gpum_pool_source_name(src), name);
  return src;
}

static gpum_pool_t *new_pool(gpum_pool_source_t *src, bool expandable, uint64_t limit) {
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.name = "srctest";
  o.expandable_segments = expandable;
  o.limit_bytes = limit;
  o.cache_limit_fraction = 1.0; /* these tests count segments: cache up to the whole device */
  gpum_pool_t *pool = NULL;
  int rc = gpum_pool_create(src, &o, &pool);
  if (rc)
    gpum_pool_source_destroy(src);
  skip_if_core_missing(rc);
  assert_int_equal(rc, 0);
  return pool;
}

static void trim_shows_in_nvml(gpum_pool_source_t *src, bool expandable) {
  gpum_pool_t *pool = new_pool(src, expandable, 0);
  gpum_devptr_t small = 0, large = 0;
  assert_int_equal(gpum_pool_alloc(pool, 1 * MiB, 0, &small), 0);
  assert_int_equal(gpum_pool_alloc(pool, 30 * MiB, 0, &large), 0);
  gpum_pool_stats_t st;
  assert_int_equal(gpum_pool_stats(pool, &st), 0);
  uint64_t reserved = st.reserved_bytes.current;
  assert_true(reserved >= 31 * MiB);
  assert_int_equal(nvml_usage(0), reserved);
  if (expandable) /* the large block came from map */
    assert_true(st.num_maps > 0);
  else
    assert_true(st.num_maps == 0 && st.num_source_allocs == 2);
  assert_int_equal(gpum_pool_free(pool, small), 0);
  assert_int_equal(gpum_pool_free(pool, large), 0);
  /* Freed blocks stay cached: the process still holds the memory. */
  assert_int_equal(nvml_usage(0), reserved);
  uint64_t released = 0;
  assert_int_equal(gpum_pool_trim(pool, 0, &released), 0);
  assert_int_equal(released, reserved);
  assert_int_equal(nvml_usage(0), 0);
  assert_int_equal(gpum_pool_stats(pool, &st), 0);
  assert_int_equal(st.reserved_bytes.current, 0);
  if (expandable)
    assert_true(st.num_unmaps > 0);
  gpum_pool_destroy(pool);
  gpum_pool_source_destroy(src);
}

static void test_pool_trim_cuda(void **state) {
  (void)state;
  trim_shows_in_nvml(open_source("cuda"), false);
}

static void test_pool_trim_cuda_vmm(void **state) {
  (void)state;
  trim_shows_in_nvml(open_source("cuda-vmm"), true);
}

static void test_pool_stream_reuse(void **state) {
  (void)state;
  gpum_pool_source_t *src = open_source("cuda");
  gpum_pool_t *pool = new_pool(src, false, 0);
  CUstream a = new_stream(), b = new_stream();
  const gpum_stream_t sa = (gpum_stream_t)(uintptr_t)a, sb = (gpum_stream_t)(uintptr_t)b;
  /* 12 MiB requests get segments of their own (over 10 MiB): no other free space to confuse. */
  const size_t sz = 12 * MiB;
  gpum_pool_stats_t st;
  gpum_devptr_t p, q, r, s, t;
  /* 1. A block freed on A while A's work is pending is not reused on B... */
  assert_int_equal(g.hold(a, 1), 0); /* work queued on A does not complete */
  assert_int_equal(gpum_pool_alloc(pool, sz, sa, &p), 0);
  assert_int_equal(gpum_pool_free(pool, p), 0);
  assert_int_equal(gpum_pool_alloc(pool, sz, sb, &r), 0);
  assert_true(r + sz <= p || p + sz <= r);
  assert_int_equal(gpum_pool_stats(pool, &st), 0);
  assert_int_equal(st.num_source_allocs, 2);
  assert_int_equal(nvml_usage(0), 2 * sz);
  /* ... but is once A's work is done, instead of growing the pool. */
  assert_int_equal(g.hold(a, 0), 0);
  assert_int_equal(gpum_pool_alloc(pool, sz, sb, &s), 0);
  assert_int_equal(s, p);
  assert_int_equal(gpum_pool_stats(pool, &st), 0);
  assert_int_equal(st.num_source_allocs, 2);
  assert_true(st.num_stream_merges >= 1);
  /* 2. On A itself a freed block is reused at once, while A's work is pending. */
  assert_int_equal(g.hold(a, 1), 0);
  assert_int_equal(gpum_pool_alloc(pool, sz, sa, &t), 0); /* a third segment */
  assert_int_equal(gpum_pool_free(pool, t), 0);
  assert_int_equal(gpum_pool_alloc(pool, sz, sa, &q), 0);
  assert_int_equal(q, t);
  assert_int_equal(gpum_pool_free(pool, q), 0);
  assert_int_equal(gpum_pool_stats(pool, &st), 0);
  assert_int_equal(st.num_source_allocs, 3);
  assert_int_equal(nvml_usage(0), 3 * sz);
  assert_int_equal(g.hold(a, 0), 0);
  assert_int_equal(gpum_pool_free(pool, r), 0);
  assert_int_equal(gpum_pool_free(pool, s), 0);
  gpum_pool_destroy(pool);
  assert_int_equal(nvml_usage(0), 0);
  g.cu->cuStreamDestroy_v2(a);
  g.cu->cuStreamDestroy_v2(b);
  gpum_pool_source_destroy(src);
}

struct oom_arg {
  gpum_devptr_t victim;
  int calls;
};

/* An OOM callback that frees one block (another part of the program giving memory back). */
static bool free_victim(gpum_pool_t *pool, size_t requested, void *arg) {
  struct oom_arg *o = arg;
  o->calls++;
  if (!o->victim || requested != 200 * MiB)
    return false;
  assert_int_equal(gpum_pool_free(pool, o->victim), 0);
  o->victim = 0;
  return true;
}

static void test_pool_oom_ladder(void **state) {
  (void)state;
  gpum_pool_source_t *src = open_source("cuda");
  gpum_pool_t *pool = new_pool(src, false, 0);
  gpum_devptr_t p, q, r;
  /* 600 MiB cached; 700 MiB more does not fit in 768 MiB until the ladder frees the cache. */
  assert_int_equal(gpum_pool_alloc(pool, 600 * MiB, 0, &p), 0);
  assert_int_equal(gpum_pool_free(pool, p), 0);
  assert_int_equal(nvml_usage(0), 600 * MiB);
  assert_int_equal(gpum_pool_alloc(pool, 700 * MiB, 0, &q), 0);
  assert_int_equal(nvml_usage(0), 700 * MiB);
  gpum_pool_stats_t st;
  assert_int_equal(gpum_pool_stats(pool, &st), 0);
  assert_int_equal(st.num_alloc_retries, 1);
  assert_int_equal(st.num_ooms, 0);
  /* The device (the simulator) is out of memory and nothing is cached: GPUM_EDEVOOM with the
   * pool's whole message, the device's figures from cuMemGetInfo_v2. */
  assert_int_equal(gpum_pool_alloc(pool, 200 * MiB, 0, &r), GPUM_EDEVOOM);
  assert_string_equal(gpum_last_error(),
                      "out of device memory on GPU 0 (pool 'srctest'): tried to allocate 200.00 "
                      "MiB; device total 1.00 GiB, free 68.00 MiB; this pool holds 700.00 MiB "
                      "reserved, of which 700.00 MiB allocated and 0 B cached (largest cached "
                      "block 0 B, fragmentation 0%)");
  assert_int_equal(gpum_pool_stats(pool, &st), 0);
  assert_int_equal(st.num_ooms, 1);
  assert_int_equal(nvml_usage(0), 700 * MiB);
  /* A callback frees q and asks for a retry, which succeeds. */
  struct oom_arg arg = {.victim = q};
  assert_int_equal(gpum_pool_add_oom_callback(pool, free_victim, &arg), 0);
  assert_int_equal(gpum_pool_alloc(pool, 200 * MiB, 0, &r), 0);
  assert_int_equal(arg.calls, 1);
  assert_true(r >= q && r + 200 * MiB <= q + 700 * MiB); /* q's cached block, split */
  assert_int_equal(gpum_pool_stats(pool, &st), 0);
  assert_int_equal(st.num_ooms, 1);
  assert_int_equal(nvml_usage(0), st.reserved_bytes.current);
  assert_int_equal(gpum_pool_free(pool, r), 0);
  gpum_pool_destroy(pool);
  assert_int_equal(nvml_usage(0), 0);
  gpum_pool_source_destroy(src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cuda_alloc_free),
      cmocka_unit_test(test_cuda_second_device_and_oom),
      cmocka_unit_test(test_bad_device),
      cmocka_unit_test(test_no_driver),
      cmocka_unit_test(test_events_and_stream_hold),
      cmocka_unit_test(test_context_handling),
      cmocka_unit_test(test_vmm_map_unmap),
      cmocka_unit_test(test_vmm_plain_segments_and_oom),
      cmocka_unit_test(test_vmm_unsupported),
      cmocka_unit_test(test_pinned),
      cmocka_unit_test(test_pool_trim_cuda),
      cmocka_unit_test(test_pool_trim_cuda_vmm),
      cmocka_unit_test(test_pool_stream_reuse),
      cmocka_unit_test(test_pool_oom_ladder),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
