/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the aliases of options (src/lib/core/options_alias.c) and the map options
 * they need: the seeds' environment variables and YAML keys read as gpum's options with their
 * units converted; gpum's own name winning over an alias from any source and in any order; two
 * aliases of one option; bad values rejected with the alias and the option named (even when
 * overridden) and nothing changed; ignored aliases; the readings kept for gpum doctor and
 * gpumd's log across staged loads; the NAME=NUMBER map type in every form; and no change at
 * all for a configuration that uses no alias.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/options.h>

#include "core/options_internal.h"
#include "options_testlib.h"

#define MiB (1024ull * 1024ull)

/* ---- helpers ---- */

/* The reading of alias name in cfg; fails the test when there is none. */
static gpum_alias_read_t reading(const gpum_config_t *cfg, const char *name) {
  gpum_alias_read_t a;
  for (size_t i = 0; gpum_config_alias_at(cfg, i, &a) == 0; i++)
    if (!strcmp(a.name, name))
      return a;
  fail_msg("alias %s was not read", name);
  return a;
}

/* Every option's text and source plus every reading, to check that a rejected load changed
 * nothing. */
static char *snapshot(const gpum_config_t *cfg) {
  gpum__strbuf_t b = {0};
  char *out = NULL, line[1024];
  for (size_t i = 0; i < gpum_option_count(); i++) {
    const char *k = gpum_option_at(i)->key;
    gpum__strbuf_printf(&b, "%s=%s@%d\n", k, gpum_config_get_string(cfg, k),
                        (int)gpum_config_source(cfg, k));
  }
  for (size_t i = 0; gpum_config_alias_describe(cfg, i, line, sizeof line) == 0; i++)
    gpum__strbuf_printf(&b, "%s\n", line);
  assert_int_equal(gpum__strbuf_finish(&b, &out), 0);
  return out;
}

/* The seed's YAML file (gpu_config.yaml), as its document gives it. */
static const char seed_yaml[] = "# GPU资源配置\n"
                                "gpu_resource:\n"
                                "  gpu: \"nvidia.com/gpu\"\n"
                                "  nvidia: \"nvidia.com/gpu\"\n"
                                "  amd: \"amd.com/gpu\"\n"
                                "  intel: \"intel.com/gpu\"\n"
                                "  npu: \"huawei.com/npu\"\n"
                                "\n"
                                "default_gpu_resource_name: \"nvidia.com/gpu\"\n"
                                "\n"
                                "gpu_memory_specs:\n"
                                "  T4: 16.0\n"
                                "  V100: 32.0\n"
                                "  A100: 80.0\n"
                                "  H100: 80.0\n"
                                "  RTX3090: 24.0\n"
                                "  RTX4090: 24.0\n"
                                "  A6000: 48.0\n"
                                "  A40: 48.0\n"
                                "\n"
                                "monitor_update_interval: 30\n"
                                "resource_change_threshold: 0.05\n"
                                "log_level: \"INFO\"\n";

/* ---- the seeds' settings ---- */

