/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A snapshot of the node for `gpum status`: static info, one dynamic sample and the process
 * list of each selected device, read through the device layer only, plus the state derived
 * from those reads by the monitor's single-probe classifier. Rendering is elsewhere
 * (status_render.c), so text, JSON and watch frames all show the same data.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/error.h>

#include <jansson.h>

#include "status.h"

static const char *const state_names[] = {
#define CLI__STATE_NAME(id, name, style) [CLI_STATE_##id] = name,
    CLI_DEVICE_STATES(CLI__STATE_NAME)
#undef CLI__STATE_NAME
};

static const cli_style_t state_styles[] = {
#define CLI__STATE_STYLE(id, name, style) [CLI_STATE_##id] = style,
    CLI_DEVICE_STATES(CLI__STATE_STYLE)
#undef CLI__STATE_STYLE
};

const char *cli_state_name(cli_state_t st) {
  return st < CLI_STATE_COUNT ? state_names[st] : "UNKNOWN";
}

cli_style_t cli_state_style(cli_state_t st) {
  return st < CLI_STATE_COUNT ? state_styles[st] : CLI_PLAIN;
}

_Static_assert(CLI_STATE_AVAILABLE == (int)GPUM_HEALTH_AVAILABLE &&
                   CLI_STATE_BUSY == (int)GPUM_HEALTH_BUSY &&
                   CLI_STATE_ERROR == (int)GPUM_HEALTH_ERROR &&
                   CLI_STATE_DISABLED == (int)GPUM_HEALTH_DISABLED &&
                   CLI_STATE_OVERCOMMITTED == GPUM_HEALTH_COUNT &&
                   CLI_STATE_COUNT == GPUM_HEALTH_COUNT + 1,
               "CLI_DEVICE_STATES rows must follow gpum_health_t, then OVERCOMMITTED");

const json_t *cli_gpumd_device_of(const json_t *gpumd, const cli_dev_snap_t *dev) {
  const json_t *devs = json_object_get(gpumd, "devices"), *d;
  bool by_uuid = (dev->info.valid & GPUM_INFO_UUID) && dev->info.uuid[0];
  size_t i;
  json_array_foreach(devs, i, d) {
    const char *u = json_string_value(json_object_get(d, "uuid"));
    if (by_uuid ? u && !strcmp(u, dev->info.uuid)
                : json_integer_value(json_object_get(d, "index")) == (json_int_t)dev->index)
      return d;
  }
  return NULL;
}

cli_state_t cli_gpumd_state(const json_t *gpumd, const cli_dev_snap_t *dev) {
  const char *st = json_string_value(json_object_get(cli_gpumd_device_of(gpumd, dev), "state"));
  if (st && !strcmp(st, "DISABLED"))
    return CLI_STATE_DISABLED;
  if (st && !strcmp(st, "OVERCOMMITTED"))
    return CLI_STATE_OVERCOMMITTED;
  return dev->state;
}

cli_state_t cli_state_of_health(gpum_health_t h) {
  return (unsigned)h < CLI_STATE_COUNT ? (cli_state_t)h : CLI_STATE_ERROR;
}

/* Records the first failure of the device: its code, and the device layer's detail message in
 * reason (the classifier's wording is put in front of it later). */
static void note_failure(cli_dev_snap_t *d, int rc) {
  if (d->error != 0)
    return;
  d->error = rc;
  const char *detail = gpum_last_error();
  snprintf(d->reason, sizeof d->reason, "%s", detail ? detail : "");
}

/* A read failure that makes the device unreadable (as opposed to a metric it lacks). */
static bool is_device_failure(int rc) {
  return rc != 0 && rc != GPUM_ENOTSUP && rc != GPUM_ENOSPC;
}

