/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of gpum/checkpoint.h without a driver: bad input (NULL handle, bad pids, bad UUID
 * strings, too many pairs) refused before the driver is asked; a driver without the checkpoint
 * calls (an old one) refused at open with the version needed; every driver result a step can
 * meet mapped to its code, with a detail naming the pid, the step and the state read after
 * the failure; the UUID pairs reaching the driver as bytes. A fake driver table stands for
 * the driver (gpum__ckpt_wrap); tests/integration/test_ckpt_lib.sh drives a real target.
 */
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

/* ---- the fake driver: each call returns `result` and counts; GetState answers `state` ---- */

static CUresult result;
static CUprocessState state;
static int calls;
static CUcheckpointRestoreArgs last_restore;
static CUcheckpointGpuPair last_pairs[GPUM_CKPT_MAX_PAIRS];
static unsigned last_timeout;

static CUresult fake_state(int pid, CUprocessState *s) {
  (void)pid;
  *s = state;
  return CUDA_SUCCESS;
}
static CUresult fake_lock(int pid, CUcheckpointLockArgs *a) {
  (void)pid;
  calls++;
  last_timeout = a->timeoutMs;
  return result;
}
static CUresult fake_checkpoint(int pid, CUcheckpointCheckpointArgs *a) {
  (void)pid;
  (void)a;
  calls++;
  return result;
}
static CUresult fake_restore(int pid, CUcheckpointRestoreArgs *a) {
  (void)pid;
  calls++;
  last_restore = *a;
  if (a->gpuPairs)
    memcpy(last_pairs, a->gpuPairs, a->gpuPairsCount * sizeof *a->gpuPairs);
  return result;
}
static CUresult fake_unlock(int pid, CUcheckpointUnlockArgs *a) {
  (void)pid;
  (void)a;
  calls++;
  return result;
}
static CUresult fake_tid(int pid, int *tid) {
  calls++;
  *tid = pid + 1;
  return result;
}

static gpum__cuda_t *fake_driver(bool with_checkpoint) {
  gpum__cuda_t *cu = calloc(1, sizeof *cu);
  assert_non_null(cu);
  snprintf(cu->path, sizeof cu->path, "fake-libcuda.so.1");
  cu->driver_version = 12040;
  if (with_checkpoint) {
    cu->cuCheckpointProcessGetState = fake_state;
    cu->cuCheckpointProcessLock = fake_lock;
    cu->cuCheckpointProcessCheckpoint = fake_checkpoint;
    cu->cuCheckpointProcessRestore = fake_restore;
    cu->cuCheckpointProcessUnlock = fake_unlock;
    cu->cuCheckpointProcessGetRestoreThreadId = fake_tid;
  }
  return cu;
}

static int setup(void **st) {
  result = CUDA_SUCCESS;
  state = CU_PROCESS_STATE_RUNNING;
  calls = 0;
  gpum_ckpt *c = NULL;
  assert_int_equal(gpum__ckpt_wrap(fake_driver(true), &c), 0);
  *st = c;
  return 0;
}

static int teardown(void **st) {
  gpum_ckpt_close(*st);
  return 0;
}

static void has(const char *needle) {
  if (!strstr(gpum_last_error(), needle))
    fail_msg("\"%s\" not in the detail \"%s\"", needle, gpum_last_error());
}

#define GPU_A "GPU-0a1b2c3d-0000-1111-2222-333344445555"
#define GPU_B "GPU-ffeeddcc-bbaa-9988-7766-554433221100"

static void test_old_driver(void **st) {
  (void)st;
  gpum_ckpt *c = (gpum_ckpt *)0x1;
  assert_int_equal(gpum__ckpt_wrap(fake_driver(false), &c), GPUM_EDRIVERVER);
  has("fake-libcuda.so.1");
  has("CUDA 12.4");
  has("CUDA 12.8");
  has("cuCheckpointProcessLock");
  assert_int_equal(gpum_ckpt_open(NULL, NULL), GPUM_EINVAL);
}

