/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The per-device health state machine of the monitor (design.md section 4). It has no
 * threads and no clock of its own: the sampler feeds it each completed driver call and each
 * critical event with the current times and a random draw for the jitter, and it says what
 * changed. The unit tests drive it directly.
 *
 *   AVAILABLE/BUSY --ELOST, ERESET, critical event, N consecutive failures--> ERROR
 *   ERROR --M consecutive healthy probes--> AVAILABLE or BUSY
 *   any --operator--> DISABLED --operator--> what the rules say now
 *
 * A failed call outside ERROR schedules the next attempt after base * 2^(k-1) (k = failures
 * so far, capped, +-jitter) instead of the next round; a failed re-probe in ERROR does the
 * same with its own count, so re-probes of a dead device back off up to backoff_max_ms.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gpum/error.h>

#include "monitor/monitor_internal.h"

uint64_t gpum__mon_backoff_ms(unsigned base_ms, unsigned max_ms, double jitter, unsigned attempt,
                              double u) {
  double d = base_ms ? (double)base_ms : 1.0;
  for (unsigned i = 1; i < attempt && d < (double)max_ms; i++)
    d *= 2.0;
  if (max_ms > 0 && d > (double)max_ms)
    d = (double)max_ms;
  d *= 1.0 + jitter * (2.0 * u - 1.0);
  return d < 1.0 ? 1 : (uint64_t)llround(d);
}

