/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the device layer's pure logic, without any driver: NVML error mapping and
 * the transient set, the backoff schedule and jitter bounds, option validation, backend
 * names, the metric table, /proc parsing (status Uid, cmdline, meminfo, stat, loadavg) and the
 * identity lookup, the process-list stride detection and decoding on synthetic buffers, the
 * compute+graphics merge, driver-library selection, and the host backend end to end
 * (including auto falling back to it when NVML cannot load, and its memory health, where
 * nothing is valid).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pwd.h>

#include <cmocka.h>

#include <gpum/device.h>
#include <gpum/error.h>
#include <gpum/monitor.h>
#include <gpum/options.h>

#include "nvml_abi.h"
#include "device/device_internal.h"
#include "thread_io_testlib.h"

/* Clears every variable that steers library selection, so each test starts from nothing. */
static int clean_env(void **state) {
  (void)state;
  unsetenv("GPUM_NVML_LIBRARY");
  unsetenv("GPUM_CUDA_LIBRARY");
  unsetenv("GPUM_SIM_NODE");
  unsetenv("GPUM_SIM_LIBRARY");
  return 0;
}

static void test_map_nvml_error(void **state) {
  (void)state;
  assert_int_equal(gpum_device_map_nvml_error(NVML_SUCCESS), 0);
  assert_int_equal(gpum_device_map_nvml_error(NVML_ERROR_GPU_IS_LOST), GPUM_ELOST);
  assert_int_equal(gpum_device_map_nvml_error(NVML_ERROR_RESET_REQUIRED), GPUM_ERESET);
  assert_int_equal(gpum_device_map_nvml_error(NVML_ERROR_NOT_SUPPORTED), GPUM_ENOTSUP);
  assert_int_equal(gpum_device_map_nvml_error(NVML_ERROR_TIMEOUT), GPUM_EAGAIN);
  assert_int_equal(gpum_device_map_nvml_error(NVML_ERROR_UNKNOWN), GPUM_EAGAIN);
  assert_int_equal(gpum_device_map_nvml_error(NVML_ERROR_NO_PERMISSION), GPUM_EPERM);
  assert_int_equal(gpum_device_map_nvml_error(NVML_ERROR_INSUFFICIENT_SIZE), GPUM_ENOSPC);
  assert_int_equal(gpum_device_map_nvml_error(NVML_ERROR_FUNCTION_NOT_FOUND), GPUM_EDRIVERVER);
  assert_int_equal(gpum_device_map_nvml_error(NVML_ERROR_DRIVER_NOT_LOADED), GPUM_EDRIVER);
  assert_int_equal(gpum_device_map_nvml_error(NVML_ERROR_GPU_NOT_FOUND), GPUM_ENODEV);
  assert_int_equal(gpum_device_map_nvml_error(NVML_ERROR_IN_USE), GPUM_EBUSY);
  /* Codes newer than our table, and nonsense, are plain errors. */
  assert_int_equal(gpum_device_map_nvml_error(31), GPUM_EIO);
  assert_int_equal(gpum_device_map_nvml_error(-5), GPUM_EIO);
  /* Every code maps to 0 or a negative GPUM_E*, never to a positive value. */
  for (int r = 0; r <= 1000; r++) {
    int m = gpum_device_map_nvml_error(r);
    assert_true(r == 0 ? m == 0 : m < 0);
  }
}

static void test_transient_set(void **state) {
  (void)state;
  for (int r = -1; r <= 1000; r++) {
    bool want = r == NVML_ERROR_UNKNOWN || r == NVML_ERROR_TIMEOUT || r == NVML_ERROR_IRQ_ISSUE ||
                r == NVML_ERROR_NOT_READY;
    assert_int_equal(gpum_device_nvml_error_is_transient(r), want);
    if (want)
      assert_int_equal(gpum_device_map_nvml_error(r), GPUM_EAGAIN);
  }
  /* Final states are never retried. */
  assert_false(gpum_device_nvml_error_is_transient(NVML_ERROR_GPU_IS_LOST));
  assert_false(gpum_device_nvml_error_is_transient(NVML_ERROR_RESET_REQUIRED));
  assert_false(gpum_device_nvml_error_is_transient(NVML_ERROR_IN_USE));
}

static void test_backoff_schedule(void **state) {
  (void)state;
  /* r = 0.5 is the middle of the jitter range: factor 1.0. */
  assert_int_equal(gpum__backoff_delay_us(10, 1000, 0, 0.5), 10000);
  assert_int_equal(gpum__backoff_delay_us(10, 1000, 1, 0.5), 20000);
  assert_int_equal(gpum__backoff_delay_us(10, 1000, 2, 0.5), 40000);
  assert_int_equal(gpum__backoff_delay_us(10, 1000, 3, 0.5), 80000);
  /* Jitter bounds: +-50%. */
  assert_int_equal(gpum__backoff_delay_us(10, 1000, 2, 0.0), 20000);
  uint64_t hi = gpum__backoff_delay_us(10, 1000, 2, 0.999999);
  assert_true(hi >= 59990 && hi < 60000);
  /* Out-of-range jitter numbers are clamped, not extrapolated. */
  assert_int_equal(gpum__backoff_delay_us(10, 1000, 0, -3.0), 5000);
  assert_true(gpum__backoff_delay_us(10, 1000, 0, 7.0) < 15000);
  /* The cap holds however large the attempt (no overflow on the doubling). */
  assert_int_equal(gpum__backoff_delay_us(10, 1000, 7, 0.5), 1000000);
  assert_int_equal(gpum__backoff_delay_us(10, 1000, 1000, 0.5), 1000000);
  assert_int_equal(gpum__backoff_delay_us(0, 1000, 5, 0.5), 0);
}

