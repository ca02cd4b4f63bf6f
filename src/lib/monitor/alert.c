/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The alert engine: evaluates parsed rules (alert_rule.c) against the samples, Xid events and
 * health states it is fed, keeps one active alert per (rule, device) (per (rule, device, Xid)
 * for Xid rules), records every alert in a bounded history and calls the callbacks on fire and
 * clear. Time comes only from the callers' now_ns, so the engine is deterministic. The rule
 * semantics are documented in include/gpum/alert.h.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gpum/error.h>
#include <gpum/monitor.h>
#include <gpum/size.h>

#include "monitor/alert_internal.h"

#define MAX_CALLBACKS 16
#define NS_PER_MS 1000000ull

typedef struct {
  bool pending; /* the condition holds since since_ns */
  uint64_t since_ns;
} rule_dev_t;

typedef struct {
  gpum__alert_rule_t r;
  rule_dev_t dev[GPUM_ALERT_MAX_DEVICES];
} rule_t;

typedef struct {
  bool has_info;
  gpum_device_info_t info;
  bool has_health;
  int health;
  uint64_t health_since_ns;
  char reason[GPUM_HEALTH_REASON_LEN];
} device_t;

typedef struct {
  gpum_alert_t a;
  size_t hist_slot;    /* where a is in the history (if a.id still matches there) */
  uint64_t expires_ns; /* Xid alerts */
} active_t;

/* Alerts to hand to the callbacks once the mutex is released. */
typedef struct {
  gpum_alert_t *v;
  size_t n, cap;
  gpum_alert_t local[4];
} notes_t;

struct gpum_alert_engine {
  pthread_mutex_t mu;
  gpum_alert_engine_opts_t opts;
  rule_t *rules;
  size_t n_rules, cap_rules;
  device_t dev[GPUM_ALERT_MAX_DEVICES];
  active_t *active;
  size_t n_active, cap_active;
  gpum_alert_t *hist; /* ring of opts.history_cap */
  size_t hist_head, hist_n;
  uint64_t next_id;
  gpum_alert_counters_t counters;
  struct {
    gpum_alert_fn fn;
    void *arg;
  } cbs[MAX_CALLBACKS];
  size_t n_cbs;
};

/* ---- Levels ----------------------------------------------------------------------------- */

static const char *const level_names[] = {"INFO", "WARNING", "ERROR", "CRITICAL"};

const char *gpum_alert_level_name(gpum_alert_level_t level) {
  return (unsigned)level < 4 ? level_names[level] : "UNKNOWN";
}

int gpum_alert_level_parse(const char *s, gpum_alert_level_t *out) {
  if (s == NULL || out == NULL)
    return gpum_error(GPUM_EINVAL, "alert level: NULL argument");
  for (unsigned i = 0; i < 4; i++)
    if (!strcasecmp(s, level_names[i])) {
      *out = (gpum_alert_level_t)i;
      return 0;
    }
  return gpum_error(GPUM_EINVAL,
                    "unknown alert level '%s' (expected INFO, WARNING, ERROR or CRITICAL)", s);
}

/* ---- Lifecycle -------------------------------------------------------------------------- */

void gpum_alert_engine_opts_init(gpum_alert_engine_opts_t *opts) {
  opts->history_cap = 256;
  opts->xid_window_ms = 300000;
}

int gpum_alert_engine_create(const gpum_alert_engine_opts_t *opts, gpum_alert_engine_t **out) {
  gpum_alert_engine_t *e;
  if (out == NULL)
    return gpum_error(GPUM_EINVAL, "alert engine: out is NULL");
  *out = NULL;
  e = calloc(1, sizeof *e);
  if (e == NULL)
    return gpum_error(GPUM_ENOMEM, "alert engine: out of memory");
  gpum_alert_engine_opts_init(&e->opts);
  if (opts != NULL)
    e->opts = *opts;
  if (e->opts.history_cap == 0) {
    free(e);
    return gpum_error(GPUM_EINVAL, "alert engine: history_cap must be at least 1");
  }
  e->hist = calloc(e->opts.history_cap, sizeof *e->hist);
  if (e->hist == NULL)
    goto out_free;
  if (pthread_mutex_init(&e->mu, NULL) != 0)
    goto out_hist;
  *out = e;
  return 0;
out_hist:
  free(e->hist);
out_free:
  free(e);
  return gpum_error(GPUM_ENOMEM, "alert engine: out of memory");
}

