/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The scheduler's internals shared by sched.c (tables, transitions, devices, reservations),
 * sched_pass.c (the scheduling pass, and what lets it skip the queue) and sched_place.c
 * (admission, placement, never-fit, "waiting for" texts). Not for other modules.
 */
#ifndef GPUMD_SCHED_INTERNAL_H
#define GPUMD_SCHED_INTERNAL_H

#include "sched.h"
#include "utf8_internal.h"

/* One device: the daemon's view plus the scheduler's accounting. */
typedef struct {
  bool known;
  gpumd_sched_device_t v;
  uint64_t capacity; /* gpumd__sched_capacity of v under the options, kept with both */
  uint64_t reserved; /* bytes of GRANTED reservations */
  unsigned jobs;     /* GRANTED reservations */
  gpumd_pressure_t pressure;
  /* What the last decision on the queue saw of the device (see `settled`): whether it could
   * take a grant at all (sched_open, freshness aside), whether it was fresh, and its
   * headroom. A device no better than that now cannot have become of use to the queue. */
  bool seen_ok, seen_fresh;
  uint64_t seen_headroom;
} sched_slot_t;

struct gpumd_sched {
  gpumd_sched_opts_t opts;
  gpumd_sched_callbacks_t cb;
  sched_slot_t dev[GPUMD_SCHED_MAX_DEVICES];
  uint64_t known_mask;
  gpumd_resv_t **all; /* live reservations, sorted by id */
  size_t n_all, cap_all;
  gpumd_resv_t **queue; /* QUEUED reservations in service order */
  size_t n_queue, cap_queue;
  size_t n_suspended;   /* SUSPENDED reservations */
  size_t n_preemptible; /* GRANTED preemptible reservations */
  size_t n_slurm;       /* GRANTED reservations of Slurm job steps (slurm_job set) */
  uint64_t next_id;
  unsigned char rand[512]; /* getrandom bytes for tokens, used from rand_used on */
  size_t rand_used;
  /* require_fresh: stale devices a placement would have used (gpumd_sched_wants_fresh). A note
   * for the daemon, written by the const placement functions: never read by scheduling. */
  uint64_t want_fresh;
  /*
   * settled: the last decision on the queue (a pass, or a submit decided alone) left nothing
   * grantable at the device states it saw (sched_slot_t's seen_*), and neither the queue's
   * head, nor the options, nor what a device is (its name, vendor, memory: what matching
   * reads) changed since. Admission is monotone: a request that did not fit a device does not
   * fit it while the device is no better (no more headroom, not newly out of ERROR, DISABLED,
   * critical pressure, the job limit or an unanswered read, not newly fresh). So while
   * settled, a pass needs to look only at the devices that grew since AND that some queued
   * request could use (headroom at least need(d)), and only at the requests that could use
   * one of those (sched.c, gpumd__sched_pass): nothing, in the common case of a release or a
   * fresh read that changed nothing a queued request could use. A submit to a settled queue
   * decides on the new request alone (gpumd_sched_submit).
   */
  bool settled;
  bool seen_locked; /* the head was past the backfill bound at the last decision */
  /* require_fresh: the devices the last decisions asked to be read afresh (want_fresh),
   * asked again by a pass that has no need to walk the queue while they are still stale. */
  uint64_t settled_want;
  /* A lower bound on the bytes per GPU of the queued requests that may use device d (their
   * explicit devices, else any): need(d) = min(need_dev[d], need_any). Exact after a full
   * pass; lowered by each request a submit leaves queued (pass_one), never raised by one
   * leaving (still a bound). Read only while settled: a request queued without being decided
   * on (restore) clears settled, and the full pass that follows recomputes them. */
  uint64_t need_dev[GPUMD_SCHED_MAX_DEVICES];
  uint64_t need_any;
  /* The earliest queue-timeout deadline of a request still to be acted on (UINT64_MAX: none);
   * recomputed over the queue only when deadline_stale (the earliest one left). */
  uint64_t next_deadline;
  bool deadline_stale;
  bool full_passes; /* tests: every pass walks the whole queue (gpumd__sched_set_full_passes) */
};

