/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The scheduler's side of suspend and resume (src/gpumd/sched/sched.h; docs/suspend.md): a
 * suspended reservation's bytes leave its devices at once and a waiting request takes them; a
 * resume is placed on its own GPUs when they have room, else on other GPUs of the same kind (not
 * on another kind), never ahead of a queued request of at least its priority, and its bytes
 * count from the moment it is placed (before the restore); ending a suspended reservation frees
 * nothing twice; the states a suspend and a resume may start from; a restore after a restart
 * counts a suspended reservation nowhere; the count of granted Slurm steps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/error.h>

#include "gpumd.h" /* gpumd_cause_t, opaque to the scheduler */
#include "sched.h"

#include "sched_fixture.h"

static uint64_t submit_on(fx_t *fx, uint64_t bytes, int prio, const char *dev, bool preemptible,
                          uint64_t now) {
  gpumd_sched_request_t q;
  gpumd_sched_request_init(&q);
  q.bytes_per_gpu = bytes;
  q.priority = prio;
  q.preemptible = preemptible;
  const char *devs[1] = {dev};
  if (dev) {
    q.devices = devs;
    q.device_count = 1;
  }
  const gpumd_resv_t *r = NULL;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, now, &r), 0);
  assert_non_null(r);
  assert_int_equal(r->preemptible, preemptible);
  return r->id;
}

static uint64_t mask_of(const fx_t *fx, uint64_t id) {
  const gpumd_resv_t *r = gpumd_sched_find(fx->s, id);
  assert_non_null(r);
  return r->device_mask;
}

static uint64_t reserved_on(const fx_t *fx, unsigned d) {
  gpumd_sched_device_stats_t st;
  assert_int_equal(gpumd_sched_device_stats(fx->s, d, &st), 0);
  return st.reserved;
}

