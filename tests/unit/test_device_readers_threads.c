/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the hang-safe device readers (src/lib/device/readers.c), with a read function
 * that can be made to hang on one device: a read on request returns at its deadline with that
 * device marked GPUM_ETIMEDOUT and the others' results handed over; a reader still stuck in an
 * earlier read is not waited for again; it answers once released; stopping leaves a stuck
 * reader behind and its thread frees the block when the call returns (ASan checks that
 * nothing leaks); a periodic reader keeps the newest result for latest, reads at once when a
 * caller asks (a result made after the ask, kept for latest too) and is not waited for once
 * it has been stuck for a whole timeout; a request carries its
 * data, notify says when its result can be taken, a reader in a call refuses the next request
 * (EBUSY), and the callbacks get the readers' own copy of the context; results of a fixed size
 * mostly empty are copied as far as result_len says, each read beginning on a zeroed one. Sessions
 * are opened on the host backend: no driver is needed. Runs under ThreadSanitizer too (the _threads
 * suffix).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <gpum/device.h>
#include <gpum/error.h>

typedef struct {
  unsigned index;
  unsigned seq; /* reads (below) once this read was counted: which read made it */
  int *owned;   /* a result that owns memory, handed over with it */
} result_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int hang_index = -1; /* the device whose reads block while hang is set */
static bool own = true;     /* results own memory (on request); periodic ones must not */
static bool hang;
static unsigned reads, frees;

static int read_fn(gpum_device_session_t *s, unsigned index, const void *request, void *result,
                   void *user) {
  (void)request, (void)user;
  result_t *r = result;
  pthread_mutex_lock(&mu);
  while (hang && (int)index == hang_index)
    pthread_cond_wait(&cv, &mu);
  reads++;
  r->seq = reads;
  bool mine = own;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  r->index = index;
  if (request != NULL) /* a request's number is read back as the result's */
    r->index = (unsigned)*(const int *)request;
  r->owned = mine ? malloc(sizeof *r->owned) : NULL;
  if (r->owned)
    *r->owned = (int)index * 10;
  return s ? 0 : GPUM_EDRIVER;
}