static void test_retry_rand_and_init(void **state) {
  (void)state;
  gpum__retry_t r;
  gpum_device_open_opts_t o;
  gpum_device_open_opts_init(&o);
  assert_int_equal(o.backend, GPUM_BACKEND_AUTO);
  assert_null(o.nvml_library);
  assert_int_equal(gpum__retry_init(&r, &o), 0);
  assert_int_equal(r.retries, 5);
  assert_int_equal(r.base_ms, 10);
  double lo = 1, hi = 0;
  for (int i = 0; i < 10000; i++) {
    double x = gpum__retry_rand01(&r);
    assert_true(x >= 0.0 && x < 1.0);
    lo = x < lo ? x : lo;
    hi = x > hi ? x : hi;
  }
  assert_true(lo < 0.05 && hi > 0.95); /* spread over the range, not stuck */
  o.retries = 0;
  o.retry_base_ms = 0;
  assert_int_equal(gpum__retry_init(&r, &o), 0);
  assert_int_equal(r.retries, 0);
  assert_int_equal(gpum__retry_init(&r, NULL), 0);
  assert_int_equal(r.retries, 5);
  o.retries = -2;
  assert_int_equal(gpum__retry_init(&r, &o), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "retries -2"));
  o.retries = 101;
  assert_int_equal(gpum__retry_init(&r, &o), GPUM_EINVAL);
  o.retries = 1;
  o.retry_base_ms = 60001;
  assert_int_equal(gpum__retry_init(&r, &o), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "60001"));
}

static void test_backend_names(void **state) {
  (void)state;
  gpum_backend_kind_t k;
  assert_string_equal(gpum_backend_name(GPUM_BACKEND_AUTO), "auto");
  assert_string_equal(gpum_backend_name(GPUM_BACKEND_NVML), "nvml");
  assert_string_equal(gpum_backend_name(GPUM_BACKEND_HOST), "host");
  assert_int_equal(gpum_backend_parse("nvml", &k), 0);
  assert_int_equal(k, GPUM_BACKEND_NVML);
  assert_int_equal(gpum_backend_parse("HOST", &k), 0);
  assert_int_equal(k, GPUM_BACKEND_HOST);
  assert_int_equal(gpum_backend_parse("auto", &k), 0);
  assert_int_equal(k, GPUM_BACKEND_AUTO);
  assert_string_equal(gpum_backend_name(GPUM_BACKEND_LEVEL_ZERO), "levelzero");
  assert_int_equal(gpum_backend_parse("levelzero", &k), 0);
  assert_int_equal(k, GPUM_BACKEND_LEVEL_ZERO);
  k = GPUM_BACKEND_HOST;
  assert_int_equal(gpum_backend_parse("oneapi", &k), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "'oneapi'"));
  assert_int_equal(k, GPUM_BACKEND_HOST);
  assert_int_equal(gpum_backend_parse("", &k), GPUM_EINVAL);
  assert_int_equal(gpum_backend_parse(NULL, &k), GPUM_EINVAL);
}

static void test_metric_table(void **state) {
  (void)state;
  assert_string_equal(gpum_metric_name(GPUM_METRIC_MEMORY_USED), "memory_used");
  assert_string_equal(gpum_metric_unit(GPUM_METRIC_MEMORY_USED), "bytes");
  assert_string_equal(gpum_metric_name(GPUM_METRIC_POWER), "power");
  assert_string_equal(gpum_metric_unit(GPUM_METRIC_POWER), "milliwatts");
  assert_string_equal(gpum_metric_name(GPUM_METRIC_ECC_UNCORRECTED), "ecc_uncorrected");
  assert_string_equal(gpum_metric_name(GPUM_METRIC_COUNT), "unknown");
  assert_string_equal(gpum_metric_unit((gpum_metric_t)-1), "");

  gpum_device_sample_t s;
  memset(&s, 0, sizeof s);
  double v = 42;
  assert_false(gpum_sample_get(&s, GPUM_METRIC_TEMPERATURE, &v));
  assert_true(v == 42); /* untouched when invalid */
  s.temperature_c = -5;
  s.memory_used = 1ull << 40;
  s.valid = 1u << GPUM_METRIC_TEMPERATURE | 1u << GPUM_METRIC_MEMORY_USED;
  assert_true(gpum_sample_get(&s, GPUM_METRIC_TEMPERATURE, &v));
  assert_true(v == -5);
  assert_true(gpum_sample_get(&s, GPUM_METRIC_MEMORY_USED, &v));
  assert_true(v == (double)(1ull << 40));
  assert_false(gpum_sample_get(&s, GPUM_METRIC_POWER, &v));
  assert_false(gpum_sample_get(&s, GPUM_METRIC_COUNT, &v));
  assert_false(gpum_sample_get(NULL, GPUM_METRIC_TEMPERATURE, &v));
}

