/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The list op (docs/protocol.md, `list`): a page per request, the walk over every page, and
 * reading a page. A page is read straight from its line into reservation structs and the
 * spans of their documents by the scanner (core/json_scan_internal.h), without a jansson tree:
 * on a node of thousands of reservations, jansson's parse of the pages was most of what a
 * listing cost. A page the scanner does not take (an escape or a byte of UTF-8 in a label, an
 * error, anything unusual) is parsed by jansson as every other reply is, with the same result.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>

#include "client/client_internal.h"
#include "client/protocol_internal.h"
#include "core/json_scan_internal.h"

/* ---- the request ----------------------------------------------------------------------- */

static int list_states(json_t *o, unsigned states) {
  if (states & ~((1u << GPUM_RES_QUEUED) | (1u << GPUM_RES_GRANTED) | (1u << GPUM_RES_SUSPENDED)))
    return gpum_error(GPUM_EINVAL,
                      "list states 0x%x: only QUEUED, GRANTED and SUSPENDED reservations are live",
                      states);
  if (states == 0)
    return 0;
  json_t *st = json_array();
  int bad = st == NULL;
  if (!bad && (states & (1u << GPUM_RES_QUEUED)))
    bad |= json_array_append_new(st, json_string(GPUM_PROTO_STATE_QUEUED));
  if (!bad && (states & (1u << GPUM_RES_GRANTED)))
    bad |= json_array_append_new(st, json_string(GPUM_PROTO_STATE_GRANTED));
  if (!bad && (states & (1u << GPUM_RES_SUSPENDED)))
    bad |= json_array_append_new(st, json_string(GPUM_PROTO_STATE_SUSPENDED));
  bad |= json_object_set_new(o, GPUM_PROTO_F_STATE, st);
  return bad ? gpum_error(GPUM_ENOMEM, "out of memory") : 0;
}

/* The list request of q (NULL: the caller's, first page) into *out; ended: with the first
 * page's "ended". */
static int list_request(const gpum_list_query_t *q, bool ended, json_t **out) {
  static const gpum_list_query_t none = {0};
  json_t *o = json_object();
  *out = NULL;
  if (o == NULL || json_object_set_new(o, GPUM_PROTO_F_OP, json_string(GPUM_PROTO_OP_LIST))) {
    json_decref(o);
    return gpum_error(GPUM_ENOMEM, "out of memory");
  }
  if (q == NULL)
    q = &none;
  bool first = q->cursor == NULL || *q->cursor == '\0';
  int bad = json_object_set_new(o, GPUM_PROTO_F_ALL, json_boolean(q->all));
  int rc = list_states(o, q->states);
  if (rc != 0) {
    json_decref(o);
    return rc;
  }
  if (!bad && ended && first)
    bad = json_object_set_new(o, GPUM_PROTO_F_ENDED, json_true());
  if (!bad && q->by_uid)
    bad = json_object_set_new(o, GPUM_PROTO_F_UID, json_integer(q->uid));
  if (!bad && q->label)
    bad = json_object_set_new(o, GPUM_PROTO_F_LABEL, json_string(q->label));
  if (!bad && q->limit)
    bad =
        json_object_set_new(o, GPUM_PROTO_F_LIMIT,
                            json_integer(q->limit > INT32_MAX ? INT32_MAX : (json_int_t)q->limit));
  if (!bad && !first)
    bad = json_object_set_new(o, GPUM_PROTO_F_CURSOR, json_string(q->cursor));
  if (bad) { /* json_string of text that is not UTF-8, or out of memory */
    json_decref(o);
    return gpum_error(GPUM_EINVAL,
                      "list query: a label or cursor that is not UTF-8 (or out of memory)");
  }
  *out = o;
  return 0;
}

/* ---- a page ---------------------------------------------------------------------------- */

/* The reservations of one part of a page (its live ones, or its "ended"), each with the span
 * of its document in the page's text. */
typedef struct {
  gpum_reservation_t *res;
  size_t *off, *len;
  size_t n, cap;
} part_t;

typedef struct {
  char *text; /* the documents' bytes: the reply's line, or jansson's writing of them */
  size_t len, cap;
  part_t live, ended;
  char next_cursor[256]; /* "" after the last page */
  size_t total;
} page_t;

