/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum disable GPU [--reason TEXT]` and `gpum enable GPU`: the operator's switch, through
 * gpumd (admins only). A disabled GPU is DISABLED: gpumd grants nothing new on it, while the
 * reservations already there run on until released (drain it before maintenance); the switch
 * is stored in gpumd's ledger and survives its restarts. Enabling gives the GPU back to the
 * health rules (AVAILABLE, BUSY or ERROR as they say).
 */
#include <stdio.h>
#include <string.h>

#include <gpum/error.h>

#include "args.h"
#include "cli.h"
#include "client_cli.h"

enum { OPT_REASON = 1 };

static const cli_arg_t disable_args[] = {
    {OPT_REASON, "--reason", 0, "TEXT",
     "why (shown as the device's reason; default 'disabled by the operator')", 0},
    {0},
};

static const cli_cmd_spec_t disable_spec = {
    .name = "disable",
    .usage = "GPU [--reason TEXT]",
    .summary = "Take a GPU out of service in gpumd; the jobs on it run on.",
    .text = "GPU is its index, as 'gpum status' shows it, or its UUID. It becomes DISABLED: no\n"
            "new reservation is granted on it, and those already on it run on until released.\n"
            "The switch survives gpumd's restarts; 'gpum enable GPU' ends it. Admins only (root\n"
            "or gpumd's admin_group).",
    .args = disable_args,
    .examples = "gpum disable 3 --reason 'fan replacement, ticket 4411'\n"
                "gpum disable GPU-0af627f5-...",
    .exit_status = "0 when done, 1 when gpumd refused (not an admin, no such GPU) or does not "
                   "run, 2 for usage errors.",
};

static const cli_arg_t enable_args[] = {{0}};

static const cli_cmd_spec_t enable_spec = {
    .name = "enable",
    .usage = "GPU",
    .summary = "Give a GPU disabled with 'gpum disable' back to gpumd.",
    .text = "The GPU is given back to the health rules and gpumd grants on it again. Admins only\n"
            "(root or gpumd's admin_group).",
    .args = enable_args,
    .examples = "gpum enable 3",
    .exit_status = "0 when done, 1 when gpumd refused or does not run, 2 for usage errors.",
};

static int run(gpum_config_t *cfg, int argc, char **argv, bool disable) {
  const char *cmd = disable ? "disable" : "enable", *gpu = NULL, *reason = NULL;
  const cli_cmd_spec_t *spec = disable ? &disable_spec : &enable_spec;
  cli_args_t p;
  cli_args_init(&p, spec, argc, argv);
  for (int id; (id = cli_args_next(&p)) != CLI_ARGS_END;) {
    switch (id) {
    case CLI_ARGS_HELP:
      return CLI_EXIT_OK;
    case CLI_ARGS_ERR:
      return CLI_EXIT_USAGE;
    case CLI_ARGS_POS:
      if (gpu)
        return cli_args_error(spec, "one GPU at a time (got '%s' and '%s')", gpu, p.value);
      gpu = p.value;
      break;
    case OPT_REASON:
      if (!*p.value)
        return cli_args_error(spec, "--reason needs a text");
      reason = p.value;
      break;
    }
  }
  if (!gpu)
    return cli_args_error(spec, "no GPU given (usage: gpum %s %s)", cmd, spec->usage);
  gpum_client_t *c = NULL;
  int code = cli_client_connect(cfg, cmd, 0, &c);
  if (code != 0)
    return code;
  char state[32];
  int rc = gpum_client_set_device_disabled(c, gpu, disable, reason, state, sizeof state);
  gpum_client_close(c);
  if (rc != 0) {
    fprintf(stderr, "gpum %s: %s: %s\n", cmd, gpu, cli_reason(rc));
    return CLI_EXIT_FAIL;
  }
  printf("GPU %s %s\n", gpu, state);
  return CLI_EXIT_OK;
}

int cmd_disable(gpum_config_t *cfg, int argc, char **argv) {
  return run(cfg, argc, argv, true);
}

int cmd_enable(gpum_config_t *cfg, int argc, char **argv) {
  return run(cfg, argc, argv, false);
}
