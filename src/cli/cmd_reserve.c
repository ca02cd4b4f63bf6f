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
 * run does; it gives up (exit 1) when gpumd is not back within lease.grace.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/error.h>
#include <gpum/size.h>

#include "cli.h"
#include "client_cli.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: gpum reserve --mem SIZE [--gpus N] [--type PATTERN] [--priority P]\n"
          "                    [--timeout DURATION] [--label L] [--ttl DURATION] [--no-wait]\n"
          "                    [-q]\n"
          "\n"
          "Reserves GPU memory from gpumd and holds it. Prints the reservation id on stdout\n"
          "and the CUDA_VISIBLE_DEVICES / GPUM_MEM_LIMIT lines for a shell on stderr.\n"
          "Without --ttl, holds the reservation until Ctrl-C or SIGTERM. With --ttl, the\n"
          "reservation outlives this command: it is released by 'gpum release ID' or when\n"
          "DURATION passes.\n"
          "\n"
          "options:\n"
          "%s"
          "  --ttl DURATION      lease for DURATION (e.g. 1h) and exit at once\n"
          "\n"
          "Exit status: 0 when granted (and, without --ttl, released on Ctrl-C), 1 when not,\n"
          "2 for usage errors.\n",
          cli_reserve_flags_help);
}

static int parse(int argc, char **argv, cli_reserve_opts_t *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return CLI_EXIT_OK;
    }
    if (cli_take_flag(argc, argv, &i, "--ttl", &v)) {
      if (!v || gpum_duration_parse(v, &o->ttl_ms) != 0 || o->ttl_ms == 0) {
        fprintf(stderr, "gpum reserve: --ttl: invalid duration '%s' (expected e.g. 30m, 1h)\n",
                v ? v : "");
        return CLI_EXIT_USAGE;
      }
      continue;
    }
    int t = cli_take_reserve_flag("reserve", argc, argv, &i, o);
    if (t < 0)
      return CLI_EXIT_USAGE;
    if (t == 0 && a[0] == '-')
      return cli_bad_option("reserve", a);
    if (t == 0) {
      fprintf(stderr, "gpum reserve: unexpected argument '%s'\n", a);
      return CLI_EXIT_USAGE;
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

static void show(const gpum_reservation_t *r) {
  char cvd[GPUM_CLIENT_MAX_DEVICES * 100], size[GPUM_SIZE_BUFSZ];
  cli_res_visible_devices(r, cvd, sizeof cvd);
  printf("%s\n", r->id);
  fflush(stdout);
  fprintf(stderr, "gpum reserve: %s granted: %s on %zu GPU%s (", r->id,
          gpum_size_format(r->bytes_per_gpu, size, sizeof size), r->ndevices,
          r->ndevices == 1 ? "" : "s");
  for (size_t i = 0; i < r->ndevices; i++)
    fprintf(stderr, "%s%u", i ? ", " : "", r->devices[i].index);
  fprintf(stderr,
          ")\n  export CUDA_VISIBLE_DEVICES=%s GPUM_RESERVATION_ID=%s GPUM_MEM_LIMIT=%llu\n", cvd,
          r->id, (unsigned long long)r->bytes_per_gpu);
}

/* While holding: a reservation that ends under us (device lost, expired) ends the hold. */
static void on_event(const gpum_client_event_t *ev, void *user) {
  const char *id = user;
  const gpum_reservation_t *r = ev->reservation;
  if (r && !strcmp(r->id, id) && gpum_res_state_is_final(r->state)) {
    fprintf(stderr, "gpum reserve: %s is %s%s%s\n", r->id, gpum_res_state_name(r->state),
            r->reason[0] ? ": " : "", r->reason);
    cli_signal_caught = -1;
  }
}

#define RECONNECT_MS 250

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Holds r until a signal, or until it ends under us (cli_signal_caught < 0). When the
 * connection is lost, re-attaches within lease.grace. Returns 0 with *cp the live client, or
 * CLI_EXIT_FAIL (*cp NULL) when the reservation is lost. */
static int hold(const gpum_config_t *cfg, gpum_client_t **cp, const gpum_reservation_t *r) {
  int64_t grace = cli_lease_grace_ms(cfg);
  int64_t lost_at = 0;
  while (!cli_signal_caught) {
    if (*cp) {
      int rc = gpum_client_process(*cp, 500);
      if (rc >= 0)
        continue;
      fprintf(stderr,
              "gpum reserve: lost the connection to gpumd (%s); re-attaching %s when "
              "gpumd is back\n",
              cli_reason(rc), r->id);
      gpum_client_close(*cp);
      *cp = NULL;
      lost_at = now_ms();
      continue;
    }
    int rc = cli_reattach("reserve", cfg, r, cp, NULL);
    if (rc == 0) {
      gpum_client_set_event_cb(*cp, on_event, (void *)r->id);
      continue;
    }
    if (rc != GPUM_EAGAIN)
      return CLI_EXIT_FAIL;
    if (now_ms() - lost_at > grace) {
      fprintf(stderr,
              "gpum reserve: gpumd did not come back within %lld ms (lease.grace); %s is "
              "lost\n",
              (long long)grace, r->id);
      return CLI_EXIT_FAIL;
    }
    poll(NULL, 0, RECONNECT_MS); /* the retry interval; a signal cuts it short */
  }
  return 0;
}

int cmd_reserve(gpum_config_t *cfg, int argc, char **argv) {
  cli_reserve_opts_t o;
  memset(&o, 0, sizeof o);
  int code = parse(argc, argv, &o);
  if (code >= 0)
    return code;
  gpum_client_t *c = NULL;
  code = cli_client_connect(cfg, "reserve", 0, &c);
  if (code != 0)
    return code;
  cli_catch_signals();
  gpum_reservation_t r;
  code = cli_reserve_and_wait("reserve", cfg, &c, &o, &r);
  if (code != 0) {
    gpum_client_close(c);
    return code;
  }
  show(&r);
  if (o.ttl_ms) {
    gpum_client_close(c);
    return CLI_EXIT_OK;
  }
  fprintf(stderr, "gpum reserve: holding %s; Ctrl-C to release\n", r.id);
  gpum_client_set_event_cb(c, on_event, r.id);
  code = hold(cfg, &c, &r);
  if (code == 0 && c == NULL) { /* interrupted while gpumd was away */
    fprintf(stderr,
            "gpum reserve: interrupted while gpumd is away; it releases %s when it is back and "
            "lease.grace passes\n",
            r.id);
    code = CLI_EXIT_FAIL;
  }
  if (code != 0) {
    gpum_client_close(c);
    return code;
  }
  gpum_client_set_event_cb(c, NULL, NULL);
  if (cli_signal_caught < 0) { /* ended under us */
    gpum_client_close(c);
    return CLI_EXIT_FAIL;
  }
  code = gpum_client_release(c, r.id, NULL);
  if (code != 0)
    fprintf(stderr, "gpum reserve: release %s: %s\n", r.id, cli_reason(code));
  else
    fprintf(stderr, "gpum reserve: %s released\n", r.id);
  gpum_client_close(c);
  return code == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
