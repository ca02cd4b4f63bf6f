/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A CUDA program for the enforcement tests (test_enforce.sh). It links the simulated driver as
 * a program links libcuda.so.1 (links-the-simulated-driver: tests/CMakeLists.txt), so that the
 * shim preloaded before it sees direct calls, and reaches the driver every other way too.
 *
 *   enforce_probe fill STEP MAX        for each way in, allocates STEP-byte blocks until the
 *                                      driver refuses (or MAX bytes), frees them, and prints
 *                                      "WAY BYTES CODE" per way
 *   enforce_probe info                 prints what the program is told of memory
 *   enforce_probe try BYTES            one cuMemAlloc: exit 0 when it succeeds, 3 on
 *                                      CUDA_ERROR_OUT_OF_MEMORY, 1 otherwise
 *   enforce_probe hold BYTES FILE      allocates BYTES, writes FILE, then waits to be killed
 *   enforce_probe exec BYTES -- CMD..  allocates BYTES, runs CMD (which inherits the fence),
 *                                      frees, and exits with CMD's status
 *   enforce_probe threads N ROUNDS LIMIT
 *                                      N threads allocate and free at random; fails if what
 *                                      they hold together ever passes LIMIT, or if the job's
 *                                      memory is not all free at the end
 *   enforce_probe fork BYTES           a child after fork allocates BYTES too: exit as try
 *                                      (CUDA is not fork-safe: the real driver and the
 *                                      simulator refuse the child, CUDA_ERROR_NOT_INITIALIZED,
 *                                      exit 1)
 *   enforce_probe fillhold STEP MAX FILE [READY GATE]
 *                                      allocates STEP-byte blocks until refused (or MAX),
 *                                      writes the bytes held to FILE, waits to be killed;
 *                                      with READY and GATE, first writes READY and waits for
 *                                      GATE to exist (jobs that must all be running before
 *                                      any of them allocates)
 *   enforce_probe used WAY...          prints "pid PID", then makes each call WAY names once
 *                                      and prints "WAY CODE": managed (cuMemAllocManaged,
 *                                      linked), managed-getproc (the same through
 *                                      cuGetProcAddress_v2, as the runtime's
 *                                      cudaMallocManaged), ipc-get (cuIpcGetMemHandle of a
 *                                      cuMemAlloc through cuGetProcAddress_v2), ipc-open-self
 *                                      (cuIpcOpenMemHandle_v2 of this process's own handle),
 *                                      ipc-open-bad (of a handle of zeroes), ipc-open-peer (of
 *                                      a handle of 64 'P' bytes), export, import, pool-export,
 *                                      pool-import (the shareable-handle calls: descriptor 42
 *                                      for the imports); a call that succeeds must answer what
 *                                      preload/ipc_peer.c answers (pointer 0x5ee0000,
 *                                      descriptor 42, handle or pool 0xabc)
 *   enforce_probe shrink BYTES BASE FILE1 FILE2
 *                                      allocates BYTES in 256 MiB blocks, frees them, writes
 *                                      FILE1; then allocates and frees 2 MiB every 20 ms until
 *                                      cuMemGetInfo's total is BASE (the reservation shrank
 *                                      back), writes FILE2 and waits to be killed
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda_abi.h"
#include "nvml_abi.h"
#include "prog_fail.h"

/* The linked entry points (libgpum_sim.so, standing for libcuda.so.1). */
#define DECL(name, params) CUresult name params;
GPUM_CUDA_FUNCS(DECL)
#define DECL_OTHER(name, pfn, params) CUresult name params;
GPUM_CUDA_FUNCS_OTHER(DECL_OTHER)
#define NVML_DECL(ret, name, params) ret name params;
GPUM_NVML_FUNCS(NVML_DECL)

static unsigned long long num(const char *s) {
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end == 'G')
    v <<= 30;
  else if (*end == 'M')
    v <<= 20;
  else if (*end)
    fail("bad size %s", s);
  return v;
}

static void ctx(void) {
  CUcontext c;
  if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&c, 0) != CUDA_SUCCESS ||
      cuCtxSetCurrent(c) != CUDA_SUCCESS)
    fail("no CUDA context on device 0");
}

typedef CUresult (*alloc_fn)(CUdeviceptr *p, size_t n, void *arg);
typedef CUresult (*free_fn)(CUdeviceptr p, void *arg);

