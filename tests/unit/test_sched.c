/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the gpumd scheduler (src/gpumd/sched/sched.h): the admission inequality with
 * unmanaged memory and the safety margin, the pack / spread / score placements, multi-GPU
 * all-or-nothing, every never-fit reason, priority order and FIFO, backfill inside and past
 * its bound, queue timeouts with REJECT and WAIT, max_concurrent_jobs, device loss with
 * re-placement, pressure watermarks, release/cancel, restore after a restart, the
 * spellings of ids and names, "wait": false requests (granted now or GPUM_EBUSY), and the dry run
 * gpumd_sched_check (REST validate). The clock is
 * injected: every call gets an explicit time.
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

static void add_h100(fx_t *fx, unsigned index, uint64_t now) {
  set_dev(fx, index, "NVIDIA H100 80GB HBM3", 80 * GiB, 0, GPUM_HEALTH_AVAILABLE, now);
}

/* Submits bytes x gpus at priority prio; returns the id; *state receives the state. */
static uint64_t submit(fx_t *fx, uint64_t bytes, unsigned gpus, int prio, uint64_t now,
                       gpumd_resv_state_t *state) {
  gpumd_sched_request_t q;
  gpumd_sched_request_init(&q);
  q.bytes_per_gpu = bytes;
  q.gpus = gpus;
  q.priority = prio;
  q.uid = 1000;
  q.pid = 4242;
  const gpumd_resv_t *r = NULL;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, now, &r), 0);
  assert_non_null(r);
  if (state != NULL)
    *state = r->state;
  return r->id;
}

static uint64_t mask_of(const fx_t *fx, uint64_t id) {
  const gpumd_resv_t *r = gpumd_sched_find(fx->s, id);
  assert_non_null(r);
  return r->device_mask;
}

/* ---- Admission -------------------------------------------------------------------------- */

static void test_admission_math(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  gpumd_sched_opts_init(&o);
  o.memory_fraction = 0.5;
  o.safety_margin = 1 * GiB;
  fx_t *fx = fx_new(&o);
  /* capacity = 10 GiB x 0.5 - 1 GiB = 4 GiB; 1 GiB unmanaged: 3 GiB admissible. */
  set_dev(fx, 0, "GPU", 10 * GiB, 1 * GiB, GPUM_HEALTH_AVAILABLE, T0);
  gpumd_sched_device_stats_t st;
  assert_int_equal(gpumd_sched_device_stats(fx->s, 0, &st), 0);
  assert_int_equal(st.capacity, 4 * GiB);
  assert_int_equal(st.committed, 1 * GiB);
  assert_int_equal(st.headroom, 3 * GiB);

  gpumd_resv_state_t s1, s2;
  uint64_t a = submit(fx, 3 * GiB - 1, 1, 0, T0, &s1);
  assert_int_equal(s1, GPUMD_RESV_GRANTED);
  uint64_t b = submit(fx, 2, 1, 0, T0, &s2); /* 1 GiB + 3 GiB - 1 + 2 > 4 GiB */
  assert_int_equal(s2, GPUMD_RESV_QUEUED);
  assert_int_equal(gpumd_sched_device_stats(fx->s, 0, &st), 0);
  assert_int_equal(st.reserved, 3 * GiB - 1);
  assert_int_equal(st.committed, 4 * GiB - 1);
  assert_int_equal(st.headroom, 1);
  assert_int_equal(st.jobs, 1);
  /* The unmanaged process exits: b fits now (exactly at the boundary it would, too). */
  set_dev(fx, 0, "GPU", 10 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0 + 1);
  assert_int_equal(state_of(fx, b), GPUMD_RESV_GRANTED);
  /* Exactly capacity fits: release both, ask for 4 GiB. */
  assert_int_equal(gpumd_sched_release(fx->s, NULL, a, T0 + 2, NULL), 0);
  assert_int_equal(gpumd_sched_release(fx->s, NULL, b, T0 + 2, NULL), 0);
  uint64_t c = submit(fx, 4 * GiB, 1, 0, T0 + 3, &s1);
  assert_int_equal(s1, GPUMD_RESV_GRANTED);
  assert_int_equal(gpumd_sched_device_stats(fx->s, 0, &st), 0);
  assert_int_equal(st.headroom, 0);
  (void)c;
  fx_free(fx);
}

static void test_new_reservation_transitions(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  add_h100(fx, 0, T0);
  uint64_t id = submit(fx, GiB, 1, 0, T0 + 5, NULL);
  assert_int_equal(fx->n_ev, 2);
  assert_int_equal(fx->ev[0].from, GPUMD_RESV_NEW);
  assert_int_equal(fx->ev[0].to, GPUMD_RESV_QUEUED);
  assert_int_equal(fx->ev[1].from, GPUMD_RESV_QUEUED);
  assert_int_equal(fx->ev[1].to, GPUMD_RESV_GRANTED);
  assert_int_equal(fx->ev[1].time_ns, T0 + 5);
  assert_string_equal(fx->ev[1].reason, "granted on GPU 0");
  const gpumd_resv_t *r = gpumd_sched_find(fx->s, id);
  assert_int_equal(r->id, 1);
  assert_int_equal(strlen(r->token), 32);
  assert_int_equal(strspn(r->token, "0123456789abcdef"), 32);
  assert_int_equal(r->granted_ns, T0 + 5);
  assert_int_equal(r->uid, 1000);
  /* Ids are monotonic; tokens differ. */
  uint64_t id2 = submit(fx, GiB, 1, 0, T0 + 6, NULL);
  assert_int_equal(id2, 2);
  assert_string_not_equal(gpumd_sched_find(fx->s, id2)->token, r->token);
  fx_free(fx);
}

/* ---- Resize (elastic reservations) -------------------------------------------------------- */

