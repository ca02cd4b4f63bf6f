/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shared-memory segment of a simulated node: creating, opening (with a check of the layout
 * version, so that two builds of the simulator never misread each other's state), unlinking,
 * the robust process-shared lock, and the per-process attachment to the node named by
 * GPUM_SIM_NODE that the NVML and CUDA entry points share.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gpum/error.h>

#include "sim_internal.h"

static void shm_path(char *buf, size_t len, const char *name) {
  snprintf(buf, len, "/gpum-sim-%s", name);
}

static void init_state(struct gpum__sim_node *n) {
  uint64_t now = gpum__sim_now_ns();
  for (unsigned i = 0; i < n->spec.device_count; i++) {
    struct gpum__sim_dev_state *d = &n->dev[i];
    d->temp_c = n->spec.dev[i].temp_idle;
    d->power_mw = n->spec.dev[i].power_idle_mw;
    d->model_ns = now;
    d->temp_override = -1000;
  }
}

static int init_mutex(pthread_mutex_t *m) {
  pthread_mutexattr_t a;
  if (pthread_mutexattr_init(&a))
    return -1;
  int rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  if (!rc)
    rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  if (!rc)
    rc = pthread_mutex_init(m, &a);
  pthread_mutexattr_destroy(&a);
  return rc ? -1 : 0;
}

/* Entries of the allocation table: every device's memory in VMM granules, plus room for smaller
 * allocations, contexts and holds. */
static uint32_t table_entries(const struct gpum__sim_node_spec *spec) {
  uint64_t cap = GPUM__SIM_ALLOCS_PER_NODE;
  for (unsigned i = 0; i < spec->device_count; i++)
    cap +=
        (spec->dev[i].memory + GPUM__SIM_GRAN - 1) / GPUM__SIM_GRAN + GPUM__SIM_ALLOCS_PER_DEVICE;
  return cap > GPUM__SIM_MAX_ALLOCS ? GPUM__SIM_MAX_ALLOCS : (uint32_t)cap;
}

static size_t node_bytes(uint32_t alloc_cap) {
  return sizeof(struct gpum__sim_node) + (size_t)alloc_cap * sizeof(struct gpum__sim_alloc);
}

int gpum__sim_shm_create(const struct gpum__sim_node_spec *spec, const char *name) {
  char path[96];
  shm_path(path, sizeof path, name);
  int fd = shm_open(path, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    if (errno == EEXIST)
      return gpum__sim_err(GPUM_EEXIST,
                           "simulated node '%s' already exists (stop it with: gpum sim stop %s)",
                           name, name);
    return gpum__sim_err(GPUM_EIO, "cannot create shared memory %s: %s", path, strerror(errno));
  }
  int rc = 0;
  uint32_t cap = table_entries(spec);
  size_t size = node_bytes(cap);
  /* The allocation table is the segment's tail: ftruncate makes it a hole that costs nothing
   * until used (its pages are populated as it grows, proc.c). The fixed part is allocated now,
   * so that a full /dev/shm is an error here rather than a SIGBUS later. */
  if (ftruncate(fd, (off_t)size) != 0) {
    rc = gpum__sim_err(GPUM_EIO, "cannot size shared memory %s: %s", path, strerror(errno));
    goto out_unlink;
  }
  int err = posix_fallocate(fd, 0, (off_t)sizeof(struct gpum__sim_node));
  if (err != 0) {
    rc = gpum__sim_err(GPUM_EIO, "cannot allocate %zu bytes of shared memory for %s: %s",
                       sizeof(struct gpum__sim_node), path, strerror(err));
    goto out_unlink;
  }
  struct gpum__sim_node *n = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (n == MAP_FAILED) {
    rc = gpum__sim_err(GPUM_EIO, "cannot map shared memory %s: %s", path, strerror(errno));
    goto out_unlink;
  }
  n->spec = *spec;
  init_state(n);
  n->free_head = GPUM__SIM_NIL;
  if (init_mutex(&n->lock) != 0) {
    munmap(n, size);
    rc = gpum__sim_err(GPUM_EIO, "cannot initialise the node's robust mutex");
    goto out_unlink;
  }
  n->hdr.magic = GPUM__SIM_MAGIC;
  n->hdr.layout_version = GPUM__SIM_LAYOUT_VERSION;
  n->hdr.node_size = size;
  n->hdr.alloc_cap = cap;
  n->hdr.created_ns = gpum__sim_now_ns();
  n->hdr.created_unix = (uint64_t)time(NULL);
  __atomic_store_n(&n->hdr.ready, 1, __ATOMIC_RELEASE);
  munmap(n, size);
  close(fd);
  return 0;
out_unlink:
  shm_unlink(path);
  close(fd);
  return rc;
}

/* Reads and checks the header through fd; gives the segment's size. */
static int check_header(int fd, const char *name, size_t *size) {
  struct gpum__sim_header h;
  struct stat st;
  for (int tries = 0;; tries++) {
    if (fstat(fd, &st) != 0)
      return gpum__sim_err(GPUM_EIO, "cannot stat node '%s': %s", name, strerror(errno));
    ssize_t got = (size_t)st.st_size >= sizeof h ? pread(fd, &h, sizeof h, 0) : 0;
    if (got == (ssize_t)sizeof h && h.magic == GPUM__SIM_MAGIC && h.ready)
      break;
    if (got == (ssize_t)sizeof h && h.magic != 0 && h.magic != GPUM__SIM_MAGIC)
      return gpum__sim_err(GPUM_EDRIVERVER, "/gpum-sim-%s is not a gpum simulated node", name);
    if (tries >= 100) /* still being created after 1 s: a creator died half-way */
      return gpum__sim_err(GPUM_EIO,
                           "simulated node '%s' was never finished by its creator (remove it "
                           "with: gpum sim stop %s)",
                           name, name);
    gpum__sim_sleep_ms(10);
  }
  if (h.layout_version != GPUM__SIM_LAYOUT_VERSION)
    return gpum__sim_err(GPUM_EDRIVERVER,
                         "simulated node '%s' has state layout %u but this libgpum_sim.so "
                         "expects layout %u: it was started by another gpum version; stop and "
                         "start it again with this one",
                         name, h.layout_version, GPUM__SIM_LAYOUT_VERSION);
  if (h.alloc_cap > GPUM__SIM_MAX_ALLOCS || h.node_size != node_bytes(h.alloc_cap) ||
      (uint64_t)st.st_size != h.node_size)
    return gpum__sim_err(GPUM_EDRIVERVER,
                         "simulated node '%s' is %llu bytes for %u table entries, which this "
                         "libgpum_sim.so (layout %u) does not expect: stop and start it again",
                         name, (unsigned long long)st.st_size, h.alloc_cap,
                         GPUM__SIM_LAYOUT_VERSION);
  *size = (size_t)h.node_size;
  return 0;
}

int gpum__sim_shm_open(const char *name, struct gpum__sim_node **out) {
  char path[96];
  if (!gpum__sim_valid_name(name))
    return gpum__sim_err(GPUM_EINVAL,
                         "bad node name '%.80s': use 1-64 characters from A-Z a-z 0-9 _ . -",
                         name ? name : "(null)");
  shm_path(path, sizeof path, name);
  int fd = shm_open(path, O_RDWR, 0);
  if (fd < 0) {
    if (errno == ENOENT)
      return gpum__sim_err(GPUM_ENOENT,
                           "no simulated node '%s' (start one with: gpum sim start SPEC --name %s)",
                           name, name);
    return gpum__sim_err(errno == EACCES ? GPUM_EPERM : GPUM_EIO, "cannot open node '%s': %s", name,
                         strerror(errno));
  }
  size_t size = 0;
  int rc = check_header(fd, name, &size);
  if (rc == 0) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
      rc = gpum__sim_err(GPUM_EIO, "cannot map node '%s': %s", name, strerror(errno));
    else
      *out = p;
  }
  close(fd);
  return rc;
}