static gpum_cuMemAlloc_v2_fn way_alloc;
static gpum_cuMemFree_v2_fn way_free;
static CUresult a_plain(CUdeviceptr *p, size_t n, void *arg) {
  (void)arg;
  return way_alloc(p, n);
}
static CUresult f_plain(CUdeviceptr p, void *arg) {
  (void)arg;
  return way_free(p);
}
static gpum_cuMemAllocAsync_fn way_async;
static gpum_cuMemFreeAsync_fn way_free_async;
static CUresult a_async(CUdeviceptr *p, size_t n, void *arg) {
  (void)arg;
  return way_async(p, n, NULL);
}
static CUresult f_async(CUdeviceptr p, void *arg) {
  (void)arg;
  return way_free_async(p, NULL);
}
static CUresult a_managed(CUdeviceptr *p, size_t n, void *arg) {
  (void)arg;
  return cuMemAllocManaged(p, n, CU_MEM_ATTACH_GLOBAL);
}
static CUresult a_pitch(CUdeviceptr *p, size_t n, void *arg) {
  (void)arg;
  size_t pitch;
  return cuMemAllocPitch_v2(p, &pitch, 1u << 20, n >> 20, 4);
}
static CUresult a_pool(CUdeviceptr *p, size_t n, void *arg) {
  return cuMemAllocFromPoolAsync(p, n, (CUmemoryPool)arg, NULL);
}
/* cuMemCreate: the "pointer" is the handle. */
static CUresult a_create(CUdeviceptr *p, size_t n, void *arg) {
  (void)arg;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle h;
  CUresult r = cuMemCreate(&h, n, &prop, 0);
  *p = h;
  return r;
}
static CUresult f_release(CUdeviceptr p, void *arg) {
  (void)arg;
  return cuMemRelease(p);
}

#define MAX_BLOCKS 4096

/* Allocates step-byte blocks until refused or max; frees them; prints the way, bytes, code. */
static void fill(const char *way, alloc_fn a, free_fn f, void *arg, size_t step, size_t max) {
  static CUdeviceptr blocks[MAX_BLOCKS];
  size_t n = 0, bytes = 0;
  CUresult r = CUDA_SUCCESS;
  while (bytes + step <= max && n < MAX_BLOCKS) {
    r = a(&blocks[n], step, arg);
    if (r != CUDA_SUCCESS)
      break;
    n++;
    bytes += step;
  }
  for (size_t i = 0; i < n; i++)
    if (f(blocks[i], arg) != CUDA_SUCCESS)
      fail("%s: free of block %zu failed", way, i);
  printf("%s %zu %d\n", way, bytes, (int)r);
}

static void *need(void *p, const char *what) {
  if (!p)
    fail("%s not found", what);
  return p;
}

static void cmd_fill(size_t step, size_t max) {
  ctx();
  /* 1. Linked symbols. */
  way_alloc = cuMemAlloc_v2;
  way_free = cuMemFree_v2;
  fill("linked", a_plain, f_plain, NULL, step, max);
  /* 2. dlopen + dlsym on the driver, as libgpum and cudart's older paths do. */
  void *dl = dlopen(getenv("GPUM_SIM_LIBRARY"), RTLD_NOW | RTLD_LOCAL);
  if (!dl)
    fail("dlopen: %s", dlerror());
  void *p = need(dlsym(dl, "cuMemAlloc_v2"), "dlsym cuMemAlloc_v2");
  memcpy(&way_alloc, &p, sizeof p);
  p = need(dlsym(dl, "cuMemFree_v2"), "dlsym cuMemFree_v2");
  memcpy(&way_free, &p, sizeof p);
  fill("dlsym", a_plain, f_plain, NULL, step, max);
  /* 3. cuGetProcAddress by base name, as cudart 11.3+ and 12.x do (linked here, so that the
   * way is checked on its own, also where the shim does not replace dlsym). */
  gpum_cuGetProcAddress_v2_fn gpa = cuGetProcAddress_v2;
  CUdriverProcAddressQueryResult st;
  if (gpa("cuMemAlloc", (void **)&way_alloc, 12000, 0, &st) != CUDA_SUCCESS ||
      gpa("cuMemFree", (void **)&way_free, 12000, 0, &st) != CUDA_SUCCESS)
    fail("cuGetProcAddress cuMemAlloc/cuMemFree");
  fill("getproc", a_plain, f_plain, NULL, step, max);
  /* 4. cuGetProcAddress asked for cuGetProcAddress (the 11.3 form), then for cuMemAlloc. */
  gpum_cuGetProcAddress_fn gpa1;
  if (gpa("cuGetProcAddress", (void **)&gpa1, 11030, 0, &st) != CUDA_SUCCESS)
    fail("cuGetProcAddress cuGetProcAddress");
  way_alloc = NULL;
  if (gpa1("cuMemAlloc", (void **)&way_alloc, 12000, 0) != CUDA_SUCCESS)
    fail("cuGetProcAddress(cuGetProcAddress) cuMemAlloc");
  fill("getproc-self", a_plain, f_plain, NULL, step, max);
  /* Stream-ordered, per-thread default stream (the _ptsz entry points). */
  if (gpa("cuMemAllocAsync", (void **)&way_async, 12000,
          CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st) != CUDA_SUCCESS ||
      gpa("cuMemFreeAsync", (void **)&way_free_async, 12000,
          CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st) != CUDA_SUCCESS)
    fail("cuGetProcAddress cuMemAllocAsync (ptds)");
  fill("async-ptsz", a_async, f_async, NULL, step, max);
  way_async = cuMemAllocAsync;
  way_free_async = cuMemFreeAsync;
  fill("async", a_async, f_async, NULL, step, max);
  /* The other allocation calls, linked. */
  way_free = cuMemFree_v2;
  fill("managed", a_managed, f_plain, NULL, step, max);
  fill("pitch", a_pitch, f_plain, NULL, step, max);
  CUmemoryPool pool;
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  if (cuMemPoolCreate(&pool, &props) != CUDA_SUCCESS)
    fail("cuMemPoolCreate");
  way_free_async = cuMemFreeAsync;
  fill("pool", a_pool, f_async, pool, step, max);
  cuMemPoolDestroy(pool);
  fill("vmm", a_create, f_release, NULL, step, max);
}