void gpum_alert_engine_destroy(gpum_alert_engine_t *e) {
  if (e == NULL)
    return;
  pthread_mutex_destroy(&e->mu);
  free(e->rules);
  free(e->active);
  free(e->hist);
  free(e);
}

/* ---- Rules ------------------------------------------------------------------------------ */

/* Adds a parsed rule; the caller holds the mutex. */
static int add_parsed(gpum_alert_engine_t *e, const gpum__alert_rule_t *r, unsigned *index) {
  if (e->n_rules == GPUM_ALERT_MAX_RULES)
    return gpum_error(GPUM_ENOSPC, "alert engine: more than %d rules", GPUM_ALERT_MAX_RULES);
  if (e->n_rules == e->cap_rules) {
    size_t cap = e->cap_rules ? e->cap_rules * 2 : 8;
    rule_t *n = realloc(e->rules, cap * sizeof *n);
    if (n == NULL)
      return gpum_error(GPUM_ENOMEM, "alert engine: out of memory");
    e->rules = n;
    e->cap_rules = cap;
  }
  rule_t *slot = &e->rules[e->n_rules];
  memset(slot, 0, sizeof *slot);
  slot->r = *r;
  if (index != NULL)
    *index = (unsigned)e->n_rules;
  e->n_rules++;
  return 0;
}

int gpum__alert_engine_add_parsed(gpum_alert_engine_t *e, const gpum__alert_rule_t *rules,
                                  size_t n) {
  pthread_mutex_lock(&e->mu);
  size_t before = e->n_rules;
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++)
    rc = add_parsed(e, &rules[i], NULL);
  if (rc)
    e->n_rules = before; /* all-or-nothing */
  pthread_mutex_unlock(&e->mu);
  return rc;
}

int gpum_alert_engine_add_rule(gpum_alert_engine_t *e, const char *text, unsigned *rule_index) {
  gpum__alert_rule_t r;
  if (e == NULL || text == NULL)
    return gpum_error(GPUM_EINVAL, "alert rule: NULL argument");
  int rc = gpum__alert_rule_parse(text, &r);
  if (rc) {
    char detail[512];
    snprintf(detail, sizeof detail, "%s", gpum_last_error());
    return gpum_error(rc, "alert rule \"%s\": %s", text, detail);
  }
  pthread_mutex_lock(&e->mu);
  rc = add_parsed(e, &r, rule_index);
  pthread_mutex_unlock(&e->mu);
  return rc;
}

int gpum_alert_rule_check(const char *text, char *buf, size_t len) {
  gpum__alert_rule_t r;
  int rc = gpum__alert_rule_parse(text, &r);
  if (rc)
    return rc;
  if (buf != NULL && len > 0)
    snprintf(buf, len, "%s", r.text);
  return 0;
}

size_t gpum_alert_engine_rule_count(gpum_alert_engine_t *e) {
  pthread_mutex_lock(&e->mu);
  size_t n = e->n_rules;
  pthread_mutex_unlock(&e->mu);
  return n;
}

int gpum_alert_engine_rule_text(gpum_alert_engine_t *e, unsigned i, char *buf, size_t len) {
  int rc = 0;
  pthread_mutex_lock(&e->mu);
  if (i >= e->n_rules)
    rc = gpum_error(GPUM_ENOENT, "no alert rule %u (there are %zu)", i, e->n_rules);
  else if ((size_t)snprintf(buf, len, "%s", e->rules[i].r.text) >= len)
    rc = gpum_error(GPUM_ENOSPC, "alert rule %u: buffer of %zu bytes too small", i, len);
  pthread_mutex_unlock(&e->mu);
  return rc;
}