static void test_parse_status_uid(void **state) {
  (void)state;
  unsigned uid = 7;
  assert_int_equal(
      gpum__parse_status_uid("Name:\tpython\nUmask:\t0022\nUid:\t1000\t1001\t1000\t1000\n", &uid),
      0);
  assert_int_equal(uid, 1000);
  assert_int_equal(gpum__parse_status_uid("Uid:\t0\t0\t0\t0", &uid), 0);
  assert_int_equal(uid, 0);
  uid = 7;
  assert_int_equal(gpum__parse_status_uid("Name:\tx\nGid:\t5\n", &uid), GPUM_EPARSE);
  assert_int_equal(gpum__parse_status_uid("Uid:\tabc\n", &uid), GPUM_EPARSE);
  assert_int_equal(gpum__parse_status_uid("Uid:\t12x\n", &uid), GPUM_EPARSE);
  assert_int_equal(gpum__parse_status_uid("Uid:\t99999999999\n", &uid), GPUM_EPARSE);
  assert_int_equal(gpum__parse_status_uid("", &uid), GPUM_EPARSE);
  assert_int_equal(uid, 7);
}

static void test_is_mps_server(void **state) {
  (void)state;
  assert_true(gpum__is_mps_server("nvidia-cuda-mps-server"));
  assert_true(gpum__is_mps_server("/usr/bin/nvidia-cuda-mps-server -d"));
  assert_false(gpum__is_mps_server("nvidia-cuda-mps-control -d")); /* the control daemon */
  assert_false(gpum__is_mps_server("python nvidia-cuda-mps-server"));
  assert_false(gpum__is_mps_server("/opt/nvidia-cuda-mps-server/python train.py"));
  assert_false(gpum__is_mps_server("nvidia-cuda-mps-serverx"));
  assert_false(gpum__is_mps_server(""));
  assert_false(gpum__is_mps_server(NULL));
}

static void test_cmdline_to_string(void **state) {
  (void)state;
  char out[64];
  static const char cmd[] = "python\0train.py\0--lr\0"
                            "0.1\0";
  gpum__cmdline_to_string(cmd, sizeof cmd - 1, out, sizeof out);
  assert_string_equal(out, "python train.py --lr 0.1");
  gpum__cmdline_to_string(cmd, sizeof cmd - 1, out, 10);
  assert_string_equal(out, "python tr");
  gpum__cmdline_to_string("a\tb\nc\0", 6, out, sizeof out);
  assert_string_equal(out, "a?b?c");
  gpum__cmdline_to_string("", 0, out, sizeof out);
  assert_string_equal(out, "");
  gpum__cmdline_to_string("\0\0\0", 3, out, sizeof out);
  assert_string_equal(out, "");
  out[0] = 'x';
  gpum__cmdline_to_string("abc", 3, out, 0); /* no room: nothing written */
  assert_int_equal(out[0], 'x');
}

static void test_proc_identity(void **state) {
  (void)state;
  char user[GPUM_USER_LEN], cmd[GPUM_COMMAND_LEN];
  gpum__proc_identity((unsigned)getpid(), user, sizeof user, cmd, sizeof cmd);
  struct passwd *pw = getpwuid(getuid());
  if (pw)
    assert_string_equal(user, pw->pw_name);
  else
    assert_true(user[0] >= '0' && user[0] <= '9');
  assert_non_null(strstr(cmd, "test_device"));
  /* Not visible: empty strings, no error. */
  gpum__proc_identity(0, user, sizeof user, cmd, sizeof cmd);
  assert_string_equal(user, "");
  assert_string_equal(cmd, "");
  gpum__proc_identity(0x7ffffff0u, user, sizeof user, cmd, sizeof cmd);
  assert_string_equal(user, "");
  assert_string_equal(cmd, "");
}

/* What /proc says of a pid is read once and kept for the cache's time (a second by default):
 * the owner, the parent and the command line come from it without a read; with no time kept
 * every lookup reads again. */
static void test_proc_cache(void **state) {
  (void)state;
  unsigned pid = (unsigned)getpid(), uid = 0, ppid = 0;
  char cmd[GPUM_COMMAND_LEN];
  gpum__proc_cache_ttl(UINT64_C(3600000000000)); /* an hour: nothing expires in this test */
  assert_int_equal(gpum__proc_uid(pid, &uid), 0);
  assert_int_equal(uid, (unsigned)getuid());
  long own = -thread_io("syscr"); /* what reading the count itself reads */
  own += thread_io("syscr");
  long before = thread_io("syscr");
  assert_int_equal(gpum__proc_parent(pid, &ppid), 0);
  assert_int_equal(ppid, (unsigned)getppid());
  gpum__proc_identity(pid, NULL, 0, cmd, sizeof cmd);
  assert_non_null(strstr(cmd, "test_device"));
  assert_int_equal(gpum__proc_uid(pid, &uid), 0);
  assert_int_equal(thread_io("syscr") - before, own);
  /* Not visible: ENOENT, nothing raised. */
  assert_int_equal(gpum__proc_parent(0x7ffffff0u, &ppid), GPUM_ENOENT);
  assert_int_equal(gpum__proc_uid(0, &uid), GPUM_ENOENT);
  gpum__proc_cache_ttl(0); /* kept for no time: each lookup reads /proc */
  before = thread_io("syscr");
  assert_int_equal(gpum__proc_parent(pid, &ppid), 0);
  assert_int_equal(ppid, (unsigned)getppid());
  assert_true(thread_io("syscr") - before >= own + 2); /* status and cmdline */
  gpum__proc_cache_ttl(GPUM__PROC_TTL_NS);
}

