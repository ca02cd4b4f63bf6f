/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemon side of each live reservation ("lease"): which connection it is bound to (its
 * events go there; a connection lease ends when that connection closes), the pidfd watched
 * for a pid lease (readable when the process exits) or, while a connection lease recovered
 * after a restart waits for its client to re-attach, for its owner, the timer of a TTL lease,
 * and whether it waits for that re-attach. Kept in a hash table by reservation id
 * and, per connection, in a list so a closing connection finds its leases at once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <event2/event.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "gpumd_internal.h"
#include "pidstart_internal.h"

static size_t bucket(uint64_t id) {
  return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 52) & (GPUMD_LEASE_BUCKETS - 1);
}

gpumd_lease_t *gpumd_lease_get(gpumd_t *d, uint64_t id) {
  for (gpumd_lease_t *l = d->leases[bucket(id)]; l; l = l->next)
    if (l->id == id)
      return l;
  return NULL;
}

gpumd_lease_t *gpumd_lease_add(gpumd_t *d, uint64_t id) {
  gpumd_lease_t *l = gpumd_lease_get(d, id);
  if (l)
    return l;
  l = calloc(1, sizeof *l);
  if (!l)
    return NULL;
  l->id = id;
  l->pidfd = -1;
  size_t b = bucket(id);
  l->next = d->leases[b];
  d->leases[b] = l;
  return l;
}

static void unbind(gpumd_lease_t *l) {
  gpumd_conn_t *c = l->conn;
  if (!c)
    return;
  if (l->cprev)
    l->cprev->cnext = l->cnext;
  else
    c->leases = l->cnext;
  if (l->cnext)
    l->cnext->cprev = l->cprev;
  l->cprev = l->cnext = NULL;
  l->conn = NULL;
}

void gpumd_lease_bind(gpumd_lease_t *l, gpumd_conn_t *c) {
  unbind(l);
  if (!c)
    return;
  l->conn = c;
  l->cnext = c->leases;
  if (c->leases)
    c->leases->cprev = l;
  c->leases = l;
}

static void stop_pid(gpumd_lease_t *l) {
  if (l->pid_ev) {
    event_free(l->pid_ev);
    l->pid_ev = NULL;
  }
  if (l->pidfd >= 0) {
    close(l->pidfd);
    l->pidfd = -1;
  }
}

void gpumd_lease_remove(gpumd_t *d, uint64_t id) {
  gpumd_lease_t **pp = &d->leases[bucket(id)];
  while (*pp && (*pp)->id != id)
    pp = &(*pp)->next;
  gpumd_lease_t *l = *pp;
  if (!l)
    return;
  *pp = l->next;
  unbind(l);
  stop_pid(l);
  if (l->ttl_ev)
    event_free(l->ttl_ev);
  free(l);
}

void gpumd_leases_free_all(gpumd_t *d) {
  for (size_t b = 0; b < GPUMD_LEASE_BUCKETS; b++)
    while (d->leases[b])
      gpumd_lease_remove(d, d->leases[b]->id);
}

static void on_pid_exit(evutil_socket_t fd, short what, void *arg) {
  (void)fd, (void)what;
  gpumd_lease_t *l = arg;
  gpumd_t *d = l->d;
  char reason[128];
  if (l->awaiting_attach) /* a recovered connection lease: its owner is watched */
    snprintf(reason, sizeof reason, "owner pid %d exited before re-attaching after a gpumd restart",
             (int)l->pid);
  else
    snprintf(reason, sizeof reason, "lease process %d exited", (int)l->pid);
  gpumd_engine_lease_ended(d, l->id, GPUMD_RESV_RELEASED, reason);
}

void gpumd_lease_unwatch_pid(gpumd_lease_t *l) {
  stop_pid(l);
}

int gpumd_lease_watch_pid(gpumd_t *d, gpumd_lease_t *l, int32_t pid, uint64_t start_time) {
  stop_pid(l);
  int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
  if (fd < 0) {
    if (errno == ESRCH)
      return gpum_error(GPUM_ENOENT, "process %d does not exist", (int)pid);
    return gpum_error(GPUM_EIO, "pidfd_open(%d): %s", (int)pid, strerror(errno));
  }
  /* The pidfd pins the process: checked after opening it, the start time tells whether pid
   * is still the recorded process and not a reuse of its number. */
  if (!gpumd_pid_is_alive(pid, start_time)) {
    close(fd);
    return gpum_error(GPUM_ENOENT, "process %d has exited (its pid is gone or reused)", (int)pid);
  }
  l->d = d;
  l->pid = pid;
  l->pidfd = fd;
  l->pid_ev = event_new(d->base, fd, EV_READ, on_pid_exit, l);
  if (!l->pid_ev || event_add(l->pid_ev, NULL) != 0) {
    stop_pid(l);
    return gpum_error(GPUM_ENOMEM, "out of memory");
  }
  return 0;
}

static void on_ttl(evutil_socket_t fd, short what, void *arg) {
  (void)fd, (void)what;
  gpumd_lease_t *l = arg;
  gpumd_t *d = l->d;
  uint64_t now = gpum__os_real_ns();
  if (now < l->expires_ns) { /* renewed meanwhile, or the clock moved: wait on */
    gpumd_lease_arm_ttl(d, l, l->expires_ns);
    return;
  }
  gpumd_engine_lease_ended(d, l->id, GPUMD_RESV_EXPIRED, "lease ttl passed without renewal");
}

int gpumd_lease_arm_ttl(gpumd_t *d, gpumd_lease_t *l, uint64_t expires_ns) {
  l->d = d;
  l->expires_ns = expires_ns;
  if (!l->ttl_ev) {
    l->ttl_ev = event_new(d->base, -1, 0, on_ttl, l);
    if (!l->ttl_ev)
      return gpum_error(GPUM_ENOMEM, "out of memory");
  }
  uint64_t now = gpum__os_real_ns();
  uint64_t left = expires_ns > now ? expires_ns - now : 0;
  struct timeval tv = {.tv_sec = (time_t)(left / 1000000000ull),
                       .tv_usec = (suseconds_t)((left % 1000000000ull) / 1000)};
  event_add(l->ttl_ev, &tv);
  return 0;
}
