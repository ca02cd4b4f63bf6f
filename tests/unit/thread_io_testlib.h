/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A counter of the calling thread's I/O from /proc/thread-self/io ("syscr": read calls,
 * "syscw": write calls), for tests that assert how many system calls some code makes. Reading
 * it is itself a read call: measure that once and allow for it.
 */
#ifndef GPUM_THREAD_IO_TESTLIB_H
#define GPUM_THREAD_IO_TESTLIB_H

#include <stdio.h>
#include <string.h>

static long thread_io(const char *field) {
  FILE *f = fopen("/proc/thread-self/io", "r");
  assert_non_null(f);
  char line[128];
  long n = -1;
  size_t len = strlen(field);
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, field, len) && line[len] == ':' && sscanf(line + len + 1, "%ld", &n) == 1)
      break;
  fclose(f);
  assert_true(n >= 0);
  return n;
}

#endif /* GPUM_THREAD_IO_TESTLIB_H */
