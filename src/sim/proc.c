/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-process accounting of device memory: the process table and the allocation table in
 * shared memory, the lookup of a process's start time in /proc (which tells a reused pid
 * apart), and the reaper that gives a dead process's memory back, as the real driver does when
 * a process exits.
 *
 * Every operation costs O(1) in the size of the allocation table, or O(processes): entries
 * come from a free list (or from the untouched tail of the table), each process's entries are
 * linked to its slot, and its bytes are counted per device in the slot. The reaper checks each
 * process slot once (a /proc read; the calling process is known alive) and frees a dead
 * process's entries by walking its list. What is derived from the record (lists and counts) is
 * rebuilt by gpum__sim_repair after a process died holding the lock.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "os_internal.h"
#include "sim_internal.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Table entries made usable at a time: 64 KiB of the segment. */
#define POPULATE_STEP (65536u / sizeof(struct gpum__sim_alloc))

int gpum__sim_proc_stat(pid_t pid, char *state, uint64_t *start_time) {
  gpum__os_proc_stat_t st;
  if (gpum__os_proc_stat((int)pid, &st) != 0)
    return -1;
  *state = st.state;
  *start_time = st.start_time;
  return 0;
}

static _Thread_local struct gpum__sim_self me;

/* This process's pid and start time, read once per process: glibc does not cache getpid(),
 * and a system call per driver call was half of the system calls a device reader of gpumd made
 * per request. A child forked without exec reads them again (gpum__sim_proc_atfork). */
static pid_t cached_pid;
static uint64_t cached_start;

void gpum__sim_identify(void) {
  pid_t pid = __atomic_load_n(&cached_pid, __ATOMIC_ACQUIRE);
  if (pid == 0) {
    pid = getpid();
    char st;
    uint64_t start = 0;
    gpum__sim_proc_stat(pid, &st, &start);
    __atomic_store_n(&cached_start, start, __ATOMIC_RELAXED);
    __atomic_store_n(&cached_pid, pid, __ATOMIC_RELEASE);
  }
  me.pid = pid;
  me.start_time = __atomic_load_n(&cached_start, __ATOMIC_RELAXED);
}

static void unwatch_all(void);

void gpum__sim_proc_atfork(gpum__sim_fork_phase_t ph) {
  if (ph == GPUM__SIM_FORK_CHILD) { /* the child's only thread: nobody reads it meanwhile */
    __atomic_store_n(&cached_pid, 0, __ATOMIC_RELEASE);
    unwatch_all(); /* its copies of the parent's pidfds: a child may close them behind us */
  }
}

const struct gpum__sim_self *gpum__sim_me(void) {
  return &me;
}

static bool is_me(const struct gpum__sim_proc *p) {
  return p->pid == me.pid && p->start_time == me.start_time;
}

/* Pidfds of the processes this process found running in the node's slots, by slot (used
 * under the node lock only). The reaper asks at every memory query whether each slot's process
 * still runs, since the real driver gives a process's memory back when it exits; reading its
 * /proc/PID/stat for that (state, start time) costs about 10 us a process, and gpumd queries
 * memory several times per grant decision: with 64 processes holding memory (and gpumd's own
 * /proc reads already cached), bench/broker's 16 clients got 989 reserve+release pairs/s
 * against 37,000 with none. A pidfd, opened once per process and checked against the slot's
 * start time then, becomes readable when the process exits (a zombie is exited) and never
 * stands for a later process with the same pid; the reaper asks one poll() over them all. A
 * process keeps at most an eighth of its descriptor limit in pidfds (its
 * own work needs the rest); past that, and without pidfds (an old kernel), /proc answers. */
static struct {
  pid_t pid; /* 0: none */
  uint64_t start;
  int fd;
} watched[GPUM__SIM_MAX_PROCS];
static unsigned watched_n;

