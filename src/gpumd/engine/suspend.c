/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Suspend and resume (docs/suspend.md): gpumd moves a preemptible job's GPU memory to host
 * memory with the CUDA driver's process checkpoint (libgpum's gpum/checkpoint.h) and brings it
 * back, on a worker thread of its own, since the driver takes seconds per GiB.
 *
 * The loop decides and keeps the books; the worker only calls the driver. A suspend: the job's
 * processes are found (the GPU process lists, each process's reservation by its ancestry, as
 * /metrics counts them), refused up front when they cannot be checkpointed, then handed to the
 * worker, which locks each (bounded by suspend.lock_timeout) and checkpoints each; only then
 * does the reservation become SUSPENDED and its memory free for others. A failure undoes what was
 * done (restore, unlock): the job runs on, GRANTED, the reason says why. A resume is placed first
 * (the scheduler counts its bytes on the GPUs it gets: "reserve, then restore"), then the worker
 * restores each process (onto other GPUs of the same kind by UUID pairs when its own have no
 * room) and unlocks each; a restore that fails checkpoints back what it restored and the
 * reservation is SUSPENDED again, held, with the reason: never stuck LOCKED.
 *
 * While a suspend or resume is under way the reservation's row holds its processes (the ledger's
 * suspend column), so that a gpumd that dies meanwhile finishes the job's way back to running at
 * its restart (recover_task). The policy (gpumd suspends for a waiting request of higher
 * priority, preempt.*) and the automatic resume run from one timer, at once after a change.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include <gpum/checkpoint.h>
#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/size.h>

#include "devices.h"
#include "engine.h"
#include "gpumd.h"
#include "os_internal.h"
#include "pidstart_internal.h"
#include "sched.h"

enum { TASK_SUSPEND, TASK_RESUME, TASK_RECOVER };

typedef struct task {
  struct task *next;
  int kind;
  uint64_t rid;
  unsigned n;
  int32_t pid[GPUMD_RESV_MAX_PROCS];
  uint64_t start[GPUMD_RESV_MAX_PROCS];
  unsigned lock_ms;
  size_t npairs; /* resume, recover: UUID pairs (0: onto the GPUs it came from) */
  char old_uuid[GPUMD_SCHED_MAX_DEVICES][GPUM_UUID_LEN];
  char new_uuid[GPUMD_SCHED_MAX_DEVICES][GPUM_UUID_LEN];
  char why[GPUMD_RESV_REASON_LEN]; /* suspend: the reason it becomes SUSPENDED with */
  bool hold;
  bool stopped; /* suspend: of a job its scheduler stopped (Slurm), not asked to be preemptible */
  unsigned thawed; /* the worker's: stopped processes it let run for the task, then stopped */
  /* The worker's answer. */
  int rc;
  char detail[GPUMD_RESV_REASON_LEN];
} task_t;

struct gpumd_suspend {
  pthread_t thread;
  bool running;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  task_t *todo, *done; /* lists (todo in order: appended at the tail) */
  bool stop;
  int efd; /* the worker's answers wake the loop */
  struct event *answered, *timer;
  gpum_ckpt *ck; /* opened at the first suspend (or recovery) */
  int ck_rc;
  char ck_why[256];
  bool ck_tried;
  gpumd_slurm_watch_t *slurm; /* slurm_suspend.c's books */
  size_t in_flight;           /* tasks not yet answered */
  uint64_t mem_total;         /* the node's memory (MemTotal), bytes */
};

/* ---- the worker ---------------------------------------------------------------------------- */

static bool alive(const task_t *t, unsigned i) {
  return gpumd_pid_is_alive(t->pid[i], t->start[i]);
}

static void fail(task_t *t, int rc, const char *what) {
  t->rc = rc;
  snprintf(t->detail, sizeof t->detail, "%s: %s", what, gpum_last_error());
}

