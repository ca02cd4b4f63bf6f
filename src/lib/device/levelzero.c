/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Level Zero backend for Intel GPUs: loads libze_loader (or libgpum_sim.so, or whatever
 * GPUM_LEVEL_ZERO_LIBRARY names) with dlopen, resolves our declared subset (src/abi/ze_abi.h)
 * and reads static info, samples, per-process memory and RAS counts through Sysman (zes*).
 * docs/devices.md lists what comes from which call, in which unit, and what it does not give.
 *
 * Initialisation: with zesInit, zesDriverGet and zesDeviceGet exported (loaders of API 1.5 and
 * later) Sysman is initialised on its own; else, or when zesInit fails, through zeInit with
 * ZES_ENABLE_SYSMAN=1 in the environment, which the 1.x drivers read at the process's first
 * zeInit. The backend sets that variable only when it is unset, and it can only help when no
 * zeInit ran earlier in the process.
 *
 * Utilisation and power are rates of counters (an engine group's busy time, a power domain's
 * energy): each sample reads them and compares with the device's previous read in this
 * session, so a session's first sample of a device has neither (invalid, never 0).
 *
 * Errors: NOT_READY and NOT_AVAILABLE are retried with the session's backoff (then
 * GPUM_EAGAIN); DEVICE_LOST is GPUM_ELOST and DEVICE_REQUIRES_RESET GPUM_ERESET; both, and
 * UNINITIALIZED, fail the whole read. Any other failure (UNSUPPORTED_FEATURE above all) leaves
 * its field invalid.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "device/device_internal.h"
#include "device/levelzero_internal.h"

_Static_assert(sizeof(void *) == sizeof(gpum_zeInit_fn), "function pointers fit void *");

typedef struct {
#define FIELD_(name, params) gpum_##name##_fn name;
  GPUM_ZE_FUNCS(FIELD_)
  GPUM_ZES_INIT_FUNCS(FIELD_)
#undef FIELD_
} ze_syms_t;

#define MAX_MEM 16 /* memory modules read per device (one per tile on current parts) */
#define MAX_RES 64 /* resources of one kind listed per device */

typedef struct {
  zes_device_handle_t h;
  bool lost;
  bool info_cached; /* info holds the last successful static info */
  gpum_device_info_t info;
  bool found; /* the resources below were enumerated */
  zes_mem_handle_t mem[MAX_MEM];
  unsigned nmem; /* device-local modules */
  zes_engine_handle_t engine;
  zes_temp_handle_t temp;
  int temp_max_c; /* its maxTemperature, 0 when not given */
  zes_pwr_handle_t pwr;
  zes_freq_handle_t freq_gpu, freq_mem;
  zes_ras_handle_t ras_corr, ras_unc;
  bool have_act, have_energy; /* previous reads of the counters */
  zes_engine_stats_t act;
  zes_power_energy_counter_t energy;
} ze_dev_t;

typedef struct {
  void *dl;
  char path[PATH_MAX];
  ze_syms_t f;
  bool via_zes; /* zesInit path (else zeInit with ZES_ENABLE_SYSMAN) */
  unsigned ndev;
  ze_dev_t *dev;
} ze_t;

static const struct {
  const char *name;
  size_t off;
} sym_table[] = {
#define SYM_(name, params) {#name, offsetof(ze_syms_t, name)},
    GPUM_ZE_FUNCS(SYM_) GPUM_ZES_INIT_FUNCS(SYM_)
#undef SYM_
};

/* ---- pure helpers (levelzero_internal.h) ---- */

bool gpum__ze_is_transient(ze_result_t r) {
  return r == ZE_RESULT_NOT_READY || r == ZE_RESULT_ERROR_NOT_AVAILABLE;
}

int gpum__ze_map_error(ze_result_t r) {
  if (gpum__ze_is_transient(r))
    return GPUM_EAGAIN;
  switch (r) {
  case ZE_RESULT_SUCCESS:
    return 0;
  case ZE_RESULT_ERROR_DEVICE_LOST:
    return GPUM_ELOST;
  case ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET:
    return GPUM_ERESET;
  case ZE_RESULT_ERROR_UNSUPPORTED_FEATURE:
  case ZE_RESULT_ERROR_UNSUPPORTED_VERSION:
    return GPUM_ENOTSUP;
  case ZE_RESULT_ERROR_UNINITIALIZED:
    return GPUM_EDRIVER;
  case ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS:
    return GPUM_EPERM;
  case ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY:
    return GPUM_ENOMEM;
  case ZE_RESULT_ERROR_INVALID_SIZE:
    return GPUM_ENOSPC;
  case ZE_RESULT_ERROR_INVALID_ARGUMENT:
  case ZE_RESULT_ERROR_INVALID_NULL_HANDLE:
  case ZE_RESULT_ERROR_INVALID_NULL_POINTER:
  case ZE_RESULT_ERROR_INVALID_ENUMERATION:
    return GPUM_EINVAL;
  default: /* UNKNOWN, DEVICE_IN_LOW_POWER_STATE, ... */
    return GPUM_EIO;
  }
}

