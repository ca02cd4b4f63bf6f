/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gpumd scheduler: admission, placement and the wait queue of GPU memory reservations.
 *
 * Pure logic. The scheduler makes no system call except getrandom() for reservation tokens,
 * reads no clock (every call takes now_ns from the caller: CLOCK_REALTIME nanoseconds, since
 * these times are persisted and shown to users) and is NOT thread-safe: the daemon's event
 * loop owns it and is the only caller. The daemon feeds it device views (from the monitor and
 * the NVML process list), requests and releases; the scheduler reports every state change of
 * a reservation through the on_transition callback, synchronously, before the call that
 * caused it returns, with the cause the caller passed to that call (who acts: the daemon's
 * audit identity and reply bookkeeping, opaque here). The daemon writes each transition to
 * the ledger, commits the loop turn, and only then sends replies and events.
 *
 * Admission, per device d and request of B bytes per GPU:
 *     committed(d) + B <= capacity(d)
 *     capacity(d) = min(total(d) * memory_fraction, total(d) - driver_reserved(d)) - safety_margin
 * where committed(d) = bytes of GRANTED reservations on d + unmanaged(d), unmanaged(d) is the
 * memory used on d by processes that hold no reservation (computed by the daemon), and
 * driver_reserved(d) what the driver keeps for itself (never allocatable). A device also takes
 * no new grant when it is ERROR or DISABLED, when it already runs max_concurrent_jobs granted
 * reservations (0 = unlimited; only reservations count as jobs), when its used-memory ratio
 * is at or over the critical pressure watermark, or, with require_fresh, when its view was not
 * read afresh for this decision (the daemon reads the devices before it submits or resizes,
 * and after a pass that wanted a stale device: gpumd_sched_wants_fresh).
 *
 * Overcommit: admission keeps committed(d) <= capacity(d), but a process outside gpum may grow
 * after a grant. A device whose committed memory then passes its capacity is overcommitted
 * (gpumd_sched_device_stats: overcommit > 0): it takes no grant (its headroom is 0) and its
 * pressure is at least HIGH, so that the jobs on it are told to give memory back.
 *
 * Never-fit: a request that could not be granted even on an idle node (no device matches the
 * model (GPU type) / min_memory / explicit list, an explicit device does not exist, more GPUs
 * than matching devices, or bytes_per_gpu above total*fraction-margin of too many matching
 * devices) is rejected by gpumd_sched_submit() with GPUMD_SCHED_ENEVERFIT and a reason; it
 * never enters the queue. Device health does not count here (an ERROR device may recover).
 *
 * Placement, among the devices that admit the request: pack = best fit (least headroom left
 * after placing), spread = most headroom left, score = highest weighted score of free memory
 * fraction (0.5), idle utilisation (0.25), coolness (0.15) and health (0.1; BUSY counts half).
 * Ties go to the lower index. A request for N GPUs gets N distinct devices at once or none.
 *
 * Queue: ordered by priority (higher first), FIFO inside a priority (submission order). A
 * scheduling pass walks the queue in that order and grants every request that fits (on a
 * queue the last pass settled it looks only where a device grew, with the same outcome:
 * sched_internal.h, "settled"). The
 * first request that does not fit is the blocked head. Requests behind it that fit are
 * granted past it (backfill) only while backfill is enabled and the head has been queued for
 * at most backfill_bound_ns; once the head has waited longer (or at once with backfill off),
 * nothing passes it on a device it could use (matching it, not ERROR/DISABLED) until it is
 * granted, so the head's extra delay from backfill is bounded. Devices the head can never use
 * stay open to the others (a head waiting for a failed GPU does not stall the node). (Without
 * run-time estimates this bound is what keeps large requests from starving. "Smaller" is implicit:
 * what passes a blocked head is whatever fits while the head does not.)
 *
 * Reservation memory: a reservation reaches a final state (RELEASED, EXPIRED, CANCELLED,
 * FAILED), is reported through on_transition (the pointer is valid during the callback only)
 * and is then freed by the scheduler. Pointers returned by gpumd_sched_find() and friends are
 * valid until the next call that changes the scheduler.
 */
#ifndef GPUMD_SCHED_H
#define GPUMD_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/device.h>
#include <gpum/error.h>
#include <gpum/monitor.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Devices are addressed by their device-layer index, 0..GPUMD_SCHED_MAX_DEVICES-1: the
 * scheduler keeps device sets as 64-bit masks. */
#define GPUMD_SCHED_MAX_DEVICES 64

