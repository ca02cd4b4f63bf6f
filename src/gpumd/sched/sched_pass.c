/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The scheduling pass of the gpumd scheduler (see sched.h for the contract): the walk of the
 * queue in service order with bounded backfill, and what lets a pass, a submit and a release
 * skip it: the queue settled at the device states the last decision saw, the per-device bounds
 * on what queued requests need (sched_internal.h, "settled"), and gpumd_sched_freed_*.
 */
#include "sched_internal.h"

#include <string.h>

#include <gpum/error.h>

/* ---- Need bounds ---------------------------------------------------------------------------- */

/* Lowers the need bounds (sched_internal.h) for r, queued. */
static void need_add(gpumd_sched_t *s, const gpumd_resv_t *r) {
  uint64_t b = r->bytes_per_gpu;
  if (r->want_mask == 0) {
    s->need_any = b < s->need_any ? b : s->need_any;
    return;
  }
  for (uint64_t m = r->want_mask; m != 0; m &= m - 1) {
    uint64_t *n = &s->need_dev[__builtin_ctzll(m)];
    *n = b < *n ? b : *n;
  }
}

void gpumd__sched_need_reset(gpumd_sched_t *s) {
  s->need_any = UINT64_MAX;
  for (unsigned d = 0; d < GPUMD_SCHED_MAX_DEVICES; d++)
    s->need_dev[d] = UINT64_MAX;
}

/* ---- The scheduling pass ------------------------------------------------------------------ */

/* True when device d could take a grant whatever its memory and freshness: not ERROR or
 * DISABLED, answering, below critical pressure and below the job limit (admits(), less the
 * memory and the fresh view). */
static bool slot_ok(const gpumd_sched_t *s, const sched_slot_t *slot) {
  gpum_health_t h = slot->v.health;
  return h != GPUM_HEALTH_ERROR && h != GPUM_HEALTH_DISABLED && !slot->v.unanswered &&
         slot->pressure != GPUMD_PRESSURE_CRITICAL &&
         (s->opts.max_concurrent_jobs == 0 || slot->jobs < s->opts.max_concurrent_jobs);
}

/* A lower bound on the bytes per GPU of any queued request that may use device d. */
static uint64_t need_of(const gpumd_sched_t *s, unsigned d) {
  return s->need_dev[d] < s->need_any ? s->need_dev[d] : s->need_any;
}

/* The devices some queued request could be granted on by their memory now (open): ok and with
 * need(d) of headroom. *grown: those of them better than the last decision saw (settled). */
static uint64_t open_devices(const gpumd_sched_t *s, uint64_t *grown) {
  uint64_t open = 0, g = 0;
  for (uint64_t m = s->known_mask; m != 0; m &= m - 1) {
    unsigned d = (unsigned)__builtin_ctzll(m);
    const sched_slot_t *slot = &s->dev[d];
    if (!slot_ok(s, slot))
      continue;
    uint64_t h = gpumd__sched_headroom(s, d);
    if (h < need_of(s, d))
      continue;
    open |= 1ull << d;
    if (!slot->seen_ok || h > slot->seen_headroom ||
        (s->opts.require_fresh && slot->v.fresh && !slot->seen_fresh))
      g |= 1ull << d;
  }
  *grown = g;
  return open;
}

/* Records the device states the decision just made saw: the queue is settled at them. */
static void seen_now(gpumd_sched_t *s, uint64_t now_ns) {
  for (uint64_t m = s->known_mask; m != 0; m &= m - 1) {
    unsigned d = (unsigned)__builtin_ctzll(m);
    sched_slot_t *slot = &s->dev[d];
    slot->seen_ok = slot_ok(s, slot);
    slot->seen_fresh = slot->v.fresh;
    slot->seen_headroom = gpumd__sched_headroom(s, d);
  }
  s->seen_locked = s->n_queue > 0 && gpumd__sched_head_locked(s, s->queue[0], now_ns);
  s->settled = true;
}

/* The devices a pass on a settled queue must look at now: 0 when it grants nothing (no device
 * a queued request could use grew), all known ones when settled no longer holds (the head
 * was locked and is not now: the clock went back). *open: the open devices. */
