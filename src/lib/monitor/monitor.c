/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The monitor object: options and their defaults, creation (history rings; no call on any
 * device: each device's reader reads its static info once started), the
 * lifecycle, the static info and the wait for it, and the device queries. The threads live
 * in sampler.c, the event ring and delivery in events.c, the sample queries in query.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/alert.h>
#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/monitor.h>

#include "device/device_internal.h"
#include "monitor/monitor_internal.h"
#include "os_internal.h"

#define MAX_INTERVAL_MS 3600000u
#define MAX_RING 10000000u /* records per device (640 MB): a sanity bound on the options */

uint64_t gpum__mon_now(int clock_id) {
  return clock_id == CLOCK_MONOTONIC ? gpum__os_mono_ns() : gpum__os_real_ns();
}

void gpum_monitor_opts_init(gpum_monitor_opts_t *opts) {
  memset(opts, 0, sizeof(*opts));
  opts->interval_ms = 1000;
  opts->history_seconds = 3600;
  gpum_busy_thresholds_init(&opts->busy);
  opts->fail_threshold = 3;
  opts->recover_probes = 3;
  opts->jitter = 0.2;
  opts->events = true;
  opts->memory_health_every = 60;
}

static int resolve_opts(gpum_monitor_t *mon, const gpum_monitor_opts_t *in) {
  gpum_monitor_opts_t o;
  if (in == NULL)
    gpum_monitor_opts_init(&o);
  else
    o = *in;
  if (o.interval_ms == 0 || o.interval_ms > MAX_INTERVAL_MS)
    return gpum_error(GPUM_EINVAL, "monitor interval %u ms out of range (1..%u)", o.interval_ms,
                      MAX_INTERVAL_MS);
  if (o.history_seconds == 0)
    return gpum_error(GPUM_EINVAL, "monitor history must be at least 1 second");
  uint64_t cap = (uint64_t)o.history_seconds * 1000u / o.interval_ms;
  if (cap == 0)
    cap = 1;
  if (cap > MAX_RING)
    return gpum_error(GPUM_EINVAL,
                      "monitor history of %u s at %u ms is %llu samples per device (max %u)",
                      o.history_seconds, o.interval_ms, (unsigned long long)cap, MAX_RING);
  if (o.fail_threshold == 0 || o.recover_probes == 0)
    return gpum_error(GPUM_EINVAL,
                      "monitor fail_threshold (%u) and recover_probes (%u) must be "
                      ">= 1",
                      o.fail_threshold, o.recover_probes);
  if (o.jitter < 0)
    o.jitter = 0.2;
  if (o.jitter > 0.5)
    return gpum_error(GPUM_EINVAL, "monitor jitter %g out of range (0..0.5)", o.jitter);
  if (o.busy.util_gpu_pct > 100 || o.busy.memory_pct > 100)
    return gpum_error(GPUM_EINVAL, "BUSY thresholds are percentages (0..100): util %u, memory %u",
                      o.busy.util_gpu_pct, o.busy.memory_pct);
  if (o.watchdog_ms == 0)
    o.watchdog_ms = o.interval_ms * 5u > 2000u ? o.interval_ms * 5u : 2000u;
  if (o.backoff_base_ms == 0)
    o.backoff_base_ms = o.interval_ms;
  if (o.backoff_max_ms == 0) {
    uint64_t m = (uint64_t)o.backoff_base_ms * 60u;
    o.backoff_max_ms = m > 600000u ? 600000u : (unsigned)m;
  }
  if (o.backoff_max_ms < o.backoff_base_ms)
    return gpum_error(GPUM_EINVAL, "monitor backoff_max_ms %u is below backoff_base_ms %u",
                      o.backoff_max_ms, o.backoff_base_ms);
  if (o.device_count > 0 && o.devices == NULL)
    return gpum_error(GPUM_EINVAL, "monitor device_count %zu without a device list",
                      o.device_count);
  if (o.seed == 0)
    o.seed = gpum__mon_now(CLOCK_MONOTONIC) ^ ((uint64_t)(uintptr_t)mon << 7);
  mon->rng = o.seed;
  mon->ring_cap = (size_t)cap;
  mon->cfg = (gpum__hsm_cfg_t){.fail_threshold = o.fail_threshold,
                               .recover_probes = o.recover_probes,
                               .interval_ms = o.interval_ms,
                               .backoff_base_ms = o.backoff_base_ms,
                               .backoff_max_ms = o.backoff_max_ms,
                               .jitter = o.jitter,
                               .busy = o.busy};
  mon->alerts = o.alerts;
  mon->opts = o;
  mon->opts.devices = NULL;
  mon->opts.device_count = 0;
  return 0;
}

static int copy_dev_opts(gpum_monitor_t *mon, const gpum_device_open_opts_t *d) {
  if (d == NULL) {
    gpum_device_open_opts_init(&mon->dev_opts);
    return 0;
  }
  return gpum__device_opts_dup(d, &mon->dev_opts, &mon->libraries);
}

/* Resolves the watched device list against the session's device count. */
static int pick_devices(gpum_monitor_t *mon, const gpum_monitor_opts_t *in, unsigned count) {
  size_t n = in != NULL && in->device_count > 0 ? in->device_count : count;
  if (n == 0)
    return gpum_error(GPUM_ENODEV, "monitor: no device to watch");
  mon->devlist = calloc(n, sizeof(*mon->devlist));
  mon->devs = calloc(n, sizeof(*mon->devs));
  if (mon->devlist == NULL || mon->devs == NULL)
    return gpum_error(GPUM_ENOMEM, "monitor: out of memory");
  for (size_t i = 0; i < n; i++) {
    unsigned d = in != NULL && in->device_count > 0 ? in->devices[i] : (unsigned)i;
    if (d >= count)
      return gpum_error(GPUM_ENODEV, "monitor: no device %u (the node has %u)", d, count);
    for (size_t j = 0; j < i; j++)
      if (mon->devlist[j] == d)
        return gpum_error(GPUM_EINVAL, "monitor: device %u listed twice", d);
    mon->devlist[i] = d;
  }
  mon->ndev = (unsigned)n;
  mon->opts.devices = mon->devlist;
  mon->opts.device_count = n;
  return 0;
}

/* Sets up one device's slot. No driver call on the device: its static info is read by its
 * reader once started (a device that hangs must not hold up the caller). */
static int init_device(gpum_monitor_t *mon, gpum__mdev_t *md, unsigned index) {
  md->index = index;
  md->info.index = index;
  gpum__hsm_init(&md->hsm, gpum__mon_now(CLOCK_REALTIME));
  int rc = gpum__ring_init(&md->ring, mon->ring_cap);
  if (rc != 0)
    return rc;
  return 0;
}

static void init_sync(gpum_monitor_t *mon) {
  pthread_mutex_init(&mon->lock, NULL);
  gpum__os_cond_init_mono(&mon->ev_cond);
  pthread_mutex_init(&mon->wake_lock, NULL);
  gpum__os_cond_init_mono(&mon->wake_cond);
  pthread_mutex_init(&mon->cb_lock, NULL);
}

int gpum_monitor_create(const gpum_device_open_opts_t *dev_opts, const gpum_monitor_opts_t *opts,
                        gpum_monitor_t **out) {
  if (out == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_monitor_create: out is NULL");
  *out = NULL;
  gpum_monitor_t *mon = calloc(1, sizeof(*mon));
  if (mon == NULL)
    return gpum_error(GPUM_ENOMEM, "monitor: out of memory");
  init_sync(mon);
  int rc = resolve_opts(mon, opts);
  if (rc == 0)
    rc = copy_dev_opts(mon, dev_opts);
  if (rc == 0) {
    mon->events = calloc(GPUM_MONITOR_EVENT_KEEP, sizeof(*mon->events));
    if (mon->events == NULL)
      rc = gpum_error(GPUM_ENOMEM, "monitor: out of memory");
  }
  if (rc == 0)
    rc = gpum_device_open(&mon->dev_opts, &mon->ev_session);
  if (rc == 0)
    rc = pick_devices(mon, opts, gpum_device_count(mon->ev_session));
  for (unsigned i = 0; rc == 0 && i < mon->ndev; i++)
    rc = init_device(mon, &mon->devs[i], mon->devlist[i]);
  if (rc != 0)
    goto out_fail;
  if (mon->alerts != NULL)
    gpum_monitor_set_alert_engine(mon, mon->alerts);
  *out = mon;
  return 0;
out_fail:
  gpum_monitor_destroy(mon);
  return rc;
}

int gpum_monitor_start(gpum_monitor_t *mon) {
  if (mon == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_monitor_start: monitor is NULL");
  if (mon->started)
    return gpum_error(GPUM_ESTATE, "the monitor was already started (a stopped monitor cannot be "
                                   "restarted: create a new one)");
  return gpum__mon_start_threads(mon);
}

void gpum_monitor_stop(gpum_monitor_t *mon) {
  if (mon == NULL || !mon->started || mon->stopped)
    return;
  if (pthread_equal(pthread_self(), mon->sampler)) {
    gpum_log(GPUM_LOG_ERROR, "monitor",
             "gpum_monitor_stop called from a monitor callback: "
             "ignored");
    return;
  }
  gpum__mon_stop_threads(mon);
  mon->stopped = true;
  gpum__mon_deliver(mon);
}

void gpum_monitor_destroy(gpum_monitor_t *mon) {
  if (mon == NULL)
    return;
  gpum_monitor_stop(mon);
  for (unsigned i = 0; mon->devs != NULL && i < mon->ndev; i++)
    gpum__ring_free(&mon->devs[i].ring);
  if (mon->ev_session != NULL)
    gpum_device_close(mon->ev_session);
  free(mon->devs);
  free(mon->devlist);
  free(mon->events);
  free(mon->libraries);
  pthread_mutex_destroy(&mon->lock);
  pthread_cond_destroy(&mon->ev_cond);
  pthread_mutex_destroy(&mon->wake_lock);
  pthread_cond_destroy(&mon->wake_cond);
  pthread_mutex_destroy(&mon->cb_lock);
  free(mon);
}

int gpum_monitor_set_alert_engine(gpum_monitor_t *mon, struct gpum_alert_engine *engine) {
  if (mon == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_monitor_set_alert_engine: monitor is NULL");
  if (mon->started)
    return gpum_error(GPUM_ESTATE, "attach the alert engine before gpum_monitor_start");
  mon->alerts = engine;
  /* Before start no info has been read yet: the sampler hands it to the engine (under the
   * monitor lock: a stopped monitor keeps what its readers read). */
  pthread_mutex_lock(&mon->lock);
  for (unsigned i = 0; engine != NULL && i < mon->ndev; i++)
    if (mon->devs[i].info_done && mon->devs[i].info_rc == 0)
      gpum_alert_engine_set_device_info(engine, mon->devs[i].index, &mon->devs[i].info);
  pthread_mutex_unlock(&mon->lock);
  return 0;
}

gpum__mdev_t *gpum__mon_dev(const gpum_monitor_t *mon, unsigned device) {
  for (unsigned i = 0; mon != NULL && i < mon->ndev; i++)
    if (mon->devs[i].index == device)
      return &mon->devs[i];
  return NULL;
}

static int no_dev(unsigned device) {
  return gpum_error(GPUM_ENODEV, "the monitor does not watch device %u", device);
}

unsigned gpum_monitor_device_count(const gpum_monitor_t *mon) {
  return mon ? mon->ndev : 0;
}

int gpum_monitor_device_index(const gpum_monitor_t *mon, unsigned slot, unsigned *device) {
  if (mon == NULL || device == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_monitor_device_index: NULL argument");
  if (slot >= mon->ndev)
    return gpum_error(GPUM_ENODEV, "monitor slot %u out of range (%u devices)", slot, mon->ndev);
  *device = mon->devs[slot].index;
  return 0;
}

int gpum_monitor_device_info(const gpum_monitor_t *mon, unsigned device, gpum_device_info_t *out) {
  if (mon == NULL || out == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_monitor_device_info: NULL argument");
  const gpum__mdev_t *md = gpum__mon_dev(mon, device);
  if (md == NULL)
    return no_dev(device);
  /* The lock is not part of the monitor's observable state: a const query may take it. */
  pthread_mutex_t *lock = (pthread_mutex_t *)&mon->lock;
  pthread_mutex_lock(lock);
  *out = md->info;
  bool done = md->info_done;
  pthread_mutex_unlock(lock);
  if (!done)
    return gpum_error(GPUM_EAGAIN, "device %u has not answered yet: its static info is pending",
                      device);
  return 0;
}

/* Devices whose info is still pending (mon->lock held); *first: the first of them. */
static unsigned info_pending(const gpum_monitor_t *mon, unsigned *first) {
  unsigned n = 0;
  for (unsigned i = 0; i < mon->ndev; i++) {
    if (!mon->devs[i].info_done && n++ == 0)
      *first = mon->devs[i].index;
  }
  return n;
}

int gpum_monitor_wait_info(gpum_monitor_t *mon, unsigned timeout_ms, unsigned *missing) {
  if (missing != NULL)
    *missing = 0;
  if (mon == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_monitor_wait_info: monitor is NULL");
  if (!mon->started)
    return gpum_error(GPUM_ESTATE, "gpum_monitor_wait_info before gpum_monitor_start: the "
                                   "workers read the info");
  uint64_t deadline = gpum__mon_now(CLOCK_MONOTONIC) + (uint64_t)timeout_ms * 1000000ull;
  struct timespec ts = {(time_t)(deadline / 1000000000ull), (long)(deadline % 1000000000ull)};
  unsigned first = 0, n;
  pthread_mutex_lock(&mon->lock);
  /* Every info read emits an event, which broadcasts ev_cond. */
  while ((n = info_pending(mon, &first)) > 0 &&
         pthread_cond_timedwait(&mon->ev_cond, &mon->lock, &ts) != ETIMEDOUT) {
  }
  n = info_pending(mon, &first);
  pthread_mutex_unlock(&mon->lock);
  if (missing != NULL)
    *missing = n;
  if (n > 0)
    return gpum_error(GPUM_ETIMEDOUT,
                      "%u of %u devices did not answer within %u ms (device %u is the first)", n,
                      mon->ndev, timeout_ms, first);
  return 0;
}