static void test_null_handle_and_bad_pids(void **st) {
  gpum_ckpt *c = *st;
  gpum_ckpt_state_t s;
  int tid;
  const char *one[] = {GPU_A};
  assert_int_equal(gpum_ckpt_state(NULL, 42, &s), GPUM_EINVAL);
  has("NULL");
  assert_int_equal(gpum_ckpt_lock(NULL, 42, 0), GPUM_EINVAL);
  assert_int_equal(gpum_ckpt_checkpoint(NULL, 42), GPUM_EINVAL);
  assert_int_equal(gpum_ckpt_restore(NULL, 42, one, one, 1), GPUM_EINVAL);
  assert_int_equal(gpum_ckpt_unlock(NULL, 42), GPUM_EINVAL);
  assert_int_equal(gpum_ckpt_restore_thread(NULL, 42, &tid), GPUM_EINVAL);
  assert_int_equal(gpum_ckpt_state(c, 42, NULL), GPUM_EINVAL);
  assert_int_equal(gpum_ckpt_restore_thread(c, 42, NULL), GPUM_EINVAL);
  assert_int_equal(gpum_ckpt_lock(c, 0, 0), GPUM_EINVAL);
  has("pid 0");
  assert_int_equal(gpum_ckpt_unlock(c, -5), GPUM_EINVAL);
  assert_int_equal(calls, 0);
  gpum_ckpt_close(NULL);
}

static void test_uuid_parse(void **st) {
  (void)st;
  uint8_t u[16];
  assert_int_equal(gpum__ckpt_parse_uuid(GPU_A, u), 0);
  static const uint8_t want[16] = {0x0a, 0x1b, 0x2c, 0x3d, 0x00, 0x00, 0x11, 0x11,
                                   0x22, 0x22, 0x33, 0x33, 0x44, 0x44, 0x55, 0x55};
  assert_memory_equal(u, want, 16);
  assert_int_equal(gpum__ckpt_parse_uuid("gpu-0A1B2C3D-0000-1111-2222-333344445555", u), 0);
  assert_memory_equal(u, want, 16);
  static const char *const bad[] = {
      "",
      "0a1b2c3d-0000-1111-2222-333344445555",     /* no prefix */
      "MIG-0a1b2c3d-0000-1111-2222-333344445555", /* an instance */
      "GPU-0a1b2c3d-0000-1111-2222-33334444555",  /* short */
      "GPU-0a1b2c3d-0000-1111-2222-3333444455556",
      "GPU-0a1b2c3d00000-1111-2222-333344445555", /* a dash missing */
      "GPU-0a1b2c3d-0000-1111-2222-33334444555g", /* not hex */
      "GPU-0a1b2c3d-0000-1111-2222-3333 4445555",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (gpum__ckpt_parse_uuid(bad[i], u) != GPUM_EINVAL)
      fail_msg("'%s' was taken for a UUID", bad[i]);
    has(bad[i]);
  }
  assert_int_equal(gpum__ckpt_parse_uuid(NULL, u), GPUM_EINVAL);
}

static void test_restore_bad_pairs(void **st) {
  gpum_ckpt *c = *st;
  const char *olds[GPUM_CKPT_MAX_PAIRS + 1], *news[GPUM_CKPT_MAX_PAIRS + 1];
  for (int i = 0; i <= GPUM_CKPT_MAX_PAIRS; i++) {
    olds[i] = GPU_A;
    news[i] = GPU_B;
  }
  assert_int_equal(gpum_ckpt_restore(c, 42, olds, news, GPUM_CKPT_MAX_PAIRS + 1), GPUM_EINVAL);
  has("at most 64");
  assert_int_equal(gpum_ckpt_restore(c, 42, NULL, news, 1), GPUM_EINVAL);
  news[1] = "GPU-nothex!";
  assert_int_equal(gpum_ckpt_restore(c, 42, olds, news, 2), GPUM_EINVAL);
  has("pid 42");
  has("GPU pair 1");
  has("GPU-nothex!");
  news[1] = NULL;
  assert_int_equal(gpum_ckpt_restore(c, 42, olds, news, 2), GPUM_EINVAL);
  assert_int_equal(calls, 0); /* nothing reached the driver */

  /* Good pairs reach it as bytes; none: the same GPUs. */
  news[1] = GPU_B;
  assert_int_equal(gpum_ckpt_restore(c, 42, olds, news, 2), 0);
  assert_int_equal(last_restore.gpuPairsCount, 2);
  assert_int_equal((unsigned char)last_pairs[1].oldUuid.bytes[0], 0x0a);
  assert_int_equal((unsigned char)last_pairs[1].newUuid.bytes[15], 0x00);
  assert_int_equal((unsigned char)last_pairs[1].newUuid.bytes[0], 0xff);
  assert_int_equal(gpum_ckpt_restore(c, 42, NULL, NULL, 0), 0);
  assert_null(last_restore.gpuPairs);
  assert_int_equal(last_restore.gpuPairsCount, 0);
}