static uint64_t settled_grown(const gpumd_sched_t *s, uint64_t now_ns, uint64_t *open) {
  uint64_t grown = 0;
  *open = open_devices(s, &grown);
  if (s->seen_locked && s->n_queue > 0 && !gpumd__sched_head_locked(s, s->queue[0], now_ns))
    return s->known_mask;
  return grown;
}

/* May r, queued, use a device of mask (by its explicit devices; any when it names none)? */
static bool may_use(const gpumd_resv_t *r, uint64_t mask) {
  return ((r->want_mask != 0 ? r->want_mask : ~0ull) & mask) != 0;
}

/*
 * Walks the queue in service order and grants what fits; the first request that does not fit
 * is the blocked head. Later ones pass it freely while it has waited at most backfill_bound_ns
 * (and backfill is on); after that only on devices the head can never use (not matching it, or
 * ERROR/DISABLED), since those cannot delay it. narrow (settled queues): the devices that grew;
 * while the head is the one the last decision saw (queue[0], not granted now), a request that
 * cannot use one of them cannot have become grantable and is not looked at (sched_internal.h,
 * settled); 0: every request is.
 */
static void walk(gpumd_sched_t *s, const gpumd_cause_t *cause, uint64_t now_ns, uint64_t narrow) {
  const gpumd_resv_t *head = NULL;
  uint64_t allowed = s->known_mask; /* devices the next request may take */
  uint64_t asked = s->want_fresh;   /* want_fresh: what this walk asks is kept apart */
  s->want_fresh = 0;
  if (narrow == 0)
    gpumd__sched_need_reset(s); /* recomputed over what stays queued */
  size_t i = 0;
  while (i < s->n_queue && allowed != 0) {
    gpumd_resv_t *r = s->queue[i];
    if (narrow != 0 && head != NULL && !may_use(r, narrow)) {
      i++;
      continue;
    }
    uint64_t mask = 0;
    if (gpumd__sched_place_in(s, r, allowed, true, &mask)) {
      if (head == NULL && narrow != 0) { /* the head goes: every request behind it is looked at */
        narrow = 0;
        gpumd__sched_need_reset(s); /* those before r were all granted */
      }
      gpumd__sched_grant(s, cause, r, mask, now_ns, head);
      continue; /* r left the queue: queue[i] is the next one */
    }
    if (head == NULL) {
      head = r;
      if (gpumd__sched_head_locked(s, head, now_ns))
        allowed &= ~gpumd__sched_usable_mask(s, head);
    }
    if (narrow == 0)
      need_add(s, r);
    i++;
  }
  for (; narrow == 0 && i < s->n_queue; i++)
    need_add(s, s->queue[i]);
  s->settled_want = narrow != 0 ? s->settled_want | s->want_fresh : s->want_fresh;
  s->want_fresh |= asked;
  seen_now(s, now_ns);
}

/* The scheduling pass: grants what fits, in service order with bounded backfill (walk). On a
 * settled queue it looks only where something may have changed (sched_internal.h). */
void gpumd__sched_pass(gpumd_sched_t *s, const gpumd_cause_t *cause, uint64_t now_ns) {
  if (!s->settled || s->full_passes) {
    walk(s, cause, now_ns, 0);
    return;
  }
  uint64_t open = 0, grown = settled_grown(s, now_ns, &open);
  if (grown != 0) {
    walk(s, cause, now_ns, grown);
    return;
  }
  /* Nothing grants. The stale devices a walk would ask to read afresh are among those the last
   * decisions asked for that are still stale and open. */
  uint64_t stale = 0;
  for (uint64_t m = open; s->opts.require_fresh && m != 0; m &= m - 1)
    if (!s->dev[__builtin_ctzll(m)].v.fresh)
      stale |= m & -m;
  s->settled_want &= stale;
  s->want_fresh |= s->settled_want;
  seen_now(s, now_ns);
}