static void test_resize(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  set_dev(fx, 0, "GPU", 10 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  gpumd_resv_state_t st;
  uint64_t a = submit(fx, 4 * GiB, 1, 0, T0, &st), b = submit(fx, 4 * GiB, 1, 0, T0, &st);
  assert_int_equal(st, GPUMD_RESV_GRANTED);
  size_t events = fx->n_ev;
  char why[128];
  /* Grows into the room there is, to the byte, and no further. */
  assert_int_equal(gpumd_sched_resize(fx->s, NULL, a, 6 * GiB, T0 + 1, why, sizeof why), 0);
  assert_string_equal(why, "resized from 4.00 GiB to 6.00 GiB per GPU");
  assert_int_equal(gpumd_sched_find(fx->s, a)->bytes_per_gpu, 6 * GiB);
  gpumd_sched_device_stats_t ds;
  assert_int_equal(gpumd_sched_device_stats(fx->s, 0, &ds), 0);
  assert_int_equal(ds.reserved, 10 * GiB);
  assert_int_equal(gpumd_sched_resize(fx->s, NULL, b, 4 * GiB + 1, T0 + 1, why, sizeof why),
                   GPUM_EBUSY);
  assert_int_equal(gpumd_sched_find(fx->s, b)->bytes_per_gpu, 4 * GiB); /* unchanged */
  assert_int_equal(fx->n_ev, events);                                   /* no transition */
  /* A queued request of at least its priority comes before growth; a lower one does not. */
  assert_int_equal(gpumd_sched_resize(fx->s, NULL, a, 5 * GiB, T0 + 2, NULL, 0), 0);
  uint64_t q = submit(fx, 2 * GiB, 1, 0, T0 + 2, &st);
  assert_int_equal(st, GPUMD_RESV_QUEUED);
  assert_int_equal(gpumd_sched_resize(fx->s, NULL, b, 5 * GiB, T0 + 3, NULL, 0), GPUM_EBUSY);
  /* Shrinking gives the room back at once: the queued request is granted by it. */
  assert_int_equal(gpumd_sched_resize(fx->s, NULL, a, 4 * GiB, T0 + 4, why, sizeof why), 0);
  assert_string_equal(why, "resized from 5.00 GiB to 4.00 GiB per GPU");
  assert_int_equal(state_of(fx, q), GPUMD_RESV_GRANTED);
  /* Errors: not granted, unknown, zero, out-of-service device. */
  uint64_t w = submit(fx, 8 * GiB, 1, 0, T0 + 5, &st);
  assert_int_equal(st, GPUMD_RESV_QUEUED);
  assert_int_equal(gpumd_sched_resize(fx->s, NULL, w, 9 * GiB, T0 + 5, NULL, 0), GPUM_ESTATE);
  assert_int_equal(gpumd_sched_resize(fx->s, NULL, 999, GiB, T0 + 5, NULL, 0), GPUM_ENOENT);
  assert_int_equal(gpumd_sched_resize(fx->s, NULL, a, 0, T0 + 5, NULL, 0), GPUM_EINVAL);
  set_dev(fx, 0, "GPU", 20 * GiB, 0, GPUM_HEALTH_DISABLED, T0 + 6);
  assert_int_equal(gpumd_sched_resize(fx->s, NULL, b, 5 * GiB, T0 + 6, NULL, 0), GPUM_EBUSY);
  fx_free(fx);
}

/* ---- Placement -------------------------------------------------------------------------- */

static void test_placement_pack(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  set_dev(fx, 0, "GPU", 40 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  set_dev(fx, 1, "GPU", 40 * GiB, 25 * GiB, GPUM_HEALTH_AVAILABLE, T0); /* 15 GiB left */
  set_dev(fx, 2, "GPU", 20 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  uint64_t a = submit(fx, 10 * GiB, 1, 0, T0, NULL);
  assert_int_equal(mask_of(fx, a), 1u << 1); /* least left after placing: 5 GiB */
  uint64_t b = submit(fx, 10 * GiB, 1, 0, T0, NULL);
  assert_int_equal(mask_of(fx, b), 1u << 2); /* 10 GiB left beats 30 GiB */
  fx_free(fx);
}

static void test_placement_spread(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  o.placement = GPUMD_PLACEMENT_SPREAD;
  fx_t *fx = fx_new(&o);
  set_dev(fx, 0, "GPU", 40 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  set_dev(fx, 1, "GPU", 40 * GiB, 25 * GiB, GPUM_HEALTH_AVAILABLE, T0);
  set_dev(fx, 2, "GPU", 20 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  uint64_t a = submit(fx, 10 * GiB, 1, 0, T0, NULL);
  assert_int_equal(mask_of(fx, a), 1u << 0);
  uint64_t b = submit(fx, 10 * GiB, 1, 0, T0, NULL); /* dev 0: 20 left, dev 2: 10, dev 1: 5 */
  assert_int_equal(mask_of(fx, b), 1u << 0);
  uint64_t c = submit(fx, 10 * GiB, 1, 0, T0, NULL); /* dev 0: 10, dev 2: 10 -> lower index */
  assert_int_equal(mask_of(fx, c), 1u << 0);
  uint64_t d = submit(fx, 10 * GiB, 1, 0, T0, NULL); /* dev 0: 0, dev 2: 10 -> 2 */
  assert_int_equal(mask_of(fx, d), 1u << 2);
  fx_free(fx);
}

static void test_placement_score(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  o.placement = GPUMD_PLACEMENT_SCORE;
  fx_t *fx = fx_new(&o);
  gpumd_sched_device_t d;
  memset(&d, 0, sizeof(d));
  snprintf(d.name, sizeof(d.name), "GPU");
  d.memory_total = 40 * GiB;
  d.health = GPUM_HEALTH_BUSY; /* device 0: busy, hot, fully utilised */
  d.util_valid = d.temp_valid = true;
  d.util_gpu_pct = 100;
  d.temperature_c = 85;
  assert_int_equal(gpumd_sched_update_device(fx->s, NULL, &d, T0), 0);
  d.index = 1; /* device 1: same memory, idle and cool */
  d.health = GPUM_HEALTH_AVAILABLE;
  d.util_gpu_pct = 0;
  d.temperature_c = 35;
  assert_int_equal(gpumd_sched_update_device(fx->s, NULL, &d, T0), 0);
  uint64_t a = submit(fx, 10 * GiB, 1, 0, T0, NULL);
  assert_int_equal(mask_of(fx, a), 1u << 1);
  /* Pack would take the same memory tie by index: device 0. */
  o.placement = GPUMD_PLACEMENT_PACK;
  assert_int_equal(gpumd_sched_set_opts(fx->s, &o), 0);
  uint64_t b = submit(fx, 10 * GiB, 1, 0, T0, NULL);
  assert_int_equal(mask_of(fx, b), 1u << 1); /* device 1 has less left now: best fit */
  fx_free(fx);
}

static void test_error_and_disabled_get_nothing(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  set_dev(fx, 0, "GPU", 40 * GiB, 0, GPUM_HEALTH_ERROR, T0);
  set_dev(fx, 1, "GPU", 40 * GiB, 0, GPUM_HEALTH_DISABLED, T0);
  gpumd_resv_state_t s;
  uint64_t a = submit(fx, GiB, 1, 0, T0, &s);
  assert_int_equal(s, GPUMD_RESV_QUEUED); /* not never-fit: the devices may come back */
  char why[GPUMD_RESV_REASON_LEN];
  gpumd_sched_waiting_for(fx->s, a, why, sizeof(why));
  assert_non_null(strstr(why, "no matching device is usable now"));
  set_dev(fx, 1, "GPU", 40 * GiB, 0, GPUM_HEALTH_BUSY, T0 + 1);
  assert_int_equal(state_of(fx, a), GPUMD_RESV_GRANTED);
  assert_int_equal(mask_of(fx, a), 1u << 1);
  fx_free(fx);
}

static void test_multi_gpu_all_or_nothing(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  set_dev(fx, 0, "GPU", 40 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  set_dev(fx, 1, "GPU", 40 * GiB, 30 * GiB, GPUM_HEALTH_AVAILABLE, T0);
  set_dev(fx, 2, "GPU", 40 * GiB, 0, GPUM_HEALTH_ERROR, T0);
  gpumd_resv_state_t s;
  uint64_t a = submit(fx, 20 * GiB, 2, 0, T0, &s);
  assert_int_equal(s, GPUMD_RESV_QUEUED);
  gpumd_sched_device_stats_t st;
  for (unsigned d = 0; d < 3; d++) {
    assert_int_equal(gpumd_sched_device_stats(fx->s, d, &st), 0);
    assert_int_equal(st.reserved, 0); /* nothing held while waiting */
    assert_int_equal(st.jobs, 0);
  }
  char why[GPUMD_RESV_REASON_LEN];
  gpumd_sched_waiting_for(fx->s, a, why, sizeof(why));
  assert_string_equal(why, "20.00 GiB free on 2 devices; 1 of 2 fit now, best: 40.00 GiB on GPU 0");
  set_dev(fx, 1, "GPU", 40 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0 + 1);
  assert_int_equal(state_of(fx, a), GPUMD_RESV_GRANTED);
  assert_int_equal(mask_of(fx, a), 3u);
  for (unsigned d = 0; d < 2; d++) {
    assert_int_equal(gpumd_sched_device_stats(fx->s, d, &st), 0);
    assert_int_equal(st.reserved, 20 * GiB);
    assert_int_equal(st.jobs, 1);
  }
  assert_string_equal(last_event(fx, a)->reason, "granted on GPU 0,1");
  fx_free(fx);
}

/* ---- Never-fit -------------------------------------------------------------------------- */

static void expect_never_fit(fx_t *fx, gpumd_sched_request_t *q, const char *needle) {
  size_t before = gpumd_sched_count(fx->s);
  uint64_t next = gpumd_sched_next_id(fx->s);
  size_t events = fx->n_ev;
  const gpumd_resv_t *r = (const gpumd_resv_t *)0x1;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, q, T0, &r), GPUMD_SCHED_ENEVERFIT);
  if (strstr(gpum_last_error(), needle) == NULL)
    fail_msg("reason '%s' lacks '%s'", gpum_last_error(), needle);
  assert_int_equal(gpumd_sched_count(fx->s), before);
  assert_int_equal(gpumd_sched_next_id(fx->s), next);
  assert_int_equal(fx->n_ev, events);
}

static void test_never_fit(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  gpumd_sched_opts_init(&o); /* 0.95, 256 MiB */
  fx_t *fx = fx_new(&o);
  add_h100(fx, 0, T0);
  add_h100(fx, 1, T0);
  set_dev(fx, 2, "NVIDIA A100-SXM4-40GB", 40 * GiB, 39 * GiB, GPUM_HEALTH_ERROR, T0);
  gpumd_sched_request_t q;
  gpumd_sched_request_init(&q);
  q.bytes_per_gpu = GiB;

  q.model = "*V100*";
  expect_never_fit(fx, &q, "no device on this node matching model '*V100*'");
  q.model = "*A100*";
  q.gpus = 2;
  expect_never_fit(fx, &q, "needs 2 GPUs but only 1 device matching model '*A100*'");
  q.model = NULL;
  q.gpus = 4;
  expect_never_fit(fx, &q, "needs 4 GPUs but only 3 devices exist");
  /* 80 GiB x 0.95 - 256 MiB = 75.75 GiB: one byte more never fits even on an empty H100. */
  q.gpus = 1;
  q.bytes_per_gpu = 80 * GiB * 95 / 100 - 256 * MiB + 1;
  expect_never_fit(fx, &q, "only 0 devices can ever hold that (largest: 75.75 GiB on GPU 0");
  /* 37.75 GiB fits the A100 when empty (unmanaged and ERROR do not count), not 3 of them. */
  q.bytes_per_gpu = 30 * GiB;
  q.gpus = 3;
  gpumd_resv_state_t s;
  (void)s;
  q.model = NULL;
  const gpumd_resv_t *r = NULL;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, T0, &r), 0);
  assert_int_equal(r->state, GPUMD_RESV_QUEUED);
  q.bytes_per_gpu = 40 * GiB;
  expect_never_fit(fx, &q, "on each of 3 GPUs but only 2 devices");
  q.bytes_per_gpu = GiB;
  q.gpus = 1;
  q.min_memory = 100 * GiB;
  expect_never_fit(fx, &q, "no device on this node matching min_memory 100.00 GiB");
  q.min_memory = 0;
  const char *missing[] = {"7"};
  q.devices = missing;
  q.device_count = 1;
  expect_never_fit(fx, &q, "device 7 does not exist");
  const char *missing_uuid[] = {"0", "GPU-nope"};
  q.devices = missing_uuid;
  q.device_count = 2;
  expect_never_fit(fx, &q, "device GPU-nope does not exist");
  const char *two[] = {"GPU-test-1"};
  q.devices = two;
  q.device_count = 1;
  q.gpus = 2;
  expect_never_fit(fx, &q, "needs 2 GPUs but only 1 device matching devices 1");
  /* An explicit UUID grants there. */
  q.gpus = 1;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, T0, &r), 0);
  assert_int_equal(r->state, GPUMD_RESV_GRANTED);
  assert_int_equal(r->device_mask, 1u << 1);
  fx_free(fx);
}

