/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A reservation's document for its transitions and for the reply {"reservation": R} of a
 * socket reserve or release, written straight from the engine's reservation
 * (gpumd_engine_resv_write) without building it.
 *
 * The document of a transition is written once, into the slot d->resv_doc, the first time
 * something needs it (an event for the streams, the replay ring and the watchers), and the
 * reply of the request that caused the transition copies it, with the token put in, instead
 * of writing it again: a reserve+release wrote the same document five times, now three. The
 * slot is valid for the one reservation of the latest transition while nothing else happens:
 * every transition and every row write (engine.c's stage_resv: every change to a reservation
 * is written to the ledger) takes it over with a new serial, and a reply copies it only when
 * its own request saw that serial given to its reservation (gpumd_resv_reply_t.doc_serial).
 * A queued reservation's reply is always written afresh: its position and what it waits for
 * are the scheduler's, not the reservation's.
 */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "gpumd.h"
#include "json_out.h"
#include "net.h"

#define DOC_ID_PREFIX "{" GPUMD_JSON_KEY(GPUM_PROTO_F_ID) "\""

void gpumd_resv_doc_forget(gpumd_t *d) {
  gpumd_resv_doc_t *s = &d->resv_doc;
  s->serial++;
  s->rid = 0;
  s->written = false;
}

void gpumd_resv_doc_set(gpumd_t *d, const gpumd_cause_t *cause, const gpumd_resv_t *r) {
  gpumd_resv_doc_t *s = &d->resv_doc;
  gpumd_resv_doc_forget(d);
  s->rid = r->id;
  s->state = r->state;
  /* The reply of the request that caused it may copy it (when it is written by then). */
  if (cause && cause->about == r->id && cause->actor && cause->actor->fast)
    cause->actor->fast->doc_serial = s->serial;
}

/* Writes r's document (without token) into the slot; false when it cannot (out of memory,
 * or not the shape expected: the slot is then left unwritten). */
static bool doc_fill(gpumd_t *d, const gpumd_resv_t *r) {
  gpumd_resv_doc_t *s = &d->resv_doc;
  gpumd_jw_t w;
  gpumd_jw_init_mem(&w, &s->text);
  gpumd_engine_resv_write(d, &w, r, false);
  if (gpumd_jw_end(&w) != 0)
    return false;
  /* {"id":"r-N", ...: the token goes after the id's closing quote (ids are ASCII, no quote). */
  const size_t pre = sizeof DOC_ID_PREFIX - 1;
  const char *t = s->text.data;
  const char *q = s->text.len > pre && memcmp(t, DOC_ID_PREFIX, pre) == 0
                      ? memchr(t + pre, '"', s->text.len - pre)
                      : NULL;
  if (!q)
    return false;
  s->id_end = (size_t)(q - t) + 1;
  s->written = true;
  return true;
}

void gpumd_resv_doc_write(gpumd_t *d, gpumd_jw_t *w, const gpumd_resv_t *r) {
  gpumd_resv_doc_t *s = &d->resv_doc;
  if (s->rid == r->id && s->state == r->state && (s->written || doc_fill(d, r))) {
    gpumd_jw_raw(w, s->text.data, s->text.len);
    return;
  }
  gpumd_engine_resv_write(d, w, r, false);
}

void gpumd_resv_doc_free(gpumd_t *d) {
  free(d->resv_doc.text.data);
  memset(&d->resv_doc.text, 0, sizeof d->resv_doc.text);
  gpumd_resv_doc_forget(d);
}

/* The slot's copy of r's document, when the reply may use it. */
static const gpumd_resv_doc_t *doc_for(const gpumd_t *d, const gpumd_resv_reply_t *f) {
  const gpumd_resv_doc_t *s = &d->resv_doc;
  if (f->doc_serial == 0 || f->doc_serial != s->serial || !s->written || s->rid != f->r.id ||
      s->state != f->r.state || f->r.state == GPUMD_RESV_QUEUED)
    return NULL;
  return s;
}

typedef struct {
  gpumd_t *d;
  json_t *id;
  const gpumd_resv_t *r;
  bool with_token;
  const gpumd_resv_doc_t *doc; /* the document to copy, or NULL: written from r */
} resv_reply_t;

/* The same bytes as gpumd_reply_ok(c, id, {"reservation": R}): the body's key, then id, ok. */
static void fill_resv_reply(gpumd_jw_t *w, void *arg) {
  const resv_reply_t *a = arg;
  GPUMD_JW_LIT(w, "{" GPUMD_JSON_KEY(GPUM_PROTO_F_RESERVATION));
  if (a->doc) { /* {"id":"r-N" [,"token":T] ... */
    gpumd_jw_raw(w, a->doc->text.data, a->doc->id_end);
    if (a->with_token) {
      GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY(GPUM_PROTO_F_TOKEN));
      gpumd_jw_string(w, a->r->token);
    }
    gpumd_jw_raw(w, a->doc->text.data + a->doc->id_end, a->doc->text.len - a->doc->id_end);
  } else {
    gpumd_engine_resv_write(a->d, w, a->r, a->with_token);
  }
  gpumd_reply_ok_end(w, a->id);
}

void gpumd_reply_ok_resv(gpumd_conn_t *c, json_t *id, const gpumd_resv_reply_t *f) {
  resv_reply_t a = {
      .d = c->d, .id = id, .r = &f->r, .with_token = f->with_token, .doc = doc_for(c->d, f)};
  if (gpumd_conn_send_with(c, fill_resv_reply, &a) != 0)
    gpumd_reply_oom(c, id);
}
