/* SPDX-License-Identifier: Apache-2.0 */
/* The Level Zero backend's pure parts: result mapping, UUID and BDF formatting, utilisation and
 * power from counter deltas, the choice of engine group. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <gpum/error.h>

#include "device/levelzero_internal.h"

static void test_map(void **state) {
  (void)state;
  assert_int_equal(gpum__ze_map_error(ZE_RESULT_SUCCESS), 0);
  assert_int_equal(gpum__ze_map_error(ZE_RESULT_NOT_READY), GPUM_EAGAIN);
  assert_int_equal(gpum__ze_map_error(ZE_RESULT_ERROR_NOT_AVAILABLE), GPUM_EAGAIN);
  assert_int_equal(gpum__ze_map_error(ZE_RESULT_ERROR_DEVICE_LOST), GPUM_ELOST);
  assert_int_equal(gpum__ze_map_error(ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET), GPUM_ERESET);
  assert_int_equal(gpum__ze_map_error(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE), GPUM_ENOTSUP);
  assert_int_equal(gpum__ze_map_error(ZE_RESULT_ERROR_UNINITIALIZED), GPUM_EDRIVER);
  assert_int_equal(gpum__ze_map_error(ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS), GPUM_EPERM);
  assert_int_equal(gpum__ze_map_error(ZE_RESULT_ERROR_INVALID_SIZE), GPUM_ENOSPC);
  assert_int_equal(gpum__ze_map_error(ZE_RESULT_ERROR_INVALID_NULL_HANDLE), GPUM_EINVAL);
  assert_int_equal(gpum__ze_map_error(ZE_RESULT_ERROR_UNKNOWN), GPUM_EIO);
  assert_true(gpum__ze_is_transient(ZE_RESULT_NOT_READY));
  assert_true(gpum__ze_is_transient(ZE_RESULT_ERROR_NOT_AVAILABLE));
  assert_false(gpum__ze_is_transient(ZE_RESULT_ERROR_DEVICE_LOST));
  assert_true(gpum__ze_is_fatal(ZE_RESULT_ERROR_DEVICE_LOST));
  assert_true(gpum__ze_is_fatal(ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET));
  assert_true(gpum__ze_is_fatal(ZE_RESULT_ERROR_NOT_AVAILABLE));
  assert_true(gpum__ze_is_fatal(ZE_RESULT_ERROR_UNINITIALIZED));
  assert_false(gpum__ze_is_fatal(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE));
  assert_false(gpum__ze_is_fatal(ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS));
}

static void test_uuid(void **state) {
  (void)state;
  const uint8_t id[16] = {0x86, 0x80, 0xd5, 0x0b, 0x01, 0x02, 0x03, 0x04,
                          0xa0, 0xb1, 0xc2, 0xd3, 0xe4, 0xf5, 0x06, 0xff};
  char buf[40];
  gpum__ze_format_uuid(id, buf, sizeof buf);
  assert_string_equal(buf, "8680d50b-0102-0304-a0b1-c2d3e4f506ff");
  char small[36] = "x";
  gpum__ze_format_uuid(id, small, sizeof small); /* one byte short of the terminator */
  assert_string_equal(small, "");
}

static void test_bdf(void **state) {
  (void)state;
  char buf[32];
  zes_pci_address_t a = {.domain = 1, .bus = 0xc1, .device = 0x1f, .function = 7};
  gpum__ze_format_bdf(&a, buf, sizeof buf);
  assert_string_equal(buf, "00000001:C1:1F.7");
  a = (zes_pci_address_t){.domain = 0, .bus = 0x4c, .device = 0, .function = 0};
  gpum__ze_format_bdf(&a, buf, sizeof buf);
  assert_string_equal(buf, "00000000:4C:00.0");
}

static void test_util(void **state) {
  (void)state;
  zes_engine_stats_t a = {.activeTime = 1000, .timestamp = 10000};
  zes_engine_stats_t b = {.activeTime = 1600, .timestamp = 11000};
  unsigned pct = 7;
  assert_true(gpum__ze_util_percent(&a, &b, &pct));
  assert_int_equal(pct, 60);
  b.activeTime = 5000; /* more busy time than elapsed (tiles summed): capped */
  assert_true(gpum__ze_util_percent(&a, &b, &pct));
  assert_int_equal(pct, 100);
  pct = 7;
  assert_false(gpum__ze_util_percent(&a, &a, &pct));              /* no time passed */
  b = (zes_engine_stats_t){.activeTime = 10, .timestamp = 12000}; /* a reset in between */
  assert_false(gpum__ze_util_percent(&a, &b, &pct));
  assert_int_equal(pct, 7);
}

static void test_power(void **state) {
  (void)state;
  /* 300 J over 1 s: 300 W. */
  zes_power_energy_counter_t a = {.energy = 5000000, .timestamp = 2000000};
  zes_power_energy_counter_t b = {.energy = 305000000, .timestamp = 3000000};
  unsigned mw = 1;
  assert_true(gpum__ze_power_mw(&a, &b, &mw));
  assert_int_equal(mw, 300000);
  b = (zes_power_energy_counter_t){.energy = 5000000 + 45000, .timestamp = 2000000 + 500};
  assert_true(gpum__ze_power_mw(&a, &b, &mw)); /* 45 mJ in 0.5 ms: 90 W */
  assert_int_equal(mw, 90000);
  mw = 1;
  assert_false(gpum__ze_power_mw(&a, &a, &mw));
  b = (zes_power_energy_counter_t){.energy = 1, .timestamp = 4000000};
  assert_false(gpum__ze_power_mw(&a, &b, &mw));
  assert_int_equal(mw, 1);
}

static void test_engine_rank(void **state) {
  (void)state;
  assert_int_equal(gpum__ze_engine_rank(ZES_ENGINE_GROUP_ALL), 0);
  assert_int_equal(gpum__ze_engine_rank(ZES_ENGINE_GROUP_COMPUTE_ALL), 1);
  assert_int_equal(gpum__ze_engine_rank(ZES_ENGINE_GROUP_RENDER_ALL), 2);
  assert_int_equal(gpum__ze_engine_rank(ZES_ENGINE_GROUP_COPY_ALL), -1);
  assert_int_equal(gpum__ze_engine_rank(ZES_ENGINE_GROUP_MEDIA_ALL), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_map),  cmocka_unit_test(test_uuid),  cmocka_unit_test(test_bdf),
      cmocka_unit_test(test_util), cmocka_unit_test(test_power), cmocka_unit_test(test_engine_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
