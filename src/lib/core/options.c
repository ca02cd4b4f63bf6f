/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration object: one validated value per option, with the source it came from.
 *
 * Values are validated by the option's type and stored both as text (canonical for enums and
 * booleans) and parsed, so getters are cheap and dumps show what the user wrote. Precedence is
 * enforced on every set: a value never replaces one from a higher source (flag > environment >
 * file > default; a program's own gpum_config_set with GPUM_OPT_SRC_API is above all), but it is
 * always validated, so a bad value is reported whatever the order of loading. Loaders that must
 * be all-or-nothing (file, environment, flags) fill a clone and commit it only on success.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/size.h>

#include "core/options_internal.h"
#include "core/names_internal.h"

static const char *const source_names[] = {"default", "file", "environment", "flag", "api"};

const char *gpum_opt_source_name(gpum_opt_source_t src) {
  if ((int)src < 0 || (size_t)src >= sizeof source_names / sizeof source_names[0])
    return "unknown";
  return source_names[src];
}

static bool has_bounds(const gpum_option_def_t *def) {
  return def->min < def->max;
}

static int parse_bool(const char *t, bool *out) {
  static const char *const yes[] = {"true", "yes", "on", "1"};
  static const char *const no[] = {"false", "no", "off", "0"};
  for (size_t i = 0; i < 4; i++) {
    if (!strcasecmp(t, yes[i]) || !strcasecmp(t, no[i])) {
      *out = !strcasecmp(t, yes[i]);
      return 0;
    }
  }
  return gpum_error(GPUM_EINVAL, "'%s' is not a boolean (true|false, yes|no, on|off, 1|0)", t);
}

static int parse_int(const gpum_option_def_t *def, const char *t, int64_t *out) {
  char *end;
  if (isspace((unsigned char)t[0]))
    return gpum_error(GPUM_EINVAL, "'%s' is not an integer (leading space)", t);
  errno = 0;
  long long v = strtoll(t, &end, 10);
  if (end == t || *end != '\0')
    return gpum_error(GPUM_EINVAL, "'%s' is not an integer", t);
  if (errno == ERANGE || (has_bounds(def) && ((double)v < def->min || (double)v > def->max))) {
    if (has_bounds(def))
      return gpum_error(GPUM_ERANGE, "'%s' is out of range (%.0f to %.0f)", t, def->min, def->max);
    return gpum_error(GPUM_ERANGE, "'%s' does not fit in a 64-bit integer", t);
  }
  *out = v;
  return 0;
}

static int parse_double(const gpum_option_def_t *def, const char *t, double *out) {
  char *end;
  if (strspn(t, "0123456789.eE+-") != strlen(t))
    return gpum_error(GPUM_EINVAL, "'%s' is not a number", t);
  errno = 0;
  double v = strtod(t, &end);
  if (end == t || *end != '\0')
    return gpum_error(GPUM_EINVAL, "'%s' is not a number", t);
  if (errno == ERANGE || !isfinite(v) || (has_bounds(def) && (v < def->min || v > def->max))) {
    if (has_bounds(def))
      return gpum_error(GPUM_ERANGE, "'%s' is out of range (%g to %g)", t, def->min, def->max);
    return gpum_error(GPUM_ERANGE, "'%s' is out of the range of a double", t);
  }
  *out = v;
  return 0;
}

/* Matches t against the '|'-separated choices, case-insensitively; *canon gets the choice as
 * the table writes it (malloc'd). */
static int parse_enum(const gpum_option_def_t *def, const char *t, char **canon) {
  const char *c = def->choices ? def->choices : "";
  size_t tl = strlen(t);
  while (*c) {
    size_t n = strcspn(c, "|");
    if (n == tl && tl > 0 && !strncasecmp(c, t, n)) {
      *canon = strndup(c, n);
      return *canon ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
    }
    c += n + (c[n] == '|');
  }
  return gpum_error(GPUM_EINVAL, "'%s' is not one of %s", t, def->choices ? def->choices : "");
}

static bool is_map_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         strchr("_.+-", c) != NULL;
}

/* True when the entries in b (canonical "NAME=N,NAME=N") hold name[0..n), case aside. */
static bool map_has(const gpum__strbuf_t *b, const char *name, size_t n) {
  for (const char *p = b->data; p != NULL && *p;) {
    size_t e = strcspn(p, "=");
    if (e == n && !strncasecmp(p, name, n))
      return true;
    p += strcspn(p, ",");
    p += *p == ',';
  }
  return false;
}

/* Checks the entry e[0..n) ("NAME=NUMBER", spaces around either part allowed) and appends it
 * to b without the spaces. */
