/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The environment of a job that runs under a reservation (gpum/session.h): one list of
 * variables that gpum run sets, gpum reserve prints and gpumd's REST setup answers return, so
 * that every way to start a job hands it the same view of its GPUs; and, for a job of several
 * processes, the torchrun/NCCL variables (gpum_distributed_env) those launchers add.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/session.h>

/* A device of gpumd's CPU fallback (the host backend names its one device "host-..."). */
static bool is_host_device(const gpum_res_device_t *d) {
  return strcmp(d->vendor, "host") == 0 || strncmp(d->uuid, "host-", 5) == 0;
}

/* The runtime that drives d. A gpumd that does not say the vendor is an older one, of NVIDIA
 * GPUs only. */
static const char *vendor_of(const gpum_res_device_t *d) {
  if (is_host_device(d))
    return "host";
  return d->vendor[0] ? d->vendor : "nvidia";
}

/* Appends name=value; false when it does not fit (the caller reports ENOSPC). */
static bool put(gpum_env_var_t *vars, size_t cap, size_t *n, const char *name, const char *value,
                bool if_unset) {
  if (*n >= cap)
    return false;
  gpum_env_var_t *v = &vars[(*n)++];
  snprintf(v->name, sizeof v->name, "%s", name);
  snprintf(v->value, sizeof v->value, "%s", value);
  v->if_unset = if_unset;
  return true;
}

typedef enum { BY_UUID, BY_VENDOR_INDEX, BY_ORDINAL } naming_t;

/* Joins with commas the granted devices of vendor (NULL: every device), each named as how
 * says: its UUID (else gpumd's index), its number among its vendor's devices, or its ordinal
 * in the list (0, 1, ...). Returns how many. */
static unsigned join_devices(const gpum_reservation_t *r, const char *vendor, naming_t how,
                             char *buf, size_t len) {
  size_t off = 0;
  unsigned k = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < r->ndevices && off < len; i++) {
    const gpum_res_device_t *d = &r->devices[i];
    if (vendor && strcmp(vendor_of(d), vendor) != 0)
      continue;
    const char *sep = off ? "," : "";
    int w = how == BY_ORDINAL        ? snprintf(buf + off, len - off, "%s%u", sep, k)
            : how == BY_VENDOR_INDEX ? snprintf(buf + off, len - off, "%s%u", sep, d->vendor_index)
            : d->uuid[0]             ? snprintf(buf + off, len - off, "%s%s", sep, d->uuid)
                                     : snprintf(buf + off, len - off, "%s%u", sep, d->index);
    if (w < 0)
      break;
    off += (size_t)w;
    k++;
  }
  return k;
}

