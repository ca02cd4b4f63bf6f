/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Hang-safe device readers (gpum/device.h): a thread and a session per device, requests and
 * results handed over under one lock, and a state block freed by the last of
 * gpum_device_readers_stop and the readers' threads, so that a thread stuck in a hung driver
 * call can be left behind without freeing anything it still uses. gpum status reads with a
 * deadline, the monitor requests and takes, gpumd's process lists read periodically.
 *
 * The sweep: a fresh read of several devices (gpum_device_readers_read) with flat results
 * (no result_free) is first handed to one more thread (started at the first such read, so that
 * readers that are never read so, the monitor's, have none), which reads the devices one after the
 * other through a session of its own: one thread woken per call instead of one per device
 * (gpumd makes such a read at every turn that admits a request, and the wake-ups cost it more
 * than the reads of a fast driver). A hung device must still not hold up the others: when the
 * sweep has been in one device's read for SWEEP_HANDOFF_MS, the devices it has not begun go
 * to their own readers, as without a sweep, and the caller waits for the slow one up to its
 * timeout. A sweep whose reads took longer than SWEEP_SLOW_NS in all (a slow driver, where
 * reading the devices one after the other would cost time, not save it), or that was handed
 * off, leaves the calls of the next SWEEP_PAUSE_NS to the readers; a sweep stuck in a call
 * leaves every call to them until it returns. Results are published in the order their reads
 * began (a ticket per read), so a periodic reader's read that began before a sweep's never
 * replaces the sweep's newer result.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/device.h>
#include <gpum/error.h>
#include <gpum/log.h>

#include "device/device_internal.h"
#include "os_internal.h"

#define SWEEP_HANDOFF_MS 2u          /* one read this long: the rest to the readers */
#define SWEEP_SLOW_NS 1000000ull     /* one sweep this long in all: slow */
#define SWEEP_PAUSE_NS 1000000000ull /* after a slow sweep, the readers' own threads */

typedef struct {
  struct gpum_device_readers *rs;
  unsigned index;
  gpum_device_session_t *session; /* opened at start, or by the thread */
  bool started, busy;             /* busy: in a read */
  uint64_t busy_since_ms;         /* when the read in progress began (monotonic) */
  uint64_t want, cur, got;        /* the request asked for, being read, and read */
  bool untaken;                   /* the result of request `got` is there for take */
  bool have;                      /* periodic: a read has finished */
  int rc;                         /* the newest read's return */
  uint64_t result_seq;            /* the ticket of the read that made result */
  void *request;                  /* the newest request (request_size bytes) */
  void *result;                   /* the newest result */
  pthread_cond_t wake;            /* its own: a request for it, or stop (only it waits) */
  pthread_t thread;
} reader_t;

/* The sweep's thread and the call it serves (all under the readers' lock). */
typedef struct {
  bool started, created; /* its condition made; its thread running (to join) */
  bool ready, failed;    /* ready: its session is open; failed: it cannot sweep */
  bool busy;             /* in a read */
  bool open;             /* the call it serves still waits (it takes results then) */
  pthread_t thread;
  pthread_cond_t wake; /* a call for it, or stop */
  uint64_t want, got;  /* the call asked for and finished (the readers' gen) */
  uint64_t mark_ms;    /* when the sweep began, or its read in progress began */
  uint64_t slow_ns;    /* when a sweep was last slow (0: never) */
  size_t n, pos, end;  /* the call's n devices; reading (or next) pos, up to end */
  size_t cap;          /* of the arrays below */
  reader_t **list;     /* the call's readers, NULL for one not swept */
  unsigned char *res;  /* n results */
  int *rcs;            /* n returns */
  bool *done;          /* n: read */
} sweep_t;

struct gpum_device_readers {
  gpum_device_readers_opts_t o;
  char *libraries; /* o.device's library paths (gpum__device_opts_dup): threads open later */
  void *user_copy; /* with user_size */
  pthread_mutex_t lock;
  /* A result (callers wait). Each reader waits on its own condition (reader_t.wake), so that
   * a request wakes its reader only, not every reader of the set to find it is not theirs. */
  pthread_cond_t cond;
  bool stop;
  unsigned refs; /* gpum_device_readers_stop and each running thread */
  uint64_t gen;
  size_t n, cap;
  reader_t **r; /* stable pointers: a reader's thread holds its own */
  uint64_t seq; /* read tickets (reader_t.result_seq) */
  sweep_t sw;
};

static void reader_free(gpum_device_readers_t *rs, reader_t *r) {
  if (rs->o.result_free && r->result)
    rs->o.result_free(r->result, rs->o.user);
  gpum_device_close(r->session);
  free(r->result);
  free(r->request);
  pthread_cond_destroy(&r->wake);
  free(r);
}

/* Drops one reference (lock held; unlocks); the last frees the block. */
static void unref(gpum_device_readers_t *rs) {
  bool last = --rs->refs == 0;
  pthread_mutex_unlock(&rs->lock);
  if (!last)
    return;
  for (size_t i = 0; i < rs->n; i++)
    reader_free(rs, rs->r[i]);
  free(rs->r);
  free(rs->sw.list);
  free(rs->sw.res);
  free(rs->sw.rcs);
  free(rs->sw.done);
  if (rs->sw.started)
    pthread_cond_destroy(&rs->sw.wake);
  free(rs->libraries);
  free(rs->user_copy);
  pthread_cond_destroy(&rs->cond);
  pthread_mutex_destroy(&rs->lock);
  free(rs);
}

/* Deadline for pthread_cond_timedwait and pthread_timedjoin_np, ms from now. */
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

/* The bytes of result that hold its content (opts.result_len), those copied and cleared. */
static size_t used(const gpum_device_readers_t *rs, const void *result) {
  if (!rs->o.result_len)
    return rs->o.result_size;
  size_t n = rs->o.result_len(result, rs->o.user);
  return n < rs->o.result_size ? n : rs->o.result_size;
}

/* One read into a fresh result, then published and announced (lock held on entry and exit). */
static void read_once(reader_t *r, void *request, void *scratch) {
  gpum_device_readers_t *rs = r->rs;
  size_t qn = rs->o.request_size;
  if (qn)
    memcpy(request, r->request, qn); /* the caller may ask again once this one is read */
  uint64_t seq = ++rs->seq;
  r->busy = true;
  r->busy_since_ms = gpum__os_mono_ms();
  pthread_mutex_unlock(&rs->lock);
  memset(scratch, 0, used(rs, scratch)); /* past it, zeros: nothing was written there */
  int rc = rs->o.read(r->session, r->index, qn ? request : NULL, scratch, rs->o.user);
  pthread_mutex_lock(&rs->lock);
  r->busy = false;
  if (seq > r->result_seq) {
    if (rs->o.result_free)
      rs->o.result_free(r->result, rs->o.user);
    memcpy(r->result, scratch, used(rs, scratch));
    r->rc = rc;
    r->result_seq = seq;
  } /* else a sweep's read that began later is there already (flat results: nothing to free) */
  pthread_cond_broadcast(&rs->cond);
  if (rs->o.notify && !rs->stop)
    rs->o.notify(r->index, rs->o.user);
}

static void *reader_main(void *arg) {
  reader_t *r = arg;
  gpum_device_readers_t *rs = r->rs;
  /* Opening loads the driver and counts the devices: it calls nothing on one device. */
  if (r->session == NULL && gpum_device_open(&rs->o.device, &r->session) != 0)
    r->session = NULL; /* the read function is told (NULL) and finds why in gpum_last_error */
  void *scratch = calloc(1, rs->o.result_size);
  void *request = calloc(1, rs->o.request_size ? rs->o.request_size : 1);
  pthread_mutex_lock(&rs->lock);
  while (scratch && request && !rs->stop) {
    if (rs->o.interval_ms > 0) {
      /* Every interval, and at once when a caller asks (gpum_device_readers_read). */
      uint64_t gen = r->want;
      r->cur = gen;
      read_once(r, request, scratch);
      r->got = gen;
      r->have = true;
      struct timespec until = after_ms(rs->o.interval_ms);
      while (!rs->stop && r->want == r->got &&
             pthread_cond_timedwait(&r->wake, &rs->lock, &until) != ETIMEDOUT)
        ;
    } else if (r->want == r->got) {
      pthread_cond_wait(&r->wake, &rs->lock);
    } else {
      uint64_t gen = r->want;
      r->cur = gen;
      r->untaken = false;
      read_once(r, request, scratch);
      r->got = gen;
      r->untaken = true;
    }
  }
  pthread_mutex_unlock(&rs->lock);
  free(scratch);
  free(request);
  pthread_mutex_lock(&rs->lock);
  unref(rs);
  return NULL;
}

/* The sweep's thread: each call's devices read one after the other through its own session,
 * each result kept for the call (while it waits) and, periodic, as its reader's newest. */
static void *sweep_main(void *arg) {
  gpum_device_readers_t *rs = arg;
  sweep_t *sw = &rs->sw;
  size_t qn = rs->o.request_size, size = rs->o.result_size;
  gpum_device_session_t *session = NULL;
  int orc = gpum_device_open(&rs->o.device, &session);
  void *scratch = calloc(1, size);
  void *request = calloc(1, qn ? qn : 1);
  pthread_mutex_lock(&rs->lock);
  sw->failed = orc != 0 || !scratch || !request;
  sw->ready = !sw->failed;
  while (!rs->stop && !sw->failed) {
    if (sw->got == sw->want) {
      pthread_cond_wait(&sw->wake, &rs->lock);
      continue;
    }
    uint64_t gen = sw->want, began_ns = gpum__os_mono_ns();
    for (; !rs->stop && sw->pos < sw->end; sw->pos++) {
      size_t i = sw->pos;
      reader_t *r = sw->list[i];
      if (!r)
        continue;
      if (qn)
        memcpy(request, r->request, qn);
      uint64_t seq = ++rs->seq;
      sw->busy = true;
      sw->mark_ms = i == 0 ? began_ns / 1000000u : gpum__os_mono_ms();
      pthread_mutex_unlock(&rs->lock);
      memset(scratch, 0, used(rs, scratch));
      int rc = rs->o.read(session, r->index, qn ? request : NULL, scratch, rs->o.user);
      size_t len = used(rs, scratch);
      pthread_mutex_lock(&rs->lock);
      sw->busy = false;
      if (sw->open) {
        memcpy(sw->res + i * size, scratch, len);
        sw->rcs[i] = rc;
        sw->done[i] = true;
      }
      if (rs->o.interval_ms > 0 && seq > r->result_seq) {
        memcpy(r->result, scratch, len);
        r->rc = rc;
        r->result_seq = seq;
        r->have = true;
      }
      if (rs->o.notify && !rs->stop)
        rs->o.notify(r->index, rs->o.user);
    }
    uint64_t now_ns = gpum__os_mono_ns();
    if (now_ns - began_ns > SWEEP_SLOW_NS) /* the reads, and the lock between them */
      sw->slow_ns = now_ns;
    sw->got = gen;
    pthread_mutex_unlock(&rs->lock); /* the caller wakes to a free lock */
    pthread_cond_broadcast(&rs->cond);
    pthread_mutex_lock(&rs->lock);
  }
  sw->ready = false;
  pthread_cond_broadcast(&rs->cond);
  pthread_mutex_unlock(&rs->lock);
  gpum_device_close(session);
  free(scratch);
  free(request);
  pthread_mutex_lock(&rs->lock);
  unref(rs);
  return NULL;
}

/* Starts the sweep's thread (lock held); without it every read goes to the readers. Its
 * session is opened on it: the sweep is ready for the reads that come once it is open. */
static void sweep_start(gpum_device_readers_t *rs) {
  sweep_t *sw = &rs->sw;
  pthread_cond_init(&sw->wake, NULL);
  sw->started = true;
  if (pthread_create(&sw->thread, NULL, sweep_main, rs) != 0) {
    sw->failed = true;
    return;
  }
  sw->created = true;
  rs->refs++;
}

/* Whether a call of n devices can be swept now (lock held): the sweep is idle, its last slow
 * sweep long enough ago, and its arrays hold n. */
static bool sweep_usable(gpum_device_readers_t *rs, size_t n) {
  sweep_t *sw = &rs->sw;
  if (!sw->ready || sw->failed || sw->open || sw->busy || sw->got != sw->want || n < 2 ||
      (sw->slow_ns && gpum__os_mono_ns() - sw->slow_ns < SWEEP_PAUSE_NS))
    return false;
  if (n > sw->cap) {
    reader_t **list = realloc(sw->list, n * sizeof *list);
    if (list)
      sw->list = list;
    unsigned char *res = realloc(sw->res, n * rs->o.result_size);
    if (res)
      sw->res = res;
    int *rcs = realloc(sw->rcs, n * sizeof *rcs);
    if (rcs)
      sw->rcs = rcs;
    bool *done = realloc(sw->done, n * sizeof *done);
    if (done)
      sw->done = done;
    if (!list || !res || !rcs || !done)
      return false;
    sw->cap = n;
  }
  return true;
}

/* A new reader of device index (lock held), its session opened now when open_session. */
static int add_reader(gpum_device_readers_t *rs, unsigned index, bool open_session,
                      reader_t **out) {
  if (rs->n == rs->cap) {
    size_t cap = rs->cap ? rs->cap * 2 : 8;
    reader_t **p = realloc(rs->r, cap * sizeof *p);
    if (!p)
      return gpum_error(GPUM_ENOMEM, "out of memory");
    rs->r = p;
    rs->cap = cap;
  }
  reader_t *r = calloc(1, sizeof *r);
  if (r) {
    pthread_cond_init(&r->wake, NULL);
    r->result = calloc(1, rs->o.result_size);
    r->request = calloc(1, rs->o.request_size ? rs->o.request_size : 1);
  }
  if (!r || !r->result || !r->request) {
    if (r)
      reader_free(rs, r);
    return gpum_error(GPUM_ENOMEM, "out of memory");
  }
  r->rs = rs;
  r->index = index;
  r->rc = GPUM_EAGAIN;
  int rc = open_session ? gpum_device_open(&rs->o.device, &r->session) : 0;
  if (rc != 0) {
    reader_free(rs, r);
    return rc;
  }
  rs->r[rs->n++] = r;
  if (pthread_create(&r->thread, NULL, reader_main, r) != 0)
    return gpum_error(GPUM_ENOMEM, "cannot start a reader for device %u", index);
  r->started = true;
  rs->refs++;
  *out = r;
  return 0;
}

/* The reader of device index, started when new (lock held). NULL when it cannot start. */
static reader_t *reader(gpum_device_readers_t *rs, unsigned index) {
  for (size_t i = 0; i < rs->n; i++)
    if (rs->r[i]->index == index)
      return rs->r[i]->started ? rs->r[i] : NULL;
  reader_t *r = NULL;
  return add_reader(rs, index, false, &r) == 0 ? r : NULL;
}

static reader_t *find(gpum_device_readers_t *rs, unsigned index) {
  for (size_t i = 0; i < rs->n; i++)
    if (rs->r[i]->index == index)
      return rs->r[i];
  return NULL;
}

int gpum_device_readers_start(const gpum_device_readers_opts_t *opts, const unsigned *indexes,
                              size_t n, gpum_device_readers_t **out) {
  *out = NULL;
  if (!opts || !opts->read || opts->result_size == 0 || opts->interval_ms > 3600000u ||
      (opts->user_size > 0 && opts->user == NULL))
    return gpum_error(GPUM_EINVAL, "device readers: a read function, a result size and an "
                                   "interval of at most an hour are needed");
  gpum_device_readers_t *rs = calloc(1, sizeof *rs);
  if (!rs)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  rs->o = *opts;
  if (gpum__device_opts_dup(&opts->device, &rs->o.device, &rs->libraries) != 0 ||
      (opts->user_size > 0 && !(rs->user_copy = malloc(opts->user_size)))) {
    free(rs->libraries);
    free(rs);
    return gpum_error(GPUM_ENOMEM, "out of memory");
  }
  if (opts->user_size > 0) {
    memcpy(rs->user_copy, opts->user, opts->user_size);
    rs->o.user = rs->user_copy;
  }
  rs->refs = 1;
  pthread_mutex_init(&rs->lock, NULL);
  pthread_cond_init(&rs->cond, NULL);
  pthread_mutex_lock(&rs->lock);
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    reader_t *r = NULL;
    rc = add_reader(rs, indexes[i], opts->open_at_start, &r);
  }
  pthread_mutex_unlock(&rs->lock);
  if (rc != 0) {
    gpum_device_readers_stop(rs);
    return rc;
  }
  *out = rs;
  return 0;
}