/* min(total * memory_fraction, total - driver reserved) - safety_margin, saturating at 0. */
uint64_t gpumd__sched_capacity(const gpumd_sched_t *s, const gpumd_sched_device_t *v);
/* capacity - (reserved + unmanaged) of device d, saturating at 0. */
uint64_t gpumd__sched_headroom(const gpumd_sched_t *s, unsigned d);
double gpumd__sched_used_ratio(const gpumd_sched_device_t *v);

/* True when device d satisfies r's constraints (model, min_memory, explicit list). */
bool gpumd__sched_matches(const gpumd_sched_t *s, const gpumd_resv_t *r, unsigned d);
/* Chooses r->gpus devices that admit r now, by the placement strategy. Returns false (mask
 * untouched) when fewer devices admit it. decide: for a grant, so only on views read afresh
 * (require_fresh; a stale one that would do is noted for gpumd_sched_wants_fresh); else to
 * explain or estimate (stale views count, a device that did not answer its last read not). */
bool gpumd__sched_place(const gpumd_sched_t *s, const gpumd_resv_t *r, bool decide, uint64_t *mask);
/* The same among the devices of allowed only. */
bool gpumd__sched_place_in(const gpumd_sched_t *s, const gpumd_resv_t *r, uint64_t allowed,
                           bool decide, uint64_t *mask);
/* The devices r could ever use without an operator or a recovery: known, matching, neither
 * ERROR nor DISABLED. A locked head is protected on these devices only. */
uint64_t gpumd__sched_usable_mask(const gpumd_sched_t *s, const gpumd_resv_t *r);
/* Resolves explicit device specs (index or UUID) to a mask. 0 / GPUM_EINVAL (bad spelling) /
 * GPUMD_SCHED_ENEVERFIT (no such device). */
int gpumd__sched_resolve_devices(const gpumd_sched_t *s, const char *const *specs, size_t n,
                                 uint64_t *mask);
/* 0, or GPUMD_SCHED_ENEVERFIT with the reason as the error detail. */
int gpumd__sched_never_fit(const gpumd_sched_t *s, const gpumd_resv_t *r);
/* "0,2" for a mask. */
char *gpumd__sched_mask_format(uint64_t mask, char *buf, size_t len);

/* The scheduling pass (sched_pass.c); grant of one queued reservation (sched.c; passed: the
 * blocked head it passes, or NULL). cause: handed to on_transition with each transition. */
void gpumd__sched_pass(gpumd_sched_t *s, const gpumd_cause_t *cause, uint64_t now_ns);
/* True when a submit may decide on its request alone (gpumd__sched_pass_one): the queue is
 * settled and no device a queued request could use grew since. Call before r joins it. */
bool gpumd__sched_quiet(const gpumd_sched_t *s, uint64_t now_ns);
/* The pass after submitting r to a queue gpumd__sched_quiet found settled, r not first. */
void gpumd__sched_pass_one(gpumd_sched_t *s, const gpumd_cause_t *cause, gpumd_resv_t *r,
                           uint64_t now_ns);
/* Forgets the need bounds (none queued); the next full pass recomputes them. */
void gpumd__sched_need_reset(gpumd_sched_t *s);
void gpumd__sched_grant(gpumd_sched_t *s, const gpumd_cause_t *cause, gpumd_resv_t *r,
                        uint64_t mask, uint64_t now_ns, const gpumd_resv_t *passed);
/* Tests only: with on, every pass walks the whole queue and every submit takes a full pass,
 * as before the settled shortcuts, so a test can compare both on the same operations. */
void gpumd__sched_set_full_passes(gpumd_sched_t *s, bool on);
/* True when the blocked head has waited past the backfill bound (or backfill is off). */
bool gpumd__sched_head_locked(const gpumd_sched_t *s, const gpumd_resv_t *head, uint64_t now_ns);

#endif /* GPUMD_SCHED_INTERNAL_H */
