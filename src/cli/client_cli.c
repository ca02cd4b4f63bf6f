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
#include <gpum/size.h>

#include "cli.h"
#include "client_cli.h"

#define WAIT_SLICE_MS 200

volatile sig_atomic_t cli_signal_caught;

const char cli_reserve_flags_help[] =
    "  --mem SIZE          GPU memory per GPU (required), e.g. 8GiB, 512MiB\n"
    "  --gpus N            number of GPUs (default 1)\n"
    "  --type PATTERN      only GPUs whose name matches (shell pattern, e.g. 'H100*')\n"
    "  --priority P        -100..100, higher is served first (default 0)\n"
    "  --timeout DURATION  give up when not granted within DURATION (e.g. 30s, 10m);\n"
    "                      default: wait as long as it takes\n"
    "  --label L           a name shown in 'gpum jobs' (default: the command's name)\n"
    "  --no-wait           do not queue: fail at once (exit 1, with the reason) when the\n"
    "                      reservation cannot be granted right now\n"
    "  -q, --quiet         do not show the queue position while waiting\n";

bool cli_take_flag(int argc, char **argv, int *i, const char *name, const char **v) {
  size_t n = strlen(name);
  const char *a = argv[*i];
  if (strncmp(a, name, n) != 0 || (a[n] != '\0' && a[n] != '='))
    return false;
  if (a[n] == '=')
    *v = a + n + 1;
  else
    *v = *i + 1 < argc ? argv[++*i] : NULL;
  return true;
}

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

