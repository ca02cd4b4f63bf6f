/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A growable string for building documents (config dumps, generated Markdown and YAML).
 * Allocation failure is sticky: appends after it do nothing and the final hand-over reports
 * GPUM_ENOMEM once, so builders need no error check per line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>

#include "core/options_internal.h"

static bool reserve(gpum__strbuf_t *b, size_t extra) {
  if (b->failed)
    return false;
  if (b->len + extra + 1 <= b->cap)
    return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1)
    cap *= 2;
  char *p = realloc(b->data, cap);
  if (p == NULL) {
    b->failed = true;
    return false;
  }
  b->data = p;
  b->cap = cap;
  return true;
}

void gpum__strbuf_puts(gpum__strbuf_t *b, const char *s) {
  size_t n = strlen(s);
  if (!reserve(b, n))
    return;
  memcpy(b->data + b->len, s, n + 1);
  b->len += n;
}

void gpum__strbuf_printf(gpum__strbuf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || !reserve(b, (size_t)n))
    return;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

static void put_bytes(gpum__strbuf_t *b, const char *s, size_t n) {
  if (n == 0 || !reserve(b, n))
    return;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

size_t gpum__json_escape(unsigned char ch, char out[6]) {
  static const char hex[] = "0123456789ABCDEF";
  if (ch >= 0x20 && ch != '"' && ch != '\\')
    return 0;
  out[0] = '\\';
  switch (ch) {
  case '"':
  case '\\':
    out[1] = (char)ch;
    return 2;
  case '\b':
    out[1] = 'b';
    return 2;
  case '\f':
    out[1] = 'f';
    return 2;
  case '\n':
    out[1] = 'n';
    return 2;
  case '\r':
    out[1] = 'r';
    return 2;
  case '\t':
    out[1] = 't';
    return 2;
  default:
    memcpy(out + 1, "u00", 3);
    out[4] = hex[ch >> 4];
    out[5] = hex[ch & 15];
    return 6;
  }
}

void gpum__json_escape_runs(const char *s, size_t n,
                            void (*put)(void *ctx, const char *p, size_t len), void *ctx) {
  size_t run = 0; /* bytes since the last escape, put in one go */
  for (size_t i = 0; i < n; i++) {
    char esc[6];
    size_t k = gpum__json_escape((unsigned char)s[i], esc);
    if (k == 0)
      continue;
    if (i > run)
      put(ctx, s + run, i - run);
    put(ctx, esc, k);
    run = i + 1;
  }
  if (n > run)
    put(ctx, s + run, n - run);
}

static void strbuf_put(void *ctx, const char *p, size_t len) {
  put_bytes(ctx, p, len);
}

void gpum__strbuf_json(gpum__strbuf_t *b, const char *s, size_t n) {
  put_bytes(b, "\"", 1);
  gpum__json_escape_runs(s, n, strbuf_put, b);
  put_bytes(b, "\"", 1);
}

int gpum__strbuf_finish(gpum__strbuf_t *b, char **out) {
  if (!b->failed && !reserve(b, 0))
    b->failed = true;
  if (b->failed) {
    free(b->data);
    *b = (gpum__strbuf_t){0};
    return gpum_error(GPUM_ENOMEM, "out of memory while building a document");
  }
  b->data[b->len] = '\0';
  *out = b->data;
  *b = (gpum__strbuf_t){0};
  return 0;
}
