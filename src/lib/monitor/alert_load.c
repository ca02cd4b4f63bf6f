/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where alert rules come from: the default rules, several rules in one string (the
 * alerts.rules option: separated by ';' or newlines), a rules file (alerts.file: one rule per
 * line), and the engine's settings from the configuration (alerts.*). Every loader is
 * all-or-nothing and names the rule (and file line) that is wrong.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/size.h>

#include "monitor/alert_internal.h"

const char *const gpum_alert_default_rules[] = {
    "memory_used_pct > 90 for 10s WARNING clear 85",
    "temperature > slowdown-5 for 10s WARNING clear slowdown-8",
    "temperature > shutdown-5 for 5s CRITICAL clear shutdown-8",
    "xid any auto",
    "health == ERROR CRITICAL",
    NULL,
};

/* Growable array of parsed rules, added to the engine in one step at the end. */
typedef struct {
  gpum__alert_rule_t *v;
  size_t n, cap;
} ruleset_t;

static int ruleset_push(ruleset_t *rs, const gpum__alert_rule_t *r) {
  if (rs->n == rs->cap) {
    size_t cap = rs->cap ? rs->cap * 2 : 8;
    gpum__alert_rule_t *v = realloc(rs->v, cap * sizeof *v);
    if (v == NULL)
      return gpum_error(GPUM_ENOMEM, "alert rules: out of memory");
    rs->v = v;
    rs->cap = cap;
  }
  rs->v[rs->n++] = *r;
  return 0;
}

/* Parses one rule of a list; where says where it is ("alerts.rules: rule 2"). */
static int parse_into(ruleset_t *rs, const char *text, const char *where) {
  gpum__alert_rule_t r;
  int rc = gpum__alert_rule_parse(text, &r);
  if (rc) {
    char detail[512];
    snprintf(detail, sizeof detail, "%s", gpum_last_error());
    return gpum_error(rc, "%s \"%s\": %s", where, text, detail);
  }
  return ruleset_push(rs, &r);
}

static bool blank(const char *s) {
  for (; *s; s++)
    if (*s != ' ' && *s != '\t' && *s != '\r')
      return false;
  return true;
}

/* Splits text into rules at ';' and newlines, dropping '#' comments; by_line numbers the
 * rules by line (files) rather than by position (option strings). */
static int parse_text(ruleset_t *rs, const char *text, const char *origin, bool by_line) {
  size_t len = strlen(text), line = 1, nrule = 0;
  char *buf = malloc(len + 1);
  int rc = 0;
  if (buf == NULL)
    return gpum_error(GPUM_ENOMEM, "alert rules: out of memory");
  memcpy(buf, text, len + 1);
  char *p = buf;
  while (rc == 0 && *p) {
    size_t n = strcspn(p, ";\n#");
    char sep = p[n];
    p[n] = '\0';
    if (!blank(p)) {
      char where[300];
      nrule++;
      if (by_line)
        snprintf(where, sizeof where, "%s:%zu: rule", origin, line);
      else
        snprintf(where, sizeof where, "%s: rule %zu", origin, nrule);
      rc = parse_into(rs, p, where);
    }
    if (sep == '#') { /* skip the comment up to the end of the line */
      char *nl = strchr(p + n + 1, '\n');
      p = nl ? nl : p + n + 1 + strlen(p + n + 1);
      continue;
    }
    if (sep == '\n')
      line++;
    p += n + (sep ? 1 : 0);
  }
  free(buf);
  return rc;
}

static int commit(gpum_alert_engine_t *e, ruleset_t *rs, int rc) {
  if (rc == 0)
    rc = gpum__alert_engine_add_parsed(e, rs->v, rs->n);
  free(rs->v);
  return rc;
}

