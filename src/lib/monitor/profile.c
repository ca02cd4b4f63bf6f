/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Named profiling timers: a process-wide table of names, each with exact count / total / min /
 * max and a log-linear histogram of durations for the percentiles (accuracy documented in
 * include/gpum/profile.h). Entries are allocated on a name's first use and live until
 * gpum_profile_reset(). One mutex guards the table; a record is a short lookup and a few
 * additions under it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/error.h>
#include <gpum/profile.h>

#include "os_internal.h"
#include "core/options_internal.h"
#include "monitor/profile_internal.h"

/* Log-linear buckets: values below SUB are exact; above, each power of two is split into SUB
 * equal sub-buckets. */
#define SUB_BITS 4
#define SUB (1u << SUB_BITS)
#define NBUCKETS (SUB + (64 - SUB_BITS) * SUB)

typedef struct {
  const char *key; /* the first pointer seen for the name */
  char name[GPUM_PROFILE_NAME_LEN];
  uint64_t count, total, min, max;
  uint64_t buckets[NBUCKETS];
} entry_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static entry_t *entries[GPUM_PROFILE_MAX_NAMES];
static size_t n_entries;
static uint64_t dropped;

static uint64_t (*clock_fn)(void) = gpum__os_mono_ns;

void gpum__profile_set_clock(uint64_t (*fn)(void)) {
  clock_fn = fn ? fn : gpum__os_mono_ns;
}

uint64_t gpum__profile_now(void) {
  return clock_fn();
}

unsigned gpum__profile_bucket(uint64_t v) {
  if (v < SUB)
    return (unsigned)v;
  unsigned msb = 63u - (unsigned)__builtin_clzll(v);
  unsigned shift = msb - SUB_BITS;
  return SUB + shift * SUB + (unsigned)((v >> shift) & (SUB - 1));
}

/* The midpoint of bucket b (its exact value below SUB). */
uint64_t gpum__profile_bucket_value(unsigned b) {
  if (b < SUB)
    return b;
  unsigned shift = (b - SUB) / SUB, sub = (b - SUB) % SUB;
  uint64_t lower = (uint64_t)(SUB + sub) << shift;
  return lower + (((uint64_t)1 << shift) >> 1);
}

/* Finds or creates the entry of name; the caller holds mu. NULL when the table is full or
 * memory is short. */
static entry_t *lookup(const char *name) {
  for (size_t i = 0; i < n_entries; i++)
    if (entries[i]->key == name)
      return entries[i];
  for (size_t i = 0; i < n_entries; i++)
    if (!strncmp(entries[i]->name, name, GPUM_PROFILE_NAME_LEN - 1))
      return entries[i];
  if (n_entries == GPUM_PROFILE_MAX_NAMES)
    return NULL;
  entry_t *e = calloc(1, sizeof *e);
  if (e == NULL)
    return NULL;
  e->key = name;
  snprintf(e->name, sizeof e->name, "%s", name);
  e->min = UINT64_MAX;
  entries[n_entries++] = e;
  return e;
}

void gpum_profile_record(const char *name, uint64_t ns) {
  if (name == NULL)
    return;
  pthread_mutex_lock(&mu);
  entry_t *e = lookup(name);
  if (e == NULL) {
    dropped++;
  } else {
    e->count++;
    e->total += ns;
    if (ns < e->min)
      e->min = ns;
    if (ns > e->max)
      e->max = ns;
    e->buckets[gpum__profile_bucket(ns)]++;
  }
  pthread_mutex_unlock(&mu);
}

gpum_profile_timer_t gpum_profile_begin(const char *name) {
  gpum_profile_timer_t t = {name, clock_fn()};
  return t;
}

uint64_t gpum_profile_end(gpum_profile_timer_t *t) {
  if (t == NULL || t->name == NULL)
    return 0;
  uint64_t now = clock_fn();
  uint64_t d = now > t->start_ns ? now - t->start_ns : 0;
  gpum_profile_record(t->name, d);
  t->name = NULL;
  return d;
}

void gpum_profile_scope_end(gpum_profile_timer_t *t) {
  gpum_profile_end(t);
}

/* The nearest-rank percentile p (0 < p <= 100) of e, clamped to [min, max]. */
static uint64_t percentile(const entry_t *e, double p) {
  uint64_t rank = (uint64_t)((p / 100.0) * (double)e->count);
  if ((double)rank < (p / 100.0) * (double)e->count)
    rank++; /* ceil */
  if (rank == 0)
    rank = 1;
  uint64_t seen = 0;
  for (unsigned b = 0; b < NBUCKETS; b++) {
    seen += e->buckets[b];
    if (seen >= rank) {
      uint64_t v = gpum__profile_bucket_value(b);
      return v < e->min ? e->min : v > e->max ? e->max : v;
    }
  }
  return e->max;
}

static void fill_stat(const entry_t *e, gpum_profile_stat_t *s) {
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "%s", e->name);
  s->count = e->count;
  if (e->count == 0)
    return;
  s->total_ns = e->total;
  s->min_ns = e->min;
  s->max_ns = e->max;
  s->mean_ns = (double)e->total / (double)e->count;
  s->p50_ns = percentile(e, 50);
  s->p95_ns = percentile(e, 95);
  s->p99_ns = percentile(e, 99);
}

