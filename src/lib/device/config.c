/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The device layer's options from a configuration (gpum/options.h): one reading of backend,
 * nvml.library and retry.* for every program that opens devices (gpum, gpumd, a library user
 * with a gpum.yaml), and one parser of device lists such as "0,2-3", so that they agree on what
 * a value means. The monitor's options (devices, monitor.*) are read in monitor/config.c.
 */
#include <stdio.h>
#include <string.h>

#include <gpum/device.h>
#include <gpum/error.h>
#include <gpum/options.h>

#define MAX_INDEX 65535u

int gpum_device_opts_from_config(const gpum_config_t *cfg, gpum_device_open_opts_t *opts) {
  gpum_device_open_opts_init(opts);
  if (cfg == NULL)
    return 0;
  const char *backend = gpum_config_get_string(cfg, "backend");
  if (backend && *backend && gpum_backend_parse(backend, &opts->backend) != 0)
    return gpum_error(GPUM_EINVAL, "invalid backend '%s' (expected auto, nvml, rocm or host)",
                      backend);
  const char *lib = gpum_config_get_string(cfg, "nvml.library");
  opts->nvml_library = (lib && *lib) ? lib : NULL;
  lib = gpum_config_get_string(cfg, "rocm_smi.library");
  opts->rocm_library = (lib && *lib) ? lib : NULL;
  int64_t retries = gpum_config_get_int(cfg, "retry.count");
  opts->retries = retries < 0 ? 0 : (retries > 100 ? 100 : (int)retries);
  uint64_t base = gpum_config_get_duration(cfg, "retry.base");
  opts->retry_base_ms = base > 60000 ? 60000 : (int)base;
  return 0;
}

static int parse_uint(const char *s, const char *end, unsigned *out) {
  if (s == end)
    return -1;
  unsigned long v = 0;
  for (const char *p = s; p < end; p++) {
    if (*p < '0' || *p > '9')
      return -1;
    v = v * 10 + (unsigned long)(*p - '0');
    if (v > MAX_INDEX)
      return -1;
  }
  *out = (unsigned)v;
  return 0;
}

/* Inserts v into the ascending array idx[0..*n) unless present. */
static int add_index(unsigned v, unsigned *idx, size_t cap, size_t *n) {
  size_t i = 0;
  while (i < *n && idx[i] < v)
    i++;
  if (i < *n && idx[i] == v)
    return 0;
  if (*n >= cap)
    return gpum_error(GPUM_ERANGE, "too many devices in the list (at most %zu)", cap);
  memmove(idx + i + 1, idx + i, (*n - i) * sizeof *idx);
  idx[i] = v;
  (*n)++;
  return 0;
}

int gpum_device_list_parse(const char *s, unsigned *idx, size_t cap, size_t *n) {
  *n = 0;
  if (!s || !*s)
    return 0;
  const char *p = s;
  for (;;) {
    const char *comma = strchr(p, ',');
    const char *end = comma ? comma : p + strlen(p);
    const char *dash = memchr(p, '-', (size_t)(end - p));
    unsigned lo = 0, hi = 0;
    int bad = dash ? (parse_uint(p, dash, &lo) || parse_uint(dash + 1, end, &hi) || hi < lo)
                   : parse_uint(p, end, &lo);
    if (bad) {
      *n = 0;
      return gpum_error(GPUM_EINVAL,
                        "invalid device list '%s' at '%.*s': expected indexes like 0,2 or 0-3", s,
                        (int)(end - p), p);
    }
    if (!dash)
      hi = lo;
    for (unsigned v = lo; v <= hi; v++) {
      int rc = add_index(v, idx, cap, n);
      if (rc != 0) {
        *n = 0;
        return rc;
      }
    }
    if (!comma)
      break;
    p = comma + 1;
  }
  return 0;
}
