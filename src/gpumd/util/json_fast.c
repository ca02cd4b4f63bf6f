/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fast path for parsing requests (see gpumd_json_parse in json_in.h). jansson reads
 * its input through a character stream with a callback per byte; for the small requests of
 * the socket protocol that was a third of the loop's work per request. This parser builds the
 * jansson value on libgpum's scanner (core/json_scan_internal.h, which the client library reads
 * list pages with) and takes the common shape only: objects and arrays, strings of printable
 * ASCII without escapes, integers that fit in json_int_t, true, false and null. Anything else
 * (an escape, a byte of UTF-8, a real number, a duplicate key, any syntax error) makes it give
 * up, and jansson parses the whole line instead: the result, and the error for bad input, are
 * always jansson's. Any JSON value is taken on top (JSON_DECODE_ANY), so that a line holding valid
 * JSON that is not an object gets the protocol's error (EPROTO) rather than a parse error.
 * A flat line (one object of scalars: a reserve, a release) is read on the same scanner into a
 * table of its members, without jansson values (gpumd_json_parse_flat).
 */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <jansson.h>

#include "core/json_scan_internal.h"
#include "json_in.h"

_Static_assert(GPUMD_JSON_FAST_MAX_DEPTH == GPUM__JSCAN_MAX_DEPTH,
               "the fast path goes as deep as the scanner");

/* The value at the scanner as a jansson value; NULL (and s->fail, or a real, or a value nested
 * deeper than max_depth) when the fast path does not take it. */
static json_t *fast_value(gpum__jscan_t *s, int max_depth);

static json_t *fast_object(gpum__jscan_t *s, int max_depth) {
  json_t *o = json_object();
  const char *key;
  size_t klen;
  if (o == NULL || !gpum__jscan_begin_object(s)) {
    json_decref(o);
    return NULL;
  }
  /* The scanner refuses duplicate keys (jansson's JSON_REJECT_DUPLICATES). */
  while (gpum__jscan_key(s, &key, &klen)) {
    json_t *v = fast_value(s, max_depth);
    if (v == NULL || json_object_setn_new_nocheck(o, key, klen, v) != 0) {
      json_decref(o);
      return NULL;
    }
  }
  if (s->fail) {
    json_decref(o);
    return NULL;
  }
  return o;
}

static json_t *fast_array(gpum__jscan_t *s, int max_depth) {
  json_t *a = json_array();
  if (a == NULL || !gpum__jscan_begin_array(s)) {
    json_decref(a);
    return NULL;
  }
  while (gpum__jscan_next(s)) {
    json_t *v = fast_value(s, max_depth);
    if (v == NULL || json_array_append_new(a, v) != 0) {
      json_decref(a);
      return NULL;
    }
  }
  if (s->fail) {
    json_decref(a);
    return NULL;
  }
  return a;
}

static json_t *fast_value(gpum__jscan_t *s, int max_depth) {
  const char *v;
  size_t n;
  bool is_int = false;
  long long i = 0;
  double d;
  int lit;
  switch (gpum__jscan_peek(s)) {
  case '{':
  case '[':
    if (s->depth >= max_depth)
      return NULL;
    return gpum__jscan_peek(s) == '{' ? fast_object(s, max_depth) : fast_array(s, max_depth);
  case '"':
    return gpum__jscan_string(s, &v, &n) ? json_stringn_nocheck(v, n) : NULL;
  case 't':
  case 'f':
  case 'n':
    if (!gpum__jscan_literal(s, &lit))
      return NULL;
    return lit == 1 ? json_true() : lit == 0 ? json_false() : json_null();
  default: /* a number; a real is left to jansson (its parse is the reference) */
    if (!gpum__jscan_number(s, &is_int, &i, &d) || !is_int)
      return NULL;
    return json_integer((json_int_t)i);
  }
}

json_t *gpumd_json_parse_fast(const char *s, size_t len, int max_depth) {
  gpum__jscan_t sc;
  gpum__jscan_init(&sc, s, len);
  json_t *v = fast_value(&sc, max_depth < GPUMD_JSON_FAST_MAX_DEPTH ? max_depth
                                                                    : GPUMD_JSON_FAST_MAX_DEPTH);
  if (v && gpum__jscan_done(&sc))
    return v;
  json_decref(v);
  return NULL;
}

json_t *gpumd_json_parse(const char *s, size_t len, json_error_t *err) {
  json_t *v = gpumd_json_parse_fast(s, len, GPUMD_JSON_FAST_MAX_DEPTH);
  return v ? v : json_loadb(s, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, err);
}

/* ---- flat lines ---------------------------------------------------------------------------- */

/* Copies n bytes of s into the flat line's text at *used, NUL-terminated. */
static const char *flat_copy(gpumd_flat_t *out, size_t *used, const char *s, size_t n) {
  char *t = out->text + *used;
  memcpy(t, s, n);
  t[n] = '\0';
  *used += n + 1;
  return t;
}

/* The member's scalar value at the scanner into m; false when it is not of the flat kinds. */
static bool flat_value(gpum__jscan_t *s, gpumd_flat_t *out, size_t *used, gpumd_flat_field_t *m) {
  const char *v;
  size_t n;
  bool is_int = false;
  long long i = 0;
  double d;
  int lit;
  m->string = NULL;
  m->length = 0;
  m->integer = 0;
  switch (gpum__jscan_peek(s)) {
  case '"':
    if (!gpum__jscan_string(s, &v, &n))
      return false;
    m->type = JSON_STRING;
    m->string = flat_copy(out, used, v, n);
    m->length = n;
    return true;
  case 't':
  case 'f':
  case 'n':
    if (!gpum__jscan_literal(s, &lit))
      return false;
    m->type = lit == 1 ? JSON_TRUE : lit == 0 ? JSON_FALSE : JSON_NULL;
    return true;
  case '{':
  case '[':
    return false; /* not flat */
  default:        /* a real is left to jansson, as on the fast path */
    if (!gpum__jscan_number(s, &is_int, &i, &d) || !is_int)
      return false;
    m->type = JSON_INTEGER;
    m->integer = (json_int_t)i;
    return true;
  }
}

bool gpumd_json_parse_flat(const char *s, size_t len, gpumd_flat_t *out) {
  /* Each key or string takes its bytes and a NUL in text, no more than its quotes take in s. */
  if (len > GPUMD_FLAT_MAX_LINE)
    return false;
  gpum__jscan_t sc;
  gpum__jscan_init(&sc, s, len);
  size_t used = 0;
  out->count = 0;
  if (gpum__jscan_peek(&sc) != '{' || !gpum__jscan_begin_object(&sc))
    return false;
  const char *key;
  size_t klen;
  /* The scanner refuses duplicate keys (jansson's JSON_REJECT_DUPLICATES). */
  while (gpum__jscan_key(&sc, &key, &klen)) {
    if (out->count == GPUMD_FLAT_MAX_FIELDS)
      return false;
    gpumd_flat_field_t *m = &out->field[out->count];
    m->key = flat_copy(out, &used, key, klen);
    if (!flat_value(&sc, out, &used, m))
      return false;
    out->count++;
  }
  return !sc.fail && gpum__jscan_done(&sc);
}

const gpumd_flat_field_t *gpumd_flat_get(const gpumd_flat_t *f, const char *key) {
  for (size_t i = 0; i < f->count; i++)
    if (strcmp(f->field[i].key, key) == 0)
      return &f->field[i];
  return NULL;
}
