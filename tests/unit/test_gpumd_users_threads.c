/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The uid -> user name cache (src/gpumd/util/users.h): a uid is shown as its number until the
 * resolver thread has named it (the caller never waits on a lookup), then by name; a uid with
 * no passwd entry stays a number; a full cache makes room for new uids; freeing the cache with
 * lookups queued neither waits for them nor leaks. Also under ThreadSanitizer (_threads).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <pwd.h>

#include <cmocka.h>

#include "users.h"

/* A uid with no passwd entry here (the highest below (uid_t)-1 that has none). */
static unsigned nameless_uid(void) {
  for (unsigned uid = 4000000000u; uid > 3999990000u; uid--)
    if (getpwuid(uid) == NULL)
      return uid;
  fail_msg("every uid tried has a name");
  return 0;
}

static void test_named_after_resolve(void **state) {
  (void)state;
  gpumd_users_t *u = NULL;
  assert_int_equal(gpumd_users_new(16, &u), 0);
  char name[GPUMD_USER_BUFSZ];
  /* Unknown at first: queued, not looked up on this thread. */
  gpumd_users_name(u, 0, name);
  gpumd_users_wait(u);
  assert_true(gpumd_users_name(u, 0, name));
  assert_string_equal(name, getpwuid(0)->pw_name);
  gpumd_users_free(u);
}

static void test_nameless_uid_stays_a_number(void **state) {
  (void)state;
  gpumd_users_t *u = NULL;
  assert_int_equal(gpumd_users_new(16, &u), 0);
  unsigned uid = nameless_uid();
  char name[GPUMD_USER_BUFSZ] = "x";
  assert_false(gpumd_users_name(u, uid, name));
  assert_string_equal(name, "");
  gpumd_users_wait(u);
  assert_false(gpumd_users_name(u, uid, name)); /* resolved: it has none */
  assert_string_equal(name, "");
  gpumd_users_wait(u); /* nothing queued again */
  gpumd_users_free(u);
}

static void test_full_cache_makes_room(void **state) {
  (void)state;
  gpumd_users_t *u = NULL;
  assert_int_equal(gpumd_users_new(2, &u), 0);
  char name[GPUMD_USER_BUFSZ];
  unsigned nameless = nameless_uid();
  gpumd_users_name(u, 0, name);
  gpumd_users_name(u, nameless, name);
  gpumd_users_wait(u);
  assert_true(gpumd_users_name(u, 0, name)); /* 0 is now the most recent */
  gpumd_users_name(u, nameless - 1, name);   /* takes the nameless uid's place */
  gpumd_users_wait(u);
  assert_true(gpumd_users_name(u, 0, name));
  assert_string_equal(name, getpwuid(0)->pw_name);
  gpumd_users_free(u);
}

static void test_free_with_lookups_queued(void **state) {
  (void)state;
  gpumd_users_t *u = NULL;
  assert_int_equal(gpumd_users_new(64, &u), 0);
  char name[GPUMD_USER_BUFSZ];
  for (unsigned uid = 0; uid < 64; uid++)
    gpumd_users_name(u, uid, name);
  gpumd_users_free(u); /* the resolver frees it when it sees stop */
  assert_false(gpumd_users_name(NULL, 0, name));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_named_after_resolve),
      cmocka_unit_test(test_nameless_uid_stays_a_number),
      cmocka_unit_test(test_full_cache_makes_room),
      cmocka_unit_test(test_free_with_lookups_queued),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
