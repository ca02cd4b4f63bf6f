/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's JSON writer (json_out.c): every reply, event, REST body and rendered document leaves
 * gpumd through it, as compact JSON that is always valid UTF-8. A leaf: it uses jansson and
 * libevent's buffers, nothing of gpumd.
 */
#ifndef GPUMD_JSON_OUT_H
#define GPUMD_JSON_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

struct evbuffer;

/* Appends v to out as compact JSON, byte for byte what json_dumps(v, JSON_COMPACT) gives, without
 * jansson's loop-detection cost. Returns 0, or -1 when out cannot grow (out may then hold a
 * partial value). */
int gpumd_json_write(struct evbuffer *out, json_t *v);
/* Writes v in the shortest form (15 to 17 significant digits) that reads back as v, with ".0"
 * on a whole number as jansson writes it ("0.95", "1e-05", "3.0"), into buf; returns its
 * length (0 and "" when len is too small; GPUMD_REAL_BUFSZ always suffices). Reals in
 * gpumd's replies, REST bodies and events are written this way, never as jansson's %.17g. */
#define GPUMD_REAL_BUFSZ 32
size_t gpumd_json_real(double v, char *buf, size_t len);
/* Writes v in decimal (no sign, no leading zero) at buf, which has room for 20 bytes; returns
 * the number of digits. */
size_t gpumd_dec_u64(char *buf, uint64_t v);
/* A growable piece of memory a writer can write into (gpumd_jw_init_mem): data holds len
 * bytes (not NUL-terminated) of cap; the owner frees data. */
typedef struct {
  char *data;
  size_t len, cap;
} gpumd_jw_mem_t;
/* A JSON writer with the output of gpumd_json_write, for messages written without building
 * jansson values first (the hot replies): pieces gather in a buffer and reach out in few adds,
 * or go straight into a gpumd_jw_mem_t, grown as needed. gpumd_jw_end flushes and returns 0,
 * or -1 when out (or the memory) could not grow. */
typedef struct {
  struct evbuffer *out; /* where a full buffer goes; NULL: into mem, or only counted */
  gpumd_jw_mem_t *mem;  /* the memory written into (gpumd_jw_init_mem), or NULL */
  char *p;              /* where pieces gather: buf, or mem->data */
  size_t cap, used;     /* of p */
  size_t counted;       /* bytes written so far, but for those in p */
  int rc;
  char buf[4096];
} gpumd_jw_t;
void gpumd_jw_init(gpumd_jw_t *w, struct evbuffer *out);
/* A writer into mem, from its start (what mem held is overwritten); gpumd_jw_end sets
 * mem->len. */
void gpumd_jw_init_mem(gpumd_jw_t *w, gpumd_jw_mem_t *mem);
/* The bytes written so far, flushed or not. */
static inline size_t gpumd_jw_pos(const gpumd_jw_t *w) {
  return w->counted + w->used;
}
void gpumd__jw_raw_slow(gpumd_jw_t *w, const char *s, size_t n);
/* As is. Inline: most pieces are short literals that fit, copied without a call. */
static inline void gpumd_jw_raw(gpumd_jw_t *w, const char *s, size_t n) {
  if (n <= w->cap - w->used) {
    memcpy(w->p + w->used, s, n);
    w->used += n;
    return;
  }
  gpumd__jw_raw_slow(w, s, n);
}
/* A string literal as is, and "key": for a key that is a string literal (a protocol name):
 * GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY(GPUM_PROTO_F_STATE)). */
#define GPUMD_JW_LIT(w, lit) gpumd_jw_raw((w), (lit), sizeof(lit) - 1)
#define GPUMD_JSON_KEY(key) "\"" key "\":"
void gpumd_jw_string(gpumd_jw_t *w, const char *s); /* quoted and escaped */
/* A name of gpumd's own tables (a state, a lease kind, a transition: ASCII letters, digits,
 * '-', '_', nothing to escape), quoted, without gpumd_jw_string's checks. */
static inline void gpumd_jw_name(gpumd_jw_t *w, const char *s) {
  size_t n = strlen(s);
  if (n + 2 <= w->cap - w->used) {
    char *p = w->p + w->used;
    p[0] = '"';
    memcpy(p + 1, s, n);
    p[n + 1] = '"';
    w->used += n + 2;
    return;
  }
  gpumd_jw_raw(w, "\"", 1);
  gpumd_jw_raw(w, s, n);
  gpumd_jw_raw(w, "\"", 1);
}
void gpumd_jw_int(gpumd_jw_t *w, long long v);
void gpumd_jw_value(gpumd_jw_t *w, json_t *v);
int gpumd_jw_end(gpumd_jw_t *w);
/* The bytes v takes as gpumd writes it (nothing is written or allocated): what a message
 * holding v will take, to keep replies within the message limit. */
size_t gpumd_json_size(json_t *v);

#endif /* GPUMD_JSON_OUT_H */
