/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpum: the command-line entry point. Loads the configuration (file, GPUM_* environment,
 * option flags from the one options table), then dispatches to the subcommand.
 */
#include <stdio.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/options.h>

#include "cli.h"

static const gpum_cli_command_t commands[] = {
    {"status", cmd_status, "show each GPU, its memory, utilisation and processes"},
    {"doctor", cmd_doctor, "check drivers, permissions and configuration"},
    {"sim", cmd_sim, "start, control and stop simulated GPU nodes"},
};

static void usage(FILE *out) {
  fprintf(out, "usage: gpum [OPTIONS] COMMAND [ARGS]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "\nRun 'gpum COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("gpum %s\n", GPUM_VERSION);
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    if (!strcmp(argv[1], commands[i].name))
      return commands[i].run(NULL, argc - 1, argv + 1);
  }
  fprintf(stderr, "gpum: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