static int map_entry(const gpum_option_def_t *def, const char *e, size_t n, gpum__strbuf_t *b) {
  char num[64];
  double v;
  while (n > 0 && isspace((unsigned char)*e))
    e++, n--;
  while (n > 0 && isspace((unsigned char)e[n - 1]))
    n--;
  const char *eq = memchr(e, '=', n);
  if (n == 0)
    return gpum_error(GPUM_EINVAL, "an empty entry (expected NAME=NUMBER, comma-separated)");
  if (eq == NULL)
    return gpum_error(GPUM_EINVAL, "'%.*s' is not NAME=NUMBER", (int)n, e);
  size_t nl = (size_t)(eq - e), vl = n - nl - 1;
  while (nl > 0 && isspace((unsigned char)e[nl - 1]))
    nl--;
  const char *val = eq + 1;
  while (vl > 0 && isspace((unsigned char)*val))
    val++, vl--;
  for (size_t i = 0; i < nl; i++)
    if (!is_map_name_char(e[i]))
      nl = 0;
  if (nl == 0)
    return gpum_error(GPUM_EINVAL,
                      "'%.*s': a name is letters, digits and _ . + - (expected NAME=NUMBER)",
                      (int)n, e);
  if (vl == 0 || vl >= sizeof num)
    return gpum_error(GPUM_EINVAL, "'%.*s': expected a number after '='", (int)n, e);
  memcpy(num, val, vl);
  num[vl] = '\0';
  int err = parse_double(def, num, &v);
  if (err)
    return gpum_error(err, "'%.*s': %s", (int)nl, e, gpum_last_error());
  if (map_has(b, e, nl))
    return gpum_error(GPUM_EINVAL, "'%.*s' is given twice", (int)nl, e);
  gpum__strbuf_printf(b, "%s%.*s=%s", b->len ? "," : "", (int)nl, e, num);
  return 0;
}

/* NAME=NUMBER entries separated by ','; *canon gets them without spaces (malloc'd). */
static int parse_map(const gpum_option_def_t *def, const char *t, char **canon) {
  gpum__strbuf_t b = {0};
  int err = 0;
  gpum__strbuf_puts(&b, "");
  for (const char *p = t; *p && !err;) {
    size_t n = strcspn(p, ",");
    err = map_entry(def, p, n, &b);
    p += n;
    if (*p == ',' && p[1] == '\0')
      err = err ? err : gpum_error(GPUM_EINVAL, "a trailing ','");
    p += *p == ',';
  }
  if (err) {
    free(b.data);
    return err;
  }
  return gpum__strbuf_finish(&b, canon);
}

static const char *type_word(gpum_opt_type_t t) {
  static const char *const names[] = {[GPUM_OPT_BOOL] = "a boolean",
                                      [GPUM_OPT_INT] = "an integer",
                                      [GPUM_OPT_DOUBLE] = "a number",
                                      [GPUM_OPT_SIZE] = "a size such as 8GiB",
                                      [GPUM_OPT_DURATION] = "a duration such as 30s",
                                      [GPUM_OPT_ENUM] = "one of the choices",
                                      [GPUM_OPT_MAP] = "NAME=NUMBER entries"};
  return GPUM__NAME_OF(names, t, "a string");
}