/* Writes n entries of the given stride into a buffer pre-filled with 0xAA, as a driver
 * would: pid, usedGpuMemory, gpuInstanceId, computeInstanceId (and the CC field at 32). */
static void fake_entries(unsigned char *buf, unsigned n, unsigned stride, const unsigned *pids,
                         const unsigned long long *mems) {
  for (unsigned i = 0; i < n; i++) {
    nvmlProcessDetail_v1_t e;
    memset(&e, 0, sizeof e);
    e.pid = pids[i];
    e.usedGpuMemory = mems[i];
    e.gpuInstanceId = 0xFFFFFFFFu;
    e.computeInstanceId = 0xFFFFFFFFu;
    e.usedGpuCcProtectedMemory = 0;
    memcpy(buf + (size_t)i * stride, &e, stride);
  }
}

static void test_stride_detect(void **state) {
  (void)state;
  enum { CAP = 8 };
  unsigned char buf[CAP * 32];
  const unsigned pids[3] = {4242, 77, 123456};
  const unsigned long long mems[3] = {1ull << 30, NVML_VALUE_NOT_AVAILABLE_ULL, 5ull << 20};
  gpum__rawproc_t out[3];

  for (unsigned n = 1; n <= 3; n++) {
    /* The normal 24-byte layout. */
    memset(buf, GPUM__PROC_FILL, sizeof buf);
    fake_entries(buf, n, 24, pids, mems);
    assert_int_equal(gpum__proc_detect_stride(buf, sizeof buf, n, 32), 24);
    /* Early R535: 32-byte entries, even when the extra field is 0. */
    memset(buf, GPUM__PROC_FILL, sizeof buf);
    fake_entries(buf, n, 32, pids, mems);
    assert_int_equal(gpum__proc_detect_stride(buf, sizeof buf, n, 24), 32);
    gpum__proc_decode(buf, n, 32, out);
    for (unsigned i = 0; i < n; i++) {
      assert_int_equal(out[i].pid, pids[i]);
      assert_int_equal(out[i].memory_valid, mems[i] != NVML_VALUE_NOT_AVAILABLE_ULL);
      assert_int_equal(out[i].memory, out[i].memory_valid ? mems[i] : 0);
    }
  }
  /* Decoding 32-byte entries at 24 would scramble them: the measurement matters. */
  memset(buf, GPUM__PROC_FILL, sizeof buf);
  fake_entries(buf, 3, 32, pids, mems);
  gpum__proc_decode(buf, 3, 24, out);
  assert_int_not_equal(out[1].pid, pids[1]);
  /* Nothing to measure: the hint decides. */
  memset(buf, GPUM__PROC_FILL, sizeof buf);
  assert_int_equal(gpum__proc_detect_stride(buf, sizeof buf, 0, 32), 32);
  assert_int_equal(gpum__proc_detect_stride(buf, sizeof buf, 0, 24), 24);
  /* A buffer too short to hold n 32-byte entries cannot be measured either. */
  assert_int_equal(gpum__proc_detect_stride(buf, 3 * 32 - 1, 3, 24), 24);
  assert_int_equal(gpum__proc_detect_stride(buf, 3 * 32 - 1, 3, 32), 32);
  /* The symbol-presence rule. */
  assert_int_equal(gpum__proc_stride_hint(true, false), 32);
  assert_int_equal(gpum__proc_stride_hint(true, true), 24);
  assert_int_equal(gpum__proc_stride_hint(false, false), 24);
  assert_int_equal(gpum__proc_stride_hint(false, true), 24);
}

static void test_decode_v1(void **state) {
  (void)state;
  nvmlProcessInfo_v1_t v1[2] = {{10, 100}, {11, NVML_VALUE_NOT_AVAILABLE_ULL}};
  gpum__rawproc_t out[2];
  gpum__proc_decode((const unsigned char *)v1, 2, sizeof v1[0], out);
  assert_int_equal(out[0].pid, 10);
  assert_int_equal(out[0].memory, 100);
  assert_true(out[0].memory_valid);
  assert_int_equal(out[1].pid, 11);
  assert_false(out[1].memory_valid);
}

