/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Our own declarations of the Level Zero subset gpum uses for Intel GPUs: zeInit, zeDriverGet
 * and zeDeviceGet of the core API and the Sysman (zes*) calls that read a device
 * (libze_loader.so.1, loaded with dlopen by src/lib/device/levelzero.c and exported by the
 * simulator, src/sim/level_zero.c): neither libgpum nor the simulator needs ze_api.h to build.
 *
 * Every constant is listed once, in GPUM_ZE_CONSTS, every struct field in GPUM_ZE_LAYOUT and
 * every struct size in GPUM_ZE_SIZES; our definitions are generated from those lists.
 * tests/abi/check_ze_abi.c (built where Debian's libze-dev installs level_zero/ze_api.h and
 * level_zero/zes_api.h, version 1.8.12: API 1.4) defines GPUM_ZE_ABI_USE_SYSTEM_HEADER so that
 * this file takes its types from those headers, then checks each listed constant, offset and
 * size and each prototype of GPUM_ZE_FUNCS against them.
 *
 * zesInit, zesDriverGet and zesDeviceGet (GPUM_ZES_INIT_FUNCS) came with API 1.5 and are not in
 * the 1.8.12 headers, so nothing checks them here: their prototypes are the specification's
 * (zes_init_flags_t is a uint32_t there, spelled as such here). The backend uses them when the
 * loader exports them, else zeInit with ZES_ENABLE_SYSMAN=1 (docs/devices.md).
 *
 * The enums are spelled as fixed-size integers: every one is 4 bytes (checked); ze_bool_t is
 * one byte.
 */
#ifndef GPUM_ZE_ABI_H
#define GPUM_ZE_ABI_H

#include <stddef.h>
#include <stdint.h>

