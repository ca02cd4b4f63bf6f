/* SPDX-License-Identifier: Apache-2.0 */
/*
 * UTF-8 for gpumd (see utf8_internal.h): checking a sequence as jansson does, checking and
 * cleaning a text, and cutting a text without splitting a character.
 */
#include "utf8_internal.h"

#include <string.h>

size_t gpumd_utf8_seq(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  size_t len = c < 0x80                 ? 1
               : c >= 0xC2 && c <= 0xDF ? 2
               : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4
                                        : 0;
  if (len == 0 || len > n)
    return 0;
  unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range (no overlongs, surrogates) */
  if (c == 0xE0)
    lo = 0xA0;
  else if (c == 0xED)
    hi = 0x9F;
  else if (c == 0xF0)
    lo = 0x90;
  else if (c == 0xF4)
    hi = 0x8F;
  for (size_t i = 1; i < len; i++)
    if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xBF))
      return 0;
  return len;
}

bool gpumd_utf8_valid(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  while (i < n && p[i] < 0x80) /* ASCII, most texts, first */
    i++;
  for (size_t k; i < n; i += k)
    if ((k = gpumd_utf8_seq(p + i, n - i)) == 0)
      return false;
  return true;
}

void gpumd_utf8_clean(const char *s, char *out, size_t outlen) {
  const unsigned char *p = (const unsigned char *)s;
  size_t n = strlen(s), o = 0;
  for (size_t i = 0; i < n && o + 1 < outlen;) {
    size_t k = gpumd_utf8_seq(p + i, n - i);
    if (k == 0) {
      out[o++] = '?';
      i++;
    } else if (o + k < outlen) {
      memcpy(out + o, p + i, k);
      o += k;
      i += k;
    } else {
      break; /* a whole character or nothing */
    }
  }
  out[o] = '\0';
}

size_t gpumd_utf8_cut(const char *s, size_t max) {
  size_t n = strnlen(s, max);
  if (n < max || s[n] == '\0')
    return n; /* no cut */
  while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
    n--; /* s[n] continues a character: cut before its first byte */
  return n;
}

void gpumd_cat(char *buf, size_t len, size_t *off, const char *s) {
  size_t o = *off < len ? *off : len - 1;
  size_t n = gpumd_utf8_cut(s, len - 1 - o); /* a cut never splits a character */
  memcpy(buf + o, s, n);
  buf[o + n] = '\0';
  *off = o + n;
}

void gpumd_cat_u64(char *buf, size_t len, size_t *off, uint64_t v) {
  char tmp[24];
  size_t i = sizeof(tmp) - 1;
  tmp[i] = '\0';
  do {
    tmp[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  gpumd_cat(buf, len, off, tmp + i);
}