static void unwatch(uint32_t s) {
  if (watched[s].pid != 0) {
    close(watched[s].fd);
    watched[s].pid = 0;
    watched_n--;
  }
}

static void unwatch_all(void) {
  for (uint32_t s = 0; s < GPUM__SIM_MAX_PROCS && watched_n > 0; s++)
    unwatch(s);
}

/* Whether another pidfd may be kept: under an eighth of the soft descriptor limit. */
static bool may_watch(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return false;
  return rl.rlim_cur == RLIM_INFINITY || watched_n < rl.rlim_cur / 8;
}

/* Whether the process of slot s (p) still runs, from /proc: not gone, not a zombie, not a
 * reused pid; a pidfd for it is kept when it runs and there is room. */
static bool alive_proc(uint32_t s, const struct gpum__sim_proc *p) {
  unwatch(s); /* another process's, or one found readable: /proc decides */
  int fd = -1;
#ifdef SYS_pidfd_open
  if (may_watch()) /* opened before the check below: then it stands for the process checked */
    fd = (int)syscall(SYS_pidfd_open, p->pid, 0);
#endif
  char st;
  uint64_t start;
  bool running = gpum__sim_proc_stat(p->pid, &st, &start) == 0 && st != 'Z' && st != 'X' &&
                 start == p->start_time;
  if (fd >= 0 && running) {
    watched[s].pid = p->pid;
    watched[s].start = p->start_time;
    watched[s].fd = fd;
    watched_n++;
  } else if (fd >= 0) {
    close(fd);
  }
  return running;
}

static bool is_watched(uint32_t s, const struct gpum__sim_proc *p) {
  return watched[s].pid != 0 && watched[s].pid == p->pid && watched[s].start == p->start_time;
}

static void free_push(struct gpum__sim_node *n, uint32_t i) {
  n->allocs[i].next = n->free_head;
  n->free_head = i;
}

/* Clears the derived part of slot p. */
static void proc_reset(struct gpum__sim_proc *p) {
  p->head = GPUM__SIM_NIL;
  p->entries = 0;
  p->evsets = 0;
  memset(p->count, 0, sizeof p->count);
  memset(p->bytes, 0, sizeof p->bytes);
}

/* Gives slot s up once it holds nothing. */
static void proc_release_if_empty(struct gpum__sim_node *n, uint32_t s) {
  struct gpum__sim_proc *p = &n->procs[s];
  if (p->entries == 0 && p->evsets == 0)
    __atomic_store_n(&p->state, GPUM__SIM_A_FREE, __ATOMIC_RELEASE);
}

/* Frees everything of dead slot s: its entries (by its list), its event sets, the slot. */
static void proc_drop(struct gpum__sim_node *n, uint32_t s) {
  struct gpum__sim_proc *p = &n->procs[s];
  for (uint32_t i = p->head; i != GPUM__SIM_NIL && i < n->alloc_hw;) {
    struct gpum__sim_alloc *a = &n->allocs[i];
    uint32_t next = a->next;
    __atomic_store_n(&a->state, GPUM__SIM_A_FREE, __ATOMIC_RELEASE);
    free_push(n, i);
    i = next;
  }
  for (uint32_t e = 0; e < GPUM__SIM_MAX_EVSETS; e++)
    if (n->evsets[e].state == GPUM__SIM_A_USED && n->evsets[e].proc == s)
      __atomic_store_n(&n->evsets[e].state, GPUM__SIM_A_FREE, __ATOMIC_RELEASE);
  __atomic_store_n(&p->state, GPUM__SIM_A_FREE, __ATOMIC_RELEASE);
  proc_reset(p);
}

/* Under the node lock, so one thread of this process at a time. */
static struct pollfd reap_fds[GPUM__SIM_MAX_PROCS];
static uint32_t reap_slot[GPUM__SIM_MAX_PROCS];