static void cmd_info(void) {
  ctx();
  size_t free = 0, total = 0, dtotal = 0;
  if (cuMemGetInfo_v2(&free, &total) != CUDA_SUCCESS || cuDeviceTotalMem_v2(&dtotal, 0))
    fail("cuMemGetInfo / cuDeviceTotalMem");
  nvmlDevice_t d;
  nvmlMemory_t m1;
  nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
  if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS ||
      nvmlDeviceGetMemoryInfo(d, &m1) != NVML_SUCCESS ||
      nvmlDeviceGetMemoryInfo_v2(d, &m2) != NVML_SUCCESS)
    fail("NVML memory info");
  printf("{\"cu_free\": %zu, \"cu_total\": %zu, \"cu_device_total\": %zu, \"nvml_total\": %llu, "
         "\"nvml_free\": %llu, \"nvml_used\": %llu, \"nvml2_total\": %llu, \"nvml2_free\": %llu, "
         "\"nvml2_used\": %llu}\n",
         free, total, dtotal, m1.total, m1.free, m1.used, m2.total, m2.free, m2.used);
}

static int cmd_try(size_t bytes) {
  ctx();
  CUdeviceptr p;
  CUresult r = cuMemAlloc_v2(&p, bytes);
  if (r == CUDA_SUCCESS) {
    cuMemFree_v2(p);
    return 0;
  }
  return r == CUDA_ERROR_OUT_OF_MEMORY ? 3 : 1;
}

static _Atomic unsigned long long held;
static unsigned long long thr_limit;
static _Atomic int thr_fail;
static unsigned thr_rounds;

static void *thr(void *arg) {
  CUcontext c;
  if (cuDevicePrimaryCtxRetain(&c, 0) != CUDA_SUCCESS || cuCtxSetCurrent(c) != CUDA_SUCCESS) {
    thr_fail = 1;
    return NULL;
  }
  unsigned seed = (unsigned)(uintptr_t)arg;
  CUdeviceptr p[4] = {0};
  size_t sz[4] = {0};
  for (unsigned i = 0; i < thr_rounds; i++) {
    unsigned k = (unsigned)rand_r(&seed) % 4;
    if (p[k]) {
      atomic_fetch_sub(&held, sz[k]);
      if (cuMemFree_v2(p[k]) != CUDA_SUCCESS)
        thr_fail = 2;
      p[k] = 0;
      continue;
    }
    sz[k] = ((size_t)1 + (size_t)rand_r(&seed) % 16) << 20; /* 1-16 MiB: granule multiples */
    CUresult r = cuMemAlloc_v2(&p[k], sz[k]);
    if (r == CUDA_SUCCESS) {
      if (atomic_fetch_add(&held, sz[k]) + sz[k] > thr_limit)
        thr_fail = 3;
    } else if (r != CUDA_ERROR_OUT_OF_MEMORY) {
      thr_fail = 4;
    } else {
      p[k] = 0;
    }
  }
  for (unsigned k = 0; k < 4; k++)
    if (p[k]) {
      atomic_fetch_sub(&held, sz[k]);
      cuMemFree_v2(p[k]);
    }
  return NULL;
}

