/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Our own declarations of the NVML ABI subset gpum uses, written from the fact sheet in
 * shared/research/monitoring.md (NVML API 13, checked against go-nvml's nvml.h). nvml.h is not
 * needed to build gpum: libgpum dlopens libnvidia-ml and resolves these names with dlsym, and
 * libgpum_sim.so exports the same names with the same prototypes.
 *
 * Both sides include this file, so a mistake here would be shared: every struct size and
 * offset below is therefore pinned by a static assertion taken from the fact sheet, not from
 * the declarations themselves. Do not edit a value without checking it against nvml.h.
 *
 * Layouts are for LP64 (x86_64, aarch64).
 */
#ifndef GPUM_NVML_ABI_H
#define GPUM_NVML_ABI_H

#include <stddef.h>

typedef int nvmlReturn_t; /* a C enum in nvml.h: 4 bytes */

/* X(name, value, message): every nvmlReturn_t value of the fact sheet (§1.5) with the message
 * nvmlErrorString gives for it. */
#define GPUM_NVML_RETURNS(X)                                                                  \
  X(NVML_SUCCESS, 0, "Success")                                                               \
  X(NVML_ERROR_UNINITIALIZED, 1, "Uninitialized")                                             \
  X(NVML_ERROR_INVALID_ARGUMENT, 2, "Invalid Argument")                                       \
  X(NVML_ERROR_NOT_SUPPORTED, 3, "Not Supported")                                             \
  X(NVML_ERROR_NO_PERMISSION, 4, "Insufficient Permissions")                                  \
  X(NVML_ERROR_ALREADY_INITIALIZED, 5, "Already Initialized")                                 \
  X(NVML_ERROR_NOT_FOUND, 6, "Not Found")                                                     \
  X(NVML_ERROR_INSUFFICIENT_SIZE, 7, "Insufficient Size")                                     \
  X(NVML_ERROR_INSUFFICIENT_POWER, 8, "Insufficient External Power")                          \
  X(NVML_ERROR_DRIVER_NOT_LOADED, 9, "Driver Not Loaded")                                     \
  X(NVML_ERROR_TIMEOUT, 10, "Timeout")                                                        \
  X(NVML_ERROR_IRQ_ISSUE, 11, "Interrupt Request Issue")                                      \
  X(NVML_ERROR_LIBRARY_NOT_FOUND, 12, "NVML Shared Library Not Found")                        \
  X(NVML_ERROR_FUNCTION_NOT_FOUND, 13, "Function Not Found")                                  \
  X(NVML_ERROR_CORRUPTED_INFOROM, 14, "Corrupted infoROM")                                    \
  X(NVML_ERROR_GPU_IS_LOST, 15, "GPU is lost")                                                \
  X(NVML_ERROR_RESET_REQUIRED, 16, "GPU requires restart")                                    \
  X(NVML_ERROR_OPERATING_SYSTEM, 17, "The operating system has blocked the request.")         \
  X(NVML_ERROR_LIB_RM_VERSION_MISMATCH, 18, "RM has detected an NVML/RM version mismatch.")   \
  X(NVML_ERROR_IN_USE, 19, "In use by another client")                                        \
  X(NVML_ERROR_MEMORY, 20, "Insufficient Memory")                                             \
  X(NVML_ERROR_NO_DATA, 21, "No data")                                                        \
  X(NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, 22,                                                    \
    "The requested vgpu operation is not available on target device, because ECC is enabled") \
  X(NVML_ERROR_INSUFFICIENT_RESOURCES, 23, "Insufficient resources for request")              \
  X(NVML_ERROR_FREQ_NOT_SUPPORTED, 24, "Frequency not supported")                             \
  X(NVML_ERROR_ARGUMENT_VERSION_MISMATCH, 25, "Argument version mismatch")                    \
  X(NVML_ERROR_DEPRECATED, 26, "Deprecated")                                                  \
  X(NVML_ERROR_NOT_READY, 27, "Not Ready")                                                    \
  X(NVML_ERROR_GPU_NOT_FOUND, 28, "GPU not found")                                            \
  X(NVML_ERROR_INVALID_STATE, 29, "Invalid state")                                            \
  X(NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, 30, "Reset type not supported")                      \
  X(NVML_ERROR_UNKNOWN, 999, "Unknown Error")

#define GPUM__NVML_RET_ENUM(name, value, msg) name = (value),
enum { GPUM_NVML_RETURNS(GPUM__NVML_RET_ENUM) };
#undef GPUM__NVML_RET_ENUM

/* nvmlErrorString's message for rv; "Unknown Error" for values not in the table. */
static inline const char *gpum_nvml_return_message(int rv) {
  switch (rv) {
#define GPUM__NVML_RET_CASE(name, value, msg) \
  case (value):                               \
    return msg;
    GPUM_NVML_RETURNS(GPUM__NVML_RET_CASE)
#undef GPUM__NVML_RET_CASE
  }
  return "Unknown Error";
}

#define NVML_INIT_FLAG_NO_GPUS 1u
#define NVML_INIT_FLAG_NO_ATTACH 2u
#define NVML_INIT_FLAG_FORCE_INIT 4u

#define NVML_DEVICE_NAME_BUFFER_SIZE 64
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_SERIAL_BUFFER_SIZE 30
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_VALUE_NOT_AVAILABLE (-1)
/* usedGpuMemory is unsigned long long; "not available" is (unsigned long long)-1. */
#define NVML_VALUE_NOT_AVAILABLE_ULL (~0ULL)

/* Encoded struct versions: sizeof(struct) | (version << 24). A plain "2" is rejected by the real
 * library with NVML_ERROR_FUNCTION_NOT_FOUND. */
#define NVML_STRUCT_VERSION(size, v) ((unsigned int)(size) | ((unsigned int)(v) << 24))

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

typedef int nvmlTemperatureSensors_t;
#define NVML_TEMPERATURE_GPU 0

typedef int nvmlTemperatureThresholds_t;
#define NVML_TEMPERATURE_THRESHOLD_SHUTDOWN 0
#define NVML_TEMPERATURE_THRESHOLD_SLOWDOWN 1
#define NVML_TEMPERATURE_THRESHOLD_MEM_MAX 2
#define NVML_TEMPERATURE_THRESHOLD_GPU_MAX 3

typedef int nvmlMemoryErrorType_t;
#define NVML_MEMORY_ERROR_TYPE_CORRECTED 0
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1

typedef int nvmlEccCounterType_t;
#define NVML_VOLATILE_ECC 0
#define NVML_AGGREGATE_ECC 1

typedef int nvmlEnableState_t;
#define NVML_FEATURE_DISABLED 0
#define NVML_FEATURE_ENABLED 1

typedef int nvmlClockType_t;
#define NVML_CLOCK_GRAPHICS 0
#define NVML_CLOCK_SM 1
#define NVML_CLOCK_MEM 2
#define NVML_CLOCK_VIDEO 3

#define nvmlEventTypeSingleBitEccError 0x1ULL
#define nvmlEventTypeDoubleBitEccError 0x2ULL
#define nvmlEventTypePState 0x4ULL
#define nvmlEventTypeXidCriticalError 0x8ULL
#define nvmlEventTypeClock 0x10ULL
#define nvmlEventTypePowerSourceChange 0x80ULL
#define nvmlEventMigConfigChange 0x100ULL

/* MIG (Multi-Instance GPU, Ampere and later, Linux only), checked against go-nvml's
 * gen/nvml/nvml.h (commit 314e96d). nvmlDeviceGetMigMode gives the current
 * and the pending mode (the one after the next GPU reset); NOT_SUPPORTED on a GPU without MIG.
 * A MIG device handle (nvmlDeviceGetMigDeviceHandleByIndex) stands for one compute instance:
 * nvmlDeviceGetName ("... MIG 3g.40gb"), nvmlDeviceGetUUID ("MIG-" and a UUID),
 * nvmlDeviceGetMemoryInfo (the instance's memory) and the process lists answer per instance;
 * utilisation, temperature, power, clocks and the whole-GPU ECC counters are the parent's. */
#define NVML_DEVICE_MIG_DISABLE 0x0u
#define NVML_DEVICE_MIG_ENABLE 0x1u

typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used; /* v1: includes driver-reserved memory */
} nvmlMemory_t;