static void test_success_paths(void **st) {
  gpum_ckpt *c = *st;
  gpum_ckpt_state_t s = GPUM_CKPT_FAILED;
  state = CU_PROCESS_STATE_CHECKPOINTED;
  assert_int_equal(gpum_ckpt_state(c, 42, &s), 0);
  assert_int_equal(s, GPUM_CKPT_CHECKPOINTED);
  state = 7;
  assert_int_equal(gpum_ckpt_state(c, 42, &s), GPUM_ENOTSUP);
  has("state 7");
  assert_int_equal(gpum_ckpt_lock(c, 42, 250), 0);
  assert_int_equal(last_timeout, 250);
  assert_int_equal(gpum_ckpt_checkpoint(c, 42), 0);
  assert_int_equal(gpum_ckpt_unlock(c, 42), 0);
  int tid = 0;
  assert_int_equal(gpum_ckpt_restore_thread(c, 42, &tid), 0);
  assert_int_equal(tid, 43);
  assert_string_equal(gpum_ckpt_state_name(GPUM_CKPT_LOCKED), "locked");
  assert_string_equal(gpum_ckpt_state_name(9), "unknown");
}

static void test_error_mapping(void **st) {
  gpum_ckpt *c = *st;
  const char *one_old[] = {GPU_A}, *one_new[] = {GPU_B};

  result = 401; /* CUDA_ERROR_ILLEGAL_STATE */
  state = CU_PROCESS_STATE_LOCKED;
  assert_int_equal(gpum_ckpt_lock(c, 42, 0), GPUM_ESTATE);
  has("cannot lock pid 42: it is now locked; lock needs it running");
  has("CUDA_ERROR_ILLEGAL_STATE");
  state = CU_PROCESS_STATE_RUNNING;
  assert_int_equal(gpum_ckpt_unlock(c, 42), GPUM_ESTATE);
  has("cannot unlock pid 42: it is now running; unlock needs it locked");

  result = CUDA_ERROR_NOT_READY;
  assert_int_equal(gpum_ckpt_lock(c, 42, 50), GPUM_ETIMEDOUT);
  has("cannot lock pid 42 within 50 ms");
  has("it is now running");

  result = CUDA_ERROR_OUT_OF_MEMORY;
  state = CU_PROCESS_STATE_CHECKPOINTED;
  assert_int_equal(gpum_ckpt_restore(c, 42, one_old, one_new, 1), GPUM_EDEVOOM);
  has("no room");
  has("retry");
  has("it is now checkpointed");
  state = CU_PROCESS_STATE_LOCKED;
  assert_int_equal(gpum_ckpt_checkpoint(c, 42), GPUM_ENOMEM);
  has("host memory");
  has("it is now locked");

  result = CUDA_ERROR_INVALID_VALUE;
  assert_int_equal(gpum_ckpt_checkpoint(c, 42), GPUM_EINVAL);
  has("no CUDA process with that pid");
  assert_int_equal(gpum_ckpt_restore(c, 42, one_old, one_new, 1), GPUM_EINVAL);
  has("GPU pairs");

  result = CUDA_ERROR_UNKNOWN;
  state = CU_PROCESS_STATE_FAILED;
  assert_int_equal(gpum_ckpt_restore(c, 42, NULL, NULL, 0), GPUM_EIO);
  has("it is now failed");

  /* The real driver's answer for a pid that never initialised CUDA (driver 580). */
  result = CUDA_ERROR_NOT_INITIALIZED;
  assert_int_equal(gpum_ckpt_lock(c, 42, 1000), GPUM_EINVAL);
  has("no CUDA process with that pid");
  has("CUDA_ERROR_NOT_INITIALIZED");
  assert_false(strstr(gpum_last_error(), "within")); /* not a lock that timed out */

  /* Codes the step does not expect: the driver's name and the generic mapping. */
  result = CUDA_ERROR_INVALID_CONTEXT;
  assert_int_equal(gpum_ckpt_unlock(c, 42), GPUM_ESTATE);
  has("CUDA_ERROR_INVALID_CONTEXT");
  has("the driver refused");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_old_driver),
      cmocka_unit_test(test_uuid_parse),
      cmocka_unit_test_setup_teardown(test_null_handle_and_bad_pids, setup, teardown),
      cmocka_unit_test_setup_teardown(test_restore_bad_pairs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_success_paths, setup, teardown),
      cmocka_unit_test_setup_teardown(test_error_mapping, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