static int cmd_threads(unsigned n, unsigned rounds, unsigned long long limit) {
  ctx();
  thr_limit = limit;
  thr_rounds = rounds;
  pthread_t t[256];
  if (n > 256)
    fail("at most 256 threads");
  for (uintptr_t i = 0; i < n; i++)
    if (pthread_create(&t[i], NULL, thr, (void *)(i + 1)) != 0)
      fail("pthread_create");
  for (unsigned i = 0; i < n; i++)
    pthread_join(t[i], NULL);
  if (thr_fail)
    fail("threads: failure %d (3: the job held more than its limit)", thr_fail);
  size_t free = 0, total = 0;
  cuMemGetInfo_v2(&free, &total);
  if (free != total)
    fail("threads: %zu of %zu bytes free at the end: the counter did not return to zero", free,
         total);
  printf("threads ok\n");
  return 0;
}

static void write_file(const char *path, unsigned long long v) {
  FILE *f = fopen(path, "w");
  if (!f)
    fail("cannot write %s", path);
  fprintf(f, "%llu\n", v);
  fclose(f);
}

static void __attribute__((noreturn))
cmd_fillhold(size_t step, size_t max, const char *file, const char *ready, const char *gate) {
  ctx();
  if (ready) {
    write_file(ready, 1);
    struct timespec ts = {0, 10 * 1000 * 1000};
    while (access(gate, F_OK) != 0)
      nanosleep(&ts, NULL); /* the test's go: every job is running */
  }
  static CUdeviceptr blocks[MAX_BLOCKS];
  size_t n = 0;
  while ((n + 1) * step <= max && n < MAX_BLOCKS && cuMemAlloc_v2(&blocks[n], step) == CUDA_SUCCESS)
    n++;
  write_file(file, (unsigned long long)(n * step));
  for (;;)
    pause();
}

static void __attribute__((noreturn))
cmd_shrink(size_t bytes, size_t base, const char *f1, const char *f2) {
  ctx();
  static CUdeviceptr blocks[MAX_BLOCKS];
  size_t n = 0, step = 256u << 20;
  while (n * step < bytes && n < MAX_BLOCKS)
    if (cuMemAlloc_v2(&blocks[n++], step) != CUDA_SUCCESS)
      fail("shrink: could not grow to %zu bytes (%zu held)", bytes, (n - 1) * step);
  for (size_t i = 0; i < n; i++)
    cuMemFree_v2(blocks[i]);
  write_file(f1, (unsigned long long)bytes);
  for (;;) {
    size_t free_b = 0, total = 0;
    cuMemGetInfo_v2(&free_b, &total);
    if (total == base)
      break;
    CUdeviceptr p;
    if (cuMemAlloc_v2(&p, 2u << 20) == CUDA_SUCCESS)
      cuMemFree_v2(p);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL); /* polling our own fence for gpumd's pressure event to reach it */
  }
  write_file(f2, (unsigned long long)base);
  for (;;)
    pause();
}

