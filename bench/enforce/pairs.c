/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/enforce: cuMemAlloc_v2 + cuMemFree_v2 pairs per second on the simulated driver, with T
 * threads, for run.sh to time with and without the shim preloaded. Links the simulated driver
 * as a program links libcuda.so.1, so that the shim sees its calls.
 *   pairs THREADS PAIRS_PER_THREAD SIZE_BYTES  ->  "pairs_per_s=N"
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cuda_abi.h"

CUresult cuInit(unsigned int Flags);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemFree_v2(CUdeviceptr dptr);

static unsigned long pairs;
static size_t size;

static void *run(void *arg) {
  (void)arg;
  CUcontext c;
  if (cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c))
    abort();
  for (unsigned long i = 0; i < pairs; i++) {
    CUdeviceptr p;
    if (cuMemAlloc_v2(&p, size) != CUDA_SUCCESS || cuMemFree_v2(p) != CUDA_SUCCESS)
      abort();
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 4)
    return 2;
  unsigned t = (unsigned)strtoul(argv[1], NULL, 10);
  pairs = strtoul(argv[2], NULL, 10);
  size = strtoul(argv[3], NULL, 10);
  if (cuInit(0) || t == 0 || t > 64)
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
