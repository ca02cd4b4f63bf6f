// SPDX-License-Identifier: Apache-2.0
// The enforcement shim on a real GPU, through the CUDA runtime (which reaches the driver with
// cuGetProcAddress). Built with nvcc (static cudart: it needs only the driver's libcuda.so.1) by
// scripts/device-bundle.sh or by the device check itself. Five modes:
//
//   enforce_cudart LIMIT       run under libgpum_enforce.so with GPUM_MEM_LIMIT=LIMIT: checks
//                              that cudaMemGetInfo reports LIMIT as the total; that cudaMalloc,
//                              cudaMallocAsync and cudaMallocManaged each stop at LIMIT (to the
//                              allocation step) with cudaErrorMemoryAllocation and give it all
//                              back; and that cuMemCreate (virtual memory, as PyTorch's
//                              expandable segments use it), reached both through
//                              cudaGetDriverEntryPointByVersion and through dlopen + dlsym of
//                              libcuda.so.1, stops there with CUDA_ERROR_OUT_OF_MEMORY. Prints
//                              "ok" and exits 0, else says what failed and exits 1.
//   enforce_cudart bench PAIRS SIZE
//                              times PAIRS cudaMalloc(SIZE) + cudaFree pairs (after a warm-up)
//                              and prints "ns_per_pair N": run with and without the shim to
//                              measure what it adds.
//   enforce_cudart hold BYTES  allocates BYTES with cudaMalloc, writes them, prints "ready PID"
//                              and holds them until its standard input closes (a process with a
//                              known footprint for the device layer's per-process memory).
//   enforce_cudart pattern BYTES
//                              allocates BYTES, fills them with a pattern that depends on each
//                              word's index, prints "ready PID", then for each line "step" on its
//                              standard input checks every word on the GPU (a kernel counts the
//                              words that differ), adds 1 to every word (it goes on computing)
//                              and prints "ok GEN" or "bad GEN MISMATCHES"; the target of the
//                              checkpoint check, suspended and resumed between two steps.
//   enforce_cudart bw BYTES    copies BYTES device->host and host->device, through pinned and
//                              through pageable host memory, and prints the bandwidths
//                              ("d2h_pinned_gbs X" ...): the floor for a suspend and a resume.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fails;
#define CHECK(c, ...)                        \
  do {                                       \
    if (!(c)) {                              \
      fprintf(stderr, "FAIL: " __VA_ARGS__); \
      fputc('\n', stderr);                   \
      fails++;                               \
    }                                        \
  } while (0)

enum { PLAIN, ASYNC, MANAGED };
static const char *kind_name[] = {"cudaMalloc", "cudaMallocAsync", "cudaMallocManaged"};

static size_t fill(int kind, size_t step, size_t limit) {
  void *p[4096];
  size_t n = 0;
  cudaError_t e = cudaSuccess;
  // Never more than twice the limit: managed memory past what the card has can hang it.
  while (n < 4096 && (n + 1) * step <= 2 * limit) {
    e = kind == PLAIN   ? cudaMalloc(&p[n], step)
        : kind == ASYNC ? cudaMallocAsync(&p[n], step, 0)
                        : cudaMallocManaged(&p[n], step, cudaMemAttachGlobal);
    if (e != cudaSuccess)
      break;
    n++;
  }
  CHECK(e == cudaErrorMemoryAllocation, "%s: stopped with %s, not cudaErrorMemoryAllocation",
        kind_name[kind], cudaGetErrorName(e));
  cudaGetLastError();
  for (size_t i = 0; i < n; i++)
    kind == ASYNC ? cudaFreeAsync(p[i], 0) : cudaFree(p[i]);
  cudaDeviceSynchronize();
  return n * step;
}

typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*gran_fn)(size_t *, const CUmemAllocationProp *,
                            CUmemAllocationGranularity_flags);

// Creates physical allocations of step bytes until the driver (or the shim) refuses; returns
// what was created. via names how the entry points were found.
static size_t fill_vmm(const char *via, create_fn create, release_fn release, gran_fn gran,
                       size_t limit, size_t *step_out) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  int dev = 0;
  cudaGetDevice(&dev);
  prop.location.id = dev;
  size_t g = 0;
  CHECK(gran(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) == CUDA_SUCCESS && g,
        "%s: cuMemGetAllocationGranularity", via);
  if (!g)
    return 0;
  size_t step = (64ull << 20) / g * g;
  if (!step)
    step = g;
  *step_out = step;
  CUmemGenericAllocationHandle h[4096];
  size_t n = 0;
  CUresult r = CUDA_SUCCESS;
  while (n < 4096 && (n + 1) * step <= 2 * limit) {
    r = create(&h[n], step, &prop, 0);
    if (r != CUDA_SUCCESS)
      break;
    n++;
  }
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "%s: cuMemCreate stopped with CUresult %d, not "
        "CUDA_ERROR_OUT_OF_MEMORY (2)", via, (int)r);
  for (size_t i = 0; i < n; i++)
    CHECK(release(h[i]) == CUDA_SUCCESS, "%s: cuMemRelease", via);
  return n * step;
}

