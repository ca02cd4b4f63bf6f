/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Hang-safe device readers (gpum/device.h): a thread and a session per device, results
 * handed over under one lock, and a state block freed by the last of gpum_device_readers_stop
 * and the readers' threads, so that a thread stuck in a hung driver call can be left behind
 * without freeing anything it still uses. gpum status reads on request, gpumd's process lists
 * periodically.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/device.h>
#include <gpum/error.h>
#include <gpum/log.h>

#include "core/os_internal.h"

typedef struct {
  struct gpum_device_readers *rs;
  unsigned index;
  bool started, busy;      /* busy: in a read */
  uint64_t want, cur, got; /* on request: the generation asked for, being read, and read */
  bool have;               /* periodic: a read has finished */
  int rc;                  /* the newest read's return */
  void *result;            /* the newest result */
  pthread_t thread;
} reader_t;

struct gpum_device_readers {
  gpum_device_readers_opts_t o;
  char *nvml_library; /* o.device.nvml_library's copy: threads open their sessions later */
  pthread_mutex_t lock;
  pthread_cond_t cond; /* a request or stop (readers wait), a result (callers wait) */
  bool stop;
  unsigned refs; /* gpum_device_readers_stop and each running thread */
  uint64_t gen;
  size_t n, cap;
  reader_t **r; /* stable pointers: a reader's thread holds its own */
};

/* Drops one reference (lock held; unlocks); the last frees the block. */
static void unref(gpum_device_readers_t *rs) {
  bool last = --rs->refs == 0;
  pthread_mutex_unlock(&rs->lock);
  if (!last)
    return;
  for (size_t i = 0; i < rs->n; i++) {
    if (rs->o.result_free)
      rs->o.result_free(rs->r[i]->result, rs->o.user);
    free(rs->r[i]->result);
    free(rs->r[i]);
  }
  free(rs->r);
  free(rs->nvml_library);
  pthread_cond_destroy(&rs->cond);
  pthread_mutex_destroy(&rs->lock);
  free(rs);
}

/* Deadline for pthread_cond_timedwait, ms from now. */
static struct timespec after_ms(unsigned ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += (time_t)(ms / 1000);
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

/* One read into a fresh result, then published (lock held on entry and exit). */
static void read_once(reader_t *r, gpum_device_session_t *s, void *scratch) {
  gpum_device_readers_t *rs = r->rs;
  r->busy = true;
  pthread_mutex_unlock(&rs->lock);
  memset(scratch, 0, rs->o.result_size);
  int rc = rs->o.read(s, r->index, scratch, rs->o.user);
  pthread_mutex_lock(&rs->lock);
  r->busy = false;
  if (rs->o.result_free)
    rs->o.result_free(r->result, rs->o.user);
  memcpy(r->result, scratch, rs->o.result_size);
  r->rc = rc;
}

static void *reader_main(void *arg) {
  reader_t *r = arg;
  gpum_device_readers_t *rs = r->rs;
  gpum_device_session_t *s = NULL;
  /* Opening loads the driver and counts the devices: it calls nothing on one device. */
  if (gpum_device_open(&rs->o.device, &s) != 0)
    s = NULL; /* the read function is told (NULL) and finds the reason in gpum_last_error */
  void *scratch = calloc(1, rs->o.result_size);
  pthread_mutex_lock(&rs->lock);
  while (scratch && !rs->stop) {
    if (rs->o.interval_ms > 0) {
      read_once(r, s, scratch);
      r->have = true;
      pthread_cond_broadcast(&rs->cond);
      struct timespec until = after_ms(rs->o.interval_ms);
      while (!rs->stop && pthread_cond_timedwait(&rs->cond, &rs->lock, &until) != ETIMEDOUT)
        ;
    } else if (r->want == r->got) {
      pthread_cond_wait(&rs->cond, &rs->lock);
    } else {
      uint64_t gen = r->want;
      r->cur = gen;
      read_once(r, s, scratch);
      r->got = gen;
      pthread_cond_broadcast(&rs->cond);
    }
  }
  pthread_mutex_unlock(&rs->lock);
  free(scratch);
  gpum_device_close(s);
  pthread_mutex_lock(&rs->lock);
  unref(rs);
  return NULL;
}

/* The reader of device index, started when new (lock held). NULL when it cannot start. */
static reader_t *reader(gpum_device_readers_t *rs, unsigned index) {
  for (size_t i = 0; i < rs->n; i++)
    if (rs->r[i]->index == index)
      return rs->r[i];
  if (rs->n == rs->cap) {
    size_t cap = rs->cap ? rs->cap * 2 : 8;
    reader_t **p = realloc(rs->r, cap * sizeof *p);
    if (!p)
      return NULL;
    rs->r = p;
    rs->cap = cap;
  }
  reader_t *r = calloc(1, sizeof *r);
  if (r)
    r->result = calloc(1, rs->o.result_size);
  if (!r || !r->result) {
    if (r)
      free(r->result);
    free(r);
    return NULL;
  }
  r->rs = rs;
  r->index = index;
  r->rc = GPUM_EAGAIN;
  rs->r[rs->n++] = r;
  if (pthread_create(&r->thread, NULL, reader_main, r) != 0)
    return NULL; /* kept (freed with the block), never started */
  r->started = true;
  rs->refs++;
  return r;
}

int gpum_device_readers_start(const gpum_device_readers_opts_t *opts, const unsigned *indexes,
                              size_t n, gpum_device_readers_t **out) {
  *out = NULL;
  if (!opts || !opts->read || opts->result_size == 0 || opts->interval_ms > 3600000u)
    return gpum_error(GPUM_EINVAL, "device readers: a read function, a result size and an "
                                   "interval of at most an hour are needed");
  gpum_device_readers_t *rs = calloc(1, sizeof *rs);
  if (!rs)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  rs->o = *opts;
  if (opts->device.nvml_library && !(rs->nvml_library = strdup(opts->device.nvml_library))) {
    free(rs);
    return gpum_error(GPUM_ENOMEM, "out of memory");
  }
  rs->o.device.nvml_library = rs->nvml_library;
  rs->refs = 1;
  pthread_mutex_init(&rs->lock, NULL);
  pthread_cond_init(&rs->cond, NULL);
  pthread_mutex_lock(&rs->lock);
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    reader_t *r = reader(rs, indexes[i]);
    if (!r || !r->started)
      rc = gpum_error(GPUM_ENOMEM, "cannot start a reader for device %u", indexes[i]);
  }
  pthread_mutex_unlock(&rs->lock);
  if (rc != 0) {
    gpum_device_readers_stop(rs);
    return rc;
  }
  *out = rs;
  return 0;
}

