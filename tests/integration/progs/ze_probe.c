/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test program: checks the simulator's Level Zero conventions on the node $GPUM_SIM_NODE, which
 * must have exactly two Intel devices, the second holding two processes' memory. It dlopens
 * $GPUM_SIM_LIBRARY as a program loads libze_loader, and must start without ZES_ENABLE_SYSMAN
 * and ZE_AFFINITY_MASK. Prints "ok" and exits 0, or "FAIL: ..." and exits 1 at the first
 * surprise:
 *   - before zeInit, zeDriverGet is UNINITIALIZED; zeInit(VPU_ONLY) too; unknown flags are
 *     INVALID_ENUMERATION;
 *   - zeInit without ZES_ENABLE_SYSMAN: Sysman calls on its device handles are UNINITIALIZED,
 *     and setting the variable afterwards changes nothing (it is read at the first zeInit);
 *   - zesInit: zesDriverGet/zesDeviceGet give handles, distinct from the core ones and equal
 *     from one call to the next, with which Sysman works;
 *   - the count convention of Enum calls, NULL handles and pointers, foreign handles;
 *   - zesDeviceProcessesGetState: the count, both processes, INVALID_SIZE for a short array.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prog_fail.h"
#include "ze_abi.h"

#define PTR(name, params) static gpum_##name##_fn p_##name;
GPUM_ZE_FUNCS(PTR)
GPUM_ZES_INIT_FUNCS(PTR)
#undef PTR

static void load(void) {
  const char *path = getenv("GPUM_SIM_LIBRARY");
  if (!path)
    fail("GPUM_SIM_LIBRARY is not set");
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl)
    fail("dlopen %s: %s", path, dlerror());
