/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Documents generated from the options table: the effective configuration as YAML
 * (gpum_config_dump_yaml, also served by GET /api/v1/config later), the Markdown table of
 * docs/config.md (gpum_options_markdown) and examples/gpum.yaml. Options are grouped by section
 * in the order their first option appears in the table, so the YAML reads as nested mappings.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gpum/error.h>

#include "core/options_internal.h"

/* True when text must be quoted to read back as the same string in YAML. */
static bool needs_quotes(const char *t, bool is_string) {
  static const char *const words[] = {"true", "false", "yes", "no",   "on",
                                      "off",  "y",     "n",   "null", "~"};
  size_t n = strlen(t);
  if (n == 0 || t[0] == ' ' || t[n - 1] == ' ' || strchr("-?:,[]{}#&*!|>'\"%@`", t[0]))
    return true;
  if (strstr(t, ": ") || strstr(t, " #") || t[n - 1] == ':')
    return true;
  for (const char *p = t; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f)
      return true;
  if (!is_string)
    return false;
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (!strcasecmp(t, words[i]))
      return true;
  return strspn(t, "0123456789.+-eE") == n; /* would read as a number */
}

static void put_scalar(gpum__strbuf_t *b, const char *t, bool is_string) {
  if (!needs_quotes(t, is_string)) {
    gpum__strbuf_puts(b, t);
    return;
  }
  gpum__strbuf_puts(b, "\"");
  for (const char *p = t; *p; p++) {
    unsigned char c = (unsigned char)*p;
    if (c == '"' || c == '\\')
      gpum__strbuf_printf(b, "\\%c", c);
    else if (c == '\n')
      gpum__strbuf_puts(b, "\\n");
    else if (c == '\t')
      gpum__strbuf_puts(b, "\\t");
    else if (c < 0x20 || c == 0x7f)
      gpum__strbuf_printf(b, "\\x%02x", c);
    else
      gpum__strbuf_printf(b, "%c", c);
  }
  gpum__strbuf_puts(b, "\"");
}

/* Calls emit for every option in section order (see the file comment), with the section
 * header written before the first option of each section. */
typedef void (*emit_fn)(gpum__strbuf_t *b, const gpum_option_def_t *def, size_t index,
                        const char *indent, bool first_in_section, const void *arg);

static void walk_sections(gpum__strbuf_t *b, const gpum_option_def_t *defs, size_t n, emit_fn emit,
                          const void *arg, bool blank_before_section) {
  for (size_t i = 0; i < n; i++) {
    size_t sl = gpum__option_section_len(defs[i].key);
    bool seen = false;
    for (size_t j = 0; j < i && sl > 0; j++)
      if (gpum__option_section_len(defs[j].key) == sl && !strncmp(defs[j].key, defs[i].key, sl))
        seen = true;
    if (seen)
      continue;
    if (sl == 0) {
      emit(b, &defs[i], i, "", false, arg);
      continue;
    }
    if (blank_before_section)
      gpum__strbuf_puts(b, "\n");
    gpum__strbuf_printf(b, "%.*s:\n", (int)sl, defs[i].key);
    for (size_t j = i; j < n; j++)
      if (gpum__option_section_len(defs[j].key) == sl && !strncmp(defs[j].key, defs[i].key, sl))
        emit(b, &defs[j], j, "  ", j == i, arg);
  }
}

static const char *leaf(const gpum_option_def_t *def) {
  size_t sl = gpum__option_section_len(def->key);
  return sl ? def->key + sl + 1 : def->key;
}

static void emit_value(gpum__strbuf_t *b, const gpum_option_def_t *def, size_t i,
                       const char *indent, bool first, const void *arg) {
  const gpum_config_t *cfg = arg;
  (void)first;
  const gpum__opt_value_t *v = &cfg->values[i];
  gpum__strbuf_printf(b, "%s%s: ", indent, leaf(def));
  if (def->secret && v->text[0] != '\0')
    put_scalar(b, "(hidden)", true);
  else
    put_scalar(b, v->text, def->type == GPUM_OPT_STRING);
  if (v->source != GPUM_OPT_SRC_DEFAULT)
    gpum__strbuf_printf(b, "  # from %s", gpum_opt_source_name(v->source));
  gpum__strbuf_puts(b, "\n");
}

