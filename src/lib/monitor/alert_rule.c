/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Alert rule parsing: turns "temperature > slowdown-5 for 10s WARNING clear slowdown-8" into a
 * gpum__alert_rule_t, or explains, with the column, what was wrong and what was expected. Also
 * how a rule's metric is read from a sample and its thresholds resolved for one device, and
 * how values are written in their unit in alert messages.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gpum/error.h>
#include <gpum/monitor.h>
#include <gpum/size.h>

#include "monitor/alert_internal.h"

#define MAX_TOKENS 48
#define TOKEN_LEN 64

typedef struct {
  char s[TOKEN_LEN];
  unsigned col; /* 1-based column of the first character */
} token_t;

typedef struct {
  token_t t[MAX_TOKENS];
  size_t n, i;
  unsigned end_col; /* column just past the text, for "missing ..." errors */
} lexer_t;

static bool is_op_char(char c) {
  return c == '<' || c == '>' || c == '=' || c == '!';
}

/* Splits text into words and comparison operators ("temperature>90" gives three tokens). */
static int tokenize(const char *text, lexer_t *lx) {
  size_t pos = 0, len = strlen(text);
  lx->n = lx->i = 0;
  while (pos < len) {
    if (isspace((unsigned char)text[pos])) {
      pos++;
      continue;
    }
    size_t start = pos;
    bool op = is_op_char(text[pos]);
    while (pos < len && !isspace((unsigned char)text[pos]) && is_op_char(text[pos]) == op)
      pos++;
    if (lx->n == MAX_TOKENS)
      return gpum_error(GPUM_EPARSE, "column %zu: rule too long (more than %d words)", start + 1,
                        MAX_TOKENS);
    if (pos - start >= TOKEN_LEN)
      return gpum_error(GPUM_EPARSE, "column %zu: word '%.20s...' too long", start + 1,
                        text + start);
    token_t *t = &lx->t[lx->n++];
    memcpy(t->s, text + start, pos - start);
    t->s[pos - start] = '\0';
    t->col = (unsigned)start + 1;
  }
  lx->end_col = (unsigned)len + 1;
  return 0;
}

static const token_t *peek(const lexer_t *lx) {
  return lx->i < lx->n ? &lx->t[lx->i] : NULL;
}

static const token_t *next(lexer_t *lx) {
  return lx->i < lx->n ? &lx->t[lx->i++] : NULL;
}

static void lower_copy(char *dst, size_t cap, const char *src) {
  size_t i = 0;
  for (; src[i] && i + 1 < cap; i++)
    dst[i] = (char)tolower((unsigned char)src[i]);
  dst[i] = '\0';
}

/* ---- Metrics ---------------------------------------------------------------------------- */

static const char *const derived_names[] = {"memory_used_pct", "memory_free_pct", "power_pct"};

const char *gpum__alert_metric_name(const gpum__alert_rule_t *r) {
  if (r->kind == GPUM__RULE_XID)
    return "xid";
  if (r->kind == GPUM__RULE_HEALTH)
    return "health";
  if (r->metric >= GPUM_METRIC_COUNT)
    return derived_names[r->metric - GPUM_METRIC_COUNT];
  return gpum_metric_name((gpum_metric_t)r->metric);
}

static int metric_lookup(const char *name) {
  for (int m = 0; m < GPUM_METRIC_COUNT; m++)
    if (!strcasecmp(name, gpum_metric_name((gpum_metric_t)m)))
      return m;
  for (int d = GPUM_METRIC_COUNT; d < GPUM__AM_COUNT; d++)
    if (!strcasecmp(name, derived_names[d - GPUM_METRIC_COUNT]))
      return d;
  return -1;
}

/* The unit of a rule metric: one of the gpum_metric_unit strings, or "percent". */
static const char *metric_unit(int metric) {
  return metric >= GPUM_METRIC_COUNT ? "percent" : gpum_metric_unit((gpum_metric_t)metric);
}

