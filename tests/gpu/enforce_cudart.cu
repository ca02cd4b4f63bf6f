// SPDX-License-Identifier: Apache-2.0
// The enforcement shim on a real GPU, through the CUDA runtime (which reaches the driver with
// cuGetProcAddress): run by tests/gpu/run.sh under libgpum_enforce.so with GPUM_MEM_LIMIT=LIMIT.
// Checks that cudaMemGetInfo reports LIMIT as the total, and that cudaMalloc, cudaMallocAsync
// and cudaMallocManaged each stop at LIMIT (to the 2 MiB granule) with cudaErrorMemoryAllocation
// and give everything back. Prints "ok" and exits 0, else says what failed and exits 1.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

static int fails;
#define CHECK(c, ...)                     \
  do {                                    \
    if (!(c)) {                           \
      fprintf(stderr, "FAIL: " __VA_ARGS__); \
      fputc('\n', stderr);                \
      fails++;                            \
    }                                     \
  } while (0)

enum { PLAIN, ASYNC, MANAGED };

static size_t fill(int kind, size_t step, size_t limit) {
  void *p[4096];
  size_t n = 0;
  cudaError_t e = cudaSuccess;
  while (n < 4096 && (n + 1) * step <= 2 * limit) {
    e = kind == PLAIN   ? cudaMalloc(&p[n], step)
        : kind == ASYNC ? cudaMallocAsync(&p[n], step, 0)
                        : cudaMallocManaged(&p[n], step, cudaMemAttachGlobal);
    if (e != cudaSuccess)
      break;
    n++;
  }
  CHECK(e == cudaErrorMemoryAllocation, "kind %d: stopped with %s, not cudaErrorMemoryAllocation",
        kind, cudaGetErrorName(e));
  cudaGetLastError();
  for (size_t i = 0; i < n; i++)
    kind == ASYNC ? cudaFreeAsync(p[i], 0) : cudaFree(p[i]);
  cudaDeviceSynchronize();
  return n * step;
}

int main(int argc, char **argv) {
  size_t limit = argc > 1 ? strtoull(argv[1], NULL, 10) : (1ull << 30), step = 64ull << 20;
  size_t free_b = 0, total = 0;
  CHECK(cudaMemGetInfo(&free_b, &total) == cudaSuccess, "cudaMemGetInfo");
  CHECK(total == limit, "cudaMemGetInfo total %zu, expected %zu", total, limit);
  size_t base = limit - free_b; // the context and anything the runtime took at start
  for (int kind = PLAIN; kind <= MANAGED; kind++) {
    size_t got = fill(kind, step, limit);
    CHECK(got + base <= limit && got + base + step > limit,
          "kind %d: allocated %zu with %zu in use before, limit %zu", kind, got, base, limit);
  }
  CHECK(cudaMemGetInfo(&free_b, &total) == cudaSuccess && limit - free_b == base,
        "not everything was given back: %zu free of %zu", free_b, total);
  if (fails)
    return 1;
  printf("ok\n");
  return 0;
}