static void page_reset(page_t *pg) {
  pg->len = 0;
  pg->live.n = pg->ended.n = 0;
  pg->next_cursor[0] = '\0';
  pg->total = 0;
}

static void part_free(part_t *p) {
  free(p->res);
  free(p->off);
  free(p->len);
  memset(p, 0, sizeof *p);
}

static void page_free(page_t *pg) {
  free(pg->text);
  part_free(&pg->live);
  part_free(&pg->ended);
  memset(pg, 0, sizeof *pg);
}

/* Room for one more reservation in p; false when out of memory. */
static bool part_grow(part_t *p) {
  if (p->n < p->cap)
    return true;
  size_t cap = p->cap ? p->cap * 2 : 64;
  gpum_reservation_t *res = realloc(p->res, cap * sizeof *res);
  if (res)
    p->res = res;
  size_t *off = realloc(p->off, cap * sizeof *off);
  if (off)
    p->off = off;
  size_t *len = realloc(p->len, cap * sizeof *len);
  if (len)
    p->len = len;
  if (!res || !off || !len)
    return false;
  p->cap = cap;
  return true;
}

/* Room for n more bytes of text. */
static bool text_grow(page_t *pg, size_t n) {
  if (pg->len + n <= pg->cap)
    return true;
  size_t cap = pg->cap ? pg->cap : GPUM_CLIENT_MAX_MESSAGE;
  while (cap < pg->len + n)
    cap *= 2;
  char *t = realloc(pg->text, cap);
  if (t == NULL)
    return false;
  pg->text = t;
  pg->cap = cap;
  return true;
}

#define IS_KEY(k, n, lit) ((n) == sizeof(lit) - 1 && memcmp((k), (lit), sizeof(lit) - 1) == 0)

/* An array of reservation objects into p, their spans relative to base. */
static bool scan_part(gpum__jscan_t *s, const char *base, part_t *p) {
  if (!gpum__jscan_begin_array(s))
    return false;
  while (gpum__jscan_next(s)) {
    if (!part_grow(p))
      return false;
    gpum__jscan_peek(s); /* to the document's first byte */
    p->off[p->n] = (size_t)(s->p - base);
    gpum__res_scan(s, &p->res[p->n]);
    p->len[p->n] = (size_t)(s->p - base) - p->off[p->n];
    p->n++;
  }
  return !s->fail;
}

/* The page's next_cursor: a string that is not empty, or null; anything else is left to
 * jansson's reading (which says what is wrong with it). */
static bool scan_cursor(gpum__jscan_t *s, page_t *pg) {
  const char *v;
  size_t n;
  int lit;
  if (gpum__jscan_peek(s) == 'n')
    return gpum__jscan_literal(s, &lit) && lit == -1;
  if (!gpum__jscan_string(s, &v, &n) || n == 0 || n >= sizeof pg->next_cursor)
    return false;
  memcpy(pg->next_cursor, v, n);
  pg->next_cursor[n] = '\0';
  return true;
}

/* One top-level field of a list reply; false to give the line up. */
static bool scan_top(gpum__jscan_t *s, const char *k, size_t n, const char *line, int64_t id,
                     page_t *pg, bool *seen_res, int *seen_ok_id) {
  bool is_int = false;
  long long v = 0;
  double d;
  int lit = 0;
  if (IS_KEY(k, n, GPUM_PROTO_F_RESERVATIONS))
    return (*seen_res = scan_part(s, line, &pg->live));
  if (IS_KEY(k, n, GPUM_PROTO_F_ENDED))
    return scan_part(s, line, &pg->ended);
  if (IS_KEY(k, n, GPUM_PROTO_F_NEXT_CURSOR))
    return scan_cursor(s, pg);
  if (IS_KEY(k, n, GPUM_PROTO_F_TOTAL)) {
    if (!gpum__jscan_number(s, &is_int, &v, &d) || !is_int || v < 0)
      return false;
    pg->total = (size_t)v;
    return true;
  }
  if (IS_KEY(k, n, GPUM_PROTO_F_ID)) {
    if (!gpum__jscan_number(s, &is_int, &v, &d) || !is_int || v != id)
      return false; /* another request's reply */
    *seen_ok_id |= 1;
    return true;
  }
  if (IS_KEY(k, n, GPUM_PROTO_F_OK)) {
    if (!gpum__jscan_literal(s, &lit) || lit != 1)
      return false; /* an error reply */
    *seen_ok_id |= 2;
    return true;
  }
  if (IS_KEY(k, n, GPUM_PROTO_F_EVENT) || IS_KEY(k, n, GPUM_PROTO_F_ERROR))
    return false;
  gpum__jscan_skip(s); /* a field this library does not read */
  return !s->fail;
}

