/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A snapshot of the node for `gpum status`: static info, one dynamic sample and the process
 * list of each selected device, read through the device layer only, plus the state derived
 * from those reads. Rendering is elsewhere (status_render.c), so text, JSON and watch frames
 * all show the same data.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/error.h>

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

/* Records "message: detail" for a failed read, keeping the first failure of the device. */
static void note_failure(cli_dev_snap_t *d, int rc) {
  if (d->error != 0)
    return;
  d->error = rc;
  const char *msg = gpum_strerror(rc);
  const char *detail = gpum_last_error();
  if (detail && *detail && !strstr(detail, msg))
    snprintf(d->reason, sizeof d->reason, "%s: %s", msg, detail);
  else if (detail && *detail)
    snprintf(d->reason, sizeof d->reason, "%s", detail);
  else
    snprintf(d->reason, sizeof d->reason, "%s", msg);
}

/* A read failure that makes the device unreadable (as opposed to a metric it lacks). */
static bool is_device_failure(int rc) {
  return rc != 0 && rc != GPUM_ENOTSUP && rc != GPUM_ENOSPC;
}

void cli_snapshot_classify(cli_dev_snap_t *d) {
  d->state = CLI_STATE_AVAILABLE;
  if (d->error == 0 && d->info.valid == 0 && d->sample.valid == 0) {
    /* Every read "succeeded" with nothing in it: nothing about the device is known (a driver
     * that went away answers like this), which is not a device anyone can use. */
    d->error = GPUM_EIO;
    snprintf(d->reason, sizeof d->reason, "the driver returned no data for this device");
  }
  if (d->error == 0 && d->reason[0] == '\0')
    return;
  d->state = CLI_STATE_ERROR;
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

static int read_device(gpum_device_session_t *s, cli_dev_snap_t *d) {
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

  if (d->error == 0) {
    d->procs_rc = read_processes(s, d);
    if (d->procs_rc == GPUM_ENOMEM)
      return GPUM_ENOMEM;
    if (d->procs_rc == GPUM_ELOST || d->procs_rc == GPUM_ERESET)
      note_failure(d, d->procs_rc);
  } else {
    d->procs_rc = d->error;
  }
  cli_snapshot_classify(d);
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

int cli_snapshot_take(gpum_device_session_t *s, const unsigned *sel, size_t nsel, bool all,
                      cli_snapshot_t *out) {
  memset(out, 0, sizeof *out);
  fill_header(s, out);
  size_t n = all ? out->device_count : nsel;
  if (n == 0)
    return 0;
  out->devs = calloc(n, sizeof *out->devs);
  if (!out->devs)
    return GPUM_ENOMEM;
  out->ndevs = n;
  for (size_t i = 0; i < n; i++) {
    cli_dev_snap_t *d = &out->devs[i];
    d->index = all ? (unsigned)i : sel[i];
    if (read_device(s, d) != 0) {
      cli_snapshot_free(out);
      return GPUM_ENOMEM;
    }
    if (d->state != CLI_STATE_ERROR)
      out->nreadable++;
  }
  return 0;
}

void cli_snapshot_free(cli_snapshot_t *snap) {
  for (size_t i = 0; i < snap->ndevs; i++)
    free(snap->devs[i].procs);
  free(snap->devs);
  snap->devs = NULL;
  snap->ndevs = 0;
}