static bool pct_of(double part, double whole, double *v) {
  if (!(whole > 0))
    return false;
  *v = part / whole * 100.0;
  return true;
}

bool gpum__alert_value(int metric, const gpum_device_sample_t *s, const gpum_device_info_t *info,
                       double *v) {
  double total = 0, x = 0;
  if (metric < GPUM_METRIC_COUNT)
    return gpum_sample_get(s, (gpum_metric_t)metric, v);
  if (metric == GPUM__AM_POWER_PCT) {
    if (info == NULL || !(info->valid & GPUM_INFO_POWER_LIMIT) || info->power_limit_mw == 0)
      return false;
    return gpum_sample_get(s, GPUM_METRIC_POWER, &x) && pct_of(x, info->power_limit_mw, v);
  }
  if (!gpum_sample_get(s, GPUM_METRIC_MEMORY_TOTAL, &total)) {
    if (info == NULL || !(info->valid & GPUM_INFO_MEMORY_TOTAL))
      return false;
    total = (double)info->memory_total;
  }
  gpum_metric_t part =
      metric == GPUM__AM_MEMORY_USED_PCT ? GPUM_METRIC_MEMORY_USED : GPUM_METRIC_MEMORY_FREE;
  return gpum_sample_get(s, part, &x) && pct_of(x, total, v);
}

bool gpum__alert_thr_resolve(const gpum__alert_thr_t *t, const gpum_device_info_t *info,
                             double *v) {
  switch (t->base) {
  case GPUM__THR_ABS:
    *v = t->value;
    return true;
  case GPUM__THR_SLOWDOWN:
    if (info == NULL || !(info->valid & GPUM_INFO_TEMP_SLOWDOWN))
      return false;
    *v = info->temp_slowdown_c + t->value;
    return true;
  case GPUM__THR_SHUTDOWN:
    if (info == NULL || !(info->valid & GPUM_INFO_TEMP_SHUTDOWN))
      return false;
    *v = info->temp_shutdown_c + t->value;
    return true;
  }
  return false;
}

/* A number without trailing zeros beyond one decimal: "86", "93.4". */
static void fmt_num(double v, char *buf, size_t len) {
  if (fabs(v - round(v)) < 1e-9 && fabs(v) < 1e15)
    snprintf(buf, len, "%.0f", v);
  else
    snprintf(buf, len, "%.1f", v);
}

char *gpum__alert_format_value(int metric, double v, char *buf, size_t len) {
  const char *unit = metric_unit(metric);
  char num[48];
  if (!strcmp(unit, "bytes") && v >= 0) {
    return gpum_size_format((uint64_t)v, buf, len);
  }
  if (!strcmp(unit, "milliwatts")) {
    fmt_num(v / 1000.0, num, sizeof num);
    snprintf(buf, len, "%s W", num);
    return buf;
  }
  fmt_num(v, num, sizeof num);
  if (!strcmp(unit, "percent"))
    snprintf(buf, len, "%s%%", num);
  else if (!strcmp(unit, "celsius"))
    snprintf(buf, len, "%s \u00b0C", num);
  else if (!strcmp(unit, "MHz"))
    snprintf(buf, len, "%s MHz", num);
  else
    snprintf(buf, len, "%s", num);
  return buf;
}

/* ---- Thresholds ------------------------------------------------------------------------- */

/* Parses a decimal number followed by an optional suffix; *rest points at the suffix. */
static bool parse_number(const char *s, double *v, const char **rest) {
  char *end = NULL;
  if (!*s || isspace((unsigned char)*s))
    return false;
  errno = 0;
  *v = strtod(s, &end);
  if (end == s || errno == ERANGE || !isfinite(*v))
    return false;
  /* strtod accepts hex, "inf" and "nan": only plain decimals are numbers here. */
  for (const char *p = s; p < end; p++)
    if (!(isdigit((unsigned char)*p) || *p == '.' || *p == '-' || *p == '+' || *p == 'e' ||
          *p == 'E'))
      return false;
  *rest = end;
  return true;
}

