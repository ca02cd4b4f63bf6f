/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loading the configuration from the environment and the command line, and the usual
 * sequence (file, environment, flags) with the default config file search.
 *
 * Environment: GPUM_<KEY> for each option. Tools and tests set GPUM_* variables of their own
 * (GPUM_BIN, GPUM_CONFIG, GPUM_SOURCE_DIR...), so an unknown GPUM_* name is an error only when
 * it starts with a known section (GPUM_LOG_, GPUM_SIM_...), where it is almost surely a typo.
 * Other GPU managers' variables (SAFETY_MARGIN_MB...) are read as aliases (options_alias.c).
 *
 * Flags: option flags are taken from anywhere before "--", so `gpum --log-level debug status`
 * and `gpum status --log-level debug` mean the same; every other argument keeps its order for
 * the program's own parser, and "--" with everything after it is left alone, so a command run
 * by gpum keeps its own flags. Every loader here is all-or-nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/error.h>

#include "core/options_internal.h"

extern char **environ;

const char *gpum__env_get(char *const *envp, const char *name) {
  size_t n = strlen(name);
  for (size_t i = 0; envp != NULL && envp[i] != NULL; i++)
    if (!strncmp(envp[i], name, n) && envp[i][n] == '=')
      return envp[i] + n + 1;
  return NULL;
}

/* The option whose environment name is name[0..len), or NULL. */
static const gpum_option_def_t *find_env(const gpum_config_t *cfg, const char *name, size_t len) {
  char buf[160];
  for (size_t i = 0; i < cfg->count; i++) {
    gpum_option_env_name(&cfg->defs[i], buf, sizeof buf);
    if (strlen(buf) == len && !strncmp(buf, name, len))
      return &cfg->defs[i];
  }
  return NULL;
}

/* True when name starts with GPUM_<SECTION>_ for a section of the table. */
static bool in_known_section(const gpum_config_t *cfg, const char *name, size_t len) {
  char buf[160];
  for (size_t i = 0; i < cfg->count; i++) {
    size_t sl = gpum__option_section_len(cfg->defs[i].key);
    if (sl == 0)
      continue;
    gpum_option_env_name(&cfg->defs[i], buf, sizeof buf);
    size_t pl = 5 + sl + 1; /* "GPUM_" SECTION "_" */
    if (pl < sizeof buf && len > pl && !strncmp(name, buf, pl))
      return true;
  }
  return false;
}

static int unknown_env(const char *name, size_t len) {
  char env[160];
  const gpum_option_def_t *near;
  char *var = strndup(name, len);
  if (var == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  near = gpum__option_suggest(var, GPUM__NAME_ENV);
  if (near != NULL)
    gpum_error(GPUM_EUNKNOWN_KEY, "unknown option in environment variable %s; did you mean %s?",
               var, gpum_option_env_name(near, env, sizeof env));
  else
    gpum_error(GPUM_EUNKNOWN_KEY, "unknown option in environment variable %s", var);
  free(var);
  return GPUM_EUNKNOWN_KEY;
}

static int apply_env(gpum_config_t *staged, char *const *envp) {
  for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
    const char *entry = envp[i], *eq = strchr(entry, '=');
    char origin[160];
    if (eq == NULL)
      continue;
    size_t len = (size_t)(eq - entry);
    if (strncmp(entry, "GPUM_", 5) != 0) {
      const gpum__alias_def_t *a = gpum__alias_find(staged, entry, len, GPUM__ALIAS_ENV);
      int err = a ? gpum__config_set_alias(staged, a, eq + 1, GPUM_OPT_SRC_ENV, "environment") : 0;
      if (err)
        return err;
      continue;
    }
    const gpum_option_def_t *def = find_env(staged, entry, len);
    if (def == NULL) {
      if (in_known_section(staged, entry, len))
        return unknown_env(entry, len);
      continue;
    }
    int err = gpum__config_set_from(staged, def->key, eq + 1, GPUM_OPT_SRC_ENV,
                                    gpum_option_env_name(def, origin, sizeof origin));
    if (err)
      return err;
  }
  return 0;
}

