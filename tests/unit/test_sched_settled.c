/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the scheduler's settled shortcuts (src/gpumd/sched/sched_internal.h,
 * "settled"): a pass on a settled queue looks only at the devices that grew and that a queued
 * request could use, and gpumd_sched_freed_may_grant tells the daemon when a release needs no
 * fresh read. Each case below would go wrong if a skip were wrong: a queued request that
 * becomes grantable after a release on another device, after memory outside reservations
 * shrinks on a read, after a device comes back from ERROR, after a job ends under
 * max_concurrent_jobs, after a critical pressure or an unanswered read clears, when the head
 * is cancelled, and when the clock goes back under a locked head. Then a differential run:
 * the same random operations on a scheduler that walks the whole queue at every pass and on
 * one that takes the shortcuts must report the same transitions, step by step.
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
#include "sched_internal.h"

#define SCHED_FIXTURE_PRESSURE NULL /* the random runs change pressure at will */
#include "sched_fixture.h"

/* A device view: 80 GiB, AVAILABLE, fresh, unmanaged as given; the caller may change it. */
static gpumd_sched_device_t view(unsigned index, uint64_t unmanaged) {
  gpumd_sched_device_t d;
  memset(&d, 0, sizeof d);
  d.index = index;
  snprintf(d.uuid, sizeof d.uuid, "GPU-settled-%u", index);
  snprintf(d.name, sizeof d.name, "NVIDIA H100 80GB HBM3");
  snprintf(d.vendor, sizeof d.vendor, "nvidia");
  d.memory_total = 80 * GiB;
  d.memory_used = unmanaged;
  d.unmanaged = unmanaged;
  d.health = GPUM_HEALTH_AVAILABLE;
  d.fresh = true;
  return d;
}

static void put(fx_t *fx, gpumd_sched_device_t d, uint64_t now) {
  assert_int_equal(gpumd_sched_update_device(fx->s, NULL, &d, now), 0);
}

/* Submits bytes on gpus devices (device: -1 any, else that one); returns the id. */
static uint64_t submit_on(fx_t *fx, uint64_t bytes, unsigned gpus, int device, int prio,
                          uint64_t now) {
  gpumd_sched_request_t q;
  gpumd_sched_request_init(&q);
  q.bytes_per_gpu = bytes;
  q.gpus = gpus;
  q.priority = prio;
  char spec[16];
  const char *specs[1] = {spec};
  if (device >= 0) {
    snprintf(spec, sizeof spec, "%d", device);
    q.devices = specs;
    q.device_count = 1;
  }
  const gpumd_resv_t *r = NULL;
  assert_int_equal(gpumd_sched_submit(fx->s, NULL, &q, now, &r), 0);
  return r->id;
}

/* Would ending id let a queued request in (the daemon's question before a release)? */
static bool may_grant(const fx_t *fx, uint64_t id) {
  gpumd_sched_freed_t f;
  gpumd_sched_freed_init(&f);
  gpumd_sched_freed_add(fx->s, &f, id);
  return gpumd_sched_freed_may_grant(fx->s, &f);
}

/* ---- The cases a skip must not miss --------------------------------------------------------- */

/* Two devices nearly full; a 50 GiB request waits. A release on device 0 that leaves too
 * little changes nothing (and needs no read); the release on device 1 that frees enough
 * grants it there, though the last passes saw nothing on device 1 grow. */
static void test_release_on_another_device(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  put(fx, view(0, 0), T0);
  put(fx, view(1, 0), T0);
  uint64_t small0 = submit_on(fx, 10 * GiB, 1, 0, 0, T0);
  uint64_t big0 = submit_on(fx, 40 * GiB, 1, 0, 0, T0);
  uint64_t big1 = submit_on(fx, 70 * GiB, 1, 1, 0, T0);
  uint64_t want = submit_on(fx, 50 * GiB, 1, -1, 0, T0);
  assert_int_equal(state_of(fx, want), GPUMD_RESV_QUEUED);
  assert_false(may_grant(fx, small0)); /* 40 GiB free on 0 then: less than 50 */
  assert_int_equal(gpumd_sched_release(fx->s, NULL, small0, T0, NULL), 0);
  assert_int_equal(state_of(fx, want), GPUMD_RESV_QUEUED);
  assert_true(may_grant(fx, big1)); /* 80 GiB free on 1 then */
  assert_int_equal(gpumd_sched_release(fx->s, NULL, big1, T0, NULL), 0);
  assert_int_equal(state_of(fx, want), GPUMD_RESV_GRANTED);
  assert_int_equal(gpumd_sched_find(fx->s, want)->device_mask, 2);
  (void)big0;
  fx_free(fx);
}

