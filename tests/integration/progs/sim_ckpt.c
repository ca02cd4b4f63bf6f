/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulated driver's CUDA checkpoint API, driven across processes as a controller drives a
 * real CUDA process (test_sim_checkpoint.sh). It links the simulated driver as a program links
 * libcuda.so.1 (links-the-simulated-driver: tests/CMakeLists.txt). Needs a node of two GPUs of
 * one kind (GPUM_SIM_NODE).
 *
 *   sim_ckpt [--restore-fault-injected]
 *
 * The program forks targets before it initialises CUDA, then acts as their controller. A
 * target allocates two buffers on its device 0, writes a pattern into them, and has a worker
 * thread read and check the pattern through CUDA in a loop; it answers the controller's
 * commands on a pipe. The controller checks, in order:
 *   - before cuInit every checkpoint call returns CUDA_ERROR_NOT_INITIALIZED; a pid that is no
 *     CUDA process is CUDA_ERROR_INVALID_VALUE; the restore thread is a thread of the target;
 *   - transitions not allowed from RUNNING are CUDA_ERROR_ILLEGAL_STATE, non-zero reserved
 *     fields CUDA_ERROR_INVALID_VALUE, and neither changes the state;
 *   - a lock with a timeout, while a CUDA call of the target cannot finish (a held stream),
 *     returns CUDA_ERROR_NOT_READY and leaves the process RUNNING;
 *   - lock: LOCKED, a CUDA call the target starts then does not return;
 *   - checkpoint: CHECKPOINTED, the node counts none of the target's memory (the worker, held
 *     at the gate, does not touch the released memory: it would fault);
 *   - a restore onto a GPU without room fails with CUDA_ERROR_OUT_OF_MEMORY and leaves it
 *     CHECKPOINTED; pairs that omit a GPU or name an unknown one are CUDA_ERROR_INVALID_VALUE;
 *   - restore with the two GPUs swapped: LOCKED, the memory counted on the other GPU, the
 *     blocked call still blocked; unlock: RUNNING, the call returns, the pattern is intact at
 *     the same addresses, the target's device 0 is now the other GPU, the worker goes on;
 *   - an injected checkpoint fault, and (second target) an injected restore fault, fail with
 *     CUDA_ERROR_UNKNOWN and leave the process FAILED, where its CUDA calls fail. With
 *     --restore-fault-injected the restore fault on device 0 was injected before the program
 *     started (`gpum sim inject --restore-fail 1`), else the program injects it.
 * Exit 0 when every check passed.
 */
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gpum/sim.h>

#include "cuda_abi.h"
#include "prog_fail.h"

#define DECL(name, params) CUresult name params;
GPUM_CUDA_FUNCS(DECL)

#define BIG (64u << 20)   /* bytes of the big buffer */
#define SMALL (64u << 10) /* bytes of the small one, which the worker reads whole */

static unsigned char pattern(size_t i) {
  return (unsigned char)(i * 31u + 7u);
}

/* ---- the target ---- */

static CUdeviceptr big, small;
static atomic_ulong rounds;     /* the worker's checked reads */
static atomic_int worker_err;   /* the CUresult that stopped the worker, 0 while it runs */
static atomic_bool worker_hold; /* the worker waits while set */
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static bool worker_parked;

static void say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int fd, const char *fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (write(fd, line, (size_t)n) != n)
    fail("write to the pipe");
}

static bool check(CUdeviceptr at, size_t off, size_t len, CUresult *r) {
  unsigned char *buf = malloc(len);
  if (!buf)
    fail("malloc");
  *r = cuMemcpyDtoH_v2(buf, at + off, len);
  bool ok = *r == CUDA_SUCCESS;
  for (size_t i = 0; ok && i < len; i++)
    ok = buf[i] == pattern(off + i);
  free(buf);
  return ok;
}

