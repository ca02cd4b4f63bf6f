/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test program: a pool on a CUDA memory source, driven step by step from a test script so that
 * another process can look at the device between steps. usage: pool_cuda_steps SOURCE DEVICE
 * SOURCE is "cuda", "cuda-vmm" (expandable segments) or "pinned". It allocates 1 MiB and 30 MiB
 * and prints "allocated <reserved bytes>", then waits for a line on stdin; frees both and prints
 * "cached <reserved bytes>"; waits; trims to 0 and prints "trimmed <released bytes>"; waits;
 * destroys the pool and the source and prints "done". Errors: "error: <CODE>: <detail>" on
 * stderr and exit status 1. Only the public API is used.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/pool.h>

#define MiB (1024ull * 1024)

static int fail(int rc) {
  fprintf(stderr, "error: %s: %s\n", gpum_err_name(rc), gpum_last_error());
  return 1;
}

static void step(const char *what, uint64_t value) {
  char line[64];
  printf("%s %" PRIu64 "\n", what, value);
  fflush(stdout);
  if (!fgets(line, sizeof line, stdin))
    exit(3); /* the script went away */
}

static uint64_t reserved(gpum_pool_t *pool) {
  gpum_pool_stats_t st;
  return gpum_pool_stats(pool, &st) == 0 ? st.reserved_bytes.current : UINT64_MAX;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: pool_cuda_steps cuda|cuda-vmm|pinned DEVICE\n");
    return 2;
  }
  char *end;
  long dev = strtol(argv[2], &end, 10);
  if (*end || end == argv[2]) {
    fprintf(stderr, "pool_cuda_steps: bad device '%s'\n", argv[2]);
    return 2;
  }
  gpum_pool_source_t *src;
  int rc = gpum_pool_source_open(argv[1], (int)dev, 0, &src);
  if (rc)
    return fail(rc);
  gpum_pool_opts_t o;
  gpum_pool_opts_init(&o);
  o.name = "steps";
  o.device = (int)dev;
  o.expandable_segments = !strcmp(argv[1], "cuda-vmm");
  gpum_pool_t *pool;
  if ((rc = gpum_pool_create(src, &o, &pool)) != 0)
    return fail(rc);
  gpum_devptr_t a, b;
  if ((rc = gpum_pool_alloc(pool, 1 * MiB, 0, &a)) != 0 ||
      (rc = gpum_pool_alloc(pool, 30 * MiB, 0, &b)) != 0)
    return fail(rc);
  step("allocated", reserved(pool));
  if ((rc = gpum_pool_free(pool, a)) != 0 || (rc = gpum_pool_free(pool, b)) != 0)
    return fail(rc);
  step("cached", reserved(pool));
  uint64_t released = 0;
  if ((rc = gpum_pool_trim(pool, 0, &released)) != 0)
    return fail(rc);
  step("trimmed", released);
  gpum_pool_destroy(pool);
  gpum_pool_source_destroy(src);
  printf("done\n");
  return 0;
}