int gpum_alert_engine_add_callback(gpum_alert_engine_t *e, gpum_alert_fn fn, void *arg) {
  int rc = 0;
  if (e == NULL || fn == NULL)
    return gpum_error(GPUM_EINVAL, "alert callback: NULL argument");
  pthread_mutex_lock(&e->mu);
  if (e->n_cbs == MAX_CALLBACKS) {
    rc = gpum_error(GPUM_ENOSPC, "alert engine: more than %d callbacks", MAX_CALLBACKS);
  } else {
    e->cbs[e->n_cbs].fn = fn;
    e->cbs[e->n_cbs].arg = arg;
    e->n_cbs++;
  }
  pthread_mutex_unlock(&e->mu);
  return rc;
}

void gpum_alert_engine_set_device_info(gpum_alert_engine_t *e, unsigned device,
                                       const gpum_device_info_t *info) {
  if (e == NULL || device >= GPUM_ALERT_MAX_DEVICES)
    return;
  pthread_mutex_lock(&e->mu);
  e->dev[device].has_info = info != NULL;
  if (info != NULL) {
    e->dev[device].info = *info;
    e->dev[device].info.vendor = NULL; /* not owned: never read */
  }
  pthread_mutex_unlock(&e->mu);
}

/* snprintf for alert messages, where cutting a long reason short is the intended behaviour. */
static void msg_printf(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void msg_printf(char *buf, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, len, fmt, ap);
  va_end(ap);
}

/* ---- Notifications ---------------------------------------------------------------------- */

static void notes_init(notes_t *n) {
  n->v = n->local;
  n->n = 0;
  n->cap = sizeof n->local / sizeof n->local[0];
}

/* Queues a copy of a for the callbacks; dropped (the history still has it) when out of
 * memory. */
static void notes_add(notes_t *n, const gpum_alert_t *a) {
  if (n->n == n->cap) {
    gpum_alert_t *v = malloc(n->cap * 2 * sizeof *v);
    if (v == NULL)
      return;
    memcpy(v, n->v, n->n * sizeof *v);
    if (n->v != n->local)
      free(n->v);
    n->v = v;
    n->cap *= 2;
  }
  n->v[n->n++] = *a;
}

/* Unlocks the engine, then calls the callbacks (registered at unlock time) for each note. */
static void unlock_and_notify(gpum_alert_engine_t *e, notes_t *n) {
  struct {
    gpum_alert_fn fn;
    void *arg;
  } cbs[MAX_CALLBACKS];
  size_t n_cbs = e->n_cbs;
  memcpy(cbs, e->cbs, n_cbs * sizeof cbs[0]);
  pthread_mutex_unlock(&e->mu);
  for (size_t i = 0; i < n->n; i++)
    for (size_t c = 0; c < n_cbs; c++)
      cbs[c].fn(&n->v[i], cbs[c].arg);
  if (n->v != n->local)
    free(n->v);
}

/* ---- Fire and clear --------------------------------------------------------------------- */

static active_t *find_active(gpum_alert_engine_t *e, unsigned rule, unsigned device, uint64_t xid) {
  for (size_t i = 0; i < e->n_active; i++) {
    gpum_alert_t *a = &e->active[i].a;
    if (a->rule == rule && a->device == device && a->xid == xid)
      return &e->active[i];
  }
  return NULL;
}

/* Puts a into the history ring (dropping the oldest when full); returns its slot. */
static size_t history_add(gpum_alert_engine_t *e, const gpum_alert_t *a) {
  size_t cap = e->opts.history_cap, slot;
  if (e->hist_n < cap) {
    slot = (e->hist_head + e->hist_n++) % cap;
  } else {
    slot = e->hist_head;
    e->hist_head = (e->hist_head + 1) % cap;
    e->counters.dropped_from_history++;
  }
  e->hist[slot] = *a;
  return slot;
}