static void free_fn(void *result, void *user) {
  (void)user;
  result_t *r = result;
  free(r->owned);
  r->owned = NULL;
  pthread_mutex_lock(&mu);
  frees++;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

static void set_hang(int index, bool on) {
  pthread_mutex_lock(&mu);
  hang_index = index;
  hang = on;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

/* Waits (10 s at most) until *counter reaches want. */
static bool wait_count(unsigned *counter, unsigned want) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 10;
  pthread_mutex_lock(&mu);
  while (*counter < want && pthread_cond_timedwait(&cv, &mu, &until) == 0)
    ;
  bool ok = *counter >= want;
  pthread_mutex_unlock(&mu);
  return ok;
}

static gpum_device_readers_opts_t opts(unsigned interval_ms) {
  gpum_device_readers_opts_t o = {.result_size = sizeof(result_t),
                                  .read = read_fn,
                                  .result_free = free_fn,
                                  .interval_ms = interval_ms};
  gpum_device_open_opts_init(&o.device);
  o.device.backend = GPUM_BACKEND_HOST;
  return o;
}

static void test_on_request_with_a_hung_device(void **state) {
  (void)state;
  gpum_device_readers_opts_t o = opts(0);
  gpum_device_readers_t *rs = NULL;
  assert_int_equal(gpum_device_readers_start(&o, NULL, 0, &rs), 0);
  unsigned idx[3] = {0, 1, 2};
  result_t res[3];
  int rcs[3];
  /* Every reader up and answering first (no deadline to meet: a minute). */
  memset(res, 0, sizeof res);
  assert_int_equal(gpum_device_readers_read(rs, idx, 3, 60000, res, rcs), 0);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(rcs[i], 0);
    free(res[i].owned);
  }
  /* Device 1 hangs: the read returns at its deadline (2 s) with 1 marked. The idle readers of
   * 0 and 2 answer in that time on any sane machine, but how fast a thread gets a CPU is not
   * this test's verdict: one that was late is asked again alone, without a deadline to meet. */
  set_hang(1, true);
  memset(res, 0, sizeof res);
  assert_int_equal(gpum_device_readers_read(rs, idx, 3, 2000, res, rcs), 0);
  assert_int_equal(rcs[1], GPUM_ETIMEDOUT);
  assert_null(res[1].owned); /* left alone */
  for (unsigned i = 0; i < 3; i += 2) {
    if (rcs[i] == GPUM_ETIMEDOUT) {
      assert_null(res[i].owned);
      assert_int_equal(gpum_device_readers_read(rs, idx + i, 1, 60000, res + i, rcs + i), 0);
    }
    assert_int_equal(rcs[i], 0);
    assert_int_equal(res[i].index, i);
    assert_int_equal(*res[i].owned, 10 * i); /* handed over: ours to free */
    free(res[i].owned);
  }
  /* Device 1 is still in its first read: not waited for; the others answer. */
  memset(res, 0, sizeof res);
  assert_int_equal(gpum_device_readers_read(rs, idx, 3, 60000, res, rcs), 0);
  assert_int_equal(rcs[1], GPUM_ETIMEDOUT);
  assert_int_equal(rcs[0], 0);
  free(res[0].owned);
  free(res[2].owned);
  /* Released, it ends its stuck read (and serves the requests that came meanwhile), and then
   * answers the next request that finds it idle: no request is waited for while it is busy
   * with an older one, so ask until one is (each ask returns at once or with the answer),
   * for up to a minute: on a loaded machine the released thread may wait long for a CPU. */
  set_hang(1, false);
  int rc = GPUM_ETIMEDOUT;
  struct timespec t0, now, pause = {0, 1000000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (now = t0; rc == GPUM_ETIMEDOUT && now.tv_sec - t0.tv_sec < 60;) {
    memset(res, 0, sizeof res);
    assert_int_equal(gpum_device_readers_read(rs, idx + 1, 1, 60000, res, rcs), 0);
    rc = rcs[0];
    if (rc == GPUM_ETIMEDOUT)
      nanosleep(&pause, NULL); /* lets the released reader run */
    clock_gettime(CLOCK_MONOTONIC, &now);
  }
  assert_int_equal(rc, 0);
  assert_int_equal(*res[0].owned, 10);
  free(res[0].owned);
  gpum_device_readers_stop(rs);
}

static void test_stop_leaves_a_stuck_reader(void **state) {
  (void)state;
  gpum_device_readers_opts_t o = opts(0);
  gpum_device_readers_t *rs = NULL;
  unsigned idx[2] = {5, 6};
  assert_int_equal(gpum_device_readers_start(&o, idx, 2, &rs), 0);
  set_hang(6, true);
  result_t res[2] = {0};
  int rcs[2];
  assert_int_equal(gpum_device_readers_read(rs, idx, 2, 2000, res, rcs), 0);
  assert_int_equal(rcs[1], GPUM_ETIMEDOUT);
  free(res[0].owned); /* NULL if reader 5 was late: the test is about reader 6 */
  pthread_mutex_lock(&mu);
  unsigned before = frees;
  pthread_mutex_unlock(&mu);
  gpum_device_readers_stop(rs); /* returns although device 6's read still blocks */
  set_hang(6, false);
  /* Its read returns: the old result (none owned) and then, as the last reference goes, the
   * block's results are freed: two frees for reader 6 (its results) and one for reader 5. */
  assert_true(wait_count(&frees, before + 3));
}

static void test_periodic_latest(void **state) {
  (void)state;
  gpum_device_readers_opts_t o = opts(5);
  o.result_free = NULL; /* latest copies: a periodic result owns nothing */
  pthread_mutex_lock(&mu);
  own = false;
  pthread_mutex_unlock(&mu);
  gpum_device_readers_t *rs = NULL;
  unsigned idx[2] = {0, 3};
  pthread_mutex_lock(&mu);
  unsigned start = reads;
  pthread_mutex_unlock(&mu);
  assert_int_equal(gpum_device_readers_start(&o, idx, 2, &rs), 0);
  assert_true(wait_count(&reads, start + 6)); /* at least three rounds of two devices */
  result_t r;
  assert_int_equal(gpum_device_readers_latest(rs, 3, &r), 0);
  assert_int_equal(r.index, 3);
  assert_null(r.owned);
  assert_int_equal(gpum_device_readers_latest(rs, 9, &r), GPUM_ENODEV);
  gpum_device_readers_stop(rs);
  pthread_mutex_lock(&mu);
  own = true;
  pthread_mutex_unlock(&mu);
}

static unsigned reads_now(void) {
  pthread_mutex_lock(&mu);
  unsigned n = reads;
  pthread_mutex_unlock(&mu);
  return n;
}

/* Reads the n devices of idx through rs, each read begun after the ask: every result made then
 * and kept as the device's latest. */
static void read_fresh(gpum_device_readers_t *rs, const unsigned *idx, size_t n, result_t *res,
                       int *rcs) {
  unsigned before = reads_now();
  memset(res, 0, n * sizeof *res);
  assert_int_equal(gpum_device_readers_read(rs, idx, n, 60000, res, rcs), 0);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(rcs[i], 0);
    assert_int_equal(res[i].index, idx[i]);
    assert_true(res[i].seq > before);
    result_t l;
    assert_int_equal(gpum_device_readers_latest(rs, idx[i], &l), 0);
    assert_int_equal(l.seq, res[i].seq);
  }
}

