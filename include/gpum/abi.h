/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The layout of the structs that language bindings mirror (the Python package declares them
 * with ctypes): their sizes and their fields' offsets as this build of libgpum has them, so a
 * binding can check at load or in its tests that it agrees with the library it loaded.
 * Thread-safe; no state.
 */
#ifndef GPUM_ABI_H
#define GPUM_ABI_H

#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* sizeof(type) for a struct named as in the headers ("gpum_reservation_t"), -1 when unknown. */
GPUM_API long gpum_abi_sizeof(const char *type);
/* offsetof(type, field), -1 when unknown. */
GPUM_API long gpum_abi_offsetof(const char *type, const char *field);

#ifdef __cplusplus
}
#endif

#endif /* GPUM_ABI_H */