typedef struct {
  unsigned int version; /* nvmlMemory_v2 */
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 NVML_STRUCT_VERSION(sizeof(nvmlMemory_v2_t), 2)

typedef struct {
  unsigned int gpu;    /* percent */
  unsigned int memory; /* percent */
} nvmlUtilization_t;

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

/* nvmlProcessInfo_t == nvmlProcessInfo_v2_t, filled by the _v2 and _v3 process calls. */
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId; /* 0xFFFFFFFF when not MIG */
} nvmlProcessInfo_t;

/* What early R535 drivers (535.43 up to below 535.86) wrote into the _v3 buffers: 32-byte
 * entries, with no version bump. Also nvmlProcessDetail_v1_t. */
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
  unsigned long long usedGpuCcProtectedMemory;
} nvmlProcessDetail_v1_t;

typedef struct {
  unsigned int version; /* nvmlProcessDetailList_v1 */
  unsigned int mode;    /* 0 compute, 1 graphics, 2 MPS, 3 all */
  unsigned int numProcArrayEntries;
  nvmlProcessDetail_v1_t *procArray;
} nvmlProcessDetailList_t;
#define nvmlProcessDetailList_v1 NVML_STRUCT_VERSION(sizeof(nvmlProcessDetailList_t), 1)

/* One process's utilisation over a sample period (nvmlDeviceGetProcessUtilization): one
 * entry per process that had some non-zero utilisation in it; the values are percentages. */
