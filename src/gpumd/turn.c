/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The end of a loop turn, in one place: the scheduler's last word on the turn (admission's
 * reads, "queued" events), then the ledger's commit (or the hand-over to its writer thread),
 * then the output each channel held back for it (the event streams, the HTTP responses, the
 * socket connections), which goes only once what it tells is durable (docs/architecture.md).
 */
#include <event2/event.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "engine.h"
#include "gpumd.h"
#include "ledger.h"
#include "net.h"
#include "obs.h"

/* A ledger failure: nothing of this turn (or of turns waiting for the writer) may reach a
 * client. Stop without writing; the restart recovers from the last committed state. */
static void commit_failed(gpumd_t *d) {
  gpum_log(GPUM_LOG_ERROR, "gpumd", "ledger commit failed: %s; stopping", gpum_last_error());
  d->commit_failed = true;
  d->exit_code = 1;
  d->stop = true;
}

void gpumd_end_turn(gpumd_t *d) {
  if (d->commit_failed)
    return; /* what is staged or held may rest on the failed writes: it never goes out */
  gpumd_fences_end_turn(d);    /* the regions of the reservations the turn ended */
  gpumd_admission_end_turn(d); /* grants that waited for a fresh read go in this commit */
  gpumd_engine_turn_events(d);
  int rc = d->ledger ? gpumd_ledger_poll(d->ledger) : 0;
  if (rc < 0) {
    commit_failed(d);
    return;
  }
  bool released = rc == 1;
  if (d->ledger && gpumd_ledger_writing(d->ledger))
    return; /* this turn waits for the writer: staged, it goes with the next batch */
  /* The socket replies of the batch committed: the writer wrote them as it finished (what a
   * socket did not take goes now). This turn's are sealed before the next batch is handed
   * over, so that the writer writes them too as soon as it is committed. */
  if (released)
    gpumd_conns_release(d);
  gpumd_conns_seal(d, d->ledger && !d->ledger_failed && gpumd_ledger_will_hand_over(d->ledger));
  rc = gpumd_engine_commit(d);
  if (rc < 0) {
    commit_failed(d);
    return;
  }
  /* The events and HTTP responses of the last batch go out while the writer works on this
   * one (the writes to the clients overlap the commit). */
  if (released) {
    gpumd_sse_release(d);
    gpumd_http_release(d);
  }
  if (rc == 1) {
    gpumd_sse_seal(d);
    gpumd_http_seal(d);
  } else { /* committed already (or nothing to commit): all goes now */
    gpumd_conns_release(d);
    gpumd_sse_flush(d);
    gpumd_http_flush(d);
  }
  if (d->dirty)
    event_active(d->kick, 0, 0);
}

void gpumd_finish_turns(gpumd_t *d) {
  do {
    if (d->ledger)
      gpumd_ledger_wait(d->ledger);
    gpumd_end_turn(d);
  } while (!d->commit_failed && d->ledger && gpumd_ledger_writing(d->ledger));
}
