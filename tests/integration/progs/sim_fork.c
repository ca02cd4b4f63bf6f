/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulated driver across fork() without exec (test_sim_fork_threads.sh). It links the
 * simulated driver as a program links libcuda.so.1 (links-the-simulated-driver:
 * tests/CMakeLists.txt).
 *
 *   sim_fork CHILDREN THREADS
 *
 * First a child forked before the process initialised CUDA must be able to use CUDA (as with
 * the real driver). Then, with a context made and THREADS threads allocating, freeing and
 * making streams, events, pools, VMM handles, pinned host memory and NVML event sets as fast
 * as they can, CHILDREN children are forked one after the other. Each child must, within a
 * deadline, get CUDA_ERROR_NOT_INITIALIZED from every CUDA entry point that uses the state of
 * before the fork (all but cuDriverGetVersion, cuGetErrorName, cuGetErrorString and
 * cuGetProcAddress, which still work), and find NVML usable. A child that does not finish
 * within 20 s is hung (the simulator used to deadlock there on a lock a parent thread held at
 * the fork): it is reported, killed, and the program exits 1 at once. Exit 0 when every child
 * passed.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
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

#define CHILD_DEADLINE_S 20

/* What the parent made before forking: the child hands it back to the driver. */
static CUcontext parent_ctx;
static CUdeviceptr parent_ptr;
static void *parent_host;
static CUstream parent_stream;
static CUevent parent_event;

/* Every CUDA entry point that uses the driver's state, called as a child of the parent would:
 * C(name, arguments). */
#define CHILD_CALLS(C)                                                       \
  C(cuInit, (0))                                                             \
  C(cuDeviceGetCount, (&i))                                                  \
  C(cuDeviceGet, (&dev, 0))                                                  \
  C(cuDeviceGetName, (buf, (int)sizeof buf, 0))                              \
  C(cuDeviceGetUuid_v2, (&uuid, 0))                                          \
  C(cuDeviceTotalMem_v2, (&sz, 0))                                           \
  C(cuDeviceGetAttribute, (&i, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0)) \
  C(cuDeviceGetPCIBusId, (buf, (int)sizeof buf, 0))                          \
  C(cuDevicePrimaryCtxRetain, (&ctx, 0))                                     \
  C(cuDevicePrimaryCtxRelease_v2, (0))                                       \
  C(cuCtxSetCurrent, (parent_ctx))                                           \
  C(cuCtxGetCurrent, (&ctx))                                                 \
  C(cuCtxGetDevice, (&dev))                                                  \
  C(cuCtxSynchronize, ())                                                    \
  C(cuMemAlloc_v2, (&dp, 1 << 20))                                           \
  C(cuMemFree_v2, (parent_ptr))                                              \
  C(cuMemGetInfo_v2, (&sz, &sz2))                                            \
  C(cuMemGetAddressRange_v2, (&dp, &sz, parent_ptr))                         \
  C(cuMemAllocPitch_v2, (&dp, &sz, 64, 64, 4))                               \
  C(cuMemAllocManaged, (&dp, 1 << 20, 1))                                    \
  C(cuMemAllocAsync, (&dp, 1 << 20, NULL))                                   \
  C(cuMemFreeAsync, (parent_ptr, NULL))                                      \
  C(cuMemAllocFromPoolAsync, (&dp, 1 << 20, pool, NULL))                     \
  C(cuDeviceGetDefaultMemPool, (&pool, 0))                                   \
  C(cuDeviceGetMemPool, (&pool, 0))                                          \
  C(cuMemPoolCreate, (&pool, &pool_props))                                   \
  C(cuMemPoolDestroy, (pool))                                                \
  C(cuMemPoolTrimTo, (pool, 0))                                              \
  C(cuMemPoolSetAttribute, (pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &u64))  \
  C(cuMemPoolGetAttribute, (pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &u64))  \
  C(cuMemcpyHtoD_v2, (parent_ptr, buf, 1))                                   \
  C(cuMemcpyDtoH_v2, (buf, parent_ptr, 1))                                   \
  C(cuMemcpyDtoD_v2, (parent_ptr, parent_ptr, 1))                            \
  C(cuMemcpyHtoDAsync_v2, (parent_ptr, buf, 1, NULL))                        \
  C(cuMemcpyDtoHAsync_v2, (buf, parent_ptr, 1, NULL))                        \
  C(cuMemsetD8_v2, (parent_ptr, 0, 1))                                       \
  C(cuMemAllocHost_v2, (&hp, 4096))                                          \
  C(cuMemHostAlloc, (&hp, 4096, 0))                                          \
  C(cuMemFreeHost, (parent_host))                                            \
  C(cuMemAddressReserve, (&dp, 2 << 20, 0, 0, 0))                            \
  C(cuMemAddressFree, (dp, 2 << 20))                                         \
  C(cuMemCreate, (&handle, 2 << 20, &alloc_prop, 0))                         \
  C(cuMemRelease, (handle))                                                  \
  C(cuMemMap, (dp, 2 << 20, 0, handle, 0))                                   \
  C(cuMemUnmap, (dp, 2 << 20))                                               \
  C(cuMemSetAccess, (dp, 2 << 20, &access, 1))                               \
  C(cuMemGetAllocationGranularity, (&sz, &alloc_prop, 0))                    \
  C(cuMemExportToShareableHandle, (&i, handle, 1, 0))                        \
  C(cuMemImportFromShareableHandle, (&handle, &i, 1))                        \
  C(cuMemPoolExportToShareableHandle, (&i, pool, 1, 0))                      \
  C(cuMemPoolImportFromShareableHandle, (&pool, &i, 1, 0))                   \
  C(cuIpcGetMemHandle, (&ipc, parent_ptr))                                   \
  C(cuIpcOpenMemHandle_v2, (&dp, ipc, 1))                                    \
  C(cuStreamCreate, (&stream, 0))                                            \
  C(cuStreamDestroy_v2, (parent_stream))                                     \
  C(cuStreamSynchronize, (parent_stream))                                    \
  C(cuStreamWaitEvent, (parent_stream, parent_event, 0))                     \
  C(cuEventCreate, (&event, 0))                                              \
  C(cuEventRecord, (parent_event, parent_stream))                            \
  C(cuEventQuery, (parent_event))                                            \
  C(cuEventSynchronize, (parent_event))                                      \
  C(cuEventElapsedTime, (&ms, parent_event, parent_event))                   \
  C(cuEventDestroy_v2, (parent_event))                                       \
  C(cuMemAllocAsync_ptsz, (&dp, 1 << 20, NULL))                              \
  C(cuMemFreeAsync_ptsz, (parent_ptr, NULL))                                 \
  C(cuMemAllocFromPoolAsync_ptsz, (&dp, 1 << 20, pool, NULL))                \
  C(cuCheckpointProcessGetRestoreThreadId, (getppid(), &i))                  \
  C(cuCheckpointProcessGetState, (getppid(), &pstate))                       \
  C(cuCheckpointProcessLock, (getppid(), NULL))                              \
  C(cuCheckpointProcessCheckpoint, (getppid(), NULL))                        \
  C(cuCheckpointProcessRestore, (getppid(), NULL))                           \
  C(cuCheckpointProcessUnlock, (getppid(), NULL))

