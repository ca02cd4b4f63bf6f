/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Aliases: the names that users of other GPU managers give gpum's settings (the environment of
 * their workers, the keys of their YAML files), read as gpum's options with the unit they mean
 * converted (SAFETY_MARGIN_MB=512 is safety_margin 512MiB). The table below drives the loaders
 * (options_load.c for the environment, config_yaml.c for the file), the readings each config
 * keeps for gpum doctor and gpumd's start log, and docs/config.md's table of aliases.
 *
 * The rules, in one place:
 * - gpum's own name wins: an option set by its own name (file, environment, flag or program)
 *   keeps that value whatever the alias's source, and the alias is reported as overridden. The
 *   config marks a value set by an alias (gpum__opt_value_t.alias) so that the option's own
 *   name replaces it even from a lower source (options.c).
 * - Two aliases of one option: the one listed first in the table wins.
 * - A value that does not parse is an error naming the alias and its option, even when the
 *   option's own name is set too: the user wrote it and meant something by it.
 * - An alias with no gpum option (key NULL) is checked, recorded and otherwise ignored.
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

#include "core/options_internal.h"
#include "core/names_internal.h"

/* ---- converters: the alias's value as its users mean it, to the option's text ---- */

/* A non-negative decimal number: digits with at most one '.', nothing else. */
static bool is_plain_number(const char *t) {
  size_t digits = strspn(t, "0123456789");
  if (t[digits] == '.')
    return digits + strspn(t + digits + 1, "0123456789") + 1 == strlen(t) &&
           (digits > 0 || t[digits + 1] != '\0');
  return digits > 0 && t[digits] == '\0';
}

static int with_unit(const char *t, const char *unit, const char *what, char *out, size_t len) {
  if (!is_plain_number(t))
    return gpum_error(GPUM_EINVAL, "'%s' is not a number of %s", t, what);
  if ((size_t)snprintf(out, len, "%s%s", t, unit) >= len)
    return gpum_error(GPUM_EINVAL, "'%s' is too long", t);
  return 0;
}

static int conv_mib(const char *t, char *out, size_t len) {
  return with_unit(t, "MiB", "MiB", out, len);
}

static int conv_seconds(const char *t, char *out, size_t len) {
  return with_unit(t, "s", "seconds", out, len);
}

/* USE_GPU: false means no GPU (the host backend); true leaves the choice to auto. */
static int conv_use_gpu(const char *t, char *out, size_t len) {
  static const char *const yes[] = {"true", "yes", "on", "1"};
  static const char *const no[] = {"false", "no", "off", "0"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    if (!strcasecmp(t, yes[i]) || !strcasecmp(t, no[i])) {
      snprintf(out, len, "%s", !strcasecmp(t, yes[i]) ? "auto" : "host");
      return 0;
    }
  }
  return gpum_error(GPUM_EINVAL, "'%s' is not a boolean (true|false, yes|no, on|off, 1|0)", t);
}

/* GPU_DEVICE: one device index or a comma-separated list; written without spaces. */
static int conv_devices(const char *t, char *out, size_t len) {
  size_t o = 0;
  const char *p = t;
  out[0] = '\0';
  while (*p) {
    while (*p == ' ')
      p++;
    size_t n = strspn(p, "0123456789");
    const char *q = p + n;
    while (*q == ' ')
      q++;
    if (n == 0 || n > 9 || (*q != ',' && *q != '\0') || (*q == ',' && q[1] == '\0'))
      return gpum_error(GPUM_EINVAL, "'%s' is not a device index or a list of them (0 or 0,2)", t);
    if (o + n + 2 > len)
      return gpum_error(GPUM_EINVAL, "'%s' is too long", t);
    o += (size_t)snprintf(out + o, len - o, "%s%.*s", o ? "," : "", (int)n, p);
    p = q + (*q == ',');
  }
  return 0;
}

/* log_level: Python's logging level names; gpum's own names pass as they are. */
static int conv_log_level(const char *t, char *out, size_t len) {
  static const char *const names[][2] = {
      {"WARNING", "warn"}, {"CRITICAL", "error"}, {"FATAL", "error"}, {"NOTSET", "trace"},
      {"DEBUG", "debug"},  {"INFO", "info"},      {"ERROR", "error"}, {"WARN", "warn"}};
  const char *v = t;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcasecmp(t, names[i][0]))
      v = names[i][1];
  if ((size_t)snprintf(out, len, "%s", v) >= len)
    return gpum_error(GPUM_EINVAL, "'%s' is too long", t);
  return 0;
}

