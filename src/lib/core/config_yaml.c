/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The YAML config file: a mapping of options, written nested (log:\n  level: debug) or dotted
 * (log.level: debug), or both. Values must be scalars; a YAML null (empty, ~, null) is the empty
 * string. libyaml's event parser is walked with the dotted key of the current mapping as
 * context, so each error can name the file, line, column and key. The file is applied to a
 * clone of the config that is committed only when every entry was valid, and an option set
 * twice in one file is an error rather than a silent last-wins. A map option (GPUM_OPT_MAP)
 * also takes a mapping of scalars. Keys that are aliases (options_alias.c) are read as such,
 * and a group of aliases ("gpu_resource") may be nested like a group of options.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include <gpum/error.h>

#include "core/options_internal.h"
#include "core/names_internal.h"

#define MAX_DEPTH 16

typedef struct {
  const char *path;
  yaml_parser_t parser;
  gpum_config_t *staged;
  size_t *first_line;       /* per option: line where the file set it, 0 when not yet */
  size_t *alias_first_line; /* the same per alias of the alias table */
} ctx_t;

static int next_event(ctx_t *c, yaml_event_t *ev) {
  if (yaml_parser_parse(&c->parser, ev))
    return 0;
  const yaml_parser_t *p = &c->parser;
  return gpum_error(GPUM_EPARSE, "%s:%zu:%zu: YAML syntax error: %s%s%s", c->path,
                    p->problem_mark.line + 1, p->problem_mark.column + 1,
                    p->problem ? p->problem : "unknown problem", p->context ? " " : "",
                    p->context ? p->context : "");
}

static const char *node_kind(yaml_event_type_t t) {
  static const char *const names[] = {[YAML_SEQUENCE_START_EVENT] = "a list",
                                      [YAML_MAPPING_START_EVENT] = "a mapping",
                                      [YAML_ALIAS_EVENT] = "an alias"};
  return GPUM__NAME_OF(names, t, "something else");
}

static bool is_null(const yaml_event_t *ev) {
  const char *v = (const char *)ev->data.scalar.value;
  if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
    return false;
  return !strcmp(v, "") || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") ||
         !strcmp(v, "NULL");
}

/* True when some option's key starts with prefix + ".". */
static bool is_section(const gpum_config_t *cfg, const char *prefix) {
  size_t n = strlen(prefix);
  for (size_t i = 0; i < cfg->count; i++)
    if (!strncmp(cfg->defs[i].key, prefix, n) && cfg->defs[i].key[n] == '.')
      return true;
  return false;
}

/* The part after "section." of the first option in section. */
static const char *first_in_section(const gpum_config_t *cfg, const char *section) {
  size_t n = strlen(section);
  for (size_t i = 0; i < cfg->count; i++)
    if (!strncmp(cfg->defs[i].key, section, n) && cfg->defs[i].key[n] == '.')
      return cfg->defs[i].key + n + 1;
  return "KEY";
}

static long option_index(const gpum_config_t *cfg, const char *key) {
  for (size_t i = 0; i < cfg->count; i++)
    if (!strcmp(cfg->defs[i].key, key))
      return (long)i;
  return -1;
}

static int walk_mapping(ctx_t *c, const char *prefix, int depth);

/* The error for key in a group of aliases that is none of them ("gpu_resource.huawei"). */
static int unknown_in_alias_section(const char *key, const char *origin) {
  size_t n, sl = strcspn(key, ".");
  const gpum__alias_def_t *t = gpum__alias_table(&n);
  char names[256] = "";
  size_t o = 0;
  for (size_t i = 0; i < n; i++)
    if (t[i].form == GPUM__ALIAS_FILE && !strncmp(t[i].name, key, sl) && t[i].name[sl] == '.' &&
        o < sizeof names)
      o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", o ? ", " : "", t[i].name + sl + 1);
  return gpum_error(GPUM_EUNKNOWN_KEY, "unknown key '%s' (from %s): %.*s takes %s", key, origin,
                    (int)sl, key, names);
}

/* Reads the entries of a mapping given to a map option (its MAPPING_START is consumed) into
 * *out as "NAME=VALUE,NAME=VALUE" (malloc'd); the option's parser checks them. */
static int collect_map(ctx_t *c, const char *key, const char *origin, char **out) {
  gpum__strbuf_t b = {0};
  int err = 0;
  gpum__strbuf_puts(&b, "");
  while (!err) {
    yaml_event_t kev, vev;
    if ((err = next_event(c, &kev)) != 0)
      break;
    if (kev.type == YAML_MAPPING_END_EVENT) {
      yaml_event_delete(&kev);
      return gpum__strbuf_finish(&b, out);
    }
    if ((err = kev.type == YAML_SCALAR_EVENT ? next_event(c, &vev) : 0) != 0) {
      yaml_event_delete(&kev);
      break;
    }
    if (kev.type != YAML_SCALAR_EVENT || vev.type != YAML_SCALAR_EVENT)
      err =
          gpum_error(GPUM_EINVAL, "option '%s' (from %s): expected NAME: NUMBER entries, found %s",
                     key, origin, node_kind(kev.type != YAML_SCALAR_EVENT ? kev.type : vev.type));
    else
      gpum__strbuf_printf(&b, "%s%s=%s", b.len ? "," : "", (const char *)kev.data.scalar.value,
                          (const char *)vev.data.scalar.value);
    if (kev.type == YAML_SCALAR_EVENT)
      yaml_event_delete(&vev);
    yaml_event_delete(&kev);
  }
  free(b.data);
  return err;
}