/* Asks reader r for request gen (lock held); NULL when it is not to be waited for: busy with
 * an earlier request (hung), or, periodic, with its own read for timeout_ms already. */
static reader_t *ask(gpum_device_readers_t *rs, reader_t *r, uint64_t gen, uint64_t now_ms,
                     unsigned timeout_ms) {
  r->want = gen;
  pthread_cond_signal(&r->wake);
  if (r->busy && r->cur < gen &&
      (rs->o.interval_ms == 0 || now_ms - r->busy_since_ms >= timeout_ms))
    return NULL;
  return r;
}

/* The sweep has spent SWEEP_HANDOFF_MS on one read, or has not begun: the devices it has not
 * begun go to their own readers (lock held). */
static void sweep_handoff(gpum_device_readers_t *rs, reader_t **want, bool *swept, size_t n,
                          uint64_t gen, uint64_t now_ms, unsigned timeout_ms) {
  sweep_t *sw = &rs->sw;
  size_t from = sw->busy ? sw->pos + 1 : sw->pos;
  for (size_t j = from; j < n && j < sw->end; j++) {
    if (!swept[j])
      continue;
    swept[j] = false;
    want[j] = ask(rs, want[j], gen, now_ms, timeout_ms);
  }
  sw->end = from;
  if (sw->busy) /* a slow read, not a late start: the next calls go to the readers a while */
    sw->slow_ns = gpum__os_mono_ns();
}

