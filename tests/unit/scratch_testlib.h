/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A scratch directory per test, for cmocka's setup and teardown: made under /tmp with the
 * test program's name (mkdtemp), handed to the test as its state, removed with all it holds.
 */
#ifndef GPUM_SCRATCH_TESTLIB_H
#define GPUM_SCRATCH_TESTLIB_H

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static int scratch_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static int setup_dir(void **state) {
  char *dir = test_malloc(128);
  snprintf(dir, 128, "/tmp/gpum-%s-XXXXXX", program_invocation_short_name);
  if (mkdtemp(dir) == NULL) {
    test_free(dir);
    return -1;
  }
  *state = dir;
  return 0;
}

static int teardown_dir(void **state) {
  char *dir = *state;
  nftw(dir, scratch_rm_one, 16, FTW_DEPTH | FTW_PHYS);
  test_free(dir);
  return 0;
}

#endif /* GPUM_SCRATCH_TESTLIB_H */
