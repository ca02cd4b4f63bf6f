/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The direct reply writer of the hot socket replies (gpumd_reply_ok_resv, gpumd_engine_resv_write)
 * against the jansson path it replaces (gpumd_reply_ok with {"reservation":
 * gpumd_engine_resv_json}): byte for byte the same line for granted, queued (position and what it
 * waits for), pid-leased and multi-GPU reservations, with and without the token, with ids
 * of every JSON kind, and with labels and reasons that need escaping or are not UTF-8; and
 * that what is not UTF-8 (a label, a reason, a token of a damaged ledger row) goes out with
 * '?' for each byte that is not part of a character, the same on both paths, never raw. And
 * the document slot (resv_reply.c): the reply of the request that caused a transition copies
 * the event's document, and only while the slot holds that transition's document.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <event2/buffer.h>
#include <jansson.h>

#include "devices.h"
#include "engine.h"
#include "gpumd.h"
#include "net.h"
#include "obs.h"
#include "ops.h"
#include "proto.h"
#include "rest.h"

#define GIB (1024ull * 1024 * 1024)

typedef struct {
  gpumd_t d;
  gpumd_conn_t c;
} fixture_t;

static void add_device(gpumd_t *d, unsigned index, const char *uuid) {
  gpumd_sched_device_t v = {.index = index, .memory_total = 80 * GIB};
  snprintf(v.uuid, sizeof v.uuid, "%s", uuid);
  snprintf(v.name, sizeof v.name, "NVIDIA H100");
  assert_int_equal(gpumd_sched_update_device(d->sched, NULL, &v, 1000), 0);
}

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  assert_non_null(f);
  assert_int_equal(gpumd_sched_create(NULL, NULL, &f->d.sched), 0);
  add_device(&f->d, 0, "GPU-0000");
  add_device(&f->d, 1, "GPU-a\"b\\c\x01");
  f->c.d = &f->d;
  f->c.staged = evbuffer_new();
  assert_non_null(f->c.staged);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  evbuffer_free(f->c.staged);
  gpumd_resv_doc_free(&f->d);
  gpumd_sched_destroy(f->d.sched);
  free(f);
  return 0;
}

/* The staged line, taken out of the buffer (caller frees). */
static char *take(fixture_t *f) {
  size_t n = evbuffer_get_length(f->c.staged);
  char *s = malloc(n + 1);
  assert_non_null(s);
  evbuffer_remove(f->c.staged, s, n);
  s[n] = '\0';
  return s;
}

/* The fast reply about r, written from r (no document in the slot for it). */
static void reply_resv(fixture_t *f, json_t *req_id, const gpumd_resv_t *r, bool with_token) {
  gpumd_resv_reply_t fast = {.r = *r, .with_token = with_token, .set = true};
  gpumd_reply_ok_resv(&f->c, req_id, &fast);
}

/* Both ways of replying about reservation id must give the same line. */
static void check_same(fixture_t *f, uint64_t id, json_t *req_id) {
  const gpumd_resv_t *r = gpumd_sched_find(f->d.sched, id);
  assert_non_null(r);
  for (int tok = 0; tok < 2; tok++) {
    gpumd_reply_ok(&f->c, req_id,
                   json_pack("{s:o}", "reservation", gpumd_engine_resv_json(&f->d, r, tok != 0)));
    char *want = take(f);
    reply_resv(f, req_id, r, tok != 0);
    char *got = take(f);
    assert_string_equal(got, want);
    assert_non_null(strstr(want, "\"reservation\":{\"id\":"));
    free(want);
    free(got);
  }
}

static uint64_t submit(fixture_t *f, uint64_t bytes, unsigned gpus, const char *label,
                       gpumd_lease_kind_t lease) {
  gpumd_sched_request_t q;
  gpumd_sched_request_init(&q);
  q.bytes_per_gpu = bytes;
  q.gpus = gpus;
  q.label = label;
  q.uid = 1000;
  q.pid = 4242;
  q.lease = lease;
  q.lease_pid = 4343;
  const gpumd_resv_t *r = NULL;
  assert_int_equal(gpumd_sched_submit(f->d.sched, NULL, &q, 2000, &r), 0);
  return r->id;
}

