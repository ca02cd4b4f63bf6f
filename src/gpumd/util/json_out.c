/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's JSON writer (json_out.h): replies, events, REST bodies and the ledger's documents are
 * written with it, never with jansson's dumper.
 */
#include "json_out.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "core/options_internal.h"
#include "utf8_internal.h"

/* Replies are written with a small serialiser of our own: jansson's dumper checks every
 * container for reference loops through a hash table keyed by a printed pointer, which was
 * a quarter of gpumd's instructions per request. The output is what
 * json_dumps(JSON_COMPACT) gives (keys in insertion order, '/' and non-ASCII as is), but for
 * reals, which are written in their shortest form that reads back the same (gpumd_json_real:
 * 0.95, where jansson's %.17g writes 0.94999999999999996), and for text that is not UTF-8
 * (which jansson refuses to write): each byte that is not part of a character goes out as
 * '?', so that whatever a string holds (a damaged ledger row, a driver's name) every message
 * is valid UTF-8. Pieces gather in a stack buffer and reach the evbuffer in few, large adds. */
static void dump_flush(gpumd_jw_t *b) {
  if (b->mem)
    return; /* in memory: nothing to hand on */
  b->counted += b->used;
  if (b->used && b->out && evbuffer_add(b->out, b->p, b->used) != 0)
    b->rc = -1;
  b->used = 0;
}

/* Makes room for n more bytes in memory: false when it cannot grow (the writer then fails,
 * and writes nothing more). */
static bool mem_grow(gpumd_jw_t *b, size_t n) {
  if (b->rc != 0)
    return false;
  size_t want = b->used + n, cap = b->cap ? b->cap : 256;
  while (cap < want && cap <= SIZE_MAX / 2)
    cap *= 2;
  char *p = cap >= want ? realloc(b->mem->data, cap) : NULL;
  if (!p) {
    b->rc = -1;
    b->cap = b->used; /* every later piece comes here, and is dropped */
    return false;
  }
  b->p = b->mem->data = p;
  b->cap = b->mem->cap = cap;
  return true;
}

void gpumd__jw_raw_slow(gpumd_jw_t *b, const char *p, size_t n) {
  if (b->mem) {
    if (mem_grow(b, n)) {
      memcpy(b->p + b->used, p, n);
      b->used += n;
    }
    return;
  }
  dump_flush(b);
  if (n > b->cap) {
    b->counted += n;
    if (b->out && evbuffer_add(b->out, p, n) != 0)
      b->rc = -1;
    return;
  }
  memcpy(b->p, p, n);
  b->used = n;
}

static void dump_bytes(gpumd_jw_t *b, const char *p, size_t n) {
  gpumd_jw_raw(b, p, n);
}

static void dump_char(gpumd_jw_t *b, char ch) {
  if (b->used < b->cap)
    b->p[b->used++] = ch;
  else
    gpumd__jw_raw_slow(b, &ch, 1);
}

static void dump_put(void *ctx, const char *p, size_t len) {
  dump_bytes(ctx, p, len);
}

/* Whether s needs no escape and is ASCII (the common case: keys, ids, names). Eight bytes at a
 * time: a byte is below 0x20, '"' or '\\' when the classic has-zero-byte test finds a zero in
 * the word XORed with it, and at or above 0x80 when its top bit is set. */
static bool plain(const char *s, size_t n) {
  const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    uint64_t quote = w ^ (ones * '"'), bslash = w ^ (ones * '\\');
    /* a byte below 0x20: (byte - 0x20) borrows into its top bit (and the word's top bits are
     * checked on their own, so a borrow across bytes only comes from such a byte) */
    uint64_t bad = (w - ones * 0x20) | ((quote - ones) & ~quote) | ((bslash - ones) & ~bslash) | w;
    if (bad & highs)
      return false;
  }
  for (; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch < 0x20 || ch >= 0x80 || ch == '"' || ch == '\\')
      return false;
  }
  return true;
}