/* The pass after submitting r to a queue settled at the current device states, in which r is
 * not first: nothing ahead of r fits, so the blocked head is the queue's first request and r
 * is the only one the pass could grant (granting it takes capacity from those behind it; not
 * granting it changes nothing for them): what gpumd__sched_pass would do, without walking the
 * queue. */
void gpumd__sched_pass_one(gpumd_sched_t *s, const gpumd_cause_t *cause, gpumd_resv_t *r,
                           uint64_t now_ns) {
  const gpumd_resv_t *head = s->queue[0];
  uint64_t allowed = s->known_mask, mask = 0, asked = s->want_fresh;
  s->want_fresh = 0;
  if (gpumd__sched_head_locked(s, head, now_ns))
    allowed &= ~gpumd__sched_usable_mask(s, head);
  if (allowed != 0 && gpumd__sched_place_in(s, r, allowed, true, &mask))
    gpumd__sched_grant(s, cause, r, mask, now_ns, head);
  else
    need_add(s, r);
  s->settled_want |= s->want_fresh;
  s->want_fresh |= asked;
  seen_now(s, now_ns);
}

/* True when a submit may decide on its request alone: the queue is settled and no device a
 * queued request could use grew since. */
bool gpumd__sched_quiet(const gpumd_sched_t *s, uint64_t now_ns) {
  uint64_t open = 0;
  return s->settled && !s->full_passes && settled_grown(s, now_ns, &open) == 0;
}

void gpumd__sched_set_full_passes(gpumd_sched_t *s, bool on) {
  s->full_passes = on;
}

bool gpumd__sched_head_locked(const gpumd_sched_t *s, const gpumd_resv_t *head, uint64_t now_ns) {
  if (!s->opts.backfill || s->opts.backfill_bound_ns == 0)
    return true;
  uint64_t waited = now_ns > head->created_ns ? now_ns - head->created_ns : 0;
  return waited > s->opts.backfill_bound_ns;
}

/* ---- Ending reservations ----------------------------------------------------------------- */

void gpumd_sched_freed_init(gpumd_sched_freed_t *f) {
  memset(f, 0, sizeof(*f));
}

void gpumd_sched_freed_add(const gpumd_sched_t *s, gpumd_sched_freed_t *f, uint64_t id) {
  const gpumd_resv_t *r = gpumd_sched_find(s, id);
  if (r == NULL)
    return;
  if (r->state == GPUMD_RESV_QUEUED) {
    f->head |= s->queue[0] == r;
    return;
  }
  if (r->state != GPUMD_RESV_GRANTED) /* a SUSPENDED one holds no device memory */
    return;
  for (uint64_t m = r->device_mask; m != 0; m &= m - 1) {
    unsigned d = (unsigned)__builtin_ctzll(m);
    f->bytes[d] += r->bytes_per_gpu;
    f->jobs[d]++;
  }
}

bool gpumd_sched_freed_may_grant(const gpumd_sched_t *s, const gpumd_sched_freed_t *f) {
  if (s->n_queue == 0)
    return false;
  if (!s->settled || s->full_passes || f->head)
    return true;
  /* Settled: only a device that grows can take a queued request (sched_internal.h), and of
   * those only one freed here is this end's doing; a read may clear an unanswered read, a
   * critical pressure or memory used outside reservations, so those are not counted. */
  for (uint64_t m = s->known_mask; m != 0; m &= m - 1) {
    unsigned d = (unsigned)__builtin_ctzll(m);
    const sched_slot_t *slot = &s->dev[d];
    if (f->jobs[d] == 0 || slot->v.health == GPUM_HEALTH_ERROR ||
        slot->v.health == GPUM_HEALTH_DISABLED)
      continue;
    unsigned jobs = slot->jobs > f->jobs[d] ? slot->jobs - f->jobs[d] : 0;
    if (s->opts.max_concurrent_jobs != 0 && jobs >= s->opts.max_concurrent_jobs)
      continue;
    uint64_t reserved = slot->reserved > f->bytes[d] ? slot->reserved - f->bytes[d] : 0;
    uint64_t room = slot->capacity > reserved ? slot->capacity - reserved : 0;
    if (room >= need_of(s, d))
      return true;
  }
  return false;
}
