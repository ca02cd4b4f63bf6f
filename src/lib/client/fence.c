/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The memory fence of a reservation (gpum/fence.h): a POSIX shared-memory region of atomics.
 *
 * Slot states (owner word): 0 free; CLAIMING|pid while a process fills in its start time;
 * pid when live; RECLAIMING|pid of the reclaimer while a dead owner's bytes are given back. A
 * reclaimer moves a slot out of a dead owner's hands with one compare-and-swap, so only one
 * process gives its bytes back; it takes each device's bytes out of the slot with an exchange,
 * so a reclaimer that dies half-way leaves the rest to the next one, never a double subtraction.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gpum/error.h>
#include <gpum/fence.h>

#include "os_internal.h"

#define FENCE_MAGIC 0x31434e4546505047ULL /* "GPPFENC1" little-endian */
#define FENCE_VERSION 3u /* 2: the creator's pid and start time; 3: what the job used */

/* Where glibc's shm_open keeps the regions, listed by the sweeps. */
#define SHM_DIR "/dev/shm"
#define NAME_BASE "gpum-fence-"

/* Flags a region has room for (GPUM_FENCE_USED_*: bit i's first pid in used_pid[i]); the
 * public ones are the low bits. */
#define USED_BITS 8u
_Static_assert((GPUM_FENCE_USED_ALL >> USED_BITS) == 0, "a used flag without a pid slot");

#define OWNER_PID_MASK 0xffffffffULL
#define OWNER_CLAIMING (1ULL << 62)
#define OWNER_RECLAIMING (1ULL << 63)

struct fence_slot {
  _Atomic uint64_t owner;
  _Atomic uint64_t start; /* the owner's start time (/proc/PID/stat field 22) */
  _Atomic uint64_t used[GPUM_FENCE_MAX_DEVICES];
};

struct fence_dev {
  _Atomic uint64_t limit;
  _Atomic uint64_t used;
};

struct fence_region {
  _Atomic uint64_t magic; /* written last at creation */
  uint32_t version;
  uint32_t size; /* sizeof(struct fence_region) */
  uint64_t reservation;
  uint64_t base_limit;
  _Atomic uint64_t max_limit;
  _Atomic uint32_t shrink_wanted;
  uint32_t creator_pid;   /* the process that created the region */
  uint64_t creator_start; /* its start time (/proc/PID/stat field 22) */
  /* What some process of the job used (GPUM_FENCE_USED_*), set and never cleared, and the pid
   * of the first process that set each flag (used_pid[i] for flag 1u << i, 0 before). */
  _Atomic uint32_t used_flags;
  _Atomic uint32_t used_pid[USED_BITS];
  struct fence_dev dev[GPUM_FENCE_MAX_DEVICES];
  struct fence_slot slot[GPUM_FENCE_MAX_PROCS];
};

struct gpum_fence {
  struct fence_region *r;
  bool writable;
  pthread_mutex_t claim_mu;  /* one claim at a time in this process */
  _Atomic int slot;          /* this process's slot, -1 before the first charge */
  _Atomic unsigned slot_gen; /* fork generation the slot was claimed in */
};

/* Bumped in a child after fork: the child is another process and needs a slot of its own. */
static _Atomic unsigned fork_gen;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void) {
  atomic_fetch_add_explicit(&fork_gen, 1, memory_order_relaxed);
}

static void atfork_install(void) {
  pthread_atfork(NULL, NULL, on_fork_child);
}

int gpum_fence_prefix(char *buf, size_t len, const char *scope) {
  if (!buf || !scope)
    return gpum_error(GPUM_EINVAL, "fence name: NULL argument");
  uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)scope; *p; p++)
    h = (h ^ *p) * 0x100000001b3ULL;
  int n = snprintf(buf, len, NAME_BASE "%012llx-", (unsigned long long)(h & 0xffffffffffffULL));
  if (n < 0 || (size_t)n >= len)
    return gpum_error(GPUM_ENOSPC, "fence name: a buffer of %zu bytes is too small", len);
  return 0;
}

/* 64 bits from the kernel's random source, as 16 hex digits. */
static int random_hex(char out[17]) {
  uint64_t r = 0;
  ssize_t n;
  do
    n = getrandom(&r, sizeof r, 0);
  while (n < 0 && errno == EINTR);
  if (n != (ssize_t)sizeof r)
    return gpum_error(GPUM_EIO, "fence name: getrandom: %s",
                      n < 0 ? strerror(errno) : "short read");
  snprintf(out, 17, "%016llx", (unsigned long long)r);
  return 0;
}