/* The option an alias stands for in cfg, or NULL. */
static const gpum_option_def_t *alias_target(const gpum_config_t *cfg, const gpum__alias_def_t *a) {
  long i = a != NULL ? option_index(cfg, a->key ? a->key : "") : -1;
  return i >= 0 ? &cfg->defs[i] : NULL;
}

/* Checks that the option idx or alias a is set once in the file, and notes the line. */
static int set_once(ctx_t *c, const char *key, long idx, const gpum__alias_def_t *a,
                    const char *origin, const yaml_mark_t *mark) {
  size_t n;
  size_t *line = idx >= 0    ? &c->first_line[idx]
                 : a != NULL ? &c->alias_first_line[a - gpum__alias_table(&n)]
                             : NULL;
  if (line == NULL)
    return 0;
  if (*line != 0)
    return gpum_error(GPUM_EINVAL, "%s '%s' (from %s) is set twice in the file (first on line %zu)",
                      idx >= 0 ? "option" : "alias", key, origin, *line);
  *line = mark->line + 1;
  return 0;
}

/* Handles the value event of key (its position is at mark). */
static int handle_value(ctx_t *c, const char *key, const yaml_mark_t *mark, yaml_event_t *ev,
                        int depth) {
  char origin[4200], *collected = NULL;
  snprintf(origin, sizeof origin, "%s:%zu:%zu", c->path, mark->line + 1, mark->column + 1);
  long idx = option_index(c->staged, key);
  const gpum__alias_def_t *alias =
      idx < 0 ? gpum__alias_find(c->staged, key, strlen(key), GPUM__ALIAS_FILE) : NULL;
  bool section = idx < 0 && alias == NULL && is_section(c->staged, key);
  bool alias_section = idx < 0 && alias == NULL && !section && gpum__alias_is_section(key);
  const gpum_option_def_t *target =
      idx >= 0 ? &c->staged->defs[idx] : alias_target(c->staged, alias);

  if (ev->type == YAML_MAPPING_START_EVENT && (section || alias_section)) {
    if (depth >= MAX_DEPTH)
      return gpum_error(GPUM_EPARSE, "%s: mappings nested too deeply", origin);
    return walk_mapping(c, key, depth + 1);
  }
  if (section || alias_section)
    return gpum_error(GPUM_EINVAL,
                      "'%s' (from %s) is a group of %s, not an option: set "
                      "its %s, e.g. %s.%s: VALUE",
                      key, origin, section ? "options" : "aliases", section ? "options" : "keys",
                      key, section ? first_in_section(c->staged, key) : "KEY");
  if (idx < 0 && alias == NULL && strchr(key, '.') != NULL) {
    char group[256];
    snprintf(group, sizeof group, "%.*s", (int)strcspn(key, "."), key);
    if (gpum__alias_is_section(group))
      return unknown_in_alias_section(key, origin);
  }
  if (ev->type == YAML_MAPPING_START_EVENT && target != NULL && target->type == GPUM_OPT_MAP) {
    int err = collect_map(c, key, origin, &collected);
    if (err)
      return err;
  } else if (ev->type != YAML_SCALAR_EVENT) {
    if (idx < 0 && alias == NULL) /* report the unknown key rather than the shape of its value */
      return gpum__config_set_from(c->staged, key, "", GPUM_OPT_SRC_FILE, origin);
    return gpum_error(GPUM_EINVAL, "%s '%s' (from %s): expected a single value, found %s",
                      idx >= 0 ? "option" : "alias", key, origin, node_kind(ev->type));
  }
  int err = set_once(c, key, idx, alias, origin, mark);
  const char *value = collected     ? collected
                      : is_null(ev) ? ""
                                    : (const char *)ev->data.scalar.value;
  if (!err && !collected && strlen(value) != ev->data.scalar.length && !is_null(ev))
    err = gpum_error(GPUM_EINVAL, "option '%s' (from %s): the value contains a NUL character", key,
                     origin);
  if (!err && alias != NULL)
    err = gpum__config_set_alias(c->staged, alias, value, GPUM_OPT_SRC_FILE, origin);
  else if (!err)
    err = gpum__config_set_from(c->staged, key, value, GPUM_OPT_SRC_FILE, origin);
  free(collected);
  return err;
}

