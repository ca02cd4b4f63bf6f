/* SPDX-License-Identifier: Apache-2.0 */
/* The ROCm SMI backend's pure parts: status mapping, BDF decoding, the current clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <gpum/error.h>

#include "device/rocm_internal.h"

static void test_map(void **state) {
  (void)state;
  assert_int_equal(gpum__rsmi_map_error(RSMI_STATUS_SUCCESS), 0);
  assert_int_equal(gpum__rsmi_map_error(RSMI_STATUS_BUSY), GPUM_EAGAIN);
  assert_int_equal(gpum__rsmi_map_error(RSMI_STATUS_INTERRUPT), GPUM_EAGAIN);
  assert_int_equal(gpum__rsmi_map_error(RSMI_STATUS_UNKNOWN_ERROR), GPUM_ELOST);
  assert_int_equal(gpum__rsmi_map_error(RSMI_STATUS_NOT_SUPPORTED), GPUM_ENOTSUP);
  assert_int_equal(gpum__rsmi_map_error(RSMI_STATUS_INIT_ERROR), GPUM_EDRIVER);
  assert_int_equal(gpum__rsmi_map_error(RSMI_STATUS_INVALID_ARGS), GPUM_EINVAL);
  assert_int_equal(gpum__rsmi_map_error(RSMI_STATUS_PERMISSION), GPUM_EPERM);
  assert_int_equal(gpum__rsmi_map_error(RSMI_STATUS_FILE_ERROR), GPUM_EIO);
  assert_true(gpum__rsmi_is_transient(RSMI_STATUS_BUSY));
  assert_false(gpum__rsmi_is_transient(RSMI_STATUS_UNKNOWN_ERROR));
  assert_true(gpum__rsmi_is_fatal(RSMI_STATUS_UNKNOWN_ERROR));
  assert_true(gpum__rsmi_is_fatal(RSMI_STATUS_BUSY));
  assert_false(gpum__rsmi_is_fatal(RSMI_STATUS_NOT_SUPPORTED));
  assert_false(gpum__rsmi_is_fatal(RSMI_STATUS_PERMISSION));
}

static void test_bdf(void **state) {
  (void)state;
  char buf[32];
  /* domain 0x0001, bus 0xc1, device 0x1f, function 7 */
  uint64_t id = (uint64_t)1 << 32 | 0xc1u << 8 | 0x1fu << 3 | 7u;
  gpum__rsmi_format_bdf(id, buf, sizeof buf);
  assert_string_equal(buf, "00000001:C1:1F.7");
  gpum__rsmi_format_bdf(0x1800, buf, sizeof buf);
  assert_string_equal(buf, "00000000:18:00.0");
}

static void test_clock(void **state) {
  (void)state;
  rsmi_frequencies_t f = {0};
  unsigned mhz = 0;
  assert_false(gpum__rsmi_current_mhz(&f, &mhz));
  f.num_supported = 3;
  f.frequency[0] = 500000000, f.frequency[1] = 1300000000, f.frequency[2] = 2100000000;
  f.current = 1;
  assert_true(gpum__rsmi_current_mhz(&f, &mhz));
  assert_int_equal(mhz, 1300);
  f.current = 3;
  assert_false(gpum__rsmi_current_mhz(&f, &mhz));
  f.num_supported = RSMI_MAX_NUM_FREQUENCIES + 1;
  f.current = 0;
  assert_false(gpum__rsmi_current_mhz(&f, &mhz));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_map), cmocka_unit_test(test_bdf),
                                     cmocka_unit_test(test_clock)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
