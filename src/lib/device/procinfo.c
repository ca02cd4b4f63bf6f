/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who runs a process: the user name and the command line of a pid, read from /proc, so that
 * the per-process GPU memory the driver reports can be shown as gpustat and nvitop show it.
 * A pid that is not visible here (another PID namespace, already exited) gets empty strings:
 * NVML reports host pids, which a container may not see.
 *
 * What was read of a pid (its uid, parent and command line) is kept for a second
 * (GPUM__PROC_TTL_NS): reading /proc/PID/status and cmdline costs about 14 us a process on a
 * small VM, and gpumd looks at every GPU process (and its ancestors, for the reservation it
 * belongs to) in the fresh read before each grant decision, so a node with 64 GPU processes
 * spent milliseconds of each reserve's turn on /proc. A process's uid and command line do not
 * change while it runs (an exec, or a program that rewrites its argv, shows within the
 * second); its parent changes only when the parent exits (it is then re-parented), which shows
 * within the second: until then the old parent is gone, and a chain of ancestors through it
 * ends there. A pid reused by a new process within the second shows the old one's identity.
 * A direct-mapped table of 256 pids, under a mutex held only to copy an entry in or out; a
 * lookup that finds another pid's entry reads /proc as before.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/error.h>

#include "device/device_internal.h"
#include "os_internal.h"

/* The first number of the line of /proc/PID/status that starts with name ("Uid:"). */
static int status_field(const char *status, const char *name, unsigned *out) {
  size_t len = strlen(name);
  const char *p = status;
  while (p && *p) {
    if (!strncmp(p, name, len)) {
      char *end;
      errno = 0;
      unsigned long v = strtoul(p + len, &end, 10);
      if (errno || end == p + len || v > 0xFFFFFFFFul ||
          (*end != '\t' && *end != ' ' && *end != '\n' && *end != '\0'))
        return gpum_error(GPUM_EPARSE, "bad %s line in /proc status", name);
      *out = (unsigned)v;
      return 0;
    }
    p = strchr(p, '\n');
    if (p)
      p++;
  }
  return gpum_error(GPUM_EPARSE, "no %s line in /proc status", name);
}

int gpum__parse_status_uid(const char *status, unsigned *uid) {
  return status_field(status, "Uid:", uid);
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

#define PROC_SLOTS 256

typedef struct {
  unsigned pid;     /* 0: empty */
  uint64_t read_ns; /* when /proc was read (monotonic) */
  bool visible;     /* /proc/PID/status was readable */
  unsigned uid;     /* when visible */
  unsigned ppid;    /* when visible; 0 when status has none */
  bool named;       /* user holds the uid's name */
  char user[GPUM_USER_LEN];
  char cmd[GPUM_COMMAND_LEN];
} proc_entry_t;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static proc_entry_t cache[PROC_SLOTS];
static uint64_t cache_ttl_ns = GPUM__PROC_TTL_NS;

void gpum__proc_cache_ttl(uint64_t ttl_ns) {
  pthread_mutex_lock(&cache_lock);
  cache_ttl_ns = ttl_ns;
  memset(cache, 0, sizeof cache);
  pthread_mutex_unlock(&cache_lock);
}

/* pid's entry when it is fresh (and named, when want_name), copied into *out. */
static bool cache_get(unsigned pid, bool want_name, proc_entry_t *out) {
  uint64_t now = gpum__os_mono_ns();
  pthread_mutex_lock(&cache_lock);
  const proc_entry_t *e = &cache[pid % PROC_SLOTS];
  bool hit = e->pid == pid && now - e->read_ns < cache_ttl_ns && (!want_name || e->named);
  if (hit)
    *out = *e;
  pthread_mutex_unlock(&cache_lock);
  return hit;
}

static void cache_put(const proc_entry_t *e) {
  pthread_mutex_lock(&cache_lock);
  cache[e->pid % PROC_SLOTS] = *e;
  pthread_mutex_unlock(&cache_lock);
}

/* pid's owner and command line as /proc has them now (its owner's name when want_name). */
static void proc_read(unsigned pid, bool want_name, proc_entry_t *e) {
  char path[64], buf[4096];
  memset(e, 0, sizeof *e);
  e->pid = pid;
  e->read_ns = gpum__os_mono_ns();
  snprintf(path, sizeof path, "/proc/%u/status", pid);
  if (read_small(path, buf, sizeof buf - 1) <= 0 || gpum__parse_status_uid(buf, &e->uid) != 0) {
    gpum_error_clear();
    return; /* not visible here */
  }
  e->visible = true;
  if (status_field(buf, "PPid:", &e->ppid) != 0) {
    gpum_error_clear();
    e->ppid = 0;
  }
  if (want_name) { /* no name asked, none looked up (NSS may block: LDAP, SSSD) */
    uid_to_name(e->uid, e->user, sizeof e->user);
    e->named = true;
  }
  snprintf(path, sizeof path, "/proc/%u/cmdline", pid);
  ssize_t n = read_small(path, buf, sizeof buf);
  if (n > 0)
    gpum__cmdline_to_string(buf, (size_t)n, e->cmd, sizeof e->cmd);
  if (e->cmd[0] == '\0') {
    snprintf(path, sizeof path, "/proc/%u/comm", pid);
    n = read_small(path, buf, sizeof buf);
    if (n > 0) {
      while (n > 0 && isspace((unsigned char)buf[n - 1]))
        n--;
      gpum__cmdline_to_string(buf, (size_t)n, e->cmd, sizeof e->cmd);
    }
  }
}

/* pid's entry: from the cache while fresh, else read (and kept). */
static void proc_entry(unsigned pid, bool want_name, proc_entry_t *e) {
  if (cache_get(pid, want_name, e))
    return;
  proc_read(pid, want_name, e);
  cache_put(e);
}

void gpum__proc_identity(unsigned pid, char *user, size_t ulen, char *cmd, size_t clen) {
  if (ulen)
    user[0] = '\0';
  if (clen)
    cmd[0] = '\0';
  if (pid == 0)
    return;
  proc_entry_t e;
  proc_entry(pid, ulen > 0, &e);
  if (!e.visible)
    return;
  if (ulen)
    snprintf(user, ulen, "%s", e.user);
  if (clen)
    snprintf(cmd, clen, "%s", e.cmd);
}

int gpum__proc_parent(unsigned pid, unsigned *ppid) {
  if (pid == 0)
    return GPUM_ENOENT;
  proc_entry_t e;
  proc_entry(pid, false, &e);
  if (!e.visible || e.ppid == 0)
    return GPUM_ENOENT;
  *ppid = e.ppid;
  return 0;
}

int gpum__proc_uid(unsigned pid, unsigned *uid) {
  if (pid == 0)
    return GPUM_ENOENT;
  proc_entry_t e;
  proc_entry(pid, false, &e);
  if (!e.visible)
    return GPUM_ENOENT;
  *uid = e.uid;
  return 0;
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
