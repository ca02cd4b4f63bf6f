/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NVML entry points of the simulated driver: initialisation (reference counted, as in the real
 * library), the system queries, device handles and every per-device query except the process
 * lists and events (nvml_events.c). Return codes follow the real library: UNINITIALIZED before
 * nvmlInit, INVALID_ARGUMENT for NULL pointers and foreign handles, INSUFFICIENT_SIZE for short
 * buffers, FUNCTION_NOT_FOUND for a memory_v2 struct with a plain version number, NOT_SUPPORTED
 * for the metrics a spec marks unsupported, and the injected faults' codes.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <gpum/error.h>

#include "sim_internal.h"

/* Every exported NVML function has exactly the prototype of our ABI declarations. */
#define NVML_CHECK(ret, name, params) \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&name), gpum_##name##_fn), #name);
GPUM_NVML_FUNCS(NVML_CHECK)

struct nvmlDevice_st {
  unsigned index;
};

static struct nvmlDevice_st handles[GPUM__SIM_MAX_DEVICES] = {
    {0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}};
static gpum__sim_lib_t nvml_lib = GPUM__SIM_LIB_INIT;

void gpum__sim_nvml_atfork(gpum__sim_fork_phase_t ph) {
  gpum__sim_fork_mutex(&nvml_lib.mu, ph);
}

nvmlDevice_t gpum__sim_nvml_handle(unsigned idx) {
  return &handles[idx];
}

struct gpum__sim_node *gpum__sim_nvml_node(void) {
  return gpum__sim_lib_node(&nvml_lib);
}

static nvmlReturn_t do_init(void) {
  int err = gpum__sim_lib_init(&nvml_lib);
  return err == 0                 ? NVML_SUCCESS
         : err == GPUM_EDRIVERVER ? NVML_ERROR_LIB_RM_VERSION_MISMATCH
         : err == GPUM_EPERM      ? NVML_ERROR_NO_PERMISSION
                                  : NVML_ERROR_DRIVER_NOT_LOADED;
}

nvmlReturn_t nvmlInit_v2(void) {
  return do_init();
}
nvmlReturn_t nvmlInit(void) {
  return do_init();
}
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  (void)flags;
  return do_init();
}