static bool parse_symbolic(const char *s, gpum__alert_thr_t *t) {
  static const struct {
    const char *word;
    gpum__thr_base_t base;
  } bases[] = {{"slowdown", GPUM__THR_SLOWDOWN}, {"shutdown", GPUM__THR_SHUTDOWN}};
  for (size_t i = 0; i < 2; i++) {
    size_t wl = strlen(bases[i].word);
    if (strncasecmp(s, bases[i].word, wl))
      continue;
    const char *rest = s + wl;
    double off = 0;
    if (*rest) {
      const char *tail = NULL;
      if ((*rest != '-' && *rest != '+') || !parse_number(rest, &off, &tail) || *tail)
        return false;
    }
    t->base = bases[i].base;
    t->value = off;
    return true;
  }
  return false;
}

static const char *threshold_expectation(int metric) {
  const char *unit = metric_unit(metric);
  if (!strcmp(unit, "bytes"))
    return "a size such as 70GiB or a number of bytes";
  if (!strcmp(unit, "milliwatts"))
    return "a power such as 300W (a bare number is milliwatts)";
  if (!strcmp(unit, "celsius"))
    return "a temperature in \u00b0C such as 85, or slowdown-N / shutdown-N";
  if (!strcmp(unit, "percent"))
    return "a percentage such as 90";
  if (!strcmp(unit, "MHz"))
    return "a frequency in MHz such as 1400";
  return "a number";
}

/* Parses the threshold token tok for a metric rule. */
static int parse_threshold(int metric, const token_t *tok, gpum__alert_thr_t *t) {
  const char *unit = metric_unit(metric);
  const char *suffix = NULL;
  double v = 0;
  bool ok = false;
  memset(t, 0, sizeof *t);
  lower_copy(t->text, sizeof t->text, tok->s);
  if (!strcmp(unit, "celsius") && parse_symbolic(tok->s, t))
    return 0;
  if (!strcmp(unit, "bytes")) {
    uint64_t bytes = 0;
    ok = gpum_size_parse(tok->s, &bytes) == 0;
    v = (double)bytes;
    gpum_error_clear();
  } else if (parse_number(tok->s, &v, &suffix)) {
    if (!*suffix)
      ok = true;
    else if (!strcmp(unit, "milliwatts") && !strcasecmp(suffix, "w"))
      ok = true, v *= 1000.0;
    else if (!strcmp(unit, "milliwatts"))
      ok = !strcmp(suffix, "mW");
    else if (!strcmp(unit, "percent"))
      ok = !strcmp(suffix, "%");
    else if (!strcmp(unit, "celsius"))
      ok = !strcasecmp(suffix, "c") || !strcmp(suffix, "\u00b0C");
    else if (!strcmp(unit, "MHz"))
      ok = !strcasecmp(suffix, "mhz");
  }
  if (!ok)
    return gpum_error(GPUM_EPARSE, "column %u: bad threshold '%s' for %s (expected %s)", tok->col,
                      tok->s,
                      metric >= GPUM_METRIC_COUNT ? derived_names[metric - GPUM_METRIC_COUNT]
                                                  : gpum_metric_name((gpum_metric_t)metric),
                      threshold_expectation(metric));
  t->base = GPUM__THR_ABS;
  t->value = v;
  return 0;
}

/* ---- Lists ------------------------------------------------------------------------------ */