/* Returned by gpumd_sched_submit() for a request that can never fit (an alias kept for the
 * daemon's code written before the error code existed). */
#define GPUMD_SCHED_ENEVERFIT GPUM_ENEVERFIT

#define GPUMD_RESV_TOKEN_LEN 33  /* 32 lowercase hex digits + NUL */
#define GPUMD_RESV_LABEL_LEN 128 /* label, NUL included (longer: EINVAL at submit) */
#define GPUMD_RESV_MODEL_LEN 128 /* model (GPU type), NUL included (longer: EINVAL) */
#define GPUMD_RESV_REASON_LEN 256
#define GPUMD_RESV_ID_BUFSZ 24  /* "r-" + 20 digits + NUL */
#define GPUMD_RESV_SLURM_LEN 24 /* a Slurm job or step id, NUL included: "N_T", 10 digits each */
#define GPUMD_RESV_MAX_PROCS 8  /* CUDA processes of one suspended job */

/* ---- Reservation states, leases ------------------------------------------------------- */

typedef enum {
  GPUMD_RESV_NEW = -1, /* only as the `from` of the first transition of a reservation */
  GPUMD_RESV_QUEUED = 0,
  GPUMD_RESV_GRANTED = 1,
  GPUMD_RESV_RELEASED = 2,  /* released by its owner, an admin, or its lease ending */
  GPUMD_RESV_EXPIRED = 3,   /* queue timeout with REJECT, or TTL lease passed */
  GPUMD_RESV_CANCELLED = 4, /* released while QUEUED */
  GPUMD_RESV_FAILED = 5,    /* a device it held went to ERROR */
  /* Its processes' device memory is in host memory (the driver's checkpoint): live, counted on
   * no device; device_mask keeps the GPUs it held (docs/suspend.md). */
  GPUMD_RESV_SUSPENDED = 6,
} gpumd_resv_state_t;

/* "NEW", "QUEUED", "GRANTED", "RELEASED", "EXPIRED", "CANCELLED", "FAILED", "SUSPENDED";
 * "UNKNOWN" otherwise. Never NULL. */
const char *gpumd_resv_state_name(gpumd_resv_state_t s);
/* Parses a state name (case-insensitive; not "NEW"). Returns 0 or GPUM_EINVAL. */
int gpumd_resv_state_parse(const char *s, gpumd_resv_state_t *out);
/* True for RELEASED, EXPIRED, CANCELLED and FAILED. */
bool gpumd_resv_state_final(gpumd_resv_state_t s);

typedef enum {
  GPUMD_LEASE_CONNECTION = 0, /* ends when the client's connection closes (default) */
  GPUMD_LEASE_PID = 1,        /* ends when lease_pid exits */
  GPUMD_LEASE_TTL = 2,        /* ends at expires_ns unless renewed */
} gpumd_lease_kind_t;
/* "connection", "pid", "ttl"; parse is case-insensitive. Returns 0 or GPUM_EINVAL. */
const char *gpumd_lease_kind_name(gpumd_lease_kind_t k);
int gpumd_lease_kind_parse(const char *s, gpumd_lease_kind_t *out);

typedef enum {
  GPUMD_ON_TIMEOUT_REJECT = 0, /* queue timeout passed: EXPIRED */
  GPUMD_ON_TIMEOUT_WAIT = 1,   /* queue timeout passed: the client is told once, stays QUEUED */
} gpumd_on_timeout_t;
/* "reject", "wait"; parse is case-insensitive. Returns 0 or GPUM_EINVAL. */
const char *gpumd_on_timeout_name(gpumd_on_timeout_t t);
int gpumd_on_timeout_parse(const char *s, gpumd_on_timeout_t *out);

typedef enum {
  GPUMD_PLACEMENT_PACK = 0, /* best fit (default) */
  GPUMD_PLACEMENT_SPREAD = 1,
  GPUMD_PLACEMENT_SCORE = 2,
} gpumd_placement_t;
/* "pack", "spread", "score"; parse is case-insensitive. Returns 0 or GPUM_EINVAL. */
const char *gpumd_placement_name(gpumd_placement_t p);
int gpumd_placement_parse(const char *s, gpumd_placement_t *out);

typedef enum {
  GPUMD_PRESSURE_NONE = 0,
  GPUMD_PRESSURE_HIGH = 1,     /* used ratio >= pressure_high: tell the device's clients */
  GPUMD_PRESSURE_CRITICAL = 2, /* used ratio >= pressure_critical: also no new grants */
} gpumd_pressure_t;
/* "none", "high", "critical". */
const char *gpumd_pressure_name(gpumd_pressure_t p);

