/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the CUDA driver loader without a driver: CUresult -> GPUM_E* mapping, error
 * names from our own table (attributes that share a value with an error code must not be
 * taken for it), gpum__cuda_check's detail message, and load failures (missing library,
 * GPUM_CUDA_LIBRARY pointing nowhere, a library without the CUDA symbols) reported with the
 * path and the missing symbol. Loading the simulated driver is covered by the integration
 * tests (tests/integration/test_device_*.sh).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/error.h>

#include "device/cuda_loader.h"

static int clean_env(void **state) {
  (void)state;
  unsetenv("GPUM_CUDA_LIBRARY");
  unsetenv("GPUM_NVML_LIBRARY");
  unsetenv("GPUM_SIM_NODE");
  unsetenv("GPUM_SIM_LIBRARY");
  return 0;
}

static void test_map_error(void **state) {
  (void)state;
  assert_int_equal(gpum__cuda_map_error(CUDA_SUCCESS), 0);
  assert_int_equal(gpum__cuda_map_error(CUDA_ERROR_OUT_OF_MEMORY), GPUM_EDEVOOM);
  assert_int_equal(gpum__cuda_map_error(CUDA_ERROR_INVALID_VALUE), GPUM_EINVAL);
  assert_int_equal(gpum__cuda_map_error(CUDA_ERROR_NO_DEVICE), GPUM_ENODEV);
  assert_int_equal(gpum__cuda_map_error(CUDA_ERROR_INVALID_DEVICE), GPUM_ENODEV);
  assert_int_equal(gpum__cuda_map_error(CUDA_ERROR_NOT_SUPPORTED), GPUM_ENOTSUP);
  assert_int_equal(gpum__cuda_map_error(CUDA_ERROR_NOT_PERMITTED), GPUM_EPERM);
  assert_int_equal(gpum__cuda_map_error(CUDA_ERROR_STUB_LIBRARY), GPUM_EDRIVER);
  assert_int_equal(gpum__cuda_map_error(CUDA_ERROR_NOT_READY), GPUM_EAGAIN);
  assert_int_equal(gpum__cuda_map_error(CUDA_ERROR_NOT_INITIALIZED), GPUM_ESTATE);
  assert_int_equal(gpum__cuda_map_error(803), GPUM_EDRIVERVER);
  assert_int_equal(gpum__cuda_map_error(CUDA_ERROR_UNKNOWN), GPUM_EIO);
  assert_int_equal(gpum__cuda_map_error(123456), GPUM_EIO);
  for (int r = 1; r < 1000; r++)
    assert_true(gpum__cuda_map_error(r) < 0);
}

static void test_error_names(void **state) {
  (void)state;
  assert_string_equal(gpum__cuda_error_name(NULL, CUDA_SUCCESS), "CUDA_SUCCESS");
  assert_string_equal(gpum__cuda_error_name(NULL, 2), "CUDA_ERROR_OUT_OF_MEMORY");
  /* 1 is also CU_MEM_ALLOCATION_TYPE_PINNED in our constant list. */
  assert_string_equal(gpum__cuda_error_name(NULL, 1), "CUDA_ERROR_INVALID_VALUE");
  assert_string_equal(gpum__cuda_error_name(NULL, 16), "CUDA_ERROR_UNKNOWN_CODE");
  assert_string_equal(gpum__cuda_error_name(NULL, 909), "CUDA_ERROR_TIMEOUT");
  assert_string_equal(gpum__cuda_error_name(NULL, -1), "CUDA_ERROR_UNKNOWN_CODE");
}

static void test_check(void **state) {
  (void)state;
  gpum_error_clear();
  assert_int_equal(gpum__cuda_check(NULL, CUDA_SUCCESS, "cuMemAlloc_v2"), 0);
  assert_string_equal(gpum_last_error(), "");
  assert_int_equal(gpum__cuda_check(NULL, CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc_v2(1 GiB)"),
                   GPUM_EDEVOOM);
  assert_non_null(strstr(gpum_last_error(), "cuMemAlloc_v2(1 GiB)"));
  assert_non_null(strstr(gpum_last_error(), "CUDA_ERROR_OUT_OF_MEMORY"));
  assert_int_equal(gpum__cuda_check(NULL, 4242, NULL), GPUM_EIO);
  assert_non_null(strstr(gpum_last_error(), "4242"));
}

static void test_load_failures(void **state) {
  (void)state;
  gpum__cuda_t *cu = (gpum__cuda_t *)state;
  assert_int_equal(gpum__cuda_load("/nonexistent/libcuda.so.1", &cu), GPUM_EDRIVER);
  assert_null(cu);
  assert_non_null(strstr(gpum_last_error(), "/nonexistent/libcuda.so.1"));

  setenv("GPUM_CUDA_LIBRARY", "/nonexistent/env-libcuda.so", 1);
  assert_int_equal(gpum__cuda_load(NULL, &cu), GPUM_EDRIVER);
  assert_non_null(strstr(gpum_last_error(), "env-libcuda.so"));
  assert_non_null(strstr(gpum_last_error(), "GPUM_CUDA_LIBRARY"));
  unsetenv("GPUM_CUDA_LIBRARY");

  /* Loads, but is not a CUDA driver: the first required symbol is named. */
  assert_int_equal(gpum__cuda_load("libm.so.6", &cu), GPUM_EDRIVER);
  assert_null(cu);
  assert_non_null(strstr(gpum_last_error(), "cuInit"));
  assert_non_null(strstr(gpum_last_error(), "libm.so.6"));

  assert_int_equal(gpum__cuda_load(NULL, NULL), GPUM_EINVAL);
  gpum__cuda_unload(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_map_error),
      cmocka_unit_test(test_error_names),
      cmocka_unit_test(test_check),
      cmocka_unit_test_setup(test_load_failures, clean_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