static void *worker(void *arg) {
  CUcontext ctx = arg;
  if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
    fail("worker: cuCtxSetCurrent");
  for (size_t k = 0;; k++) {
    pthread_mutex_lock(&hold_mu);
    worker_parked = atomic_load(&worker_hold);
    pthread_cond_broadcast(&hold_cv);
    while (atomic_load(&worker_hold))
      pthread_cond_wait(&hold_cv, &hold_mu);
    worker_parked = false;
    pthread_mutex_unlock(&hold_mu);
    CUresult r;
    size_t off = (k * 4096u) % (BIG - 4096u);
    if (!check(small, 0, SMALL, &r) || (r == CUDA_SUCCESS && !check(big, off, 4096, &r))) {
      if (r == CUDA_SUCCESS)
        fail("worker: the pattern changed");
      atomic_store(&worker_err, r);
      return NULL;
    }
    atomic_fetch_add(&rounds, 1);
  }
}

static void worker_park(bool park) {
  pthread_mutex_lock(&hold_mu);
  atomic_store(&worker_hold, park);
  pthread_cond_broadcast(&hold_cv);
  while (park && !worker_parked && atomic_load(&worker_err) == 0)
    pthread_cond_wait(&hold_cv, &hold_mu);
  pthread_mutex_unlock(&hold_mu);
}

static CUstream held;
static void *sync_thread(void *arg) {
  if (cuCtxSetCurrent(arg) != CUDA_SUCCESS)
    fail("sync thread: cuCtxSetCurrent");
  CUresult r = cuStreamSynchronize(held);
  return (void *)(intptr_t)r;
}

struct call {
  CUcontext ctx;
  int out;
};
static void *blocked_call(void *arg) {
  struct call *c = arg;
  say(c->out, "calling\n");
  CUresult r = cuCtxSetCurrent(c->ctx); /* the first call blocks while the process is locked */
  bool ok = r == CUDA_SUCCESS && check(big, BIG - 4096, 4096, &r);
  say(c->out, "returned %d %d\n", (int)r, ok);
  return NULL;
}

static void write_pattern(CUdeviceptr at, size_t len) {
  unsigned char *buf = malloc(len);
  if (!buf)
    fail("malloc");
  for (size_t i = 0; i < len; i++)
    buf[i] = pattern(i);
  if (cuMemcpyHtoD_v2(at, buf, len) != CUDA_SUCCESS)
    fail("target: cuMemcpyHtoD");
  free(buf);
}

/* The target: reads one-letter commands from in, answers on out. */
static void target(int in, int out) {
  CUcontext ctx;
  CUdevice dev;
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
      cuCtxSetCurrent(ctx) || cuMemAlloc_v2(&big, BIG) || cuMemAlloc_v2(&small, SMALL) ||
      cuStreamCreate(&held, 0))
    fail("target: setup");
  write_pattern(big, BIG);
  write_pattern(small, SMALL);
  pthread_t w, s, b;
  if (pthread_create(&w, NULL, worker, ctx))
    fail("pthread_create");
  struct call call = {ctx, out};
  say(out, "ready %lu\n", (unsigned long)atomic_load(&rounds));
  char cmd;
  while (read(in, &cmd, 1) == 1) {
    switch (cmd) {
    case 'h': /* a CUDA call in flight that cannot finish: the worker parked, a held stream */
      worker_park(true);
      if (gpum_sim_debug_stream_hold(held, 1) || pthread_create(&s, NULL, sync_thread, ctx))
        fail("target: hold");
      while (gpum_sim_debug_cu_calls() != 1) /* bounded by the test's timeout */
        sched_yield();
      say(out, "held\n");
      break;
    case 'r': { /* the held call finishes, the worker goes on */
      void *res;
      if (gpum_sim_debug_stream_hold(held, 0) || pthread_join(s, &res) || res != NULL)
        fail("target: release");
      worker_park(false);
      say(out, "released\n");
      break;
    }
    case 'x': /* a CUDA call from a new thread (to block while locked) */
      if (pthread_create(&b, NULL, blocked_call, &call))
        fail("pthread_create");
      break;
    case 'j':
      pthread_join(b, NULL);
      break;
    case 'v': { /* the pattern, whole; the worker's progress; what device 0 is */
      CUresult r1, r2;
      bool ok = check(big, 0, BIG, &r1) && check(small, 0, SMALL, &r2);
      unsigned long before = atomic_load(&rounds);
      while (atomic_load(&rounds) < before + 2 && atomic_load(&worker_err) == 0)
        sched_yield();
      CUuuid u;
      CUresult r3 = cuDeviceGetUuid_v2(&u, 0);
      say(out, "verified %d %d %02x%02x %d\n", ok, (int)r3, (unsigned char)u.bytes[0],
          (unsigned char)u.bytes[1], atomic_load(&worker_err));
      break;
    }
    case 'e': { /* what a CUDA call returns now, and what stopped the worker */
      size_t f, t;
      CUresult r = cuMemGetInfo_v2(&f, &t);
      while (atomic_load(&worker_err) == 0)
        sched_yield();
      say(out, "calls %d worker %d\n", (int)r, atomic_load(&worker_err));
      break;
    }
    default:
      fail("target: bad command %c", cmd);
    }
  }
  _exit(0);
}