static void history_update(gpum_alert_engine_t *e, const active_t *act) {
  if (e->hist[act->hist_slot].id == act->a.id)
    e->hist[act->hist_slot] = act->a;
}

/* Makes a (filled in by the caller, except id and state) active. Returns the active entry, or
 * NULL when out of memory (the rule then retries on its next evaluation). */
static active_t *fire(gpum_alert_engine_t *e, gpum_alert_t *a, uint64_t now_ns, notes_t *notes) {
  if (e->n_active == e->cap_active) {
    size_t cap = e->cap_active ? e->cap_active * 2 : 8;
    active_t *v = realloc(e->active, cap * sizeof *v);
    if (v == NULL)
      return NULL;
    e->active = v;
    e->cap_active = cap;
  }
  a->id = ++e->next_id;
  a->state = GPUM_ALERT_FIRED;
  a->fired_ns = now_ns;
  a->cleared_ns = 0;
  active_t *act = &e->active[e->n_active++];
  act->a = *a;
  act->hist_slot = history_add(e, a);
  act->expires_ns = now_ns + e->opts.xid_window_ms * NS_PER_MS;
  e->counters.fired++;
  notes_add(notes, a);
  return act;
}

/* Clears the active alert act, appending suffix to its message. */
static void clear(gpum_alert_engine_t *e, active_t *act, double clear_value, uint64_t now_ns,
                  const char *suffix, notes_t *notes) {
  gpum_alert_t *a = &act->a;
  size_t len = strlen(a->message);
  a->state = GPUM_ALERT_CLEARED;
  a->cleared_ns = now_ns;
  a->clear_value = clear_value;
  if (len < sizeof a->message)
    msg_printf(a->message + len, sizeof a->message - len, "%s", suffix);
  history_update(e, act);
  e->counters.cleared++;
  notes_add(notes, a);
  size_t i = (size_t)(act - e->active);
  memmove(&e->active[i], &e->active[i + 1], (e->n_active - i - 1) * sizeof *act);
  e->n_active--;
}

static void alert_init(gpum_alert_t *a, const rule_t *rule, unsigned rule_index, unsigned device,
                       gpum_alert_level_t level) {
  memset(a, 0, sizeof *a);
  a->rule = rule_index;
  a->device = device;
  a->level = level;
  snprintf(a->rule_text, sizeof a->rule_text, "%s", rule->r.text);
  snprintf(a->metric, sizeof a->metric, "%s", gpum__alert_metric_name(&rule->r));
}

/* Clears the Xid alerts whose window has passed. */
static void expire_xids(gpum_alert_engine_t *e, uint64_t now_ns, notes_t *notes) {
  for (size_t i = 0; i < e->n_active;) {
    active_t *act = &e->active[i];
    if (act->a.rule != GPUM_ALERT_RULE_CONDITION &&
        e->rules[act->a.rule].r.kind == GPUM__RULE_XID && now_ns >= act->expires_ns)
      clear(e, act, 0, now_ns, "; expired", notes);
    else
      i++;
  }
}

static bool device_matches(const rule_t *rule, unsigned device) {
  return (rule->r.devices >> device) & 1;
}

/* ---- Metric rules ----------------------------------------------------------------------- */

/* Time since since_ns; 0 if the caller's clock went backwards (never a huge unsigned value). */
static uint64_t elapsed(uint64_t now_ns, uint64_t since_ns) {
  return now_ns > since_ns ? now_ns - since_ns : 0;
}

static bool compare(gpum__alert_op_t op, double v, double t) {
  switch (op) {
  case GPUM__OP_GT:
    return v > t;
  case GPUM__OP_GE:
    return v >= t;
  case GPUM__OP_LT:
    return v < t;
  case GPUM__OP_LE:
    return v <= t;
  case GPUM__OP_EQ:
    return v == t;
  case GPUM__OP_NE:
    return v != t;
  }
  return false;
}

