/* SPDX-License-Identifier: Apache-2.0 */
/* fail(): what a test program says when a check fails, with its pid (forked children print
 * too), before it exits 1. One definition for the programs that include this. */
#ifndef GPUM_TESTS_PROG_FAIL_H
#define GPUM_TESTS_PROG_FAIL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL (pid %d): ", (int)getpid());
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

#endif
