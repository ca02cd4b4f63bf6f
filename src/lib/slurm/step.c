/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A Slurm job step's reservation (gpum/slurm.h): the GPUs Slurm gave the step become a gpumd
 * reservation on exactly those devices, held by a pid lease on the calling process (slurmstepd,
 * which lives as long as the step), and optionally fenced by the enforcement shim.
 *
 * Why a pid lease and not the connection: slurmstepd has no event loop of ours to serve a
 * connection. An idle connection that is never read fills with gpumd's events (pressure,
 * position changes) until gpumd drops it, which would end the reservation under a running step;
 * and a descriptor open in slurmstepd is one more thing a task could inherit. gpumd watches the
 * pid with a pidfd, so a slurmstepd that dies, SIGKILL included, ends the reservation as soon as
 * gpumd's loop turns. The request names no pid: gpumd takes the peer's own, which needs no check
 * of who owns it (slurmstepd's /proc entry belongs to root while it acts as the job's user).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/slurm.h>

#define CONNECT_MS 5000

/* Appends name=value to the step's environment. */
static int add_env(gpum_slurm_step_t *st, const char *name, const char *value) {
  if (st->nenv >= GPUM_SLURM_STEP_ENV_MAX)
    return gpum_error(GPUM_ENOSPC, "the step's environment is full");
  gpum_env_var_t *v = &st->env[st->nenv++];
  snprintf(v->name, sizeof v->name, "%s", name);
  int w = snprintf(v->value, sizeof v->value, "%s", value);
  if (w < 0 || (size_t)w >= sizeof v->value)
    return gpum_error(GPUM_ENOSPC, "%s is longer than %zu bytes", name, sizeof v->value - 1);
  v->if_unset = false;
  return 0;
}

/* The fence and the variables that preload the shim. */
static int fence_step(const gpum_slurm_step_req_t *req, gpum_slurm_step_t *st, const char *shim) {
  gpum_fence *f = NULL;
  int rc = gpum_reservation_fence(&st->reservation, st->socket, 0, st->fence, sizeof st->fence, &f);
  if (rc != 0) {
    st->fence[0] = '\0';
    return rc;
  }
  gpum_fence_close(f);
  char preload[GPUM_ENV_VALUE_MAX];
  const char *old = req->ld_preload;
  int w = snprintf(preload, sizeof preload, "%s%s%s", old ? old : "", old && *old ? " " : "", shim);
  if (w < 0 || (size_t)w >= sizeof preload)
    return gpum_error(GPUM_ENOSPC, "LD_PRELOAD with the shim is longer than %zu bytes",
                      sizeof preload - 1);
  if ((rc = add_env(st, "LD_PRELOAD", preload)) != 0 ||
      (rc = add_env(st, GPUM_FENCE_ENV, st->fence)) != 0)
    return rc;
  return 0;
}

int gpum_slurm_step_begin(const gpum_slurm_step_req_t *req, gpum_slurm_step_t *out) {
  if (!req || !out)
    return gpum_error(GPUM_EINVAL, "gpum_slurm_step_begin: NULL argument");
  memset(out, 0, sizeof *out);
  if (req->bytes_per_gpu == 0)
    return gpum_error(GPUM_EINVAL, "no memory per GPU given");
  unsigned idx[GPUM_CLIENT_MAX_DEVICES];
  size_t n = 0;
  int rc = gpum_device_list_parse(req->gpus, idx, GPUM_CLIENT_MAX_DEVICES, &n);
  if (rc != 0) {
    char why[256];
    snprintf(why, sizeof why, "%s", gpum_last_error());
    return gpum_error(rc, "Slurm's GPUs '%s': %s", req->gpus ? req->gpus : "", why);
  }
  if (n == 0)
    return gpum_error(GPUM_EINVAL, "the step has no GPU on this node (ask Slurm for "
                                   "--gres=gpu:N or --gres=shard:N)");
  char shim[4096] = "";
  if (req->enforce && (rc = gpum_enforce_library(shim, sizeof shim)) != 0)
    return rc;
  if (req->socket && *req->socket)
    snprintf(out->socket, sizeof out->socket, "%s", req->socket);
  else if ((rc = gpum_socket_path(NULL, out->socket, sizeof out->socket)) != 0)
    return rc;

  char names[GPUM_CLIENT_MAX_DEVICES][12];
  const char *devs[GPUM_CLIENT_MAX_DEVICES];
  for (size_t i = 0; i < n; i++) {
    snprintf(names[i], sizeof names[i], "%u", idx[i]);
    devs[i] = names[i];
  }
  gpum_reserve_req_t r = {.bytes_per_gpu = req->bytes_per_gpu,
                          .gpus = (unsigned)n,
                          .devices = devs,
                          .ndevices = n,
                          .label = req->label,
                          .lease = GPUM_LEASE_PID,
                          .slurm_job_id = req->job_id,
                          .slurm_step_id = req->step_id};
  gpum_client_t *c = NULL;
  if ((rc = gpum_client_connect(out->socket, CONNECT_MS, &c)) != 0)
    return rc;
  int timeout = req->timeout_ms < 0            ? -1
                : req->timeout_ms > 0x7fffffff ? 0x7fffffff
                                               : (int)req->timeout_ms;
  rc = gpum_client_reserve(c, &r, timeout, &out->reservation);
  if (rc == GPUM_ETIMEDOUT)
    rc = gpum_error(rc, "gpumd did not grant %llu bytes on GPU %s within %lld ms",
                    (unsigned long long)req->bytes_per_gpu, req->gpus, (long long)req->timeout_ms);
  gpum_client_close(c); /* the pid lease keeps the reservation */
  if (rc != 0)
    return rc;

  size_t k = 0;
  rc = gpum_reservation_env(&out->reservation, out->env, GPUM_SLURM_STEP_ENV_MAX, &k);
  out->nenv = k;
  if (rc == 0 && req->enforce)
    rc = fence_step(req, out, shim);
  if (rc != 0) {
    int saved = rc;
    char why[512];
    snprintf(why, sizeof why, "%s", gpum_last_error());
    (void)gpum_slurm_step_end(out);
    return gpum_error(saved, "%s", why);
  }
  return 0;
}

int gpum_slurm_step_end(const gpum_slurm_step_t *st) {
  if (!st)
    return gpum_error(GPUM_EINVAL, "gpum_slurm_step_end: NULL argument");
  if (st->fence[0])
    (void)gpum_fence_unlink(st->fence);
  if (!st->reservation.id[0])
    return 0;
  gpum_client_t *c = NULL;
  int rc = gpum_client_connect(st->socket, CONNECT_MS, &c);
  if (rc != 0)
    return rc;
  rc = gpum_client_release(c, st->reservation.id, NULL);
  gpum_client_close(c);
  if (rc == GPUM_ENOENT) { /* it ended already (its pid lease, an admin) */
    gpum_error_clear();
    rc = 0;
  }
  return rc;
}