static void test_merge(void **state) {
  (void)state;
  gpum__rawproc_t *list = NULL;
  size_t n = 0;
  const gpum__rawproc_t compute[] = {{1, 100, true}, {2, 200, true}, {3, 0, false}};
  const gpum__rawproc_t graphics[] = {{2, 250, true}, {3, 30, true}, {4, 0, false}, {1, 50, true}};
  assert_int_equal(gpum__proc_merge(&list, &n, compute, 3), 0);
  assert_int_equal(gpum__proc_merge(&list, &n, graphics, 4), 0);
  assert_int_equal(n, 4);
  assert_int_equal(list[0].pid, 1);
  assert_int_equal(list[0].memory, 100); /* the larger is kept */
  assert_int_equal(list[1].memory, 250);
  assert_true(list[2].memory_valid); /* a valid value beats "not available" */
  assert_int_equal(list[2].memory, 30);
  assert_int_equal(list[3].pid, 4);
  assert_false(list[3].memory_valid);
  assert_int_equal(gpum__proc_merge(&list, &n, NULL, 0), 0);
  assert_int_equal(n, 4);
  free(list);
}

/* The per-process utilisation samples: the newest per pid, none over 100 %. */
static void test_proc_util_reduce(void **state) {
  (void)state;
  gpum_process_util_t v[] = {
      {.pid = 7, .timestamp_us = 100, .sm_util = 10},
      {.pid = 8, .timestamp_us = 100, .sm_util = 20},
      {.pid = 7, .timestamp_us = 300, .sm_util = 30},
      {.pid = 7, .timestamp_us = 200, .sm_util = 40},
      {.pid = 9, .timestamp_us = 400, .sm_util = 101}, /* a driver bug: dropped */
      {.pid = 8, .timestamp_us = 500, .sm_util = 50, .dec_util = 4000000000u},
  };
  size_t n = gpum__proc_util_reduce(v, sizeof v / sizeof v[0]);
  assert_int_equal(n, 2);
  assert_int_equal(v[0].pid, 7);
  assert_int_equal(v[0].sm_util, 30);
  assert_int_equal(v[0].timestamp_us, 300);
  assert_int_equal(v[1].pid, 8);
  assert_int_equal(v[1].sm_util, 20);
  assert_int_equal(gpum__proc_util_reduce(v, 0), 0);
}

static void test_host_parsers(void **state) {
  (void)state;
  gpum__cpu_times_t a, b;
  assert_int_equal(gpum__parse_proc_stat("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3 4\n", &a),
                   0);
  assert_int_equal(a.total, 1000);
  assert_int_equal(a.busy, 200);
  assert_int_equal(gpum__parse_proc_stat("intr 1\ncpu  400 0 400 900 100 0 0 0 0 0\n", &b), 0);
  assert_int_equal(gpum__cpu_util_percent(&a, &b), 75); /* 600 busy of 800 */
  assert_int_equal(gpum__cpu_util_percent(&a, &a), -1);
  assert_int_equal(gpum__cpu_util_percent(&b, &a), -1);
  assert_int_equal(gpum__parse_proc_stat("cpu0 1 2 3 4\n", &a), GPUM_EPARSE);
  assert_int_equal(gpum__parse_proc_stat("cpu  1 2\n", &a), GPUM_EPARSE);
  assert_int_equal(gpum__parse_proc_stat("", &a), GPUM_EPARSE);

  uint64_t total = 0, avail = 0;
  assert_int_equal(gpum__parse_meminfo("MemTotal:       16000 kB\nMemFree:   100 kB\n"
                                       "MemAvailable:    4000 kB\n",
                                       &total, &avail),
                   0);
  assert_int_equal(total, 16000 * 1024ull);
  assert_int_equal(avail, 4000 * 1024ull);
  assert_int_equal(gpum__parse_meminfo("MemTotal: 10 kB\nMemAvailable: 20 kB\n", &total, &avail),
                   0);
  assert_int_equal(avail, total); /* clamped: used never goes negative */
  assert_int_equal(gpum__parse_meminfo("MemTotal: 10 kB\n", &total, &avail), GPUM_EPARSE);
  assert_int_equal(gpum__parse_meminfo("MemTotal: x kB\nMemAvailable: 1 kB\n", &total, &avail),
                   GPUM_EPARSE);
  assert_int_equal(gpum__parse_meminfo("MemTotal: 99999999999999999999 kB\nMemAvailable: 1 kB\n",
                                       &total, &avail),
                   GPUM_EPARSE);

  unsigned pct = 7;
  assert_int_equal(gpum__parse_loadavg_percent("2.00 1.00 0.50 1/84 5253\n", 4, &pct), 0);
  assert_int_equal(pct, 50);
  assert_int_equal(gpum__parse_loadavg_percent("9.5 1 1 1/1 1\n", 4, &pct), 0);
  assert_int_equal(pct, 100);
  assert_int_equal(gpum__parse_loadavg_percent("0.5 1 1 1/1 1\n", 0, &pct), 0);
  assert_int_equal(pct, 50);
  pct = 7;
  assert_int_equal(gpum__parse_loadavg_percent("junk", 4, &pct), GPUM_EPARSE);
  assert_int_equal(gpum__parse_loadavg_percent("-1 0 0", 4, &pct), GPUM_EPARSE);
  assert_int_equal(gpum__parse_loadavg_percent("nan 0 0", 4, &pct), GPUM_EPARSE);
  assert_int_equal(pct, 7);
}