/* X(name, value): the constants we use, by ze_api.h's and zes_api.h's names. */
#define GPUM_ZE_CONSTS(X)                                  \
  X(ZE_RESULT_SUCCESS, 0)                                  \
  X(ZE_RESULT_NOT_READY, 1)                                \
  X(ZE_RESULT_ERROR_DEVICE_LOST, 0x70000001)               \
  X(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, 0x70000002)        \
  X(ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET, 0x70000006)     \
  X(ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE, 0x70000007) \
  X(ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS, 0x70010000)  \
  X(ZE_RESULT_ERROR_NOT_AVAILABLE, 0x70010001)             \
  X(ZE_RESULT_ERROR_UNINITIALIZED, 0x78000001)             \
  X(ZE_RESULT_ERROR_UNSUPPORTED_VERSION, 0x78000002)       \
  X(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE, 0x78000003)       \
  X(ZE_RESULT_ERROR_INVALID_ARGUMENT, 0x78000004)          \
  X(ZE_RESULT_ERROR_INVALID_NULL_HANDLE, 0x78000005)       \
  X(ZE_RESULT_ERROR_INVALID_NULL_POINTER, 0x78000007)      \
  X(ZE_RESULT_ERROR_INVALID_SIZE, 0x78000008)              \
  X(ZE_RESULT_ERROR_INVALID_ENUMERATION, 0x7800000c)       \
  X(ZE_RESULT_ERROR_UNKNOWN, 0x7ffffffe)                   \
  X(ZE_MAX_DEVICE_UUID_SIZE, 16)                           \
  X(ZE_MAX_DEVICE_NAME, 256)                               \
  X(ZES_STRING_PROPERTY_SIZE, 64)                          \
  X(ZES_MAX_RAS_ERROR_CATEGORY_COUNT, 7)                   \
  X(ZE_INIT_FLAG_GPU_ONLY, 1)                              \
  X(ZE_INIT_FLAG_VPU_ONLY, 2)                              \
  X(ZES_ENGINE_TYPE_FLAG_COMPUTE, 2)                       \
  X(ZE_DEVICE_TYPE_GPU, 1)                                 \
  X(ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES, 0x3)              \
  X(ZES_STRUCTURE_TYPE_DEVICE_PROPERTIES, 0x1)             \
  X(ZES_STRUCTURE_TYPE_PCI_PROPERTIES, 0x2)                \
  X(ZES_STRUCTURE_TYPE_ENGINE_PROPERTIES, 0x5)             \
  X(ZES_STRUCTURE_TYPE_FREQ_PROPERTIES, 0x9)               \
  X(ZES_STRUCTURE_TYPE_MEM_PROPERTIES, 0xb)                \
  X(ZES_STRUCTURE_TYPE_POWER_PROPERTIES, 0xd)              \
  X(ZES_STRUCTURE_TYPE_RAS_PROPERTIES, 0xf)                \
  X(ZES_STRUCTURE_TYPE_TEMP_PROPERTIES, 0x14)              \
  X(ZES_STRUCTURE_TYPE_PROCESS_STATE, 0x16)                \
  X(ZES_STRUCTURE_TYPE_FREQ_STATE, 0x1b)                   \
  X(ZES_STRUCTURE_TYPE_MEM_STATE, 0x1e)                    \
  X(ZES_STRUCTURE_TYPE_RAS_STATE, 0x22)                    \
  X(ZES_MEM_TYPE_HBM, 0)                                   \
  X(ZES_MEM_TYPE_DDR, 1)                                   \
  X(ZES_MEM_TYPE_GDDR6, 17)                                \
  X(ZES_MEM_LOC_SYSTEM, 0)                                 \
  X(ZES_MEM_LOC_DEVICE, 1)                                 \
  X(ZES_MEM_HEALTH_UNKNOWN, 0)                             \
  X(ZES_MEM_HEALTH_OK, 1)                                  \
  X(ZES_MEM_HEALTH_DEGRADED, 2)                            \
  X(ZES_MEM_HEALTH_CRITICAL, 3)                            \
  X(ZES_MEM_HEALTH_REPLACE, 4)                             \
  X(ZES_ENGINE_GROUP_ALL, 0)                               \
  X(ZES_ENGINE_GROUP_COMPUTE_ALL, 1)                       \
  X(ZES_ENGINE_GROUP_MEDIA_ALL, 2)                         \
  X(ZES_ENGINE_GROUP_COPY_ALL, 3)                          \
  X(ZES_ENGINE_GROUP_RENDER_SINGLE, 5)                     \
  X(ZES_ENGINE_GROUP_RENDER_ALL, 12)                       \
  X(ZES_TEMP_SENSORS_GLOBAL, 0)                            \
  X(ZES_TEMP_SENSORS_GPU, 1)                               \
  X(ZES_TEMP_SENSORS_MEMORY, 2)                            \
  X(ZES_FREQ_DOMAIN_GPU, 0)                                \
  X(ZES_FREQ_DOMAIN_MEMORY, 1)                             \
  X(ZES_RAS_ERROR_TYPE_CORRECTABLE, 0)                     \
  X(ZES_RAS_ERROR_TYPE_UNCORRECTABLE, 1)                   \
  X(ZES_RAS_ERROR_CAT_RESET, 0)                            \
  X(ZES_RAS_ERROR_CAT_PROGRAMMING_ERRORS, 1)               \
  X(ZES_RAS_ERROR_CAT_DRIVER_ERRORS, 2)                    \
  X(ZES_RAS_ERROR_CAT_COMPUTE_ERRORS, 3)                   \
  X(ZES_RAS_ERROR_CAT_NON_COMPUTE_ERRORS, 4)               \
  X(ZES_RAS_ERROR_CAT_CACHE_ERRORS, 5)                     \
  X(ZES_RAS_ERROR_CAT_DISPLAY_ERRORS, 6)