void gpum__sim_reap(struct gpum__sim_node *n) {
  nfds_t k = 0;
  for (uint32_t s = 0; s < n->proc_hw && s < GPUM__SIM_MAX_PROCS; s++) {
    const struct gpum__sim_proc *p = &n->procs[s];
    if (p->state != GPUM__SIM_A_USED)
      continue;
    if (p->pid == me.pid) {
      if (p->start_time != me.start_time)
        proc_drop(n, s); /* a process that had this pid before */
    } else if (is_watched(s, p)) {
      reap_fds[k] = (struct pollfd){.fd = watched[s].fd, .events = POLLIN};
      reap_slot[k++] = s;
    } else if (!alive_proc(s, p)) {
      proc_drop(n, s);
    }
  }
  /* The watched ones in one call: a pidfd that is readable (or any answer but "nothing")
   * sends its process to /proc, which decides (exits are rare; a check never drops the memory
   * of a process that runs). */
  int r = k ? poll(reap_fds, k, 0) : 0;
  if (r == 0)
    return;
  for (nfds_t i = 0; i < k; i++)
    if ((r < 0 || reap_fds[i].revents != 0) && !alive_proc(reap_slot[i], &n->procs[reap_slot[i]]))
      proc_drop(n, reap_slot[i]);
}

/* Links entry i (filled in) into its owner's list and counts it. */
static void link_entry(struct gpum__sim_node *n, uint32_t i) {
  struct gpum__sim_alloc *a = &n->allocs[i];
  struct gpum__sim_proc *p = &n->procs[a->proc];
  a->prev = GPUM__SIM_NIL;
  a->next = p->head;
  if (p->head != GPUM__SIM_NIL)
    n->allocs[p->head].prev = i;
  p->head = i;
  p->entries++;
  p->count[a->device]++;
  p->bytes[a->device] += a->size;
}

void gpum__sim_repair(struct gpum__sim_node *n) {
  if (n->proc_hw > GPUM__SIM_MAX_PROCS)
    n->proc_hw = GPUM__SIM_MAX_PROCS;
  if (n->alloc_hw > n->alloc_ready)
    n->alloc_hw = n->alloc_ready; /* never beyond what is backed by memory */
  for (uint32_t s = 0; s < n->proc_hw; s++)
    proc_reset(&n->procs[s]);
  n->free_head = GPUM__SIM_NIL;
  /* Downwards, so that the free list hands out low entries first. */
  for (uint32_t i = n->alloc_hw; i-- > 0;) {
    struct gpum__sim_alloc *a = &n->allocs[i];
    if (a->state == GPUM__SIM_A_USED && a->proc < n->proc_hw &&
        n->procs[a->proc].state == GPUM__SIM_A_USED && a->device < n->spec.device_count) {
      link_entry(n, i);
    } else {
      a->state = GPUM__SIM_A_FREE;
      free_push(n, i);
    }
  }
  for (uint32_t e = 0; e < GPUM__SIM_MAX_EVSETS; e++) {
    struct gpum__sim_evset *ev = &n->evsets[e];
    if (ev->state == GPUM__SIM_A_USED && ev->proc < n->proc_hw &&
        n->procs[ev->proc].state == GPUM__SIM_A_USED)
      n->procs[ev->proc].evsets++;
    else
      ev->state = GPUM__SIM_A_FREE;
  }
  for (uint32_t s = 0; s < n->proc_hw; s++)
    if (n->procs[s].state == GPUM__SIM_A_USED)
      proc_release_if_empty(n, s);
}

/* The calling process's slot; registers it when create. -1 when it has none (or the process
 * table is full). */
