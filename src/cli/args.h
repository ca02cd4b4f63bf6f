/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The command line of every gpum command in one place: a command describes its options once,
 * in a table (cli_arg_t), with its usage lines, summary and examples (cli_cmd_spec_t); the
 * parser walks argv against that table and the help is written from it, so that what a command
 * takes and what its --help says cannot drift apart.
 *
 * The parser is an iterator, as getopt_long is: the command's loop asks cli_args_next() for
 * the next option and switches on its id. It takes "--name VALUE", "--name=VALUE", "-x VALUE",
 * "-x" and "--" (everything after it is positional). An unknown option or command is answered
 * with the nearest known name ("did you mean '--all'?") and the usage exit code.
 *
 * Nothing here is thread-safe; the parser prints to stderr (usage errors) and the help
 * functions to the stream they are given.
 */
#ifndef GPUM_CLI_ARGS_H
#define GPUM_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* cli_arg_t.flags */
enum {
  CLI_ARG_OPTIONAL = 1u << 0, /* the value may be left out: "--watch", "--watch 2", "--watch=2";
                                 a following word is taken when it does not begin with '-' */
};

/* One option of a command. The table ends with an entry whose name is NULL. */
typedef struct {
  int id;              /* > 0, what cli_args_next returns for it */
  const char *name;    /* "--all" */
  char short_name;     /* 'a' for "-a", or 0 */
  const char *metavar; /* "N", "LIST": the option takes a value; NULL: a switch */
  const char *help;    /* one or more sentences, wrapped under the option */
  unsigned flags;      /* CLI_ARG_* */
} cli_arg_t;

/* A command as its --help shows it. */
typedef struct cli_cmd_spec {
  const char *name;    /* "jobs", "sim start": the words after "gpum" */
  const char *usage;   /* what follows "gpum NAME " on the usage line; '\n' starts another
                          usage line of the same command, "\n " a continuation line */
  const char *summary; /* one line: what the command does */
  const char *text;    /* more paragraphs, or NULL */
  const cli_arg_t *args;
  const char *examples;    /* lines, '\n'-separated, each a command with an optional "  # what" */
  const char *exit_status; /* one sentence, or NULL */
  const struct cli_cmd_spec *const *subs; /* a command of commands ("sim"): theirs, NULL-ended;
                                             listed under "commands:" in the help */
} cli_cmd_spec_t;

/* What cli_args_next returns besides an option's id. */
enum {
  CLI_ARGS_END = 0,   /* argv is consumed */
  CLI_ARGS_POS = -1,  /* a positional argument: in p->value */
  CLI_ARGS_HELP = -2, /* -h or --help: the help was printed on stdout; exit 0 */
  CLI_ARGS_ERR = -3,  /* a usage error was printed on stderr; exit CLI_EXIT_USAGE */
};

typedef struct {
  const cli_cmd_spec_t *spec;
  int argc;
  char **argv;
  int i;             /* the next argv element to read */
  const char *value; /* the option's value (NULL when an optional one was left out), or the
                        positional argument */
  const char *opt;   /* the option as written ("--label=x" gives "--label=x") */
  bool only_pos;     /* after "--" */
  bool stop_at_pos;  /* the first positional ends the options (gpum run's command) */
} cli_args_t;

/* Starts parsing argv (argv[0] is the command's name) against spec. */
void cli_args_init(cli_args_t *p, const cli_cmd_spec_t *spec, int argc, char **argv);

/* The next option's id, or a CLI_ARGS_* code. With stop_at_pos, the first positional argument
 * (or what follows "--") is returned as CLI_ARGS_POS and p->i is its index: the rest of argv is
 * the caller's. */
int cli_args_next(cli_args_t *p);

/* Parses all of argv against spec: the value of each option given into vals[id] (a switch
 * given: ""; vals has nvals entries, ids below nvals), and min..max positional arguments into
 * pos (*npos of them). Returns 0; CLI_ARGS_HELP (the help was printed: exit 0); or CLI_ARGS_ERR
 * after a usage error on stderr (an unknown option, too many or too few arguments: exit
 * CLI_EXIT_USAGE). For commands whose options need no more than their text. */
int cli_args_collect(const cli_cmd_spec_t *spec, int argc, char **argv, const char **vals,
                     size_t nvals, const char **pos, int min, int max, int *npos);

/* The subcommand of spec named name; else NULL after "gpum CMD: unknown command 'x'; did you
 * mean 'y'?" and the commands on stderr. */
const cli_cmd_spec_t *cli_args_find_sub(const cli_cmd_spec_t *spec, const char *name);

/* Prints "gpum NAME: MESSAGE" and the hint to run --help on stderr; returns CLI_EXIT_USAGE. */
int cli_args_error(const cli_cmd_spec_t *spec, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Writes spec's help: the usage lines, the summary, the text, the options (from the table,
 * aligned, with -h, --help last), the examples and the exit status. */
void cli_args_help(const cli_cmd_spec_t *spec, FILE *out);

/* Writes "  LEFT  text" with text wrapped at 79 columns under column col. */
void cli_help_line(FILE *out, const char *left, const char *text, int col);

/* The candidate nearest to word (edit distance, a swap of two neighbours counting one), when
 * near enough to be a likely typo, or a unique candidate that word begins; else NULL. */
const char *cli_nearest(const char *word, const char *const *candidates, size_t n);

#endif /* GPUM_CLI_ARGS_H */
