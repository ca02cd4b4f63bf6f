/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Configuration: one options table drives the YAML config file, the GPUM_* environment
 * variables, the command-line flags, GET /api/v1/config and docs/config.md.
 *
 * Each option has a dotted key ("http.listen"). Its environment variable is GPUM_ + the key
 * upper-cased with '.' and '-' turned into '_' ("GPUM_HTTP_LISTEN"); its flag is "--" + the key
 * with '.' and '_' turned into '-' ("--http-listen"). In the YAML file the key is written
 * nested (http:\n  listen: ...) or dotted ("http.listen: ..."), both accepted.
 *
 * Aliases: some names that users of other GPU managers know (SAFETY_MARGIN_MB in the environment,
 * monitor_update_interval in the file...) are read as aliases of gpum's options, converted from
 * the unit they mean (docs/config.md, "Aliases"). gpum's own name wins over an alias whatever
 * their sources; the config keeps which aliases were read (gpum_config_alias_at).
 *
 * Precedence: flag > environment > file > default. Unknown keys (in the file, as GPUM_* variables
 * that look like options, or as flags) and bad values are rejected with GPUM_EUNKNOWN_KEY or
 * GPUM_EINVAL and a detail message that names the key and where it came from; a rejected value
 * changes nothing.
 *
 * A gpum_config_t is not thread-safe for writing; concurrent reads are fine once loading is done.
 */
#ifndef GPUM_OPTIONS_H
#define GPUM_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GPUM_OPT_STRING,
  GPUM_OPT_BOOL,     /* true/false, yes/no, on/off, 1/0 */
  GPUM_OPT_INT,      /* signed 64-bit, within [min, max] */
  GPUM_OPT_DOUBLE,   /* within [min, max] */
  GPUM_OPT_SIZE,     /* bytes, parsed with gpum_size_parse */
  GPUM_OPT_DURATION, /* milliseconds, parsed with gpum_duration_parse */
  GPUM_OPT_ENUM,     /* one of the '|'-separated choices */
  GPUM_OPT_MAP,      /* "NAME=NUMBER,NAME=NUMBER", numbers within [min, max]; in YAML also a
                        mapping; names are unique without regard to case */
} gpum_opt_type_t;

typedef enum {
  GPUM_OPT_SRC_DEFAULT = 0,
  GPUM_OPT_SRC_FILE = 1,
  GPUM_OPT_SRC_ENV = 2,
  GPUM_OPT_SRC_FLAG = 3,
  GPUM_OPT_SRC_API = 4, /* gpum_config_set by a program */
} gpum_opt_source_t;

typedef struct {
  const char *key; /* "http.listen" */
  gpum_opt_type_t type;
  const char *default_value; /* textual default, as a user would write it; "" for none */
  const char *choices;       /* GPUM_OPT_ENUM: "auto|nvml|host"; else NULL */
  double min, max;           /* GPUM_OPT_INT/DOUBLE bounds (inclusive); ignored otherwise */
  bool secret;               /* hidden when the effective config is shown */
  const char *help;          /* one sentence */
} gpum_option_def_t;

/* The table. Index order is the documentation order. */
GPUM_API size_t gpum_option_count(void);
GPUM_API const gpum_option_def_t *gpum_option_at(size_t i);
/* NULL when unknown. */
GPUM_API const gpum_option_def_t *gpum_option_find(const char *key);
/* Derived names, written into buf (always NUL-terminated). Return buf. */
GPUM_API char *gpum_option_env_name(const gpum_option_def_t *def, char *buf, size_t len);
GPUM_API char *gpum_option_flag_name(const gpum_option_def_t *def, char *buf, size_t len);

typedef struct gpum_config gpum_config_t;

/* A config holding every option's default. Caller frees with gpum_config_free.
 * Returns 0 or GPUM_ENOMEM. */
GPUM_API int gpum_config_new(gpum_config_t **out);
GPUM_API void gpum_config_free(gpum_config_t *cfg);

