/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The process lists behind "unmanaged" memory (memory used by processes that hold no
 * reservation), each device's read on a thread of its own with a device session of its own:
 * a driver call that hangs (a sick GPU, the simulated driver's --slow) must never stall the
 * daemon's loop, nor the lists of the other devices (with one thread for all, a hung device
 * left every device's unmanaged memory stale, and admission over-granting). Every monitor
 * interval each reader (libgpum's hang-safe device readers, periodic) reads its device's list;
 * the loop copies the newest one; before a grant gpumd asks them all for a read at once
 * (gpumd_procs_read_all) and decides on that: read by one thread for all devices while the
 * driver answers fast (the readers' sweep), by each device's reader when it does not. A reader
 * stuck in a call at stop is left behind.
 */
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>

#include <gpum/device.h>
#include <gpum/error.h>

#include "devices.h"
#include "device/device_internal.h"
#include "gpumd.h"
#include "os_internal.h"
#include "users.h"
#include "utf8_internal.h"

/* The uid owning pid, from /proc (GPUMD_PROC_NO_UID when it is not visible here: another PID
 * namespace, or gone), as libgpum's process list read it (kept a second per pid). Never a name
 * lookup: names come from the users cache, on the loop's side. */
static uint32_t uid_of(unsigned pid) {
  unsigned uid;
  return gpum__proc_uid(pid, &uid) == 0 ? uid : GPUMD_PROC_NO_UID;
}

#define GPUMD_USERS_CACHE 256 /* uids whose names are kept */

/* One device's list, as a reader reads it (flat: copied out by gpumd_procs_get). */
static int read_list(gpum_device_session_t *s, unsigned index, const void *request, void *result,
                     void *user) {
  (void)request, (void)user;
  gpumd_procs_t *p = result;
  if (s == NULL)
    return GPUM_EDRIVER;
  /* Not zeroed: gpum_device_processes clears every entry it fills, and only those are read
   * (zeroing all 128 cost more than the read itself, at every grant decision). */
  gpum_process_t *procs = malloc(GPUMD_MAX_PROCS * sizeof *procs);
  if (procs == NULL)
    return GPUM_ENOMEM;
  size_t n = 0;
  /* The device's memory (used, and what the driver keeps), then its processes. */
  gpum_device_sample_t smp;
  if (gpum_device_sample(s, index, &smp) == 0) {
    uint32_t mem = 1u << GPUM_METRIC_MEMORY_TOTAL | 1u << GPUM_METRIC_MEMORY_USED |
                   1u << GPUM_METRIC_MEMORY_FREE | 1u << GPUM_METRIC_MEMORY_RESERVED;
    p->sample.timestamp_ns = smp.timestamp_ns;
    p->sample.valid = smp.valid & mem;
    p->sample.memory_total = smp.memory_total;
    p->sample.memory_used = smp.memory_used;
    p->sample.memory_free = smp.memory_free;
    p->sample.memory_reserved = smp.memory_reserved;
  }
  snprintf(p->driver_version, sizeof p->driver_version, "%s", gpum_device_driver_version(s));
  /* No names: the users cache gives them, never blocking this read (admission waits for it). */
  int rc =
      gpum_device_processes_flags(s, index, procs, GPUMD_MAX_PROCS, &n, GPUM_PROCESSES_NO_USER);
  p->valid = rc == 0 || rc == GPUM_ENOSPC;
  for (size_t i = 0; p->valid && i < n && i < GPUMD_MAX_PROCS; i++) {
    if (!procs[i].memory_valid)
      continue;
    p->pid[p->count] = procs[i].pid;
    p->memory[p->count] = procs[i].memory;
    p->uid[p->count] = uid_of(procs[i].pid);
    /* Cut to what is shown, valid UTF-8 (a JSON string holds it). */
    gpumd_utf8_clean(procs[i].command, p->command[p->count], sizeof p->command[0]);
    p->count++;
  }
  free(procs);
  return p->valid ? 0 : rc;
}

/* The bytes of a list that hold it: everything before the command lines, and those used. */
static size_t list_len(const void *result, void *user) {
  (void)user;
  const gpumd_procs_t *p = result;
  size_t n = p->count < GPUMD_MAX_PROCS ? p->count : GPUMD_MAX_PROCS;
  return offsetof(gpumd_procs_t, command) + n * sizeof p->command[0];
}

int gpumd_procs_start(gpumd_t *d, const gpum_device_open_opts_t *dopts, unsigned interval_ms) {
  unsigned idx[GPUMD_MAX_DEVICES];
  for (unsigned i = 0; i < d->device_count; i++)
    idx[i] = d->devices[i].index;
  gpum_device_readers_opts_t o = {.device = *dopts,
                                  .result_size = sizeof(gpumd_procs_t),
                                  .read = read_list,
                                  .result_len = list_len,
                                  .interval_ms = interval_ms ? interval_ms : 1000};
  int rc = d->users ? 0 : gpumd_users_new(GPUMD_USERS_CACHE, &d->users);
  return rc ? rc : gpum_device_readers_start(&o, idx, d->device_count, &d->procs);
}

void gpumd_procs_stop(gpumd_t *d) {
  gpum_device_readers_stop(d->procs);
  d->procs = NULL;
  gpumd_users_free(d->users);
  d->users = NULL;
}

int gpumd_procs_get(gpumd_t *d, unsigned index, gpumd_procs_t *out) {
  if (!d->procs)
    return GPUM_ENOENT;
  int rc = gpum_device_readers_latest(d->procs, index, out);
  if (rc == GPUM_ENODEV)
    return rc;
  return rc == 0 && out->valid ? 0 : GPUM_ENOENT;
}

int gpumd_procs_read_all(gpumd_t *d, unsigned timeout_ms, int *rcs) {
  if (!d->procs)
    return GPUM_ENOENT;
  static gpumd_procs_t res[GPUMD_MAX_DEVICES]; /* loop thread only; too big for the stack */
  unsigned idx[GPUMD_MAX_DEVICES];
  for (unsigned i = 0; i < d->device_count; i++)
    idx[i] = d->devices[i].index;
  int rc = gpum_device_readers_read(d->procs, idx, d->device_count, timeout_ms, res, rcs);
  if (rc != 0)
    for (unsigned i = 0; i < d->device_count; i++)
      rcs[i] = rc;
  for (unsigned i = 0; i < d->device_count; i++)
    if (rcs[i] == 0 && !res[i].valid)
      rcs[i] = GPUM_EDRIVER;
  return 0;
}
