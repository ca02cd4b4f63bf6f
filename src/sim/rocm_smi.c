/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ROCm SMI entry points of the simulated driver: the rsmi_* subset gpum uses
 * (src/abi/rocm_smi_abi.h), over the node's AMD devices (a spec's `vendor: amd`), numbered from
 * 0 in node order as ROCm SMI numbers its monitor devices. NVIDIA devices of the same node are
 * not seen here, and AMD ones are not seen through NVML or CUDA.
 *
 * Return codes follow ROCm SMI 5.2's (rocm_smi.h and its rocm_smi.cc): RSMI_STATUS_INIT_ERROR
 * before rsmi_init (and from rsmi_shut_down without one), RSMI_STATUS_INVALID_ARGS for NULL
 * pointers, a zero length or an index past the devices, RSMI_STATUS_INSUFFICIENT_SIZE for a
 * short buffer (the string truncated and terminated, as the real one does), and
 * RSMI_STATUS_NOT_SUPPORTED for what the spec marks unsupported or an AMD board does not have
 * (sensor types other than edge, junction and memory; clocks other than SYS and MEM).
 * Units: bytes, millidegrees Celsius, microwatts, Hz.
 *
 * Faults: ROCm SMI reads sysfs, and the kernel's errno is turned into a status
 * (ErrnoToRsmiStatus). A device that fell off the bus answers its reads with ENODEV, which
 * becomes RSMI_STATUS_UNKNOWN_ERROR: that is what a lost device (XID 79) or one needing a reset
 * returns here, from every per-device call except rsmi_dev_pci_id_get, which ROCm SMI answers
 * from what it read at rsmi_init. An injected error rate fails calls with RSMI_STATUS_BUSY (a
 * sysfs read that met EBUSY, the transient case); --slow delays each call.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <gpum/error.h>

#include "sim_internal.h"

/* Every exported function has exactly the prototype of our ABI declarations. */
#define RSMI_CHECK(name, params) \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&name), gpum_##name##_fn), #name);
GPUM_RSMI_FUNCS(RSMI_CHECK)

static gpum__sim_lib_t rocm_lib = GPUM__SIM_LIB_INIT;

void gpum__sim_rocm_atfork(gpum__sim_fork_phase_t ph) {
  gpum__sim_fork_mutex(&rocm_lib.mu, ph);
}

rsmi_status_t rsmi_init(uint64_t init_flags) {
  (void)init_flags;
  int err = gpum__sim_lib_init(&rocm_lib);
  return err == 0            ? RSMI_STATUS_SUCCESS
         : err == GPUM_EPERM ? RSMI_STATUS_PERMISSION
                             : RSMI_STATUS_INIT_ERROR;
}

rsmi_status_t rsmi_shut_down(void) {
  return gpum__sim_lib_shutdown(&rocm_lib) ? RSMI_STATUS_SUCCESS : RSMI_STATUS_INIT_ERROR;
}

/* The node of an initialised library: INIT_ERROR before rsmi_init or once the node stopped. */
static rsmi_status_t live_node(struct gpum__sim_node **out) {
  struct gpum__sim_node *n = gpum__sim_lib_node(&rocm_lib);
  if (!n || __atomic_load_n(&n->hdr.stopped, __ATOMIC_ACQUIRE))
    return RSMI_STATUS_INIT_ERROR;
  *out = n;
  return RSMI_STATUS_SUCCESS;
}

