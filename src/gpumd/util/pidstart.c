/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Process identity for gpumd (see pidstart_internal.h): reads a process's state and start
 * time from /proc/PID/stat and decides whether a pid still names the process recorded with
 * a reservation, so that a pid reused by the kernel after a restart counts as dead.
 */
#include "pidstart_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <gpum/error.h>

#include "device/device_internal.h"
#include "os_internal.h"

/* Reads state (field 3) and start time (field 22) of pid through the OS layer. Returns 0,
 * GPUM_ENOENT or GPUM_EIO. */
static int read_stat(int32_t pid, char *state, uint64_t *start) {
  gpum__os_proc_stat_t st;
  int rc = gpum__os_proc_stat((int)pid, &st);
  if (rc == -ENOENT)
    return gpum_error(GPUM_ENOENT, "process %d does not exist", (int)pid);
  if (rc != 0)
    return gpum_error(GPUM_EIO, "cannot read /proc/%d/stat: %s", (int)pid,
                      rc == -EINVAL ? "malformed line" : strerror(-rc));
  *state = st.state;
  *start = st.start_time;
  return 0;
}

int gpumd_pid_start_time(int32_t pid, uint64_t *out) {
  char state = 0;
  if (pid <= 0)
    return gpum_error(GPUM_EINVAL, "pid %d is not a process id", (int)pid);
  return read_stat(pid, &state, out);
}

uint64_t gpumd_pid_start_or_zero(int32_t pid) {
  uint64_t start = 0;
  return gpumd_pid_start_time(pid, &start) == 0 ? start : 0;
}

bool gpumd_pid_is_alive(int32_t pid, uint64_t start) {
  char state = 0;
  uint64_t now_start = 0;
  if (pid <= 0)
    return false;
  if (read_stat(pid, &state, &now_start) == 0)
    return state != 'Z' && state != 'X' && (start == 0 || start == now_start);
  /* Gone, or /proc hides it (hidepid) or is unusable: kill(pid, 0) tells which. */
  return kill(pid, 0) == 0 || errno == EPERM;
}

char gpumd_pid_state(int32_t pid, uint64_t start) {
  char state = 0;
  uint64_t now_start = 0;
  if (pid <= 0 || read_stat(pid, &state, &now_start) != 0 || state == 'Z' || state == 'X' ||
      (start != 0 && start != now_start))
    return 0;
  return state;
}

int32_t gpumd_pid_parent(int32_t pid) {
  unsigned ppid;
  return pid > 0 && gpum__proc_parent((unsigned)pid, &ppid) == 0 && ppid <= INT32_MAX
             ? (int32_t)ppid
             : 0;
}