/* A request naming device 1 is not let in by a release on device 0, and one naming device 0
 * is, though device 1 had more room all along. */
static void test_release_only_for_its_devices(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  put(fx, view(0, 0), T0);
  put(fx, view(1, 50 * GiB), T0);
  uint64_t g0 = submit_on(fx, 60 * GiB, 1, 0, 0, T0);
  uint64_t on1 = submit_on(fx, 40 * GiB, 1, 1, 0, T0);
  uint64_t on0 = submit_on(fx, 30 * GiB, 1, 0, 0, T0);
  assert_int_equal(state_of(fx, on1), GPUMD_RESV_QUEUED);
  assert_int_equal(state_of(fx, on0), GPUMD_RESV_QUEUED);
  assert_true(may_grant(fx, g0));
  assert_int_equal(gpumd_sched_release(fx->s, NULL, g0, T0, NULL), 0);
  assert_int_equal(state_of(fx, on0), GPUMD_RESV_GRANTED);
  assert_int_equal(state_of(fx, on1), GPUMD_RESV_QUEUED);
  fx_free(fx);
}

/* Memory outside reservations shrinks on a read: what waited for it is granted. The
 * release's question counts a fresh read that could show that memory gone. */
static void test_unmanaged_shrinks(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  put(fx, view(0, 60 * GiB), T0);
  uint64_t g = submit_on(fx, 5 * GiB, 1, 0, 0, T0);
  uint64_t q = submit_on(fx, 31 * GiB, 1, 0, 0, T0);
  assert_int_equal(state_of(fx, q), GPUMD_RESV_QUEUED);
  put(fx, view(0, 50 * GiB), T0); /* 25 GiB free: still not */
  assert_int_equal(state_of(fx, q), GPUMD_RESV_QUEUED);
  /* Ending g would leave 30 GiB free by the last read, not enough; but a fresh read may find
   * the 50 GiB outside reservations gone: the release must read. */
  assert_true(may_grant(fx, g));
  put(fx, view(0, 40 * GiB), T0); /* 35 GiB free */
  assert_int_equal(state_of(fx, q), GPUMD_RESV_GRANTED);
  fx_free(fx);
}

/* A device back from ERROR (a slow one: its grants stay) takes what waited for it. */
static void test_device_back_from_error(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  gpumd_sched_device_t d = view(0, 0);
  put(fx, d, T0);
  d.health = GPUM_HEALTH_ERROR;
  snprintf(d.reason, sizeof d.reason, "driver call hung");
  put(fx, d, T0);
  uint64_t q = submit_on(fx, 10 * GiB, 1, 0, 0, T0);
  assert_int_equal(state_of(fx, q), GPUMD_RESV_QUEUED);
  put(fx, d, T0 + SEC); /* the same again: nothing */
  assert_int_equal(state_of(fx, q), GPUMD_RESV_QUEUED);
  d.health = GPUM_HEALTH_AVAILABLE;
  d.reason[0] = '\0';
  put(fx, d, T0 + 2 * SEC);
  assert_int_equal(state_of(fx, q), GPUMD_RESV_GRANTED);
  fx_free(fx);
}

/* At max_concurrent_jobs, a release of a small job lets a queued one in (by its job count,
 * not its bytes); an unanswered read and a critical pressure clearing do too. */
