/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What `gpum top` shows of a process besides what the driver and the device layer say (top.h;
 * its owner comes with the device layer's list): its CPU use, host memory and run time, read
 * from /proc at each refresh; and the signal a user sends it from the screen. CPU % is the
 * process's user and system time between two refreshes over the wall time between them, so it
 * is known from the second refresh on. Reservations' owners' names are looked up once per uid
 * (getpwuid_r can be slow: NSS, LDAP) and kept for the life of the screen.
 *
 * A pid can be reused; a process is known by its pid and its start time (field 22 of
 * /proc/PID/stat), both for the CPU deltas and before a signal: a signal goes only to the
 * process the screen showed, never to a later one with its pid.
 */
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "top.h"

int top_parse_stat(const char *text, uint64_t *ticks, uint64_t *start) {
  /* "pid (comm) state ppid ...": comm may hold spaces and parentheses, so the fields are
   * counted from the last ')'. utime and stime are fields 14 and 15, starttime 22. */
  const char *p = text ? strrchr(text, ')') : NULL;
  if (!p)
    return -1;
  unsigned long long v[20];
  int field = 3, k = 0;
  p++;
  while (field <= 22) {
    while (*p == ' ')
      p++;
    if (!*p)
      return -1;
    if (field >= 14) {
      char *end;
      errno = 0;
      v[k++] = strtoull(p, &end, 10);
      if (errno || end == p)
        return -1;
      p = end;
    } else {
      p += strcspn(p, " ");
    }
    field++;
  }
  *ticks = v[0] + v[1];
  *start = v[22 - 14];
  return 0;
}

/* Reads a small /proc file into buf (NUL-terminated); false when it cannot be read. */
static bool read_text(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "re");
  if (!f)
    return false;
  size_t n = fread(buf, 1, len - 1, f);
  fclose(f);
  buf[n] = '\0';
  return n > 0;
}

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *top_uid_lookup(const top_data_t *d, int64_t uid) {
  for (size_t i = 0; i < d->nuids; i++)
    if (d->uids[i].uid == uid)
      return d->uids[i].name;
  return NULL;
}

const char *top_uid_name(top_data_t *d, int64_t uid) {
  const char *known = top_uid_lookup(d, uid);
  if (known)
    return known;
  if (d->nuids == d->cap_uids) {
    size_t cap = d->cap_uids ? d->cap_uids * 2 : 16;
    top_uid_t *u = realloc(d->uids, cap * sizeof *u);
    if (!u)
      return NULL;
    d->uids = u;
    d->cap_uids = cap;
  }
  top_uid_t *e = &d->uids[d->nuids++];
  e->uid = uid;
  cli_user_name(uid, e->name, sizeof e->name);
  return e->name;
}

static int by_pid(const void *a, const void *b) {
  unsigned x = ((const top_proc_t *)a)->pid, y = ((const top_proc_t *)b)->pid;
  return (x > y) - (x < y);
}

const top_proc_t *top_proc_find(const top_data_t *d, unsigned pid) {
  top_proc_t key = {.pid = pid};
  return d->nprocs ? bsearch(&key, d->procs, d->nprocs, sizeof key, by_pid) : NULL;
}

