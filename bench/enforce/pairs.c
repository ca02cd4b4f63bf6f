/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/enforce: cuMemAlloc_v2 + cuMemFree_v2 pairs per second on the simulated driver, with T
 * threads, for run.sh to time with and without the shim preloaded. Links the simulated driver
 * as a program links libcuda.so.1, so that the shim sees its calls.
 *   pairs THREADS PAIRS_PER_THREAD SIZE_BYTES [dlsym]  ->  "pairs_per_s=N"
 * With "dlsym" every entry point comes from dlopen("libcuda.so.1") + dlsym, as the CUDA runtime
 * reaches the driver (the only way HAMi-core's libvgpu.so intercepts); run.sh puts a
 * libcuda.so.1 that is the simulated driver on the loader's path.
 *   pairs check LIMIT_BYTES dlsym  ->  exit 0 when an allocation of LIMIT + 2 MiB is refused
 */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cuda_abi.h"

CUresult cuInit(unsigned int Flags);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemFree_v2(CUdeviceptr dptr);

static gpum_cuInit_fn p_init = cuInit;
static gpum_cuDevicePrimaryCtxRetain_fn p_retain = cuDevicePrimaryCtxRetain;
static gpum_cuCtxSetCurrent_fn p_set = cuCtxSetCurrent;
static gpum_cuMemAlloc_v2_fn p_alloc = cuMemAlloc_v2;
static gpum_cuMemFree_v2_fn p_free = cuMemFree_v2;

static void by_dlsym(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h)
    abort();
  void *f;
#define GET(var, name)       \
  if (!(f = dlsym(h, name))) \
    abort();                 \
  memcpy(&var, &f, sizeof var);
  GET(p_init, "cuInit")
  GET(p_retain, "cuDevicePrimaryCtxRetain")
  GET(p_set, "cuCtxSetCurrent")
  GET(p_alloc, "cuMemAlloc_v2")
  GET(p_free, "cuMemFree_v2")
#undef GET
}

static unsigned long pairs;
static size_t size;

static void *run(void *arg) {
  (void)arg;
  CUcontext c;
  if (p_retain(&c, 0) || p_set(c))
    abort();
  for (unsigned long i = 0; i < pairs; i++) {
    CUdeviceptr p;
    if (p_alloc(&p, size) != CUDA_SUCCESS || p_free(p) != CUDA_SUCCESS)
      abort();
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 4 && argc != 5)
    return 2;
  if (argc == 5 && !strcmp(argv[4], "dlsym"))
    by_dlsym();
  if (!strcmp(argv[1], "check")) { /* is the limit enforced on this path? */
    CUcontext c;
    CUdeviceptr p;
    if (p_init(0) || p_retain(&c, 0) || p_set(c))
      return 1;
    return p_alloc(&p, strtoul(argv[2], NULL, 10) + (2u << 20)) == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 1;
  }
  unsigned t = (unsigned)strtoul(argv[1], NULL, 10);
  pairs = strtoul(argv[2], NULL, 10);
  size = strtoul(argv[3], NULL, 10);
  if (p_init(0) || t == 0 || t > 64)
    return 1;
  pthread_t th[64];
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (unsigned i = 0; i < t; i++)
    pthread_create(&th[i], NULL, run, NULL);
  for (unsigned i = 0; i < t; i++)
    pthread_join(th[i], NULL);
  clock_gettime(CLOCK_MONOTONIC, &b);
  double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
  printf("pairs_per_s=%.0f\n", (double)pairs * t / s);
  return 0;
}