static void test_periodic_read_on_request(void **state) {
  (void)state;
  gpum_device_readers_opts_t o = opts(3600000); /* no periodic read during the test */
  o.result_free = NULL;
  pthread_mutex_lock(&mu);
  own = false;
  pthread_mutex_unlock(&mu);
  gpum_device_readers_t *rs = NULL;
  unsigned idx[2] = {0, 1};
  unsigned start = reads_now();
  assert_int_equal(gpum_device_readers_start(&o, idx, 2, &rs), 0);
  assert_true(wait_count(&reads, start + 2)); /* the first periodic round */
  /* A read made after the ask, copied; latest then gives the same result. */
  result_t res[2];
  int rcs[2];
  read_fresh(rs, idx, 2, res, rcs);
  /* Device 1 hangs in the read asked for: that ask times out (1 s) ... */
  set_hang(1, true);
  memset(res, 0, sizeof res);
  assert_int_equal(gpum_device_readers_read(rs, idx, 2, 1000, res, rcs), 0);
  assert_int_equal(rcs[1], GPUM_ETIMEDOUT);
  if (rcs[0] == GPUM_ETIMEDOUT) /* the healthy reader was late for a CPU: asked again alone */
    assert_int_equal(gpum_device_readers_read(rs, idx, 1, 60000, res, rcs), 0);
  assert_int_equal(rcs[0], 0);
  /* ... and the next one, with a shorter timeout than it has been stuck, does not wait for it:
   * it is told at once (a minute would be waited otherwise). */
  assert_int_equal(gpum_device_readers_read(rs, idx + 1, 1, 500, res, rcs), 0);
  assert_int_equal(rcs[0], GPUM_ETIMEDOUT);
  /* Released, it finishes the stuck read and answers the next ask with a fresh result. */
  unsigned before = reads_now();
  set_hang(1, false);
  assert_int_equal(gpum_device_readers_read(rs, idx + 1, 1, 60000, res, rcs), 0);
  assert_int_equal(rcs[0], 0);
  assert_true(res[0].seq > before);
  /* The stuck read (the sweep's: it read both devices of the read asked for) has returned
   * too before the readers stop, so that none reads the flag below as a result's. */
  assert_true(wait_count(&reads, before + 2));
  gpum_device_readers_stop(rs);
  pthread_mutex_lock(&mu);
  own = true;
  pthread_mutex_unlock(&mu);
}

/* Flat periodic results are read by one thread for all devices of a read (the sweep): a
 * device that hangs in it holds up neither the devices after it (their own readers take them
 * over) nor, once stuck for a whole timeout, the next reads; released, every device answers
 * fresh again, and latest gives what the read copied. */