static void test_same_as_jansson(void **state) {
  fixture_t *f = *state;
  json_t *ids[] = {json_integer(7), json_string("req \"a\"\n"), json_null(), NULL};
  uint64_t granted = submit(f, 10 * GIB, 1, "plain", GPUMD_LEASE_CONNECTION);
  uint64_t both = submit(f, 20 * GIB, 2, "tab\there \"quoted\" \\ ünï", GPUMD_LEASE_PID);
  uint64_t bad_utf8 = submit(f, 1 * GIB, 1, "cut \xc3", GPUMD_LEASE_CONNECTION);
  /* A Slurm step's: its "slurm" object (null in the others). */
  gpumd_sched_request_t sq;
  gpumd_sched_request_init(&sq);
  sq.bytes_per_gpu = GIB;
  sq.slurm_job = "12345_7";
  sq.slurm_step = "batch";
  const gpumd_resv_t *sr = NULL;
  assert_int_equal(gpumd_sched_submit(f->d.sched, NULL, &sq, 2000, &sr), 0);
  uint64_t slurm = sr->id;
  uint64_t queued = submit(f, 70 * GIB, 2, "waits", GPUMD_LEASE_CONNECTION);
  assert_int_equal(gpumd_sched_find(f->d.sched, queued)->state, GPUMD_RESV_QUEUED);
  uint64_t all[] = {granted, both, bad_utf8, slurm, queued};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++)
      check_same(f, all[i], ids[k]);
  /* The invalid label goes out cleaned by both. */
  reply_resv(f, NULL, gpumd_sched_find(f->d.sched, bad_utf8), false);
  char *line = take(f);
  assert_non_null(strstr(line, "\"label\":\"cut ?\""));
  assert_non_null(strstr(line, "\"slurm\":null"));
  free(line);
  reply_resv(f, NULL, gpumd_sched_find(f->d.sched, slurm), false);
  line = take(f);
  assert_non_null(strstr(line, "\"slurm\":{\"job_id\":\"12345_7\",\"step_id\":\"batch\"}"));
  free(line);
  for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++)
    json_decref(ids[k]);
}

/* A reservation restored from a row whose token, label and reason are not UTF-8: every line
 * about it is valid UTF-8, each bad byte a '?', the same on both paths. */
static void test_not_utf8_replaced(void **state) {
  fixture_t *f = *state;
  gpumd_resv_t r = {.id = 41,
                    .state = GPUMD_RESV_GRANTED,
                    .uid = 1000,
                    .pid = 4242,
                    .bytes_per_gpu = GIB,
                    .gpus = 1,
                    .device_mask = 1,
                    .created_ns = 1000,
                    .granted_ns = 1000};
  snprintf(r.token, sizeof r.token,
           "0123456789abcdef\xff"
           "123456789abcde");
  snprintf(r.label, sizeof r.label, "l\xc3 \xc3\xa9");
  snprintf(r.reason, sizeof r.reason, "why \xed\xa0\x80 end");
  assert_int_equal(gpumd_sched_restore(f->d.sched, &r), 0);
  json_t *id = json_integer(3);
  check_same(f, r.id, id);
  reply_resv(f, id, gpumd_sched_find(f->d.sched, r.id), true);
  char *line = take(f);
  assert_true(gpumd_utf8_valid(line, strlen(line)));
  assert_non_null(strstr(line, "\"token\":\"0123456789abcdef?123456789abcde\""));
  assert_non_null(strstr(line, "\"label\":\"l? \xc3\xa9\""));
  assert_non_null(strstr(line, "\"reason\":\"why ??? end\""));
  free(line);
  json_decref(id);
}

/* What on_transition does for a transition of r caused by the request whose reply is fast:
 * the slot taken over, and the event's document written (into a scratch buffer). Returns that
 * document (caller frees). */
static char *transition(fixture_t *f, const gpumd_resv_t *r, gpumd_resv_reply_t *fast) {
  gpumd_actor_t a = {.uid = 1000, .pid = 4242, .conn = &f->c, .fast = fast};
  gpumd_cause_t cause = {.actor = &a, .about = r->id};
  gpumd_resv_doc_set(&f->d, &cause, r);
  struct evbuffer *b = evbuffer_new();
  assert_non_null(b);
  gpumd_jw_t w;
  gpumd_jw_init(&w, b);
  gpumd_resv_doc_write(&f->d, &w, r);
  assert_int_equal(gpumd_jw_end(&w), 0);
  size_t n = evbuffer_get_length(b);
  char *doc = malloc(n + 1);
  assert_non_null(doc);
  evbuffer_remove(b, doc, n);
  doc[n] = '\0';
  evbuffer_free(b);
  return doc;
}

/* The event's document is the reservation's, written once; the reply of the request that
 * caused the transition copies it, token put in: the same line as the jansson path, for every
 * kind of reservation, id and token choice. */
