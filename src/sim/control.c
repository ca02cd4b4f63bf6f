/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control API of the simulated driver (include/gpum/sim.h): creating and stopping nodes,
 * injecting and clearing faults, setting utilisation, holding memory from a detached process,
 * reading a node's status, and the lock-holding test hook. Each call maps the node for its
 * own duration, independently of GPUM_SIM_NODE.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gpum/error.h>

#include "sim_internal.h"

static int hold_start(const char *name, unsigned device, uint64_t bytes, uint64_t duration_ms,
                      pid_t *pid_out, bool mps);

int gpum_sim_create(const char *spec_path, const char *name, char *name_out, size_t name_len) {
  if (!spec_path)
    return gpum__sim_err(GPUM_EINVAL, "no spec file given");
  if (name && !gpum__sim_valid_name(name))
    return gpum__sim_err(GPUM_EINVAL,
                         "bad node name '%.80s': use 1-64 characters from A-Z a-z 0-9 _ . -", name);
  struct gpum__sim_node_spec *spec = malloc(sizeof *spec);
  if (!spec)
    return gpum__sim_err(GPUM_ENOMEM, "out of memory");
  int rc = gpum__sim_spec_load(spec_path, spec);
  if (rc)
    goto out;
  if (!name && !spec->name[0]) {
    rc = gpum__sim_err(GPUM_EINVAL, "%s has no 'name': give one with --name", spec_path);
    goto out;
  }
  gpum__sim_spec_set_name(spec, name ? name : spec->name);
  rc = gpum__sim_shm_create(spec, spec->name);
  /* mps: a stand-in MPS server per such GPU, a holder named nvidia-cuda-mps-server (the real
   * server holds the GPU's contexts and is listed among its processes), until the node stops. */
  for (unsigned i = 0; rc == 0 && i < spec->device_count; i++) {
    if (spec->dev[i].mps && (rc = hold_start(spec->name, i, GPUM__SIM_MPS_BYTES, 0, NULL, true)))
      gpum_sim_destroy(spec->name);
  }
  if (rc == 0 && name_out && !gpum__sim_strfit(name_out, name_len, spec->name))
    rc = gpum__sim_err(GPUM_EINVAL, "name buffer too small");
out:
  free(spec);
  return rc;
}

/* Opens name and checks device (UINT32_MAX allowed when all_ok). */
static int open_dev(const char *name, unsigned device, bool all_ok, struct gpum__sim_node **out) {
  int rc = gpum__sim_shm_open(name, out);
  if (rc)
    return rc;
  unsigned count = (*out)->spec.device_count;
  if (device < count || (all_ok && device == UINT32_MAX))
    return 0;
  gpum__sim_shm_close(*out);
  return gpum__sim_err(GPUM_ENODEV, "node '%s' has no device %u (it has %u: 0 to %u)", name, device,
                       count, count - 1);
}

int gpum_sim_destroy(const char *name) {
  struct gpum__sim_node *n;
  int rc = gpum__sim_shm_open(name, &n);
  if (rc == GPUM_EDRIVERVER) /* another version's node: still removable */
    return gpum__sim_shm_unlink(name);
  if (rc)
    return rc;
  struct {
    pid_t pid;
    uint64_t start;
  } holds[64];
  unsigned nholds = 0;
  if (gpum__sim_lock(n) == 0) {
    for (uint32_t s = 0; s < n->proc_hw && s < GPUM__SIM_MAX_PROCS; s++) {
      const struct gpum__sim_proc *p = &n->procs[s];
      if (p->state == GPUM__SIM_A_USED && p->hold && nholds < 64)
        holds[nholds].pid = p->pid, holds[nholds++].start = p->start_time;
    }
    __atomic_store_n(&n->hdr.stopped, 1, __ATOMIC_RELEASE);
    gpum__sim_unlock(n);
  }
  gpum__sim_wake(n);
  /* The holders are ours (gpum_sim_hold): end them, unless their pid was reused. */
  for (unsigned i = 0; i < nholds; i++) {
    char st;
    uint64_t start;
    if (gpum__sim_proc_stat(holds[i].pid, &st, &start) == 0 && start == holds[i].start)
      kill(holds[i].pid, SIGTERM);
  }
  gpum__sim_shm_close(n);
  return gpum__sim_shm_unlink(name);
}

