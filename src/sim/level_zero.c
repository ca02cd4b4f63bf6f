/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulator's Level Zero: zeInit, zeDriverGet and zeDeviceGet of the core API, Sysman's own
 * zesInit, zesDriverGet and zesDeviceGet, and the Sysman calls of src/abi/ze_abi.h, over the
 * node's Intel devices (each numbered among the Intel devices only, in node order, as Intel's
 * driver numbers only its own GPUs), with the node's faults.
 *
 * As with the real loader: Sysman calls on a device handle from zeDeviceGet work only when
 * ZES_ENABLE_SYSMAN=1 was in the environment at the process's first zeInit (it is read then,
 * once); handles from zesDeviceGet work after zesInit. Either answers
 * ZE_RESULT_ERROR_UNINITIALIZED otherwise. ZE_AFFINITY_MASK (comma-separated device numbers;
 * "N.M" picks device N: sub-devices are not modelled) is read once too, at the first zeInit or
 * zesInit, and limits the devices both device lists return; unset or empty means all. A node
 * without an Intel device has no Level Zero driver: zeInit and zesInit answer
 * ZE_RESULT_ERROR_UNINITIALIZED.
 *
 * Handles are addresses of static slots, one per device and resource, so they stay valid and
 * equal across calls (as the loader's do) and a foreign pointer is told apart.
 *
 * Faults: a lost device (XID 79) answers ZE_RESULT_ERROR_DEVICE_LOST, one that needs a reset
 * ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET, a metric the spec marks unsupported
 * ZE_RESULT_ERROR_UNSUPPORTED_FEATURE and the injected error rate ZE_RESULT_ERROR_NOT_AVAILABLE
 * (Sysman's "resource in use": transient).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>

#include "sim_internal.h"

#define MAXDEV GPUM__SIM_MAX_DEVICES

#define ZE_CHECK(name, params) \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&name), gpum_##name##_fn), #name);
GPUM_ZE_FUNCS(ZE_CHECK)
GPUM_ZES_INIT_FUNCS(ZE_CHECK)
#undef ZE_CHECK

/* The resources of every Intel device, in the order the Enum calls list them. */
static const uint32_t engines[] = {ZES_ENGINE_GROUP_ALL, ZES_ENGINE_GROUP_COMPUTE_ALL,
                                   ZES_ENGINE_GROUP_COPY_ALL, ZES_ENGINE_GROUP_MEDIA_ALL};
static const uint32_t sensors[] = {ZES_TEMP_SENSORS_GLOBAL, ZES_TEMP_SENSORS_GPU,
                                   ZES_TEMP_SENSORS_MEMORY};
static const uint32_t freqs[] = {ZES_FREQ_DOMAIN_GPU, ZES_FREQ_DOMAIN_MEMORY};
static const uint32_t ras_types[] = {ZES_RAS_ERROR_TYPE_CORRECTABLE,
                                     ZES_RAS_ERROR_TYPE_UNCORRECTABLE};
#define NENG (sizeof engines / sizeof engines[0])
#define NTEMP (sizeof sensors / sizeof sensors[0])
#define NFREQ (sizeof freqs / sizeof freqs[0])
#define NRAS (sizeof ras_types / sizeof ras_types[0])

/* Handle slots: a handle is the address of one byte here (never dereferenced). */
static char core_driver, sysman_driver;
static char core_dev[MAXDEV], sysman_dev[MAXDEV];
static char mem_slot[MAXDEV][1], eng_slot[MAXDEV][NENG], temp_slot[MAXDEV][NTEMP];
static char pwr_slot[MAXDEV][1], freq_slot[MAXDEV][NFREQ], ras_slot[MAXDEV][NRAS];

static gpum__sim_lib_t ze_lib = GPUM__SIM_LIB_INIT;
/* Guards the flags below; taken before ze_lib.mu. */
static pthread_mutex_t state_mu = PTHREAD_MUTEX_INITIALIZER;
static bool attached, core_init, sysman_core, sysman_init;
static uint32_t affinity = UINT32_MAX; /* bit k: Intel device k is visible */

void gpum__sim_ze_atfork(gpum__sim_fork_phase_t ph) {
  if (ph == GPUM__SIM_FORK_PREPARE) {
    pthread_mutex_lock(&state_mu);
    pthread_mutex_lock(&ze_lib.mu);
  } else {
    pthread_mutex_unlock(&ze_lib.mu);
    pthread_mutex_unlock(&state_mu);
  }
}

/* ZE_AFFINITY_MASK as a bit set of device numbers: unset or empty, every device; entries that
 * are not numbers below MAXDEV are ignored, as the runtime ignores what it cannot match. */
static uint32_t read_affinity(void) {
  const char *s = getenv("ZE_AFFINITY_MASK");
  if (!s || !*s)
    return UINT32_MAX;
  uint32_t m = 0;
  while (*s) {
    char *end;
    unsigned long k = strtoul(s, &end, 10);
    bool ok = end != s && (*end == ',' || *end == '.' || *end == '\0') && k < MAXDEV;
    if (ok)
      m |= 1u << k;
    s = strchr(s, ',');
    if (!s)
      break;
    s++;
  }
  return m;
}

/* Attaches once per process (lock state_mu held). */
static ze_result_t attach(void) {
  if (attached)
    return ZE_RESULT_SUCCESS;
  int err = gpum__sim_lib_init(&ze_lib);
  if (err)
    return err == GPUM_EDRIVERVER ? ZE_RESULT_ERROR_UNSUPPORTED_VERSION
                                  : ZE_RESULT_ERROR_UNINITIALIZED;
  struct gpum__sim_node *n = gpum__sim_lib_node(&ze_lib);
  if (!n || gpum__sim_vendor_count(n, GPUM__SIM_V_INTEL) == 0) {
    gpum__sim_lib_shutdown(&ze_lib);
    return ZE_RESULT_ERROR_UNINITIALIZED; /* no Intel GPU: no Level Zero driver */
  }
  affinity = read_affinity();
  attached = true;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeInit(ze_init_flags_t flags) {
  if (flags & ~(uint32_t)(ZE_INIT_FLAG_GPU_ONLY | ZE_INIT_FLAG_VPU_ONLY))
    return ZE_RESULT_ERROR_INVALID_ENUMERATION;
  if (flags == ZE_INIT_FLAG_VPU_ONLY)
    return ZE_RESULT_ERROR_UNINITIALIZED; /* no VPU on a simulated node */
  pthread_mutex_lock(&state_mu);
  ze_result_t ret = attach();
  if (ret == ZE_RESULT_SUCCESS && !core_init) {
    const char *e = getenv("ZES_ENABLE_SYSMAN");
    sysman_core = e && !strcmp(e, "1");
    core_init = true;
  }
  pthread_mutex_unlock(&state_mu);
  return ret;
}

ze_result_t zesInit(uint32_t flags) {
  if (flags & ~(uint32_t)(ZE_INIT_FLAG_GPU_ONLY | ZE_INIT_FLAG_VPU_ONLY))
    return ZE_RESULT_ERROR_INVALID_ENUMERATION;
  pthread_mutex_lock(&state_mu);
  ze_result_t ret = attach();
  if (ret == ZE_RESULT_SUCCESS)
    sysman_init = true;
  pthread_mutex_unlock(&state_mu);
  return ret;
}

/* The node, once the given API was initialised and while the node runs. */
static ze_result_t live(bool sysman, struct gpum__sim_node **out) {
  pthread_mutex_lock(&state_mu);
  bool ok = sysman ? sysman_init : core_init;
  pthread_mutex_unlock(&state_mu);
  struct gpum__sim_node *n = ok ? gpum__sim_lib_node(&ze_lib) : NULL;
  if (!n || __atomic_load_n(&n->hdr.stopped, __ATOMIC_ACQUIRE))
    return ZE_RESULT_ERROR_UNINITIALIZED;
  *out = n;
  return ZE_RESULT_SUCCESS;
}

/* Fills a handle array the Level Zero way: *pCount 0 or no array asks for the count; a
 * smaller count gets that many. */
static ze_result_t fill(uint32_t *pCount, void **out, uint32_t have,
                        void *(*handle)(uint32_t k, void *arg), void *arg) {
  if (!pCount)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (*pCount == 0 || !out) {
    *pCount = have;
    return ZE_RESULT_SUCCESS;
  }
  if (*pCount > have)
    *pCount = have;
  for (uint32_t k = 0; k < *pCount; k++)
    out[k] = handle(k, arg);
  return ZE_RESULT_SUCCESS;
}

static void *driver_handle(uint32_t k, void *arg) {
  (void)k;
  return arg;
}

static ze_result_t driver_get(bool sysman, uint32_t *pCount, void **out) {
  struct gpum__sim_node *n;
  ze_result_t ret = live(sysman, &n);
  if (ret != ZE_RESULT_SUCCESS)
    return ret;
  return fill(pCount, out, 1, driver_handle, sysman ? &sysman_driver : &core_driver);
}

ze_result_t zeDriverGet(uint32_t *pCount, ze_driver_handle_t *phDrivers) {
  return driver_get(false, pCount, (void **)phDrivers);
}

ze_result_t zesDriverGet(uint32_t *pCount, zes_driver_handle_t *phDrivers) {
  return driver_get(true, pCount, (void **)phDrivers);
}

/* The node index of the k-th visible Intel device, or -1. */
static int visible_dev(const struct gpum__sim_node *n, uint32_t k) {
  unsigned ord = 0;
  for (unsigned i = 0; i < n->spec.device_count; i++) {
    if (n->spec.dev[i].vendor != GPUM__SIM_V_INTEL)
      continue;
    if (ord < 32 && (affinity >> ord & 1u) && k-- == 0)
      return (int)i;
    ord++;
  }
  return -1;
}

struct dev_list {
  const struct gpum__sim_node *n;
  char *slots;
};

static void *dev_handle(uint32_t k, void *arg) {
  const struct dev_list *l = arg;
  return &l->slots[visible_dev(l->n, k)];
}

static ze_result_t device_get(bool sysman, void *hDriver, uint32_t *pCount, void **out) {
  struct gpum__sim_node *n;
  ze_result_t ret = live(sysman, &n);
  if (ret != ZE_RESULT_SUCCESS)
    return ret;
  if (!hDriver)
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (hDriver != (sysman ? &sysman_driver : &core_driver))
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  uint32_t have = 0;
  while (visible_dev(n, have) >= 0)
    have++;
  struct dev_list l = {n, sysman ? sysman_dev : core_dev};
  return fill(pCount, out, have, dev_handle, &l);
}

ze_result_t zeDeviceGet(ze_driver_handle_t hDriver, uint32_t *pCount,
                        ze_device_handle_t *phDevices) {
  return device_get(false, hDriver, pCount, (void **)phDevices);
}

ze_result_t zesDeviceGet(zes_driver_handle_t hDriver, uint32_t *pCount,
                         zes_device_handle_t *phDevices) {
  return device_get(true, hDriver, pCount, (void **)phDevices);
}

/* Which slot of base[0 .. n) h is, or -1 when it is none of them. */
static long slot_of(const void *h, const char *base, size_t n) {
  uintptr_t p = (uintptr_t)h, b = (uintptr_t)base;
  return p >= b && p < b + n ? (long)(p - b) : -1;
}

/* A Sysman device handle: the node index of its device. Core handles need ZES_ENABLE_SYSMAN
 * at zeInit, Sysman handles zesInit. */
static ze_result_t device_of(const void *h, struct gpum__sim_node **n, unsigned *idx) {
  if (!h)
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  long core = slot_of(h, core_dev, MAXDEV), sys = slot_of(h, sysman_dev, MAXDEV);
  if (core < 0 && sys < 0)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&state_mu);
  bool ok = core >= 0 ? core_init && sysman_core : sysman_init;
  pthread_mutex_unlock(&state_mu);
  if (!ok)
    return ZE_RESULT_ERROR_UNINITIALIZED;
  ze_result_t ret = live(core < 0, n);
  if (ret != ZE_RESULT_SUCCESS)
    return ret;
  unsigned i = (unsigned)(core >= 0 ? core : sys);
  if (i >= (*n)->spec.device_count || (*n)->spec.dev[i].vendor != GPUM__SIM_V_INTEL)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  *idx = i;
  return ZE_RESULT_SUCCESS;
}

static const ze_result_t enter_codes[] = {
    [GPUM__SIM_ENTER_OK] = ZE_RESULT_SUCCESS,
    [GPUM__SIM_ENTER_LOCK] = ZE_RESULT_ERROR_UNKNOWN,
    [GPUM__SIM_ENTER_LOST] = ZE_RESULT_ERROR_DEVICE_LOST,
    [GPUM__SIM_ENTER_RESET] = ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET,
    [GPUM__SIM_ENTER_UNSUP] = ZE_RESULT_ERROR_UNSUPPORTED_FEATURE,
    [GPUM__SIM_ENTER_FLAKY] = ZE_RESULT_ERROR_NOT_AVAILABLE,
};

/* The fault gate: on success the node lock is held. */
static ze_result_t enter(struct gpum__sim_node *n, unsigned idx, uint32_t metric) {
  return enter_codes[gpum__sim_dev_enter(n, idx, metric)];
}

/* A resource handle (slot k of device d in table base, per entries a device): *idx the node
 * index of d, after the same checks as its device's handle (Sysman initialised). */
static ze_result_t resource_of(const void *h, const char *base, size_t per, unsigned *idx,
                               unsigned *k, struct gpum__sim_node **n) {
  if (!h)
    return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  long s = slot_of(h, base, MAXDEV * per);
  if (s < 0)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&state_mu);
  bool via_core = core_init && sysman_core, ok = via_core || sysman_init;
  pthread_mutex_unlock(&state_mu);
  if (!ok)
    return ZE_RESULT_ERROR_UNINITIALIZED;
  ze_result_t ret = live(!via_core, n);
  if (ret != ZE_RESULT_SUCCESS)
    return ret;
  *idx = (unsigned)s / (unsigned)per;
  *k = (unsigned)s % (unsigned)per;
  if (*idx >= (*n)->spec.device_count || (*n)->spec.dev[*idx].vendor != GPUM__SIM_V_INTEL)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  return ZE_RESULT_SUCCESS;
}

/* The body of a resource query: checks the handle and out, enters with metric, runs the statement
 * (the last argument) with n, i (node index) and k (resource number), unlocks. */
#define RESOURCE_QUERY(h, base, per, metric, out, ...)                        \
  do {                                                                        \
    struct gpum__sim_node *n;                                                 \
    unsigned i, k;                                                            \
    ze_result_t ret_ = resource_of(h, (const char *)(base), per, &i, &k, &n); \
    if (ret_ != ZE_RESULT_SUCCESS)                                            \
      return ret_;                                                            \
    if (!(out))                                                               \
      return ZE_RESULT_ERROR_INVALID_NULL_POINTER;                            \
    if ((ret_ = enter(n, i, metric)) != ZE_RESULT_SUCCESS)                    \
      return ret_;                                                            \
    (void)k;                                                                  \
    __VA_ARGS__;                                                              \
    gpum__sim_unlock(n);                                                      \
    return ret_;                                                              \
  } while (0)

/* Same for a device handle. */
#define DEVICE_QUERY(h, metric, out, ...)                  \
  do {                                                     \
    struct gpum__sim_node *n;                              \
    unsigned i;                                            \
    ze_result_t ret_ = device_of(h, &n, &i);               \
    if (ret_ != ZE_RESULT_SUCCESS)                         \
      return ret_;                                         \
    if (!(out))                                            \
      return ZE_RESULT_ERROR_INVALID_NULL_POINTER;         \
    if ((ret_ = enter(n, i, metric)) != ZE_RESULT_SUCCESS) \
      return ret_;                                         \
    __VA_ARGS__;                                           \
    gpum__sim_unlock(n);                                   \
    return ret_;                                           \
  } while (0)

/* Copies src into a property string of len bytes, truncated and terminated as the driver
 * does with a long name. */
static void copy_str(char *dst, size_t len, const char *src) {
  size_t n = strnlen(src, len - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
}

ze_result_t zesDeviceGetProperties(zes_device_handle_t hDevice,
                                   zes_device_properties_t *pProperties) {
  DEVICE_QUERY(hDevice, 0, pProperties, {
    const struct gpum__sim_dev_spec *d = &n->spec.dev[i];
    zes_device_properties_t *p = pProperties;
    void *next = p->pNext, *core_next = p->core.pNext;
    memset(p, 0, sizeof *p);
    p->stype = ZES_STRUCTURE_TYPE_DEVICE_PROPERTIES;
    p->pNext = next;
    p->core.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
    p->core.pNext = core_next;
    p->core.type = ZE_DEVICE_TYPE_GPU;
    p->core.vendorId = d->pci_device_id & 0xffff;
    p->core.deviceId = d->pci_device_id >> 16;
    p->core.coreClockRate = d->clock_sm_max;
    p->core.maxMemAllocSize = d->memory;
    p->core.numSlices = 1;
    p->core.timerResolution = 1;
    p->core.timestampValidBits = 64;
    p->core.kernelTimestampValidBits = 32;
    gpum__sim_uuid_bytes(d->uuid, p->core.uuid.id);
    copy_str(p->core.name, sizeof p->core.name, d->name);
    copy_str(p->serialNumber, sizeof p->serialNumber, "unknown");
    copy_str(p->boardNumber, sizeof p->boardNumber, "unknown");
    copy_str(p->brandName, sizeof p->brandName, "Intel(R) Data Center GPU");
    copy_str(p->modelName, sizeof p->modelName, d->name);
    copy_str(p->vendorName, sizeof p->vendorName, "Intel(R) Corporation");
    copy_str(p->driverVersion, sizeof p->driverVersion, n->spec.driver_version);
  });
}

ze_result_t zesDevicePciGetProperties(zes_device_handle_t hDevice,
                                      zes_pci_properties_t *pProperties) {
  DEVICE_QUERY(hDevice, GPUM__SIM_M_PCI, pProperties, {
    const struct gpum__sim_dev_spec *d = &n->spec.dev[i];
    void *next = pProperties->pNext;
    memset(pProperties, 0, sizeof *pProperties);
    pProperties->stype = ZES_STRUCTURE_TYPE_PCI_PROPERTIES;
    pProperties->pNext = next;
    pProperties->address = (zes_pci_address_t){d->pci_domain, d->pci_bus, d->pci_device, 0};
    pProperties->maxSpeed = (zes_pci_speed_t){5, 16, 63000000000ll};
  });
}

/* ---- enumerations: the gate with no metric, so a lost device is lost here too ---- */

struct slot_list {
  char *base;
  unsigned dev, per;
};

static void *slot_handle(uint32_t k, void *arg) {
  const struct slot_list *l = arg;
  return &l->base[l->dev * l->per + k];
}

static ze_result_t enumerate(const void *hDevice, uint32_t *pCount, void **out, char *base,
                             unsigned per, bool ras) {
  struct gpum__sim_node *n;
  unsigned i;
  ze_result_t ret = device_of(hDevice, &n, &i);
  if (ret != ZE_RESULT_SUCCESS)
    return ret;
  if (!pCount)
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if ((ret = enter(n, i, 0)) != ZE_RESULT_SUCCESS)
    return ret;
  /* RAS error sets exist only where the memory has ECC. */
  unsigned have = ras && !n->spec.dev[i].ecc ? 0 : per;
  gpum__sim_unlock(n);
  struct slot_list l = {base, i, per};
  return fill(pCount, out, have, slot_handle, &l);
}

ze_result_t zesDeviceEnumMemoryModules(zes_device_handle_t hDevice, uint32_t *pCount,
                                       zes_mem_handle_t *phMemory) {
  return enumerate(hDevice, pCount, (void **)phMemory, &mem_slot[0][0], 1, false);
}

ze_result_t zesDeviceEnumEngineGroups(zes_device_handle_t hDevice, uint32_t *pCount,
                                      zes_engine_handle_t *phEngine) {
  return enumerate(hDevice, pCount, (void **)phEngine, &eng_slot[0][0], NENG, false);
}

ze_result_t zesDeviceEnumTemperatureSensors(zes_device_handle_t hDevice, uint32_t *pCount,
                                            zes_temp_handle_t *phTemperature) {
  return enumerate(hDevice, pCount, (void **)phTemperature, &temp_slot[0][0], NTEMP, false);
}

ze_result_t zesDeviceEnumPowerDomains(zes_device_handle_t hDevice, uint32_t *pCount,
                                      zes_pwr_handle_t *phPower) {
  return enumerate(hDevice, pCount, (void **)phPower, &pwr_slot[0][0], 1, false);
}

ze_result_t zesDeviceEnumFrequencyDomains(zes_device_handle_t hDevice, uint32_t *pCount,
                                          zes_freq_handle_t *phFrequency) {
  return enumerate(hDevice, pCount, (void **)phFrequency, &freq_slot[0][0], NFREQ, false);
}

ze_result_t zesDeviceEnumRasErrorSets(zes_device_handle_t hDevice, uint32_t *pCount,
                                      zes_ras_handle_t *phRas) {
  return enumerate(hDevice, pCount, (void **)phRas, &ras_slot[0][0], NRAS, true);
}

/* ---- memory: one HBM module on the device, its state the node's memory ---- */

ze_result_t zesMemoryGetProperties(zes_mem_handle_t hMemory, zes_mem_properties_t *pProperties) {
  RESOURCE_QUERY(hMemory, mem_slot, 1, 0, pProperties, {
    void *next = pProperties->pNext;
    memset(pProperties, 0, sizeof *pProperties);
    pProperties->stype = ZES_STRUCTURE_TYPE_MEM_PROPERTIES;
    pProperties->pNext = next;
    pProperties->type = ZES_MEM_TYPE_HBM;
    pProperties->location = ZES_MEM_LOC_DEVICE;
    pProperties->physicalSize = n->spec.dev[i].memory;
    pProperties->busWidth = -1;
    pProperties->numChannels = -1;
  });
}

/* size is the board's memory; free what no process and not the driver's reserve holds; the
 * health degrades once an uncorrectable error was counted. */
ze_result_t zesMemoryGetState(zes_mem_handle_t hMemory, zes_mem_state_t *pState) {
  RESOURCE_QUERY(hMemory, mem_slot, 1, GPUM__SIM_M_MEMORY, pState, {
    gpum__sim_reap(n);
    const void *next = pState->pNext;
    memset(pState, 0, sizeof *pState);
    pState->stype = ZES_STRUCTURE_TYPE_MEM_STATE;
    pState->pNext = next;
    pState->size = n->spec.dev[i].memory;
    pState->free = gpum__sim_free(n, i);
    pState->health = n->dev[i].ecc_dbe_aggregate ? ZES_MEM_HEALTH_DEGRADED : ZES_MEM_HEALTH_OK;
  });
}

/* ---- engines: ALL and COMPUTE_ALL busy at the set utilisation; copy and media idle ---- */

ze_result_t zesEngineGetProperties(zes_engine_handle_t hEngine,
                                   zes_engine_properties_t *pProperties) {
  RESOURCE_QUERY(hEngine, eng_slot, NENG, 0, pProperties, {
    void *next = pProperties->pNext;
    memset(pProperties, 0, sizeof *pProperties);
    pProperties->stype = ZES_STRUCTURE_TYPE_ENGINE_PROPERTIES;
    pProperties->pNext = next;
    pProperties->type = engines[k];
  });
}

ze_result_t zesEngineGetActivity(zes_engine_handle_t hEngine, zes_engine_stats_t *pStats) {
  RESOURCE_QUERY(hEngine, eng_slot, NENG, GPUM__SIM_M_UTILIZATION, pStats, {
    bool busy = engines[k] == ZES_ENGINE_GROUP_ALL || engines[k] == ZES_ENGINE_GROUP_COMPUTE_ALL;
    pStats->activeTime = busy ? (uint64_t)n->dev[i].busy_us : 0;
    pStats->timestamp = n->dev[i].model_ns / 1000u;
  });
}

/* ---- temperature: the modelled (or pinned) value; memory a little warmer ---- */

ze_result_t zesTemperatureGetProperties(zes_temp_handle_t hTemperature,
                                        zes_temp_properties_t *pProperties) {
  RESOURCE_QUERY(hTemperature, temp_slot, NTEMP, 0, pProperties, {
    const struct gpum__sim_dev_spec *d = &n->spec.dev[i];
    void *next = pProperties->pNext;
    memset(pProperties, 0, sizeof *pProperties);
    pProperties->stype = ZES_STRUCTURE_TYPE_TEMP_PROPERTIES;
    pProperties->pNext = next;
    pProperties->type = sensors[k];
    pProperties->maxTemperature =
        sensors[k] == ZES_TEMP_SENSORS_MEMORY ? d->temp_mem_max : d->temp_shutdown;
    pProperties->isCriticalTempSupported = 1;
  });
}

ze_result_t zesTemperatureGetState(zes_temp_handle_t hTemperature, double *pTemperature) {
  RESOURCE_QUERY(hTemperature, temp_slot, NTEMP, GPUM__SIM_M_TEMPERATURE, pTemperature, {
    double gpu = gpum__sim_temp(n, i), mem = gpu + 2;
    *pTemperature = sensors[k] == ZES_TEMP_SENSORS_GPU      ? gpu
                    : sensors[k] == ZES_TEMP_SENSORS_MEMORY ? mem
                                                            : (gpu > mem ? gpu : mem);
  });
}

/* ---- power: one card-level domain; energy the model's integral ---- */

ze_result_t zesPowerGetProperties(zes_pwr_handle_t hPower, zes_power_properties_t *pProperties) {
  RESOURCE_QUERY(hPower, pwr_slot, 1, 0, pProperties, {
    int32_t limit = (int32_t)n->spec.dev[i].power_limit_mw;
    void *next = pProperties->pNext;
    memset(pProperties, 0, sizeof *pProperties);
    pProperties->stype = ZES_STRUCTURE_TYPE_POWER_PROPERTIES;
    pProperties->pNext = next;
    pProperties->defaultLimit = limit;
    pProperties->minLimit = -1;
    pProperties->maxLimit = limit;
  });
}

ze_result_t zesPowerGetEnergyCounter(zes_pwr_handle_t hPower, zes_power_energy_counter_t *pEnergy) {
  RESOURCE_QUERY(hPower, pwr_slot, 1, GPUM__SIM_M_POWER, pEnergy, {
    pEnergy->energy = (uint64_t)n->dev[i].energy_uj;
    pEnergy->timestamp = n->dev[i].model_ns / 1000u;
  });
}

/* The sustained limit (PL1) is the spec's power limit; no burst limit; peak unknown (-1). */
ze_result_t zesPowerGetLimits(zes_pwr_handle_t hPower, zes_power_sustained_limit_t *pSustained,
                              zes_power_burst_limit_t *pBurst, zes_power_peak_limit_t *pPeak) {
  RESOURCE_QUERY(hPower, pwr_slot, 1, GPUM__SIM_M_POWER, true, {
    if (pSustained)
      *pSustained = (zes_power_sustained_limit_t){1, (int32_t)n->spec.dev[i].power_limit_mw, 1000};
    if (pBurst)
      *pBurst = (zes_power_burst_limit_t){0, 0};
    if (pPeak)
      *pPeak = (zes_power_peak_limit_t){-1, -1};
  });
}

/* ---- frequency: the GPU and memory domains of the modelled clocks ---- */

ze_result_t zesFrequencyGetProperties(zes_freq_handle_t hFrequency,
                                      zes_freq_properties_t *pProperties) {
  RESOURCE_QUERY(hFrequency, freq_slot, NFREQ, 0, pProperties, {
    const struct gpum__sim_dev_spec *d = &n->spec.dev[i];
    bool mem = freqs[k] == ZES_FREQ_DOMAIN_MEMORY;
    void *next = pProperties->pNext;
    memset(pProperties, 0, sizeof *pProperties);
    pProperties->stype = ZES_STRUCTURE_TYPE_FREQ_PROPERTIES;
    pProperties->pNext = next;
    pProperties->type = freqs[k];
    pProperties->min = mem ? d->clock_mem_idle : d->clock_sm_idle;
    pProperties->max = mem ? d->clock_mem_max : d->clock_sm_max;
  });
}

ze_result_t zesFrequencyGetState(zes_freq_handle_t hFrequency, zes_freq_state_t *pState) {
  RESOURCE_QUERY(hFrequency, freq_slot, NFREQ, GPUM__SIM_M_CLOCKS, pState, {
    const struct gpum__sim_dev_spec *d = &n->spec.dev[i];
    bool mem = freqs[k] == ZES_FREQ_DOMAIN_MEMORY;
    double now = gpum__sim_clock(n, i, mem ? NVML_CLOCK_MEM : NVML_CLOCK_SM, false);
    const void *next = pState->pNext;
    memset(pState, 0, sizeof *pState);
    pState->stype = ZES_STRUCTURE_TYPE_FREQ_STATE;
    pState->pNext = next;
    pState->currentVoltage = -1;
    pState->request = now;
    pState->tdp = mem ? d->clock_mem_max : d->clock_sm_max;
    pState->efficient = mem ? d->clock_mem_idle : d->clock_sm_idle;
    pState->actual = now;
  });
}

/* ---- RAS: the device's ECC counts (aggregate) as non-compute (memory) errors ---- */

ze_result_t zesRasGetProperties(zes_ras_handle_t hRas, zes_ras_properties_t *pProperties) {
  RESOURCE_QUERY(hRas, ras_slot, NRAS, 0, pProperties, {
    void *next = pProperties->pNext;
    memset(pProperties, 0, sizeof *pProperties);
    pProperties->stype = ZES_STRUCTURE_TYPE_RAS_PROPERTIES;
    pProperties->pNext = next;
    pProperties->type = ras_types[k];
  });
}

/* Clearing needs privileges the simulator does not model: refused, counters kept. */
ze_result_t zesRasGetState(zes_ras_handle_t hRas, ze_bool_t clear, zes_ras_state_t *pState) {
  RESOURCE_QUERY(hRas, ras_slot, NRAS, GPUM__SIM_M_ECC, pState, {
    if (clear) {
      ret_ = ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS;
    } else {
      const struct gpum__sim_dev_state *s = &n->dev[i];
      const void *next = pState->pNext;
      memset(pState, 0, sizeof *pState);
      pState->stype = ZES_STRUCTURE_TYPE_RAS_STATE;
      pState->pNext = next;
      pState->category[ZES_RAS_ERROR_CAT_NON_COMPUTE_ERRORS] =
          ras_types[k] == ZES_RAS_ERROR_TYPE_CORRECTABLE ? s->ecc_sbe_aggregate
                                                         : s->ecc_dbe_aggregate;
    }
  });
}

/* ---- processes: every process holding memory on the device ---- */

ze_result_t zesDeviceProcessesGetState(zes_device_handle_t hDevice, uint32_t *pCount,
                                       zes_process_state_t *pProcesses) {
  DEVICE_QUERY(hDevice, GPUM__SIM_M_PROCESSES, pCount, {
    gpum__sim_reap(n);
    uint32_t cap = pProcesses ? *pCount : 0, found = 0;
    for (uint32_t s = 0; s < n->proc_hw && s < GPUM__SIM_MAX_PROCS; s++) {
      const struct gpum__sim_proc *p = &n->procs[s];
      if (p->state != GPUM__SIM_A_USED || p->count[i] == 0)
        continue;
      if (found < cap) {
        zes_process_state_t *o = &pProcesses[found];
        const void *next = o->pNext;
        memset(o, 0, sizeof *o);
        o->stype = ZES_STRUCTURE_TYPE_PROCESS_STATE;
        o->pNext = next;
        o->processId = (uint32_t)p->pid;
        o->memSize = p->bytes[i];
        o->engines = ZES_ENGINE_TYPE_FLAG_COMPUTE;
      }
      found++;
    }
    if (pProcesses && *pCount != 0 && found > cap) {
      ret_ = ZE_RESULT_ERROR_INVALID_SIZE;
    } else {
      *pCount = found;
    }
  });
}
