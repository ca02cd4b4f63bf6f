/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum suspend ID...` and `gpum resume ID...` (docs/suspend.md): gpumd moves a preemptible
 * job's GPU memory to host memory and back through the CUDA driver's checkpoint. Each asks
 * gpumd, then follows the reservation until the move is done (the driver takes seconds per
 * GiB), unless --no-wait.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/error.h>
#include <gpum/size.h>

#include "cli.h"
#include "client_cli.h"

static void usage(FILE *out, const char *cmd) {
  bool s = !strcmp(cmd, "suspend");
  fprintf(out,
          "usage: gpum %s [--no-wait] [--timeout DURATION] ID [ID...]\n"
          "\n",
          cmd);
  if (s)
    fprintf(out, "Suspends each reservation's job: its CUDA processes are locked and their GPU\n"
                 "memory moved to host memory (the CUDA driver's checkpoint), and the GPU memory\n"
                 "is free for others. The job must have been started with --preemptible. It\n"
                 "stays suspended until 'gpum resume'.\n");
  else
    fprintf(out, "Resumes each suspended reservation's job: gpumd reserves its GPU memory again\n"
                 "(on its own GPUs, or others of the same kind), restores the memory and lets\n"
                 "the processes go on. With no room now, the job waits for room as a request of\n"
                 "its priority would, and gpumd resumes it then.\n");
  fprintf(out,
          "\n"
          "  --no-wait           return once gpumd has started the work\n"
          "  --timeout DURATION  wait at most this long for each (default 10m)\n"
          "\n"
          "Exit status: 0 when each is %s (or, with --no-wait, under way), 1 when one\n"
          "is not (the reason is printed), 2 for usage errors. docs/suspend.md.\n",
          s ? "suspended" : "resumed (or waits for room)");
}

/* The live reservation id now. 0, or GPUM_ENOENT when it has ended. */
static int get_one(gpum_client_t *c, const char *id, gpum_reservation_t *out) {
  int rc = gpum_client_get(c, id, out);
  if (rc == 0 && gpum_res_state_is_final(out->state))
    return gpum_error(GPUM_ENOENT, "%s has ended (%s)", id, gpum_res_state_name(out->state));
  return rc;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Follows id until its move is done (no "moving"); 0 with *r then, else an error. */
static int follow(gpum_client_t *c, const char *id, double timeout_s, gpum_reservation_t *r) {
  double end = now_s() + timeout_s;
  for (;;) {
    int rc = get_one(c, id, r);
    if (rc != 0 || r->moving[0] == '\0')
      return rc;
    if (now_s() > end)
      return gpum_error(GPUM_ETIMEDOUT, "still %s after %.0f s (it goes on in gpumd)", r->moving,
                        timeout_s);
    if (cli_signal_caught)
      return gpum_error(GPUM_EINTR, "interrupted (the work goes on in gpumd)");
    struct timespec pause = {0, 100 * 1000000}; /* a poll of gpumd, not a wait for an event */
    nanosleep(&pause, NULL);
  }
}

static int run(gpum_config_t *cfg, const char *cmd, int argc, char **argv) {
  bool wait = true;
  uint64_t timeout_ms = 600000;
  int first = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout, cmd);
      return CLI_EXIT_OK;
    }
    if (!strcmp(a, "--no-wait")) {
      wait = false;
    } else if (cli_take_flag(argc, argv, &i, "--timeout", &v)) {
      if (!v || gpum_duration_parse(v, &timeout_ms) != 0 || timeout_ms == 0) {
        fprintf(stderr,
                "gpum %s: --timeout: invalid value '%s' (expected a duration such as "
                "30s or 10m)\n",
                cmd, v ? v : "");
        return CLI_EXIT_USAGE;
      }
    } else if (!strcmp(a, "--")) {
      first = i + 1 < argc ? i + 1 : 0;
      break;
    } else if (a[0] == '-') {
      return cli_bad_option(cmd, a);
    } else if (!first) {
      first = i;
    }
  }
  if (first == 0) {
    fprintf(stderr, "gpum %s: no reservation id given (usage: gpum %s ID...)\n", cmd, cmd);
    return CLI_EXIT_USAGE;
  }
  gpum_client_t *c = NULL;
  int code = cli_client_connect(cfg, cmd, 0, &c);
  if (code != 0)
    return code;
  bool suspend = !strcmp(cmd, "suspend");
  for (int i = first; i < argc; i++) {
    if (argv[i][0] == '-')
      continue; /* a flag after the ids, taken above */
    gpum_reservation_t r;
    int rc = suspend ? gpum_client_suspend(c, argv[i], &r) : gpum_client_resume(c, argv[i], &r);
    if (rc == 0 && wait)
      rc = follow(c, argv[i], (double)timeout_ms / 1000, &r);
    if (rc != 0) {
      fprintf(stderr, "gpum %s: %s: %s\n", cmd, argv[i], cli_reason(rc));
      code = CLI_EXIT_FAIL;
      if (rc == GPUM_ECLOSED)
        break;
      continue;
    }
    bool done = r.moving[0] != '\0' ||
                (suspend ? r.state == GPUM_RES_SUSPENDED
                         : r.state == GPUM_RES_GRANTED || r.state == GPUM_RES_SUSPENDED);
    printf("%s %s%s%s: %s\n", r.id, gpum_res_state_name(r.state), r.moving[0] ? " " : "", r.moving,
           r.reason);
    if (!done || (!suspend && wait && r.state == GPUM_RES_SUSPENDED && r.hold))
      code = CLI_EXIT_FAIL; /* the move failed: the reason says why */
  }
  gpum_client_close(c);
  return code;
}

int cmd_suspend(gpum_config_t *cfg, int argc, char **argv) {
  return run(cfg, "suspend", argc, argv);
}

int cmd_resume(gpum_config_t *cfg, int argc, char **argv) {
  return run(cfg, "resume", argc, argv);
}
