/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The device bridge (devices.c, procs.c): the monitor's devices, their samples and process
 * lists, on the loop. Its news go up through d->hooks.
 */
#ifndef GPUMD_DEVICES_H
#define GPUMD_DEVICES_H

#include "gpumd.h"

/* Starts a process-list thread per device (each with a session opened with dopts; a device
 * without one: its unmanaged memory is not counted, logged). Returns 0 or GPUM_ENOMEM. */
int gpumd_procs_start(gpumd_t *d, const gpum_device_open_opts_t *dopts, unsigned interval_ms);
void gpumd_procs_stop(gpumd_t *d);
/* Copies device index's newest process list. Returns 0, GPUM_ENOENT (none yet or unreadable)
 * or GPUM_ENODEV. */
int gpumd_procs_get(gpumd_t *d, unsigned index, gpumd_procs_t *out);
/* Reads every device's process list and memory afresh (reads that begin now), waiting up to
 * timeout_ms; rcs[i] is 0, or GPUM_ETIMEDOUT / the read's error for d->devices[i]. The results
 * are also each device's newest (gpumd_procs_get). Returns 0 or GPUM_ENOENT (no readers). */
int gpumd_procs_read_all(gpumd_t *d, unsigned timeout_ms, int *rcs);
/* Creates the monitor and learns the devices it has (d->devices, d->device_count). */
int gpumd_devices_start(gpumd_t *d);
/* Starts the monitor and the process-list threads, then waits up to monitor.start_timeout for
 * the devices' static info; a device still silent is left !answered (unusable until its info
 * arrives). From here on the monitor's news reach d->hooks. */
int gpumd_devices_run(gpumd_t *d);
void gpumd_devices_stop(gpumd_t *d);
gpumd_device_t *gpumd_device_find(gpumd_t *d, unsigned index);
/* The device's newest sample into s when it is still a measurement: taken within the last
 * three monitor intervals (at least 5 s), and the device not in ERROR for being gone or hung.
 * False when its values are no longer measured (a lost GPU keeps its last sample). */
bool gpumd_device_measured(gpumd_t *d, unsigned index, gpum_device_sample_t *s);

#endif /* GPUMD_DEVICES_H */
