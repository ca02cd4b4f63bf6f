/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gpumd scheduler (see sched.h for the contract): device views and their accounting, the
 * reservation table (sorted by id), the wait queue (sorted by priority then id), transitions,
 * timeouts and recovery. The scheduling pass with bounded backfill is in sched_pass.c;
 * admission, placement and the never-fit check in sched_place.c.
 */
#include "sched_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <gpum/error.h>
#include <gpum/size.h>

/* ---- Tables ------------------------------------------------------------------------------ */

/* Grows a pointer array to hold one more. Returns 0 or GPUM_ENOMEM. */
static int grow(gpumd_resv_t ***arr, size_t n, size_t *cap) {
  if (n < *cap)
    return 0;
  size_t ncap = *cap ? *cap * 2 : 64;
  gpumd_resv_t **p = realloc(*arr, ncap * sizeof(*p));
  if (p == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory growing the reservation table to %zu", ncap);
  *arr = p;
  *cap = ncap;
  return 0;
}

/* Index of the first reservation in all[] with id >= id. */
static size_t all_lower_bound(const gpumd_sched_t *s, uint64_t id) {
  size_t lo = 0, hi = s->n_all;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->all[mid]->id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* True when a is served before b: higher priority first, then lower id (submission order). */
static bool queue_before(const gpumd_resv_t *a, const gpumd_resv_t *b) {
  if (a->priority != b->priority)
    return a->priority > b->priority;
  return a->id < b->id;
}

/* Index of the first queued reservation not served before r. */
static size_t queue_lower_bound(const gpumd_sched_t *s, const gpumd_resv_t *r) {
  size_t lo = 0, hi = s->n_queue;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (queue_before(s->queue[mid], r))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static int insert_all(gpumd_sched_t *s, gpumd_resv_t *r) {
  int rc = grow(&s->all, s->n_all, &s->cap_all);
  if (rc < 0)
    return rc;
  size_t i = all_lower_bound(s, r->id);
  memmove(&s->all[i + 1], &s->all[i], (s->n_all - i) * sizeof(*s->all));
  s->all[i] = r;
  s->n_all++;
  return 0;
}

static uint64_t deadline_of(const gpumd_resv_t *r);

/* The queue timeout of r is still to be acted on: REJECT, or WAIT not yet told. */
static bool deadline_active(const gpumd_resv_t *r) {
  return r->timeout_ms != 0 && !(r->on_timeout == GPUMD_ON_TIMEOUT_WAIT && r->timeout_told);
}

/* Inserts r in service order. Clears settled: the caller decides on r (gpumd_sched_submit),
 * which also counts it in the need bounds if it stays (pass_one, walk). */
static int insert_queue(gpumd_sched_t *s, gpumd_resv_t *r) {
  s->settled = false;
  int rc = grow(&s->queue, s->n_queue, &s->cap_queue);
  if (rc < 0)
    return rc;
  size_t i = queue_lower_bound(s, r);
  memmove(&s->queue[i + 1], &s->queue[i], (s->n_queue - i) * sizeof(*s->queue));
  s->queue[i] = r;
  s->n_queue++;
  if (deadline_active(r) && deadline_of(r) < s->next_deadline)
    s->next_deadline = deadline_of(r);
  return 0;
}

static void remove_queue(gpumd_sched_t *s, const gpumd_resv_t *r) {
  size_t i = queue_lower_bound(s, r);
  if (i < s->n_queue && s->queue[i] == r) {
    /* The head leaving changes what the others may pass (and a locked head's devices); any
     * other leaving frees nothing and unblocks nobody: settled still holds. */
    if (i == 0)
      s->settled = false;
    if (deadline_active(r) && deadline_of(r) == s->next_deadline)
      s->deadline_stale = true;
    memmove(&s->queue[i], &s->queue[i + 1], (s->n_queue - i - 1) * sizeof(*s->queue));
    s->n_queue--;
  }
}

static void remove_all(gpumd_sched_t *s, const gpumd_resv_t *r) {
  size_t i = all_lower_bound(s, r->id);
  if (i < s->n_all && s->all[i] == r) {
    memmove(&s->all[i], &s->all[i + 1], (s->n_all - i - 1) * sizeof(*s->all));
    s->n_all--;
  }
}

/* Adds (sign > 0) or removes a granted reservation's bytes and job from its devices. */
static void account(gpumd_sched_t *s, const gpumd_resv_t *r, int sign) {
  /* Freed capacity leaves settled as it is: the next pass sees the device grew (settled). */
  if (r->preemptible)
    s->n_preemptible += sign > 0 ? 1 : (s->n_preemptible > 0 ? (size_t)-1 : 0);
  if (r->slurm_job[0])
    s->n_slurm += sign > 0 ? 1 : (s->n_slurm > 0 ? (size_t)-1 : 0);
  for (unsigned d = 0; d < GPUMD_SCHED_MAX_DEVICES; d++) {
    if (!(r->device_mask & (1ull << d)))
      continue;
    sched_slot_t *slot = &s->dev[d];
    if (sign > 0) {
      slot->reserved += r->bytes_per_gpu;
      slot->jobs++;
    } else {
      slot->reserved -= r->bytes_per_gpu <= slot->reserved ? r->bytes_per_gpu : slot->reserved;
      slot->jobs -= slot->jobs > 0 ? 1 : 0;
    }
  }
}

static void report(gpumd_sched_t *s, const gpumd_cause_t *cause, const gpumd_resv_t *r,
                   gpumd_resv_state_t from, uint64_t now_ns) {
  if (s->cb.on_transition != NULL)
    s->cb.on_transition(s->cb.user, cause, r, from, r->state, now_ns, r->reason);
}

/* ---- Transitions --------------------------------------------------------------------------- */

void gpumd__sched_grant(gpumd_sched_t *s, const gpumd_cause_t *cause, gpumd_resv_t *r,
                        uint64_t mask, uint64_t now_ns, const gpumd_resv_t *passed) {
  remove_queue(s, r);
  r->state = GPUMD_RESV_GRANTED;
  r->device_mask = mask;
  r->granted_ns = now_ns;
  char devs[GPUMD_SCHED_MAX_DEVICES * 4];
  gpumd__sched_mask_format(mask, devs, sizeof(devs));
  char id[GPUMD_RESV_ID_BUFSZ];
  if (passed != NULL) {
    snprintf(r->reason, sizeof(r->reason), "granted on GPU %.200s (backfilled past %s)", devs,
             gpumd_resv_id_format(passed->id, id, sizeof(id)));
  } else { /* the common case, without snprintf's cost */
    size_t off = 0;
    gpumd_cat(r->reason, sizeof(r->reason), &off, "granted on GPU ");
    gpumd_cat(r->reason, sizeof(r->reason), &off, devs);
  }
  account(s, r, +1);
  report(s, cause, r, GPUMD_RESV_QUEUED, now_ns);
}

/* Moves a live reservation to a final state, reports it and frees it. */
static void finish(gpumd_sched_t *s, const gpumd_cause_t *cause, gpumd_resv_t *r,
                   gpumd_resv_state_t to, uint64_t now_ns, const char *reason) {
  gpumd_resv_state_t from = r->state;
  if (from == GPUMD_RESV_QUEUED) {
    remove_queue(s, r);
    if (to == GPUMD_RESV_RELEASED)
      to = GPUMD_RESV_CANCELLED;
  } else {
    if (from == GPUMD_RESV_GRANTED) /* a SUSPENDED one counts on no device */
      account(s, r, -1);
    else
      s->n_suspended--;
    if (to == GPUMD_RESV_CANCELLED)
      to = GPUMD_RESV_RELEASED;
  }
  r->state = to;
  r->ended_ns = now_ns;
  size_t off = 0;
  gpumd_cat(r->reason, sizeof(r->reason), &off, reason);
  remove_all(s, r);
  report(s, cause, r, from, now_ns);
  free(r);
}

/* ---- Lifecycle ----------------------------------------------------------------------------- */

int gpumd_sched_create(const gpumd_sched_opts_t *opts, const gpumd_sched_callbacks_t *cb,
                       gpumd_sched_t **out) {
  gpumd_sched_opts_t def;
  if (opts == NULL) {
    gpumd_sched_opts_init(&def);
    opts = &def;
  }
  int rc = gpumd_sched_opts_check(opts);
  if (rc < 0)
    return rc;
  gpumd_sched_t *s = calloc(1, sizeof(*s));
  if (s == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory creating the scheduler");
  s->opts = *opts;
  if (cb != NULL)
    s->cb = *cb;
  s->next_id = 1;
  s->rand_used = sizeof s->rand; /* empty: the first token fills it */
  s->next_deadline = UINT64_MAX;
  gpumd__sched_need_reset(s);
  *out = s;
  return 0;
}

void gpumd_sched_destroy(gpumd_sched_t *s) {
  if (s == NULL)
    return;
  for (size_t i = 0; i < s->n_all; i++)
    free(s->all[i]);
  free(s->all);
  free(s->queue);
  free(s);
}

int gpumd_sched_set_opts(gpumd_sched_t *s, const gpumd_sched_opts_t *opts) {
  int rc = gpumd_sched_opts_check(opts);
  if (rc < 0)
    return rc;
  s->opts = *opts;
  for (uint64_t known = s->known_mask; known != 0; known &= known - 1) {
    sched_slot_t *slot = &s->dev[__builtin_ctzll(known)];
    slot->capacity = gpumd__sched_capacity(s, &slot->v);
  }
  s->settled = false;
  return 0;
}

/* ---- Devices ------------------------------------------------------------------------------- */

gpumd_pressure_t gpumd_sched_pressure_level(const gpumd_sched_t *s, double used_ratio) {
  if (used_ratio >= s->opts.pressure_critical)
    return GPUMD_PRESSURE_CRITICAL;
  if (used_ratio >= s->opts.pressure_high)
    return GPUMD_PRESSURE_HIGH;
  return GPUMD_PRESSURE_NONE;
}

double gpumd__sched_used_ratio(const gpumd_sched_device_t *v) {
  if (v->memory_total == 0)
    return 0.0;
  return (double)v->memory_used / (double)v->memory_total;
}

/* Fails every GRANTED reservation holding device d. */
static void fail_device(gpumd_sched_t *s, const gpumd_cause_t *cause, unsigned d, uint64_t now_ns) {
  const sched_slot_t *slot = &s->dev[d];
  char reason[GPUMD_RESV_REASON_LEN];
  snprintf(reason, sizeof(reason), "GPU %u (%.64s) failed: %.160s", d, slot->v.uuid,
           slot->v.reason[0] ? slot->v.reason : "device in ERROR state");
  for (size_t i = s->n_all; i-- > 0;) {
    gpumd_resv_t *r = s->all[i];
    if (r->state == GPUMD_RESV_GRANTED && (r->device_mask & (1ull << d)))
      finish(s, cause, r, GPUMD_RESV_FAILED, now_ns, reason);
  }
}

/* Stores a view (index checked by the caller); fails its reservations when it is ERROR. */
static void set_view(gpumd_sched_t *s, const gpumd_cause_t *cause, const gpumd_sched_device_t *dev,
                     uint64_t now_ns);

int gpumd_sched_update_device(gpumd_sched_t *s, const gpumd_cause_t *cause,
                              const gpumd_sched_device_t *dev, uint64_t now_ns) {
  if (dev->index >= GPUMD_SCHED_MAX_DEVICES)
    return gpum_error(GPUM_EINVAL, "device index %u is out of range (at most %d devices)",
                      dev->index, GPUMD_SCHED_MAX_DEVICES);
  set_view(s, cause, dev, now_ns);
  gpumd__sched_pass(s, cause, now_ns);
  return 0;
}

int gpumd_sched_update_devices(gpumd_sched_t *s, const gpumd_cause_t *cause,
                               const gpumd_sched_device_t *devs, size_t n, uint64_t now_ns) {
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    if (devs[i].index >= GPUMD_SCHED_MAX_DEVICES)
      rc = gpum_error(GPUM_EINVAL, "device index %u is out of range (at most %d devices)",
                      devs[i].index, GPUMD_SCHED_MAX_DEVICES);
    else
      set_view(s, cause, &devs[i], now_ns);
  }
  gpumd__sched_pass(s, cause, now_ns);
  return rc;
}

uint64_t gpumd_sched_wants_fresh(gpumd_sched_t *s) {
  uint64_t m = s->want_fresh;
  s->want_fresh = 0;
  return m;
}

void gpumd_sched_set_stale(gpumd_sched_t *s) {
  for (uint64_t known = s->known_mask; known != 0; known &= known - 1)
    s->dev[__builtin_ctzll(known)].v.fresh = false;
}

static void set_view(gpumd_sched_t *s, const gpumd_cause_t *cause, const gpumd_sched_device_t *dev,
                     uint64_t now_ns) {
  sched_slot_t *slot = &s->dev[dev->index];
  /* What matching reads (and a new device): the queue must be looked at again. Anything else
   * a view changes is seen by the next pass (settled). */
  if (!slot->known || slot->v.memory_total != dev->memory_total ||
      strncmp(slot->v.name, dev->name, sizeof slot->v.name - 1) != 0 ||
      strncmp(slot->v.vendor, dev->vendor, sizeof slot->v.vendor - 1) != 0)
    s->settled = false;
  gpumd_pressure_t old = slot->known ? slot->pressure : GPUMD_PRESSURE_NONE;
  slot->v = *dev;
  slot->v.uuid[sizeof(slot->v.uuid) - 1] = '\0';
  slot->v.name[sizeof(slot->v.name) - 1] = '\0';
  slot->v.vendor[sizeof(slot->v.vendor) - 1] = '\0';
  slot->v.reason[sizeof(slot->v.reason) - 1] = '\0';
  slot->known = true;
  slot->capacity = gpumd__sched_capacity(s, &slot->v);
  s->known_mask |= 1ull << dev->index;
  double ratio = gpumd__sched_used_ratio(&slot->v);
  slot->pressure = gpumd_sched_pressure_level(s, ratio);
  /* Overcommitted (an outside process grew after the grants): the jobs are told to give back. */
  if (slot->reserved + slot->v.unmanaged > slot->capacity && slot->pressure < GPUMD_PRESSURE_HIGH)
    slot->pressure = GPUMD_PRESSURE_HIGH;
  if (dev->health == GPUM_HEALTH_ERROR && dev->gone)
    fail_device(s, cause, dev->index, now_ns);
  if (slot->pressure != old && s->cb.on_pressure != NULL)
    s->cb.on_pressure(s->cb.user, dev->index, ratio, old, slot->pressure);
}

int gpumd_sched_device(const gpumd_sched_t *s, unsigned index, gpumd_sched_device_t *out) {
  if (index >= GPUMD_SCHED_MAX_DEVICES || !s->dev[index].known)
    return gpum_error(GPUM_ENODEV, "no device %u", index);
  *out = s->dev[index].v;
  return 0;
}

uint64_t gpumd__sched_capacity(const gpumd_sched_t *s, const gpumd_sched_device_t *v) {
  /* Rounded to the nearest byte: 0.95 is not exact in binary, 80 GiB x 0.95 must be 76 GiB. */
  long double cap = (long double)v->memory_total * (long double)s->opts.memory_fraction;
  uint64_t c = (uint64_t)(cap + 0.5L);
  /* Never more than the driver can hand out: what it keeps for itself is nobody's. */
  uint64_t usable = v->memory_total > v->memory_reserved ? v->memory_total - v->memory_reserved : 0;
  if (c > usable)
    c = usable;
  return c > s->opts.safety_margin ? c - s->opts.safety_margin : 0;
}

uint64_t gpumd__sched_headroom(const gpumd_sched_t *s, unsigned d) {
  const sched_slot_t *slot = &s->dev[d];
  uint64_t committed = slot->reserved + slot->v.unmanaged;
  return committed < slot->capacity ? slot->capacity - committed : 0;
}

int gpumd_sched_device_stats(const gpumd_sched_t *s, unsigned index,
                             gpumd_sched_device_stats_t *out) {
  if (index >= GPUMD_SCHED_MAX_DEVICES || !s->dev[index].known)
    return gpum_error(GPUM_ENODEV, "no device %u", index);
  const sched_slot_t *slot = &s->dev[index];
  memset(out, 0, sizeof(*out));
  out->capacity = slot->capacity;
  out->reserved = slot->reserved;
  out->unmanaged = slot->v.unmanaged;
  out->committed = slot->reserved + slot->v.unmanaged;
  out->headroom = gpumd__sched_headroom(s, index);
  out->overcommit = out->committed > out->capacity ? out->committed - out->capacity : 0;
  out->jobs = slot->jobs;
  out->used_ratio = gpumd__sched_used_ratio(&slot->v);
  out->pressure = slot->pressure;
  return 0;
}

uint64_t gpumd_sched_device_mask(const gpumd_sched_t *s) {
  return s->known_mask;
}

/* ---- Reservations -------------------------------------------------------------------------- */

/* A token of 16 random bytes in hex. Bytes come from getrandom in blocks of 512 (one
 * system call per 32 tokens); a used byte is wiped and never handed out twice. */
static int make_token(gpumd_sched_t *s, char *out) {
  if (s->rand_used + 16 > sizeof s->rand) {
    size_t got = 0;
    while (got < sizeof s->rand) {
      ssize_t n = getrandom(s->rand + got, sizeof s->rand - got, 0);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return gpum_error(GPUM_EIO, "getrandom failed: %s", strerror(errno));
      got += (size_t)n;
    }
    s->rand_used = 0;
  }
  unsigned char *raw = s->rand + s->rand_used;
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < 16; i++) {
    out[2 * i] = hex[raw[i] >> 4];
    out[2 * i + 1] = hex[raw[i] & 15];
  }
  out[32] = '\0';
  memset(raw, 0, 16);
  s->rand_used += 16;
  return 0;
}

/* Checks the request's fields and fills r's request part. Returns 0 or GPUM_EINVAL. */
static int fill_request(const gpumd_sched_request_t *q, gpumd_resv_t *r) {
  if (q->bytes_per_gpu == 0)
    return gpum_error(GPUM_EINVAL, "bytes_per_gpu must be greater than 0");
  if (q->gpus == 0 || q->gpus > GPUMD_SCHED_MAX_DEVICES)
    return gpum_error(GPUM_EINVAL, "gpus %u is out of range 1..%d", q->gpus,
                      GPUMD_SCHED_MAX_DEVICES);
  if (q->priority < -100 || q->priority > 100)
    return gpum_error(GPUM_EINVAL, "priority %d is out of range -100..100", q->priority);
  if ((int)q->lease < 0 || q->lease > GPUMD_LEASE_TTL)
    return gpum_error(GPUM_EINVAL, "bad lease kind %d", (int)q->lease);
  if ((int)q->on_timeout < 0 || q->on_timeout > GPUMD_ON_TIMEOUT_WAIT)
    return gpum_error(GPUM_EINVAL, "bad timeout action %d", (int)q->on_timeout);
  const char *label = q->label ? q->label : "";
  const char *model = q->model ? q->model : "";
  if (strlen(label) >= sizeof(r->label))
    return gpum_error(GPUM_EINVAL, "label is longer than %zu bytes", sizeof(r->label) - 1);
  if (strlen(model) >= sizeof(r->model))
    return gpum_error(GPUM_EINVAL, "model pattern is longer than %zu bytes", sizeof(r->model) - 1);
  int rc = gpumd_slurm_ids_check(q->slurm_job, q->slurm_step);
  if (rc != 0)
    return rc;
  memcpy(r->label, label, strlen(label) + 1);
  memcpy(r->model, model, strlen(model) + 1);
  if (q->slurm_job) { /* checked: both fit */
    snprintf(r->slurm_job, sizeof r->slurm_job, "%s", q->slurm_job);
    snprintf(r->slurm_step, sizeof r->slurm_step, "%s", q->slurm_step);
  }
  r->bytes_per_gpu = q->bytes_per_gpu;
  r->gpus = q->gpus;
  r->min_memory = q->min_memory;
  r->priority = q->priority;
  r->timeout_ms = q->timeout_ms;
  r->on_timeout = q->on_timeout;
  r->lease = q->lease;
  r->lease_pid = q->lease_pid;
  r->lease_pid_start = q->lease_pid_start;
  r->ttl_ms = q->ttl_ms;
  r->uid = q->uid;
  r->pid = q->pid;
  r->pid_start = q->pid_start;
  r->preemptible = q->preemptible;
  return 0;
}

/* req->no_wait: settles the queue, then 0 when the next pass would grant r (nothing ahead of
 * it can be granted now; it may use the devices a locked head leaves open), else GPUM_EBUSY
 * with what it would wait for. r (id, state and created_ns set) is in no table on return. */
static int grant_now_or_busy(gpumd_sched_t *s, const gpumd_cause_t *cause, gpumd_resv_t *r,
                             uint64_t now_ns) {
  gpumd__sched_pass(s, cause, now_ns);
  uint64_t allowed = s->known_mask, mask = 0;
  const gpumd_resv_t *head = s->n_queue > 0 ? s->queue[0] : NULL;
  if (head != NULL && queue_before(head, r) && gpumd__sched_head_locked(s, head, now_ns))
    allowed &= ~gpumd__sched_usable_mask(s, head);
  if (allowed != 0 && gpumd__sched_place_in(s, r, allowed, true, &mask))
    return 0;
  char why[GPUMD_RESV_REASON_LEN];
  bool settled = s->settled; /* r comes and goes: the queue is as the pass left it */
  insert_all(s, r);          /* cannot fail: grown by the caller */
  insert_queue(s, r);
  gpumd_sched_waiting_for(s, r->id, why, sizeof(why));
  remove_queue(s, r);
  remove_all(s, r);
  s->settled = settled;
  return gpum_error(GPUM_EBUSY, "not granted now and \"wait\" is false; it would wait for %s", why);
}

int gpumd_sched_submit(gpumd_sched_t *s, const gpumd_cause_t *cause,
                       const gpumd_sched_request_t *req, uint64_t now_ns,
                       const gpumd_resv_t **out) {
  gpumd_resv_t *r = calloc(1, sizeof(*r));
  if (r == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory for a reservation");
  int rc = fill_request(req, r);
  if (rc == 0)
    rc = gpumd__sched_resolve_devices(s, req->devices, req->device_count, &r->want_mask);
  if (rc == 0)
    rc = gpumd__sched_never_fit(s, r);
  if (rc == 0)
    rc = make_token(s, r->token);
  if (rc == 0)
    rc = grow(&s->all, s->n_all, &s->cap_all);
  if (rc == 0)
    rc = grow(&s->queue, s->n_queue, &s->cap_queue);
  r->id = s->next_id;
  r->state = GPUMD_RESV_QUEUED;
  r->created_ns = now_ns;
  if (rc == 0 && req->no_wait)
    rc = grant_now_or_busy(s, cause, r, now_ns);
  if (rc < 0) {
    free(r);
    return rc;
  }
  s->next_id++;
  if (r->lease == GPUMD_LEASE_TTL)
    r->expires_ns = now_ns + r->ttl_ms * 1000000ull;
  memcpy(r->reason, "queued", sizeof("queued"));
  bool alone =
      gpumd__sched_quiet(s, now_ns); /* before r joins: settled at the devices as they are now */
  insert_all(s, r);                  /* cannot fail: grown above */
  insert_queue(s, r);                /* clears settled: r is decided on below */
  report(s, cause, r, GPUMD_RESV_NEW, now_ns);
  uint64_t id = r->id;
  if (alone && s->queue[0] != r)
    gpumd__sched_pass_one(s, cause, r, now_ns);
  else
    gpumd__sched_pass(s, cause, now_ns);
  if (out != NULL)
    *out = gpumd_sched_find(s, id);
  return 0;
}

int gpumd_sched_end(gpumd_sched_t *s, const gpumd_cause_t *cause, uint64_t id,
                    gpumd_resv_state_t to, uint64_t now_ns, const char *reason) {
  if (!gpumd_resv_state_final(to))
    return gpum_error(GPUM_EINVAL, "%s is not a final reservation state",
                      gpumd_resv_state_name(to));
  gpumd_resv_t *r = (gpumd_resv_t *)gpumd_sched_find(s, id);
  char buf[GPUMD_RESV_ID_BUFSZ];
  if (r == NULL)
    return gpum_error(GPUM_ENOENT, "no live reservation %s",
                      gpumd_resv_id_format(id, buf, sizeof(buf)));
  finish(s, cause, r, to, now_ns, reason ? reason : "released");
  gpumd__sched_pass(s, cause, now_ns);
  return 0;
}

int gpumd_sched_release(gpumd_sched_t *s, const gpumd_cause_t *cause, uint64_t id, uint64_t now_ns,
                        const char *reason) {
  return gpumd_sched_end(s, cause, id, GPUMD_RESV_RELEASED, now_ns, reason);
}

/* ---- Suspend and resume -------------------------------------------------------------------- */

/* The live reservation id, or NULL with GPUM_ENOENT in *rc. */
static gpumd_resv_t *live(const gpumd_sched_t *s, uint64_t id, int *rc) {
  gpumd_resv_t *r = (gpumd_resv_t *)gpumd_sched_find(s, id);
  char buf[GPUMD_RESV_ID_BUFSZ];
  if (r == NULL)
    *rc = gpum_error(GPUM_ENOENT, "no live reservation %s",
                     gpumd_resv_id_format(id, buf, sizeof buf));
  return r;
}

/* The live reservation id in state want, or NULL with GPUM_ENOENT / GPUM_ESTATE set in *rc. */
static gpumd_resv_t *find_in(const gpumd_sched_t *s, uint64_t id, gpumd_resv_state_t want,
                             const char *what, int *rc) {
  gpumd_resv_t *r = live(s, id, rc);
  char buf[GPUMD_RESV_ID_BUFSZ];
  gpumd_resv_id_format(id, buf, sizeof buf);
  if (r == NULL)
    return NULL;
  if (r->state != want) {
    *rc = gpum_error(GPUM_ESTATE, "reservation %s is %s: only a %s one can be %s", buf,
                     gpumd_resv_state_name(r->state), gpumd_resv_state_name(want), what);
    return NULL;
  }
  return r;
}

static void set_reason(gpumd_resv_t *r, const char *reason) {
  size_t off = 0;
  r->reason[0] = '\0';
  gpumd_cat(r->reason, sizeof(r->reason), &off, reason);
}

int gpumd_sched_suspend(gpumd_sched_t *s, const gpumd_cause_t *cause, uint64_t id, bool hold,
                        uint64_t now_ns, const char *reason) {
  int rc = 0;
  gpumd_resv_t *r = find_in(s, id, GPUMD_RESV_GRANTED, "suspended", &rc);
  if (r == NULL)
    return rc;
  account(s, r, -1);
  s->n_suspended++;
  r->state = GPUMD_RESV_SUSPENDED;
  r->suspend_hold = hold;
  r->suspended_ns = now_ns;
  set_reason(r, reason ? reason : "suspended");
  report(s, cause, r, GPUMD_RESV_GRANTED, now_ns);
  gpumd__sched_pass(s, cause, now_ns); /* what it freed may grant what waits */
  return 0;
}

/* The known devices of the same kind as every GPU r came from (name and total memory): where the
 * driver may restore it. */
static uint64_t same_kind_mask(const gpumd_sched_t *s, const gpumd_resv_t *r) {
  uint64_t out = 0;
  for (uint64_t k = s->known_mask; k != 0; k &= k - 1) {
    unsigned d = (unsigned)__builtin_ctzll(k);
    bool all = r->device_mask != 0;
    for (uint64_t h = r->device_mask; h != 0 && all; h &= h - 1) {
      unsigned e = (unsigned)__builtin_ctzll(h);
      all = s->dev[e].known && strcmp(s->dev[e].v.name, s->dev[d].v.name) == 0 &&
            s->dev[e].v.memory_total == s->dev[d].v.memory_total;
    }
    if (all)
      out |= 1ull << d;
  }
  return out;
}

int gpumd_sched_resume_place(const gpumd_sched_t *s, uint64_t id, uint64_t now_ns, bool decide,
                             uint64_t *mask) {
  int rc = 0;
  const gpumd_resv_t *r = find_in(s, id, GPUMD_RESV_SUSPENDED, "resumed", &rc);
  if (r == NULL)
    return rc;
  char buf[GPUMD_RESV_ID_BUFSZ];
  gpumd_resv_id_format(id, buf, sizeof buf);
  uint64_t kind = same_kind_mask(s, r);
  /* As if it were queued in its place (priority, then age): what a pass left queued cannot be
   * granted now, so it passes them as a request behind them would (backfill), except a queue
   * head ahead of it past the backfill bound that could use these GPUs. */
  const gpumd_resv_t *head = s->n_queue ? s->queue[0] : NULL;
  if (head &&
      (head->priority > r->priority ||
       (head->priority == r->priority && head->created_ns <= r->created_ns)) &&
      gpumd__sched_head_locked(s, head, now_ns) && (gpumd__sched_usable_mask(s, head) & kind)) {
    char qid[GPUMD_RESV_ID_BUFSZ];
    return gpum_error(GPUM_EBUSY,
                      "%s waits behind %s (priority %d), the queue's head past the backfill bound",
                      buf, gpumd_resv_id_format(head->id, qid, sizeof qid), head->priority);
  }
  uint64_t m = 0;
  if ((r->device_mask & ~s->known_mask) == 0 &&
      gpumd__sched_place_in(s, r, r->device_mask, decide, &m) && m == r->device_mask) {
    *mask = m;
    return 0;
  }
  if (gpumd__sched_place_in(s, r, kind, decide, &m)) {
    *mask = m;
    return 0;
  }
  char need[GPUM_SIZE_BUFSZ];
  return gpum_error(GPUM_EBUSY, "%s waits for %s free on %u GPU%s like the one%s it came from", buf,
                    gpum_size_format(r->bytes_per_gpu, need, sizeof need), r->gpus,
                    r->gpus == 1 ? "" : "s", r->gpus == 1 ? "" : "s");
}

int gpumd_sched_resume(gpumd_sched_t *s, const gpumd_cause_t *cause, uint64_t id, uint64_t mask,
                       uint64_t now_ns, const char *reason) {
  int rc = 0;
  gpumd_resv_t *r = find_in(s, id, GPUMD_RESV_SUSPENDED, "resumed", &rc);
  if (r == NULL)
    return rc;
  if ((unsigned)__builtin_popcountll(mask) != r->gpus || (mask & ~s->known_mask) != 0)
    return gpum_error(GPUM_EINVAL, "a resume onto GPUs %#llx: not %u known GPUs",
                      (unsigned long long)mask, r->gpus);
  s->n_suspended--;
  r->state = GPUMD_RESV_GRANTED;
  r->device_mask = mask;
  r->granted_ns = now_ns; /* a resumed job runs its minimum run time again before a preemption */
  r->suspend_hold = false;
  r->suspended_ns = 0;
  set_reason(r, reason ? reason : "resumed");
  account(s, r, +1);
  report(s, cause, r, GPUMD_RESV_SUSPENDED, now_ns);
  return 0;
}

int gpumd_sched_set_suspend_facts(gpumd_sched_t *s, uint64_t id, bool hold, uint64_t host_bytes,
                                  uint64_t ckpt_mask, const int32_t *pids, const uint64_t *starts,
                                  unsigned n) {
  int rc = 0;
  gpumd_resv_t *r = live(s, id, &rc);
  if (r == NULL)
    return rc;
  if (n > GPUMD_RESV_MAX_PROCS || (n > 0 && (pids == NULL || starts == NULL)))
    return gpum_error(GPUM_EINVAL, "%u processes: at most %d per suspended job", n,
                      GPUMD_RESV_MAX_PROCS);
  r->suspend_hold = hold;
  r->host_bytes = host_bytes;
  r->ckpt_mask = ckpt_mask;
  r->nprocs = n;
  for (unsigned i = 0; i < GPUMD_RESV_MAX_PROCS; i++) {
    r->proc_pid[i] = i < n ? pids[i] : 0;
    r->proc_start[i] = i < n ? starts[i] : 0;
  }
  return 0;
}

int gpumd_sched_set_moving(gpumd_sched_t *s, uint64_t id, unsigned moving, const char *reason) {
  int rc = 0;
  gpumd_resv_t *r = live(s, id, &rc);
  if (r == NULL)
    return rc;
  r->moving = (uint8_t)moving;
  if (reason)
    set_reason(r, reason);
  return 0;
}

size_t gpumd_sched_preemptible(const gpumd_sched_t *s) {
  return s->n_preemptible;
}

size_t gpumd_sched_slurm_granted(const gpumd_sched_t *s) {
  return s->n_slurm;
}

/* Victim order: lowest priority first, then the most recently granted (it loses the least). */
static int victim_cmp(const void *a, const void *b) {
  const gpumd_resv_t *x = *(const gpumd_resv_t *const *)a, *y = *(const gpumd_resv_t *const *)b;
  if (x->priority != y->priority)
    return x->priority < y->priority ? -1 : 1;
  return x->granted_ns > y->granted_ns ? -1 : x->granted_ns < y->granted_ns;
}

int gpumd_sched_preempt_plan(const gpumd_sched_t *cs, uint64_t id, uint64_t now_ns,
                             uint64_t min_run_ns, uint64_t *victims, size_t max, size_t *n) {
  *n = 0;
  const gpumd_resv_t *q = gpumd_sched_find(cs, id);
  char buf[GPUMD_RESV_ID_BUFSZ];
  if (q == NULL || q->state != GPUMD_RESV_QUEUED)
    return gpum_error(GPUM_ENOENT, "%s is not queued", gpumd_resv_id_format(id, buf, sizeof buf));
  /* The plan takes candidates off their GPUs one by one, in victim order, until q could be
   * placed, then puts every one back: the scheduler is as it was when this returns. */
  gpumd_sched_t *s = (gpumd_sched_t *)cs;
  uint64_t usable = gpumd__sched_usable_mask(s, q);
  const gpumd_resv_t *cand[256] = {NULL}; /* (cppcheck reads qsort of none as uninitialised) */
  size_t nc = 0;
  for (size_t i = 0; i < s->n_all && nc < sizeof cand / sizeof cand[0]; i++) {
    const gpumd_resv_t *r = s->all[i];
    if (r->state == GPUMD_RESV_GRANTED && r->preemptible && !r->moving &&
        r->priority < q->priority && (r->device_mask & usable) &&
        now_ns >= r->granted_ns + min_run_ns)
      cand[nc++] = r;
  }
  qsort(cand, nc, sizeof cand[0], victim_cmp);
  size_t taken = 0;
  uint64_t mask = 0;
  bool fits = gpumd__sched_place(s, q, false, &mask);
  while (!fits && taken < nc) {
    account(s, cand[taken++], -1);
    fits = gpumd__sched_place(s, q, false, &mask);
  }
  for (size_t i = 0; i < taken; i++)
    account(s, cand[i], +1);
  if (!fits || taken == 0)
    return 0;
  size_t out = 0;
  for (size_t i = 0; i < taken; i++) {
    if (!(cand[i]->device_mask & mask))
      continue; /* its GPUs are not the ones q gets */
    if (out == max) {
      *n = 0;
      return gpum_error(GPUM_ENOSPC, "more than %zu reservations would have to be suspended", max);
    }
    victims[out++] = cand[i]->id;
  }
  *n = out;
  return 0;
}

size_t gpumd_sched_suspended(const gpumd_sched_t *s, size_t *resumable) {
  if (resumable) {
    *resumable = 0;
    for (size_t i = 0; i < s->n_all && s->n_suspended; i++)
      *resumable += s->all[i]->state == GPUMD_RESV_SUSPENDED && !s->all[i]->suspend_hold;
  }
  return s->n_suspended;
}

int gpumd_sched_set_expiry(gpumd_sched_t *s, uint64_t id, uint64_t expires_ns) {
  gpumd_resv_t *r = (gpumd_resv_t *)gpumd_sched_find(s, id);
  char buf[GPUMD_RESV_ID_BUFSZ];
  if (r == NULL)
    return gpum_error(GPUM_ENOENT, "no live reservation %s",
                      gpumd_resv_id_format(id, buf, sizeof(buf)));
  r->expires_ns = expires_ns;
  return 0;
}

int gpumd_sched_resize(gpumd_sched_t *s, const gpumd_cause_t *cause, uint64_t id, uint64_t bytes,
                       uint64_t now_ns, char *why, size_t whylen) {
  gpumd_resv_t *r = (gpumd_resv_t *)gpumd_sched_find(s, id);
  char buf[GPUMD_RESV_ID_BUFSZ];
  gpumd_resv_id_format(id, buf, sizeof buf);
  if (why && whylen)
    why[0] = '\0';
  if (r == NULL)
    return gpum_error(GPUM_ENOENT, "no live reservation %s", buf);
  if (r->state != GPUMD_RESV_GRANTED)
    return gpum_error(GPUM_ESTATE, "reservation %s is %s: only a granted one can be resized", buf,
                      gpumd_resv_state_name(r->state));
  if (bytes == 0)
    return gpum_error(GPUM_EINVAL, "a reservation cannot be resized to 0 bytes");
  if (bytes > r->bytes_per_gpu) {
    uint64_t more = bytes - r->bytes_per_gpu;
    char a[GPUM_SIZE_BUFSZ], b[GPUM_SIZE_BUFSZ];
    /* As admission would: room on every one of its devices, none of them out of service. */
    for (unsigned d = 0; d < GPUMD_SCHED_MAX_DEVICES; d++) {
      if (!(r->device_mask >> d & 1u))
        continue;
      gpum_health_t h = s->dev[d].v.health;
      if (h == GPUM_HEALTH_ERROR || h == GPUM_HEALTH_DISABLED)
        return gpum_error(GPUM_EBUSY, "GPU %u is %s: %s does not grow on it", d,
                          h == GPUM_HEALTH_ERROR ? "in ERROR" : "disabled", buf);
      if (s->dev[d].v.unanswered || (s->opts.require_fresh && !s->dev[d].v.fresh))
        return gpum_error(GPUM_EBUSY,
                          "GPU %u did not answer a fresh read in time: %s does not "
                          "grow on it now",
                          d, buf);
      uint64_t room = gpumd__sched_headroom(s, d);
      if (room < more)
        return gpum_error(GPUM_EBUSY, "%s more on GPU %u asked, %s free there",
                          gpum_size_format(more, a, sizeof a), d,
                          gpum_size_format(room, b, sizeof b));
    }
    /* Nor ahead of what waits: a queued request of at least its priority that could use one of
     * its devices comes first. */
    for (size_t i = 0; i < s->n_queue; i++) {
      const gpumd_resv_t *q = s->queue[i];
      if (q->priority >= r->priority && (gpumd__sched_usable_mask(s, q) & r->device_mask)) {
        char qid[GPUMD_RESV_ID_BUFSZ];
        return gpum_error(GPUM_EBUSY, "%s (priority %d) waits for memory on its GPUs",
                          gpumd_resv_id_format(q->id, qid, sizeof qid), q->priority);
      }
    }
  }
  uint64_t old = r->bytes_per_gpu;
  account(s, r, -1);
  r->bytes_per_gpu = bytes;
  account(s, r, +1);
  if (why && whylen) {
    char a[GPUM_SIZE_BUFSZ], b[GPUM_SIZE_BUFSZ];
    snprintf(why, whylen, "resized from %s to %s per GPU", gpum_size_format(old, a, sizeof a),
             gpum_size_format(bytes, b, sizeof b));
  }
  if (bytes < old) /* freed memory may grant what waits */
    gpumd__sched_pass(s, cause, now_ns);
  return 0;
}

static uint64_t deadline_of(const gpumd_resv_t *r) {
  if (r->timeout_ms == 0)
    return UINT64_MAX;
  uint64_t d = r->timeout_ms > UINT64_MAX / 1000000ull ? UINT64_MAX : r->timeout_ms * 1000000ull;
  return r->created_ns > UINT64_MAX - d ? UINT64_MAX : r->created_ns + d;
}

/* The earliest deadline still to be acted on (next_deadline, recomputed when stale). */
static uint64_t next_deadline(gpumd_sched_t *s) {
  if (s->deadline_stale) {
    uint64_t next = UINT64_MAX;
    for (size_t i = 0; i < s->n_queue; i++) {
      const gpumd_resv_t *r = s->queue[i];
      uint64_t dl = deadline_active(r) ? deadline_of(r) : UINT64_MAX;
      next = dl < next ? dl : next;
    }
    s->next_deadline = next;
    s->deadline_stale = false;
  }
  return s->next_deadline;
}

/* Handles the queue timeouts that passed. Returns true when a reservation left the queue. */
static bool expire_queue(gpumd_sched_t *s, const gpumd_cause_t *cause, uint64_t now_ns) {
  bool changed = false;
  s->deadline_stale = true; /* what is told or leaves no longer counts */
  for (size_t i = s->n_queue; i-- > 0;) {
    gpumd_resv_t *r = s->queue[i];
    uint64_t dl = deadline_of(r);
    if (dl == UINT64_MAX || now_ns < dl)
      continue;
    char dur[GPUM_DURATION_BUFSZ], wait[GPUMD_RESV_REASON_LEN], reason[GPUMD_RESV_REASON_LEN];
    gpum_duration_format(r->timeout_ms, dur, sizeof(dur));
    if (r->on_timeout == GPUMD_ON_TIMEOUT_REJECT) {
      gpumd_sched_waiting_for(s, r->id, wait, sizeof(wait));
      snprintf(reason, sizeof(reason), "queue timeout of %s passed; was waiting for %.180s", dur,
               wait);
      finish(s, cause, r, GPUMD_RESV_EXPIRED, now_ns, reason);
      changed = true;
    } else if (!r->timeout_told) {
      r->timeout_told = true;
      snprintf(r->reason, sizeof(r->reason), "queue timeout of %s passed; still waiting", dur);
      report(s, cause, r, GPUMD_RESV_QUEUED, now_ns);
    }
  }
  return changed;
}

void gpumd_sched_tick(gpumd_sched_t *s, const gpumd_cause_t *cause, uint64_t now_ns,
                      uint64_t *next_ns) {
  gpumd__sched_pass(s, cause, now_ns);
  if (now_ns >= next_deadline(s) && expire_queue(s, cause, now_ns))
    gpumd__sched_pass(s, cause, now_ns);
  if (next_ns != NULL)
    *next_ns = next_deadline(s);
}

const gpumd_resv_t *gpumd_sched_find(const gpumd_sched_t *s, uint64_t id) {
  size_t i = all_lower_bound(s, id);
  return i < s->n_all && s->all[i]->id == id ? s->all[i] : NULL;
}

size_t gpumd_sched_count(const gpumd_sched_t *s) {
  return s->n_all;
}

const gpumd_resv_t *gpumd_sched_at(const gpumd_sched_t *s, size_t i) {
  return i < s->n_all ? s->all[i] : NULL;
}

size_t gpumd_sched_lower_bound(const gpumd_sched_t *s, uint64_t id) {
  return all_lower_bound(s, id);
}

size_t gpumd_sched_queue_length(const gpumd_sched_t *s) {
  return s->n_queue;
}

const gpumd_resv_t *gpumd_sched_queue_at(const gpumd_sched_t *s, size_t pos) {
  return pos < s->n_queue ? s->queue[pos] : NULL;
}

size_t gpumd_sched_queue_rank(const gpumd_sched_t *s, const gpumd_resv_t *r) {
  return queue_lower_bound(s, r);
}

int gpumd_sched_queue_position(const gpumd_sched_t *s, uint64_t id, size_t *pos) {
  const gpumd_resv_t *r = gpumd_sched_find(s, id);
  if (r != NULL && r->state == GPUMD_RESV_QUEUED) {
    size_t i = queue_lower_bound(s, r);
    if (i < s->n_queue && s->queue[i] == r) {
      *pos = i;
      return 0;
    }
  }
  char buf[GPUMD_RESV_ID_BUFSZ];
  return gpum_error(GPUM_ENOENT, "%s is not queued", gpumd_resv_id_format(id, buf, sizeof(buf)));
}

/* ---- Recovery ------------------------------------------------------------------------------ */

int gpumd_sched_restore(gpumd_sched_t *s, const gpumd_resv_t *src) {
  char buf[GPUMD_RESV_ID_BUFSZ];
  gpumd_resv_id_format(src->id, buf, sizeof(buf));
  if (src->state != GPUMD_RESV_QUEUED && src->state != GPUMD_RESV_GRANTED &&
      src->state != GPUMD_RESV_SUSPENDED)
    return gpum_error(GPUM_EINVAL, "cannot restore %s in state %s", buf,
                      gpumd_resv_state_name(src->state));
  if (src->id == 0 || (src->state != GPUMD_RESV_QUEUED && src->device_mask == 0))
    return gpum_error(GPUM_EINVAL, "cannot restore %s: no id or no granted device", buf);
  if (gpumd_sched_find(s, src->id) != NULL)
    return gpum_error(GPUM_EEXIST, "reservation %s is already live", buf);
  gpumd_resv_t *r = malloc(sizeof(*r));
  if (r == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory restoring %s", buf);
  *r = *src;
  if (r->state == GPUMD_RESV_QUEUED)
    r->device_mask = 0;
  int rc = grow(&s->queue, s->n_queue, &s->cap_queue);
  if (rc == 0)
    rc = insert_all(s, r);
  if (rc < 0) {
    free(r);
    return rc;
  }
  if (r->state == GPUMD_RESV_QUEUED)
    insert_queue(s, r);
  else if (r->state == GPUMD_RESV_GRANTED)
    account(s, r, +1);
  else
    s->n_suspended++;
  if (s->next_id <= r->id)
    s->next_id = r->id + 1;
  return 0;
}

void gpumd_sched_set_next_id(gpumd_sched_t *s, uint64_t next_id) {
  if (s->next_id < next_id)
    s->next_id = next_id;
}

uint64_t gpumd_sched_next_id(const gpumd_sched_t *s) {
  return s->next_id;
}

/* ---- Dry run (REST validate) ------------------------------------------------------------- */

/* Why r does not fit now, for humans: what it needs and the best device now. */
static void not_now_text(const gpumd_sched_t *s, const gpumd_resv_t *r, char *buf, size_t len) {
  char need[GPUM_SIZE_BUFSZ], best_s[GPUM_SIZE_BUFSZ];
  unsigned fit = 0, best_d = 0, usable = 0;
  uint64_t best = 0;
  for (uint64_t m = s->known_mask; m != 0; m &= m - 1) {
    unsigned d = (unsigned)__builtin_ctzll(m);
    const sched_slot_t *slot = &s->dev[d];
    if (!gpumd__sched_matches(s, r, d) || slot->v.health == GPUM_HEALTH_ERROR ||
        slot->v.health == GPUM_HEALTH_DISABLED || slot->pressure == GPUMD_PRESSURE_CRITICAL ||
        slot->v.unanswered ||
        (s->opts.max_concurrent_jobs != 0 && slot->jobs >= s->opts.max_concurrent_jobs))
      continue;
    uint64_t h = gpumd__sched_headroom(s, d);
    fit += h >= r->bytes_per_gpu;
    if (usable++ == 0 || h > best) {
      best = h;
      best_d = d;
    }
  }
  gpum_size_format(r->bytes_per_gpu, need, sizeof(need));
  if (usable == 0) {
    snprintf(buf, len,
             "needs %s on %u GPU%s; no matching device is usable now (error, disabled, "
             "critical pressure, at max_concurrent_jobs, or not answering a fresh read)",
             need, r->gpus, r->gpus == 1 ? "" : "s");
    return;
  }
  gpum_size_format(best, best_s, sizeof(best_s));
  snprintf(buf, len, "needs %s free on %u GPU%s; %u fit%s now, best: %s on GPU %u", need, r->gpus,
           r->gpus == 1 ? "" : "s", fit, fit == 1 ? "s" : "", best_s, best_d);
}

int gpumd_sched_check(const gpumd_sched_t *s, const gpumd_sched_request_t *req, uint64_t now_ns,
                      gpumd_sched_check_t *out) {
  memset(out, 0, sizeof(*out));
  gpumd_resv_t r;
  memset(&r, 0, sizeof(r));
  int rc = fill_request(req, &r);
  if (rc == 0)
    rc = gpumd__sched_resolve_devices(s, req->devices, req->device_count, &r.want_mask);
  if (rc == 0)
    rc = gpumd__sched_never_fit(s, &r);
  if (rc == GPUMD_SCHED_ENEVERFIT) {
    snprintf(out->reason, sizeof(out->reason), "%s", gpum_last_error());
    return 0;
  }
  if (rc != 0)
    return rc;
  out->could_fit = true;
  r.state = GPUMD_RESV_QUEUED;
  r.created_ns = now_ns;
  uint64_t mask = 0;
  if (!gpumd__sched_place(s, &r, true, &mask)) {
    not_now_text(s, &r, out->reason, sizeof(out->reason));
    return 0;
  }
  /* It would join the queue behind every request of its priority or higher: a blocked head
   * there that is past the backfill bound keeps it off the devices the head could use. */
  uint64_t allowed = s->known_mask;
  for (size_t i = 0; i < s->n_queue && s->queue[i]->priority >= r.priority; i++) {
    const gpumd_resv_t *head = s->queue[i];
    if (gpumd__sched_head_locked(s, head, now_ns))
      allowed &= ~gpumd__sched_usable_mask(s, head);
    if (!gpumd__sched_place_in(s, &r, allowed, true, &mask)) {
      char hid[GPUMD_RESV_ID_BUFSZ];
      out->queue_first = true;
      snprintf(out->reason, sizeof(out->reason),
               "fits, but would wait behind %s (blocked queue head past the backfill bound)",
               gpumd_resv_id_format(head->id, hid, sizeof(hid)));
      return 0;
    }
    break; /* only the first blocked request can lock devices */
  }
  out->fits_now = true;
  out->device_mask = mask;
  return 0;
}