static int my_slot(struct gpum__sim_node *n, bool create) {
  static uint32_t hint; /* where this process was last found; checked before use */
  uint32_t h = __atomic_load_n(&hint, __ATOMIC_RELAXED);
  if (h < n->proc_hw && n->procs[h].state == GPUM__SIM_A_USED && is_me(&n->procs[h]))
    return (int)h;
  uint32_t free_slot = GPUM__SIM_NIL;
  for (uint32_t s = 0; s < n->proc_hw && s < GPUM__SIM_MAX_PROCS; s++) {
    if (n->procs[s].state != GPUM__SIM_A_USED) {
      if (free_slot == GPUM__SIM_NIL)
        free_slot = s;
    } else if (is_me(&n->procs[s])) {
      __atomic_store_n(&hint, s, __ATOMIC_RELAXED);
      return (int)s;
    }
  }
  if (!create)
    return -1;
  if (free_slot == GPUM__SIM_NIL) {
    if (n->proc_hw >= GPUM__SIM_MAX_PROCS)
      return -1;
    free_slot = n->proc_hw++;
  }
  struct gpum__sim_proc *p = &n->procs[free_slot];
  p->pid = me.pid;
  p->start_time = me.start_time;
  p->hold = 0;
  p->away = 0;
  proc_reset(p);
  __atomic_store_n(&p->state, GPUM__SIM_A_USED, __ATOMIC_RELEASE);
  __atomic_store_n(&hint, free_slot, __ATOMIC_RELAXED);
  return (int)free_slot;
}

/* Makes entries [alloc_ready, alloc_ready + POPULATE_STEP) usable: their pages are allocated
 * now, so that a full /dev/shm fails this call instead of raising SIGBUS later. */
static bool populate_more(struct gpum__sim_node *n) {
  uint32_t cap = n->hdr.alloc_cap;
  uint32_t to = cap - n->alloc_ready < POPULATE_STEP ? cap : n->alloc_ready + POPULATE_STEP;
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t from_addr = (uintptr_t)&n->allocs[n->alloc_ready] & ~(uintptr_t)(page - 1);
  uintptr_t to_addr = (uintptr_t)&n->allocs[to];
  if (madvise((void *)from_addr, to_addr - from_addr, MADV_POPULATE_WRITE) != 0 &&
      errno != EINVAL) /* EINVAL: a kernel before 5.14, which cannot tell */
    return false;
  n->alloc_ready = to;
  return true;
}

/* A free entry, or GPUM__SIM_NIL when the table is full. */
static uint32_t take_entry(struct gpum__sim_node *n) {
  uint32_t i = n->free_head;
  if (i != GPUM__SIM_NIL && i < n->alloc_hw) {
    n->free_head = n->allocs[i].next;
    return i;
  }
  n->free_head = GPUM__SIM_NIL;
  if (n->alloc_hw >= n->hdr.alloc_cap)
    return GPUM__SIM_NIL;
  if (n->alloc_hw >= n->alloc_ready && !populate_more(n))
    return GPUM__SIM_NIL;
  return n->alloc_hw++;
}

int gpum__sim_proc_mine(struct gpum__sim_node *n) {
  return my_slot(n, false);
}

int gpum__sim_alloc_add(struct gpum__sim_node *n, uint32_t kind, unsigned dev, uint64_t addr,
                        uint64_t size) {
  int s = my_slot(n, true);
  uint32_t i = s >= 0 ? take_entry(n) : GPUM__SIM_NIL;
  if (i == GPUM__SIM_NIL) { /* full: dead processes may hold what is missing */
    gpum__sim_reap(n);
    if (s < 0)
      s = my_slot(n, true);
    i = s >= 0 ? take_entry(n) : GPUM__SIM_NIL;
    if (i == GPUM__SIM_NIL) {
      if (s >= 0)
        proc_release_if_empty(n, (uint32_t)s);
      return -1;
    }
  }
  /* Fill first, publish last: a death in between leaves a free entry (gpum__sim_repair). */
  struct gpum__sim_alloc *a = &n->allocs[i];
  a->kind = kind;
  a->device = dev;
  a->proc = (uint32_t)s;
  a->addr = addr;
  a->size = size;
  link_entry(n, i);
  if (kind == GPUM__SIM_K_HOLD)
    n->procs[s].hold = 1;
  __atomic_store_n(&a->state, GPUM__SIM_A_USED, __ATOMIC_RELEASE);
  return (int)i;
}

