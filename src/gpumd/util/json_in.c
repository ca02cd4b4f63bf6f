/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The checks of json_in.h that are not the parser (json_fast.c): nesting on the raw text and
 * the field names of an object.
 */
#include "json_in.h"

#include <stdbool.h>
#include <string.h>

#include <gpum/error.h>

int gpumd_json_depth(const char *s, size_t len, int limit) {
  int depth = 0, max = 0;
  bool in_str = false;
  for (size_t i = 0; i < len; i++) {
    char ch = s[i];
    if (in_str) {
      if (ch == '\\')
        i++;
      else if (ch == '"')
        in_str = false;
      continue;
    }
    if (ch == '"') {
      in_str = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > max) {
        max = depth;
        if (max > limit)
          return max;
      }
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      depth--; /* stray closers cannot hide the openers that follow */
    }
  }
  return max;
}

int gpumd_gather_fields(json_t *obj, const char *const *allowed, json_t **values) {
  size_t n = 0;
  while (values && allowed[n])
    values[n++] = NULL;
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    const char *const *a = allowed;
    while (*a && strcmp(*a, key) != 0)
      a++;
    if (!*a)
      return gpum_error(GPUM_EINVAL, "unknown field '%s'", key);
    if (values)
      values[a - allowed] = v;
  }
  return 0;
}

int gpumd_check_fields(json_t *obj, const char *const *allowed) {
  return gpumd_gather_fields(obj, allowed, NULL);
}

int gpumd_flat_gather(const gpumd_flat_t *f, const char *const *allowed, int *index) {
  size_t n = 0;
  while (allowed[n])
    index[n++] = -1;
  for (size_t i = 0; i < f->count; i++) {
    const char *const *a = allowed;
    while (*a && strcmp(*a, f->field[i].key) != 0)
      a++;
    if (!*a)
      return gpum_error(GPUM_EINVAL, "unknown field '%s'", f->field[i].key);
    index[a - allowed] = (int)i;
  }
  return 0;
}