/* ---- the controller ---- */

struct tgt {
  pid_t pid;
  int to, from;
};

static struct tgt spawn(void) {
  int a[2], b[2];
  if (pipe(a) || pipe(b))
    fail("pipe");
  struct tgt t = {0};
  t.pid = fork();
  if (t.pid < 0)
    fail("fork");
  if (t.pid == 0) {
    close(a[1]);
    close(b[0]);
    target(a[0], b[1]);
  }
  close(a[0]);
  close(b[1]);
  t.to = a[1];
  t.from = b[0];
  return t;
}

static void send_cmd(const struct tgt *t, char c) {
  if (write(t->to, &c, 1) != 1)
    fail("write to target");
}

/* Reads one line of the target's, a byte at a time (nothing is read ahead, so that pending()
 * sees what is left in the pipe). */
static void expect_line(const struct tgt *t, const char *prefix, char *line, size_t len) {
  size_t n = 0;
  char c;
  while (n + 1 < len && read(t->from, &c, 1) == 1 && c != '\n')
    line[n++] = c;
  line[n] = '\0';
  if (strncmp(line, prefix, strlen(prefix)) != 0)
    fail("target %d said \"%s\", expected \"%s\"", (int)t->pid, line, prefix);
}

/* Whether the target has said something not read yet. */
static bool pending(const struct tgt *t) {
  struct pollfd p = {.fd = t->from, .events = POLLIN};
  return poll(&p, 1, 0) > 0;
}

static void expect_r(const char *what, CUresult got, CUresult want) {
  if (got != want)
    fail("%s: got %d, expected %d", what, (int)got, (int)want);
}

static void expect_state(int pid, CUprocessState want) {
  CUprocessState s = -1;
  expect_r("cuCheckpointProcessGetState", cuCheckpointProcessGetState(pid, &s), CUDA_SUCCESS);
  if (s != want)
    fail("pid %d is in state %d, expected %d", pid, (int)s, (int)want);
}

/* The target's bytes on each device, as the node counts them. */
static void node_bytes(pid_t pid, uint64_t out[2]) {
  static gpum_sim_status_t st;
  st.api_version = GPUM_SIM_API_VERSION;
  if (gpum_sim_status(getenv("GPUM_SIM_NODE"), &st) != 0)
    fail("gpum_sim_status: %s", gpum_sim_last_error());
  out[0] = out[1] = 0;
  for (unsigned i = 0; i < st.process_count; i++)
    if (st.processes[i].pid == (uint32_t)pid && st.processes[i].device < 2)
      out[st.processes[i].device] += st.processes[i].bytes;
}

