/* SPDX-License-Identifier: Apache-2.0 */
/*
 * UTF-8 as gpumd checks it: what jansson accepts (no overlong forms, no surrogates, nothing
 * past U+10FFFF). Everything gpumd sends is valid UTF-8, and the ledger's rows are checked
 * against the same rule when they are loaded. Pure functions, thread-safe.
 */
#ifndef GPUMD_UTF8_INTERNAL_H
#define GPUMD_UTF8_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The length of the valid UTF-8 sequence at s (at most n bytes; n > 0), 0 when it is not
 * one. */
size_t gpumd_utf8_seq(const unsigned char *s, size_t n);
/* Whether the n bytes at s are valid UTF-8 (a NUL byte counts as a character). */
bool gpumd_utf8_valid(const char *s, size_t n);
/* Copies s into out (outlen > 0) with every byte that does not start a valid UTF-8 sequence
 * replaced by '?', stopping before a character that does not fit; out is NUL-terminated. For
 * texts a JSON string must hold. */
void gpumd_utf8_clean(const char *s, char *out, size_t outlen);
/* How many of the first max bytes of s (NUL-terminated) to keep so that a cut there does not
 * split a character: strnlen(s, max), less the bytes of a character that the cut would split. */
size_t gpumd_utf8_cut(const char *s, size_t max);

/* snprintf's job on the request path, at a fraction of its cost: append s, or the decimal v,
 * to buf[len] at *off, cutting at the end of buf (before a UTF-8 character the cut would
 * split); buf stays NUL-terminated (len > 0). */
void gpumd_cat(char *buf, size_t len, size_t *off, const char *s);
void gpumd_cat_u64(char *buf, size_t len, size_t *off, uint64_t v);

#endif /* GPUMD_UTF8_INTERNAL_H */
