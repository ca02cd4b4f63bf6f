/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ROCm SMI backend for AMD GPUs: loads librocm_smi64 (or libgpum_sim.so, or whatever
 * GPUM_ROCM_SMI_LIBRARY names) with dlopen, resolves our declared subset
 * (src/abi/rocm_smi_abi.h) and reads static info, samples, per-process VRAM and the UMC
 * block's RAS counts. docs/devices.md lists what comes from which call, in which unit, and
 * what ROCm SMI does not give.
 *
 * rsmi_init, rsmi_shut_down, rsmi_num_monitor_devices, rsmi_dev_name_get and
 * rsmi_dev_memory_total_get are required (missing -> GPUM_EDRIVER naming the symbol); every
 * other symbol is optional and its field is simply invalid when absent.
 *
 * Errors: BUSY and INTERRUPT are retried with the session's backoff (then GPUM_EAGAIN);
 * UNKNOWN_ERROR, which is what ROCm SMI makes of amdgpu's ENODEV for a device that is gone, is
 * GPUM_ELOST; both, and INIT_ERROR, fail the whole read, so the monitor's health state machine
 * sees them as it sees NVML's. Any other failure leaves its field invalid.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "device/device_internal.h"
#include "device/rocm_internal.h"

_Static_assert(sizeof(void *) == sizeof(gpum_rsmi_init_fn), "function pointers fit void *");

typedef struct {
#define FIELD_(name, params) gpum_##name##_fn name;
  GPUM_RSMI_FUNCS(FIELD_)
#undef FIELD_
} rsmi_syms_t;

typedef struct {
  bool lost;        /* the last call on it said the device is gone */
  bool info_cached; /* info holds the last successful static info */
  gpum_device_info_t info;
} rsmi_dev_t;

typedef struct {
  void *dl;
  char path[PATH_MAX];
  rsmi_syms_t f;
  bool initialised;
  unsigned ndev;
  rsmi_dev_t *dev;
} rsmi_t;

static const struct {
  const char *name;
  size_t off;
} sym_table[] = {
#define SYM_(name, params) {#name, offsetof(rsmi_syms_t, name)},
    GPUM_RSMI_FUNCS(SYM_)
#undef SYM_
};

/* ---- pure helpers (rocm_internal.h) ---- */

bool gpum__rsmi_is_transient(rsmi_status_t st) {
  return st == RSMI_STATUS_BUSY || st == RSMI_STATUS_INTERRUPT;
}

int gpum__rsmi_map_error(rsmi_status_t st) {
  if (gpum__rsmi_is_transient(st))
    return GPUM_EAGAIN;
  switch (st) {
  case RSMI_STATUS_SUCCESS:
    return 0;
  case RSMI_STATUS_INVALID_ARGS:
  case RSMI_STATUS_INPUT_OUT_OF_BOUNDS:
    return GPUM_EINVAL;
  case RSMI_STATUS_NOT_SUPPORTED:
  case RSMI_STATUS_NOT_YET_IMPLEMENTED:
    return GPUM_ENOTSUP;
  case RSMI_STATUS_PERMISSION:
    return GPUM_EPERM;
  case RSMI_STATUS_OUT_OF_RESOURCES:
    return GPUM_ENOMEM;
  case RSMI_STATUS_INIT_ERROR:
    return GPUM_EDRIVER;
  case RSMI_STATUS_NOT_FOUND:
  case RSMI_STATUS_NO_DATA:
    return GPUM_ENOENT;
  case RSMI_STATUS_INSUFFICIENT_SIZE:
    return GPUM_ENOSPC;
  case RSMI_STATUS_REFCOUNT_OVERFLOW:
    return GPUM_ESTATE;
  case RSMI_STATUS_UNKNOWN_ERROR:
    return GPUM_ELOST;
  default: /* FILE_ERROR, INTERNAL_EXCEPTION, UNEXPECTED_SIZE, UNEXPECTED_DATA, ... */
    return GPUM_EIO;
  }
}

