/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The text side of `gpum top`'s frames (top.h): building a line out of styled pieces that stop
 * at the frame's width, counting display columns, cleaning outside strings, and printing a line
 * as plain text or with ANSI escapes (--once).
 */
#include <stdarg.h>
#include <string.h>

#include "top.h"
#include "top_internal.h"

int top_text_width(const char *s) {
  int cols = 0;
  for (; *s; s++)
    if (((unsigned char)*s & 0xC0) != 0x80)
      cols++;
  return cols;
}

void top__clean(const char *in, char *out, size_t len) {
  size_t o = 0;
  for (; in && *in && o + 1 < len; in++) {
    unsigned char c = (unsigned char)*in;
    out[o++] = (c >= 0x20 && c < 0x7F) ? (char)c : '?';
  }
  if (len > 0)
    out[o] = '\0';
}

void top__lb_init(top_lb_t *b, top_line_t *l, int width, cli_style_t style) {
  memset(l, 0, sizeof *l);
  l->style = style;
  b->l = l;
  b->width = width < 0 ? 0 : width > TOP_MAX_WIDTH ? TOP_MAX_WIDTH : width;
  b->cols = 0;
  b->len = 0;
}

/* Appends the bytes of s that fit, whole characters only; returns the bytes taken. */
static size_t append(top_lb_t *b, const char *s) {
  size_t start = b->len;
  while (*s && b->cols < b->width) {
    size_t n = 1;
    while (s[n] && ((unsigned char)s[n] & 0xC0) == 0x80)
      n++;
    if (b->len + n >= TOP_LINE)
      break;
    memcpy(b->l->text + b->len, s, n);
    b->len += n;
    b->cols++;
    s += n;
  }
  b->l->text[b->len] = '\0';
  return b->len - start;
}

static void add_span(top_lb_t *b, size_t off, size_t len, cli_style_t style) {
  top_line_t *l = b->l;
  if (style == CLI_PLAIN || len == 0)
    return;
  if (l->nspans > 0) { /* one style on after another: one span */
    top_span_t *last = &l->spans[l->nspans - 1];
    if (last->style == style && (size_t)last->off + last->len == off) {
      last->len = (uint16_t)(last->len + len);
      return;
    }
  }
  if (l->nspans == TOP_SPANS)
    return; /* drawn in the line's style: no colour is lost that matters */
  l->spans[l->nspans++] = (top_span_t){(uint16_t)off, (uint16_t)len, style};
}

void top__lb_add(top_lb_t *b, cli_style_t style, const char *fmt, ...) {
  char tmp[TOP_LINE];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  size_t off = b->len;
  add_span(b, off, append(b, tmp), style);
}

void top__lb_repeat(top_lb_t *b, cli_style_t style, const char *glyph, int count) {
  size_t off = b->len;
  for (int i = 0; i < count && b->cols < b->width; i++)
    append(b, glyph);
  add_span(b, off, b->len - off, style);
}

void top__lb_pad(top_lb_t *b, int col) {
  while (b->cols < col && b->cols < b->width)
    append(b, " ");
}

/* Writes text[off, off+len) in style, reversed when selected. */
static void piece(FILE *f, const char *text, size_t len, cli_style_t style, bool selected,
                  bool color) {
  if (len == 0)
    return;
  if (!color) {
    fwrite(text, 1, len, f);
    return;
  }
  if (selected)
    fputs("\033[7m", f);
  cli_out_t o = {f, true};
  cli_styled(&o, style, "%.*s", (int)len, text);
  if (selected && style == CLI_PLAIN)
    fputs("\033[0m", f);
}

void top_line_print(FILE *f, const top_line_t *l, bool color) {
  size_t pos = 0, len = strlen(l->text);
  for (int i = 0; i < l->nspans; i++) {
    const top_span_t *s = &l->spans[i];
    if (s->off > pos)
      piece(f, l->text + pos, s->off - pos, l->style, l->selected, color);
    piece(f, l->text + s->off, s->len, s->style, l->selected, color);
    pos = (size_t)s->off + s->len;
  }
  if (pos < len)
    piece(f, l->text + pos, len - pos, l->style, l->selected, color);
  fputc('\n', f);
}
