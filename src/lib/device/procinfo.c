/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who runs a process: the user name and the command line of a pid, read from /proc, so that
 * the per-process GPU memory the driver reports can be shown as gpustat and nvitop show it.
 * A pid that is not visible here (another PID namespace, already exited) gets empty strings:
 * NVML reports host pids, which a container may not see.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/error.h>

#include "device/device_internal.h"
#include "os_internal.h"

int gpum__parse_status_uid(const char *status, unsigned *uid) {
  const char *p = status;
  while (p && *p) {
    if (!strncmp(p, "Uid:", 4)) {
      char *end;
      errno = 0;
      unsigned long v = strtoul(p + 4, &end, 10);
      if (errno || end == p + 4 || v > 0xFFFFFFFFul ||
          (*end != '\t' && *end != ' ' && *end != '\n' && *end != '\0'))
        return gpum_error(GPUM_EPARSE, "bad Uid line in /proc status");
      *uid = (unsigned)v;
      return 0;
    }
    p = strchr(p, '\n');
    if (p)
      p++;
  }
  return gpum_error(GPUM_EPARSE, "no Uid line in /proc status");
}

void gpum__cmdline_to_string(const char *buf, size_t n, char *out, size_t outlen) {
  if (!outlen)
    return;
  while (n > 0 && buf[n - 1] == '\0')
    n--;
  size_t o = 0;
  for (size_t i = 0; i < n && o + 1 < outlen; i++) {
    unsigned char c = (unsigned char)buf[i];
    out[o++] = c == '\0' ? ' ' : (c < 0x20 || c == 0x7f) ? '?' : (char)c;
  }
  out[o] = '\0';
}

/* Reads up to len-1 bytes of a small /proc file; returns the byte count or -1. */
static ssize_t read_small(const char *path, char *buf, size_t len) {
  long got = gpum__os_read_file(path, buf, len);
  return got < 0 ? -1 : (ssize_t)got;
}

static void uid_to_name(unsigned uid, char *user, size_t ulen) {
  struct passwd pw, *res = NULL;
  char buf[1024];
  if (getpwuid_r((uid_t)uid, &pw, buf, sizeof buf, &res) == 0 && res && res->pw_name)
    snprintf(user, ulen, "%s", res->pw_name);
  else
    snprintf(user, ulen, "%u", uid);
}

void gpum__proc_identity(unsigned pid, char *user, size_t ulen, char *cmd, size_t clen) {
  char path[64], buf[4096];
  if (ulen)
    user[0] = '\0';
  if (clen)
    cmd[0] = '\0';
  if (pid == 0)
    return;
  if (ulen > 0) { /* ulen 0: no name asked, none looked up (NSS may block: LDAP, SSSD) */
    snprintf(path, sizeof path, "/proc/%u/status", pid);
    unsigned uid;
    if (read_small(path, buf, sizeof buf) <= 0 || gpum__parse_status_uid(buf, &uid) != 0) {
      gpum_error_clear();
      return; /* not visible here */
    }
    uid_to_name(uid, user, ulen);
  }
  snprintf(path, sizeof path, "/proc/%u/cmdline", pid);
  ssize_t n = read_small(path, buf, sizeof buf);
  if (n > 0)
    gpum__cmdline_to_string(buf, (size_t)n, cmd, clen);
  if (clen && cmd[0] == '\0') {
    snprintf(path, sizeof path, "/proc/%u/comm", pid);
    n = read_small(path, buf, sizeof buf);
    if (n > 0) {
      while (n > 0 && isspace((unsigned char)buf[n - 1]))
        n--;
      gpum__cmdline_to_string(buf, (size_t)n, cmd, clen);
    }
  }
}

bool gpum__is_mps_server(const char *command) {
  static const char name[] = "nvidia-cuda-mps-server";
  if (!command)
    return false;
  size_t n = strcspn(command, " ");
  const char *base = command;
  for (size_t k = 0; k < n; k++)
    if (command[k] == '/')
      base = command + k + 1;
  size_t blen = n - (size_t)(base - command);
  return blen == sizeof name - 1 && !memcmp(base, name, blen);
}