bool gpum__ze_is_fatal(ze_result_t r) {
  return r == ZE_RESULT_ERROR_DEVICE_LOST || r == ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET ||
         r == ZE_RESULT_ERROR_UNINITIALIZED || gpum__ze_is_transient(r);
}

void gpum__ze_format_uuid(const uint8_t id[16], char *out, size_t len) {
  if (len < 37) {
    if (len)
      out[0] = '\0';
    return;
  }
  size_t o = 0;
  for (unsigned k = 0; k < 16; k++) {
    if (k == 4 || k == 6 || k == 8 || k == 10)
      out[o++] = '-';
    snprintf(out + o, len - o, "%02x", id[k]);
    o += 2;
  }
}

void gpum__ze_format_bdf(const zes_pci_address_t *a, char *out, size_t len) {
  snprintf(out, len, "%08X:%02X:%02X.%X", a->domain, a->bus & 0xffu, a->device & 0x1fu,
           a->function & 0x7u);
}

bool gpum__ze_util_percent(const zes_engine_stats_t *prev, const zes_engine_stats_t *cur,
                           unsigned *pct) {
  if (cur->timestamp <= prev->timestamp || cur->activeTime < prev->activeTime)
    return false;
  double p = 100.0 * (double)(cur->activeTime - prev->activeTime) /
             (double)(cur->timestamp - prev->timestamp);
  *pct = p >= 100.0 ? 100u : (unsigned)lround(p);
  return true;
}

bool gpum__ze_power_mw(const zes_power_energy_counter_t *prev,
                       const zes_power_energy_counter_t *cur, unsigned *mw) {
  if (cur->timestamp <= prev->timestamp || cur->energy < prev->energy)
    return false;
  /* uJ / us = W; times 1000 for mW. */
  double p =
      1000.0 * (double)(cur->energy - prev->energy) / (double)(cur->timestamp - prev->timestamp);
  *mw = p >= 4e9 ? 4000000000u : (unsigned)lround(p);
  return true;
}

int gpum__ze_engine_rank(zes_engine_group_t type) {
  switch (type) {
  case ZES_ENGINE_GROUP_ALL:
    return 0;
  case ZES_ENGINE_GROUP_COMPUTE_ALL:
    return 1;
  case ZES_ENGINE_GROUP_RENDER_ALL:
    return 2;
  default:
    return -1;
  }
}

/* ---- calls ---- */

/* Runs expr (a Level Zero call yielding ze_result_t into r) with the session's retry policy. */
#define ZE_RETRY(s, r, expr)                                       \
  do {                                                             \
    for (int att_ = 0;; att_++) {                                  \
      (r) = (expr);                                                \
      if (!gpum__ze_is_transient(r) || att_ >= (s)->retry.retries) \
        break;                                                     \
      gpum__retry_sleep(&(s)->retry, att_);                        \
    }                                                              \
  } while (0)

static void note(ze_t *z, unsigned i, ze_result_t r) {
  if (r == ZE_RESULT_ERROR_DEVICE_LOST) {
    if (!z->dev[i].lost)
      gpum_log(GPUM_LOG_INFO, "device", "device lost backend=levelzero index=%u", i);
    z->dev[i].lost = true;
  } else if (r == ZE_RESULT_SUCCESS) {
    z->dev[i].lost = false;
  }
}

static int fail(const char *call, unsigned i, ze_result_t r) {
  int code = gpum__ze_map_error(r);
  const char *why = r == ZE_RESULT_ERROR_DEVICE_LOST             ? ": the device is gone"
                    : r == ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET ? ": the device needs a reset"
                    : gpum__ze_is_transient(r)                   ? ", still failing after retries"
                                                                 : "";
  return gpum_error(code, "%s on device %u: %s (Level Zero 0x%08" PRIx32 ")%s", call, i,
                    gpum_strerror(code), (uint32_t)r, why);
}