bool gpum__rsmi_is_fatal(rsmi_status_t st) {
  return st == RSMI_STATUS_UNKNOWN_ERROR || st == RSMI_STATUS_INIT_ERROR ||
         gpum__rsmi_is_transient(st);
}

void gpum__rsmi_format_bdf(uint64_t bdfid, char *out, size_t len) {
  snprintf(out, len, "%08X:%02X:%02X.%X", (unsigned)(bdfid >> 32), (unsigned)(bdfid >> 8) & 0xff,
           (unsigned)(bdfid >> 3) & 0x1f, (unsigned)bdfid & 0x7);
}

bool gpum__rsmi_current_mhz(const rsmi_frequencies_t *f, unsigned *mhz) {
  if (f->num_supported == 0 || f->num_supported > RSMI_MAX_NUM_FREQUENCIES ||
      f->current >= f->num_supported)
    return false;
  *mhz = (unsigned)(f->frequency[f->current] / 1000000u);
  return true;
}

/* ---- calls ---- */

static const char *rsmi_message(const rsmi_t *r, rsmi_status_t st) {
  const char *m = NULL;
  if (r && r->f.rsmi_status_string && r->f.rsmi_status_string(st, &m) == RSMI_STATUS_SUCCESS && m &&
      *m)
    return m;
  return "unknown ROCm SMI status";
}

/* Runs expr (a ROCm SMI call yielding rsmi_status_t into st) with the session's retry policy. */
#define RS_RETRY(s, st, expr)                                         \
  do {                                                                \
    for (int att_ = 0;; att_++) {                                     \
      (st) = (expr);                                                  \
      if (!gpum__rsmi_is_transient(st) || att_ >= (s)->retry.retries) \
        break;                                                        \
      gpum__retry_sleep(&(s)->retry, att_);                           \
    }                                                                 \
  } while (0)

/* Same, for a call on device i: also records loss and recovery of the device. */
#define RS_DEV(s, r, i, st, expr) \
  do {                            \
    RS_RETRY(s, st, expr);        \
    note((r), (i), (st));         \
  } while (0)

static void note(rsmi_t *r, unsigned i, rsmi_status_t st) {
  if (i >= r->ndev)
    return;
  if (st == RSMI_STATUS_UNKNOWN_ERROR) {
    if (!r->dev[i].lost)
      gpum_log(GPUM_LOG_INFO, "device", "device lost backend=rocm index=%u", i);
    r->dev[i].lost = true;
  } else if (st == RSMI_STATUS_SUCCESS) {
    r->dev[i].lost = false;
  }
}

static int fail(const rsmi_t *r, const char *call, unsigned i, rsmi_status_t st) {
  int code = gpum__rsmi_map_error(st);
  if (st == RSMI_STATUS_UNKNOWN_ERROR)
    return gpum_error(code, "%s on device %u: %s (ROCm SMI %" PRIu32 "): the device is gone", call,
                      i, rsmi_message(r, st), st);
  if (gpum__rsmi_is_transient(st))
    return gpum_error(code,
                      "%s on device %u: %s (ROCm SMI %" PRIu32 "), still failing after retries",
                      call, i, rsmi_message(r, st), st);
  return gpum_error(code, "%s on device %u: %s (ROCm SMI %" PRIu32 ")", call, i,
                    rsmi_message(r, st), st);
}

/* Calls an optional symbol; fails the whole read for a fatal status, else runs on_ok when it
 * succeeded and leaves the field invalid when it did not. */