/* Whether an active alert of a rule with op clears at value v (see alert.h). */
static bool clears(gpum__alert_op_t op, double v, double clear_thr) {
  switch (op) {
  case GPUM__OP_GT:
  case GPUM__OP_GE:
    return v < clear_thr;
  case GPUM__OP_LT:
  case GPUM__OP_LE:
    return v > clear_thr;
  case GPUM__OP_EQ:
    return v != clear_thr;
  case GPUM__OP_NE:
    return v == clear_thr;
  }
  return false;
}

static const char *op_words(gpum__alert_op_t op) {
  static const char *const words[] = {"above",       "at or above", "below",
                                      "at or below", "equal to",    "not equal to"};
  return words[op];
}

/* " (slowdown 87 °C - 5)" for a symbolic threshold, "" otherwise. */
static void symbolic_detail(const gpum__alert_thr_t *t, const gpum_device_info_t *info, char *buf,
                            size_t len) {
  char base[32];
  buf[0] = '\0';
  if (t->base == GPUM__THR_ABS)
    return;
  bool slow = t->base == GPUM__THR_SLOWDOWN;
  gpum__alert_format_value(GPUM_METRIC_TEMPERATURE,
                           slow ? info->temp_slowdown_c : info->temp_shutdown_c, base, sizeof base);
  if (t->value == 0)
    snprintf(buf, len, " (%s %s)", slow ? "slowdown" : "shutdown", base);
  else
    snprintf(buf, len, " (%s %s %c %g)", slow ? "slowdown" : "shutdown", base,
             t->value < 0 ? '-' : '+', t->value < 0 ? -t->value : t->value);
}

static void metric_message(gpum_alert_t *a, const rule_t *rule, const gpum_device_info_t *info) {
  char v[48], t[48], sym[64], dur[GPUM_DURATION_BUFSZ + 5] = "";
  gpum__alert_format_value(rule->r.metric, a->value, v, sizeof v);
  gpum__alert_format_value(rule->r.metric, a->threshold, t, sizeof t);
  symbolic_detail(&rule->r.threshold, info, sym, sizeof sym);
  if (rule->r.for_ms > 0) {
    char d[GPUM_DURATION_BUFSZ];
    snprintf(dur, sizeof dur, " for %s", gpum_duration_format(rule->r.for_ms, d, sizeof d));
  }
  msg_printf(a->message, sizeof a->message, "GPU %u: %s %s %s %s%s%s", a->device, a->metric, v,
             op_words(rule->r.op), t, sym, dur);
}

static void eval_metric(gpum_alert_engine_t *e, unsigned ri, unsigned device,
                        const gpum_device_sample_t *s, uint64_t now_ns, notes_t *notes) {
  rule_t *rule = &e->rules[ri];
  rule_dev_t *st = &rule->dev[device];
  const gpum_device_info_t *info = e->dev[device].has_info ? &e->dev[device].info : NULL;
  double v = 0, thr = 0, clr = 0;
  if (!gpum__alert_thr_resolve(&rule->r.threshold, info, &thr))
    return; /* the device lacks what the threshold is relative to */
  clr = thr;
  if (rule->r.has_clear && !gpum__alert_thr_resolve(&rule->r.clear, info, &clr))
    return;
  /* Thresholds of different bases (80 and slowdown-5) are only comparable per device: a clear
   * threshold on the firing side would clear at once, so it is held at the threshold. */
  if ((rule->r.op == GPUM__OP_GT || rule->r.op == GPUM__OP_GE) && clr > thr)
    clr = thr;
  if ((rule->r.op == GPUM__OP_LT || rule->r.op == GPUM__OP_LE) && clr < thr)
    clr = thr;
  active_t *act = find_active(e, ri, device, 0);
  if (!gpum__alert_value(rule->r.metric, s, info, &v)) {
    st->pending = false; /* unknown: the condition did not demonstrably hold */
    return;
  }
  if (act != NULL) {
    if (clears(rule->r.op, v, clr)) {
      char vb[48], suffix[64];
      snprintf(suffix, sizeof suffix, "; cleared at %s",
               gpum__alert_format_value(rule->r.metric, v, vb, sizeof vb));
      clear(e, act, v, now_ns, suffix, notes);
      st->pending = false;
    }
    return;
  }
  if (!compare(rule->r.op, v, thr)) {
    st->pending = false;
    return;
  }
  if (!st->pending) {
    st->pending = true;
    st->since_ns = now_ns;
  }
  if (elapsed(now_ns, st->since_ns) < rule->r.for_ms * NS_PER_MS)
    return;
  gpum_alert_t a;
  alert_init(&a, rule, ri, device, rule->r.level);
  a.value = v;
  a.threshold = thr;
  a.clear_threshold = clr;
  a.since_ns = st->since_ns;
  metric_message(&a, rule, info);
  fire(e, &a, now_ns, notes);
}