/* ---- Reservations --------------------------------------------------------------------- */

/* One reservation, as the scheduler keeps it and the ledger stores it. */
typedef struct {
  uint64_t id; /* n of "r-<n>", from 1, monotonic over the ledger's life */
  char token[GPUMD_RESV_TOKEN_LEN];
  gpumd_resv_state_t state;
  char reason[GPUMD_RESV_REASON_LEN]; /* of the last transition */
  uint32_t uid;                       /* owner (SO_PEERCRED of the submitting peer) */
  int32_t pid;                        /* submitting process */
  uint64_t pid_start; /* start time of pid (/proc/PID/stat field 22, clock ticks since boot);
                         0 = unknown: liveness then falls back to kill(pid, 0) */
  char label[GPUMD_RESV_LABEL_LEN];
  /* The Slurm job step it was made for (the SPANK plugin): both "" when none, else both set,
   * as gpumd_slurm_ids_check() accepts them. */
  char slurm_job[GPUMD_RESV_SLURM_LEN];
  char slurm_step[GPUMD_RESV_SLURM_LEN];
  /* The request. */
  uint64_t bytes_per_gpu;
  unsigned gpus;
  char model[GPUMD_RESV_MODEL_LEN]; /* GPU type, gpum_gpu_type_matches on the name; "" = any */
  uint64_t min_memory;              /* minimum total memory of a device; 0 = any */
  uint64_t want_mask;               /* explicit devices (bit = index); 0 = any device */
  int priority;                     /* -100..100, higher first */
  uint64_t timeout_ms;              /* queue timeout; 0 = none */
  gpumd_on_timeout_t on_timeout;
  /* The lease: stored for the daemon, the scheduler does not act on it. */
  gpumd_lease_kind_t lease;
  int32_t lease_pid;        /* GPUMD_LEASE_PID */
  uint64_t lease_pid_start; /* start time of lease_pid, as pid_start; 0 = unknown */
  uint64_t ttl_ms;          /* GPUMD_LEASE_TTL */
  uint64_t expires_ns;      /* GPUMD_LEASE_TTL: current deadline (the daemon renews it); else 0 */
  /* The outcome. */
  uint64_t device_mask; /* granted devices (bit = index); 0 unless GRANTED or later */
  uint64_t created_ns;  /* submitted (also the start of its wait in the queue) */
  uint64_t granted_ns;  /* 0 when never granted */
  uint64_t ended_ns;    /* reached a final state; 0 before */
  bool timeout_told;    /* WAIT: the timeout notice was reported */
  /* Suspend (docs/suspend.md). */
  bool preemptible;      /* the job agreed to be suspended (the reserve's "preemptible") */
  bool suspend_hold;     /* SUSPENDED: stays so until a resume asks (a suspend by hand); false:
                            resumed by gpumd when room returns (a preemption) */
  uint64_t suspended_ns; /* SUSPENDED: since; else 0 */
  uint64_t host_bytes;   /* SUSPENDED: host memory its processes' device memory took */
  uint64_t ckpt_mask;    /* the GPUs its processes' memory was checkpointed from */
  uint8_t moving;        /* GPUMD_MOVING_*: a suspend or resume under way (not stored) */
  unsigned nprocs;       /* its processes being or having been checkpointed */
  int32_t proc_pid[GPUMD_RESV_MAX_PROCS];
  uint64_t proc_start[GPUMD_RESV_MAX_PROCS]; /* start times, as pid_start */
} gpumd_resv_t;

/* Writes "r-<id>" into buf (GPUMD_RESV_ID_BUFSZ suffices) and returns buf. */
char *gpumd_resv_id_format(uint64_t id, char *buf, size_t len);

/* Checks a Slurm job id and step id as a reservation stores them: the job "N" or, for an array
 * task, "N_T" (N and T 1 to 10 decimal digits); the step "N" or one of Slurm's named steps
 * "batch", "extern", "interactive". Both NULL is fine (no Slurm job). Returns 0 or GPUM_EINVAL
 * saying which is wrong. */
int gpumd_slurm_ids_check(const char *job, const char *step);
/* Parses "r-<n>" (n >= 1, decimal, no sign or junk). Returns 0 or GPUM_EINVAL naming s. */
int gpumd_resv_id_parse(const char *s, uint64_t *out);

/* A request as the daemon parsed it from the protocol. Pointers are read during
 * gpumd_sched_submit() only. */