static void uuid_of(int ordinal, CUuuid *u) {
  if (cuDeviceGetUuid_v2(u, ordinal) != CUDA_SUCCESS)
    fail("cuDeviceGetUuid_v2");
}

static void inject(unsigned dev, gpum_sim_fault_kind_t kind) {
  gpum_sim_fault_t f = {.kind = kind, .value = 1};
  if (gpum_sim_inject(getenv("GPUM_SIM_NODE"), dev, &f) != 0)
    fail("gpum_sim_inject: %s", gpum_sim_last_error());
}

static void end(struct tgt *t) {
  kill(t->pid, SIGKILL);
  waitpid(t->pid, NULL, 0);
  close(t->from);
  close(t->to);
}

int main(int argc, char **argv) {
  bool restore_fault_injected = argc > 1 && !strcmp(argv[1], "--restore-fault-injected");
  char line[256];
  /* Both targets are forked before this process initialises CUDA (a child forked after cuInit
   * cannot use CUDA, as with the real driver). */
  struct tgt t = spawn(), t2 = spawn();
  expect_line(&t, "ready", line, sizeof line);
  expect_line(&t2, "ready", line, sizeof line);
  int pid = t.pid;
  CUprocessState st;
  int tid;
  expect_r("GetState before cuInit", cuCheckpointProcessGetState(pid, &st),
           CUDA_ERROR_NOT_INITIALIZED);
  expect_r("Lock before cuInit", cuCheckpointProcessLock(pid, NULL), CUDA_ERROR_NOT_INITIALIZED);
  if (cuInit(0) != CUDA_SUCCESS)
    fail("cuInit");

  /* Who is a CUDA process; the restore thread. */
  expect_r("GetState of pid 1", cuCheckpointProcessGetState(1, &st), CUDA_ERROR_INVALID_VALUE);
  expect_r("GetState(NULL)", cuCheckpointProcessGetState(pid, NULL), CUDA_ERROR_INVALID_VALUE);
  expect_state(pid, CU_PROCESS_STATE_RUNNING);
  expect_r("GetRestoreThreadId", cuCheckpointProcessGetRestoreThreadId(pid, &tid), CUDA_SUCCESS);
  char task[64];
  struct stat sb;
  snprintf(task, sizeof task, "/proc/%d/task/%d", pid, tid);
  if (tid == pid || stat(task, &sb) != 0)
    fail("restore thread %d is no thread of its own in %d", tid, pid);

  /* Transitions not allowed from RUNNING, reserved fields. */
  expect_r("Unlock RUNNING", cuCheckpointProcessUnlock(pid, NULL), CUDA_ERROR_ILLEGAL_STATE);
  expect_r("Checkpoint RUNNING", cuCheckpointProcessCheckpoint(pid, NULL),
           CUDA_ERROR_ILLEGAL_STATE);
  expect_r("Restore RUNNING", cuCheckpointProcessRestore(pid, NULL), CUDA_ERROR_ILLEGAL_STATE);
  CUcheckpointLockArgs la = {.reserved0 = 1};
  expect_r("Lock reserved0", cuCheckpointProcessLock(pid, &la), CUDA_ERROR_INVALID_VALUE);
  la = (CUcheckpointLockArgs){.reserved1 = {[6] = 1}};
  expect_r("Lock reserved1", cuCheckpointProcessLock(pid, &la), CUDA_ERROR_INVALID_VALUE);
  CUcheckpointCheckpointArgs ca = {.reserved = {[7] = 1}};
  expect_r("Checkpoint reserved", cuCheckpointProcessCheckpoint(pid, &ca),
           CUDA_ERROR_INVALID_VALUE);
  expect_state(pid, CU_PROCESS_STATE_RUNNING);

  /* The lock's timeout: a call in flight that does not finish. */
  send_cmd(&t, 'h');
  expect_line(&t, "held", line, sizeof line);
  la = (CUcheckpointLockArgs){.timeoutMs = 50};
  expect_r("Lock with a call in flight", cuCheckpointProcessLock(pid, &la), CUDA_ERROR_NOT_READY);
  expect_state(pid, CU_PROCESS_STATE_RUNNING);
  send_cmd(&t, 'r');
  expect_line(&t, "released", line, sizeof line);

  /* Lock: a new call blocks. */
  uint64_t before[2], now[2];
  node_bytes(pid, before);
  if (before[0] < BIG + SMALL || before[1] != 0)
    fail("the target holds %llu and %llu bytes", (unsigned long long)before[0],
         (unsigned long long)before[1]);
  la = (CUcheckpointLockArgs){.timeoutMs = 10000};
  expect_r("Lock", cuCheckpointProcessLock(pid, &la), CUDA_SUCCESS);
  expect_state(pid, CU_PROCESS_STATE_LOCKED);
  expect_r("Lock LOCKED", cuCheckpointProcessLock(pid, NULL), CUDA_ERROR_ILLEGAL_STATE);
  expect_r("Restore LOCKED", cuCheckpointProcessRestore(pid, NULL), CUDA_ERROR_ILLEGAL_STATE);
  send_cmd(&t, 'x');
  expect_line(&t, "calling", line, sizeof line);

  /* Checkpoint: the node counts nothing of the target. */
  expect_r("Checkpoint", cuCheckpointProcessCheckpoint(pid, NULL), CUDA_SUCCESS);
  expect_state(pid, CU_PROCESS_STATE_CHECKPOINTED);
  node_bytes(pid, now);
  if (now[0] != 0 || now[1] != 0)
    fail("checkpointed, the target still holds %llu and %llu bytes", (unsigned long long)now[0],
         (unsigned long long)now[1]);
  expect_r("Checkpoint CHECKPOINTED", cuCheckpointProcessCheckpoint(pid, NULL),
           CUDA_ERROR_ILLEGAL_STATE);
  expect_r("Unlock CHECKPOINTED", cuCheckpointProcessUnlock(pid, NULL), CUDA_ERROR_ILLEGAL_STATE);
  expect_r("Lock CHECKPOINTED", cuCheckpointProcessLock(pid, NULL), CUDA_ERROR_ILLEGAL_STATE);

  /* Bad pairs, and a GPU without room. */
  CUcheckpointGpuPair pairs[2];
  uuid_of(0, &pairs[0].oldUuid);
  uuid_of(1, &pairs[0].newUuid);
  pairs[1] = (CUcheckpointGpuPair){pairs[0].newUuid, pairs[0].oldUuid};
  CUcheckpointRestoreArgs ra = {.gpuPairs = &pairs[1], .gpuPairsCount = 1};
  expect_r("Restore, pairs omitting device 0", cuCheckpointProcessRestore(pid, &ra),
           CUDA_ERROR_INVALID_VALUE);
  CUcheckpointGpuPair unknown = {pairs[0].oldUuid, {{0x55}}};
  ra = (CUcheckpointRestoreArgs){.gpuPairs = &unknown, .gpuPairsCount = 1};
  expect_r("Restore onto an unknown GPU", cuCheckpointProcessRestore(pid, &ra),
           CUDA_ERROR_INVALID_VALUE);
  ra = (CUcheckpointRestoreArgs){.gpuPairs = pairs, .gpuPairsCount = 2, .reserved1 = 1};
  expect_r("Restore reserved1", cuCheckpointProcessRestore(pid, &ra), CUDA_ERROR_INVALID_VALUE);
  CUcontext c1;
  CUdeviceptr filler;
  size_t free1, total1;
  if (cuDevicePrimaryCtxRetain(&c1, 1) || cuCtxSetCurrent(c1) || cuMemGetInfo_v2(&free1, &total1) ||
      cuMemAlloc_v2(&filler, free1 - (before[0] - 1)))
    fail("filling device 1");
  ra = (CUcheckpointRestoreArgs){.gpuPairs = pairs, .gpuPairsCount = 2};
  expect_r("Restore onto a full GPU", cuCheckpointProcessRestore(pid, &ra),
           CUDA_ERROR_OUT_OF_MEMORY);
  expect_state(pid, CU_PROCESS_STATE_CHECKPOINTED);
  node_bytes(pid, now);
  if (now[0] != 0 || now[1] != 0)
    fail("a failed restore left %llu and %llu bytes counted", (unsigned long long)now[0],
         (unsigned long long)now[1]);
  if (cuMemFree_v2(filler))
    fail("cuMemFree");

  /* Restore onto the other GPU: the memory is counted there; the blocked call stays blocked. */
  expect_r("Restore swapped", cuCheckpointProcessRestore(pid, &ra), CUDA_SUCCESS);
  expect_state(pid, CU_PROCESS_STATE_LOCKED);
  node_bytes(pid, now);
  if (now[0] != 0 || now[1] != before[0])
    fail("restored onto device 1, the target holds %llu and %llu bytes (expected 0 and %llu)",
         (unsigned long long)now[0], (unsigned long long)now[1], (unsigned long long)before[0]);
  if (pending(&t))
    fail("a CUDA call of the locked target returned");

  /* Unlock: the call returns, the data is intact, device 0 is the other GPU. */
  expect_r("Unlock", cuCheckpointProcessUnlock(pid, NULL), CUDA_SUCCESS);
  expect_state(pid, CU_PROCESS_STATE_RUNNING);
  expect_line(&t, "returned 0 1", line, sizeof line);
  send_cmd(&t, 'j');
  send_cmd(&t, 'v');
  char want[64];
  snprintf(want, sizeof want, "verified 1 0 %02x%02x 0", (unsigned char)pairs[0].newUuid.bytes[0],
           (unsigned char)pairs[0].newUuid.bytes[1]);
  expect_line(&t, want, line, sizeof line);

  /* An injected checkpoint fault: FAILED, and the target's calls fail. */
  inject(1, GPUM_SIM_FAULT_CKPT_FAIL);
  expect_r("Lock again", cuCheckpointProcessLock(pid, NULL), CUDA_SUCCESS);
  expect_r("Checkpoint with a fault", cuCheckpointProcessCheckpoint(pid, NULL), CUDA_ERROR_UNKNOWN);
  expect_state(pid, CU_PROCESS_STATE_FAILED);
  expect_r("Unlock FAILED", cuCheckpointProcessUnlock(pid, NULL), CUDA_ERROR_ILLEGAL_STATE);
  send_cmd(&t, 'e');
  expect_line(&t, "calls 999 worker 999", line, sizeof line);
  end(&t);

  /* An injected restore fault (a second target). */
  t = t2;
  pid = t.pid;
  if (!restore_fault_injected)
    inject(0, GPUM_SIM_FAULT_RESTORE_FAIL);
  expect_r("Lock 2", cuCheckpointProcessLock(pid, NULL), CUDA_SUCCESS);
  expect_r("Checkpoint 2", cuCheckpointProcessCheckpoint(pid, NULL), CUDA_SUCCESS);
  expect_r("Restore with a fault", cuCheckpointProcessRestore(pid, NULL), CUDA_ERROR_UNKNOWN);
  expect_state(pid, CU_PROCESS_STATE_FAILED);
  expect_r("Restore FAILED", cuCheckpointProcessRestore(pid, NULL), CUDA_ERROR_ILLEGAL_STATE);
  send_cmd(&t, 'e');
  expect_line(&t, "calls 999 worker 999", line, sizeof line);
  end(&t);
  printf(
      "checkpoint API: states, errors, lock timeout, checkpoint, remapped restore, faults: ok\n");
  return 0;
}