static void test_reply_copies_event_document(void **state) {
  fixture_t *f = *state;
  json_t *ids[] = {json_integer(7), json_string("req \"a\"\n"), json_null()};
  uint64_t rids[] = {submit(f, 10 * GIB, 1, "plain", GPUMD_LEASE_CONNECTION),
                     submit(f, 20 * GIB, 2, "tab\there \"quoted\" \\ ünï", GPUMD_LEASE_PID),
                     submit(f, 1 * GIB, 1, "cut \xc3", GPUMD_LEASE_CONNECTION)};
  for (size_t i = 0; i < sizeof rids / sizeof rids[0]; i++) {
    const gpumd_resv_t *r = gpumd_sched_find(f->d.sched, rids[i]);
    assert_int_equal(r->state, GPUMD_RESV_GRANTED);
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
      for (int tok = 0; tok < 2; tok++) {
        gpumd_resv_reply_t fast = {.r = *r, .with_token = tok != 0, .set = true};
        char *doc = transition(f, r, &fast);
        json_t *want_doc = gpumd_engine_resv_json(&f->d, r, false);
        char *want_text = json_dumps(want_doc, JSON_COMPACT);
        assert_string_equal(doc, want_text); /* what the events carry */
        free(want_text);
        json_decref(want_doc);
        assert_true(f->d.resv_doc.written);
        assert_int_equal(fast.doc_serial, f->d.resv_doc.serial);
        gpumd_reply_ok(&f->c, ids[k],
                       json_pack("{s:o}", "reservation", gpumd_engine_resv_json(&f->d, r, tok)));
        char *want = take(f);
        gpumd_reply_ok_resv(&f->c, ids[k], &fast);
        char *got = take(f);
        assert_string_equal(got, want);
        /* and the reply's reservation is the event's document, with the token when asked */
        json_t *line = json_loads(got, 0, NULL), *ev = json_loads(doc, 0, NULL);
        assert_non_null(line);
        assert_non_null(ev);
        json_t *resv = json_object_get(line, "reservation");
        if (tok) {
          assert_non_null(json_object_get(resv, "token"));
          json_object_del(resv, "token");
        }
        assert_true(json_equal(resv, ev));
        json_decref(line);
        json_decref(ev);
        free(want);
        free(got);
        free(doc);
      }
    }
  }
  for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++)
    json_decref(ids[k]);
}

/* The reply copies the slot only while it holds the document of its own request's latest
 * transition of its reservation: not after a row write (forget), nor once another transition
 * took the slot, nor for a queued reservation; it is then written from the reservation. */
static void test_reply_copies_only_current_document(void **state) {
  fixture_t *f = *state;
  const gpumd_resv_t *r =
      gpumd_sched_find(f->d.sched, submit(f, 10 * GIB, 1, "before", GPUMD_LEASE_CONNECTION));
  gpumd_resv_reply_t fast = {.r = *r, .set = true};
  free(transition(f, r, &fast));
  /* A change the slot does not know of shows which path wrote the reply. */
  snprintf(fast.r.label, sizeof fast.r.label, "after");
  gpumd_reply_ok_resv(&f->c, NULL, &fast);
  char *line = take(f);
  assert_non_null(strstr(line, "\"label\":\"before\"")); /* copied */
  free(line);
  gpumd_resv_doc_forget(&f->d); /* what a row write does */
  gpumd_reply_ok_resv(&f->c, NULL, &fast);
  line = take(f);
  assert_non_null(strstr(line, "\"label\":\"after\"")); /* written from r */
  free(line);
  /* Another reservation's transition takes the slot. */
  gpumd_resv_reply_t fast2 = {.r = *r, .set = true};
  free(transition(f, r, &fast2));
  snprintf(fast2.r.label, sizeof fast2.r.label, "after");
  const gpumd_resv_t *other =
      gpumd_sched_find(f->d.sched, submit(f, 10 * GIB, 1, "other", GPUMD_LEASE_CONNECTION));
  gpumd_resv_reply_t fast3 = {.r = *other, .set = true};
  free(transition(f, other, &fast3));
  gpumd_reply_ok_resv(&f->c, NULL, &fast2);
  line = take(f);
  assert_non_null(strstr(line, "\"label\":\"after\""));
  free(line);
  /* A transition caused by another request (or by gpumd) gives this reply nothing. */
  gpumd_resv_reply_t fast4 = {.r = *r, .set = true};
  gpumd_resv_doc_set(&f->d, NULL, r);
  assert_int_equal(fast4.doc_serial, 0);
  /* A queued reservation's reply is always written afresh: its position is the scheduler's. */
  const gpumd_resv_t *q =
      gpumd_sched_find(f->d.sched, submit(f, 70 * GIB, 2, "queued", GPUMD_LEASE_CONNECTION));
  assert_int_equal(q->state, GPUMD_RESV_QUEUED);
  gpumd_resv_reply_t fq = {.r = *q, .set = true};
  free(transition(f, q, &fq));
  assert_int_equal(fq.doc_serial, f->d.resv_doc.serial);
  snprintf(fq.r.label, sizeof fq.r.label, "after");
  gpumd_reply_ok_resv(&f->c, NULL, &fq);
  line = take(f);
  assert_non_null(strstr(line, "\"label\":\"after\""));
  assert_non_null(strstr(line, "\"queue_position\":"));
  free(line);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_same_as_jansson, setup, teardown),
      cmocka_unit_test_setup_teardown(test_not_utf8_replaced, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reply_copies_event_document, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reply_copies_only_current_document, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