typedef struct {
  uint64_t bytes_per_gpu; /* > 0 */
  unsigned gpus;          /* 1..GPUMD_SCHED_MAX_DEVICES */
  const char *model;      /* GPU type (gpum/gputype.h); NULL or "" = any */
  uint64_t min_memory;
  const char *const *devices; /* explicit devices: decimal index or exact UUID; NULL = any */
  size_t device_count;
  int priority;
  uint64_t timeout_ms;
  gpumd_on_timeout_t on_timeout;
  const char *label; /* NULL = "" */
  /* The Slurm job and step ids: both NULL (none) or both set (gpumd_slurm_ids_check()). */
  const char *slurm_job;
  const char *slurm_step;
  gpumd_lease_kind_t lease;
  int32_t lease_pid;
  uint64_t lease_pid_start; /* see gpumd_resv_t; 0 = unknown */
  uint64_t ttl_ms;
  uint32_t uid;
  int32_t pid;
  uint64_t pid_start; /* see gpumd_resv_t; 0 = unknown */
  bool no_wait;       /* grant now or fail with GPUM_EBUSY; never queue (protocol "wait": false) */
  bool preemptible;   /* the job may be suspended (protocol "preemptible") */
} gpumd_sched_request_t;

/* Zeroes req and sets gpus = 1, lease = connection, on_timeout = reject. */
void gpumd_sched_request_init(gpumd_sched_request_t *req);

/* ---- Devices ---------------------------------------------------------------------------- */

/* What the daemon knows of one device; replaced on every gpumd_sched_update_device(). */
typedef struct {
  unsigned index; /* device-layer index, < GPUMD_SCHED_MAX_DEVICES */
  char uuid[GPUM_UUID_LEN];
  char name[GPUM_NAME_LEN]; /* matched by the model (gpum_gpu_type_matches_device) */
  char vendor[16];          /* the device layer's: "nvidia", "amd", "intel", "host"; "" unknown */
  unsigned vendor_index;    /* its number among its vendor's devices (gpum_device_info_t) */
  uint64_t memory_total;
  uint64_t memory_used;     /* all processes (NVML); the pressure ratio is used / total */
  uint64_t memory_reserved; /* the driver's own (NVML memory info v2): never allocatable */
  uint64_t unmanaged;       /* used by processes that hold no reservation */
  bool fresh;               /* read afresh for this decision: grants need it under require_fresh */
  bool unanswered;          /* its last fresh read timed out or failed: no grant on it */
  /* ERROR on evidence the GPU is gone (lost, reset required): its reservations FAIL. An ERROR
   * device that is only slow (a hung call) keeps them and takes no new one. */
  bool gone;
  gpum_health_t health;
  char reason[GPUM_HEALTH_REASON_LEN]; /* why (for ERROR: becomes the FAILED reason) */
  bool util_valid;
  unsigned util_gpu_pct;
  bool temp_valid;
  int temperature_c;
} gpumd_sched_device_t;

/* Per-device accounting, as `status` shows it. */
typedef struct {
  uint64_t capacity;   /* min(total * fraction, total - driver reserved) - margin (0 when below) */
  uint64_t reserved;   /* bytes of GRANTED reservations */
  uint64_t unmanaged;  /* from the view */
  uint64_t committed;  /* reserved + unmanaged */
  uint64_t headroom;   /* capacity - committed (0 when over) */
  uint64_t overcommit; /* committed - capacity (0 when not over): memory taken after grants */
  unsigned jobs;       /* GRANTED reservations on the device */
  double used_ratio;   /* memory_used / memory_total (0 when total is 0) */
  gpumd_pressure_t pressure; /* at least HIGH while overcommitted */
} gpumd_sched_device_stats_t;

/* ---- Options, callbacks, lifecycle ------------------------------------------------------ */

/* Who or what causes the transitions of one call (a client's request, a timer, a device
 * change): a type of the caller's (gpumd: gpumd.h), which the scheduler never reads.
 * Every call that may change reservations takes one and hands it, as is, to on_transition
 * for each transition the call causes. NULL is fine. */
typedef struct gpumd_cause gpumd_cause_t;

typedef struct {
  double memory_fraction;       /* of total memory that may be committed; default 0.95;
                                   (0, 1] */
  uint64_t safety_margin;       /* bytes kept free per device; default 256 MiB */
  unsigned max_concurrent_jobs; /* per device; default 0 = unlimited */
  gpumd_placement_t placement;  /* default pack */
  bool backfill;                /* default true */
  uint64_t backfill_bound_ns;   /* default 60 s; 0 = no backfill once anything is blocked */
  double pressure_high;         /* used ratio; default 0.90; (0, 1] */
  double pressure_critical;     /* used ratio; default 0.97; [pressure_high, 1] */
  bool require_fresh;           /* grant only on devices whose view is fresh; default false */
} gpumd_sched_opts_t;