/* Reads what /proc says of p->pid into p; the CPU % from the last refresh's times in prev. */
static void read_proc(top_proc_t *p, const top_cpu_t *prev, size_t nprev, uint64_t now_ns,
                      uint64_t boot_ms, long hz, long page) {
  char path[64], buf[4096];
  uint64_t ticks = 0, start = 0;
  p->cpu = -1;
  snprintf(path, sizeof path, "/proc/%u/stat", p->pid);
  if (!read_text(path, buf, sizeof buf) || top_parse_stat(buf, &ticks, &start) != 0)
    return; /* not visible here (another PID namespace) or gone */
  p->seen = true;
  p->start = start;
  p->ticks = ticks;
  uint64_t started_ms = start * 1000ull / (uint64_t)hz;
  p->run_ms = boot_ms > started_ms ? boot_ms - started_ms : 0;
  for (size_t i = 0; i < nprev; i++) {
    if (prev[i].pid != p->pid || prev[i].start != start || now_ns <= prev[i].at_ns)
      continue;
    double secs = (double)(now_ns - prev[i].at_ns) / 1e9;
    double used = ticks >= prev[i].ticks ? (double)(ticks - prev[i].ticks) / (double)hz : 0;
    p->cpu = 100.0 * used / secs;
    break;
  }
  snprintf(path, sizeof path, "/proc/%u/statm", p->pid);
  unsigned long long size, resident;
  if (read_text(path, buf, sizeof buf) && sscanf(buf, "%llu %llu", &size, &resident) == 2) {
    p->rss = (uint64_t)resident * (uint64_t)page;
    p->rss_valid = true;
  }
}

void top_procs_read(top_data_t *d) {
  free(d->procs);
  d->procs = NULL;
  d->nprocs = 0;
  size_t total = 0;
  for (size_t i = 0; d->have_snap && i < d->snap.ndevs; i++)
    total += d->snap.devs[i].nprocs;
  top_proc_t *v = total ? calloc(total, sizeof *v) : NULL;
  if (!v)
    return;
  size_t n = 0;
  for (size_t i = 0; i < d->snap.ndevs; i++)
    for (size_t k = 0; k < d->snap.devs[i].nprocs; k++)
      v[n++].pid = d->snap.devs[i].procs[k].pid;
  qsort(v, n, sizeof *v, by_pid);
  size_t u = 0; /* each pid once */
  for (size_t i = 0; i < n; i++)
    if (u == 0 || v[u - 1].pid != v[i].pid)
      v[u++] = v[i];
  long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
  uint64_t now_ns = clock_ns(CLOCK_MONOTONIC), boot_ms = clock_ns(CLOCK_BOOTTIME) / 1000000ull;
  for (size_t i = 0; i < u; i++)
    read_proc(&v[i], d->cpu, d->ncpu, now_ns, boot_ms, hz > 0 ? hz : 100, page > 0 ? page : 4096);
  d->procs = v;
  d->nprocs = u;
  /* This refresh's times are the next one's start. */
  top_cpu_t *c = u ? realloc(d->cpu, u * sizeof *c) : NULL;
  if (u && !c)
    return;
  if (!u) {
    free(d->cpu);
    d->cpu = NULL;
  }
  size_t nc = 0;
  for (size_t i = 0; i < u; i++)
    if (v[i].seen)
      c[nc++] = (top_cpu_t){v[i].pid, v[i].start, v[i].ticks, now_ns};
  d->cpu = c;
  d->ncpu = nc;
}

int top_signal(const top_data_t *d, unsigned pid, int sig, const char *name, char *msg,
               size_t len) {
  const top_proc_t *shown = top_proc_find(d, pid);
  char path[64], buf[4096];
  uint64_t ticks, start;
  snprintf(path, sizeof path, "/proc/%u/stat", pid);
  bool now_seen = read_text(path, buf, sizeof buf) && top_parse_stat(buf, &ticks, &start) == 0;
  if (pid == 0 || pid > INT_MAX || (shown && shown->seen && now_seen && start != shown->start)) {
    snprintf(msg, len, "%u: not the process shown any more (it ended): no signal sent", pid);
    return ESRCH;
  }
  if (kill((pid_t)pid, sig) == 0) {
    snprintf(msg, len, "SIG%s sent to %u", name, pid);
    return 0;
  }
  int err = errno;
  if (err == EPERM)
    snprintf(msg, len, "%u is not yours: only its owner (or root) may signal it (EPERM)", pid);
  else if (err == ESRCH)
    snprintf(msg, len, "%u: no such process (it has ended; ESRCH)", pid);
  else
    snprintf(msg, len, "SIG%s to %u: %s", name, pid, strerror(err));
  return err;
}
