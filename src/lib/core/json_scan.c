/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pull scanner of json_scan_internal.h. jansson reads its input through a stream with a
 * call per byte and builds a tree of hashed objects; for a page of a long list (64 KiB of
 * reservation documents) that was most of what `gpum jobs` spent. The scanner walks the text
 * once, checking it as it goes, and hands out spans of it; the caller keeps what it needs.
 */
#include "core/json_scan_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

void gpum__jscan_init(gpum__jscan_t *s, const char *text, size_t len) {
  s->p = text;
  s->end = text + len;
  s->fail = false;
  s->depth = 0;
  s->first[0] = true;
  s->nkeys = 0;
  s->base[0] = 0;
}

static void skip_ws(gpum__jscan_t *s) {
  if (s->p < s->end && (unsigned char)*s->p > ' ') /* compact JSON: no whitespace at all */
    return;
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\t' || *s->p == '\r'))
    s->p++;
}

/* Fails the scan; returns false for the caller to pass on. */
static bool fail(gpum__jscan_t *s) {
  s->fail = true;
  return false;
}

char gpum__jscan_peek(gpum__jscan_t *s) {
  if (s->fail)
    return 0;
  skip_ws(s);
  return s->p < s->end ? *s->p : 0;
}

/* At '"': the bytes up to the closing quote, when they are all printable ASCII. */
static bool raw_string(gpum__jscan_t *s, const char **v, size_t *n) {
  const char *q = ++s->p;
  for (; q < s->end; q++) {
    unsigned char ch = (unsigned char)*q;
    if (ch == '"') {
      *v = s->p;
      *n = (size_t)(q - s->p);
      s->p = q + 1;
      return true;
    }
    if ((unsigned char)(ch - 0x20) >= 0x60 || ch == '\\') /* a control, UTF-8, an escape */
      break;
  }
  return fail(s);
}

static bool open(gpum__jscan_t *s, char ch) {
  if (gpum__jscan_peek(s) != ch || s->depth == GPUM__JSCAN_MAX_DEPTH)
    return fail(s);
  s->p++;
  s->depth++;
  s->first[s->depth] = true;
  s->base[s->depth] = s->nkeys;
  return true;
}

bool gpum__jscan_begin_object(gpum__jscan_t *s) {
  return open(s, '{');
}

bool gpum__jscan_begin_array(gpum__jscan_t *s) {
  return open(s, '[');
}

/* Before the next member of the open object/array: its comma, or its closer (false). */
static bool member(gpum__jscan_t *s, char closer) {
  char ch = gpum__jscan_peek(s);
  if (ch == closer) {
    s->p++;
    s->nkeys = s->base[s->depth];
    s->depth--;
    return false;
  }
  if (!s->first[s->depth]) {
    if (ch != ',')
      return fail(s);
    s->p++;
  }
  s->first[s->depth] = false;
  return !s->fail;
}

/* A key already open at this depth: jansson rejects the text (JSON_REJECT_DUPLICATES). */
static bool duplicate(const gpum__jscan_t *s, const char *k, size_t n) {
  for (size_t i = s->base[s->depth]; i < s->nkeys; i++)
    if (s->keys[i].n == n && (n == 0 || (s->keys[i].s[0] == k[0] && !memcmp(s->keys[i].s, k, n))))
      return true;
  return false;
}

bool gpum__jscan_key(gpum__jscan_t *s, const char **key, size_t *n) {
  if (s->fail || !member(s, '}'))
    return false;
  if (gpum__jscan_peek(s) != '"' || !raw_string(s, key, n))
    return fail(s);
  if (s->nkeys == GPUM__JSCAN_MAX_KEYS || duplicate(s, *key, *n))
    return fail(s);
  s->keys[s->nkeys].s = *key;
  s->keys[s->nkeys++].n = *n;
  if (gpum__jscan_peek(s) != ':')
    return fail(s);
  s->p++;
  return true;
}

bool gpum__jscan_next(gpum__jscan_t *s) {
  if (s->fail || !member(s, ']'))
    return false;
  if (gpum__jscan_peek(s) == ']') /* "[1,]" */
    return fail(s);
  return true;
}

bool gpum__jscan_string(gpum__jscan_t *s, const char **v, size_t *n) {
  if (gpum__jscan_peek(s) == '"')
    return raw_string(s, v, n);
  gpum__jscan_skip(s);
  return false;
}