double gpum__mon_rand01(uint64_t *state) {
  uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return (double)((x * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

void gpum__hsm_init(gpum__hsm_t *h, uint64_t now_real) {
  memset(h, 0, sizeof(*h));
  h->inner = h->shown = GPUM_HEALTH_AVAILABLE;
  h->since_ns = now_real;
  h->responsive = true;
}

static void copy_reason(char *dst, const char *src) {
  snprintf(dst, GPUM_HEALTH_REASON_LEN, "%s", src ? src : "");
}

/* Sets the rules' state and announces a change of the shown state. */
static void announce(gpum__hsm_t *h, gpum_health_t inner, const char *reason, uint64_t now_real,
                     gpum__hsm_out_t *out) {
  h->inner = inner;
  if (inner != GPUM_HEALTH_ERROR)
    h->gone = false; /* recovered: whatever it was is over */
  copy_reason(h->inner_reason, reason);
  gpum_health_t shown = h->disabled ? GPUM_HEALTH_DISABLED : inner;
  const char *why = h->disabled ? h->disabled_reason : h->inner_reason;
  if (shown != h->shown) {
    out->transition = true;
    out->from = h->shown;
    out->to = shown;
    copy_reason(out->reason, why);
    h->shown = shown;
    h->since_ns = now_real;
  }
  copy_reason(h->reason, why);
}

static void schedule(gpum__hsm_t *h, const gpum__hsm_cfg_t *cfg, unsigned attempt,
                     uint64_t now_mono, double u) {
  uint64_t ms =
      gpum__mon_backoff_ms(cfg->backoff_base_ms, cfg->backoff_max_ms, cfg->jitter, attempt, u);
  h->next_attempt_mono = now_mono + ms * 1000000ull;
}

static void go_error(gpum__hsm_t *h, const gpum__hsm_cfg_t *cfg, const char *reason, bool gone,
                     uint64_t now_real, uint64_t now_mono, double u, gpum__hsm_out_t *out) {
  h->gone = h->gone || gone;
  h->healthy_probes = 0;
  h->error_probes = 0;
  schedule(h, cfg, 1, now_mono, u);
  announce(h, GPUM_HEALTH_ERROR, reason, now_real, out);
}

void gpum__hsm_critical(gpum__hsm_t *h, const gpum__hsm_cfg_t *cfg, const char *reason, bool gone,
                        uint64_t now_real, uint64_t now_mono, double u, gpum__hsm_out_t *out) {
  memset(out, 0, sizeof(*out));
  if (h->inner != GPUM_HEALTH_ERROR) {
    go_error(h, cfg, reason, gone, now_real, now_mono, u, out);
    return;
  }
  /* Already ERROR: the recovery starts over. */
  h->gone = h->gone || gone;
  h->healthy_probes = 0;
  if (h->next_attempt_mono == 0)
    schedule(h, cfg, h->error_probes + 1, now_mono, u);
  announce(h, GPUM_HEALTH_ERROR, reason, now_real, out);
}

/* Critical conditions visible in a successful sample. */
static bool sample_critical(gpum__hsm_t *h, const gpum_device_sample_t *s,
                            const gpum_memory_health_t *mh, char *why, size_t cap) {
  bool crit = false;
  if (s != NULL && gpum_sample_valid(s, GPUM_METRIC_ECC_UNCORRECTED)) {
    if (h->ecc_base_valid && s->ecc_uncorrected > h->ecc_base) {
      snprintf(why, cap, "uncorrectable ECC errors grew from %llu to %llu",
               (unsigned long long)h->ecc_base, (unsigned long long)s->ecc_uncorrected);
      crit = true;
    }
    h->ecc_base = s->ecc_uncorrected;
    h->ecc_base_valid = true;
  }
  if (!crit && mh != NULL && (mh->valid & GPUM_MEMHEALTH_REMAPPED_ROWS) && mh->remap_failure) {
    snprintf(why, cap, "row remapping failed: the GPU needs service");
    crit = true;
  }
  return crit;
}

static void result_ok(gpum__hsm_t *h, const gpum__hsm_cfg_t *cfg, const gpum_device_sample_t *s,
                      const gpum_memory_health_t *mh, const unsigned *jobs, uint64_t now_real,
                      uint64_t now_mono, double u, gpum__hsm_out_t *out) {
  char why[GPUM_HEALTH_REASON_LEN];
  h->failures = 0;
  h->last_rc = 0;
  if (sample_critical(h, s, mh, why, sizeof why)) {
    /* Uncorrectable ECC errors, a failed row remap: the GPU needs a reset or service. */
    if (h->inner == GPUM_HEALTH_ERROR)
      gpum__hsm_critical(h, cfg, why, true, now_real, now_mono, u, out);
    else
      go_error(h, cfg, why, true, now_real, now_mono, u, out);
    return;
  }
  h->next_attempt_mono = 0;
  gpum_health_probe_t p = {.rc = 0, .sample = s, .memory_health = mh};
  if (jobs != NULL) {
    p.jobs_valid = true;
    p.jobs = *jobs;
  }
  char busy_why[GPUM_HEALTH_REASON_LEN];
  gpum_health_t st = gpum_health_classify(&p, &cfg->busy, busy_why, sizeof busy_why);
  if (h->inner == GPUM_HEALTH_ERROR) {
    h->healthy_probes++;
    h->error_probes = 0;
    out->probe = true;
    out->probe_rc = 0;
    snprintf(out->reason, sizeof out->reason, "healthy probe %u of %u", h->healthy_probes,
             cfg->recover_probes);
    if (h->healthy_probes < cfg->recover_probes)
      return;
    snprintf(why, sizeof why, "recovered after %u healthy probes%s%.100s", h->healthy_probes,
             busy_why[0] ? "; " : "", busy_why);
    gpum__hsm_out_t tr = {0};
    announce(h, st, why, now_real, &tr);
    out->transition = tr.transition;
    out->from = tr.from;
    out->to = tr.to;
    h->healthy_probes = 0;
    return;
  }
  announce(h, st, busy_why, now_real, out);
}

static void result_fail(gpum__hsm_t *h, const gpum__hsm_cfg_t *cfg, int rc, const char *detail,
                        uint64_t now_real, uint64_t now_mono, double u, gpum__hsm_out_t *out) {
  char why[GPUM_HEALTH_REASON_LEN];
  const char *msg = detail != NULL && detail[0] ? detail : gpum_strerror(rc);
  h->failures++;
  h->last_rc = rc;
  out->probe = true;
  out->probe_rc = rc;
  if (h->inner == GPUM_HEALTH_ERROR) {
    h->gone = h->gone || rc == GPUM_ELOST || rc == GPUM_ERESET;
    h->healthy_probes = 0;
    h->error_probes++;
    schedule(h, cfg, h->error_probes + 1, now_mono, u);
    snprintf(out->reason, sizeof out->reason, "re-probe %u failed: %s", h->error_probes, msg);
    return;
  }
  if (rc == GPUM_ELOST || rc == GPUM_ERESET) {
    gpum_health_probe_t p = {.rc = rc};
    gpum_health_classify(&p, NULL, why, sizeof why);
    snprintf(out->reason, sizeof out->reason, "%s", msg);
    go_error(h, cfg, why, true, now_real, now_mono, u, out);
    return;
  }
  if (h->failures >= cfg->fail_threshold) { /* failing, not shown gone: not "gone" */
    snprintf(why, sizeof why, "%u consecutive failed driver calls; last: %s", h->failures, msg);
    snprintf(out->reason, sizeof out->reason, "%s", msg);
    go_error(h, cfg, why, false, now_real, now_mono, u, out);
    return;
  }
  schedule(h, cfg, h->failures, now_mono, u);
  snprintf(out->reason, sizeof out->reason, "failure %u of %u (retrying with backoff): %s",
           h->failures, cfg->fail_threshold, msg);
}

void gpum__hsm_result(gpum__hsm_t *h, const gpum__hsm_cfg_t *cfg, int rc, const char *detail,
                      const gpum_device_sample_t *s, const gpum_memory_health_t *mh,
                      const unsigned *jobs, uint64_t now_real, uint64_t now_mono, double u,
                      gpum__hsm_out_t *out) {
  memset(out, 0, sizeof(*out));
  h->responsive = true;
  if (rc == 0)
    result_ok(h, cfg, s, mh, jobs, now_real, now_mono, u, out);
  else
    result_fail(h, cfg, rc, detail, now_real, now_mono, u, out);
}

void gpum__hsm_set_disabled(gpum__hsm_t *h, bool disabled, const char *reason, uint64_t now_real,
                            gpum__hsm_out_t *out) {
  memset(out, 0, sizeof(*out));
  h->disabled = disabled;
  if (disabled)
    copy_reason(h->disabled_reason, reason && reason[0] ? reason : "disabled by the operator");
  else
    h->disabled_reason[0] = '\0';
  char keep[GPUM_HEALTH_REASON_LEN];
  copy_reason(keep, h->inner_reason[0] || disabled ? h->inner_reason : "enabled by the operator");
  announce(h, h->inner, keep, now_real, out);
}

bool gpum__hsm_due(const gpum__hsm_t *h, uint64_t now_mono) {
  return h->next_attempt_mono == 0 || now_mono >= h->next_attempt_mono;
}