/* Entry points that need no initialised driver and keep working in the child. */
static const char *const still_working[] = {"cuDriverGetVersion", "cuGetErrorName",
                                            "cuGetErrorString", "cuGetProcAddress",
                                            "cuGetProcAddress_v2"};

#define CALL_NAME(name, args) #name,
static const char *const called[] = {CHILD_CALLS(CALL_NAME)};

/* Every entry point of the ABI list is either called by the child or still working: a new
 * entry point cannot escape the check. */
static void check_coverage(void) {
#define CHECK_ONE(name, ...)                                                         \
  do {                                                                               \
    bool found = false;                                                              \
    for (size_t k = 0; k < sizeof called / sizeof called[0]; k++)                    \
      found = found || !strcmp(called[k], #name);                                    \
    for (size_t k = 0; k < sizeof still_working / sizeof still_working[0]; k++)      \
      found = found || !strcmp(still_working[k], #name);                             \
    if (!found)                                                                      \
      fail("%s is neither checked in the child nor listed as still working", #name); \
  } while (0);
  GPUM_CUDA_FUNCS(CHECK_ONE)
  GPUM_CUDA_FUNCS_OTHER(CHECK_ONE)
#undef CHECK_ONE
}

/* Props of a pool and of an allocation of pinned device memory. */
static CUmemPoolProps device_pool_props(void) {
  CUmemPoolProps p;
  memset(&p, 0, sizeof p);
  p.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  return p;
}

static CUmemAllocationProp device_alloc_prop(void) {
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  return p;
}

/* The child's checks: its exit status (0 when all held), with a line on stderr per failure. */
static int child_checks(void) {
  int bad = 0, i = 0;
  CUdevice dev = 0;
  char buf[64] = "";
  CUuuid uuid;
  CUprocessState pstate;
  size_t sz = 0, sz2 = 0;
  CUcontext ctx = NULL;
  CUdeviceptr dp = 0;
  void *hp = NULL;
  CUmemoryPool pool = NULL;
  CUmemPoolProps pool_props = device_pool_props();
  CUmemAllocationProp alloc_prop = device_alloc_prop();
  CUmemAccessDesc access = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE}, .flags = 3};
  CUmemGenericAllocationHandle handle = 0;
  CUstream stream = NULL;
  CUevent event = NULL;
  unsigned long long u64 = 0;
  float ms = 0;
  CUipcMemHandle ipc;
  memset(&ipc, 0, sizeof ipc);
#define RUN(name, args)                                                                 \
  do {                                                                                  \
    CUresult r = name args;                                                             \
    if (r != CUDA_ERROR_NOT_INITIALIZED) {                                              \
      fprintf(stderr, "child %d: %s returned %d, not CUDA_ERROR_NOT_INITIALIZED (3)\n", \
              (int)getpid(), #name, (int)r);                                            \
      bad = 1;                                                                          \
    }                                                                                   \
  } while (0);
  CHILD_CALLS(RUN)
#undef RUN
  int version = 0;
  const char *s = NULL;
  void *fn = NULL;
  if (cuDriverGetVersion(&version) != CUDA_SUCCESS || version <= 0 ||
      cuGetErrorName(CUDA_ERROR_NOT_INITIALIZED, &s) != CUDA_SUCCESS ||
      strcmp(s, "CUDA_ERROR_NOT_INITIALIZED") != 0 ||
      cuGetErrorString(CUDA_ERROR_NOT_INITIALIZED, &s) != CUDA_SUCCESS ||
      cuGetProcAddress("cuMemAlloc", &fn, 12000, 0) != CUDA_SUCCESS || !fn) {
    fprintf(stderr,
            "child %d: cuDriverGetVersion, cuGetErrorName, cuGetErrorString or "
            "cuGetProcAddress failed\n",
            (int)getpid());
    bad = 1;
  }
  /* NVML stays usable: what the parent initialised, and a new initialisation. */
  unsigned count = 0;
  nvmlDevice_t d;
  nvmlMemory_t mem;
  nvmlEventSet_t set;
  if (nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS || count == 0 ||
      nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS ||
      nvmlDeviceGetMemoryInfo(d, &mem) != NVML_SUCCESS || mem.total == 0 ||
      nvmlEventSetCreate(&set) != NVML_SUCCESS || nvmlEventSetFree(set) != NVML_SUCCESS ||
      nvmlInit_v2() != NVML_SUCCESS || nvmlShutdown() != NVML_SUCCESS) {
    fprintf(stderr, "child %d: NVML is not usable after fork\n", (int)getpid());
    bad = 1;
  }
  return bad ? 2 : 0;
}

/* ---- the parent's threads ------------------------------------------------------------------ */

static atomic_bool stop;
static atomic_ulong rounds;

static void *worker(void *arg) {
  (void)arg;
  if (cuCtxSetCurrent(parent_ctx) != CUDA_SUCCESS)
    fail("thread: cuCtxSetCurrent");
  CUmemPoolProps pp = device_pool_props();
  CUmemAllocationProp ap = device_alloc_prop();
  nvmlDevice_t d;
  if (nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS)
    fail("thread: NVML handle");
  for (unsigned long k = 0; !atomic_load(&stop); k++) {
    CUdeviceptr p;
    if (cuMemAlloc_v2(&p, 1 << 20) == CUDA_SUCCESS)
      cuMemFree_v2(p);
    CUstream st;
    CUevent ev;
    void *h;
    CUmemoryPool pool;
    CUmemGenericAllocationHandle mh;
    nvmlMemory_t mem;
    nvmlEventSet_t set;
    switch (k % 6) {
    case 0:
      if (cuStreamCreate(&st, 0) == CUDA_SUCCESS)
        cuStreamDestroy_v2(st);
      break;
    case 1:
      if (cuEventCreate(&ev, 0) == CUDA_SUCCESS)
        cuEventDestroy_v2(ev);
      break;
    case 2:
      if (cuMemHostAlloc(&h, 4096, 0) == CUDA_SUCCESS)
        cuMemFreeHost(h);
      break;
    case 3:
      if (cuMemPoolCreate(&pool, &pp) == CUDA_SUCCESS)
        cuMemPoolDestroy(pool);
      break;
    case 4:
      if (cuMemCreate(&mh, 2 << 20, &ap, 0) == CUDA_SUCCESS)
        cuMemRelease(mh);
      break;
    default:
      (void)nvmlDeviceGetMemoryInfo(d, &mem);
      if (nvmlEventSetCreate(&set) == NVML_SUCCESS)
        nvmlEventSetFree(set);
      break;
    }
    atomic_fetch_add(&rounds, 1);
  }
  return NULL;
}

/* Waits for child pid: its exit status, or -1 when it did not end within the deadline (it is
 * killed). */
static int wait_child(pid_t pid) {
  struct timespec t0, now, pause = {.tv_sec = 0, .tv_nsec = 1000000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    int status;
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (w < 0 && errno != EINTR)
      fail("waitpid: %s", strerror(errno));
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - t0.tv_sec >= CHILD_DEADLINE_S) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    nanosleep(&pause, NULL);
  }
}

/* A child forked before this process initialised CUDA may initialise and use it. */
static void fork_before_init(void) {
  pid_t pid = fork();
  if (pid < 0)
    fail("fork: %s", strerror(errno));
  if (pid == 0) {
    CUcontext c;
    CUdeviceptr p;
    int ok = cuInit(0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&c, 0) == CUDA_SUCCESS &&
             cuCtxSetCurrent(c) == CUDA_SUCCESS && cuMemAlloc_v2(&p, 1 << 20) == CUDA_SUCCESS &&
             cuMemFree_v2(p) == CUDA_SUCCESS;
    _exit(ok ? 0 : 2);
  }
  int rc = wait_child(pid);
  if (rc != 0)
    fail("a child forked before cuInit could not use CUDA (%s %d)", rc < 0 ? "hung" : "status", rc);
}

int main(int argc, char **argv) {
  if (argc != 3)
    fail("usage: sim_fork CHILDREN THREADS");
  int children = (int)strtol(argv[1], NULL, 10), nthreads = (int)strtol(argv[2], NULL, 10);
  if (children <= 0 || nthreads <= 0 || nthreads > 64)
    fail("bad arguments");
  check_coverage();
  fork_before_init();

  if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&parent_ctx, 0) != CUDA_SUCCESS ||
      cuCtxSetCurrent(parent_ctx) != CUDA_SUCCESS ||
      cuMemAlloc_v2(&parent_ptr, 1 << 20) != CUDA_SUCCESS ||
      cuMemHostAlloc(&parent_host, 4096, 0) != CUDA_SUCCESS ||
      cuStreamCreate(&parent_stream, 0) != CUDA_SUCCESS ||
      cuEventCreate(&parent_event, 0) != CUDA_SUCCESS || nvmlInit_v2() != NVML_SUCCESS)
    fail("set-up on device 0");

  pthread_t th[64];
  for (int t = 0; t < nthreads; t++)
    if (pthread_create(&th[t], NULL, worker, NULL) != 0)
      fail("pthread_create");
  /* The threads are under way before the first fork. */
  while (atomic_load(&rounds) < (unsigned long)nthreads * 4)
    sched_yield();

  int hung = 0, wrong = 0;
  for (int c = 0; c < children && !hung; c++) {
    pid_t pid = fork();
    if (pid < 0)
      fail("fork: %s", strerror(errno));
    if (pid == 0)
      _exit(child_checks());
    int rc = wait_child(pid);
    if (rc < 0) {
      fprintf(stderr, "child %d of %d (pid %d) hung: no end within %d s\n", c + 1, children,
              (int)pid, CHILD_DEADLINE_S);
      hung++;
    } else if (rc != 0) {
      fprintf(stderr, "child %d of %d (pid %d) exited %d\n", c + 1, children, (int)pid, rc);
      wrong++;
    }
  }
  atomic_store(&stop, true);
  for (int t = 0; t < nthreads; t++)
    pthread_join(th[t], NULL);
  if (hung || wrong)
    fail("%d children hung, %d got other answers", hung, wrong);
  if (cuEventDestroy_v2(parent_event) != CUDA_SUCCESS ||
      cuStreamDestroy_v2(parent_stream) != CUDA_SUCCESS ||
      cuMemFreeHost(parent_host) != CUDA_SUCCESS || cuMemFree_v2(parent_ptr) != CUDA_SUCCESS)
    fail("the parent's own state was disturbed by its children");
  printf("ok: %d children forked while %d threads used the driver (%lu rounds): none hung, each "
         "got CUDA_ERROR_NOT_INITIALIZED and a usable NVML\n",
         children, nthreads, atomic_load(&rounds));
  return 0;
}