static const struct {
  rsmi_status_t code;
  const char *text;
} messages[] = {
    {RSMI_STATUS_SUCCESS, "RSMI_STATUS_SUCCESS: The function has been executed successfully."},
    {RSMI_STATUS_INVALID_ARGS, "RSMI_STATUS_INVALID_ARGS: The provided arguments do not meet "
                               "the preconditions required for input by the function."},
    {RSMI_STATUS_NOT_SUPPORTED, "RSMI_STATUS_NOT_SUPPORTED: The requested information or action "
                                "is not available for the given input, on the given system"},
    {RSMI_STATUS_PERMISSION, "RSMI_STATUS_PERMISSION: Permission denied"},
    {RSMI_STATUS_INIT_ERROR, "RSMI_STATUS_INIT_ERROR: An error occurred during initialization"},
    {RSMI_STATUS_NOT_FOUND, "RSMI_STATUS_NOT_FOUND: An item required to complete the call was "
                            "not found"},
    {RSMI_STATUS_INSUFFICIENT_SIZE, "RSMI_STATUS_INSUFFICIENT_SIZE: Not enough resources were "
                                    "available to fully execute the call"},
    {RSMI_STATUS_BUSY, "RSMI_STATUS_BUSY: A resource or mutex could not be acquired because it "
                       "is already being used"},
    {RSMI_STATUS_UNKNOWN_ERROR, "RSMI_STATUS_UNKNOWN_ERROR: An unknown error prevented the call "
                                "from completing successfully"},
};

rsmi_status_t rsmi_status_string(rsmi_status_t status, const char **status_string) {
  if (!status_string)
    return RSMI_STATUS_INVALID_ARGS;
  *status_string = "An unknown error occurred";
  for (size_t i = 0; i < sizeof messages / sizeof messages[0]; i++)
    if (messages[i].code == status)
      *status_string = messages[i].text;
  return RSMI_STATUS_SUCCESS;
}

rsmi_status_t rsmi_num_monitor_devices(uint32_t *num_devices) {
  struct gpum__sim_node *n;
  rsmi_status_t ret = live_node(&n);
  if (ret == RSMI_STATUS_SUCCESS && !num_devices)
    ret = RSMI_STATUS_INVALID_ARGS;
  if (ret == RSMI_STATUS_SUCCESS)
    *num_devices = gpum__sim_vendor_count(n, GPUM__SIM_V_AMD);
  return ret;
}

/* Copies src into a buffer of len bytes the way ROCm SMI does: truncated and terminated when
 * it does not fit, with INSUFFICIENT_SIZE. */
static rsmi_status_t copy_str(char *dst, size_t len, const char *src) {
  size_t n = strlen(src);
  size_t c = n < len - 1 ? n : len - 1;
  memcpy(dst, src, c);
  dst[c] = '\0';
  return n + 1 > len ? RSMI_STATUS_INSUFFICIENT_SIZE : RSMI_STATUS_SUCCESS;
}

/* The driver version: the node's, as the amdgpu module version would be read. */
rsmi_status_t rsmi_version_str_get(rsmi_sw_component_t component, char *ver_str, uint32_t len) {
  struct gpum__sim_node *n;
  rsmi_status_t ret = live_node(&n);
  if (ret != RSMI_STATUS_SUCCESS)
    return ret;
  if (component != RSMI_SW_COMP_DRIVER || !ver_str || len == 0)
    return RSMI_STATUS_INVALID_ARGS;
  return copy_str(ver_str, len, n->spec.driver_version);
}

static const rsmi_status_t enter_codes[] = {
    [GPUM__SIM_ENTER_OK] = RSMI_STATUS_SUCCESS,
    [GPUM__SIM_ENTER_LOCK] = RSMI_STATUS_UNKNOWN_ERROR,
    [GPUM__SIM_ENTER_LOST] = RSMI_STATUS_UNKNOWN_ERROR,
    [GPUM__SIM_ENTER_RESET] = RSMI_STATUS_UNKNOWN_ERROR,
    [GPUM__SIM_ENTER_UNSUP] = RSMI_STATUS_NOT_SUPPORTED,
    [GPUM__SIM_ENTER_FLAKY] = RSMI_STATUS_BUSY,
};

/* Checks initialisation, the index and the device's faults; on success the node lock is held
 * and *idx is the node's index of AMD device dv_ind. */