int gpum__option_parse(const gpum_option_def_t *def, const char *text, gpum__opt_value_t *out) {
  gpum__opt_value_t v = {0};
  char *canon = NULL;
  int err = 0;

  if (text == NULL)
    return gpum_error(GPUM_EINVAL, "no value given");
  if (def->type != GPUM_OPT_STRING && def->type != GPUM_OPT_MAP && text[0] == '\0') {
    if (def->type == GPUM_OPT_ENUM)
      return gpum_error(GPUM_EINVAL, "empty value (expected one of %s)", def->choices);
    return gpum_error(GPUM_EINVAL, "empty value (expected %s)", type_word(def->type));
  }
  switch (def->type) {
  case GPUM_OPT_BOOL:
    err = parse_bool(text, &v.v.b);
    if (!err && !(canon = strdup(v.v.b ? "true" : "false")))
      err = GPUM_ENOMEM;
    break;
  case GPUM_OPT_INT:
    err = parse_int(def, text, &v.v.i);
    break;
  case GPUM_OPT_DOUBLE:
    err = parse_double(def, text, &v.v.d);
    break;
  case GPUM_OPT_SIZE:
    err = gpum_size_parse(text, &v.v.u);
    break;
  case GPUM_OPT_DURATION:
    err = gpum_duration_parse(text, &v.v.u);
    break;
  case GPUM_OPT_ENUM:
    err = parse_enum(def, text, &canon);
    break;
  case GPUM_OPT_MAP:
    err = parse_map(def, text, &canon);
    break;
  default:
    break;
  }
  if (err)
    return err == GPUM_ENOMEM ? gpum_error(err, "out of memory") : err;
  v.text = canon ? canon : strdup(text);
  if (v.text == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  *out = v;
  return 0;
}

static void free_values(gpum__opt_value_t *values, size_t n) {
  for (size_t i = 0; values != NULL && i < n; i++)
    free(values[i].text);
  free(values);
}

int gpum_config_new(gpum_config_t **out) {
  size_t n;
  const gpum_option_def_t *defs = gpum__options_table(&n);
  gpum_config_t *cfg = calloc(1, sizeof *cfg);
  if (cfg == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory for the configuration");
  cfg->defs = defs;
  cfg->count = n;
  cfg->values = calloc(n ? n : 1, sizeof *cfg->values);
  if (cfg->values == NULL) {
    free(cfg);
    return gpum_error(GPUM_ENOMEM, "out of memory for the configuration");
  }
  for (size_t i = 0; i < n; i++) {
    int err = gpum__option_parse(&defs[i], defs[i].default_value, &cfg->values[i]);
    if (err) {
      err = err == GPUM_ENOMEM ? err : GPUM_EINTERNAL;
      gpum_error(err, "default of option '%s' is invalid: %s", defs[i].key, gpum_last_error());
      gpum_config_free(cfg);
      return err;
    }
    cfg->values[i].source = GPUM_OPT_SRC_DEFAULT;
  }
  *out = cfg;
  return 0;
}

void gpum_config_free(gpum_config_t *cfg) {
  if (cfg == NULL)
    return;
  free_values(cfg->values, cfg->count);
  free(cfg->file);
  gpum__alias_uses_free(cfg->aliases, cfg->alias_count);
  free(cfg);
}

const char *gpum_config_file(const gpum_config_t *cfg) {
  return cfg ? cfg->file : NULL;
}

int gpum__config_clone(const gpum_config_t *cfg, gpum_config_t **out) {
  gpum_config_t *c = calloc(1, sizeof *c);
  if (c == NULL)
    goto out_nomem;
  *c = (gpum_config_t){.defs = cfg->defs,
                       .count = cfg->count,
                       .values = calloc(cfg->count ? cfg->count : 1, sizeof *cfg->values)};
  if (c->values == NULL || (cfg->file && !(c->file = strdup(cfg->file))))
    goto out_free;
  if (gpum__alias_uses_copy(cfg->aliases, cfg->alias_count, &c->aliases) != 0)
    goto out_free;
  c->alias_count = cfg->alias_count;
  for (size_t i = 0; i < cfg->count; i++) {
    c->values[i] = cfg->values[i];
    c->values[i].text = strdup(cfg->values[i].text);
    if (c->values[i].text == NULL)
      goto out_free;
  }
  *out = c;
  return 0;
out_free:
  gpum_config_free(c);
out_nomem:
  return gpum_error(GPUM_ENOMEM, "out of memory for the configuration");
}

void gpum__config_commit(gpum_config_t *cfg, gpum_config_t *staged) {
  free_values(cfg->values, cfg->count);
  free(cfg->file);
  gpum__alias_uses_free(cfg->aliases, cfg->alias_count);
  cfg->values = staged->values;
  cfg->file = staged->file;
  cfg->aliases = staged->aliases;
  cfg->alias_count = staged->alias_count;
  staged->values = NULL;
  free(staged);
}

static long config_index(const gpum_config_t *cfg, const char *key) {
  for (size_t i = 0; key != NULL && i < cfg->count; i++)
    if (!strcmp(cfg->defs[i].key, key))
      return (long)i;
  return -1;
}

int gpum__config_set_from(gpum_config_t *cfg, const char *key, const char *value,
                          gpum_opt_source_t source, const char *origin) {
  char from[512] = "";
  gpum__opt_value_t v;

  if (cfg == NULL || key == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_config_set: no config or no key");
  if (origin != NULL && *origin != '\0')
    snprintf(from, sizeof from, " (from %s)", origin);
  long i = config_index(cfg, key);
  if (i < 0) {
    const gpum_option_def_t *near = gpum__option_suggest(key, GPUM__NAME_KEY);
    if (near != NULL)
      return gpum_error(GPUM_EUNKNOWN_KEY, "unknown option '%s'%s; did you mean '%s'?", key, from,
                        near->key);
    return gpum_error(GPUM_EUNKNOWN_KEY, "unknown option '%s'%s", key, from);
  }
  int err = gpum__option_parse(&cfg->defs[i], value, &v);
  if (err)
    return gpum_error(err, "option '%s'%s: %s", key, from, gpum_last_error());
  /* gpum's own name wins over an alias whatever their sources (options_alias.c) */
  if (source < cfg->values[i].source && cfg->values[i].alias == 0) {
    free(v.text); /* valid, but a higher-precedence source already set it */
    return 0;
  }
  v.source = source;
  free(cfg->values[i].text);
  cfg->values[i] = v;
  return 0;
}

int gpum_config_set(gpum_config_t *cfg, const char *key, const char *value,
                    gpum_opt_source_t source) {
  char name[160];
  const char *origin = NULL;
  const gpum_option_def_t *def = cfg ? gpum_option_find(key) : NULL;
  if (source == GPUM_OPT_SRC_ENV && def != NULL)
    origin = gpum_option_env_name(def, name, sizeof name);
  else if (source == GPUM_OPT_SRC_FLAG && def != NULL)
    origin = gpum_option_flag_name(def, name, sizeof name);
  else if (source == GPUM_OPT_SRC_FILE)
    origin = "config file";
  return gpum__config_set_from(cfg, key, value, source, origin);
}

/* The stored value of key when it exists and has one of the types in mask; logs a programming
 * error and returns NULL otherwise. */
static const gpum__opt_value_t *lookup(const gpum_config_t *cfg, const char *key, unsigned mask,
                                       const char *fn) {
  long i = cfg ? config_index(cfg, key) : -1;
  if (i < 0) {
    gpum_log(GPUM_LOG_ERROR, "options", "%s: no such option key=%s", fn, key ? key : "(null)");
    return NULL;
  }
  if (!(mask & (1u << cfg->defs[i].type))) {
    gpum_log(GPUM_LOG_ERROR, "options", "%s: option has another type key=%s", fn, key);
    return NULL;
  }
  return &cfg->values[i];
}

#define ANY_TYPE 0xffffu
#define TYPE_BIT(t) (1u << (t))

const char *gpum_config_get_string(const gpum_config_t *cfg, const char *key) {
  /* Every option has a text form, so strings can be read from any type. */
  const gpum__opt_value_t *v = lookup(cfg, key, ANY_TYPE, __func__);
  return v ? v->text : "";
}

bool gpum_config_get_bool(const gpum_config_t *cfg, const char *key) {
  const gpum__opt_value_t *v = lookup(cfg, key, TYPE_BIT(GPUM_OPT_BOOL), __func__);
  return v ? v->v.b : false;
}

int64_t gpum_config_get_int(const gpum_config_t *cfg, const char *key) {
  const gpum__opt_value_t *v = lookup(cfg, key, TYPE_BIT(GPUM_OPT_INT), __func__);
  return v ? v->v.i : 0;
}

double gpum_config_get_double(const gpum_config_t *cfg, const char *key) {
  const gpum__opt_value_t *v = lookup(cfg, key, TYPE_BIT(GPUM_OPT_DOUBLE), __func__);
  return v ? v->v.d : 0.0;
}

uint64_t gpum_config_get_size(const gpum_config_t *cfg, const char *key) {
  const gpum__opt_value_t *v = lookup(cfg, key, TYPE_BIT(GPUM_OPT_SIZE), __func__);
  return v ? v->v.u : 0;
}

uint64_t gpum_config_get_duration(const gpum_config_t *cfg, const char *key) {
  const gpum__opt_value_t *v = lookup(cfg, key, TYPE_BIT(GPUM_OPT_DURATION), __func__);
  return v ? v->v.u : 0;
}

int gpum_config_get_map(const gpum_config_t *cfg, const char *key, size_t i, char *name, size_t len,
                        double *value) {
  const gpum__opt_value_t *v = lookup(cfg, key, TYPE_BIT(GPUM_OPT_MAP), __func__);
  if (v == NULL)
    return gpum_error(GPUM_EINVAL, "'%s' is not a map option", key ? key : "(null)");
  const char *p = v->text;
  for (; i > 0 && *p; i--) {
    p += strcspn(p, ",");
    p += *p == ',';
  }
  if (*p == '\0')
    return GPUM_ENOENT;
  size_t nl = strcspn(p, "=");
  if (name != NULL && len > 0)
    snprintf(name, len, "%.*s", (int)nl, p);
  if (value != NULL)
    *value = strtod(p + nl + 1, NULL); /* checked when it was set */
  return 0;
}

gpum_opt_source_t gpum_config_source(const gpum_config_t *cfg, const char *key) {
  const gpum__opt_value_t *v = lookup(cfg, key, ANY_TYPE, __func__);
  return v ? v->source : GPUM_OPT_SRC_DEFAULT;
}
