/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The monitor's threads. The sampler thread runs the rounds: every interval it asks each
 * device that is due for a read, and in between it takes the results, stores the samples,
 * steps the health machines, handles the driver events and delivers the monitor events. The
 * driver calls themselves run on libgpum's hang-safe device readers (one thread and session
 * per device), so a call that hangs holds up only its own device: the sampler never waits for
 * a reader, it only notices (watchdog) when a request has been running longer than
 * watchdog_ms.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/alert.h>
#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/monitor.h>

#include "os_internal.h"
#include "monitor/monitor_internal.h"

#define EVENT_WAIT_MS 250u

static struct timespec abs_mono(uint64_t ns) {
  return (struct timespec){(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
}

static void wake_sampler(gpum_monitor_t *mon) {
  pthread_mutex_lock(&mon->wake_lock);
  mon->wake_pending = true;
  pthread_cond_signal(&mon->wake_cond);
  pthread_mutex_unlock(&mon->wake_lock);
}

/* ---- the devices' reads (on their readers' threads) -------------------------------------- */

static unsigned count_jobs(const gpum__wctx_t *ctx, gpum_device_session_t *s, unsigned device,
                           bool *valid) {
  unsigned jobs = 0;
  *valid = false;
  if (ctx->jobs_fn != NULL) {
    *valid = ctx->jobs_fn(ctx->jobs_user, device, &jobs) == 0;
    return jobs;
  }
  size_t n = 0;
  int rc = gpum_device_processes(s, device, NULL, 0, &n);
  *valid = rc == 0 || rc == GPUM_ENOSPC;
  return (unsigned)n;
}

/* One request: the static info first when asked, then the sample and what else was asked.
 * Runs on the device's reader thread and touches nothing of the monitor. */
static int device_read(gpum_device_session_t *s, unsigned device, const void *request, void *result,
                       void *user) {
  const gpum__wreq_t *q = request;
  gpum__wres_t *r = result;
  r->mh_rc = GPUM_ENOENT;
  if (s == NULL) { /* the session could not be opened (start opens it: not expected) */
    r->rc = GPUM_EDRIVER;
    snprintf(r->detail, sizeof r->detail, "%s", gpum_last_error());
    return 0;
  }
  if (q->want_info) {
    gpum_error_clear();
    r->info_read = true;
    r->info_rc = gpum_device_get_info(s, device, &r->info);
    snprintf(r->info_detail, sizeof r->info_detail, "%s", r->info_rc != 0 ? gpum_last_error() : "");
    r->info.index = device;
  }
  gpum_error_clear();
  r->rc = gpum_device_sample(s, device, &r->sample);
  snprintf(r->detail, sizeof r->detail, "%s", r->rc != 0 ? gpum_last_error() : "");
  if (r->rc == 0 && q->want_mh)
    r->mh_rc = gpum_device_memory_health(s, device, &r->mh);
  if (r->rc == 0 && q->want_jobs)
    r->jobs = count_jobs(user, s, device, &r->jobs_valid);
  return 0;
}

void gpum__mon_info_read(gpum_monitor_t *mon, unsigned device, int rc,
                         const gpum_device_info_t *info, const char *detail) {
  gpum__mdev_t *md = gpum__mon_dev(mon, device);
  if (md == NULL)
    return;
  if (rc == 0 && mon->alerts != NULL)
    gpum_alert_engine_set_device_info(mon->alerts, device, info);
  pthread_mutex_lock(&mon->lock);
  bool emit = !md->info_done || (rc == 0 && md->info_rc != 0);
  if (emit) {
    if (rc == 0)
      md->info = *info;
    md->info_done = true;
    md->info_rc = rc;
    gpum_monitor_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = GPUM_MONEV_INFO;
    ev.device = device;
    ev.rc = rc;
    if (rc == 0)
      snprintf(ev.reason, sizeof ev.reason, "%.90s (%.64s)", info->name, info->uuid);
    else
      snprintf(ev.reason, sizeof ev.reason, "no static info: %s", detail);
    gpum__mon_emit(mon, &ev);
  }
  pthread_mutex_unlock(&mon->lock);
  if (emit && rc != 0)
    gpum_log(GPUM_LOG_WARN, "monitor", "device %u: no static info: %s", device, detail);
}

/* A reader has a result: the sampler takes it (readers never call this once stopping). */
static void device_notify(unsigned device, void *user) {
  (void)device;
  wake_sampler(((gpum__wctx_t *)user)->mon);
}

/* ---- event thread ----------------------------------------------------------------------- */

static void evthread_free(gpum__evthread_t *e) {
  if (e->session != NULL)
    gpum_device_close(e->session);
  pthread_mutex_destroy(&e->lock);
  pthread_cond_destroy(&e->cond);
  free(e);
}

static void push_devev(gpum_monitor_t *mon, const gpum_device_event_t *ev) {
  pthread_mutex_lock(&mon->wake_lock);
  if (mon->evq_len < GPUM__MON_EVQ)
    mon->evq[mon->evq_len++] = *ev;
  else
    mon->evq_dropped++;
  mon->wake_pending = true;
  pthread_cond_signal(&mon->wake_cond);
  pthread_mutex_unlock(&mon->wake_lock);
}

/* Waits up to ms on the event thread's condition; returns true when asked to quit. */
static bool ev_pause(gpum__evthread_t *e, unsigned ms) {
  struct timespec ts = abs_mono(gpum__mon_now(CLOCK_MONOTONIC) + (uint64_t)ms * 1000000ull);
  pthread_mutex_lock(&e->lock);
  while (!e->quit && pthread_cond_timedwait(&e->cond, &e->lock, &ts) != ETIMEDOUT) {
  }
  bool quit = e->quit;
  pthread_mutex_unlock(&e->lock);
  return quit;
}

static void *evthread_main(void *arg) {
  gpum__evthread_t *e = arg;
  /* Registered here, not on the thread calling gpum_monitor_start: the registration calls
   * into every device, and one that hangs must not hold up the caller (which waits for it
   * with a deadline). */
  int rc = gpum_device_events_enable(e->session);
  if (rc != 0)
    gpum_log(GPUM_LOG_INFO, "monitor", "no driver events (%s): XIDs are not watched",
             gpum_last_error());
  pthread_mutex_lock(&e->lock);
  e->enable_rc = rc;
  e->enable_done = true;
  pthread_cond_broadcast(&e->cond);
  pthread_mutex_unlock(&e->lock);
  unsigned failures = 0;
  for (;;) {
    pthread_mutex_lock(&e->lock);
    bool quit = e->quit || rc != 0;
    pthread_mutex_unlock(&e->lock);
    if (quit)
      break;
    gpum_device_event_t ev;
    int wrc = gpum_device_event_wait(e->session, &ev, EVENT_WAIT_MS);
    if (wrc == 0) {
      failures = 0;
      pthread_mutex_lock(&e->lock);
      if (!e->orphaned)
        push_devev(e->mon, &ev); /* lock order: event thread, then wake */
      pthread_mutex_unlock(&e->lock);
    } else if (wrc != GPUM_ETIMEDOUT) {
      unsigned ms = 100u << (failures < 6 ? failures : 6);
      failures++;
      gpum_log(GPUM_LOG_DEBUG, "monitor", "event wait failed: %s", gpum_last_error());
      if (ev_pause(e, ms))
        break;
    }
  }
  pthread_mutex_lock(&e->lock);
  bool orphaned = e->orphaned;
  e->exited = true;
  pthread_mutex_unlock(&e->lock);
  if (orphaned)
    evthread_free(e);
  return NULL;
}

/* ---- sampler: results and events -------------------------------------------------------- */

static void handle_result(gpum_monitor_t *mon, gpum__mdev_t *md, const gpum__wres_t *r) {
  if (r->info_read)
    gpum__mon_info_read(mon, md->index, r->info_rc, &r->info, r->info_detail);
  uint64_t real = gpum__mon_now(CLOCK_REALTIME), mono = gpum__mon_now(CLOCK_MONOTONIC);
  double u = gpum__mon_rand01(&mon->rng);
  gpum__hsm_out_t o;
  pthread_mutex_lock(&mon->lock);
  if (r->rc == 0) {
    gpum__hrec_t rec;
    gpum__hrec_pack(&r->sample, &rec);
    gpum__ring_push(&md->ring, &rec);
  }
  gpum__hsm_result(&md->hsm, &mon->cfg, r->rc, r->detail, &r->sample, r->mh_rc == 0 ? &r->mh : NULL,
                   r->jobs_valid ? &r->jobs : NULL, real, mono, u, &o);
  gpum__mon_emit_hsm(mon, md->index, &o, real);
  pthread_mutex_unlock(&mon->lock);
  if (r->rc == 0 && mon->alerts != NULL)
    gpum_alert_engine_feed_sample(mon->alerts, md->index, &r->sample, r->sample.timestamp_ns);
}

/* Takes the finished results from the readers. */
static void collect(gpum_monitor_t *mon) {
  for (unsigned i = 0; i < mon->ndev; i++) {
    gpum__mdev_t *md = &mon->devs[i];
    gpum__wres_t r;
    int rc = 0;
    if (!md->inflight || gpum_device_readers_take(mon->readers, md->index, &r, &rc) != 1)
      continue;
    md->inflight = false;
    md->hung = false;
    handle_result(mon, md, &r);
  }
}

/* gone: evidence the GPU is gone or needs a reset (gpum_device_health_t.gone); a hung call is
 * not. */
static void critical(gpum_monitor_t *mon, gpum__mdev_t *md, const char *reason, bool gone) {
  uint64_t real = gpum__mon_now(CLOCK_REALTIME), mono = gpum__mon_now(CLOCK_MONOTONIC);
  gpum__hsm_out_t o;
  /* mon->lock held by the caller */
  gpum__hsm_critical(&md->hsm, &mon->cfg, reason, gone, real, mono, gpum__mon_rand01(&mon->rng),
                     &o);
  gpum__mon_emit_hsm(mon, md->index, &o, real);
}

static void handle_devev(gpum_monitor_t *mon, const gpum_device_event_t *dev) {
  gpum__mdev_t *md = gpum__mon_dev(mon, dev->device);
  if (md == NULL)
    return;
  gpum_monitor_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.device = md->index;
  ev.time_ns = dev->timestamp_ns;
  char why[GPUM_HEALTH_REASON_LEN];
  pthread_mutex_lock(&mon->lock);
  switch (dev->kind) {
  case GPUM_DEVEV_XID: {
    bool crit = gpum__mon_xid_critical(dev->xid, why, sizeof why);
    md->hsm.last_xid = dev->xid;
    ev.kind = GPUM_MONEV_XID;
    ev.xid = dev->xid;
    snprintf(ev.reason, sizeof ev.reason, "%s", why);
    gpum__mon_emit(mon, &ev);
    if (crit)
      critical(mon, md, why, true);
    break;
  }
  case GPUM_DEVEV_ECC_DOUBLE:
  case GPUM_DEVEV_ECC_SINGLE: {
    bool dbe = dev->kind == GPUM_DEVEV_ECC_DOUBLE;
    ev.kind = GPUM_MONEV_ECC;
    snprintf(ev.reason, sizeof ev.reason, "%s",
             dbe ? "double-bit (uncorrectable) ECC error" : "single-bit (corrected) ECC error");
    gpum__mon_emit(mon, &ev);
    if (dbe)
      critical(mon, md, ev.reason, true);
    break;
  }
  case GPUM_DEVEV_GPU_LOST:
    critical(mon, md, "GPU is lost (fallen off the bus)", true);
    break;
  }
  pthread_mutex_unlock(&mon->lock);
}

static void drain_devevs(gpum_monitor_t *mon) {
  gpum_device_event_t q[GPUM__MON_EVQ];
  pthread_mutex_lock(&mon->wake_lock);
  size_t n = mon->evq_len;
  memcpy(q, mon->evq, n * sizeof(q[0]));
  mon->evq_len = 0;
  pthread_mutex_unlock(&mon->wake_lock);
  for (size_t i = 0; i < n; i++)
    handle_devev(mon, &q[i]);
}

/* Marks the devices whose request runs past the watchdog. */
static void watchdog(gpum_monitor_t *mon, uint64_t now) {
  uint64_t limit = (uint64_t)mon->opts.watchdog_ms * 1000000ull;
  for (unsigned i = 0; i < mon->ndev; i++) {
    gpum__mdev_t *md = &mon->devs[i];
    if (!md->inflight || md->hung || now - md->issued_mono < limit)
      continue;
    md->hung = true;
    char why[GPUM_HEALTH_REASON_LEN];
    snprintf(why, sizeof why, "driver call hung for %llu ms (watchdog %u ms)",
             (unsigned long long)((now - md->issued_mono) / 1000000ull), mon->opts.watchdog_ms);
    gpum_log(GPUM_LOG_WARN, "monitor", "device %u: %s", md->index, why);
    pthread_mutex_lock(&mon->lock);
    md->hsm.responsive = false;
    critical(mon, md, why, false); /* slow is not gone: its jobs may still run */
    pthread_mutex_unlock(&mon->lock);
  }
}

/* ---- sampler: rounds -------------------------------------------------------------------- */

static void issue(gpum_monitor_t *mon, gpum__mdev_t *md, uint64_t now) {
  unsigned every = mon->opts.memory_health_every;
  gpum__wreq_t q = {.want_jobs = mon->opts.busy.jobs > 0};
  pthread_mutex_lock(&mon->lock);
  bool in_error = md->hsm.inner == GPUM_HEALTH_ERROR;
  q.want_info = !md->info_done || md->info_rc != 0; /* until it is read (a lost device: later) */
  pthread_mutex_unlock(&mon->lock);
  q.want_mh = every > 0 && (md->rounds % every == 0 || in_error);
  if (gpum_device_readers_request(mon->readers, md->index, &q) != 0) {
    gpum_error_clear(); /* the reader is still in the previous call: the watchdog tells */
    return;
  }
  md->rounds++;
  md->inflight = true;
  md->issued_mono = now;
}

/* A round's devices are asked one after the other: the next when the one before has answered,
 * or has been at it for GPUM__MON_CHAIN_MS (a slow or hung device holds the others up by that
 * much once, then it stays in flight and is skipped). Asked all at once, the readers ran their
 * driver calls at the same instant and contended for the driver's locks: most of the
 * monitor's CPU time went to those futex waits and wake-ups, not to the calls. */
#define GPUM__MON_CHAIN_MS 20u

/* Asks the next device of the round's chain when the chain may move on; returns when it may
 * next move on when devices are still due (else UINT64_MAX). */
static uint64_t chain_next(gpum_monitor_t *mon, uint64_t now) {
  uint64_t step = (uint64_t)GPUM__MON_CHAIN_MS * 1000000ull;
  gpum__mdev_t *last = mon->chain_dev;
  if (last != NULL && last->inflight && now - last->issued_mono < step)
    return mon->chain_mono + step;
  for (unsigned i = 0; i < mon->ndev; i++) {
    gpum__mdev_t *md = &mon->devs[i];
    if (!md->due)
      continue;
    md->due = false;
    if (md->inflight)
      continue; /* asked at its own time (a backoff) meanwhile */
    issue(mon, md, now);
    if (!md->inflight)
      continue; /* its reader is still in an older call: the watchdog tells */
    mon->chain_dev = md;
    mon->chain_mono = now;
    for (unsigned k = i + 1; k < mon->ndev; k++)
      if (mon->devs[k].due)
        return now + step;
    return UINT64_MAX;
  }
  return UINT64_MAX;
}

/* Issues the requests due now; returns the earliest future time something is due (or
 * UINT64_MAX). A device with a backoff pending is called at its own time, the others with
 * the round, in its chain. */
static uint64_t issue_due(gpum_monitor_t *mon, uint64_t now, bool round) {
  uint64_t next = UINT64_MAX;
  uint64_t limit = (uint64_t)mon->opts.watchdog_ms * 1000000ull;
  for (unsigned i = 0; i < mon->ndev; i++) {
    gpum__mdev_t *md = &mon->devs[i];
    if (md->inflight) {
      if (!md->hung && md->issued_mono + limit < next)
        next = md->issued_mono + limit;
      continue;
    }
    pthread_mutex_lock(&mon->lock);
    uint64_t at = md->hsm.next_attempt_mono;
    pthread_mutex_unlock(&mon->lock);
    if (at == 0 && round) {
      md->due = true;
    } else if (at != 0) {
      md->due = false;
      if (now >= at)
        issue(mon, md, now);
      else if (at < next)
        next = at;
    }
  }
  uint64_t chain = chain_next(mon, now);
  return chain < next ? chain : next;
}

static void *sampler_main(void *arg) {
  gpum_monitor_t *mon = arg;
  uint64_t interval = (uint64_t)mon->opts.interval_ms * 1000000ull;
  uint64_t next_tick = gpum__mon_now(CLOCK_MONOTONIC);
  pthread_mutex_lock(&mon->wake_lock);
  while (!mon->stopping) {
    mon->wake_pending = false;
    pthread_mutex_unlock(&mon->wake_lock);
    drain_devevs(mon);
    collect(mon);
    uint64_t now = gpum__mon_now(CLOCK_MONOTONIC);
    watchdog(mon, now);
    bool round = now >= next_tick;
    if (round) {
      next_tick += interval;
      if (next_tick <= now) /* missed ticks (suspend, overload): no catch-up burst */
        next_tick = now + interval;
    }
    uint64_t deadline = issue_due(mon, now, round);
    if (round && mon->alerts != NULL)
      gpum_alert_engine_advance(mon->alerts, gpum__mon_now(CLOCK_REALTIME));
    gpum__mon_deliver(mon);
    if (next_tick < deadline)
      deadline = next_tick;
    struct timespec ts = abs_mono(deadline);
    pthread_mutex_lock(&mon->wake_lock);
    while (!mon->wake_pending && !mon->stopping &&
           pthread_cond_timedwait(&mon->wake_cond, &mon->wake_lock, &ts) != ETIMEDOUT) {
    }
  }
  pthread_mutex_unlock(&mon->wake_lock);
  return NULL;
}

/* ---- start / stop ----------------------------------------------------------------------- */

static int start_evthread(gpum_monitor_t *mon) {
  gpum__evthread_t *e = calloc(1, sizeof(*e));
  if (e == NULL)
    return gpum_error(GPUM_ENOMEM, "monitor: out of memory");
  pthread_mutex_init(&e->lock, NULL);
  gpum__os_cond_init_mono(&e->cond);
  e->mon = mon;
  e->session = mon->ev_session;
  mon->ev_session = NULL;
  mon->evt = e;
  if (pthread_create(&e->thread, NULL, evthread_main, e) != 0)
    return gpum_error(GPUM_ENOMEM, "monitor: cannot start the event thread");
  e->started = true;
  /* Waits for the registration (up to the watchdog timeout), so that an XID raised right
   * after start is not missed while the event thread is still starting; a device that does
   * not answer only delays it. */
  uint64_t deadline = gpum__mon_now(CLOCK_MONOTONIC) + (uint64_t)mon->opts.watchdog_ms * 1000000ull;
  struct timespec ts = abs_mono(deadline);
  pthread_mutex_lock(&e->lock);
  while (!e->enable_done && pthread_cond_timedwait(&e->cond, &e->lock, &ts) != ETIMEDOUT) {
  }
  bool done = e->enable_done;
  pthread_mutex_unlock(&e->lock);
  if (!done)
    gpum_log(GPUM_LOG_WARN, "monitor",
             "the driver's event registration still runs after %u ms (a device does not "
             "answer): XIDs raised until it completes may be missed",
             mon->opts.watchdog_ms);
  return 0;
}

int gpum__mon_start_threads(gpum_monitor_t *mon) {
  mon->started = true;
  gpum__wctx_t ctx = {.jobs_fn = mon->opts.jobs_fn, .jobs_user = mon->opts.jobs_user, .mon = mon};
  gpum_device_readers_opts_t ro = {.device = mon->dev_opts,
                                   .result_size = sizeof(gpum__wres_t),
                                   .request_size = sizeof(gpum__wreq_t),
                                   .read = device_read,
                                   .notify = device_notify,
                                   .stop_wait_ms = 2 * mon->opts.watchdog_ms,
                                   .open_at_start = true,
                                   .user = &ctx,
                                   .user_size = sizeof ctx};
  int rc = gpum_device_readers_start(&ro, mon->devlist, mon->ndev, &mon->readers);
  if (rc == 0 && mon->opts.events)
    rc = start_evthread(mon);
  if (rc == 0) {
    if (pthread_create(&mon->sampler, NULL, sampler_main, mon) != 0)
      rc = gpum_error(GPUM_ENOMEM, "monitor: cannot start the sampler thread");
  }
  if (rc != 0) {
    gpum__mon_stop_threads(mon);
    mon->stopped = true;
  }
  return rc;
}

/* Joins a thread by deadline; false when it is still running. */
static bool join_by(pthread_t t, uint64_t deadline_real) {
  struct timespec ts = {(time_t)(deadline_real / 1000000000ull),
                        (long)(deadline_real % 1000000000ull)};
  return pthread_timedjoin_np(t, NULL, &ts) == 0;
}

static void stop_evthread(gpum_monitor_t *mon, uint64_t deadline_real) {
  gpum__evthread_t *e = mon->evt;
  if (e == NULL)
    return;
  mon->evt = NULL;
  if (!e->started) {
    evthread_free(e);
    return;
  }
  if (!join_by(e->thread, deadline_real)) {
    pthread_mutex_lock(&e->lock);
    bool exited = e->exited;
    e->orphaned = !exited;
    pthread_mutex_unlock(&e->lock);
    if (!exited) {
      pthread_detach(e->thread);
      return;
    }
    pthread_join(e->thread, NULL);
  }
  evthread_free(e);
}

void gpum__mon_stop_threads(gpum_monitor_t *mon) {
  pthread_mutex_lock(&mon->wake_lock);
  bool sampler_running = !mon->stopping;
  mon->stopping = true;
  pthread_cond_broadcast(&mon->wake_cond);
  pthread_mutex_unlock(&mon->wake_lock);
  if (sampler_running && mon->sampler != 0)
    pthread_join(mon->sampler, NULL);
  if (mon->evt != NULL) {
    pthread_mutex_lock(&mon->evt->lock);
    mon->evt->quit = true;
    pthread_cond_signal(&mon->evt->cond);
    pthread_mutex_unlock(&mon->evt->lock);
  }
  uint64_t deadline = gpum__mon_now(CLOCK_REALTIME) + 2ull * mon->opts.watchdog_ms * 1000000ull;
  /* Each reader is given up to 2 x watchdog to leave a call; one still stuck is left behind. */
  gpum_device_readers_stop(mon->readers);
  mon->readers = NULL;
  stop_evthread(mon, deadline);
}