/* Fills opts with the defaults above. */
void gpumd_sched_opts_init(gpumd_sched_opts_t *opts);
/* Checks opts. Returns 0 or GPUM_EINVAL with a detail naming the bad field and value. */
int gpumd_sched_opts_check(const gpumd_sched_opts_t *opts);

/* A reservation changed state (from == GPUMD_RESV_NEW for a new one, which is always QUEUED
 * first; a granted-at-once request reports NEW->QUEUED then QUEUED->GRANTED; from == to ==
 * QUEUED when a WAIT timeout passes). cause is the one given to the call that caused it
 * (the same for every transition of that call, those of other reservations the call's
 * scheduling pass grants included). r already holds the new state and reason; it is valid
 * during the call only (final reservations are freed right after). The callback must not
 * call any gpumd_sched_* function that changes the scheduler. */
typedef void (*gpumd_sched_transition_fn)(void *user, const gpumd_cause_t *cause,
                                          const gpumd_resv_t *r, gpumd_resv_state_t from,
                                          gpumd_resv_state_t to, uint64_t time_ns,
                                          const char *reason);
/* A device's pressure level changed (reported on gpumd_sched_update_device()). */
typedef void (*gpumd_sched_pressure_fn)(void *user, unsigned device, double used_ratio,
                                        gpumd_pressure_t from, gpumd_pressure_t to);

typedef struct {
  gpumd_sched_transition_fn on_transition; /* may be NULL */
  gpumd_sched_pressure_fn on_pressure;     /* may be NULL */
  void *user;
} gpumd_sched_callbacks_t;

typedef struct gpumd_sched gpumd_sched_t;

/* Creates a scheduler with no devices. opts NULL: defaults; cb NULL: no callbacks. Returns 0,
 * GPUM_EINVAL (bad opts) or GPUM_ENOMEM. Free with gpumd_sched_destroy(). */
int gpumd_sched_create(const gpumd_sched_opts_t *opts, const gpumd_sched_callbacks_t *cb,
                       gpumd_sched_t **out);
/* Frees the scheduler and every reservation in it, without callbacks. NULL is fine. */
void gpumd_sched_destroy(gpumd_sched_t *s);
/* Replaces the options (reload). Returns 0 or GPUM_EINVAL (nothing changed). Takes effect at
 * the next scheduling pass (gpumd_sched_tick()). */
int gpumd_sched_set_opts(gpumd_sched_t *s, const gpumd_sched_opts_t *opts);

/* ---- Devices ---------------------------------------------------------------------------- */

/*
 * Adds or replaces the view of device dev->index, then:
 *   - a device that went to ERROR: every GRANTED reservation holding it becomes FAILED with
 *     the device's reason (a multi-GPU reservation fails as a whole); a DISABLED device keeps
 *     its grants and only takes no new ones. A device that vanished should be reported as
 *     ERROR (there is no removal);
 *   - a pressure level change is reported through on_pressure;
 *   - a scheduling pass runs (freed or new capacity may grant queued requests).
 * Returns 0 or GPUM_EINVAL (index out of range; the detail names it).
 */
int gpumd_sched_update_device(gpumd_sched_t *s, const gpumd_cause_t *cause,
                              const gpumd_sched_device_t *dev, uint64_t now_ns);
/* Several views at once, then one scheduling pass (a fresh read of every device). Returns 0
 * or GPUM_EINVAL (an index out of range: that view is skipped, the others applied). */
int gpumd_sched_update_devices(gpumd_sched_t *s, const gpumd_cause_t *cause,
                               const gpumd_sched_device_t *devs, size_t n, uint64_t now_ns);
/* require_fresh: the devices a pass would have granted on had their views been fresh (bit =
 * index), gathered since the last call, which clears them. */
uint64_t gpumd_sched_wants_fresh(gpumd_sched_t *s);
/* require_fresh: every device's view is stale again (the decision they were read for is
 * made). No pass. */
void gpumd_sched_set_stale(gpumd_sched_t *s);
/* The stored view / accounting of a device. Return 0 or GPUM_ENODEV. */
int gpumd_sched_device(const gpumd_sched_t *s, unsigned index, gpumd_sched_device_t *out);
int gpumd_sched_device_stats(const gpumd_sched_t *s, unsigned index,
                             gpumd_sched_device_stats_t *out);