nvmlReturn_t nvmlShutdown(void) {
  return gpum__sim_lib_shutdown(&nvml_lib) ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

const char *nvmlErrorString(nvmlReturn_t result) {
  return gpum_nvml_return_message(result);
}

/* Node of an initialised library, with its state: UNINITIALIZED, DRIVER_NOT_LOADED (stopped). */
static nvmlReturn_t live_node(struct gpum__sim_node **out) {
  struct gpum__sim_node *n = gpum__sim_nvml_node();
  if (!n)
    return NVML_ERROR_UNINITIALIZED;
  if (__atomic_load_n(&n->hdr.stopped, __ATOMIC_ACQUIRE))
    return NVML_ERROR_DRIVER_NOT_LOADED;
  *out = n;
  return NVML_SUCCESS;
}

/* What a MIG device handle answers NOT_SUPPORTED to: the whole GPU's utilisation (also per
 * process), sensors, clocks, ECC and memory repair, PCI identity and events (ask the parent's
 * handle). */
#define GPUM__SIM_MIG_WHOLE_GPU                                                                   \
  (GPUM__SIM_M_UTILIZATION | GPUM__SIM_M_TEMPERATURE | GPUM__SIM_M_POWER | GPUM__SIM_M_CLOCKS |   \
   GPUM__SIM_M_ECC | GPUM__SIM_M_RETIRED_PAGES | GPUM__SIM_M_REMAPPED_ROWS | GPUM__SIM_M_EVENTS | \
   GPUM__SIM_M_PCI | GPUM__SIM_M_PROC_UTIL)

static nvmlReturn_t enter_index(struct gpum__sim_node *n, unsigned idx, uint32_t metric) {
  static const nvmlReturn_t codes[] = {
      [GPUM__SIM_ENTER_OK] = NVML_SUCCESS,
      [GPUM__SIM_ENTER_LOCK] = NVML_ERROR_UNKNOWN,
      [GPUM__SIM_ENTER_LOST] = NVML_ERROR_GPU_IS_LOST,
      [GPUM__SIM_ENTER_RESET] = NVML_ERROR_RESET_REQUIRED,
      [GPUM__SIM_ENTER_UNSUP] = NVML_ERROR_NOT_SUPPORTED,
      [GPUM__SIM_ENTER_FLAKY] = NVML_ERROR_UNKNOWN,
  };
  return codes[gpum__sim_dev_enter(n, idx, metric)];
}

nvmlReturn_t gpum__sim_nvml_enter(nvmlDevice_t h, uint32_t metric, struct gpum__sim_node **out,
                                  unsigned *idx) {
  struct gpum__sim_node *n;
  nvmlReturn_t ret = live_node(&n);
  if (ret != NVML_SUCCESS)
    return ret;
  uintptr_t p = (uintptr_t)h, base = (uintptr_t)handles;
  if (p < base || p >= base + sizeof handles || (p - base) % sizeof handles[0] != 0)
    return NVML_ERROR_INVALID_ARGUMENT;
  unsigned i = (unsigned)((p - base) / sizeof handles[0]);
  if (i >= n->spec.device_count || n->spec.dev[i].vendor != GPUM__SIM_V_NVIDIA)
    return NVML_ERROR_INVALID_ARGUMENT;
  const struct gpum__sim_dev_spec *d = &n->spec.dev[i];
  /* A MIG handle shares its parent's faults and spec; what is the whole GPU's it does not
   * answer. */
  if (d->mig_of && (metric & GPUM__SIM_MIG_WHOLE_GPU))
    return NVML_ERROR_NOT_SUPPORTED;
  ret = enter_index(n, d->mig_of ? d->mig_of - 1 : i, metric);
  if (ret == NVML_SUCCESS) {
    *out = n;
    *idx = i;
  }
  return ret;
}

static nvmlReturn_t copy_str(char *dst, unsigned int length, const char *src) {
  size_t need = strlen(src) + 1;
  if (length < need)
    return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(dst, src, need);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
  struct gpum__sim_node *n;
  nvmlReturn_t ret = live_node(&n);
  if (ret == NVML_SUCCESS && !version)
    ret = NVML_ERROR_INVALID_ARGUMENT;
  return ret == NVML_SUCCESS ? copy_str(version, length, n->spec.driver_version) : ret;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion) {
  struct gpum__sim_node *n;
  nvmlReturn_t ret = live_node(&n);
  if (ret == NVML_SUCCESS && !cudaDriverVersion)
    ret = NVML_ERROR_INVALID_ARGUMENT;
  if (ret == NVML_SUCCESS)
    *cudaDriverVersion = n->spec.cuda_version;
  return ret;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
  struct gpum__sim_node *n;
  nvmlReturn_t ret = live_node(&n);
  if (ret == NVML_SUCCESS && !deviceCount)
    ret = NVML_ERROR_INVALID_ARGUMENT;
  if (ret == NVML_SUCCESS)
    *deviceCount = gpum__sim_vendor_count(n, GPUM__SIM_V_NVIDIA); /* NVML sees NVIDIA's */
  return ret;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) {
  return nvmlDeviceGetCount_v2(deviceCount);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
  struct gpum__sim_node *n;
  nvmlReturn_t ret = live_node(&n);
  if (ret != NVML_SUCCESS)
    return ret;
  int sim = device ? gpum__sim_vendor_dev(n, GPUM__SIM_V_NVIDIA, index) : -1;
  if (sim < 0)
    return NVML_ERROR_INVALID_ARGUMENT;
  /* As with a real GPU that fell off the bus, even the handle lookup fails. */
  if ((ret = enter_index(n, (unsigned)sim, 0)) != NVML_SUCCESS)
    return ret;
  gpum__sim_unlock(n);
  *device = &handles[sim];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
  struct gpum__sim_node *n;
  nvmlReturn_t ret = live_node(&n);
  if (ret != NVML_SUCCESS)
    return ret;
  if (!uuid || !device)
    return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < n->spec.device_count; i++) {
    if (n->spec.dev[i].vendor != GPUM__SIM_V_NVIDIA || strcmp(n->spec.dev[i].uuid, uuid) != 0)
      continue;
    unsigned gate = n->spec.dev[i].mig_of ? n->spec.dev[i].mig_of - 1 : i; /* MIG: its parent */
    if ((ret = enter_index(n, gate, 0)) != NVML_SUCCESS)
      return ret;
    gpum__sim_unlock(n);
    *device = &handles[i];
    return NVML_SUCCESS;
  }
  return NVML_ERROR_NOT_FOUND;
}