/* Reads key/value pairs after a MAPPING_START up to its MAPPING_END. */
static int walk_mapping(ctx_t *c, const char *prefix, int depth) {
  for (;;) {
    yaml_event_t kev, vev;
    int err = next_event(c, &kev);
    if (err)
      return err;
    if (kev.type == YAML_MAPPING_END_EVENT) {
      yaml_event_delete(&kev);
      return 0;
    }
    yaml_mark_t mark = kev.start_mark;
    if (kev.type != YAML_SCALAR_EVENT || kev.data.scalar.length == 0) {
      err = gpum_error(GPUM_EPARSE, "%s:%zu:%zu: expected an option name, found %s", c->path,
                       mark.line + 1, mark.column + 1,
                       kev.type == YAML_SCALAR_EVENT ? "an empty key" : node_kind(kev.type));
      yaml_event_delete(&kev);
      return err;
    }
    char *key = NULL;
    const char *k = (const char *)kev.data.scalar.value;
    if (prefix != NULL ? asprintf(&key, "%s.%s", prefix, k) < 0 : !(key = strdup(k))) {
      yaml_event_delete(&kev);
      return gpum_error(GPUM_ENOMEM, "out of memory reading %s", c->path);
    }
    yaml_event_delete(&kev);
    err = next_event(c, &vev);
    if (!err) {
      err = handle_value(c, key, &mark, &vev, depth);
      yaml_event_delete(&vev);
    }
    free(key);
    if (err)
      return err;
  }
}

/* STREAM_START [DOCUMENT_START (MAPPING | empty scalar) DOCUMENT_END] STREAM_END. */
static int walk_stream(ctx_t *c) {
  yaml_event_t ev;
  int err = 0, docs = 0;
  while (!err) {
    err = next_event(c, &ev);
    if (err)
      break;
    yaml_event_type_t t = ev.type;
    yaml_mark_t m = ev.start_mark;
    if (t == YAML_DOCUMENT_START_EVENT && ++docs > 1)
      err = gpum_error(GPUM_EPARSE, "%s:%zu:%zu: only one YAML document is allowed", c->path,
                       m.line + 1, m.column + 1);
    else if (t == YAML_MAPPING_START_EVENT)
      err = walk_mapping(c, NULL, 1);
    else if (t == YAML_SCALAR_EVENT && !is_null(&ev))
      err = gpum_error(GPUM_EPARSE, "%s:%zu:%zu: expected a mapping of options at the top level",
                       c->path, m.line + 1, m.column + 1);
    else if (t == YAML_SEQUENCE_START_EVENT || t == YAML_ALIAS_EVENT)
      err = gpum_error(GPUM_EPARSE, "%s:%zu:%zu: expected a mapping of options, found %s", c->path,
                       m.line + 1, m.column + 1, node_kind(t));
    yaml_event_delete(&ev);
    if (t == YAML_STREAM_END_EVENT)
      break;
  }
  return err;
}

static int open_file(const char *path, FILE **out) {
  FILE *f = fopen(path, "r");
  if (f != NULL) {
    *out = f;
    return 0;
  }
  if (errno == ENOENT || errno == ENOTDIR)
    return gpum_error(GPUM_ENOENT, "config file %s does not exist", path);
  if (errno == EACCES)
    return gpum_error(GPUM_EPERM, "cannot read config file %s: %s", path, strerror(errno));
  return gpum_error(GPUM_EIO, "cannot open config file %s: %s", path, strerror(errno));
}

int gpum_config_load_file(gpum_config_t *cfg, const char *path) {
  ctx_t c = {.path = path};
  FILE *f = NULL;
  int err;

  if (cfg == NULL || path == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_config_load_file: no config or no path");
  err = open_file(path, &f);
  if (err)
    return err;
  size_t aliases;
  gpum__alias_table(&aliases);
  c.first_line = calloc(cfg->count ? cfg->count : 1, sizeof *c.first_line);
  c.alias_first_line = calloc(aliases ? aliases : 1, sizeof *c.alias_first_line);
  if (c.first_line == NULL || c.alias_first_line == NULL) {
    err = gpum_error(GPUM_ENOMEM, "out of memory reading %s", path);
    goto out_file;
  }
  err = gpum__config_clone(cfg, &c.staged);
  if (err)
    goto out_lines;
  if (!yaml_parser_initialize(&c.parser)) {
    err = gpum_error(GPUM_ENOMEM, "out of memory reading %s", path);
    goto out_staged;
  }
  yaml_parser_set_input_file(&c.parser, f);
  err = walk_stream(&c);
  yaml_parser_delete(&c.parser);
  if (!err && ferror(f))
    err = gpum_error(GPUM_EIO, "cannot read config file %s", path);
  if (!err) {
    free(c.staged->file);
    if (!(c.staged->file = strdup(path)))
      err = gpum_error(GPUM_ENOMEM, "out of memory reading %s", path);
  }
  if (!err) {
    gpum__config_commit(cfg, c.staged);
    c.staged = NULL;
  }
out_staged:
  gpum_config_free(c.staged);
out_lines:
  free(c.alias_first_line);
  free(c.first_line);
out_file:
  fclose(f);
  return err;
}
