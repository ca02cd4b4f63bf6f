/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for gpum/slurm.h without Slurm: the Type= of device names, the shard counts under
 * gpumd's admission, and the step requests refused before gpumd is asked (no memory, no GPU,
 * a bad GPU list, no gpumd). The lines themselves and the plugin in a real Slurm are
 * tests/integration/test_slurm_conf.sh and test_slurm_spank.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/slurm.h>

#define GiB (UINT64_C(1) << 30)
#define MiB (UINT64_C(1) << 20)

static void test_gres_type(void **state) {
  (void)state;
  static const char *const cases[][2] = {
      {"NVIDIA H100 80GB HBM3", "h100_80gb_hbm3"},      {"Tesla T4", "tesla_t4"},
      {"Tesla V100-SXM2-32GB", "tesla_v100-sxm2-32gb"}, {"nvidia  A100 (40GB) ", "a100_40gb"},
      {"NVIDIA GeForce RTX 4090", "geforce_rtx_4090"},
  };
  char buf[GPUM_SLURM_TYPE_MAX];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    assert_int_equal(gpum_slurm_gres_type(cases[i][0], buf, sizeof buf), 0);
    assert_string_equal(buf, cases[i][1]);
  }
  assert_int_equal(gpum_slurm_gres_type("NVIDIA ()", buf, sizeof buf), GPUM_EINVAL);
  assert_int_equal(gpum_slurm_gres_type("H100", buf, 4), GPUM_ENOSPC);
  assert_int_equal(gpum_slurm_gres_type("H100", buf, 5), 0);
  assert_int_equal(gpum_slurm_gres_type(NULL, buf, sizeof buf), GPUM_EINVAL);
}

static void test_shards(void **state) {
  (void)state;
  gpum_slurm_conf_opts_t o = {.memory_fraction = 0.95, .safety_margin = 256 * MiB};
  /* 48 GiB x 0.95 - 256 MiB = 45.35 GiB */
  assert_int_equal(gpum_slurm_shards(48 * GiB, &o), 45);
  o.shard_unit = 2 * GiB;
  assert_int_equal(gpum_slurm_shards(48 * GiB, &o), 22);
  assert_int_equal(gpum_slurm_shards(48 * GiB, NULL), 48);
  o.safety_margin = 64 * GiB;
  assert_int_equal(gpum_slurm_shards(48 * GiB, &o), 0);
}

static void test_step_refused_early(void **state) {
  (void)state;
  gpum_slurm_step_t st;
  gpum_slurm_step_req_t req = {.socket = "/nonexistent/gpumd.sock", .gpus = "0", .timeout_ms = 0};
  assert_int_equal(gpum_slurm_step_begin(&req, &st), GPUM_EINVAL); /* no bytes */
  req.bytes_per_gpu = GiB;
  req.gpus = "";
  assert_int_equal(gpum_slurm_step_begin(&req, &st), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "no GPU on this node"));
  req.gpus = "0,x";
  assert_int_equal(gpum_slurm_step_begin(&req, &st), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "Slurm's GPUs '0,x'"));
  req.gpus = "0-1";
  assert_true(gpum_slurm_step_begin(&req, &st) < 0); /* no gpumd there */
  assert_string_equal(st.reservation.id, "");
  assert_int_equal(gpum_slurm_step_end(&st), 0); /* nothing held: nothing to do */
  assert_int_equal(gpum_slurm_step_begin(NULL, &st), GPUM_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gres_type),
      cmocka_unit_test(test_shards),
      cmocka_unit_test(test_step_refused_early),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