int gpum_profile_stats(gpum_profile_stat_t *out, size_t cap, size_t *count) {
  if (out == NULL && cap > 0)
    return gpum_error(GPUM_EINVAL, "profile stats: out is NULL");
  pthread_mutex_lock(&mu);
  size_t n = n_entries;
  for (size_t i = 0; i < n && i < cap; i++)
    fill_stat(entries[i], &out[i]);
  pthread_mutex_unlock(&mu);
  if (count != NULL)
    *count = n;
  if (cap < n)
    return gpum_error(GPUM_ENOSPC, "profile stats: %zu names, room for %zu", n, cap);
  return 0;
}

int gpum_profile_get(const char *name, gpum_profile_stat_t *out) {
  int rc = GPUM_ENOENT;
  if (name == NULL || out == NULL)
    return gpum_error(GPUM_EINVAL, "profile get: NULL argument");
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < n_entries; i++)
    if (!strncmp(entries[i]->name, name, GPUM_PROFILE_NAME_LEN - 1)) {
      fill_stat(entries[i], out);
      rc = 0;
      break;
    }
  pthread_mutex_unlock(&mu);
  return rc ? gpum_error(rc, "no profile timer named '%s'", name) : 0;
}

void gpum_profile_reset(void) {
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < n_entries; i++)
    free(entries[i]);
  n_entries = 0;
  dropped = 0;
  pthread_mutex_unlock(&mu);
}

uint64_t gpum_profile_dropped(void) {
  pthread_mutex_lock(&mu);
  uint64_t d = dropped;
  pthread_mutex_unlock(&mu);
  return d;
}

/* ---- Reports ---------------------------------------------------------------------------- */

char *gpum__profile_format_ns(double ns, char *buf, size_t len) {
  if (ns < 1e3)
    snprintf(buf, len, "%.0f ns", ns);
  else if (ns < 1e6)
    snprintf(buf, len, "%.2f us", ns / 1e3);
  else if (ns < 1e9)
    snprintf(buf, len, "%.2f ms", ns / 1e6);
  else
    snprintf(buf, len, "%.2f s", ns / 1e9);
  return buf;
}

static void json_string(gpum__strbuf_t *b, const char *s) {
  gpum__strbuf_json(b, s, strlen(s));
}

static void report_json(gpum__strbuf_t *b, const gpum_profile_stat_t *st, size_t n) {
  gpum__strbuf_puts(b, "[");
  for (size_t i = 0; i < n; i++) {
    const gpum_profile_stat_t *s = &st[i];
    gpum__strbuf_puts(b, i ? ",\n {\"name\": " : "\n {\"name\": ");
    json_string(b, s->name);
    gpum__strbuf_printf(b,
                        ", \"count\": %llu, \"total_ns\": %llu, \"mean_ns\": %.1f, \"min_ns\": "
                        "%llu, \"p50_ns\": %llu, \"p95_ns\": %llu, \"p99_ns\": %llu, "
                        "\"max_ns\": %llu}",
                        (unsigned long long)s->count, (unsigned long long)s->total_ns, s->mean_ns,
                        (unsigned long long)s->min_ns, (unsigned long long)s->p50_ns,
                        (unsigned long long)s->p95_ns, (unsigned long long)s->p99_ns,
                        (unsigned long long)s->max_ns);
  }
  gpum__strbuf_puts(b, n ? "\n]\n" : "]\n");
}

static void report_text(gpum__strbuf_t *b, const gpum_profile_stat_t *st, size_t n) {
  int w = 4;
  for (size_t i = 0; i < n; i++)
    if ((int)strlen(st[i].name) > w)
      w = (int)strlen(st[i].name);
  gpum__strbuf_printf(b, "%-*s %10s %11s %11s %11s %11s %11s\n", w, "name", "count", "total",
                      "mean", "p50", "p95", "max");
  for (size_t i = 0; i < n; i++) {
    char t[5][24];
    const gpum_profile_stat_t *s = &st[i];
    gpum__strbuf_printf(b, "%-*s %10llu %11s %11s %11s %11s %11s\n", w, s->name,
                        (unsigned long long)s->count,
                        gpum__profile_format_ns((double)s->total_ns, t[0], sizeof t[0]),
                        gpum__profile_format_ns(s->mean_ns, t[1], sizeof t[1]),
                        gpum__profile_format_ns((double)s->p50_ns, t[2], sizeof t[2]),
                        gpum__profile_format_ns((double)s->p95_ns, t[3], sizeof t[3]),
                        gpum__profile_format_ns((double)s->max_ns, t[4], sizeof t[4]));
  }
}

int gpum_profile_report(bool json, char **out) {
  gpum__strbuf_t b = {0};
  gpum_profile_stat_t *st = NULL;
  size_t n = 0;
  if (out == NULL)
    return gpum_error(GPUM_EINVAL, "profile report: out is NULL");
  /* Copy under the lock, format without it; retry if names were added in between. */
  for (;;) {
    gpum_profile_stats(NULL, 0, &n);
    gpum_profile_stat_t *v = realloc(st, (n ? n : 1) * sizeof *v);
    if (v == NULL) {
      free(st);
      return gpum_error(GPUM_ENOMEM, "profile report: out of memory");
    }
    st = v;
    if (gpum_profile_stats(st, n, &n) == 0)
      break;
  }
  if (json)
    report_json(&b, st, n);
  else
    report_text(&b, st, n);
  free(st);
  return gpum__strbuf_finish(&b, out);
}