static void test_bad_requests(void **state) {
  (void)state;
  fx_t *fx = fx_new(NULL);
  add_h100(fx, 0, T0);
  gpumd_sched_request_t q;
  gpumd_sched_request_init(&q);
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, T0, NULL), GPUM_EINVAL); /* 0 bytes */
  q.bytes_per_gpu = GiB;
  q.gpus = 0;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, T0, NULL), GPUM_EINVAL);
  q.gpus = 65;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, T0, NULL), GPUM_EINVAL);
  q.gpus = 1;
  q.priority = 101;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, T0, NULL), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "priority 101"));
  q.priority = 0;
  char longlabel[300];
  memset(longlabel, 'x', sizeof(longlabel) - 1);
  longlabel[sizeof(longlabel) - 1] = '\0';
  q.label = longlabel;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, T0, NULL), GPUM_EINVAL);
  q.label = NULL;
  const char *bad[] = {"1x"};
  q.devices = bad;
  q.device_count = 1;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, T0, NULL), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "'1x'"));
  const char *empty[] = {""};
  q.devices = empty;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, T0, NULL), GPUM_EINVAL);
  assert_int_equal(gpumd_sched_count(fx->s), 0);
  gpumd_sched_opts_t o;
  gpumd_sched_opts_init(&o);
  o.memory_fraction = 1.5;
  assert_int_equal(gpumd_sched_set_opts(fx->s, &o), GPUM_EINVAL);
  gpumd_sched_opts_init(&o);
  o.pressure_critical = 0.5; /* below high */
  assert_int_equal(gpumd_sched_set_opts(fx->s, &o), GPUM_EINVAL);
  gpumd_sched_t *s2 = NULL;
  assert_int_equal(gpumd_sched_create(&o, NULL, &s2), GPUM_EINVAL);
  gpumd_sched_device_t d = {.index = 64};
  assert_int_equal(gpumd_sched_update_device(fx->s, NULL, &d, T0), GPUM_EINVAL);
  fx_free(fx);
}

/* ---- Queue order ------------------------------------------------------------------------ */