static void check_vmm(size_t limit, size_t base) {
  void *c = NULL, *rl = NULL, *gr = NULL;
  cudaDriverEntryPointQueryResult q;
  int ok = cudaGetDriverEntryPointByVersion("cuMemCreate", &c, 10020, cudaEnableDefault, &q) ==
               cudaSuccess &&
           cudaGetDriverEntryPointByVersion("cuMemRelease", &rl, 10020, cudaEnableDefault, &q) ==
               cudaSuccess &&
           cudaGetDriverEntryPointByVersion("cuMemGetAllocationGranularity", &gr, 10020,
                                            cudaEnableDefault, &q) == cudaSuccess;
  CHECK(ok && c && rl && gr, "cudaGetDriverEntryPointByVersion(cuMemCreate...) failed");
  size_t step = 0;
  if (ok && c && rl && gr) {
    size_t got = fill_vmm("cudaGetDriverEntryPointByVersion", (create_fn)c, (release_fn)rl,
                          (gran_fn)gr, limit, &step);
    CHECK(got + base <= limit && got + base + step > limit,
          "cuMemCreate (entry point): created %zu with %zu in use before, limit %zu", got, base,
          limit);
    printf("vmm_entry_point_bytes %zu\n", got);
  }
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  CHECK(lib, "dlopen(libcuda.so.1): %s", dlerror());
  if (!lib)
    return;
  c = dlsym(lib, "cuMemCreate");
  rl = dlsym(lib, "cuMemRelease");
  gr = dlsym(lib, "cuMemGetAllocationGranularity");
  CHECK(c && rl && gr, "dlsym(libcuda.so.1, cuMemCreate...)");
  if (c && rl && gr) {
    size_t got = fill_vmm("dlsym", (create_fn)c, (release_fn)rl, (gran_fn)gr, limit, &step);
    CHECK(got + base <= limit && got + base + step > limit,
          "cuMemCreate (dlsym): created %zu with %zu in use before, limit %zu", got, base, limit);
    printf("vmm_dlsym_bytes %zu\n", got);
  }
}

static int fence(size_t limit) {
  size_t step = 64ull << 20;
  size_t free_b = 0, total = 0;
  CHECK(cudaMemGetInfo(&free_b, &total) == cudaSuccess, "cudaMemGetInfo");
  CHECK(total == limit, "cudaMemGetInfo total %zu, expected %zu", total, limit);
  size_t base = limit - free_b; // what the fence counted before: nothing for a new process
  printf("base_bytes %zu\n", base);
  for (int kind = PLAIN; kind <= MANAGED; kind++) {
    size_t got = fill(kind, step, limit);
    printf("%s_bytes %zu\n", kind_name[kind], got);
    CHECK(got + base <= limit && got + base + step > limit,
          "%s: allocated %zu with %zu in use before, limit %zu", kind_name[kind], got, base,
          limit);
  }
  check_vmm(limit, base);
  CHECK(cudaMemGetInfo(&free_b, &total) == cudaSuccess && limit - free_b == base,
        "not everything was given back: %zu free of %zu", free_b, total);
  if (fails)
    return 1;
  printf("ok\n");
  return 0;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int bench(long pairs, size_t size) {
  void *p;
  for (int i = 0; i < 100; i++) { // warm-up: context, the driver's first allocations
    if (cudaMalloc(&p, size) != cudaSuccess || cudaFree(p) != cudaSuccess) {
      fprintf(stderr, "FAIL: cudaMalloc/cudaFree of %zu bytes\n", size);
      return 1;
    }
  }
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) {
    if (cudaMalloc(&p, size) != cudaSuccess || cudaFree(p) != cudaSuccess) {
      fprintf(stderr, "FAIL: cudaMalloc/cudaFree of %zu bytes\n", size);
      return 1;
    }
  }
  printf("ns_per_pair %.1f\n", (now_ns() - t0) / pairs);
  return 0;
}

static int hold(size_t bytes) {
  void *p;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess || cudaMemset(p, 0x5a, bytes) != cudaSuccess ||
      cudaDeviceSynchronize() != cudaSuccess) {
    fprintf(stderr, "FAIL: cudaMalloc + cudaMemset of %zu bytes: %s\n", bytes,
            cudaGetErrorName(e));
    return 1;
  }
  printf("ready %ld\n", (long)getpid());
  fflush(stdout);
  char buf[64];
  while (read(0, buf, sizeof buf) > 0) {
  }
  cudaFree(p);
  return 0;
}

