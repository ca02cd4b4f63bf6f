/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd, the node daemon: loads the configuration (file, GPUM_* environment, option flags),
 * takes the state directory's and the socket's locks, starts the monitor, recovers the
 * ledger, listens, prints a readiness line and runs the libevent loop one turn at a time
 * (each turn's changes are committed before its replies leave). SIGTERM and SIGINT stop it
 * cleanly (exit 0, socket removed; reservations stay in the ledger for the next start);
 * SIGHUP reloads the reloadable options.
 */
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/version.h>

#include "cluster.h"
#include "devices.h"
#include "engine.h"
#include "gpumd.h"
#include "net.h"
#include "obs.h"
#include "proto.h"
#include "rest.h"
#include "turn.h"
#include "os_internal.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: gpumd [--config FILE] [--foreground] [--OPTION VALUE...]\n"
          "\n"
          "The gpum node daemon: grants GPU memory reservations to clients over a Unix socket\n"
          "(docs/protocol.md). It always runs in the foreground (systemd supervises it).\n"
          "\n"
          "  --config FILE   configuration file (YAML); default $GPUM_CONFIG, else\n"
          "                  /etc/gpum/gpum.yaml (root) or ~/.config/gpum/gpum.yaml\n"
          "  --foreground    accepted for compatibility (the default)\n"
          "  --help          this text\n"
          "  --version       the version\n"
          "\n"
          "Every option of docs/config.md is also a flag (--socket PATH, --state-dir DIR,\n"
          "--memory-fraction 0.9, ...) and an environment variable (GPUM_SOCKET, ...).\n"
          "With GPUM_SIM_NODE set it manages that simulated node (gpum sim start).\n"
          "The REST API listens on http.listen (default 127.0.0.1:8642, \"off\" disables;\n"
          "docs/rest.md); its bearer token is STATE_DIR/http.token (gpum http-token), re-read\n"
          "on SIGHUP.\n"
          "Signals: SIGTERM/SIGINT stop, SIGHUP reloads memory_fraction, safety_margin,\n"
          "max_concurrent_jobs, placement, queue.*, pressure.*, job_timeout,\n"
          "admin_group, log.level, ledger.retention, preempt.*, suspend.*,\n"
          "alerts.* (active alerts start\n"
          "over when the rules change) and lease.grace (a grace period\n"
          "that is running then ends lease.grace after it began).\n");
}

static int load_admin_group(gpumd_t *d) {
  const char *g = gpum_config_get_string(d->cfg, "admin_group");
  d->admin_gid_set = false;
  if (!g || !*g)
    return 0;
  struct group gr, *res = NULL;
  char buf[4096];
  if (getgrnam_r(g, &gr, buf, sizeof buf, &res) != 0 || !res)
    return gpum_error(GPUM_EINVAL, "admin_group '%s' does not exist", g);
  d->admin_gid = gr.gr_gid;
  d->admin_gid_set = true;
  return 0;
}

/* Loads the configuration from scratch: file, environment, flags (a copy of argv). */
static int load_config(gpum_config_t **out, int argc, char **argv) {
  gpum_config_t *cfg = NULL;
  if (gpum_config_new(&cfg) != 0)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  char **copy = calloc((size_t)argc + 1, sizeof *copy);
  if (!copy) {
    gpum_config_free(cfg);
    return gpum_error(GPUM_ENOMEM, "out of memory");
  }
  memcpy(copy, argv, (size_t)argc * sizeof *copy);
  int n = argc;
  int rc = gpum_config_load_all(cfg, NULL, &n, copy);
  for (int i = 1; rc == 0 && i < n; i++) {
    if (strcmp(copy[i], "--foreground") != 0 && strcmp(copy[i], "-f") != 0)
      rc = gpum_error(GPUM_EINVAL, "unknown argument '%s' (see gpumd --help)", copy[i]);
  }
  free(copy);
  if (rc != 0) {
    gpum_config_free(cfg);
    return rc;
  }
  *out = cfg;
  return 0;
}

static int g_argc;
static char **g_argv;

