/* SPDX-License-Identifier: Apache-2.0 */
/* The library's version, as CMake's project() gives it (include/gpum/version.h.in). */
#include <gpum/version.h>

const char *gpum_version(void) {
  return GPUM_VERSION_STRING;
}

int gpum_version_number(void) {
  return GPUM_VERSION_NUMBER;
}