static void test_env_aliases_with_units(void **state) {
  (void)state;
  char *envp[] = {
      "USE_GPU=false",         "GPU_DEVICE=0, 2", "MAX_CONCURRENT_JOBS=2", "JOB_TIMEOUT=3600",
      "SAFETY_MARGIN_MB=1000", "PATH=/usr/bin",   "SAFETY_MARGIN=9",       NULL};
  gpum_config_t *cfg = new_config();
  assert_int_equal(gpum_config_load_env(cfg, envp), 0);
  assert_string_equal(gpum_config_get_string(cfg, "backend"), "host");
  assert_string_equal(gpum_config_get_string(cfg, "devices"), "0,2");
  assert_int_equal(gpum_config_get_int(cfg, "max_concurrent_jobs"), 2);
  assert_int_equal(gpum_config_get_duration(cfg, "job_timeout"), 3600 * 1000);
  assert_int_equal(gpum_config_get_size(cfg, "safety_margin"), 1000 * MiB);
  assert_int_equal(gpum_config_source(cfg, "safety_margin"), GPUM_OPT_SRC_ENV);
  assert_int_equal(gpum_config_alias_count(cfg), 5);
  gpum_alias_read_t a = reading(cfg, "SAFETY_MARGIN_MB");
  assert_string_equal(a.key, "safety_margin");
  assert_string_equal(a.value, "1000");
  assert_string_equal(a.converted, "1000MiB");
  assert_string_equal(a.unit, "MiB");
  assert_string_equal(a.origin, "environment");
  assert_int_equal(a.state, GPUM_ALIAS_APPLIED);
  assert_null(a.by);
  assert_string_equal(reading(cfg, "JOB_TIMEOUT").converted, "3600s");
  gpum_config_free(cfg);

  /* USE_GPU=true leaves the backend to auto; a fraction of a MiB and of a second are fine */
  char *envp2[] = {"USE_GPU=TRUE", "SAFETY_MARGIN_MB=0.5", "JOB_TIMEOUT=1.5", "GPU_DEVICE=", NULL};
  cfg = new_config();
  assert_int_equal(gpum_config_load_env(cfg, envp2), 0);
  assert_string_equal(gpum_config_get_string(cfg, "backend"), "auto");
  assert_int_equal(gpum_config_get_size(cfg, "safety_margin"), MiB / 2);
  assert_int_equal(gpum_config_get_duration(cfg, "job_timeout"), 1500);
  assert_string_equal(gpum_config_get_string(cfg, "devices"), "");
  assert_int_equal(reading(cfg, "GPU_DEVICE").state, GPUM_ALIAS_APPLIED);
  gpum_config_free(cfg);
}

static void test_seed_yaml(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  int err = gpum_config_load_file(cfg, write_yaml(seed_yaml));
  if (err)
    fail_msg("%s", gpum_last_error());
  assert_string_equal(gpum_config_get_string(cfg, "log.level"), "info");
  assert_int_equal(gpum_config_get_duration(cfg, "monitor.interval"), 30000);
  assert_string_equal(gpum_config_get_string(cfg, "resources.default"), "nvidia.com/gpu");
  assert_string_equal(gpum_config_get_string(cfg, "resources.amd"), "amd.com/gpu");
  assert_int_equal(gpum_config_source(cfg, "resources.amd"), GPUM_OPT_SRC_FILE);
  assert_string_equal(gpum_config_get_string(cfg, "gputype.memory"),
                      "T4=16.0,V100=32.0,A100=80.0,H100=80.0,RTX3090=24.0,RTX4090=24.0,"
                      "A6000=48.0,A40=48.0");
  char name[16];
  double gb = 0;
  assert_int_equal(gpum_config_get_map(cfg, "gputype.memory", 7, name, sizeof name, &gb), 0);
  assert_string_equal(name, "A40");
  assert_true(gb == 48.0);
  assert_int_equal(gpum_config_get_map(cfg, "gputype.memory", 8, name, sizeof name, &gb),
                   GPUM_ENOENT);

  assert_int_equal(gpum_config_alias_count(cfg), 10);
  assert_int_equal(reading(cfg, "gpu_resource.npu").state, GPUM_ALIAS_IGNORED);
  assert_null(reading(cfg, "gpu_resource.npu").key);
  assert_int_equal(reading(cfg, "resource_change_threshold").state, GPUM_ALIAS_IGNORED);
  assert_int_equal(reading(cfg, "default_gpu_resource_name").state, GPUM_ALIAS_APPLIED);
  /* two aliases of resources.default: the one listed first wins, whatever the file's order */
  gpum_alias_read_t g = reading(cfg, "gpu_resource.gpu");
  assert_int_equal(g.state, GPUM_ALIAS_OVERRIDDEN);
  assert_string_equal(g.by, "default_gpu_resource_name");
  gpum_alias_read_t l = reading(cfg, "log_level");
  assert_string_equal(l.converted, "info");
  assert_non_null(strstr(l.origin, ".yaml:23:1"));
  gpum_config_free(cfg);

  /* dotted keys and other spellings of a level */
  cfg = new_config();
  err = gpum_config_load_file(cfg, write_yaml("gpu_resource.amd: example.com/amd\n"
                                              "gpu_resource.gpu: example.com/gpu\n"
                                              "log_level: warning\n"));
  if (err)
    fail_msg("%s", gpum_last_error());
  assert_string_equal(gpum_config_get_string(cfg, "resources.amd"), "example.com/amd");
  assert_string_equal(gpum_config_get_string(cfg, "resources.default"), "example.com/gpu");
  assert_string_equal(gpum_config_get_string(cfg, "log.level"), "warn");
  gpum_config_free(cfg);
  static const char *const levels[][2] = {
      {"CRITICAL", "error"}, {"Fatal", "error"}, {"DEBUG", "debug"}, {"NOTSET", "trace"},
      {"ERROR", "error"},    {"off", "off"},     {"WARN", "warn"},
  };
  for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
    char text[64];
    snprintf(text, sizeof text, "log_level: %s\n", levels[i][0]);
    cfg = new_config();
    assert_int_equal(gpum_config_load_file(cfg, write_yaml(text)), 0);
    assert_string_equal(gpum_config_get_string(cfg, "log.level"), levels[i][1]);
    gpum_config_free(cfg);
  }
}

