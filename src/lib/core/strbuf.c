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