int gpum_fence_name(char *buf, size_t len, const char *scope, uint64_t reservation) {
  char prefix[GPUM_FENCE_NAME_MAX], rnd[17];
  int rc = gpum_fence_prefix(prefix, sizeof prefix, scope);
  if (rc == 0)
    rc = random_hex(rnd);
  if (rc)
    return rc;
  int n = snprintf(buf, len, "%s%llu-%s", prefix, (unsigned long long)reservation, rnd);
  if (n < 0 || (size_t)n >= len)
    return gpum_error(GPUM_ENOSPC, "fence name: a buffer of %zu bytes is too small", len);
  return 0;
}

int gpum_fence_own_name(char *buf, size_t len) {
  char rnd[17];
  int rc = random_hex(rnd);
  if (rc)
    return rc;
  int n = snprintf(buf, len, NAME_BASE "p%d-%s", (int)getpid(), rnd);
  if (n < 0 || (size_t)n >= len)
    return gpum_error(GPUM_ENOSPC, "fence name: a buffer of %zu bytes is too small", len);
  return 0;
}

/* "/name" for shm_open; the name must be one path component. */
static int shm_path(char *out, size_t len, const char *name) {
  if (!name || !*name || strchr(name, '/') || strlen(name) + 2 > len)
    return gpum_error(GPUM_EINVAL, "fence name '%.64s' is empty, too long or holds a '/'",
                      name ? name : "(null)");
  snprintf(out, len, "/%s", name);
  return 0;
}

static int map_fd(int fd, bool writable, gpum_fence **out) {
  gpum_fence *f = calloc(1, sizeof *f);
  if (!f)
    return gpum_error(GPUM_ENOMEM, "fence: out of host memory");
  void *p = mmap(NULL, sizeof(struct fence_region), PROT_READ | (writable ? PROT_WRITE : 0),
                 MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    free(f);
    return gpum_error(GPUM_EIO, "fence: mmap: %s", strerror(e));
  }
  f->r = p;
  f->writable = writable;
  pthread_mutex_init(&f->claim_mu, NULL);
  atomic_init(&f->slot, -1);
  pthread_once(&atfork_once, atfork_install);
  *out = f;
  return 0;
}

/* Checks what fd is: a regular file of the size of a region, owned by owner. */
static int check_file(int fd, const char *name, uid_t owner, bool sized) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    return gpum_error(GPUM_EIO, "fence '%s': fstat: %s", name, strerror(errno));
  if (!S_ISREG(st.st_mode))
    return gpum_error(GPUM_EPROTO, "fence '%s' is not a regular file", name);
  if (st.st_uid != owner)
    return gpum_error(GPUM_EPERM, "fence '%s' belongs to uid %lu, not uid %lu: not used", name,
                      (unsigned long)st.st_uid, (unsigned long)owner);
  if (sized && st.st_size != (off_t)sizeof(struct fence_region))
    return gpum_error(GPUM_EPROTO, "fence '%s' is not a gpum fence of this version (size)", name);
  return 0;
}

static int open_errno(const char *name, int e) {
  return gpum_error(e == EEXIST                 ? GPUM_EEXIST
                    : e == ENOENT               ? GPUM_ENOENT
                    : e == EACCES || e == EPERM ? GPUM_EPERM
                    : e == ELOOP                ? GPUM_EPROTO
                                                : GPUM_EIO,
                    "fence '%s': %s", name,
                    e == ELOOP ? "a symbolic link: not followed" : strerror(e));
}

