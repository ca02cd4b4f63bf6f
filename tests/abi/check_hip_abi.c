/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Build-time check of our HIP runtime declarations (src/abi/hip_abi.h) against the real
 * hip/hip_runtime_api.h (Debian's libamdhip64-dev, HIP 5.2.3). The header is meant for hipcc,
 * but its host API compiles as plain C once the platform is named (__HIP_PLATFORM_AMD__, set
 * by tests/CMakeLists.txt), so every constant, field, size and prototype we declare is checked
 * here. Compiled only where that header is installed. Every check is a static assertion, so a
 * mismatch fails the build; running the program only reports what was checked.
 */
#include <hip/hip_runtime_api.h>
#include <stdio.h>

#define GPUM_HIP_ABI_USE_SYSTEM_HEADER
#include "hip_abi.h"

#define CHECK_CONST(name, value) _Static_assert((long long)(name) == (value), "constant " #name);
GPUM_HIP_CONSTS(CHECK_CONST)
/* The older name of the out-of-memory code. */
_Static_assert(hipErrorMemoryAllocation == hipErrorOutOfMemory, "hipErrorMemoryAllocation");
#define CHECK_FIELD(type, field, off) \
  _Static_assert(offsetof(type, field) == (off), "offset of " #type "." #field);
GPUM_HIP_LAYOUT(CHECK_FIELD)
#define CHECK_SIZE(type, size) _Static_assert(sizeof(type) == (size), "sizeof " #type);
GPUM_HIP_SIZES(CHECK_SIZE)
/* The handles are pointers to the header's own struct tags. */
_Static_assert(__builtin_types_compatible_p(hipStream_t, struct ihipStream_t *), "hipStream_t");
_Static_assert(__builtin_types_compatible_p(hipMemPool_t, struct ihipMemPoolHandle_t *),
               "hipMemPool_t");
/* Our prototypes, spelled with the header's types, must be the very types it declares. */
#define CHECK_FUNC(name, params)                                                    \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&name), gpum_##name##_fn), \
                 "prototype of " #name);
GPUM_HIP_FUNCS(CHECK_FUNC)
GPUM_HIP_FUNCS_STR(CHECK_FUNC)
/* The version the simulator reports is this header's. */
_Static_assert(HIP_VERSION == GPUM_HIP_SIM_VERSION, "HIP_VERSION");

#define COUNT(...) +1
int main(void) {
  printf("checked against hip/hip_runtime_api.h (HIP %d.%d.%d): %d constants, %d fields, "
         "%d sizes, %d prototypes\n",
         HIP_VERSION_MAJOR, HIP_VERSION_MINOR, HIP_VERSION_PATCH, 1 GPUM_HIP_CONSTS(COUNT),
         0 GPUM_HIP_LAYOUT(COUNT), 0 GPUM_HIP_SIZES(COUNT),
         0 GPUM_HIP_FUNCS(COUNT) GPUM_HIP_FUNCS_STR(COUNT));
  return 0;
}
