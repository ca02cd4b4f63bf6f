/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Build-time check of our ROCm SMI declarations (src/abi/rocm_smi_abi.h) against the real
 * rocm_smi/rocm_smi.h (Debian's librocm-smi-dev). Compiled only where that header is
 * installed. Every check is a static assertion, so a mismatch fails the build; running the
 * program only reports what was checked.
 */
#include <rocm_smi/rocm_smi.h>
#include <stdio.h>

#define GPUM_RSMI_ABI_USE_SYSTEM_HEADER
#include "rocm_smi_abi.h"

#define CHECK_CONST(name, value) _Static_assert((long long)(name) == (value), "constant " #name);
GPUM_RSMI_CONSTS(CHECK_CONST)
_Static_assert((unsigned long long)RSMI_STATUS_UNKNOWN_ERROR == GPUM_RSMI_STATUS_UNKNOWN_ERROR,
               "constant RSMI_STATUS_UNKNOWN_ERROR");
#define CHECK_FIELD(type, field, off) \
  _Static_assert(offsetof(type, field) == (off), "offset of " #type "." #field);
GPUM_RSMI_LAYOUT(CHECK_FIELD)
#define CHECK_SIZE(type, size) _Static_assert(sizeof(type) == (size), "sizeof " #type);
GPUM_RSMI_SIZES(CHECK_SIZE)
/* Our prototypes, spelled with rocm_smi.h's types, must be the very types it declares. */
#define CHECK_FUNC(name, params)                                                    \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&name), gpum_##name##_fn), \
                 "prototype of " #name);
GPUM_RSMI_FUNCS(CHECK_FUNC)

#define COUNT(...) +1
int main(void) {
  printf("checked against rocm_smi.h: %d constants, %d fields, %d sizes, %d prototypes\n",
         1 GPUM_RSMI_CONSTS(COUNT), 0 GPUM_RSMI_LAYOUT(COUNT), 0 GPUM_RSMI_SIZES(COUNT),
         0 GPUM_RSMI_FUNCS(COUNT));
  return 0;
}