int gpum_fence_create(const char *name, const gpum_fence_opts_t *opts, gpum_fence **out) {
  char path[GPUM_FENCE_NAME_MAX + 2];
  int rc = shm_path(path, sizeof path, name);
  if (rc)
    return rc;
  if (!opts || !out || opts->limit == 0 || (opts->max_limit && opts->max_limit < opts->limit))
    return gpum_error(GPUM_EINVAL, "fence: a limit above zero is needed, and a max_limit (if "
                                   "any) at least as large");
  mode_t mode = ((opts->mode ? (mode_t)opts->mode : 0600) & 0660) | 0600;
  /* O_EXCL: never a file that was there, whoever made it (glibc adds O_NOFOLLOW). */
  int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0)
    return open_errno(name, errno);
  rc = check_file(fd, name, geteuid(), false);
  /* shm_open's mode is masked by the umask: set it as asked. */
  if (rc == 0 && fchmod(fd, mode) != 0)
    rc = gpum_error(GPUM_EIO, "fence '%s': fchmod: %s", name, strerror(errno));
  if (rc == 0 && ftruncate(fd, sizeof(struct fence_region)) != 0)
    rc = gpum_error(GPUM_EIO, "fence '%s': ftruncate: %s", name, strerror(errno));
  if (rc == 0)
    rc = map_fd(fd, true, out);
  close(fd);
  if (rc) {
    shm_unlink(path);
    return rc;
  }
  struct fence_region *r = (*out)->r;
  gpum__os_proc_stat_t st = {0};
  (void)gpum__os_proc_stat((int)getpid(), &st);
  r->version = FENCE_VERSION;
  r->size = sizeof *r;
  r->reservation = opts->reservation;
  r->base_limit = opts->limit;
  r->creator_pid = (uint32_t)getpid();
  r->creator_start = st.start_time;
  atomic_store(&r->max_limit, opts->max_limit);
  for (unsigned d = 0; d < GPUM_FENCE_MAX_DEVICES; d++)
    atomic_store(&r->dev[d].limit, opts->limit);
  atomic_store_explicit(&r->magic, FENCE_MAGIC, memory_order_release);
  return 0;
}

int gpum_fence_set_group(const char *name, unsigned gid) {
  char path[GPUM_FENCE_NAME_MAX + 2];
  int rc = shm_path(path, sizeof path, name);
  if (rc)
    return rc;
  int fd = shm_open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (fd < 0)
    return open_errno(name, errno);
  rc = check_file(fd, name, geteuid(), false);
  if (rc == 0 && fchown(fd, (uid_t)-1, (gid_t)gid) != 0)
    rc = gpum_error(errno == EPERM ? GPUM_EPERM : GPUM_EIO, "fence '%s': group %u: %s", name, gid,
                    strerror(errno));
  close(fd);
  return rc;
}