/* One 10 GiB device filled by a 10 GiB reservation; returns its id. */
static uint64_t fill_one(fx_t *fx) {
  set_dev(fx, 0, "GPU", 10 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  gpumd_resv_state_t s;
  uint64_t id = submit(fx, 10 * GiB, 1, 0, T0, &s);
  assert_int_equal(s, GPUMD_RESV_GRANTED);
  return id;
}

static void test_priority_order(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  o.backfill = false;
  fx_t *fx = fx_new(&o);
  uint64_t filler = fill_one(fx);
  uint64_t lo = submit(fx, 6 * GiB, 1, -5, T0 + 1, NULL);
  uint64_t mid = submit(fx, 6 * GiB, 1, 0, T0 + 2, NULL);
  uint64_t hi = submit(fx, 6 * GiB, 1, 50, T0 + 3, NULL);
  assert_int_equal(gpumd_sched_queue_length(fx->s), 3);
  assert_int_equal(gpumd_sched_queue_at(fx->s, 0)->id, hi);
  assert_int_equal(gpumd_sched_queue_at(fx->s, 1)->id, mid);
  assert_int_equal(gpumd_sched_queue_at(fx->s, 2)->id, lo);
  size_t pos;
  assert_int_equal(gpumd_sched_queue_position(fx->s, lo, &pos), 0);
  assert_int_equal(pos, 2);
  assert_int_equal(gpumd_sched_queue_position(fx->s, filler, &pos), GPUM_ENOENT);
  assert_int_equal(gpumd_sched_release(fx->s, NULL, filler, T0 + 4, NULL), 0);
  assert_int_equal(state_of(fx, hi), GPUMD_RESV_GRANTED);
  assert_int_equal(state_of(fx, mid), GPUMD_RESV_QUEUED);
  assert_int_equal(gpumd_sched_release(fx->s, NULL, hi, T0 + 5, NULL), 0);
  assert_int_equal(state_of(fx, mid), GPUMD_RESV_GRANTED);
  assert_int_equal(state_of(fx, lo), GPUMD_RESV_QUEUED);
  fx_free(fx);
}

static void test_fifo_within_priority(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  o.backfill = false;
  fx_t *fx = fx_new(&o);
  uint64_t filler = fill_one(fx);
  uint64_t ids[4];
  for (int i = 0; i < 4; i++)
    ids[i] = submit(fx, 6 * GiB, 1, 7, T0 + 1 + (uint64_t)i, NULL);
  for (size_t i = 0; i < 4; i++)
    assert_int_equal(gpumd_sched_queue_at(fx->s, i)->id, ids[i]);
  uint64_t prev = filler;
  for (int i = 0; i < 4; i++) {
    assert_int_equal(gpumd_sched_release(fx->s, NULL, prev, T0 + 10 + (uint64_t)i, NULL), 0);
    assert_int_equal(state_of(fx, ids[i]), GPUMD_RESV_GRANTED);
    for (int j = i + 1; j < 4; j++)
      assert_int_equal(state_of(fx, ids[j]), GPUMD_RESV_QUEUED);
    prev = ids[i];
  }
  fx_free(fx);
}

/* ---- Backfill --------------------------------------------------------------------------- */

static void test_backfill_within_bound(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  o.backfill_bound_ns = 30 * SEC;
  fx_t *fx = fx_new(&o);
  set_dev(fx, 0, "GPU", 10 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  uint64_t big0 = submit(fx, 6 * GiB, 1, 0, T0, NULL);
  uint64_t head = submit(fx, 8 * GiB, 1, 0, T0 + 1 * SEC, NULL); /* blocked */
  gpumd_resv_state_t s;
  uint64_t small = submit(fx, 2 * GiB, 1, 0, T0 + 10 * SEC, &s); /* head waited 9 s */
  assert_int_equal(s, GPUMD_RESV_GRANTED);
  assert_string_equal(last_event(fx, small)->reason, "granted on GPU 0 (backfilled past r-2)");
  assert_int_equal(state_of(fx, head), GPUMD_RESV_QUEUED);
  /* The head gets its turn when memory frees. */
  assert_int_equal(gpumd_sched_release(fx->s, NULL, big0, T0 + 11 * SEC, NULL), 0);
  assert_int_equal(state_of(fx, head), GPUMD_RESV_GRANTED);
  fx_free(fx);
}

static void test_backfill_bound_protects_head(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  o.backfill_bound_ns = 30 * SEC;
  fx_t *fx = fx_new(&o);
  set_dev(fx, 0, "GPU", 10 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  uint64_t big0 = submit(fx, 6 * GiB, 1, 0, T0, NULL);
  uint64_t head = submit(fx, 8 * GiB, 1, 0, T0 + 1 * SEC, NULL);
  gpumd_resv_state_t s;
  /* The head has waited 31 s > 30 s: nothing passes it any more. */
  uint64_t small = submit(fx, 2 * GiB, 1, 0, T0 + 32 * SEC, &s);
  assert_int_equal(s, GPUMD_RESV_QUEUED);
  char why[GPUMD_RESV_REASON_LEN];
  gpumd_sched_waiting_for(fx->s, small, why, sizeof(why));
  assert_string_equal(why, "behind r-2 (blocked head past the backfill bound)");
  gpumd_sched_waiting_for(fx->s, head, why, sizeof(why));
  assert_string_equal(why, "8.00 GiB free on 1 device; best now: 4.00 GiB on GPU 0");
  /* A tick does not change that; releasing the blocker grants the head, then the small one. */
  gpumd_sched_tick(fx->s, NULL, T0 + 40 * SEC, NULL);
  assert_int_equal(state_of(fx, small), GPUMD_RESV_QUEUED);
  assert_int_equal(gpumd_sched_release(fx->s, NULL, big0, T0 + 41 * SEC, NULL), 0);
  assert_int_equal(state_of(fx, head), GPUMD_RESV_GRANTED);
  assert_int_equal(state_of(fx, small), GPUMD_RESV_GRANTED);
  fx_free(fx);
}

static void test_backfill_disabled(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  o.backfill = false;
  fx_t *fx = fx_new(&o);
  set_dev(fx, 0, "GPU", 10 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  submit(fx, 6 * GiB, 1, 0, T0, NULL);
  submit(fx, 8 * GiB, 1, 0, T0, NULL);
  gpumd_resv_state_t s;
  submit(fx, 2 * GiB, 1, 0, T0, &s); /* same instant: still no passing */
  assert_int_equal(s, GPUMD_RESV_QUEUED);
  fx_free(fx);
}

/* Submits bytes pinned to one device index. */
static uint64_t submit_on(fx_t *fx, uint64_t bytes, const char *dev, uint64_t now,
                          gpumd_resv_state_t *state) {
  const char *devs[] = {dev};
  gpumd_sched_request_t q;
  gpumd_sched_request_init(&q);
  q.bytes_per_gpu = bytes;
  q.devices = devs;
  q.device_count = 1;
  const gpumd_resv_t *r = NULL;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, now, &r), 0);
  *state = r->state;
  return r->id;
}

static void test_locked_head_leaves_other_devices_open(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  o.backfill = false; /* the head is protected at once */
  fx_t *fx = fx_new(&o);
  set_dev(fx, 0, "GPU", 10 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  set_dev(fx, 1, "GPU", 10 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  gpumd_resv_state_t s;
  submit_on(fx, 6 * GiB, "0", T0, &s);
  uint64_t head = submit_on(fx, 8 * GiB, "0", T0, &s); /* blocked, wants only GPU 0 */
  assert_int_equal(s, GPUMD_RESV_QUEUED);
  uint64_t same = submit_on(fx, 2 * GiB, "0", T0, &s); /* would delay the head */
  assert_int_equal(s, GPUMD_RESV_QUEUED);
  uint64_t any = submit(fx, 2 * GiB, 1, 0, T0, &s); /* goes to GPU 1, which the head cannot use */
  assert_int_equal(s, GPUMD_RESV_GRANTED);
  assert_int_equal(mask_of(fx, any), 1u << 1);
  assert_int_equal(state_of(fx, same), GPUMD_RESV_QUEUED);
  /* A head whose only device failed holds nothing back. */
  set_dev(fx, 0, "GPU", 10 * GiB, 0, GPUM_HEALTH_ERROR, T0 + 1);
  assert_int_equal(state_of(fx, head), GPUMD_RESV_QUEUED);
  uint64_t later = submit(fx, 2 * GiB, 1, 0, T0 + 2, &s);
  assert_int_equal(s, GPUMD_RESV_GRANTED);
  assert_int_equal(mask_of(fx, later), 1u << 1);
  fx_free(fx);
}

/* ---- Timeouts --------------------------------------------------------------------------- */

static uint64_t submit_timeout(fx_t *fx, uint64_t timeout_ms, gpumd_on_timeout_t action,
                               uint64_t now) {
  gpumd_sched_request_t q;
  gpumd_sched_request_init(&q);
  q.bytes_per_gpu = 8 * GiB;
  q.timeout_ms = timeout_ms;
  q.on_timeout = action;
  const gpumd_resv_t *r = NULL;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, now, &r), 0);
  assert_int_equal(r->state, GPUMD_RESV_QUEUED);
  return r->id;
}

static void test_timeout_reject(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  fill_one(fx);
  uint64_t id = submit_timeout(fx, 5000, GPUMD_ON_TIMEOUT_REJECT, T0 + SEC);
  uint64_t next = 0;
  gpumd_sched_tick(fx->s, NULL, T0 + 2 * SEC, &next);
  assert_int_equal(next, T0 + 6 * SEC);
  gpumd_sched_tick(fx->s, NULL, T0 + 6 * SEC - 1, &next);
  assert_int_equal(state_of(fx, id), GPUMD_RESV_QUEUED);
  gpumd_sched_tick(fx->s, NULL, T0 + 6 * SEC, &next);
  assert_null(gpumd_sched_find(fx->s, id));
  const event_t *e = last_event(fx, id);
  assert_int_equal(e->from, GPUMD_RESV_QUEUED);
  assert_int_equal(e->to, GPUMD_RESV_EXPIRED);
  assert_int_equal(e->time_ns, T0 + 6 * SEC);
  assert_non_null(strstr(e->reason, "queue timeout of 5s passed; was waiting for 8.00 GiB"));
  assert_int_equal(next, UINT64_MAX);
  assert_int_equal(gpumd_sched_queue_length(fx->s), 0);
  fx_free(fx);
}

static void test_timeout_wait(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  uint64_t filler = fill_one(fx);
  uint64_t id = submit_timeout(fx, 1000, GPUMD_ON_TIMEOUT_WAIT, T0);
  size_t before = fx->n_ev;
  uint64_t next = 0;
  gpumd_sched_tick(fx->s, NULL, T0 + 5 * SEC, &next);
  assert_int_equal(state_of(fx, id), GPUMD_RESV_QUEUED);
  assert_int_equal(fx->n_ev, before + 1); /* told once */
  assert_int_equal(fx->ev[before].from, GPUMD_RESV_QUEUED);
  assert_int_equal(fx->ev[before].to, GPUMD_RESV_QUEUED);
  assert_string_equal(fx->ev[before].reason, "queue timeout of 1s passed; still waiting");
  assert_int_equal(next, UINT64_MAX);
  gpumd_sched_tick(fx->s, NULL, T0 + 9 * SEC, &next);
  assert_int_equal(fx->n_ev, before + 1);
  assert_int_equal(gpumd_sched_release(fx->s, NULL, filler, T0 + 10 * SEC, NULL), 0);
  assert_int_equal(state_of(fx, id), GPUMD_RESV_GRANTED);
  fx_free(fx);
}

/* ---- max_concurrent_jobs ---------------------------------------------------------------- */

static void test_max_concurrent_jobs(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  o.max_concurrent_jobs = 2;
  fx_t *fx = fx_new(&o);
  add_h100(fx, 0, T0);
  gpumd_resv_state_t s;
  uint64_t a = submit(fx, GiB, 1, 0, T0, &s);
  assert_int_equal(s, GPUMD_RESV_GRANTED);
  submit(fx, GiB, 1, 0, T0, &s);
  assert_int_equal(s, GPUMD_RESV_GRANTED);
  uint64_t c = submit(fx, GiB, 1, 0, T0, &s);
  assert_int_equal(s, GPUMD_RESV_QUEUED); /* memory is plenty; the job count is not */
  add_h100(fx, 1, T0 + 1);                /* a second device takes it */
  assert_int_equal(state_of(fx, c), GPUMD_RESV_GRANTED);
  assert_int_equal(mask_of(fx, c), 1u << 1);
  uint64_t d = submit(fx, GiB, 1, 0, T0 + 2, &s);
  assert_int_equal(s, GPUMD_RESV_GRANTED);
  uint64_t e = submit(fx, GiB, 1, 0, T0 + 2, &s);
  assert_int_equal(s, GPUMD_RESV_QUEUED);
  assert_int_equal(gpumd_sched_release(fx->s, NULL, a, T0 + 3, NULL), 0);
  assert_int_equal(state_of(fx, e), GPUMD_RESV_GRANTED);
  assert_int_equal(mask_of(fx, e), 1u << 0);
  (void)d;
  fx_free(fx);
}

/* ---- Device loss ------------------------------------------------------------------------ */

static void test_device_loss(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  set_dev(fx, 0, "GPU", 40 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  set_dev(fx, 1, "GPU", 40 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  const char *on1[] = {"1"};
  gpumd_sched_request_t q;
  gpumd_sched_request_init(&q);
  q.bytes_per_gpu = 30 * GiB;
  q.devices = on1;
  q.device_count = 1;
  const gpumd_resv_t *r;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, T0, &r), 0);
  uint64_t on_dev1 = r->id;
  uint64_t both = submit(fx, 5 * GiB, 2, 0, T0, NULL);
  uint64_t on_dev0 = submit(fx, 20 * GiB, 1, 0, T0, NULL);
  assert_int_equal(mask_of(fx, both), 3u);
  assert_int_equal(mask_of(fx, on_dev0), 1u << 0);
  gpumd_resv_state_t s;
  uint64_t waiting = submit(fx, 20 * GiB, 1, 0, T0, &s); /* dev 0: 15 left, dev 1: 5 left */
  assert_int_equal(s, GPUMD_RESV_QUEUED);
  /* Device 0 falls off the bus. */
  set_dev(fx, 0, "GPU", 40 * GiB, 0, GPUM_HEALTH_ERROR, T0 + SEC);
  assert_int_equal(state_of(fx, both), GPUMD_RESV_FAILED);
  assert_int_equal(state_of(fx, on_dev0), GPUMD_RESV_FAILED);
  const event_t *e = last_event(fx, on_dev0);
  assert_string_equal(e->reason, "GPU 0 (GPU-test-0) failed: XID 79: fallen off the bus");
  assert_int_equal(e->time_ns, T0 + SEC);
  assert_int_equal(state_of(fx, on_dev1), GPUMD_RESV_GRANTED);
  /* The multi-GPU one also freed its share of device 1, so the queued one is re-placed. */
  assert_int_equal(state_of(fx, waiting), GPUMD_RESV_QUEUED); /* 10 GiB left on dev 1 */
  assert_int_equal(gpumd_sched_release(fx->s, NULL, on_dev1, T0 + 2 * SEC, NULL), 0);
  assert_int_equal(state_of(fx, waiting), GPUMD_RESV_GRANTED);
  assert_int_equal(mask_of(fx, waiting), 1u << 1);
  gpumd_sched_device_stats_t st;
  assert_int_equal(gpumd_sched_device_stats(fx->s, 0, &st), 0);
  assert_int_equal(st.reserved, 0);
  assert_int_equal(st.jobs, 0);
  fx_free(fx);
}

/* ---- Pressure --------------------------------------------------------------------------- */

static void set_used(fx_t *fx, uint64_t used, uint64_t now) {
  gpumd_sched_device_t d;
  assert_int_equal(gpumd_sched_device(fx->s, 0, &d), 0);
  d.memory_used = used;
  assert_int_equal(gpumd_sched_update_device(fx->s, NULL, &d, now), 0);
}

static void test_pressure(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o); /* high 0.90, critical 0.97 */
  fx_t *fx = fx_new(&o);
  set_dev(fx, 0, "GPU", 100 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  assert_int_equal(fx->n_pev, 0);
  set_used(fx, 89 * GiB, T0);
  assert_int_equal(fx->n_pev, 0);
  set_used(fx, 90 * GiB, T0);
  assert_int_equal(fx->n_pev, 1);
  assert_int_equal(fx->pev[0].from, GPUMD_PRESSURE_NONE);
  assert_int_equal(fx->pev[0].to, GPUMD_PRESSURE_HIGH);
  set_used(fx, 92 * GiB, T0); /* same level: no event */
  assert_int_equal(fx->n_pev, 1);
  gpumd_resv_state_t s;
  submit(fx, GiB, 1, 0, T0, &s); /* high still grants */
  assert_int_equal(s, GPUMD_RESV_GRANTED);
  set_used(fx, 98 * GiB, T0);
  assert_int_equal(fx->n_pev, 2);
  assert_int_equal(fx->pev[1].to, GPUMD_PRESSURE_CRITICAL);
  gpumd_sched_device_stats_t st;
  assert_int_equal(gpumd_sched_device_stats(fx->s, 0, &st), 0);
  assert_int_equal(st.pressure, GPUMD_PRESSURE_CRITICAL);
  assert_true(st.used_ratio > 0.979 && st.used_ratio < 0.981);
  uint64_t id = submit(fx, GiB, 1, 0, T0, &s); /* critical: no new grant */
  assert_int_equal(s, GPUMD_RESV_QUEUED);
  set_used(fx, 50 * GiB, T0 + 1);
  assert_int_equal(fx->n_pev, 3);
  assert_int_equal(fx->pev[2].from, GPUMD_PRESSURE_CRITICAL);
  assert_int_equal(fx->pev[2].to, GPUMD_PRESSURE_NONE);
  assert_int_equal(state_of(fx, id), GPUMD_RESV_GRANTED);
  assert_int_equal(gpumd_sched_pressure_level(fx->s, 0.95), GPUMD_PRESSURE_HIGH);
  fx_free(fx);
}

/* ---- Release, restore, names ------------------------------------------------------------ */

static void test_release_and_cancel(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  uint64_t filler = fill_one(fx);
  uint64_t q = submit(fx, GiB, 1, 0, T0, NULL);
  assert_int_equal(gpumd_sched_release(fx->s, NULL, q, T0 + 1, "client asked"), 0);
  const event_t *e = last_event(fx, q);
  assert_int_equal(e->to, GPUMD_RESV_CANCELLED);
  assert_string_equal(e->reason, "client asked");
  assert_int_equal(gpumd_sched_release(fx->s, NULL, q, T0 + 2, NULL), GPUM_ENOENT);
  assert_int_equal(gpumd_sched_end(fx->s, NULL, filler, GPUMD_RESV_GRANTED, T0, NULL), GPUM_EINVAL);
  assert_int_equal(gpumd_sched_end(fx->s, NULL, filler, GPUMD_RESV_EXPIRED, T0 + 3, "ttl"), 0);
  e = last_event(fx, filler);
  assert_int_equal(e->from, GPUMD_RESV_GRANTED);
  assert_int_equal(e->to, GPUMD_RESV_EXPIRED);
  assert_int_equal(gpumd_sched_count(fx->s), 0);
  assert_int_equal(gpumd_sched_release(fx->s, NULL, 999, T0, NULL), GPUM_ENOENT);
  assert_non_null(strstr(gpum_last_error(), "r-999"));
  fx_free(fx);
}

/* Every transition reaches on_transition with the cause given to the call that caused it:
 * the submitter's for its reservation's creation and grant, the releaser's for the release
 * and for the queued reservation that release grants, the device update's for a failure, the
 * tick's for an expiry, and NULL where the caller gave none. */
static void test_cause_reaches_callback(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  add_h100(fx, 0, T0);
  gpumd_cause_t by_a = {.about = 1}, by_b = {.about = 2}, by_rel = {.about = 3};
  gpumd_cause_t by_dev = {.about = 4}, by_tick = {.about = 5};
  gpumd_sched_request_t q;
  gpumd_sched_request_init(&q);
  q.bytes_per_gpu = 50 * GiB;
  const gpumd_resv_t *r = NULL;
  size_t first = fx->n_ev;
  assert_int_equal(gpumd_sched_submit(fx->s, &by_a, &q, T0, &r), 0);
  uint64_t a = r->id;
  assert_int_equal(fx->n_ev, first + 2); /* NEW->QUEUED, QUEUED->GRANTED */
  assert_ptr_equal(fx->ev[first].cause, &by_a);
  assert_ptr_equal(fx->ev[first + 1].cause, &by_a);
  assert_int_equal(gpumd_sched_submit(fx->s, &by_b, &q, T0, &r), 0);
  uint64_t b = r->id;
  assert_int_equal(r->state, GPUMD_RESV_QUEUED);
  assert_ptr_equal(last_event(fx, b)->cause, &by_b);
  /* a's release grants b: both transitions are the releaser's. */
  assert_int_equal(gpumd_sched_release(fx->s, &by_rel, a, T0 + 1, NULL), 0);
  assert_ptr_equal(last_event(fx, a)->cause, &by_rel);
  assert_int_equal(last_event(fx, b)->to, GPUMD_RESV_GRANTED);
  assert_ptr_equal(last_event(fx, b)->cause, &by_rel);
  /* The device fails under b: the device update's cause. */
  set_dev(fx, 0, "NVIDIA H100 80GB HBM3", 80 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0 + 2);
  gpumd_sched_device_t d;
  assert_int_equal(gpumd_sched_device(fx->s, 0, &d), 0);
  d.health = GPUM_HEALTH_ERROR;
  d.gone = true;
  assert_int_equal(gpumd_sched_update_device(fx->s, &by_dev, &d, T0 + 3), 0);
  assert_int_equal(last_event(fx, b)->to, GPUMD_RESV_FAILED);
  assert_ptr_equal(last_event(fx, b)->cause, &by_dev);
  /* A queue timeout: the tick's. */
  q.timeout_ms = 1000;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, T0 + 4, &r), 0);
  uint64_t c = r->id;
  assert_null(last_event(fx, c)->cause);
  gpumd_sched_tick(fx->s, &by_tick, T0 + 4 + 2 * SEC, NULL);
  assert_int_equal(last_event(fx, c)->to, GPUMD_RESV_EXPIRED);
  assert_ptr_equal(last_event(fx, c)->cause, &by_tick);
  fx_free(fx);
}

