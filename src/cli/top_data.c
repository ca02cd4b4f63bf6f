/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The data of `gpum top`'s frames (top.h): the devices as `gpum status` reads them (the same
 * snapshot, its readers kept across refreshes so a device stuck in a driver call stays one
 * ERROR row instead of a new hung thread each time; they also read each process's GPU
 * utilisation), the processes' CPU, host memory, run time and owner from /proc (top_proc.c),
 * and gpumd's view when it runs: its status (per-GPU reserved bytes, the operator's DISABLED
 * switch), every reservation (queued ones with their position, the shim's figures, workload
 * reports) and the last alerts. A gpumd that does not answer within GPUMD_TIMEOUT_MS is shown
 * as not running; the devices still are.
 *
 * The live screen keeps its connection to gpumd and watches gpumd's events on it (the watch op,
 * every type but samples): cmd_top.c polls its fd, and an event makes it read gpumd's part
 * again at once rather than at the next refresh. A connection that closes (gpumd stopped or
 * restarted) is dropped and made again when gpumd answers.
 */
#include <stdlib.h>
#include <string.h>

#include <gpum/client.h>
#include <gpum/clock.h>
#include <gpum/error.h>

#include "cli.h"
#include "client_cli.h"
#include "top.h"

#define GPUMD_TIMEOUT_MS 500
#define ALERTS_SHOWN "{\"limit\": 20}"

static void drop_client(top_source_t *src);

int top_source_init(top_source_t *src, const gpum_config_t *cfg) {
  memset(src, 0, sizeof *src);
  src->cfg = cfg;
  src->pinned = GPUM_BACKEND_AUTO;
  const char *devices = gpum_config_get_string(cfg, "devices");
  src->all = !devices || !*devices;
  if (gpum_device_list_parse(devices, src->sel, TOP_MAX_DEVICES, &src->nsel) != 0)
    return GPUM_EINVAL;
  gpum_busy_thresholds_from_config(cfg, &src->busy);
  src->timeout_ms = cli_status_timeout_ms(cfg);
  if (gpum_socket_path(cfg, src->socket, sizeof src->socket) != 0)
    src->socket[0] = '\0';
  gpum_error_clear();
  return 0;
}

void top_source_close(top_source_t *src) {
  drop_client(src);
  cli_readers_free(src->readers);
  src->readers = NULL;
  if (src->session)
    gpum_device_close(src->session);
  src->session = NULL;
}

/* Whether a device of snap did not answer in time (its reader is in a call that hangs). */
static bool any_stuck(const cli_snapshot_t *snap) {
  for (size_t i = 0; i < snap->ndevs; i++)
    if (snap->devs[i].error == GPUM_ETIMEDOUT)
      return true;
  return false;
}

static void fetch_devices(top_source_t *src, top_data_t *d) {
  if (src->session == NULL) {
    /* Once a backend worked, stay with it: GPUs that go away are shown as such rather than
     * replaced by the host fallback that "auto" would pick. */
    int rc = cli_open_session_as(src->cfg, src->pinned, &src->session);
    if (rc == 0) {
      src->pinned = gpum_device_backend(src->session);
      if (!src->readers &&
          cli_readers_start_with(src->cfg, src->pinned, &src->busy, true, &src->readers))
        rc = GPUM_ENOMEM;
    }
    if (rc != 0) {
      snprintf(d->snap_error, sizeof d->snap_error, "cannot read any device: %s", cli_reason(rc));
      if (src->session)
        gpum_device_close(src->session);
      src->session = NULL;
      gpum_error_clear();
      return;
    }
  }
  unsigned count = gpum_device_count(src->session);
  for (size_t i = 0; i < src->nsel; i++) {
    if (src->sel[i] >= count) {
      snprintf(d->snap_error, sizeof d->snap_error, "device %u does not exist (%u found)",
               src->sel[i], count);
      return;
    }
  }
  int rc = cli_snapshot_take(src->session, src->readers, src->sel, src->nsel, src->all,
                             src->timeout_ms, &d->snap);
  if (rc != 0) {
    snprintf(d->snap_error, sizeof d->snap_error, "%s", gpum_strerror(rc));
    return;
  }
  d->have_snap = true;
  if (d->snap.nreadable == 0) { /* reopen next time: the driver may come back */
    gpum_device_close(src->session);
    src->session = NULL;
    if (!any_stuck(&d->snap)) { /* new readers would hang as well */
      cli_readers_free(src->readers);
      src->readers = NULL;
    }
  }
}

