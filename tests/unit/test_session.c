/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the reservation session's pieces that need no daemon: the grant's environment
 * (gpum_reservation_env: the variables and their order, several GPUs, devices without a UUID,
 * the host backend's device, a too-small array, a reservation without devices) and
 * gpum_reservation_setenv (gpum's variables overwrite, framework defaults yield to the
 * environment), the distributed table (gpum_distributed_env: the torchrun/NCCL variables, all
 * yielding to the environment, the default port, bad arguments, gpum_distributed_setenv), and
 * opening a session with no daemon. The session against a real gpumd is
 * tested by tests/integration (test_run_*, test_client_reserve*, test_session_pool).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/session.h>

static gpum_reservation_t grant(const char *id, uint64_t bytes, size_t n,
                                const char *const *uuids) {
  gpum_reservation_t r;
  memset(&r, 0, sizeof r);
  snprintf(r.id, sizeof r.id, "%s", id);
  r.state = GPUM_RES_GRANTED;
  r.bytes_per_gpu = bytes;
  r.gpus = (unsigned)n;
  r.ndevices = n;
  for (size_t i = 0; i < n; i++) {
    r.devices[i].index = (unsigned)(i + 2);
    snprintf(r.devices[i].uuid, sizeof r.devices[i].uuid, "%s", uuids[i] ? uuids[i] : "");
  }
  return r;
}

static const char *value(const gpum_env_var_t *v, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(v[i].name, name))
      return v[i].value;
  return NULL;
}