void cli_snapshot_classify(cli_dev_snap_t *d, const gpum_busy_thresholds_t *busy) {
  char detail[CLI_REASON_LEN], why[GPUM_HEALTH_REASON_LEN];
  snprintf(detail, sizeof detail, "%s", d->reason);
  d->reason[0] = '\0';
  if (d->error == 0 && d->info.valid == 0 && d->sample.valid == 0) {
    /* Every read "succeeded" with nothing in it: nothing about the device is known (a driver
     * that went away answers like this), which is not a device anyone can use. */
    d->error = GPUM_EIO;
    d->state = CLI_STATE_ERROR;
    snprintf(d->reason, sizeof d->reason, "the driver returned no data for this device");
    return;
  }
  gpum_health_probe_t probe = {
      .rc = d->error,
      .sample = d->sample_rc == 0 ? &d->sample : NULL,
      .memory_health = d->memhealth_rc == 0 ? &d->memhealth : NULL,
      .jobs_valid = d->procs_rc == 0,
      .jobs = (unsigned)d->nprocs,
  };
  gpum_health_t h = gpum_health_classify(&probe, busy, why, sizeof why);
  d->state = cli_state_of_health(h);
  if (h == GPUM_HEALTH_BUSY)
    d->error = 0;
  else if (h == GPUM_HEALTH_ERROR && d->error == 0)
    d->error = GPUM_EIO; /* a failed row remap: the device answers but needs service */
  if (why[0] && detail[0] && !strstr(why, detail)) {
    /* "why: detail", the detail cut to fit (why is < GPUM_HEALTH_REASON_LEN < CLI_REASON_LEN) */
    size_t n = strlen(why), room = sizeof d->reason - 1 - n - 2, k = strlen(detail);
    memcpy(d->reason, why, n);
    memcpy(d->reason + n, ": ", 2);
    memcpy(d->reason + n + 2, detail, k < room ? k : room);
    d->reason[n + 2 + (k < room ? k : room)] = '\0';
  } else if (why[0]) {
    snprintf(d->reason, sizeof d->reason, "%s", why);
  } else if (d->error != 0) {
    snprintf(d->reason, sizeof d->reason, "%s", detail[0] ? detail : gpum_strerror(d->error));
  }
}

static int read_processes(gpum_device_session_t *s, cli_dev_snap_t *d) {
  size_t cap = 16, count = 0, filled = 0;
  for (int attempt = 0; attempt < 4; attempt++) {
    gpum_process_t *p = realloc(d->procs, cap * sizeof *p);
    if (!p)
      return GPUM_ENOMEM;
    d->procs = p;
    gpum_error_clear();
    int rc = gpum_device_processes(s, d->index, d->procs, cap, &count);
    if (rc == 0) {
      d->nprocs = count;
      return 0;
    }
    if (rc != GPUM_ENOSPC)
      return rc;
    filled = cap;
    cap = count + 8; /* the list may grow between the two calls */
  }
  d->nprocs = filled; /* still growing: show what fitted */
  return 0;
}

/* How far back the per-process utilisation is taken: NVML keeps samples of some seconds and
 * takes one every fraction of a second, so this holds the newest of each busy process. */
#define PUTIL_WINDOW_US 2000000ull

int cli_snapshot_read_process_util(gpum_device_session_t *s, cli_dev_snap_t *d) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  uint64_t now_us = (uint64_t)now.tv_sec * 1000000ull + (uint64_t)now.tv_nsec / 1000ull;
  uint64_t since = now_us > PUTIL_WINDOW_US ? now_us - PUTIL_WINDOW_US : 0;
  size_t cap = d->nprocs + 8, count = 0, filled = 0;
  for (int attempt = 0; attempt < 4; attempt++) {
    gpum_process_util_t *u = realloc(d->putil, cap * sizeof *u);
    if (!u)
      return GPUM_ENOMEM;
    d->putil = u;
    gpum_error_clear();
    d->putil_rc = gpum_device_process_util(s, d->index, since, d->putil, cap, &count);
    if (d->putil_rc != GPUM_ENOSPC) {
      d->nputil = d->putil_rc == 0 ? count : 0;
      return 0;
    }
    filled = cap;
    cap = count + 8;
  }
  d->putil_rc = 0;
  d->nputil = filled; /* still growing: what fitted */
  return 0;
}

