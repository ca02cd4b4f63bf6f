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

#include "args.h"
#include "cli.h"
#include "client_cli.h"

enum { OPT_NO_WAIT = 1, OPT_TIMEOUT };

static const cli_arg_t suspend_args[] = {
    {OPT_NO_WAIT, "--no-wait", 0, NULL, "return once gpumd has started the work", 0},
    {OPT_TIMEOUT, "--timeout", 0, "DURATION", "wait at most this long for each (default 10m)", 0},
    {0},
};

static const cli_cmd_spec_t suspend_spec = {
    .name = "suspend",
    .usage = "[--no-wait] [--timeout DURATION] ID [ID...]",
    .summary = "Move a preemptible job's GPU memory to host memory.",
    .text = "Its CUDA processes are locked and their GPU memory moved to host memory (the CUDA\n"
            "driver's checkpoint), and the GPU memory is free for others. The job must have\n"
            "been started with --preemptible. It stays suspended until 'gpum resume'.\n"
            "docs/suspend.md.",
    .args = suspend_args,
    .examples = "gpum suspend r-12\n"
                "gpum suspend --no-wait r-12 r-13",
    .exit_status = "0 when each is suspended (or, with --no-wait, under way), 1 when one is not "
                   "(the reason is printed), 2 for usage errors.",
};

static const cli_cmd_spec_t resume_spec = {
    .name = "resume",
    .usage = "[--no-wait] [--timeout DURATION] ID [ID...]",
    .summary = "Bring a suspended job's GPU memory back and let it go on.",
    .text = "gpumd reserves its GPU memory again (on its own GPUs, or others of the same kind),\n"
            "restores the memory and lets the processes go on. With no room now, the job waits\n"
            "for room as a request of its priority would, and gpumd resumes it then.\n"
            "docs/suspend.md.",
    .args = suspend_args,
    .examples = "gpum resume r-12",
    .exit_status = "0 when each is resumed (or waits for room; with --no-wait, under way), 1 "
                   "when one is not (the reason is printed), 2 for usage errors.",
};

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
  const cli_cmd_spec_t *spec = strcmp(cmd, "suspend") ? &resume_spec : &suspend_spec;
  int n = 0; /* the ids, moved to argv[1..n] */
  cli_args_t p;
  cli_args_init(&p, spec, argc, argv);
  for (int id; (id = cli_args_next(&p)) != CLI_ARGS_END;) {
    switch (id) {
    case CLI_ARGS_HELP:
      return CLI_EXIT_OK;
    case CLI_ARGS_ERR:
      return CLI_EXIT_USAGE;
    case CLI_ARGS_POS:
      argv[1 + n++] = (char *)p.value; /* never ahead of the parser */
      break;
    case OPT_NO_WAIT:
      wait = false;
      break;
    case OPT_TIMEOUT:
      if (gpum_duration_parse(p.value, &timeout_ms) != 0 || timeout_ms == 0)
        return cli_args_error(spec,
                              "--timeout: invalid value '%s' (expected a duration such as 30s "
                              "or 10m)",
                              p.value);
      break;
    }
  }
  if (n == 0)
    return cli_args_error(spec, "no reservation id given (usage: gpum %s ID...)", cmd);
  gpum_client_t *c = NULL;
  int code = cli_client_connect(cfg, cmd, 0, &c);
  if (code != 0)
    return code;
  bool suspend = !strcmp(cmd, "suspend");
  for (int i = 1; i <= n; i++) {
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