static void test_restore(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  set_dev(fx, 0, "GPU", 10 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  gpumd_resv_t g;
  memset(&g, 0, sizeof(g));
  g.id = 41;
  g.state = GPUMD_RESV_GRANTED;
  g.bytes_per_gpu = 6 * GiB;
  g.gpus = 1;
  g.device_mask = 1;
  assert_int_equal(gpumd_sched_restore(fx->s, &g), 0);
  assert_int_equal(gpumd_sched_restore(fx->s, &g), GPUM_EEXIST);
  gpumd_resv_t qd = g;
  qd.id = 40;
  qd.state = GPUMD_RESV_QUEUED;
  qd.bytes_per_gpu = 8 * GiB;
  assert_int_equal(gpumd_sched_restore(fx->s, &qd), 0);
  gpumd_resv_t bad = g;
  bad.id = 50;
  bad.state = GPUMD_RESV_RELEASED;
  assert_int_equal(gpumd_sched_restore(fx->s, &bad), GPUM_EINVAL);
  assert_int_equal(fx->n_ev, 0); /* restore reports nothing */
  assert_int_equal(gpumd_sched_next_id(fx->s), 42);
  gpumd_sched_set_next_id(fx->s, 100);
  gpumd_sched_set_next_id(fx->s, 7); /* never goes down */
  assert_int_equal(gpumd_sched_next_id(fx->s), 100);
  gpumd_sched_device_stats_t st;
  assert_int_equal(gpumd_sched_device_stats(fx->s, 0, &st), 0);
  assert_int_equal(st.reserved, 6 * GiB);
  assert_int_equal(gpumd_sched_at(fx->s, 0)->id, 40); /* id order */
  gpumd_sched_tick(fx->s, NULL, T0, NULL);
  assert_int_equal(state_of(fx, 40), GPUMD_RESV_QUEUED);
  assert_int_equal(gpumd_sched_release(fx->s, NULL, 41, T0, NULL), 0);
  assert_int_equal(state_of(fx, 40), GPUMD_RESV_GRANTED);
  uint64_t id = submit(fx, GiB, 1, 0, T0, NULL);
  assert_int_equal(id, 100);
  fx_free(fx);
}

static void test_names_and_ids(void **state) {
  (void)state;
  char buf[GPUMD_RESV_ID_BUFSZ];
  assert_string_equal(gpumd_resv_id_format(UINT64_MAX, buf, sizeof(buf)), "r-18446744073709551615");
  assert_string_equal(gpumd_resv_id_format(0, buf, sizeof(buf)), "r-0");
  /* gpumd_cat / gpumd_cat_u64: appended at *off, cut at the end of the buffer, NUL-terminated. */
  char small[8] = "";
  size_t off = 0;
  gpumd_cat(small, sizeof(small), &off, "abc");
  assert_string_equal(small, "abc");
  assert_int_equal(off, 3);
  gpumd_cat_u64(small, sizeof(small), &off, 123456);
  assert_string_equal(small, "abc1234");
  assert_int_equal(off, 7);
  gpumd_cat(small, sizeof(small), &off, "x");
  assert_string_equal(small, "abc1234");
  assert_int_equal(off, 7);
  off = 0;
  gpumd_cat_u64(small, sizeof(small), &off, 0);
  assert_string_equal(small, "0");
  uint64_t id = 0;
  assert_int_equal(gpumd_resv_id_parse("r-17", &id), 0);
  assert_int_equal(id, 17);
  const char *bad[] = {"r-0", "r-", "17", "r-1x", "r--1", "R-1", "r-99999999999999999999"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(gpumd_resv_id_parse(bad[i], &id), GPUM_EINVAL);
  gpumd_resv_state_t s;
  for (int i = GPUMD_RESV_QUEUED; i <= GPUMD_RESV_FAILED; i++) {
    assert_int_equal(gpumd_resv_state_parse(gpumd_resv_state_name((gpumd_resv_state_t)i), &s), 0);
    assert_int_equal(s, i);
  }
  assert_int_equal(gpumd_resv_state_parse("NEW", &s), GPUM_EINVAL);
  assert_string_equal(gpumd_resv_state_name(GPUMD_RESV_NEW), "NEW");
  assert_true(gpumd_resv_state_final(GPUMD_RESV_CANCELLED));
  assert_false(gpumd_resv_state_final(GPUMD_RESV_GRANTED));
  gpumd_lease_kind_t k;
  assert_int_equal(gpumd_lease_kind_parse("TTL", &k), 0);
  assert_int_equal(k, GPUMD_LEASE_TTL);
  assert_int_equal(gpumd_lease_kind_parse("socket", &k), GPUM_EINVAL);
  gpumd_placement_t p;
  assert_int_equal(gpumd_placement_parse("spread", &p), 0);
  assert_int_equal(p, GPUMD_PLACEMENT_SPREAD);
  assert_int_equal(gpumd_placement_parse("random", &p), GPUM_EINVAL);
  gpumd_on_timeout_t t;
  assert_int_equal(gpumd_on_timeout_parse("wait", &t), 0);
  assert_int_equal(t, GPUMD_ON_TIMEOUT_WAIT);
  assert_int_equal(gpumd_on_timeout_parse("", &t), GPUM_EINVAL);
  assert_string_equal(gpumd_pressure_name(GPUMD_PRESSURE_CRITICAL), "critical");
}

/* ---- Invariants under random operations --------------------------------------------------- */

/* xorshift64: deterministic, seeded. */
static uint64_t rnd(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

/* Per device: reserved and jobs equal the sums over live GRANTED reservations; nothing granted
 * sits on an ERROR device; the job limit holds; the queue is in service order and holds
 * exactly the QUEUED reservations. */
static void check_invariants(const fx_t *fx, unsigned max_jobs) {
  uint64_t reserved[4] = {0};
  unsigned jobs[4] = {0};
  size_t queued = 0;
  for (size_t i = 0; i < gpumd_sched_count(fx->s); i++) {
    const gpumd_resv_t *r = gpumd_sched_at(fx->s, i);
    if (i > 0)
      assert_true(gpumd_sched_at(fx->s, i - 1)->id < r->id);
    if (r->state == GPUMD_RESV_QUEUED) {
      queued++;
      assert_int_equal(r->device_mask, 0);
      continue;
    }
    assert_int_equal(r->state, GPUMD_RESV_GRANTED);
    assert_int_equal(__builtin_popcountll(r->device_mask), r->gpus);
    for (unsigned d = 0; d < 4; d++)
      if (r->device_mask & (1u << d)) {
        reserved[d] += r->bytes_per_gpu;
        jobs[d]++;
      }
  }
  assert_int_equal(gpumd_sched_queue_length(fx->s), queued);
  for (size_t i = 1; i < queued; i++) {
    const gpumd_resv_t *a = gpumd_sched_queue_at(fx->s, i - 1), *b = gpumd_sched_queue_at(fx->s, i);
    assert_true(a->priority > b->priority || (a->priority == b->priority && a->id < b->id));
  }
  for (unsigned d = 0; d < 4; d++) {
    gpumd_sched_device_stats_t st;
    gpumd_sched_device_t v;
    assert_int_equal(gpumd_sched_device_stats(fx->s, d, &st), 0);
    assert_int_equal(gpumd_sched_device(fx->s, d, &v), 0);
    assert_int_equal(st.reserved, reserved[d]);
    assert_int_equal(st.jobs, jobs[d]);
    assert_true(jobs[d] <= max_jobs);
    if (v.health == GPUM_HEALTH_ERROR)
      assert_int_equal(jobs[d], 0);
  }
}

static void test_random_operations_keep_invariants(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  gpumd_sched_opts_init(&o);
  o.max_concurrent_jobs = 5;
  o.backfill_bound_ns = 20 * SEC;
  fx_t *fx = fx_new(&o);
  uint64_t x = 0x9e3779b97f4a7c15ull, now = T0;
  for (unsigned d = 0; d < 4; d++)
    set_dev(fx, d, d < 2 ? "H100" : "A100", (d < 2 ? 80 : 40) * GiB, 0, GPUM_HEALTH_AVAILABLE, now);
  for (int step = 0; step < 3000; step++) {
    fx->n_ev = 0; /* only the transitions of one step are kept */
    now += rnd(&x) % (2 * SEC);
    uint64_t k = rnd(&x) % 100;
    if (k < 45) {
      gpumd_sched_request_t q;
      gpumd_sched_request_init(&q);
      q.bytes_per_gpu = (1 + rnd(&x) % 36) * GiB;
      q.gpus = 1 + (unsigned)(rnd(&x) % 3);
      q.priority = (int)(rnd(&x) % 3) - 1;
      q.timeout_ms = rnd(&x) % 4 == 0 ? 1000 + rnd(&x) % 30000 : 0;
      q.on_timeout = rnd(&x) % 2 ? GPUMD_ON_TIMEOUT_WAIT : GPUMD_ON_TIMEOUT_REJECT;
      q.model = rnd(&x) % 5 == 0 ? "A100" : NULL;
      int rc = gpumd_sched_submit(fx->s, NULL, &q, now, NULL);
      assert_true(rc == 0 || rc == GPUM_ENEVERFIT);
    } else if (k < 85 && gpumd_sched_count(fx->s) > 0) {
      const gpumd_resv_t *r = gpumd_sched_at(fx->s, rnd(&x) % gpumd_sched_count(fx->s));
      assert_int_equal(gpumd_sched_release(fx->s, NULL, r->id, now, NULL), 0);
    } else if (k < 92) {
      unsigned d = (unsigned)(rnd(&x) % 4);
      gpum_health_t h = rnd(&x) % 3 == 0 ? GPUM_HEALTH_ERROR : GPUM_HEALTH_AVAILABLE;
      set_dev(fx, d, d < 2 ? "H100" : "A100", (d < 2 ? 80 : 40) * GiB, (rnd(&x) % 8) * GiB, h, now);
    } else {
      gpumd_sched_tick(fx->s, NULL, now, NULL);
    }
    check_invariants(fx, o.max_concurrent_jobs);
  }
  /* The run went through every kind of transition. */
  for (int st = GPUMD_RESV_QUEUED; st <= GPUMD_RESV_FAILED; st++)
    if (fx->count[st] == 0)
      fail_msg("no transition to %s", gpumd_resv_state_name((gpumd_resv_state_t)st));
  fx_free(fx);
}

/* Submits a "wait": false request; returns its code, *id the new id (0 on error). */
static int submit_no_wait(fx_t *fx, uint64_t bytes, int prio, uint64_t now, uint64_t *id) {
  gpumd_sched_request_t q;
  gpumd_sched_request_init(&q);
  q.bytes_per_gpu = bytes;
  q.priority = prio;
  q.uid = 1000;
  q.pid = 4242;
  q.no_wait = true;
  const gpumd_resv_t *r = NULL;
  int rc = gpumd_sched_submit(fx->s, NULL, &q, now, &r);
  *id = rc == 0 ? r->id : 0;
  if (rc == 0)
    assert_int_equal(r->state, GPUMD_RESV_GRANTED);
  return rc;
}

static void test_no_wait(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  o.backfill_bound_ns = 30 * SEC;
  fx_t *fx = fx_new(&o);
  set_dev(fx, 0, "GPU", 10 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  uint64_t id = 0;
  /* Room now: granted at once, like a waiting request. */
  assert_int_equal(submit_no_wait(fx, 6 * GiB, 0, T0, &id), 0);
  assert_int_equal(id, 1);
  assert_int_equal(last_event(fx, 1)->to, GPUMD_RESV_GRANTED);
  /* No room: EBUSY with what it would wait for; nothing changes, no id is used. */
  size_t n_ev = fx->n_ev;
  assert_int_equal(submit_no_wait(fx, 6 * GiB, 0, T0, &id), GPUM_EBUSY);
  assert_string_equal(gpum_last_error(),
                      "not granted now and \"wait\" is false; it would wait for 6.00 GiB free on "
                      "1 device; best now: 4.00 GiB on GPU 0");
  assert_int_equal(fx->n_ev, n_ev);
  assert_int_equal(gpumd_sched_count(fx->s), 1);
  assert_int_equal(gpumd_sched_queue_length(fx->s), 0);
  assert_int_equal(gpumd_sched_next_id(fx->s), 2);
  /* A queued head within the backfill bound may be passed ... */
  uint64_t head = submit(fx, 8 * GiB, 1, 0, T0 + 1 * SEC, NULL);
  assert_int_equal(head, 2);
  assert_int_equal(submit_no_wait(fx, 2 * GiB, 0, T0 + 2 * SEC, &id), 0);
  assert_int_equal(id, 3);
  assert_int_equal(gpumd_sched_release(fx->s, NULL, 3, T0 + 3 * SEC, NULL), 0);
  /* ... but not once it has waited past the bound, */
  assert_int_equal(submit_no_wait(fx, 2 * GiB, 0, T0 + 40 * SEC, &id), GPUM_EBUSY);
  assert_non_null(strstr(gpum_last_error(), "behind r-2 (blocked head past the backfill bound)"));
  assert_int_equal(state_of(fx, head), GPUMD_RESV_QUEUED);
  /* unless the request goes before it (higher priority). */
  assert_int_equal(submit_no_wait(fx, 2 * GiB, 5, T0 + 41 * SEC, &id), 0);
  assert_int_equal(id, 4);
  /* Never-fit is still ENEVERFIT, bad fields EINVAL. */
  assert_int_equal(submit_no_wait(fx, 11 * GiB, 0, T0 + 42 * SEC, &id), GPUM_ENEVERFIT);
  assert_int_equal(submit_no_wait(fx, 0, 0, T0 + 42 * SEC, &id), GPUM_EINVAL);
  /* The settling pass grants what is due before deciding: freeing r-1 lets the head in, and
   * the no-wait request behind it finds no room. */
  assert_int_equal(gpumd_sched_release(fx->s, NULL, 1, T0 + 43 * SEC, NULL), 0);
  assert_int_equal(state_of(fx, head), GPUMD_RESV_GRANTED);
  assert_int_equal(gpumd_sched_queue_length(fx->s), 0);
  fx_free(fx);
}

/* The model is a GPU type (gpum_gpu_type_matches): a family without case, never a longer
 * family that starts the same (A10 is not an A100), family and memory, a vendor, a shell
 * pattern on the name or on the family. */
static void test_model_types(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  add_h100(fx, 0, T0);
  set_dev(fx, 1, "NVIDIA A100-SXM4-40GB", 40 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  set_dev(fx, 2, "NVIDIA A100-SXM4-80GB", 80 * GiB, 0, GPUM_HEALTH_AVAILABLE, T0);
  static const struct {
    const char *model;
    uint64_t mask; /* the devices that match; 0: never fits */
  } cases[] = {
      {"A100", 6},           {"a100", 6},   {"NVIDIA A100", 6},  {"A100-80GB", 4},
      {"a100 40gb", 2},      {"A10", 0},    {"H100", 1},         {"h100", 1},
      {"nvidia", 7},         {"amd", 0},    {"*A100*", 6},       {"A100*", 6},
      {"*a100*80GB*", 4},    {"H1??", 1},   {"NVIDIA H100*", 1}, {"SXM4", 0},
      {"A100-SXM4-80GB", 4}, {"*V100*", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gpumd_sched_request_t q;
    gpumd_sched_check_t c;
    gpumd_sched_request_init(&q);
    q.bytes_per_gpu = GiB;
    q.model = cases[i].model;
    q.gpus = (unsigned)__builtin_popcountll(cases[i].mask ? cases[i].mask : 1);
    assert_int_equal(gpumd_sched_check(fx->s, &q, T0, &c), 0);
    if (c.could_fit != (cases[i].mask != 0) || (c.could_fit && c.device_mask != cases[i].mask))
      fail_msg("model '%s': could_fit %d, devices %#llx (%s)", cases[i].model, c.could_fit,
               (unsigned long long)c.device_mask, c.reason);
  }
  gpumd_sched_request_t q;
  gpumd_sched_request_init(&q);
  q.bytes_per_gpu = GiB;
  q.model = "A10";
  expect_never_fit(fx, &q, "no device on this node matching model 'A10'");
  fx_free(fx);
}

/* A node of two vendors: the device layer's vendor decides a vendor model (the name "Radeon
 * Pro W7900 Dual Slot" would read as amd too, "Accelerator X" as nothing); a reservation's
 * GPUs are all of one vendor: two GPUs go to the vendor that has two admitting devices, and
 * three of one vendor never fit. */
static void test_vendors(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  static const struct {
    const char *name, *vendor;
    uint64_t total;
  } devs[] = {{"NVIDIA H100 80GB HBM3", "nvidia", 80 * GiB},
              {"NVIDIA H100 80GB HBM3", "nvidia", 80 * GiB},
              {"Accelerator X", "amd", 192 * GiB},
              {"AMD Instinct MI300X", "amd", 192 * GiB}};
  for (unsigned i = 0; i < 4; i++) {
    gpumd_sched_device_t d;
    memset(&d, 0, sizeof d);
    d.index = i;
    snprintf(d.uuid, sizeof d.uuid, "GPU-v-%u", i);
    snprintf(d.name, sizeof d.name, "%s", devs[i].name);
    snprintf(d.vendor, sizeof d.vendor, "%s", devs[i].vendor);
    d.memory_total = devs[i].total;
    d.health = GPUM_HEALTH_AVAILABLE;
    assert_int_equal(gpumd_sched_update_device(fx->s, NULL, &d, T0), 0);
  }
  static const struct {
    const char *model;
    unsigned gpus;
    uint64_t bytes;
    uint64_t mask; /* 0: never fits */
  } cases[] = {
      {"amd", 2, GiB, 0xC}, /* the device layer's word, whatever the name */
      {"nvidia", 2, GiB, 0x3}, {NULL, 2, 100 * GiB, 0xC}, /* only AMD holds 100 GiB */
      {"MI300X", 1, GiB, 0x8}, {NULL, 3, GiB, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gpumd_sched_request_t q;
    gpumd_sched_check_t c;
    gpumd_sched_request_init(&q);
    q.bytes_per_gpu = cases[i].bytes;
    q.model = cases[i].model;
    q.gpus = cases[i].gpus;
    assert_int_equal(gpumd_sched_check(fx->s, &q, T0, &c), 0);
    if (c.could_fit != (cases[i].mask != 0) || (c.could_fit && c.device_mask != cases[i].mask))
      fail_msg("case %zu: could_fit %d, devices %#llx (%s)", i, c.could_fit,
               (unsigned long long)c.device_mask, c.reason);
  }
  gpumd_sched_request_t q;
  gpumd_sched_request_init(&q);
  q.bytes_per_gpu = GiB;
  q.gpus = 3;
  expect_never_fit(fx, &q, "needs 3 GPUs of one vendor but this node has at most 2 of one vendor");
  /* Two GPUs with no model, one NVIDIA taken: both go to AMD, never one of each. */
  gpumd_resv_state_t st;
  submit(fx, 70 * GiB, 1, 0, T0, &st);
  assert_int_equal(st, GPUMD_RESV_GRANTED);
  uint64_t m = mask_of(fx, submit(fx, 20 * GiB, 2, 0, T0, &st));
  assert_int_equal(st, GPUMD_RESV_GRANTED);
  assert_int_equal(m, 0xC);
  fx_free(fx);
}

/* gpumd_sched_check: the dry run answers like submit would, and changes nothing. */
static void test_check(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  o.backfill = false;
  fx_t *fx = fx_new(&o);
  add_h100(fx, 0, T0);
  add_h100(fx, 1, T0);
  gpumd_sched_request_t q;
  gpumd_sched_check_t c;
  gpumd_sched_request_init(&q);
  q.bytes_per_gpu = 30 * GiB;
  q.gpus = 2;
  assert_int_equal(gpumd_sched_check(fx->s, &q, T0, &c), 0);
  assert_true(c.could_fit && c.fits_now && !c.queue_first);
  assert_int_equal(c.device_mask, 3);
  assert_string_equal(c.reason, "");
  q.bytes_per_gpu = 90 * GiB; /* over every device */
  assert_int_equal(gpumd_sched_check(fx->s, &q, T0, &c), 0);
  assert_false(c.could_fit || c.fits_now);
  assert_non_null(strstr(c.reason, "90.00 GiB"));
  q.bytes_per_gpu = GiB;
  q.model = "*A100*"; /* no such model */
  assert_int_equal(gpumd_sched_check(fx->s, &q, T0, &c), 0);
  assert_false(c.could_fit);
  q.model = NULL;
  q.gpus = 0;
  assert_int_equal(gpumd_sched_check(fx->s, &q, T0, &c), GPUM_EINVAL);
  assert_int_equal(fx->n_ev, 0); /* nothing was created */
  assert_int_equal(gpumd_sched_count(fx->s), 0);
  /* Not now: 60 GiB held on each device, 30 GiB asked on two. */
  submit(fx, 60 * GiB, 2, 0, T0, NULL);
  q.gpus = 2;
  q.bytes_per_gpu = 30 * GiB;
  assert_int_equal(gpumd_sched_check(fx->s, &q, T0, &c), 0);
  assert_true(c.could_fit && !c.fits_now);
  assert_string_equal(c.reason,
                      "needs 30.00 GiB free on 2 GPUs; 0 fit now, best: 20.00 GiB on GPU 0");
  /* A blocked head (backfill off: locked at once) keeps a small request waiting. */
  uint64_t head = submit(fx, 30 * GiB, 1, 0, T0, NULL);
  assert_int_equal(state_of(fx, head), GPUMD_RESV_QUEUED);
  q.gpus = 1;
  q.bytes_per_gpu = GiB;
  size_t before = fx->n_ev;
  assert_int_equal(gpumd_sched_check(fx->s, &q, T0, &c), 0);
  assert_true(c.could_fit && !c.fits_now && c.queue_first);
  assert_string_equal(
      c.reason, "fits, but would wait behind r-2 (blocked queue head past the backfill bound)");
  /* ... unless it has a higher priority than the head. */
  q.priority = 5;
  assert_int_equal(gpumd_sched_check(fx->s, &q, T0, &c), 0);
  assert_true(c.fits_now && !c.queue_first);
  assert_int_equal(fx->n_ev, before);
  assert_int_equal(gpumd_sched_count(fx->s), 2);
  fx_free(fx);
}

/* Slurm ids: the job's digits or array task, the step's digits or named steps; anything else
 * is EINVAL at submit and makes nothing. */
static void test_slurm_ids(void **state) {
  (void)state;
  static const char *const good[][2] = {{"1", "0"},
                                        {"12345", "batch"},
                                        {"4294967295_4294967295", "4294967295"},
                                        {"7_0", "extern"},
                                        {"0012", "interactive"}};
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
    if (gpumd_slurm_ids_check(good[i][0], good[i][1]) != 0)
      fail_msg("refused %s / %s: %s", good[i][0], good[i][1], gpum_last_error());
  assert_int_equal(gpumd_slurm_ids_check(NULL, NULL), 0);
  static const char *const bad[][2] = {{"", "0"},
                                       {"1", ""},
                                       {"-1", "0"},
                                       {"+1", "0"},
                                       {" 1", "0"},
                                       {"1 ", "0"},
                                       {"1_", "0"},
                                       {"_1", "0"},
                                       {"1_2_3", "0"},
                                       {"1.0", "0"},
                                       {"1", "0.1"},
                                       {"1", "Batch"},
                                       {"1", "batch "},
                                       {"1", "step"},
                                       {"12345678901", "0"},
                                       {"1", "12345678901"},
                                       {"1_12345678901", "0"},
                                       {"1\n", "0"},
                                       {"1", NULL},
                                       {NULL, "0"}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    if (gpumd_slurm_ids_check(bad[i][0], bad[i][1]) != GPUM_EINVAL)
      fail_msg("accepted case %zu", i);
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  add_h100(fx, 0, T0);
  gpumd_sched_request_t q;
  gpumd_sched_request_init(&q);
  q.bytes_per_gpu = GiB;
  q.slurm_job = "12345";
  q.slurm_step = "bat\"ch";
  const gpumd_resv_t *r = NULL;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, T0, &r), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "Slurm step id"));
  assert_int_equal(gpumd_sched_count(fx->s), 0);
  q.slurm_step = "0";
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, T0, &r), 0);
  assert_string_equal(r->slurm_job, "12345");
  assert_string_equal(r->slurm_step, "0");
  fx_free(fx);
}

/* A view of device index as the daemon hands it over: total, driver reserved, unmanaged,
 * read afresh or not, and whether its last fresh read went unanswered. */
static void set_view(fx_t *fx, unsigned index, uint64_t total, uint64_t reserved,
                     uint64_t unmanaged, bool fresh, bool unanswered, uint64_t now) {
  gpumd_sched_device_t d;
  memset(&d, 0, sizeof(d));
  d.index = index;
  snprintf(d.uuid, sizeof(d.uuid), "GPU-test-%u", index);
  snprintf(d.name, sizeof(d.name), "NVIDIA H100 80GB HBM3");
  d.memory_total = total;
  d.memory_reserved = reserved;
  d.memory_used = unmanaged;
  d.unmanaged = unmanaged;
  d.health = GPUM_HEALTH_AVAILABLE;
  d.fresh = fresh;
  d.unanswered = unanswered;
  assert_int_equal(gpumd_sched_update_devices(fx->s, NULL, &d, 1, now), 0);
}

/* Capacity is at most what the driver can hand out: total - its reserved memory. */
static void test_capacity_under_driver_reserved(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o); /* fraction 1, margin 0 */
  fx_t *fx = fx_new(&o);
  set_view(fx, 0, 80 * GiB, 512 * MiB, 0, false, false, T0);
  gpumd_sched_device_stats_t st;
  assert_int_equal(gpumd_sched_device_stats(fx->s, 0, &st), 0);
  assert_int_equal(st.capacity, 80 * GiB - 512 * MiB);
  gpumd_sched_request_t q;
  gpumd_sched_request_init(&q);
  q.bytes_per_gpu = 80 * GiB;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, T0, NULL), GPUMD_SCHED_ENEVERFIT);
  assert_non_null(strstr(gpum_last_error(), "total - 512.00 MiB the driver keeps - 0 B"));
  gpumd_resv_state_t s;
  uint64_t id = submit(fx, 80 * GiB - 512 * MiB, 1, 0, T0, &s);
  assert_int_equal(s, GPUMD_RESV_GRANTED);
  /* A fraction below what the driver keeps stays the bound. */
  assert_int_equal(gpumd_sched_release(fx->s, NULL, id, T0, "done"), 0);
  o.memory_fraction = 0.5;
  assert_int_equal(gpumd_sched_set_opts(fx->s, &o), 0);
  assert_int_equal(gpumd_sched_device_stats(fx->s, 0, &st), 0);
  assert_int_equal(st.capacity, 40 * GiB);
  fx_free(fx);
}

