/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The layout of json_indent.h: one pass over the text, strings copied in runs.
 */
#include "json_indent.h"

#include <stdlib.h>
#include <string.h>

void cli_buf_put(cli_buf_t *b, const char *s, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 1u << 16;
    while (cap < b->len + n)
      cap *= 2;
    char *p = realloc(b->s, cap);
    if (p == NULL) {
      b->oom = true;
      return;
    }
    b->s = p;
    b->cap = cap;
  }
  memcpy(b->s + b->len, s, n);
  b->len += n;
}

int cli_buf_flush(cli_buf_t *b, FILE *f) {
  int rc = b->oom ? -1 : 0;
  if (b->len && fwrite(b->s, 1, b->len, f) != b->len)
    rc = -1;
  b->len = 0;
  return rc;
}

void cli_buf_free(cli_buf_t *b) {
  free(b->s);
  memset(b, 0, sizeof *b);
}

/* A new line indented for depth. */
static void newline(cli_buf_t *b, int depth) {
  static const char line[] = "\n                                                                ";
  const size_t most = sizeof line - 2; /* spaces in the literal */
  size_t n = 2 * (size_t)(depth > 0 ? depth : 0);
  if (n <= most) {
    cli_buf_put(b, line, 1 + n);
    return;
  }
  cli_buf_put(b, line, 1);
  for (; n > 0; n -= n < most ? n : most)
    cli_buf_put(b, line + 1, n < most ? n : most);
}

/* The string starting at doc[i] ('"'), escapes and all; returns the index of its closing
 * quote (or len when it has none). */
static size_t string_end(const char *doc, size_t i, size_t len) {
  for (size_t j = i + 1; j < len;) {
    const char *q = memchr(doc + j, '"', len - j);
    if (q == NULL)
      return len;
    size_t k = (size_t)(q - doc), back = 0;
    while (k - back > j && doc[k - back - 1] == '\\') /* a quote after an odd run is escaped */
      back++;
    if (back % 2 == 0)
      return k;
    j = k + 1;
  }
  return len;
}

static bool is_ws(char ch) {
  return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r';
}

void cli_json_indent(cli_buf_t *b, const char *doc, size_t len, int depth) {
  for (size_t i = 0; i < len; i++) {
    char ch = doc[i];
    size_t j;
    switch (ch) {
    case '"':
      j = string_end(doc, i, len);
      cli_buf_put(b, doc + i, (j < len ? j + 1 : len) - i);
      i = j;
      break;
    case '{':
    case '[':
      for (j = i + 1; j < len && is_ws(doc[j]); j++)
        ;
      if (j < len && (doc[j] == '}' || doc[j] == ']')) { /* empty: {} or [] */
        cli_buf_put(b, doc + i, 1);
        cli_buf_put(b, doc + j, 1);
        i = j;
        break;
      }
      cli_buf_put(b, &ch, 1);
      newline(b, ++depth);
      break;
    case '}':
    case ']':
      newline(b, --depth);
      cli_buf_put(b, &ch, 1);
      break;
    case ',':
      cli_buf_put(b, ",", 1);
      newline(b, depth);
      break;
    case ':':
      cli_buf_put(b, ": ", 2);
      break;
    default:
      if (!is_ws(ch)) {
        for (j = i + 1; j < len && !strchr(",:]} \n\t\r", doc[j]); j++)
          ; /* a number or a literal */
        cli_buf_put(b, doc + i, j - i);
        i = j - 1;
      }
      break;
    }
  }
}
