/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals shared by the options modules (options_table.c, options.c, config_yaml.c,
 * options_doc.c, options_alias.c) and their unit tests: the growable string used to build
 * documents, the config's storage, staging for all-or-nothing loads, the alias table, and seams
 * for tests (another table, another environment and user id for the default config file).
 */
#ifndef GPUM_OPTIONS_INTERNAL_H
#define GPUM_OPTIONS_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <gpum/options.h>

/* A growable NUL-terminated string. After an allocation failure every append is a no-op and
 * gpum__strbuf_finish() reports GPUM_ENOMEM. */
typedef struct {
  char *data;
  size_t len, cap;
  bool failed;
} gpum__strbuf_t;

void gpum__strbuf_printf(gpum__strbuf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void gpum__strbuf_puts(gpum__strbuf_t *b, const char *s);
/* Hands the string to *out (caller frees) or frees it and returns GPUM_ENOMEM. */
int gpum__strbuf_finish(gpum__strbuf_t *b, char **out);

/* JSON string escaping, the one set of rules for the JSON gpum writes without jansson (pool
 * snapshots, profiles, gpumd's replies): '"' and '\' escaped, control characters as \b \f
 * \n \r \t or \u00XX (upper-case hex, as jansson writes them), every other byte (UTF-8
 * included) as it is. For a byte that needs an escape, writes it to out and returns its length
 * (2 or 6); returns 0 for a byte that goes as it is. */
size_t gpum__json_escape(unsigned char ch, char out[6]);
/* Writes s (n bytes) escaped, without quotes, as a sequence of put(ctx, bytes, len) calls: each
 * run of bytes that go as they are, and each escape. */
void gpum__json_escape_runs(const char *s, size_t n,
                            void (*put)(void *ctx, const char *p, size_t len), void *ctx);
/* Appends s (n bytes) as a JSON string, quotes included. */
void gpum__strbuf_json(gpum__strbuf_t *b, const char *s, size_t n);

/* The current table (the built-in one unless a test replaced it). */
const gpum_option_def_t *gpum__options_table(size_t *count);
/* Test seam: use defs[0..count) as the table; NULL restores the built-in one. Configs made
 * with one table must be freed before the table changes. Not thread-safe. */
void gpum__options_use_table(const gpum_option_def_t *defs, size_t count);
/* Index of key in the current table, or -1. */
long gpum__option_index(const char *key);
/* Length of the section part of key ("log" in "log.level"), 0 for keys without a dot. */
size_t gpum__option_section_len(const char *key);
/* The option whose key (or env or flag name) is nearest to name by edit distance, or NULL
 * when none is within two edits. For "did you mean" hints. */
typedef enum { GPUM__NAME_KEY, GPUM__NAME_ENV, GPUM__NAME_FLAG } gpum__name_form_t;
const gpum_option_def_t *gpum__option_suggest(const char *name, gpum__name_form_t form);

typedef struct {
  char *text; /* canonical text: enum choice as in the table, "true"/"false", else as given */
  gpum_opt_source_t source;
  size_t alias; /* 1 + index in the config's aliases of the reading that set it; 0 when it is
                   the default or was set by the option's own name */
  union {
    bool b;
    int64_t i;
    double d;
    uint64_t u; /* size in bytes, duration in ms */
  } v;
} gpum__opt_value_t;

/* An alias: a name another GPU manager gives one of gpum's settings. */
typedef enum { GPUM__ALIAS_ENV, GPUM__ALIAS_FILE } gpum__alias_form_t;

typedef struct {
  const char *name;        /* "SAFETY_MARGIN_MB"; a file alias's dotted YAML key */
  gpum__alias_form_t form; /* an environment variable or a key of the YAML file */
  const char *key;         /* the option it stands for; NULL when gpum has none (ignored) */
  const char *unit;        /* the alias's unit or form, for the docs: "MiB", "seconds" */
  /* Checks text as the alias means it and writes the option's text for it to out (len bytes).
   * Returns 0, or GPUM_EINVAL/GPUM_ENOSPC with a detail about the value only. NULL: text is
   * the option's text as it is. */
  int (*convert)(const char *text, char *out, size_t len);
  const char *note; /* one or two sentences for docs/config.md */
} gpum__alias_def_t;

/* An alias read into a config (gpum_alias_read_t is made from it). */
typedef struct {
  const gpum__alias_def_t *def;
  char *value;     /* as given */
  char *converted; /* the option's text; NULL for an alias without an option */
  char *origin;    /* "environment", "FILE:LINE:COLUMN" */
} gpum__alias_use_t;

struct gpum_config {
  const gpum_option_def_t *defs;
  size_t count;
  gpum__opt_value_t *values;
  char *file;                 /* the configuration file read into it (gpum_config_file), or NULL */
  gpum__alias_use_t *aliases; /* the aliases read, in the order first read */
  size_t alias_count;
};

/* Validates text for def. On success fills *out (text malloc'd) and returns 0; on failure
 * returns GPUM_EINVAL/GPUM_ERANGE/GPUM_ENOMEM with a detail describing the value only
 * ("'loud' is not one of trace|debug|info|warn|error|off"). */
int gpum__option_parse(const gpum_option_def_t *def, const char *text, gpum__opt_value_t *out);

/* gpum_config_set with a description of where the value came from ("GPUM_LOG_LEVEL",
 * "--log-level", "/etc/gpum/gpum.yaml:3:10"); the detail message names it. */
int gpum__config_set_from(gpum_config_t *cfg, const char *key, const char *value,
                          gpum_opt_source_t source, const char *origin);

/* The alias table (docs/config.md's order). */
const gpum__alias_def_t *gpum__alias_table(size_t *count);
/* The alias of that form named name[0..len), or NULL; an alias whose option is not in cfg's
 * table (a test's table) is not found. */
const gpum__alias_def_t *gpum__alias_find(const gpum_config_t *cfg, const char *name, size_t len,
                                          gpum__alias_form_t form);
/* True when prefix + "." starts the name of a file alias ("gpu_resource"), which the YAML file
 * may then write as a nested mapping. */
bool gpum__alias_is_section(const char *prefix);
/* Reads value as alias a from source (GPUM_OPT_SRC_FILE or _ENV; origin as the config's
 * aliases keep it). A value that does not parse is an error naming the alias and its option,
 * even when the option's own name has been set; otherwise the reading is recorded and the
 * option takes the converted value unless its own name set it (see options_alias.c). */
int gpum__config_set_alias(gpum_config_t *cfg, const gpum__alias_def_t *a, const char *value,
                           gpum_opt_source_t source, const char *origin);
/* Frees n alias readings and the array. */
void gpum__alias_uses_free(gpum__alias_use_t *uses, size_t n);
/* A deep copy of n alias readings into *out (NULL for none). Returns 0 or GPUM_ENOMEM. */
int gpum__alias_uses_copy(const gpum__alias_use_t *uses, size_t n, gpum__alias_use_t **out);

/* A copy of cfg to load into; gpum__config_commit moves it into cfg (and frees it). */
int gpum__config_clone(const gpum_config_t *cfg, gpum_config_t **out);
void gpum__config_commit(gpum_config_t *cfg, gpum_config_t *staged);

/* The default config file for this environment and user: /etc/gpum/gpum.yaml for root, else
 * ${XDG_CONFIG_HOME:-$HOME/.config}/gpum/gpum.yaml. Returns 0, or GPUM_ENOENT when neither
 * XDG_CONFIG_HOME nor HOME is usable, GPUM_ENOSPC when buf is too small. */
int gpum__config_default_path(char *const *envp, uid_t euid, char *buf, size_t len);
/* gpum_config_load_all with the environment and user id given. */
int gpum__config_load_all_from(gpum_config_t *cfg, const char *path, int *argc, char **argv,
                               char *const *envp, uid_t euid);
/* The value of name in envp, or NULL. */
const char *gpum__env_get(char *const *envp, const char *name);

/* examples/gpum.yaml: every option at its default, with its help as a comment. */
int gpum__options_example_yaml(char **out);

#endif /* GPUM_OPTIONS_INTERNAL_H */