/* The body of a simple device query: checks out, enters, runs stmt with n and i, unlocks. */
#define DEVICE_QUERY(h, metric, check, stmt)                     \
  do {                                                           \
    struct gpum__sim_node *n;                                    \
    unsigned i;                                                  \
    if (!gpum__sim_nvml_node())                                  \
      return NVML_ERROR_UNINITIALIZED;                           \
    if (!(check))                                                \
      return NVML_ERROR_INVALID_ARGUMENT;                        \
    nvmlReturn_t ret_ = gpum__sim_nvml_enter(h, metric, &n, &i); \
    if (ret_ != NVML_SUCCESS)                                    \
      return ret_;                                               \
    stmt;                                                        \
    gpum__sim_unlock(n);                                         \
    return ret_;                                                 \
  } while (0)

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
  DEVICE_QUERY(device, 0, name, ret_ = copy_str(name, length, n->spec.dev[i].name));
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
  DEVICE_QUERY(device, 0, uuid, ret_ = copy_str(uuid, length, n->spec.dev[i].uuid));
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
  /* A MIG handle's index is its MIG device index under the parent. */
  DEVICE_QUERY(device, 0, index,
               *index =
                   n->spec.dev[i].mig_of ? n->spec.dev[i].mig_index : gpum__sim_vendor_ord(n, i));
}

static void fill_pci(const struct gpum__sim_dev_spec *d, nvmlPciInfo_t *pci) {
  memset(pci, 0, sizeof *pci);
  snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", d->pci_domain & 0xffff,
           d->pci_bus, d->pci_device);
  memcpy(pci->busId, d->pci_bus_id, sizeof pci->busId);
  pci->domain = d->pci_domain;
  pci->bus = d->pci_bus;
  pci->device = d->pci_device;
  pci->pciDeviceId = d->pci_device_id;
  pci->pciSubSystemId = d->pci_subsystem_id;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
  DEVICE_QUERY(device, GPUM__SIM_M_PCI, pci, fill_pci(&n->spec.dev[i], pci));
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
  DEVICE_QUERY(device, 0, major && minor,
               (*major = n->spec.dev[i].cc_major, *minor = n->spec.dev[i].cc_minor));
}

/* Free memory of device i; on a GPU in MIG mode, less what its instances use (the aggregate a
 * privileged caller of the parent's handle gets). Lock held. */
