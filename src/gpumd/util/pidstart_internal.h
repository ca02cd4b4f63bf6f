/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Process identity for gpumd: a pid plus its start time (field 22 of /proc/PID/stat, clock
 * ticks since boot) names one process even after the kernel reuses the pid. gpumd records
 * the start time of a reservation's owner and lease process and checks it on restart and
 * when it watches a pid lease, so that a recycled pid is not taken for the original process.
 */
#ifndef GPUMD_PIDSTART_INTERNAL_H
#define GPUMD_PIDSTART_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

/* Reads the start time of pid into *out. Returns 0; GPUM_EINVAL (pid <= 0); GPUM_ENOENT (no
 * such process); GPUM_EIO (/proc unreadable or a malformed stat line: the detail names it). */
int gpumd_pid_start_time(int32_t pid, uint64_t *out);
/* The start time of pid, or 0 when it cannot be read (0 = unknown everywhere). */
uint64_t gpumd_pid_start_or_zero(int32_t pid);
/* Whether pid is the process that had start time `start`: when /proc/PID/stat is readable,
 * it is not a zombie and (start 0 = unknown aside) its start time equals start; otherwise
 * whether kill(pid, 0) finds it. pid <= 0 is never alive. */
bool gpumd_pid_is_alive(int32_t pid, uint64_t start);

/* The state of the process pid with start time start (0: unknown) as field 3 of /proc/PID/stat
 * gives it ('R', 'S', 'D', 'T' stopped by a signal, 't' stopped by a debugger, ...), or 0 when
 * it is gone, a zombie or another process now. */
char gpumd_pid_state(int32_t pid, uint64_t start);

/* The parent of pid (its PPid in /proc, as libgpum's process lookups keep it for up to a
 * second: device/procinfo.c), or 0 when it cannot be read. */
int32_t gpumd_pid_parent(int32_t pid);

#endif /* GPUMD_PIDSTART_INTERNAL_H */
