/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum release ID...`: releases granted reservations and cancels queued ones. Only the owner
 * (or an admin: root or the admin_group) may; others get the daemon's permission error.
 */
#include <stdio.h>
#include <string.h>

#include <gpum/error.h>

#include "cli.h"
#include "client_cli.h"

static void usage(FILE *out) {
  fprintf(out, "usage: gpum release ID [ID...]\n"
               "\n"
               "Releases each reservation (a queued one is cancelled). IDs are shown by\n"
               "'gpum jobs' and by 'gpum reserve'.\n"
               "\n"
               "Exit status: 0 when every reservation was released, 1 when one was not (unknown\n"
               "id, not yours, gpumd not running), 2 for usage errors.\n");
}

int cmd_release(gpum_config_t *cfg, int argc, char **argv) {
  int first = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return CLI_EXIT_OK;
    }
    if (!strcmp(a, "--")) {
      first = i + 1 < argc ? i + 1 : 0;
      break;
    }
    if (a[0] == '-')
      return cli_bad_option("release", a);
    if (!first)
      first = i;
  }
  if (first == 0) {
    fprintf(stderr, "gpum release: no reservation id given (usage: gpum release ID...)\n");
    return CLI_EXIT_USAGE;
  }
  gpum_client_t *c = NULL;
  int code = cli_client_connect(cfg, "release", 0, &c);
  if (code != 0)
    return code;
  for (int i = first; i < argc; i++) {
    gpum_reservation_t r;
    int rc = gpum_client_release(c, argv[i], &r);
    if (rc != 0) {
      fprintf(stderr, "gpum release: %s: %s\n", argv[i], cli_reason(rc));
      code = CLI_EXIT_FAIL;
      if (rc == GPUM_ECLOSED)
        break;
      continue;
    }
    printf("%s %s\n", r.id, gpum_res_state_name(r.state));
  }
  gpum_client_close(c);
  return code;
}
