/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The monitor's options from a configuration (gpum/options.h): monitor.interval, monitor.busy_*
 * and the devices to watch, read one way for every program that monitors devices (gpum status,
 * gpum monitor, gpum top, gpumd). The device list is parsed by the device layer's
 * gpum_device_list_parse (device/config.c), so "0,2-3" means the same everywhere.
 */
#include <stddef.h>
#include <stdint.h>

#include <gpum/device.h>
#include <gpum/monitor.h>
#include <gpum/options.h>

#define MAX_INTERVAL_MS 3600000u

/* An optional integer option (a table without it keeps the default). */
static void opt_uint(const gpum_config_t *cfg, const char *key, unsigned *out) {
  if (!gpum_option_find(key))
    return;
  int64_t v = gpum_config_get_int(cfg, key);
  if (v >= 0)
    *out = v > 100000 ? 100000u : (unsigned)v;
}

void gpum_busy_thresholds_from_config(const gpum_config_t *cfg, gpum_busy_thresholds_t *busy) {
  gpum_busy_thresholds_init(busy);
  if (cfg == NULL)
    return;
  opt_uint(cfg, "monitor.busy_util", &busy->util_gpu_pct);
  opt_uint(cfg, "monitor.busy_memory", &busy->memory_pct);
  opt_uint(cfg, "monitor.busy_jobs", &busy->jobs);
}

int gpum_monitor_opts_from_config(const gpum_config_t *cfg, gpum_monitor_opts_t *opts,
                                  unsigned *devs, size_t cap) {
  gpum_monitor_opts_init(opts);
  if (cfg == NULL)
    return 0;
  if (gpum_option_find("monitor.interval")) {
    uint64_t ms = gpum_config_get_duration(cfg, "monitor.interval");
    if (ms > 0)
      opts->interval_ms = ms > MAX_INTERVAL_MS ? MAX_INTERVAL_MS : (unsigned)ms;
  }
  gpum_busy_thresholds_from_config(cfg, &opts->busy);
  size_t n = 0;
  if (devs != NULL) {
    int rc = gpum_device_list_parse(gpum_config_get_string(cfg, "devices"), devs, cap, &n);
    if (rc != 0)
      return rc;
  }
  opts->devices = n ? devs : NULL;
  opts->device_count = n;
  return 0;
}
