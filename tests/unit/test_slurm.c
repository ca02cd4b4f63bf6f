/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for gpum/slurm.h without Slurm: the Type= of device names, the shard counts under
 * gpumd's admission, and the step requests refused before gpumd is asked (no memory, no GPU,
 * a bad GPU list, no gpumd); the gres strings of Slurm's node information parsed into GPU
 * types and counts, GPU types matched as users write them, and the cluster listing without a
 * slurm.conf. The lines themselves, the plugin and the listing in a real Slurm are
 * tests/integration/test_slurm_conf.sh, test_slurm_spank.sh and test_slurm_nodes.sh.
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
#include <gpum/slurm.h>

#include "slurm/slurm_internal.h"

#define GiB (UINT64_C(1) << 30)
#define MiB (UINT64_C(1) << 20)

static void test_gres_type(void **state) {
  (void)state;
  static const char *const cases[][2] = {
      {"NVIDIA H100 80GB HBM3", "h100_80gb"},
      {"Tesla T4", "t4"},
      {"Tesla V100-SXM2-32GB", "v100_32gb"},
      {"nvidia  A100 (40GB) ", "a100_40gb"},
      {"NVIDIA GeForce RTX 4090", "rtx4090"},
      {"NVIDIA L40S", "l40s"},
      /* no family: the name spelt out */
      {"Weird Thing 9", "weird_thing_9"},
  };
  char buf[GPUM_SLURM_TYPE_MAX];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    assert_int_equal(gpum_slurm_gres_type(cases[i][0], buf, sizeof buf), 0);
    assert_string_equal(buf, cases[i][1]);
  }
  assert_int_equal(gpum_slurm_gres_type("NVIDIA ()", buf, sizeof buf), GPUM_EINVAL);
  assert_int_equal(gpum_slurm_gres_type("H100", buf, 4), GPUM_ENOSPC);
  assert_int_equal(gpum_slurm_gres_type("H100", buf, 5), 0);
  assert_int_equal(gpum_slurm_gres_type("Weird Thing 9", buf, 5), GPUM_ENOSPC);
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
  const char *gres = "gpu:h100_80gb:2,shard:150";
  char *l = NULL;
  /* Debian 12's slurmd -C: the NodeName line, then UpTime=. */
  assert_int_equal(gpum_slurm_node_line("NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 "
                                        "CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105\n"
                                        "UpTime=0-05:00:00\n",
                                        NULL, gres, &l),
                   0);
  assert_string_equal(l, "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 "
                         "ThreadsPerCore=1 RealMemory=24105 Gres=gpu:h100_80gb:2,shard:150");
  free(l);
  /* --node renames it; lines before it, a Gres= of its own, unknown fields, CRLF, tabs. */
  assert_int_equal(gpum_slurm_node_line("slurmd: warning: something\n"
                                        "NodeName=gpu01.example  CPUs=64\tGres=gpu:4 "
                                        "Feature=x RealMemory=515000\r\nUpTime=3-01:02:03\n",
                                        "gnode", gres, &l),
                   0);
  assert_string_equal(l, "NodeName=gnode CPUs=64 RealMemory=515000 Gres=" /* no old Gres= */
                         "gpu:h100_80gb:2,shard:150");
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

/* parse(gres, used): the GPU types, as "type=total/used;..." ("-" for untyped). */
static const char *parse(const char *gres, const char *used) {
  static char out[512];
  gpum_slurm_gpus_t g[GPUM_SLURM_NODE_TYPES_MAX];
  size_t n = 99, k = 0;
  int rc = gpum__slurm_gres_parse(gres, used, g, GPUM_SLURM_NODE_TYPES_MAX, &n);
  if (rc != 0) {
    assert_int_equal(n, 0);
    snprintf(out, sizeof out, "error %d", rc);
    return out;
  }
  out[0] = '\0';
  for (size_t i = 0; i < n; i++)
    k += (size_t)snprintf(out + k, sizeof out - k, "%s%s=%u/%u", i ? ";" : "",
                          g[i].type[0] ? g[i].type : "-", g[i].total, g[i].used);
  return out;
}