/* ---- gpum's own names win ---- */

static void test_own_name_wins_in_env(void **state) {
  (void)state;
  /* both orders in one environment */
  char *envp1[] = {"SAFETY_MARGIN_MB=512", "GPUM_SAFETY_MARGIN=1GiB", NULL};
  char *envp2[] = {"GPUM_SAFETY_MARGIN=1GiB", "SAFETY_MARGIN_MB=512", NULL};
  char *const *envs[] = {envp1, envp2};
  for (size_t i = 0; i < 2; i++) {
    gpum_config_t *cfg = new_config();
    assert_int_equal(gpum_config_load_env(cfg, envs[i]), 0);
    assert_int_equal(gpum_config_get_size(cfg, "safety_margin"), 1024 * MiB);
    gpum_alias_read_t a = reading(cfg, "SAFETY_MARGIN_MB");
    assert_int_equal(a.state, GPUM_ALIAS_OVERRIDDEN);
    assert_null(a.by);
    assert_string_equal(a.converted, "512MiB");
    char line[512];
    assert_int_equal(gpum_config_alias_describe(cfg, 0, line, sizeof line), 0);
    assert_string_equal(line, "SAFETY_MARGIN_MB=512 (environment) not used: safety_margin is set "
                              "by its own name (environment), which wins");
    gpum_config_free(cfg);
  }
}

static void test_own_name_wins_from_lower_source(void **state) {
  (void)state;
  /* the file's own name beats the environment's alias, in the usual sequence... */
  char *envp[] = {"SAFETY_MARGIN_MB=512", "MAX_CONCURRENT_JOBS=3", "HOME=/nonexistent", NULL};
  const char *path = write_yaml("safety_margin: 2GiB\n");
  gpum_config_t *cfg = new_config();
  assert_int_equal(gpum__config_load_all_from(cfg, path, NULL, NULL, envp, 1000), 0);
  assert_int_equal(gpum_config_get_size(cfg, "safety_margin"), 2048 * MiB);
  assert_int_equal(gpum_config_source(cfg, "safety_margin"), GPUM_OPT_SRC_FILE);
  assert_int_equal(reading(cfg, "SAFETY_MARGIN_MB").state, GPUM_ALIAS_OVERRIDDEN);
  assert_int_equal(gpum_config_get_int(cfg, "max_concurrent_jobs"), 3);
  assert_int_equal(reading(cfg, "MAX_CONCURRENT_JOBS").state, GPUM_ALIAS_APPLIED);
  gpum_config_free(cfg);

  /* ...and when a program loads the environment first and the file after */
  cfg = new_config();
  assert_int_equal(gpum_config_load_env(cfg, envp), 0);
  assert_int_equal(gpum_config_get_size(cfg, "safety_margin"), 512 * MiB);
  assert_int_equal(gpum_config_load_file(cfg, path), 0);
  assert_int_equal(gpum_config_get_size(cfg, "safety_margin"), 2048 * MiB);
  assert_int_equal(reading(cfg, "SAFETY_MARGIN_MB").state, GPUM_ALIAS_OVERRIDDEN);
  /* a flag beats the alias too; the alias stays recorded */
  char *argv[] = {"gpum", "--max-concurrent-jobs", "7", NULL};
  int argc = 3;
  assert_int_equal(gpum_config_load_args(cfg, &argc, argv), 0);
  assert_int_equal(gpum_config_get_int(cfg, "max_concurrent_jobs"), 7);
  assert_int_equal(reading(cfg, "MAX_CONCURRENT_JOBS").state, GPUM_ALIAS_OVERRIDDEN);
  assert_int_equal(gpum_config_alias_count(cfg), 2);
  gpum_config_free(cfg);
}