/* s as a JSON string, escaped by the library's one set of rules (gpum__json_escape), each
 * byte that does not start a valid UTF-8 sequence written as '?'. */
static void dump_string(gpumd_jw_t *b, const char *s, size_t n) {
  if (n + 2 <= b->cap - b->used && plain(s, n)) { /* quote, bytes, quote in place */
    char *p = b->p + b->used;
    p[0] = '"';
    memcpy(p + 1, s, n);
    p[n + 1] = '"';
    b->used += n + 2;
    return;
  }
  const unsigned char *u = (const unsigned char *)s;
  size_t run = 0; /* the start of the bytes not written yet */
  dump_bytes(b, "\"", 1);
  for (size_t i = 0; i < n;) {
    size_t k = u[i] < 0x80 ? 1 : gpumd_utf8_seq(u + i, n - i);
    if (k > 0) {
      i += k;
      continue;
    }
    gpum__json_escape_runs(s + run, i - run, dump_put, b);
    dump_bytes(b, "?", 1);
    run = ++i;
  }
  gpum__json_escape_runs(s + run, n - run, dump_put, b);
  dump_bytes(b, "\"", 1);
}

size_t gpumd_json_real(double v, char *buf, size_t len) {
  int n = 0;
  for (int prec = 15; prec <= 17; prec++) { /* 17 significant digits always read back */
    n = snprintf(buf, len, "%.*g", prec, v);
    if (n < 0 || (size_t)n >= len || strtod(buf, NULL) == v)
      break;
  }
  if (n < 0 || (size_t)n >= len) {
    buf[0] = '\0';
    return 0;
  }
  if (strspn(buf, "-0123456789") == (size_t)n && (size_t)n + 2 < len) { /* 1 -> 1.0, as jansson */
    memcpy(buf + n, ".0", 3);
    n += 2;
  }
  return (size_t)n;
}

/* Two decimal digits at a time: "00" to "99". */
static const char digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static const uint64_t pow10_tab[20] = {1ull,
                                       10ull,
                                       100ull,
                                       1000ull,
                                       10000ull,
                                       100000ull,
                                       1000000ull,
                                       10000000ull,
                                       100000000ull,
                                       1000000000ull,
                                       10000000000ull,
                                       100000000000ull,
                                       1000000000000ull,
                                       10000000000000ull,
                                       100000000000000ull,
                                       1000000000000000ull,
                                       10000000000000000ull,
                                       100000000000000000ull,
                                       1000000000000000000ull,
                                       10000000000000000000ull};

/* Writes the two digits of each pair of v (below 10^(2 * pairs)) backwards from e. */
static char *put_pairs(char *e, uint32_t v, int pairs) {
  for (int i = 0; i < pairs; i++) {
    uint32_t d = (v % 100) * 2;
    v /= 100;
    *--e = digit_pairs[d + 1];
    *--e = digit_pairs[d];
  }
  return e;
}

size_t gpumd_dec_u64(char *buf, uint64_t v) {
  if (v < 10) {
    buf[0] = (char)('0' + v);
    return 1;
  }
  /* The digit count from the bit length (log10(2) ~ 1233 / 4096), then the digits from the
   * last: eight at a time in 32-bit arithmetic (nanosecond times have 19), two per step. */
  unsigned t = ((64u - (unsigned)__builtin_clzll(v)) * 1233u) >> 12;
  size_t n = t + (v >= pow10_tab[t]);
  char *e = buf + n;
  while (v >= 100000000u) {
    e = put_pairs(e, (uint32_t)(v % 100000000u), 4);
    v /= 100000000u;
  }
  uint32_t u = (uint32_t)v;
  while (u >= 100) {
    uint32_t d = (u % 100) * 2;
    u /= 100;
    *--e = digit_pairs[d + 1];
    *--e = digit_pairs[d];
  }
  if (u >= 10) {
    *--e = digit_pairs[u * 2 + 1];
    *--e = digit_pairs[u * 2];
  } else {
    *--e = (char)('0' + u);
  }
  return n;
}

