/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Admission reads: gpumd grants and grows reservations on the devices as they are now, not as
 * the last sample saw them. A process outside gpum may have taken memory since the monitor's
 * last round (up to monitor.interval ago); a grant decided on that round would let committed
 * memory pass the device's capacity. So before it submits or resizes a request, and at the
 * end of a turn in which a scheduling pass would have granted on a view read earlier (a
 * release, a device's news), gpumd reads every device afresh through the process-list readers
 * (its memory and the processes using it, all devices at once, each on its own thread, for at
 * most admission.read_timeout), hands the scheduler the new views marked fresh, and runs one
 * pass: the scheduler (require_fresh) grants only on fresh views. A device that did not answer
 * in time takes no grant this turn; one stuck in a call is not waited for again. When the turn
 * ends every view is stale again.
 *
 * One read serves a whole turn of the loop: what was received by the time it is made is
 * decided on it, so an allocation that ended before its owner (or anyone it told) sent a
 * request to gpumd is counted. The read costs one round of the driver's calls per device per
 * turn that admits something, whatever number of requests the turn holds.
 */
#include <gpum/error.h>
#include <gpum/log.h>

#include "gpumd_internal.h"

void gpumd_admission_read(gpumd_t *d) {
  if (d->fresh_done || !d->sched)
    return;
  d->fresh_done = true;
  int rcs[GPUMD_MAX_DEVICES];
  if (gpumd_procs_read_all(d, d->admission_timeout_ms, rcs) != 0)
    return; /* no readers (stopping): nothing is fresh, nothing is granted */
  gpumd_sched_device_t views[GPUMD_MAX_DEVICES];
  size_t n = 0;
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
    if (gpumd_device_view(d, index, NULL, rcs[i] == 0, &views[n]))
      n++;
  }
  gpumd_sched_update_devices(d->sched, NULL, views, n, gpumd_now_ns()); /* gpumd's own news */
}

void gpumd_admission_end_turn(gpumd_t *d) {
  if (!d->sched)
    return;
  if (gpumd_sched_wants_fresh(d->sched) != 0)
    gpumd_admission_read(d);         /* grants what waited for it, in this turn's commit */
  gpumd_sched_wants_fresh(d->sched); /* what the read itself left: the next turn's business */
  gpumd_sched_set_stale(d->sched);
  d->fresh_mask = 0;
  d->fresh_done = false;
}

void gpumd_admission_read_if_queued(gpumd_t *d) {
  if (d->sched && gpumd_sched_queue_length(d->sched) > 0)
    gpumd_admission_read(d);
}