int gpum_sim_list(char (*names)[GPUM_SIM_NAME_MAX + 1], size_t max, size_t *count) {
  DIR *d = opendir("/dev/shm");
  if (!d)
    return gpum__sim_err(GPUM_EIO, "cannot list /dev/shm: %s", strerror(errno));
  size_t found = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "gpum-sim-", 9) || !gpum__sim_valid_name(e->d_name + 9))
      continue;
    if (found < max && names)
      gpum__sim_strfit(names[found], GPUM_SIM_NAME_MAX + 1, e->d_name + 9);
    found++;
  }
  closedir(d);
  if (count)
    *count = found;
  return 0;
}

int gpum_sim_inject(const char *name, unsigned device, const gpum_sim_fault_t *fault) {
  struct gpum__sim_node *n;
  if (!fault)
    return gpum__sim_err(GPUM_EINVAL, "no fault given");
  int rc = open_dev(name, device, false, &n);
  if (rc)
    return rc;
  if ((rc = gpum__sim_lock(n)) == 0) {
    gpum__sim_tick(n);
    rc = gpum__sim_fault_apply(n, device, fault);
    gpum__sim_unlock(n);
  }
  gpum__sim_shm_close(n);
  return rc;
}

int gpum_sim_clear(const char *name, unsigned device) {
  struct gpum__sim_node *n;
  int rc = open_dev(name, device, true, &n);
  if (rc)
    return rc;
  if ((rc = gpum__sim_lock(n)) == 0) {
    for (unsigned i = 0; i < n->spec.device_count; i++)
      if (device == UINT32_MAX || device == i)
        gpum__sim_fault_clear(n, i);
    gpum__sim_unlock(n);
  }
  gpum__sim_shm_close(n);
  return rc;
}

int gpum_sim_set_util(const char *name, unsigned device, int gpu_pct, int mem_pct) {
  struct gpum__sim_node *n;
  if (gpu_pct < 0 || gpu_pct > 100 || mem_pct < -1 || mem_pct > 100)
    return gpum__sim_err(GPUM_EINVAL, "bad utilisation %d%%/%d%% (expected 0..100)", gpu_pct,
                         mem_pct);
  int rc = open_dev(name, device, false, &n);
  if (rc)
    return rc;
  if ((rc = gpum__sim_lock(n)) == 0) {
    gpum__sim_tick(n); /* the model runs up to now with the old utilisation */
    n->dev[device].util_gpu = (unsigned)gpu_pct;
    n->dev[device].util_mem = mem_pct < 0 ? (unsigned)gpu_pct / 2 : (unsigned)mem_pct;
    gpum__sim_unlock(n);
  }
  gpum__sim_shm_close(n);
  return rc;
}

struct hold_reply {
  int rc;
  pid_t pid;
  char msg[256];
};

/* Makes this process look like an MPS server in /proc: its name (comm) and its command line,
 * whose memory (arg_start..arg_end of /proc/self/stat) it overwrites with
 * "nvidia-cuda-mps-server" and NULs (cut short when that memory is smaller). */
static void become_mps_server(void) {
  static const char cmd[] = "nvidia-cuda-mps-server";
  prctl(PR_SET_NAME, "nvidia-cuda-mps");
  char buf[4096];
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  ssize_t got = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0)
    close(fd);
  if (got <= 0)
    return;
  buf[got] = '\0';
  char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
  unsigned long long start = 0, end = 0;
  /* ") " ends field 2; each further space starts the next field. */
  for (int field = 3; p && field <= 49; field++) {
    p = strchr(p + 1, ' ');
    if (p && field == 48)
      start = strtoull(p + 1, NULL, 10);
    if (p && field == 49)
      end = strtoull(p + 1, NULL, 10);
  }
  if (!start || end <= start)
    return;
  char *area = (char *)(uintptr_t)start;
  size_t len = (size_t)(end - start);
  memset(area, 0, len);
  memcpy(area, cmd, len - 1 < sizeof cmd - 1 ? len - 1 : sizeof cmd - 1);
}

