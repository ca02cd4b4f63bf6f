/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Health-state vocabulary and the pure single-probe classifier: state names, BUSY thresholds
 * and gpum_health_classify(), which `gpum status` uses without a monitor and the monitor
 * uses for each sample of a device that answers.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <gpum/error.h>
#include <gpum/monitor.h>

static const char *const state_names[GPUM_HEALTH_COUNT] = {"AVAILABLE", "BUSY", "ERROR",
                                                           "DISABLED"};

const char *gpum_health_state_name(gpum_health_t state) {
  if ((unsigned)state >= GPUM_HEALTH_COUNT)
    return "UNKNOWN";
  return state_names[state];
}

int gpum_health_state_parse(const char *s, gpum_health_t *out) {
  if (s == NULL || out == NULL)
    return gpum_error(GPUM_EINVAL, "health state: NULL argument");
  for (unsigned i = 0; i < GPUM_HEALTH_COUNT; i++) {
    if (strcasecmp(s, state_names[i]) == 0) {
      *out = (gpum_health_t)i;
      return 0;
    }
  }
  return gpum_error(GPUM_EINVAL,
                    "unknown health state '%s' (expected AVAILABLE, BUSY, ERROR or DISABLED)", s);
}

void gpum_busy_thresholds_init(gpum_busy_thresholds_t *t) {
  t->util_gpu_pct = 90;
  t->memory_pct = 90;
  t->jobs = 0;
}

static void put(char *reason, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void put(char *reason, size_t cap, const char *fmt, ...) {
  if (reason == NULL || cap == 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, cap, fmt, ap);
  va_end(ap);
}

static gpum_health_t classify_error(int rc, char *reason, size_t cap) {
  switch (rc) {
  case GPUM_ELOST:
    put(reason, cap, "GPU is lost (fallen off the bus)");
    return GPUM_HEALTH_ERROR;
  case GPUM_ERESET:
    put(reason, cap, "GPU needs a reset");
    return GPUM_HEALTH_ERROR;
  case GPUM_EAGAIN:
    put(reason, cap, "transient driver errors");
    return GPUM_HEALTH_AVAILABLE;
  default:
    put(reason, cap, "driver call failed: %s (%s)", gpum_strerror(rc), gpum_err_name(rc));
    return GPUM_HEALTH_ERROR;
  }
}

gpum_health_t gpum_health_classify(const gpum_health_probe_t *p, const gpum_busy_thresholds_t *t,
                                   char *reason, size_t cap) {
  gpum_busy_thresholds_t defaults;
  put(reason, cap, "%s", "");
  if (p == NULL) {
    put(reason, cap, "no probe");
    return GPUM_HEALTH_ERROR;
  }
  if (p->rc != 0)
    return classify_error(p->rc, reason, cap);
  if (t == NULL) {
    gpum_busy_thresholds_init(&defaults);
    t = &defaults;
  }
  const gpum_memory_health_t *mh = p->memory_health;
  if (mh != NULL && (mh->valid & GPUM_MEMHEALTH_REMAPPED_ROWS) && mh->remap_failure) {
    put(reason, cap, "row remapping failed: the GPU needs service");
    return GPUM_HEALTH_ERROR;
  }
  const gpum_device_sample_t *s = p->sample;
  if (s != NULL && t->util_gpu_pct > 0 && gpum_sample_valid(s, GPUM_METRIC_UTIL_GPU) &&
      s->util_gpu >= t->util_gpu_pct) {
    put(reason, cap, "GPU utilisation %u%% >= %u%%", s->util_gpu, t->util_gpu_pct);
    return GPUM_HEALTH_BUSY;
  }
  if (s != NULL && t->memory_pct > 0 && gpum_sample_valid(s, GPUM_METRIC_MEMORY_USED) &&
      gpum_sample_valid(s, GPUM_METRIC_MEMORY_TOTAL) && s->memory_total > 0) {
    double pct = (double)s->memory_used * 100.0 / (double)s->memory_total;
    if (pct >= (double)t->memory_pct) {
      put(reason, cap, "memory used %.1f%% >= %u%%", pct, t->memory_pct);
      return GPUM_HEALTH_BUSY;
    }
  }
  if (t->jobs > 0 && p->jobs_valid && p->jobs >= t->jobs) {
    put(reason, cap, "jobs %u >= %u", p->jobs, t->jobs);
    return GPUM_HEALTH_BUSY;
  }
  return GPUM_HEALTH_AVAILABLE;
}
