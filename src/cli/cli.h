/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gpum command-line tool: main.c dispatches to one cmd_<name>.c per subcommand. Each
 * command gets argv with argv[0] = its own name, parses its own flags (after the options-table
 * flags were consumed by main), prints its --help, and returns the process exit code:
 * 0 success, 1 failure (with the reason on stderr), 2 usage error.
 */
#ifndef GPUM_CLI_H
#define GPUM_CLI_H

#include <gpum/options.h>

typedef struct {
  const char *name;
  int (*run)(gpum_config_t *cfg, int argc, char **argv);
  const char *summary; /* one line for `gpum --help` */
} gpum_cli_command_t;

int cmd_status(gpum_config_t *cfg, int argc, char **argv);
int cmd_doctor(gpum_config_t *cfg, int argc, char **argv);
int cmd_sim(gpum_config_t *cfg, int argc, char **argv);

#endif /* GPUM_CLI_H */