/* Mask of known devices (bit = index). */
uint64_t gpumd_sched_device_mask(const gpumd_sched_t *s);
/* The pressure level of a used ratio under the scheduler's watermarks. */
gpumd_pressure_t gpumd_sched_pressure_level(const gpumd_sched_t *s, double used_ratio);

/* ---- Reservations ----------------------------------------------------------------------- */

/*
 * Submits a request: validates it, rejects a never-fit one, creates the reservation (id = the
 * next "r-<n>", 32-hex token from getrandom), queues it and runs a scheduling pass, so it may
 * come back GRANTED. *out (may be NULL) points at the reservation. Returns 0; GPUM_EINVAL
 * (bad field: bytes 0, gpus 0 or too many, priority out of -100..100, label or model too
 * long, bad explicit device spelling, the detail names it); GPUMD_SCHED_ENEVERFIT (the detail
 * is the reason); GPUM_EIO (getrandom failed); GPUM_ENOMEM. Nothing changes on error.
 * With req->no_wait the request is granted at once or not at all: a scheduling pass settles
 * the queue first (it may grant others, as a tick would), then a request that the next pass
 * would not grant (no room, or a blocked head it may not pass) is refused with GPUM_EBUSY,
 * the detail saying what it would have waited for; no reservation is created, no id used.
 */
int gpumd_sched_submit(gpumd_sched_t *s, const gpumd_cause_t *cause,
                       const gpumd_sched_request_t *req, uint64_t now_ns, const gpumd_resv_t **out);

/*
 * Ends a reservation: a GRANTED one becomes to (RELEASED, EXPIRED or FAILED), a QUEUED one
 * becomes CANCELLED when to is RELEASED, else to (EXPIRED, FAILED). reason NULL: "released".
 * A scheduling pass follows. Returns 0, GPUM_ENOENT (no live reservation with that id: never
 * existed or already final) or GPUM_EINVAL (to is not a final state).
 */
int gpumd_sched_end(gpumd_sched_t *s, const gpumd_cause_t *cause, uint64_t id,
                    gpumd_resv_state_t to, uint64_t now_ns, const char *reason);
/*
 * Whether ending some reservations may let a queued request in: for the daemon, which reads
 * the devices afresh before such an end (its pass grants only on fresh views) and need not
 * when nothing can come of it. Fill a gpumd_sched_freed_t with gpumd_sched_freed_init(), add
 * each reservation about to end (gpumd_sched_freed_add: a live one's bytes and job on its
 * devices; ids not live are ignored), then ask gpumd_sched_freed_may_grant(): true when the
 * queue is not settled (a pass may grant anywhere), when the queue's head is among them (the
 * others may then pass where it blocked), or when a device they free could then hold a queued
 * request's bytes per GPU were nothing used there outside reservations (a fresh read may show
 * memory outside reservations gone). False: a pass after those ends grants nothing on the
 * devices they free, whatever a fresh read of them shows. Pure (no change, no callback).
 */
typedef struct {
  uint64_t bytes[GPUMD_SCHED_MAX_DEVICES]; /* freed per device */
  unsigned jobs[GPUMD_SCHED_MAX_DEVICES];  /* granted reservations ending per device */
  bool head;                               /* the queue's head is among them */
} gpumd_sched_freed_t;
void gpumd_sched_freed_init(gpumd_sched_freed_t *f);
void gpumd_sched_freed_add(const gpumd_sched_t *s, gpumd_sched_freed_t *f, uint64_t id);
bool gpumd_sched_freed_may_grant(const gpumd_sched_t *s, const gpumd_sched_freed_t *f);

/* gpumd_sched_end(s, cause, id, GPUMD_RESV_RELEASED, now_ns, reason). */
int gpumd_sched_release(gpumd_sched_t *s, const gpumd_cause_t *cause, uint64_t id, uint64_t now_ns,
                        const char *reason);

/*
 * Suspend and resume (docs/suspend.md): the daemon checkpoints the job's processes first, then
 * tells the scheduler. gpumd_sched_suspend: a GRANTED reservation becomes SUSPENDED with reason
 * (its bytes leave its devices, device_mask stays as the GPUs it came from, hold as given), then
 * a scheduling pass. Returns 0, GPUM_ENOENT or GPUM_ESTATE (not GRANTED).
 */
int gpumd_sched_suspend(gpumd_sched_t *s, const gpumd_cause_t *cause, uint64_t id, bool hold,
                        uint64_t now_ns, const char *reason);