static void test_sweep_past_a_hung_device(void **state) {
  (void)state;
  gpum_device_readers_opts_t o = opts(3600000); /* no periodic read during the test */
  o.result_free = NULL;
  pthread_mutex_lock(&mu);
  own = false;
  pthread_mutex_unlock(&mu);
  gpum_device_readers_t *rs = NULL;
  unsigned idx[3] = {0, 1, 2};
  unsigned start = reads_now();
  assert_int_equal(gpum_device_readers_start(&o, idx, 3, &rs), 0);
  assert_true(wait_count(&reads, start + 3)); /* the first periodic round */
  result_t res[3];
  int rcs[3];
  /* Twice: the first read starts the sweep, which serves the reads after its session is open
   * (by the second, on any sane machine; a read is the same either way). */
  for (int k = 0; k < 2; k++) {
    read_fresh(rs, idx, 3, res, rcs);
  }
  unsigned before;
  /* Device 1 hangs: 0 and 2 answer (2 through its own reader once the sweep is stuck in 1),
   * 1 times out. A healthy reader late for a CPU is asked again alone. */
  set_hang(1, true);
  before = reads_now();
  memset(res, 0, sizeof res);
  assert_int_equal(gpum_device_readers_read(rs, idx, 3, 2000, res, rcs), 0);
  assert_int_equal(rcs[1], GPUM_ETIMEDOUT);
  for (unsigned i = 0; i < 3; i += 2) {
    if (rcs[i] == GPUM_ETIMEDOUT)
      assert_int_equal(gpum_device_readers_read(rs, idx + i, 1, 60000, res + i, rcs + i), 0);
    assert_int_equal(rcs[i], 0);
    assert_int_equal(res[i].index, i);
    assert_true(res[i].seq > before);
  }
  /* Stuck for longer than the next read's timeout: not waited for (a minute otherwise). */
  memset(res, 0, sizeof res);
  assert_int_equal(gpum_device_readers_read(rs, idx, 3, 1000, res, rcs), 0);
  assert_int_equal(rcs[1], GPUM_ETIMEDOUT);
  /* Released: every device answers a read with a fresh result again. */
  before = reads_now();
  set_hang(1, false);
  memset(res, 0, sizeof res);
  assert_int_equal(gpum_device_readers_read(rs, idx, 3, 60000, res, rcs), 0);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(rcs[i], 0);
    assert_int_equal(res[i].index, idx[i]);
    assert_true(res[i].seq > before);
  }
  assert_true(wait_count(&reads, before + 4)); /* and the stuck one has returned (above) */
  gpum_device_readers_stop(rs);
  pthread_mutex_lock(&mu);
  own = true;
  pthread_mutex_unlock(&mu);
}

typedef struct {
  int tag;
} ctx_t;

static unsigned notified;
static int notified_tag;