/* X(type, field, offset): every field of the structs we read or fill, LP64. */
#define GPUM_ZE_LAYOUT(X)                                   \
  X(ze_device_properties_t, stype, 0)                       \
  X(ze_device_properties_t, pNext, 8)                       \
  X(ze_device_properties_t, type, 16)                       \
  X(ze_device_properties_t, vendorId, 20)                   \
  X(ze_device_properties_t, deviceId, 24)                   \
  X(ze_device_properties_t, flags, 28)                      \
  X(ze_device_properties_t, subdeviceId, 32)                \
  X(ze_device_properties_t, coreClockRate, 36)              \
  X(ze_device_properties_t, maxMemAllocSize, 40)            \
  X(ze_device_properties_t, maxHardwareContexts, 48)        \
  X(ze_device_properties_t, maxCommandQueuePriority, 52)    \
  X(ze_device_properties_t, numThreadsPerEU, 56)            \
  X(ze_device_properties_t, physicalEUSimdWidth, 60)        \
  X(ze_device_properties_t, numEUsPerSubslice, 64)          \
  X(ze_device_properties_t, numSubslicesPerSlice, 68)       \
  X(ze_device_properties_t, numSlices, 72)                  \
  X(ze_device_properties_t, timerResolution, 80)            \
  X(ze_device_properties_t, timestampValidBits, 88)         \
  X(ze_device_properties_t, kernelTimestampValidBits, 92)   \
  X(ze_device_properties_t, uuid, 96)                       \
  X(ze_device_properties_t, name, 112)                      \
  X(zes_device_properties_t, stype, 0)                      \
  X(zes_device_properties_t, pNext, 8)                      \
  X(zes_device_properties_t, core, 16)                      \
  X(zes_device_properties_t, numSubdevices, 384)            \
  X(zes_device_properties_t, serialNumber, 388)             \
  X(zes_device_properties_t, boardNumber, 452)              \
  X(zes_device_properties_t, brandName, 516)                \
  X(zes_device_properties_t, modelName, 580)                \
  X(zes_device_properties_t, vendorName, 644)               \
  X(zes_device_properties_t, driverVersion, 708)            \
  X(zes_pci_address_t, domain, 0)                           \
  X(zes_pci_address_t, bus, 4)                              \
  X(zes_pci_address_t, device, 8)                           \
  X(zes_pci_address_t, function, 12)                        \
  X(zes_pci_speed_t, gen, 0)                                \
  X(zes_pci_speed_t, width, 4)                              \
  X(zes_pci_speed_t, maxBandwidth, 8)                       \
  X(zes_pci_properties_t, stype, 0)                         \
  X(zes_pci_properties_t, pNext, 8)                         \
  X(zes_pci_properties_t, address, 16)                      \
  X(zes_pci_properties_t, maxSpeed, 32)                     \
  X(zes_pci_properties_t, haveBandwidthCounters, 48)        \
  X(zes_pci_properties_t, havePacketCounters, 49)           \
  X(zes_pci_properties_t, haveReplayCounters, 50)           \
  X(zes_mem_properties_t, stype, 0)                         \
  X(zes_mem_properties_t, pNext, 8)                         \
  X(zes_mem_properties_t, type, 16)                         \
  X(zes_mem_properties_t, onSubdevice, 20)                  \
  X(zes_mem_properties_t, subdeviceId, 24)                  \
  X(zes_mem_properties_t, location, 28)                     \
  X(zes_mem_properties_t, physicalSize, 32)                 \
  X(zes_mem_properties_t, busWidth, 40)                     \
  X(zes_mem_properties_t, numChannels, 44)                  \
  X(zes_mem_state_t, stype, 0)                              \
  X(zes_mem_state_t, pNext, 8)                              \
  X(zes_mem_state_t, health, 16)                            \
  X(zes_mem_state_t, free, 24)                              \
  X(zes_mem_state_t, size, 32)                              \
  X(zes_engine_properties_t, stype, 0)                      \
  X(zes_engine_properties_t, pNext, 8)                      \
  X(zes_engine_properties_t, type, 16)                      \
  X(zes_engine_properties_t, onSubdevice, 20)               \
  X(zes_engine_properties_t, subdeviceId, 24)               \
  X(zes_engine_stats_t, activeTime, 0)                      \
  X(zes_engine_stats_t, timestamp, 8)                       \
  X(zes_temp_properties_t, stype, 0)                        \
  X(zes_temp_properties_t, pNext, 8)                        \
  X(zes_temp_properties_t, type, 16)                        \
  X(zes_temp_properties_t, onSubdevice, 20)                 \
  X(zes_temp_properties_t, subdeviceId, 24)                 \
  X(zes_temp_properties_t, maxTemperature, 32)              \
  X(zes_temp_properties_t, isCriticalTempSupported, 40)     \
  X(zes_temp_properties_t, isThreshold1Supported, 41)       \
  X(zes_temp_properties_t, isThreshold2Supported, 42)       \
  X(zes_power_properties_t, stype, 0)                       \
  X(zes_power_properties_t, pNext, 8)                       \
  X(zes_power_properties_t, onSubdevice, 16)                \
  X(zes_power_properties_t, subdeviceId, 20)                \
  X(zes_power_properties_t, canControl, 24)                 \
  X(zes_power_properties_t, isEnergyThresholdSupported, 25) \
  X(zes_power_properties_t, defaultLimit, 28)               \
  X(zes_power_properties_t, minLimit, 32)                   \
  X(zes_power_properties_t, maxLimit, 36)                   \
  X(zes_power_energy_counter_t, energy, 0)                  \
  X(zes_power_energy_counter_t, timestamp, 8)               \
  X(zes_power_sustained_limit_t, enabled, 0)                \
  X(zes_power_sustained_limit_t, power, 4)                  \
  X(zes_power_sustained_limit_t, interval, 8)               \
  X(zes_power_burst_limit_t, enabled, 0)                    \
  X(zes_power_burst_limit_t, power, 4)                      \
  X(zes_power_peak_limit_t, powerAC, 0)                     \
  X(zes_power_peak_limit_t, powerDC, 4)                     \
  X(zes_freq_properties_t, stype, 0)                        \
  X(zes_freq_properties_t, pNext, 8)                        \
  X(zes_freq_properties_t, type, 16)                        \
  X(zes_freq_properties_t, onSubdevice, 20)                 \
  X(zes_freq_properties_t, subdeviceId, 24)                 \
  X(zes_freq_properties_t, canControl, 28)                  \
  X(zes_freq_properties_t, isThrottleEventSupported, 29)    \
  X(zes_freq_properties_t, min, 32)                         \
  X(zes_freq_properties_t, max, 40)                         \
  X(zes_freq_state_t, stype, 0)                             \
  X(zes_freq_state_t, pNext, 8)                             \
  X(zes_freq_state_t, currentVoltage, 16)                   \
  X(zes_freq_state_t, request, 24)                          \
  X(zes_freq_state_t, tdp, 32)                              \
  X(zes_freq_state_t, efficient, 40)                        \
  X(zes_freq_state_t, actual, 48)                           \
  X(zes_freq_state_t, throttleReasons, 56)                  \
  X(zes_ras_properties_t, stype, 0)                         \
  X(zes_ras_properties_t, pNext, 8)                         \
  X(zes_ras_properties_t, type, 16)                         \
  X(zes_ras_properties_t, onSubdevice, 20)                  \
  X(zes_ras_properties_t, subdeviceId, 24)                  \
  X(zes_ras_state_t, stype, 0)                              \
  X(zes_ras_state_t, pNext, 8)                              \
  X(zes_ras_state_t, category, 16)                          \
  X(zes_process_state_t, stype, 0)                          \
  X(zes_process_state_t, pNext, 8)                          \
  X(zes_process_state_t, processId, 16)                     \
  X(zes_process_state_t, memSize, 24)                       \
  X(zes_process_state_t, sharedSize, 32)                    \
  X(zes_process_state_t, engines, 40)