static void test_libpath(void **state) {
  (void)state;
  gpum__libpath_t lp;
  assert_int_equal(gpum__libpath_resolve(GPUM__LIB_NVML, NULL, &lp), 0);
  assert_int_equal(lp.n, 2);
  assert_string_equal(lp.candidates[0], "libnvidia-ml.so.1");
  assert_string_equal(lp.candidates[1], "libnvidia-ml.so");
  assert_false(lp.simulated);
  assert_int_equal(gpum__libpath_resolve(GPUM__LIB_CUDA, "", &lp), 0);
  assert_int_equal(lp.n, 1);
  assert_string_equal(lp.candidates[0], "libcuda.so.1");

  /* The sim when GPUM_SIM_NODE is set; GPUM_SIM_LIBRARY says where. */
  setenv("GPUM_SIM_NODE", "demo", 1);
  setenv("GPUM_SIM_LIBRARY", "/x/libgpum_sim.so", 1);
  for (int k = 0; k < 2; k++) {
    assert_int_equal(gpum__libpath_resolve((gpum__lib_kind_t)k, NULL, &lp), 0);
    assert_true(lp.simulated);
    assert_int_equal(lp.n, 1);
    assert_string_equal(lp.candidates[0], "/x/libgpum_sim.so");
    assert_string_equal(lp.sim_node, "demo");
  }
  /* Without GPUM_SIM_LIBRARY: a path ending in libgpum_sim.so either way. */
  unsetenv("GPUM_SIM_LIBRARY");
  assert_int_equal(gpum__libpath_resolve(GPUM__LIB_NVML, NULL, &lp), 0);
  assert_true(lp.simulated);
  const char *c = lp.candidates[0];
  assert_string_equal(c + strlen(c) - strlen("libgpum_sim.so"), "libgpum_sim.so");
  /* The per-library variable beats the sim, an explicit path beats both. */
  setenv("GPUM_NVML_LIBRARY", "/y/libnvidia-ml.so.1", 1);
  assert_int_equal(gpum__libpath_resolve(GPUM__LIB_NVML, NULL, &lp), 0);
  assert_false(lp.simulated);
  assert_string_equal(lp.candidates[0], "/y/libnvidia-ml.so.1");
  assert_string_equal(lp.source, "GPUM_NVML_LIBRARY");
  assert_int_equal(gpum__libpath_resolve(GPUM__LIB_CUDA, NULL, &lp), 0);
  assert_true(lp.simulated); /* GPUM_NVML_LIBRARY does not steer CUDA */
  assert_int_equal(gpum__libpath_resolve(GPUM__LIB_NVML, "/z/n.so", &lp), 0);
  assert_string_equal(lp.candidates[0], "/z/n.so");
  assert_string_equal(lp.source, "option");
  /* Bad input: a path longer than PATH_MAX. */
  char *longp = malloc(PATH_MAX + 10);
  assert_non_null(longp);
  memset(longp, 'a', PATH_MAX + 9);
  longp[PATH_MAX + 9] = '\0';
  assert_int_equal(gpum__libpath_resolve(GPUM__LIB_NVML, longp, &lp), GPUM_EINVAL);
  free(longp);
  clean_env(NULL);
}

static void test_libpath_open_fails_clearly(void **state) {
  (void)state;
  gpum__libpath_t lp;
  void *dl = NULL;
  const char *used = NULL;
  assert_int_equal(gpum__libpath_resolve(GPUM__LIB_NVML, "/nonexistent/libnv.so", &lp), 0);
  assert_int_equal(gpum__libpath_open(&lp, "NVML", &dl, &used), GPUM_EDRIVER);
  assert_null(dl);
  assert_non_null(strstr(gpum_last_error(), "/nonexistent/libnv.so"));
  assert_non_null(strstr(gpum_last_error(), "option"));
  setenv("GPUM_SIM_NODE", "nosuchnode", 1);
  setenv("GPUM_SIM_LIBRARY", "/nonexistent/libgpum_sim.so", 1);
  assert_int_equal(gpum__libpath_resolve(GPUM__LIB_CUDA, NULL, &lp), 0);
  assert_int_equal(gpum__libpath_open(&lp, "CUDA", &dl, &used), GPUM_EDRIVER);
  assert_non_null(strstr(gpum_last_error(), "nosuchnode"));
  assert_non_null(strstr(gpum_last_error(), "GPUM_SIM_LIBRARY"));
  clean_env(NULL);
}