/* The holder: accounts the memory, reports, then waits out the duration. Never returns. */
static void hold_child(struct gpum__sim_node *n, unsigned device, uint64_t bytes,
                       uint64_t duration_ms, int wfd, bool mps) {
  struct hold_reply rep = {.pid = getpid()};
  setsid();
  if (mps)
    become_mps_server();
  else
    prctl(PR_SET_NAME, "gpum-sim-hold");
  int null = open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3 && null >= 0; fd++)
    dup2(null, fd);
  for (int fd = 3; fd < 1024; fd++)
    if (fd != wfd)
      close(fd);
  int idx = -1;
  if ((rep.rc = gpum__sim_lock(n)) == 0) {
    gpum__sim_tick(n);
    CUresult cr = gpum__sim_cu_fault(n, device);
    if (cr == CUDA_SUCCESS)
      cr = gpum__sim_cu_take_capacity(n, device, bytes);
    if (cr == CUDA_SUCCESS &&
        (idx = gpum__sim_alloc_add(n, GPUM__SIM_K_HOLD, device, 0, bytes)) < 0)
      cr = CUDA_ERROR_OUT_OF_MEMORY;
    if (cr != CUDA_SUCCESS) {
      rep.rc = cr == CUDA_ERROR_OUT_OF_MEMORY ? GPUM_EDEVOOM : GPUM_ESTATE;
      snprintf(rep.msg, sizeof rep.msg,
               cr == CUDA_ERROR_OUT_OF_MEMORY
                   ? "device %u has %llu bytes free, not enough to hold %llu"
                   : "device %u is in a fault state (lost or needs a reset); %llu/%llu",
               device, (unsigned long long)gpum__sim_free(n, device), (unsigned long long)bytes);
    }
    gpum__sim_unlock(n);
  }
  ssize_t w = write(wfd, &rep, sizeof rep);
  (void)w;
  close(wfd);
  if (rep.rc)
    _exit(1);
  uint64_t left = duration_ms;
  while ((duration_ms == 0 || left > 0) && !__atomic_load_n(&n->hdr.stopped, __ATOMIC_ACQUIRE)) {
    uint64_t step = duration_ms == 0 || left > 1000 ? 1000 : left;
    gpum__sim_sleep_ms(step);
    left -= duration_ms ? step : 0;
  }
  if (gpum__sim_lock(n) == 0) {
    if (gpum__sim_alloc_mine(n, idx, GPUM__SIM_K_HOLD, 0))
      gpum__sim_alloc_remove(n, idx);
    gpum__sim_unlock(n);
  }
  _exit(0);
}

static int hold_start(const char *name, unsigned device, uint64_t bytes, uint64_t duration_ms,
                      pid_t *pid_out, bool mps) {
  struct gpum__sim_node *n;
  if (bytes == 0)
    return gpum__sim_err(GPUM_EINVAL, "hold needs at least one byte");
  int rc = open_dev(name, device, false, &n);
  if (rc)
    return rc;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    rc = gpum__sim_err(GPUM_EIO, "pipe: %s", strerror(errno));
    goto out_close;
  }
  pid_t child = fork();
  if (child == 0) {
    /* Double fork: the holder is adopted by init and never becomes our zombie. */
    close(p[0]);
    if (fork() == 0)
      hold_child(n, device, bytes, duration_ms, p[1], mps);
    _exit(0);
  }
  close(p[1]);
  if (child < 0) {
    rc = gpum__sim_err(GPUM_EIO, "fork: %s", strerror(errno));
    goto out_pipe;
  }
  waitpid(child, NULL, 0);
  struct hold_reply rep;
  ssize_t got;
  while ((got = read(p[0], &rep, sizeof rep)) < 0 && errno == EINTR)
    ;
  if (got != (ssize_t)sizeof rep)
    rc = gpum__sim_err(GPUM_EIO, "the holding process died before reporting");
  else if (rep.rc)
    rc = gpum__sim_err(rep.rc, "%s", rep.msg);
  else if (pid_out)
    *pid_out = rep.pid;
out_pipe:
  close(p[0]);
out_close:
  gpum__sim_shm_close(n);
  return rc;
}

int gpum_sim_hold(const char *name, unsigned device, uint64_t bytes, uint64_t duration_ms,
                  pid_t *pid_out) {
  return hold_start(name, device, bytes, duration_ms, pid_out, false);
}