/* X(type, size): the structs and the scalar types as they are passed. */
#define GPUM_ZE_SIZES(X)                 \
  X(ze_device_uuid_t, 16)                \
  X(ze_device_properties_t, 368)         \
  X(zes_device_properties_t, 776)        \
  X(zes_pci_address_t, 16)               \
  X(zes_pci_speed_t, 16)                 \
  X(zes_pci_properties_t, 56)            \
  X(zes_mem_properties_t, 48)            \
  X(zes_mem_state_t, 40)                 \
  X(zes_engine_properties_t, 32)         \
  X(zes_engine_stats_t, 16)              \
  X(zes_temp_properties_t, 48)           \
  X(zes_power_properties_t, 40)          \
  X(zes_power_energy_counter_t, 16)      \
  X(zes_power_sustained_limit_t, 12)     \
  X(zes_power_burst_limit_t, 8)          \
  X(zes_power_peak_limit_t, 8)           \
  X(zes_freq_properties_t, 48)           \
  X(zes_freq_state_t, 64)                \
  X(zes_ras_properties_t, 32)            \
  X(zes_ras_state_t, 72)                 \
  X(zes_process_state_t, 48)             \
  X(ze_result_t, 4)                      \
  X(ze_bool_t, 1)                        \
  X(ze_structure_type_t, 4)              \
  X(zes_structure_type_t, 4)             \
  X(ze_device_type_t, 4)                 \
  X(ze_init_flags_t, 4)                  \
  X(ze_device_property_flags_t, 4)       \
  X(zes_mem_type_t, 4)                   \
  X(zes_mem_loc_t, 4)                    \
  X(zes_mem_health_t, 4)                 \
  X(zes_engine_group_t, 4)               \
  X(zes_temp_sensors_t, 4)               \
  X(zes_freq_domain_t, 4)                \
  X(zes_ras_error_type_t, 4)             \
  X(zes_freq_throttle_reason_flags_t, 4) \
  X(zes_engine_type_flags_t, 4)