void cli_dev_snap_free(cli_dev_snap_t *d) {
  free(d->procs);
  free(d->putil);
  d->procs = NULL;
  d->putil = NULL;
  d->nprocs = d->nputil = 0;
}

int cli_snapshot_read(gpum_device_session_t *s, cli_dev_snap_t *d,
                      const gpum_busy_thresholds_t *busy) {
  d->putil_rc = GPUM_ENOTSUP;
  gpum_error_clear();
  d->info_rc = gpum_device_get_info(s, d->index, &d->info);
  if (is_device_failure(d->info_rc))
    note_failure(d, d->info_rc);
  if (d->info_rc != 0)
    d->info.valid = 0;

  gpum_error_clear();
  d->sample_rc = gpum_device_sample(s, d->index, &d->sample);
  if (is_device_failure(d->sample_rc))
    note_failure(d, d->sample_rc);
  if (d->sample_rc != 0)
    d->sample.valid = 0;

  d->memhealth_rc = GPUM_ENOTSUP;
  if (d->error == 0) {
    /* A failed row remap makes the device ERROR (it needs service); lost or reset-needing
     * devices were caught above, other failures of this read leave the state alone. */
    gpum_error_clear();
    d->memhealth_rc = gpum_device_memory_health(s, d->index, &d->memhealth);
    if (d->memhealth_rc == GPUM_ELOST || d->memhealth_rc == GPUM_ERESET)
      note_failure(d, d->memhealth_rc);
  }

  if (d->error == 0) {
    d->procs_rc = read_processes(s, d);
    if (d->procs_rc == GPUM_ENOMEM)
      return GPUM_ENOMEM;
    if (d->procs_rc == GPUM_ELOST || d->procs_rc == GPUM_ERESET)
      note_failure(d, d->procs_rc);
  } else {
    d->procs_rc = d->error;
  }
  cli_snapshot_classify(d, busy);
  return 0;
}

static void fill_header(gpum_device_session_t *s, cli_snapshot_t *out) {
  clock_gettime(CLOCK_REALTIME, &out->time);
  if (gethostname(out->hostname, sizeof out->hostname) != 0)
    snprintf(out->hostname, sizeof out->hostname, "localhost");
  out->hostname[sizeof out->hostname - 1] = '\0';
  out->backend = gpum_device_backend(s);
  const char *detail = gpum_device_backend_detail(s);
  snprintf(out->backend_detail, sizeof out->backend_detail, "%s", detail ? detail : "");
  const char *ver = gpum_device_driver_version(s);
  snprintf(out->driver_version, sizeof out->driver_version, "%s", ver ? ver : "");
  out->simulated = gpum_device_is_simulated(s);
  out->sim_node = out->simulated ? getenv("GPUM_SIM_NODE") : NULL;
  out->device_count = gpum_device_count(s);
}

int cli_snapshot_take(gpum_device_session_t *s, cli_readers_t *readers, const unsigned *sel,
                      size_t nsel, bool all, unsigned timeout_ms, cli_snapshot_t *out) {
  memset(out, 0, sizeof *out);
  fill_header(s, out);
  size_t n = all ? out->device_count : nsel;
  if (n == 0)
    return 0;
  out->devs = calloc(n, sizeof *out->devs);
  if (!out->devs)
    return GPUM_ENOMEM;
  out->ndevs = n;
  for (size_t i = 0; i < n; i++)
    out->devs[i].index = all ? (unsigned)i : sel[i];
  if (cli_readers_read(readers, out->devs, n, timeout_ms) != 0) {
    cli_snapshot_free(out);
    return GPUM_ENOMEM;
  }
  for (size_t i = 0; i < n; i++)
    if (out->devs[i].state != CLI_STATE_ERROR && out->devs[i].sample_rc == 0)
      out->nreadable++;
  return 0;
}

void cli_snapshot_free(cli_snapshot_t *snap) {
  json_decref(snap->gpumd);
  snap->gpumd = NULL;
  for (size_t i = 0; i < snap->ndevs; i++)
    cli_dev_snap_free(&snap->devs[i]);
  free(snap->devs);
  snap->devs = NULL;
  snap->ndevs = 0;
}