static rsmi_status_t enter(uint32_t dv_ind, uint32_t metric, struct gpum__sim_node **out,
                           unsigned *idx) {
  struct gpum__sim_node *n;
  rsmi_status_t ret = live_node(&n);
  if (ret != RSMI_STATUS_SUCCESS)
    return ret;
  int sim = gpum__sim_vendor_dev(n, GPUM__SIM_V_AMD, dv_ind);
  if (sim < 0)
    return RSMI_STATUS_INVALID_ARGS;
  ret = enter_codes[gpum__sim_dev_enter(n, (unsigned)sim, metric)];
  if (ret == RSMI_STATUS_SUCCESS) {
    *out = n;
    *idx = (unsigned)sim;
  }
  return ret;
}

/* The body of a device query: checks the arguments, enters, runs stmt with n and i, unlocks. */
#define DEVICE_QUERY(dv, metric, check, stmt)                      \
  do {                                                             \
    struct gpum__sim_node *n;                                      \
    unsigned i;                                                    \
    rsmi_status_t ret_ = live_node(&n);                            \
    if (ret_ != RSMI_STATUS_SUCCESS)                               \
      return ret_;                                                 \
    if (!(check))                                                  \
      return RSMI_STATUS_INVALID_ARGS;                             \
    if ((ret_ = enter(dv, metric, &n, &i)) != RSMI_STATUS_SUCCESS) \
      return ret_;                                                 \
    stmt;                                                          \
    gpum__sim_unlock(n);                                           \
    return ret_;                                                   \
  } while (0)

rsmi_status_t rsmi_dev_name_get(uint32_t dv_ind, char *name, size_t len) {
  DEVICE_QUERY(dv_ind, 0, name && len > 0, ret_ = copy_str(name, len, n->spec.dev[i].name));
}

/* The brand: the marketing name without its "AMD " prefix, as the real one reads the
 * product name's family. */
rsmi_status_t rsmi_dev_brand_get(uint32_t dv_ind, char *brand, uint32_t len) {
  DEVICE_QUERY(dv_ind, 0, brand && len > 0, {
    const char *s = n->spec.dev[i].name;
    ret_ = copy_str(brand, len, strncmp(s, "AMD ", 4) == 0 ? s + 4 : s);
  });
}

rsmi_status_t rsmi_dev_unique_id_get(uint32_t dv_ind, uint64_t *id) {
  DEVICE_QUERY(dv_ind, 0, id, *id = n->spec.dev[i].unique_id);
}

/* Read at rsmi_init by the real library: answered even for a device that fell off the bus. */
rsmi_status_t rsmi_dev_pci_id_get(uint32_t dv_ind, uint64_t *bdfid) {
  struct gpum__sim_node *n;
  rsmi_status_t ret = live_node(&n);
  if (ret != RSMI_STATUS_SUCCESS)
    return ret;
  int sim = gpum__sim_vendor_dev(n, GPUM__SIM_V_AMD, dv_ind);
  if (!bdfid || sim < 0)
    return RSMI_STATUS_INVALID_ARGS;
  const struct gpum__sim_dev_spec *d = &n->spec.dev[sim];
  if (d->unsupported & GPUM__SIM_M_PCI)
    return RSMI_STATUS_NOT_SUPPORTED;
  *bdfid = (uint64_t)d->pci_domain << 32 | (uint64_t)(d->pci_bus & 0xff) << 8 |
           (uint64_t)(d->pci_device & 0x1f) << 3;
  return RSMI_STATUS_SUCCESS;
}

/* VRAM: total is the board's; used counts the driver's reserve and every process's memory
 * (amdgpu's mem_info_vram_used). VIS_VRAM and GTT are not modelled. */
static rsmi_status_t memory(uint32_t dv_ind, rsmi_memory_type_t type, uint64_t *out, bool total) {
  DEVICE_QUERY(dv_ind, GPUM__SIM_M_MEMORY, out && type <= RSMI_MEM_TYPE_GTT, {
    if (type != RSMI_MEM_TYPE_VRAM) {
      ret_ = RSMI_STATUS_NOT_SUPPORTED;
    } else {
      gpum__sim_reap(n);
      const struct gpum__sim_dev_spec *d = &n->spec.dev[i];
      *out = total ? d->memory : d->memory - gpum__sim_free(n, i);
    }
  });
}

