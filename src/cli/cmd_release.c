/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum release ID...`: releases granted reservations and cancels queued ones. Only the owner
 * (or an admin: root or the admin_group) may; others get the daemon's permission error.
 */
#include <stdio.h>
#include <string.h>

#include <gpum/error.h>

#include "args.h"
#include "cli.h"
#include "client_cli.h"

static const cli_arg_t release_args[] = {{0}};

static const cli_cmd_spec_t release_spec = {
    .name = "release",
    .usage = "ID [ID...]",
    .summary = "Release gpumd reservations (a queued one is cancelled).",
    .text = "IDs are shown by 'gpum jobs' and by 'gpum reserve'.",
    .args = release_args,
    .examples = "gpum release r-7\n"
                "gpum jobs --json | jq -r '.reservations[].id' | xargs gpum release",
    .exit_status = "0 when every reservation was released, 1 when one was not (unknown id, not "
                   "yours, gpumd not running), 2 for usage errors.",
};

int cmd_release(gpum_config_t *cfg, int argc, char **argv) {
  int n = 0; /* the ids, moved to argv[1..n] */
  cli_args_t p;
  cli_args_init(&p, &release_spec, argc, argv);
  for (int id; (id = cli_args_next(&p)) != CLI_ARGS_END;) {
    if (id == CLI_ARGS_HELP)
      return CLI_EXIT_OK;
    if (id == CLI_ARGS_ERR)
      return CLI_EXIT_USAGE;
    argv[1 + n++] = (char *)p.value; /* CLI_ARGS_POS: never ahead of the parser */
  }
  if (n == 0)
    return cli_args_error(&release_spec, "no reservation id given (usage: gpum release ID...)");
  gpum_client_t *c = NULL;
  int code = cli_client_connect(cfg, "release", 0, &c);
  if (code != 0)
    return code;
  for (int i = 1; i <= n; i++) {
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