/* Joins the list starting at the current token: "0,2-3", "0, 2", "79 ,48". */
static int take_list(lexer_t *lx, char *buf, size_t cap, unsigned *col) {
  const token_t *t = next(lx);
  size_t len = 0;
  *col = t->col;
  buf[0] = '\0';
  for (;;) {
    size_t l = strlen(t->s);
    if (len + l + 1 > cap)
      return gpum_error(GPUM_EPARSE, "column %u: list too long", *col);
    memcpy(buf + len, t->s, l + 1);
    len += l;
    const token_t *nx = peek(lx);
    if (nx == NULL || (buf[len - 1] != ',' && nx->s[0] != ','))
      break;
    t = next(lx);
  }
  return 0;
}

static bool parse_uint(const char *s, const char *end, unsigned long long max,
                       unsigned long long *out) {
  unsigned long long v = 0;
  if (s == end)
    return false;
  for (const char *p = s; p < end; p++) {
    if (!isdigit((unsigned char)*p))
      return false;
    v = v * 10 + (unsigned)(*p - '0');
    if (v > max)
      return false;
  }
  *out = v;
  return true;
}

static int parse_devices(const char *list, unsigned col, uint64_t *mask) {
  const char *p = list;
  *mask = 0;
  for (;;) {
    const char *comma = strchr(p, ',');
    const char *end = comma ? comma : p + strlen(p);
    const char *dash = memchr(p, '-', (size_t)(end - p));
    unsigned long long lo = 0, hi = 0;
    bool ok = dash ? parse_uint(p, dash, GPUM_ALERT_MAX_DEVICES - 1, &lo) &&
                         parse_uint(dash + 1, end, GPUM_ALERT_MAX_DEVICES - 1, &hi) && lo <= hi
                   : parse_uint(p, end, GPUM_ALERT_MAX_DEVICES - 1, &lo);
    if (!dash)
      hi = lo;
    if (!ok)
      return gpum_error(GPUM_EPARSE,
                        "column %u: bad device list '%s' at '%.*s' (expected indices 0-%d and "
                        "ranges such as 0,2-3)",
                        col + (unsigned)(p - list), list, (int)(end - p), p,
                        GPUM_ALERT_MAX_DEVICES - 1);
    for (unsigned long long d = lo; d <= hi; d++)
      *mask |= 1ull << d;
    if (!comma)
      return 0;
    p = comma + 1;
  }
}

static int parse_xids(const char *list, unsigned col, gpum__alert_rule_t *r) {
  const char *p = list;
  for (;;) {
    const char *comma = strchr(p, ',');
    const char *end = comma ? comma : p + strlen(p);
    unsigned long long x = 0;
    if (!parse_uint(p, end, 0xffffffffull, &x) || x == 0)
      return gpum_error(GPUM_EPARSE,
                        "column %u: bad Xid '%.*s' (expected any, critical, or Xid numbers "
                        "such as 79 or 48,94,95)",
                        col + (unsigned)(p - list), (int)(end - p), p);
    if (r->xid_count == GPUM__RULE_MAX_XIDS)
      return gpum_error(GPUM_EPARSE, "column %u: more than %d Xids in one rule", col,
                        GPUM__RULE_MAX_XIDS);
    r->xids[r->xid_count++] = x;
    if (!comma)
      return 0;
    p = comma + 1;
  }
}

/* ---- The rule --------------------------------------------------------------------------- */

static const struct {
  const char *s;
  gpum__alert_op_t op;
} ops[] = {{">", GPUM__OP_GT},  {">=", GPUM__OP_GE}, {"<", GPUM__OP_LT},
           {"<=", GPUM__OP_LE}, {"==", GPUM__OP_EQ}, {"!=", GPUM__OP_NE}};

static const char *op_text(gpum__alert_op_t op) {
  return ops[op].s;
}

static int parse_op(lexer_t *lx, const char *after, gpum__alert_op_t *op) {
  const token_t *t = next(lx);
  if (t != NULL)
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
      if (!strcmp(t->s, ops[i].s)) {
        *op = ops[i].op;
        return 0;
      }
  if (t == NULL)
    return gpum_error(GPUM_EPARSE,
                      "column %u: expected a comparison (>, >=, <, <=, ==, !=) after '%s'",
                      lx->end_col, after);
  return gpum_error(GPUM_EPARSE,
                    "column %u: expected a comparison (>, >=, <, <=, ==, !=) after '%s', found "
                    "'%s'",
                    t->col, after, t->s);
}

