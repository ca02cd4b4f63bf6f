/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Slurm's suspend frees GPUs (docs/slurm.md, "Suspend"): with suspend.slurm on, a job
 * step that Slurm suspends (`scontrol suspend`, PreemptMode=SUSPEND: slurmstepd sends its tasks
 * SIGTSTP, then SIGSTOP two seconds later) gives its GPU memory back through suspend.c, and gets
 * it back when Slurm resumes it (SIGCONT).
 *
 * Slurm tells gpumd nothing: gpumd sees it in the processes. A GRANTED reservation of a Slurm
 * step (its slurm_job set by the SPANK plugin) whose CUDA processes on its GPUs (the newest
 * process lists, each process's reservation by its ancestry) are all stopped ('T') for
 * GPUMD_SLURM_SETTLE_NS is suspended, held, with SLURM_WHY; once per stop (a suspend that fails
 * or is refused is not tried again before its processes have run). A SUSPENDED one whose reason
 * is Slurm's, held, whose processes all run again is resumed (reserve, restore, unlock; without
 * room it waits for room, its processes blocked in their CUDA calls); one that waits for room
 * and is stopped again is held again, so that no resume runs into a step Slurm stopped.
 *
 * The books: the steps seen stopped (since when, tried or not), kept while they stay stopped.
 * Loop thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "devices.h"
#include "engine.h"
#include "gpumd.h"
#include "pidstart_internal.h"
#include "sched.h"

/* The reason of a SUSPENDED reservation that Slurm's suspend made: also the mark by which a
 * resume is Slurm's to ask, which lives in the ledger with the reason (a restart keeps it). */
#define SLURM_MARK "suspended by Slurm"
#define SLURM_WHY SLURM_MARK " (scontrol suspend)"
#define SLURM_AGAIN SLURM_MARK " again while it waited for room"

typedef struct {
  uint64_t rid;
  uint64_t since_ns; /* all its processes seen stopped since */
  bool tried;        /* suspended (or refused) for this stop */
  bool seen;         /* met in this walk */
} watch_entry_t;

struct gpumd_slurm_watch {
  size_t n, cap;
  watch_entry_t *e;
};

void gpumd_slurm_suspend_free(gpumd_slurm_watch_t *w) {
  if (w)
    free(w->e);
  free(w);
}

static watch_entry_t *watch_get(gpumd_slurm_watch_t *w, uint64_t rid, uint64_t now) {
  for (size_t i = 0; i < w->n; i++)
    if (w->e[i].rid == rid)
      return &w->e[i];
  if (w->n == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 8;
    watch_entry_t *e = realloc(w->e, cap * sizeof *e);
    if (!e)
      return NULL;
    w->e = e;
    w->cap = cap;
  }
  w->e[w->n] = (watch_entry_t){.rid = rid, .since_ns = now};
  return &w->e[w->n++];
}

/* Counts r's processes that are stopped ('T') and those that run. GRANTED: its CUDA processes
 * in its GPUs' newest process lists, where any other state of a live process runs (it is not
 * suspended while one may be); SUSPENDED: the processes its suspend checkpointed (the lists no
 * longer show them), where only 'R' and 'S' run (one in 'D' may be on its way to a stop: it is
 * not resumed on its word). */
static void tally(gpumd_t *d, const gpumd_resv_t *r, unsigned *stopped, unsigned *running) {
  *stopped = *running = 0;
  if (r->state == GPUMD_RESV_SUSPENDED) {
    for (unsigned i = 0; i < r->nprocs; i++) {
      char st = gpumd_pid_state(r->proc_pid[i], r->proc_start[i]);
      *stopped += st == 'T';
      *running += st == 'R' || st == 'S';
    }
    return;
  }
  static gpumd_procs_t pl; /* loop thread only; too big for the stack */
  for (uint64_t m = r->device_mask; m; m &= m - 1) {
    unsigned dev = (unsigned)__builtin_ctzll(m);
    if (gpumd_procs_get(d, dev, &pl) != 0)
      continue;
    for (size_t i = 0; i < pl.count; i++) {
      char st = gpumd_pid_state((int32_t)pl.pid[i], 0);
      if (st == 0 || gpumd_engine_resv_of_pid(d, dev, (int32_t)pl.pid[i]) != r)
        continue;
      *stopped += st == 'T';
      *running += st != 'T';
    }
  }
}

