/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The command-line parser and help writer every gpum command uses (args.h): one table of
 * options per command drives both, and a mistyped option or command gets the nearest name.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"

#define HELP_WIDTH 79
#define HELP_COL_MAX 26

static const cli_arg_t help_arg = {0, "--help", 'h', NULL, "this help", 0};

void cli_args_init(cli_args_t *p, const cli_cmd_spec_t *spec, int argc, char **argv) {
  memset(p, 0, sizeof *p);
  p->spec = spec;
  p->argc = argc;
  p->argv = argv;
  p->i = 1;
}

int cli_args_error(const cli_cmd_spec_t *spec, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "gpum %s: ", spec->name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nRun 'gpum %s --help' for its usage.\n", spec->name);
  return CLI_EXIT_USAGE;
}

/* Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
 * neighbours each count one. Words longer than 63 bytes are far from everything. */
static size_t distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 63 || lb > 63)
    return (size_t)-1;
  size_t d[64][64];
  for (size_t i = 0; i <= la; i++)
    d[i][0] = i;
  for (size_t j = 0; j <= lb; j++)
    d[0][j] = j;
  for (size_t i = 1; i <= la; i++)
    for (size_t j = 1; j <= lb; j++) {
      size_t cost = a[i - 1] != b[j - 1];
      size_t v = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < v)
        v = d[i][j - 1] + 1;
      if (d[i - 1][j - 1] + cost < v)
        v = d[i - 1][j - 1] + cost;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
        v = d[i - 2][j - 2] + 1;
      d[i][j] = v;
    }
  return d[la][lb];
}

const char *cli_nearest(const char *word, const char *const *candidates, size_t n) {
  const char *best = NULL, *prefixed = NULL;
  size_t best_d = (size_t)-1, nprefixed = 0, wl = strlen(word);
  for (size_t i = 0; i < n; i++) {
    size_t d = distance(word, candidates[i]);
    if (d < best_d) {
      best_d = d;
      best = candidates[i];
    }
    if (wl >= 3 && !strncmp(candidates[i], word, wl)) {
      prefixed = candidates[i];
      nprefixed++;
    }
  }
  /* A typo: at most two edits, and fewer than a third of the word (dashes not counted). */
  size_t letters = wl - strspn(word, "-");
  if (best && best_d <= 2 && best_d * 3 <= letters + 1)
    return best;
  return nprefixed == 1 ? prefixed : NULL;
}

static const cli_arg_t *find_long(const cli_arg_t *args, const char *a, size_t len) {
  for (const cli_arg_t *o = args; o && o->name; o++)
    if (strlen(o->name) == len && !strncmp(o->name, a, len))
      return o;
  return NULL;
}

static const cli_arg_t *find_short(const cli_arg_t *args, char c) {
  for (const cli_arg_t *o = args; o && o->name; o++)
    if (o->short_name == c)
      return o;
  return NULL;
}

static int unknown(const cli_args_t *p, const char *a) {
  size_t len = strcspn(a, "=");
  char word[128];
  snprintf(word, sizeof word, "%.*s", (int)(len < sizeof word ? len : sizeof word - 1), a);
  const char *names[128];
  size_t n = 0;
  for (const cli_arg_t *o = p->spec->args; o && o->name && n < 127; o++)
    names[n++] = o->name;
  names[n++] = help_arg.name;
  const char *near = cli_nearest(word, names, n);
  if (near)
    fprintf(stderr, "gpum %s: unknown option '%s'; did you mean '%s'?\n", p->spec->name, word,
            near);
  else
    fprintf(stderr, "gpum %s: unknown option '%s'\n", p->spec->name, word);
  fprintf(stderr, "Run 'gpum %s --help' for its options.\n", p->spec->name);
  return CLI_ARGS_ERR;
}

/* Takes the value of option o written as a (its "=VALUE" at eq, or the next word). */
static int take_value(cli_args_t *p, const cli_arg_t *o, const char *a, const char *eq) {
  p->opt = a;
  if (!o->metavar) {
    if (eq)
      return cli_args_error(p->spec, "%s takes no value", o->name), CLI_ARGS_ERR;
    p->value = NULL;
    return o->id;
  }
  if (eq) {
    p->value = eq + 1;
    return o->id;
  }
  const char *next = p->i < p->argc ? p->argv[p->i] : NULL;
  if (o->flags & CLI_ARG_OPTIONAL) {
    p->value = next && next[0] != '-' ? p->argv[p->i++] : NULL;
    return o->id;
  }
  if (!next)
    return cli_args_error(p->spec, "%s needs a value (%s)", o->name, o->metavar), CLI_ARGS_ERR;
  p->value = p->argv[p->i++];
  return o->id;
}

