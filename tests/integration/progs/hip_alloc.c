/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A HIP program for tests/integration/test_hip_enforce.sh: linked with -lamdhip64 (the
 * simulator's libamdhip64.so.5 here: links-libamdhip64, tests/CMakeLists.txt), it runs the
 * steps its arguments name and prints one line per step, "STEP ARG RESULT":
 *   d=N      hipSetDevice(N)
 *   m=SIZE   hipMalloc            k=SIZE  hipMallocManaged (hipMemAttachGlobal)
 *   e=SIZE   hipExtMallocWithFlags (hipDeviceMallocDefault)
 *   a=SIZE   hipMallocAsync (null stream)
 *   p=SIZE   hipMallocFromPoolAsync from the current device's default pool
 *   P=ROWS   hipMallocPitch, rows of 1 MiB
 *   x=SIZE   hipMalloc reached with dlopen("libamdhip64.so.5") and dlsym, as frameworks do
 *   f        hipFree of the newest allocation still held
 *   g        hipIpcGetMemHandle of the newest allocation still held: "g - RESULT"
 *   o        hipIpcOpenMemHandle of the handle the last g made (64 'P' bytes before any):
 *            "o PTR RESULT" (PTR "-" when it failed)
 *   i        hipMemGetInfo: "i free total RESULT"
 *   t=N      hipDeviceTotalMem(N): "t bytes RESULT"
 *   c        hipGetDeviceCount: "c count RESULT"
 *   u=SIZE   allocate SIZE with hipMalloc until it fails: "u bytes-held RESULT-of-the-failure"
 *   w=FILE   write the pid to FILE, then wait until killed (holding what it allocated)
 *   T=N      N threads allocating (1-16 MiB) and freeing at random, 400 rounds each, never
 *            holding together more than hipMemGetInfo's total said at the start, and leaving
 *            free what was free before: "T N ok", or "T N fail CODE" (3: held past the total)
 * SIZE takes K, M or G (binary). Exits 0 unless an argument is malformed (2).
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hip_abi.h"

/* links-libamdhip64 */
#pragma GCC visibility push(default)
#define DECL(name, params) hipError_t name params;
GPUM_HIP_FUNCS(DECL)
#pragma GCC visibility pop

static unsigned long long parse_size(const char *s) {
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  switch (*end) {
  case 'K':
    return v << 10;
  case 'M':
    return v << 20;
  case 'G':
    return v << 30;
  case '\0':
    return v;
  }
  fprintf(stderr, "hip_alloc: bad size '%s'\n", s);
  exit(2);
}

/* A small decimal argument (an ordinal, a count). */
static int small_num(const char *s) {
  char *end;
  long v = strtol(s, &end, 10);
  if (end == s || *end || v < 0 || v > 1 << 20) {
    fprintf(stderr, "hip_alloc: bad number '%s'\n", s);
    exit(2);
  }
  return (int)v;
}

#define MAXP 4096
static void *held[MAXP];
static hipIpcMemHandle_t ipc; /* the last g's, 64 'P' bytes before (set in main) */
static int nheld;

static void keep(void *p) {
  if (nheld < MAXP)
    held[nheld++] = p;
}

static _Atomic unsigned long long thr_held;
static unsigned long long thr_limit;
static _Atomic int thr_fail;

static void *thr(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  void *p[4] = {0};
  size_t sz[4] = {0};
  for (unsigned i = 0; i < 400; i++) {
    unsigned k = (unsigned)rand_r(&seed) % 4;
    if (p[k]) {
      atomic_fetch_sub(&thr_held, sz[k]);
      if (hipFree(p[k]) != hipSuccess)
        thr_fail = 2;
      p[k] = NULL;
      continue;
    }
    sz[k] = ((size_t)1 + (size_t)rand_r(&seed) % 16) << 20; /* 1-16 MiB: granule multiples */
    hipError_t r = hipMalloc(&p[k], sz[k]);
    if (r == hipSuccess) {
      if (atomic_fetch_add(&thr_held, sz[k]) + sz[k] > thr_limit)
        thr_fail = 3;
    } else if (r != hipErrorOutOfMemory) {
      thr_fail = 4;
    } else {
      p[k] = NULL;
    }
  }
  for (unsigned k = 0; k < 4; k++)
    if (p[k]) {
      atomic_fetch_sub(&thr_held, sz[k]);
      (void)hipFree(p[k]);
    }
  return NULL;
}

static void threads(unsigned n) {
  size_t free0 = 0, free1 = 0, total = 0;
  pthread_t t[256];
  if (n == 0 || n > 256 || hipMemGetInfo(&free0, &total) != hipSuccess) {
    printf("T %u fail 1\n", n);
    return;
  }
  thr_limit = total;
  unsigned started = 0;
  for (uintptr_t i = 0; i < n; i++)
    if (pthread_create(&t[i], NULL, thr, (void *)(i + 1)) == 0)
      started++;
  for (unsigned i = 0; i < started; i++)
    pthread_join(t[i], NULL);
  if (started < n)
    thr_fail = 1;
  if (!thr_fail && (hipMemGetInfo(&free1, &total) != hipSuccess || free1 != free0))
    thr_fail = 5;
  if (thr_fail)
    printf("T %u fail %d\n", n, thr_fail);
  else
    printf("T %u ok\n", n);
}

int main(int argc, char **argv) {
  memset(&ipc, 'P', sizeof ipc);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = a[1] == '=' ? a + 2 : "";
    void *p = NULL;
    hipError_t r;
    switch (a[0]) {
    case 'd':
      printf("d %s %d\n", v, (int)hipSetDevice(small_num(v)));
      break;
    case 'm':
      r = hipMalloc(&p, parse_size(v));
      printf("m %s %d\n", v, (int)r);
      if (r == hipSuccess)
        keep(p);
      break;
    case 'k':
      r = hipMallocManaged(&p, parse_size(v), hipMemAttachGlobal);
      printf("k %s %d\n", v, (int)r);
      if (r == hipSuccess)
        keep(p);
      break;
    case 'e':
      r = hipExtMallocWithFlags(&p, parse_size(v), hipDeviceMallocDefault);
      printf("e %s %d\n", v, (int)r);
      if (r == hipSuccess)
        keep(p);
      break;
    case 'a':
      r = hipMallocAsync(&p, parse_size(v), NULL);
      printf("a %s %d\n", v, (int)r);
      if (r == hipSuccess)
        keep(p);
      break;
    case 'p': {
      hipMemPool_t pool = NULL;
      int dev = 0;
      (void)hipGetDevice(&dev);
      r = hipDeviceGetDefaultMemPool(&pool, dev);
      if (r == hipSuccess)
        r = hipMallocFromPoolAsync(&p, parse_size(v), pool, NULL);
      printf("p %s %d\n", v, (int)r);
      if (r == hipSuccess)
        keep(p);
      break;
    }
    case 'P': {
      size_t pitch = 0;
      r = hipMallocPitch(&p, &pitch, 1u << 20, (size_t)small_num(v));
      printf("P %s %d\n", v, (int)r);
      if (r == hipSuccess)
        keep(p);
      break;
    }
    case 'x': {
      void *h = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
      gpum_hipMalloc_fn fn = NULL;
      void *sym = h ? dlsym(h, "hipMalloc") : NULL;
      memcpy(&fn, &sym, sizeof fn);
      r = fn ? fn(&p, parse_size(v)) : hipErrorNotFound;
      printf("x %s %d\n", v, (int)r);
      if (r == hipSuccess)
        keep(p);
      break;
    }
    case 'g':
      r = hipIpcGetMemHandle(&ipc, nheld ? held[nheld - 1] : NULL);
      printf("g - %d\n", (int)r);
      break;
    case 'o':
      r = hipIpcOpenMemHandle(&p, ipc, 0);
      if (r == hipSuccess)
        printf("o %p %d\n", p, (int)r);
      else
        printf("o - %d\n", (int)r);
      break;
    case 'f':
      if (nheld == 0) {
        fprintf(stderr, "hip_alloc: nothing to free\n");
        return 2;
      }
      printf("f - %d\n", (int)hipFree(held[--nheld]));
      break;
    case 'i': {
      size_t fr = 0, tot = 0;
      r = hipMemGetInfo(&fr, &tot);
      printf("i %zu %zu %d\n", fr, tot, (int)r);
      break;
    }
    case 't': {
      size_t b = 0;
      r = hipDeviceTotalMem(&b, small_num(v));
      printf("t %zu %d\n", b, (int)r);
      break;
    }
    case 'c': {
      int n = -1;
      r = hipGetDeviceCount(&n);
      printf("c %d %d\n", n, (int)r);
      break;
    }
    case 'u': {
      unsigned long long sz = parse_size(v), total = 0;
      while ((r = hipMalloc(&p, sz)) == hipSuccess && nheld < MAXP) {
        keep(p);
        total += sz;
      }
      printf("u %llu %d\n", total, (int)r);
      break;
    }
    case 'T':
      threads((unsigned)small_num(v));
      break;
    case 'w': {
      int fd = open(v, O_CREAT | O_WRONLY | O_TRUNC, 0600);
      if (fd < 0) {
        perror(v);
        return 2;
      }
      char pid[24];
      int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
      if (write(fd, pid, (size_t)len) != len) {
        perror(v);
        return 2;
      }
      close(fd);
      for (;;)
        pause();
    }
    default:
      fprintf(stderr, "hip_alloc: unknown step '%s'\n", a);
      return 2;
    }
    fflush(stdout);
  }
  return 0;
}
