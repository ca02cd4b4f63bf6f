/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test program: built against libgpum.so with nothing but the umbrella header, as a user's
 * program would be. Prints the header's version and the library's, and exits 1 when they
 * differ, so a stale header or library is caught. usage: lib_umbrella
 */
#include <stdio.h>
#include <string.h>

#include <gpum/gpum.h>

int main(void) {
  char size[GPUM_SIZE_BUFSZ];
  printf("header %s library %s number %d %s\n", GPUM_VERSION_STRING, gpum_version(),
         gpum_version_number(), gpum_size_format(8ull << 30, size, sizeof size));
  return strcmp(GPUM_VERSION_STRING, gpum_version()) == 0 &&
                 gpum_version_number() == GPUM_VERSION_NUMBER
             ? 0
             : 1;
}