/*
 * Where a SUSPENDED reservation could come back now, before its processes are restored: its own
 * GPUs when they admit it again, else as many other GPUs of the same kind (name and memory, as
 * the driver's restore needs) as it had, by the placement strategy; as a request queued in its
 * place (its priority, then its age) would be granted: past the requests a pass left queued
 * (backfill), but not past a queue head ahead of it that waited past the backfill bound and
 * could use those GPUs. decide: as for a grant (fresh views under require_fresh). Returns 0
 * with *mask, GPUM_ENOENT, GPUM_ESTATE (not SUSPENDED) or GPUM_EBUSY (no room now; the detail
 * says what it waits for). Changes nothing.
 */
int gpumd_sched_resume_place(const gpumd_sched_t *s, uint64_t id, uint64_t now_ns, bool decide,
                             uint64_t *mask);
/* SUSPENDED -> GRANTED on mask (from gpumd_sched_resume_place), reason given: its bytes count
 * there from now on, so that the restore that follows always finds its room. Returns 0,
 * GPUM_ENOENT, GPUM_ESTATE or GPUM_EINVAL (mask not of its GPU count). */
int gpumd_sched_resume(gpumd_sched_t *s, const gpumd_cause_t *cause, uint64_t id, uint64_t mask,
                       uint64_t now_ns, const char *reason);
/* Keeps a suspend's facts on a live reservation (no transition): whether it is held, its host
 * memory, the GPUs it is checkpointed from and its processes (n <= GPUMD_RESV_MAX_PROCS; 0: none
 * under way). Returns 0, GPUM_ENOENT or GPUM_EINVAL. */
int gpumd_sched_set_suspend_facts(gpumd_sched_t *s, uint64_t id, bool hold, uint64_t host_bytes,
                                  uint64_t ckpt_mask, const int32_t *pids, const uint64_t *starts,
                                  unsigned n);
/* What a live reservation is doing (GPUMD_MOVING_*), and its reason when reason is not NULL (no
 * transition). Returns 0 or GPUM_ENOENT. */
#define GPUMD_MOVING_NONE 0
#define GPUMD_MOVING_SUSPENDING 1
#define GPUMD_MOVING_RESUMING 2
int gpumd_sched_set_moving(gpumd_sched_t *s, uint64_t id, unsigned moving, const char *reason);
/*
 * Preemption: the GRANTED preemptible reservations of lower priority than the QUEUED request id,
 * granted (or resumed) at least min_run_ns before now and not moving, whose suspension would let
 * it be placed now: the fewest of the lowest priority first (then the most recently granted),
 * and of those only the ones on the GPUs it would get. Up to max ids into victims, their count
 * into *n (0: none would do). Pure. Returns 0, GPUM_ENOENT (not queued) or GPUM_ENOSPC (more
 * than max would be needed; *n 0).
 */
int gpumd_sched_preempt_plan(const gpumd_sched_t *s, uint64_t id, uint64_t now_ns,
                             uint64_t min_run_ns, uint64_t *victims, size_t max, size_t *n);
/* The number of GRANTED preemptible reservations (O(1)): none, no plan to make. */
size_t gpumd_sched_preemptible(const gpumd_sched_t *s);
/* The number of GRANTED reservations of Slurm job steps (slurm_job set; O(1)). */
size_t gpumd_sched_slurm_granted(const gpumd_sched_t *s);
/* The number of SUSPENDED reservations (O(1)), and into *resumable (may be NULL; a walk of the
 * live reservations while any is suspended) those gpumd may resume by itself (not held). */
size_t gpumd_sched_suspended(const gpumd_sched_t *s, size_t *resumable);

/* Sets a TTL reservation's expires_ns (renew). Returns 0 or GPUM_ENOENT. No transition. */
int gpumd_sched_set_expiry(gpumd_sched_t *s, uint64_t id, uint64_t expires_ns);

/*
 * Resizes a GRANTED reservation to bytes per GPU (elastic reservations: the enforcement shim
 * asks to grow, and gives back). Growing needs room on every device it holds (headroom as
 * admission counts it), none of them ERROR or DISABLED, and no QUEUED request of at least its
 * priority that could use one of them; shrinking always succeeds and runs a scheduling pass.
 * No transition is reported (the state does not change). why (may be NULL) gets "resized from
 * A to B per GPU". Returns 0, GPUM_ENOENT, GPUM_ESTATE (not GRANTED), GPUM_EINVAL (0 bytes) or
 * GPUM_EBUSY (cannot grow now; the detail says why). Nothing changes on error.
 */