/* Sets key from text, validated by type; source records where it came from. A value from a
 * lower-precedence source never replaces one from a higher one. Returns 0, GPUM_EUNKNOWN_KEY or
 * GPUM_EINVAL/GPUM_ERANGE (the config is unchanged on error). */
GPUM_API int gpum_config_set(gpum_config_t *cfg, const char *key, const char *value,
                             gpum_opt_source_t source);

/* Loads a YAML file (a mapping, nested or dotted keys; scalars only, and mappings for map
 * options; the file aliases such as monitor_update_interval are read too). GPUM_ENOENT when the
 * file does not exist, GPUM_EPARSE on YAML errors (with line and column), GPUM_EUNKNOWN_KEY or
 * GPUM_EINVAL on a bad entry. All-or-nothing: on any error nothing from the file is applied. */
GPUM_API int gpum_config_load_file(gpum_config_t *cfg, const char *path);

/* Applies GPUM_* variables from envp (NULL: the process environment). Variables that are not
 * options are rejected with GPUM_EUNKNOWN_KEY only if they start with a known section prefix
 * (e.g. GPUM_HTTP_LISTNE); other GPUM_* names are ignored, since tools set their own. The
 * environment aliases (SAFETY_MARGIN_MB...) are read too; a bad value of one is GPUM_EINVAL or
 * GPUM_ERANGE naming the alias and its option. */
GPUM_API int gpum_config_load_env(gpum_config_t *cfg, char *const *envp);

/* Consumes option flags from argv: "--http-listen VALUE" and "--http-listen=VALUE" ("--flag"
 * alone for booleans, "--no-flag" for false). Option flags are taken from anywhere in
 * argv[1..] before "--" (before or after the subcommand); other arguments are left in place and
 * in order, argv is compacted (and stays NULL-terminated) and *argc updated so the caller parses
 * its own flags afterwards. "--" and everything after it are left alone. Returns 0 or an error
 * naming the flag; on error neither cfg nor argv changes. */
GPUM_API int gpum_config_load_args(gpum_config_t *cfg, int *argc, char **argv);

/* The usual sequence: file, environment (the process's), flags. The file is the first of:
 * "--config PATH" / "--config=PATH" in argv (consumed), path, $GPUM_CONFIG, the default
 * (/etc/gpum/gpum.yaml for root, else ${XDG_CONFIG_HOME:-~/.config}/gpum/gpum.yaml). A missing
 * file named explicitly is an error; a missing default file is not. argc/argv may be NULL.
 * All-or-nothing: on error neither cfg nor argv changes. */
GPUM_API int gpum_config_load_all(gpum_config_t *cfg, const char *path, int *argc, char **argv);
/* The configuration file last read into cfg (by gpum_config_load_file or gpum_config_load_all:
 * the default file too, when it existed), or NULL when none was. Owned by cfg. */
GPUM_API const char *gpum_config_file(const gpum_config_t *cfg);

/* Typed reads. The key must exist and have that type (programming error otherwise: returns the
 * zero value, "" for strings, and logs at error level); gpum_config_get_string reads the text
 * of an option of any type (enums as their choice). Strings are owned by cfg. */
GPUM_API const char *gpum_config_get_string(const gpum_config_t *cfg, const char *key);
GPUM_API bool gpum_config_get_bool(const gpum_config_t *cfg, const char *key);
GPUM_API int64_t gpum_config_get_int(const gpum_config_t *cfg, const char *key);
GPUM_API double gpum_config_get_double(const gpum_config_t *cfg, const char *key);
GPUM_API uint64_t gpum_config_get_size(const gpum_config_t *cfg, const char *key);     /* bytes */
GPUM_API uint64_t gpum_config_get_duration(const gpum_config_t *cfg, const char *key); /* ms */
/* Entry i of the GPUM_OPT_MAP option key: its name into name (len bytes, NUL-terminated, cut
 * when longer) and its number into *value. Returns 0, GPUM_ENOENT past the last entry, or
 * GPUM_EINVAL when key is not a map option. */
