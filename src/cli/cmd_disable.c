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

#include "cli.h"
#include "client_cli.h"

static void usage(FILE *out, bool disable) {
  if (disable)
    fprintf(out,
            "usage: gpum disable GPU [--reason TEXT]\n"
            "\n"
            "Disables GPU (its index, as 'gpum status' shows it, or its UUID) in gpumd: it\n"
            "becomes DISABLED, no new reservation is granted on it, and those already on it run\n"
            "on until released. The switch survives gpumd's restarts; 'gpum enable GPU' ends it.\n"
            "Admins only (root or gpumd's admin_group).\n"
            "\n"
            "options:\n"
            "  --reason TEXT   why (shown as the device's reason; default 'disabled by the\n"
            "                  operator')\n"
            "\n"
            "Exit status: 0 when done, 1 when gpumd refused (not an admin, no such GPU) or does\n"
            "not run, 2 for usage errors.\n");
  else
    fprintf(out, "usage: gpum enable GPU\n"
                 "\n"
                 "Ends 'gpum disable GPU': the GPU is given back to the health rules and gpumd\n"
                 "grants on it again. Admins only (root or gpumd's admin_group).\n"
                 "\n"
                 "Exit status: 0 when done, 1 when gpumd refused or does not run, 2 for usage\n"
                 "errors.\n");
}

static int run(gpum_config_t *cfg, int argc, char **argv, bool disable) {
  const char *cmd = disable ? "disable" : "enable", *gpu = NULL, *reason = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout, disable);
      return CLI_EXIT_OK;
    }
    if (disable && cli_take_flag(argc, argv, &i, "--reason", &v)) {
      if (!v || !*v) {
        fprintf(stderr, "gpum disable: --reason needs a text\n");
        return CLI_EXIT_USAGE;
      }
      reason = v;
    } else if (a[0] == '-' && a[1] != '\0') {
      return cli_bad_option(cmd, a);
    } else if (gpu) {
      fprintf(stderr, "gpum %s: one GPU at a time (got '%s' and '%s')\n", cmd, gpu, a);
      return CLI_EXIT_USAGE;
    } else {
      gpu = a;
    }
  }
  if (!gpu) {
    fprintf(stderr, "gpum %s: no GPU given (usage: gpum %s GPU%s)\n", cmd, cmd,
            disable ? " [--reason TEXT]" : "");
    return CLI_EXIT_USAGE;
  }
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
