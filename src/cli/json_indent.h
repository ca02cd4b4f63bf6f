/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JSON text laid out as jansson's JSON_INDENT(2) lays it out, without parsing it into a tree
 * (json_indent.c): `gpum jobs --json` writes gpumd's documents as they come, page after page,
 * in the layout its output always had. And the growable buffer it writes into.
 */
#ifndef GPUM_CLI_JSON_INDENT_H
#define GPUM_CLI_JSON_INDENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct {
  char *s;
  size_t len, cap;
  bool oom; /* an append failed: the buffer holds less than was appended */
} cli_buf_t;

void cli_buf_put(cli_buf_t *b, const char *s, size_t n);
#define CLI_BUF_LIT(b, lit) cli_buf_put((b), (lit), sizeof(lit) - 1)
/* Writes what b holds to f and empties it; -1 when f fails (or b lost bytes), else 0. */
int cli_buf_flush(cli_buf_t *b, FILE *f);
void cli_buf_free(cli_buf_t *b);

/* Appends the JSON text doc (len bytes, one valid value, compact or not) to b laid out as
 * json_dumps(v, JSON_INDENT(2)) writes it when v is nested depth levels deep: members on
 * lines of their own indented by two spaces a level, ": " after keys, empty objects and
 * arrays as {} and [], and its first line not indented (the caller writes what leads to it).
 * Strings, numbers and literals are copied as they are. */
void cli_json_indent(cli_buf_t *b, const char *doc, size_t len, int depth);

#endif /* GPUM_CLI_JSON_INDENT_H */