/* v in decimal, written in place when there is room. */
static void dump_integer(gpumd_jw_t *b, json_int_t v) {
  char tmp[24];
  bool in_place = b->cap - b->used >= sizeof tmp; /* else through tmp */
  char *p = in_place ? b->p + b->used : tmp;
  unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
  size_t n = v < 0;
  if (v < 0)
    p[0] = '-';
  n += gpumd_dec_u64(p + n, u);
  if (in_place)
    b->used += n;
  else
    dump_bytes(b, tmp, n);
}

static void dump_value(gpumd_jw_t *b, json_t *v, int depth) {
  if (depth > 64) { /* our own messages are shallow: this is a cycle or a bug */
    b->rc = -1;
    return;
  }
  switch (json_typeof(v)) {
  case JSON_OBJECT: {
    const char *key;
    json_t *val;
    bool first = true;
    dump_char(b, '{');
    json_object_foreach(v, key, val) {
      if (!first)
        dump_char(b, ',');
      first = false;
      dump_string(b, key, strlen(key));
      dump_char(b, ':');
      dump_value(b, val, depth + 1);
    }
    dump_char(b, '}');
    break;
  }
  case JSON_ARRAY:
    dump_char(b, '[');
    for (size_t i = 0; i < json_array_size(v); i++) {
      if (i)
        dump_char(b, ',');
      dump_value(b, json_array_get(v, i), depth + 1);
    }
    dump_char(b, ']');
    break;
  case JSON_STRING:
    dump_string(b, json_string_value(v), json_string_length(v));
    break;
  case JSON_INTEGER:
    dump_integer(b, json_integer_value(v));
    break;
  case JSON_REAL: {
    char num[GPUMD_REAL_BUFSZ];
    size_t n = gpumd_json_real(json_real_value(v), num, sizeof num);
    dump_bytes(b, num, n);
    break;
  }
  case JSON_TRUE:
    dump_bytes(b, "true", 4);
    break;
  case JSON_FALSE:
    dump_bytes(b, "false", 5);
    break;
  default:
    dump_bytes(b, "null", 4);
  }
}

void gpumd_jw_init(gpumd_jw_t *w, struct evbuffer *out) {
  w->out = out;
  w->mem = NULL;
  w->p = w->buf;
  w->cap = sizeof w->buf;
  w->used = 0;
  w->counted = 0;
  w->rc = 0;
}

void gpumd_jw_init_mem(gpumd_jw_t *w, gpumd_jw_mem_t *mem) {
  w->out = NULL;
  w->mem = mem;
  w->p = mem->data ? mem->data : w->buf; /* no memory yet: the first piece allocates it */
  w->cap = mem->data ? mem->cap : 0;
  w->used = 0;
  w->counted = 0;
  w->rc = 0;
  mem->len = 0;
}

size_t gpumd_json_size(json_t *v) {
  gpumd_jw_t w;
  gpumd_jw_init(&w, NULL);
  gpumd_jw_value(&w, v);
  gpumd_jw_end(&w);
  return w.counted;
}

int gpumd_json_write(struct evbuffer *out, json_t *v) {
  gpumd_jw_t w;
  gpumd_jw_init(&w, out);
  dump_value(&w, v, 0);
  return gpumd_jw_end(&w);
}

void gpumd_jw_string(gpumd_jw_t *w, const char *s) {
  dump_string(w, s, strlen(s));
}

void gpumd_jw_int(gpumd_jw_t *w, long long v) {
  dump_integer(w, (json_int_t)v);
}

void gpumd_jw_value(gpumd_jw_t *w, json_t *v) {
  dump_value(w, v, 0);
}

int gpumd_jw_end(gpumd_jw_t *w) {
  if (w->mem)
    w->mem->len = w->rc == 0 ? w->used : 0;
  else
    dump_flush(w);
  return w->rc;
}
