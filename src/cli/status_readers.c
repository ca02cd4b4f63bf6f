/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device readers for `gpum status` (status.h), over libgpum's hang-safe readers
 * (gpum_device_readers_*): each selected device is read on a thread of its own, with a device
 * session of its own, so that a device whose driver calls hang (a GPU that stopped answering:
 * nvidia-smi hangs with it) holds up only its own row, and only for status.timeout; the row
 * then says the device does not answer. A reader stuck in a call is asked again only once the
 * call returns (a watch keeps showing it as not answering), and is left behind at exit: the
 * process ends it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>

#include "cli.h"
#include "status.h"

struct cli_readers {
  gpum_device_readers_t *rs;
};

/* The busy thresholds the readers classify with. Static: a reader left behind in a hung call
 * may still use them after cli_readers_free, until the process ends (one set per process). */
static gpum_busy_thresholds_t busy_rules;
/* Whether a read also takes the per-process GPU utilisation (gpum top). Static for the same
 * reason. */
static bool read_process_util;

/* A device that cannot be read at all: an ERROR row with the reason. */
static void unreadable(cli_dev_snap_t *d, unsigned index, int err, const char *why) {
  cli_dev_snap_free(d);
  memset(d, 0, sizeof *d);
  d->index = index;
  d->error = err;
  d->info_rc = d->sample_rc = d->memhealth_rc = d->procs_rc = err;
  d->putil_rc = GPUM_ENOTSUP;
  d->state = CLI_STATE_ERROR;
  snprintf(d->reason, sizeof d->reason, "%s", why);
}

static int read_device(gpum_device_session_t *s, unsigned index, const void *request, void *result,
                       void *user) {
  (void)request, (void)user;
  cli_dev_snap_t *d = result;
  d->index = index;
  if (s == NULL) {
    char why[CLI_REASON_LEN];
    snprintf(why, sizeof why, "cannot open a device session: %s", cli_reason(GPUM_EDRIVER));
    unreadable(d, index, GPUM_EDRIVER, why);
    return 0;
  }
  int rc = cli_snapshot_read(s, d, &busy_rules);
  if (rc == 0 && read_process_util && d->error == 0 && d->nprocs > 0)
    rc = cli_snapshot_read_process_util(s, d);
  if (rc != 0)
    unreadable(d, index, rc, gpum_strerror(rc));
  return 0;
}

static void free_device(void *result, void *user) {
  (void)user;
  cli_dev_snap_free(result);
}

int cli_readers_start(const gpum_config_t *cfg, gpum_backend_kind_t backend,
                      const gpum_busy_thresholds_t *busy, cli_readers_t **out) {
  return cli_readers_start_with(cfg, backend, busy, false, out);
}

int cli_readers_start_with(const gpum_config_t *cfg, gpum_backend_kind_t backend,
                           const gpum_busy_thresholds_t *busy, bool process_util,
                           cli_readers_t **out) {
  cli_readers_t *cr = calloc(1, sizeof *cr);
  if (!cr)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  gpum_device_readers_opts_t o = {
      .result_size = sizeof(cli_dev_snap_t), .read = read_device, .result_free = free_device};
  int rc = gpum_device_opts_from_config(cfg, &o.device);
  if (rc == 0) {
    if (backend != GPUM_BACKEND_AUTO)
      o.device.backend = backend;
    busy_rules = *busy;
    read_process_util = process_util;
    rc = gpum_device_readers_start(&o, NULL, 0, &cr->rs);
  }
  if (rc != 0) {
    free(cr);
    return rc;
  }
  *out = cr;
  return 0;
}

int cli_readers_read(cli_readers_t *cr, cli_dev_snap_t *devs, size_t n, unsigned timeout_ms) {
  unsigned *idx = calloc(n ? n : 1, sizeof *idx);
  int *rcs = calloc(n ? n : 1, sizeof *rcs);
  cli_dev_snap_t *got = calloc(n ? n : 1, sizeof *got);
  int rc = idx && rcs && got ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
  for (size_t i = 0; rc == 0 && i < n; i++)
    idx[i] = devs[i].index;
  if (rc == 0)
    rc = gpum_device_readers_read(cr->rs, idx, n, timeout_ms, got, rcs);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    if (rcs[i] != GPUM_ETIMEDOUT) {
      devs[i] = got[i]; /* its process list goes with it */
      continue;
    }
    char why[CLI_REASON_LEN];
    snprintf(why, sizeof why,
             "no answer within %u ms: a driver call on this device does not return "
             "(status.timeout)",
             timeout_ms);
    devs[i].procs = NULL; /* the caller's, not freed here */
    devs[i].putil = NULL;
    unreadable(&devs[i], devs[i].index, GPUM_ETIMEDOUT, why);
  }
  free(idx);
  free(rcs);
  free(got);
  return rc;
}

void cli_readers_free(cli_readers_t *cr) {
  if (!cr)
    return;
  gpum_device_readers_stop(cr->rs);
  free(cr);
}