/* resource_change_threshold: a fraction, checked though gpum has no use for it. */
static int conv_fraction(const char *t, char *out, size_t len) {
  char *end;
  errno = 0;
  double v = is_plain_number(t) ? strtod(t, &end) : NAN;
  if (isnan(v) || errno == ERANGE || v > 1.0)
    return gpum_error(GPUM_EINVAL, "'%s' is not a fraction from 0 to 1", t);
  snprintf(out, len, "%s", t);
  return 0;
}

/* ---- the table ---- */

#define ENV GPUM__ALIAS_ENV
#define FILE_KEY GPUM__ALIAS_FILE

static const gpum__alias_def_t alias_table[] = {
    {"USE_GPU", ENV, "backend", "boolean", conv_use_gpu,
     "false selects the host backend (no GPU); true leaves the choice to auto (NVML when it "
     "loads and finds devices)."},
    {"GPU_DEVICE", ENV, "devices", "device index or list, such as 0 or 0,2", conv_devices,
     "The devices gpum uses; an empty value means all."},
    {"MAX_CONCURRENT_JOBS", ENV, "max_concurrent_jobs", "integer", NULL,
     "gpumd's limit of granted reservations per device. The seed's limit is per worker, with "
     "one worker per GPU, so the two agree when every job holds one GPU."},
    {"JOB_TIMEOUT", ENV, "job_timeout", "seconds", conv_seconds,
     "How long a reservation waits in gpumd's queue for memory when it asks no timeout of its "
     "own (the seed's wait for memory); 0 waits without limit."},
    {"SAFETY_MARGIN_MB", ENV, "safety_margin", "MiB", conv_mib,
     "Memory kept free on every device: 1000 means 1000 MiB."},
    {"log_level", FILE_KEY, "log.level", "level name", conv_log_level,
     "Python's names: DEBUG, INFO, WARNING (warn), ERROR, CRITICAL and FATAL (error), NOTSET "
     "(trace), any case; gpum's own level names too."},
    {"monitor_update_interval", FILE_KEY, "monitor.interval", "seconds", conv_seconds,
     "How often the devices are sampled."},
    {"default_gpu_resource_name", FILE_KEY, "resources.default", "resource name", NULL,
     "Wins over gpu_resource.gpu when both are given."},
    {"gpu_resource.gpu", FILE_KEY, "resources.default", "resource name", NULL,
     "The gpu_resource mapping's generic entry."},
    {"gpu_resource.nvidia", FILE_KEY, "resources.nvidia", "resource name", NULL,
     "Resource name of NVIDIA GPUs."},
    {"gpu_resource.amd", FILE_KEY, "resources.amd", "resource name", NULL,
     "Resource name of AMD GPUs."},
    {"gpu_resource.intel", FILE_KEY, "resources.intel", "resource name", NULL,
     "Resource name of Intel GPUs."},
    {"gpu_resource.npu", FILE_KEY, NULL, "resource name", NULL,
     "Not applicable: gpum manages no NPUs. Read and ignored, with a warning."},
    {"gpu_memory_specs", FILE_KEY, "gputype.memory", "GB per GPU family (a mapping)", NULL,
     "Overrides of the memory table of GPU types: T4: 16.0 is T4=16.0."},
    {"resource_change_threshold", FILE_KEY, NULL, "fraction, 0 to 1", conv_fraction,
     "Not applicable: gpumd reports every sample (monitor.interval) and every change of state, "
     "with no threshold. Checked, then ignored with a warning."},
};

#undef ENV
#undef FILE_KEY

const gpum__alias_def_t *gpum__alias_table(size_t *count) {
  *count = sizeof alias_table / sizeof alias_table[0];
  return alias_table;
}

static long cfg_index(const gpum_config_t *cfg, const char *key) {
  for (size_t i = 0; key != NULL && i < cfg->count; i++)
    if (!strcmp(cfg->defs[i].key, key))
      return (long)i;
  return -1;
}

const gpum__alias_def_t *gpum__alias_find(const gpum_config_t *cfg, const char *name, size_t len,
                                          gpum__alias_form_t form) {
  for (size_t i = 0; name != NULL && i < sizeof alias_table / sizeof alias_table[0]; i++) {
    const gpum__alias_def_t *a = &alias_table[i];
    if (a->form != form || strlen(a->name) != len || strncmp(a->name, name, len) != 0)
      continue;
    return a->key == NULL || cfg_index(cfg, a->key) >= 0 ? a : NULL;
  }
  return NULL;
}

bool gpum__alias_is_section(const char *prefix) {
  size_t n = strlen(prefix);
  for (size_t i = 0; i < sizeof alias_table / sizeof alias_table[0]; i++)
    if (alias_table[i].form == GPUM__ALIAS_FILE && !strncmp(alias_table[i].name, prefix, n) &&
        alias_table[i].name[n] == '.')
      return true;
  return false;
}