#ifndef GPUM_ZE_ABI_USE_SYSTEM_HEADER

#define GPUM__ZE_ENUM(name, value) name = (value),
enum { GPUM_ZE_CONSTS(GPUM__ZE_ENUM) };
#undef GPUM__ZE_ENUM

typedef uint32_t ze_result_t;
typedef uint8_t ze_bool_t;
typedef uint32_t ze_structure_type_t;
typedef uint32_t zes_structure_type_t;
typedef uint32_t ze_device_type_t;
typedef uint32_t ze_init_flags_t;
typedef uint32_t ze_device_property_flags_t;
typedef uint32_t zes_mem_type_t;
typedef uint32_t zes_mem_loc_t;
typedef uint32_t zes_mem_health_t;
typedef uint32_t zes_engine_group_t;
typedef uint32_t zes_temp_sensors_t;
typedef uint32_t zes_freq_domain_t;
typedef uint32_t zes_ras_error_type_t;
typedef uint32_t zes_freq_throttle_reason_flags_t;
typedef uint32_t zes_engine_type_flags_t;

/* Opaque handles (never dereferenced: the simulator's are addresses of its own slots). */
typedef struct gpum_ze_driver *ze_driver_handle_t;
typedef struct gpum_ze_device *ze_device_handle_t;
typedef ze_driver_handle_t zes_driver_handle_t;
typedef ze_device_handle_t zes_device_handle_t;
typedef struct gpum_zes_pwr *zes_pwr_handle_t;
typedef struct gpum_zes_freq *zes_freq_handle_t;
typedef struct gpum_zes_engine *zes_engine_handle_t;
typedef struct gpum_zes_mem *zes_mem_handle_t;
typedef struct gpum_zes_temp *zes_temp_handle_t;
typedef struct gpum_zes_ras *zes_ras_handle_t;

typedef struct {
  uint8_t id[ZE_MAX_DEVICE_UUID_SIZE];
} ze_device_uuid_t;

typedef struct {
  ze_structure_type_t stype;
  void *pNext;
  ze_device_type_t type;
  uint32_t vendorId; /* PCI vendor id: 0x8086 */
  uint32_t deviceId; /* PCI device id */
  ze_device_property_flags_t flags;
  uint32_t subdeviceId;
  uint32_t coreClockRate; /* MHz */
  uint64_t maxMemAllocSize;
  uint32_t maxHardwareContexts;
  uint32_t maxCommandQueuePriority;
  uint32_t numThreadsPerEU;
  uint32_t physicalEUSimdWidth;
  uint32_t numEUsPerSubslice;
  uint32_t numSubslicesPerSlice;
  uint32_t numSlices;
  uint64_t timerResolution;
  uint32_t timestampValidBits;
  uint32_t kernelTimestampValidBits;
  ze_device_uuid_t uuid;
  char name[ZE_MAX_DEVICE_NAME];
} ze_device_properties_t;

typedef struct {
  zes_structure_type_t stype;
  void *pNext;
  ze_device_properties_t core;
  uint32_t numSubdevices;
  char serialNumber[ZES_STRING_PROPERTY_SIZE];
  char boardNumber[ZES_STRING_PROPERTY_SIZE];
  char brandName[ZES_STRING_PROPERTY_SIZE];
  char modelName[ZES_STRING_PROPERTY_SIZE];
  char vendorName[ZES_STRING_PROPERTY_SIZE];
  char driverVersion[ZES_STRING_PROPERTY_SIZE];
} zes_device_properties_t;

typedef struct {
  uint32_t domain, bus, device, function;
} zes_pci_address_t;

typedef struct {
  int32_t gen;   /* -1: unknown */
  int32_t width; /* lanes, -1: unknown */
  int64_t maxBandwidth;
} zes_pci_speed_t;

typedef struct {
  zes_structure_type_t stype;
  void *pNext;
  zes_pci_address_t address;
  zes_pci_speed_t maxSpeed;
  ze_bool_t haveBandwidthCounters;
  ze_bool_t havePacketCounters;
  ze_bool_t haveReplayCounters;
} zes_pci_properties_t;

typedef struct {
  zes_structure_type_t stype;
  void *pNext;
  zes_mem_type_t type;
  ze_bool_t onSubdevice;
  uint32_t subdeviceId;
  zes_mem_loc_t location;
  uint64_t physicalSize; /* bytes; 0: unknown */
  int32_t busWidth;      /* -1: unknown */
  int32_t numChannels;   /* -1: unknown */
} zes_mem_properties_t;

