/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside `gpum top`'s frame code (top_text.c, top_frame.c): the line builder. A builder appends
 * styled pieces to one top_line_t and drops whatever would pass the width, so a line never
 * wraps; pieces must be printable ASCII or the frame's own one-column glyphs.
 */
#ifndef GPUM_CLI_TOP_INTERNAL_H
#define GPUM_CLI_TOP_INTERNAL_H

#include "top.h"

typedef struct {
  top_line_t *l;
  int width; /* columns the line may take */
  int cols;  /* columns taken */
  size_t len;
} top_lb_t;

/* Clears l and starts building it, in style, at most width columns. */
void top__lb_init(top_lb_t *b, top_line_t *l, int width, cli_style_t style);
/* Appends the formatted text in style (CLI_PLAIN: the line's style), as much as fits. */
void top__lb_add(top_lb_t *b, cli_style_t style, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Appends glyph (one column) count times in style, as many as fit. */
void top__lb_repeat(top_lb_t *b, cli_style_t style, const char *glyph, int count);
/* Appends spaces up to column col. */
void top__lb_pad(top_lb_t *b, int col);

/* Copies in to out (len bytes with the NUL), each byte outside printable ASCII as '?': the
 * strings of other processes and users cannot move the cursor or change the width. */
void top__clean(const char *in, char *out, size_t len);

#endif /* GPUM_CLI_TOP_INTERNAL_H */
