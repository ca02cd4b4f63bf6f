/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ledger's writer thread (see ledger_internal.h): runs one job at a time, handed over by
 * the loop thread, and says when it is done through a flag under a mutex (for
 * gpumd__ledger_writer_collect) and an eventfd (to wake the loop's epoll). The job itself (a
 * transaction of staged rows) belongs to ledger.c; this file only moves it between threads.
 * A failed job's error detail, which gpum_error keeps per thread, is copied here and raised
 * again on the collecting thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <gpum/error.h>

#include "ledger_internal.h"

struct gpumd_ledger_writer {
  gpumd_ledger_job_fn fn;
  void *user;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond; /* a job was handed over, it finished, or stop */
  void *job;
  bool running;  /* job handed over and not finished */
  bool finished; /* job finished and not collected */
  bool stop;
  int rc;
  char err[512];
  int efd;
};

static void *run(void *arg) {
  gpumd_ledger_writer_t *w = arg;
  pthread_setname_np(pthread_self(), "gpumd-writer"); /* as top -H and /proc show it */
  pthread_mutex_lock(&w->lock);
  for (;;) {
    while (!w->running && !w->stop)
      pthread_cond_wait(&w->cond, &w->lock);
    if (!w->running)
      break; /* stop, and no job left */
    void *job = w->job;
    pthread_mutex_unlock(&w->lock);
    gpum_error_clear();
    int rc = w->fn(w->user, job);
    pthread_mutex_lock(&w->lock);
    w->rc = rc;
    if (rc < 0) {
      size_t n = strlen(gpum_last_error());
      n = n < sizeof w->err - 1 ? n : sizeof w->err - 1;
      memcpy(w->err, gpum_last_error(), n);
      w->err[n] = '\0';
    }
    w->running = false;
    w->finished = true;
    /* The loop is told with the lock released: woken on this CPU, it would otherwise find
     * the lock taken and sleep again until this thread ran on to its wait. */
    pthread_mutex_unlock(&w->lock);
    pthread_cond_broadcast(&w->cond);
    uint64_t one = 1;
    ssize_t wr = write(w->efd, &one, sizeof one); /* cannot fill: the loop reads it */
    (void)wr;
    pthread_mutex_lock(&w->lock);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

int gpumd__ledger_writer_start(gpumd_ledger_job_fn fn, void *user, gpumd_ledger_writer_t **out) {
  gpumd_ledger_writer_t *w = calloc(1, sizeof *w);
  if (w == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory starting the ledger writer");
  w->fn = fn;
  w->user = user;
  w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (w->efd < 0) {
    int rc = gpum_error(GPUM_EIO, "cannot create the ledger writer's eventfd: %s", strerror(errno));
    free(w);
    return rc;
  }
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->cond, NULL);
  if (pthread_create(&w->thread, NULL, run, w) != 0) {
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    close(w->efd);
    free(w);
    return gpum_error(GPUM_ENOMEM, "cannot start the ledger writer thread");
  }
  *out = w;
  return 0;
}

void gpumd__ledger_writer_stop(gpumd_ledger_writer_t *w) {
  if (w == NULL)
    return;
  pthread_mutex_lock(&w->lock);
  w->stop = true; /* a running job is finished first */
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->cond);
  pthread_mutex_destroy(&w->lock);
  close(w->efd);
  free(w);
}

int gpumd__ledger_writer_fd(const gpumd_ledger_writer_t *w) {
  return w->efd;
}

void gpumd__ledger_writer_submit(gpumd_ledger_writer_t *w, void *job) {
  pthread_mutex_lock(&w->lock);
  w->job = job;
  w->running = true;
  w->finished = false;
  pthread_mutex_unlock(&w->lock);
  pthread_cond_broadcast(&w->cond); /* unlocked: the writer wakes to a free lock */
}

int gpumd__ledger_writer_collect(gpumd_ledger_writer_t *w, bool wait, int *job_rc) {
  pthread_mutex_lock(&w->lock);
  while (wait && w->running)
    pthread_cond_wait(&w->cond, &w->lock);
  bool done = w->finished;
  int rc = w->rc;
  char err[sizeof w->err];
  if (done) {
    w->finished = false;
    memcpy(err, w->err, sizeof err);
  }
  pthread_mutex_unlock(&w->lock);
  if (!done)
    return 0;
  *job_rc = rc < 0 ? gpum_error(rc, "%s", err) : rc;
  return 1;
}