/* ---- Health rules ----------------------------------------------------------------------- */

static void eval_health(gpum_alert_engine_t *e, unsigned ri, unsigned device, uint64_t now_ns,
                        notes_t *notes) {
  rule_t *rule = &e->rules[ri];
  device_t *d = &e->dev[device];
  if (!d->has_health)
    return;
  bool holds = (d->health == rule->r.health_state) == (rule->r.op == GPUM__OP_EQ);
  active_t *act = find_active(e, ri, device, 0);
  if (act != NULL) {
    if (!holds) {
      char suffix[64];
      snprintf(suffix, sizeof suffix, "; cleared: now %s",
               gpum_health_state_name((gpum_health_t)d->health));
      clear(e, act, d->health, now_ns, suffix, notes);
    }
    return;
  }
  if (!holds || elapsed(now_ns, d->health_since_ns) < rule->r.for_ms * NS_PER_MS)
    return;
  gpum_alert_t a;
  char dur[GPUM_DURATION_BUFSZ + 5] = "", not_[48] = "", reason[GPUM_HEALTH_REASON_LEN + 4] = "";
  alert_init(&a, rule, ri, device, rule->r.level);
  a.value = d->health;
  a.threshold = a.clear_threshold = rule->r.health_state;
  a.since_ns = d->health_since_ns;
  if (rule->r.for_ms > 0) {
    char b[GPUM_DURATION_BUFSZ];
    snprintf(dur, sizeof dur, " for %s", gpum_duration_format(rule->r.for_ms, b, sizeof b));
  }
  if (rule->r.op == GPUM__OP_NE)
    snprintf(not_, sizeof not_, ", not %s",
             gpum_health_state_name((gpum_health_t)rule->r.health_state));
  if (d->reason[0])
    snprintf(reason, sizeof reason, ": %s", d->reason);
  msg_printf(a.message, sizeof a.message, "GPU %u: health %s%s%s%s", device,
             gpum_health_state_name((gpum_health_t)d->health), not_, dur, reason);
  fire(e, &a, now_ns, notes);
}

static void eval_health_rules(gpum_alert_engine_t *e, unsigned device, uint64_t now_ns,
                              notes_t *notes) {
  for (unsigned ri = 0; ri < e->n_rules; ri++)
    if (e->rules[ri].r.kind == GPUM__RULE_HEALTH && device_matches(&e->rules[ri], device))
      eval_health(e, ri, device, now_ns, notes);
}

/* ---- Xid rules -------------------------------------------------------------------------- */

static bool xid_matches(const gpum__alert_rule_t *r, uint64_t xid, bool critical) {
  if (r->xid_any)
    return true;
  if (r->xid_critical)
    return critical;
  for (size_t i = 0; i < r->xid_count; i++)
    if (r->xids[i] == xid)
      return true;
  return false;
}

