/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum alerts`: the node's alerts. When gpumd runs, its alert engine keeps the node's active
 * alerts and history (the rules of its configuration, evaluated on every sample since it
 * started): the command shows those (the socket op "alerts", the same data as REST's
 * /api/v1/alerts). When gpumd does not run, or with --local (and the options that only mean
 * something locally: --watch, --for, --interval, --rules, --no-defaults), it runs its own
 * monitor and alert engine for an evaluation window (three sampling rounds, or --for) and
 * prints what that window raised; with --watch it keeps running and prints each alert as it
 * fires and clears. The output says which source it is.
 *
 * Exit codes: 0 (whether or not alerts fired: scripts read the output), 1 when no device can be
 * read or a selected device does not exist, 2 for bad flags or rules.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/client.h>
#include <gpum/error.h>
#include <gpum/size.h>
#include <gpum/xid.h>

#include "args.h"
#include "cli.h"
#include "client_cli.h"
#include "monitor_run.h"

typedef struct {
  bool watch, json, no_defaults, list_rules, xids;
  bool local; /* --local, or an option that only means something locally */
  long limit; /* --limit: gpumd's history entries */
  bool have_for;
  uint64_t for_ms;
  const char *rules_file;
  cli_mon_setup_t setup;
} alerts_opts_t;

enum {
  OPT_LOCAL = 1,
  OPT_LIMIT,
  OPT_WATCH,
  OPT_JSON,
  OPT_FOR,
  OPT_INTERVAL,
  OPT_RULES,
  OPT_NO_DEFAULTS,
  OPT_LIST_RULES,
  OPT_XIDS,
  OPT_DEVICES,
};

static const cli_arg_t alerts_args[] = {
    {OPT_LOCAL, "--local", 0, NULL, "evaluate the rules here even when gpumd runs", 0},
    {OPT_LIMIT, "--limit", 0, "N", "gpumd's history entries to show (default 100)", 0},
    {OPT_WATCH, "--watch", 'w', NULL,
     "follow the alerts as they fire and clear, a line each, until Ctrl-C: gpumd's when it runs "
     "(told when it goes away, followed again when it is back), else those of the evaluation "
     "here",
     0},
    {OPT_JSON, "--json", 0, NULL,
     "JSON: one document; with --watch one object per line (docs/monitoring.md, the alert "
     "object)",
     0},
    {OPT_FOR, "--for", 0, "DURATION", "evaluation window here (default: 3 sampling rounds)", 0},
    {OPT_INTERVAL, "--interval", 0, "MS|DURATION",
     "sampling interval here: milliseconds (250) or a duration (500ms, 2s); default: the "
     "monitor.interval option, else 1s",
     0},
    {OPT_RULES, "--rules", 0, "FILE", "more rules, one per line ('#' comments)", 0},
    {OPT_NO_DEFAULTS, "--no-defaults", 0, NULL, "without the default rules", 0},
    {OPT_LIST_RULES, "--list-rules", 0, NULL, "print the rules in effect and exit", 0},
    {OPT_XIDS, "--xids", 0, NULL, "print the table of known Xid errors and exit", 0},
    {OPT_DEVICES, "--devices", 0, "LIST", "only these devices, e.g. 0,2 or 0-3 (option 'devices')",
     0},
    {0},
};

static const cli_cmd_spec_t alerts_spec = {
    .name = "alerts",
    .usage = "[--json] [--watch] [--limit N] [--devices LIST]\n"
             "--local [--watch] [--json] [--for DURATION] [--interval TIME] ...\n"
             "--list-rules [--rules FILE] [--no-defaults]\n"
             "--xids [--json]",
    .summary = "Show the node's alerts: gpumd's, or an evaluation of the rules here.",
    .text = "When gpumd runs, these are its alert engine's: the alerts active now and the\n"
            "history since gpumd started, under the rules of gpumd's configuration; with\n"
            "--watch, each alert as gpumd raises and clears it.\n"
            "When gpumd does not run, or with --local (implied by --for, --interval, --rules\n"
            "and --no-defaults), gpum alerts evaluates the rules itself: the default rules\n"
            "(memory > 90%, temperature near the slowdown and shutdown thresholds, any Xid, a\n"
            "device in ERROR), those of the configuration (alerts.rules, alerts.file) and\n"
            "those of --rules FILE, sampling the devices for an evaluation window (3 sampling\n"
            "rounds, or --for). The first line (or \"source\" in --json) says which it is; an\n"
            "alert is the same object from either. Rule syntax: docs/monitoring.md.",
    .args = alerts_args,
    .examples = "gpum alerts\n"
                "gpum alerts --watch --json | jq -c 'select(.level == \"CRITICAL\")'\n"
                "gpum alerts --local --for 10s --rules my.rules",
    .exit_status = "0 (alerts or not), 1 when no device can be read or a selected device does "
                   "not exist, 2 for usage errors and bad rules.",
};

/* Returns -1 to go on, else an exit code. */
static int parse_flags(const gpum_config_t *cfg, int argc, char **argv, alerts_opts_t *o) {
  o->setup.interval_ms = cli_default_monitor_interval(cfg);
  cli_args_t p;
  cli_args_init(&p, &alerts_spec, argc, argv);
  for (int id; (id = cli_args_next(&p)) != CLI_ARGS_END;) {
    const char *v = p.value;
    char *end = NULL;
    switch (id) {
    case CLI_ARGS_HELP:
      return CLI_EXIT_OK;
    case CLI_ARGS_ERR:
      return CLI_EXIT_USAGE;
    case CLI_ARGS_POS:
      return cli_args_error(&alerts_spec, "unexpected argument '%s'", v);
    case OPT_WATCH:
      o->watch = true;
      break;
    case OPT_LOCAL:
      o->local = true;
      break;
    case OPT_LIMIT:
      o->limit = strtol(v, &end, 10);
      if (!*v || *end || o->limit < 0 || o->limit > 100000)
        return cli_args_error(&alerts_spec, "--limit: invalid value '%s' (expected 0 to 100000)",
                              v);
      break;
    case OPT_JSON:
      o->json = true;
      break;
    case OPT_NO_DEFAULTS:
      o->no_defaults = o->local = true;
      break;
    case OPT_LIST_RULES:
      o->list_rules = true;
      break;
    case OPT_XIDS:
      o->xids = true;
      break;
    case OPT_FOR:
      if (gpum_duration_parse(v, &o->for_ms) != 0 || o->for_ms == 0)
        return cli_args_error(&alerts_spec,
                              "--for: invalid duration '%s' (expected e.g. 500ms, 10s, 2m)", v);
      o->have_for = o->local = true;
      break;
    case OPT_INTERVAL:
      if (cli_parse_interval_ms(v, &o->setup.interval_ms) != 0)
        return cli_args_error(&alerts_spec, "--interval: %s", gpum_last_error());
      o->local = true;
      break;
    case OPT_RULES:
      if (!*v)
        return cli_args_error(&alerts_spec, "--rules needs a file name");
      o->rules_file = v;
      o->local = true;
      break;
    case OPT_DEVICES: /* an option of the table: main took it into cfg, this is for the help */
      break;
    }
  }
  return cli_mon_parse_devices(cfg, "alerts", &o->setup);
}

/* Adds the rules: the configuration's (alerts.defaults, alerts.rules, alerts.file; --no-defaults
 * sets alerts.defaults to false), then --rules FILE. Returns 0 or an exit
 * code after a message. */
static int load_rules(gpum_config_t *cfg, const alerts_opts_t *o, gpum_alert_engine_t *e) {
  int rc = 0;
  gpum_error_clear();
  if (gpum_option_find("alerts.defaults")) {
    if (o->no_defaults)
      rc = gpum_config_set(cfg, "alerts.defaults", "false", GPUM_OPT_SRC_FLAG);
    if (rc == 0)
      rc = gpum_alert_engine_configure(e, cfg);
  } else if (!o->no_defaults) {
    rc = gpum_alert_engine_add_default_rules(e);
  }
  if (rc == 0 && o->rules_file)
    rc = gpum_alert_engine_load_file(e, o->rules_file);
  if (rc == 0)
    return 0;
  fprintf(stderr, "gpum alerts: %s\n", cli_reason(rc));
  return CLI_EXIT_USAGE;
}

/* ---- output ---- */

static json_t *jtime(uint64_t ns) {
  return ns ? json_integer((json_int_t)ns) : json_null();
}

/* An alert as gpumd writes it (the socket's "alerts", REST's /api/v1/alerts and the "alert"
 * events: docs/protocol.md, docs/monitoring.md), so that a script reads gpumd's alerts and
 * those of the evaluation here alike; event ("fired"/"cleared") leads a --watch line. */
static json_t *alert_json(const gpum_alert_t *a, const char *event) {
  json_t *o = json_object();
  if (event)
    json_object_set_new(o, "event", json_string(event));
  bool active = a->state == GPUM_ALERT_FIRED;
  bool is_xid = !strcmp(a->metric, "xid");
  bool is_metric = !is_xid && strcmp(a->metric, "health") != 0;
  json_object_set_new(o, "id", json_integer((json_int_t)a->id));
  json_object_set_new(o, "level", json_string(gpum_alert_level_name(a->level)));
  json_object_set_new(o, "state", json_string(active ? "active" : "cleared"));
  json_object_set_new(o, "device", json_integer(a->device));
  json_object_set_new(o, "rule", json_integer(a->rule));
  json_object_set_new(o, "rule_text", json_string(a->rule_text));
  json_object_set_new(o, "metric", json_string(a->metric));
  json_object_set_new(o, "value", json_real(a->value));
  json_object_set_new(o, "threshold", is_metric ? json_real(a->threshold) : json_null());
  json_object_set_new(o, "clear_threshold",
                      is_metric ? json_real(a->clear_threshold) : json_null());
  json_object_set_new(o, "clear_value",
                      is_metric && !active ? json_real(a->clear_value) : json_null());
  json_object_set_new(o, "xid", is_xid ? json_integer((json_int_t)a->xid) : json_null());
  if (is_xid) {
    gpum_xid_info_t xi = gpum_xid_info((unsigned)a->xid);
    json_object_set_new(o, "xid_name", json_string(xi.name));
    json_object_set_new(o, "repeats", json_integer(a->repeats));
  }
  json_object_set_new(o, "since_ns", jtime(a->since_ns));
  json_object_set_new(o, "fired_ns", jtime(a->fired_ns));
  json_object_set_new(o, "cleared_ns", jtime(a->cleared_ns));
  json_object_set_new(o, "message", json_string(a->message));
  return o;
}

static void dump_json(json_t *o, FILE *f, bool compact) {
  size_t flags =
      JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10) | (compact ? JSON_COMPACT : JSON_INDENT(2));
  json_dumpf(o, f, flags);
  fputc('\n', f);
}

/* "05:30:12.345  FIRED    CRITICAL  GPU 5  message". */
static void alert_text(FILE *f, const gpum_alert_t *a, bool event_line) {
  char t[40];
  bool active = a->state == GPUM_ALERT_FIRED;
  uint64_t when = event_line && !active ? a->cleared_ns : a->fired_ns;
  cli_fmt_time_ns(when, event_line, t, sizeof t);
  if (event_line)
    fprintf(f, "%s  %-7s  %-8s  GPU %u  %s\n", t, active ? "FIRED" : "CLEARED",
            gpum_alert_level_name(a->level), a->device, a->message);
  else
    fprintf(f, "  %s  %-8s  GPU %-2u  %-7s  %s\n", t, gpum_alert_level_name(a->level), a->device,
            active ? "active" : "cleared", a->message);
}

/* ---- --watch: alerts reach the main thread through a pipe ---- */

typedef struct {
  int wfd;
  bool json;
} watch_ctx_t;

/* Called on the monitor's sampler thread: formats the line and hands it to the main thread
 * through a non-blocking pipe (a line is far below PIPE_BUF, so writes are atomic). */
static void on_alert(const gpum_alert_t *a, void *arg) {
  const watch_ctx_t *w = arg;
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (!m)
    return;
  if (w->json) {
    json_t *o = alert_json(a, a->state == GPUM_ALERT_FIRED ? "fired" : "cleared");
    dump_json(o, m, true);
    json_decref(o);
  } else {
    alert_text(m, a, true);
  }
  fclose(m);
  if (len > 0 && write(w->wfd, buf, len) < 0) {
    /* pipe full: the main thread is far behind; the alert stays in the history */
  }
  free(buf);
}

static void drain(int rfd) {
  char buf[4096];
  ssize_t n;
  while ((n = read(rfd, buf, sizeof buf)) > 0)
    fwrite(buf, 1, (size_t)n, stdout);
  fflush(stdout);
}

static int run_watch(const alerts_opts_t *o, gpum_monitor_t *mon, int rfd) {
  (void)mon;
  uint64_t start = cli_now_ns();
  for (;;) {
    unsigned wait = 200;
    if (o->have_for) {
      uint64_t done = (cli_now_ns() - start) / 1000000u;
      if (done >= o->for_ms)
        break;
      if (o->for_ms - done < wait)
        wait = (unsigned)(o->for_ms - done);
    }
    int sig = cli_mon_wait_fd(rfd, wait);
    drain(rfd);
    if (sig)
      break;
  }
  return CLI_EXIT_OK;
}

/* ---- one evaluation window ---- */

static int print_window(const alerts_opts_t *o, gpum_alert_engine_t *e, gpum_monitor_t *mon,
                        uint64_t window_ms) {
  size_t nact = 0, nhist = 0;
  gpum_alert_engine_active(e, NULL, 0, &nact);
  gpum_alert_engine_history(e, NULL, 0, &nhist);
  gpum_alert_t *act = calloc(nact + 1, sizeof *act), *hist = calloc(nhist + 1, sizeof *hist);
  if (!act || !hist) {
    free(act);
    free(hist);
    fprintf(stderr, "gpum alerts: out of memory\n");
    return CLI_EXIT_FAIL;
  }
  gpum_alert_engine_active(e, act, nact, &nact);
  gpum_alert_engine_history(e, hist, nhist, &nhist);
  unsigned ndev = gpum_monitor_device_count(mon);
  size_t nrules = gpum_alert_engine_rule_count(e);
  if (o->json) {
    json_t *root = json_object(), *ja = json_array(), *jh = json_array(), *jr = json_array();
    char rule[GPUM_ALERT_RULE_LEN];
    for (size_t i = 0; i < nrules; i++)
      if (gpum_alert_engine_rule_text(e, (unsigned)i, rule, sizeof rule) == 0)
        json_array_append_new(jr, json_string(rule));
    for (size_t i = 0; i < nact; i++)
      json_array_append_new(ja, alert_json(&act[i], NULL));
    for (size_t i = 0; i < nhist; i++)
      json_array_append_new(jh, alert_json(&hist[i], NULL));
    json_object_set_new(root, "source", json_string("local"));
    json_object_set_new(root, "window_ms", json_integer((json_int_t)window_ms));
    json_object_set_new(root, "interval_ms", json_integer(o->setup.interval_ms));
    json_object_set_new(root, "devices", json_integer(ndev));
    json_object_set_new(root, "rules", jr);
    json_object_set_new(root, "active", ja);
    json_object_set_new(root, "history", jh);
    dump_json(root, stdout, false);
    json_decref(root);
  } else {
    printf("source: local evaluation\n");
    printf("evaluated %zu rules on %u device%s for %.1fs (sampling every %u ms)\n", nrules, ndev,
           ndev == 1 ? "" : "s", window_ms / 1000.0, o->setup.interval_ms);
    printf("active alerts: %zu\n", nact);
    for (size_t i = 0; i < nact; i++)
      alert_text(stdout, &act[i], false);
    printf("history: %zu\n", nhist);
    for (size_t i = 0; i < nhist; i++)
      alert_text(stdout, &hist[i], false);
  }
  fflush(stdout);
  free(act);
  free(hist);
  return CLI_EXIT_OK;
}

static int run_window(const alerts_opts_t *o, gpum_alert_engine_t *e, gpum_monitor_t *mon) {
  uint64_t window = o->have_for ? o->for_ms : 3ull * o->setup.interval_ms;
  uint64_t start = cli_now_ns();
  for (;;) {
    uint64_t done = (cli_now_ns() - start) / 1000000u;
    if (done >= window)
      break;
    uint64_t left = window - done;
    if (cli_mon_wait_signal(left > 1000 ? 1000 : (unsigned)left))
      break;
  }
  uint64_t elapsed_ms = (cli_now_ns() - start) / 1000000u;
  gpum_monitor_stop(mon);
  return print_window(o, e, mon, elapsed_ms);
}

/* ---- gpumd's alerts ---- */

static bool selected(const alerts_opts_t *o, json_int_t device) {
  if (o->setup.nsel == 0)
    return true;
  for (size_t i = 0; i < o->setup.nsel; i++)
    if ((json_int_t)o->setup.sel[i] == device)
      return true;
  return false;
}

/* Keeps the entries of arr on the selected devices. */
static void filter_devices(const alerts_opts_t *o, json_t *arr) {
  for (size_t i = json_array_size(arr); i-- > 0;)
    if (!selected(o, json_integer_value(json_object_get(json_array_get(arr, i), "device"))))
      json_array_remove(arr, i);
}

/* "  05:30:12.345  CRITICAL  GPU 5   active   message", from gpumd's alert object. */
static void gpumd_alert_text(const json_t *a) {
  char t[40];
  const char *state = json_string_value(json_object_get(a, "state"));
  const char *level = json_string_value(json_object_get(a, "level"));
  const char *msg = json_string_value(json_object_get(a, "message"));
  cli_fmt_time_ns((uint64_t)json_integer_value(json_object_get(a, "fired_ns")), false, t, sizeof t);
  printf("  %s  %-8s  GPU %-2lld  %-7s  %s\n", t, level ? level : "?",
         (long long)json_integer_value(json_object_get(a, "device")), state ? state : "?",
         msg ? msg : "");
}

/* ---- --watch with gpumd: its "alert" events on a watching connection ---- */

#define RECONNECT_MS 1000u /* how often a watcher tries gpumd again after it went away */

/* An "alert" event of gpumd's (data: the alert object with "event"): a line as the local
 * --watch writes it, "2026-11-22T05:30:12.345Z  FIRED    CRITICAL  GPU 5  message", or the
 * object. */
static void on_node_event(const gpum_client_event_t *ev, void *user) {
  const alerts_opts_t *o = user;
  if (ev->kind != GPUM_CLIENT_EV_NODE || ev->type != GPUM_WATCH_ALERT)
    return;
  json_t *a = json_loads(ev->data, 0, NULL);
  const char *event = json_string_value(json_object_get(a, "event"));
  if (!json_is_object(a) || !event) { /* "data": null: over the message limit */
    json_decref(a);
    fprintf(stderr, "gpum alerts: an alert event too large to show (gpum alerts lists it)\n");
    return;
  }
  json_int_t device = json_integer_value(json_object_get(a, "device"));
  if (selected(o, device)) {
    bool fired = !strcmp(event, "fired");
    if (o->json) {
      json_t *line = json_pack("{s:s}", "event", event); /* "event" first, as the local lines */
      json_object_update(line, a);
      dump_json(line, stdout, true);
      json_decref(line);
    } else {
      char t[40];
      const char *level = json_string_value(json_object_get(a, "level"));
      const char *msg = json_string_value(json_object_get(a, "message"));
      cli_fmt_time_ns(
          (uint64_t)json_integer_value(json_object_get(a, fired ? "fired_ns" : "cleared_ns")), true,
          t, sizeof t);
      printf("%s  %-7s  %-8s  GPU %lld  %s\n", t, fired ? "FIRED" : "CLEARED", level ? level : "?",
             (long long)device, msg ? msg : "");
    }
    fflush(stdout);
  }
  json_decref(a);
}

/* Follows gpumd's alerts on c (connected to path) until a stop signal: a line an alert fired or
 * cleared. When gpumd goes away it says so on stderr and connects again every RECONNECT_MS
 * (alerts raised and cleared meanwhile are not shown). Returns an exit code. */
static int watch_gpumd(const alerts_opts_t *o, gpum_client_t *c, const char *path) {
  int code = CLI_EXIT_OK;
  bool again = false;
  cli_mon_block_signals();
  while (!cli_mon_wait_signal(0)) {
    if (!c) {
      if (cli_mon_wait_signal(RECONNECT_MS))
        break;
      if (gpum_client_connect(path, 2000, &c) != 0) {
        gpum_error_clear();
        continue;
      }
    }
    gpum_client_set_event_cb(c, on_node_event, (void *)o);
    int rc = gpum_client_watch(c, GPUM_WATCH_ALERT, NULL);
    if (rc == 0) {
      /* also the readiness signal for scripts and tests */
      fprintf(stderr,
              again ? "gpum alerts: gpumd is back at %s; watching its alerts again\n"
                    : "gpum alerts: watching gpumd's alerts at %s (Ctrl-C to stop)\n",
              path);
      while (rc >= 0 && !cli_mon_wait_fd(gpum_client_fd(c), 1000))
        rc = gpum_client_process(c, 0);
    }
    if (rc < 0 && rc != GPUM_ECLOSED && rc != GPUM_EPROTO) { /* refused: EAGAIN, too many */
      fprintf(stderr, "gpum alerts: gpumd at %s: %s\n", path, cli_reason(rc));
      code = CLI_EXIT_FAIL;
      break;
    }
    if (rc < 0) {
      fprintf(stderr,
              "gpum alerts: gpumd went away (%s); waiting for it to come back (Ctrl-C to stop)\n",
              path);
      gpum_client_close(c);
      c = NULL;
      again = true;
    }
  }
  cli_mon_unblock_signals();
  gpum_client_close(c);
  return code;
}

/* Prints gpumd's alerts. Returns an exit code, or -1 when gpumd does not answer (nothing is
 * printed then: the caller evaluates locally). */
static int show_gpumd(const gpum_config_t *cfg, const alerts_opts_t *o) {
  char path[256], args[64];
  gpum_client_t *c = NULL;
  if (gpum_socket_path(cfg, path, sizeof path) != 0 || gpum_client_connect(path, 2000, &c) != 0) {
    fprintf(stderr, "gpum alerts: %s; evaluating the rules here\n", gpum_last_error());
    gpum_error_clear();
    return -1;
  }
  if (o->watch)
    return watch_gpumd(o, c, path);
  snprintf(args, sizeof args, "{\"limit\": %ld}", o->limit);
  char *text = NULL;
  int rc = gpum_client_call_json(c, "alerts", args, &text);
  gpum_client_close(c);
  json_t *doc = rc == 0 ? json_loads(text, 0, NULL) : NULL;
  free(text);
  if (!doc) {
    fprintf(stderr, "gpum alerts: gpumd: %s\n", rc ? cli_reason(rc) : "unreadable reply");
    return CLI_EXIT_FAIL;
  }
  json_t *act = json_object_get(doc, "active"), *hist = json_object_get(doc, "history");
  filter_devices(o, act);
  filter_devices(o, hist);
  json_object_del(doc, "id");
  json_object_del(doc, "ok");
  if (o->json) {
    json_object_set_new(doc, "source", json_string("gpumd"));
    json_object_set_new(doc, "socket", json_string(path));
    dump_json(doc, stdout, false);
  } else {
    printf("source: gpumd at %s%s\n", path,
           json_is_true(json_object_get(doc, "enabled")) ? "" : " (its alert engine is off)");
    printf("active alerts: %zu\n", json_array_size(act));
    for (size_t i = 0; i < json_array_size(act); i++)
      gpumd_alert_text(json_array_get(act, i));
    printf("history: %zu\n", json_array_size(hist));
    for (size_t i = 0; i < json_array_size(hist); i++)
      gpumd_alert_text(json_array_get(hist, i));
  }
  fflush(stdout);
  json_decref(doc);
  return CLI_EXIT_OK;
}

/* ---- listings ---- */

static int list_rules(gpum_alert_engine_t *e) {
  char rule[GPUM_ALERT_RULE_LEN];
  for (size_t i = 0; i < gpum_alert_engine_rule_count(e); i++)
    if (gpum_alert_engine_rule_text(e, (unsigned)i, rule, sizeof rule) == 0)
      printf("%s\n", rule);
  return CLI_EXIT_OK;
}

static int list_xids(bool json) {
  size_t n = 0;
  const gpum_xid_info_t *t = gpum_xid_table(&n);
  json_t *arr = json ? json_array() : NULL;
  for (size_t i = 0; i < n; i++) {
    if (json) {
      json_array_append_new(arr, json_pack("{s:i, s:s, s:b, s:s, s:s}", "xid", (int)t[i].xid,
                                           "name", t[i].name, "critical", t[i].critical,
                                           "description", t[i].description, "action", t[i].action));
    } else {
      printf("%4u  %-8s  %s\n", t[i].xid, t[i].critical ? "CRITICAL" : "ERROR", t[i].name);
    }
  }
  if (json) {
    dump_json(arr, stdout, false);
    json_decref(arr);
  }
  return CLI_EXIT_OK;
}

/* ---- the command ---- */

static int run(gpum_config_t *cfg, const alerts_opts_t *o, gpum_alert_engine_t *e) {
  int code = load_rules(cfg, o, e);
  if (code != 0 || o->list_rules)
    return code != 0 ? code : list_rules(e);
  int fds[2] = {-1, -1};
  watch_ctx_t w = {-1, o->json};
  if (o->watch) {
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      fprintf(stderr, "gpum alerts: pipe: %s\n", strerror(errno));
      return CLI_EXIT_FAIL;
    }
    w.wfd = fds[1];
    gpum_alert_engine_add_callback(e, on_alert, &w);
  }
  cli_mon_block_signals();
  cli_mon_setup_t setup = o->setup;
  setup.alerts = e;
  gpum_monitor_t *mon = NULL;
  code = cli_mon_open(cfg, "alerts", &setup, &mon);
  if (code == 0 && o->watch) /* also the readiness signal for scripts and tests */
    fprintf(stderr, "gpum alerts: watching %u device%s with %zu rules (Ctrl-C to stop)\n",
            gpum_monitor_device_count(mon), gpum_monitor_device_count(mon) == 1 ? "" : "s",
            gpum_alert_engine_rule_count(e));
  if (code == 0) {
    code = o->watch ? run_watch(o, mon, fds[0]) : run_window(o, e, mon);
    cli_mon_unblock_signals();
    gpum_monitor_destroy(mon);
    if (o->watch)
      drain(fds[0]);
  } else {
    cli_mon_unblock_signals();
  }
  if (fds[0] >= 0) {
    close(fds[0]);
    close(fds[1]);
  }
  return code;
}

int cmd_alerts(gpum_config_t *cfg, int argc, char **argv) {
  alerts_opts_t o;
  memset(&o, 0, sizeof o);
  o.limit = 100;
  int code = parse_flags(cfg, argc, argv, &o);
  if (code >= 0)
    return code;
  if (o.xids)
    return list_xids(o.json);
  if (!o.local && !o.list_rules) {
    code = show_gpumd(cfg, &o);
    if (code >= 0)
      return code;
  }
  gpum_alert_engine_opts_t eo;
  gpum_alert_engine_opts_init(&eo);
  if (gpum_option_find("alerts.xid_window"))
    eo.xid_window_ms = gpum_config_get_duration(cfg, "alerts.xid_window");
  if (gpum_option_find("alerts.history")) {
    int64_t h = gpum_config_get_int(cfg, "alerts.history");
    eo.history_cap = h > 0 ? (size_t)h : eo.history_cap;
  }
  gpum_alert_engine_t *e = NULL;
  gpum_error_clear();
  int rc = gpum_alert_engine_create(&eo, &e);
  if (rc != 0) {
    fprintf(stderr, "gpum alerts: %s\n", cli_reason(rc));
    return rc == GPUM_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
  }
  code = run(cfg, &o, e);
  gpum_alert_engine_destroy(e);
  return code;
}
