/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpum/checkpoint.h's thread safety (also run under ThreadSanitizer): threads share one handle
 * and step different pids at once; each thread's failures carry its own pid and the state its
 * pid is in, and its UUID pairs reach the driver intact. A fake driver table (gpum__ckpt_wrap)
 * answers from the pid alone: the state is pid % 4, and a step fails with
 * CUDA_ERROR_ILLEGAL_STATE for an odd pid.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/checkpoint.h>
#include <gpum/error.h>

#include "device/checkpoint_internal.h"

#define THREADS 8
#define ROUNDS 2000

static CUresult by_pid(int pid) {
  return pid % 2 ? (CUresult)401 : CUDA_SUCCESS;
}
static CUresult fake_state(int pid, CUprocessState *s) {
  *s = pid % 4;
  return CUDA_SUCCESS;
}
static CUresult fake_lock(int pid, CUcheckpointLockArgs *a) {
  (void)a;
  return by_pid(pid);
}
static CUresult fake_checkpoint(int pid, CUcheckpointCheckpointArgs *a) {
  (void)a;
  return by_pid(pid);
}
/* The pair's first byte must be the pid's low byte (the thread wrote it so). */
static CUresult fake_restore(int pid, CUcheckpointRestoreArgs *a) {
  if (a->gpuPairsCount != 1 || (unsigned char)a->gpuPairs[0].newUuid.bytes[0] != (pid & 0xff))
    return CUDA_ERROR_INVALID_VALUE;
  return by_pid(pid);
}
static CUresult fake_unlock(int pid, CUcheckpointUnlockArgs *a) {
  (void)a;
  return by_pid(pid);
}
static CUresult fake_tid(int pid, int *tid) {
  *tid = pid;
  return CUDA_SUCCESS;
}

static gpum_ckpt *shared;
static int failures[THREADS];

static void *stepper(void *arg) {
  int k = (int)(intptr_t)arg;
  for (int i = 0; i < ROUNDS; i++) {
    int pid = 1000 + k * ROUNDS + i;
    char uuid[48], want[96];
    snprintf(uuid, sizeof uuid, "GPU-%02x000000-0000-0000-0000-000000000000", pid & 0xff);
    const char *olds[] = {"GPU-00000000-0000-0000-0000-000000000000"}, *news[] = {uuid};
    int rc = gpum_ckpt_restore(shared, pid, olds, news, 1);
    snprintf(want, sizeof want, "cannot restore pid %d: it is now %s", pid,
             gpum_ckpt_state_name(pid % 4));
    if (pid % 2 ? rc != GPUM_ESTATE || !strstr(gpum_last_error(), want) : rc != 0)
      failures[k]++;
    int tid = 0;
    if (gpum_ckpt_restore_thread(shared, pid, &tid) || tid != pid)
      failures[k]++;
  }
  return NULL;
}

static void test_threads_share_a_handle(void **state) {
  (void)state;
  gpum__cuda_t *cu = calloc(1, sizeof *cu);
  assert_non_null(cu);
  cu->cuCheckpointProcessGetState = fake_state;
  cu->cuCheckpointProcessLock = fake_lock;
  cu->cuCheckpointProcessCheckpoint = fake_checkpoint;
  cu->cuCheckpointProcessRestore = fake_restore;
  cu->cuCheckpointProcessUnlock = fake_unlock;
  cu->cuCheckpointProcessGetRestoreThreadId = fake_tid;
  assert_int_equal(gpum__ckpt_wrap(cu, &shared), 0);
  pthread_t t[THREADS];
  for (int k = 0; k < THREADS; k++)
    assert_int_equal(pthread_create(&t[k], NULL, stepper, (void *)(intptr_t)k), 0);
  for (int k = 0; k < THREADS; k++) {
    pthread_join(t[k], NULL);
    assert_int_equal(failures[k], 0);
  }
  gpum_ckpt_close(shared);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_threads_share_a_handle)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