/* Lock every process, then checkpoint every one; on a failure, put back what was done. */
static void run_suspend(gpum_ckpt *ck, task_t *t) {
  unsigned locked = 0, saved = 0;
  int rc = 0;
  for (; locked < t->n && rc == 0; locked++)
    if ((rc = gpum_ckpt_lock(ck, t->pid[locked], t->lock_ms)) != 0)
      fail(t, rc, "lock");
  if (rc != 0)
    locked--; /* the one that failed is not locked */
  for (; rc == 0 && saved < t->n; saved++)
    if ((rc = gpum_ckpt_checkpoint(ck, t->pid[saved])) != 0)
      fail(t, rc, "checkpoint");
  if (rc == 0)
    return;
  if (saved > 0 && rc != 0 && saved <= t->n)
    saved--;                           /* the one that failed is not checkpointed */
  for (unsigned i = 0; i < saved; i++) /* its GPU memory is still reserved: room to restore */
    if (gpum_ckpt_restore(ck, t->pid[i], NULL, NULL, 0) != 0)
      gpum_log(GPUM_LOG_ERROR, "gpumd", "r-%llu: undoing a failed suspend, pid %d: %s",
               (unsigned long long)t->rid, (int)t->pid[i], gpum_last_error());
  for (unsigned i = 0; i < locked; i++)
    if (gpum_ckpt_unlock(ck, t->pid[i]) != 0)
      gpum_log(GPUM_LOG_ERROR, "gpumd", "r-%llu: undoing a failed suspend, pid %d: %s",
               (unsigned long long)t->rid, (int)t->pid[i], gpum_last_error());
}

/* Restore every process that is still alive, then unlock them; a restore that fails
 * checkpoints back the ones restored, so the job is whole in host memory again. */
static void run_resume(gpum_ckpt *ck, task_t *t) {
  const char *olds[GPUMD_SCHED_MAX_DEVICES], *news[GPUMD_SCHED_MAX_DEVICES];
  for (size_t i = 0; i < t->npairs; i++) {
    olds[i] = t->old_uuid[i];
    news[i] = t->new_uuid[i];
  }
  unsigned done = 0;
  int rc = 0;
  for (; done < t->n && rc == 0; done++) {
    if (!alive(t, done))
      continue;
    gpum_ckpt_state_t st;
    if (t->kind == TASK_RECOVER && gpum_ckpt_state(ck, t->pid[done], &st) == 0 &&
        st != GPUM_CKPT_CHECKPOINTED)
      continue; /* a restart found it locked or running: nothing to restore */
    if ((rc = gpum_ckpt_restore(ck, t->pid[done], olds, news, t->npairs)) != 0)
      fail(t, rc, "restore");
  }
  if (rc != 0) {
    done--;
    for (unsigned i = 0; i < done; i++)
      if (alive(t, i) && gpum_ckpt_checkpoint(ck, t->pid[i]) != 0)
        gpum_log(GPUM_LOG_ERROR, "gpumd", "r-%llu: undoing a failed resume, pid %d: %s",
                 (unsigned long long)t->rid, (int)t->pid[i], gpum_last_error());
    return; /* they stay locked and checkpointed: SUSPENDED again */
  }
  for (unsigned i = 0; i < t->n; i++) {
    gpum_ckpt_state_t st;
    if (!alive(t, i) || gpum_ckpt_state(ck, t->pid[i], &st) != 0 || st != GPUM_CKPT_LOCKED)
      continue;
    if ((rc = gpum_ckpt_unlock(ck, t->pid[i])) != 0 && t->rc == 0)
      fail(t, rc, "unlock");
  }
}

/*
 * A process stopped by a signal (state 'T': Slurm's suspend, a shell's Ctrl-Z) cannot answer
 * the driver, whose work is done by a thread inside it: it is let run (SIGCONT) for the task
 * and stopped again after it (SIGSTOP), whatever the task's outcome. Its CUDA calls wait at the
 * lock meanwhile; its other threads run for that moment.
 */
static void thaw(task_t *t, bool *thawed) {
  t->thawed = 0;
  for (unsigned i = 0; i < t->n; i++) {
    thawed[i] = gpumd_pid_state(t->pid[i], t->start[i]) == 'T' && kill(t->pid[i], SIGCONT) == 0;
    t->thawed += thawed[i];
  }
}

