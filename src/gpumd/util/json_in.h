/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What gpumd takes in as JSON, before either face reads a field: the nesting check made on the
 * raw text, the parser (json_fast.c) and the check of an object's field names (json_in.c). A
 * leaf: jansson and libgpum's error detail, nothing of gpumd.
 */
#ifndef GPUMD_JSON_IN_H
#define GPUMD_JSON_IN_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* Deepest nesting of arrays/objects in a JSON text (strings skipped), stopping early once it
 * passes limit. */
int gpumd_json_depth(const char *s, size_t len, int limit);
/* Parses a request as json_loadb(s, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, err) does,
 * with the same result (value, or NULL and err) for every input; faster for the common shape
 * of requests (json_fast.c). Any value is taken on top (the caller checks for an object). The
 * caller owns the value. */
json_t *gpumd_json_parse(const char *s, size_t len, json_error_t *err);
/* Its fast path alone: the value, or NULL when the input is not of the shape it takes or is
 * nested deeper than max_depth (at most GPUMD_JSON_FAST_MAX_DEPTH: deeper is left to jansson).
 * A value it gives is well-formed JSON nested no deeper than max_depth. */
#define GPUMD_JSON_FAST_MAX_DEPTH 32
json_t *gpumd_json_parse_fast(const char *s, size_t len, int max_depth);
/* A request line of the flat shape, decoded without a JSON tree (json_fast.c): one object of
 * at most GPUMD_FLAT_MAX_FIELDS members with distinct keys, each value an integer, a string of
 * printable ASCII without escapes, true, false or null; the common requests (a reserve, a
 * release) are such lines. */
#define GPUMD_FLAT_MAX_FIELDS 16
#define GPUMD_FLAT_MAX_LINE 480 /* bytes of a flat line */
typedef struct {
  const char *key; /* NUL-terminated, in the gpumd_flat_t's text */
  json_type type;  /* JSON_INTEGER, JSON_STRING, JSON_TRUE, JSON_FALSE or JSON_NULL */
  json_int_t integer;
  const char *string; /* JSON_STRING: NUL-terminated, in the gpumd_flat_t's text */
  size_t length;
} gpumd_flat_field_t;
typedef struct {
  size_t count; /* members, in the line's order */
  gpumd_flat_field_t field[GPUMD_FLAT_MAX_FIELDS];
  char text[GPUMD_FLAT_MAX_LINE]; /* the keys and strings, each NUL-terminated */
} gpumd_flat_t;
/* Decodes s (len bytes, at most GPUMD_FLAT_MAX_LINE) into *out when it is a flat line: then
 * true, and jansson's value for it is the object of out's members; else false (the line may
 * be anything: gpumd_json_parse tells). */
bool gpumd_json_parse_flat(const char *s, size_t len, gpumd_flat_t *out);
/* The member named key (NULL: none). */
const gpumd_flat_field_t *gpumd_flat_get(const gpumd_flat_t *f, const char *key);
/* gpumd_gather_fields for a flat line: its members' indices in allowed into index (-1: absent),
 * or GPUM_EINVAL naming the first unknown member, as for the same line parsed whole. */
int gpumd_flat_gather(const gpumd_flat_t *f, const char *const *allowed, int *index);

/* Checks that obj has only the named fields (NULL-terminated list). Returns 0, or GPUM_EINVAL
 * with the detail naming the first unknown field. */
int gpumd_check_fields(json_t *obj, const char *const *allowed);
/* gpumd_check_fields, which also puts the value of each field at its index in allowed into
 * values (as many pointers as allowed names; NULL for a field that is absent): one pass over
 * the object, and a decoder reads its fields without looking each up. Values are borrowed
 * from obj. */
int gpumd_gather_fields(json_t *obj, const char *const *allowed, json_t **values);

#endif /* GPUMD_JSON_IN_H */