static void test_jobs_pressure_unanswered(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  o.max_concurrent_jobs = 1;
  fx_t *fx = fx_new(&o);
  put(fx, view(0, 0), T0);
  uint64_t a = submit_on(fx, GiB, 1, 0, 0, T0);
  uint64_t b = submit_on(fx, GiB, 1, 0, 0, T0);
  assert_int_equal(state_of(fx, b), GPUMD_RESV_QUEUED);
  assert_true(may_grant(fx, a));
  assert_int_equal(gpumd_sched_release(fx->s, NULL, a, T0, NULL), 0);
  assert_int_equal(state_of(fx, b), GPUMD_RESV_GRANTED);
  assert_int_equal(gpumd_sched_release(fx->s, NULL, b, T0, NULL), 0);
  /* Unanswered, then answered. */
  gpumd_sched_device_t d = view(0, 0);
  d.unanswered = true;
  d.fresh = false;
  put(fx, d, T0);
  uint64_t c = submit_on(fx, GiB, 1, 0, 0, T0);
  assert_int_equal(state_of(fx, c), GPUMD_RESV_QUEUED);
  put(fx, view(0, 0), T0);
  assert_int_equal(state_of(fx, c), GPUMD_RESV_GRANTED);
  assert_int_equal(gpumd_sched_release(fx->s, NULL, c, T0, NULL), 0);
  /* Critical pressure (used 78 of 80 GiB by the driver's count, none of it outside), then not. */
  d = view(0, 0);
  d.memory_used = 78 * GiB;
  put(fx, d, T0);
  uint64_t e = submit_on(fx, GiB, 1, 0, 0, T0);
  assert_int_equal(state_of(fx, e), GPUMD_RESV_QUEUED);
  d.memory_used = 10 * GiB;
  put(fx, d, T0);
  assert_int_equal(state_of(fx, e), GPUMD_RESV_GRANTED);
  fx_free(fx);
}

/* require_fresh: a view that only becomes fresh (same numbers) lets in what waited for the
 * read; the pass on the stale view asks for it (wants_fresh), also when it needs no walk. */
static void test_fresh_only(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  o.require_fresh = true;
  fx_t *fx = fx_new(&o);
  gpumd_sched_device_t d = view(0, 0);
  put(fx, d, T0);
  uint64_t g = submit_on(fx, 60 * GiB, 1, 0, 0, T0);
  uint64_t q = submit_on(fx, 30 * GiB, 1, 0, 0, T0);
  assert_int_equal(state_of(fx, q), GPUMD_RESV_QUEUED);
  gpumd_sched_set_stale(fx->s);
  gpumd_sched_wants_fresh(fx->s);
  assert_int_equal(gpumd_sched_release(fx->s, NULL, g, T0, NULL), 0);
  assert_int_equal(state_of(fx, q), GPUMD_RESV_QUEUED); /* stale: not on it */
  assert_int_equal(gpumd_sched_wants_fresh(fx->s), 1);
  gpumd_sched_tick(fx->s, NULL, T0, NULL); /* a pass with nothing new asks again */
  assert_int_equal(gpumd_sched_wants_fresh(fx->s), 1);
  put(fx, d, T0); /* read afresh */
  assert_int_equal(state_of(fx, q), GPUMD_RESV_GRANTED);
  assert_int_equal(gpumd_sched_wants_fresh(fx->s), 0);
  fx_free(fx);
}

/* The head cancelled: the next one is granted where the head blocked it (backfill off). A
 * request behind the head leaving changes nothing, and needs no read. */
static void test_head_leaves(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  o.backfill = false;
  fx_t *fx = fx_new(&o);
  put(fx, view(0, 0), T0);
  uint64_t g = submit_on(fx, 50 * GiB, 1, 0, 0, T0);
  uint64_t head = submit_on(fx, 40 * GiB, 1, 0, 0, T0);
  uint64_t mid = submit_on(fx, 35 * GiB, 1, 0, 0, T0);
  uint64_t small = submit_on(fx, 10 * GiB, 1, 0, 0, T0);
  assert_int_equal(state_of(fx, small), GPUMD_RESV_QUEUED); /* the head blocks it */
  assert_false(may_grant(fx, mid));
  assert_int_equal(gpumd_sched_release(fx->s, NULL, mid, T0, NULL), 0);
  assert_int_equal(state_of(fx, small), GPUMD_RESV_QUEUED);
  assert_true(may_grant(fx, head));
  assert_int_equal(gpumd_sched_release(fx->s, NULL, head, T0, NULL), 0);
  assert_int_equal(state_of(fx, small), GPUMD_RESV_GRANTED);
  (void)g;
  fx_free(fx);
}