int gpum_device_readers_read(gpum_device_readers_t *rs, const unsigned *indexes, size_t n,
                             unsigned timeout_ms, void *results, int *rcs) {
  reader_t **want = calloc(n ? n : 1, sizeof *want);
  bool *swept = calloc(n ? n : 1, sizeof *swept);
  if (!want || !swept) {
    free(want);
    free(swept);
    return gpum_error(GPUM_ENOMEM, "out of memory");
  }
  pthread_mutex_lock(&rs->lock);
  uint64_t gen = ++rs->gen;
  for (size_t i = 0; i < n; i++) {
    want[i] = reader(rs, indexes[i]);
    if (!want[i]) {
      pthread_mutex_unlock(&rs->lock);
      free(want);
      free(swept);
      return gpum_error(GPUM_ENOMEM, "cannot start a reader for device %u", indexes[i]);
    }
  }
  /* Every reader answers, or the time is up. A reader busy with an older request is not
   * waited for: that request timed out, the call hangs. A periodic reader busy with its own
   * read is, unless it has been at it for the whole timeout already (a hung call): it reads
   * this request next. With the sweep, such a reader's device is not swept (it would hold the
   * sweep up) and not waited for either. */
  uint64_t start = gpum__os_mono_ms(), end = start + timeout_ms;
  sweep_t *sw = &rs->sw;
  if (!sw->started && !rs->o.result_free && n >= 2 && !rs->stop)
    sweep_start(rs); /* at the first read that could be swept (ready for a later one) */
  bool sweeping = sweep_usable(rs, n);
  for (size_t i = 0; i < n; i++) {
    reader_t *r = want[i];
    if (sweeping && !(r->busy && r->cur < gen &&
                      (rs->o.interval_ms == 0 || start - r->busy_since_ms >= timeout_ms))) {
      swept[i] = true;
      continue;
    }
    /* A sweep stuck in this device's read for the timeout is a hung call too: its reader
     * would only hang beside it. */
    bool stuck = sw->busy && sw->list[sw->pos] == r && start - sw->mark_ms >= timeout_ms;
    want[i] = sweeping || stuck ? NULL : ask(rs, r, gen, start, timeout_ms);
  }
  if (sweeping) {
    for (size_t i = 0; i < n; i++) {
      sw->list[i] = swept[i] ? want[i] : NULL;
      sw->done[i] = false;
    }
    sw->n = n;
    sw->pos = 0;
    sw->end = n;
    sw->open = true;
    sw->mark_ms = start;
    sw->want = gen;
    /* Woken with the lock released: on this CPU it would otherwise find it taken and sleep
     * again until this thread waits. */
    pthread_mutex_unlock(&rs->lock);
    pthread_cond_signal(&sw->wake);
    pthread_mutex_lock(&rs->lock);
  }
  for (;;) {
    bool waiting = false;
    for (size_t i = 0; i < n; i++)
      waiting |= swept[i] ? !sw->done[i] && sw->got < gen : want[i] && want[i]->got < gen;
    uint64_t now = gpum__os_mono_ms(), until = end;
    if (!waiting || now >= end)
      break;
    if (sweeping && sw->got < gen && sw->pos + sw->busy < sw->end) { /* some not begun */
      if (now - sw->mark_ms >= SWEEP_HANDOFF_MS) {
        sweep_handoff(rs, want, swept, n, gen, now, timeout_ms);
        continue;
      }
      if (sw->mark_ms + SWEEP_HANDOFF_MS < until)
        until = sw->mark_ms + SWEEP_HANDOFF_MS;
    }
    struct timespec ts = after_ms((unsigned)(until - now));
    pthread_cond_timedwait(&rs->cond, &rs->lock, &ts);
  }
  for (size_t i = 0; i < n; i++) {
    void *dst = (char *)results + i * rs->o.result_size;
    if (swept[i]) {
      rcs[i] = sw->done[i] ? sw->rcs[i] : GPUM_ETIMEDOUT;
      if (sw->done[i]) {
        const void *src = sw->res + i * rs->o.result_size;
        memcpy(dst, src, used(rs, src));
      }
      continue;
    }
    if (!want[i] || want[i]->got < gen) {
      rcs[i] = GPUM_ETIMEDOUT;
      continue;
    }
    size_t len = used(rs, want[i]->result);
    memcpy(dst, want[i]->result, len);
    if (rs->o.interval_ms == 0) { /* handed over with what it owns */
      memset(want[i]->result, 0, len);
      want[i]->untaken = false;
    } /* periodic: a copy; the result stays the newest for gpum_device_readers_latest */
    rcs[i] = want[i]->rc;
  }
  if (sweeping) { /* a sweep still at it (timed out) reads no further device for nobody */
    sw->open = false;
    size_t stop_at = sw->busy ? sw->pos + 1 : sw->pos;
    if (sw->got < gen && stop_at < sw->end)
      sw->end = stop_at;
  }
  pthread_mutex_unlock(&rs->lock);
  free(want);
  free(swept);
  return 0;
}

