/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Our own declarations of the ROCm SMI subset gpum uses (librocm_smi64.so.1, loaded with
 * dlopen by src/lib/device/rocm.c and exported by the simulator, src/sim/rocm_smi.c): neither
 * libgpum nor the simulator needs rocm_smi.h to build.
 *
 * Every constant is listed once, in GPUM_RSMI_CONSTS, every struct field in GPUM_RSMI_LAYOUT
 * and every struct size in GPUM_RSMI_SIZES; our definitions are generated from those lists.
 * tests/abi/check_rocm_smi_abi.c (built where Debian's librocm-smi-dev installs
 * rocm_smi/rocm_smi.h) defines GPUM_RSMI_ABI_USE_SYSTEM_HEADER so that this file takes its
 * types from rocm_smi.h, then checks each listed constant, offset and size, each enum's size
 * and each prototype of GPUM_RSMI_FUNCS against it.
 *
 * The enums are spelled as fixed-size integers here: rsmi_status_t holds
 * RSMI_STATUS_UNKNOWN_ERROR = 0xFFFFFFFF (an unsigned 4-byte enum) and rsmi_gpu_block_t holds
 * RSMI_GPU_BLOCK_RESERVED = 1 << 63 (an 8-byte enum), which the check pins.
 */
#ifndef GPUM_ROCM_SMI_ABI_H
#define GPUM_ROCM_SMI_ABI_H

#include <stddef.h>
#include <stdint.h>

/* X(name, value): the constants we use that fit an int, by rocm_smi.h's names. */
#define GPUM_RSMI_CONSTS(X)             \
  X(RSMI_STATUS_SUCCESS, 0)             \
  X(RSMI_STATUS_INVALID_ARGS, 1)        \
  X(RSMI_STATUS_NOT_SUPPORTED, 2)       \
  X(RSMI_STATUS_FILE_ERROR, 3)          \
  X(RSMI_STATUS_PERMISSION, 4)          \
  X(RSMI_STATUS_OUT_OF_RESOURCES, 5)    \
  X(RSMI_STATUS_INTERNAL_EXCEPTION, 6)  \
  X(RSMI_STATUS_INPUT_OUT_OF_BOUNDS, 7) \
  X(RSMI_STATUS_INIT_ERROR, 8)          \
  X(RSMI_STATUS_NOT_YET_IMPLEMENTED, 9) \
  X(RSMI_STATUS_NOT_FOUND, 10)          \
  X(RSMI_STATUS_INSUFFICIENT_SIZE, 11)  \
  X(RSMI_STATUS_INTERRUPT, 12)          \
  X(RSMI_STATUS_UNEXPECTED_SIZE, 13)    \
  X(RSMI_STATUS_NO_DATA, 14)            \
  X(RSMI_STATUS_UNEXPECTED_DATA, 15)    \
  X(RSMI_STATUS_BUSY, 16)               \
  X(RSMI_STATUS_REFCOUNT_OVERFLOW, 17)  \
  X(RSMI_MAX_NUM_FREQUENCIES, 32)       \
  X(RSMI_MEM_TYPE_VRAM, 0)              \
  X(RSMI_MEM_TYPE_VIS_VRAM, 1)          \
  X(RSMI_MEM_TYPE_GTT, 2)               \
  X(RSMI_TEMP_TYPE_EDGE, 0)             \
  X(RSMI_TEMP_TYPE_JUNCTION, 1)         \
  X(RSMI_TEMP_TYPE_MEMORY, 2)           \
  X(RSMI_TEMP_CURRENT, 0)               \
  X(RSMI_TEMP_CRITICAL, 5)              \
  X(RSMI_TEMP_EMERGENCY, 7)             \
  X(RSMI_CLK_TYPE_SYS, 0)               \
  X(RSMI_CLK_TYPE_MEM, 4)               \
  X(RSMI_GPU_BLOCK_UMC, 1)              \
  X(RSMI_SW_COMP_DRIVER, 0)             \
  X(RSMI_INIT_FLAG_ALL_GPUS, 1)

/* The one status that does not fit an int (checked by its own assertion). */
#define GPUM_RSMI_STATUS_UNKNOWN_ERROR 0xFFFFFFFFu

/* X(type, field, offset): every field of the structs we read, LP64. */
#define GPUM_RSMI_LAYOUT(X)                   \
  X(rsmi_frequencies_t, num_supported, 0)     \
  X(rsmi_frequencies_t, current, 4)           \
  X(rsmi_frequencies_t, frequency, 8)         \
  X(rsmi_error_count_t, correctable_err, 0)   \
  X(rsmi_error_count_t, uncorrectable_err, 8) \
  X(rsmi_process_info_t, process_id, 0)       \
  X(rsmi_process_info_t, pasid, 4)            \
  X(rsmi_process_info_t, vram_usage, 8)       \
  X(rsmi_process_info_t, sdma_usage, 16)      \
  X(rsmi_process_info_t, cu_occupancy, 24)

/* X(type, size): the structs and the enums as they are passed. */
#define GPUM_RSMI_SIZES(X)        \
  X(rsmi_frequencies_t, 264)      \
  X(rsmi_error_count_t, 16)       \
  X(rsmi_process_info_t, 32)      \
  X(rsmi_status_t, 4)             \
  X(rsmi_memory_type_t, 4)        \
  X(rsmi_temperature_metric_t, 4) \
  X(rsmi_clk_type_t, 4)           \
  X(rsmi_gpu_block_t, 8)          \
  X(rsmi_sw_component_t, 4)