__device__ __forceinline__ unsigned expected(size_t i, unsigned gen) {
  return ((unsigned)(i * 2654435761u) ^ 0x5a5a5a5au) + gen;
}

__global__ void pattern_fill(unsigned *w, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    w[i] = expected(i, 0);
}

// Counts the words that differ from generation gen, then moves every word to gen + 1.
__global__ void pattern_step(unsigned *w, size_t n, unsigned gen, unsigned long long *bad) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    mine += w[i] != expected(i, gen);
    w[i] += 1;
  }
  if (mine)
    atomicAdd(bad, mine);
}

static int pattern(size_t bytes) {
  unsigned *w;
  unsigned long long *bad;
  size_t n = bytes / sizeof *w;
  if (cudaMalloc(&w, bytes) != cudaSuccess || cudaMalloc(&bad, sizeof *bad) != cudaSuccess) {
    fprintf(stderr, "FAIL: cudaMalloc of %zu bytes\n", bytes);
    return 1;
  }
  pattern_fill<<<1024, 256>>>(w, n);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    fprintf(stderr, "FAIL: filling %zu bytes\n", bytes);
    return 1;
  }
  printf("ready %ld\n", (long)getpid());
  fflush(stdout);
  char line[64];
  unsigned gen = 0;
  while (fgets(line, sizeof line, stdin)) {
    if (strncmp(line, "step", 4))
      continue;
    unsigned long long mismatches = 0;
    cudaError_t e = cudaMemset(bad, 0, sizeof *bad);
    if (e == cudaSuccess) {
      pattern_step<<<1024, 256>>>(w, n, gen, bad);
      e = cudaMemcpy(&mismatches, bad, sizeof mismatches, cudaMemcpyDeviceToHost);
    }
    if (e != cudaSuccess)
      printf("bad %u error %s\n", gen, cudaGetErrorName(e));
    else if (mismatches)
      printf("bad %u %llu\n", gen, mismatches);
    else
      printf("ok %u\n", gen);
    fflush(stdout);
    gen++;
  }
  cudaFree(bad);
  cudaFree(w);
  return 0;
}

static double copy_gbs(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
  cudaMemcpy(dst, src, bytes < (64u << 20) ? bytes : (64u << 20), kind);  // warm-up
  double t0 = now_ns();
  if (cudaMemcpy(dst, src, bytes, kind) != cudaSuccess)
    return -1;
  return bytes / (now_ns() - t0);  // bytes per ns = GB/s
}

static int bw(size_t bytes) {
  void *d, *pinned, *pageable = malloc(bytes);
  if (!pageable || cudaMalloc(&d, bytes) != cudaSuccess ||
      cudaMallocHost(&pinned, bytes) != cudaSuccess) {
    fprintf(stderr, "FAIL: %zu bytes on the device, pinned and pageable\n", bytes);
    return 1;
  }
  memset(pageable, 1, bytes);
  memset(pinned, 1, bytes);
  printf("d2h_pinned_gbs %.2f\n", copy_gbs(pinned, d, bytes, cudaMemcpyDeviceToHost));
  printf("h2d_pinned_gbs %.2f\n", copy_gbs(d, pinned, bytes, cudaMemcpyHostToDevice));
  printf("d2h_pageable_gbs %.2f\n", copy_gbs(pageable, d, bytes, cudaMemcpyDeviceToHost));
  printf("h2d_pageable_gbs %.2f\n", copy_gbs(d, pageable, bytes, cudaMemcpyHostToDevice));
  double t0 = now_ns();
  memcpy(pinned, pageable, bytes);
  printf("host_memcpy_gbs %.2f\n", bytes / (now_ns() - t0));
  cudaFreeHost(pinned);
  cudaFree(d);
  free(pageable);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "pattern"))
    return pattern(strtoull(argv[2], NULL, 10));
  if (argc == 3 && !strcmp(argv[1], "bw"))
    return bw(strtoull(argv[2], NULL, 10));
  if (argc == 4 && !strcmp(argv[1], "bench"))
    return bench(strtol(argv[2], NULL, 10), strtoull(argv[3], NULL, 10));
  if (argc == 3 && !strcmp(argv[1], "hold"))
    return hold(strtoull(argv[2], NULL, 10));
  if (argc == 2)
    return fence(strtoull(argv[1], NULL, 10));
  fprintf(stderr, "usage: enforce_cudart LIMIT | bench PAIRS SIZE | hold BYTES | pattern BYTES | bw BYTES\n");
  return 2;
}