int gpum_fence_open_owned(const char *name, bool writable, unsigned owner, gpum_fence **out) {
  char path[GPUM_FENCE_NAME_MAX + 2];
  int rc = shm_path(path, sizeof path, name);
  if (rc)
    return rc;
  if (!out)
    return gpum_error(GPUM_EINVAL, "fence: NULL out");
  int fd = shm_open(path, (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC, 0);
  if (fd < 0)
    return open_errno(name, errno);
  rc = check_file(fd, name, (uid_t)owner, true);
  if (rc == 0)
    rc = map_fd(fd, writable, out);
  close(fd);
  if (rc)
    return rc;
  struct fence_region *r = (*out)->r;
  if (atomic_load_explicit(&r->magic, memory_order_acquire) != FENCE_MAGIC ||
      r->version != FENCE_VERSION || r->size != sizeof *r) {
    gpum_fence_close(*out);
    *out = NULL;
    return gpum_error(GPUM_EPROTO, "fence '%s' is not a gpum fence of this version", name);
  }
  return 0;
}

int gpum_fence_open(const char *name, bool writable, gpum_fence **out) {
  return gpum_fence_open_owned(name, writable, geteuid(), out);
}

void gpum_fence_close(gpum_fence *f) {
  if (!f)
    return;
  munmap(f->r, sizeof *f->r);
  pthread_mutex_destroy(&f->claim_mu);
  free(f);
}

int gpum_fence_unlink(const char *name) {
  char path[GPUM_FENCE_NAME_MAX + 2];
  int rc = shm_path(path, sizeof path, name);
  if (rc)
    return rc;
  if (shm_unlink(path) != 0) {
    int e = errno;
    return gpum_error(e == ENOENT   ? GPUM_ENOENT
                      : e == EACCES ? GPUM_EPERM
                                    : GPUM_EIO,
                      "fence '%s': %s", name, strerror(e));
  }
  return 0;
}

/* Whether the process a slot names is alive: same pid, same start time. */
static bool owner_alive(uint64_t owner, uint64_t start) {
  int pid = (int)(owner & OWNER_PID_MASK);
  gpum__os_proc_stat_t st;
  int rc = gpum__os_proc_stat(pid, &st);
  if (rc == -ENOENT)
    return false;
  if (rc != 0)
    return true; /* cannot tell: keep its bytes (the safe side) */
  if (st.state == 'Z' || st.state == 'X')
    return false;
  /* A slot still being claimed has no start time yet: its pid being there is enough. */
  return (owner & OWNER_CLAIMING) || start == 0 || st.start_time == start;
}

/* Gives back a dead owner's bytes; the caller has moved the slot into RECLAIMING. */
static void slot_drain(struct fence_region *r, struct fence_slot *s) {
  for (unsigned d = 0; d < GPUM_FENCE_MAX_DEVICES; d++) {
    uint64_t x = atomic_exchange(&s->used[d], 0);
    if (x)
      atomic_fetch_sub(&r->dev[d].used, x);
  }
  atomic_store(&s->start, 0);
  atomic_store_explicit(&s->owner, 0, memory_order_release);
}

unsigned gpum_fence_reclaim(gpum_fence *f) {
  if (!f || !f->writable)
    return 0;
  struct fence_region *r = f->r;
  uint64_t me = (uint64_t)getpid();
  unsigned freed = 0;
  for (unsigned i = 0; i < GPUM_FENCE_MAX_PROCS; i++) {
    struct fence_slot *s = &r->slot[i];
    uint64_t o = atomic_load_explicit(&s->owner, memory_order_acquire);
    if (o == 0 || (o & OWNER_PID_MASK) == me)
      continue;
    /* A reclaimer's own liveness is checked by pid alone; an owner's by pid and start time. */
    bool alive = (o & OWNER_RECLAIMING) ? owner_alive(o & OWNER_PID_MASK, 0)
                                        : owner_alive(o, atomic_load(&s->start));
    if (alive)
      continue;
    if (atomic_compare_exchange_strong(&s->owner, &o, OWNER_RECLAIMING | me)) {
      slot_drain(r, s);
      freed++;
    }
  }
  return freed;
}

/* This process's slot, claimed on first use (and again in a child after fork). */
static struct fence_slot *my_slot(gpum_fence *f) {
  unsigned gen = atomic_load_explicit(&fork_gen, memory_order_relaxed);
  int i = atomic_load_explicit(&f->slot, memory_order_acquire);
  if (i >= 0 && atomic_load_explicit(&f->slot_gen, memory_order_relaxed) == gen)
    return &f->r->slot[i];
  pthread_mutex_lock(&f->claim_mu);
  i = atomic_load(&f->slot);
  if (i < 0 || atomic_load(&f->slot_gen) != gen) {
    i = -1;
    uint64_t me = (uint64_t)getpid();
    gpum__os_proc_stat_t st = {0};
    (void)gpum__os_proc_stat((int)me, &st);
    for (int pass = 0; pass < 2 && i < 0; pass++) {
      for (unsigned k = 0; k < GPUM_FENCE_MAX_PROCS && i < 0; k++) {
        uint64_t zero = 0;
        struct fence_slot *s = &f->r->slot[k];
        if (atomic_compare_exchange_strong(&s->owner, &zero, OWNER_CLAIMING | me)) {
          atomic_store(&s->start, st.start_time);
          atomic_store_explicit(&s->owner, me, memory_order_release);
          i = (int)k;
        }
      }
      if (i < 0 && pass == 0)
        gpum_fence_reclaim(f); /* every slot taken: free the dead ones and look again */
    }
    if (i >= 0) {
      atomic_store(&f->slot_gen, gen);
      atomic_store_explicit(&f->slot, i, memory_order_release);
    }
  }
  pthread_mutex_unlock(&f->claim_mu);
  return i >= 0 ? &f->r->slot[i] : NULL;
}

/* One compare-and-swap attempt loop against the limit: true when charged. */
static bool dev_take(struct fence_dev *d, uint64_t bytes, uint64_t *before) {
  uint64_t u = atomic_load_explicit(&d->used, memory_order_relaxed);
  for (;;) {
    uint64_t lim = atomic_load_explicit(&d->limit, memory_order_relaxed);
    *before = u;
    if (bytes > lim || u > lim - bytes)
      return false;
    if (atomic_compare_exchange_weak_explicit(&d->used, &u, u + bytes, memory_order_acq_rel,
                                              memory_order_relaxed))
      return true;
  }
}

int gpum_fence_charge(gpum_fence *f, unsigned dev, uint64_t bytes, uint64_t *used) {
  if (!f)
    return gpum_error(GPUM_EINVAL, "fence: NULL handle");
  if (!f->writable)
    return gpum_error(GPUM_EPERM, "fence: the handle is read-only");
  if (dev >= GPUM_FENCE_MAX_DEVICES)
    return gpum_error(GPUM_ERANGE, "fence: device %u is past the %d a fence holds", dev,
                      GPUM_FENCE_MAX_DEVICES);
  struct fence_slot *s = my_slot(f);
  if (!s)
    return gpum_error(GPUM_ENOSPC, "fence: all %d process slots are held by live processes",
                      GPUM_FENCE_MAX_PROCS);
  struct fence_dev *d = &f->r->dev[dev];
  uint64_t before = 0;
  bool ok = dev_take(d, bytes, &before);
  if (!ok && gpum_fence_reclaim(f) > 0)
    ok = dev_take(d, bytes, &before);
  if (used)
    *used = before;
  if (!ok)
    return GPUM_EDEVOOM; /* the hot failure path sets no detail: the caller reports it */
  atomic_fetch_add_explicit(&s->used[dev], bytes, memory_order_relaxed);
  return 0;
}

void gpum_fence_uncharge(gpum_fence *f, unsigned dev, uint64_t bytes) {
  if (!f || !f->writable || dev >= GPUM_FENCE_MAX_DEVICES || bytes == 0)
    return;
  struct fence_slot *s = my_slot(f);
  if (s) {
    /* Never below zero: bytes this process did not charge are not taken from others. */
    uint64_t u = atomic_load_explicit(&s->used[dev], memory_order_relaxed);
    uint64_t take;
    do
      take = bytes < u ? bytes : u;
    while (!atomic_compare_exchange_weak_explicit(&s->used[dev], &u, u - take, memory_order_relaxed,
                                                  memory_order_relaxed));
    bytes = take;
  }
  if (bytes)
    atomic_fetch_sub_explicit(&f->r->dev[dev].used, bytes, memory_order_acq_rel);
}

int gpum_fence_set_limit(gpum_fence *f, unsigned dev, uint64_t limit) {
  if (!f || !f->writable)
    return gpum_error(GPUM_EPERM, "fence: the handle is read-only");
  if (dev != GPUM_FENCE_ALL_DEVICES && dev >= GPUM_FENCE_MAX_DEVICES)
    return gpum_error(GPUM_ERANGE, "fence: device %u is past the %d a fence holds", dev,
                      GPUM_FENCE_MAX_DEVICES);
  for (unsigned d = 0; d < GPUM_FENCE_MAX_DEVICES; d++)
    if (dev == GPUM_FENCE_ALL_DEVICES || d == dev)
      atomic_store(&f->r->dev[d].limit, limit);
  return 0;
}

uint64_t gpum_fence_charged(const gpum_fence *f, unsigned dev, uint64_t *limit) {
  if (!f || dev >= GPUM_FENCE_MAX_DEVICES)
    return 0;
  if (limit)
    *limit = atomic_load_explicit(&f->r->dev[dev].limit, memory_order_relaxed);
  return atomic_load_explicit(&f->r->dev[dev].used, memory_order_relaxed);
}

int gpum_fence_usage(gpum_fence *f, unsigned dev, gpum_fence_usage_t *out) {
  if (!f || !out)
    return gpum_error(GPUM_EINVAL, "fence: NULL argument");
  if (dev >= GPUM_FENCE_MAX_DEVICES)
    return gpum_error(GPUM_ERANGE, "fence: device %u is past the %d a fence holds", dev,
                      GPUM_FENCE_MAX_DEVICES);
  struct fence_region *r = f->r;
  *out = (gpum_fence_usage_t){.limit = atomic_load(&r->dev[dev].limit),
                              .max_limit = atomic_load(&r->max_limit)};
  for (unsigned i = 0; i < GPUM_FENCE_MAX_PROCS; i++) {
    struct fence_slot *s = &r->slot[i];
    uint64_t o = atomic_load_explicit(&s->owner, memory_order_acquire);
    if (o == 0 || (o & OWNER_RECLAIMING) || !owner_alive(o, atomic_load(&s->start)))
      continue;
    out->procs++;
    out->used += atomic_load(&s->used[dev]);
  }
  return 0;
}

uint64_t gpum_fence_reservation(const gpum_fence *f) {
  return f ? f->r->reservation : 0;
}

uint64_t gpum_fence_base_limit(const gpum_fence *f) {
  return f ? f->r->base_limit : 0;
}

void gpum_fence_want_shrink(gpum_fence *f) {
  if (f && f->writable)
    atomic_store(&f->r->shrink_wanted, 1);
}

bool gpum_fence_take_shrink(gpum_fence *f) {
  if (!f || !f->writable || !atomic_load_explicit(&f->r->shrink_wanted, memory_order_relaxed))
    return false;
  return atomic_exchange(&f->r->shrink_wanted, 0) != 0;
}

void gpum_fence_mark_used(gpum_fence *f, unsigned flags) {
  if (!f || !f->writable)
    return;
  struct fence_region *r = f->r;
  flags &= GPUM_FENCE_USED_ALL;
  /* Once set a flag stays: the common case (already marked) is one load. */
  if ((atomic_load_explicit(&r->used_flags, memory_order_acquire) & flags) == flags)
    return;
  uint32_t me = (uint32_t)getpid();
  /* The pid first, then the flag (release): a reader that sees the flag sees a pid. The first
   * process to name itself keeps the slot (a compare-and-swap from 0). */
  for (unsigned i = 0; i < USED_BITS; i++) {
    uint32_t zero = 0;
    if (flags & (1u << i))
      atomic_compare_exchange_strong(&r->used_pid[i], &zero, me);
  }
  atomic_fetch_or_explicit(&r->used_flags, flags, memory_order_release);
}

unsigned gpum_fence_used_flags(const gpum_fence *f, int *managed_pid, int *ipc_pid) {
  if (managed_pid)
    *managed_pid = 0;
  if (ipc_pid)
    *ipc_pid = 0;
  if (!f)
    return 0;
  const struct fence_region *r = f->r;
  unsigned flags = atomic_load_explicit(&r->used_flags, memory_order_acquire) & GPUM_FENCE_USED_ALL;
  if (managed_pid && (flags & GPUM_FENCE_USED_MANAGED))
    *managed_pid = (int)atomic_load_explicit(&r->used_pid[0], memory_order_relaxed);
  if (ipc_pid && (flags & GPUM_FENCE_USED_IPC))
    *ipc_pid = (int)atomic_load_explicit(&r->used_pid[1], memory_order_relaxed);
  return flags;
}

bool gpum_fence_abandoned(gpum_fence *f) {
  if (!f)
    return false;
  struct fence_region *r = f->r;
  if (owner_alive(r->creator_pid, r->creator_start))
    return false;
  for (unsigned i = 0; i < GPUM_FENCE_MAX_PROCS; i++) {
    struct fence_slot *s = &r->slot[i];
    uint64_t o = atomic_load_explicit(&s->owner, memory_order_acquire);
    if (o == 0)
      continue;
    bool alive = (o & OWNER_RECLAIMING) ? owner_alive(o & OWNER_PID_MASK, 0)
                                        : owner_alive(o, atomic_load(&s->start));
    if (alive)
      return false;
  }
  return true;
}

/* Whether the region name (a region of the shim's own, "gpum-fence-pPID-...") is one nobody
 * will use again: its creator and every process attached are gone. One that is not a finished
 * region of this version (its creator died while making it, or another version's) counts as
 * abandoned when the process its name gives is gone. Regions of other users are left alone,
 * except by root. */
static bool own_region_abandoned(int dirfd, const char *name) {
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return false;
  struct stat st;
  bool mine =
      fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_uid == geteuid() || geteuid() == 0);
  close(fd);
  if (!mine)
    return false;
  gpum_fence *f = NULL;
  if (gpum_fence_open_owned(name, false, st.st_uid, &f) == 0) {
    bool gone = gpum_fence_abandoned(f);
    gpum_fence_close(f);
    return gone;
  }
  gpum_error_clear();
  char *end = NULL;
  long pid = strtol(name + strlen(NAME_BASE "p"), &end, 10);
  if (!end || *end != '-' || pid <= 0)
    return false;
  gpum__os_proc_stat_t ps;
  return gpum__os_proc_stat((int)pid, &ps) == -ENOENT;
}

unsigned gpum_fence_sweep_own(void) {
  DIR *dir = opendir(SHM_DIR);
  if (!dir)
    return 0;
  unsigned removed = 0;
  struct dirent *e;
  while ((e = readdir(dir)) != NULL) {
    if (strncmp(e->d_name, NAME_BASE "p", strlen(NAME_BASE "p")) != 0 ||
        strlen(e->d_name) >= GPUM_FENCE_NAME_MAX || !own_region_abandoned(dirfd(dir), e->d_name))
      continue;
    if (gpum_fence_unlink(e->d_name) == 0)
      removed++;
    gpum_error_clear();
  }
  closedir(dir);
  return removed;
}