static void on_xid(gpum_alert_engine_t *e, unsigned ri, unsigned device, uint64_t xid,
                   const gpum_xid_info_t *info, uint64_t now_ns, notes_t *notes) {
  rule_t *rule = &e->rules[ri];
  active_t *act = find_active(e, ri, device, xid);
  if (act != NULL) { /* a repeat within the window: count it, extend the window */
    act->a.repeats++;
    act->expires_ns = now_ns + e->opts.xid_window_ms * NS_PER_MS;
    history_update(e, act);
    return;
  }
  gpum_alert_level_t level = rule->r.level;
  if (rule->r.level_auto)
    level = info->critical ? GPUM_ALERT_CRITICAL : GPUM_ALERT_ERROR;
  gpum_alert_t a;
  alert_init(&a, rule, ri, device, level);
  a.value = (double)xid;
  a.xid = xid;
  a.since_ns = now_ns;
  msg_printf(a.message, sizeof a.message, "GPU %u: Xid %llu: %s%s", device, (unsigned long long)xid,
             info->name, info->critical ? " (critical: the GPU needs a reset or service)" : "");
  fire(e, &a, now_ns, notes);
}

/* ---- Feeds ------------------------------------------------------------------------------ */

void gpum_alert_engine_feed_sample(gpum_alert_engine_t *e, unsigned device,
                                   const gpum_device_sample_t *s, uint64_t now_ns) {
  notes_t notes;
  if (e == NULL || s == NULL || device >= GPUM_ALERT_MAX_DEVICES)
    return;
  notes_init(&notes);
  pthread_mutex_lock(&e->mu);
  expire_xids(e, now_ns, &notes);
  for (unsigned ri = 0; ri < e->n_rules; ri++)
    if (e->rules[ri].r.kind == GPUM__RULE_METRIC && device_matches(&e->rules[ri], device))
      eval_metric(e, ri, device, s, now_ns, &notes);
  eval_health_rules(e, device, now_ns, &notes);
  unlock_and_notify(e, &notes);
}

void gpum_alert_engine_feed_xid(gpum_alert_engine_t *e, unsigned device, uint64_t xid,
                                uint64_t now_ns) {
  notes_t notes;
  if (e == NULL || device >= GPUM_ALERT_MAX_DEVICES)
    return;
  gpum_xid_info_t info = gpum_xid_info(xid > 0xffffffffu ? 0 : (unsigned)xid);
  notes_init(&notes);
  pthread_mutex_lock(&e->mu);
  expire_xids(e, now_ns, &notes);
  for (unsigned ri = 0; ri < e->n_rules; ri++) {
    rule_t *rule = &e->rules[ri];
    if (rule->r.kind == GPUM__RULE_XID && device_matches(rule, device) &&
        xid_matches(&rule->r, xid, info.critical))
      on_xid(e, ri, device, xid, &info, now_ns, &notes);
  }
  expire_xids(e, now_ns, &notes); /* a zero window: fired and cleared at once */
  unlock_and_notify(e, &notes);
}

void gpum_alert_engine_feed_health(gpum_alert_engine_t *e, unsigned device, int state,
                                   const char *reason, uint64_t now_ns) {
  notes_t notes;
  if (e == NULL || device >= GPUM_ALERT_MAX_DEVICES)
    return;
  notes_init(&notes);
  pthread_mutex_lock(&e->mu);
  device_t *d = &e->dev[device];
  if (!d->has_health || d->health != state) {
    d->has_health = true;
    d->health = state;
    d->health_since_ns = now_ns;
  }
  snprintf(d->reason, sizeof d->reason, "%s", reason ? reason : "");
  expire_xids(e, now_ns, &notes);
  eval_health_rules(e, device, now_ns, &notes);
  unlock_and_notify(e, &notes);
}

