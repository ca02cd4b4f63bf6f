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
 *     CUDA process is CUDA_ERROR_NOT_INITIALIZED (as the real driver answers, docs/hardware.md),
 *     pid 0 CUDA_ERROR_INVALID_VALUE; the restore thread is a thread of the target;
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_target.h"

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

static void inject(unsigned dev, gpum_sim_fault_kind_t kind) {
  gpum_sim_fault_t f = {.kind = kind, .value = 1};
  if (gpum_sim_inject(getenv("GPUM_SIM_NODE"), dev, &f) != 0)
    fail("gpum_sim_inject: %s", gpum_sim_last_error());
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
  expect_r("GetState of pid 1", cuCheckpointProcessGetState(1, &st), CUDA_ERROR_NOT_INITIALIZED);
  expect_r("GetState of pid 0", cuCheckpointProcessGetState(0, &st), CUDA_ERROR_INVALID_VALUE);
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
  node_bytes_at_start(pid, before);
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
