/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The devices as the engine keeps them: the "devices" array of the status reply (each device as
 * the monitor sees it, devices.c, with what the scheduler holds on it), and the operator's
 * switches, stored in the ledger and applied again at every start.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <gpum/gputype.h>
#include <gpum/log.h>
#include <gpum/options.h>

#include "devices.h"
#include "engine.h"
#include "gpumd.h"
#include "ledger.h"
#include "os_internal.h"
#include "users.h"

const char *gpumd_engine_resource_of(gpumd_t *d, const char *name) {
  gpum_gpu_type_t t;
  const char *key = "resources.default";
  if (name && gpum_gpu_type_parse(name, &t) == 0 && t.vendor != GPUM_GPU_VENDOR_UNKNOWN)
    key = t.vendor == GPUM_GPU_VENDOR_NVIDIA ? "resources.nvidia"
          : t.vendor == GPUM_GPU_VENDOR_AMD  ? "resources.amd"
                                             : "resources.intel";
  const char *r = gpum_config_get_string(d->cfg, key);
  return r && *r ? r : gpum_config_get_string(d->cfg, "resources.default");
}

const char *gpumd_engine_vendor_of(const gpumd_device_t *dev) {
  if (dev->info.vendor && *dev->info.vendor)
    return dev->info.vendor;
  gpum_gpu_type_t t;
  bool typed = gpum_gpu_type_parse(dev->info.name, &t) == 0;
  return gpum_gpu_vendor_name(typed ? t.vendor : GPUM_GPU_VENDOR_UNKNOWN);
}

int gpumd_engine_class_gb(gpumd_t *d, const char *name, double *gb) {
  gpum_gpu_type_t t;
  if (name && gpum_gpu_type_parse(name, &t) == 0 && t.family[0] && t.memory_gb <= 0) {
    char key[64];
    double v = 0;
    for (size_t i = 0; gpum_config_get_map(d->cfg, "gputype.memory", i, key, sizeof key, &v) == 0;
         i++) {
      gpum_gpu_type_t k;
      if (gpum_gpu_type_parse(key, &k) == 0 && strcmp(k.family, t.family) == 0) {
        *gb = v;
        return 0;
      }
    }
  }
  return gpum_gpu_type_memory_gb(name, gb);
}

json_t *gpumd_engine_devices_json(gpumd_t *d) {
  return gpumd_engine_devices_json_head(d, SIZE_MAX);
}

json_t *gpumd_engine_devices_json_head(gpumd_t *d, size_t max_ids) {
  json_t *arr = json_array();
  for (unsigned i = 0; i < d->device_count; i++) {
    gpumd_device_t *dev = &d->devices[i];
    gpum_device_health_t h;
    memset(&h, 0, sizeof h);
    gpum_monitor_health(d->mon, dev->index, &h);
    if (!dev->answered) {
      h.state = GPUM_HEALTH_ERROR;
      snprintf(h.reason, sizeof h.reason, "%s", GPUMD_SILENT_REASON);
    }
    gpum_device_sample_t s;
    bool have = gpum_monitor_latest(d->mon, dev->index, &s) == 0;
    uint64_t total = dev->info.memory_total;
    uint64_t used = have && gpum_sample_valid(&s, GPUM_METRIC_MEMORY_USED) ? s.memory_used : 0;
    /* The driver's own share (NVML memory info v2) is neither used nor free: free is what the
     * driver says, as in gpum status and /metrics, not total - used. */
    bool have_drv = have && gpum_sample_valid(&s, GPUM_METRIC_MEMORY_RESERVED);
    uint64_t drv = have_drv ? s.memory_reserved : 0;
    uint64_t free_b = have && gpum_sample_valid(&s, GPUM_METRIC_MEMORY_FREE) ? s.memory_free
                      : total > used + drv                                   ? total - used - drv
                                                                             : 0;
    json_t *o =
        json_pack("{s:I, s:s, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:o}}", "index",
                  (json_int_t)dev->index, "uuid", dev->info.uuid, "name", dev->info.name, "state",
                  gpum_health_state_name(h.state), "reason", h.reason, "memory", "total",
                  (json_int_t)total, "used", (json_int_t)used, "free", (json_int_t)free_b,
                  "driver_reserved", have_drv ? json_integer((json_int_t)drv) : json_null());
    if (o) {
      gpum_gpu_type_t t;
      bool typed = gpum_gpu_type_parse(dev->info.name, &t) == 0;
      json_object_set_new(o, "vendor", json_string(gpumd_engine_vendor_of(dev)));
      json_object_set_new(o, "vendor_index", json_integer(dev->info.vendor_index));
      json_object_set_new(o, "gpu_type",
                          typed && t.family[0] ? json_string(t.family) : json_null());
      json_object_set_new(o, "resource", json_string(gpumd_engine_resource_of(d, dev->info.name)));
      /* NVIDIA MIG: the instance's parent GPU (null for a whole GPU). */
      bool mig = dev->info.valid & GPUM_INFO_MIG;
      json_object_set_new(o, "parent_uuid", mig ? json_string(dev->info.parent_uuid) : json_null());
      json_object_set_new(o, "mig",
                          mig ? json_pack("{s:i, s:I, s:I}", "parent_index", dev->info.parent_index,
                                          "gpu_instance", (json_int_t)dev->info.mig_gi,
                                          "compute_instance", (json_int_t)dev->info.mig_ci)
                              : json_null());
      gpumd_engine_device_json(d, dev->index, o, max_ids);
      json_array_append_new(arr, o);
    }
  }
  return arr;
}

