/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What libgpum exports. The library is built with -fvisibility=hidden, so only the functions
 * and variables declared in include/gpum with GPUM_API are part of its ABI; everything else
 * (the gpum__ internals shared between its files) stays inside it and cannot clash with, or be
 * interposed by, another library's symbols.
 */
#ifndef GPUM_EXPORT_H
#define GPUM_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define GPUM_API __attribute__((visibility("default")))
#else
#define GPUM_API
#endif

#endif /* GPUM_EXPORT_H */
