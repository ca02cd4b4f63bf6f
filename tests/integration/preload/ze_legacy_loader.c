/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A test's stand-in for a Level Zero loader older than API 1.5 (Debian's 1.8.12, for one),
 * which exports zeInit but not zesInit, zesDriverGet or zesDeviceGet: loaded by the levelzero
 * backend as GPUM_LEVEL_ZERO_LIBRARY, it forwards the 1.8.12 subset (GPUM_ZE_FUNCS) to the
 * simulator named by $GPUM_SIM_LIBRARY, so that the backend must take the zeInit path with
 * ZES_ENABLE_SYSMAN=1. Only the calls that path needs for name, memory, temperature and
 * processes are forwarded; the rest are absent, and their fields invalid.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ze_abi.h"

/* The simulator, loaded on first use (dlopen of a loaded library returns the same handle, so a
 * race between two first calls is harmless). */
static void *sim(void) {
  const char *p = getenv("GPUM_SIM_LIBRARY");
  void *h = dlopen(p && *p ? p : "libgpum_sim.so", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    fprintf(stderr, "ze_legacy_loader: %s\n", dlerror());
  return h;
}

/* Each entry point looks its namesake up in the simulator once and calls it. */
#define FORWARD(name, params, args)                      \
  ze_result_t name params {                              \
    static void *sym_;                                   \
    void *f_ = __atomic_load_n(&sym_, __ATOMIC_ACQUIRE); \
    if (!f_) {                                           \
      void *lib_ = sim();                                \
      f_ = lib_ ? dlsym(lib_, #name) : NULL;             \
      if (!f_)                                           \
        return ZE_RESULT_ERROR_UNINITIALIZED;            \
      __atomic_store_n(&sym_, f_, __ATOMIC_RELEASE);     \
    }                                                    \
    gpum_##name##_fn fn_;                                \
    memcpy(&fn_, &f_, sizeof fn_);                       \
    return fn_ args;                                     \
  }

FORWARD(zeInit, (ze_init_flags_t flags), (flags))
FORWARD(zeDriverGet, (uint32_t * c, ze_driver_handle_t *h), (c, h))
FORWARD(zeDeviceGet, (ze_driver_handle_t d, uint32_t *c, ze_device_handle_t *h), (d, c, h))
FORWARD(zesDeviceGetProperties, (zes_device_handle_t d, zes_device_properties_t *p), (d, p))
FORWARD(zesDevicePciGetProperties, (zes_device_handle_t d, zes_pci_properties_t *p), (d, p))
FORWARD(zesDeviceEnumMemoryModules, (zes_device_handle_t d, uint32_t *c, zes_mem_handle_t *h),
        (d, c, h))
FORWARD(zesMemoryGetProperties, (zes_mem_handle_t h, zes_mem_properties_t *p), (h, p))
FORWARD(zesMemoryGetState, (zes_mem_handle_t h, zes_mem_state_t *p), (h, p))
FORWARD(zesDeviceEnumTemperatureSensors, (zes_device_handle_t d, uint32_t *c, zes_temp_handle_t *h),
        (d, c, h))
FORWARD(zesTemperatureGetProperties, (zes_temp_handle_t h, zes_temp_properties_t *p), (h, p))
FORWARD(zesTemperatureGetState, (zes_temp_handle_t h, double *t), (h, t))
FORWARD(zesDeviceProcessesGetState, (zes_device_handle_t d, uint32_t *c, zes_process_state_t *p),
        (d, c, p))
