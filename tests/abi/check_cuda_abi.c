/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Build-time check of our CUDA declarations (src/abi/cuda_abi.h) against the real cuda.h.
 * Compiled only where cuda.h is installed. Every check is a static assertion, so a mismatch
 * fails the build; running the program only reports what was checked.
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdio.h>

#define GPUM_CUDA_ABI_USE_SYSTEM_HEADER
#include "cuda_abi.h"

#define CHECK_CONST(name, value) _Static_assert((long long)(name) == (value), "constant " #name);
GPUM_CUDA_CONSTS(CHECK_CONST)
#define CHECK_FIELD(type, field, off) \
  _Static_assert(offsetof(type, field) == (off), "offset of " #type "." #field);
GPUM_CUDA_LAYOUT(CHECK_FIELD)
#define CHECK_SIZE(type, size) _Static_assert(sizeof(type) == (size), "sizeof " #type);
GPUM_CUDA_SIZES(CHECK_SIZE)
/* Our prototypes, spelled with cuda.h's types, must be the very types cuda.h declares. */
#define CHECK_FUNC(name, params)                                                    \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&name), gpum_##name##_fn), \
                 "prototype of " #name);
GPUM_CUDA_FUNCS(CHECK_FUNC)
/* The names cuda.h does not declare by default: against cudaTypedefs.h's PFN types. */
#define CHECK_OTHER(name, pfn, params) \
  _Static_assert(__builtin_types_compatible_p(pfn, gpum_##name##_fn), "prototype of " #name);
GPUM_CUDA_FUNCS_OTHER(CHECK_OTHER)
_Static_assert(sizeof(CUmemPool_attribute) == sizeof(int), "CUmemPool_attribute");
/* Types our header declares as int must have int's size in cuda.h. */
_Static_assert(sizeof(CUdevice_attribute) == sizeof(int), "CUdevice_attribute");
_Static_assert(sizeof(CUmemAllocationGranularity_flags) == sizeof(int), "granularity flags");
_Static_assert(sizeof(CUdriverProcAddressQueryResult) == sizeof(int), "query result");

#define COUNT(...) +1
int main(void) {
  printf("checked against CUDA %d: %d constants, %d fields, %d sizes, %d prototypes\n",
         CUDA_VERSION, 0 GPUM_CUDA_CONSTS(COUNT), 0 GPUM_CUDA_LAYOUT(COUNT),
         0 GPUM_CUDA_SIZES(COUNT), 0 GPUM_CUDA_FUNCS(COUNT) GPUM_CUDA_FUNCS_OTHER(COUNT));
  return 0;
}
