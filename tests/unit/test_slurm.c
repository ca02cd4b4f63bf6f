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
#include <stdlib.h>
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

static void test_node_line(void **state) {
  (void)state;
  const char *gres = "gpu:h100_80gb_hbm3:2,shard:150";
  char *l = NULL;
  /* Debian 12's slurmd -C: the NodeName line, then UpTime=. */
  assert_int_equal(gpum_slurm_node_line("NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 "
                                        "CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105\n"
                                        "UpTime=0-05:00:00\n",
                                        NULL, gres, &l),
                   0);
  assert_string_equal(l, "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 "
                         "ThreadsPerCore=1 RealMemory=24105 Gres=gpu:h100_80gb_hbm3:2,shard:150");
  free(l);
  /* --node renames it; lines before it, a Gres= of its own, unknown fields, CRLF, tabs. */
  assert_int_equal(gpum_slurm_node_line("slurmd: warning: something\n"
                                        "NodeName=gpu01.example  CPUs=64\tGres=gpu:4 "
                                        "Feature=x RealMemory=515000\r\nUpTime=3-01:02:03\n",
                                        "gnode", gres, &l),
                   0);
  assert_string_equal(l, "NodeName=gnode CPUs=64 RealMemory=515000 Gres=" /* no old Gres= */
                         "gpu:h100_80gb_hbm3:2,shard:150");
  free(l);
  /* No NodeName line, missing or bad fields: refused with the reason, *l stays NULL. */
  static const char *const bad[][2] = {
      {"", "no NodeName= line"},
      {"UpTime=0-05:00:00\n", "no NodeName= line"},
      {"slurmd: error: cannot read\n", "no NodeName= line"},
      {"NodeName=vm RealMemory=1000\n", "no CPUs="},
      {"NodeName=vm CPUs=2\n", "no RealMemory="},
      {"NodeName=vm CPUs=two RealMemory=1000\n", "CPUs=two is not a positive integer"},
      {"NodeName=vm CPUs=0 RealMemory=1000\n", "CPUs=0 is not a positive integer"},
      {"NodeName=vm CPUs=2 RealMemory=\n", "RealMemory= is not a positive integer"},
      {"NodeName=vm CPUs=2 junk RealMemory=1000\n", "'junk', not NAME=VALUE"},
      {"NodeName= CPUs=2 RealMemory=1000\n", "names no node"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    l = (char *)"x";
    assert_int_equal(gpum_slurm_node_line(bad[i][0], NULL, gres, &l), GPUM_EINVAL);
    assert_null(l);
    if (!strstr(gpum_last_error(), bad[i][1]))
      fail_msg("'%s': %s", bad[i][0], gpum_last_error());
  }
  /* An empty NodeName= with --node is fine; a bad node or Gres= is refused. */
  assert_int_equal(gpum_slurm_node_line("NodeName= CPUs=2 RealMemory=1000", "n1", "shard:1", &l),
                   0);
  assert_string_equal(l, "NodeName=n1 CPUs=2 RealMemory=1000 Gres=shard:1");
  free(l);
  assert_int_equal(gpum_slurm_node_line("NodeName=a CPUs=2 RealMemory=1", "a=b", gres, &l),
                   GPUM_EINVAL);
  assert_int_equal(gpum_slurm_node_line("NodeName=a CPUs=2 RealMemory=1", NULL, "", &l),
                   GPUM_EINVAL);
  assert_int_equal(gpum_slurm_node_line(NULL, NULL, gres, &l), GPUM_EINVAL);
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
      cmocka_unit_test(test_node_line),
      cmocka_unit_test(test_step_refused_early),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
