/* SPDX-License-Identifier: Apache-2.0 */
/* The public face of the OS layer's clocks (gpum/clock.h). */
#include <gpum/clock.h>

#include "os_internal.h"

uint64_t gpum_clock_mono_ns(void) {
  return gpum__os_mono_ns();
}

uint64_t gpum_clock_real_ns(void) {
  return gpum__os_real_ns();
}