void gpumd_engine_apply_disabled(gpumd_t *d) {
  gpumd_ledger_disabled_t *list = NULL;
  size_t n = 0;
  if (!d->ledger || !d->mon)
    return;
  if (gpumd_ledger_load_disabled(d->ledger, &list, &n) != 0) {
    gpum_log(GPUM_LOG_ERROR, "gpumd", "cannot read the disabled devices: %s", gpum_last_error());
    return;
  }
  for (size_t k = 0; k < n; k++) {
    for (unsigned i = 0; i < d->device_count; i++) {
      gpumd_device_t *dev = &d->devices[i];
      gpum_device_health_t h;
      if (!dev->answered || strcmp(dev->info.uuid, list[k].uuid) != 0 ||
          gpum_monitor_health(d->mon, dev->index, &h) != 0 || h.state == GPUM_HEALTH_DISABLED)
        continue;
      gpum_monitor_set_disabled(d->mon, dev->index, true, list[k].reason);
      gpum_log(GPUM_LOG_INFO, "gpumd", "device %u (%s) stays disabled (uid %u): %s", dev->index,
               dev->info.uuid, list[k].uid, list[k].reason);
    }
  }
  free(list);
}

int gpumd_engine_set_disabled(gpumd_t *d, const gpumd_actor_t *a, const gpumd_device_t *dev,
                              bool disable, const char *reason) {
  int rc = gpumd_ledger_set_disabled(d->ledger, dev->info.uuid, disable, reason, a->uid,
                                     gpum__os_real_ns());
  if (rc == 0)
    rc = gpum_monitor_set_disabled(d->mon, dev->index, disable, reason);
  if (rc != 0)
    return rc;
  gpum_log(GPUM_LOG_WARN, "gpumd", "device %u (%s) %s by uid %u%s%s: %s", dev->index,
           dev->info.uuid, disable ? "disabled" : "enabled", a->uid, a->via ? " over " : "",
           a->via ? a->via : "", disable ? reason : "back to the health rules");
  /* The scheduler sees the new state in this turn: nothing is placed on it after the reply. */
  gpumd_engine_device_health(d, dev->index, disable ? GPUM_HEALTH_DISABLED : GPUM_HEALTH_AVAILABLE,
                             reason);
  return 0;
}

/* Whether pl's entry i comes before entry j: larger memory first, then the smaller pid. */
static bool proc_before(const gpumd_procs_t *pl, size_t i, size_t j) {
  if (pl->memory[i] != pl->memory[j])
    return pl->memory[i] > pl->memory[j];
  return pl->pid[i] < pl->pid[j];
}

json_t *gpumd_engine_device_procs_json(gpumd_t *d, unsigned index) {
  static gpumd_procs_t pl; /* loop thread only; too big for the stack */
  if (gpumd_procs_get(d, index, &pl) != 0)
    return NULL;
  size_t order[GPUMD_MAX_PROCS] = {0};
  for (size_t k = 0; k < pl.count; k++) { /* insertion sort: at most 128 entries */
    size_t at = k;
    for (; at > 0 && proc_before(&pl, k, order[at - 1]); at--)
      order[at] = order[at - 1];
    order[at] = k;
  }
  json_t *arr = json_array();
  gpumd_engine_pids_begin(d);
  for (size_t k = 0; arr && k < pl.count; k++) {
    size_t i = order[k];
    const gpumd_resv_t *r =
        d->sched ? gpumd_engine_resv_of_pid(d, index, (int32_t)pl.pid[i]) : NULL;
    char id[GPUMD_RESV_ID_BUFSZ], name[GPUMD_USER_BUFSZ];
    bool visible = pl.uid[i] != GPUMD_PROC_NO_UID;
    bool named = visible && gpumd_users_name(d->users, pl.uid[i], name);
    json_array_append_new(
        arr, json_pack("{s:I, s:o, s:o, s:s, s:I, s:o}", "pid", (json_int_t)pl.pid[i], "uid",
                       visible ? json_integer(pl.uid[i]) : json_null(), "user",
                       named ? json_string(name) : json_null(), "command", pl.command[i], "memory",
                       (json_int_t)pl.memory[i], "reservation",
                       r ? json_string(gpumd_resv_id_format(r->id, id, sizeof id)) : json_null()));
  }
  gpumd_engine_pids_end(d);
  return arr;
}