static void on_stop_signal(evutil_socket_t sig, short what, void *arg) {
  (void)what;
  gpumd_t *d = arg;
  gpum_log(GPUM_LOG_INFO, "gpumd", "signal %d: stopping", (int)sig);
  d->stop = true;
  event_base_loopbreak(d->base);
}

static void on_hup(evutil_socket_t sig, short what, void *arg) {
  (void)sig, (void)what;
  gpumd_t *d = arg;
  gpum_config_t *cfg = NULL;
  gpum_error_clear();
  if (load_config(&cfg, g_argc, g_argv) != 0) {
    gpum_log(GPUM_LOG_ERROR, "gpumd", "reload failed, keeping the old configuration: %s",
             gpum_last_error());
    return;
  }
  static const char *const fixed[] = {"socket",
                                      "state_dir",
                                      "devices",
                                      "backend",
                                      "sim.node",
                                      "http.listen",
                                      "http.max_connections",
                                      "http.max_connections_per_peer",
                                      "http.max_body",
                                      "http.max_header",
                                      "http.timeout",
                                      "http.event_replay",
                                      "cluster.slurm_refresh"};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    if (strcmp(gpum_config_get_string(cfg, fixed[i]), gpum_config_get_string(d->cfg, fixed[i])))
      gpum_log(GPUM_LOG_WARN, "gpumd", "%s changed: it takes effect at the next start", fixed[i]);
  gpum_config_t *old = d->cfg;
  d->cfg = cfg;
  if (gpum_config_apply_logging(cfg) != 0 || load_admin_group(d) != 0 ||
      gpumd_engine_reload(d) != 0) {
    gpum_log(GPUM_LOG_ERROR, "gpumd", "reload failed, keeping the old configuration: %s",
             gpum_last_error());
    d->cfg = old;
    gpum_config_free(cfg);
    gpum_config_apply_logging(old);
    load_admin_group(d);
    return;
  }
  gpum_config_free(old);
  gpumd_http_reload(d);
  gpumd_obs_reload(d); /* alert rules; bad ones are logged and the old ones kept */
  gpum_log(GPUM_LOG_INFO, "gpumd", "configuration reloaded");
}

static void on_kick(evutil_socket_t fd, short what, void *arg) {
  (void)fd, (void)what; /* makes the loop turn (end-of-turn work left over) */
  gpumd_close_deferred(arg);
}

/* ---- the hooks (gpumd_hooks_t): news from below, handed to the modules above ---- */

static void on_device_event(gpumd_t *d, const gpum_monitor_event_t *ev) {
  if (ev->kind == GPUM_MONEV_HEALTH)
    gpumd_engine_device_health(d, ev->device, ev->to, ev->reason);
  gpumd_obs_monitor_event(d, ev);
}

/* The newest samples go to the scheduler (memory pressure, used and unmanaged memory), then
 * to the alert engine, the history and the "sample" events. */
static void on_device_round(gpumd_t *d) {
  for (unsigned i = 0; i < d->device_count; i++) {
    gpum_device_sample_t s;
    if (gpum_monitor_latest(d->mon, d->devices[i].index, &s) == 0)
      gpumd_engine_device_sample(d, d->devices[i].index, &s);
  }
  gpumd_obs_round(d);
}

static const gpumd_hooks_t hooks = {
    .line = gpumd_proto_line,
    .conn_closing = gpumd_watch_stop,
    .conn_closed = gpumd_engine_conn_closed,
    .device_info = gpumd_obs_device_info,
    .device_answered = gpumd_engine_device_answered,
    .device_event = on_device_event,
    .device_round = on_device_round,
    .http_request = gpumd_rest_on_request,
};