/* ---- readings ---- */

void gpum__alias_uses_free(gpum__alias_use_t *uses, size_t n) {
  for (size_t i = 0; uses != NULL && i < n; i++) {
    free(uses[i].value);
    free(uses[i].converted);
    free(uses[i].origin);
  }
  free(uses);
}

static int use_fill(gpum__alias_use_t *u, const gpum__alias_def_t *def, const char *value,
                    const char *converted, const char *origin) {
  *u = (gpum__alias_use_t){.def = def, .value = strdup(value), .origin = strdup(origin)};
  if (converted != NULL)
    u->converted = strdup(converted);
  if (u->value == NULL || u->origin == NULL || (converted != NULL && u->converted == NULL)) {
    free(u->value);
    free(u->origin);
    free(u->converted);
    return GPUM_ENOMEM;
  }
  return 0;
}

int gpum__alias_uses_copy(const gpum__alias_use_t *uses, size_t n, gpum__alias_use_t **out) {
  *out = NULL;
  if (n == 0)
    return 0;
  gpum__alias_use_t *c = calloc(n, sizeof *c);
  if (c == NULL)
    return GPUM_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    if (use_fill(&c[i], uses[i].def, uses[i].value, uses[i].converted, uses[i].origin) != 0) {
      gpum__alias_uses_free(c, i);
      return GPUM_ENOMEM;
    }
  }
  *out = c;
  return 0;
}

/* Records the reading of a (replacing an earlier one of a); *index gets its index. */
static int record(gpum_config_t *cfg, const gpum__alias_def_t *a, const char *value,
                  const char *converted, const char *origin, size_t *index) {
  gpum__alias_use_t u;
  if (use_fill(&u, a, value, converted, origin) != 0)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  size_t i = 0;
  while (i < cfg->alias_count && cfg->aliases[i].def != a)
    i++;
  if (i == cfg->alias_count) {
    gpum__alias_use_t *v = realloc(cfg->aliases, (i + 1) * sizeof *v);
    if (v == NULL) {
      free(u.value);
      free(u.converted);
      free(u.origin);
      return gpum_error(GPUM_ENOMEM, "out of memory");
    }
    cfg->aliases = v;
    cfg->alias_count++;
  } else {
    free(cfg->aliases[i].value);
    free(cfg->aliases[i].converted);
    free(cfg->aliases[i].origin);
  }
  cfg->aliases[i] = u;
  *index = i;
  return 0;
}

/* True when alias a may take the option whose value is cur: the option's own name has not set
 * it, and no alias listed before a has. */
static bool alias_may_set(const gpum_config_t *cfg, const gpum__opt_value_t *cur,
                          const gpum__alias_def_t *a) {
  if (cur->alias == 0)
    return cur->source == GPUM_OPT_SRC_DEFAULT;
  return cfg->aliases[cur->alias - 1].def >= a; /* the table's order */
}

static int alias_error(const gpum__alias_def_t *a, const char *origin, int err) {
  if (a->key != NULL)
    return gpum_error(err, "alias %s of option '%s' (from %s): %s", a->name, a->key, origin,
                      gpum_last_error());
  return gpum_error(err, "alias %s (no gpum option; from %s): %s", a->name, origin,
                    gpum_last_error());
}

int gpum__config_set_alias(gpum_config_t *cfg, const gpum__alias_def_t *a, const char *value,
                           gpum_opt_source_t source, const char *origin) {
  char conv[1024];
  const char *text = value;
  gpum__opt_value_t v = {0};
  size_t r = 0;
  int err = 0;

  if (a->convert != NULL) {
    err = a->convert(value, conv, sizeof conv);
    if (err)
      return alias_error(a, origin, err);
    text = conv;
  }
  long i = cfg_index(cfg, a->key);
  if (a->key != NULL && i < 0)
    return 0; /* not an option of this table (a test's) */
  if (i >= 0 && (err = gpum__option_parse(&cfg->defs[i], text, &v)) != 0)
    return alias_error(a, origin, err);
  err = record(cfg, a, value, i >= 0 ? v.text : NULL, origin, &r);
  if (err || i < 0 || !alias_may_set(cfg, &cfg->values[i], a)) {
    free(v.text);
    return err;
  }
  v.source = source;
  v.alias = r + 1;
  free(cfg->values[i].text);
  cfg->values[i] = v;
  return 0;
}

/* ---- reporting ---- */

size_t gpum_config_alias_count(const gpum_config_t *cfg) {
  return cfg ? cfg->alias_count : 0;
}