/* The clock goes back under a head past the backfill bound: it is within the bound again,
 * and what it blocked passes it, as a full pass would decide. */
static void test_clock_back_unlocks_head(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  o.backfill_bound_ns = 10 * SEC;
  fx_t *fx = fx_new(&o);
  put(fx, view(0, 0), T0);
  submit_on(fx, 50 * GiB, 1, 0, 0, T0);
  uint64_t head = submit_on(fx, 40 * GiB, 1, 0, 0, T0);
  gpumd_sched_tick(fx->s, NULL, T0 + 20 * SEC, NULL); /* locked from here */
  uint64_t small = submit_on(fx, 10 * GiB, 1, 0, 0, T0 + 20 * SEC);
  assert_int_equal(state_of(fx, small), GPUMD_RESV_QUEUED);
  gpumd_sched_tick(fx->s, NULL, T0 + 5 * SEC, NULL);
  assert_int_equal(state_of(fx, small), GPUMD_RESV_GRANTED);
  assert_int_equal(state_of(fx, head), GPUMD_RESV_QUEUED);
  fx_free(fx);
}

/* Options changed: no shortcut; and a queue not settled makes any release read. */
static void test_opts_unsettle(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  fx_t *fx = fx_new(&o);
  put(fx, view(0, 0), T0);
  uint64_t g = submit_on(fx, 70 * GiB, 1, 0, 0, T0);
  uint64_t q = submit_on(fx, 20 * GiB, 1, 0, 0, T0);
  uint64_t tiny = submit_on(fx, 5 * GiB, 1, 0, 0, T0);
  assert_int_equal(state_of(fx, tiny), GPUMD_RESV_GRANTED);
  assert_false(may_grant(fx, tiny)); /* 15 GiB free then: under 20 */
  o.memory_fraction = 1.0;
  o.safety_margin = 0;
  o.max_concurrent_jobs = 0;
  assert_int_equal(gpumd_sched_set_opts(fx->s, &o), 0);
  assert_true(may_grant(fx, tiny));
  gpumd_sched_tick(fx->s, NULL, T0, NULL);
  assert_false(may_grant(fx, tiny));
  assert_int_equal(state_of(fx, q), GPUMD_RESV_QUEUED);
  (void)g;
  fx_free(fx);
}

/* ---- Differential run ------------------------------------------------------------------------ */

