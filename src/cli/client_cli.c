/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for the commands that talk to gpumd (gpum run, reserve, jobs, release, status):
 * connecting, the reservation flags, and the wait for a grant with the queue position shown.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gpum/error.h>
#include <jansson.h>
#include <gpum/size.h>

#include "cli.h"
#include "client_cli.h"

volatile sig_atomic_t cli_signal_caught;

static int usage_error(const char *cmd, const char *flag, const char *v, const char *what) {
  if (v == NULL || *v == '\0')
    fprintf(stderr, "gpum %s: %s needs %s\n", cmd, flag, what);
  else
    fprintf(stderr, "gpum %s: %s: invalid value '%s' (expected %s)\n", cmd, flag, v, what);
  return -1;
}

static bool parse_long(const char *s, long lo, long hi, long *out) {
  if (s == NULL || *s == '\0')
    return false;
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

int cli_reserve_option(const char *cmd, int id, const char *v, cli_reserve_opts_t *o) {
  long n = 0;
  switch (id) {
  case CLI_OPT_QUIET:
    o->quiet = true;
    break;
  case CLI_OPT_NO_WAIT:
    o->req.no_wait = true;
    break;
  case CLI_OPT_PREEMPTIBLE:
    o->req.preemptible = true;
    break;
  case CLI_OPT_MEM:
    if (gpum_size_parse(v, &o->req.bytes_per_gpu) != 0 || o->req.bytes_per_gpu == 0)
      return usage_error(cmd, "--mem", v, "a size such as 8GiB or 512MiB");
    break;
  case CLI_OPT_GPUS:
    if (!parse_long(v, 1, GPUM_CLIENT_MAX_DEVICES, &n))
      return usage_error(cmd, "--gpus", v, "a number of GPUs from 1 to 16");
    o->req.gpus = (unsigned)n;
    break;
  case CLI_OPT_TYPE:
    if (!*v)
      return usage_error(cmd, "--type", v, "a GPU type such as A100, A100-80GB or 'H100*'");
    o->req.model = v;
    break;
  case CLI_OPT_PRIORITY:
    if (!parse_long(v, -100, 100, &n))
      return usage_error(cmd, "--priority", v, "an integer from -100 to 100");
    o->req.priority = (int)n;
    break;
  case CLI_OPT_TIMEOUT:
    if (gpum_duration_parse(v, &o->timeout_ms) != 0 || o->timeout_ms == 0 ||
        o->timeout_ms > INT_MAX)
      return usage_error(cmd, "--timeout", v, "a duration such as 30s or 10m");
    break;
  case CLI_OPT_LABEL:
    if (!*v)
      return usage_error(cmd, "--label", v, "a name");
    o->req.label = v;
    break;
  default:
    return 0;
  }
  return 1;
}

int cli_client_connect(const gpum_config_t *cfg, const char *cmd, unsigned timeout_ms,
                       gpum_client_t **out) {
  char path[256];
  int rc = gpum_socket_path(cfg, path, sizeof path);
  if (rc == 0)
    rc = gpum_client_connect(path, timeout_ms, out);
  if (rc != 0) {
    fprintf(stderr, "gpum %s: %s\n", cmd, cli_reason(rc));
    return CLI_EXIT_FAIL;
  }
  return 0;
}

static void on_signal(int sig) {
  cli_signal_caught = sig;
}

void cli_catch_signals(void) {
  cli_on_stop_signals(on_signal, true);
}

static int on_interrupted(void *user) {
  (void)user;
  return cli_signal_caught != 0;
}

static void on_event(const gpum_session_event_t *ev, void *user) {
  const cli_session_ui_t *ui = user;
  const gpum_reservation_t *r = ev->reservation;
  switch (ev->kind) {
  case GPUM_SESSION_EV_QUEUED:
    if (!ui->quiet)
      fprintf(stderr, "gpum %s: %s queued at position %ld%s%s\n", ui->cmd, r->id,
              r->queue_position + 1, r->waiting_for[0] ? ", waiting for " : "", r->waiting_for);
    break;
  case GPUM_SESSION_EV_PRESSURE:
    if (!ui->quiet)
      fprintf(stderr, "gpum %s: memory pressure on GPU %d%s: %.0f%% used (%s)\n", ui->cmd,
              ev->device, strcmp(ev->level, "none") ? "" : " cleared", ev->used_ratio * 100.0,
              ev->level);
    break;
  case GPUM_SESSION_EV_ENDED:
    if (ui->phase == CLI_PHASE_RUN)
      fprintf(stderr, "gpum %s: reservation %s is %s%s%s\n", ui->cmd, r->id,
              gpum_res_state_name(r->state), r->reason[0] ? ": " : "", r->reason);
    else
      fprintf(stderr, "gpum %s: %s is %s%s%s\n", ui->cmd, r->id, gpum_res_state_name(r->state),
              r->reason[0] ? ": " : "", r->reason);
    break;
  case GPUM_SESSION_EV_LOST:
    if (ui->phase == CLI_PHASE_WAIT)
      fprintf(stderr,
              "gpum %s: lost the connection to gpumd (%s) while %s was queued; re-attaching "
              "when gpumd is back\n",
              ui->cmd, cli_reason(ev->error), r->id);
    else if (ui->phase == CLI_PHASE_RUN)
      fprintf(stderr,
              "gpum %s: lost the connection to gpumd (%s); %s keeps running, re-attaching when "
              "gpumd is back\n",
              ui->cmd, cli_reason(ev->error), r->id);
    else
      fprintf(stderr,
              "gpum %s: lost the connection to gpumd (%s); re-attaching %s when gpumd is back\n",
              ui->cmd, cli_reason(ev->error), r->id);
    break;
  case GPUM_SESSION_EV_REATTACHED:
    fprintf(stderr, "gpum %s: gpumd is back; %s re-attached (%s)\n", ui->cmd, r->id,
            gpum_res_state_name(r->state));
    break;
  case GPUM_SESSION_EV_GAVE_UP:
    if (ui->phase == CLI_PHASE_RUN)
      fprintf(stderr,
              "gpum %s: gpumd did not come back within %lld ms; %s runs on without a "
              "reservation\n",
              ui->cmd, (long long)ev->grace_ms, r->id);
    else
      fprintf(stderr,
              "gpum %s: gpumd did not come back within %lld ms (lease.grace); %s is "
              "lost\n",
              ui->cmd, (long long)ev->grace_ms, r->id);
    break;
  case GPUM_SESSION_EV_GRANTED:
    break;
  }
}

static int session_open(const gpum_config_t *cfg, cli_session_ui_t *ui, gpum_session_t **out) {
  gpum_session_opts_t so;
  gpum_session_opts_init(&so);
  so.cfg = cfg;
  so.on_event = on_event;
  so.interrupted = on_interrupted;
  so.user = ui;
  int rc = gpum_session_open(&so, out);
  if (rc != 0) {
    fprintf(stderr, "gpum %s: %s\n", ui->cmd, cli_reason(rc));
    return CLI_EXIT_FAIL;
  }
  return 0;
}

static int session_reserve(gpum_session_t *s, cli_session_ui_t *ui, const cli_reserve_opts_t *o) {
  gpum_reserve_req_t req = o->req;
  if (o->timeout_ms) {
    req.queue_timeout_ms = o->timeout_ms;
    req.wait_on_timeout = false;
  }
  ui->phase = CLI_PHASE_WAIT;
  /* The daemon enforces --timeout; the client gives it a second more before it cancels. */
  int rc = gpum_session_reserve(s, &req, o->timeout_ms ? (int64_t)o->timeout_ms + 1000 : -1);
  const gpum_reservation_t *r = gpum_session_reservation(s);
  switch (rc) {
  case 0:
    return 0;
  case GPUM_EINTR:
    if (gpum_session_client(s) == NULL)
      fprintf(stderr,
              "gpum %s: interrupted while gpumd is away; it cancels %s when it is back and "
              "lease.grace passes\n",
              ui->cmd, r->id);
    else
      fprintf(stderr, "gpum %s: interrupted; %s cancelled\n", ui->cmd, r->id);
    return 128 + cli_signal_caught;
  case GPUM_ETIMEDOUT:
    fprintf(stderr, "gpum %s: %s not granted within the timeout; cancelled\n", ui->cmd, r->id);
    return CLI_EXIT_FAIL;
  case GPUM_ECLOSED:
    if (r->id[0]) /* gave up re-attaching: said so already */
      return CLI_EXIT_FAIL;
    break;
  case GPUM_ESTATE:
    if (r->id[0]) /* it ended in the queue: the ENDED event said how */
      return CLI_EXIT_FAIL;
    break;
  default:
    break;
  }
  fprintf(stderr, "gpum %s: cannot reserve: %s\n", ui->cmd, cli_reason(rc));
  return CLI_EXIT_FAIL;
}

int cli_session_start(const gpum_config_t *cfg, cli_session_ui_t *ui, const cli_reserve_opts_t *o,
                      gpum_session_t **out) {
  *out = NULL;
  gpum_session_t *s = NULL;
  int code = session_open(cfg, ui, &s);
  if (code != 0)
    return code;
  cli_catch_signals();
  code = session_reserve(s, ui, o);
  if (code != 0) {
    gpum_session_close(s);
    return code;
  }
  *out = s;
  return 0;
}

/* cli_gpumd_list_all's collector: each live reservation's document parsed into the array. */
static int add_doc(void *user, gpum_list_part_t part, const gpum_reservation_t *r, const char *doc,
                   size_t len) {
  (void)r;
  json_error_t jerr;
  if (part != GPUM_LIST_LIVE)
    return 0;
  json_t *o = json_loadb(doc, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
  if (o == NULL)
    return gpum_error(GPUM_EPROTO, "gpumd sent a reservation that is not JSON: %s", jerr.text);
  return json_array_append_new(user, o) == 0 ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
}

json_t *cli_gpumd_list_all(gpum_client_t *c) {
  gpum_list_query_t q = {.all = true};
  json_t *all = json_array();
  size_t total = 0;
  /* Each page is read once by libgpum; only the documents themselves become JSON trees. */
  int rc = all ? gpum_client_list_each(c, &q, false, add_doc, all, &total)
               : gpum_error(GPUM_ENOMEM, "out of memory");
  json_t *doc =
      rc == 0 ? json_pack("{s:o, s:I}", "reservations", all, "total", (json_int_t)total) : NULL;
  if (rc != 0)
    json_decref(all);
  else if (doc == NULL)
    gpum_error(GPUM_ENOMEM, "out of memory");
  return doc;
}