bool gpum__sim_alloc_mine(const struct gpum__sim_node *n, int idx, uint32_t kind, uint64_t addr) {
  if (idx < 0 || (uint32_t)idx >= n->alloc_hw)
    return false;
  const struct gpum__sim_alloc *a = &n->allocs[idx];
  return a->state == GPUM__SIM_A_USED && a->kind == kind && a->addr == addr &&
         a->proc < n->proc_hw && is_me(&n->procs[a->proc]);
}

void gpum__sim_alloc_remove(struct gpum__sim_node *n, int idx) {
  struct gpum__sim_alloc *a = &n->allocs[idx];
  struct gpum__sim_proc *p = &n->procs[a->proc];
  __atomic_store_n(&a->state, GPUM__SIM_A_FREE, __ATOMIC_RELEASE);
  if (a->prev == GPUM__SIM_NIL)
    p->head = a->next;
  else
    n->allocs[a->prev].next = a->next;
  if (a->next != GPUM__SIM_NIL)
    n->allocs[a->next].prev = a->prev;
  p->entries--;
  p->count[a->device]--;
  p->bytes[a->device] -= a->size;
  free_push(n, (uint32_t)idx);
  proc_release_if_empty(n, a->proc);
}

int gpum__sim_evset_add(struct gpum__sim_node *n) {
  for (int attempt = 0; attempt < 2; attempt++) {
    if (attempt)
      gpum__sim_reap(n);
    uint32_t e = 0;
    while (e < GPUM__SIM_MAX_EVSETS && n->evsets[e].state != GPUM__SIM_A_FREE)
      e++;
    int s = e < GPUM__SIM_MAX_EVSETS ? my_slot(n, true) : -1;
    if (s < 0)
      continue;
    struct gpum__sim_evset *ev = &n->evsets[e];
    memset(ev->mask, 0, sizeof ev->mask);
    ev->proc = (uint32_t)s;
    ev->gen++;
    ev->tail = ev->head;
    n->procs[s].evsets++;
    __atomic_store_n(&ev->state, GPUM__SIM_A_USED, __ATOMIC_RELEASE);
    return (int)e;
  }
  return -1;
}

void gpum__sim_evset_remove(struct gpum__sim_node *n, unsigned idx) {
  struct gpum__sim_evset *ev = &n->evsets[idx];
  __atomic_store_n(&ev->state, GPUM__SIM_A_FREE, __ATOMIC_RELEASE);
  if (ev->proc < n->proc_hw && n->procs[ev->proc].evsets > 0) {
    n->procs[ev->proc].evsets--;
    proc_release_if_empty(n, ev->proc);
  }
}

uint64_t gpum__sim_used(const struct gpum__sim_node *n, unsigned dev) {
  uint64_t used = 0;
  for (uint32_t s = 0; s < n->proc_hw && s < GPUM__SIM_MAX_PROCS; s++)
    if (n->procs[s].state == GPUM__SIM_A_USED && !n->procs[s].away)
      used += n->procs[s].bytes[dev];
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
  for (uint32_t s = 0; s < n->proc_hw && s < GPUM__SIM_MAX_PROCS; s++) {
    const struct gpum__sim_proc *p = &n->procs[s];
    if (p->state != GPUM__SIM_A_USED || p->away) /* checkpointed: no device memory */
      continue;
    for (unsigned d = 0; d < n->spec.device_count; d++) {
      if ((dev != UINT32_MAX && d != dev) || p->count[d] == 0)
        continue;
      if (count < max)
        out[count] = (gpum_sim_process_t){(uint32_t)p->pid, d, p->bytes[d]};
      count++;
    }
  }
  return count;
}
