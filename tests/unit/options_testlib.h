/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the options tests share (test_options.c, test_options_alias.c): an error check that
 * names the code and a part of the detail, a fresh configuration, and a scratch directory per
 * run (made and removed by the group's setup and teardown) for the YAML files they load.
 * Include after cmocka.h.
 */
#ifndef GPUM_OPTIONS_TESTLIB_H
#define GPUM_OPTIONS_TESTLIB_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <gpum/error.h>
#include <gpum/options.h>

/* Fails unless got is want and, when part is not NULL, the detail message holds part. */
static void expect_err(int got, int want, const char *part) {
  if (got != want)
    fail_msg("got %s (%s), expected %s", gpum_err_name(got), gpum_last_error(),
             gpum_err_name(want));
  if (part != NULL && strstr(gpum_last_error(), part) == NULL)
    fail_msg("detail '%s' lacks '%s'", gpum_last_error(), part);
}

static gpum_config_t *new_config(void) {
  gpum_config_t *cfg = NULL;
  if (gpum_config_new(&cfg) != 0)
    fail_msg("gpum_config_new: %s", gpum_last_error());
  return cfg;
}

/* A scratch directory per test run, removed by the teardown. */
static char scratch[64];

static int make_scratch(void **state) {
  (void)state;
  snprintf(scratch, sizeof scratch, "/tmp/gpum-test-options-XXXXXX");
  return mkdtemp(scratch) ? 0 : -1;
}

static int remove_scratch(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
  return system(cmd) == 0 ? 0 : -1;
}

/* Writes content to a new YAML file in the scratch directory; returns its path (static). */
static const char *write_yaml(const char *content) {
  static char path[128];
  snprintf(path, sizeof path, "%s/cfg-XXXXXX.yaml", scratch);
  int fd = mkstemps(path, 5);
  assert_true(fd >= 0);
  size_t n = strlen(content);
  assert_int_equal(write(fd, content, n), (ssize_t)n);
  close(fd);
  return path;
}

#endif /* GPUM_OPTIONS_TESTLIB_H */
