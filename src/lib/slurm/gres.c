/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The strings of Slurm's node information that say what GPUs a node has (slurm_internal.h):
 * its gres and gres_used parsed into GPU types with their counts, GPU types as users write
 * them matched against gres types, and the memory class a gres type states. Pure string work,
 * no libslurm: tested in tests/unit/test_slurm_nodes.c.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/gputype.h>

#include "slurm/slurm_internal.h"

#define MAX_USED 32  /* typed entries of a gres_used string that are matched */
#define MAX_FIELDS 5 /* NAME:TYPE:no_consume:COUNT and one too many */

static bool empty(const char *s) {
  return !s || !*s || !strcmp(s, "(null)");
}

/* A count: digits with an optional K, M or G (x1024 each), at most UINT32_MAX. */
static bool parse_count(const char *s, uint32_t *out) {
  if (!isdigit((unsigned char)*s))
    return false;
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  static const char units[] = "KMG";
  const char *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
  if (u && end[1] == '\0')
    for (const char *p = units; p <= u; p++)
      v = v > UINT32_MAX ? v : v * 1024;
  else if (*end)
    return false;
  if (v > UINT32_MAX)
    return false;
  *out = (uint32_t)v;
  return true;
}

/* One entry [b, e) of a gres string: *is_gpu and, for a GPU entry, its type and count. */
static int parse_entry(const char *b, const char *e, bool *is_gpu, char *type, uint32_t *count) {
  /* Drop a trailing "(...)" (sockets, indexes), whose parentheses may nest. */
  if (e > b && e[-1] == ')') {
    int depth = 0;
    const char *p = e;
    while (p > b) {
      p--;
      depth += *p == ')' ? 1 : *p == '(' ? -1 : 0;
      if (depth == 0)
        break;
    }
    if (depth != 0)
      return gpum_error(GPUM_EPARSE, "gres entry '%.*s': unbalanced parentheses", (int)(e - b), b);
    e = p;
  }
  char body[256];
  if ((size_t)(e - b) >= sizeof body)
    return gpum_error(GPUM_EPARSE, "gres entry '%.40s...' is too long", b);
  memcpy(body, b, (size_t)(e - b));
  body[e - b] = '\0';
  char *fields[MAX_FIELDS];
  size_t nf = 0;
  for (char *f = body, *colon; f; f = colon ? colon + 1 : NULL) {
    colon = strchr(f, ':');
    if (colon)
      *colon = '\0';
    if (*f && strcmp(f, "no_consume") != 0) {
      if (nf == MAX_FIELDS)
        return gpum_error(GPUM_EPARSE, "gres entry '%.*s' has too many fields", (int)(e - b), b);
      fields[nf++] = f;
    }
  }
  *is_gpu = nf > 0 && !strcmp(fields[0], "gpu");
  if (!*is_gpu)
    return 0;
  const char *t = "";
  *count = 1;
  if (nf == 2 && !parse_count(fields[1], count)) {
    t = fields[1];
  } else if (nf == 3) {
    t = fields[1];
    if (!parse_count(fields[2], count))
      return gpum_error(GPUM_EPARSE, "gres entry '%.*s': '%s' is not a count", (int)(e - b), b,
                        fields[2]);
  } else if (nf > 3) {
    return gpum_error(GPUM_EPARSE, "gres entry '%.*s' is not gpu[:TYPE]:COUNT", (int)(e - b), b);
  }
  if (!strcmp(t, "(null)"))
    t = "";
  if (strlen(t) >= GPUM_SLURM_TYPE_MAX)
    return gpum_error(GPUM_EPARSE, "gres type '%.40s...' is too long", t);
  snprintf(type, GPUM_SLURM_TYPE_MAX, "%s", t);
  return 0;
}

/* Calls add(type, count, arg) for each GPU entry of s; entries are split at commas outside
 * parentheses. */
static int each_gpu(const char *s, void (*add)(const char *, uint32_t, void *), void *arg) {
  if (empty(s))
    return 0;
  const char *b = s;
  int depth = 0;
  for (const char *p = s;; p++) {
    if (*p == '(')
      depth++;
    else if (*p == ')' && depth > 0)
      depth--;
    if (*p == '\0' || (*p == ',' && depth == 0)) {
      bool gpu = false;
      char type[GPUM_SLURM_TYPE_MAX];
      uint32_t count = 0;
      int rc = p > b ? parse_entry(b, p, &gpu, type, &count) : 0;
      if (rc != 0)
        return rc;
      if (gpu)
        add(type, count, arg);
      if (*p == '\0')
        return 0;
      b = p + 1;
    }
  }
}

typedef struct {
  gpum_slurm_gpus_t *v;
  size_t n, max;
} gpus_list_t;

static uint32_t sat_add(uint32_t a, uint32_t b) {
  return a > UINT32_MAX - b ? UINT32_MAX : a + b;
}

static void add_total(const char *type, uint32_t count, void *arg) {
  gpus_list_t *l = arg;
  for (size_t i = 0; i < l->n; i++)
    if (!strcmp(l->v[i].type, type)) {
      l->v[i].total = sat_add(l->v[i].total, count);
      return;
    }
  if (l->n == l->max)
    return;
  gpum_slurm_gpus_t *g = &l->v[l->n++];
  memset(g, 0, sizeof *g);
  snprintf(g->type, sizeof g->type, "%s", type);
  g->total = count;
}

static void add_used(const char *type, uint32_t count, void *arg) {
  gpus_list_t *l = arg;
  for (size_t i = 0; i < l->n; i++)
    if (!strcmp(l->v[i].type, type)) {
      l->v[i].used = sat_add(l->v[i].used, count);
      return;
    }
  if (!*type && l->n == 1) /* an untyped count on a node of one type */
    l->v[0].used = sat_add(l->v[0].used, count);
}

int gpum__slurm_gres_parse(const char *gres, const char *gres_used, gpum_slurm_gpus_t *out,
                           size_t max, size_t *n) {
  if (!n || (max && !out))
    return gpum_error(GPUM_EINVAL, "gpum__slurm_gres_parse: NULL argument");
  *n = 0;
  gpus_list_t l = {out, 0, max};
  int rc = each_gpu(gres, add_total, &l);
  if (rc == 0)
    rc = each_gpu(gres_used, add_used, &l);
  if (rc != 0)
    return rc;
  for (size_t i = 0; i < l.n; i++)
    if (out[i].used > out[i].total)
      out[i].used = out[i].total;
  *n = l.n;
  return 0;
}

bool gpum__slurm_type_match(const char *filter, const char *type) {
  return gpum_gpu_type_matches(filter, type);
}

unsigned gpum__slurm_type_memory_gb(const char *type) {
  gpum_gpu_type_t t;
  if (!type || gpum_gpu_type_parse(type, &t) != 0 || t.memory_gb < 1 || t.memory_gb >= 100000)
    return 0;
  return (unsigned)t.memory_gb;
}