/* Every node event means that something gpumd shows may have changed. */
static void on_event(const gpum_client_event_t *ev, void *user) {
  top_source_t *src = user;
  if (ev->kind == GPUM_CLIENT_EV_NODE)
    src->changed = true;
}

static void drop_client(top_source_t *src) {
  gpum_client_close(src->client);
  src->client = NULL;
  src->watching = false;
}

/* A connection to gpumd, or NULL when it does not answer. The live screen's is kept and watches
 * gpumd's events (a gpumd that refuses the watch, having too many watchers, is still read every
 * refresh); --once connects for each read. */
static gpum_client_t *connect_gpumd(top_source_t *src) {
  if (src->client)
    return src->client;
  gpum_client_t *c = NULL;
  if (src->socket[0] == '\0' || gpum_client_connect(src->socket, GPUMD_TIMEOUT_MS, &c) != 0)
    return NULL;
  if (src->live) {
    gpum_client_set_event_cb(c, on_event, src);
    int rc = gpum_client_watch(c, GPUM_WATCH_DEFAULT, NULL);
    if (rc == GPUM_ECLOSED || rc == GPUM_ETIMEDOUT) {
      gpum_client_close(c);
      return NULL;
    }
    src->watching = rc == 0;
    src->client = c;
  }
  return c;
}

static void fetch_gpumd(top_source_t *src, top_data_t *d) {
  json_decref(d->status);
  json_decref(d->reservations);
  json_decref(d->alerts);
  d->status = d->reservations = d->alerts = NULL;
  /* Events that arrive while it is read may or may not be in what is read: they ask again. */
  src->changed = false;
  gpum_client_t *c = connect_gpumd(src);
  json_t *list = c ? cli_gpumd_list_all(c) : NULL; /* every page */
  if (list) {
    d->reservations = json_incref(json_object_get(list, "reservations"));
    d->status = cli_gpumd_ask(c, "status", NULL);
    d->alerts = cli_gpumd_ask(c, "alerts", ALERTS_SHOWN);
  }
  json_decref(list);
  d->gpumd = json_is_array(d->reservations);
  bool whole = d->gpumd && d->status && d->alerts;
  if (c && !whole && src->client) /* gone or stuck: connect afresh next time */
    drop_client(src);
  else if (c && !src->live)
    gpum_client_close(c);
  gpum_error_clear();
}

/* Looks up the names of the reservations' owners now, so that the frame finds them in d's
 * cache (each uid once for the life of the screen). */
static void name_owners(top_data_t *d) {
  size_t i;
  const json_t *r;
  json_array_foreach(d->reservations, i, r) {
    top_uid_name(d, (int64_t)json_integer_value(json_object_get(r, "uid")));
  }
}

void top_fetch(top_source_t *src, top_data_t *d) {
  top_data_clear(d);
  d->snap_error[0] = '\0';
  snprintf(d->socket, sizeof d->socket, "%s", src->socket);
  fetch_devices(src, d);
  top_history_add(d);
  top_procs_read(d);
  fetch_gpumd(src, d);
  name_owners(d);
  d->now_ns = gpum_clock_real_ns();
}

void top_fetch_gpumd(top_source_t *src, top_data_t *d) {
  fetch_gpumd(src, d);
  name_owners(d);
  d->now_ns = gpum_clock_real_ns();
}

int top_gpumd_fd(const top_source_t *src) {
  return src->client && src->watching ? gpum_client_fd(src->client) : -1;
}

void top_gpumd_events(top_source_t *src) {
  if (!src->client)
    return;
  int rc = gpum_client_process(src->client, 0);
  if (rc < 0) { /* gpumd went away (or spoke nonsense): show it, then connect again */
    drop_client(src);
    src->changed = true;
  }
  gpum_error_clear();
}

int top_release(const top_source_t *src, const char *id, char *msg, size_t len) {
  gpum_client_t *c = NULL;
  int rc = gpum_client_connect(src->socket[0] ? src->socket : NULL, 2000, &c);
  if (rc == 0) {
    gpum_reservation_t r;
    rc = gpum_client_release(c, id, &r);
    if (rc == 0)
      snprintf(msg, len, "%s %s", r.id, gpum_res_state_name(r.state));
    gpum_client_close(c);
  }
  if (rc != 0)
    snprintf(msg, len, "release %s: %s", id, cli_reason(rc));
  gpum_error_clear();
  return rc;
}
