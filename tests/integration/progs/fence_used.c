/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fence region as gpum run and gpumd see it (include/gpum/fence.h), for
 * tests/integration/test_enforce_used.sh:
 *
 *   fence_used create NAME   creates the region NAME (4 GiB per device), as gpum run --enforce
 *                            does before the job starts; it stays after this program exits
 *   fence_used show NAME     opens it read-only, as gpumd does, and prints
 *                            "flags F managed_pid P ipc_pid Q" (gpum_fence_used_flags)
 *   fence_used rm NAME       removes its name
 *   fence_used prefix SCOPE  prints the prefix of the regions of the gpumd at socket SCOPE
 *                            (gpum_fence_prefix): a test's own regions among all of /dev/shm
 *
 * Exits 0, or 1 with the library's detail on stderr.
 */
#include <stdio.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/fence.h>

static int fail(const char *what, int rc) {
  fprintf(stderr, "fence_used: %s: %s (%s)\n", what, gpum_last_error(), gpum_err_name(rc));
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: see the comment at the top of fence_used.c\n");
    return 2;
  }
  const char *name = argv[2];
  gpum_fence *f = NULL;
  int rc;
  if (!strcmp(argv[1], "create")) {
    gpum_fence_opts_t o = {.limit = 4ULL << 30};
    if ((rc = gpum_fence_create(name, &o, &f)) != 0)
      return fail("create", rc);
  } else if (!strcmp(argv[1], "show")) {
    if ((rc = gpum_fence_open(name, false, &f)) != 0)
      return fail("open", rc);
    int mpid = -1, ipid = -1;
    unsigned flags = gpum_fence_used_flags(f, &mpid, &ipid);
    printf("flags %u managed_pid %d ipc_pid %d\n", flags, mpid, ipid);
  } else if (!strcmp(argv[1], "prefix")) {
    char prefix[GPUM_FENCE_NAME_MAX];
    if ((rc = gpum_fence_prefix(prefix, sizeof prefix, name)) != 0)
      return fail("prefix", rc);
    printf("%s\n", prefix);
  } else if (!strcmp(argv[1], "rm")) {
    if ((rc = gpum_fence_unlink(name)) != 0)
      return fail("rm", rc);
  } else {
    fprintf(stderr, "usage: see the comment at the top of fence_used.c\n");
    return 2;
  }
  gpum_fence_close(f);
  return 0;
}