rsmi_status_t rsmi_dev_memory_total_get(uint32_t dv_ind, rsmi_memory_type_t mem_type,
                                        uint64_t *total) {
  return memory(dv_ind, mem_type, total, true);
}

rsmi_status_t rsmi_dev_memory_usage_get(uint32_t dv_ind, rsmi_memory_type_t mem_type,
                                        uint64_t *used) {
  return memory(dv_ind, mem_type, used, false);
}

rsmi_status_t rsmi_dev_busy_percent_get(uint32_t dv_ind, uint32_t *busy_percent) {
  DEVICE_QUERY(dv_ind, GPUM__SIM_M_UTILIZATION, busy_percent, *busy_percent = n->dev[i].util_gpu);
}

rsmi_status_t rsmi_dev_memory_busy_percent_get(uint32_t dv_ind, uint32_t *busy_percent) {
  DEVICE_QUERY(dv_ind, GPUM__SIM_M_UTILIZATION, busy_percent, *busy_percent = n->dev[i].util_mem);
}

/* Edge, junction and memory sensors (the HBM instances are not there, as on most boards);
 * current, critical (the slowdown threshold) and emergency (shutdown) values. */
rsmi_status_t rsmi_dev_temp_metric_get(uint32_t dv_ind, uint32_t sensor_type,
                                       rsmi_temperature_metric_t metric, int64_t *temperature) {
  DEVICE_QUERY(dv_ind, GPUM__SIM_M_TEMPERATURE, temperature, {
    const struct gpum__sim_dev_spec *d = &n->spec.dev[i];
    int64_t c = -1;
    if (sensor_type <= RSMI_TEMP_TYPE_MEMORY) {
      if (metric == RSMI_TEMP_CURRENT)
        c = (int64_t)gpum__sim_temp(n, i) + (sensor_type == RSMI_TEMP_TYPE_JUNCTION ? 8 : 0);
      else if (metric == RSMI_TEMP_CRITICAL)
        c = sensor_type == RSMI_TEMP_TYPE_MEMORY ? d->temp_mem_max : d->temp_slowdown;
      else if (metric == RSMI_TEMP_EMERGENCY)
        c = d->temp_shutdown;
    }
    if (c < 0)
      ret_ = RSMI_STATUS_NOT_SUPPORTED;
    else
      *temperature = c * 1000;
  });
}

rsmi_status_t rsmi_dev_power_ave_get(uint32_t dv_ind, uint32_t sensor_ind, uint64_t *power) {
  DEVICE_QUERY(dv_ind, GPUM__SIM_M_POWER, power, {
    if (sensor_ind != 0)
      ret_ = RSMI_STATUS_NOT_SUPPORTED;
    else
      *power = (uint64_t)gpum__sim_power_mw(n, i) * 1000;
  });
}

rsmi_status_t rsmi_dev_power_cap_get(uint32_t dv_ind, uint32_t sensor_ind, uint64_t *cap) {
  DEVICE_QUERY(dv_ind, GPUM__SIM_M_POWER, cap, {
    if (sensor_ind != 0)
      ret_ = RSMI_STATUS_NOT_SUPPORTED;
    else
      *cap = (uint64_t)n->spec.dev[i].power_limit_mw * 1000;
  });
}

/* The DPM table: levels from the idle to the top clock (8 for SYS, 4 for MEM), current the
 * level nearest the modelled clock. */
