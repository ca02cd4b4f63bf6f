/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What gpumd takes in as JSON, before either face reads a field: the nesting check made on the
 * raw text, the parser (json_fast.c) and the check of an object's field names (json_in.c). A
 * leaf: jansson and libgpum's error detail, nothing of gpumd.
 */
#ifndef GPUMD_JSON_IN_H
#define GPUMD_JSON_IN_H

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
/* Checks that obj has only the named fields (NULL-terminated list). Returns 0, or GPUM_EINVAL
 * with the detail naming the first unknown field. */
int gpumd_check_fields(json_t *obj, const char *const *allowed);
/* gpumd_check_fields, which also puts the value of each field at its index in allowed into
 * values (as many pointers as allowed names; NULL for a field that is absent): one pass over
 * the object, and a decoder reads its fields without looking each up. Values are borrowed
 * from obj. */
int gpumd_gather_fields(json_t *obj, const char *const *allowed, json_t **values);

#endif /* GPUMD_JSON_IN_H */