int gpum_config_dump_yaml(const gpum_config_t *cfg, char **out) {
  gpum__strbuf_t b = {0};
  if (cfg == NULL || out == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_config_dump_yaml: no config or no output");
  gpum__strbuf_puts(&b, "# gpum effective configuration; values not from the default say where "
                        "they came from\n");
  walk_sections(&b, cfg->defs, cfg->count, emit_value, cfg, false);
  return gpum__strbuf_finish(&b, out);
}

/* The type column of the Markdown table / the type comment of the example. */
static void put_type(gpum__strbuf_t *b, const gpum_option_def_t *def, bool markdown) {
  switch (def->type) {
  case GPUM_OPT_BOOL:
    gpum__strbuf_puts(b, "boolean");
    break;
  case GPUM_OPT_INT:
    if (def->min < def->max)
      gpum__strbuf_printf(b, "integer, %.0f to %.0f", def->min, def->max);
    else
      gpum__strbuf_puts(b, "integer");
    break;
  case GPUM_OPT_DOUBLE:
    if (def->min < def->max)
      gpum__strbuf_printf(b, "number, %g to %g", def->min, def->max);
    else
      gpum__strbuf_puts(b, "number");
    break;
  case GPUM_OPT_SIZE:
    gpum__strbuf_puts(b, "size (8GiB, 512MiB)");
    break;
  case GPUM_OPT_DURATION:
    gpum__strbuf_puts(b, "duration (500ms, 30s, 1h30m)");
    break;
  case GPUM_OPT_MAP:
    if (def->min < def->max)
      gpum__strbuf_printf(b, "map (NAME=NUMBER,...; numbers %g to %g)", def->min, def->max);
    else
      gpum__strbuf_puts(b, "map (NAME=NUMBER,...)");
    break;
  case GPUM_OPT_ENUM:
    gpum__strbuf_puts(b, "one of ");
    for (const char *c = def->choices; *c;) {
      size_t n = strcspn(c, "|");
      gpum__strbuf_printf(b, markdown ? "`%.*s`" : "%.*s", (int)n, c);
      c += n;
      if (*c == '|') {
        gpum__strbuf_puts(b, ", ");
        c++;
      }
    }
    break;
  default:
    gpum__strbuf_puts(b, "string");
    break;
  }
}

/* Writes text with Markdown table specials escaped. */
static void put_md(gpum__strbuf_t *b, const char *t) {
  for (; *t; t++) {
    if (*t == '|')
      gpum__strbuf_puts(b, "\\|");
    else
      gpum__strbuf_printf(b, "%c", *t);
  }
}

int gpum_options_markdown(char **out) {
  gpum__strbuf_t b = {0};
  size_t n;
  const gpum_option_def_t *defs = gpum__options_table(&n);
  char env[160], flag[160];
  if (out == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_options_markdown: no output");
  gpum__strbuf_puts(&b, "| Key | Type | Default | Environment | Flag | Description |\n"
                        "|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < n; i++) {
    gpum__strbuf_printf(&b, "| `%s` | ", defs[i].key);
    put_type(&b, &defs[i], true);
    if (defs[i].default_value[0] != '\0') {
      gpum__strbuf_puts(&b, " | `");
      put_md(&b, defs[i].default_value);
      gpum__strbuf_puts(&b, "` | ");
    } else {
      gpum__strbuf_puts(&b, " | (none) | ");
    }
    gpum__strbuf_printf(&b, "`%s` | `%s` | ", gpum_option_env_name(&defs[i], env, sizeof env),
                        gpum_option_flag_name(&defs[i], flag, sizeof flag));
    put_md(&b, defs[i].help);
    gpum__strbuf_puts(&b, defs[i].secret ? " Secret: never shown. |\n" : " |\n");
  }
  return gpum__strbuf_finish(&b, out);
}

/* Writes text as "# " comment lines of at most 80 columns after the indent. */
static void put_comment(gpum__strbuf_t *b, const char *indent, const char *text) {
  while (*text) {
    size_t room = 78, n = strlen(text);
    if (n > room) {
      n = room;
      while (n > 0 && text[n] != ' ')
        n--;
      if (n == 0)
        n = strcspn(text, " ");
    }
    gpum__strbuf_printf(b, "%s# %.*s\n", indent, (int)n, text);
    text += n;
    while (*text == ' ')
      text++;
  }
}

static void emit_example(gpum__strbuf_t *b, const gpum_option_def_t *def, size_t i,
                         const char *indent, bool first, const void *arg) {
  char env[160], flag[160], type[256];
  gpum__strbuf_t t = {0};
  char *ts = NULL;
  (void)i;
  (void)arg;
  put_type(&t, def, false);
  snprintf(type, sizeof type, "%s", gpum__strbuf_finish(&t, &ts) == 0 ? ts : "");
  free(ts);
  if (!first)
    gpum__strbuf_puts(b, "\n");
  put_comment(b, indent, def->help);
  gpum__strbuf_printf(b, "%s# Type: %s.\n%s# Environment: %s. Flag: %s.\n", indent, type, indent,
                      gpum_option_env_name(def, env, sizeof env),
                      gpum_option_flag_name(def, flag, sizeof flag));
  gpum__strbuf_printf(b, "%s%s: ", indent, leaf(def));
  put_scalar(b, def->default_value, def->type == GPUM_OPT_STRING);
  gpum__strbuf_puts(b, "\n");
}

int gpum__options_example_yaml(char **out) {
  gpum__strbuf_t b = {0};
  size_t n;
  const gpum_option_def_t *defs = gpum__options_table(&n);
  gpum__strbuf_puts(&b,
                    "# SPDX-License-Identifier: Apache-2.0\n"
                    "# gpum configuration file: every option, set to its default.\n"
                    "# Copy it to ~/.config/gpum/gpum.yaml (or /etc/gpum/gpum.yaml for root, or\n"
                    "# any path named by GPUM_CONFIG or --config) and keep only what you change.\n"
                    "# Environment variables and flags override this file; see docs/config.md.\n"
                    "# Generated from the options table; to regenerate after a change:\n"
                    "#   GPUM_WRITE_DOCS=1 ctest --test-dir build -R unit.test_options\n");
  walk_sections(&b, defs, n, emit_example, NULL, true);
  return gpum__strbuf_finish(&b, out);
}