void gpum_alert_engine_feed_condition(gpum_alert_engine_t *e, unsigned device, const char *name,
                                      bool holds, gpum_alert_level_t level, const char *message,
                                      uint64_t now_ns) {
  notes_t notes;
  if (e == NULL || name == NULL || device >= GPUM_ALERT_MAX_DEVICES)
    return;
  notes_init(&notes);
  pthread_mutex_lock(&e->mu);
  active_t *act = NULL;
  for (size_t i = 0; i < e->n_active && !act; i++) {
    gpum_alert_t *a = &e->active[i].a;
    if (a->rule == GPUM_ALERT_RULE_CONDITION && a->device == device &&
        strncmp(a->metric, name, sizeof a->metric - 1) == 0)
      act = &e->active[i];
  }
  if (holds && act) {
    msg_printf(act->a.message, sizeof act->a.message, "%s", message ? message : name);
    history_update(e, act);
  } else if (holds) {
    gpum_alert_t a;
    memset(&a, 0, sizeof a);
    a.rule = GPUM_ALERT_RULE_CONDITION;
    a.device = device;
    a.level = level;
    a.value = 1;
    a.since_ns = now_ns;
    snprintf(a.metric, sizeof a.metric, "%s", name);
    snprintf(a.rule_text, sizeof a.rule_text, "%s", name);
    msg_printf(a.message, sizeof a.message, "%s", message ? message : name);
    (void)fire(e, &a, now_ns, &notes); /* out of memory: the next feed fires it */
  } else if (act) {
    clear(e, act, 0, now_ns, "; cleared", &notes);
  }
  unlock_and_notify(e, &notes);
}

void gpum_alert_engine_advance(gpum_alert_engine_t *e, uint64_t now_ns) {
  notes_t notes;
  if (e == NULL)
    return;
  notes_init(&notes);
  pthread_mutex_lock(&e->mu);
  expire_xids(e, now_ns, &notes);
  for (unsigned d = 0; d < GPUM_ALERT_MAX_DEVICES; d++)
    if (e->dev[d].has_health)
      eval_health_rules(e, d, now_ns, &notes);
  unlock_and_notify(e, &notes);
}

/* ---- Queries ---------------------------------------------------------------------------- */

/* Reports n through *count; GPUM_ENOSPC when only cap of them were copied. */
static int copied(size_t n, size_t cap, size_t *count, const char *what) {
  if (count != NULL)
    *count = n;
  if (cap < n)
    return gpum_error(GPUM_ENOSPC, "%s: %zu alerts, room for %zu", what, n, cap);
  return 0;
}

int gpum_alert_engine_active(gpum_alert_engine_t *e, gpum_alert_t *out, size_t cap, size_t *count) {
  if (e == NULL || (out == NULL && cap > 0))
    return gpum_error(GPUM_EINVAL, "active alerts: NULL argument");
  pthread_mutex_lock(&e->mu);
  size_t n = e->n_active;
  for (size_t i = 0; i < n && i < cap; i++)
    out[i] = e->active[i].a;
  pthread_mutex_unlock(&e->mu);
  return copied(n, cap, count, "active alerts");
}

int gpum_alert_engine_history(gpum_alert_engine_t *e, gpum_alert_t *out, size_t cap,
                              size_t *count) {
  if (e == NULL || (out == NULL && cap > 0))
    return gpum_error(GPUM_EINVAL, "alert history: NULL argument");
  pthread_mutex_lock(&e->mu);
  size_t n = e->hist_n;
  for (size_t i = 0; i < n && i < cap; i++)
    out[i] = e->hist[(e->hist_head + i) % e->opts.history_cap];
  pthread_mutex_unlock(&e->mu);
  return copied(n, cap, count, "alert history");
}

void gpum_alert_engine_counters(gpum_alert_engine_t *e, gpum_alert_counters_t *out) {
  pthread_mutex_lock(&e->mu);
  *out = e->counters;
  pthread_mutex_unlock(&e->mu);
}