/* gpum__client_call_line's reader: the successful reply to id, when the scanner takes it. */
static bool page_line(const char *line, size_t len, int64_t id, void *user) {
  page_t *pg = user;
  gpum__jscan_t s;
  const char *k;
  size_t n;
  bool seen_res = false, has_total = false;
  int seen_ok_id = 0;
  page_reset(pg);
  gpum__jscan_init(&s, line, len);
  if (!gpum__jscan_begin_object(&s))
    return false;
  while (gpum__jscan_key(&s, &k, &n)) {
    has_total |= IS_KEY(k, n, GPUM_PROTO_F_TOTAL);
    if (!scan_top(&s, k, n, line, id, pg, &seen_res, &seen_ok_id))
      return false;
  }
  if (!gpum__jscan_done(&s) || !seen_res || seen_ok_id != 3 || !text_grow(pg, len))
    return false;
  memcpy(pg->text, line, len); /* the spans point into it from now on */
  pg->len = len;
  if (!has_total)
    pg->total = pg->live.n;
  return true;
}

/* jansson's reading of the documents of arr into p (each written out: compact). */
static int json_part(const json_t *arr, page_t *pg, part_t *p) {
  size_t i;
  const json_t *r;
  json_array_foreach(arr, i, r) {
    char *doc = json_dumps(r, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t n = doc ? strlen(doc) : 0;
    if (doc == NULL || !part_grow(p) || !text_grow(pg, n)) {
      free(doc);
      return gpum_error(GPUM_ENOMEM, "out of memory reading a list");
    }
    memset(&p->res[p->n], 0, sizeof p->res[p->n]);
    gpum__res_parse(r, &p->res[p->n]);
    memcpy(pg->text + pg->len, doc, n);
    p->off[p->n] = pg->len;
    p->len[p->n++] = n;
    pg->len += n;
    free(doc);
  }
  return 0;
}

/* The reply's next_cursor into pg ("" at the end). */
static int json_cursor(const json_t *reply, page_t *pg) {
  const json_t *nc = json_object_get(reply, GPUM_PROTO_F_NEXT_CURSOR);
  const char *s = json_is_string(nc) ? json_string_value(nc) : "";
  if (nc && !json_is_null(nc) && (!json_is_string(nc) || !*s))
    return gpum_error(GPUM_EPROTO, "gpumd's list reply has a next_cursor that is not one");
  if (strlen(s) >= sizeof pg->next_cursor)
    return gpum_error(GPUM_ERANGE, "the next cursor takes %zu bytes, more than the %zu kept",
                      strlen(s) + 1, sizeof pg->next_cursor);
  memcpy(pg->next_cursor, s, strlen(s) + 1);
  return 0;
}

/* A page from jansson's parse of the reply (the shape the scanner did not take). */
static int page_of_json(const json_t *reply, page_t *pg) {
  page_reset(pg);
  const json_t *arr = json_object_get(reply, GPUM_PROTO_F_RESERVATIONS);
  if (!json_is_array(arr))
    return gpum_error(GPUM_EPROTO, "gpumd's list reply has no reservations");
  int rc = json_part(arr, pg, &pg->live);
  if (rc == 0 && json_is_array(json_object_get(reply, GPUM_PROTO_F_ENDED)))
    rc = json_part(json_object_get(reply, GPUM_PROTO_F_ENDED), pg, &pg->ended);
  if (rc == 0)
    rc = json_cursor(reply, pg);
  const json_t *t = json_object_get(reply, GPUM_PROTO_F_TOTAL);
  pg->total =
      json_is_integer(t) && json_integer_value(t) >= 0 ? (size_t)json_integer_value(t) : pg->live.n;
  return rc;
}

/* One list request and its reply read into pg. */
static int page_fetch(gpum_client_t *c, const gpum_list_query_t *q, bool ended, page_t *pg) {
  json_t *req = NULL, *reply = NULL;
  int rc = list_request(q, ended, &req);
  if (rc != 0)
    return rc;
  rc = gpum__client_call_line(c, req, page_line, pg, &reply);
  json_decref(req);
  if (rc == 0 && reply != NULL) /* the scanner gave the reply up */
    rc = page_of_json(reply, pg);
  json_decref(reply);
  return rc;
}

/* ---- the calls ------------------------------------------------------------------------- */

/* The page's cursor into the caller's cur (cap bytes). */
static int cursor_out(const page_t *pg, char *cur, size_t cap) {
  size_t n = strlen(pg->next_cursor);
  if (cur == NULL || cap == 0)
    return n ? gpum_error(GPUM_ERANGE, "no room for the next cursor") : 0;
  if (n >= cap)
    return gpum_error(GPUM_ERANGE, "the next cursor takes %zu bytes, more than the %zu given",
                      n + 1, cap);
  memcpy(cur, pg->next_cursor, n + 1);
  return 0;
}

int gpum_client_list_page(gpum_client_t *c, const gpum_list_query_t *q, gpum_reservation_t **out,
                          size_t *n, char *next_cursor, size_t cap, size_t *total) {
  *out = NULL;
  *n = 0;
  page_t pg = {0};
  int rc = page_fetch(c, q, false, &pg);
  if (rc == 0)
    rc = cursor_out(&pg, next_cursor, cap);
  if (rc == 0 && pg.live.res == NULL && !part_grow(&pg.live)) /* never NULL on success */
    rc = gpum_error(GPUM_ENOMEM, "out of memory");
  if (rc == 0) {
    if (total)
      *total = pg.total;
    *out = pg.live.res; /* handed over */
    *n = pg.live.n;
    pg.live.res = NULL;
  }
  page_free(&pg);
  return rc;
}

int gpum_client_list_each(gpum_client_t *c, const gpum_list_query_t *q, bool ended, gpum_list_fn fn,
                          void *user, size_t *total) {
  static const gpum_list_query_t none = {0};
  gpum_list_query_t pq = q ? *q : none;
  char cur[sizeof((page_t *)0)->next_cursor] = "";
  if (pq.cursor && strlen(pq.cursor) >= sizeof cur)
    return gpum_error(GPUM_EINVAL, "cursor '%.32s...' is not one gpumd gave (too long)", pq.cursor);
  if (pq.cursor)
    memcpy(cur, pq.cursor, strlen(pq.cursor) + 1);
  pq.cursor = cur;
  page_t pg = {0};
  int rc = 0;
  do { /* every page: each reply is one message */
    rc = page_fetch(c, &pq, ended, &pg);
    for (size_t i = 0; rc == 0 && i < pg.live.n; i++)
      rc = fn(user, GPUM_LIST_LIVE, &pg.live.res[i], pg.text + pg.live.off[i], pg.live.len[i]);
    for (size_t i = 0; rc == 0 && i < pg.ended.n; i++)
      rc = fn(user, GPUM_LIST_ENDED, &pg.ended.res[i], pg.text + pg.ended.off[i], pg.ended.len[i]);
    if (rc == 0 && total)
      *total = pg.total;
    memcpy(cur, pg.next_cursor, sizeof cur);
  } while (rc == 0 && cur[0]);
  page_free(&pg);
  return rc;
}

/* gpum_client_list's collector: the live reservations appended to a growing array. */
static int collect(void *user, gpum_list_part_t part, const gpum_reservation_t *r, const char *doc,
                   size_t len) {
  (void)doc;
  (void)len;
  part_t *all = user;
  if (part != GPUM_LIST_LIVE)
    return 0;
  if (!part_grow(all))
    return gpum_error(GPUM_ENOMEM, "out of memory reading %zu reservations", all->n + 1);
  all->res[all->n++] = *r;
  return 0;
}

int gpum_client_list(gpum_client_t *c, bool all, gpum_reservation_t **out, size_t *n) {
  gpum_list_query_t q = {.all = all};
  part_t list = {0};
  int rc = gpum_client_list_each(c, &q, false, collect, &list, NULL);
  if (rc == 0 && list.res == NULL && !part_grow(&list))
    rc = gpum_error(GPUM_ENOMEM, "out of memory");
  if (rc != 0) {
    part_free(&list);
    return rc;
  }
  *out = list.res;
  *n = list.n;
  list.res = NULL;
  part_free(&list);
  return 0;
}
