/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for gpumd's cluster module (src/gpumd/cluster): the seed's node entries built from
 * Slurm's GPU nodes, with their fields, the local node left out, and the filters (GPU type as a
 * family or a pattern, memory, available GPUs); the cache when nothing was read. The refresh
 * thread against a real Slurm is tests/integration/test_slurm_nodes.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cluster.h"

static gpum_slurm_node_t node(const char *name, const char *state, bool usable) {
  gpum_slurm_node_t n;
  memset(&n, 0, sizeof n);
  snprintf(n.name, sizeof n.name, "%s", name);
  snprintf(n.state, sizeof n.state, "%s", state);
  n.usable = usable;
  return n;
}

static void add(gpum_slurm_node_t *n, const char *type, uint32_t total, uint32_t used) {
  gpum_slurm_gpus_t *g = &n->gpus[n->ntypes++];
  snprintf(g->type, sizeof g->type, "%s", type);
  g->total = total;
  g->used = used;
}

/* "node/type" of each entry of arr, comma-separated. */
static const char *names(json_t *arr) {
  static char buf[512];
  size_t k = 0, i;
  json_t *e;
  buf[0] = '\0';
  json_array_foreach(arr, i, e) {
    const char *t = json_string_value(json_object_get(e, "gpu_type"));
    k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s/%s", i ? "," : "",
                          json_string_value(json_object_get(e, "node_name")), t ? t : "null");
  }
  return buf;
}

static gpum_slurm_node_t nodes[4];

static int setup(void **state) {
  (void)state;
  nodes[0] = node("gpu01", "mixed", true);
  add(&nodes[0], "a100_80gb", 4, 1);
  add(&nodes[0], "tesla_v100", 2, 0);
  nodes[1] = node("gpu02", "idle+drain", false);
  add(&nodes[1], "h100_80gb_hbm3", 8, 0);
  nodes[2] = node("thishost", "idle", true);
  add(&nodes[2], "a100_80gb", 2, 0);
  nodes[3] = node("gpu03", "allocated", true);
  add(&nodes[3], "", 2, 2);
  return 0;
}

static void test_fields(void **state) {
  (void)state;
  json_t *arr = gpumd_cluster_seed_json(nodes, 4, "thishost", NULL, 0, 0);
  assert_non_null(arr);
  /* One entry per node and GPU type; the local node is left out. */
  assert_string_equal(names(arr), "gpu01/a100_80gb,gpu01/tesla_v100,gpu02/h100_80gb_hbm3,"
                                  "gpu03/null");
  json_t *e = json_array_get(arr, 0);
  json_t *want =
      json_pack("{s:s, s:s, s:i, s:f, s:n, s:i, s:i, s:s, s:s}", "node_name", "gpu01", "gpu_type",
                "a100_80gb", "available_gpus", 3, "memory_per_gpu", 80.0, "utilization",
                "gpus_total", 4, "gpus_used", 1, "state", "mixed", "source", "slurm");
  if (!json_equal(e, want)) {
    char *s = json_dumps(e, JSON_SORT_KEYS);
    fail_msg("entry %s", s);
  }
  json_decref(want);
  /* A type without a memory class in its name: null; a drained node has nothing available. */
  assert_true(json_is_null(json_object_get(json_array_get(arr, 1), "memory_per_gpu")));
  assert_int_equal(json_integer_value(json_object_get(json_array_get(arr, 2), "available_gpus")),
                   0);
  assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 2), "state")),
                      "idle+drain");
  assert_int_equal(json_integer_value(json_object_get(json_array_get(arr, 3), "available_gpus")),
                   0);
  json_decref(arr);
  /* The local node is skipped without case; NULL skips nothing. */
  arr = gpumd_cluster_seed_json(nodes, 4, "THISHOST", "a100", 0, 0);
  assert_string_equal(names(arr), "gpu01/a100_80gb");
  json_decref(arr);
  arr = gpumd_cluster_seed_json(nodes, 4, NULL, "a100", 0, 0);
  assert_string_equal(names(arr), "gpu01/a100_80gb,thishost/a100_80gb");
  json_decref(arr);
}

static void test_filters(void **state) {
  (void)state;
  static const struct {
    const char *type;
    double min_gb;
    unsigned min_gpus;
    const char *want;
  } cases[] = {
      {"V100", 0, 0, "gpu01/tesla_v100"},
      {"tesla v100", 0, 0, "gpu01/tesla_v100"},
      {"A10", 0, 0, ""},
      {"a100", 0, 0, "gpu01/a100_80gb"},
      {"H100", 0, 0, "gpu02/h100_80gb_hbm3"},
      {"*100*", 0, 0, "gpu01/a100_80gb,gpu01/tesla_v100,gpu02/h100_80gb_hbm3"},
      {"", 0, 0, "gpu01/a100_80gb,gpu01/tesla_v100,gpu02/h100_80gb_hbm3,gpu03/null"},
      {"T4", 0, 0, ""},
      /* Memory: known and at least that; unknown is left out. */
      {NULL, 80, 0, "gpu01/a100_80gb,gpu02/h100_80gb_hbm3"},
      {NULL, 81, 0, ""},
      /* GPUs available now. */
      {NULL, 0, 1, "gpu01/a100_80gb,gpu01/tesla_v100"},
      {NULL, 0, 3, "gpu01/a100_80gb"},
      {NULL, 0, 4, ""},
      {"v100", 0, 2, "gpu01/tesla_v100"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *arr = gpumd_cluster_seed_json(nodes, 4, "thishost", cases[i].type, cases[i].min_gb,
                                          cases[i].min_gpus);
    assert_non_null(arr);
    if (strcmp(names(arr), cases[i].want) != 0)
      fail_msg("gpu_type '%s' min %g GB %u GPUs: '%s', expected '%s'",
               cases[i].type ? cases[i].type : "NULL", cases[i].min_gb, cases[i].min_gpus,
               names(arr), cases[i].want);
    json_decref(arr);
  }
  json_t *arr = gpumd_cluster_seed_json(NULL, 0, NULL, "a100", 0, 0);
  assert_int_equal(json_array_size(arr), 0);
  json_decref(arr);
}

/* The listing off (no cache): an empty array, and stopping is a no-op. */
static void test_off(void **state) {
  (void)state;
  gpumd_t d;
  memset(&d, 0, sizeof d);
  json_t *arr = gpumd_cluster_seed_nodes(&d, NULL, 0, 0);
  assert_non_null(arr);
  assert_int_equal(json_array_size(arr), 0);
  json_decref(arr);
  gpumd_cluster_stop(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_fields, setup),
      cmocka_unit_test_setup(test_filters, setup),
      cmocka_unit_test(test_off),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