/* Calls a symbol on device `index` (with z and s in scope) if it is there; fails the whole
 * read for a fatal result, else runs on_ok when it succeeded and leaves the field invalid when
 * it did not. */
#define FIELD(sym, args, on_ok)           \
  do {                                    \
    if (z->f.sym) {                       \
      ze_result_t r_;                     \
      ZE_RETRY(s, r_, z->f.sym args);     \
      note(z, index, r_);                 \
      if (r_ == ZE_RESULT_SUCCESS) {      \
        on_ok;                            \
      } else if (gpum__ze_is_fatal(r_)) { \
        return fail(#sym, index, r_);     \
      }                                   \
    }                                     \
  } while (0)

/* ---- loading ---- */

static void unload(ze_t *z) {
  if (!z)
    return;
  if (z->dl)
    dlclose(z->dl); /* Level Zero has no shutdown call */
  free(z->dev);
  free(z);
}

static int resolve(ze_t *z) {
  for (size_t i = 0; i < sizeof sym_table / sizeof sym_table[0]; i++) {
    void *p = dlsym(z->dl, sym_table[i].name);
    memcpy((char *)&z->f + sym_table[i].off, &p, sizeof p);
  }
  bool core = z->f.zeInit && z->f.zeDriverGet && z->f.zeDeviceGet;
  bool sysman = z->f.zesInit && z->f.zesDriverGet && z->f.zesDeviceGet;
  const char *missing = !core && !sysman                   ? "zeInit"
                        : !z->f.zesDeviceGetProperties     ? "zesDeviceGetProperties"
                        : !z->f.zesDeviceEnumMemoryModules ? "zesDeviceEnumMemoryModules"
                        : !z->f.zesMemoryGetProperties     ? "zesMemoryGetProperties"
                        : !z->f.zesMemoryGetState          ? "zesMemoryGetState"
                                                           : NULL;
  if (missing)
    return gpum_error(GPUM_EDRIVER, "%s does not export %s: not a usable Level Zero loader",
                      z->path, missing);
  return 0;
}

/* Initialises Sysman: zesInit when exported and it works, else zeInit with
 * ZES_ENABLE_SYSMAN=1 (set here only when unset). */
static int init_sysman(gpum_device_session_t *s, ze_t *z) {
  ze_result_t r = ZE_RESULT_ERROR_UNINITIALIZED;
  if (z->f.zesInit && z->f.zesDriverGet && z->f.zesDeviceGet) {
    ZE_RETRY(s, r, z->f.zesInit(0));
    if (r == ZE_RESULT_SUCCESS) {
      z->via_zes = true;
      return 0;
    }
    gpum_log(GPUM_LOG_DEBUG, "device", "zesInit failed result=0x%08" PRIx32 ", trying zeInit",
             (uint32_t)r);
  }
  if (!z->f.zeInit || !z->f.zeDriverGet || !z->f.zeDeviceGet)
    return gpum_error(GPUM_EDRIVER, "zesInit in %s failed (Level Zero 0x%08" PRIx32 ")", z->path,
                      (uint32_t)r);
  const char *env = getenv("ZES_ENABLE_SYSMAN");
  if (!env)
    setenv("ZES_ENABLE_SYSMAN", "1", 0);
  else if (strcmp(env, "1") != 0)
    gpum_log(GPUM_LOG_WARN, "device",
             "ZES_ENABLE_SYSMAN=%s: Sysman calls will fail (the levelzero backend needs 1)", env);
  ZE_RETRY(s, r, z->f.zeInit(ZE_INIT_FLAG_GPU_ONLY));
  if (r != ZE_RESULT_SUCCESS)
    return gpum_error(GPUM_EDRIVER,
                      "zeInit in %s failed (Level Zero 0x%08" PRIx32 "%s): no usable Level Zero "
                      "driver or Intel GPU",
                      z->path, (uint32_t)r,
                      r == ZE_RESULT_ERROR_UNINITIALIZED ? ", uninitialized" : "");
  return 0;
}

/* Lists every device of every driver into z->dev. */
static int list_devices(gpum_device_session_t *s, ze_t *z) {
  ze_driver_handle_t drv[8];
  uint32_t nd = 8;
  ze_result_t r;
  ZE_RETRY(s, r, z->via_zes ? z->f.zesDriverGet(&nd, drv) : z->f.zeDriverGet(&nd, drv));
  if (r != ZE_RESULT_SUCCESS)
    return gpum_error(gpum__ze_map_error(r), "%s in %s failed (Level Zero 0x%08" PRIx32 ")",
                      z->via_zes ? "zesDriverGet" : "zeDriverGet", z->path, (uint32_t)r);
  if (nd > 8)
    nd = 8;
  zes_device_handle_t *all = NULL;
  unsigned n = 0;
  for (uint32_t d = 0; d < nd; d++) {
    uint32_t c = 0;
    ZE_RETRY(s, r,
             z->via_zes ? z->f.zesDeviceGet(drv[d], &c, NULL) : z->f.zeDeviceGet(drv[d], &c, NULL));
    if (r != ZE_RESULT_SUCCESS || c == 0)
      continue;
    if (c > 4096 - n)
      c = 4096 - n;
    zes_device_handle_t *grown = realloc(all, (n + c) * sizeof *all);
    if (!grown) {
      free(all);
      return gpum_error(GPUM_ENOMEM, "cannot allocate %u device handles", n + c);
    }
    all = grown;
    ZE_RETRY(s, r,
             z->via_zes ? z->f.zesDeviceGet(drv[d], &c, all + n)
                        : z->f.zeDeviceGet(drv[d], &c, all + n));
    if (r == ZE_RESULT_SUCCESS)
      n += c;
  }
  z->dev = calloc(n ? n : 1, sizeof *z->dev);
  if (!z->dev) {
    free(all);
    return gpum_error(GPUM_ENOMEM, "cannot allocate %u device records", n);
  }
  for (unsigned i = 0; i < n; i++)
    z->dev[i].h = all[i];
  z->ndev = n;
  free(all);
  return 0;
}

static void describe(gpum_device_session_t *s, ze_t *z, const gpum__libpath_t *lp) {
  s->driver_version[0] = '\0';
  zes_device_properties_t p;
  memset(&p, 0, sizeof p);
  p.stype = ZES_STRUCTURE_TYPE_DEVICE_PROPERTIES;
  if (z->ndev && z->f.zesDeviceGetProperties(z->dev[0].h, &p) == ZE_RESULT_SUCCESS)
    snprintf(s->driver_version, sizeof s->driver_version, "%.*s", (int)sizeof p.driverVersion,
             p.driverVersion);
  gpum__session_library(s, lp, z->dl, z->path);
}

static int ze_open(gpum_device_session_t *s, const gpum_device_open_opts_t *opts) {
  gpum__libpath_t lp;
  int rc = gpum__libpath_resolve(GPUM__LIB_LEVEL_ZERO, opts ? opts->level_zero_library : NULL, &lp);
  if (rc)
    return rc;
  ze_t *z = calloc(1, sizeof *z);
  if (!z)
    return gpum_error(GPUM_ENOMEM, "cannot allocate the Level Zero backend");
  const char *used = NULL;
  rc = gpum__libpath_open(&lp, "Level Zero", &z->dl, &used);
  if (rc)
    goto out_unload;
  snprintf(z->path, sizeof z->path, "%s", used);
  if ((rc = resolve(z)) || (rc = init_sysman(s, z)) || (rc = list_devices(s, z)))
    goto out_unload;
  describe(s, z, &lp);
  s->impl = z;
  s->count = z->ndev;
  gpum_log(GPUM_LOG_DEBUG, "device", "levelzero loaded library=\"%s\" devices=%u driver=%s via=%s",
           z->path, z->ndev, s->driver_version, z->via_zes ? "zesInit" : "zeInit");
  return 0;
out_unload:
  unload(z);
  return rc;
}

static void ze_close(gpum_device_session_t *s) {
  unload(s->impl);
  s->impl = NULL;
}

/* ---- the device's resources, enumerated once ---- */

/* Lists one kind of resource of device index into arr (at most MAX_RES); n their number, 0 when
 * the call is missing or failed without a fatal result. */
#define ENUM(sym, arr, n)                           \
  do {                                              \
    uint32_t want_ = MAX_RES;                       \
    (n) = 0;                                        \
    FIELD(sym, (d->h, &want_, (arr)), (n) = want_); \
    if ((n) > MAX_RES)                              \
      (n) = MAX_RES;                                \
  } while (0)

/* Memory modules: the device-local ones (one per tile on a multi-tile part). */
static int find_memory(gpum_device_session_t *s, ze_t *z, unsigned index, void **h) {
  ze_dev_t *d = &z->dev[index];
  uint32_t n;
  ENUM(zesDeviceEnumMemoryModules, (zes_mem_handle_t *)h, n);
  for (uint32_t k = 0; k < n && d->nmem < MAX_MEM; k++) {
    zes_mem_properties_t p = {.stype = ZES_STRUCTURE_TYPE_MEM_PROPERTIES};
    FIELD(zesMemoryGetProperties, ((zes_mem_handle_t)h[k], &p), {
      if (p.location == ZES_MEM_LOC_DEVICE)
        d->mem[d->nmem++] = (zes_mem_handle_t)h[k];
    });
  }
  return 0;
}

/* The engine group for utilisation (ALL, else COMPUTE_ALL, else RENDER_ALL; whole device
 * before a tile) and the temperature sensor (GPU, else GLOBAL; whole device first). */
static int find_engine_temp(gpum_device_session_t *s, ze_t *z, unsigned index, void **h) {
  ze_dev_t *d = &z->dev[index];
  uint32_t n;
  int best = 99;
  ENUM(zesDeviceEnumEngineGroups, (zes_engine_handle_t *)h, n);
  for (uint32_t k = 0; k < n && z->f.zesEngineGetProperties; k++) {
    zes_engine_properties_t p = {.stype = ZES_STRUCTURE_TYPE_ENGINE_PROPERTIES};
    FIELD(zesEngineGetProperties, ((zes_engine_handle_t)h[k], &p), {
      int rank = gpum__ze_engine_rank(p.type);
      rank = rank < 0 ? 99 : rank * 2 + (p.onSubdevice ? 1 : 0);
      if (rank < best) {
        best = rank;
        d->engine = (zes_engine_handle_t)h[k];
      }
    });
  }
  best = 99;
  ENUM(zesDeviceEnumTemperatureSensors, (zes_temp_handle_t *)h, n);
  for (uint32_t k = 0; k < n && z->f.zesTemperatureGetProperties; k++) {
    zes_temp_properties_t p = {.stype = ZES_STRUCTURE_TYPE_TEMP_PROPERTIES};
    FIELD(zesTemperatureGetProperties, ((zes_temp_handle_t)h[k], &p), {
      int rank = p.type == ZES_TEMP_SENSORS_GPU ? 0 : p.type == ZES_TEMP_SENSORS_GLOBAL ? 2 : 99;
      rank += rank < 99 && p.onSubdevice ? 1 : 0;
      if (rank < best) {
        best = rank;
        d->temp = (zes_temp_handle_t)h[k];
        d->temp_max_c = p.maxTemperature > 0 ? (int)lround(p.maxTemperature) : 0;
      }
    });
  }
  return 0;
}

/* The card's power domain (not a tile's), the GPU and memory frequency domains and the
 * correctable and uncorrectable RAS error sets. */
static int find_power_freq_ras(gpum_device_session_t *s, ze_t *z, unsigned index, void **h) {
  ze_dev_t *d = &z->dev[index];
  uint32_t n;
  ENUM(zesDeviceEnumPowerDomains, (zes_pwr_handle_t *)h, n);
  for (uint32_t k = 0; k < n && !d->pwr; k++) {
    zes_power_properties_t p = {.stype = ZES_STRUCTURE_TYPE_POWER_PROPERTIES};
    if (!z->f.zesPowerGetProperties) {
      d->pwr = (zes_pwr_handle_t)h[0];
      break;
    }
    FIELD(zesPowerGetProperties, ((zes_pwr_handle_t)h[k], &p), {
      if (!p.onSubdevice)
        d->pwr = (zes_pwr_handle_t)h[k];
    });
  }
  ENUM(zesDeviceEnumFrequencyDomains, (zes_freq_handle_t *)h, n);
  for (uint32_t k = 0; k < n && z->f.zesFrequencyGetProperties; k++) {
    zes_freq_properties_t p = {.stype = ZES_STRUCTURE_TYPE_FREQ_PROPERTIES};
    FIELD(zesFrequencyGetProperties, ((zes_freq_handle_t)h[k], &p), {
      zes_freq_handle_t *slot = p.type == ZES_FREQ_DOMAIN_GPU      ? &d->freq_gpu
                                : p.type == ZES_FREQ_DOMAIN_MEMORY ? &d->freq_mem
                                                                   : NULL;
      if (slot && !*slot)
        *slot = (zes_freq_handle_t)h[k];
    });
  }
  ENUM(zesDeviceEnumRasErrorSets, (zes_ras_handle_t *)h, n);
  for (uint32_t k = 0; k < n && z->f.zesRasGetProperties; k++) {
    zes_ras_properties_t p = {.stype = ZES_STRUCTURE_TYPE_RAS_PROPERTIES};
    FIELD(zesRasGetProperties, ((zes_ras_handle_t)h[k], &p), {
      if (p.type == ZES_RAS_ERROR_TYPE_CORRECTABLE && !d->ras_corr)
        d->ras_corr = (zes_ras_handle_t)h[k];
      else if (p.type == ZES_RAS_ERROR_TYPE_UNCORRECTABLE && !d->ras_unc)
        d->ras_unc = (zes_ras_handle_t)h[k];
    });
  }
  return 0;
}

/* Enumerates the device's resources once. A fatal result fails it (tried again next time); a
 * kind that cannot be listed is simply absent. */
static int discover(gpum_device_session_t *s, ze_t *z, unsigned index) {
  ze_dev_t *d = &z->dev[index];
  if (d->found)
    return 0;
  void *h[MAX_RES];
  d->nmem = 0;
  d->engine = NULL, d->temp = NULL, d->pwr = NULL, d->temp_max_c = 0;
  d->freq_gpu = d->freq_mem = NULL, d->ras_corr = d->ras_unc = NULL;
  int rc = find_memory(s, z, index, h);
  if (rc == 0)
    rc = find_engine_temp(s, z, index, h);
  if (rc == 0)
    rc = find_power_freq_ras(s, z, index, h);
  d->found = rc == 0;
  return rc;
}

/* ---- static info ---- */

static int info_query(gpum_device_session_t *s, ze_t *z, unsigned index, gpum_device_info_t *out) {
  ze_dev_t *d = &z->dev[index];
  zes_device_properties_t p;
  memset(&p, 0, sizeof p);
  p.stype = ZES_STRUCTURE_TYPE_DEVICE_PROPERTIES;
  FIELD(zesDeviceGetProperties, (d->h, &p), {
    const char *name = p.core.name[0] ? p.core.name : p.modelName;
    size_t cap = p.core.name[0] ? sizeof p.core.name : sizeof p.modelName;
    snprintf(out->name, sizeof out->name, "%.*s", (int)cap, name);
    gpum__ze_format_uuid(p.core.uuid.id, out->uuid, sizeof out->uuid);
    out->valid |= GPUM_INFO_NAME | GPUM_INFO_UUID;
  });
  int rc = discover(s, z, index);
  if (rc)
    return rc;
  if (d->temp_max_c > 0) {
    out->temp_shutdown_c = d->temp_max_c;
    out->valid |= GPUM_INFO_TEMP_SHUTDOWN;
  }
  zes_pci_properties_t pci = {.stype = ZES_STRUCTURE_TYPE_PCI_PROPERTIES};
  FIELD(zesDevicePciGetProperties, (d->h, &pci), {
    gpum__ze_format_bdf(&pci.address, out->pci_bus_id, sizeof out->pci_bus_id);
    out->valid |= GPUM_INFO_PCI;
  });
  uint64_t total = 0;
  bool all = d->nmem > 0;
  for (unsigned k = 0; k < d->nmem; k++) {
    zes_mem_properties_t m = {.stype = ZES_STRUCTURE_TYPE_MEM_PROPERTIES};
    bool ok = false;
    FIELD(zesMemoryGetProperties, (d->mem[k], &m), ok = m.physicalSize > 0);
    total += m.physicalSize;
    all &= ok;
  }
  if (all) {
    out->memory_total = total;
    out->valid |= GPUM_INFO_MEMORY_TOTAL;
  }
  if (d->ras_corr || d->ras_unc) { /* RAS error sets exist where the memory has ECC */
    out->ecc_enabled = true;
    out->valid |= GPUM_INFO_ECC_MODE;
  }
  if (d->pwr) {
    zes_power_sustained_limit_t sus = {0};
    FIELD(zesPowerGetLimits, (d->pwr, &sus, NULL, NULL), {
      if (sus.enabled && sus.power > 0) {
        out->power_limit_mw = (unsigned)sus.power;
        out->valid |= GPUM_INFO_POWER_LIMIT;
      }
    });
  }
  return 0;
}

/* On a failure after a successful earlier read, *out keeps that earlier info, so a lost device
 * can still be shown by name. */
static int ze_get_info(gpum_device_session_t *s, unsigned index, gpum_device_info_t *out) {
  ze_t *z = s->impl;
  ze_dev_t *d = &z->dev[index];
  out->vendor = "intel";
  out->is_host = false;
  int rc =
      gpum__info_keep(info_query(s, z, index, out), out, &d->info, &d->info_cached, index, "intel");
  return rc;
}

/* ---- samples ---- */

/* Memory: the device-local modules' allocatable size and free bytes, summed. */
static int sample_memory(gpum_device_session_t *s, ze_t *z, unsigned index,
                         gpum_device_sample_t *out) {
  ze_dev_t *d = &z->dev[index];
  uint64_t size = 0, free_b = 0;
  bool all = d->nmem > 0;
  for (unsigned k = 0; k < d->nmem; k++) {
    zes_mem_state_t m = {.stype = ZES_STRUCTURE_TYPE_MEM_STATE};
    bool ok = false;
    FIELD(zesMemoryGetState, (d->mem[k], &m), ok = true);
    size += m.size;
    free_b += m.free < m.size ? m.free : m.size;
    all &= ok;
  }
  if (all) {
    out->memory_total = size;
    out->memory_free = free_b;
    out->memory_used = size - free_b;
    out->valid |= 1u << GPUM_METRIC_MEMORY_TOTAL | 1u << GPUM_METRIC_MEMORY_FREE |
                  1u << GPUM_METRIC_MEMORY_USED;
  }
  return 0;
}

/* Utilisation and power: rates against the previous read of the counters. */
static int sample_rates(gpum_device_session_t *s, ze_t *z, unsigned index,
                        gpum_device_sample_t *out) {
  ze_dev_t *d = &z->dev[index];
  if (d->engine) {
    zes_engine_stats_t st = {0};
    FIELD(zesEngineGetActivity, (d->engine, &st), {
      unsigned pct;
      if (d->have_act && gpum__ze_util_percent(&d->act, &st, &pct)) {
        out->util_gpu = pct;
        out->valid |= 1u << GPUM_METRIC_UTIL_GPU;
      }
      d->act = st;
      d->have_act = true;
    });
  }
  if (d->pwr) {
    zes_power_energy_counter_t e = {0};
    FIELD(zesPowerGetEnergyCounter, (d->pwr, &e), {
      unsigned mw;
      if (d->have_energy && gpum__ze_power_mw(&d->energy, &e, &mw)) {
        out->power_mw = mw;
        out->valid |= 1u << GPUM_METRIC_POWER;
      }
      d->energy = e;
      d->have_energy = true;
    });
  }
  return 0;
}

/* Sums the hardware error categories of a RAS set (compute, non-compute, cache, display);
 * resets, programming and driver errors are not the device's memory or logic failing. */
static uint64_t ras_hw_errors(const zes_ras_state_t *st) {
  return st->category[ZES_RAS_ERROR_CAT_COMPUTE_ERRORS] +
         st->category[ZES_RAS_ERROR_CAT_NON_COMPUTE_ERRORS] +
         st->category[ZES_RAS_ERROR_CAT_CACHE_ERRORS] +
         st->category[ZES_RAS_ERROR_CAT_DISPLAY_ERRORS];
}

static int sample_others(gpum_device_session_t *s, ze_t *z, unsigned index,
                         gpum_device_sample_t *out) {
  ze_dev_t *d = &z->dev[index];
  double t = 0;
  if (d->temp)
    FIELD(zesTemperatureGetState, (d->temp, &t), {
      out->temperature_c = (int)lround(t);
      out->valid |= 1u << GPUM_METRIC_TEMPERATURE;
    });
  zes_freq_state_t f = {.stype = ZES_STRUCTURE_TYPE_FREQ_STATE};
  if (d->freq_gpu)
    FIELD(zesFrequencyGetState, (d->freq_gpu, &f), {
      if (f.actual >= 0) {
        out->clock_sm_mhz = (unsigned)lround(f.actual);
        out->valid |= 1u << GPUM_METRIC_CLOCK_SM;
      }
    });
  f = (zes_freq_state_t){.stype = ZES_STRUCTURE_TYPE_FREQ_STATE};
  if (d->freq_mem)
    FIELD(zesFrequencyGetState, (d->freq_mem, &f), {
      if (f.actual >= 0) {
        out->clock_mem_mhz = (unsigned)lround(f.actual);
        out->valid |= 1u << GPUM_METRIC_CLOCK_MEM;
      }
    });
  zes_ras_state_t r = {.stype = ZES_STRUCTURE_TYPE_RAS_STATE};
  if (d->ras_corr)
    FIELD(zesRasGetState, (d->ras_corr, 0, &r), {
      out->ecc_corrected = ras_hw_errors(&r);
      out->valid |= 1u << GPUM_METRIC_ECC_CORRECTED;
    });
  r = (zes_ras_state_t){.stype = ZES_STRUCTURE_TYPE_RAS_STATE};
  if (d->ras_unc)
    FIELD(zesRasGetState, (d->ras_unc, 0, &r), {
      out->ecc_uncorrected = ras_hw_errors(&r);
      out->valid |= 1u << GPUM_METRIC_ECC_UNCORRECTED;
    });
  return 0;
}

static int ze_sample(gpum_device_session_t *s, unsigned index, gpum_device_sample_t *out) {
  ze_t *z = s->impl;
  int rc = discover(s, z, index);
  if (rc == 0)
    rc = sample_memory(s, z, index, out);
  if (rc == 0)
    rc = sample_rates(s, z, index, out);
  if (rc == 0)
    rc = sample_others(s, z, index, out);
  if (rc)
    out->valid = 0;
  return rc;
}

/* Sysman's memory health (zes_mem_health_t) has no counterpart among gpum's fields (retired
 * pages, remapped rows): the device is asked its memory state so that a lost one still reads
 * as lost, and nothing is valid. */
static int ze_memory_health(gpum_device_session_t *s, unsigned index, gpum_memory_health_t *out) {
  ze_t *z = s->impl;
  (void)out;
  int rc = discover(s, z, index);
  if (rc || z->dev[index].nmem == 0)
    return rc;
  zes_mem_state_t m = {.stype = ZES_STRUCTURE_TYPE_MEM_STATE};
  FIELD(zesMemoryGetState, (z->dev[index].mem[0], &m), (void)m);
  return 0;
}

/* ---- processes ---- */

static int ze_processes(gpum_device_session_t *s, unsigned index, gpum__rawproc_t **out,
                        size_t *n) {
  ze_t *z = s->impl;
  ze_dev_t *d = &z->dev[index];
  *out = NULL;
  *n = 0;
  if (!z->f.zesDeviceProcessesGetState)
    return 0;
  for (int round = 0; round < 4; round++) {
    uint32_t want = 0;
    ze_result_t r;
    ZE_RETRY(s, r, z->f.zesDeviceProcessesGetState(d->h, &want, NULL));
    note(z, index, r);
    if (r == ZE_RESULT_ERROR_UNSUPPORTED_FEATURE)
      return 0;
    if (r != ZE_RESULT_SUCCESS)
      return fail("zesDeviceProcessesGetState", index, r);
    if (want == 0)
      return 0;
    uint32_t cap = want + 8; /* room for processes that start meanwhile */
    zes_process_state_t *buf = calloc(cap, sizeof *buf);
    gpum__rawproc_t *res = calloc(cap, sizeof *res);
    if (!buf || !res) {
      free(buf);
      free(res);
      return gpum_error(GPUM_ENOMEM, "cannot allocate %" PRIu32 " process entries", cap);
    }
    for (uint32_t k = 0; k < cap; k++)
      buf[k].stype = ZES_STRUCTURE_TYPE_PROCESS_STATE;
    uint32_t got = cap;
    ZE_RETRY(s, r, z->f.zesDeviceProcessesGetState(d->h, &got, buf));
    note(z, index, r);
    if (r == ZE_RESULT_SUCCESS) {
      for (uint32_t k = 0; k < got && k < cap; k++) {
        res[k].pid = buf[k].processId;
        res[k].memory = buf[k].memSize;
        res[k].memory_valid = true;
      }
      free(buf);
      *out = res;
      *n = got < cap ? got : cap;
      return 0;
    }
    free(buf);
    free(res);
    if (r != ZE_RESULT_ERROR_INVALID_SIZE)
      return fail("zesDeviceProcessesGetState", index, r);
  }
  return gpum_error(GPUM_EAGAIN, "the process list kept growing while it was read");
}

/* Sysman's events (zesDeviceEventRegister, zesDriverEventListen) are not in our subset yet. */
static int ze_events_enable(gpum_device_session_t *s) {
  (void)s;
  return gpum_error(GPUM_ENOTSUP, "the levelzero backend does not deliver device events");
}

static int ze_event_wait(gpum_device_session_t *s, gpum_device_event_t *ev, unsigned timeout_ms) {
  (void)s, (void)ev, (void)timeout_ms;
  return gpum_error(GPUM_ESTATE, "device events are not enabled (the levelzero backend has none)");
}

const struct gpum__backend gpum__backend_level_zero = {
    .name = "levelzero",
    .kind = GPUM_BACKEND_LEVEL_ZERO,
    .open = ze_open,
    .close = ze_close,
    .get_info = ze_get_info,
    .sample = ze_sample,
    .memory_health = ze_memory_health,
    .processes = ze_processes,
    .events_enable = ze_events_enable,
    .event_wait = ze_event_wait,
};