/* require_fresh: nothing is granted on a view that was not read afresh; the pass that would
 * have granted asks for the device (wants_fresh), and the fresh view's pass grants. A device
 * whose fresh read went unanswered takes nothing and says so. */
static void test_require_fresh(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  o.require_fresh = true;
  fx_t *fx = fx_new(&o);
  set_view(fx, 0, 80 * GiB, 0, 0, false, false, T0);
  set_view(fx, 1, 80 * GiB, 0, 0, false, false, T0);
  assert_int_equal(gpumd_sched_wants_fresh(fx->s), 0); /* nothing asked for yet */
  uint64_t id = 0;
  assert_int_equal(submit_no_wait(fx, 10 * GiB, 0, T0, &id), GPUM_EBUSY);
  assert_int_equal(gpumd_sched_wants_fresh(fx->s), 3); /* both would have done */
  assert_int_equal(gpumd_sched_wants_fresh(fx->s), 0); /* cleared by the call */
  gpumd_resv_state_t st;
  uint64_t q = submit(fx, 10 * GiB, 1, 0, T0, &st);
  assert_int_equal(st, GPUMD_RESV_QUEUED);
  char why[GPUMD_RESV_REASON_LEN];
  gpumd_sched_waiting_for(fx->s, q, why, sizeof why);
  assert_string_equal(why, "fits the devices as last read: decided once GPU 0 is read afresh");
  /* Read afresh: device 0 now has 75 GiB used outside; the pass places on device 1. */
  set_view(fx, 0, 80 * GiB, 0, 75 * GiB, true, false, T0);
  assert_int_equal(state_of(fx, q), GPUMD_RESV_QUEUED); /* device 1 still stale */
  set_view(fx, 1, 80 * GiB, 0, 0, true, false, T0);
  assert_int_equal(state_of(fx, q), GPUMD_RESV_GRANTED);
  assert_int_equal(last_event(fx, q)->mask, 2);
  /* Stale again: a growth is refused until the device is read afresh. */
  gpumd_sched_set_stale(fx->s);
  char w[GPUMD_RESV_REASON_LEN];
  assert_int_equal(gpumd_sched_resize(fx->s, NULL, q, 20 * GiB, T0, w, sizeof w), GPUM_EBUSY);
  assert_non_null(strstr(gpum_last_error(), "did not answer a fresh read"));
  /* A device that did not answer: no grant, and the text says why. */
  set_view(fx, 0, 80 * GiB, 0, 0, false, true, T0);
  set_view(fx, 1, 80 * GiB, 0, 70 * GiB, true, false, T0);
  gpumd_sched_wants_fresh(fx->s); /* what the earlier passes asked for */
  uint64_t q2 = submit(fx, 20 * GiB, 1, 0, T0, &st);
  assert_int_equal(st, GPUMD_RESV_QUEUED);
  gpumd_sched_waiting_for(fx->s, q2, why, sizeof why);
  assert_non_null(strstr(why, "best now"));
  assert_int_equal(gpumd_sched_wants_fresh(fx->s) & 1, 0); /* unanswered: not asked again */
  set_view(fx, 0, 80 * GiB, 0, 0, true, false, T0);
  assert_int_equal(state_of(fx, q2), GPUMD_RESV_GRANTED);
  fx_free(fx);
}