static void test_host_backend(void **state) {
  (void)state;
  gpum_device_open_opts_t o;
  gpum_device_open_opts_init(&o);
  o.backend = GPUM_BACKEND_HOST;
  gpum_device_session_t *s = NULL;
  assert_int_equal(gpum_device_open(&o, &s), 0);
  assert_int_equal(gpum_device_backend(s), GPUM_BACKEND_HOST);
  assert_int_equal(strncmp(gpum_device_backend_detail(s), "host", 4), 0);
  assert_false(gpum_device_is_simulated(s));
  assert_string_equal(gpum_device_driver_version(s), "");
  assert_int_equal(gpum_device_count(s), 1);

  gpum_device_info_t info;
  assert_int_equal(gpum_device_get_info(s, 0, &info), 0);
  assert_string_equal(info.name, "cpu");
  assert_string_equal(info.vendor, "host");
  assert_true(info.is_host);
  assert_int_equal(strncmp(info.uuid, "host-", 5), 0);
  assert_true(info.valid & GPUM_INFO_MEMORY_TOTAL);
  assert_true(info.memory_total > 0);
  assert_false(info.valid & (GPUM_INFO_PCI | GPUM_INFO_COMPUTE_CAP | GPUM_INFO_POWER_LIMIT));
  assert_int_equal(gpum_device_get_info(s, 1, &info), GPUM_ENODEV);
  assert_non_null(strstr(gpum_last_error(), "index 1"));

  gpum_device_sample_t smp;
  for (int round = 0; round < 2; round++) {
    assert_int_equal(gpum_device_sample(s, 0, &smp), 0);
    assert_true(smp.timestamp_ns > 0);
    assert_true(gpum_sample_valid(&smp, GPUM_METRIC_MEMORY_TOTAL));
    assert_true(gpum_sample_valid(&smp, GPUM_METRIC_MEMORY_USED));
    assert_true(gpum_sample_valid(&smp, GPUM_METRIC_MEMORY_FREE));
    assert_int_equal(smp.memory_used + smp.memory_free, smp.memory_total);
    assert_true(gpum_sample_valid(&smp, GPUM_METRIC_UTIL_GPU));
    assert_true(smp.util_gpu <= 100);
    static const gpum_metric_t invalid[] = {
        GPUM_METRIC_MEMORY_RESERVED, GPUM_METRIC_UTIL_MEMORY,    GPUM_METRIC_TEMPERATURE,
        GPUM_METRIC_POWER,           GPUM_METRIC_CLOCK_SM,       GPUM_METRIC_CLOCK_MEM,
        GPUM_METRIC_ECC_CORRECTED,   GPUM_METRIC_ECC_UNCORRECTED};
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
      assert_false(gpum_sample_valid(&smp, invalid[i]));
  }
  assert_int_equal(gpum_device_sample(s, 3, &smp), GPUM_ENODEV);
  assert_int_equal(gpum_device_sample(s, 0, NULL), GPUM_EINVAL);

  /* Host RAM has neither page retirement nor row remapping: nothing valid, still success. */
  gpum_memory_health_t mh;
  memset(&mh, 0xff, sizeof mh);
  assert_int_equal(gpum_device_memory_health(s, 0, &mh), 0);
  assert_int_equal(mh.valid, 0);
  assert_false(mh.retired_pages_pending || mh.remap_pending || mh.remap_failure);
  memset(&mh, 0xff, sizeof mh);
  assert_int_equal(gpum_device_memory_health(s, 1, &mh), GPUM_ENODEV);
  assert_non_null(strstr(gpum_last_error(), "index 1"));
  assert_int_equal(mh.valid, 0);
  assert_int_equal(gpum_device_memory_health(s, 0, NULL), GPUM_EINVAL);
  assert_int_equal(gpum_device_memory_health(NULL, 0, &mh), GPUM_EINVAL);
  assert_int_equal(mh.valid, 0);

  gpum_process_t procs[4];
  size_t count = 99;
  assert_int_equal(gpum_device_processes(s, 0, procs, 4, &count), 0);
  assert_int_equal(count, 0);
  assert_int_equal(gpum_device_processes(s, 0, NULL, 0, &count), 0);
  assert_int_equal(gpum_device_processes(s, 0, procs, 4, NULL), GPUM_EINVAL);
  assert_int_equal(gpum_device_processes(s, 0, NULL, 4, &count), GPUM_EINVAL);

  gpum_device_event_t ev;
  assert_int_equal(gpum_device_event_wait(s, &ev, 0), GPUM_ESTATE);
  assert_int_equal(gpum_device_events_enable(s), GPUM_ENOTSUP);
  gpum_device_close(s);
  gpum_device_close(NULL);
}

static void test_open_rejects_bad_opts(void **state) {
  (void)state;
  gpum_device_open_opts_t o;
  gpum_device_session_t *s = (gpum_device_session_t *)&o;
  gpum_device_open_opts_init(&o);
  o.retries = -7;
  assert_int_equal(gpum_device_open(&o, &s), GPUM_EINVAL);
  assert_null(s);
  gpum_device_open_opts_init(&o);
  o.backend = (gpum_backend_kind_t)42;
  assert_int_equal(gpum_device_open(&o, &s), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "42"));
  assert_int_equal(gpum_device_open(&o, NULL), GPUM_EINVAL);
  assert_int_equal(gpum_device_count(NULL), 0);
}

