/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the commands that talk to gpumd share (client_cli.c): connecting with the configured
 * socket, the reservation flags of `gpum run` and `gpum reserve`, and their reservation
 * session (libgpum's gpum/session.h) with its events printed on stderr and Ctrl-C as its
 * interruption.
 */
#ifndef GPUM_CLI_CLIENT_H
#define GPUM_CLI_CLIENT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/client.h>
#include <gpum/options.h>
#include <gpum/session.h>

typedef struct {
  gpum_reserve_req_t req;
  uint64_t timeout_ms; /* --timeout: how long to wait in the queue; 0 forever */
  uint64_t ttl_ms;     /* --ttl (gpum reserve) */
  bool quiet;          /* no queue progress on stderr */
} cli_reserve_opts_t;

/* The reservation flags' help lines, for the commands' usage texts. */
extern const char cli_reserve_flags_help[];

/* Takes a flag "--name VALUE" / "--name=VALUE" at argv[*i] (advancing *i past the value). */
bool cli_take_flag(int argc, char **argv, int *i, const char *name, const char **v);

/* Parses the reservation flag at argv[*i] (--mem, --gpus, --type, --priority, --timeout,
 * --label, --no-wait). Returns 1 when taken, 0 when argv[*i] is not one of them, -1 after printing
 * a usage error. */
int cli_take_reserve_flag(const char *cmd, int argc, char **argv, int *i, cli_reserve_opts_t *o);

/* Connects to gpumd at the configured socket; prints the reason (with the hint to start gpumd)
 * and returns CLI_EXIT_FAIL on failure. */
/* gpumd's "list" of everyone's reservations, every page of it in turn (libgpum's
 * gpum_client_list_each), as one document: {"reservations": [...], "total": N}. NULL with the
 * error set (a failed call, or a reply that is not a list). The caller json_decref()s it. */
struct json_t;
struct json_t *cli_gpumd_list_all(gpum_client_t *c);

int cli_client_connect(const gpum_config_t *cfg, const char *cmd, unsigned timeout_ms,
                       gpum_client_t **out);

/* The signal that interrupted the wait (SIGINT/SIGTERM/SIGHUP), 0 when none. Set by the
 * handlers cli_catch_signals installs (without SA_RESTART). */
extern volatile sig_atomic_t cli_signal_caught;
void cli_catch_signals(void);

/* What a command's session is doing, for the messages its events print on stderr. */
typedef enum {
  CLI_PHASE_WAIT, /* waiting for the grant */
  CLI_PHASE_HOLD, /* gpum reserve holds the grant */
  CLI_PHASE_RUN,  /* gpum run's command runs under the grant */
} cli_phase_t;

typedef struct {
  const char *cmd;
  bool quiet; /* no queue positions or pressure on stderr */
  cli_phase_t phase;
} cli_session_ui_t;

/* Opens a session (gpum/session.h) to gpumd at the configured socket, whose events are printed
 * on stderr as ui says (ui must outlive the session) and which cli_signal_caught interrupts
 * (the handlers are installed), reserves as o says and waits for the grant (queue position on
 * stderr; a restart of gpumd meanwhile is survived). Returns 0 with *out the session holding
 * the grant; else prints why and returns CLI_EXIT_FAIL, or 128+signal when interrupted (the
 * queued reservation is then cancelled), with *out NULL. */
int cli_session_start(const gpum_config_t *cfg, cli_session_ui_t *ui, const cli_reserve_opts_t *o,
                      gpum_session_t **out);

#endif /* GPUM_CLI_CLIENT_H */
