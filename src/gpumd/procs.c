/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The process lists behind "unmanaged" memory (memory used by processes that hold no
 * reservation), each device's read on a thread of its own with a device session of its own:
 * a driver call that hangs (a sick GPU, the simulated driver's --slow) must never stall the
 * daemon's loop, nor the lists of the other devices (with one thread for all, a hung device
 * left every device's unmanaged memory stale, and admission over-granting). Every monitor
 * interval each thread reads its device's list and publishes a snapshot; the loop copies the
 * newest snapshot under a short lock. The state lives in a block of its own, freed by the last
 * of gpumd_procs_stop and the threads: a thread stuck in a call at stop is left behind and
 * frees nothing it does not own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "gpumd_internal.h"

typedef struct gpumd_procs_block procs_block_t;

typedef struct {
  procs_block_t *b;
  unsigned slot, index; /* slot in d->devices, device index */
  gpum_device_session_t *session;
  pthread_t thread;
  bool started, busy; /* busy: in a driver call */
} procs_worker_t;

struct gpumd_procs_block {
  pthread_mutex_t lock;
  pthread_cond_t cond; /* stop */
  bool stop;
  unsigned refs; /* gpumd_procs_stop and each running thread */
  unsigned interval_ms;
  unsigned n;
  procs_worker_t w[GPUMD_MAX_DEVICES];
  gpumd_procs_t snap[GPUMD_MAX_DEVICES];
};

/* Drops one reference (lock held; unlocks); the last frees the block. */
static void unref(procs_block_t *b) {
  bool last = --b->refs == 0;
  pthread_mutex_unlock(&b->lock);
  if (!last)
    return;
  pthread_cond_destroy(&b->cond);
  pthread_mutex_destroy(&b->lock);
  free(b);
}

/* The newest list of a worker's device (lock held). */
static void publish(procs_block_t *b, unsigned slot, const gpum_process_t *procs, size_t n,
                    bool ok) {
  gpumd_procs_t *p = &b->snap[slot];
  p->valid = ok;
  p->count = 0;
  for (size_t i = 0; ok && i < n && i < GPUMD_MAX_PROCS; i++) {
    if (!procs[i].memory_valid)
      continue;
    p->pid[p->count] = procs[i].pid;
    p->memory[p->count] = procs[i].memory;
    p->count++;
  }
}

static void *procs_main(void *arg) {
  procs_worker_t *w = arg;
  procs_block_t *b = w->b;
  gpum_process_t *procs = calloc(GPUMD_MAX_PROCS, sizeof *procs);
  pthread_mutex_lock(&b->lock);
  while (procs && !b->stop) {
    w->busy = true;
    pthread_mutex_unlock(&b->lock);
    size_t n = 0;
    int rc = gpum_device_processes(w->session, w->index, procs, GPUMD_MAX_PROCS, &n);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += b->interval_ms / 1000;
    until.tv_nsec += (long)(b->interval_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&b->lock);
    w->busy = false;
    publish(b, w->slot, procs, n, rc == 0 || rc == GPUM_ENOSPC);
    while (!b->stop && pthread_cond_timedwait(&b->cond, &b->lock, &until) == 0)
      ;
  }
  pthread_mutex_unlock(&b->lock);
  free(procs);
  gpum_device_close(w->session);
  pthread_mutex_lock(&b->lock);
  unref(b);
  return NULL;
}

int gpumd_procs_start(gpumd_t *d, const gpum_device_open_opts_t *dopts, unsigned interval_ms) {
  procs_block_t *b = calloc(1, sizeof *b);
  if (!b)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  pthread_mutex_init(&b->lock, NULL);
  pthread_cond_init(&b->cond, NULL);
  b->refs = 1;
  b->interval_ms = interval_ms;
  b->n = d->device_count;
  d->procs = b;
  for (unsigned i = 0; i < b->n; i++) {
    procs_worker_t *w = &b->w[i];
    w->b = b;
    w->slot = i;
    w->index = d->devices[i].index;
    /* Opening looks up no device handle: it does not wait for a hung device. */
    if (gpum_device_open(dopts, &w->session) != 0) {
      gpum_log(GPUM_LOG_WARN, "gpumd",
               "device %u: no process lists (its unmanaged memory is not counted): %s", w->index,
               gpum_last_error());
      continue;
    }
    pthread_mutex_lock(&b->lock);
    int e = pthread_create(&w->thread, NULL, procs_main, w);
    if (e == 0) {
      w->started = true;
      b->refs++;
    }
    pthread_mutex_unlock(&b->lock);
    if (e != 0) {
      gpum_device_close(w->session);
      return gpum_error(GPUM_ENOMEM, "cannot start a process-list thread: %s", strerror(e));
    }
  }
  return 0;
}

void gpumd_procs_stop(gpumd_t *d) {
  procs_block_t *b = d->procs;
  if (!b)
    return;
  d->procs = NULL;
  pthread_t join[GPUMD_MAX_DEVICES];
  unsigned nj = 0;
  pthread_mutex_lock(&b->lock);
  b->stop = true;
  pthread_cond_broadcast(&b->cond);
  for (unsigned i = 0; i < b->n; i++) {
    if (!b->w[i].started)
      continue;
    if (b->w[i].busy) {
      /* Stuck in a hung driver call: left (with its session) to return or to the exit. */
      gpum_log(GPUM_LOG_WARN, "gpumd", "device %u: process-list thread stuck in the driver",
               b->w[i].index);
      pthread_detach(b->w[i].thread);
    } else {
      join[nj++] = b->w[i].thread;
    }
  }
  pthread_mutex_unlock(&b->lock);
  for (unsigned i = 0; i < nj; i++)
    pthread_join(join[i], NULL);
  pthread_mutex_lock(&b->lock);
  unref(b);
}

int gpumd_procs_get(gpumd_t *d, unsigned index, gpumd_procs_t *out) {
  procs_block_t *b = d->procs;
  if (!b)
    return GPUM_ENOENT;
  for (unsigned i = 0; i < b->n; i++) {
    if (b->w[i].index != index)
      continue;
    pthread_mutex_lock(&b->lock);
    *out = b->snap[i];
    pthread_mutex_unlock(&b->lock);
    return out->valid ? 0 : GPUM_ENOENT;
  }
  return GPUM_ENODEV;
}
