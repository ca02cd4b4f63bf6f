/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The process lists behind "unmanaged" memory (memory used by processes that hold no
 * reservation), read on a thread of their own: a driver call that hangs (a sick GPU, the
 * simulated driver's --slow) must never stall the daemon's loop. Every monitor interval the
 * thread reads each device's process list through its own device session and publishes a
 * snapshot; the loop copies the newest snapshot under a short lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "gpumd_internal.h"

static void publish(gpumd_t *d, unsigned slot, const gpum_process_t *procs, size_t n, bool ok) {
  gpumd_procs_t *p = &d->procs[slot];
  pthread_mutex_lock(&d->procs_lock);
  p->valid = ok;
  p->count = 0;
  for (size_t i = 0; ok && i < n && i < GPUMD_MAX_PROCS; i++) {
    if (!procs[i].memory_valid)
      continue;
    p->pid[p->count] = procs[i].pid;
    p->memory[p->count] = procs[i].memory;
    p->count++;
  }
  pthread_mutex_unlock(&d->procs_lock);
}

static void *procs_main(void *arg) {
  gpumd_t *d = arg;
  gpum_process_t *procs = calloc(GPUMD_MAX_PROCS, sizeof *procs);
  if (!procs)
    return NULL;
  pthread_mutex_lock(&d->procs_lock);
  while (!d->procs_stop) {
    pthread_mutex_unlock(&d->procs_lock);
    for (unsigned i = 0; i < d->device_count; i++) {
      size_t n = 0;
      int rc =
          gpum_device_processes(d->procs_session, d->devices[i].index, procs, GPUMD_MAX_PROCS, &n);
      publish(d, i, procs, n, rc == 0 || rc == GPUM_ENOSPC);
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += d->procs_interval_ms / 1000;
    until.tv_nsec += (long)(d->procs_interval_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&d->procs_lock);
    while (!d->procs_stop && pthread_cond_timedwait(&d->procs_cond, &d->procs_lock, &until) == 0)
      ;
  }
  pthread_mutex_unlock(&d->procs_lock);
  free(procs);
  return NULL;
}

int gpumd_procs_start(gpumd_t *d, const gpum_device_open_opts_t *dopts, unsigned interval_ms) {
  pthread_mutex_init(&d->procs_lock, NULL);
  pthread_cond_init(&d->procs_cond, NULL);
  d->procs_init = true;
  d->procs_interval_ms = interval_ms;
  if (gpum_device_open(dopts, &d->procs_session) != 0) {
    gpum_log(GPUM_LOG_WARN, "gpumd", "no process lists (unmanaged memory not counted): %s",
             gpum_last_error());
    d->procs_session = NULL;
    return 0;
  }
  int e = pthread_create(&d->procs_thread, NULL, procs_main, d);
  if (e != 0) {
    gpum_device_close(d->procs_session);
    d->procs_session = NULL;
    return gpum_error(GPUM_ENOMEM, "cannot start the process-list thread: %s", strerror(e));
  }
  d->procs_running = true;
  return 0;
}

void gpumd_procs_stop(gpumd_t *d) {
  if (!d->procs_init)
    return;
  if (d->procs_running) {
    pthread_mutex_lock(&d->procs_lock);
    d->procs_stop = true;
    pthread_cond_signal(&d->procs_cond);
    pthread_mutex_unlock(&d->procs_lock);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    if (pthread_timedjoin_np(d->procs_thread, NULL, &until) != 0) {
      /* Stuck in a hung driver call: leave it (and its session) to the process exit. */
      gpum_log(GPUM_LOG_WARN, "gpumd", "process-list thread stuck in the driver: not joined");
      return;
    }
    d->procs_running = false;
  }
  gpum_device_close(d->procs_session);
  d->procs_session = NULL;
  pthread_cond_destroy(&d->procs_cond);
  pthread_mutex_destroy(&d->procs_lock);
  d->procs_init = false;
}

int gpumd_procs_get(gpumd_t *d, unsigned index, gpumd_procs_t *out) {
  if (!d->procs_init)
    return GPUM_ENOENT;
  for (unsigned i = 0; i < d->device_count; i++) {
    if (d->devices[i].index != index)
      continue;
    pthread_mutex_lock(&d->procs_lock);
    *out = d->procs[i];
    pthread_mutex_unlock(&d->procs_lock);
    return out->valid ? 0 : GPUM_ENOENT;
  }
  return GPUM_ENODEV;
}