#define FIELD(sym, args, on_ok)                \
  do {                                         \
    if (r->f.sym) {                            \
      rsmi_status_t st_;                       \
      RS_DEV(s, r, index, st_, r->f.sym args); \
      if (st_ == RSMI_STATUS_SUCCESS) {        \
        on_ok;                                 \
      } else if (gpum__rsmi_is_fatal(st_)) {   \
        return fail(r, #sym, index, st_);      \
      }                                        \
    }                                          \
  } while (0)

/* ---- loading ---- */

static void unload(rsmi_t *r) {
  if (!r)
    return;
  if (r->initialised)
    r->f.rsmi_shut_down();
  if (r->dl)
    dlclose(r->dl);
  free(r->dev);
  free(r);
}

static int resolve(rsmi_t *r) {
  for (size_t i = 0; i < sizeof sym_table / sizeof sym_table[0]; i++) {
    void *p = dlsym(r->dl, sym_table[i].name);
    memcpy((char *)&r->f + sym_table[i].off, &p, sizeof p);
  }
  const char *missing = !r->f.rsmi_init                   ? "rsmi_init"
                        : !r->f.rsmi_shut_down            ? "rsmi_shut_down"
                        : !r->f.rsmi_num_monitor_devices  ? "rsmi_num_monitor_devices"
                        : !r->f.rsmi_dev_name_get         ? "rsmi_dev_name_get"
                        : !r->f.rsmi_dev_memory_total_get ? "rsmi_dev_memory_total_get"
                                                          : NULL;
  if (missing)
    return gpum_error(GPUM_EDRIVER, "%s does not export %s: not a usable ROCm SMI library", r->path,
                      missing);
  return 0;
}

static void describe(gpum_device_session_t *s, rsmi_t *r, const gpum__libpath_t *lp) {
  if (!r->f.rsmi_version_str_get ||
      r->f.rsmi_version_str_get(RSMI_SW_COMP_DRIVER, s->driver_version, sizeof s->driver_version) !=
          RSMI_STATUS_SUCCESS)
    s->driver_version[0] = '\0';
  s->driver_version[sizeof s->driver_version - 1] = '\0';
  gpum__session_library(s, lp, r->dl, r->path);
}

static int rocm_open(gpum_device_session_t *s, const gpum_device_open_opts_t *opts) {
  gpum__libpath_t lp;
  int rc = gpum__libpath_resolve(GPUM__LIB_ROCM_SMI, opts ? opts->rocm_library : NULL, &lp);
  if (rc)
    return rc;
  rsmi_t *r = calloc(1, sizeof *r);
  if (!r)
    return gpum_error(GPUM_ENOMEM, "cannot allocate the ROCm SMI backend");
  const char *used = NULL;
  rc = gpum__libpath_open(&lp, "ROCm SMI", &r->dl, &used);
  if (rc)
    goto out_unload;
  snprintf(r->path, sizeof r->path, "%s", used);
  if ((rc = resolve(r)))
    goto out_unload;
  rsmi_status_t st;
  RS_RETRY(s, st, r->f.rsmi_init(0));
  if (st != RSMI_STATUS_SUCCESS) {
    rc = gpum_error(GPUM_EDRIVER, "rsmi_init in %s failed: %s (ROCm SMI %" PRIu32 ")", r->path,
                    rsmi_message(r, st), st);
    goto out_unload;
  }
  r->initialised = true;
  uint32_t count = 0;
  RS_RETRY(s, st, r->f.rsmi_num_monitor_devices(&count));
  if (st != RSMI_STATUS_SUCCESS) {
    rc = gpum_error(gpum__rsmi_map_error(st),
                    "rsmi_num_monitor_devices in %s: %s (ROCm SMI %" PRIu32 ")", r->path,
                    rsmi_message(r, st), st);
    goto out_unload;
  }
  if (count > 4096) {
    rc = gpum_error(GPUM_EDRIVER, "%s reports %" PRIu32 " devices: not plausible", r->path, count);
    goto out_unload;
  }
  r->dev = calloc(count ? count : 1, sizeof *r->dev);
  if (!r->dev) {
    rc = gpum_error(GPUM_ENOMEM, "cannot allocate %" PRIu32 " device records", count);
    goto out_unload;
  }
  r->ndev = count;
  describe(s, r, &lp);
  s->impl = r;
  s->count = r->ndev;
  gpum_log(GPUM_LOG_DEBUG, "device", "rocm loaded library=\"%s\" devices=%u driver=%s", r->path,
           r->ndev, s->driver_version);
  return 0;
out_unload:
  unload(r);
  return rc;
}

static void rocm_close(gpum_device_session_t *s) {
  unload(s->impl);
  s->impl = NULL;
}

/* ---- static info ---- */

static int info_query(gpum_device_session_t *s, rsmi_t *r, unsigned index,
                      gpum_device_info_t *out) {
  FIELD(rsmi_dev_name_get, (index, out->name, sizeof out->name), out->valid |= GPUM_INFO_NAME);
  out->name[sizeof out->name - 1] = '\0';
  uint64_t v = 0;
  /* ROCm's device UUID is the unique id in hex after "GPU-", as ROCR_VISIBLE_DEVICES takes it. */
  FIELD(rsmi_dev_unique_id_get, (index, &v), {
    snprintf(out->uuid, sizeof out->uuid, "GPU-%016" PRIx64, v);
    out->valid |= GPUM_INFO_UUID;
  });
  FIELD(rsmi_dev_pci_id_get, (index, &v), {
    gpum__rsmi_format_bdf(v, out->pci_bus_id, sizeof out->pci_bus_id);
    out->valid |= GPUM_INFO_PCI;
  });
  FIELD(rsmi_dev_memory_total_get, (index, RSMI_MEM_TYPE_VRAM, &v), {
    out->memory_total = v;
    out->valid |= GPUM_INFO_MEMORY_TOTAL;
  });
  FIELD(rsmi_dev_power_cap_get, (index, 0, &v), {
    out->power_limit_mw = (unsigned)(v / 1000);
    out->valid |= GPUM_INFO_POWER_LIMIT;
  });
  int64_t t = 0;
  FIELD(rsmi_dev_temp_metric_get, (index, RSMI_TEMP_TYPE_EDGE, RSMI_TEMP_CRITICAL, &t), {
    out->temp_slowdown_c = (int)(t / 1000);
    out->valid |= GPUM_INFO_TEMP_SLOWDOWN;
  });
  FIELD(rsmi_dev_temp_metric_get, (index, RSMI_TEMP_TYPE_EDGE, RSMI_TEMP_EMERGENCY, &t), {
    out->temp_shutdown_c = (int)(t / 1000);
    out->valid |= GPUM_INFO_TEMP_SHUTDOWN;
  });
  FIELD(rsmi_dev_ecc_enabled_get, (index, &v), {
    out->ecc_enabled = (v & RSMI_GPU_BLOCK_UMC) != 0;
    out->valid |= GPUM_INFO_ECC_MODE;
  });
  return 0;
}

/* On a failure after a successful earlier read, *out keeps that earlier info, so a lost device
 * can still be shown by name. */
static int rocm_get_info(gpum_device_session_t *s, unsigned index, gpum_device_info_t *out) {
  rsmi_t *r = s->impl;
  rsmi_dev_t *d = &r->dev[index];
  out->vendor = "amd";
  out->is_host = false;
  return gpum__info_keep(info_query(s, r, index, out), out, &d->info, &d->info_cached, index,
                         "amd");
}

/* ---- samples ---- */

static int sample_query(gpum_device_session_t *s, rsmi_t *r, unsigned index,
                        gpum_device_sample_t *out) {
  uint64_t total = 0, used = 0;
  bool have_total = false;
  FIELD(rsmi_dev_memory_total_get, (index, RSMI_MEM_TYPE_VRAM, &total), have_total = true);
  FIELD(rsmi_dev_memory_usage_get, (index, RSMI_MEM_TYPE_VRAM, &used), {
    out->memory_used = used;
    out->valid |= 1u << GPUM_METRIC_MEMORY_USED;
    if (have_total) {
      out->memory_free = used < total ? total - used : 0;
      out->valid |= 1u << GPUM_METRIC_MEMORY_FREE;
    }
  });
  if (have_total) {
    out->memory_total = total;
    out->valid |= 1u << GPUM_METRIC_MEMORY_TOTAL;
  }
  uint32_t pct = 0;
  FIELD(rsmi_dev_busy_percent_get, (index, &pct), {
    out->util_gpu = pct;
    out->valid |= 1u << GPUM_METRIC_UTIL_GPU;
  });
  FIELD(rsmi_dev_memory_busy_percent_get, (index, &pct), {
    out->util_memory = pct;
    out->valid |= 1u << GPUM_METRIC_UTIL_MEMORY;
  });
  int64_t t = 0;
  FIELD(rsmi_dev_temp_metric_get, (index, RSMI_TEMP_TYPE_EDGE, RSMI_TEMP_CURRENT, &t), {
    out->temperature_c = (int)(t / 1000);
    out->valid |= 1u << GPUM_METRIC_TEMPERATURE;
  });
  uint64_t p = 0;
  FIELD(rsmi_dev_power_ave_get, (index, 0, &p), {
    out->power_mw = (unsigned)(p / 1000);
    out->valid |= 1u << GPUM_METRIC_POWER;
  });
  rsmi_frequencies_t f;
  unsigned mhz = 0;
  memset(&f, 0, sizeof f);
  FIELD(rsmi_dev_gpu_clk_freq_get, (index, RSMI_CLK_TYPE_SYS, &f), {
    if (gpum__rsmi_current_mhz(&f, &mhz)) {
      out->clock_sm_mhz = mhz;
      out->valid |= 1u << GPUM_METRIC_CLOCK_SM;
    }
  });
  memset(&f, 0, sizeof f);
  FIELD(rsmi_dev_gpu_clk_freq_get, (index, RSMI_CLK_TYPE_MEM, &f), {
    if (gpum__rsmi_current_mhz(&f, &mhz)) {
      out->clock_mem_mhz = mhz;
      out->valid |= 1u << GPUM_METRIC_CLOCK_MEM;
    }
  });
  rsmi_error_count_t ec;
  memset(&ec, 0, sizeof ec);
  FIELD(rsmi_dev_ecc_count_get, (index, RSMI_GPU_BLOCK_UMC, &ec), {
    out->ecc_corrected = ec.correctable_err;
    out->ecc_uncorrected = ec.uncorrectable_err;
    out->valid |= 1u << GPUM_METRIC_ECC_CORRECTED | 1u << GPUM_METRIC_ECC_UNCORRECTED;
  });
  return 0;
}

static int rocm_sample(gpum_device_session_t *s, unsigned index, gpum_device_sample_t *out) {
  int rc = sample_query(s, s->impl, index, out);
  if (rc)
    out->valid = 0;
  return rc;
}

/* ROCm SMI has neither page retirement state nor row remapping in this subset: the device is
 * asked something cheap so that a lost one still reads as lost, and nothing is valid. */
static int rocm_memory_health(gpum_device_session_t *s, unsigned index, gpum_memory_health_t *out) {
  rsmi_t *r = s->impl;
  uint64_t total = 0;
  (void)out;
  FIELD(rsmi_dev_memory_total_get, (index, RSMI_MEM_TYPE_VRAM, &total), (void)total);
  return 0;
}

/* ---- processes ---- */

/* Every KFD process, as rsmi_compute_process_info_get lists them (*out malloc'd). */
static int list_all(gpum_device_session_t *s, rsmi_t *r, unsigned index, rsmi_process_info_t **out,
                    uint32_t *n) {
  *out = NULL;
  *n = 0;
  for (int round = 0; round < 4; round++) {
    uint32_t want = 0;
    rsmi_status_t st;
    RS_RETRY(s, st, r->f.rsmi_compute_process_info_get(NULL, &want));
    if (st != RSMI_STATUS_SUCCESS)
      return fail(r, "rsmi_compute_process_info_get", index, st);
    if (want == 0)
      return 0;
    uint32_t cap = want + 8; /* room for processes that start meanwhile */
    rsmi_process_info_t *buf = calloc(cap, sizeof *buf);
    if (!buf)
      return gpum_error(GPUM_ENOMEM, "cannot allocate %" PRIu32 " process entries", cap);
    uint32_t got = cap;
    RS_RETRY(s, st, r->f.rsmi_compute_process_info_get(buf, &got));
    if (st == RSMI_STATUS_SUCCESS) {
      *out = buf;
      *n = got;
      return 0;
    }
    free(buf);
    if (st != RSMI_STATUS_INSUFFICIENT_SIZE)
      return fail(r, "rsmi_compute_process_info_get", index, st);
  }
  return gpum_error(GPUM_EAGAIN, "the process list kept growing while it was read");
}

/* Whether pid uses device index, and how many devices it uses (0 when not found). */
static int process_gpus(gpum_device_session_t *s, rsmi_t *r, unsigned index, uint32_t pid,
                        bool *on_index, uint32_t *ndev) {
  uint32_t idx[64], n = 64;
  rsmi_status_t st;
  RS_RETRY(s, st, r->f.rsmi_compute_process_gpus_get(pid, idx, &n));
  *on_index = false;
  *ndev = 0;
  if (st == RSMI_STATUS_NOT_FOUND)
    return 0; /* it ended meanwhile */
  if (st != RSMI_STATUS_SUCCESS && st != RSMI_STATUS_INSUFFICIENT_SIZE)
    return fail(r, "rsmi_compute_process_gpus_get", index, st);
  *ndev = n;
  for (uint32_t k = 0; k < n && k < 64; k++)
    *on_index |= idx[k] == index;
  return 0;
}

/* ROCm SMI gives each process's VRAM summed over every GPU it uses: the figure is valid for a
 * process on this device only, and invalid (not guessed) for one spread over several. */
static int rocm_processes(gpum_device_session_t *s, unsigned index, gpum__rawproc_t **out,
                          size_t *n) {
  rsmi_t *r = s->impl;
  *out = NULL;
  *n = 0;
  if (!r->f.rsmi_compute_process_info_get || !r->f.rsmi_compute_process_gpus_get)
    return 0;
  uint64_t total = 0; /* a lost device fails as lost, not with an empty list */
  FIELD(rsmi_dev_memory_total_get, (index, RSMI_MEM_TYPE_VRAM, &total), (void)total);
  rsmi_process_info_t *all = NULL;
  uint32_t nall = 0;
  int rc = list_all(s, r, index, &all, &nall);
  if (rc || nall == 0)
    return rc;
  gpum__rawproc_t *res = calloc(nall, sizeof *res);
  if (!res) {
    free(all);
    return gpum_error(GPUM_ENOMEM, "cannot allocate %" PRIu32 " process entries", nall);
  }
  size_t k = 0;
  for (uint32_t i = 0; i < nall; i++) {
    bool on = false;
    uint32_t ndev = 0;
    if ((rc = process_gpus(s, r, index, all[i].process_id, &on, &ndev)))
      break;
    if (!on)
      continue;
    res[k].pid = all[i].process_id;
    res[k].memory = all[i].vram_usage;
    res[k].memory_valid = ndev == 1;
    k++;
  }
  free(all);
  if (rc) {
    free(res);
    return rc;
  }
  *out = res;
  *n = k;
  return 0;
}

/* ROCm SMI's event interface (rsmi_event_notification_*) is not in our subset yet. */
static int rocm_events_enable(gpum_device_session_t *s) {
  (void)s;
  return gpum_error(GPUM_ENOTSUP, "the rocm backend does not deliver device events");
}

static int rocm_event_wait(gpum_device_session_t *s, gpum_device_event_t *ev, unsigned timeout_ms) {
  (void)s, (void)ev, (void)timeout_ms;
  return gpum_error(GPUM_ESTATE, "device events are not enabled (the rocm backend has none)");
}

const struct gpum__backend gpum__backend_rocm = {
    .name = "rocm",
    .kind = GPUM_BACKEND_ROCM,
    .open = rocm_open,
    .close = rocm_close,
    .get_info = rocm_get_info,
    .sample = rocm_sample,
    .memory_health = rocm_memory_health,
    .processes = rocm_processes,
    .events_enable = rocm_events_enable,
    .event_wait = rocm_event_wait,
};