static void test_env_two_gpus(void **state) {
  (void)state;
  const char *u[] = {"GPU-aaa", "GPU-bbb"};
  gpum_reservation_t r = grant("r-12", 8ull << 30, 2, u);
  gpum_env_var_t v[GPUM_RESERVATION_ENV_MAX];
  size_t n = 0;
  assert_int_equal(gpum_reservation_env(&r, v, GPUM_RESERVATION_ENV_MAX, &n), 0);
  assert_int_equal(n, 7);
  assert_string_equal(v[0].name, "CUDA_VISIBLE_DEVICES");
  assert_string_equal(v[0].value, "GPU-aaa,GPU-bbb");
  assert_false(v[0].if_unset);
  assert_string_equal(value(v, n, "CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
  assert_string_equal(value(v, n, "GPUM_RESERVATION_ID"), "r-12");
  assert_string_equal(value(v, n, "GPUM_MEM_LIMIT"), "8589934592");
  assert_string_equal(value(v, n, "GPUM_RESERVATION_DEVICES"), "GPU-aaa,GPU-bbb");
  assert_string_equal(value(v, n, "TF_FORCE_GPU_ALLOW_GROWTH"), "true");
  assert_string_equal(value(v, n, "XLA_PYTHON_CLIENT_PREALLOCATE"), "false");
  for (size_t i = 0; i < n; i++)
    assert_int_equal(v[i].if_unset,
                     !strncmp(v[i].name, "TF_", 3) || !strncmp(v[i].name, "XLA_", 4));
}

static void test_env_indexes_without_uuid(void **state) {
  (void)state;
  const char *u[] = {NULL, "GPU-x"};
  gpum_reservation_t r = grant("r-1", 1, 2, u);
  gpum_env_var_t v[GPUM_RESERVATION_ENV_MAX];
  size_t n = 0;
  assert_int_equal(gpum_reservation_env(&r, v, GPUM_RESERVATION_ENV_MAX, &n), 0);
  assert_string_equal(value(v, n, "CUDA_VISIBLE_DEVICES"), "2,GPU-x");
}

static void test_env_host_device(void **state) {
  (void)state;
  const char *u[] = {"host-0123abcd"};
  gpum_reservation_t r = grant("r-3", 1ull << 20, 1, u);
  gpum_env_var_t v[GPUM_RESERVATION_ENV_MAX];
  size_t n = 0;
  assert_int_equal(gpum_reservation_env(&r, v, GPUM_RESERVATION_ENV_MAX, &n), 0);
  assert_string_equal(value(v, n, "CUDA_VISIBLE_DEVICES"), ""); /* no GPU to see */
  assert_string_equal(value(v, n, "GPUM_RESERVATION_DEVICES"), "host-0123abcd");
}

/* An AMD grant: ROCR_VISIBLE_DEVICES by UUID, HIP_VISIBLE_DEVICES every ROCR device (so HIP
 * does not take CUDA_VISIBLE_DEVICES as its list), CUDA sees nothing. */
static void test_env_amd(void **state) {
  (void)state;
  const char *u[] = {"GPU-00000000000000a1", "GPU-00000000000000b2"};
  gpum_reservation_t r = grant("r-5", 1ull << 30, 2, u);
  for (size_t i = 0; i < 2; i++) {
    snprintf(r.devices[i].vendor, sizeof r.devices[i].vendor, "amd");
    r.devices[i].vendor_index = (unsigned)(1 - i);
  }
  gpum_env_var_t v[GPUM_RESERVATION_ENV_MAX];
  size_t n = 0;
  assert_int_equal(gpum_reservation_env(&r, v, GPUM_RESERVATION_ENV_MAX, &n), 0);
  assert_int_equal(n, 9);
  assert_string_equal(value(v, n, "CUDA_VISIBLE_DEVICES"), "");
  assert_string_equal(value(v, n, "ROCR_VISIBLE_DEVICES"),
                      "GPU-00000000000000a1,GPU-00000000000000b2");
  assert_string_equal(value(v, n, "HIP_VISIBLE_DEVICES"), "0,1");
  assert_null(value(v, n, "ZE_AFFINITY_MASK"));
  assert_string_equal(value(v, n, "GPUM_RESERVATION_DEVICES"),
                      "GPU-00000000000000a1,GPU-00000000000000b2");
}

/* An Intel grant: ZE_AFFINITY_MASK by Level Zero's numbers; no ROCm variable. */
static void test_env_intel(void **state) {
  (void)state;
  const char *u[] = {"ze-1", "ze-2"};
  gpum_reservation_t r = grant("r-6", 1ull << 30, 2, u);
  for (size_t i = 0; i < 2; i++) {
    snprintf(r.devices[i].vendor, sizeof r.devices[i].vendor, "intel");
    r.devices[i].vendor_index = (unsigned)(3 - i);
  }
  gpum_env_var_t v[GPUM_RESERVATION_ENV_MAX];
  size_t n = 0;
  assert_int_equal(gpum_reservation_env(&r, v, GPUM_RESERVATION_ENV_MAX, &n), 0);
  assert_string_equal(value(v, n, "ZE_AFFINITY_MASK"), "3,2");
  assert_string_equal(value(v, n, "CUDA_VISIBLE_DEVICES"), "");
  assert_null(value(v, n, "ROCR_VISIBLE_DEVICES"));
  assert_null(value(v, n, "HIP_VISIBLE_DEVICES"));
  /* Every variable fits GPUM_RESERVATION_ENV_MAX even when all vendors are present. */
  snprintf(r.devices[0].vendor, sizeof r.devices[0].vendor, "amd");
  assert_int_equal(gpum_reservation_env(&r, v, GPUM_RESERVATION_ENV_MAX, &n), 0);
  assert_int_equal(n, GPUM_RESERVATION_ENV_MAX);
}

static void test_env_errors(void **state) {
  (void)state;
  const char *u[] = {"GPU-a"};
  gpum_reservation_t r = grant("r-1", 1, 1, u);
  gpum_env_var_t v[GPUM_RESERVATION_ENV_MAX];
  size_t n = 99;
  assert_int_equal(gpum_reservation_env(&r, v, 3, &n), GPUM_ENOSPC);
  assert_int_equal(n, 0);
  gpum_reservation_t none = grant("r-2", 1, 0, u);
  assert_int_equal(gpum_reservation_env(&none, v, GPUM_RESERVATION_ENV_MAX, &n), GPUM_EINVAL);
  gpum_reservation_t noid = grant("", 1, 1, u);
  assert_int_equal(gpum_reservation_env(&noid, v, GPUM_RESERVATION_ENV_MAX, &n), GPUM_EINVAL);
  assert_int_equal(gpum_reservation_env(NULL, v, GPUM_RESERVATION_ENV_MAX, &n), GPUM_EINVAL);
}

static void test_setenv_precedence(void **state) {
  (void)state;
  const char *u[] = {"GPU-a"};
  gpum_reservation_t r = grant("r-7", 4096, 1, u);
  setenv("TF_FORCE_GPU_ALLOW_GROWTH", "false", 1); /* the user's choice */
  setenv("GPUM_MEM_LIMIT", "1", 1);                /* stale: gpum's own is the grant's */
  unsetenv("XLA_PYTHON_CLIENT_PREALLOCATE");
  assert_int_equal(gpum_reservation_setenv(&r), 0);
  assert_string_equal(getenv("TF_FORCE_GPU_ALLOW_GROWTH"), "false");
  assert_string_equal(getenv("XLA_PYTHON_CLIENT_PREALLOCATE"), "false");
  assert_string_equal(getenv("GPUM_MEM_LIMIT"), "4096");
  assert_string_equal(getenv("CUDA_VISIBLE_DEVICES"), "GPU-a");
  assert_string_equal(getenv("GPUM_RESERVATION_ID"), "r-7");
}

static void test_distributed_env(void **state) {
  (void)state;
  static const char *const want[][2] = {
      {"WORLD_SIZE", "4"},
      {"LOCAL_WORLD_SIZE", "4"},
      {"PET_NPROC_PER_NODE", "4"},
      {"PET_NNODES", "1"},
      {"MASTER_ADDR", "127.0.0.1"},
      {"MASTER_PORT", "29511"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
  };
  gpum_env_var_t v[GPUM_DISTRIBUTED_ENV_MAX];
  size_t n = 0;
  assert_int_equal(gpum_distributed_env(4, 29511, v, GPUM_DISTRIBUTED_ENV_MAX, &n), 0);
  assert_int_equal(n, sizeof want / sizeof want[0]);
  assert_int_equal(n, GPUM_DISTRIBUTED_ENV_MAX);
  for (size_t i = 0; i < n; i++) { /* this order: gpumd's setup-pytorch answer keeps it */
    assert_string_equal(v[i].name, want[i][0]);
    assert_string_equal(v[i].value, want[i][1]);
    assert_true(v[i].if_unset); /* a launcher's or the user's value wins */
  }
  assert_int_equal(gpum_distributed_env(1, 0, v, GPUM_DISTRIBUTED_ENV_MAX, &n), 0);
  assert_string_equal(value(v, n, "MASTER_PORT"), "29500");
  assert_int_equal(GPUM_DISTRIBUTED_MASTER_PORT, 29500);
  assert_string_equal(value(v, n, "WORLD_SIZE"), "1");
}

static void test_distributed_env_errors(void **state) {
  (void)state;
  gpum_env_var_t v[GPUM_DISTRIBUTED_ENV_MAX];
  size_t n = 9;
  assert_int_equal(gpum_distributed_env(0, 0, v, GPUM_DISTRIBUTED_ENV_MAX, &n), GPUM_EINVAL);
  assert_int_equal(n, 0);
  assert_int_equal(gpum_distributed_env(2, 65536, v, GPUM_DISTRIBUTED_ENV_MAX, &n), GPUM_EINVAL);
  assert_int_equal(gpum_distributed_env(2, 0, NULL, GPUM_DISTRIBUTED_ENV_MAX, &n), GPUM_EINVAL);
  assert_int_equal(gpum_distributed_env(2, 0, v, GPUM_DISTRIBUTED_ENV_MAX, NULL), GPUM_EINVAL);
  assert_int_equal(gpum_distributed_env(2, 0, v, GPUM_DISTRIBUTED_ENV_MAX - 1, &n), GPUM_ENOSPC);
  assert_int_equal(n, 0);
}

static void test_distributed_setenv(void **state) {
  (void)state;
  setenv("MASTER_PORT", "12345", 1); /* the user's choice wins */
  unsetenv("WORLD_SIZE");
  unsetenv("MASTER_ADDR");
  assert_int_equal(gpum_distributed_setenv(2, 0), 0);
  assert_string_equal(getenv("MASTER_PORT"), "12345");
  assert_string_equal(getenv("WORLD_SIZE"), "2");
  assert_string_equal(getenv("MASTER_ADDR"), "127.0.0.1");
  assert_int_equal(gpum_distributed_setenv(0, 0), GPUM_EINVAL);
}

static void test_open_without_daemon(void **state) {
  (void)state;
  gpum_session_opts_t o;
  gpum_session_opts_init(&o);
  assert_int_equal(o.grace_ms, -1);
  o.socket = "/nonexistent/gpum-test/gpumd.sock";
  gpum_session_t *s = (gpum_session_t *)&o;
  int rc = gpum_session_open(&o, &s);
  assert_true(rc == GPUM_ENOENT || rc == GPUM_ECLOSED);
  assert_null(s);
  assert_non_null(strstr(gpum_last_error(), "/nonexistent/gpum-test/gpumd.sock"));
  char longpath[400];
  memset(longpath, 'x', sizeof longpath - 1);
  longpath[sizeof longpath - 1] = '\0';
  o.socket = longpath;
  assert_int_equal(gpum_session_open(&o, &s), GPUM_EINVAL);
  gpum_session_close(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_env_two_gpus),
      cmocka_unit_test(test_env_indexes_without_uuid),
      cmocka_unit_test(test_env_host_device),
      cmocka_unit_test(test_env_amd),
      cmocka_unit_test(test_env_intel),
      cmocka_unit_test(test_env_errors),
      cmocka_unit_test(test_setenv_precedence),
      cmocka_unit_test(test_distributed_env),
      cmocka_unit_test(test_distributed_env_errors),
      cmocka_unit_test(test_distributed_setenv),
      cmocka_unit_test(test_open_without_daemon),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
