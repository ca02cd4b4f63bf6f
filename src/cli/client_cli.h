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

/* The reservation options of `gpum run` and `gpum reserve`, as entries of their option tables
 * (args.h): CLI_RESERVE_ARGS in the table, cli_reserve_option() for the ids it returns. */
enum {
  CLI_OPT_MEM = 100,
  CLI_OPT_GPUS,
  CLI_OPT_TYPE,
  CLI_OPT_PRIORITY,
  CLI_OPT_TIMEOUT,
  CLI_OPT_LABEL,
  CLI_OPT_NO_WAIT,
  CLI_OPT_PREEMPTIBLE,
  CLI_OPT_QUIET,
};

#define CLI_RESERVE_ARGS                                                                             \
  {CLI_OPT_MEM, "--mem", 0, "SIZE", "GPU memory per GPU (required), e.g. 8GiB, 512MiB", 0},          \
      {CLI_OPT_GPUS, "--gpus", 0, "N", "number of GPUs (default 1), all of one vendor", 0},          \
      {CLI_OPT_TYPE,                                                                                 \
       "--type",                                                                                     \
       0,                                                                                            \
       "TYPE",                                                                                       \
       "only GPUs of that type: A100, a100, A100-80GB, MI300X, a vendor (nvidia, amd, intel), "      \
       "or a shell pattern on the name or family such as 'H100*'",                                   \
       0},                                                                                           \
      {CLI_OPT_PRIORITY, "--priority", 0, "P", "-100..100, higher is served first (default 0)", 0},  \
      {CLI_OPT_TIMEOUT,                                                                              \
       "--timeout",                                                                                  \
       0,                                                                                            \
       "DURATION",                                                                                   \
       "give up when not granted within DURATION (e.g. 30s, 10m); default: wait as long as it "      \
       "takes",                                                                                      \
       0},                                                                                           \
      {CLI_OPT_LABEL, "--label", 0, "L", "a name shown in 'gpum jobs' (default: the command's)", 0}, \
      {CLI_OPT_NO_WAIT,                                                                              \
       "--no-wait",                                                                                  \
       0,                                                                                            \
       NULL,                                                                                         \
       "do not queue: fail at once (exit 1, with the reason) when the reservation cannot be "        \
       "granted right now",                                                                          \
       0},                                                                                           \
      {CLI_OPT_PREEMPTIBLE,                                                                          \
       "--preemptible",                                                                              \
       0,                                                                                            \
       NULL,                                                                                         \
       "the job may be suspended (its GPU memory moved to host memory) for work of higher "          \
       "priority, and resumed later (docs/suspend.md)",                                              \
       0},                                                                                           \
  {                                                                                                  \
    CLI_OPT_QUIET, "--quiet", 'q', NULL, "do not show the queue position while waiting", 0           \
  }

/* Takes the reservation option id with its value v (NULL for a switch) into o. Returns 1 when
 * taken, 0 when id is not one of them, -1 after printing a usage error ("gpum CMD: ..."). */
int cli_reserve_option(const char *cmd, int id, const char *v, cli_reserve_opts_t *o);

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