static void refreeze(const task_t *t, const bool *thawed) {
  for (unsigned i = 0; i < t->n; i++)
    if (thawed[i] && gpumd_pid_state(t->pid[i], t->start[i]) != 0)
      kill(t->pid[i], SIGSTOP);
  /* Stopped before the answer: the loop, which reads the processes' states (slurm_suspend.c),
   * must not take the moment before the signal lands for Slurm's resume. */
  for (unsigned i = 0; i < t->n; i++)
    for (int k = 0; thawed[i] && k < 2000; k++) {
      char st = gpumd_pid_state(t->pid[i], t->start[i]);
      if (st == 0 || st == 'T')
        break;
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
}

static void *worker(void *arg) {
  struct gpumd_suspend *s = arg;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (!s->todo && !s->stop)
      pthread_cond_wait(&s->cond, &s->lock);
    if (!s->todo)
      break;
    task_t *t = s->todo;
    s->todo = t->next;
    pthread_mutex_unlock(&s->lock);
    gpum_error_clear();
    t->rc = 0;
    bool thawed[GPUMD_RESV_MAX_PROCS];
    thaw(t, thawed);
    if (t->kind == TASK_SUSPEND)
      run_suspend(s->ck, t);
    else
      run_resume(s->ck, t);
    refreeze(t, thawed);
    pthread_mutex_lock(&s->lock);
    t->next = s->done;
    s->done = t;
    uint64_t one = 1;
    ssize_t w = write(s->efd, &one, sizeof one);
    (void)w;
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

/* ---- the loop's side -------------------------------------------------------------------- */

static void kick(struct gpumd_suspend *s) {
  if (s->timer)
    event_active(s->timer, 0, 0);
}

static void submit(gpumd_t *d, task_t *t) {
  struct gpumd_suspend *s = d->susp;
  t->next = NULL;
  pthread_mutex_lock(&s->lock);
  task_t **tail = &s->todo;
  while (*tail)
    tail = &(*tail)->next;
  *tail = t;
  pthread_cond_signal(&s->cond);
  pthread_mutex_unlock(&s->lock);
  s->in_flight++;
}

/* The checkpoint handle, opened once; GPUM_ENOTSUP with the driver's story when it cannot be. */
static int driver(gpumd_t *d) {
  struct gpumd_suspend *s = d->susp;
  if (!s->ck_tried) {
    s->ck_tried = true;
    s->ck_rc = gpum_ckpt_open(NULL, &s->ck);
    snprintf(s->ck_why, sizeof s->ck_why, "%s", s->ck_rc ? gpum_last_error() : "");
    if (s->ck_rc == 0 && pthread_create(&s->thread, NULL, worker, s) == 0)
      s->running = true;
    else if (s->ck_rc == 0)
      s->ck_rc = gpum_error(GPUM_ENOMEM, "cannot start the suspend worker thread");
    if (s->ck_rc != 0)
      gpum_log(GPUM_LOG_WARN, "gpumd", "suspend is not available: %s", s->ck_why);
  }
  if (s->ck_rc != 0)
    return gpum_error(GPUM_ENOTSUP, "this node's CUDA driver cannot suspend jobs: %s", s->ck_why);
  return 0;
}

static uint64_t host_in_use(gpumd_t *d) {
  uint64_t sum = 0;
  size_t n = gpumd_sched_count(d->sched);
  for (size_t i = 0; i < n; i++) {
    const gpumd_resv_t *r = gpumd_sched_at(d->sched, i);
    if (r->state == GPUMD_RESV_SUSPENDED || r->moving == GPUMD_MOVING_SUSPENDING)
      sum += r->host_bytes;
  }
  return sum;
}

/* The job's CUDA processes on its GPUs (read afresh) and the device memory they hold. */
static int job_processes(gpumd_t *d, const gpumd_resv_t *r, task_t *t, uint64_t *bytes) {
  int rcs[GPUMD_MAX_DEVICES];
  gpumd_procs_read_all(d, d->admission_timeout_ms, rcs);
  static gpumd_procs_t pl; /* loop thread only; too big for the stack */
  char id[GPUMD_RESV_ID_BUFSZ];
  gpumd_resv_id_format(r->id, id, sizeof id);
  *bytes = 0;
  t->n = 0;
  for (uint64_t m = r->device_mask; m; m &= m - 1) {
    unsigned dev = (unsigned)__builtin_ctzll(m);
    if (gpumd_procs_get(d, dev, &pl) != 0)
      return gpum_error(GPUM_EBUSY, "GPU %u's processes cannot be read now: %s is not suspended",
                        dev, id);
    for (size_t i = 0; i < pl.count; i++) {
      int32_t pid = (int32_t)pl.pid[i];
      if (gpumd_engine_resv_of_pid(d, dev, pid) != r)
        continue;
      *bytes += pl.memory[i];
      bool seen = false;
      for (unsigned k = 0; k < t->n; k++)
        seen |= t->pid[k] == pid;
      if (seen)
        continue;
      if (t->n == GPUMD_RESV_MAX_PROCS)
        return gpum_error(GPUM_ENOTSUP,
                          "%s has more than %d CUDA processes: gpumd suspends at "
                          "most %d per job",
                          id, GPUMD_RESV_MAX_PROCS, GPUMD_RESV_MAX_PROCS);
      t->pid[t->n] = pid;
      t->start[t->n++] = gpumd_pid_start_or_zero(pid);
    }
  }
  if (t->n == 0)
    return gpum_error(GPUM_ENOTSUP,
                      "no process of %s holds GPU memory: nothing to suspend "
                      "(release it instead)",
                      id);
  return 0;
}

/* Managed (UVM) or IPC memory, which the driver's checkpoint does not take: refused up front
 * when the job's fence (the enforcement shim) saw it. */
static int memory_kinds_ok(gpumd_t *d, const gpumd_resv_t *r) {
  gpum_fence *f = gpumd_fences_open(d, r);
  if (!f)
    return 0; /* not fenced: nothing tells; the driver's checkpoint is the judge */
  int mpid = 0, ipid = 0;
  unsigned used = gpum_fence_used_flags(f, &mpid, &ipid);
  gpum_fence_close(f);
  char id[GPUMD_RESV_ID_BUFSZ];
  gpumd_resv_id_format(r->id, id, sizeof id);
  if (used & GPUM_FENCE_USED_MANAGED)
    return gpum_error(GPUM_ENOTSUP,
                      "%s cannot be suspended: pid %d allocated managed (UVM) "
                      "memory, which the CUDA driver does not checkpoint",
                      id, mpid);
  if (used & GPUM_FENCE_USED_IPC)
    return gpum_error(GPUM_ENOTSUP,
                      "%s cannot be suspended: pid %d shared GPU memory between "
                      "processes (IPC), which the CUDA driver does not checkpoint",
                      id, ipid);
  return 0;
}

/* Stages r's row with a GRANTED -> GRANTED (or SUSPENDED -> SUSPENDED) audit row saying why. */
static void note(gpumd_t *d, uint64_t rid, const gpumd_actor_t *a, const char *why) {
  const gpumd_resv_t *r = gpumd_sched_find(d->sched, rid);
  if (r)
    gpumd_engine_note(d, r, a, why);
}

static int begin(gpumd_t *d, const gpumd_actor_t *a, uint64_t rid, bool hold, const char *why,
                 bool stopped) {
  const gpumd_resv_t *r = gpumd_sched_find(d->sched, rid);
  char id[GPUMD_RESV_ID_BUFSZ];
  gpumd_resv_id_format(rid, id, sizeof id);
  if (!r)
    return gpum_error(GPUM_ENOENT, "no live reservation %s", id);
  if (r->moving)
    return gpum_error(GPUM_ESTATE, "%s is %s already", id,
                      r->moving == GPUMD_MOVING_SUSPENDING ? "being suspended" : "being resumed");
  if (r->state != GPUMD_RESV_GRANTED)
    return gpum_error(GPUM_ESTATE, "%s is %s: only a granted reservation can be suspended", id,
                      gpumd_resv_state_name(r->state));
  if (!r->preemptible && !stopped)
    return gpum_error(GPUM_ENOTSUP,
                      "%s is not preemptible: its job did not agree to be "
                      "suspended (gpum run --preemptible, \"preemptible\": true)",
                      id);
  int rc = memory_kinds_ok(d, r);
  if (rc == 0)
    rc = driver(d);
  if (rc != 0)
    return rc;
  task_t *t = calloc(1, sizeof *t);
  if (!t)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  uint64_t bytes = 0;
  if ((rc = job_processes(d, r, t, &bytes)) != 0) {
    free(t);
    return rc;
  }
  r = gpumd_sched_find(d->sched, rid); /* the read may have changed the table */
  if (!r || r->state != GPUMD_RESV_GRANTED) {
    free(t);
    return gpum_error(GPUM_ENOENT, "%s ended meanwhile", id);
  }
  double share = gpum_config_get_double(d->cfg, "suspend.host_memory");
  uint64_t bound = (uint64_t)(share * (double)d->susp->mem_total), used = host_in_use(d);
  if (used + bytes > bound) {
    char a1[GPUM_SIZE_BUFSZ], a2[GPUM_SIZE_BUFSZ], a3[GPUM_SIZE_BUFSZ];
    free(t);
    return gpum_error(GPUM_EBUSY,
                      "%s would take %s of host memory; suspended jobs take %s of the node's "
                      "bound of %s (suspend.host_memory %.2f of %s)",
                      id, gpum_size_format(bytes, a1, sizeof a1),
                      gpum_size_format(used, a2, sizeof a2), gpum_size_format(bound, a3, sizeof a3),
                      share, gpum_size_format(d->susp->mem_total, a1, sizeof a1));
  }
  t->kind = TASK_SUSPEND;
  t->rid = rid;
  t->hold = hold;
  t->stopped = stopped;
  t->lock_ms = (unsigned)gpum_config_get_duration(d->cfg, "suspend.lock_timeout");
  snprintf(t->why, sizeof t->why, "%s", why);
  gpumd_sched_set_suspend_facts(d->sched, rid, hold, bytes, r->device_mask, t->pid, t->start, t->n);
  char msg[GPUMD_RESV_REASON_LEN], sz[GPUM_SIZE_BUFSZ];
  snprintf(msg, sizeof msg, "suspending %u process%s (%s of GPU memory): %.150s", t->n,
           t->n == 1 ? "" : "es", gpum_size_format(bytes, sz, sizeof sz), why);
  gpumd_sched_set_moving(d->sched, rid, GPUMD_MOVING_SUSPENDING, msg);
  note(d, rid, a, msg);
  gpum_log(GPUM_LOG_INFO, "gpumd", "%s: %s", id, msg);
  submit(d, t);
  return 0;
}

int gpumd_suspend_begin(gpumd_t *d, const gpumd_actor_t *a, uint64_t rid, bool hold,
                        const char *why) {
  return begin(d, a, rid, hold, why, false);
}

int gpumd_suspend_begin_stopped(gpumd_t *d, uint64_t rid, const char *why) {
  return begin(d, NULL, rid, true, why, true);
}

int gpumd_suspend_hold(gpumd_t *d, uint64_t rid, const char *why) {
  const gpumd_resv_t *r = gpumd_sched_find(d->sched, rid);
  char id[GPUMD_RESV_ID_BUFSZ];
  gpumd_resv_id_format(rid, id, sizeof id);
  if (!r || r->state != GPUMD_RESV_SUSPENDED || r->moving)
    return gpum_error(GPUM_ESTATE, "%s is not suspended (or is being moved)", id);
  gpumd_sched_set_suspend_facts(d->sched, rid, true, r->host_bytes, r->ckpt_mask, r->proc_pid,
                                r->proc_start, r->nprocs);
  gpumd_sched_set_moving(d->sched, rid, GPUMD_MOVING_NONE, why);
  note(d, rid, NULL, why);
  gpum_log(GPUM_LOG_INFO, "gpumd", "%s: %s", id, why);
  return 0;
}

/* The UUID pairs of a resume from the GPUs the job was checkpointed from onto mask, in index
 * order both (the job's CUDA_VISIBLE_DEVICES order maps the same way). */
static void pairs(gpumd_t *d, uint64_t from, uint64_t to, task_t *t) {
  t->npairs = 0;
  if (from == to)
    return; /* onto the GPUs it came from: the driver needs no pairs */
  while (from && to && t->npairs < GPUMD_SCHED_MAX_DEVICES) {
    unsigned a = (unsigned)__builtin_ctzll(from), b = (unsigned)__builtin_ctzll(to);
    gpumd_sched_device_t va, vb;
    if (gpumd_sched_device(d->sched, a, &va) == 0 && gpumd_sched_device(d->sched, b, &vb) == 0) {
      snprintf(t->old_uuid[t->npairs], GPUM_UUID_LEN, "%s", va.uuid);
      snprintf(t->new_uuid[t->npairs++], GPUM_UUID_LEN, "%s", vb.uuid);
    }
    from &= from - 1;
    to &= to - 1;
  }
}

/* Places and starts a resume of a SUSPENDED rid; GPUM_EBUSY (with the reason) when there is no
 * room now. */
static int resume_now(gpumd_t *d, const gpumd_actor_t *a, uint64_t rid) {
  uint64_t mask = 0, now = gpum__os_real_ns();
  if (gpumd_sched_resume_place(d->sched, rid, now, false, &mask) != 0)
    return GPUM_EBUSY; /* not even on the views at hand: no read needed */
  gpumd_admission_read(d);
  int rc = gpumd_sched_resume_place(d->sched, rid, now, true, &mask);
  if (rc != 0)
    return rc;
  const gpumd_resv_t *r = gpumd_sched_find(d->sched, rid);
  task_t *t = calloc(1, sizeof *t);
  if (!t)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  t->kind = TASK_RESUME;
  t->rid = rid;
  t->n = r->nprocs;
  memcpy(t->pid, r->proc_pid, sizeof t->pid);
  memcpy(t->start, r->proc_start, sizeof t->start);
  pairs(d, r->ckpt_mask, mask, t);
  char devs[GPUMD_SCHED_MAX_DEVICES * 4] = "", why[GPUMD_RESV_REASON_LEN];
  size_t off = 0;
  for (uint64_t m = mask; m; m &= m - 1)
    off += (size_t)snprintf(devs + off, sizeof devs - off, "%s%u", off ? "," : "",
                            (unsigned)__builtin_ctzll(m));
  snprintf(why, sizeof why, "resuming on GPU %.200s%s", devs, t->npairs ? " (moved)" : "");
  gpumd_cause_t cause = {.actor = a, .about = a && a->conn ? rid : 0};
  rc = gpumd_sched_resume(d->sched, &cause, rid, mask, gpum__os_real_ns(), why);
  if (rc != 0) {
    free(t);
    return rc;
  }
  gpumd_sched_set_moving(d->sched, rid, GPUMD_MOVING_RESUMING, NULL);
  gpum_log(GPUM_LOG_INFO, "gpumd", "r-%llu: %s", (unsigned long long)rid, why);
  submit(d, t);
  return 0;
}

int gpumd_resume_begin(gpumd_t *d, const gpumd_actor_t *a, uint64_t rid) {
  const gpumd_resv_t *r = gpumd_sched_find(d->sched, rid);
  char id[GPUMD_RESV_ID_BUFSZ];
  gpumd_resv_id_format(rid, id, sizeof id);
  if (!r)
    return gpum_error(GPUM_ENOENT, "no live reservation %s", id);
  if (r->state != GPUMD_RESV_SUSPENDED)
    return gpum_error(GPUM_ESTATE, "%s is %s: only a suspended reservation can be resumed", id,
                      gpumd_resv_state_name(r->state));
  int rc = driver(d);
  if (rc != 0)
    return rc;
  rc = resume_now(d, a, rid);
  if (rc != GPUM_EBUSY)
    return rc;
  /* No room now: it waits for room, as a request of its priority would. */
  char why[GPUMD_RESV_REASON_LEN];
  snprintf(why, sizeof why, "resume asked; %.200s", gpum_last_error());
  r = gpumd_sched_find(d->sched, rid);
  gpumd_sched_set_suspend_facts(d->sched, rid, false, r->host_bytes, r->ckpt_mask, r->proc_pid,
                                r->proc_start, r->nprocs);
  gpumd_sched_set_moving(d->sched, rid, GPUMD_MOVING_NONE, why);
  note(d, rid, a, why);
  kick(d->susp);
  return 0;
}

/* The worker's answer to t, on the loop. */
static void finish(gpumd_t *d, task_t *t) {
  const gpumd_resv_t *r = gpumd_sched_find(d->sched, t->rid);
  char id[GPUMD_RESV_ID_BUFSZ], why[GPUMD_RESV_REASON_LEN];
  gpumd_resv_id_format(t->rid, id, sizeof id);
  if (!r) { /* it ended meanwhile (its lease): the processes stay as the worker left them */
    gpum_log(GPUM_LOG_WARN, "gpumd", "%s ended while its job was being moved (%s)", id,
             t->rc ? t->detail : "done");
    return;
  }
  uint64_t now = gpum__os_real_ns();
  gpumd_cause_t cause = {.actor = NULL};
  if (t->thawed)
    gpum_log(GPUM_LOG_INFO, "gpumd",
             "%s: %u stopped process%s let run for the %s, then stopped again", id, t->thawed,
             t->thawed == 1 ? " was" : "es were", t->kind == TASK_SUSPEND ? "suspend" : "resume");
  if (t->kind == TASK_SUSPEND) {
    gpumd_sched_set_moving(d->sched, t->rid, GPUMD_MOVING_NONE, NULL);
    if (t->rc == 0) {
      gpumd_sched_suspend(d->sched, &cause, t->rid, t->hold, now, t->why);
    } else {
      snprintf(why, sizeof why, "suspend failed, %s: %.200s",
               t->stopped ? "keeps its GPU memory" : "runs on", t->detail);
      gpumd_sched_set_suspend_facts(d->sched, t->rid, false, 0, 0, NULL, NULL, 0);
      gpumd_sched_set_moving(d->sched, t->rid, GPUMD_MOVING_NONE, why);
      note(d, t->rid, NULL, why);
      gpum_log(GPUM_LOG_WARN, "gpumd", "%s: %s", id, why);
    }
    return;
  }
  gpumd_sched_set_moving(d->sched, t->rid, GPUMD_MOVING_NONE, NULL);
  if (t->rc == 0) {
    snprintf(why, sizeof why, "%s on GPU", t->kind == TASK_RESUME ? "resumed" : "recovered");
    size_t off = strlen(why);
    for (uint64_t m = r->device_mask; m; m &= m - 1)
      off += (size_t)snprintf(why + off, sizeof why - off, "%s%u", m == r->device_mask ? " " : ",",
                              (unsigned)__builtin_ctzll(m));
    gpumd_sched_set_suspend_facts(d->sched, t->rid, false, 0, 0, NULL, NULL, 0);
    gpumd_sched_set_moving(d->sched, t->rid, GPUMD_MOVING_NONE, why);
    note(d, t->rid, NULL, why);
    gpum_log(GPUM_LOG_INFO, "gpumd", "%s: %s", id, why);
    return;
  }
  /* Back to SUSPENDED, held: its room goes back to others, and an operator decides. */
  snprintf(why, sizeof why, "resume failed, suspended again: %.200s", t->detail);
  gpumd_sched_suspend(d->sched, &cause, t->rid, true, now, why);
  gpum_log(GPUM_LOG_WARN, "gpumd", "%s: %s", id, why);
}

static void on_answered(evutil_socket_t fd, short what, void *arg) {
  gpumd_t *d = arg;
  struct gpumd_suspend *s = d->susp;
  (void)what;
  uint64_t n;
  ssize_t r = read(fd, &n, sizeof n);
  (void)r;
  pthread_mutex_lock(&s->lock);
  task_t *list = s->done;
  s->done = NULL;
  pthread_mutex_unlock(&s->lock);
  task_t *rev = NULL; /* in the order the worker answered */
  while (list) {
    task_t *next = list->next;
    list->next = rev;
    rev = list;
    list = next;
  }
  while (rev) {
    task_t *next = rev->next;
    finish(d, rev);
    s->in_flight--;
    free(rev);
    rev = next;
  }
  kick(s); /* room may have come back, or a plan may go on */
}

/* ---- the policy: preemption and the automatic resume ----------------------------------- */

/* Suspends, for the queue's first request that cannot be placed, the jobs the scheduler's plan
 * names (gpumd_sched_preempt_plan), one plan at a time. */
static void preempt(gpumd_t *d, uint64_t now) {
  struct gpumd_suspend *s = d->susp;
  if (!gpum_config_get_bool(d->cfg, "preempt.enabled") || gpumd_sched_preemptible(d->sched) == 0 ||
      gpumd_sched_queue_length(d->sched) == 0 || s->in_flight)
    return;
  uint64_t min_run = gpum_config_get_duration(d->cfg, "preempt.min_run_time") * 1000000ull;
  size_t qn = gpumd_sched_queue_length(d->sched);
  for (size_t pos = 0; pos < qn; pos++) {
    const gpumd_resv_t *q = gpumd_sched_queue_at(d->sched, pos);
    uint64_t victims[GPUMD_SCHED_MAX_DEVICES];
    size_t n = 0;
    if (gpumd_sched_preempt_plan(d->sched, q->id, now, min_run, victims, GPUMD_SCHED_MAX_DEVICES,
                                 &n) != 0 ||
        n == 0)
      continue;
    char why[GPUMD_RESV_REASON_LEN];
    snprintf(why, sizeof why, "preempted for r-%llu (priority %d)", (unsigned long long)q->id,
             q->priority);
    uint64_t qid = q->id;
    size_t started = 0;
    for (size_t i = 0; i < n; i++) {
      if (gpumd_suspend_begin(d, NULL, victims[i], false, why) == 0)
        started++;
      else
        gpum_log(GPUM_LOG_DEBUG, "gpumd", "r-%llu not preempted for r-%llu: %s",
                 (unsigned long long)victims[i], (unsigned long long)qid, gpum_last_error());
    }
    if (started)
      return; /* one plan at a time: the next after these are done */
  }
}

/* Resumes the suspended reservations that wait for room (not held), in priority order. */
static void resume_waiting(gpumd_t *d) {
  size_t resumable = 0;
  if (gpumd_sched_suspended(d->sched, &resumable) == 0 || resumable == 0 || !d->susp->ck)
    return;
  uint64_t ids[64];
  int prio[64];
  size_t n = 0, count = gpumd_sched_count(d->sched);
  for (size_t i = 0; i < count && n < 64; i++) {
    const gpumd_resv_t *r = gpumd_sched_at(d->sched, i);
    if (r->state != GPUMD_RESV_SUSPENDED || r->suspend_hold)
      continue;
    size_t k = n++; /* by priority, higher first; then id */
    while (k > 0 && prio[k - 1] < r->priority) {
      ids[k] = ids[k - 1];
      prio[k] = prio[k - 1];
      k--;
    }
    ids[k] = r->id;
    prio[k] = r->priority;
  }
  for (size_t i = 0; i < n; i++)
    resume_now(d, NULL, ids[i]);
}

static void on_timer(evutil_socket_t fd, short what, void *arg) {
  gpumd_t *d = arg;
  (void)fd, (void)what;
  if (!d->sched || d->stop)
    return;
  uint64_t now = gpum__os_real_ns();
  gpumd_slurm_suspend_tick(d, &d->susp->slurm, now);
  resume_waiting(d);
  preempt(d, now);
}

void gpumd_suspend_changed(gpumd_t *d) {
  if (d->susp && (gpumd_sched_preemptible(d->sched) || gpumd_sched_suspended(d->sched, NULL)))
    kick(d->susp);
}

/* ---- start, stop, recovery -------------------------------------------------------------- */

static uint64_t mem_total(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  unsigned long long kb = 0;
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
      break;
  if (f)
    fclose(f);
  return (uint64_t)kb * 1024;
}

/* A gpumd that stopped while a suspend or resume was under way: each GRANTED reservation whose
 * row still names processes gets them running again (restored onto its GPUs, which it holds,
 * and unlocked). */
static void recover(gpumd_t *d) {
  size_t count = gpumd_sched_count(d->sched);
  for (size_t i = 0; i < count; i++) {
    const gpumd_resv_t *r = gpumd_sched_at(d->sched, i);
    if (r->state != GPUMD_RESV_GRANTED || r->nprocs == 0)
      continue;
    if (driver(d) != 0) {
      gpum_log(GPUM_LOG_ERROR, "gpumd", "r-%llu was being moved when gpumd stopped: %s",
               (unsigned long long)r->id, gpum_last_error());
      continue;
    }
    task_t *t = calloc(1, sizeof *t);
    if (!t)
      continue;
    t->kind = TASK_RECOVER;
    t->rid = r->id;
    t->n = r->nprocs;
    memcpy(t->pid, r->proc_pid, sizeof t->pid);
    memcpy(t->start, r->proc_start, sizeof t->start);
    pairs(d, r->ckpt_mask ? r->ckpt_mask : r->device_mask, r->device_mask, t);
    gpumd_sched_set_moving(d->sched, r->id, GPUMD_MOVING_RESUMING,
                           "gpumd restarted while its job was being moved: resuming it");
    gpum_log(GPUM_LOG_INFO, "gpumd", "r-%llu was being moved when gpumd stopped: resuming it",
             (unsigned long long)r->id);
    submit(d, t);
  }
}

int gpumd_suspend_start(gpumd_t *d) {
  struct gpumd_suspend *s = calloc(1, sizeof *s);
  if (!s)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  d->susp = s;
  s->efd = -1;
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->cond, NULL);
  s->mem_total = mem_total();
  s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s->efd < 0)
    return gpum_error(GPUM_EIO, "eventfd: %s", strerror(errno));
  s->answered = event_new(d->base, s->efd, EV_READ | EV_PERSIST, on_answered, d);
  s->timer = event_new(d->base, -1, EV_PERSIST, on_timer, d);
  struct timeval second = {1, 0};
  if (!s->answered || !s->timer || event_add(s->answered, NULL) != 0 ||
      event_add(s->timer, &second) != 0)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  recover(d);
  return 0;
}

void gpumd_suspend_stop(gpumd_t *d) {
  struct gpumd_suspend *s = d->susp;
  if (!s)
    return;
  if (s->running) {
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL); /* after the task under way: a job is never left half-moved */
  }
  task_t *lists[2] = {s->todo, s->done};
  for (int i = 0; i < 2; i++)
    while (lists[i]) {
      task_t *next = lists[i]->next;
      free(lists[i]);
      lists[i] = next;
    }
  if (s->answered)
    event_free(s->answered);
  if (s->timer)
    event_free(s->timer);
  if (s->efd >= 0)
    close(s->efd);
  gpum_ckpt_close(s->ck);
  gpumd_slurm_suspend_free(s->slurm);
  pthread_cond_destroy(&s->cond);
  pthread_mutex_destroy(&s->lock);
  free(s);
  d->susp = NULL;
}
