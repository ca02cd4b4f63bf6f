/* SPDX-License-Identifier: Apache-2.0 */
/* The enforcement shim's HIP helpers (src/enforce/hip_map.c): HIP ordinals to fence devices
 * through ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES and GPUM_RESERVATION_DEVICES, and the
 * sizes HIP allocations are charged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "enforce_internal.h"

#define UA "GPU-00000000000000aa"
#define UB "GPU-00000000000000bb"
#define NV "GPU-8f3a1c2e-0000-0000-0000-000000000001"

static void test_round(void **state) {
  (void)state;
  assert_int_equal(gpum__enf_hip_round(1), 4096);
  assert_int_equal(gpum__enf_hip_round(4096), 4096);
  assert_int_equal(gpum__enf_hip_round(4097), 8192);
  assert_int_equal(gpum__enf_hip_round((2u << 20) - 1), 2u << 20);
  assert_int_equal(gpum__enf_hip_round(2u << 20), 2u << 20);
  assert_int_equal(gpum__enf_hip_round((2u << 20) + 1), 4u << 20);
  assert_int_equal(gpum__enf_hip_round(1ull << 30), 1ull << 30);
  assert_true(gpum__enf_hip_round(UINT64_MAX - 5) == UINT64_MAX);
}

/* Without a reservation list, or without UUIDs, HIP ordinal n is fence device n. */
static void test_plain(void **state) {
  (void)state;
  assert_int_equal(gpum__enf_hip_fence_dev(NULL, NULL, NULL, 0, NULL), 0);
  assert_int_equal(gpum__enf_hip_fence_dev(NULL, NULL, NULL, 3, NULL), 3);
  assert_int_equal(gpum__enf_hip_fence_dev("1,0", NULL, NULL, 1, NULL), 1);
  assert_int_equal(gpum__enf_hip_fence_dev(UA "," UB, "1", NULL, 0, NULL), 0);
  assert_int_equal(gpum__enf_hip_fence_dev(NULL, NULL, NULL, -1, NULL), -1);
  /* Index lists and a reservation list but no UUID from the runtime: the ordinal. */
  assert_int_equal(gpum__enf_hip_fence_dev("1,0", NULL, NV "," UA, 1, NULL), 1);
}

/* gpum run's grant: ROCR by UUID, HIP_VISIBLE_DEVICES 0..k-1, every device in the list. */
static void test_grant(void **state) {
  (void)state;
  const char *res = NV "," UA "," UB;
  assert_int_equal(gpum__enf_hip_fence_dev(UA "," UB, "0,1", res, 0, NULL), 1);
  assert_int_equal(gpum__enf_hip_fence_dev(UA "," UB, "0,1", res, 1, NULL), 2);
  /* The same device numbered apart in another process lands on the same fence device. */
  assert_int_equal(gpum__enf_hip_fence_dev(UB, "0", res, 0, NULL), 2);
  assert_int_equal(gpum__enf_hip_fence_dev(UB "," UA, NULL, res, 1, NULL), 1);
  /* HIP_VISIBLE_DEVICES reorders among ROCR's devices. */
  assert_int_equal(gpum__enf_hip_fence_dev(UA "," UB, "1,0", res, 0, NULL), 2);
  /* Case does not matter in UUIDs. */
  assert_int_equal(gpum__enf_hip_fence_dev("GPU-00000000000000BB", NULL, res, 0, NULL), 2);
  /* A UUID not in the list: the ordinal. */
  assert_int_equal(gpum__enf_hip_fence_dev("GPU-00000000000000cc", NULL, res, 0, NULL), 0);
}

/* ROCR by index: the runtime's UUID (hipDeviceGetUuid) finds the device in the list. */
static void test_runtime_uuid(void **state) {
  (void)state;
  const char *res = UA "," UB;
  assert_int_equal(gpum__enf_hip_fence_dev("1", NULL, res, 0, UB), 1);
  assert_int_equal(gpum__enf_hip_fence_dev(NULL, NULL, res, 0, UB), 1);
  /* A ROCR UUID entry wins over what the runtime says (it names the device itself). */
  assert_int_equal(gpum__enf_hip_fence_dev(UA, NULL, res, 0, UB), 0);
}

/* Ordinals the lists do not leave visible, and malformed lists. */
static void test_outside(void **state) {
  (void)state;
  assert_int_equal(gpum__enf_hip_fence_dev(UA, NULL, UA, 1, NULL), -1);
  assert_int_equal(gpum__enf_hip_fence_dev(UA "," UB, "0", UA "," UB, 1, NULL), -1);
  assert_int_equal(gpum__enf_hip_fence_dev(UA "," UB, "5", UA "," UB, 0, NULL), -1);
  assert_int_equal(gpum__enf_hip_fence_dev(UA "," UB, "x", UA "," UB, 0, NULL), -1);
  assert_int_equal(gpum__enf_hip_fence_dev(UA ",," UB, NULL, UA "," UB, 1, NULL), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round),   cmocka_unit_test(test_plain),
      cmocka_unit_test(test_grant),   cmocka_unit_test(test_runtime_uuid),
      cmocka_unit_test(test_outside),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
