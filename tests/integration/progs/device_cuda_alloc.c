/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test program: loads the CUDA driver through libgpum's loader (the simulated one when
 * GPUM_SIM_NODE is set), allocates BYTES on device ORDINAL, writes its pid to READY_FILE and
 * then holds the memory until killed. usage: device_cuda_alloc ORDINAL BYTES READY_FILE
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <gpum/error.h>

#include "../../../src/lib/device/cuda_loader.h"

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: device_cuda_alloc ORDINAL BYTES READY_FILE\n");
    return 2;
  }
  int ordinal = (int)strtol(argv[1], NULL, 10);
  size_t bytes = (size_t)strtoull(argv[2], NULL, 10);
  gpum__cuda_t *cu;
  int rc = gpum__cuda_load(NULL, &cu);
  if (rc == 0)
    rc = gpum__cuda_context_enter(cu, ordinal, NULL);
  CUdeviceptr p = 0;
  if (rc == 0)
    rc = gpum__cuda_check(cu, cu->cuMemAlloc_v2(&p, bytes), "cuMemAlloc_v2");
  if (rc) {
    fprintf(stderr, "device_cuda_alloc: %s: %s\n", gpum_err_name(rc), gpum_last_error());
    return 1;
  }
  FILE *f = fopen(argv[3], "w");
  if (!f)
    return 1;
  fprintf(f, "%d\n", (int)getpid());
  fclose(f);
  for (;;)
    pause();
}
