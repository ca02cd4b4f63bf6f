/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fast path for parsing requests (see gpumd_json_parse in json_in.h). jansson reads
 * its input through a character stream with a callback per byte; for the small requests of
 * the socket protocol that was a third of the loop's work per request. This parser takes the
 * common shape only: objects and arrays, strings of printable ASCII without escapes, integers
 * that fit in json_int_t, true, false and null. Anything else (an escape, a byte of UTF-8, a
 * real number, a duplicate key, any syntax error) makes it give up, and jansson parses the
 * whole line instead: the result, and the error for bad input, are always jansson's. Any JSON
 * value is taken on top (JSON_DECODE_ANY), so that a line holding valid JSON that is not an
 * object gets the protocol's error (EPROTO) rather than a parse error.
 */
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <jansson.h>

#include "json_in.h"

#define FAST_MAX_DEPTH 32 /* deeper: jansson's (the protocol's limit is lower anyway) */

typedef struct {
  const char *p, *end;
  int depth;
} fast_t;

static void skip_ws(fast_t *f) {
  while (f->p < f->end && (*f->p == ' ' || *f->p == '\t' || *f->p == '\n' || *f->p == '\r'))
    f->p++;
}

/* At '"': the bytes up to the closing quote, when they are all printable ASCII. */
static bool fast_string(fast_t *f, const char **s, size_t *n) {
  const char *q = ++f->p;
  for (; q < f->end; q++) {
    unsigned char ch = (unsigned char)*q;
    if (ch == '"') {
      *s = f->p;
      *n = (size_t)(q - f->p);
      f->p = q + 1;
      return true;
    }
    if (ch < 0x20 || ch >= 0x80 || ch == '\\')
      return false;
  }
  return false;
}

/* An integer in json_int_t's range, without leading zeros; NULL otherwise (reals too). */
static json_t *fast_integer(fast_t *f) {
  const char *q = f->p;
  bool neg = q < f->end && *q == '-';
  q += neg;
  if (q == f->end || *q < '0' || *q > '9' ||
      (*q == '0' && q + 1 < f->end && q[1] >= '0' && q[1] <= '9'))
    return NULL;
  unsigned long long v = 0, limit = neg ? (unsigned long long)LLONG_MAX + 1 : LLONG_MAX;
  for (; q < f->end && *q >= '0' && *q <= '9'; q++) {
    unsigned d = (unsigned)(*q - '0');
    if (v > (limit - d) / 10)
      return NULL;
    v = v * 10 + d;
  }
  if (q < f->end && (*q == '.' || *q == 'e' || *q == 'E'))
    return NULL;
  f->p = q;
  return json_integer(neg ? (json_int_t)(0 - v) : (json_int_t)v);
}

/* The literal word at f->p, when it is one. */
static bool word(fast_t *f, const char *w, size_t n) {
  if ((size_t)(f->end - f->p) < n || memcmp(f->p, w, n) != 0)
    return false;
  f->p += n;
  return true;
}

static json_t *fast_value(fast_t *f);

static json_t *fast_object(fast_t *f) {
  json_t *o = json_object();
  f->p++;
  skip_ws(f);
  if (f->p < f->end && *f->p == '}') {
    f->p++;
    return o;
  }
  while (o) {
    const char *key;
    size_t klen;
    skip_ws(f);
    if (f->p == f->end || *f->p != '"' || !fast_string(f, &key, &klen))
      break;
    skip_ws(f);
    if (f->p == f->end || *f->p != ':')
      break;
    f->p++;
    json_t *v = fast_value(f);
    if (!v)
      break;
    if (json_object_getn(o, key, klen) || json_object_setn_new_nocheck(o, key, klen, v) != 0) {
      json_decref(v); /* a duplicate: jansson's error */
      break;
    }
    skip_ws(f);
    if (f->p < f->end && *f->p == ',') {
      f->p++;
      continue;
    }
    if (f->p < f->end && *f->p == '}') {
      f->p++;
      return o;
    }
    break;
  }
  json_decref(o);
  return NULL;
}

static json_t *fast_array(fast_t *f) {
  json_t *a = json_array();
  f->p++;
  skip_ws(f);
  if (f->p < f->end && *f->p == ']') {
    f->p++;
    return a;
  }
  while (a) {
    json_t *v = fast_value(f);
    if (!v || json_array_append_new(a, v) != 0)
      break;
    skip_ws(f);
    if (f->p < f->end && *f->p == ',') {
      f->p++;
      continue;
    }
    if (f->p < f->end && *f->p == ']') {
      f->p++;
      return a;
    }
    break;
  }
  json_decref(a);
  return NULL;
}

static json_t *fast_value(fast_t *f) {
  skip_ws(f);
  if (f->p == f->end)
    return NULL;
  const char *s;
  size_t n;
  json_t *v = NULL;
  switch (*f->p) {
  case '{':
  case '[':
    if (++f->depth > FAST_MAX_DEPTH)
      return NULL;
    v = *f->p == '{' ? fast_object(f) : fast_array(f);
    f->depth--;
    return v;
  case '"':
    return fast_string(f, &s, &n) ? json_stringn_nocheck(s, n) : NULL;
  case 't':
    return word(f, "true", 4) ? json_true() : NULL;
  case 'f':
    return word(f, "false", 5) ? json_false() : NULL;
  case 'n':
    return word(f, "null", 4) ? json_null() : NULL;
  default:
    return fast_integer(f);
  }
}

json_t *gpumd_json_parse_fast(const char *s, size_t len) {
  fast_t f = {.p = s, .end = s + len, .depth = 0};
  json_t *v = fast_value(&f);
  skip_ws(&f);
  if (v && f.p == f.end)
    return v;
  json_decref(v);
  return NULL;
}

json_t *gpumd_json_parse(const char *s, size_t len, json_error_t *err) {
  json_t *v = gpumd_json_parse_fast(s, len);
  return v ? v : json_loadb(s, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, err);
}