static fx_t *node(void) {
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  set_dev(fx, 0, "NVIDIA H100 80GB HBM3", 80 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  set_dev(fx, 1, "NVIDIA H100 80GB HBM3", 80 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  set_dev(fx, 2, "NVIDIA A100-SXM4-80GB", 80 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  return fx;
}

/* A high-priority request waits for a preemptible job's GPU; suspending the job grants it at once
 * (in the suspend's own pass), and the job comes back on the other H100, not on the A100. */
static void test_suspend_frees_and_resume_moves(void **state) {
  (void)state;
  fx_t *fx = node();
  /* No explicit GPU (a job that names its GPUs is never moved): pack puts it on GPU 0. */
  uint64_t low = submit_on(fx, 60 * GiB, 0, NULL, true, T0);
  uint64_t fill1 = submit_on(fx, 60 * GiB, 0, NULL, false, T0);
  assert_int_equal(mask_of(fx, low), 1);
  assert_int_equal(mask_of(fx, fill1), 2);
  assert_int_equal(state_of(fx, low), GPUMD_RESV_GRANTED);
  uint64_t high = submit_on(fx, 50 * GiB, 10, "0", false, T0 + SEC);
  assert_int_equal(state_of(fx, high), GPUMD_RESV_QUEUED);

  assert_int_equal(gpumd_sched_suspend(fx->s, NULL, low, false, T0 + 2 * SEC, "preempted"), 0);
  assert_int_equal(state_of(fx, low), GPUMD_RESV_SUSPENDED);
  assert_int_equal(state_of(fx, high), GPUMD_RESV_GRANTED); /* in the suspend's pass */
  assert_int_equal(reserved_on(fx, 0), 50 * GiB);           /* low's 60 GiB left GPU 0 */
  const gpumd_resv_t *r = gpumd_sched_find(fx->s, low);
  assert_int_equal(r->device_mask, 1); /* the GPU it came from, kept */
  assert_int_equal(r->suspended_ns, T0 + 2 * SEC);
  assert_false(r->suspend_hold);
  size_t resumable = 0;
  assert_int_equal(gpumd_sched_suspended(fx->s, &resumable), 1);
  assert_int_equal(resumable, 1);

  /* No room on any H100 yet (GPU 0: 30 free, GPU 1: 20 free); the A100 has room but is not the
   * same kind. */
  uint64_t mask = 0;
  assert_int_equal(gpumd_sched_resume_place(fx->s, low, T0 + 3 * SEC, true, &mask), GPUM_EBUSY);
  assert_non_null(strstr(gpum_last_error(), "60.00 GiB"));
  /* GPU 1 frees up: the job moves there. */
  assert_int_equal(gpumd_sched_release(fx->s, NULL, fill1, T0 + 3 * SEC, NULL), 0);
  assert_int_equal(gpumd_sched_resume_place(fx->s, low, T0 + 3 * SEC, true, &mask), 0);
  assert_int_equal(mask, 2);
  assert_int_equal(gpumd_sched_resume(fx->s, NULL, low, mask, T0 + 4 * SEC, "resumed on GPU 1"), 0);
  r = gpumd_sched_find(fx->s, low);
  assert_int_equal(r->state, GPUMD_RESV_GRANTED);
  assert_int_equal(r->device_mask, 2);
  assert_int_equal(r->suspended_ns, 0);
  assert_int_equal(reserved_on(fx, 1), 60 * GiB); /* counted before any restore */
  const event_t *e = last_event(fx, low);
  assert_int_equal(e->from, GPUMD_RESV_SUSPENDED);
  assert_int_equal(e->to, GPUMD_RESV_GRANTED);
  assert_string_equal(e->reason, "resumed on GPU 1");
  fx_free(fx);
}

/* Its own GPU first when it has room; past blocked queued requests as a request behind them
 * would be (backfill), but not past a queue head ahead of it locked past the backfill bound; a
 * locked head of lower priority does not hold it back. */
static void test_resume_order(void **state) {
  (void)state;
  fx_t *fx = node();
  uint64_t job = submit_on(fx, 40 * GiB, 5, NULL, true, T0);
  assert_int_equal(mask_of(fx, job), 1);
  uint64_t small = submit_on(fx, 10 * GiB, 0, "1", false, T0);
  assert_int_equal(gpumd_sched_suspend(fx->s, NULL, job, true, T0 + SEC, "suspended by hand"), 0);
  assert_true(gpumd_sched_find(fx->s, job)->suspend_hold);
  size_t resumable = 9;
  assert_int_equal(gpumd_sched_suspended(fx->s, &resumable), 1);
  assert_int_equal(resumable, 0);
  uint64_t mask = 0;
  assert_int_equal(gpumd_sched_resume_place(fx->s, job, T0 + 7 * SEC, true, &mask), 0);
  assert_int_equal(mask, 1); /* its own GPU, though pack would choose GPU 1 for a new one */

  /* GPU 0 holds 50 GiB, GPU 1 40 (room for the job); a request of priority 5 waits for 70 GiB
   * on GPU 0. Within the backfill bound the job passes it (onto GPU 1, as a request queued behind
   * it would); past the bound the waiter, ahead of it (same priority, older), holds it back. */
  uint64_t a = submit_on(fx, 50 * GiB, 0, "0", false, T0 + 2 * SEC);
  uint64_t b = submit_on(fx, 30 * GiB, 0, "1", false, T0 + 2 * SEC);
  uint64_t waiter = submit_on(fx, 70 * GiB, 5, "0", false, T0 - SEC);
  assert_int_equal(state_of(fx, waiter), GPUMD_RESV_QUEUED);
  assert_int_equal(gpumd_sched_resume_place(fx->s, job, T0 + 7 * SEC, true, &mask), 0);
  assert_int_equal(mask, 2);
  assert_int_equal(gpumd_sched_resume_place(fx->s, job, T0 + 70 * SEC, true, &mask), GPUM_EBUSY);
  char want[96];
  snprintf(want, sizeof want, "behind r-%llu (priority 5), the queue's head past the backfill",
           (unsigned long long)waiter);
  assert_non_null(strstr(gpum_last_error(), want));
  /* A blocked head of lower priority, past the bound too, does not hold it back. */
  assert_int_equal(gpumd_sched_release(fx->s, NULL, waiter, T0 + 71 * SEC, NULL), 0);
  uint64_t lower = submit_on(fx, 70 * GiB, 1, "0", false, T0 + 71 * SEC);
  assert_int_equal(state_of(fx, lower), GPUMD_RESV_QUEUED);
  assert_int_equal(gpumd_sched_resume_place(fx->s, job, T0 + 200 * SEC, true, &mask), 0);
  assert_int_equal(mask, 2);
  /* No room anywhere: it says what it waits for. */
  uint64_t c = submit_on(fx, 30 * GiB, 0, "1", false, T0 + 201 * SEC);
  assert_int_equal(gpumd_sched_resume_place(fx->s, job, T0 + 202 * SEC, true, &mask), GPUM_EBUSY);
  assert_non_null(strstr(gpum_last_error(), "waits for 40.00 GiB free on 1 GPU"));
  (void)a, (void)b, (void)c;
  (void)small;
  fx_free(fx);
}

/* Which states a suspend and a resume start from; a resume onto a mask of the wrong size; an
 * ended suspended reservation frees nothing twice. */
static void test_states_and_end(void **state) {
  (void)state;
  fx_t *fx = node();
  uint64_t g = submit_on(fx, 10 * GiB, 0, "0", true, T0);
  uint64_t q = submit_on(fx, 75 * GiB, 0, "0", true, T0); /* no room now: queued */
  assert_int_equal(state_of(fx, q), GPUMD_RESV_QUEUED);
  assert_int_equal(gpumd_sched_suspend(fx->s, NULL, q, false, T0, NULL), GPUM_ESTATE);
  assert_non_null(strstr(gpum_last_error(), "is QUEUED"));
  assert_int_equal(gpumd_sched_suspend(fx->s, NULL, 999, false, T0, NULL), GPUM_ENOENT);
  uint64_t mask = 0;
  assert_int_equal(gpumd_sched_resume_place(fx->s, g, T0, true, &mask), GPUM_ESTATE);
  assert_int_equal(gpumd_sched_resume(fx->s, NULL, g, 1, T0, NULL), GPUM_ESTATE);
  assert_int_equal(gpumd_sched_suspend(fx->s, NULL, g, false, T0 + SEC, NULL), 0);
  assert_int_equal(gpumd_sched_suspend(fx->s, NULL, g, false, T0 + SEC, NULL), GPUM_ESTATE);
  assert_int_equal(gpumd_sched_resume(fx->s, NULL, g, 3, T0, NULL), GPUM_EINVAL);
  assert_int_equal(gpumd_sched_resume(fx->s, NULL, g, 1ull << 9, T0, NULL), GPUM_EINVAL);
  assert_int_equal(state_of(fx, q), GPUMD_RESV_GRANTED); /* in the suspend's pass */
  assert_int_equal(reserved_on(fx, 0), 75 * GiB);

  /* The facts a suspend keeps. */
  int32_t pids[2] = {100, 200};
  uint64_t starts[2] = {7, 8};
  assert_int_equal(gpumd_sched_set_suspend_facts(fx->s, g, true, 5 * GiB, 1, pids, starts, 2), 0);
  assert_int_equal(
      gpumd_sched_set_suspend_facts(fx->s, g, true, 0, 1, pids, starts, GPUMD_RESV_MAX_PROCS + 1),
      GPUM_EINVAL);
  const gpumd_resv_t *r = gpumd_sched_find(fx->s, g);
  assert_int_equal(r->nprocs, 2);
  assert_int_equal(r->proc_pid[1], 200);
  assert_int_equal(r->host_bytes, 5 * GiB);
  assert_int_equal(r->ckpt_mask, 1);

  /* Released while suspended: RELEASED, and GPU 0's count is not taken down a second time. */
  assert_int_equal(gpumd_sched_release(fx->s, NULL, g, T0 + 3 * SEC, NULL), 0);
  assert_int_equal(state_of(fx, g), GPUMD_RESV_RELEASED);
  assert_int_equal(last_event(fx, g)->from, GPUMD_RESV_SUSPENDED);
  assert_int_equal(reserved_on(fx, 0), 75 * GiB);
  assert_int_equal(gpumd_sched_suspended(fx->s, NULL), 0);
  fx_free(fx);
}

/* A suspended reservation put back after a restart counts on no device and can be resumed. */
static void test_restore_suspended(void **state) {
  (void)state;
  fx_t *fx = node();
  gpumd_resv_t r;
  memset(&r, 0, sizeof r);
  r.id = 41;
  r.state = GPUMD_RESV_SUSPENDED;
  r.bytes_per_gpu = 70 * GiB;
  r.gpus = 1;
  r.device_mask = 1;
  r.preemptible = true;
  r.suspend_hold = false;
  r.suspended_ns = T0;
  snprintf(r.reason, sizeof r.reason, "preempted");
  assert_int_equal(gpumd_sched_restore(fx->s, &r), 0);
  assert_int_equal(reserved_on(fx, 0), 0);
  assert_int_equal(gpumd_sched_next_id(fx->s), 42);
  r.id = 43;
  r.device_mask = 0;
  assert_int_equal(gpumd_sched_restore(fx->s, &r), GPUM_EINVAL); /* no GPU to come back like */
  uint64_t mask = 0;
  assert_int_equal(gpumd_sched_resume_place(fx->s, 41, T0, true, &mask), 0);
  assert_int_equal(mask, 1);
  fx_free(fx);
}

/* The preemption plan: only preemptible jobs of lower priority past their minimum run time, the
 * lowest priority first, only those on the GPUs the waiter gets, and nothing changed by asking. */
static void test_preempt_plan(void **state) {
  (void)state;
  fx_t *fx = node();
  uint64_t p1 = submit_on(fx, 50 * GiB, 1, "0", true, T0);                /* preemptible, prio 1 */
  uint64_t p0 = submit_on(fx, 50 * GiB, 0, "1", true, T0);                /* preemptible, prio 0 */
  uint64_t fixed = submit_on(fx, 60 * GiB, -5, "2", false, T0);           /* not preemptible */
  uint64_t young = submit_on(fx, 20 * GiB, -9, "1", true, T0 + 50 * SEC); /* too young */
  assert_int_equal(gpumd_sched_preemptible(fx->s), 3);
  uint64_t v[4];
  size_t n = 9;
  /* A waiter of priority 1 on any H100: only p0 (priority 0) may go; young has run 10 s. */
  uint64_t w = submit_on(fx, 70 * GiB, 1, NULL, false, T0 + 60 * SEC);
  assert_int_equal(state_of(fx, w), GPUMD_RESV_QUEUED);
  assert_int_equal(gpumd_sched_preempt_plan(fx->s, w, T0 + 60 * SEC, 30 * SEC, v, 4, &n), 0);
  assert_int_equal(n, 0); /* p0 alone leaves young's 20 GiB on GPU 1: 60 free, 70 needed */
  assert_int_equal(gpumd_sched_preempt_plan(fx->s, w, T0 + 60 * SEC, 5 * SEC, v, 4, &n), 0);
  assert_int_equal(n, 2); /* young (priority -9) first, then p0; both on GPU 1 */
  assert_true((v[0] == young && v[1] == p0) || (v[0] == p0 && v[1] == young));
  assert_int_equal(gpumd_sched_preempt_plan(fx->s, w, T0 + 60 * SEC, 5 * SEC, v, 1, &n),
                   GPUM_ENOSPC);
  assert_int_equal(n, 0);
  /* Asking changed nothing. */
  assert_int_equal(reserved_on(fx, 1), 70 * GiB);
  assert_int_equal(gpumd_sched_preemptible(fx->s), 3);
  assert_int_equal(state_of(fx, w), GPUMD_RESV_QUEUED);
  /* A waiter of priority 2 on the A100: the only job there is not preemptible. */
  uint64_t a = submit_on(fx, 30 * GiB, 2, "2", false, T0 + 60 * SEC);
  assert_int_equal(gpumd_sched_preempt_plan(fx->s, a, T0 + 60 * SEC, 0, v, 4, &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(gpumd_sched_preempt_plan(fx->s, p1, T0, 0, v, 4, &n), GPUM_ENOENT);
  (void)fixed;
  fx_free(fx);
}

/* The count of GRANTED Slurm steps (the suspend timer's O(1) test, slurm_suspend.c): a grant
 * with Slurm ids counts, a queued one or one without ids does not, and a suspend, a resume and a
 * release move it. */
static void test_slurm_granted_count(void **state) {
  (void)state;
  fx_t *fx = node();
  gpumd_sched_request_t q;
  gpumd_sched_request_init(&q);
  q.bytes_per_gpu = 60 * GiB;
  q.slurm_job = "12";
  q.slurm_step = "0";
  const char *devs[1] = {"0"};
  q.devices = devs;
  q.device_count = 1;
  const gpumd_resv_t *r = NULL;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, T0, &r), 0);
  uint64_t step = r->id;
  assert_int_equal(state_of(fx, step), GPUMD_RESV_GRANTED);
  assert_int_equal(gpumd_sched_slurm_granted(fx->s), 1);
  uint64_t other = submit_on(fx, 10 * GiB, 0, "1", false, T0);
  assert_int_equal(gpumd_sched_slurm_granted(fx->s), 1);
  q.slurm_job = "13"; /* waits behind step on GPU 0 */
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, T0, &r), 0);
  uint64_t queued = r->id;
  assert_int_equal(state_of(fx, queued), GPUMD_RESV_QUEUED);
  assert_int_equal(gpumd_sched_slurm_granted(fx->s), 1);
  assert_int_equal(gpumd_sched_suspend(fx->s, NULL, step, true, T0 + SEC, "suspended by Slurm"), 0);
  /* The queued step takes GPU 0 in the suspend's pass: one granted Slurm step again. */
  assert_int_equal(state_of(fx, queued), GPUMD_RESV_GRANTED);
  assert_int_equal(gpumd_sched_slurm_granted(fx->s), 1);
  assert_int_equal(gpumd_sched_release(fx->s, NULL, queued, T0 + 2 * SEC, NULL), 0);
  assert_int_equal(gpumd_sched_slurm_granted(fx->s), 0);
  uint64_t mask = 0;
  assert_int_equal(gpumd_sched_resume_place(fx->s, step, T0 + 3 * SEC, true, &mask), 0);
  assert_int_equal(gpumd_sched_resume(fx->s, NULL, step, mask, T0 + 3 * SEC, "resumed"), 0);
  assert_int_equal(gpumd_sched_slurm_granted(fx->s), 1);
  assert_int_equal(gpumd_sched_release(fx->s, NULL, step, T0 + 4 * SEC, NULL), 0);
  assert_int_equal(gpumd_sched_slurm_granted(fx->s), 0);
  (void)other;
  fx_free(fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_suspend_frees_and_resume_moves),
      cmocka_unit_test(test_resume_order),
      cmocka_unit_test(test_states_and_end),
      cmocka_unit_test(test_restore_suspended),
      cmocka_unit_test(test_preempt_plan),
      cmocka_unit_test(test_slurm_granted_count),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