static int start(gpumd_t *d) {
  int rc = gpumd_socket_path(d->cfg, d->socket_path, sizeof d->socket_path);
  if (rc == 0)
    rc = gpumd_state_dir(d->cfg, d->state_dir, sizeof d->state_dir);
  if (rc == 0)
    rc = load_admin_group(d);
  if (rc != 0)
    return rc;
  d->base = event_base_new();
  if (!d->base)
    return gpum_error(GPUM_ENOMEM, "cannot create the event loop");
  d->kick = event_new(d->base, -1, 0, on_kick, d);
  d->sig_term = evsignal_new(d->base, SIGTERM, on_stop_signal, d);
  d->sig_int = evsignal_new(d->base, SIGINT, on_stop_signal, d);
  d->sig_hup = evsignal_new(d->base, SIGHUP, on_hup, d);
  if (!d->kick || !d->sig_term || !d->sig_int || !d->sig_hup)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  event_add(d->sig_term, NULL);
  event_add(d->sig_int, NULL);
  event_add(d->sig_hup, NULL);
  rc = gpumd_server_start(d);
  if (rc == 0)
    rc = gpumd_devices_start(d);
  if (rc == 0)
    rc = gpumd_obs_start(d); /* before the devices run: their info reaches the alert engine */
  if (rc == 0)
    rc = gpumd_devices_run(d);
  if (rc == 0)
    rc = gpumd_engine_start(d);
  if (rc == 0)
    rc = gpumd_http_start(d);
  if (rc == 0)
    rc = gpumd_cluster_start(d);
  return rc;
}

static void stop(gpumd_t *d) {
  gpumd_cluster_stop(d);
  gpumd_sse_close_all(d); /* the event streams hold requests of the HTTP server */
  gpumd_http_stop(d);
  gpumd_devices_stop(d);
  gpumd_obs_stop(d);
  gpumd_engine_stop(d);
  gpumd_server_stop(d);
  struct event *evs[] = {d->kick, d->sig_term, d->sig_int, d->sig_hup};
  for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
    if (evs[i])
      event_free(evs[i]);
  if (d->base)
    event_base_free(d->base);
  pthread_mutex_destroy(&d->monq_lock);
}

int main(int argc, char **argv) {
  /* The cluster's refresh thread runs this gpumd again to ask Slurm (cluster.h): the answer is
   * written, and libslurm's allocations are left to the end of the process (_exit: no leak
   * report of a sanitizer build over them). */
  if (argc == 2 && !strcmp(argv[1], GPUMD_CLUSTER_QUERY_ARG))
    _exit(gpumd_cluster_query_main());
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-V")) {
      printf("gpumd %s\n", gpum_version());
      return 0;
    }
  }
  g_argc = argc;
  g_argv = argv;
  gpumd_t d;
  memset(&d, 0, sizeof d);
  d.hooks = hooks;
  d.state_lock_fd = d.socket_lock_fd = -1;
  d.mon_fds[0] = d.mon_fds[1] = -1;
  pthread_mutex_init(&d.monq_lock, NULL);
  signal(SIGPIPE, SIG_IGN);
  gpum_error_clear();
  int rc = load_config(&d.cfg, argc, argv);
  if (rc == 0)
    rc = gpum_config_apply_logging(d.cfg);
  if (rc != 0) {
    fprintf(stderr, "gpumd: configuration error: %s\n", gpum_last_error());
    gpum_config_free(d.cfg);
    pthread_mutex_destroy(&d.monq_lock);
    return 2;
  }
  gpum_config_export_sim(d.cfg);
  gpum_config_log_aliases(d.cfg, "gpumd"); /* other GPU managers' settings read, if any */
  d.start_ns = gpum__os_real_ns();
  rc = start(&d);
  if (rc != 0) {
    fprintf(stderr, "gpumd: cannot start: %s\n",
            *gpum_last_error() ? gpum_last_error() : gpum_strerror(rc));
    stop(&d);
    gpum_config_free(d.cfg);
    return 1;
  }
  const char *http = gpumd_http_addr(&d);
  printf("gpumd ready: socket=%s pid=%ld devices=%u%s%s\n", d.socket_path, (long)getpid(),
         d.device_count, http ? " http=" : "", http ? http : "");
  fflush(stdout);
  gpum_log(GPUM_LOG_INFO, "gpumd", "listening on %s, state in %s, %u devices", d.socket_path,
           d.state_dir, d.device_count);
  while (!d.stop) {
    event_base_loop(d.base, EVLOOP_ONCE);
    gpumd_end_turn(&d);
  }
  gpumd_finish_turns(&d);
  int code = d.exit_code;
  stop(&d);
  gpum_config_free(d.cfg);
  return code;
}