static int parse_head(lexer_t *lx, gpum__alert_rule_t *r) {
  const token_t *m = next(lx);
  char word[TOKEN_LEN];
  if (m == NULL)
    return gpum_error(GPUM_EPARSE, "column 1: empty rule (expected METRIC OP THRESHOLD LEVEL)");
  lower_copy(word, sizeof word, m->s);
  if (!strcmp(word, "xid")) {
    const token_t *t = peek(lx);
    char list[TOKEN_LEN * 2];
    unsigned col = 0;
    r->kind = GPUM__RULE_XID;
    if (t == NULL)
      return gpum_error(GPUM_EPARSE, "column %u: expected any, critical or Xid numbers after 'xid'",
                        lx->end_col);
    if (!strcasecmp(t->s, "any") || !strcasecmp(t->s, "critical")) {
      r->xid_any = !strcasecmp(t->s, "any");
      r->xid_critical = !r->xid_any;
      next(lx);
      return 0;
    }
    int rc = take_list(lx, list, sizeof list, &col);
    return rc ? rc : parse_xids(list, col, r);
  }
  if (!strcmp(word, "health")) {
    gpum_health_t st;
    r->kind = GPUM__RULE_HEALTH;
    int rc = parse_op(lx, m->s, &r->op);
    if (rc)
      return rc;
    if (r->op != GPUM__OP_EQ && r->op != GPUM__OP_NE)
      return gpum_error(GPUM_EPARSE, "column %u: health rules compare with == or !=, not %s",
                        lx->t[lx->i - 1].col, op_text(r->op));
    const token_t *t = next(lx);
    if (t == NULL || gpum_health_state_parse(t->s, &st) != 0)
      return gpum_error(GPUM_EPARSE,
                        "column %u: expected a health state (AVAILABLE, BUSY, ERROR or "
                        "DISABLED)%s%s%s",
                        t ? t->col : lx->end_col, t ? ", found '" : "", t ? t->s : "",
                        t ? "'" : "");
    r->health_state = (int)st;
    return 0;
  }
  r->kind = GPUM__RULE_METRIC;
  r->metric = metric_lookup(m->s);
  if (r->metric < 0) {
    char names[512];
    size_t o = 0;
    for (int i = 0; i < GPUM__AM_COUNT && o < sizeof names; i++) {
      gpum__alert_rule_t tmp = {.kind = GPUM__RULE_METRIC, .metric = i};
      o += (size_t)snprintf(names + o, sizeof names - o, "%s, ", gpum__alert_metric_name(&tmp));
    }
    return gpum_error(GPUM_EPARSE, "column %u: unknown metric '%s' (expected %sxid or health)",
                      m->col, m->s, names);
  }
  int rc = parse_op(lx, m->s, &r->op);
  if (rc)
    return rc;
  const token_t *t = next(lx);
  if (t == NULL)
    return gpum_error(GPUM_EPARSE, "column %u: expected a threshold (%s) after '%s'", lx->end_col,
                      threshold_expectation(r->metric), op_text(r->op));
  return parse_threshold(r->metric, t, &r->threshold);
}

/* Which clauses a rule has seen, for "given twice" errors. */
typedef struct {
  bool level, dur, clear, devices;
} seen_t;

static int dup_error(const token_t *t) {
  return gpum_error(GPUM_EPARSE, "column %u: '%s' given twice", t->col, t->s);
}

