/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the commands that talk to gpumd share (client_cli.c): connecting with the configured
 * socket, the reservation flags of `gpum run` and `gpum reserve`, waiting for a grant while
 * showing the queue position on stderr (Ctrl-C cancels), and formatting reservations.
 */
#ifndef GPUM_CLI_CLIENT_H
#define GPUM_CLI_CLIENT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/client.h>
#include <gpum/options.h>

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
int cli_client_connect(const gpum_config_t *cfg, const char *cmd, unsigned timeout_ms,
                       gpum_client_t **out);

/* The signal that interrupted the wait (SIGINT/SIGTERM/SIGHUP), 0 when none. Set by the
 * handlers cli_catch_signals installs (without SA_RESTART). */
extern volatile sig_atomic_t cli_signal_caught;
void cli_catch_signals(void);

/* Reserves as o says over *cp and waits for the grant, printing the queue position on stderr
 * as it changes. When gpumd goes away meanwhile, connects again (socket of cfg) and
 * re-attaches the queued reservation within lease.grace (*cp is then the new client).
 * Returns 0 with *r GRANTED; else prints why and returns CLI_EXIT_FAIL, or 128+signal when
 * interrupted (the queued reservation is then cancelled). */
int cli_reserve_and_wait(const char *cmd, const gpum_config_t *cfg, gpum_client_t **cp,
                         const cli_reserve_opts_t *o, gpum_reservation_t *r);

/* The lease.grace option in ms (30000 when the table has no such option). */
int64_t cli_lease_grace_ms(const gpum_config_t *cfg);

/* After the connection to gpumd was lost: connects again (socket of cfg) and re-attaches r
 * with its token. Returns 0 with *out the new client (and *now_out, when not NULL, the
 * reservation as gpumd has it) when r is GRANTED or QUEUED (prints "gpum CMD: gpumd is back;
 * ID re-attached" on stderr); GPUM_EAGAIN when gpumd does not answer (yet); another negative
 * code when gpumd answered but r cannot be re-attached (printed). */
int cli_reattach(const char *cmd, const gpum_config_t *cfg, const gpum_reservation_t *r,
                 gpum_client_t **out, gpum_reservation_t *now_out);

/* "GPU-a,GPU-b" (indexes for devices without a UUID) into buf. */
void cli_res_visible_devices(const gpum_reservation_t *r, char *buf, size_t len);

#endif /* GPUM_CLI_CLIENT_H */
