/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-process accounting of device memory: the allocation table in shared memory, the lookup
 * of a process's start time in /proc (which tells a reused pid apart), and the reaper that
 * gives a dead process's memory back, as the real driver does when a process exits.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim_internal.h"

int gpum__sim_proc_stat(pid_t pid, char *state, uint64_t *start_time) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t got = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (got <= 0)
    return -1;
  buf[got] = '\0';
  /* The command may contain anything, including ") ": fields resume after the last ')'. */
  char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ')
    return -1;
  p += 2;
  *state = *p;
  /* Field 3 is the state; starttime is field 22, i.e. 19 fields further on. */
  for (int field = 3; field < 22; field++) {
    p = strchr(p, ' ');
    if (!p)
      return -1;
    p++;
  }
  char *end;
  *start_time = strtoull(p, &end, 10);
  return end == p ? -1 : 0;
}

void gpum__sim_self(pid_t *pid, uint64_t *start_time) {
  static pid_t cached_pid;
  static uint64_t cached_start;
  pid_t now = getpid();
  if (__atomic_load_n(&cached_pid, __ATOMIC_ACQUIRE) != now) {
    char st;
    uint64_t start = 0;
    gpum__sim_proc_stat(now, &st, &start);
    __atomic_store_n(&cached_start, start, __ATOMIC_RELAXED);
    __atomic_store_n(&cached_pid, now, __ATOMIC_RELEASE);
  }
  *pid = now;
  *start_time = __atomic_load_n(&cached_start, __ATOMIC_RELAXED);
}

typedef struct {
  pid_t pid;
  uint64_t start;
  bool alive;
} seen_t;

/* Whether (pid, start) still names a live, non-zombie process. seen caches answers. */
static bool alive(pid_t pid, uint64_t start, seen_t *seen, unsigned *nseen, unsigned cap) {
  pid_t self;
  uint64_t self_start;
  gpum__sim_self(&self, &self_start);
  if (pid == self)
    return start == self_start;
  for (unsigned i = 0; i < *nseen; i++)
    if (seen[i].pid == pid && seen[i].start == start)
      return seen[i].alive;
  char st;
  uint64_t now_start;
  bool ok = gpum__sim_proc_stat(pid, &st, &now_start) == 0 && st != 'Z' && st != 'X' &&
            now_start == start;
  if (*nseen < cap)
    seen[(*nseen)++] = (seen_t){pid, start, ok};
  return ok;
}

void gpum__sim_reap(struct gpum__sim_node *n) {
  seen_t seen[64];
  unsigned nseen = 0;
  uint32_t hw = n->alloc_hw, last_used = 0;
  for (uint32_t i = 0; i < hw && i < GPUM__SIM_MAX_ALLOCS; i++) {
    struct gpum__sim_alloc *a = &n->allocs[i];
    if (a->state != GPUM__SIM_A_USED)
      continue;
    if (!alive(a->pid, a->start_time, seen, &nseen, 64))
      __atomic_store_n(&a->state, GPUM__SIM_A_FREE, __ATOMIC_RELEASE);
    else
      last_used = i + 1;
  }
  n->alloc_hw = last_used;
  for (uint32_t i = 0; i < GPUM__SIM_MAX_EVSETS; i++) {
    struct gpum__sim_evset *e = &n->evsets[i];
    if (e->state == GPUM__SIM_A_USED && !alive(e->pid, e->start_time, seen, &nseen, 64))
      __atomic_store_n(&e->state, GPUM__SIM_A_FREE, __ATOMIC_RELEASE);
  }
}

int gpum__sim_alloc_add(struct gpum__sim_node *n, uint32_t kind, unsigned dev, uint64_t addr,
                        uint64_t size, pid_t pid, uint64_t start) {
  if (pid <= 0)
    gpum__sim_self(&pid, &start);
  for (uint32_t i = 0; i < GPUM__SIM_MAX_ALLOCS; i++) {
    struct gpum__sim_alloc *a = &n->allocs[i];
    if (a->state != GPUM__SIM_A_FREE)
      continue;
    /* Fill first, publish last: a death in between leaves a free slot. */
    a->kind = kind;
    a->pid = pid;
    a->device = dev;
    a->start_time = start;
    a->addr = addr;
    a->size = size;
    if (i + 1 > n->alloc_hw)
      n->alloc_hw = i + 1;
    __atomic_store_n(&a->state, GPUM__SIM_A_USED, __ATOMIC_RELEASE);
    return (int)i;
  }
  return -1;
}

int gpum__sim_alloc_find(struct gpum__sim_node *n, uint32_t kind, uint64_t addr) {
  pid_t self;
  uint64_t start;
  gpum__sim_self(&self, &start);
  for (uint32_t i = 0; i < n->alloc_hw && i < GPUM__SIM_MAX_ALLOCS; i++) {
    const struct gpum__sim_alloc *a = &n->allocs[i];
    if (a->state == GPUM__SIM_A_USED && a->kind == kind && a->addr == addr && a->pid == self)
      return (int)i;
  }
  return -1;
}

void gpum__sim_alloc_remove(struct gpum__sim_node *n, int idx) {
  if (idx >= 0 && (uint32_t)idx < GPUM__SIM_MAX_ALLOCS)
    __atomic_store_n(&n->allocs[idx].state, GPUM__SIM_A_FREE, __ATOMIC_RELEASE);
}

uint64_t gpum__sim_used(const struct gpum__sim_node *n, unsigned dev) {
  uint64_t used = 0;
  for (uint32_t i = 0; i < n->alloc_hw && i < GPUM__SIM_MAX_ALLOCS; i++) {
    const struct gpum__sim_alloc *a = &n->allocs[i];
    if (a->state == GPUM__SIM_A_USED && a->device == dev)
      used += a->size;
  }
  return used;
}

uint64_t gpum__sim_free(const struct gpum__sim_node *n, unsigned dev) {
  const struct gpum__sim_dev_spec *d = &n->spec.dev[dev];
  uint64_t taken = d->reserved + gpum__sim_used(n, dev);
  return taken >= d->memory ? 0 : d->memory - taken;
}

unsigned gpum__sim_processes(const struct gpum__sim_node *n, unsigned dev, gpum_sim_process_t *out,
                             unsigned max) {
  unsigned count = 0;
  /* Small tables: an O(entries x processes) merge is fine and keeps first-seen order. */
  gpum_sim_process_t local[GPUM_SIM_MAX_PROCESSES];
  for (uint32_t i = 0; i < n->alloc_hw && i < GPUM__SIM_MAX_ALLOCS; i++) {
    const struct gpum__sim_alloc *a = &n->allocs[i];
    if (a->state != GPUM__SIM_A_USED || (dev != UINT32_MAX && a->device != dev))
      continue;
    unsigned j = 0;
    while (j < count && j < GPUM_SIM_MAX_PROCESSES &&
           !(local[j].pid == (uint32_t)a->pid && local[j].device == a->device))
      j++;
    if (j < count) {
      local[j].bytes += a->size;
    } else if (count < GPUM_SIM_MAX_PROCESSES) {
      local[count++] = (gpum_sim_process_t){(uint32_t)a->pid, a->device, a->size};
    }
  }
  for (unsigned j = 0; j < count && j < max; j++)
    out[j] = local[j];
  return count;
}