#ifndef GPUM_RSMI_ABI_USE_SYSTEM_HEADER

#define GPUM__RSMI_ENUM(name, value) name = (value),
enum { GPUM_RSMI_CONSTS(GPUM__RSMI_ENUM) };
#undef GPUM__RSMI_ENUM
#define RSMI_STATUS_UNKNOWN_ERROR GPUM_RSMI_STATUS_UNKNOWN_ERROR

typedef uint32_t rsmi_status_t;
typedef uint32_t rsmi_memory_type_t;
typedef uint32_t rsmi_temperature_metric_t;
typedef uint32_t rsmi_clk_type_t;
typedef uint64_t rsmi_gpu_block_t;
typedef uint32_t rsmi_sw_component_t;

typedef struct {
  uint32_t num_supported;                       /* frequencies listed */
  uint32_t current;                             /* index of the current one */
  uint64_t frequency[RSMI_MAX_NUM_FREQUENCIES]; /* Hz */
} rsmi_frequencies_t;

typedef struct {
  uint64_t correctable_err;
  uint64_t uncorrectable_err;
} rsmi_error_count_t;

typedef struct {
  uint32_t process_id;
  uint32_t pasid;
  uint64_t vram_usage; /* bytes, over every GPU the process uses */
  uint64_t sdma_usage; /* microseconds */
  uint32_t cu_occupancy;
} rsmi_process_info_t;

#if defined(__LP64__)
#define GPUM__RSMI_OFF(type, field, off) \
  _Static_assert(offsetof(type, field) == (off), "offset of " #type "." #field);
GPUM_RSMI_LAYOUT(GPUM__RSMI_OFF)
#undef GPUM__RSMI_OFF
#define GPUM__RSMI_SIZE(type, size) _Static_assert(sizeof(type) == (size), "sizeof " #type);
GPUM_RSMI_SIZES(GPUM__RSMI_SIZE)
#undef GPUM__RSMI_SIZE
#endif

#endif /* !GPUM_RSMI_ABI_USE_SYSTEM_HEADER */

/* X(name, params): the functions, all returning rsmi_status_t. Optional ones are marked in
 * src/lib/device/rocm.c. */
#define GPUM_RSMI_FUNCS(X)                                                                       \
  X(rsmi_init, (uint64_t init_flags))                                                            \
  X(rsmi_shut_down, (void))                                                                      \
  X(rsmi_num_monitor_devices, (uint32_t * num_devices))                                          \
  X(rsmi_status_string, (rsmi_status_t status, const char **status_string))                      \
  X(rsmi_version_str_get, (rsmi_sw_component_t component, char *ver_str, uint32_t len))          \
  X(rsmi_dev_name_get, (uint32_t dv_ind, char *name, size_t len))                                \
  X(rsmi_dev_brand_get, (uint32_t dv_ind, char *brand, uint32_t len))                            \
  X(rsmi_dev_unique_id_get, (uint32_t dv_ind, uint64_t * id))                                    \
  X(rsmi_dev_pci_id_get, (uint32_t dv_ind, uint64_t * bdfid))                                    \
  X(rsmi_dev_memory_total_get, (uint32_t dv_ind, rsmi_memory_type_t mem_type, uint64_t * total)) \
  X(rsmi_dev_memory_usage_get, (uint32_t dv_ind, rsmi_memory_type_t mem_type, uint64_t * used))  \
  X(rsmi_dev_busy_percent_get, (uint32_t dv_ind, uint32_t * busy_percent))                       \
  X(rsmi_dev_memory_busy_percent_get, (uint32_t dv_ind, uint32_t * busy_percent))                \
  X(rsmi_dev_temp_metric_get, (uint32_t dv_ind, uint32_t sensor_type,                            \
                               rsmi_temperature_metric_t metric, int64_t * temperature))         \
  X(rsmi_dev_power_ave_get, (uint32_t dv_ind, uint32_t sensor_ind, uint64_t * power))            \
  X(rsmi_dev_power_cap_get, (uint32_t dv_ind, uint32_t sensor_ind, uint64_t * cap))              \
  X(rsmi_dev_gpu_clk_freq_get,                                                                   \
    (uint32_t dv_ind, rsmi_clk_type_t clk_type, rsmi_frequencies_t * f))                         \
  X(rsmi_dev_ecc_enabled_get, (uint32_t dv_ind, uint64_t * enabled_blocks))                      \
  X(rsmi_dev_ecc_count_get, (uint32_t dv_ind, rsmi_gpu_block_t block, rsmi_error_count_t * ec))  \
  X(rsmi_compute_process_info_get, (rsmi_process_info_t * procs, uint32_t * num_items))          \
  X(rsmi_compute_process_info_by_pid_get, (uint32_t pid, rsmi_process_info_t * proc))            \
  X(rsmi_compute_process_gpus_get, (uint32_t pid, uint32_t * dv_indices, uint32_t * num_devices))

#define GPUM__RSMI_FN(name, params) typedef rsmi_status_t(*gpum_##name##_fn) params;
GPUM_RSMI_FUNCS(GPUM__RSMI_FN)
#undef GPUM__RSMI_FN

#endif /* GPUM_ROCM_SMI_ABI_H */
