/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Admission reads: gpumd grants and grows reservations on the devices as they are now, not as
 * the last sample saw them. A process outside gpum may have taken memory since the monitor's
 * last round (up to monitor.interval ago); a grant decided on that round would let committed
 * memory pass the device's capacity. So before it submits or resizes a request, and at the
 * end of a turn in which a scheduling pass would have granted on a view read earlier (a
 * release, a device's news), gpumd reads every device afresh through the process-list readers
 * (its memory and the processes using it, all devices at once, for at most
 * admission.read_timeout: one thread reads them one after the other while the driver answers
 * fast, and a device it has not begun when it is slow is read on its own thread), hands the
 * scheduler the new views marked fresh, and runs one pass: the scheduler (require_fresh) grants
 * only on fresh views. A device that did not answer in time takes no grant this turn; one stuck in
 * a call is not waited for again. When the turn ends every view is stale again.
 *
 * Overcommit: what admission cannot prevent, a process outside gpum that grows after the grant,
 * is looked for at the end of every turn: a device whose committed memory passes its capacity
 * raises an "overcommitted" alert (WARNING) naming the processes outside reservations and what
 * they use, until it no longer does; the scheduler then gives the device HIGH pressure at least,
 * which its jobs are told (docs/operations.md, "Overcommitted devices").
 *
 * A release (or a client's disconnect) reads only when what it frees may let a queued request
 * in (gpumd_sched_freed_may_grant): with a queue settled by the last pass, that is when a device
 * it frees could then hold some queued request's bytes were nothing used there outside
 * reservations, or when the queue's head leaves. What the fresh read protects against is a
 * grant on a device where memory was taken outside gpum since the last read (overcommit); a
 * release that cannot lead to a grant on the devices it frees needs no protection. A read
 * could also find memory outside reservations gone on some other device and let a request in
 * there: that grant is not the release's doing, and it comes with the next read (the next
 * monitor interval's process lists, or the next reserve's read), in queue order, as it would
 * on a node where nothing was released.
 *
 * One read serves a whole turn of the loop: what was received by the time it is made is
 * decided on it, so an allocation that ended before its owner (or anyone it told) sent a
 * request to gpumd is counted. The read costs one round of the driver's calls per device per
 * turn that admits something, whatever number of requests the turn holds.
 */
#include <stdio.h>

#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/size.h>

#include "os_internal.h"
#include "device/device_internal.h"
#include "devices.h"
#include "engine.h"
#include "gpumd.h"
#include "obs.h"
#include "sched.h"

void gpumd_admission_read(gpumd_t *d) {
  if (d->fresh_done || !d->sched)
    return;
  d->fresh_done = true;
  int rcs[GPUMD_MAX_DEVICES];
  if (gpumd_procs_read_all(d, d->admission_timeout_ms, rcs) != 0)
    return; /* no readers (stopping): nothing is fresh, nothing is granted */
  gpumd_sched_device_t views[GPUMD_MAX_DEVICES];
  size_t n = 0;
  gpumd_engine_pids_begin(d); /* one index of the reservations by pid for all the devices */
  for (unsigned i = 0; i < d->device_count; i++) {
    unsigned index = d->devices[i].index;
    if (rcs[i] == 0) {
      d->fresh_mask |= 1ull << index;
      d->unanswered_mask &= ~(1ull << index);
    } else {
      d->unanswered_mask |= 1ull << index;
      gpum_log(rcs[i] == GPUM_ETIMEDOUT ? GPUM_LOG_INFO : GPUM_LOG_WARN, "gpumd",
               "GPU %u: no fresh read for admission (%s): nothing is granted on it now", index,
               rcs[i] == GPUM_ETIMEDOUT ? "did not answer in time" : gpum_strerror(rcs[i]));
    }
    if (gpumd_engine_device_view(d, index, NULL, rcs[i] == 0, &views[n]))
      n++;
  }
  gpumd_engine_pids_end(d);
  gpumd_sched_update_devices(d->sched, NULL, views, n, gpum__os_real_ns()); /* gpumd's own news */
}

/* "pid 4242 (uid 1000: python leak.py) 20.00 GiB" for one process outside reservations. */
static void describe_proc(unsigned pid, uint64_t bytes, char *buf, size_t len) {
  char cmd[64], sz[GPUM_SIZE_BUFSZ];
  unsigned uid = 0;
  bool have_uid = gpum__proc_uid(pid, &uid) == 0;
  gpum__proc_identity(pid, NULL, 0, cmd, sizeof cmd);
  gpum_size_format(bytes, sz, sizeof sz);
  if (have_uid)
    snprintf(buf, len, "pid %u (uid %u%s%s) %s", pid, uid, cmd[0] ? ": " : "", cmd, sz);
  else
    snprintf(buf, len, "pid %u %s", pid, sz);
}

char *gpumd_admission_overcommit_text(const gpumd_sched_device_stats_t *st, char *buf, size_t len) {
  char c[GPUM_SIZE_BUFSZ], o[GPUM_SIZE_BUFSZ], cap[GPUM_SIZE_BUFSZ];
  snprintf(buf, len, "committed %s is %s over its capacity of %s",
           gpum_size_format(st->committed, c, sizeof c),
           gpum_size_format(st->overcommit, o, sizeof o),
           gpum_size_format(st->capacity, cap, sizeof cap));
  return buf;
}

/* Feeds the "overcommitted" condition of device index to the alert engine. */
static void check_overcommit(gpumd_t *d, unsigned index, uint64_t now_ns) {
  gpumd_sched_device_stats_t st;
  gpum_alert_engine_t *e = gpumd_obs_alerts(d);
  if (!e || gpumd_sched_device_stats(d->sched, index, &st) != 0)
    return;
  gpumd_device_t *dev = gpumd_device_find(d, index);
  if (!dev || st.overcommit == dev->overcommit)
    return; /* nothing new to say */
  bool over = st.overcommit > 0, was = dev->overcommit > 0;
  dev->overcommit = st.overcommit;
  char msg[GPUM_ALERT_MSG_LEN] = "";
  if (over) {
    char what[128];
    size_t off = (size_t)snprintf(msg, sizeof msg, "GPU %u: %s; outside reservations:", index,
                                  gpumd_admission_overcommit_text(&st, what, sizeof what));
    static gpumd_procs_t pl; /* loop thread only; too big for the stack */
    unsigned shown = 0;
    gpumd_engine_pids_begin(d);
    if (gpumd_procs_get(d, index, &pl) == 0)
      for (size_t i = 0; i < pl.count && off < sizeof msg; i++) {
        if (gpumd_engine_resv_of_pid(d, index, (int32_t)pl.pid[i]))
          continue;
        char p[128];
        describe_proc(pl.pid[i], pl.memory[i], p, sizeof p);
        off += (size_t)snprintf(msg + off, sizeof msg - off, "%s %s", shown++ ? "," : "", p);
      }
    gpumd_engine_pids_end(d);
    if (shown == 0 && off < sizeof msg)
      snprintf(msg + off, sizeof msg - off, " none listed (memory the driver does not attribute)");
  }
  if (over && !was)
    gpum_log(GPUM_LOG_WARN, "gpumd", "%s", msg);
  else if (!over)
    gpum_log(GPUM_LOG_INFO, "gpumd", "GPU %u is no longer overcommitted", index);
  gpum_alert_engine_feed_condition(e, index, "overcommitted", over, GPUM_ALERT_WARNING, msg,
                                   now_ns);
}

void gpumd_admission_end_turn(gpumd_t *d) {
  if (!d->sched)
    return;
  uint64_t now = gpum__os_real_ns();
  for (unsigned i = 0; i < d->device_count; i++)
    check_overcommit(d, d->devices[i].index, now);
  if (gpumd_sched_wants_fresh(d->sched) != 0)
    gpumd_admission_read(d);         /* grants what waited for it, in this turn's commit */
  gpumd_sched_wants_fresh(d->sched); /* what the read itself left: the next turn's business */
  gpumd_sched_set_stale(d->sched);
  d->fresh_mask = 0;
  d->fresh_done = false;
}

void gpumd_admission_read_for_ends(gpumd_t *d, const gpumd_sched_freed_t *f) {
  if (d->sched && gpumd_sched_freed_may_grant(d->sched, f))
    gpumd_admission_read(d);
}

void gpumd_admission_read_for_end(gpumd_t *d, uint64_t id) {
  if (!d->sched || gpumd_sched_queue_length(d->sched) == 0)
    return;
  gpumd_sched_freed_t f;
  gpumd_sched_freed_init(&f);
  gpumd_sched_freed_add(d->sched, &f, id);
  gpumd_admission_read_for_ends(d, &f);
}