static void test_own_name_wins_in_one_file(void **state) {
  (void)state;
  static const char *const files[] = {"log_level: DEBUG\nlog:\n  level: error\n",
                                      "log.level: error\nlog_level: DEBUG\n"};
  for (size_t i = 0; i < 2; i++) {
    gpum_config_t *cfg = new_config();
    int err = gpum_config_load_file(cfg, write_yaml(files[i]));
    if (err)
      fail_msg("%s", gpum_last_error());
    assert_string_equal(gpum_config_get_string(cfg, "log.level"), "error");
    assert_int_equal(reading(cfg, "log_level").state, GPUM_ALIAS_OVERRIDDEN);
    gpum_config_free(cfg);
  }
  /* the alias from the file loses to the option's own environment variable as well */
  char *envp[] = {"GPUM_MONITOR_INTERVAL=5s", NULL};
  gpum_config_t *cfg = new_config();
  assert_int_equal(gpum_config_load_file(cfg, write_yaml("monitor_update_interval: 30\n")), 0);
  assert_int_equal(gpum_config_load_env(cfg, envp), 0);
  assert_int_equal(gpum_config_get_duration(cfg, "monitor.interval"), 5000);
  assert_int_equal(reading(cfg, "monitor_update_interval").state, GPUM_ALIAS_OVERRIDDEN);
  gpum_config_free(cfg);
}

/* ---- bad values ---- */

