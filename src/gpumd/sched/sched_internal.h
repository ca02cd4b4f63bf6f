/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The scheduler's internals shared by sched.c (tables, transitions, the scheduling pass) and
 * sched_place.c (admission, placement, never-fit, "waiting for" texts). Not for other modules.
 */
#ifndef GPUMD_SCHED_INTERNAL_H
#define GPUMD_SCHED_INTERNAL_H

#include "sched.h"
#include "utf8_internal.h"

/* One device: the daemon's view plus the scheduler's accounting. */
typedef struct {
  bool known;
  gpumd_sched_device_t v;
  uint64_t reserved; /* bytes of GRANTED reservations */
  unsigned jobs;     /* GRANTED reservations */
  gpumd_pressure_t pressure;
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
  uint64_t next_id;
  unsigned char rand[512]; /* getrandom bytes for tokens, used from rand_used on */
  size_t rand_used;
  /* require_fresh: stale devices a placement would have used (gpumd_sched_wants_fresh). A note
   * for the daemon, written by the const placement functions: never read by scheduling. */
  uint64_t want_fresh;
  /* The last scheduling pass left nothing grantable, and nothing that could make something
   * grantable happened since (capacity freed, a queued request gone or added, a device view
   * or the options changed: each clears it). Lets a submit decide on the new request alone
   * instead of walking the whole queue (gpumd_sched_submit). */
  bool settled;
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

/* The scheduling pass; grant of one queued reservation (passed: the blocked head it passes,
 * or NULL). cause: handed to on_transition with each transition. */
void gpumd__sched_pass(gpumd_sched_t *s, const gpumd_cause_t *cause, uint64_t now_ns);
void gpumd__sched_grant(gpumd_sched_t *s, const gpumd_cause_t *cause, gpumd_resv_t *r,
                        uint64_t mask, uint64_t now_ns, const gpumd_resv_t *passed);
/* True when the blocked head has waited past the backfill bound (or backfill is off). */
bool gpumd__sched_head_locked(const gpumd_sched_t *s, const gpumd_resv_t *head, uint64_t now_ns);

#endif /* GPUMD_SCHED_INTERNAL_H */