/* The JSON number at s->p (its grammar checked) into buf, NUL-terminated; past it. */
static bool number_text(gpum__jscan_t *s, char *buf, size_t cap, bool *is_int) {
  const char *q = s->p;
  *is_int = true;
  if (q < s->end && *q == '-')
    q++;
  if (q == s->end || *q < '0' || *q > '9')
    return fail(s);
  if (*q == '0' && q + 1 < s->end && q[1] >= '0' && q[1] <= '9')
    return fail(s); /* a leading zero */
  while (q < s->end && *q >= '0' && *q <= '9')
    q++;
  if (q < s->end && *q == '.') {
    *is_int = false;
    if (++q == s->end || *q < '0' || *q > '9')
      return fail(s);
    while (q < s->end && *q >= '0' && *q <= '9')
      q++;
  }
  if (q < s->end && (*q == 'e' || *q == 'E')) {
    *is_int = false;
    if (++q < s->end && (*q == '+' || *q == '-'))
      q++;
    if (q == s->end || *q < '0' || *q > '9')
      return fail(s);
    while (q < s->end && *q >= '0' && *q <= '9')
      q++;
  }
  size_t n = (size_t)(q - s->p);
  if (n >= cap)
    return fail(s);
  memcpy(buf, s->p, n);
  buf[n] = '\0';
  s->p = q;
  return true;
}

/* The common case, an integer in long long's range, read in place; false (nothing read) for
 * anything else, which number_text reads. */
static bool plain_integer(gpum__jscan_t *s, long long *i) {
  const char *q = s->p;
  bool neg = *q == '-';
  q += neg;
  if (q == s->end || *q < '0' || *q > '9' ||
      (*q == '0' && q + 1 < s->end && q[1] >= '0' && q[1] <= '9'))
    return false;
  unsigned long long v = 0, limit = neg ? (unsigned long long)LLONG_MAX + 1 : LLONG_MAX;
  for (; q < s->end && *q >= '0' && *q <= '9'; q++) {
    unsigned dig = (unsigned)(*q - '0');
    if (v > (limit - dig) / 10)
      return false;
    v = v * 10 + dig;
  }
  if (q < s->end && (*q == '.' || *q == 'e' || *q == 'E'))
    return false;
  *i = neg ? (long long)(0 - v) : (long long)v;
  s->p = q;
  return true;
}

bool gpum__jscan_number(gpum__jscan_t *s, bool *is_int, long long *i, double *d) {
  char ch = gpum__jscan_peek(s), buf[64], *e = NULL;
  if (ch != '-' && (ch < '0' || ch > '9')) {
    gpum__jscan_skip(s);
    return false;
  }
  if (plain_integer(s, i)) {
    *is_int = true;
    *d = (double)*i;
    return true;
  }
  if (!number_text(s, buf, sizeof buf, is_int))
    return false;
  errno = 0;
  if (*is_int) {
    *i = strtoll(buf, &e, 10); /* jansson: "too big integer" */
    *d = (double)*i;
  } else {
    *d = strtod(buf, &e); /* "C" digits; a locale with a decimal comma stops early: fail */
    *i = 0;
  }
  if (errno == ERANGE || e == NULL || *e != '\0')
    return fail(s); /* out of range: jansson's error */
  return true;
}

static bool word(gpum__jscan_t *s, const char *w, size_t n) {
  if ((size_t)(s->end - s->p) < n || memcmp(s->p, w, n) != 0)
    return fail(s);
  s->p += n;
  return true;
}

bool gpum__jscan_literal(gpum__jscan_t *s, int *v) {
  switch (gpum__jscan_peek(s)) {
  case 't':
    *v = 1;
    return word(s, "true", 4);
  case 'f':
    *v = 0;
    return word(s, "false", 5);
  case 'n':
    *v = -1;
    return word(s, "null", 4);
  default:
    gpum__jscan_skip(s);
    return false;
  }
}

void gpum__jscan_skip(gpum__jscan_t *s) {
  const char *k;
  size_t n;
  bool is_int;
  long long i;
  double d;
  int lit;
  char ch = gpum__jscan_peek(s);
  switch (ch) {
  case '{':
    if (gpum__jscan_begin_object(s))
      while (gpum__jscan_key(s, &k, &n))
        gpum__jscan_skip(s);
    return;
  case '[':
    if (gpum__jscan_begin_array(s))
      while (gpum__jscan_next(s))
        gpum__jscan_skip(s);
    return;
  case '"':
    raw_string(s, &k, &n);
    return;
  case 't':
  case 'f':
  case 'n':
    gpum__jscan_literal(s, &lit);
    return;
  default:
    if (ch != '-' && (ch < '0' || ch > '9')) /* the end, or no value */
      fail(s);
    else
      gpum__jscan_number(s, &is_int, &i, &d);
    return;
  }
}

bool gpum__jscan_done(gpum__jscan_t *s) {
  return gpum__jscan_peek(s) == 0 && !s->fail && s->depth == 0 && s->p == s->end;
}
