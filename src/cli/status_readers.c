/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device readers for `gpum status` (status.h): each selected device is read on a thread of
 * its own, with a device session of its own, so that a device whose driver calls hang (a GPU
 * that stopped answering: nvidia-smi hangs with it) holds up only its own row, and only for
 * status.timeout; the row then says the device does not answer. A reader stuck in a call is
 * asked again only once the call returns (a watch keeps showing it as not answering), and is
 * left behind at exit: the process ends it. The readers share one block, freed by the last of
 * cli_readers_free and the readers' threads.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/error.h>
#include <gpum/clock.h>

#include "cli.h"
#include "status.h"

#define MAX_READERS 64

typedef struct {
  struct cli_readers *owner;
  unsigned index;
  bool started, busy;      /* busy: in a read */
  uint64_t want, cur, got; /* the generation asked for, being read, and that of out */
  cli_dev_snap_t out;
  pthread_t thread;
} reader_t;

struct cli_readers {
  const gpum_config_t *cfg;
  gpum_backend_kind_t backend;
  gpum_busy_thresholds_t busy;
  pthread_mutex_t lock;
  pthread_cond_t cond; /* a request (readers wait) or a result (the caller waits) */
  bool stop;
  unsigned refs; /* cli_readers_free and each running thread */
  uint64_t gen;
  reader_t r[MAX_READERS];
};

static void unref(cli_readers_t *rs) { /* with rs->lock held; unlocks */
  bool last = --rs->refs == 0;
  pthread_mutex_unlock(&rs->lock);
  if (!last)
    return;
  for (unsigned i = 0; i < MAX_READERS; i++)
    free(rs->r[i].out.procs);
  pthread_cond_destroy(&rs->cond);
  pthread_mutex_destroy(&rs->lock);
  free(rs);
}

/* A device that cannot be read at all: an ERROR row with the reason. */
static void unreadable(cli_dev_snap_t *d, unsigned index, int err, const char *why) {
  free(d->procs);
  memset(d, 0, sizeof *d);
  d->index = index;
  d->error = err;
  d->info_rc = d->sample_rc = d->memhealth_rc = d->procs_rc = err;
  d->state = CLI_STATE_ERROR;
  snprintf(d->reason, sizeof d->reason, "%s", why);
}

static void *reader_main(void *arg) {
  reader_t *r = arg;
  cli_readers_t *rs = r->owner;
  gpum_device_session_t *s = NULL;
  int open_rc = cli_open_session_as(rs->cfg, rs->backend, &s);
  char open_why[CLI_REASON_LEN];
  snprintf(open_why, sizeof open_why, "cannot open a device session: %s", cli_reason(open_rc));
  pthread_mutex_lock(&rs->lock);
  while (!rs->stop) {
    if (r->want == r->got) {
      pthread_cond_wait(&rs->cond, &rs->lock);
      continue;
    }
    uint64_t gen = r->want;
    r->busy = true;
    r->cur = gen;
    pthread_mutex_unlock(&rs->lock);
    cli_dev_snap_t d = {.index = r->index};
    int rc = open_rc == 0 ? cli_snapshot_read(s, &d, &rs->busy) : 0;
    if (open_rc != 0)
      unreadable(&d, r->index, open_rc, open_why);
    else if (rc != 0)
      unreadable(&d, r->index, rc, gpum_strerror(rc));
    pthread_mutex_lock(&rs->lock);
    r->busy = false;
    free(r->out.procs);
    r->out = d;
    r->got = gen;
    pthread_cond_broadcast(&rs->cond);
  }
  pthread_mutex_unlock(&rs->lock);
  if (s)
    gpum_device_close(s);
  pthread_mutex_lock(&rs->lock);
  unref(rs);
  return NULL;
}

int cli_readers_start(const gpum_config_t *cfg, gpum_backend_kind_t backend,
                      const gpum_busy_thresholds_t *busy, cli_readers_t **out) {
  cli_readers_t *rs = calloc(1, sizeof *rs);
  if (!rs)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  rs->cfg = cfg;
  rs->backend = backend;
  rs->busy = *busy;
  rs->refs = 1;
  pthread_mutex_init(&rs->lock, NULL);
  pthread_cond_init(&rs->cond, NULL);
  *out = rs;
  return 0;
}

/* The reader of device index, started when new (lock held). NULL when it cannot start. */
static reader_t *reader(cli_readers_t *rs, unsigned index) {
  if (index >= MAX_READERS)
    return NULL;
  reader_t *r = &rs->r[index];
  if (r->started)
    return r;
  r->owner = rs;
  r->index = index;
  if (pthread_create(&r->thread, NULL, reader_main, r) != 0)
    return NULL;
  r->started = true;
  rs->refs++;
  return r;
}

int cli_readers_read(cli_readers_t *rs, cli_dev_snap_t *devs, size_t n, unsigned timeout_ms) {
  pthread_mutex_lock(&rs->lock);
  uint64_t gen = ++rs->gen;
  for (size_t i = 0; i < n; i++) {
    reader_t *r = reader(rs, devs[i].index);
    if (!r) {
      pthread_mutex_unlock(&rs->lock);
      return gpum_error(GPUM_ENOMEM, "cannot start a reader for device %u", devs[i].index);
    }
    r->want = gen;
  }
  pthread_cond_broadcast(&rs->cond);
  /* Every reader answers, or the time is up (a reader still busy with an older request
   * cannot answer this one: it is not waited for). */
  uint64_t end = (gpum_clock_mono_ns() / 1000000u) + timeout_ms;
  for (;;) {
    bool waiting = false;
    for (size_t i = 0; i < n; i++) {
      reader_t *r = &rs->r[devs[i].index];
      waiting |= r->got != gen && !(r->busy && r->cur < gen);
    }
    uint64_t now = (gpum_clock_mono_ns() / 1000000u);
    if (!waiting || now >= end)
      break;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t left = end - now;
    ts.tv_sec += (time_t)(left / 1000);
    ts.tv_nsec += (long)(left % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&rs->cond, &rs->lock, &ts);
  }
  for (size_t i = 0; i < n; i++) {
    reader_t *r = &rs->r[devs[i].index];
    if (r->got == gen) {
      devs[i] = r->out; /* its process list goes with it */
      r->out.procs = NULL;
      continue;
    }
    char why[CLI_REASON_LEN];
    snprintf(why, sizeof why,
             "no answer within %u ms: a driver call on this device does not return "
             "(status.timeout)",
             timeout_ms);
    devs[i].procs = NULL;
    unreadable(&devs[i], devs[i].index, GPUM_ETIMEDOUT, why);
  }
  pthread_mutex_unlock(&rs->lock);
  return 0;
}

void cli_readers_free(cli_readers_t *rs) {
  if (!rs)
    return;
  pthread_t join[MAX_READERS];
  unsigned nj = 0;
  pthread_mutex_lock(&rs->lock);
  rs->stop = true;
  pthread_cond_broadcast(&rs->cond);
  for (unsigned i = 0; i < MAX_READERS; i++) {
    if (!rs->r[i].started)
      continue;
    if (rs->r[i].busy)
      pthread_detach(rs->r[i].thread); /* stuck in a driver call: left to the process's end */
    else
      join[nj++] = rs->r[i].thread;
  }
  pthread_mutex_unlock(&rs->lock);
  for (unsigned i = 0; i < nj; i++)
    pthread_join(join[i], NULL);
  pthread_mutex_lock(&rs->lock);
  unref(rs);
}