static uint64_t rnd(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

/* The two schedulers reported the same transitions since the last call (then forgets them). */
static void same_events(fx_t *ref, fx_t *fast, int step) {
  if (ref->n_ev != fast->n_ev)
    fail_msg("step %d: %zu transitions on full passes, %zu with the shortcuts", step, ref->n_ev,
             fast->n_ev);
  for (size_t i = 0; i < ref->n_ev; i++) {
    const event_t *a = &ref->ev[i], *b = &fast->ev[i];
    if (a->id != b->id || a->from != b->from || a->to != b->to || a->mask != b->mask ||
        strcmp(a->reason, b->reason) != 0)
      fail_msg("step %d, transition %zu: r-%llu %s->%s on %llx (%s) vs r-%llu %s->%s on %llx (%s)",
               step, i, (unsigned long long)a->id, gpumd_resv_state_name(a->from),
               gpumd_resv_state_name(a->to), (unsigned long long)a->mask, a->reason,
               (unsigned long long)b->id, gpumd_resv_state_name(b->from),
               gpumd_resv_state_name(b->to), (unsigned long long)b->mask, b->reason);
  }
  ref->n_ev = fast->n_ev = 0;
}

/* A random view of device d: two vendors, sometimes ERROR (slow or gone), DISABLED, stale,
 * unanswered, at critical pressure, with memory outside reservations. */
static gpumd_sched_device_t random_view(uint64_t *x, unsigned d) {
  gpumd_sched_device_t v = view(d, (rnd(x) % 5 == 0) ? (rnd(x) % 60) * GiB : 0);
  if (d >= 4) {
    snprintf(v.name, sizeof v.name, "AMD Instinct MI300X");
    snprintf(v.vendor, sizeof v.vendor, "amd");
  }
  uint64_t k = rnd(x) % 40;
  if (k == 0) {
    v.health = GPUM_HEALTH_ERROR;
    v.gone = rnd(x) % 2 == 0;
    snprintf(v.reason, sizeof v.reason, "XID 79");
  } else if (k == 1) {
    v.health = GPUM_HEALTH_DISABLED;
  } else if (k == 2) {
    v.unanswered = true;
  } else if (k == 3) {
    v.memory_used = 79 * GiB;
  } else if (k < 8) {
    v.health = GPUM_HEALTH_BUSY;
  }
  v.fresh = rnd(x) % 4 != 0;
  return v;
}

static void random_request(uint64_t *x, gpumd_sched_request_t *q, char *spec, size_t len,
                           const char **specs) {
  gpumd_sched_request_init(q);
  q->bytes_per_gpu = (rnd(x) % 4 == 0 ? 1 + rnd(x) % 1024 : 1024 * (1 + rnd(x) % 70)) * MiB;
  q->gpus = 1 + (unsigned)(rnd(x) % 8 == 0 ? rnd(x) % 3 : 0);
  q->priority = (int)(rnd(x) % 3) - 1;
  q->timeout_ms = rnd(x) % 5 == 0 ? 1000 + rnd(x) % 20000 : 0;
  q->on_timeout = rnd(x) % 2 ? GPUMD_ON_TIMEOUT_WAIT : GPUMD_ON_TIMEOUT_REJECT;
  q->no_wait = rnd(x) % 10 == 0;
  if (rnd(x) % 3 == 0) { /* one explicit device */
    snprintf(spec, len, "%u", (unsigned)(rnd(x) % 6));
    specs[0] = spec;
    q->devices = specs;
    q->device_count = 1;
  } else if (rnd(x) % 6 == 0) {
    q->model = "MI300X";
  }
}

/* One run of steps random operations on both schedulers, opts as given. */
static void differential_run(const gpumd_sched_opts_t *o, uint64_t seed, int steps) {
  fx_t *ref = fx_new(o), *fast = fx_new(o);
  gpumd__sched_set_full_passes(ref->s, true);
  fx_t *both[2] = {ref, fast};
  uint64_t x = seed, now = T0;
  for (unsigned d = 0; d < 6; d++) {
    gpumd_sched_device_t v = random_view(&x, d);
    v.health = GPUM_HEALTH_AVAILABLE;
    for (int i = 0; i < 2; i++)
      put(both[i], v, now);
  }
  same_events(ref, fast, -1);
  unsigned grants_after_no_read = 0, releases_without_read = 0;
  for (int step = 0; step < steps; step++) {
    /* Mostly forward, sometimes back (a clock step). */
    now = rnd(&x) % 50 == 0 ? now - rnd(&x) % (30 * SEC) : now + rnd(&x) % (3 * SEC);
    uint64_t k = rnd(&x) % 100;
    if (k < 40) {
      gpumd_sched_request_t q;
      char spec[16];
      const char *specs[1];
      random_request(&x, &q, spec, sizeof spec, specs);
      int rc[2];
      for (int i = 0; i < 2; i++)
        rc[i] = gpumd_sched_submit(both[i]->s, NULL, &q, now, NULL);
      assert_int_equal(rc[0], rc[1]);
    } else if (k < 75 && gpumd_sched_count(ref->s) > 0) {
      uint64_t id = gpumd_sched_at(ref->s, rnd(&x) % gpumd_sched_count(ref->s))->id;
      gpumd_sched_freed_t f;
      gpumd_sched_freed_init(&f);
      gpumd_sched_freed_add(fast->s, &f, id);
      bool may = gpumd_sched_freed_may_grant(fast->s, &f);
      const gpumd_resv_t *r = gpumd_sched_find(ref->s, id);
      uint64_t freed = r->state == GPUMD_RESV_GRANTED ? r->device_mask : 0;
      for (int i = 0; i < 2; i++)
        assert_int_equal(gpumd_sched_release(both[i]->s, NULL, id, now, NULL), 0);
      if (!may) {
        /* No read was needed: even the best fresh read of the freed devices (nothing outside
         * reservations, answering, no pressure) lets nothing in. */
        releases_without_read++;
        for (uint64_t m = freed; m != 0; m &= m - 1) {
          unsigned d = (unsigned)__builtin_ctzll(m);
          gpumd_sched_device_t v;
          assert_int_equal(gpumd_sched_device(ref->s, d, &v), 0);
          v.unmanaged = v.memory_used = 0;
          v.unanswered = false;
          v.fresh = true;
          for (int i = 0; i < 2; i++)
            put(both[i], v, now);
        }
        for (size_t e = 0; e < ref->n_ev; e++)
          if (ref->ev[e].to == GPUMD_RESV_GRANTED)
            grants_after_no_read++;
      }
    } else if (k < 88) {
      gpumd_sched_device_t v = random_view(&x, (unsigned)(rnd(&x) % 6));
      for (int i = 0; i < 2; i++)
        put(both[i], v, now);
    } else if (k < 92) {
      for (int i = 0; i < 2; i++)
        gpumd_sched_set_stale(both[i]->s);
    } else if (k < 95 && gpumd_sched_count(ref->s) > 0) {
      const gpumd_resv_t *r = gpumd_sched_at(ref->s, rnd(&x) % gpumd_sched_count(ref->s));
      uint64_t id = r->id, bytes = (1 + rnd(&x) % 40) * GiB;
      int rc[2];
      for (int i = 0; i < 2; i++)
        rc[i] = gpumd_sched_resize(both[i]->s, NULL, id, bytes, now, NULL, 0);
      assert_int_equal(rc[0], rc[1]);
    } else {
      uint64_t next[2];
      for (int i = 0; i < 2; i++)
        gpumd_sched_tick(both[i]->s, NULL, now, &next[i]);
      assert_int_equal(next[0], next[1]);
    }
    same_events(ref, fast, step);
    assert_int_equal(gpumd_sched_queue_length(ref->s), gpumd_sched_queue_length(fast->s));
  }
  assert_int_equal(grants_after_no_read, 0);
  assert_true(releases_without_read > 0); /* the run did exercise the no-read answer */
  fx_free(ref);
  fx_free(fast);
}

static void test_differential(void **state) {
  (void)state;
  gpumd_sched_opts_t o;
  plain_opts(&o);
  o.backfill_bound_ns = 8 * SEC;
  differential_run(&o, 0x9e3779b97f4a7c15ull, 4000);
  o.require_fresh = true;
  o.max_concurrent_jobs = 4;
  differential_run(&o, 0x2545f4914f6cdd1dull, 4000);
  o.placement = GPUMD_PLACEMENT_SPREAD;
  o.backfill = false;
  differential_run(&o, 0x853c49e6748fea9bull, 4000);
  gpumd_sched_opts_init(&o); /* the daemon's: fraction 0.95, margin, require_fresh */
  o.require_fresh = true;
  o.placement = GPUMD_PLACEMENT_SCORE;
  differential_run(&o, 0xda942042e4dd58b5ull, 4000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_release_on_another_device),
      cmocka_unit_test(test_release_only_for_its_devices),
      cmocka_unit_test(test_unmanaged_shrinks),
      cmocka_unit_test(test_device_back_from_error),
      cmocka_unit_test(test_jobs_pressure_unanswered),
      cmocka_unit_test(test_fresh_only),
      cmocka_unit_test(test_head_leaves),
      cmocka_unit_test(test_clock_back_unlocks_head),
      cmocka_unit_test(test_opts_unsettle),
      cmocka_unit_test(test_differential),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
