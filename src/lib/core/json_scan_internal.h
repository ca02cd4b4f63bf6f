/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A pull scanner over JSON text, for replies read straight into structs without building a
 * jansson tree (json_scan.c): the client library's list pages (client/list.c), and gpumd's
 * requests (src/gpumd/util/json_fast.c builds their jansson values on it). It takes the common
 * shape of gpumd's messages only: objects and arrays (at most GPUM__JSCAN_MAX_DEPTH deep,
 * GPUM__JSCAN_MAX_KEYS keys open at once), strings of printable ASCII without escapes,
 * integers that fit in long long, reals in range, true, false and null. Anything else (an
 * escape, a byte of UTF-8, a duplicate key, a number out of range, any syntax error) sets
 * `fail`, and the caller parses the text with jansson instead, so the result and the error for
 * bad input are always jansson's (JSON_REJECT_DUPLICATES). Within that shape, a text the
 * scanner walks to its end without failing is one jansson accepts.
 *
 * Use: gpum__jscan_init; gpum__jscan_begin_object, then gpum__jscan_key in a loop (false at
 * the end of the object), reading each value with one of the value calls (or
 * gpum__jscan_skip); arrays the same with gpum__jscan_begin_array and gpum__jscan_next.
 * Every call does nothing and returns false/0 once `fail` is set. Not thread-safe per
 * scanner; scanners share nothing.
 */
#ifndef GPUM_JSON_SCAN_INTERNAL_H
#define GPUM_JSON_SCAN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GPUM__JSCAN_MAX_DEPTH 32
#define GPUM__JSCAN_MAX_KEYS 256

typedef struct gpum__jscan {
  const char *p, *end;
  bool fail;
  int depth;
  bool first[GPUM__JSCAN_MAX_DEPTH + 1]; /* no member read yet at that depth (no comma due) */
  /* The keys of the open objects, for the duplicate check: keys[base[d]..nkeys) are depth d's. */
  struct {
    const char *s;
    size_t n;
  } keys[GPUM__JSCAN_MAX_KEYS];
  size_t nkeys, base[GPUM__JSCAN_MAX_DEPTH + 1];
} gpum__jscan_t;

void gpum__jscan_init(gpum__jscan_t *s, const char *text, size_t len);
/* The next value's first byte ('{', '[', '"', 't', 'f', 'n', a digit or '-'), 0 at the end. */
char gpum__jscan_peek(gpum__jscan_t *s);
/* Enters the object/array that must come next. */
bool gpum__jscan_begin_object(gpum__jscan_t *s);
bool gpum__jscan_begin_array(gpum__jscan_t *s);
/* Inside an object: the next key (not NUL-terminated, as written) and true, with the scanner at
 * its value; false at the closing brace (consumed) or on failure. */
bool gpum__jscan_key(gpum__jscan_t *s, const char **key, size_t *n);
/* Inside an array: true with the scanner at the next item; false at ']' (consumed). */
bool gpum__jscan_next(gpum__jscan_t *s);
/* A string value (its bytes as written: no escapes in the shape taken). false when the value
 * is not a string (it is then skipped: mistyped fields read as absent). */
bool gpum__jscan_string(gpum__jscan_t *s, const char **v, size_t *n);
/* A number value: an integer (is_int, *i) or a real (*d). false when it is not a number
 * (skipped). */
bool gpum__jscan_number(gpum__jscan_t *s, bool *is_int, long long *i, double *d);
/* true, false or null: 1, 0 or -1 in *v; false when the value is none of them (skipped). */
bool gpum__jscan_literal(gpum__jscan_t *s, int *v);
/* Skips one value of any kind. */
void gpum__jscan_skip(gpum__jscan_t *s);
/* True when the text was one value, walked to its end (only whitespace after it). */
bool gpum__jscan_done(gpum__jscan_t *s);

#endif /* GPUM_JSON_SCAN_INTERNAL_H */