int gpum_reservation_env(const gpum_reservation_t *r, gpum_env_var_t *vars, size_t cap,
                         size_t *count) {
  if (count)
    *count = 0;
  if (r == NULL || vars == NULL || count == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_reservation_env: NULL argument");
  if (r->id[0] == '\0' || r->ndevices == 0 || r->ndevices > GPUM_CLIENT_MAX_DEVICES)
    return gpum_error(GPUM_EINVAL, "reservation %s has no granted device",
                      r->id[0] ? r->id : "(no id)");
  char cuda[GPUM_ENV_VALUE_MAX], rocr[GPUM_ENV_VALUE_MAX], hip[GPUM_ENV_VALUE_MAX],
      ze[GPUM_ENV_VALUE_MAX], all[GPUM_ENV_VALUE_MAX], limit[24];
  join_devices(r, "nvidia", BY_UUID, cuda, sizeof cuda);
  unsigned amd = join_devices(r, "amd", BY_UUID, rocr, sizeof rocr);
  join_devices(r, "amd", BY_ORDINAL, hip, sizeof hip);
  unsigned intel = join_devices(r, "intel", BY_VENDOR_INDEX, ze, sizeof ze);
  join_devices(r, NULL, BY_UUID, all, sizeof all);
  snprintf(limit, sizeof limit, "%llu", (unsigned long long)r->bytes_per_gpu);
  size_t n = 0;
  bool ok = put(vars, cap, &n, "CUDA_VISIBLE_DEVICES", cuda, false) &&
            put(vars, cap, &n, "CUDA_DEVICE_ORDER", "PCI_BUS_ID", false);
  /* ROCm: ROCR_VISIBLE_DEVICES picks the GPUs by UUID at the lowest level; HIP numbers what is
   * left from 0, and HIP_VISIBLE_DEVICES (all of them) keeps HIP from reading
   * CUDA_VISIBLE_DEVICES, which it otherwise takes as its own. */
  if (ok && amd > 0)
    ok = put(vars, cap, &n, "ROCR_VISIBLE_DEVICES", rocr, false) &&
         put(vars, cap, &n, "HIP_VISIBLE_DEVICES", hip, false);
  /* Level Zero: the devices' numbers in the driver's own order. */
  if (ok && intel > 0)
    ok = put(vars, cap, &n, "ZE_AFFINITY_MASK", ze, false);
  ok = ok && put(vars, cap, &n, "GPUM_RESERVATION_ID", r->id, false) &&
       put(vars, cap, &n, "GPUM_MEM_LIMIT", limit, false) &&
       put(vars, cap, &n, "GPUM_RESERVATION_DEVICES", all, false) &&
       put(vars, cap, &n, "TF_FORCE_GPU_ALLOW_GROWTH", "true", true) &&
       put(vars, cap, &n, "XLA_PYTHON_CLIENT_PREALLOCATE", "false", true);
  if (!ok)
    return gpum_error(GPUM_ENOSPC,
                      "the environment of a reservation has up to %d variables, room for %zu",
                      GPUM_RESERVATION_ENV_MAX, cap);
  *count = n;
  return 0;
}

int gpum_reservation_setenv(const gpum_reservation_t *r) {
  gpum_env_var_t *vars = calloc(GPUM_RESERVATION_ENV_MAX, sizeof *vars);
  if (vars == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  size_t n = 0;
  int rc = gpum_reservation_env(r, vars, GPUM_RESERVATION_ENV_MAX, &n);
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (setenv(vars[i].name, vars[i].value, vars[i].if_unset ? 0 : 1) != 0)
      rc = gpum_error(GPUM_ENOMEM, "cannot set %s in the environment", vars[i].name);
  free(vars);
  return rc;
}

int gpum_distributed_env(unsigned nproc, unsigned master_port, gpum_env_var_t *vars, size_t cap,
                         size_t *count) {
  if (count)
    *count = 0;
  if (vars == NULL || count == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_distributed_env: NULL argument");
  if (nproc == 0 || master_port > 65535)
    return gpum_error(GPUM_EINVAL, "gpum_distributed_env: %u processes, master port %u", nproc,
                      master_port);
  char num[16], port[16];
  snprintf(num, sizeof num, "%u", nproc);
  snprintf(port, sizeof port, "%u", master_port ? master_port : GPUM_DISTRIBUTED_MASTER_PORT);
  size_t n = 0;
  bool ok = put(vars, cap, &n, "WORLD_SIZE", num, true) &&
            put(vars, cap, &n, "LOCAL_WORLD_SIZE", num, true) &&
            put(vars, cap, &n, "PET_NPROC_PER_NODE", num, true) &&
            put(vars, cap, &n, "PET_NNODES", "1", true) &&
            put(vars, cap, &n, "MASTER_ADDR", "127.0.0.1", true) &&
            put(vars, cap, &n, "MASTER_PORT", port, true) &&
            put(vars, cap, &n, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", true);
  if (!ok)
    return gpum_error(GPUM_ENOSPC, "the distributed environment has %d variables, room for %zu",
                      GPUM_DISTRIBUTED_ENV_MAX, cap);
  *count = n;
  return 0;
}

int gpum_distributed_setenv(unsigned nproc, unsigned master_port) {
  gpum_env_var_t *vars = calloc(GPUM_DISTRIBUTED_ENV_MAX, sizeof *vars);
  if (vars == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  size_t n = 0;
  int rc = gpum_distributed_env(nproc, master_port, vars, GPUM_DISTRIBUTED_ENV_MAX, &n);
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (setenv(vars[i].name, vars[i].value, vars[i].if_unset ? 0 : 1) != 0)
      rc = gpum_error(GPUM_ENOMEM, "cannot set %s in the environment", vars[i].name);
  free(vars);
  return rc;
}
