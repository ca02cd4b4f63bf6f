/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Build-time check of our Level Zero declarations (src/abi/ze_abi.h) against the real
 * level_zero/ze_api.h and level_zero/zes_api.h (Debian's libze-dev 1.8.12). Compiled only where
 * those headers are installed. Every check is a static assertion, so a mismatch fails the
 * build; running the program only reports what was checked. zesInit, zesDriverGet and
 * zesDeviceGet are newer than these headers and are not checked (ze_abi.h says why).
 */
#include <level_zero/ze_api.h>
#include <level_zero/zes_api.h>
#include <stdio.h>

#define GPUM_ZE_ABI_USE_SYSTEM_HEADER
#include "ze_abi.h"

#define CHECK_CONST(name, value) _Static_assert((long long)(name) == (value), "constant " #name);
GPUM_ZE_CONSTS(CHECK_CONST)
#define CHECK_FIELD(type, field, off) \
  _Static_assert(offsetof(type, field) == (off), "offset of " #type "." #field);
GPUM_ZE_LAYOUT(CHECK_FIELD)
#define CHECK_SIZE(type, size) _Static_assert(sizeof(type) == (size), "sizeof " #type);
GPUM_ZE_SIZES(CHECK_SIZE)
/* Our prototypes, spelled with the headers' types, must be the very types they declare. */
#define CHECK_FUNC(name, params)                                                    \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&name), gpum_##name##_fn), \
                 "prototype of " #name);
GPUM_ZE_FUNCS(CHECK_FUNC)
/* The handles Sysman takes for a device are the core API's (the ZES_ENABLE_SYSMAN path). */
_Static_assert(__builtin_types_compatible_p(zes_device_handle_t, ze_device_handle_t),
               "zes_device_handle_t is ze_device_handle_t");

#define COUNT(...) +1
int main(void) {
  printf("checked against ze_api.h/zes_api.h: %d constants, %d fields, %d sizes, %d prototypes\n",
         0 GPUM_ZE_CONSTS(COUNT), 0 GPUM_ZE_LAYOUT(COUNT), 0 GPUM_ZE_SIZES(COUNT),
         0 GPUM_ZE_FUNCS(COUNT));
  return 0;
}
