/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test program: checks libgpum's CUDA loader against the driver it finds (the simulated one in
 * the tests): it loads, knows it is simulated, resolves the optional VMM and error-name calls,
 * enters the primary context of device 0, round-trips data through device memory, maps an
 * impossible allocation to GPUM_EDEVOOM with the CUDA error name in the detail, and releases
 * the context. Prints "ok <what>" per check and exits 1 at the first failure.
 */
#include <stdio.h>
#include <string.h>

#include <gpum/error.h>

#include "../../../src/lib/device/cuda_loader.h"

#define CHECK(cond, what)                                \
  do {                                                   \
    if (!(cond)) {                                       \
      printf("FAIL %s (%s)\n", what, gpum_last_error()); \
      return 1;                                          \
    }                                                    \
    printf("ok %s\n", what);                             \
  } while (0)

int main(void) {
  gpum__cuda_t *cu = NULL;
  CHECK(gpum__cuda_load(NULL, &cu) == 0, "load");
  CHECK(cu->simulated, "simulated");
  CHECK(cu->driver_version > 0, "driver version");
  CHECK(cu->cuGetErrorName && cu->cuMemCreate && cu->cuMemAddressReserve, "optional symbols");
  CHECK(!strcmp(gpum__cuda_error_name(cu, CUDA_ERROR_OUT_OF_MEMORY), "CUDA_ERROR_OUT_OF_MEMORY"),
        "error name from the driver");
  CUcontext ctx = NULL;
  CHECK(gpum__cuda_context_enter(cu, 0, &ctx) == 0 && ctx, "primary context");
  CUcontext cur = NULL;
  CHECK(cu->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ctx, "context is current");
  CUdeviceptr p = 0;
  char in[4096], out[4096];
  for (size_t i = 0; i < sizeof in; i++)
    in[i] = (char)(i * 7);
  memset(out, 0, sizeof out);
  CHECK(gpum__cuda_check(cu, cu->cuMemAlloc_v2(&p, sizeof in), "cuMemAlloc_v2") == 0, "alloc");
  CHECK(cu->cuMemcpyHtoD_v2(p, in, sizeof in) == CUDA_SUCCESS &&
            cu->cuMemcpyDtoH_v2(out, p, sizeof out) == CUDA_SUCCESS && !memcmp(in, out, sizeof in),
        "copy round trip");
  CHECK(cu->cuMemFree_v2(p) == CUDA_SUCCESS, "free");
  CUdeviceptr big = 0;
  int rc = gpum__cuda_check(cu, cu->cuMemAlloc_v2(&big, (size_t)1 << 50), "cuMemAlloc_v2(1 PiB)");
  CHECK(rc == GPUM_EDEVOOM && strstr(gpum_last_error(), "CUDA_ERROR_OUT_OF_MEMORY") &&
            strstr(gpum_last_error(), "1 PiB"),
        "out of memory maps to EDEVOOM");
  CHECK(gpum__cuda_context_enter(cu, 999, NULL) == GPUM_ENODEV, "bad ordinal is ENODEV");
  CHECK(gpum__cuda_context_release(cu, 0) == 0, "release");
  gpum__cuda_unload(cu);
  return 0;
}