int gpum_alert_engine_add_rules(gpum_alert_engine_t *e, const char *text, const char *origin) {
  ruleset_t rs = {0};
  if (e == NULL || text == NULL)
    return gpum_error(GPUM_EINVAL, "alert rules: NULL argument");
  return commit(e, &rs, parse_text(&rs, text, origin ? origin : "alert rules", false));
}

/* Reads a whole (small) file into a malloc'd string. */
static int read_file(const char *path, char **out) {
  FILE *f = fopen(path, "r");
  char *buf = NULL;
  size_t len = 0, cap = 0;
  if (f == NULL)
    return gpum_error(errno == ENOENT ? GPUM_ENOENT : GPUM_EIO, "cannot open alert rules %s: %s",
                      path, strerror(errno));
  for (;;) {
    if (cap - len < 4096) {
      if (cap >= (1u << 24)) {
        free(buf);
        fclose(f);
        return gpum_error(GPUM_EINVAL, "alert rules %s: larger than 16 MiB", path);
      }
      char *n = realloc(buf, cap ? cap * 2 : 8192);
      if (n == NULL) {
        free(buf);
        fclose(f);
        return gpum_error(GPUM_ENOMEM, "alert rules %s: out of memory", path);
      }
      buf = n;
      cap = cap ? cap * 2 : 8192;
    }
    size_t got = fread(buf + len, 1, cap - len - 1, f);
    len += got;
    if (got == 0)
      break;
  }
  int err = ferror(f);
  fclose(f);
  if (err) {
    free(buf);
    return gpum_error(GPUM_EIO, "cannot read alert rules %s", path);
  }
  buf[len] = '\0';
  *out = buf;
  return 0;
}

int gpum_alert_engine_load_file(gpum_alert_engine_t *e, const char *path) {
  ruleset_t rs = {0};
  char *text = NULL;
  if (e == NULL || path == NULL)
    return gpum_error(GPUM_EINVAL, "alert rules file: NULL argument");
  int rc = read_file(path, &text);
  if (rc)
    return rc;
  rc = parse_text(&rs, text, path, true);
  free(text);
  return commit(e, &rs, rc);
}

int gpum_alert_engine_add_default_rules(gpum_alert_engine_t *e) {
  ruleset_t rs = {0};
  int rc = 0;
  if (e == NULL)
    return gpum_error(GPUM_EINVAL, "alert rules: NULL engine");
  for (size_t i = 0; rc == 0 && gpum_alert_default_rules[i] != NULL; i++)
    rc = parse_into(&rs, gpum_alert_default_rules[i], "default rule");
  return commit(e, &rs, rc);
}

int gpum_alert_engine_configure(gpum_alert_engine_t *e, const gpum_config_t *cfg) {
  ruleset_t rs = {0};
  int rc = 0;
  char *text = NULL;
  if (e == NULL || cfg == NULL)
    return gpum_error(GPUM_EINVAL, "alert rules: NULL argument");
  if (gpum_config_get_bool(cfg, "alerts.defaults"))
    for (size_t i = 0; rc == 0 && gpum_alert_default_rules[i] != NULL; i++)
      rc = parse_into(&rs, gpum_alert_default_rules[i], "default rule");
  const char *rules = gpum_config_get_string(cfg, "alerts.rules");
  if (rc == 0 && rules[0])
    rc = parse_text(&rs, rules, "alerts.rules", false);
  const char *file = gpum_config_get_string(cfg, "alerts.file");
  if (rc == 0 && file[0] && (rc = read_file(file, &text)) == 0) {
    rc = parse_text(&rs, text, file, true);
    free(text);
  }
  return commit(e, &rs, rc);
}

void gpum_alert_engine_opts_from_config(gpum_alert_engine_opts_t *opts, const gpum_config_t *cfg) {
  gpum_alert_engine_opts_init(opts);
  opts->history_cap = (size_t)gpum_config_get_int(cfg, "alerts.history");
  opts->xid_window_ms = gpum_config_get_duration(cfg, "alerts.xid_window");
}
