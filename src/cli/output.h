/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Terminal output for the gpum CLI: ANSI styles that switch off cleanly (no colour means not
 * one escape byte is written), threshold colours, usage bars and compact memory figures.
 * Everything writes to a cli_out_t, so a frame can be rendered into a memory stream and written
 * to the terminal at once.
 */
#ifndef GPUM_CLI_OUTPUT_H
#define GPUM_CLI_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
  CLI_PLAIN = 0,
  CLI_BOLD,
  CLI_DIM,
  CLI_RED,
  CLI_GREEN,
  CLI_YELLOW,
  CLI_BLUE,
  CLI_MAGENTA,
  CLI_CYAN,
  CLI_BOLD_RED,
} cli_style_t;

typedef struct {
  FILE *f;
  bool color;
} cli_out_t;

/* Writes fmt in style, then resets (no escapes at all when o->color is false). */
void cli_styled(const cli_out_t *o, cli_style_t style, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Green below warn, yellow below crit, red from crit on. */
cli_style_t cli_level_style(double value, double warn, double crit);

/* Writes "[####......]" of width cells (plus brackets) for frac in [0, 1], coloured by level. */
void cli_bar(const cli_out_t *o, double frac, int width);

/* "12.3/40.0 GiB": used and total in the unit of total, one decimal. Returns buf. */
char *cli_fmt_mem_pair(uint64_t used, uint64_t total, char *buf, size_t len);

/* "4.00 GiB" (gpum_size_format) or "n/a" when !valid. Returns buf. */
char *cli_fmt_size(uint64_t bytes, bool valid, char *buf, size_t len);

/* Width of the terminal behind f, or 0 when f is not a terminal. */
int cli_term_width(FILE *f);

/* The name of user uid into buf (len bytes), or the number when it has none (or uid < 0). */
void cli_user_name(int64_t uid, char *buf, size_t len);

#endif /* GPUM_CLI_OUTPUT_H */