int cli_args_next(cli_args_t *p) {
  if (p->i >= p->argc)
    return CLI_ARGS_END;
  const char *a = p->argv[p->i++];
  p->value = NULL;
  p->opt = a;
  if (!p->only_pos && !strcmp(a, "--")) {
    p->only_pos = true;
    if (p->stop_at_pos)
      return p->i < p->argc ? (p->value = p->argv[p->i], CLI_ARGS_POS) : CLI_ARGS_END;
    return cli_args_next(p);
  }
  if (p->only_pos || a[0] != '-' || a[1] == '\0') {
    p->value = a;
    if (p->stop_at_pos)
      p->i--;
    return CLI_ARGS_POS;
  }
  if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
    cli_args_help(p->spec, stdout);
    return CLI_ARGS_HELP;
  }
  if (a[1] == '-') {
    const char *eq = strchr(a, '=');
    const cli_arg_t *o = find_long(p->spec->args, a, eq ? (size_t)(eq - a) : strlen(a));
    return o ? take_value(p, o, a, eq) : unknown(p, a);
  }
  const cli_arg_t *o = a[2] == '\0' ? find_short(p->spec->args, a[1]) : NULL;
  return o ? take_value(p, o, a, NULL) : unknown(p, a);
}

void cli_help_line(FILE *out, const char *left, const char *text, int col_at) {
  int col = fprintf(out, "  %s", left);
  if (*left && col > col_at - 2) {
    fputc('\n', out);
    col = 0;
  }
  fprintf(out, "%*s", col_at - col, "");
  col = col_at;
  for (const char *p = text ? text : ""; *p;) {
    if (*p == '\n') { /* a line break the text asks for */
      fprintf(out, "\n%*s", col_at, "");
      col = col_at;
      p++;
      continue;
    }
    while (*p == ' ')
      p++;
    size_t w = strcspn(p, " \n");
    if (w == 0)
      continue;
    if (col > col_at && col + 1 + (int)w > HELP_WIDTH) {
      fprintf(out, "\n%*s", col_at, "");
      col = col_at;
    } else if (col > col_at) {
      fputc(' ', out);
      col++;
    }
    fprintf(out, "%.*s", (int)w, p);
    col += (int)w;
    p += w;
  }
  fputc('\n', out);
}