int cli_take_reserve_flag(const char *cmd, int argc, char **argv, int *i, cli_reserve_opts_t *o) {
  const char *v = NULL;
  long n = 0;
  if (!strcmp(argv[*i], "-q") || !strcmp(argv[*i], "--quiet")) {
    o->quiet = true;
  } else if (!strcmp(argv[*i], "--no-wait")) {
    o->req.no_wait = true;
  } else if (cli_take_flag(argc, argv, i, "--mem", &v)) {
    if (!v || gpum_size_parse(v, &o->req.bytes_per_gpu) != 0 || o->req.bytes_per_gpu == 0)
      return usage_error(cmd, "--mem", v, "a size such as 8GiB or 512MiB");
  } else if (cli_take_flag(argc, argv, i, "--gpus", &v)) {
    if (!parse_long(v, 1, GPUM_CLIENT_MAX_DEVICES, &n))
      return usage_error(cmd, "--gpus", v, "a number of GPUs from 1 to 16");
    o->req.gpus = (unsigned)n;
  } else if (cli_take_flag(argc, argv, i, "--type", &v)) {
    if (!v || !*v)
      return usage_error(cmd, "--type", v, "a GPU name pattern such as 'H100*'");
    o->req.model = v;
  } else if (cli_take_flag(argc, argv, i, "--priority", &v)) {
    if (!parse_long(v, -100, 100, &n))
      return usage_error(cmd, "--priority", v, "an integer from -100 to 100");
    o->req.priority = (int)n;
  } else if (cli_take_flag(argc, argv, i, "--timeout", &v)) {
    if (!v || gpum_duration_parse(v, &o->timeout_ms) != 0 || o->timeout_ms == 0 ||
        o->timeout_ms > INT_MAX)
      return usage_error(cmd, "--timeout", v, "a duration such as 30s or 10m");
  } else if (cli_take_flag(argc, argv, i, "--label", &v)) {
    if (!v || !*v)
      return usage_error(cmd, "--label", v, "a name");
    o->req.label = v;
  } else {
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
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
}

typedef struct {
  const char *cmd;
  const char *id;
  long shown_position;
  bool quiet;
} progress_t;

static void show_position(progress_t *p, const gpum_reservation_t *r) {
  if (p->quiet || r->state != GPUM_RES_QUEUED || r->queue_position == p->shown_position)
    return;
  p->shown_position = r->queue_position;
  fprintf(stderr, "gpum %s: %s queued at position %ld%s%s\n", p->cmd, r->id, r->queue_position + 1,
          r->waiting_for[0] ? ", waiting for " : "", r->waiting_for);
}

static void on_event(const gpum_client_event_t *ev, void *user) {
  progress_t *p = user;
  if (ev->kind == GPUM_CLIENT_EV_PRESSURE && !p->quiet)
    fprintf(stderr, "gpum %s: memory pressure on GPU %d: %.0f%% used (%s)\n", p->cmd, ev->device,
            ev->used_ratio * 100.0, ev->level ? ev->level : "high");
  if (ev->reservation && p->id && !strcmp(ev->reservation->id, p->id))
    show_position(p, ev->reservation);
}

#define RECONNECT_MS 250

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t cli_lease_grace_ms(const gpum_config_t *cfg) {
  return gpum_option_find("lease.grace") ? (int64_t)gpum_config_get_duration(cfg, "lease.grace")
                                         : 30000;
}

/* The connection to gpumd was lost while r waited in the queue: connects again every
 * RECONNECT_MS and re-attaches r within lease.grace. Returns 0 with *cp the new client and *r
 * the reservation as gpumd has it now; 1 on a signal; a negative code when r is lost. */
static int requeue(const char *cmd, const gpum_config_t *cfg, gpum_client_t **cp,
                   const gpum_reservation_t *mine, gpum_reservation_t *r, int why) {
  fprintf(stderr,
          "gpum %s: lost the connection to gpumd (%s) while %s was queued; re-attaching "
          "when gpumd is back\n",
          cmd, cli_reason(why), mine->id);
  gpum_client_close(*cp);
  *cp = NULL;
  int64_t lost_at = mono_ms(), grace = cli_lease_grace_ms(cfg);
  for (;;) {
    if (cli_signal_caught)
      return 1;
    int rc = cli_reattach(cmd, cfg, mine, cp, r);
    if (rc != GPUM_EAGAIN)
      return rc;
    if (mono_ms() - lost_at > grace) {
      fprintf(stderr, "gpum %s: gpumd did not come back within %lld ms (lease.grace); %s is lost\n",
              cmd, (long long)grace, mine->id);
      return GPUM_ECLOSED;
    }
    poll(NULL, 0, RECONNECT_MS); /* the retry interval; a signal cuts it short */
  }
}

int cli_reserve_and_wait(const char *cmd, const gpum_config_t *cfg, gpum_client_t **cp,
                         const cli_reserve_opts_t *o, gpum_reservation_t *r) {
  gpum_client_t *c = *cp;
  progress_t p = {.cmd = cmd, .quiet = o->quiet, .shown_position = -2};
  gpum_client_set_event_cb(c, on_event, &p);
  gpum_reserve_req_t req = o->req;
  if (o->timeout_ms) {
    req.queue_timeout_ms = o->timeout_ms;
    req.wait_on_timeout = false;
  }
  int rc = gpum_client_reserve_async(c, &req, r);
  if (rc != 0) {
    fprintf(stderr, "gpum %s: cannot reserve: %s\n", cmd, cli_reason(rc));
    gpum_client_set_event_cb(c, NULL, NULL);
    return CLI_EXIT_FAIL;
  }
  gpum_reservation_t mine = *r; /* id and token, for a re-attach */
  p.id = mine.id;
  show_position(&p, r);
  char id[sizeof r->id];
  snprintf(id, sizeof id, "%s", r->id);
  /* The daemon enforces --timeout; the client gives it a second more before it cancels. */
  long waited = 0, limit = o->timeout_ms ? (long)o->timeout_ms + 1000 : -1;
  rc = r->state == GPUM_RES_GRANTED ? 0 : GPUM_ETIMEDOUT;
  while (rc == GPUM_ETIMEDOUT && !cli_signal_caught && (limit < 0 || waited < limit)) {
    rc = gpum_client_wait(c, id, WAIT_SLICE_MS, r);
    waited += WAIT_SLICE_MS;
    if (rc == GPUM_ECLOSED || rc == GPUM_EIO) { /* gpumd went away: the queue survives it */
      rc = requeue(cmd, cfg, cp, &mine, r, rc);
      c = *cp;
      if (rc == 1) { /* interrupted */
        fprintf(stderr,
                "gpum %s: interrupted while gpumd is away; it cancels %s when it is back and "
                "lease.grace passes\n",
                cmd, id);
        return 128 + cli_signal_caught;
      }
      if (rc != 0)
        return CLI_EXIT_FAIL;
      gpum_client_set_event_cb(c, on_event, &p);
      show_position(&p, r);
      rc = r->state == GPUM_RES_GRANTED ? 0 : GPUM_ETIMEDOUT;
    }
  }
  gpum_client_set_event_cb(c, NULL, NULL);
  if (rc == 0)
    return 0;
  if (rc == GPUM_ETIMEDOUT || cli_signal_caught) {
    gpum_client_release(c, id, NULL);
    if (cli_signal_caught) {
      fprintf(stderr, "gpum %s: interrupted; %s cancelled\n", cmd, id);
      return 128 + cli_signal_caught;
    }
    fprintf(stderr, "gpum %s: %s not granted within the timeout; cancelled\n", cmd, id);
    return CLI_EXIT_FAIL;
  }
  fprintf(stderr, "gpum %s: %s\n", cmd, cli_reason(rc));
  return CLI_EXIT_FAIL;
}

int cli_reattach(const char *cmd, const gpum_config_t *cfg, const gpum_reservation_t *r,
                 gpum_client_t **out, gpum_reservation_t *now_out) {
  char path[256];
  gpum_client_t *c = NULL;
  *out = NULL;
  if (gpum_socket_path(cfg, path, sizeof path) != 0 || gpum_client_connect(path, 2000, &c) != 0) {
    gpum_error_clear();
    return GPUM_EAGAIN;
  }
  gpum_reservation_t now;
  int rc = gpum_client_attach(c, r->id, r->token, &now);
  if (rc == 0 && (now.state == GPUM_RES_GRANTED || now.state == GPUM_RES_QUEUED)) {
    fprintf(stderr, "gpum %s: gpumd is back; %s re-attached (%s)\n", cmd, r->id,
            gpum_res_state_name(now.state));
    *out = c;
    if (now_out)
      *now_out = now;
    return 0;
  }
  gpum_client_close(c);
  if (rc == GPUM_ECLOSED || rc == GPUM_ETIMEDOUT) { /* gone again: try later */
    gpum_error_clear();
    return GPUM_EAGAIN;
  }
  fprintf(stderr, "gpum %s: gpumd is back but %s could not be re-attached: %s\n", cmd, r->id,
          rc ? cli_reason(rc) : gpum_res_state_name(now.state));
  return rc ? rc : GPUM_ESTATE;
}

void cli_res_visible_devices(const gpum_reservation_t *r, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < r->ndevices && o < len; i++) {
    int n = r->devices[i].uuid[0]
                ? snprintf(buf + o, len - o, "%s%s", i ? "," : "", r->devices[i].uuid)
                : snprintf(buf + o, len - o, "%s%u", i ? "," : "", r->devices[i].index);
    if (n < 0)
      break;
    o += (size_t)n;
  }
}