void gpum__sim_shm_close(struct gpum__sim_node *n) {
  if (n)
    munmap(n, (size_t)n->hdr.node_size);
}

int gpum__sim_shm_unlink(const char *name) {
  char path[96];
  shm_path(path, sizeof path, name);
  if (shm_unlink(path) != 0)
    return gpum__sim_err(errno == ENOENT ? GPUM_ENOENT : GPUM_EIO, "cannot remove node '%s': %s",
                         name, strerror(errno));
  return 0;
}

int gpum__sim_lock(struct gpum__sim_node *n) {
  int rc = pthread_mutex_lock(&n->lock);
  if (rc == EOWNERDEAD) {
    /* The owner died mid-update. The record (entries, event sets, process slots) is consistent
     * at every store; what is derived from it is rebuilt before anyone reads it. */
    gpum__sim_identify();
    gpum__sim_repair(n);
    pthread_mutex_consistent(&n->lock);
    return 0;
  }
  if (rc != 0)
    return gpum__sim_err(GPUM_EIO, "cannot lock simulated node: %s", strerror(rc));
  gpum__sim_identify();
  return 0;
}

void gpum__sim_unlock(struct gpum__sim_node *n) {
  pthread_mutex_unlock(&n->lock);
}

static pthread_mutex_t attach_mu = PTHREAD_MUTEX_INITIALIZER;
static struct gpum__sim_node *attached;

void gpum__sim_shm_atfork(gpum__sim_fork_phase_t ph) {
  gpum__sim_fork_mutex(&attach_mu, ph);
}

struct gpum__sim_node *gpum__sim_attach(int *err) {
  struct gpum__sim_node *n = NULL;
  pthread_mutex_lock(&attach_mu);
  if (attached && !__atomic_load_n(&attached->hdr.stopped, __ATOMIC_ACQUIRE)) {
    n = attached;
    goto out;
  }
  const char *name = getenv("GPUM_SIM_NODE");
  if (!name || !*name) {
    *err = gpum__sim_err(GPUM_ENOENT, "GPUM_SIM_NODE is not set");
    goto out;
  }
  int rc = gpum__sim_shm_open(name, &n);
  if (rc) {
    *err = rc;
    n = NULL;
    goto out;
  }
  /* A previous mapping of a stopped node stays mapped: other threads may still read it. */
  attached = n;
out:
  pthread_mutex_unlock(&attach_mu);
  return n;
}

struct gpum__sim_node *gpum__sim_attached(void) {
  pthread_mutex_lock(&attach_mu);
  struct gpum__sim_node *n = attached;
  pthread_mutex_unlock(&attach_mu);
  return n;
}