static void fill_freqs(const struct gpum__sim_node *n, unsigned i, bool mem,
                       rsmi_frequencies_t *f) {
  const struct gpum__sim_dev_spec *d = &n->spec.dev[i];
  unsigned lo = mem ? d->clock_mem_idle : d->clock_sm_idle;
  unsigned hi = mem ? d->clock_mem_max : d->clock_sm_max;
  unsigned now = gpum__sim_clock(n, i, mem ? NVML_CLOCK_MEM : NVML_CLOCK_SM, false);
  unsigned levels = mem ? 4 : 8;
  memset(f, 0, sizeof *f);
  f->num_supported = levels;
  uint64_t best = UINT64_MAX;
  for (unsigned k = 0; k < levels; k++) {
    unsigned mhz = lo + (hi > lo ? (hi - lo) * k / (levels - 1) : 0);
    f->frequency[k] = (uint64_t)mhz * 1000000;
    uint64_t dist = mhz > now ? mhz - now : now - mhz;
    if (dist < best) {
      best = dist;
      f->current = k;
    }
  }
}

rsmi_status_t rsmi_dev_gpu_clk_freq_get(uint32_t dv_ind, rsmi_clk_type_t clk_type,
                                        rsmi_frequencies_t *f) {
  DEVICE_QUERY(dv_ind, GPUM__SIM_M_CLOCKS, f, {
    if (clk_type == RSMI_CLK_TYPE_SYS || clk_type == RSMI_CLK_TYPE_MEM)
      fill_freqs(n, i, clk_type == RSMI_CLK_TYPE_MEM, f);
    else
      ret_ = RSMI_STATUS_NOT_SUPPORTED;
  });
}

rsmi_status_t rsmi_dev_ecc_enabled_get(uint32_t dv_ind, uint64_t *enabled_blocks) {
  DEVICE_QUERY(dv_ind, GPUM__SIM_M_ECC, enabled_blocks,
               *enabled_blocks = n->spec.dev[i].ecc ? RSMI_GPU_BLOCK_UMC : 0);
}

/* The UMC block's counts are the device's ECC counters (aggregate: RAS counts survive until
 * the driver reloads); other blocks count nothing. Without ECC: NOT_SUPPORTED. */
rsmi_status_t rsmi_dev_ecc_count_get(uint32_t dv_ind, rsmi_gpu_block_t block,
                                     rsmi_error_count_t *ec) {
  DEVICE_QUERY(dv_ind, GPUM__SIM_M_ECC, ec && block != 0, {
    const struct gpum__sim_dev_state *s = &n->dev[i];
    if (!n->spec.dev[i].ecc) {
      ret_ = RSMI_STATUS_NOT_SUPPORTED;
    } else {
      bool umc = block == RSMI_GPU_BLOCK_UMC;
      ec->correctable_err = umc ? s->ecc_sbe_aggregate : 0;
      ec->uncorrectable_err = umc ? s->ecc_dbe_aggregate : 0;
    }
  });
}

/* ---- processes (KFD's view: every process with memory on an AMD device) ---- */

/* One process's figures over the AMD devices: bytes in total, devices used (their AMD numbers
 * in idx, up to cap). Lock held. Returns the number of devices. */
static unsigned proc_amd(const struct gpum__sim_node *n, const struct gpum__sim_proc *p,
                         uint64_t *bytes, uint32_t *idx, unsigned cap) {
  unsigned c = 0;
  *bytes = 0;
  for (unsigned d = 0; d < n->spec.device_count; d++) {
    if (n->spec.dev[d].vendor != GPUM__SIM_V_AMD || p->count[d] == 0)
      continue;
    *bytes += p->bytes[d];
    if (idx && c < cap)
      idx[c] = gpum__sim_vendor_ord(n, d);
    c++;
  }
  return c;
}

static void fill_info(const struct gpum__sim_proc *p, uint64_t bytes, rsmi_process_info_t *out) {
  memset(out, 0, sizeof *out);
  out->process_id = (uint32_t)p->pid;
  out->pasid = 0x8000u + ((uint32_t)p->pid & 0x7fffu);
  out->vram_usage = bytes;
}

