/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The name of an enum value from a table indexed by the value (designated initialisers:
 * [GPUM_X] = "x"; a gap is NULL), for the gpum_*_name functions, so none of them is a switch
 * of its own.
 */
#ifndef GPUM_NAMES_INTERNAL_H
#define GPUM_NAMES_INTERNAL_H

#include <stddef.h>

/* names[v] when v is in [0, n) and names[v] is not NULL, else unknown. Thread-safe. */
static inline const char *gpum__name_of(const char *const *names, size_t n, int v,
                                        const char *unknown) {
  return v >= 0 && (size_t)v < n && names[v] ? names[v] : unknown;
}

#define GPUM__NAME_OF(names, v, unknown) \
  gpum__name_of((names), sizeof(names) / sizeof((names)[0]), (int)(v), (unknown))

#endif /* GPUM_NAMES_INTERNAL_H */