static void fill_device(struct gpum__sim_node *n, unsigned i, gpum_sim_device_status_t *o) {
  const struct gpum__sim_dev_spec *s = &n->spec.dev[i];
  const struct gpum__sim_dev_state *d = &n->dev[i];
  memset(o, 0, sizeof *o);
  o->index = i;
  gpum__sim_strfit(o->vendor, sizeof o->vendor, gpum__sim_vendor_name(s->vendor));
  /* A MIG instance is reached through its GPU: its GPU's number. */
  o->vendor_index = gpum__sim_vendor_ord(n, s->mig_of ? s->mig_of - 1 : i);
  gpum__sim_strfit(o->name, sizeof o->name, s->name);
  gpum__sim_strfit(o->uuid, sizeof o->uuid, s->uuid);
  gpum__sim_strfit(o->pci_bus_id, sizeof o->pci_bus_id, s->pci_bus_id);
  o->cc_major = s->cc_major;
  o->cc_minor = s->cc_minor;
  o->memory_total = s->memory;
  o->memory_reserved = s->reserved;
  o->memory_used = gpum__sim_used(n, i);
  o->util_gpu = d->util_gpu;
  o->util_mem = d->util_mem;
  o->temperature_c = gpum__sim_temp(n, i);
  o->power_mw = gpum__sim_power_mw(n, i);
  o->power_limit_mw = s->power_limit_mw;
  o->lost = d->lost;
  o->reset_required = d->reset_required;
  o->last_xid = d->last_xid;
  o->xid_count = d->xid_count;
  o->temp_override = d->temp_override;
  o->error_rate = d->error_rate_ppm / 1e6;
  o->slow_ms = d->slow_ms;
  o->fail_after_set = d->fail_after_set;
  o->fail_after_left = d->fail_after_left;
  o->ecc_sbe_volatile = d->ecc_sbe_volatile;
  o->ecc_dbe_volatile = d->ecc_dbe_volatile;
  o->ecc_sbe_aggregate = d->ecc_sbe_aggregate;
  o->ecc_dbe_aggregate = d->ecc_dbe_aggregate;
  o->unsupported = s->unsupported;
}

int gpum_sim_status(const char *name, gpum_sim_status_t *out) {
  if (!out || out->api_version != GPUM_SIM_API_VERSION)
    return gpum__sim_err(GPUM_EINVAL,
                         "gpum_sim_status: api_version %u, this library has %u (rebuild against "
                         "this gpum/sim.h)",
                         out ? out->api_version : 0, GPUM_SIM_API_VERSION);
  struct gpum__sim_node *n;
  int rc = gpum__sim_shm_open(name, &n);
  if (rc)
    return rc;
  if ((rc = gpum__sim_lock(n)) == 0) {
    gpum__sim_tick(n);
    gpum__sim_reap(n);
    memset(out, 0, sizeof *out);
    out->api_version = GPUM_SIM_API_VERSION;
    gpum__sim_strfit(out->name, sizeof out->name, n->spec.name);
    gpum__sim_strfit(out->driver_version, sizeof out->driver_version, n->spec.driver_version);
    out->cuda_version = n->spec.cuda_version;
    out->created_unix = n->hdr.created_unix;
    out->device_count = n->spec.device_count;
    for (unsigned i = 0; i < n->spec.device_count; i++)
      fill_device(n, i, &out->devices[i]);
    unsigned np = gpum__sim_processes(n, UINT32_MAX, out->processes, GPUM_SIM_MAX_PROCESSES);
    out->process_count = np < GPUM_SIM_MAX_PROCESSES ? np : GPUM_SIM_MAX_PROCESSES;
    gpum__sim_unlock(n);
  }
  gpum__sim_shm_close(n);
  return rc;
}

int gpum_sim_debug_hold_lock(const char *name, int ready_fd) {
  struct gpum__sim_node *n;
  int rc = gpum__sim_shm_open(name, &n);
  if (rc)
    return rc;
  if ((rc = gpum__sim_lock(n)) != 0) {
    gpum__sim_shm_close(n);
    return rc;
  }
  if (write(ready_fd, "L", 1) != 1) {
    gpum__sim_unlock(n);
    gpum__sim_shm_close(n);
    return gpum__sim_err(GPUM_EIO, "cannot signal readiness: %s", strerror(errno));
  }
  for (;;)
    pause();
}