static void notify_fn(unsigned index, void *user) {
  (void)index;
  pthread_mutex_lock(&mu);
  notified++;
  notified_tag = ((ctx_t *)user)->tag;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

static void test_request_take_notify(void **state) {
  (void)state;
  gpum_device_readers_opts_t o = opts(0);
  ctx_t ctx = {.tag = 42};
  o.request_size = sizeof(int);
  o.notify = notify_fn;
  o.user = &ctx;
  o.user_size = sizeof ctx;
  o.open_at_start = true;
  unsigned idx[1] = {4};
  gpum_device_readers_t *rs = NULL;
  assert_int_equal(gpum_device_readers_start(&o, idx, 1, &rs), 0);
  ctx.tag = 0; /* the readers use their own copy */
  result_t r = {0};
  int rc = -1;
  assert_int_equal(gpum_device_readers_take(rs, 4, &r, &rc), 0); /* nothing asked yet */
  assert_int_equal(gpum_device_readers_take(rs, 9, &r, &rc), GPUM_ENODEV);
  pthread_mutex_lock(&mu);
  unsigned before = notified;
  pthread_mutex_unlock(&mu);
  int q = 7;
  assert_int_equal(gpum_device_readers_request(rs, 4, &q), 0);
  assert_true(wait_count(&notified, before + 1));
  assert_int_equal(notified_tag, 42);
  assert_int_equal(gpum_device_readers_take(rs, 4, &r, &rc), 1);
  assert_int_equal(rc, 0);
  assert_int_equal(r.index, 7);
  free(r.owned);
  assert_int_equal(gpum_device_readers_take(rs, 4, &r, &rc), 0); /* taken */
  /* A reader in a call refuses the next request until it is done. */
  set_hang(4, true);
  q = 8;
  assert_int_equal(gpum_device_readers_request(rs, 4, &q), 0);
  assert_int_equal(gpum_device_readers_request(rs, 4, &q), GPUM_EBUSY);
  pthread_mutex_lock(&mu);
  before = notified;
  pthread_mutex_unlock(&mu);
  set_hang(4, false);
  assert_true(wait_count(&notified, before + 1));
  assert_int_equal(gpum_device_readers_take(rs, 4, &r, &rc), 1);
  assert_int_equal(r.index, 8);
  free(r.owned);
  gpum_device_readers_stop(rs);
}

/* Results of a fixed size mostly empty (result_len): a length, then that many bytes used. */
typedef struct {
  unsigned index;
  unsigned n;              /* bytes of data used */
  unsigned char data[256]; /* data[0..n) = the read's number; the rest zeros */
} var_t;

static unsigned var_reads;
static bool var_dirty; /* a read found a byte of its result not zeroed */

static int var_read(gpum_device_session_t *s, unsigned index, const void *request, void *result,
                    void *user) {
  (void)s, (void)request, (void)user;
  var_t *v = result;
  pthread_mutex_lock(&mu);
  unsigned k = ++var_reads;
  const unsigned char *b = result;
  for (size_t i = 0; i < sizeof *v; i++)
    var_dirty |= b[i] != 0;
  pthread_mutex_unlock(&mu);
  v->index = index;
  v->n = k % 2 ? 200 : 3; /* long and short in turn: a short one after a long one */
  memset(v->data, (int)(k & 0xff) | 1, v->n);
  return 0;
}

static size_t var_len(const void *result, void *user) {
  (void)user;
  const var_t *v = result;
  return offsetof(var_t, data) + (v->n < sizeof v->data ? v->n : sizeof v->data);
}

/* A copy holds the result's used bytes, each the read's number, and leaves the rest of the
 * caller's buffer as it was (sentinel 0xEE): only the used bytes are copied. */
static void check_var(const var_t *v, unsigned index) {
  assert_int_equal(v->index, index);
  assert_true(v->n == 200 || v->n == 3);
  for (unsigned i = 1; i < v->n; i++)
    assert_int_equal(v->data[i], v->data[0]);
  assert_true(v->data[0] != 0);
  for (size_t i = v->n; i < sizeof v->data; i++)
    assert_int_equal(v->data[i], 0xEE);
}

static void test_result_len(void **state) {
  (void)state;
  gpum_device_readers_opts_t o = {.result_size = sizeof(var_t),
                                  .read = var_read,
                                  .result_len = var_len,
                                  .interval_ms = 3600000};
  gpum_device_open_opts_init(&o.device);
  o.device.backend = GPUM_BACKEND_HOST;
  gpum_device_readers_t *rs = NULL;
  unsigned idx[2] = {0, 1};
  assert_int_equal(gpum_device_readers_start(&o, idx, 2, &rs), 0);
  for (int round = 0; round < 6; round++) { /* swept reads: long and short results in turn */
    var_t res[2];
    int rcs[2];
    memset(res, 0xEE, sizeof res);
    assert_int_equal(gpum_device_readers_read(rs, idx, 2, 60000, res, rcs), 0);
    for (int i = 0; i < 2; i++) {
      assert_int_equal(rcs[i], 0);
      check_var(&res[i], idx[i]);
      var_t l;
      memset(&l, 0xEE, sizeof l);
      assert_int_equal(gpum_device_readers_latest(rs, idx[i], &l), 0);
      check_var(&l, idx[i]);
      assert_int_equal(l.n, res[i].n);
      assert_int_equal(l.data[0], res[i].data[0]);
    }
  }
  gpum_device_readers_stop(rs);
  pthread_mutex_lock(&mu);
  assert_false(var_dirty); /* each read began on a zeroed result, however long the last one */
  assert_true(var_reads >= 12);
  pthread_mutex_unlock(&mu);
}

static void test_bad_options(void **state) {
  (void)state;
  gpum_device_readers_opts_t o = opts(0);
  gpum_device_readers_t *rs = NULL;
  o.read = NULL;
  assert_int_equal(gpum_device_readers_start(&o, NULL, 0, &rs), GPUM_EINVAL);
  o = opts(4000000);
  assert_int_equal(gpum_device_readers_start(&o, NULL, 0, &rs), GPUM_EINVAL);
  assert_null(rs);
  gpum_device_readers_stop(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_on_request_with_a_hung_device),
      cmocka_unit_test(test_stop_leaves_a_stuck_reader),
      cmocka_unit_test(test_periodic_latest),
      cmocka_unit_test(test_periodic_read_on_request),
      cmocka_unit_test(test_sweep_past_a_hung_device),
      cmocka_unit_test(test_request_take_notify),
      cmocka_unit_test(test_result_len),
      cmocka_unit_test(test_bad_options),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