static uint64_t parent_free(const struct gpum__sim_node *n, unsigned i) {
  uint64_t f = gpum__sim_free(n, i);
  if (n->spec.dev[i].mig_mode != NVML_DEVICE_MIG_ENABLE)
    return f;
  for (unsigned k = 0; k < n->spec.device_count; k++) {
    if (n->spec.dev[k].mig_of != i + 1)
      continue;
    uint64_t u = gpum__sim_used(n, k);
    f = u >= f ? 0 : f - u;
  }
  return f;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
  DEVICE_QUERY(device, GPUM__SIM_M_MEMORY, memory, {
    gpum__sim_reap(n);
    const struct gpum__sim_dev_spec *d = &n->spec.dev[i];
    /* v1: "used" includes the driver's reserve, as with R510+ drivers. */
    memory->total = d->memory;
    memory->free = parent_free(n, i);
    memory->used = d->memory - memory->free;
  });
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
  if (memory && memory->version != nvmlMemory_v2 && gpum__sim_nvml_node())
    return NVML_ERROR_FUNCTION_NOT_FOUND; /* what real drivers say to a plain "2" */
  DEVICE_QUERY(device, GPUM__SIM_M_MEMORY_V2, memory, {
    gpum__sim_reap(n);
    const struct gpum__sim_dev_spec *d = &n->spec.dev[i];
    memory->total = d->memory;
    memory->reserved = d->reserved;
    memory->free = parent_free(n, i);
    memory->used = d->memory - d->reserved - memory->free;
  });
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util) {
  DEVICE_QUERY(device, GPUM__SIM_M_UTILIZATION, util,
               (util->gpu = n->dev[i].util_gpu, util->memory = n->dev[i].util_mem));
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int *temp) {
  DEVICE_QUERY(device, GPUM__SIM_M_TEMPERATURE, temp && sensorType == NVML_TEMPERATURE_GPU,
               *temp = gpum__sim_temp(n, i));
}

nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t *temp) {
  if (temp && temp->version != nvmlTemperature_v1 && gpum__sim_nvml_node())
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  DEVICE_QUERY(device, GPUM__SIM_M_TEMPERATURE, temp && temp->sensorType == NVML_TEMPERATURE_GPU,
               temp->temperature = (int)gpum__sim_temp(n, i));
}

nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device,
                                               nvmlTemperatureThresholds_t thresholdType,
                                               unsigned int *temp) {
  DEVICE_QUERY(device, GPUM__SIM_M_TEMPERATURE, temp && thresholdType >= 0 && thresholdType <= 7, {
    const struct gpum__sim_dev_spec *d = &n->spec.dev[i];
    switch (thresholdType) {
    case NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
      *temp = d->temp_shutdown;
      break;
    case NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
      *temp = d->temp_slowdown;
      break;
    case NVML_TEMPERATURE_THRESHOLD_MEM_MAX:
      *temp = d->temp_mem_max;
      break;
    case NVML_TEMPERATURE_THRESHOLD_GPU_MAX:
      *temp = d->temp_gpu_max;
      break;
    default: /* acoustic and GPS thresholds: not on data-centre boards */
      ret_ = NVML_ERROR_NOT_SUPPORTED;
      break;
    }
  });
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power) {
  DEVICE_QUERY(device, GPUM__SIM_M_POWER, power, *power = gpum__sim_power_mw(n, i));
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit) {
  DEVICE_QUERY(device, GPUM__SIM_M_POWER, limit, *limit = n->spec.dev[i].power_limit_mw);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                    unsigned int *clock) {
  DEVICE_QUERY(device, GPUM__SIM_M_CLOCKS, clock && type >= 0 && type <= NVML_CLOCK_VIDEO,
               *clock = gpum__sim_clock(n, i, type, false));
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                       unsigned int *clock) {
  DEVICE_QUERY(device, GPUM__SIM_M_CLOCKS, clock && type >= 0 && type <= NVML_CLOCK_VIDEO,
               *clock = gpum__sim_clock(n, i, type, true));
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current,
                                  nvmlEnableState_t *pending) {
  DEVICE_QUERY(device, GPUM__SIM_M_ECC, current && pending, {
    *current = *pending = n->spec.dev[i].ecc ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  });
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType,
                                         unsigned long long *eccCounts) {
  DEVICE_QUERY(
      device, GPUM__SIM_M_ECC,
      eccCounts && (errorType == 0 || errorType == 1) && (counterType == 0 || counterType == 1), {
        const struct gpum__sim_dev_state *d = &n->dev[i];
        if (!n->spec.dev[i].ecc)
          ret_ = NVML_ERROR_NOT_SUPPORTED; /* needs ECC mode enabled */
        else if (errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED)
          *eccCounts =
              counterType == NVML_VOLATILE_ECC ? d->ecc_sbe_volatile : d->ecc_sbe_aggregate;
        else
          *eccCounts =
              counterType == NVML_VOLATILE_ECC ? d->ecc_dbe_volatile : d->ecc_dbe_aggregate;
      });
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                    nvmlEnableState_t *isPending) {
  DEVICE_QUERY(device, GPUM__SIM_M_RETIRED_PAGES, isPending,
               *isPending =
                   n->dev[i].retired_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED);
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
                                       unsigned int *uncRows, unsigned int *isPending,
                                       unsigned int *failureOccurred) {
  DEVICE_QUERY(device, GPUM__SIM_M_REMAPPED_ROWS,
               corrRows && uncRows && isPending && failureOccurred, {
                 const struct gpum__sim_dev_state *d = &n->dev[i];
                 *corrRows = d->remap_corr;
                 *uncRows = d->remap_unc;
                 *isPending = d->remap_pending;
                 *failureOccurred = d->remap_failure;
               });
}