static int parse_for(lexer_t *lx, const token_t *kw, gpum__alert_rule_t *r) {
  const token_t *t = next(lx);
  if (r->kind == GPUM__RULE_XID)
    return gpum_error(GPUM_EPARSE, "column %u: xid rules take no 'for': each Xid is an event",
                      kw->col);
  if (t == NULL)
    return gpum_error(GPUM_EPARSE, "column %u: expected a duration (such as 30s) after 'for'",
                      lx->end_col);
  if (gpum_duration_parse(t->s, &r->for_ms) != 0)
    return gpum_error(GPUM_EPARSE,
                      "column %u: bad duration '%s' after 'for' (expected such as 500ms, 30s, "
                      "5m, 1h)",
                      t->col, t->s);
  return 0;
}

static int parse_clear(lexer_t *lx, const token_t *kw, gpum__alert_rule_t *r) {
  if (r->kind != GPUM__RULE_METRIC)
    return gpum_error(GPUM_EPARSE,
                      "column %u: only metric rules take 'clear' (%s rules clear by themselves)",
                      kw->col, gpum__alert_metric_name(r));
  if (r->op == GPUM__OP_EQ || r->op == GPUM__OP_NE)
    return gpum_error(GPUM_EPARSE,
                      "column %u: 'clear' needs a >, >=, < or <= rule; %s rules clear when the "
                      "comparison no longer holds",
                      kw->col, op_text(r->op));
  const token_t *t = next(lx);
  if (t == NULL)
    return gpum_error(GPUM_EPARSE, "column %u: expected a threshold (%s) after 'clear'",
                      lx->end_col, threshold_expectation(r->metric));
  int rc = parse_threshold(r->metric, t, &r->clear);
  if (rc)
    return rc;
  r->has_clear = true;
  /* Hysteresis goes one way: a rule firing above its threshold clears at or below it. */
  if (r->clear.base == r->threshold.base) {
    bool up = r->op == GPUM__OP_GT || r->op == GPUM__OP_GE;
    if (up ? r->clear.value > r->threshold.value : r->clear.value < r->threshold.value)
      return gpum_error(GPUM_EPARSE,
                        "column %u: clear threshold '%s' is %s the threshold '%s': a '%s' rule "
                        "clears %s its threshold",
                        t->col, t->s, up ? "above" : "below", r->threshold.text, op_text(r->op),
                        up ? "at or below" : "at or above");
  }
  return 0;
}

/* Returns 0 for a level, 1 when t is not a level word, or a parse error. */
static int parse_level(const token_t *t, gpum__alert_rule_t *r) {
  if (!strcasecmp(t->s, "auto")) {
    if (r->kind != GPUM__RULE_XID)
      return gpum_error(GPUM_EPARSE, "column %u: level 'auto' is only for xid rules", t->col);
    r->level_auto = true;
    r->level = GPUM_ALERT_ERROR;
    return 0;
  }
  return gpum_alert_level_parse(t->s, &r->level) == 0 ? 0 : 1; /* 1: not a level */
}

static int parse_clauses(lexer_t *lx, gpum__alert_rule_t *r) {
  seen_t seen = {0};
  const token_t *t;
  while ((t = next(lx)) != NULL) {
    int rc;
    if (!strcasecmp(t->s, "for")) {
      if (seen.dur)
        return dup_error(t);
      seen.dur = true;
      rc = parse_for(lx, t, r);
    } else if (!strcasecmp(t->s, "clear")) {
      if (seen.clear)
        return dup_error(t);
      seen.clear = true;
      rc = parse_clear(lx, t, r);
    } else if (!strcasecmp(t->s, "devices") || !strcasecmp(t->s, "device")) {
      char list[TOKEN_LEN * 2];
      unsigned col = 0;
      if (seen.devices)
        return dup_error(t);
      seen.devices = r->has_devices = true;
      if (peek(lx) == NULL)
        return gpum_error(GPUM_EPARSE,
                          "column %u: expected device indices (such as 0,2-3) after '%s'",
                          lx->end_col, t->s);
      rc = take_list(lx, list, sizeof list, &col);
      if (rc == 0)
        rc = parse_devices(list, col, &r->devices);
    } else if ((rc = parse_level(t, r)) != 1) {
      if (rc == 0 && seen.level)
        return gpum_error(GPUM_EPARSE, "column %u: a second level '%s'", t->col, t->s);
      seen.level = true;
    } else {
      return gpum_error(GPUM_EPARSE,
                        "column %u: unexpected '%s' (expected a level INFO, WARNING, ERROR or "
                        "CRITICAL%s, or for, clear, devices)",
                        t->col, t->s, r->kind == GPUM__RULE_XID ? " or auto" : "");
    }
    if (rc)
      return rc;
  }
  if (!seen.level)
    return gpum_error(GPUM_EPARSE,
                      "column %u: missing level (expected INFO, WARNING, ERROR or CRITICAL%s)",
                      lx->end_col, r->kind == GPUM__RULE_XID ? " or auto" : "");
  return 0;
}