typedef struct {
  unsigned int pid;
  unsigned long long timeStamp; /* CPU timestamp of the sample, microseconds */
  unsigned int smUtil;          /* SM (3D/compute) */
  unsigned int memUtil;         /* frame buffer memory */
  unsigned int encUtil;         /* video encoder */
  unsigned int decUtil;         /* video decoder */
} nvmlProcessUtilizationSample_t;

typedef struct {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData; /* the Xid for XID events; 999 = unknown Xid */
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

typedef struct {
  unsigned int version; /* nvmlTemperature_v1 */
  nvmlTemperatureSensors_t sensorType;
  int temperature;
} nvmlTemperature_t;
#define nvmlTemperature_v1 NVML_STRUCT_VERSION(sizeof(nvmlTemperature_t), 1)

/* The fact sheet's figures, restated independently of the declarations above. */
_Static_assert(sizeof(nvmlReturn_t) == 4, "nvmlReturn_t");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t");
_Static_assert(offsetof(nvmlMemory_v2_t, total) == 8 && offsetof(nvmlMemory_v2_t, reserved) == 16 &&
                   offsetof(nvmlMemory_v2_t, free) == 24 && offsetof(nvmlMemory_v2_t, used) == 32,
               "nvmlMemory_v2_t offsets");
_Static_assert(nvmlMemory_v2 == 0x02000028u, "nvmlMemory_v2 version");
_Static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t");
_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24 && offsetof(nvmlProcessInfo_t, usedGpuMemory) == 8 &&
                   offsetof(nvmlProcessInfo_t, gpuInstanceId) == 16 &&
                   offsetof(nvmlProcessInfo_t, computeInstanceId) == 20,
               "nvmlProcessInfo_t");
_Static_assert(sizeof(nvmlProcessDetail_v1_t) == 32 &&
                   offsetof(nvmlProcessDetail_v1_t, usedGpuCcProtectedMemory) == 24,
               "nvmlProcessDetail_v1_t");
_Static_assert(sizeof(nvmlProcessDetailList_t) == 24 &&
                   offsetof(nvmlProcessDetailList_t, numProcArrayEntries) == 8 &&
                   offsetof(nvmlProcessDetailList_t, procArray) == 16,
               "nvmlProcessDetailList_t");
_Static_assert(nvmlProcessDetailList_v1 == 0x01000018u, "nvmlProcessDetailList_v1");
_Static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32 &&
                   offsetof(nvmlProcessUtilizationSample_t, timeStamp) == 8 &&
                   offsetof(nvmlProcessUtilizationSample_t, smUtil) == 16 &&
                   offsetof(nvmlProcessUtilizationSample_t, decUtil) == 28,
               "nvmlProcessUtilizationSample_t");
_Static_assert(sizeof(nvmlPciInfo_t) == 68 && offsetof(nvmlPciInfo_t, domain) == 16 &&
                   offsetof(nvmlPciInfo_t, bus) == 20 && offsetof(nvmlPciInfo_t, device) == 24 &&
                   offsetof(nvmlPciInfo_t, pciDeviceId) == 28 &&
                   offsetof(nvmlPciInfo_t, pciSubSystemId) == 32 &&
                   offsetof(nvmlPciInfo_t, busId) == 36,
               "nvmlPciInfo_t");