static void test_gres_parse(void **state) {
  (void)state;
  static const char *const cases[][3] = {
      /* Slurm 22.05's node information, as scontrol -d shows it. */
      {"gpu:a100:4(S:0-1)", "gpu:a100:2(IDX:0-1)", "a100=4/2"},
      {"gpu:4", NULL, "-=4/0"},
      {"gpu:4(S:0)", "gpu:3(IDX:0-1,3)", "-=4/3"},
      {"gpu:a100_80gb:2,gpu:tesla_v100:1", "gpu:a100_80gb:1(IDX:0),gpu:tesla_v100:0(IDX:N/A)",
       "a100_80gb=2/1;tesla_v100=1/0"},
      /* Other gres are not GPUs; their parentheses may hold commas. */
      {"gpu:h100_80gb_hbm3:2(S:0-1),shard:150(S:0-1)",
       "gpu:h100_80gb_hbm3:0(IDX:N/A),shard:20(20/75,0/75)", "h100_80gb_hbm3=2/0"},
      {"shard:150,mps:100", "shard:3(3/150)", ""},
      {"gpu:a100:2(S:0),gpu:a100:2(S:1)", "gpu:a100:3(IDX:0-2)", "a100=4/3"},
      /* Suffixes, no count, no_consume, "(null)" types and strings. */
      {"gpu:a100:1K", NULL, "a100=1024/0"},
      {"gpu", NULL, "-=1/0"},
      {"gpu:t4", NULL, "t4=1/0"},
      {"gpu:a100:no_consume:2", NULL, "a100=2/0"},
      {"gpu:(null):2", "gpu:(null):1(IDX:0)", "-=2/1"},
      {"(null)", "(null)", ""},
      {"", "", ""},
      {NULL, NULL, ""},
      /* An untyped used count on a node of one type; used capped at the total. */
      {"gpu:v100:2", "gpu:1(IDX:0)", "v100=2/1"},
      {"gpu:v100:2", "gpu:v100:5(IDX:0-4)", "v100=2/2"},
      {"gpu:v100:2,gpu:t4:1", "gpu:1(IDX:0)", "v100=2/0;t4=1/0"},
      /* Not of the form. */
      {"gpu:a100:x", NULL, "error -15"},
      {"gpu:a:b:c:d", NULL, "error -15"},
      {"gpu:a100:2(S:0", NULL, "error -15"},
      {"gpu:a100:99999999999", NULL, "error -15"},
      {"gpu:v100:2", "gpu:v100:oops", "error -15"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *got = parse(cases[i][0], cases[i][1]);
    if (strcmp(got, cases[i][2]) != 0)
      fail_msg("gres '%s' used '%s': '%s', expected '%s'", cases[i][0] ? cases[i][0] : "NULL",
               cases[i][1] ? cases[i][1] : "NULL", got, cases[i][2]);
  }
  /* More types than room: the first ones are kept. */
  gpum_slurm_gpus_t g[2];
  size_t n = 0;
  assert_int_equal(gpum__slurm_gres_parse("gpu:a:1,gpu:b:2,gpu:c:3", NULL, g, 2, &n), 0);
  assert_int_equal(n, 2);
  assert_string_equal(g[1].type, "b");
  assert_int_equal(gpum__slurm_gres_parse("gpu:a:1", NULL, NULL, 0, NULL), GPUM_EINVAL);
}

static void test_type_match(void **state) {
  (void)state;
  static const struct {
    const char *filter, *type;
    bool match;
  } cases[] = {
      {"V100", "v100", true},
      {"V100", "tesla_v100", true},
      {"v100", "tesla_v100-sxm2-32gb", true},
      {"Tesla V100", "tesla_v100", true},
      {"NVIDIA A100", "a100_80gb", true},
      {"A100", "a100_80gb_hbm3", true},
      {"A100-80GB", "a100_80gb", true},
      {"A10", "a100", false},
      {"A10", "a10", true},
      {"A100", "a10", false},
      {"RTX4090", "geforce_rtx_4090", true},
      {"RTX 4090", "geforce_rtx_4090", true},
      {"4090", "geforce_rtx_4090", false}, /* a number alone names no family */
      {"RTX409", "geforce_rtx_4090", false},
      {"H100", "a100", false},
      {"nvidia", "nvidia_t4", true},
      {"A100*", "a100_80gb", true},
      {"*v100*", "Tesla_V100", true},
      {"a100?", "a100", false},
      {"", "t4", true},
      {NULL, "", true},
      {"T4", "", false},
      {"--", "t4", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (gpum__slurm_type_match(cases[i].filter, cases[i].type) != cases[i].match)
      fail_msg("filter '%s' type '%s': expected %s", cases[i].filter ? cases[i].filter : "NULL",
               cases[i].type, cases[i].match ? "a match" : "no match");
}

static void test_type_memory(void **state) {
  (void)state;
  assert_int_equal(gpum__slurm_type_memory_gb("h100_80gb_hbm3"), 80);
  assert_int_equal(gpum__slurm_type_memory_gb("tesla_v100-sxm2-32gb"), 32);
  assert_int_equal(gpum__slurm_type_memory_gb("a100"), 0);
  assert_int_equal(gpum__slurm_type_memory_gb("rtx_4090"), 0);
  assert_int_equal(gpum__slurm_type_memory_gb("gb_0gb"), 0);
  assert_int_equal(gpum__slurm_type_memory_gb(NULL), 0);
}

/* Without a slurm.conf, libslurm is never asked: "Slurm not available". */
static void test_gpu_nodes_no_conf(void **state) {
  (void)state;
  setenv("SLURM_CONF", "/nonexistent/slurm.conf", 1);
  assert_null(gpum_slurm_conf_path());
  gpum_slurm_node_t *nodes = (gpum_slurm_node_t *)"x";
  size_t n = 9;
  assert_int_equal(gpum_slurm_gpu_nodes(&nodes, &n), GPUM_ENOTSUP);
  assert_null(nodes);
  assert_int_equal(n, 0);
  assert_non_null(strstr(gpum_last_error(), "Slurm not available: no slurm.conf"));
  assert_int_equal(gpum_slurm_gpu_nodes(NULL, &n), GPUM_EINVAL);
  gpum_slurm_nodes_free(NULL);
  unsetenv("SLURM_CONF");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gres_type),   cmocka_unit_test(test_shards),
      cmocka_unit_test(test_node_line),   cmocka_unit_test(test_step_refused_early),
      cmocka_unit_test(test_gres_parse),  cmocka_unit_test(test_type_match),
      cmocka_unit_test(test_type_memory), cmocka_unit_test(test_gpu_nodes_no_conf),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
