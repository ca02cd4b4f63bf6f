/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A preemptible job for the suspend tests (test_gpumd_suspend.sh), run under `gpum run`: a CUDA
 * program (it links-the-simulated-driver, as a real one links libcuda.so.1) that holds BYTES of
 * device memory on its device 0 in 64 MiB allocations, filled with a pattern that depends on
 * each word's index and a generation. It writes its pid to DIR/ready (renamed into place), then
 * reads lines from the FIFO DIR/ctl: at each "step" it reads every allocation back, checks the
 * pattern of the current generation, writes the next generation (it goes on computing) and
 * appends "ok GEN" or "bad GEN WHY" to DIR/out. "hold" starts a CUDA call that cannot finish
 * (a stream the simulator holds, synchronised on a thread: a lock of the process times out) and
 * appends "held"; "release" lets it finish and appends "released". At the end of the FIFO it
 * frees everything and exits 0.
 *
 * With a third argument "managed" it also allocates 1 MiB of managed (UVM) memory, which the
 * driver's checkpoint does not take (gpumd must refuse to suspend it).
 *
 * Usage: suspend_job BYTES DIR [managed]
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/sim.h>

#include "cuda_abi.h"
#include "prog_fail.h"

#define DECL(name, params) CUresult name params;
GPUM_CUDA_FUNCS(DECL)

#define CHUNK (64u << 20)
#define MAX_CHUNKS 1024

static uint32_t word(size_t chunk, size_t i, uint32_t gen) {
  return (uint32_t)((chunk * (CHUNK / 4) + i) * 2654435761u) ^ (0x5a5a5a5au + gen);
}

static CUdeviceptr chunks[MAX_CHUNKS];
static size_t nchunks;
static uint32_t *host;

static void fill(uint32_t gen) {
  for (size_t c = 0; c < nchunks; c++) {
    for (size_t i = 0; i < CHUNK / 4; i++)
      host[i] = word(c, i, gen);
    CUresult r = cuMemcpyHtoD_v2(chunks[c], host, CHUNK);
    if (r != CUDA_SUCCESS)
      fail("cuMemcpyHtoD_v2 of chunk %zu: %d", c, (int)r);
  }
}

/* The first chunk and word that differ from generation gen, or -1. */
static long long check(uint32_t gen, CUresult *r) {
  for (size_t c = 0; c < nchunks; c++) {
    if ((*r = cuMemcpyDtoH_v2(host, chunks[c], CHUNK)) != CUDA_SUCCESS)
      return (long long)c;
    for (size_t i = 0; i < CHUNK / 4; i++)
      if (host[i] != word(c, i, gen))
        return (long long)(c * (CHUNK / 4) + i);
  }
  return -1;
}

static CUstream held;
static CUcontext ctx;
/* Set once the sync thread's cuCtxSetCurrent returned: a call in flight after that is its held
 * cuStreamSynchronize, not the cuCtxSetCurrent (which a lock would wait for and pass). */
static atomic_bool sync_entering;

static void *sync_held(void *arg) {
  (void)arg;
  if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
    fail("sync thread: cuCtxSetCurrent");
  atomic_store(&sync_entering, true);
  return (void *)(intptr_t)cuStreamSynchronize(held);
}

int main(int argc, char **argv) {
  if (argc != 3 && !(argc == 4 && !strcmp(argv[3], "managed")))
    fail("usage: suspend_job BYTES DIR [managed]");
  unsigned long long bytes = strtoull(argv[1], NULL, 10);
  const char *dir = argv[2];
  nchunks = (size_t)((bytes + CHUNK - 1) / CHUNK);
  if (nchunks == 0 || nchunks > MAX_CHUNKS)
    fail("BYTES must be 1 to %u MiB", MAX_CHUNKS * (CHUNK >> 20));
  host = malloc(CHUNK);
  CUdevice dev;
  if (!host || cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
    fail("no CUDA device 0");
  for (size_t c = 0; c < nchunks; c++)
    if (cuMemAlloc_v2(&chunks[c], CHUNK) != CUDA_SUCCESS)
      fail("cuMemAlloc_v2 of chunk %zu", c);
  fill(0);
  CUdeviceptr uvm;
  if (argc == 4 && cuMemAllocManaged(&uvm, 1 << 20, CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS)
    fail("cuMemAllocManaged");

  char path[4096], tmp[4096];
  snprintf(path, sizeof path, "%s/ready", dir);
  snprintf(tmp, sizeof tmp, "%s/ready.tmp", dir);
  FILE *f = fopen(tmp, "w");
  if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
    fail("cannot write %s: %s", path, strerror(errno));
  snprintf(path, sizeof path, "%s/out", dir);
  FILE *out = fopen(path, "a");
  snprintf(path, sizeof path, "%s/ctl", dir);
  FILE *ctl = fopen(path, "r"); /* blocks until the test opens the FIFO for writing */
  if (!out || !ctl)
    fail("cannot open %s/out or the FIFO %s: %s", dir, path, strerror(errno));
  char line[64];
  pthread_t syncer;
  for (uint32_t gen = 0; fgets(line, sizeof line, ctl);) {
    if (!strncmp(line, "hold", 4)) {
      unsigned before = gpum_sim_debug_cu_calls();
      atomic_store(&sync_entering, false);
      if (cuStreamCreate(&held, 0) != CUDA_SUCCESS || gpum_sim_debug_stream_hold(held, 1) ||
          pthread_create(&syncer, NULL, sync_held, NULL))
        fail("hold");
      /* In flight: the held cuStreamSynchronize (bounded by the test's timeout). */
      while (!atomic_load(&sync_entering) || gpum_sim_debug_cu_calls() != before + 1)
        sched_yield();
      fprintf(out, "held\n");
      fflush(out);
      continue;
    }
    if (!strncmp(line, "release", 7)) {
      void *res;
      if (gpum_sim_debug_stream_hold(held, 0) || pthread_join(syncer, &res) || res != NULL)
        fail("release");
      fprintf(out, "released\n");
      fflush(out);
      continue;
    }
    if (strncmp(line, "step", 4) != 0)
      continue;
    CUresult r = CUDA_SUCCESS;
    long long at = check(gen, &r);
    if (r != CUDA_SUCCESS)
      fprintf(out, "bad %u cuMemcpyDtoH_v2 %d\n", gen, (int)r);
    else if (at >= 0)
      fprintf(out, "bad %u word %lld differs\n", gen, at);
    else {
      fill(++gen);
      fprintf(out, "ok %u\n", gen - 1);
    }
    fflush(out);
  }
  for (size_t c = 0; c < nchunks; c++)
    cuMemFree_v2(chunks[c]);
  return 0;
}