int gpumd_sched_resize(gpumd_sched_t *s, const gpumd_cause_t *cause, uint64_t id, uint64_t bytes,
                       uint64_t now_ns, char *why, size_t whylen);

/*
 * Timers and the queue: every QUEUED reservation whose timeout_ms passed becomes EXPIRED
 * (REJECT) or is reported once QUEUED->QUEUED (WAIT); then a scheduling pass. *next_ns (may
 * be NULL) receives the next queue-timeout deadline, UINT64_MAX when none. Call it when that
 * deadline passes and whenever convenient (it is cheap when nothing changed).
 */
void gpumd_sched_tick(gpumd_sched_t *s, const gpumd_cause_t *cause, uint64_t now_ns,
                      uint64_t *next_ns);

/* The live (QUEUED, GRANTED or SUSPENDED) reservation with this id, or NULL. */
const gpumd_resv_t *gpumd_sched_find(const gpumd_sched_t *s, uint64_t id);
/* Live reservations, in id order: 0 <= i < gpumd_sched_count(). */
size_t gpumd_sched_count(const gpumd_sched_t *s);
const gpumd_resv_t *gpumd_sched_at(const gpumd_sched_t *s, size_t i);
/* The index of the first live reservation whose id is at least id (gpumd_sched_count(): none). */
size_t gpumd_sched_lower_bound(const gpumd_sched_t *s, uint64_t id);
/* The queue in service order: position 0 is the head. */
size_t gpumd_sched_queue_length(const gpumd_sched_t *s);
const gpumd_resv_t *gpumd_sched_queue_at(const gpumd_sched_t *s, size_t pos);
/* The number of queued reservations served before r, whether r is queued or not: the position
 * r has or would have in the queue. The positions before it do not move when r joins or leaves
 * (the order of two reservations never changes while they are queued). O(log queue). */
size_t gpumd_sched_queue_rank(const gpumd_sched_t *s, const gpumd_resv_t *r);
/* The queue position of a QUEUED reservation (0 = head). Returns 0 or GPUM_ENOENT. */
int gpumd_sched_queue_position(const gpumd_sched_t *s, uint64_t id, size_t *pos);
/* What a QUEUED reservation waits for, for humans: "40.00 GiB free on 1 device matching
 * A100*; best now: 12.00 GiB on GPU 1", or "behind r-3 (blocked head past the backfill
 * bound)". Writes "" for others. Returns buf. */
char *gpumd_sched_waiting_for(const gpumd_sched_t *s, uint64_t id, char *buf, size_t len);

/* What gpumd_sched_check() finds about a request. */
typedef struct {
  bool could_fit;       /* false: never-fit on this node (reason says why) */
  bool fits_now;        /* a submit now would be granted at once, on device_mask */
  bool queue_first;     /* devices admit it, but a locked queue head ahead keeps it waiting */
  uint64_t device_mask; /* fits_now: the devices placement would choose */
  char reason[GPUMD_RESV_REASON_LEN]; /* why not (never-fit or not now); "" when it fits now */
} gpumd_sched_check_t;

/* Dry run of gpumd_sched_submit(): validates req and tells whether it could ever fit and
 * whether it would be granted now, changing nothing (no reservation, no callback). Returns 0,
 * GPUM_EINVAL (bad field, as submit) or GPUM_ENOMEM. */
int gpumd_sched_check(const gpumd_sched_t *s, const gpumd_sched_request_t *req, uint64_t now_ns,
                      gpumd_sched_check_t *out);

/* ---- Recovery ---------------------------------------------------------------------------- */

/*
 * Puts back a reservation loaded from the ledger (QUEUED, GRANTED or SUSPENDED), as it was, with
 * no transition and no scheduling pass: GRANTED ones count on their devices even when those
 * are unknown yet or over capacity now (they exist; call gpumd_sched_tick() after restoring
 * all). Returns 0, GPUM_EEXIST (id already live), GPUM_EINVAL (final state, bad device
 * mask) or GPUM_ENOMEM. Raises the next id above r->id.
 */
int gpumd_sched_restore(gpumd_sched_t *s, const gpumd_resv_t *r);
/* Makes the next new id at least next_id (the ledger's max id + 1 after a restart). */
void gpumd_sched_set_next_id(gpumd_sched_t *s, uint64_t next_id);
/* The id the next successful gpumd_sched_submit() gives its reservation. */
uint64_t gpumd_sched_next_id(const gpumd_sched_t *s);

#ifdef __cplusplus
}
#endif
#endif /* GPUMD_SCHED_H */