int gpum_device_readers_request(gpum_device_readers_t *rs, unsigned index, const void *request) {
  pthread_mutex_lock(&rs->lock);
  reader_t *r = reader(rs, index);
  int rc = 0;
  if (!r) {
    rc = gpum_error(GPUM_ENOMEM, "cannot start a reader for device %u", index);
  } else if (r->busy || r->want != r->got) {
    rc = gpum_error(GPUM_EBUSY, "device %u: the previous read has not finished", index);
  } else {
    size_t qn = rs->o.request_size;
    if (qn && request)
      memcpy(r->request, request, qn);
    else if (qn)
      memset(r->request, 0, qn);
    r->want = ++rs->gen;
    pthread_cond_signal(&r->wake);
  }
  pthread_mutex_unlock(&rs->lock);
  return rc;
}

int gpum_device_readers_take(gpum_device_readers_t *rs, unsigned index, void *result, int *rc) {
  pthread_mutex_lock(&rs->lock);
  reader_t *r = find(rs, index);
  int ret = r ? 0 : GPUM_ENODEV;
  if (r && r->untaken && r->got == r->want) {
    size_t len = used(rs, r->result);
    memcpy(result, r->result, len); /* what it owns goes with it */
    memset(r->result, 0, len);
    r->untaken = false;
    *rc = r->rc;
    ret = 1;
  }
  pthread_mutex_unlock(&rs->lock);
  return ret;
}