/* A device in ERROR only because a driver call is slow (past the monitor's watchdog) is not a
 * lost one: its reservations stay GRANTED (their jobs may still run) and it takes no new one;
 * once there is evidence it is gone (lost, reset required) they FAIL. */
static void test_slow_device_is_not_gone(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  add_h100(fx, 0, T0);
  gpumd_resv_state_t st;
  uint64_t a = submit(fx, 10 * GiB, 1, 0, T0, &st);
  assert_int_equal(st, GPUMD_RESV_GRANTED);
  gpumd_sched_device_t d;
  assert_int_equal(gpumd_sched_device(fx->s, 0, &d), 0);
  d.health = GPUM_HEALTH_ERROR;
  snprintf(d.reason, sizeof d.reason, "driver call hung for 5000 ms (watchdog 5000 ms)");
  d.gone = false;
  assert_int_equal(gpumd_sched_update_device(fx->s, NULL, &d, T0 + SEC), 0);
  assert_int_equal(state_of(fx, a), GPUMD_RESV_GRANTED);
  uint64_t b = submit(fx, GiB, 1, 0, T0 + SEC, &st);
  assert_int_equal(st, GPUMD_RESV_QUEUED); /* nothing new on it */
  d.gone = true;
  snprintf(d.reason, sizeof d.reason, "GPU is lost (fallen off the bus)");
  assert_int_equal(gpumd_sched_update_device(fx->s, NULL, &d, T0 + 2 * SEC), 0);
  assert_int_equal(state_of(fx, a), GPUMD_RESV_FAILED);
  assert_non_null(strstr(last_event(fx, a)->reason, "fallen off the bus"));
  assert_int_equal(state_of(fx, b), GPUMD_RESV_QUEUED);
  fx_free(fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slurm_ids),
      cmocka_unit_test(test_admission_math),
      cmocka_unit_test(test_new_reservation_transitions),
      cmocka_unit_test(test_resize),
      cmocka_unit_test(test_placement_pack),
      cmocka_unit_test(test_placement_spread),
      cmocka_unit_test(test_placement_score),
      cmocka_unit_test(test_error_and_disabled_get_nothing),
      cmocka_unit_test(test_multi_gpu_all_or_nothing),
      cmocka_unit_test(test_never_fit),
      cmocka_unit_test(test_bad_requests),
      cmocka_unit_test(test_priority_order),
      cmocka_unit_test(test_fifo_within_priority),
      cmocka_unit_test(test_backfill_within_bound),
      cmocka_unit_test(test_backfill_bound_protects_head),
      cmocka_unit_test(test_backfill_disabled),
      cmocka_unit_test(test_locked_head_leaves_other_devices_open),
      cmocka_unit_test(test_timeout_reject),
      cmocka_unit_test(test_timeout_wait),
      cmocka_unit_test(test_max_concurrent_jobs),
      cmocka_unit_test(test_device_loss),
      cmocka_unit_test(test_pressure),
      cmocka_unit_test(test_release_and_cancel),
      cmocka_unit_test(test_cause_reaches_callback),
      cmocka_unit_test(test_restore),
      cmocka_unit_test(test_names_and_ids),
      cmocka_unit_test(test_random_operations_keep_invariants),
      cmocka_unit_test(test_no_wait),
      cmocka_unit_test(test_model_types),
      cmocka_unit_test(test_vendors),
      cmocka_unit_test(test_check),
      cmocka_unit_test(test_capacity_under_driver_reserved),
      cmocka_unit_test(test_require_fresh),
      cmocka_unit_test(test_slow_device_is_not_gone),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
