/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libamdhip64.so.5 of the simulator (docs/sim.md): a filter library (ld --filter, DT_FILTER)
 * whose every symbol the dynamic loader resolves in libgpum_sim.so, the filtee, found beside
 * it. A program linked with -lamdhip64 against it records libamdhip64.so.5 as a real HIP
 * program does, and runs on the simulator unchanged.
 *
 * The definitions below exist only so that programs can link against the filter: at run time
 * the loader binds each name to libgpum_sim.so's definition (src/sim/hip.c), and these are never
 * called. Should the filtee be missing, the loader refuses to start the program.
 */
#include "hip_abi.h"

#define STUB(name, params)                                        \
  __attribute__((visibility("default"))) hipError_t name params { \
    return hipErrorNotInitialized;                                \
  }
#pragma GCC diagnostic ignored "-Wunused-parameter"
/* The stubs take the real prototypes and use none of their parameters. */
// NOLINTBEGIN(misc-unused-parameters)
GPUM_HIP_FUNCS(STUB)
#define STUB_STR(name, params)                                     \
  __attribute__((visibility("default"))) const char *name params { \
    return "hipErrorNotInitialized";                               \
  }
GPUM_HIP_FUNCS_STR(STUB_STR)
// NOLINTEND(misc-unused-parameters)