/* "-a, --all", "    --label L" */
static void left_of(const cli_arg_t *o, char *buf, size_t len) {
  if (o->short_name)
    snprintf(buf, len, "-%c, %s%s%s", o->short_name, o->name, o->metavar ? " " : "",
             o->metavar ? o->metavar : "");
  else
    snprintf(buf, len, "    %s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
  if (o->metavar && (o->flags & CLI_ARG_OPTIONAL)) {
    char *sp = strchr(buf + 4, ' ');
    if (sp) { /* "--watch [SECONDS]" */
      char tail[64];
      snprintf(tail, sizeof tail, "[%s]", sp + 1);
      snprintf(sp + 1, len - (size_t)(sp + 1 - buf), "%s", tail);
    }
  }
}

/* Writes text's paragraphs, each wrapped at HELP_WIDTH: lines that run on are joined (a blank
 * line ends a paragraph); a line that begins with a space is written as it is (tables). */
static void paragraph(FILE *out, const char *text) {
  if (!text || !*text)
    return;
  fputc('\n', out);
  int col = 0;
  for (const char *p = text; *p;) {
    size_t len = strcspn(p, "\n");
    if (len == 0 || *p == ' ') { /* a blank line or a verbatim one */
      if (col > 0)
        fputc('\n', out);
      fprintf(out, "%.*s\n", (int)len, p);
      col = 0;
    } else {
      for (const char *w = p; w < p + len;) {
        while (w < p + len && *w == ' ')
          w++;
        size_t wl = strcspn(w, " \n");
        if (wl == 0)
          break;
        if (col > 0 && col + 1 + (int)wl > HELP_WIDTH) {
          fputc('\n', out);
          col = 0;
        } else if (col > 0) {
          fputc(' ', out);
          col++;
        }
        fprintf(out, "%.*s", (int)wl, w);
        col += (int)wl;
        w += wl;
      }
    }
    p += len;
    p += *p == '\n';
  }
  if (col > 0)
    fputc('\n', out);
}

/* The length of the usage line at u: up to a '\n' that does not continue it ("\n " does). */
static size_t usage_line_len(const char *u) {
  size_t n = 0;
  while (u[n] && !(u[n] == '\n' && u[n + 1] != ' '))
    n++;
  return n;
}

/* "usage: gpum NAME [--a] [--b X] ...", wrapped at HELP_WIDTH between the words that stand
 * outside brackets (so "[--watch [SECONDS]]" stays whole), continuation lines under the first
 * word after the name. */
static void usage_line(FILE *out, const char *lead, const char *name, const char *u, size_t len) {
  int indent = fprintf(out, "%s gpum %s", lead, name);
  int col = indent;
  const char *end = u + len;
  while (u < end) {
    while (u < end && (*u == ' ' || *u == '\n'))
      u++;
    const char *w = u;
    int depth = 0;
    while (u < end && (depth > 0 || (*u != ' ' && *u != '\n'))) {
      depth += (*u == '[') - (*u == ']');
      u++;
    }
    int wl = (int)(u - w);
    if (wl == 0)
      break;
    if (col > indent && col + 1 + wl > HELP_WIDTH) {
      fprintf(out, "\n%*s", indent, "");
      col = indent;
    }
    col += fprintf(out, " %.*s", wl, w);
  }
  fputc('\n', out);
}

static const char *last_word(const char *name) {
  const char *sp = strrchr(name, ' ');
  return sp ? sp + 1 : name;
}

void cli_args_help(const cli_cmd_spec_t *spec, FILE *out) {
  const char *u = spec->usage ? spec->usage : "";
  bool first = true;
  while (first || *u) {
    size_t w = usage_line_len(u);
    usage_line(out, first ? "usage:" : "      ", spec->name, u, w);
    first = false;
    u += w;
    u += *u == '\n';
  }
  fprintf(out, "\n%s\n", spec->summary);
  paragraph(out, spec->text);
  int col = 0;
  char left[96];
  for (const cli_arg_t *o = spec->args; o && o->name; o++) {
    left_of(o, left, sizeof left);
    int w = (int)strlen(left) + 4;
    if (w <= HELP_COL_MAX && w > col)
      col = w;
  }
  if (col < 16)
    col = 16;
  fprintf(out, "\noptions:\n");
  for (const cli_arg_t *o = spec->args; o && o->name; o++) {
    left_of(o, left, sizeof left);
    cli_help_line(out, left, o->help, col);
  }
  left_of(&help_arg, left, sizeof left);
  cli_help_line(out, left, help_arg.help, col);
  if (spec->subs) {
    fprintf(out, "\ncommands:\n");
    for (const cli_cmd_spec_t *const *c = spec->subs; *c; c++)
      cli_help_line(out, last_word((*c)->name), (*c)->summary, col);
    fprintf(out, "\nRun 'gpum %s COMMAND --help' for a command's options.\n", spec->name);
  }
  if (spec->examples && *spec->examples) {
    fprintf(out, "\nexamples:\n");
    for (const char *e = spec->examples; *e;) {
      size_t w = strcspn(e, "\n");
      fprintf(out, "  %.*s\n", (int)w, e);
      e += w;
      e += *e == '\n';
    }
  }
  if (spec->exit_status) {
    fprintf(out, "\nexit status:\n");
    cli_help_line(out, "", spec->exit_status, 2);
  }
}

int cli_args_collect(const cli_cmd_spec_t *spec, int argc, char **argv, const char **vals,
                     size_t nvals, const char **pos, int min, int max, int *npos) {
  cli_args_t p;
  cli_args_init(&p, spec, argc, argv);
  *npos = 0;
  for (int id; (id = cli_args_next(&p)) != CLI_ARGS_END;) {
    if (id == CLI_ARGS_HELP || id == CLI_ARGS_ERR)
      return id;
    if (id == CLI_ARGS_POS) {
      if (*npos >= max)
        return cli_args_error(spec, "unexpected argument '%s'", p.value), CLI_ARGS_ERR;
      pos[(*npos)++] = p.value;
    } else if ((size_t)id < nvals) {
      vals[id] = p.value ? p.value : "";
    }
  }
  if (*npos < min)
    return cli_args_error(spec, "missing argument (usage: gpum %s %s)", spec->name, spec->usage),
           CLI_ARGS_ERR;
  return 0;
}

const cli_cmd_spec_t *cli_args_find_sub(const cli_cmd_spec_t *spec, const char *name) {
  const char *names[64];
  size_t n = 0;
  for (const cli_cmd_spec_t *const *c = spec->subs; c && *c && n < 64; c++) {
    if (!strcmp(last_word((*c)->name), name))
      return *c;
    names[n++] = last_word((*c)->name);
  }
  const char *near = cli_nearest(name, names, n);
  if (near)
    fprintf(stderr, "gpum %s: unknown command '%s'; did you mean '%s'?\n", spec->name, name, near);
  else
    fprintf(stderr, "gpum %s: unknown command '%s'\n", spec->name, name);
  fprintf(stderr, "Run 'gpum %s --help' for its commands.\n", spec->name);
  return NULL;
}