#define SYM(name, params)                         \
  do {                                            \
    void *s_ = dlsym(dl, #name);                  \
    if (!s_)                                      \
      fail("%s does not export %s", path, #name); \
    memcpy(&p_##name, &s_, sizeof p_##name);      \
  } while (0);
  GPUM_ZE_FUNCS(SYM)
  GPUM_ZES_INIT_FUNCS(SYM)
#undef SYM
}

#define EXPECT(call, want)                                                                    \
  do {                                                                                        \
    ze_result_t r_ = (call);                                                                  \
    if (r_ != (ze_result_t)(want))                                                            \
      fail("%s: 0x%08x, expected %s (0x%08x)", #call, (unsigned)r_, #want, (unsigned)(want)); \
  } while (0)

int main(void) {
  if (getenv("ZES_ENABLE_SYSMAN") || getenv("ZE_AFFINITY_MASK"))
    fail("start me without ZES_ENABLE_SYSMAN and ZE_AFFINITY_MASK");
  load();
  uint32_t n = 0;
  EXPECT(p_zeDriverGet(&n, NULL), ZE_RESULT_ERROR_UNINITIALIZED);
  EXPECT(p_zeInit(ZE_INIT_FLAG_VPU_ONLY), ZE_RESULT_ERROR_UNINITIALIZED);
  EXPECT(p_zeInit(0x100), ZE_RESULT_ERROR_INVALID_ENUMERATION);

  /* The core API without ZES_ENABLE_SYSMAN: no Sysman on its handles. */
  EXPECT(p_zeInit(0), ZE_RESULT_SUCCESS);
  ze_driver_handle_t drv = NULL;
  n = 1;
  EXPECT(p_zeDriverGet(&n, &drv), ZE_RESULT_SUCCESS);
  ze_device_handle_t core[4] = {0};
  n = 0;
  EXPECT(p_zeDeviceGet(drv, &n, NULL), ZE_RESULT_SUCCESS);
  if (n != 2)
    fail("zeDeviceGet counts %u devices, expected 2", (unsigned)n);
  EXPECT(p_zeDeviceGet(drv, &n, core), ZE_RESULT_SUCCESS);
  zes_device_properties_t props = {.stype = ZES_STRUCTURE_TYPE_DEVICE_PROPERTIES};
  EXPECT(p_zesDeviceGetProperties(core[0], &props), ZE_RESULT_ERROR_UNINITIALIZED);
  setenv("ZES_ENABLE_SYSMAN", "1", 1);
  EXPECT(p_zeInit(0), ZE_RESULT_SUCCESS);
  EXPECT(p_zesDeviceGetProperties(core[0], &props), ZE_RESULT_ERROR_UNINITIALIZED);

  /* Sysman's own initialisation. */
  EXPECT(p_zesDriverGet(&n, NULL), ZE_RESULT_ERROR_UNINITIALIZED);
  EXPECT(p_zesInit(0), ZE_RESULT_SUCCESS);
  zes_driver_handle_t sdrv = NULL;
  n = 1;
  EXPECT(p_zesDriverGet(&n, &sdrv), ZE_RESULT_SUCCESS);
  EXPECT(p_zesDeviceGet(drv, &n, NULL), ZE_RESULT_ERROR_INVALID_ARGUMENT); /* a core driver */
  EXPECT(p_zesDeviceGet(NULL, &n, NULL), ZE_RESULT_ERROR_INVALID_NULL_HANDLE);
  zes_device_handle_t dev[4] = {0}, again[4] = {0};
  n = 4;
  EXPECT(p_zesDeviceGet(sdrv, &n, dev), ZE_RESULT_SUCCESS);
  if (n != 2)
    fail("zesDeviceGet gave %u devices for room for 4, expected 2", (unsigned)n);
  n = 1; /* a smaller count: that many */
  EXPECT(p_zesDeviceGet(sdrv, &n, again), ZE_RESULT_SUCCESS);
  if (n != 1 || again[0] != dev[0] || again[1] != NULL)
    fail("zesDeviceGet with room for 1: n=%u", (unsigned)n);
  if (dev[0] == core[0] || dev[0] == dev[1])
    fail("Sysman device handles are not distinct");
  EXPECT(p_zesDeviceGetProperties(dev[0], &props), ZE_RESULT_SUCCESS);
  if (props.core.vendorId != 0x8086 || props.core.type != ZE_DEVICE_TYPE_GPU)
    fail("vendor 0x%x type %u", (unsigned)props.core.vendorId, (unsigned)props.core.type);
  EXPECT(p_zesDeviceGetProperties(NULL, &props), ZE_RESULT_ERROR_INVALID_NULL_HANDLE);
  EXPECT(p_zesDeviceGetProperties(dev[0], NULL), ZE_RESULT_ERROR_INVALID_NULL_POINTER);
  EXPECT(p_zesDeviceGetProperties((zes_device_handle_t)(void *)&props, &props),
         ZE_RESULT_ERROR_INVALID_ARGUMENT);

  /* Resource handles: the count, then the same handles every time. */
  zes_temp_handle_t t1[8] = {0}, t2[8] = {0};
  n = 0;
  EXPECT(p_zesDeviceEnumTemperatureSensors(dev[1], &n, NULL), ZE_RESULT_SUCCESS);
  uint32_t nt = n;
  if (nt == 0 || nt > 8)
    fail("%u temperature sensors", (unsigned)nt);
  EXPECT(p_zesDeviceEnumTemperatureSensors(dev[1], &n, t1), ZE_RESULT_SUCCESS);
  EXPECT(p_zesDeviceEnumTemperatureSensors(dev[1], &n, t2), ZE_RESULT_SUCCESS);
  if (memcmp(t1, t2, sizeof t1) != 0)
    fail("temperature handles changed between two calls");
  double c = -1;
  EXPECT(p_zesTemperatureGetState(t1[0], &c), ZE_RESULT_SUCCESS);
  EXPECT(p_zesTemperatureGetState(t1[0], NULL), ZE_RESULT_ERROR_INVALID_NULL_POINTER);
  EXPECT(p_zesTemperatureGetState((zes_temp_handle_t)(void *)&c, &c),
         ZE_RESULT_ERROR_INVALID_ARGUMENT);

  /* Processes: two on the second device. */
  n = 0;
  EXPECT(p_zesDeviceProcessesGetState(dev[1], &n, NULL), ZE_RESULT_SUCCESS);
  if (n != 2)
    fail("%u processes on device 1, expected 2", (unsigned)n);
  zes_process_state_t ps[3];
  memset(ps, 0, sizeof ps);
  n = 3;
  EXPECT(p_zesDeviceProcessesGetState(dev[1], &n, ps), ZE_RESULT_SUCCESS);
  if (n != 2 || ps[0].memSize == 0 || ps[1].memSize == 0 ||
      ps[0].stype != ZES_STRUCTURE_TYPE_PROCESS_STATE || ps[0].processId == ps[1].processId)
    fail("process state: n=%u memSize=%llu", (unsigned)n, (unsigned long long)ps[0].memSize);
  n = 1;
  EXPECT(p_zesDeviceProcessesGetState(dev[1], &n, ps), ZE_RESULT_ERROR_INVALID_SIZE);
  n = 0;
  EXPECT(p_zesDeviceProcessesGetState(dev[0], &n, NULL), ZE_RESULT_SUCCESS);
  if (n != 0)
    fail("%u processes on device 0, expected none", (unsigned)n);
  EXPECT(p_zesDeviceProcessesGetState(dev[1], NULL, NULL), ZE_RESULT_ERROR_INVALID_NULL_POINTER);
  puts("ok");
  return 0;
}