static void granted(gpumd_t *d, gpumd_slurm_watch_t *w, const gpumd_resv_t *r, uint64_t now) {
  unsigned stopped, running;
  tally(d, r, &stopped, &running);
  if (stopped == 0 || running > 0)
    return; /* runs (or holds no memory): not watched, a later stop starts afresh */
  watch_entry_t *e = watch_get(w, r->id, now);
  if (!e)
    return;
  e->seen = true;
  if (e->tried || now - e->since_ns < GPUMD_SLURM_SETTLE_NS)
    return;
  e->tried = true;
  uint64_t rid = r->id;
  char id[GPUMD_RESV_ID_BUFSZ];
  gpumd_resv_id_format(rid, id, sizeof id);
  if (gpumd_suspend_begin_stopped(d, rid, SLURM_WHY) == 0)
    return;
  /* Refused (managed memory, the host memory bound, no driver): it keeps its GPU memory while
   * Slurm keeps it stopped; the audit row says why. */
  char why[GPUMD_RESV_REASON_LEN];
  snprintf(why, sizeof why, "stopped by Slurm, keeps its GPU memory: %.200s", gpum_last_error());
  gpum_log(GPUM_LOG_WARN, "gpumd", "%s: %s", id, why);
  const gpumd_resv_t *now_r = gpumd_sched_find(d->sched, rid);
  if (now_r && now_r->state == GPUMD_RESV_GRANTED && !now_r->moving)
    gpumd_engine_note(d, now_r, NULL, why);
}

static void suspended(gpumd_t *d, const gpumd_resv_t *r) {
  unsigned stopped, running;
  tally(d, r, &stopped, &running);
  uint64_t rid = r->id;
  char id[GPUMD_RESV_ID_BUFSZ];
  gpumd_resv_id_format(rid, id, sizeof id);
  if (r->suspend_hold && running > 0 && stopped == 0 &&
      strncmp(r->reason, SLURM_MARK, strlen(SLURM_MARK)) == 0) {
    gpum_log(GPUM_LOG_INFO, "gpumd", "%s: Slurm resumed its step: resuming it", id);
    if (gpumd_resume_begin(d, NULL, rid) != 0)
      gpum_log(GPUM_LOG_WARN, "gpumd", "%s: not resumed for Slurm: %s", id, gpum_last_error());
  } else if (!r->suspend_hold && stopped > 0 && running == 0) {
    gpumd_suspend_hold(d, rid, SLURM_AGAIN);
  }
}

void gpumd_slurm_suspend_tick(gpumd_t *d, gpumd_slurm_watch_t **wp, uint64_t now) {
  gpumd_slurm_watch_t *w = *wp;
  if (!gpum_config_get_bool(d->cfg, "suspend.slurm") ||
      (gpumd_sched_slurm_granted(d->sched) == 0 && gpumd_sched_suspended(d->sched, NULL) == 0)) {
    if (w)
      w->n = 0;
    return;
  }
  if (!w && !(w = *wp = calloc(1, sizeof *w)))
    return;
  for (size_t i = 0; i < w->n; i++)
    w->e[i].seen = false;
  /* The steps first, then each by its id: a suspend or resume reads the devices, which may
   * change the table. */
  size_t count = gpumd_sched_count(d->sched), n = 0;
  uint64_t *ids = malloc((count ? count : 1) * sizeof *ids);
  if (!ids)
    return;
  for (size_t i = 0; i < count; i++) {
    const gpumd_resv_t *r = gpumd_sched_at(d->sched, i);
    if (r->slurm_job[0] && !r->moving &&
        (r->state == GPUMD_RESV_GRANTED || r->state == GPUMD_RESV_SUSPENDED))
      ids[n++] = r->id;
  }
  for (size_t i = 0; i < n; i++) {
    const gpumd_resv_t *r = gpumd_sched_find(d->sched, ids[i]);
    if (!r || r->moving)
      continue;
    if (r->state == GPUMD_RESV_GRANTED)
      granted(d, w, r, now);
    else if (r->state == GPUMD_RESV_SUSPENDED)
      suspended(d, r);
  }
  free(ids);
  size_t k = 0; /* the steps that run again, or ended, leave the books */
  for (size_t i = 0; i < w->n; i++)
    if (w->e[i].seen)
      w->e[k++] = w->e[i];
  w->n = k;
}
