/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpum: the command-line entry point. Loads the configuration (the file named by --config or
 * GPUM_CONFIG, else the default file when it exists, as gpumd does; the GPUM_* environment, then
 * option flags from the one options table, which may stand before or after the command name, up to
 * "--"), sets up logging as configured (the library is silent until told), and dispatches to the
 * subcommand.
 *
 * Exit codes: whatever the command returns; 2 for an unknown command or option and for any
 * configuration error (the message names the key and where it came from).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/options.h>
#include <gpum/version.h>

#include "args.h"
#include "cli.h"

static const gpum_cli_command_t commands[] = {
    {"status", cmd_status, "show each GPU, its state, memory, utilisation and processes"},
    {"top", cmd_top, "the node live: GPUs, processes, reservations, queue and alerts"},
    {"doctor", cmd_doctor, "check drivers, permissions and configuration"},
    {"sim", cmd_sim, "start, control and stop simulated GPU nodes"},
    {"pool", cmd_pool, "replay allocation logs against the pool allocator"},
    {"monitor", cmd_monitor, "stream samples of every GPU, for scripts"},
    {"alerts", cmd_alerts, "the node's alerts: gpumd's, or an evaluation of the rules here"},
    {"run", cmd_run, "run a command on GPUs reserved from gpumd (waits its turn)"},
    {"reserve", cmd_reserve, "reserve GPU memory from gpumd and hold it"},
    {"jobs", cmd_jobs, "list the reservations and the queue of gpumd"},
    {"release", cmd_release, "release or cancel gpumd reservations"},
    {"suspend", cmd_suspend, "move a preemptible job's GPU memory to host memory"},
    {"resume", cmd_resume, "bring a suspended job's GPU memory back and let it go on"},
    {"disable", cmd_disable, "take a GPU out of service in gpumd (admin); running jobs stay"},
    {"enable", cmd_enable, "give a disabled GPU back to gpumd (admin)"},
    {"http-token", cmd_http_token, "show or rotate the bearer token of gpumd's REST API"},
    {"estimate", cmd_estimate, "estimate the GPU memory a model needs to train or serve"},
    {"slurm", cmd_slurm, "this node's gres.conf and slurm.conf lines; the cluster's GPU nodes"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const char *config_path;

#define HELP_COL 24

/* The options a user of the CLI sets; the rest of the table (gpumd's) is in `gpum help options`
 * and `gpumd --help`. */
static const char *const cli_option_keys[] = {"socket",   "backend",   "devices",
                                              "sim.node", "log.level", "color"};

/* One option of the table as a help line: "--key VALUE   help [GPUM_KEY; choices; default]". */
static void option_line(FILE *out, const gpum_option_def_t *def) {
  char flag[96], env[96], left[128], text[1024];
  gpum_option_flag_name(def, flag, sizeof flag);
  gpum_option_env_name(def, env, sizeof env);
  static const char *const metavar[] = {
      [GPUM_OPT_STRING] = "VALUE", [GPUM_OPT_BOOL] = "",          [GPUM_OPT_INT] = "N",
      [GPUM_OPT_DOUBLE] = "X",     [GPUM_OPT_SIZE] = "SIZE",      [GPUM_OPT_DURATION] = "TIME",
      [GPUM_OPT_ENUM] = "MODE",    [GPUM_OPT_MAP] = "NAME=N,...",
  };
  snprintf(left, sizeof left, "%s%s%s", flag, def->type == GPUM_OPT_BOOL ? "" : " ",
           metavar[def->type]);
  int n = snprintf(text, sizeof text, "%s [%s", def->help ? def->help : "", env);
  if (n > 0 && (size_t)n < sizeof text && def->type == GPUM_OPT_ENUM)
    n += snprintf(text + n, sizeof text - (size_t)n, "; %s", def->choices);
  if (n > 0 && (size_t)n < sizeof text && def->default_value && *def->default_value)
    n += snprintf(text + n, sizeof text - (size_t)n, "; default %s", def->default_value);
  if (n > 0 && (size_t)n < sizeof text)
    snprintf(text + n, sizeof text - (size_t)n, "]");
  cli_help_line(out, left, text, HELP_COL);
}

static void config_line(FILE *out) {
  cli_help_line(out, "--config FILE",
                "configuration file (YAML); default: $GPUM_CONFIG, else /etc/gpum/gpum.yaml for "
                "root, else ${XDG_CONFIG_HOME:-~/.config}/gpum/gpum.yaml, when it exists",
                HELP_COL);
}

static void usage(FILE *out) {
  fprintf(out, "usage: gpum [OPTIONS] COMMAND [ARGS]\n"
               "       gpum --help | --version | help COMMAND | help options\n\n"
               "gpum manages GPUs for machine-learning workloads.\n\ncommands:\n");
  for (size_t i = 0; i < NCOMMANDS; i++)
    fprintf(out, "  %-10s  %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "\noptions (before or after COMMAND):\n");
  config_line(out);
  for (size_t i = 0; i < sizeof cli_option_keys / sizeof cli_option_keys[0]; i++) {
    const gpum_option_def_t *def = gpum_option_find(cli_option_keys[i]);
    if (def)
      option_line(out, def);
  }
  cli_help_line(out, "--no-color", "same as --color never", HELP_COL);
  cli_help_line(out, "-h, --help", "this help", HELP_COL);
  cli_help_line(out, "-V, --version", "print the version", HELP_COL);
  fprintf(out, "\nEvery option of the configuration (docs/config.md) is also a flag and a GPUM_*\n"
               "variable: 'gpum help options' lists them all; gpumd's own: 'gpumd --help'.\n"
               "Run 'gpum COMMAND --help' for a command's options. Documentation: docs/cli.md.\n");
}

/* `gpum help options`: every option of the table, with its variable and default; precedence:
 * flag > environment > file > default. */
static void usage_options(FILE *out) {
  fprintf(out, "usage: gpum [OPTIONS] COMMAND [ARGS]\n\n"
               "Every option of the configuration, as a flag (before or after COMMAND); each is\n"
               "also a GPUM_* environment variable and a key of the configuration file\n"
               "(docs/config.md); precedence: flag > environment > file > default.\n\n");
  config_line(out);
  for (size_t i = 0; i < gpum_option_count(); i++)
    option_line(out, gpum_option_at(i));
  cli_help_line(out, "--no-color", "same as --color never", HELP_COL);
}

/* The short form for usage errors: the commands and a pointer to --help. */
static void short_usage(void) {
  fprintf(stderr, "usage: gpum [OPTIONS] COMMAND [ARGS]\n\ncommands:\n");
  for (size_t i = 0; i < NCOMMANDS; i++)
    fprintf(stderr, "  %-10s  %s\n", commands[i].name, commands[i].summary);
  fprintf(stderr, "\nRun 'gpum --help' for the options.\n");
}

/* "gpum: unknown command 'stauts'; did you mean 'status'?" and the commands. */
static int unknown_command(const char *name) {
  const char *names[NCOMMANDS + 1];
  for (size_t i = 0; i < NCOMMANDS; i++)
    names[i] = commands[i].name;
  names[NCOMMANDS] = "help";
  const char *near = cli_nearest(name, names, NCOMMANDS + 1);
  if (near)
    fprintf(stderr, "gpum: unknown command '%s'; did you mean '%s'?\n\n", name, near);
  else
    fprintf(stderr, "gpum: unknown command '%s'\n\n", name);
  short_usage();
  return CLI_EXIT_USAGE;
}

static const gpum_cli_command_t *find_command(const char *name) {
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (!strcmp(name, commands[i].name))
      return &commands[i];
  return NULL;
}

/* Takes --config FILE / --config=FILE out of argv (up to "--") and turns --no-color into
 * --color=never, so that the options table sees only its own flags. Returns 0 or 2. */
static int pre_scan(int *argc, char **argv) {
  static char no_color[] = "--color=never";
  int out = 1;
  bool passthrough = false;
  for (int i = 1; i < *argc; i++) {
    char *a = argv[i];
    if (passthrough || strcmp(a, "--") == 0) {
      passthrough = true;
      argv[out++] = a;
    } else if (!strcmp(a, "--no-color")) {
      argv[out++] = no_color;
    } else if (!strcmp(a, "--config")) {
      if (i + 1 >= *argc) {
        fprintf(stderr, "gpum: --config needs a file name\n");
        return CLI_EXIT_USAGE;
      }
      config_path = argv[++i];
    } else if (!strncmp(a, "--config=", 9)) {
      config_path = a + 9;
    } else {
      argv[out++] = a;
    }
  }
  argv[out] = NULL;
  *argc = out;
  return 0;
}

static int setup_logging(const gpum_config_t *cfg) {
  if (gpum_config_apply_logging(cfg) != 0) {
    fprintf(stderr, "gpum: %s\n", gpum_last_error());
    return CLI_EXIT_USAGE;
  }
  return 0;
}

/* "gpum: unknown option '--sockt'; did you mean '--socket'?" (the table's flags and gpum's). */
static int unknown_option(const char *a) {
  static char flags[256][64];
  const char *names[256 + 5] = {"--config", "--no-color", "--help", "--version", "--help-all"};
  size_t n = 5;
  for (size_t i = 0; i < gpum_option_count() && i < 256; i++) {
    gpum_option_flag_name(gpum_option_at(i), flags[i], sizeof flags[i]);
    names[n++] = flags[i];
  }
  char word[64];
  snprintf(word, sizeof word, "%.*s", (int)strcspn(a, "="), a);
  const char *near = cli_nearest(word, names, n);
  if (near)
    fprintf(stderr, "gpum: unknown option '%s'; did you mean '%s'?\n\n", word, near);
  else
    fprintf(stderr, "gpum: unknown option '%s'\n\n", word);
  short_usage();
  return CLI_EXIT_USAGE;
}

static int dispatch(gpum_config_t *cfg, int argc, char **argv) {
  if (argc < 2) {
    short_usage();
    return CLI_EXIT_USAGE;
  }
  const char *a = argv[1];
  if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
    usage(stdout);
    return CLI_EXIT_OK;
  }
  if (!strcmp(a, "--help-all")) {
    usage_options(stdout);
    return CLI_EXIT_OK;
  }
  if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
    printf("gpum %s\n", gpum_version());
    return CLI_EXIT_OK;
  }
  if (!strcmp(a, "help")) {
    if (argc < 3) {
      usage(stdout);
      return CLI_EXIT_OK;
    }
    if (!strcmp(argv[2], "options")) {
      usage_options(stdout);
      return CLI_EXIT_OK;
    }
    const gpum_cli_command_t *c = find_command(argv[2]);
    if (!c)
      return unknown_command(argv[2]);
    char help[] = "--help";
    char *hargv[] = {argv[2], help, NULL};
    return c->run(cfg, 2, hargv);
  }
  if (a[0] == '-') {
    return unknown_option(a);
  }
  const gpum_cli_command_t *c = find_command(a);
  if (!c)
    return unknown_command(a);
  return c->run(cfg, argc - 1, argv + 1);
}

int main(int argc, char **argv) {
  int code = pre_scan(&argc, argv);
  if (code != 0)
    return code;
  gpum_config_t *cfg = NULL;
  if (gpum_config_new(&cfg) != 0) {
    fprintf(stderr, "gpum: out of memory\n");
    return CLI_EXIT_FAIL;
  }
  if (!config_path) {
    const char *env = getenv("GPUM_CONFIG");
    config_path = env && *env ? env : NULL;
  }
  gpum_error_clear();
  int rc = gpum_config_load_all(cfg, config_path, &argc, argv);
  if (rc != 0) {
    fprintf(stderr, "gpum: configuration error: %s\n", cli_reason(rc));
    gpum_config_free(cfg);
    return CLI_EXIT_USAGE;
  }
  code = setup_logging(cfg);
  if (code == 0) {
    gpum_config_export_sim(cfg);
    code = dispatch(cfg, argc, argv);
  }
  gpum_config_free(cfg);
  return code;
}