nvmlReturn_t nvmlDeviceGetConfComputeMemSizeInfo(nvmlDevice_t device, void *memInfo) {
  /* Confidential computing is never enabled on a simulated GPU. */
  DEVICE_QUERY(device, 0, memInfo, ret_ = NVML_ERROR_NOT_SUPPORTED);
}

/* ---- MIG ---- */

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode) {
  DEVICE_QUERY(device, 0, currentMode && pendingMode, {
    const struct gpum__sim_dev_spec *d = &n->spec.dev[i];
    if (!d->mig_capable) /* a MIG handle, or a GPU without MIG */
      ret_ = NVML_ERROR_NOT_SUPPORTED;
    else {
      *currentMode = d->mig_mode;
      *pendingMode = d->mig_pending;
    }
  });
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
  DEVICE_QUERY(device, 0, count, {
    const struct gpum__sim_dev_spec *d = &n->spec.dev[i];
    if (d->mig_of)
      ret_ = NVML_ERROR_INVALID_ARGUMENT; /* not a parent's handle */
    else                                  /* zero when MIG is not supported or not enabled */
      *count = d->mig_mode == NVML_DEVICE_MIG_ENABLE ? GPUM__SIM_MIG_MAX : 0;
  });
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *migDevice) {
  DEVICE_QUERY(device, 0, migDevice, {
    const struct gpum__sim_dev_spec *d = &n->spec.dev[i];
    if (d->mig_of)
      ret_ = NVML_ERROR_INVALID_ARGUMENT;
    else if (d->mig_mode != NVML_DEVICE_MIG_ENABLE)
      ret_ = NVML_ERROR_NOT_SUPPORTED;
    else if (index >= GPUM__SIM_MIG_MAX)
      ret_ = NVML_ERROR_INVALID_ARGUMENT;
    else {
      ret_ = NVML_ERROR_NOT_FOUND;
      for (unsigned k = 0; k < n->spec.device_count; k++)
        if (n->spec.dev[k].mig_of == i + 1 && n->spec.dev[k].mig_index == index) {
          *migDevice = &handles[k];
          ret_ = NVML_SUCCESS;
        }
    }
  });
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice) {
  DEVICE_QUERY(device, 0, isMigDevice, *isMigDevice = n->spec.dev[i].mig_of != 0);
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                          nvmlDevice_t *device) {
  DEVICE_QUERY(migDevice, 0, device, {
    if (!n->spec.dev[i].mig_of)
      ret_ = NVML_ERROR_INVALID_ARGUMENT;
    else
      *device = &handles[n->spec.dev[i].mig_of - 1];
  });
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
  DEVICE_QUERY(device, 0, id, {
    if (!n->spec.dev[i].mig_of)
      ret_ = NVML_ERROR_NOT_SUPPORTED;
    else
      *id = n->spec.dev[i].mig_gi;
  });
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
  DEVICE_QUERY(device, 0, id, {
    if (!n->spec.dev[i].mig_of)
      ret_ = NVML_ERROR_NOT_SUPPORTED;
    else
      *id = n->spec.dev[i].mig_ci;
  });
}