typedef struct {
  zes_structure_type_t stype;
  const void *pNext;
  zes_mem_health_t health;
  uint64_t free; /* bytes */
  uint64_t size; /* allocatable bytes (may be below physicalSize) */
} zes_mem_state_t;

typedef struct {
  zes_structure_type_t stype;
  void *pNext;
  zes_engine_group_t type;
  ze_bool_t onSubdevice;
  uint32_t subdeviceId;
} zes_engine_properties_t;

typedef struct {
  uint64_t activeTime; /* microseconds the group was busy (monotonic) */
  uint64_t timestamp;  /* microseconds, when activeTime was read */
} zes_engine_stats_t;

typedef struct {
  zes_structure_type_t stype;
  void *pNext;
  zes_temp_sensors_t type;
  ze_bool_t onSubdevice;
  uint32_t subdeviceId;
  double maxTemperature; /* degrees Celsius */
  ze_bool_t isCriticalTempSupported;
  ze_bool_t isThreshold1Supported;
  ze_bool_t isThreshold2Supported;
} zes_temp_properties_t;

typedef struct {
  zes_structure_type_t stype;
  void *pNext;
  ze_bool_t onSubdevice;
  uint32_t subdeviceId;
  ze_bool_t canControl;
  ze_bool_t isEnergyThresholdSupported;
  int32_t defaultLimit; /* mW, -1: unknown (deprecated) */
  int32_t minLimit;
  int32_t maxLimit;
} zes_power_properties_t;

typedef struct {
  uint64_t energy;    /* microjoules (monotonic) */
  uint64_t timestamp; /* microseconds */
} zes_power_energy_counter_t;

typedef struct {
  ze_bool_t enabled;
  int32_t power;    /* mW */
  int32_t interval; /* ms */
} zes_power_sustained_limit_t;

typedef struct {
  ze_bool_t enabled;
  int32_t power; /* mW */
} zes_power_burst_limit_t;

typedef struct {
  int32_t powerAC; /* mW */
  int32_t powerDC; /* mW */
} zes_power_peak_limit_t;

typedef struct {
  zes_structure_type_t stype;
  void *pNext;
  zes_freq_domain_t type;
  ze_bool_t onSubdevice;
  uint32_t subdeviceId;
  ze_bool_t canControl;
  ze_bool_t isThrottleEventSupported;
  double min; /* MHz */
  double max; /* MHz */
} zes_freq_properties_t;

typedef struct {
  zes_structure_type_t stype;
  const void *pNext;
  double currentVoltage; /* V, negative: unknown */
  double request;        /* MHz, negative: unknown */
  double tdp;
  double efficient;
  double actual; /* MHz, negative: unknown */
  zes_freq_throttle_reason_flags_t throttleReasons;
} zes_freq_state_t;

typedef struct {
  zes_structure_type_t stype;
  void *pNext;
  zes_ras_error_type_t type;
  ze_bool_t onSubdevice;
  uint32_t subdeviceId;
} zes_ras_properties_t;

typedef struct {
  zes_structure_type_t stype;
  const void *pNext;
  uint64_t category[ZES_MAX_RAS_ERROR_CATEGORY_COUNT]; /* by ZES_RAS_ERROR_CAT_* */
} zes_ras_state_t;

typedef struct {
  zes_structure_type_t stype;
  const void *pNext;
  uint32_t processId;
  uint64_t memSize;    /* device memory the process allocated, bytes */
  uint64_t sharedSize; /* shared device memory mapped into it, bytes */
  zes_engine_type_flags_t engines;
} zes_process_state_t;

