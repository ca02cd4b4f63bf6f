/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum status`: one line per GPU with its processes (like gpustat), or JSON, once or every N
 * seconds. The data comes from status_snapshot.c and is drawn by status_render.c; this file
 * handles the flags, the device selection, the exit code and the watch loop.
 *
 * Exit codes: 0 when at least one selected device could be read; 1 when none could (the
 * driver library is missing, every device is lost, ...) or a selected index does not exist;
 * 2 for bad flags or a malformed device list.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/client.h>
#include <gpum/error.h>
#include <gpum/size.h>
#include <jansson.h>

#include "args.h"
#include "cli.h"
#include "status.h"

#define MAX_SELECTED 1024

typedef struct {
  bool json;
  bool watch;
  bool show_processes;
  unsigned long interval_ms;
  bool color;
  bool tty;
  unsigned sel[MAX_SELECTED];
  size_t nsel;
  bool all;
  gpum_busy_thresholds_t busy;
  unsigned timeout_ms; /* status.timeout: how long a device may take to answer */
  char socket[256];    /* gpumd's, to add its reservations; "" when it cannot be resolved */
} status_opts_t;

enum { OPT_JSON = 1, OPT_WATCH, OPT_DEVICES, OPT_NO_COLOR, OPT_NO_PROCESSES };

static const cli_arg_t status_args[] = {
    {OPT_JSON, "--json", 0, NULL,
     "print a JSON document (schema in docs/cli.md); with --watch, one compact document per "
     "line",
     0},
    {OPT_WATCH, "--watch", 'w', "SECONDS",
     "redraw every SECONDS (2, 0.5, or a duration: 500ms; default: the status.interval option, "
     "2s); stop with Ctrl-C",
     CLI_ARG_OPTIONAL},
    {OPT_DEVICES, "--devices", 0, "LIST", "only these devices, e.g. 0,2 or 0-3 (option 'devices')",
     0},
    {OPT_NO_COLOR, "--no-color", 0, NULL, "no colours (also NO_COLOR=1 or --color never)", 0},
    {OPT_NO_PROCESSES, "--no-processes", 0, NULL, "do not list processes", 0},
    {0},
};

static const cli_cmd_spec_t status_spec = {
    .name = "status",
    .usage = "[--json] [--watch [SECONDS]] [--devices LIST] [--no-color] [--no-processes]",
    .summary = "Show each GPU, its state, memory, utilisation and processes.",
    .text = "For each GPU: index, name, state, temperature, utilisation, memory used/total, power\n"
            "and power limit, and below it the processes holding its memory (pid, user, memory,\n"
            "command). Metrics the driver does not report are n/a (null in JSON), never 0.\n"
            "\n"
            "The state is AVAILABLE; BUSY when GPU utilisation or memory use is at or over the\n"
            "busy thresholds (90% each by default); ERROR when the device is lost, needs a\n"
            "reset, its row remapping failed, it cannot be read or it does not answer within\n"
            "status.timeout (5s; the other devices are not held up). The reason follows every\n"
            "state other than AVAILABLE. Global options (--backend, --sim-node): gpum --help.",
    .args = status_args,
    .examples = "gpum status\n"
                "gpum status --watch 1\n"
                "gpum status --devices 0,2 --json | jq '.devices[].memory.used'",
    .exit_status = "0 when at least one device was read, 1 when none could be read or a selected "
                   "device does not exist, 2 for usage errors.",
};

/* Parses the command's own flags. Returns -1 to continue, else an exit code. */
static int parse_flags(const gpum_config_t *cfg, int argc, char **argv, status_opts_t *o) {
  o->show_processes = true;
  o->interval_ms = (unsigned long)gpum_config_get_duration(cfg, "status.interval");
  if (o->interval_ms == 0)
    o->interval_ms = 2000;
  cli_args_t p;
  cli_args_init(&p, &status_spec, argc, argv);
  for (int id; (id = cli_args_next(&p)) != CLI_ARGS_END;) {
    switch (id) {
    case CLI_ARGS_HELP:
      return CLI_EXIT_OK;
    case CLI_ARGS_ERR:
      return CLI_EXIT_USAGE;
    case CLI_ARGS_POS:
      return cli_args_error(&status_spec, "unexpected argument '%s'", p.value);
    case OPT_JSON:
      o->json = true;
      break;
    case OPT_NO_PROCESSES:
      o->show_processes = false;
      break;
    case OPT_WATCH:
      o->watch = true;
      if (p.value && cli_parse_interval(p.value, &o->interval_ms) != 0)
        return cli_args_error(&status_spec, "--watch: %s", gpum_last_error());
      break;
    case OPT_DEVICES:  /* options of the table: main took them into cfg; */
    case OPT_NO_COLOR: /* they are here for the help */
      break;
    }
  }
  const char *devices = gpum_config_get_string(cfg, "devices");
  o->all = !devices || !*devices;
  if (gpum_device_list_parse(devices, o->sel, MAX_SELECTED, &o->nsel) != 0) {
    fprintf(stderr, "gpum status: --devices: %s\n", gpum_last_error());
    return CLI_EXIT_USAGE;
  }
  gpum_busy_thresholds_from_config(cfg, &o->busy);
  o->timeout_ms = cli_status_timeout_ms(cfg);
  if (gpum_socket_path(cfg, o->socket, sizeof o->socket) != 0)
    o->socket[0] = '\0';
  o->color = cli_use_color(cfg, stdout);
  o->tty = isatty(STDOUT_FILENO) == 1;
  return -1;
}

/* Checks the selection against the session. Returns 0 or GPUM_ENODEV with a message in buf. */
static int check_selection(const status_opts_t *o, gpum_device_session_t *s, char *buf,
                           size_t len) {
  unsigned count = gpum_device_count(s);
  for (size_t i = 0; i < o->nsel; i++) {
    if (o->sel[i] >= count) {
      if (count == 0)
        snprintf(buf, len, "device %u does not exist: no devices found", o->sel[i]);
      else if (count == 1)
        snprintf(buf, len, "device %u does not exist (there is 1 device: 0)", o->sel[i]);
      else
        snprintf(buf, len, "device %u does not exist (this node has %u devices: 0-%u)", o->sel[i],
                 count, count - 1);
      return GPUM_ENODEV;
    }
  }
  return 0;
}

/* Renders one frame (a snapshot, or the reason no snapshot could be taken) into f. */
static void render_frame(FILE *f, const status_opts_t *o, const cli_snapshot_t *snap,
                         const char *error) {
  if (error && o->json) {
    json_t *e = json_pack("{s:s}", "error", error);
    if (e)
      json_dumpf(e, f, JSON_COMPACT);
    fputc('\n', f);
    json_decref(e);
  } else if (error) {
    fprintf(f, "gpum status: %s\n", error);
  } else if (o->json) {
    cli_render_json(f, snap, o->watch);
  } else {
    cli_render_opts_t ro = {o->color, o->show_processes, cli_term_width(stdout)};
    cli_render_text(f, snap, &ro);
  }
}

/* Takes one snapshot. Returns 0 with *snap filled, or an exit code (1) with the reason in err. */
static int take(const status_opts_t *o, gpum_device_session_t *s, cli_readers_t *readers,
                cli_snapshot_t *snap, char *err, size_t len) {
  if (check_selection(o, s, err, len) != 0)
    return CLI_EXIT_FAIL;
  int rc = cli_snapshot_take(s, readers, o->sel, o->nsel, o->all, o->timeout_ms, snap);
  if (rc != 0) {
    snprintf(err, len, "%s", gpum_strerror(rc));
    return CLI_EXIT_FAIL;
  }
  cli_snapshot_add_gpumd(snap, o->socket);
  return 0;
}

/* "auto" falls back to the host quietly; when a simulated node was asked for, say why the
 * output shows the CPU instead. */
static void note_host_fallback(const gpum_config_t *cfg, const cli_snapshot_t *snap) {
  const char *node = getenv("GPUM_SIM_NODE");
  const char *backend = gpum_config_get_string(cfg, "backend");
  if (snap->backend == GPUM_BACKEND_HOST && node && *node && backend && !strcmp(backend, "auto"))
    fprintf(stderr,
            "gpum status: note: simulated node '%s' cannot be used, showing the host instead "
            "(is it started? see 'gpum sim status %s' and 'gpum doctor')\n",
            node, node);
}

static int run_once(const gpum_config_t *cfg, const status_opts_t *o) {
  gpum_device_session_t *s = NULL;
  int rc = cli_open_session(cfg, &s);
  if (rc != 0) {
    fprintf(stderr, "gpum status: cannot read any device: %s\n", cli_reason(rc));
    return CLI_EXIT_FAIL;
  }
  cli_readers_t *readers = NULL;
  if (cli_readers_start(cfg, gpum_device_backend(s), &o->busy, &readers) != 0) {
    fprintf(stderr, "gpum status: out of memory\n");
    gpum_device_close(s);
    return CLI_EXIT_FAIL;
  }
  char err[512];
  cli_snapshot_t snap;
  int code = take(o, s, readers, &snap, err, sizeof err);
  if (code != 0) {
    fprintf(stderr, "gpum status: %s\n", err);
    cli_readers_free(readers);
    gpum_device_close(s);
    return code;
  }
  render_frame(stdout, o, &snap, NULL);
  fflush(stdout);
  note_host_fallback(cfg, &snap);
  code = CLI_EXIT_OK;
  if (snap.device_count == 0) {
    fprintf(stderr, "gpum status: no devices found (%s)\n", snap.backend_detail);
    code = CLI_EXIT_FAIL;
  } else if (snap.nreadable == 0) {
    fprintf(stderr, "gpum status: no device could be read%s%s\n", snap.ndevs ? ": " : "",
            snap.ndevs ? snap.devs[0].reason : "");
    code = CLI_EXIT_FAIL;
  }
  cli_snapshot_free(&snap);
  cli_readers_free(readers);
  gpum_device_close(s);
  return code;
}

/* ---- watch ---- */

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig) {
  if (stop_signal) /* a second signal: the driver may be hung, leave at once */
    _exit(128 + sig);
  stop_signal = sig;
}

/* Waits ms or until SIGINT/SIGTERM. The signals are blocked outside ppoll, so one arriving
 * just before the wait is not lost. */
static void wait_interval(unsigned long ms, const sigset_t *unblocked) {
  struct timespec end, now;
  clock_gettime(CLOCK_MONOTONIC, &end);
  end.tv_sec += (time_t)(ms / 1000);
  end.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (end.tv_nsec >= 1000000000L) {
    end.tv_sec++;
    end.tv_nsec -= 1000000000L;
  }
  while (!stop_signal) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    struct timespec left = {end.tv_sec - now.tv_sec, end.tv_nsec - now.tv_nsec};
    if (left.tv_nsec < 0) {
      left.tv_sec--;
      left.tv_nsec += 1000000000L;
    }
    if (left.tv_sec < 0)
      return;
    if (ppoll(NULL, 0, &left, unblocked) == 0)
      return;
  }
}

/* Writes a finished frame: on a terminal, home + clear screen first; else a blank line between
 * frames, so a pipe receives a readable log. */
static void emit(const status_opts_t *o, const char *buf, size_t len, bool first) {
  if (o->tty && !o->json)
    fputs("\033[H\033[2J", stdout);
  else if (!first && !o->json)
    fputc('\n', stdout);
  fwrite(buf, 1, len, stdout);
  fflush(stdout);
}

/* Whether a device of snap did not answer in time (its reader is in a call that hangs). */
static bool any_stuck(const cli_snapshot_t *snap) {
  for (size_t i = 0; snap && i < snap->ndevs; i++)
    if (snap->devs[i].error == GPUM_ETIMEDOUT)
      return true;
  return false;
}

static int run_watch(const gpum_config_t *cfg, const status_opts_t *o) {
  cli_on_stop_signals(on_stop, false);
  sigset_t block, unblocked;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);

  gpum_device_session_t *s = NULL;
  cli_readers_t *readers = NULL; /* kept across frames: a reader stuck in a call stays one */
  gpum_backend_kind_t pinned = GPUM_BACKEND_AUTO;
  bool first = true;
  int code = CLI_EXIT_OK;
  char err[640];
  while (!stop_signal) {
    const char *error = NULL;
    cli_snapshot_t snap = {0};
    bool have = false;
    if (!s) {
      /* Once a backend worked, stay with it: if the GPUs go away mid-watch, show that rather
       * than switching to the host fallback as "auto" would. */
      int rc = cli_open_session_as(cfg, pinned, &s);
      if (rc == 0)
        pinned = gpum_device_backend(s);
      if (rc == 0 && !readers && cli_readers_start(cfg, pinned, &o->busy, &readers) != 0) {
        gpum_device_close(s);
        rc = GPUM_ENOMEM;
      }
      if (rc != 0) {
        snprintf(err, sizeof err, "cannot read any device: %s", cli_reason(rc));
        error = err;
        s = NULL;
      }
    }
    if (s) {
      int rc = take(o, s, readers, &snap, err, sizeof err);
      if (rc != 0 && first) { /* a bad --devices index is a usage problem: stop now */
        fprintf(stderr, "gpum status: %s\n", err);
        code = rc;
        break;
      }
      have = rc == 0;
      error = have ? NULL : err;
      if (!have || snap.nreadable == 0) { /* reopen next time: the driver may come back */
        gpum_device_close(s);
        s = NULL;
        if (!any_stuck(have ? &snap : NULL)) { /* new readers would hang as well */
          cli_readers_free(readers);
          readers = NULL;
        }
      }
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) {
      code = CLI_EXIT_FAIL;
      if (have)
        cli_snapshot_free(&snap);
      break;
    }
    render_frame(mem, o, have ? &snap : NULL, error);
    fclose(mem);
    if (have)
      cli_snapshot_free(&snap);
    emit(o, buf, len, first);
    free(buf);
    first = false;
    sigprocmask(SIG_BLOCK, &block, &unblocked);
    wait_interval(o->interval_ms, &unblocked);
    sigprocmask(SIG_SETMASK, &unblocked, NULL);
  }
  cli_readers_free(readers);
  if (s)
    gpum_device_close(s);
  return code;
}

int cmd_status(gpum_config_t *cfg, int argc, char **argv) {
  status_opts_t *o = calloc(1, sizeof *o);
  if (!o) {
    fprintf(stderr, "gpum status: out of memory\n");
    return CLI_EXIT_FAIL;
  }
  int code = parse_flags(cfg, argc, argv, o);
  if (code < 0)
    code = o->watch ? run_watch(cfg, o) : run_once(cfg, o);
  free(o);
  return code;
}
