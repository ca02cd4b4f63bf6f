/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The recovery policy of gpumd after a restart (see ledger.h): which reservations loaded from
 * the ledger are kept, which wait for their client to re-attach, and which end now. Pure
 * logic: process liveness comes from the caller, the clock too.
 */
#include "ledger.h"

#include <stdio.h>
#include <string.h>

static void decide(gpumd_recover_decision_t *out, gpumd_recover_action_t action,
                   gpumd_resv_state_t to, const char *reason) {
  out->action = action;
  out->to = to;
  snprintf(out->reason, sizeof(out->reason), "%s", reason);
}

void gpumd_ledger_recover_decide(const gpumd_resv_t *r, uint64_t now_ns, gpumd_pid_alive_fn alive,
                                 void *user, gpumd_recover_decision_t *out) {
  char reason[GPUMD_RESV_REASON_LEN];
  bool queued = r->state == GPUMD_RESV_QUEUED;
  gpumd_resv_state_t released = queued ? GPUMD_RESV_CANCELLED : GPUMD_RESV_RELEASED;
  if (gpumd_resv_state_final(r->state)) {
    decide(out, GPUMD_RECOVER_END, r->state, r->reason);
    return;
  }
  switch (r->lease) {
  case GPUMD_LEASE_PID:
    if (alive(user, r->lease_pid, r->lease_pid_start)) {
      snprintf(reason, sizeof(reason), "restored after a gpumd restart: lease pid %d is alive",
               (int)r->lease_pid);
      decide(out, GPUMD_RECOVER_KEEP, r->state, reason);
    } else {
      snprintf(reason, sizeof(reason), "lease pid %d exited while gpumd was down",
               (int)r->lease_pid);
      decide(out, GPUMD_RECOVER_END, released, reason);
    }
    return;
  case GPUMD_LEASE_TTL:
    if (r->expires_ns > now_ns)
      decide(out, GPUMD_RECOVER_KEEP, r->state, "restored after a gpumd restart: TTL not passed");
    else
      decide(out, GPUMD_RECOVER_END, GPUMD_RESV_EXPIRED, "TTL passed while gpumd was down");
    return;
  case GPUMD_LEASE_CONNECTION:
  default:
    if (alive(user, r->pid, r->pid_start)) {
      snprintf(reason, sizeof(reason),
               "gpumd restarted: waiting for owner pid %d to re-attach with the token",
               (int)r->pid);
      decide(out, GPUMD_RECOVER_AWAIT_ATTACH, released, reason);
    } else {
      snprintf(reason, sizeof(reason), "owner pid %d exited while gpumd was down", (int)r->pid);
      decide(out, GPUMD_RECOVER_END, released, reason);
    }
    return;
  }
}

void gpumd_ledger_recover_decide_row(const gpumd_ledger_row_t *row, uint64_t now_ns,
                                     gpumd_pid_alive_fn alive, void *user,
                                     gpumd_recover_decision_t *out) {
  if (row->gone[0] == '\0' || gpumd_resv_state_final(row->r.state)) {
    gpumd_ledger_recover_decide(&row->r, now_ns, alive, user, out);
    return;
  }
  char reason[GPUMD_RESV_REASON_LEN];
  snprintf(reason, sizeof(reason), "device %.96s gone after restart", row->gone);
  decide(out, GPUMD_RECOVER_END, GPUMD_RESV_FAILED, reason);
}
