/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libgpum's gpum/checkpoint.h driving a live CUDA process as gpumd will (test_ckpt_lib.sh):
 * the target is sim_ckpt's (ckpt_target.h), and the target links the simulated driver
 * (links-the-simulated-driver, links-libgpum-too: tests/CMakeLists.txt); the controller goes
 * through libgpum only, which loads the same driver (GPUM_SIM_NODE). Needs a node of two GPUs of
 * one kind.
 *
 *   ckpt_lib            the scenario below
 *   ckpt_lib --old      gpum_ckpt_open must fail with GPUM_EDRIVERVER (run with
 *                       GPUM_CUDA_LIBRARY naming a driver without the checkpoint calls)
 *
 * The scenario: a lock with a bound while a CUDA call of the target cannot finish times out
 * (GPUM_ETIMEDOUT, still running); an illegal step (unlock while running, checkpoint while
 * running) is GPUM_ESTATE with a detail naming the state; lock, checkpoint (the node counts
 * none of the target's memory), restore onto the other GPU given by UUID strings, unlock: the
 * blocked call returns, the pattern is intact, the target's device 0 is now the other GPU; a
 * pid that is no CUDA process is GPUM_EINVAL. Exit 0 when every check passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/checkpoint.h>
#include <gpum/error.h>

#include "ckpt_target.h"

static void expect_rc(const char *what, int got, int want, const char *detail_has) {
  if (got != want)
    fail("%s: got %s, expected %s (%s)", what, gpum_err_name(got), gpum_err_name(want),
         gpum_last_error());
  if (detail_has && !strstr(gpum_last_error(), detail_has))
    fail("%s: \"%s\" not in the detail \"%s\"", what, detail_has, gpum_last_error());
  if (want)
    printf("%s: %s\n", what, gpum_last_error());
}

static void expect_state(gpum_ckpt *c, int pid, gpum_ckpt_state_t want) {
  gpum_ckpt_state_t s;
  expect_rc("gpum_ckpt_state", gpum_ckpt_state(c, pid, &s), 0, NULL);
  if (s != want)
    fail("pid %d is %s, expected %s", pid, gpum_ckpt_state_name(s), gpum_ckpt_state_name(want));
}

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" of the controller's CUDA ordinal. */
static void uuid_string(int ordinal, char out[48]) {
  CUuuid u;
  uuid_of(ordinal, &u);
  const unsigned char *b = (const unsigned char *)u.bytes;
  snprintf(out, 48, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
           b[14], b[15]);
}

int main(int argc, char **argv) {
  gpum_ckpt *c = NULL;
  if (argc > 1 && !strcmp(argv[1], "--old")) {
    expect_rc("gpum_ckpt_open on an old driver", gpum_ckpt_open(NULL, &c), GPUM_EDRIVERVER,
              "CUDA 12.8");
    if (c)
      fail("an old driver gave a handle");
    return 0;
  }
  char line[256];
  struct tgt t = spawn(); /* before this process initialises CUDA */
  expect_line(&t, "ready", line, sizeof line);
  int pid = t.pid;
  expect_rc("gpum_ckpt_open", gpum_ckpt_open(NULL, &c), 0, NULL);
  if (cuInit(0) != CUDA_SUCCESS) /* for the UUIDs (the same driver, loaded once) */
    fail("cuInit");
  char gpu0[48], gpu1[48];
  uuid_string(0, gpu0);
  uuid_string(1, gpu1);
  expect_state(c, pid, GPUM_CKPT_RUNNING);
  int tid = 0;
  expect_rc("gpum_ckpt_restore_thread", gpum_ckpt_restore_thread(c, pid, &tid), 0, NULL);
  if (tid <= 0 || tid == pid)
    fail("restore thread %d of %d", tid, pid);

  /* Not a CUDA process; steps not allowed while running. */
  expect_rc("lock pid 1", gpum_ckpt_lock(c, 1, 0), GPUM_EINVAL, "no CUDA process");
  expect_rc("unlock while running", gpum_ckpt_unlock(c, pid), GPUM_ESTATE,
            "it is now running; unlock needs it locked");
  expect_rc("checkpoint while running", gpum_ckpt_checkpoint(c, pid), GPUM_ESTATE,
            "it is now running; checkpoint needs it locked");

  /* The lock's bound: a CUDA call in flight that does not finish. */
  send_cmd(&t, 'h');
  expect_line(&t, "held", line, sizeof line);
  expect_rc("lock with a call in flight", gpum_ckpt_lock(c, pid, 50), GPUM_ETIMEDOUT,
            "it is now running");
  expect_state(c, pid, GPUM_CKPT_RUNNING);
  send_cmd(&t, 'r');
  expect_line(&t, "released", line, sizeof line);

  /* Suspend: lock (a new call blocks), checkpoint (the node counts nothing of it). */
  uint64_t before[2], now[2];
  node_bytes_at_start(pid, before);
  expect_rc("lock", gpum_ckpt_lock(c, pid, 10000), 0, NULL);
  expect_state(c, pid, GPUM_CKPT_LOCKED);
  send_cmd(&t, 'x');
  expect_line(&t, "calling", line, sizeof line);
  expect_rc("checkpoint", gpum_ckpt_checkpoint(c, pid), 0, NULL);
  expect_state(c, pid, GPUM_CKPT_CHECKPOINTED);
  node_bytes(pid, now);
  if (now[0] != 0 || now[1] != 0)
    fail("checkpointed, the target still holds %llu and %llu bytes", (unsigned long long)now[0],
         (unsigned long long)now[1]);
  expect_rc("lock while checkpointed", gpum_ckpt_lock(c, pid, 0), GPUM_ESTATE,
            "it is now checkpointed; lock needs it running");

  /* Resume onto the other GPU, named by UUID strings. A pairing that leaves device 0 out is
   * refused and changes nothing. */
  const char *olds[] = {gpu0, gpu1}, *news[] = {gpu1, gpu0};
  expect_rc("restore leaving a GPU out", gpum_ckpt_restore(c, pid, &olds[1], &news[1], 1),
            GPUM_EINVAL, "it is now checkpointed");
  expect_rc("restore swapped", gpum_ckpt_restore(c, pid, olds, news, 2), 0, NULL);
  expect_state(c, pid, GPUM_CKPT_LOCKED);
  node_bytes(pid, now);
  if (now[0] != 0 || now[1] != before[0])
    fail("restored onto device 1, the target holds %llu and %llu bytes (expected 0 and %llu)",
         (unsigned long long)now[0], (unsigned long long)now[1], (unsigned long long)before[0]);
  if (pending(&t))
    fail("a CUDA call of the locked target returned");
  expect_rc("unlock", gpum_ckpt_unlock(c, pid), 0, NULL);
  expect_state(c, pid, GPUM_CKPT_RUNNING);
  expect_line(&t, "returned 0 1", line, sizeof line);
  send_cmd(&t, 'j');
  send_cmd(&t, 'v');
  char want[64];
  snprintf(want, sizeof want, "verified 1 0 %.2s%.2s 0", gpu1 + 4, gpu1 + 6);
  expect_line(&t, want, line, sizeof line);
  end(&t);
  gpum_ckpt_close(c);
  printf("gpum_ckpt: lock timeout, illegal steps, suspend, restore onto the other GPU: ok\n");
  return 0;
}