int gpum_config_load_env(gpum_config_t *cfg, char *const *envp) {
  gpum_config_t *staged;
  if (cfg == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_config_load_env: no config");
  int err = gpum__config_clone(cfg, &staged);
  if (err)
    return err;
  err = apply_env(staged, envp ? envp : environ);
  if (err) {
    gpum_config_free(staged);
    return err;
  }
  gpum__config_commit(cfg, staged);
  return 0;
}

/* The option whose flag is "--" + name[0..len), or NULL. */
static const gpum_option_def_t *find_flag(const gpum_config_t *cfg, const char *name, size_t len) {
  char buf[160];
  for (size_t i = 0; i < cfg->count; i++) {
    gpum_option_flag_name(&cfg->defs[i], buf, sizeof buf);
    if (strlen(buf) == len + 2 && !strncmp(buf + 2, name, len))
      return &cfg->defs[i];
  }
  return NULL;
}

/* Applies the option flag at argv[*i] (advancing *i past its value) or returns 1 when argv[*i]
 * is not an option flag. */
static int apply_flag(gpum_config_t *staged, int argc, char **argv, int *i) {
  const char *arg = argv[*i], *value;
  bool negated = false;
  char flag[160];

  if (strncmp(arg, "--", 2) != 0)
    return 1;
  const char *name = arg + 2, *eq = strchr(name, '=');
  size_t len = eq ? (size_t)(eq - name) : strlen(name);
  if (len == 0)
    return 1;
  const gpum_option_def_t *def = find_flag(staged, name, len);
  if (def == NULL && len > 3 && !strncmp(name, "no-", 3)) {
    def = find_flag(staged, name + 3, len - 3);
    if (def != NULL && def->type != GPUM_OPT_BOOL)
      def = NULL; /* --no-color is the program's own flag, not "color=false" */
    negated = def != NULL;
  }
  if (def == NULL)
    return 1;
  snprintf(flag, sizeof flag, "--%.*s", (int)len, name);
  if (negated && eq != NULL)
    return gpum_error(GPUM_EINVAL, "flag %s takes no value (got '%s')", flag, eq + 1);
  if (negated)
    value = "false";
  else if (eq != NULL)
    value = eq + 1;
  else if (def->type == GPUM_OPT_BOOL)
    value = "true";
  else if (*i + 1 < argc)
    value = argv[++*i];
  else
    return gpum_error(GPUM_EINVAL, "flag %s needs a value", flag);
  return gpum__config_set_from(staged, def->key, value, GPUM_OPT_SRC_FLAG, flag);
}

/* Applies the option flags of argv[1..*argc) to staged and writes the other arguments, in
 * order, to kept (which has room for *argc + 1 pointers); *argc becomes their count. */
static int apply_args(gpum_config_t *staged, int *argc, char **argv, char **kept) {
  int n = 0, i;
  if (*argc > 0)
    kept[n++] = argv[0];
  for (i = 1; i < *argc; i++) {
    if (!strcmp(argv[i], "--"))
      break;
    int r = apply_flag(staged, *argc, argv, &i);
    if (r < 0)
      return r;
    if (r == 1)
      kept[n++] = argv[i];
  }
  for (; i < *argc; i++)
    kept[n++] = argv[i];
  kept[n] = NULL;
  *argc = n;
  return 0;
}

/* Copies kept over argv; the slot after the last argument becomes NULL when it lies within
 * the original argc, so argv stays NULL-terminated like main's. */
static void store_args(int *argc, char **argv, char **kept, int kept_n) {
  memcpy(argv, kept, (size_t)kept_n * sizeof *argv);
  if (kept_n < *argc)
    argv[kept_n] = NULL;
  *argc = kept_n;
}

int gpum_config_load_args(gpum_config_t *cfg, int *argc, char **argv) {
  gpum_config_t *staged;
  if (cfg == NULL || argc == NULL || (*argc > 0 && argv == NULL))
    return gpum_error(GPUM_EINVAL, "gpum_config_load_args: no config or no arguments");
  if (*argc <= 0)
    return 0;
  char **kept = calloc((size_t)*argc + 1, sizeof *kept);
  if (kept == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  int n = *argc, err = gpum__config_clone(cfg, &staged);
  if (err)
    goto out_kept;
  err = apply_args(staged, &n, argv, kept);
  if (err) {
    gpum_config_free(staged);
    goto out_kept;
  }
  gpum__config_commit(cfg, staged);
  store_args(argc, argv, kept, n);
out_kept:
  free(kept);
  return err;
}

int gpum__config_default_path(char *const *envp, uid_t euid, char *buf, size_t len) {
  const char *xdg = gpum__env_get(envp, "XDG_CONFIG_HOME");
  const char *home = gpum__env_get(envp, "HOME");
  int n;
  if (euid == 0)
    n = snprintf(buf, len, "/etc/gpum/gpum.yaml");
  else if (xdg != NULL && xdg[0] == '/') /* the XDG spec: relative values are ignored */
    n = snprintf(buf, len, "%s/gpum/gpum.yaml", xdg);
  else if (home != NULL && home[0] == '/')
    n = snprintf(buf, len, "%s/.config/gpum/gpum.yaml", home);
  else
    return gpum_error(GPUM_ENOENT, "no default config file: neither XDG_CONFIG_HOME nor HOME "
                                   "is an absolute path");
  if (n < 0 || (size_t)n >= len)
    return gpum_error(GPUM_ENOSPC, "default config file path is too long");
  return 0;
}

/* Removes "--config PATH" / "--config=PATH" (before "--") from args and returns PATH, or
 * NULL when absent. Sets *err on a --config without a value. */
static const char *take_config_flag(int *argc, char **args, int *err) {
  const char *path = NULL;
  int o = 1, i;
  *err = 0;
  for (i = 1; i < *argc && strcmp(args[i], "--") != 0; i++) {
    if (!strcmp(args[i], "--config")) {
      if (i + 1 >= *argc) {
        *err = gpum_error(GPUM_EINVAL, "flag --config needs a value");
        return NULL;
      }
      path = args[++i];
    } else if (!strncmp(args[i], "--config=", 9)) {
      path = args[i] + 9;
    } else {
      args[o++] = args[i];
    }
  }
  for (; i < *argc; i++)
    args[o++] = args[i];
  args[o] = NULL;
  *argc = o;
  return path;
}

/* Picks the config file: --config, then the caller's path, then GPUM_CONFIG, then the
 * default location. *optional is set when a missing file is fine. */
static int choose_file(const char *flag_path, const char *path, char *const *envp, uid_t euid,
                       char *buf, size_t len, bool *optional) {
  const char *env = gpum__env_get(envp, "GPUM_CONFIG");
  const char *pick = flag_path ? flag_path : path ? path : (env && *env) ? env : NULL;
  *optional = pick == NULL;
  if (pick != NULL) {
    if ((size_t)snprintf(buf, len, "%s", pick) >= len)
      return gpum_error(GPUM_ENOSPC, "config file path is too long");
    return 0;
  }
  return gpum__config_default_path(envp, euid, buf, len);
}

int gpum__config_load_all_from(gpum_config_t *cfg, const char *path, int *argc, char **argv,
                               char *const *envp, uid_t euid) {
  gpum_config_t *staged = NULL;
  int n = argc ? *argc : 0, err;
  char **args = calloc((size_t)(n > 0 ? n : 0) + 1, sizeof *args), **kept = NULL;
  char file[4096];
  bool optional = false;

  if (cfg == NULL)
    err = gpum_error(GPUM_EINVAL, "gpum_config_load_all: no config");
  else if (args == NULL || !(kept = calloc((size_t)(n > 0 ? n : 0) + 1, sizeof *kept)))
    err = gpum_error(GPUM_ENOMEM, "out of memory");
  else
    err = gpum__config_clone(cfg, &staged);
  if (err)
    goto out;
  if (n > 0)
    memcpy(args, argv, (size_t)n * sizeof *args);
  const char *flag_path = n > 0 ? take_config_flag(&n, args, &err) : NULL;
  if (!err)
    err = choose_file(flag_path, path, envp, euid, file, sizeof file, &optional);
  if (err == GPUM_ENOENT && optional) {
    err = 0; /* no HOME: no default file to read */
  } else if (!err) {
    err = gpum_config_load_file(staged, file);
    if (err == GPUM_ENOENT && optional)
      err = 0;
  }
  if (!err)
    err = apply_env(staged, envp);
  if (!err && n > 0)
    err = apply_args(staged, &n, args, kept);
  if (err)
    goto out;
  gpum__config_commit(cfg, staged);
  staged = NULL;
  if (argc != NULL && *argc > 0)
    store_args(argc, argv, kept, n);
out:
  gpum_config_free(staged);
  free(kept);
  free(args);
  return err;
}

int gpum_config_load_all(gpum_config_t *cfg, const char *path, int *argc, char **argv) {
  return gpum__config_load_all_from(cfg, path, argc, argv, environ, geteuid());
}
