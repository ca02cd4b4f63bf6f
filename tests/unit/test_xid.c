/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the Xid catalogue: the table is sorted and complete for the Xids the issue
 * names, every entry has its texts, the critical ones are exactly those that need a reset or
 * service, meanings of well-known Xids, and the generic entry for an unknown Xid.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/xid.h>

static void test_xid_table_sorted_and_filled(void **state) {
  (void)state;
  size_t n = 0;
  const gpum_xid_info_t *t = gpum_xid_table(&n);
  assert_true(n >= 20);
  for (size_t i = 0; i < n; i++) {
    if (i > 0)
      assert_true(t[i - 1].xid < t[i].xid);
    assert_true(t[i].known);
    assert_non_null(t[i].name);
    assert_non_null(t[i].description);
    assert_non_null(t[i].action);
    assert_true(strlen(t[i].name) > 3 && strlen(t[i].name) < 64);
    assert_true(strlen(t[i].description) > 10);
    assert_true(strlen(t[i].action) > 10);
    /* Lookup finds each entry. */
    gpum_xid_info_t x = gpum_xid_info(t[i].xid);
    assert_int_equal(x.xid, t[i].xid);
    assert_string_equal(x.name, t[i].name);
  }
}

static void test_xid_issue_list_known(void **state) {
  (void)state;
  static const unsigned wanted[] = {13, 31, 43, 45, 48, 61, 62,  63, 64,
                                    68, 74, 79, 92, 94, 95, 119, 120};
  for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
    gpum_xid_info_t x = gpum_xid_info(wanted[i]);
    if (!x.known)
      fail_msg("Xid %u missing from the table", wanted[i]);
  }
}

static void test_xid_critical_set(void **state) {
  (void)state;
  static const unsigned critical[] = {48, 62, 64, 74, 79, 94, 95, 119, 120};
  size_t n = 0, ncrit = 0;
  const gpum_xid_info_t *t = gpum_xid_table(&n);
  for (size_t i = 0; i < sizeof critical / sizeof critical[0]; i++)
    assert_true(gpum_xid_info(critical[i]).critical);
  for (size_t i = 0; i < n; i++)
    ncrit += t[i].critical;
  assert_int_equal(ncrit, sizeof critical / sizeof critical[0]);
  /* Application-caused Xids and recovery records are not critical. */
  assert_false(gpum_xid_info(13).critical);
  assert_false(gpum_xid_info(31).critical);
  assert_false(gpum_xid_info(43).critical);
  assert_false(gpum_xid_info(45).critical);
  assert_false(gpum_xid_info(63).critical);
}

static void test_xid_meanings(void **state) {
  (void)state;
  assert_string_equal(gpum_xid_info(13).name, "Graphics Engine Exception");
  assert_string_equal(gpum_xid_info(31).name, "GPU memory page fault");
  assert_string_equal(gpum_xid_info(43).name, "GPU stopped processing");
  assert_string_equal(gpum_xid_info(48).name, "Double-bit ECC error");
  assert_string_equal(gpum_xid_info(74).name, "NVLink error");
  assert_string_equal(gpum_xid_info(79).name, "GPU has fallen off the bus");
  assert_string_equal(gpum_xid_info(94).name, "Contained ECC error");
  assert_string_equal(gpum_xid_info(95).name, "Uncontained ECC error");
  assert_string_equal(gpum_xid_info(119).name, "GSP RPC timeout");
}

static void test_xid_unknown(void **state) {
  (void)state;
  static const unsigned unknown[] = {0, 1, 14, 80, 999, 0xffffffffu};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    gpum_xid_info_t x = gpum_xid_info(unknown[i]);
    assert_int_equal(x.xid, unknown[i]);
    assert_false(x.known);
    assert_false(x.critical);
    assert_string_equal(x.name, "unknown Xid");
    assert_non_null(strstr(x.action, "Xid catalogue"));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_xid_table_sorted_and_filled),
      cmocka_unit_test(test_xid_issue_list_known),
      cmocka_unit_test(test_xid_critical_set),
      cmocka_unit_test(test_xid_meanings),
      cmocka_unit_test(test_xid_unknown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