int gpum_device_readers_read(gpum_device_readers_t *rs, const unsigned *indexes, size_t n,
                             unsigned timeout_ms, void *results, int *rcs) {
  pthread_mutex_lock(&rs->lock);
  uint64_t gen = ++rs->gen;
  reader_t *want[n ? n : 1];
  for (size_t i = 0; i < n; i++) {
    want[i] = reader(rs, indexes[i]);
    if (!want[i] || !want[i]->started) {
      pthread_mutex_unlock(&rs->lock);
      return gpum_error(GPUM_ENOMEM, "cannot start a reader for device %u", indexes[i]);
    }
    want[i]->want = gen;
  }
  pthread_cond_broadcast(&rs->cond);
  /* Every reader answers, or the time is up (a reader still busy with an older request
   * cannot answer this one: it is not waited for). */
  uint64_t end = gpum__os_mono_ms() + timeout_ms;
  for (;;) {
    bool waiting = false;
    for (size_t i = 0; i < n; i++)
      waiting |= want[i]->got != gen && !(want[i]->busy && want[i]->cur < gen);
    uint64_t now = gpum__os_mono_ms();
    if (!waiting || now >= end)
      break;
    struct timespec ts = after_ms((unsigned)(end - now));
    pthread_cond_timedwait(&rs->cond, &rs->lock, &ts);
  }
  for (size_t i = 0; i < n; i++) {
    if (want[i]->got != gen) {
      rcs[i] = GPUM_ETIMEDOUT;
      continue;
    }
    void *dst = (char *)results + i * rs->o.result_size;
    memcpy(dst, want[i]->result, rs->o.result_size); /* what it owns goes with it */
    memset(want[i]->result, 0, rs->o.result_size);
    rcs[i] = want[i]->rc;
  }
  pthread_mutex_unlock(&rs->lock);
  return 0;
}

int gpum_device_readers_latest(gpum_device_readers_t *rs, unsigned index, void *out) {
  int rc = GPUM_ENODEV;
  pthread_mutex_lock(&rs->lock);
  for (size_t i = 0; i < rs->n; i++) {
    reader_t *r = rs->r[i];
    if (r->index != index)
      continue;
    rc = GPUM_EAGAIN;
    if (r->have) {
      memcpy(out, r->result, rs->o.result_size);
      rc = r->rc;
    }
    break;
  }
  pthread_mutex_unlock(&rs->lock);
  return rc;
}

void gpum_device_readers_stop(gpum_device_readers_t *rs) {
  if (!rs)
    return;
  pthread_mutex_lock(&rs->lock);
  rs->stop = true;
  pthread_cond_broadcast(&rs->cond);
  size_t n = rs->n, nj = 0;
  pthread_t *join = calloc(n ? n : 1, sizeof *join);
  for (size_t i = 0; i < n; i++) {
    reader_t *r = rs->r[i];
    if (!r->started)
      continue;
    if (r->busy || !join) {
      /* Stuck in a driver call: left (with its session) to return, or to the process's end. */
      gpum_log(GPUM_LOG_INFO, "device", "device %u: reader thread stuck in the driver: left behind",
               r->index);
      pthread_detach(r->thread);
    } else {
      join[nj++] = r->thread;
    }
  }
  pthread_mutex_unlock(&rs->lock);
  for (size_t i = 0; i < nj; i++)
    pthread_join(join[i], NULL);
  free(join);
  pthread_mutex_lock(&rs->lock);
  unref(rs);
}
