/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Process identity for gpumd (see pidstart_internal.h): reads a process's state and start
 * time from /proc/PID/stat and decides whether a pid still names the process recorded with
 * a reservation, so that a pid reused by the kernel after a restart counts as dead.
 */
#include "pidstart_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/error.h>

/* Reads state (field 3) and start time (field 22) of pid. Returns 0, GPUM_ENOENT or
 * GPUM_EIO. */
static int read_stat(int32_t pid, char *state, uint64_t *start) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT || errno == ESRCH
               ? gpum_error(GPUM_ENOENT, "process %d does not exist", (int)pid)
               : gpum_error(GPUM_EIO, "cannot open %s: %s", path, strerror(errno));
  ssize_t got = read(fd, buf, sizeof buf - 1);
  int err = errno;
  close(fd);
  if (got < 0 && err == ESRCH)
    return gpum_error(GPUM_ENOENT, "process %d does not exist", (int)pid);
  if (got <= 0)
    return gpum_error(GPUM_EIO, "cannot read %s: %s", path, got < 0 ? strerror(err) : "empty");
  buf[got] = '\0';
  /* The command name may hold spaces and ')': the fields resume after the last ')'. */
  char *p = strrchr(buf, ')');
  if (p == NULL || p[1] != ' ' || p[2] == '\0')
    return gpum_error(GPUM_EIO, "%s: malformed line", path);
  p += 2;
  *state = *p;
  for (int field = 3; field < 22; field++) { /* p is at field 3; move on to field 22 */
    p = strchr(p, ' ');
    if (p == NULL)
      return gpum_error(GPUM_EIO, "%s: fewer than 22 fields", path);
    p++;
  }
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(p, &end, 10);
  if (end == p || errno != 0 || (*end != ' ' && *end != '\n' && *end != '\0'))
    return gpum_error(GPUM_EIO, "%s: field 22 is not a start time", path);
  *start = (uint64_t)v;
  return 0;
}

int gpumd_pid_start_time(int32_t pid, uint64_t *out) {
  char state;
  if (pid <= 0)
    return gpum_error(GPUM_EINVAL, "pid %d is not a process id", (int)pid);
  return read_stat(pid, &state, out);
}

uint64_t gpumd_pid_start_or_zero(int32_t pid) {
  uint64_t start = 0;
  return gpumd_pid_start_time(pid, &start) == 0 ? start : 0;
}

bool gpumd_pid_is_alive(int32_t pid, uint64_t start) {
  char state;
  uint64_t now_start;
  if (pid <= 0)
    return false;
  if (read_stat(pid, &state, &now_start) == 0)
    return state != 'Z' && state != 'X' && (start == 0 || start == now_start);
  /* Gone, or /proc hides it (hidepid) or is unusable: kill(pid, 0) tells which. */
  return kill(pid, 0) == 0 || errno == EPERM;
}