#if defined(__LP64__)
#define GPUM__ZE_OFF(type, field, off) \
  _Static_assert(offsetof(type, field) == (off), "offset of " #type "." #field);
GPUM_ZE_LAYOUT(GPUM__ZE_OFF)
#undef GPUM__ZE_OFF
#define GPUM__ZE_SIZE(type, size) _Static_assert(sizeof(type) == (size), "sizeof " #type);
GPUM_ZE_SIZES(GPUM__ZE_SIZE)
#undef GPUM__ZE_SIZE
#endif

#endif /* !GPUM_ZE_ABI_USE_SYSTEM_HEADER */

/* X(name, params): the functions of the 1.8.12 headers, all returning ze_result_t. */
#define GPUM_ZE_FUNCS(X)                                                                          \
  X(zeInit, (ze_init_flags_t flags))                                                              \
  X(zeDriverGet, (uint32_t * pCount, ze_driver_handle_t * phDrivers))                             \
  X(zeDeviceGet, (ze_driver_handle_t hDriver, uint32_t * pCount, ze_device_handle_t * phDevices)) \
  X(zesDeviceGetProperties, (zes_device_handle_t hDevice, zes_device_properties_t * pProperties)) \
  X(zesDevicePciGetProperties, (zes_device_handle_t hDevice, zes_pci_properties_t * pProperties)) \
  X(zesDeviceEnumMemoryModules,                                                                   \
    (zes_device_handle_t hDevice, uint32_t * pCount, zes_mem_handle_t * phMemory))                \
  X(zesMemoryGetProperties, (zes_mem_handle_t hMemory, zes_mem_properties_t * pProperties))       \
  X(zesMemoryGetState, (zes_mem_handle_t hMemory, zes_mem_state_t * pState))                      \
  X(zesDeviceEnumEngineGroups,                                                                    \
    (zes_device_handle_t hDevice, uint32_t * pCount, zes_engine_handle_t * phEngine))             \
  X(zesEngineGetProperties, (zes_engine_handle_t hEngine, zes_engine_properties_t * pProperties)) \
  X(zesEngineGetActivity, (zes_engine_handle_t hEngine, zes_engine_stats_t * pStats))             \
  X(zesDeviceEnumTemperatureSensors,                                                              \
    (zes_device_handle_t hDevice, uint32_t * pCount, zes_temp_handle_t * phTemperature))          \
  X(zesTemperatureGetProperties,                                                                  \
    (zes_temp_handle_t hTemperature, zes_temp_properties_t * pProperties))                        \
  X(zesTemperatureGetState, (zes_temp_handle_t hTemperature, double *pTemperature))               \
  X(zesDeviceEnumPowerDomains,                                                                    \
    (zes_device_handle_t hDevice, uint32_t * pCount, zes_pwr_handle_t * phPower))                 \
  X(zesPowerGetProperties, (zes_pwr_handle_t hPower, zes_power_properties_t * pProperties))       \
  X(zesPowerGetEnergyCounter, (zes_pwr_handle_t hPower, zes_power_energy_counter_t * pEnergy))    \
  X(zesPowerGetLimits, (zes_pwr_handle_t hPower, zes_power_sustained_limit_t * pSustained,        \
                        zes_power_burst_limit_t * pBurst, zes_power_peak_limit_t * pPeak))        \
  X(zesDeviceEnumFrequencyDomains,                                                                \
    (zes_device_handle_t hDevice, uint32_t * pCount, zes_freq_handle_t * phFrequency))            \
  X(zesFrequencyGetProperties,                                                                    \
    (zes_freq_handle_t hFrequency, zes_freq_properties_t * pProperties))                          \
  X(zesFrequencyGetState, (zes_freq_handle_t hFrequency, zes_freq_state_t * pState))              \
  X(zesDeviceEnumRasErrorSets,                                                                    \
    (zes_device_handle_t hDevice, uint32_t * pCount, zes_ras_handle_t * phRas))                   \
  X(zesRasGetProperties, (zes_ras_handle_t hRas, zes_ras_properties_t * pProperties))             \
  X(zesRasGetState, (zes_ras_handle_t hRas, ze_bool_t clear, zes_ras_state_t * pState))           \
  X(zesDeviceProcessesGetState,                                                                   \
    (zes_device_handle_t hDevice, uint32_t * pCount, zes_process_state_t * pProcesses))

/* X(name, params): Sysman's own initialisation (API 1.5, not in the 1.8.12 headers). */
#define GPUM_ZES_INIT_FUNCS(X)                                          \
  X(zesInit, (uint32_t flags))                                          \
  X(zesDriverGet, (uint32_t * pCount, zes_driver_handle_t * phDrivers)) \
  X(zesDeviceGet, (zes_driver_handle_t hDriver, uint32_t * pCount, zes_device_handle_t * phDevices))

#define GPUM__ZE_FN(name, params) typedef ze_result_t(*gpum_##name##_fn) params;
GPUM_ZE_FUNCS(GPUM__ZE_FN)
GPUM_ZES_INIT_FUNCS(GPUM__ZE_FN)
#undef GPUM__ZE_FN

#endif /* GPUM_ZE_ABI_H */
