/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/sim's driver: the per-operation cost of the simulated driver's memory calls with a
 * given number of live allocations in the calling process, on a node started by run.sh.
 *
 *   sim_scale vmm LIVE PAIRS   cuMemRelease of a random live 2 MiB handle + cuMemCreate of a new
 *                              one, LIVE handles spread over every device
 *   sim_scale mem LIVE PAIRS   cuMemFree_v2 of a random live 64 KiB allocation + cuMemAlloc_v2
 *                              of a new one, on device 0
 *   sim_scale nvml LIVE CALLS  nvmlDeviceGetMemoryInfo_v2 on device 0, LIVE handles held
 *   sim_scale malloc LIVE PAIRS  the baseline: free of a random live 64-byte malloc block +
 *                              malloc of a new one (the same access pattern, no driver)
 *
 *   ... WINDOW                 the victims are drawn from WINDOW of the LIVE allocations only
 *
 * It fills up to LIVE first (not timed), then times 11 batches of PAIRS operations and prints
 * "ns_per_op=X" for the median batch. With 300,000 live allocations and random victims, every
 * pair touches memory that is not in the CPU's caches (the driver's bookkeeping, and the
 * benchmark's own array); with a window of 1,000 victims the tables are as large but the
 * working set is small, which separates what the algorithm costs from cache misses. The library
 * comes from $GPUM_SIM_LIBRARY (dlopen, as a program loads libcuda.so.1), the node from
 * $GPUM_SIM_NODE.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_abi.h"
#include "nvml_abi.h"

#define NVML_PTR(ret, name, params) static gpum_##name##_fn p_##name;
GPUM_NVML_FUNCS(NVML_PTR)
#define CU_PTR(name, params) static gpum_##name##_fn p_##name;
GPUM_CUDA_FUNCS(CU_PTR)

#define BATCHES 11
#define GRAN (2ull << 20)

static void die(const char *what, int code) {
  fprintf(stderr, "sim_scale: %s failed (%d)\n", what, code);
  exit(1);
}

static void load(void) {
  const char *path = getenv("GPUM_SIM_LIBRARY");
  void *dl = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
  if (!dl) {
    fprintf(stderr, "sim_scale: cannot load $GPUM_SIM_LIBRARY (%s)\n", path ? dlerror() : "unset");
    exit(1);
  }
#define LOAD(name)                     \
  do {                                 \
    void *s_ = dlsym(dl, #name);       \
    memcpy(&p_##name, &s_, sizeof s_); \
  } while (0);
#define NVML_LOAD(ret, name, params) LOAD(name)
#define CU_LOAD(name, params) LOAD(name)
  GPUM_NVML_FUNCS(NVML_LOAD)
  GPUM_CUDA_FUNCS(CU_LOAD)
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static size_t pick(size_t n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (size_t)(rng % n);
}

static int ndev;
static unsigned long long *live; /* handles or device pointers */
static int *live_dev;

static void vmm_new(size_t i, int dev) {
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev}};
  CUmemGenericAllocationHandle h;
  CUresult r = p_cuMemCreate(&h, GRAN, &prop, 0);
  if (r != CUDA_SUCCESS)
    die("cuMemCreate", r);
  live[i] = h;
  live_dev[i] = dev;
}

static void mem_new(size_t i) {
  CUdeviceptr d;
  CUresult r = p_cuMemAlloc_v2(&d, 64 << 10);
  if (r != CUDA_SUCCESS)
    die("cuMemAlloc_v2", r);
  live[i] = d;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void report(const char *mode, size_t nlive, size_t window, uint64_t *batch) {
  qsort(batch, BATCHES, sizeof batch[0], cmp_u64);
  printf("mode=%s live=%zu window=%zu ns_per_op=%llu\n", mode, nlive, window,
         (unsigned long long)batch[BATCHES / 2]);
}

static int bench_malloc(size_t nlive, size_t ops, size_t window) {
  void **blocks = calloc(nlive ? nlive : 1, sizeof *blocks);
  uint64_t batch[BATCHES];
  if (!blocks)
    die("calloc", 0);
  for (size_t i = 0; i < nlive; i++)
    if (!(blocks[i] = malloc(64)))
      die("malloc", 0);
  for (int b = 0; b < BATCHES; b++) {
    uint64_t t0 = now_ns();
    for (size_t k = 0; k < ops; k++) {
      size_t v = pick(window);
      free(blocks[v]);
      if (!(blocks[v] = malloc(64)))
        die("malloc", 0);
    }
    batch[b] = (now_ns() - t0) / (ops ? ops : 1);
  }
  report("malloc", nlive, window, batch);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: sim_scale vmm|mem|nvml|malloc LIVE OPS [WINDOW]\n");
    return 2;
  }
  const char *mode = argv[1];
  size_t nlive = strtoull(argv[2], NULL, 10), ops = strtoull(argv[3], NULL, 10);
  size_t window = argc == 5 ? strtoull(argv[4], NULL, 10) : nlive;
  if (window == 0 || window > nlive)
    window = nlive;
  if (!strcmp(mode, "malloc"))
    return bench_malloc(nlive, ops, window);
  load();
  CUresult r;
  nvmlReturn_t nr;
  if ((r = p_cuInit(0)) != CUDA_SUCCESS)
    die("cuInit", r);
  if ((nr = p_nvmlInit_v2()) != NVML_SUCCESS)
    die("nvmlInit_v2", nr);
  if ((r = p_cuDeviceGetCount(&ndev)) != CUDA_SUCCESS)
    die("cuDeviceGetCount", r);
  CUcontext ctx;
  if ((r = p_cuDevicePrimaryCtxRetain(&ctx, 0)) != CUDA_SUCCESS ||
      (r = p_cuCtxSetCurrent(ctx)) != CUDA_SUCCESS)
    die("context", r);
  live = calloc(nlive ? nlive : 1, sizeof *live);
  live_dev = calloc(nlive ? nlive : 1, sizeof *live_dev);
  if (!live || !live_dev)
    die("calloc", 0);
  bool mem = !strcmp(mode, "mem");
  for (size_t i = 0; i < nlive; i++) {
    if (mem)
      mem_new(i);
    else
      vmm_new(i, (int)(i % (size_t)ndev));
  }
  nvmlDevice_t dev0;
  if ((nr = p_nvmlDeviceGetHandleByIndex_v2(0, &dev0)) != NVML_SUCCESS)
    die("nvmlDeviceGetHandleByIndex_v2", nr);
  uint64_t batch[BATCHES];
  for (int b = 0; b < BATCHES; b++) {
    uint64_t t0 = now_ns();
    for (size_t k = 0; k < ops; k++) {
      if (!strcmp(mode, "nvml")) {
        nvmlMemory_v2_t m = {.version = nvmlMemory_v2};
        if ((nr = p_nvmlDeviceGetMemoryInfo_v2(dev0, &m)) != NVML_SUCCESS)
          die("nvmlDeviceGetMemoryInfo_v2", nr);
        continue;
      }
      size_t v = pick(window);
      if (mem) {
        if ((r = p_cuMemFree_v2(live[v])) != CUDA_SUCCESS)
          die("cuMemFree_v2", r);
        mem_new(v);
      } else {
        if ((r = p_cuMemRelease(live[v])) != CUDA_SUCCESS)
          die("cuMemRelease", r);
        vmm_new(v, live_dev[v]);
      }
    }
    batch[b] = (now_ns() - t0) / (ops ? ops : 1);
  }
  report(mode, nlive, window, batch);
  return 0;
}