/* The entry point name through cuGetProcAddress_v2, as the CUDA runtime resolves it. */
static void *getproc(const char *name) {
  void *fn = NULL;
  CUdriverProcAddressQueryResult st;
  if (cuGetProcAddress_v2(name, &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS ||
      !fn)
    fail("cuGetProcAddress_v2(%s)", name);
  return fn;
}

static int cmd_used(int n, char **ways) {
  ctx();
  printf("pid %d\n", (int)getpid());
  for (int i = 0; i < n; i++) {
    const char *w = ways[i];
    CUdeviceptr p = 0;
    CUipcMemHandle h;
    memset(&h, 0, sizeof h);
    CUresult r;
    if (!strcmp(w, "managed")) {
      r = cuMemAllocManaged(&p, 2u << 20, CU_MEM_ATTACH_GLOBAL);
      if (r == CUDA_SUCCESS)
        cuMemFree_v2(p);
    } else if (!strcmp(w, "managed-getproc")) {
      gpum_cuMemAllocManaged_fn fn;
      void *sym = getproc("cuMemAllocManaged");
      memcpy(&fn, &sym, sizeof fn);
      r = fn(&p, 2u << 20, CU_MEM_ATTACH_GLOBAL);
      if (r == CUDA_SUCCESS)
        cuMemFree_v2(p);
    } else if (!strcmp(w, "ipc-get") || !strcmp(w, "ipc-open-self")) {
      gpum_cuIpcGetMemHandle_fn fn;
      void *sym = getproc("cuIpcGetMemHandle");
      memcpy(&fn, &sym, sizeof fn);
      if (cuMemAlloc_v2(&p, 2u << 20) != CUDA_SUCCESS)
        fail("used: cuMemAlloc_v2");
      r = fn(&h, p);
      if (r == CUDA_SUCCESS && !strcmp(w, "ipc-open-self")) {
        CUdeviceptr q = 0;
        r = cuIpcOpenMemHandle_v2(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
      }
      cuMemFree_v2(p);
    } else if (!strcmp(w, "ipc-open-bad") || !strcmp(w, "ipc-open-peer")) {
      if (!strcmp(w, "ipc-open-peer"))
        memset(&h, 'P', sizeof h);
      r = cuIpcOpenMemHandle_v2(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
      if (r == CUDA_SUCCESS && p != 0x5ee0000)
        fail("used: %s gave the pointer %#llx", w, (unsigned long long)p);
    } else if (!strcmp(w, "export")) {
      int fd = -1;
      r = cuMemExportToShareableHandle(&fd, 1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      if (r == CUDA_SUCCESS && fd != 42)
        fail("used: export gave descriptor %d", fd);
    } else if (!strcmp(w, "import")) {
      CUmemGenericAllocationHandle g = 0;
      r = cuMemImportFromShareableHandle(&g, (void *)(uintptr_t)42,
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      if (r == CUDA_SUCCESS && g != 0xabc)
        fail("used: import gave the handle %#llx", g);
    } else if (!strcmp(w, "pool-export")) {
      CUmemoryPool pool;
      int fd = -1;
      if (cuDeviceGetDefaultMemPool(&pool, 0) != CUDA_SUCCESS)
        fail("used: no default pool");
      r = cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      if (r == CUDA_SUCCESS && fd != 42)
        fail("used: pool-export gave descriptor %d", fd);
    } else if (!strcmp(w, "pool-import")) {
      CUmemoryPool pool = NULL;
      r = cuMemPoolImportFromShareableHandle(&pool, (void *)(uintptr_t)42,
                                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      if (r == CUDA_SUCCESS && (uintptr_t)pool != 0xabc)
        fail("used: pool-import gave the pool %p", (void *)pool);
    } else {
      fail("used: unknown way %s", w);
    }
    printf("%s %d\n", w, (int)r);
  }
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if ((argc == 5 || argc == 7) && !strcmp(argv[1], "fillhold"))
    cmd_fillhold(num(argv[2]), num(argv[3]), argv[4], argc == 7 ? argv[5] : NULL,
                 argc == 7 ? argv[6] : NULL);
  if (argc == 6 && !strcmp(argv[1], "shrink"))
    cmd_shrink(num(argv[2]), num(argv[3]), argv[4], argv[5]);
  if (argc >= 4 && !strcmp(argv[1], "fill")) {
    cmd_fill(num(argv[2]), num(argv[3]));
    return 0;
  }
  if (argc == 2 && !strcmp(argv[1], "info")) {
    cmd_info();
    return 0;
  }
  if (argc == 3 && !strcmp(argv[1], "try"))
    return cmd_try(num(argv[2]));
  if (argc == 4 && !strcmp(argv[1], "hold")) {
    ctx();
    CUdeviceptr p;
    if (cuMemAlloc_v2(&p, num(argv[2])) != CUDA_SUCCESS)
      fail("hold: allocation refused");
    FILE *f = fopen(argv[3], "w");
    if (!f)
      fail("hold: %s", argv[3]);
    fputs("ready\n", f);
    fclose(f);
    for (;;)
      pause();
  }
  if (argc >= 5 && !strcmp(argv[1], "exec") && !strcmp(argv[3], "--")) {
    ctx();
    CUdeviceptr p;
    if (cuMemAlloc_v2(&p, num(argv[2])) != CUDA_SUCCESS)
      fail("exec: allocation refused");
    pid_t pid = fork();
    if (pid == 0) {
      execv(argv[4], argv + 4);
      _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    cuMemFree_v2(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
  }
  if (argc >= 3 && !strcmp(argv[1], "used"))
    return cmd_used(argc - 2, argv + 2);
  if (argc == 5 && !strcmp(argv[1], "threads"))
    return cmd_threads((unsigned)num(argv[2]), (unsigned)num(argv[3]), num(argv[4]));
  if (argc == 3 && !strcmp(argv[1], "fork")) {
    ctx();
    pid_t pid = fork();
    if (pid == 0)
      _exit(cmd_try(num(argv[2])));
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
  }
  fprintf(stderr, "usage: see the comment at the top of enforce_probe.c\n");
  return 2;
}