static void test_bad_env_alias(void **state) {
  (void)state;
  static const struct {
    const char *entry;
    int err;
    const char *msg;
  } cases[] = {
      {"SAFETY_MARGIN_MB=lots", GPUM_EINVAL,
       "alias SAFETY_MARGIN_MB of option 'safety_margin' (from environment): 'lots' is not a "
       "number of MiB"},
      {"SAFETY_MARGIN_MB=512MiB", GPUM_EINVAL, "'512MiB' is not a number of MiB"},
      {"SAFETY_MARGIN_MB=-1", GPUM_EINVAL, "'-1' is not a number of MiB"},
      {"JOB_TIMEOUT=1h", GPUM_EINVAL,
       "alias JOB_TIMEOUT of option 'job_timeout' (from environment): '1h' is not a number of "
       "seconds"},
      {"MAX_CONCURRENT_JOBS=-1", GPUM_ERANGE,
       "alias MAX_CONCURRENT_JOBS of option 'max_concurrent_jobs' (from environment): '-1' is "
       "out of range (0 to 100000)"},
      {"MAX_CONCURRENT_JOBS=two", GPUM_EINVAL, "'two' is not an integer"},
      {"USE_GPU=maybe", GPUM_EINVAL, "alias USE_GPU of option 'backend'"},
      {"GPU_DEVICE=0,", GPUM_EINVAL, "'0,' is not a device index or a list of them"},
      {"GPU_DEVICE=GPU-1234", GPUM_EINVAL, "alias GPU_DEVICE of option 'devices'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *envp[] = {"MAX_CONCURRENT_JOBS=4", (char *)cases[i].entry, NULL};
    if (!strncmp(cases[i].entry, "MAX_", 4))
      envp[0] = "SAFETY_MARGIN_MB=4";
    gpum_config_t *cfg = new_config();
    char *before = snapshot(cfg);
    expect_err(gpum_config_load_env(cfg, envp), cases[i].err, cases[i].msg);
    char *after = snapshot(cfg);
    assert_string_equal(before, after); /* all-or-nothing: no option, no reading */
    assert_int_equal(gpum_config_alias_count(cfg), 0);
    free(before);
    free(after);
    gpum_config_free(cfg);
  }
  /* a bad alias is an error even when the option's own name is set */
  char *envp[] = {"GPUM_SAFETY_MARGIN=1GiB", "SAFETY_MARGIN_MB=lots", NULL};
  gpum_config_t *cfg = new_config();
  expect_err(gpum_config_load_env(cfg, envp), GPUM_EINVAL, "alias SAFETY_MARGIN_MB");
  gpum_config_free(cfg);
}

static void test_bad_file_alias(void **state) {
  (void)state;
  static const struct {
    const char *yaml;
    int err;
    const char *msg;
  } cases[] = {
      {"monitor_update_interval: 30s\n", GPUM_EINVAL,
       "alias monitor_update_interval of option 'monitor.interval' (from "},
      {"\nmonitor_update_interval: 30s\n", GPUM_EINVAL,
       ".yaml:2:1): '30s' is not a number of "
       "seconds"},
      {"log_level: LOUD\n", GPUM_EINVAL, "alias log_level of option 'log.level' (from "},
      {"log_level: LOUD\n", GPUM_EINVAL, "'LOUD' is not one of trace|debug|info|warn|error|off"},
      {"resource_change_threshold: 2\n", GPUM_EINVAL,
       "alias resource_change_threshold (no gpum option; from "},
      {"resource_change_threshold: high\n", GPUM_EINVAL, "'high' is not a fraction from 0 to 1"},
      {"gpu_resource:\n  huawei: huawei.com/npu\n", GPUM_EUNKNOWN_KEY,
       "unknown key 'gpu_resource.huawei'"},
      {"gpu_resource:\n  huawei: x\n", GPUM_EUNKNOWN_KEY,
       "gpu_resource takes gpu, nvidia, amd, intel, npu"},
      {"gpu_resource: nvidia.com/gpu\n", GPUM_EINVAL, "'gpu_resource' (from "},
      {"gpu_resource: nvidia.com/gpu\n", GPUM_EINVAL, "is a group of aliases"},
      {"gpu_memory_specs:\n  T4: lots\n", GPUM_EINVAL,
       "alias gpu_memory_specs of option 'gputype.memory'"},
      {"gpu_memory_specs:\n  T4: lots\n", GPUM_EINVAL, "'T4': 'lots' is not a number"},
      {"gpu_memory_specs:\n  T4: 16\n  t4: 15\n", GPUM_EINVAL, "'t4' is given twice"},
      {"gpu_memory_specs:\n  T4: [16]\n", GPUM_EINVAL, "expected NAME: NUMBER entries"},
      {"gpu_memory_specs: [T4]\n", GPUM_EINVAL, "alias 'gpu_memory_specs'"},
      {"log_level: info\nlog_level: debug\n", GPUM_EINVAL, "alias 'log_level' (from "},
      {"log_level: info\nlog_level: debug\n", GPUM_EINVAL,
       "is set twice in the file (first on "
       "line 1)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gpum_config_t *cfg = new_config();
    char *before = snapshot(cfg);
    expect_err(gpum_config_load_file(cfg, write_yaml(cases[i].yaml)), cases[i].err, cases[i].msg);
    char *after = snapshot(cfg);
    assert_string_equal(before, after);
    free(before);
    free(after);
    gpum_config_free(cfg);
  }
  /* a bad alias is an error beside its option's own name as well */
  gpum_config_t *cfg = new_config();
  expect_err(gpum_config_load_file(cfg, write_yaml("monitor:\n  interval: 2s\n"
                                                   "monitor_update_interval: soon\n")),
             GPUM_EINVAL, "alias monitor_update_interval");
  gpum_config_free(cfg);
}

/* ---- readings and reports ---- */

static void test_readings_survive_failed_loads(void **state) {
  (void)state;
  char *good[] = {"SAFETY_MARGIN_MB=512", NULL};
  char *bad[] = {"JOB_TIMEOUT=60", "GPUM_LOG_LEVEL=loud", NULL};
  char *again[] = {"SAFETY_MARGIN_MB=256", NULL};
  gpum_config_t *cfg = new_config();
  assert_int_equal(gpum_config_load_env(cfg, good), 0);
  expect_err(gpum_config_load_env(cfg, bad), GPUM_EINVAL, "GPUM_LOG_LEVEL");
  assert_int_equal(gpum_config_alias_count(cfg), 1); /* JOB_TIMEOUT went with the failed load */
  assert_int_equal(gpum_config_get_duration(cfg, "job_timeout"), 0);
  /* reading an alias again replaces its reading */
  assert_int_equal(gpum_config_load_env(cfg, again), 0);
  assert_int_equal(gpum_config_alias_count(cfg), 1);
  assert_string_equal(reading(cfg, "SAFETY_MARGIN_MB").value, "256");
  assert_int_equal(gpum_config_get_size(cfg, "safety_margin"), 256 * MiB);
  gpum_alias_read_t a;
  assert_int_equal(gpum_config_alias_at(cfg, 1, &a), GPUM_ENOENT);
  gpum_config_free(cfg);
  assert_int_equal(gpum_config_alias_count(NULL), 0);
}

typedef struct {
  int info, warn;
  char lines[8][512];
  size_t n;
} captured_t;

static void capture(gpum_log_level_t level, const char *module, const char *line, void *arg) {
  captured_t *c = arg;
  (void)module;
  c->info += level == GPUM_LOG_INFO;
  c->warn += level == GPUM_LOG_WARN;
  if (c->n < 8)
    snprintf(c->lines[c->n++], sizeof c->lines[0], "%s", line);
}

static void test_describe_and_log(void **state) {
  (void)state;
  char *envp[] = {"SAFETY_MARGIN_MB=512", NULL};
  gpum_config_t *cfg = new_config();
  assert_int_equal(gpum_config_load_env(cfg, envp), 0);
  assert_int_equal(gpum_config_load_file(cfg, write_yaml("gpu_resource:\n  npu: huawei.com/npu\n"
                                                         "log.level: info\n"
                                                         "log_level: DEBUG\n")),
                   0);
  char line[512];
  assert_int_equal(gpum_config_alias_describe(cfg, 0, line, sizeof line), 0);
  assert_string_equal(line,
                      "SAFETY_MARGIN_MB=512 (environment) read as safety_margin=512MiB (MiB)");
  assert_int_equal(gpum_config_alias_describe(cfg, 1, line, sizeof line), 0);
  assert_non_null(strstr(line, "gpu_resource.npu=huawei.com/npu ("));
  assert_non_null(strstr(line, ") ignored: gpum has no such setting"));
  assert_int_equal(gpum_config_alias_describe(cfg, 3, line, sizeof line), GPUM_ENOENT);
  assert_string_equal(line, "");
  assert_string_equal(gpum_alias_state_name(GPUM_ALIAS_OVERRIDDEN), "overridden");
  /* a short buffer is cut, never overrun */
  char small[12];
  assert_int_equal(gpum_config_alias_describe(cfg, 0, small, sizeof small), 0);
  assert_string_equal(small, "SAFETY_MARG");

  captured_t c = {0};
  gpum_log_level_t old = gpum_log_get_level();
  gpum_log_set_level(GPUM_LOG_INFO);
  gpum_log_set_callback(capture, &c);
  gpum_config_log_aliases(cfg, "gpumd");
  gpum_log_set_callback(NULL, NULL);
  gpum_log_set_level(old);
  assert_int_equal(c.info, 1);
  assert_int_equal(c.warn, 2);
  assert_string_equal(c.lines[0], "level=info module=gpumd msg=\"config: alias SAFETY_MARGIN_MB "
                                  "read as safety_margin (MiB)\" value=512 set=512MiB "
                                  "from=environment");
  assert_non_null(strstr(c.lines[1], "msg=\"config: alias gpu_resource.npu ignored: gpum has no "
                                     "such setting\" value=huawei.com/npu from="));
  assert_non_null(strstr(c.lines[2], "msg=\"config: alias log_level not used: log.level is set "
                                     "by its own name, which wins\" value=DEBUG from="));
  gpum_config_free(cfg);
}

static void test_dump_and_clone_keep_aliases(void **state) {
  (void)state;
  char *envp[] = {"SAFETY_MARGIN_MB=512", NULL};
  gpum_config_t *cfg = new_config(), *copy = NULL;
  assert_int_equal(gpum_config_load_env(cfg, envp), 0);
  assert_int_equal(gpum__config_clone(cfg, &copy), 0);
  assert_int_equal(gpum_config_alias_count(copy), 1);
  assert_int_equal(reading(copy, "SAFETY_MARGIN_MB").state, GPUM_ALIAS_APPLIED);
  gpum_config_free(copy);
  char *yaml = NULL;
  assert_int_equal(gpum_config_dump_yaml(cfg, &yaml), 0);
  assert_non_null(strstr(yaml, "safety_margin: 512MiB  # from environment\n"));
  free(yaml);
  gpum_config_free(cfg);
}

/* ---- map options ---- */

static void test_map_option(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  assert_string_equal(gpum_config_get_string(cfg, "gputype.memory"), "");
  assert_int_equal(gpum_config_get_map(cfg, "gputype.memory", 0, NULL, 0, NULL), GPUM_ENOENT);
  assert_int_equal(
      gpum_config_set(cfg, "gputype.memory", " T4 = 16 , V100=32.5,MI300X=192", GPUM_OPT_SRC_API),
      0);
  assert_string_equal(gpum_config_get_string(cfg, "gputype.memory"), "T4=16,V100=32.5,MI300X=192");
  char name[4];
  double v = 0;
  assert_int_equal(gpum_config_get_map(cfg, "gputype.memory", 1, name, sizeof name, &v), 0);
  assert_string_equal(name, "V10"); /* cut to the buffer */
  assert_true(v == 32.5);
  expect_err(gpum_config_get_map(cfg, "safety_margin", 0, name, sizeof name, &v), GPUM_EINVAL,
             "not a map option");

  static const struct {
    const char *text, *msg;
  } bad[] = {
      {"T4", "'T4' is not NAME=NUMBER"},
      {"T4=16,", "a trailing ','"},
      {"T4=16,,A40=48", "an empty entry"},
      {"=16", "a name is letters, digits"},
      {"T 4=16", "a name is letters, digits"},
      {"T4=", "expected a number after '='"},
      {"T4=big", "'T4': 'big' is not a number"},
      {"T4=0", "'T4': '0' is out of range (0.1 to 65536)"},
      {"T4=16,t4=16", "'t4' is given twice"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    expect_err(gpum_config_set(cfg, "gputype.memory", bad[i].text, GPUM_OPT_SRC_API),
               strstr(bad[i].msg, "range") ? GPUM_ERANGE : GPUM_EINVAL, bad[i].msg);
  assert_string_equal(gpum_config_get_string(cfg, "gputype.memory"), "T4=16,V100=32.5,MI300X=192");
  gpum_config_free(cfg);

  /* the option's own name takes a mapping in the file, and a string */
  cfg = new_config();
  assert_int_equal(
      gpum_config_load_file(cfg, write_yaml("gputype:\n  memory:\n    A100: 40\n    L4: 24\n")), 0);
  assert_string_equal(gpum_config_get_string(cfg, "gputype.memory"), "A100=40,L4=24");
  gpum_config_free(cfg);
  cfg = new_config();
  assert_int_equal(gpum_config_load_file(cfg, write_yaml("gputype.memory: {}\n")), 0);
  assert_string_equal(gpum_config_get_string(cfg, "gputype.memory"), "");
  gpum_config_free(cfg);
  cfg = new_config();
  char *envp[] = {"GPUM_GPUTYPE_MEMORY=A100=40", NULL};
  assert_int_equal(gpum_config_load_env(cfg, envp), 0);
  char *argv[] = {"gpum", "--gputype-memory=H100=94", NULL};
  int argc = 2;
  assert_int_equal(gpum_config_load_args(cfg, &argc, argv), 0);
  assert_string_equal(gpum_config_get_string(cfg, "gputype.memory"), "H100=94");
  gpum_config_free(cfg);
}

/* ---- no alias, no change ---- */

static void test_no_alias_no_change(void **state) {
  (void)state;
  char *plain[] = {"GPUM_LOG_LEVEL=debug", "HOME=/nonexistent", "PATH=/bin", NULL};
  char *with_others[] = {
      "GPUM_LOG_LEVEL=debug", "HOME=/nonexistent", "PATH=/bin", "SAFETY_MARGIN=1",
      "safety_margin_mb=1",   "LOG_LEVEL=x",       NULL};
  const char *path = write_yaml("log:\n  target: none\nsafety_margin: 1GiB\n");
  gpum_config_t *a = new_config(), *b = new_config();
  assert_int_equal(gpum__config_load_all_from(a, path, NULL, NULL, plain, 1000), 0);
  assert_int_equal(gpum__config_load_all_from(b, path, NULL, NULL, with_others, 1000), 0);
  char *sa = snapshot(a), *sb = snapshot(b);
  assert_string_equal(sa, sb); /* names that merely look like aliases are not */
  assert_int_equal(gpum_config_alias_count(a), 0);
  assert_int_equal(gpum_config_alias_count(b), 0);
  free(sa);
  free(sb);
  gpum_config_free(a);
  gpum_config_free(b);
}

/* An alias whose option is not in the table (a program's own table) is not read. */
static const gpum_option_def_t small_table[] = {
    {"log.level", GPUM_OPT_ENUM, "warn", "trace|debug|info|warn|error|off", 0, 0, false, "Level."},
};

static void test_alias_needs_its_option(void **state) {
  (void)state;
  gpum__options_use_table(small_table, 1);
  char *envp[] = {"SAFETY_MARGIN_MB=512", NULL};
  gpum_config_t *cfg = new_config();
  assert_int_equal(gpum_config_load_env(cfg, envp), 0);
  assert_int_equal(gpum_config_alias_count(cfg), 0);
  assert_int_equal(gpum_config_load_file(cfg, write_yaml("log_level: DEBUG\n")), 0);
  assert_string_equal(gpum_config_get_string(cfg, "log.level"), "debug");
  expect_err(gpum_config_load_file(cfg, write_yaml("monitor_update_interval: 3\n")),
             GPUM_EUNKNOWN_KEY, "unknown option 'monitor_update_interval'");
  gpum_config_free(cfg);
  gpum__options_use_table(NULL, 0);
}

/* ---- the docs ---- */

static void test_alias_table_well_formed(void **state) {
  (void)state;
  size_t n;
  const gpum__alias_def_t *t = gpum__alias_table(&n);
  assert_true(n >= 15);
  for (size_t i = 0; i < n; i++) {
    assert_true(t[i].key == NULL || gpum_option_find(t[i].key) != NULL);
    assert_null(gpum_option_find(t[i].name)); /* an alias is never an option's own name */
    assert_non_null(t[i].unit);
    assert_int_equal(t[i].note[strlen(t[i].note) - 1], '.');
    for (size_t j = i + 1; j < n; j++)
      assert_string_not_equal(t[i].name, t[j].name);
  }
  char *md = NULL;
  assert_int_equal(gpum_options_aliases_markdown(&md), 0);
  assert_non_null(strstr(md, "| `SAFETY_MARGIN_MB` | environment | `safety_margin` | MiB |"));
  assert_non_null(strstr(md, "| `gpu_resource.npu` | config file | (none) |"));
  free(md);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, make_scratch, remove_scratch)
  const struct CMUnitTest tests[] = {
      T(test_env_aliases_with_units),
      T(test_seed_yaml),
      T(test_own_name_wins_in_env),
      T(test_own_name_wins_from_lower_source),
      T(test_own_name_wins_in_one_file),
      T(test_bad_env_alias),
      T(test_bad_file_alias),
      T(test_readings_survive_failed_loads),
      T(test_describe_and_log),
      T(test_dump_and_clone_keep_aliases),
      T(test_map_option),
      T(test_no_alias_no_change),
      T(test_alias_needs_its_option),
      T(test_alias_table_well_formed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