_Static_assert(sizeof(nvmlEventData_t) == 32 && offsetof(nvmlEventData_t, eventType) == 8 &&
                   offsetof(nvmlEventData_t, eventData) == 16 &&
                   offsetof(nvmlEventData_t, gpuInstanceId) == 24 &&
                   offsetof(nvmlEventData_t, computeInstanceId) == 28,
               "nvmlEventData_t");
_Static_assert(sizeof(nvmlTemperature_t) == 12 && nvmlTemperature_v1 == 0x0100000Cu,
               "nvmlTemperature_t");

/*
 * Prototypes, as exported by libnvidia-ml.so.1 (and libgpum_sim.so). X(ret, name, params):
 * the loader builds its function-pointer table and the simulator its definitions from this
 * one list, so both agree on every signature.
 */
#define GPUM_NVML_FUNCS(X)                                                                        \
  X(nvmlReturn_t, nvmlInit_v2, (void))                                                            \
  X(nvmlReturn_t, nvmlInit, (void))                                                               \
  X(nvmlReturn_t, nvmlInitWithFlags, (unsigned int flags))                                        \
  X(nvmlReturn_t, nvmlShutdown, (void))                                                           \
  X(const char *, nvmlErrorString, (nvmlReturn_t result))                                         \
  X(nvmlReturn_t, nvmlSystemGetDriverVersion, (char *version, unsigned int length))               \
  X(nvmlReturn_t, nvmlSystemGetCudaDriverVersion_v2, (int *cudaDriverVersion))                    \
  X(nvmlReturn_t, nvmlDeviceGetCount_v2, (unsigned int *deviceCount))                             \
  X(nvmlReturn_t, nvmlDeviceGetCount, (unsigned int *deviceCount))                                \
  X(nvmlReturn_t, nvmlDeviceGetHandleByIndex_v2, (unsigned int index, nvmlDevice_t *device))      \
  X(nvmlReturn_t, nvmlDeviceGetHandleByIndex, (unsigned int index, nvmlDevice_t *device))         \
  X(nvmlReturn_t, nvmlDeviceGetHandleByUUID, (const char *uuid, nvmlDevice_t *device))            \
  X(nvmlReturn_t, nvmlDeviceGetName, (nvmlDevice_t device, char *name, unsigned int length))      \
  X(nvmlReturn_t, nvmlDeviceGetUUID, (nvmlDevice_t device, char *uuid, unsigned int length))      \
  X(nvmlReturn_t, nvmlDeviceGetIndex, (nvmlDevice_t device, unsigned int *index))                 \
  X(nvmlReturn_t, nvmlDeviceGetPciInfo_v3, (nvmlDevice_t device, nvmlPciInfo_t * pci))            \
  X(nvmlReturn_t, nvmlDeviceGetCudaComputeCapability,                                             \
    (nvmlDevice_t device, int *major, int *minor))                                                \
  X(nvmlReturn_t, nvmlDeviceGetMemoryInfo, (nvmlDevice_t device, nvmlMemory_t * memory))          \
  X(nvmlReturn_t, nvmlDeviceGetMemoryInfo_v2, (nvmlDevice_t device, nvmlMemory_v2_t * memory))    \
  X(nvmlReturn_t, nvmlDeviceGetUtilizationRates,                                                  \
    (nvmlDevice_t device, nvmlUtilization_t * utilization))                                       \
  X(nvmlReturn_t, nvmlDeviceGetTemperature,                                                       \
    (nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int *temp))               \
  X(nvmlReturn_t, nvmlDeviceGetTemperatureV, (nvmlDevice_t device, nvmlTemperature_t * temp))     \
  X(nvmlReturn_t, nvmlDeviceGetTemperatureThreshold,                                              \
    (nvmlDevice_t device, nvmlTemperatureThresholds_t thresholdType, unsigned int *temp))         \
  X(nvmlReturn_t, nvmlDeviceGetPowerUsage, (nvmlDevice_t device, unsigned int *power))            \
  X(nvmlReturn_t, nvmlDeviceGetEnforcedPowerLimit, (nvmlDevice_t device, unsigned int *limit))    \
  X(nvmlReturn_t, nvmlDeviceGetClockInfo,                                                         \
    (nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock))                             \
  X(nvmlReturn_t, nvmlDeviceGetMaxClockInfo,                                                      \
    (nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock))                             \
  X(nvmlReturn_t, nvmlDeviceGetEccMode,                                                           \
    (nvmlDevice_t device, nvmlEnableState_t * current, nvmlEnableState_t * pending))              \
  X(nvmlReturn_t, nvmlDeviceGetTotalEccErrors,                                                    \
    (nvmlDevice_t device, nvmlMemoryErrorType_t errorType, nvmlEccCounterType_t counterType,      \
     unsigned long long *eccCounts))                                                              \
  X(nvmlReturn_t, nvmlDeviceGetRetiredPagesPendingStatus,                                         \
    (nvmlDevice_t device, nvmlEnableState_t * isPending))                                         \
  X(nvmlReturn_t, nvmlDeviceGetRemappedRows,                                                      \
    (nvmlDevice_t device, unsigned int *corrRows, unsigned int *uncRows, unsigned int *isPending, \
     unsigned int *failureOccurred))                                                              \
  X(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses_v3,                                        \
    (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos))                     \
  X(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses_v2,                                        \
    (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos))                     \
  X(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses,                                           \
    (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_v1_t *infos))                  \
  X(nvmlReturn_t, nvmlDeviceGetGraphicsRunningProcesses_v3,                                       \
    (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos))                     \
  X(nvmlReturn_t, nvmlDeviceGetRunningProcessDetailList,                                          \
    (nvmlDevice_t device, nvmlProcessDetailList_t * plist))                                       \
  X(nvmlReturn_t, nvmlDeviceGetConfComputeMemSizeInfo, (nvmlDevice_t device, void *memInfo))      \
  X(nvmlReturn_t, nvmlDeviceGetProcessUtilization,                                                \
    (nvmlDevice_t device, nvmlProcessUtilizationSample_t * utilization,                           \
     unsigned int *processSamplesCount, unsigned long long lastSeenTimeStamp))                    \
  X(nvmlReturn_t, nvmlEventSetCreate, (nvmlEventSet_t * set))                                     \
  X(nvmlReturn_t, nvmlDeviceGetSupportedEventTypes,                                               \
    (nvmlDevice_t device, unsigned long long *eventTypes))                                        \
  X(nvmlReturn_t, nvmlDeviceRegisterEvents,                                                       \
    (nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set))                     \
  X(nvmlReturn_t, nvmlEventSetWait_v2,                                                            \
    (nvmlEventSet_t set, nvmlEventData_t * data, unsigned int timeoutms))                         \
  X(nvmlReturn_t, nvmlEventSetWait,                                                               \
    (nvmlEventSet_t set, nvmlEventData_t * data, unsigned int timeoutms))                         \
  X(nvmlReturn_t, nvmlEventSetFree, (nvmlEventSet_t set))                                         \
  X(nvmlReturn_t, nvmlDeviceGetMigMode,                                                           \
    (nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode))                  \
  X(nvmlReturn_t, nvmlDeviceGetMaxMigDeviceCount, (nvmlDevice_t device, unsigned int *count))     \
  X(nvmlReturn_t, nvmlDeviceGetMigDeviceHandleByIndex,                                            \
    (nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice))                           \
  X(nvmlReturn_t, nvmlDeviceIsMigDeviceHandle, (nvmlDevice_t device, unsigned int *isMigDevice))  \
  X(nvmlReturn_t, nvmlDeviceGetDeviceHandleFromMigDeviceHandle,                                   \
    (nvmlDevice_t migDevice, nvmlDevice_t * device))                                              \
  X(nvmlReturn_t, nvmlDeviceGetGpuInstanceId, (nvmlDevice_t device, unsigned int *id))            \
  X(nvmlReturn_t, nvmlDeviceGetComputeInstanceId, (nvmlDevice_t device, unsigned int *id))

/* Function-pointer typedefs: gpum_nvml_<name>_fn. */
#define GPUM__NVML_TYPEDEF(ret, name, params) typedef ret(*gpum_##name##_fn) params;
GPUM_NVML_FUNCS(GPUM__NVML_TYPEDEF)
#undef GPUM__NVML_TYPEDEF

#endif /* GPUM_NVML_ABI_H */
