/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gpum command-line tool: main.c dispatches to one cmd_<name>.c per subcommand. Each
 * command gets argv with argv[0] = its own name, parses its own flags (after the options-table
 * flags were consumed by main) with the shared parser of args.h, whose table also writes its
 * --help, and returns the process exit code:
 * 0 success, 1 failure (with the reason on stderr), 2 usage error.
 *
 * This header also declares the small helpers the commands share (common.c): opening a device
 * session from the configuration, parsing device lists, deciding on colour. CLI-internal
 * functions are named cli_<name>; they may print to stderr (the library never does).
 */
#ifndef GPUM_CLI_H
#define GPUM_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <gpum/device.h>
#include <gpum/options.h>

/* Exit codes shared by every command. */
enum {
  CLI_EXIT_OK = 0,
  CLI_EXIT_FAIL = 1,  /* the command ran and failed; the reason is on stderr */
  CLI_EXIT_USAGE = 2, /* bad flags, bad values, bad configuration */
};

typedef struct {
  const char *name;
  int (*run)(gpum_config_t *cfg, int argc, char **argv);
  const char *summary; /* one line for `gpum --help` */
} gpum_cli_command_t;

int cmd_status(gpum_config_t *cfg, int argc, char **argv);
int cmd_top(gpum_config_t *cfg, int argc, char **argv);
int cmd_doctor(gpum_config_t *cfg, int argc, char **argv);
int cmd_sim(gpum_config_t *cfg, int argc, char **argv);
int cmd_pool(gpum_config_t *cfg, int argc, char **argv);
int cmd_monitor(gpum_config_t *cfg, int argc, char **argv);
int cmd_alerts(gpum_config_t *cfg, int argc, char **argv);
int cmd_run(gpum_config_t *cfg, int argc, char **argv);
int cmd_reserve(gpum_config_t *cfg, int argc, char **argv);
int cmd_jobs(gpum_config_t *cfg, int argc, char **argv);
int cmd_release(gpum_config_t *cfg, int argc, char **argv);
int cmd_suspend(gpum_config_t *cfg, int argc, char **argv);
int cmd_resume(gpum_config_t *cfg, int argc, char **argv);
int cmd_disable(gpum_config_t *cfg, int argc, char **argv);
int cmd_enable(gpum_config_t *cfg, int argc, char **argv);
int cmd_http_token(gpum_config_t *cfg, int argc, char **argv);
int cmd_estimate(gpum_config_t *cfg, int argc, char **argv);
int cmd_slurm(gpum_config_t *cfg, int argc, char **argv);

/* The bytes per GPU that `--estimate SPEC` reserves (cmd_estimate.c): the estimate's total plus
 * margin_pct percent. Returns 0, or prints why (prefixed "gpum CMD:") and returns
 * CLI_EXIT_USAGE (a bad spec) or CLI_EXIT_FAIL. */
int cli_estimate_bytes(const char *cmd, const char *spec, int64_t margin_pct, uint64_t *bytes);

/* Opens a device session as configured. Returns what gpum_device_open returns. */
int cli_open_session(const gpum_config_t *cfg, gpum_device_session_t **out);
/* The same with the backend forced (GPUM_BACKEND_AUTO: as configured). */
int cli_open_session_as(const gpum_config_t *cfg, gpum_backend_kind_t backend,
                        gpum_device_session_t **out);

/* The reason of the last library failure as one line: the thread's detail message when there
 * is one, else gpum_strerror(err). Points to static or thread-local storage. */
const char *cli_reason(int err);

/* Installs handler for SIGINT and SIGTERM (and SIGHUP when hup), without SA_RESTART: a blocking
 * call returns EINTR, so the command notices the signal. */
void cli_on_stop_signals(void (*handler)(int), bool hup);

/* Whether to use ANSI colours on out: the `color` option (always/never/auto), NO_COLOR in the
 * environment, and whether out is a terminal (auto). */
bool cli_use_color(const gpum_config_t *cfg, FILE *out);

/* Parses a positive interval in seconds ("2", "0.5") or a duration ("500ms", "1m") into
 * milliseconds. Returns 0 or GPUM_EINVAL. */
int cli_parse_interval(const char *s, unsigned long *out_ms);

/* Parses an unsigned decimal integer in [lo, hi] into *out, with an optional trailing '%' when
 * pct; no sign, no other trailing text. Returns 0, or -1 (nothing printed). */
int cli_parse_uint(const char *s, unsigned long long lo, unsigned long long hi, bool pct,
                   unsigned long long *out);

#endif /* GPUM_CLI_H */