int gpum_config_alias_at(const gpum_config_t *cfg, size_t i, gpum_alias_read_t *out) {
  if (cfg == NULL || out == NULL || i >= cfg->alias_count)
    return GPUM_ENOENT;
  const gpum__alias_use_t *u = &cfg->aliases[i];
  long k = cfg_index(cfg, u->def->key);
  *out = (gpum_alias_read_t){.name = u->def->name,
                             .key = u->def->key,
                             .unit = u->def->unit,
                             .value = u->value,
                             .converted = u->converted,
                             .origin = u->origin,
                             .state = GPUM_ALIAS_IGNORED};
  if (k < 0)
    return 0;
  size_t held = cfg->values[k].alias;
  out->state = held == i + 1 ? GPUM_ALIAS_APPLIED : GPUM_ALIAS_OVERRIDDEN;
  if (held != 0 && held != i + 1)
    out->by = cfg->aliases[held - 1].def->name;
  return 0;
}

const char *gpum_alias_state_name(gpum_alias_state_t state) {
  static const char *const names[] = {[GPUM_ALIAS_APPLIED] = "applied",
                                      [GPUM_ALIAS_OVERRIDDEN] = "overridden",
                                      [GPUM_ALIAS_IGNORED] = "ignored"};
  return GPUM__NAME_OF(names, state, "unknown");
}

int gpum_config_alias_describe(const gpum_config_t *cfg, size_t i, char *buf, size_t len) {
  gpum_alias_read_t a;
  if (buf == NULL || len == 0)
    return GPUM_EINVAL;
  buf[0] = '\0';
  if (gpum_config_alias_at(cfg, i, &a) != 0)
    return GPUM_ENOENT;
  int n = snprintf(buf, len, "%s=%s (%s) ", a.name, a.value, a.origin);
  size_t o = n > 0 && (size_t)n < len ? (size_t)n : len - 1;
  if (a.state == GPUM_ALIAS_APPLIED)
    snprintf(buf + o, len - o, "read as %s=%s (%s)", a.key, a.converted, a.unit);
  else if (a.state == GPUM_ALIAS_OVERRIDDEN && a.by != NULL)
    snprintf(buf + o, len - o, "not used: %s is set by %s, listed before it", a.key, a.by);
  else if (a.state == GPUM_ALIAS_OVERRIDDEN)
    snprintf(buf + o, len - o, "not used: %s is set by its own name (%s), which wins", a.key,
             gpum_opt_source_name(gpum_config_source(cfg, a.key)));
  else
    snprintf(buf + o, len - o, "ignored: gpum has no such setting (docs/config.md, Aliases)");
  return 0;
}

/* The log line puts the values in logfmt fields after the message, where they are quoted as
 * needed (gpum_log). */
void gpum_config_log_aliases(const gpum_config_t *cfg, const char *module) {
  gpum_alias_read_t a;
  for (size_t i = 0; gpum_config_alias_at(cfg, i, &a) == 0; i++) {
    if (a.state == GPUM_ALIAS_APPLIED)
      gpum_log(GPUM_LOG_INFO, module, "config: alias %s read as %s (%s) value=%s set=%s from=%s",
               a.name, a.key, a.unit, a.value, a.converted, a.origin);
    else if (a.state == GPUM_ALIAS_OVERRIDDEN)
      gpum_log(GPUM_LOG_WARN, module,
               "config: alias %s not used: %s is set by %s, which wins value=%s from=%s", a.name,
               a.key, a.by ? a.by : "its own name", a.value, a.origin);
    else
      gpum_log(GPUM_LOG_WARN, module,
               "config: alias %s ignored: gpum has no such setting value=%s from=%s", a.name,
               a.value, a.origin);
  }
}

/* ---- docs/config.md ---- */

int gpum_options_aliases_markdown(char **out) {
  gpum__strbuf_t b = {0};
  if (out == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_options_aliases_markdown: no output");
  gpum__strbuf_puts(&b, "| Alias | Where | gpum option | Alias's unit | Notes |\n"
                        "|---|---|---|---|---|\n");
  for (size_t i = 0; i < sizeof alias_table / sizeof alias_table[0]; i++) {
    const gpum__alias_def_t *a = &alias_table[i];
    gpum__strbuf_printf(&b, "| `%s` | %s | ", a->name,
                        a->form == GPUM__ALIAS_ENV ? "environment" : "config file");
    if (a->key != NULL)
      gpum__strbuf_printf(&b, "`%s` | ", a->key);
    else
      gpum__strbuf_puts(&b, "(none) | ");
    gpum__strbuf_printf(&b, "%s | %s |\n", a->unit, a->note);
  }
  return gpum__strbuf_finish(&b, out);
}