static void test_auto_falls_back_to_host(void **state) {
  (void)state;
  setenv("GPUM_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  gpum_device_session_t *s = NULL;
  assert_int_equal(gpum_device_open(NULL, &s), 0);
  assert_int_equal(gpum_device_backend(s), GPUM_BACKEND_HOST);
  assert_int_equal(gpum_device_count(s), 1);
  gpum_device_close(s);

  /* Asked for explicitly, nvml fails and says which library. */
  gpum_device_open_opts_t o;
  gpum_device_open_opts_init(&o);
  o.backend = GPUM_BACKEND_NVML;
  s = NULL;
  assert_int_equal(gpum_device_open(&o, &s), GPUM_EDRIVER);
  assert_null(s);
  assert_non_null(strstr(gpum_last_error(), "/nonexistent/libnvidia-ml.so.1"));
  assert_non_null(strstr(gpum_last_error(), "GPUM_NVML_LIBRARY"));
  /* A library that loads but is not NVML: the missing symbol is named. */
  o.nvml_library = "libm.so.6";
  assert_int_equal(gpum_device_open(&o, &s), GPUM_EDRIVER);
  assert_non_null(strstr(gpum_last_error(), "nvmlInit_v2"));
  clean_env(NULL);
}

/* The options a configuration gives the device layer and the monitor, read the same way by
 * gpum, gpumd and a library user; the devices option's list syntax. */
static void test_options_from_config(void **state) {
  (void)state;
  unsigned idx[8];
  size_t n = 9;
  assert_int_equal(gpum_device_list_parse("3,0-2,2", idx, 8, &n), 0);
  assert_int_equal(n, 4);
  for (unsigned i = 0; i < 4; i++)
    assert_int_equal(idx[i], i);
  assert_int_equal(gpum_device_list_parse("", idx, 8, &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(gpum_device_list_parse(NULL, idx, 8, &n), 0);
  assert_int_equal(gpum_device_list_parse("1,x", idx, 8, &n), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "'1,x' at 'x'"));
  assert_int_equal(n, 0);
  assert_int_equal(gpum_device_list_parse("3-1", idx, 8, &n), GPUM_EINVAL);
  assert_int_equal(gpum_device_list_parse("0-8", idx, 8, &n), GPUM_ERANGE);
  assert_int_equal(gpum_device_list_parse("70000", idx, 8, &n), GPUM_EINVAL);

  gpum_config_t *cfg = NULL;
  assert_int_equal(gpum_config_new(&cfg), 0);
  assert_int_equal(gpum_config_set(cfg, "backend", "host", GPUM_OPT_SRC_FLAG), 0);
  assert_int_equal(gpum_config_set(cfg, "retry.count", "7", GPUM_OPT_SRC_FLAG), 0);
  assert_int_equal(gpum_config_set(cfg, "devices", "1-2", GPUM_OPT_SRC_FLAG), 0);
  assert_int_equal(gpum_config_set(cfg, "monitor.interval", "250ms", GPUM_OPT_SRC_FLAG), 0);
  assert_int_equal(gpum_config_set(cfg, "monitor.busy_util", "55", GPUM_OPT_SRC_FLAG), 0);
  gpum_device_open_opts_t o;
  assert_int_equal(gpum_device_opts_from_config(cfg, &o), 0);
  assert_int_equal(o.backend, GPUM_BACKEND_HOST);
  assert_int_equal(o.retries, 7);
  assert_null(o.nvml_library);
  gpum_monitor_opts_t mo;
  assert_int_equal(gpum_monitor_opts_from_config(cfg, &mo, idx, 8), 0);
  assert_int_equal(mo.interval_ms, 250);
  assert_int_equal(mo.busy.util_gpu_pct, 55);
  assert_int_equal(mo.device_count, 2);
  assert_ptr_equal(mo.devices, idx);
  assert_int_equal(idx[0], 1);
  assert_int_equal(idx[1], 2);
  assert_int_equal(gpum_monitor_opts_from_config(cfg, &mo, NULL, 0), 0); /* devices: all */
  assert_null(mo.devices);
  assert_int_equal(gpum_config_set(cfg, "devices", "0,,1", GPUM_OPT_SRC_FLAG), 0);
  assert_int_equal(gpum_monitor_opts_from_config(cfg, &mo, idx, 8), GPUM_EINVAL);
  gpum_config_free(cfg);
  assert_int_equal(gpum_device_opts_from_config(NULL, &o), 0);
  assert_int_equal(o.backend, GPUM_BACKEND_AUTO);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_options_from_config),
      cmocka_unit_test(test_map_nvml_error),
      cmocka_unit_test(test_transient_set),
      cmocka_unit_test(test_backoff_schedule),
      cmocka_unit_test(test_retry_rand_and_init),
      cmocka_unit_test(test_backend_names),
      cmocka_unit_test(test_metric_table),
      cmocka_unit_test(test_parse_status_uid),
      cmocka_unit_test(test_cmdline_to_string),
      cmocka_unit_test(test_proc_cache),
      cmocka_unit_test(test_is_mps_server),
      cmocka_unit_test(test_proc_identity),
      cmocka_unit_test(test_stride_detect),
      cmocka_unit_test(test_decode_v1),
      cmocka_unit_test(test_merge),
      cmocka_unit_test(test_proc_util_reduce),
      cmocka_unit_test(test_host_parsers),
      cmocka_unit_test_setup(test_libpath, clean_env),
      cmocka_unit_test_setup(test_libpath_open_fails_clearly, clean_env),
      cmocka_unit_test_setup(test_host_backend, clean_env),
      cmocka_unit_test(test_open_rejects_bad_opts),
      cmocka_unit_test_setup(test_auto_falls_back_to_host, clean_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