/* A NULL out-pointer: INIT_ERROR before rsmi_init, else INVALID_ARGS. */
static rsmi_status_t null_arg(void) {
  struct gpum__sim_node *n;
  rsmi_status_t ret = live_node(&n);
  return ret != RSMI_STATUS_SUCCESS ? ret : RSMI_STATUS_INVALID_ARGS;
}

/* The process table under the lock, reaped: NULL with *ret set when the node is not usable. */
static struct gpum__sim_node *procs_enter(rsmi_status_t *ret) {
  struct gpum__sim_node *n;
  *ret = live_node(&n);
  if (*ret != RSMI_STATUS_SUCCESS)
    return NULL;
  if (gpum__sim_lock(n) != 0) {
    *ret = RSMI_STATUS_UNKNOWN_ERROR;
    return NULL;
  }
  gpum__sim_tick(n);
  gpum__sim_reap(n);
  return n;
}

rsmi_status_t rsmi_compute_process_info_get(rsmi_process_info_t *procs, uint32_t *num_items) {
  rsmi_status_t ret;
  if (!num_items)
    return null_arg();
  struct gpum__sim_node *n = procs_enter(&ret);
  if (!n)
    return ret;
  uint32_t cap = procs ? *num_items : 0, found = 0;
  for (uint32_t s = 0; s < n->proc_hw && s < GPUM__SIM_MAX_PROCS; s++) {
    const struct gpum__sim_proc *p = &n->procs[s];
    uint64_t bytes;
    if (p->state != GPUM__SIM_A_USED || proc_amd(n, p, &bytes, NULL, 0) == 0)
      continue;
    if (procs && found < cap)
      fill_info(p, bytes, &procs[found]);
    found++;
  }
  gpum__sim_unlock(n);
  if (procs && found > cap) {
    *num_items = cap;
    return RSMI_STATUS_INSUFFICIENT_SIZE;
  }
  *num_items = found;
  return RSMI_STATUS_SUCCESS;
}

/* The live process slot of pid, or NULL. Lock held. */
static const struct gpum__sim_proc *find_proc(const struct gpum__sim_node *n, uint32_t pid) {
  for (uint32_t s = 0; s < n->proc_hw && s < GPUM__SIM_MAX_PROCS; s++)
    if (n->procs[s].state == GPUM__SIM_A_USED && (uint32_t)n->procs[s].pid == pid)
      return &n->procs[s];
  return NULL;
}

rsmi_status_t rsmi_compute_process_info_by_pid_get(uint32_t pid, rsmi_process_info_t *proc) {
  rsmi_status_t ret;
  if (!proc)
    return null_arg();
  struct gpum__sim_node *n = procs_enter(&ret);
  if (!n)
    return ret;
  const struct gpum__sim_proc *p = find_proc(n, pid);
  uint64_t bytes = 0;
  if (p && proc_amd(n, p, &bytes, NULL, 0) > 0)
    fill_info(p, bytes, proc);
  else
    ret = RSMI_STATUS_NOT_FOUND;
  gpum__sim_unlock(n);
  return ret;
}

rsmi_status_t rsmi_compute_process_gpus_get(uint32_t pid, uint32_t *dv_indices,
                                            uint32_t *num_devices) {
  rsmi_status_t ret;
  if (!num_devices)
    return null_arg();
  struct gpum__sim_node *n = procs_enter(&ret);
  if (!n)
    return ret;
  const struct gpum__sim_proc *p = find_proc(n, pid);
  uint32_t cap = dv_indices ? *num_devices : 0;
  uint64_t bytes;
  unsigned found = p ? proc_amd(n, p, &bytes, dv_indices, cap) : 0;
  gpum__sim_unlock(n);
  if (!p || found == 0)
    return RSMI_STATUS_NOT_FOUND;
  if (dv_indices && found > cap) {
    *num_devices = cap;
    return RSMI_STATUS_INSUFFICIENT_SIZE;
  }
  *num_devices = found;
  return RSMI_STATUS_SUCCESS;
}