GPUM_API int gpum_config_get_map(const gpum_config_t *cfg, const char *key, size_t i, char *name,
                                 size_t len, double *value);
GPUM_API gpum_opt_source_t gpum_config_source(const gpum_config_t *cfg, const char *key);
GPUM_API const char *gpum_opt_source_name(gpum_opt_source_t src);

typedef enum {
  GPUM_ALIAS_APPLIED = 0,    /* the option has the alias's value */
  GPUM_ALIAS_OVERRIDDEN = 1, /* the option was set by its own name (which wins), or by another
                                alias of it listed before this one */
  GPUM_ALIAS_IGNORED = 2,    /* gpum has no such setting: the value was checked, then ignored */
} gpum_alias_state_t;

/* An alias read into a config. Strings are owned by the config. */
typedef struct {
  const char *name;      /* as written: "SAFETY_MARGIN_MB", "gpu_resource.amd" */
  const char *key;       /* the option it stands for; NULL when ignored */
  const char *unit;      /* the alias's unit or form, as docs/config.md gives it: "MiB" */
  const char *value;     /* the value as given: "512" */
  const char *converted; /* the option's text made from it: "512MiB"; NULL when ignored */
  const char *origin;    /* "environment" or "FILE:LINE:COLUMN" */
  gpum_alias_state_t state;
  const char *by; /* OVERRIDDEN by another alias: its name; by the option's own name: NULL */
} gpum_alias_read_t;

/* How many aliases were read into cfg, in the order first read (each alias at most once: a
 * later read of the same alias replaces the earlier one). */
GPUM_API size_t gpum_config_alias_count(const gpum_config_t *cfg);
/* Alias reading i. Returns 0, or GPUM_ENOENT when i is past the last. */
GPUM_API int gpum_config_alias_at(const gpum_config_t *cfg, size_t i, gpum_alias_read_t *out);
/* "applied", "overridden", "ignored". */
GPUM_API const char *gpum_alias_state_name(gpum_alias_state_t state);
/* One sentence about alias reading i, as gpumd logs it and gpum doctor shows it, into buf
 * (always NUL-terminated): "SAFETY_MARGIN_MB=512 (environment) read as safety_margin=512MiB
 * (MiB)". Returns 0, GPUM_ENOENT, or GPUM_EINVAL when buf is NULL or len is 0. */
GPUM_API int gpum_config_alias_describe(const gpum_config_t *cfg, size_t i, char *buf, size_t len);

/* Writes the effective configuration as YAML (secrets shown as "(hidden)") into a malloc'd
 * string the caller frees. Returns 0 or GPUM_ENOMEM. */
GPUM_API int gpum_config_dump_yaml(const gpum_config_t *cfg, char **out);

/* Sets the log level and target from log.level and log.target (the library logs nothing until a
 * program does this). Returns 0 or GPUM_EINVAL. Not thread-safe with concurrent logging setup. */
GPUM_API int gpum_config_apply_logging(const gpum_config_t *cfg);

/* Logs one line per alias read into cfg under module (gpumd at its start): at info level when
 * applied, at warn level when overridden or ignored. */
GPUM_API void gpum_config_log_aliases(const gpum_config_t *cfg, const char *module);

/* Exports sim.node and sim.library, when they come from the file or a flag, as GPUM_SIM_NODE and
 * GPUM_SIM_LIBRARY (setenv), so that the device layer, libgpum_sim.so and child processes use
 * the configured simulated node. Not thread-safe (setenv). */
GPUM_API void gpum_config_export_sim(const gpum_config_t *cfg);

/* Writes docs/config.md's body (a Markdown table of every option) to a malloc'd string. */
GPUM_API int gpum_options_markdown(char **out);
/* Writes docs/config.md's table of aliases (name, where, option, unit, notes) likewise. */
GPUM_API int gpum_options_aliases_markdown(char **out);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_OPTIONS_H */
