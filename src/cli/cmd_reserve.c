/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum reserve`: takes a reservation from gpumd and holds it. Without --ttl it stays in the
 * foreground and holds the reservation until Ctrl-C / SIGTERM (the lease is this connection);
 * with --ttl it makes a TTL lease, prints the reservation and exits: the reservation lasts
 * until `gpum release ID` or until the TTL passes without renewal.
 *
 * stdout gets the reservation id (for scripts: ID=$(gpum reserve --mem 8GiB --ttl 1h)),
 * stderr what was granted and the shell lines to use it.
 *
 * When gpumd restarts while it holds a reservation, gpum reserve reconnects every 250 ms and
 * re-attaches the reservation with its token (the daemon keeps it for lease.grace), as gpum
 * run does (both through libgpum's reservation session, gpum/session.h); it gives up (exit 1)
 * when gpumd is not back within lease.grace.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/size.h>

#include "args.h"
#include "cli.h"
#include "client_cli.h"

enum { OPT_TTL = 1 };

static const cli_arg_t reserve_args[] = {
    CLI_RESERVE_ARGS,
    {OPT_TTL, "--ttl", 0, "DURATION", "lease for DURATION (e.g. 1h) and exit at once", 0},
    {0},
};

static const cli_cmd_spec_t reserve_spec = {
    .name = "reserve",
    .usage = "--mem SIZE [--gpus N] [--type TYPE] [--priority P] [--timeout DURATION]\n"
             " [--label L] [--ttl DURATION] [--no-wait] [--preemptible] [-q]",
    .summary = "Reserve GPU memory from gpumd and hold it.",
    .text = "Prints the reservation id on stdout and, on stderr, an export line with the\n"
            "environment a job needs to use it (the same variables 'gpum run' sets:\n"
            "CUDA_VISIBLE_DEVICES, GPUM_MEM_LIMIT, ...). Without --ttl, holds the reservation\n"
            "until Ctrl-C or SIGTERM. With --ttl, the reservation outlives this command: it is\n"
            "released by 'gpum release ID' or when DURATION passes.",
    .args = reserve_args,
    .examples = "gpum reserve --mem 20GiB --gpus 2\n"
                "id=$(gpum reserve --mem 8GiB --ttl 2h --label notebook)",
    .exit_status = "0 when granted (and, without --ttl, released on Ctrl-C), 1 when not, 2 for "
                   "usage errors.",
};

static int parse(int argc, char **argv, cli_reserve_opts_t *o) {
  cli_args_t p;
  cli_args_init(&p, &reserve_spec, argc, argv);
  for (int id; (id = cli_args_next(&p)) != CLI_ARGS_END;) {
    const char *v = p.value;
    switch (id) {
    case CLI_ARGS_HELP:
      return CLI_EXIT_OK;
    case CLI_ARGS_ERR:
      return CLI_EXIT_USAGE;
    case CLI_ARGS_POS:
      return cli_args_error(&reserve_spec, "unexpected argument '%s'", v);
    case OPT_TTL:
      if (gpum_duration_parse(v, &o->ttl_ms) != 0 || o->ttl_ms == 0)
        return cli_args_error(&reserve_spec, "--ttl: invalid duration '%s' (expected e.g. 30m, 1h)",
                              v);
      break;
    default:
      if (cli_reserve_option("reserve", id, v, o) < 0)
        return CLI_EXIT_USAGE;
      break;
    }
  }
  if (o->req.bytes_per_gpu == 0) {
    fprintf(stderr, "gpum reserve: --mem SIZE is required\n");
    return CLI_EXIT_USAGE;
  }
  if (!o->req.label)
    o->req.label = "gpum reserve";
  if (o->ttl_ms) {
    o->req.lease = GPUM_LEASE_TTL;
    o->req.ttl_ms = o->ttl_ms;
  }
  return -1;
}

/* The grant on stdout (the id) and stderr (what, and the shell line to use it). */
static void show(const gpum_reservation_t *r) {
  char size[GPUM_SIZE_BUFSZ];
  printf("%s\n", r->id);
  fflush(stdout);
  fprintf(stderr, "gpum reserve: %s granted: %s on %zu GPU%s (", r->id,
          gpum_size_format(r->bytes_per_gpu, size, sizeof size), r->ndevices,
          r->ndevices == 1 ? "" : "s");
  for (size_t i = 0; i < r->ndevices; i++)
    fprintf(stderr, "%s%u", i ? ", " : "", r->devices[i].index);
  fprintf(stderr, ")\n  export");
  gpum_env_var_t vars[GPUM_RESERVATION_ENV_MAX];
  size_t n = 0;
  if (gpum_reservation_env(r, vars, GPUM_RESERVATION_ENV_MAX, &n) == 0)
    for (size_t i = 0; i < n; i++)
      fprintf(stderr, " %s=%s%s%s", vars[i].name, vars[i].value[0] ? "" : "'", vars[i].value,
              vars[i].value[0] ? "" : "'");
  fprintf(stderr, "\n");
}

/* Holds the reservation until a signal (0), or until it ends or is lost (CLI_EXIT_FAIL; the
 * session's events said why). */
static int hold(gpum_session_t *s) {
  while (!cli_signal_caught) {
    int rc = gpum_session_process(s, 500);
    if (rc == GPUM_ESTATE || rc == GPUM_ECLOSED)
      return CLI_EXIT_FAIL;
  }
  gpum_error_clear();
  return 0;
}

int cmd_reserve(gpum_config_t *cfg, int argc, char **argv) {
  cli_reserve_opts_t o;
  memset(&o, 0, sizeof o);
  int code = parse(argc, argv, &o);
  if (code >= 0)
    return code;
  cli_session_ui_t ui = {.cmd = "reserve", .quiet = o.quiet};
  gpum_session_t *s = NULL;
  code = cli_session_start(cfg, &ui, &o, &s);
  if (code != 0)
    return code;
  const gpum_reservation_t *r = gpum_session_reservation(s);
  show(r);
  if (o.ttl_ms) { /* the TTL lease outlives this connection */
    gpum_session_close(s);
    return CLI_EXIT_OK;
  }
  fprintf(stderr, "gpum reserve: holding %s; Ctrl-C to release\n", r->id);
  ui.phase = CLI_PHASE_HOLD;
  code = hold(s);
  if (code == 0 && gpum_session_client(s) == NULL) { /* interrupted while gpumd was away */
    fprintf(stderr,
            "gpum reserve: interrupted while gpumd is away; it releases %s when it is back and "
            "lease.grace passes\n",
            r->id);
    code = CLI_EXIT_FAIL;
  }
  if (code != 0) {
    gpum_session_close(s);
    return code;
  }
  char id[sizeof r->id];
  snprintf(id, sizeof id, "%s", r->id);
  code = gpum_session_release(s);
  if (code != 0)
    fprintf(stderr, "gpum reserve: release %s: %s\n", id, cli_reason(code));
  else
    fprintf(stderr, "gpum reserve: %s released\n", id);
  gpum_session_close(s);
  return code == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