int gpum_device_readers_latest(gpum_device_readers_t *rs, unsigned index, void *out) {
  pthread_mutex_lock(&rs->lock);
  reader_t *r = find(rs, index);
  int rc = r ? GPUM_EAGAIN : GPUM_ENODEV;
  if (r && r->have) {
    memcpy(out, r->result, used(rs, r->result));
    rc = r->rc;
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
  for (size_t i = 0; i < rs->n; i++)
    pthread_cond_signal(&rs->r[i]->wake);
  bool sweep = rs->sw.created, sweep_busy = rs->sw.busy;
  if (rs->sw.started)
    pthread_cond_signal(&rs->sw.wake);
  size_t n = rs->n;
  /* The readers' list does not change once stopping: nothing adds a reader after stop. */
  reader_t **r = rs->r;
  pthread_mutex_unlock(&rs->lock);
  struct timespec until = after_ms(rs->o.stop_wait_ms);
  for (size_t i = 0; i < n; i++) {
    if (!r[i]->started)
      continue;
    pthread_mutex_lock(&rs->lock);
    bool busy = r[i]->busy; /* once stopping, an idle reader starts no read: it exits */
    pthread_mutex_unlock(&rs->lock);
    if (!busy) {
      pthread_join(r[i]->thread, NULL);
      continue;
    }
    if (rs->o.stop_wait_ms > 0 && pthread_timedjoin_np(r[i]->thread, NULL, &until) == 0)
      continue;
    /* Stuck in a driver call: left (with its session) to return, or to the process's end. */
    gpum_log(GPUM_LOG_INFO, "device", "device %u: reader thread stuck in the driver: left behind",
             r[i]->index);
    pthread_detach(r[i]->thread);
  }
  if (sweep && !sweep_busy) {
    pthread_join(rs->sw.thread, NULL);
  } else if (sweep &&
             !(rs->o.stop_wait_ms > 0 && pthread_timedjoin_np(rs->sw.thread, NULL, &until) == 0)) {
    gpum_log(GPUM_LOG_INFO, "device", "the sweep's thread is stuck in the driver: left behind");
    pthread_detach(rs->sw.thread);
  }
  pthread_mutex_lock(&rs->lock);
  unref(rs);
}
