/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The OS layer of os_internal.h: clocks and /proc/PID/stat. Also compiled into libgpum_sim
 * (src/sim/CMakeLists.txt), so it uses nothing else of libgpum.
 */
#include "os_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t gpum__os_mono_ns(void) {
  return clock_ns(CLOCK_MONOTONIC);
}

uint64_t gpum__os_mono_ms(void) {
  return clock_ns(CLOCK_MONOTONIC) / 1000000u;
}

uint64_t gpum__os_real_ns(void) {
  return clock_ns(CLOCK_REALTIME);
}

int gpum__os_cond_init_mono(pthread_cond_t *cond) {
  pthread_condattr_t ca;
  int rc = pthread_condattr_init(&ca);
  if (rc != 0)
    return rc;
  rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (rc == 0)
    rc = pthread_cond_init(cond, &ca);
  pthread_condattr_destroy(&ca);
  return rc;
}

struct timespec gpum__os_mono_timespec(uint64_t deadline_ns) {
  return (struct timespec){(time_t)(deadline_ns / 1000000000u), (long)(deadline_ns % 1000000000u)};
}

long gpum__os_read_file(const char *path, char *buf, size_t len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  size_t got = 0;
  int err = 0;
  while (got + 1 < len) {
    ssize_t r = read(fd, buf + got, len - 1 - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      err = errno;
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  close(fd);
  buf[got] = '\0';
  return got == 0 && err != 0 ? -err : (long)got;
}

/* The number at p (a field), ending at a space, newline or the end. */
static int field_u64(const char *p, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(p, &end, 10);
  if (end == p || errno != 0 || (*end != ' ' && *end != '\n' && *end != '\0'))
    return -EINVAL;
  *out = (uint64_t)v;
  return 0;
}

int gpum__os_parse_proc_stat(const char *text, gpum__os_proc_stat_t *out) {
  const char *p = strrchr(text, ')');
  if (p == NULL || p[1] != ' ' || p[2] == '\0')
    return -EINVAL;
  p += 2; /* field 3 */
  out->state = *p;
  uint64_t ppid = 0;
  for (int field = 4; field <= 22; field++) { /* p moves on to this field */
    p = strchr(p, ' ');
    if (p == NULL)
      return -EINVAL;
    p++;
    if (field == 4 && (field_u64(p, &ppid) != 0 || ppid > 0x7fffffff))
      return -EINVAL;
  }
  out->ppid = (int)ppid;
  return field_u64(p, &out->start_time);
}

int gpum__os_proc_stat(int pid, gpum__os_proc_stat_t *out) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  long got = gpum__os_read_file(path, buf, sizeof buf);
  if (got == -ENOENT || got == -ESRCH)
    return -ENOENT;
  if (got <= 0)
    return got < 0 ? (int)got : -EINVAL;
  return gpum__os_parse_proc_stat(buf, out);
}