/* Appends the device mask as "0,2-3". */
static size_t format_devices(uint64_t mask, char *buf, size_t cap) {
  size_t o = 0;
  for (unsigned d = 0; d < GPUM_ALERT_MAX_DEVICES && o < cap; d++) {
    if (!((mask >> d) & 1))
      continue;
    unsigned e = d;
    while (e + 1 < GPUM_ALERT_MAX_DEVICES && ((mask >> (e + 1)) & 1))
      e++;
    if (e == d)
      o += (size_t)snprintf(buf + o, cap - o, "%s%u", o ? "," : "", d);
    else
      o += (size_t)snprintf(buf + o, cap - o, "%s%u-%u", o ? "," : "", d, e);
    d = e;
  }
  return o;
}

static void normalise(gpum__alert_rule_t *r) {
  char *b = r->text;
  size_t cap = sizeof r->text, o = 0;
#define PUT(...)                                          \
  do {                                                    \
    if (o < cap)                                          \
      o += (size_t)snprintf(b + o, cap - o, __VA_ARGS__); \
  } while (0)
  if (r->kind == GPUM__RULE_XID) {
    PUT("xid ");
    if (r->xid_any || r->xid_critical)
      PUT("%s", r->xid_any ? "any" : "critical");
    for (size_t i = 0; i < r->xid_count; i++)
      PUT("%s%llu", i ? "," : "", (unsigned long long)r->xids[i]);
  } else if (r->kind == GPUM__RULE_HEALTH) {
    PUT("health %s %s", op_text(r->op), gpum_health_state_name((gpum_health_t)r->health_state));
  } else {
    PUT("%s %s %s", gpum__alert_metric_name(r), op_text(r->op), r->threshold.text);
  }
  if (r->for_ms > 0) {
    char d[GPUM_DURATION_BUFSZ];
    PUT(" for %s", gpum_duration_format(r->for_ms, d, sizeof d));
  }
  PUT(" %s", r->level_auto ? "auto" : gpum_alert_level_name(r->level));
  if (r->has_clear)
    PUT(" clear %s", r->clear.text);
  if (r->has_devices && o < cap) {
    PUT(" devices ");
    if (o < cap)
      format_devices(r->devices, b + o, cap - o);
  }
#undef PUT
}

int gpum__alert_rule_parse(const char *text, gpum__alert_rule_t *out) {
  gpum__alert_rule_t r;
  lexer_t lx;
  if (text == NULL || out == NULL)
    return gpum_error(GPUM_EINVAL, "no rule text");
  memset(&r, 0, sizeof r);
  int rc = tokenize(text, &lx);
  if (rc == 0)
    rc = parse_head(&lx, &r);
  if (rc == 0)
    rc = parse_clauses(&lx, &r);
  if (rc)
    return rc;
  if (!r.has_devices)
    r.devices = ~0ull;
  normalise(&r);
  *out = r;
  return 0;
}
