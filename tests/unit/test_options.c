/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the options table and the configuration: derived names, validation of every
 * type with bad input, precedence (flag > environment > file > default, API above all), the
 * YAML file (nested and dotted keys, every rejection with file:line:column and the key, and
 * all-or-nothing), the environment (explicit envp arrays; unrelated GPUM_* ignored, typos in a
 * known section rejected), flags (anywhere before "--", booleans, argv compaction), the config
 * file search, the YAML dump, and docs/config.md and examples/gpum.yaml kept in step with the
 * table (GPUM_WRITE_DOCS=1 rewrites them).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/options.h>

#include "core/options_internal.h"
#include "options_testlib.h"

/* ---- helpers ---- */

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Every option's text and source, to check that a rejected load changed nothing. */
static char *snapshot(const gpum_config_t *cfg) {
  gpum__strbuf_t b = {0};
  char *out = NULL;
  for (size_t i = 0; i < gpum_option_count(); i++) {
    const char *k = gpum_option_at(i)->key;
    gpum__strbuf_printf(&b, "%s=%s@%d\n", k, gpum_config_get_string(cfg, k),
                        (int)gpum_config_source(cfg, k));
  }
  assert_int_equal(gpum__strbuf_finish(&b, &out), 0);
  return out;
}

/* A table with every type, for the checks the built-in table cannot reach yet. */
static const gpum_option_def_t test_table[] = {
    {"feature.on", GPUM_OPT_BOOL, "false", NULL, 0, 0, false, "A boolean."},
    {"num.count", GPUM_OPT_INT, "5", NULL, -10, 10, false, "A bounded integer."},
    {"num.big", GPUM_OPT_INT, "0", NULL, 0, 0, false, "An unbounded integer."},
    {"num.ratio", GPUM_OPT_DOUBLE, "0.5", NULL, 0, 1, false, "A fraction."},
    {"mem.limit", GPUM_OPT_SIZE, "1GiB", NULL, 0, 0, false, "A size."},
    {"mem.wait", GPUM_OPT_DURATION, "30s", NULL, 0, 0, false, "A duration."},
    {"mode", GPUM_OPT_ENUM, "fast", "fast|safe", 0, 0, false, "An enum | with a pipe."},
    {"http.token", GPUM_OPT_STRING, "", NULL, 0, 0, true, "A secret."},
    {"state_dir", GPUM_OPT_STRING, "/var/lib/gpum", NULL, 0, 0, false, "A path."},
    {"color", GPUM_OPT_ENUM, "auto", "auto|always|never", 0, 0, false, "Colour."},
};

static int use_test_table(void **state) {
  gpum__options_use_table(test_table, ARRAY_LEN(test_table));
  return make_scratch(state);
}

static int use_builtin_table(void **state) {
  gpum__options_use_table(NULL, 0);
  return remove_scratch(state);
}

/* ---- the table ---- */

static void test_table_well_formed(void **state) {
  (void)state;
  size_t n = gpum_option_count();
  assert_true(n >= 12);
  assert_null(gpum_option_at(n));
  for (size_t i = 0; i < n; i++) {
    const gpum_option_def_t *d = gpum_option_at(i);
    char ei[160], ej[160], fi[160], fj[160];
    assert_non_null(d);
    assert_int_equal(strspn(d->key, "abcdefghijklmnopqrstuvwxyz0123456789._"), strlen(d->key));
    assert_ptr_equal(gpum_option_find(d->key), d);
    assert_non_null(d->help);
    assert_int_equal(d->help[strlen(d->help) - 1], '.');
    assert_non_null(d->default_value);
    assert_true((d->type == GPUM_OPT_ENUM) == (d->choices != NULL));
    for (size_t j = i + 1; j < n; j++) {
      const gpum_option_def_t *e = gpum_option_at(j);
      assert_string_not_equal(d->key, e->key);
      assert_string_not_equal(gpum_option_env_name(d, ei, sizeof ei),
                              gpum_option_env_name(e, ej, sizeof ej));
      assert_string_not_equal(gpum_option_flag_name(d, fi, sizeof fi),
                              gpum_option_flag_name(e, fj, sizeof fj));
    }
  }
  /* every default is valid: the config starts from them */
  gpum_config_t *cfg = new_config();
  gpum_config_free(cfg);
}

static void test_builtin_keys_and_defaults(void **state) {
  (void)state;
  static const struct {
    const char *key;
    gpum_opt_type_t type;
    const char *def;
  } want[] = {
      {"backend", GPUM_OPT_ENUM, "auto"},           {"nvml.library", GPUM_OPT_STRING, ""},
      {"cuda.library", GPUM_OPT_STRING, ""},        {"sim.node", GPUM_OPT_STRING, ""},
      {"sim.library", GPUM_OPT_STRING, ""},         {"devices", GPUM_OPT_STRING, ""},
      {"log.level", GPUM_OPT_ENUM, "warn"},         {"log.target", GPUM_OPT_ENUM, "stderr"},
      {"retry.count", GPUM_OPT_INT, "5"},           {"retry.base", GPUM_OPT_DURATION, "10ms"},
      {"status.interval", GPUM_OPT_DURATION, "2s"}, {"color", GPUM_OPT_ENUM, "auto"},
  };
  gpum_config_t *cfg = new_config();
  for (size_t i = 0; i < ARRAY_LEN(want); i++) {
    const gpum_option_def_t *d = gpum_option_find(want[i].key);
    if (d == NULL)
      fail_msg("option %s missing", want[i].key);
    assert_int_equal(d->type, want[i].type);
    assert_string_equal(d->default_value, want[i].def);
    assert_string_equal(gpum_config_get_string(cfg, want[i].key), want[i].def);
    assert_int_equal(gpum_config_source(cfg, want[i].key), GPUM_OPT_SRC_DEFAULT);
  }
  assert_string_equal(gpum_option_find("backend")->choices, "auto|nvml|rocm|levelzero|host");
  assert_string_equal(gpum_option_find("log.level")->choices, "trace|debug|info|warn|error|off");
  assert_string_equal(gpum_option_find("log.target")->choices, "stderr|syslog|none");
  assert_string_equal(gpum_option_find("color")->choices, "auto|always|never");
  assert_int_equal(gpum_config_get_int(cfg, "retry.count"), 5);
  assert_int_equal(gpum_config_get_duration(cfg, "retry.base"), 10);
  assert_int_equal(gpum_config_get_duration(cfg, "status.interval"), 2000);
  gpum_config_free(cfg);
}

static void test_derived_names(void **state) {
  (void)state;
  char buf[64];
  static const gpum_option_def_t listen = {"http.listen", GPUM_OPT_STRING, "", NULL, 0, 0, false,
                                           "x."};
  static const gpum_option_def_t state_dir = {"state_dir", GPUM_OPT_STRING, "",  NULL, 0,
                                              0,           false,           "x."};
  static const gpum_option_def_t dashed = {
      "pool.max-split", GPUM_OPT_STRING, "", NULL, 0, 0, false, "x."};
  assert_string_equal(gpum_option_env_name(&listen, buf, sizeof buf), "GPUM_HTTP_LISTEN");
  assert_string_equal(gpum_option_flag_name(&listen, buf, sizeof buf), "--http-listen");
  assert_string_equal(gpum_option_env_name(&state_dir, buf, sizeof buf), "GPUM_STATE_DIR");
  assert_string_equal(gpum_option_flag_name(&state_dir, buf, sizeof buf), "--state-dir");
  assert_string_equal(gpum_option_env_name(&dashed, buf, sizeof buf), "GPUM_POOL_MAX_SPLIT");
  assert_string_equal(gpum_option_flag_name(&dashed, buf, sizeof buf), "--pool-max-split");
  assert_string_equal(gpum_option_env_name(gpum_option_find("sim.library"), buf, sizeof buf),
                      "GPUM_SIM_LIBRARY");
  assert_string_equal(gpum_option_flag_name(gpum_option_find("log.level"), buf, sizeof buf),
                      "--log-level");
  /* a short buffer is cut and stays terminated */
  char small[8];
  memset(small, 'z', sizeof small);
  assert_string_equal(gpum_option_env_name(&listen, small, sizeof small), "GPUM_HT");
  assert_string_equal(gpum_option_flag_name(&listen, small, 3), "--");
}

static void test_find_unknown(void **state) {
  (void)state;
  assert_null(gpum_option_find("log.levle"));
  assert_null(gpum_option_find(""));
  assert_null(gpum_option_find(NULL));
  assert_null(gpum_option_find("log"));
  assert_null(gpum_option_find("LOG.LEVEL")); /* keys are case-sensitive */
}

/* ---- set: validation and precedence ---- */

static void test_set_enum_message(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  expect_err(gpum_config_set(cfg, "log.level", "loud", GPUM_OPT_SRC_ENV), GPUM_EINVAL, NULL);
  assert_string_equal(gpum_last_error(), "option 'log.level' (from GPUM_LOG_LEVEL): 'loud' is not "
                                         "one of trace|debug|info|warn|error|off");
  expect_err(gpum_config_set(cfg, "log.level", "loud", GPUM_OPT_SRC_FLAG), GPUM_EINVAL,
             "(from --log-level)");
  expect_err(gpum_config_set(cfg, "log.level", "", GPUM_OPT_SRC_API), GPUM_EINVAL,
             "option 'log.level': empty value (expected one of trace|");
  assert_string_equal(gpum_config_get_string(cfg, "log.level"), "warn");
  /* enums match case-insensitively and store the table's spelling */
  assert_int_equal(gpum_config_set(cfg, "log.level", "DEBUG", GPUM_OPT_SRC_API), 0);
  assert_string_equal(gpum_config_get_string(cfg, "log.level"), "debug");
  gpum_config_free(cfg);
}

static void test_set_unknown_key(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  expect_err(gpum_config_set(cfg, "log.levle", "debug", GPUM_OPT_SRC_API), GPUM_EUNKNOWN_KEY,
             "unknown option 'log.levle'; did you mean 'log.level'?");
  expect_err(gpum_config_set(cfg, "zzzzzzzzz", "1", GPUM_OPT_SRC_FILE), GPUM_EUNKNOWN_KEY,
             "unknown option 'zzzzzzzzz' (from config file)");
  assert_null(strstr(gpum_last_error(), "did you mean"));
  expect_err(gpum_config_set(cfg, NULL, "1", GPUM_OPT_SRC_API), GPUM_EINVAL, NULL);
  expect_err(gpum_config_set(NULL, "log.level", "1", GPUM_OPT_SRC_API), GPUM_EINVAL, NULL);
  expect_err(gpum_config_set(cfg, "log.level", NULL, GPUM_OPT_SRC_API), GPUM_EINVAL, "no value");
  gpum_config_free(cfg);
}

static void test_set_int_bounds(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  assert_int_equal(gpum_config_set(cfg, "retry.count", "0", GPUM_OPT_SRC_API), 0);
  assert_int_equal(gpum_config_set(cfg, "retry.count", "100", GPUM_OPT_SRC_API), 0);
  assert_int_equal(gpum_config_get_int(cfg, "retry.count"), 100);
  expect_err(gpum_config_set(cfg, "retry.count", "101", GPUM_OPT_SRC_API), GPUM_ERANGE,
             "option 'retry.count': '101' is out of range (0 to 100)");
  expect_err(gpum_config_set(cfg, "retry.count", "-1", GPUM_OPT_SRC_API), GPUM_ERANGE, NULL);
  expect_err(gpum_config_set(cfg, "retry.count", "3x", GPUM_OPT_SRC_API), GPUM_EINVAL,
             "'3x' is not an integer");
  expect_err(gpum_config_set(cfg, "retry.count", " 3", GPUM_OPT_SRC_API), GPUM_EINVAL, NULL);
  expect_err(gpum_config_set(cfg, "retry.count", "1.5", GPUM_OPT_SRC_API), GPUM_EINVAL, NULL);
  expect_err(gpum_config_set(cfg, "retry.count", "99999999999999999999", GPUM_OPT_SRC_API),
             GPUM_ERANGE, NULL);
  assert_int_equal(gpum_config_get_int(cfg, "retry.count"), 100);
  expect_err(gpum_config_set(cfg, "retry.base", "soon", GPUM_OPT_SRC_API), GPUM_EINVAL,
             "option 'retry.base': 'soon' is not a duration");
  expect_err(gpum_config_set(cfg, "retry.base", "-5ms", GPUM_OPT_SRC_API), GPUM_EINVAL, "negative");
  assert_int_equal(gpum_config_set(cfg, "retry.base", "1m30s", GPUM_OPT_SRC_API), 0);
  assert_int_equal(gpum_config_get_duration(cfg, "retry.base"), 90000);
  gpum_config_free(cfg);
}

static void test_set_every_type(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  static const char *const yes[] = {"true", "yes", "on", "1", "TRUE", "Yes"};
  static const char *const no[] = {"false", "no", "off", "0", "False", "OFF"};
  for (size_t i = 0; i < ARRAY_LEN(yes); i++) {
    assert_int_equal(gpum_config_set(cfg, "feature.on", yes[i], GPUM_OPT_SRC_API), 0);
    assert_true(gpum_config_get_bool(cfg, "feature.on"));
    assert_string_equal(gpum_config_get_string(cfg, "feature.on"), "true");
    assert_int_equal(gpum_config_set(cfg, "feature.on", no[i], GPUM_OPT_SRC_API), 0);
    assert_false(gpum_config_get_bool(cfg, "feature.on"));
  }
  expect_err(gpum_config_set(cfg, "feature.on", "maybe", GPUM_OPT_SRC_API), GPUM_EINVAL,
             "'maybe' is not a boolean");
  expect_err(gpum_config_set(cfg, "feature.on", "", GPUM_OPT_SRC_API), GPUM_EINVAL,
             "empty value (expected a boolean)");
  expect_err(gpum_config_set(cfg, "feature.on", "2", GPUM_OPT_SRC_API), GPUM_EINVAL, NULL);

  assert_int_equal(gpum_config_set(cfg, "num.count", "-10", GPUM_OPT_SRC_API), 0);
  assert_int_equal(gpum_config_get_int(cfg, "num.count"), -10);
  expect_err(gpum_config_set(cfg, "num.count", "-11", GPUM_OPT_SRC_API), GPUM_ERANGE, NULL);
  assert_int_equal(gpum_config_set(cfg, "num.big", "-9223372036854775808", GPUM_OPT_SRC_API), 0);
  assert_true(gpum_config_get_int(cfg, "num.big") == INT64_MIN);
  expect_err(gpum_config_set(cfg, "num.big", "9223372036854775808", GPUM_OPT_SRC_API), GPUM_ERANGE,
             "does not fit");

  assert_int_equal(gpum_config_set(cfg, "num.ratio", "0.25", GPUM_OPT_SRC_API), 0);
  assert_true(gpum_config_get_double(cfg, "num.ratio") == 0.25);
  assert_int_equal(gpum_config_set(cfg, "num.ratio", "1e-1", GPUM_OPT_SRC_API), 0);
  static const char *const bad_doubles[] = {"nan",    "inf",  "-inf", "1.5", "-0.1",
                                            "0x1p-1", "half", "0.5.", ""};
  for (size_t i = 0; i < ARRAY_LEN(bad_doubles); i++)
    assert_true(gpum_config_set(cfg, "num.ratio", bad_doubles[i], GPUM_OPT_SRC_API) < 0);
  assert_true(gpum_config_get_double(cfg, "num.ratio") == 0.1);

  assert_int_equal(gpum_config_set(cfg, "mem.limit", "8GiB", GPUM_OPT_SRC_API), 0);
  assert_true(gpum_config_get_size(cfg, "mem.limit") == (UINT64_C(8) << 30));
  assert_string_equal(gpum_config_get_string(cfg, "mem.limit"), "8GiB");
  expect_err(gpum_config_set(cfg, "mem.limit", "16EiB", GPUM_OPT_SRC_API), GPUM_ERANGE,
             "option 'mem.limit': size '16EiB' is too large");
  expect_err(gpum_config_set(cfg, "mem.limit", "-1G", GPUM_OPT_SRC_API), GPUM_EINVAL, "negative");
  assert_true(gpum_config_get_size(cfg, "mem.limit") == (UINT64_C(8) << 30));

  assert_int_equal(gpum_config_set(cfg, "mem.wait", "500ms", GPUM_OPT_SRC_API), 0);
  assert_int_equal(gpum_config_get_duration(cfg, "mem.wait"), 500);

  expect_err(gpum_config_set(cfg, "mode", "fastest", GPUM_OPT_SRC_API), GPUM_EINVAL,
             "'fastest' is not one of fast|safe");
  expect_err(gpum_config_set(cfg, "mode", "fast|safe", GPUM_OPT_SRC_API), GPUM_EINVAL, NULL);
  expect_err(gpum_config_set(cfg, "mode", "fas", GPUM_OPT_SRC_API), GPUM_EINVAL, NULL);
  assert_int_equal(gpum_config_set(cfg, "mode", "Safe", GPUM_OPT_SRC_API), 0);
  assert_string_equal(gpum_config_get_string(cfg, "mode"), "safe");

  /* strings take anything, the empty string included */
  assert_int_equal(gpum_config_set(cfg, "state_dir", "", GPUM_OPT_SRC_API), 0);
  assert_string_equal(gpum_config_get_string(cfg, "state_dir"), "");
  gpum_config_free(cfg);
}

static int log_errors;
static void count_errors(gpum_log_level_t level, const char *module, const char *line, void *arg) {
  (void)module;
  (void)line;
  (void)arg;
  if (level == GPUM_LOG_ERROR)
    log_errors++;
}

static void test_getters_wrong_type(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  log_errors = 0;
  gpum_log_set_callback(count_errors, NULL);
  assert_int_equal(gpum_config_get_int(cfg, "mem.limit"), 0);
  assert_false(gpum_config_get_bool(cfg, "num.count"));
  assert_true(gpum_config_get_double(cfg, "num.count") == 0.0);
  assert_int_equal(gpum_config_get_size(cfg, "mem.wait"), 0);
  assert_int_equal(gpum_config_get_duration(cfg, "mem.limit"), 0);
  assert_int_equal(gpum_config_get_int(cfg, "no.such"), 0);
  assert_string_equal(gpum_config_get_string(cfg, "no.such"), "");
  assert_int_equal(gpum_config_source(cfg, "no.such"), GPUM_OPT_SRC_DEFAULT);
  gpum_log_set_callback(NULL, NULL);
  assert_int_equal(log_errors, 8);
  /* the right type reads fine and logs nothing */
  assert_int_equal(gpum_config_get_int(cfg, "num.count"), 5);
  assert_int_equal(log_errors, 8);
  gpum_config_free(cfg);
}

static void test_precedence(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  assert_int_equal(gpum_config_set(cfg, "log.level", "info", GPUM_OPT_SRC_FILE), 0);
  assert_int_equal(gpum_config_source(cfg, "log.level"), GPUM_OPT_SRC_FILE);
  assert_int_equal(gpum_config_set(cfg, "log.level", "debug", GPUM_OPT_SRC_ENV), 0);
  assert_int_equal(gpum_config_set(cfg, "log.level", "error", GPUM_OPT_SRC_FLAG), 0);
  assert_string_equal(gpum_config_get_string(cfg, "log.level"), "error");
  /* lower sources afterwards change nothing, but are still validated */
  assert_int_equal(gpum_config_set(cfg, "log.level", "trace", GPUM_OPT_SRC_ENV), 0);
  assert_int_equal(gpum_config_set(cfg, "log.level", "trace", GPUM_OPT_SRC_FILE), 0);
  assert_int_equal(gpum_config_set(cfg, "log.level", "trace", GPUM_OPT_SRC_DEFAULT), 0);
  expect_err(gpum_config_set(cfg, "log.level", "loud", GPUM_OPT_SRC_FILE), GPUM_EINVAL, NULL);
  assert_string_equal(gpum_config_get_string(cfg, "log.level"), "error");
  assert_int_equal(gpum_config_source(cfg, "log.level"), GPUM_OPT_SRC_FLAG);
  /* the same source replaces (the last flag wins) */
  assert_int_equal(gpum_config_set(cfg, "log.level", "info", GPUM_OPT_SRC_FLAG), 0);
  assert_string_equal(gpum_config_get_string(cfg, "log.level"), "info");
  /* a program's own set is above all */
  assert_int_equal(gpum_config_set(cfg, "log.level", "off", GPUM_OPT_SRC_API), 0);
  assert_int_equal(gpum_config_set(cfg, "log.level", "debug", GPUM_OPT_SRC_FLAG), 0);
  assert_string_equal(gpum_config_get_string(cfg, "log.level"), "off");
  assert_int_equal(gpum_config_source(cfg, "log.level"), GPUM_OPT_SRC_API);
  gpum_config_free(cfg);
}

static void test_source_names(void **state) {
  (void)state;
  assert_string_equal(gpum_opt_source_name(GPUM_OPT_SRC_DEFAULT), "default");
  assert_string_equal(gpum_opt_source_name(GPUM_OPT_SRC_FILE), "file");
  assert_string_equal(gpum_opt_source_name(GPUM_OPT_SRC_ENV), "environment");
  assert_string_equal(gpum_opt_source_name(GPUM_OPT_SRC_FLAG), "flag");
  assert_string_equal(gpum_opt_source_name(GPUM_OPT_SRC_API), "api");
  assert_string_equal(gpum_opt_source_name((gpum_opt_source_t)77), "unknown");
}

/* ---- environment ---- */

static void test_env_applies_and_ignores(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  char *envp[] = {"PATH=/usr/bin",
                  "GPUM_LOG_LEVEL=debug",
                  "GPUM_SIM_NODE=node-a",
                  "GPUM_SIM_LIBRARY=/x/libgpum_sim.so",
                  "GPUM_RETRY_BASE=50ms",
                  "GPUM_BIN=/build/bin/gpum",
                  "GPUM_SOURCE_DIR=/src",
                  "GPUM_BUILD_DIR=/build",
                  "GPUM_TEST_PROGS=/build/bin/test-progs",
                  "GPUM_CONFIG=/nowhere.yaml",
                  "GPUM_WRITE_DOCS=1",
                  "GPUM_=x",
                  "GPUM_NOEQUALS",
                  "gpum_log_level=trace",
                  "XGPUM_LOG_LEVEL=trace",
                  NULL};
  assert_int_equal(gpum_config_load_env(cfg, envp), 0);
  assert_string_equal(gpum_config_get_string(cfg, "log.level"), "debug");
  assert_int_equal(gpum_config_source(cfg, "log.level"), GPUM_OPT_SRC_ENV);
  assert_string_equal(gpum_config_get_string(cfg, "sim.node"), "node-a");
  assert_string_equal(gpum_config_get_string(cfg, "sim.library"), "/x/libgpum_sim.so");
  assert_int_equal(gpum_config_get_duration(cfg, "retry.base"), 50);
  assert_int_equal(gpum_config_source(cfg, "backend"), GPUM_OPT_SRC_DEFAULT);
  gpum_config_free(cfg);
}

static void test_env_unknown_in_section(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  char *before = snapshot(cfg);
  char *envp[] = {"GPUM_BACKEND=host", "GPUM_LOG_LEVLE=debug", NULL};
  expect_err(gpum_config_load_env(cfg, envp), GPUM_EUNKNOWN_KEY,
             "unknown option in environment variable GPUM_LOG_LEVLE; did you mean "
             "GPUM_LOG_LEVEL?");
  char *after = snapshot(cfg);
  assert_string_equal(before, after); /* GPUM_BACKEND was not applied either */
  free(after);
  char *envp2[] = {"GPUM_SIM_NODES=x", NULL};
  expect_err(gpum_config_load_env(cfg, envp2), GPUM_EUNKNOWN_KEY, "GPUM_SIM_NODES");
  char *envp3[] = {"GPUM_RETRY_TIMES_MANY=x", NULL};
  expect_err(gpum_config_load_env(cfg, envp3), GPUM_EUNKNOWN_KEY, "GPUM_RETRY_TIMES_MANY");
  assert_null(strstr(gpum_last_error(), "did you mean"));
  /* "GPUM_LOG" alone is not inside the section "GPUM_LOG_" */
  char *envp4[] = {"GPUM_LOG=x", "GPUM_LOG_=x", NULL};
  assert_int_equal(gpum_config_load_env(cfg, envp4), 0);
  after = snapshot(cfg);
  assert_string_equal(before, after);
  free(after);
  free(before);
  gpum_config_free(cfg);
}

static void test_env_bad_value(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  char *envp[] = {"GPUM_LOG_LEVEL=debug", "GPUM_RETRY_COUNT=lots", NULL};
  expect_err(gpum_config_load_env(cfg, envp), GPUM_EINVAL,
             "option 'retry.count' (from GPUM_RETRY_COUNT): 'lots' is not an integer");
  assert_string_equal(gpum_config_get_string(cfg, "log.level"), "warn");
  char *envp2[] = {"GPUM_BACKEND=", NULL};
  expect_err(gpum_config_load_env(cfg, envp2), GPUM_EINVAL, "GPUM_BACKEND");
  char *envp3[] = {"GPUM_BACKEND=cuda", NULL};
  expect_err(
      gpum_config_load_env(cfg, envp3), GPUM_EINVAL,
      "option 'backend' (from GPUM_BACKEND): 'cuda' is not one of auto|nvml|rocm|levelzero|host");
  gpum_config_free(cfg);
}

static void test_env_process_environment(void **state) {
  (void)state;
  /* ctest runs every test with GPUM_BIN, GPUM_SIM_LIBRARY, GPUM_SOURCE_DIR...: they load. */
  gpum_config_t *cfg = new_config();
  assert_int_equal(gpum_config_load_env(cfg, NULL), 0);
  const char *sim = getenv("GPUM_SIM_LIBRARY");
  if (sim != NULL)
    assert_string_equal(gpum_config_get_string(cfg, "sim.library"), sim);
  gpum_config_free(cfg);
}

static void test_env_below_flag_above_file(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  char *envp[] = {"GPUM_LOG_LEVEL=debug", "GPUM_BACKEND=host", NULL};
  assert_int_equal(gpum_config_set(cfg, "log.level", "error", GPUM_OPT_SRC_FLAG), 0);
  assert_int_equal(gpum_config_set(cfg, "backend", "nvml", GPUM_OPT_SRC_FILE), 0);
  assert_int_equal(gpum_config_load_env(cfg, envp), 0);
  assert_string_equal(gpum_config_get_string(cfg, "log.level"), "error");
  assert_string_equal(gpum_config_get_string(cfg, "backend"), "host");
  gpum_config_free(cfg);
}

/* ---- flags ---- */

static void assert_argv(int argc, char **argv, const char *const *want, int n) {
  assert_int_equal(argc, n);
  for (int i = 0; i < n; i++)
    assert_string_equal(argv[i], want[i]);
}

static void test_args_anywhere_before_dashdash(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  char *argv[] = {"gpum", "--log-level", "debug",     "status", "--json", "--retry-count=5",
                  "-v",   "--",          "--backend", "host",   NULL};
  int argc = 10;
  assert_int_equal(gpum_config_load_args(cfg, &argc, argv), 0);
  static const char *const want[] = {"gpum", "status", "--json", "-v", "--", "--backend", "host"};
  assert_argv(argc, argv, want, 7);
  assert_null(argv[7]);
  assert_string_equal(gpum_config_get_string(cfg, "log.level"), "debug");
  assert_int_equal(gpum_config_source(cfg, "log.level"), GPUM_OPT_SRC_FLAG);
  assert_int_equal(gpum_config_get_int(cfg, "retry.count"), 5);
  assert_string_equal(gpum_config_get_string(cfg, "backend"), "auto");
  gpum_config_free(cfg);
}

static void test_args_unknown_left_alone(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  char *argv[] = {"gpum", "sim",   "inject",     "n1",           "--device",
                  "0",    "--xid", "79",         "--log-levle",  "x",
                  "-",    "--=y",  "--no-color", "--no-backend", NULL};
  int argc = 14;
  assert_int_equal(gpum_config_load_args(cfg, &argc, argv), 0);
  assert_int_equal(argc, 14);
  assert_string_equal(argv[8], "--log-levle");
  assert_string_equal(argv[12], "--no-color"); /* color is an enum: the program's own flag */
  assert_string_equal(argv[13], "--no-backend");
  gpum_config_free(cfg);
}

static void test_args_value_forms(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  char *argv[] = {"gpum", "--devices=0,2", "--sim-node", "--weird", "--nvml-library=", NULL};
  int argc = 5;
  assert_int_equal(gpum_config_load_args(cfg, &argc, argv), 0);
  assert_int_equal(argc, 1);
  assert_string_equal(gpum_config_get_string(cfg, "devices"), "0,2");
  /* the next argument is the value, whatever it looks like */
  assert_string_equal(gpum_config_get_string(cfg, "sim.node"), "--weird");
  assert_string_equal(gpum_config_get_string(cfg, "nvml.library"), "");
  assert_int_equal(gpum_config_source(cfg, "nvml.library"), GPUM_OPT_SRC_FLAG);
  /* the last of repeated flags wins */
  char *argv2[] = {"gpum", "--backend", "host", "--backend", "nvml", NULL};
  argc = 5;
  assert_int_equal(gpum_config_load_args(cfg, &argc, argv2), 0);
  assert_string_equal(gpum_config_get_string(cfg, "backend"), "nvml");
  gpum_config_free(cfg);
}

static void test_args_bool_flags(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  char *argv[] = {"prog", "--feature-on", "run", NULL};
  int argc = 3;
  assert_int_equal(gpum_config_load_args(cfg, &argc, argv), 0);
  assert_true(gpum_config_get_bool(cfg, "feature.on"));
  static const char *const want[] = {"prog", "run"}; /* "run" was not taken as the value */
  assert_argv(argc, argv, want, 2);
  char *argv2[] = {"prog", "--no-feature-on", NULL};
  argc = 2;
  assert_int_equal(gpum_config_load_args(cfg, &argc, argv2), 0);
  assert_false(gpum_config_get_bool(cfg, "feature.on"));
  char *argv3[] = {"prog", "--feature-on=yes", NULL};
  argc = 2;
  assert_int_equal(gpum_config_load_args(cfg, &argc, argv3), 0);
  assert_true(gpum_config_get_bool(cfg, "feature.on"));
  char *argv4[] = {"prog", "--no-feature-on=true", NULL};
  argc = 2;
  expect_err(gpum_config_load_args(cfg, &argc, argv4), GPUM_EINVAL,
             "flag --no-feature-on takes no value");
  assert_int_equal(argc, 2);
  char *argv5[] = {"prog", "--feature-on=perhaps", NULL};
  expect_err(gpum_config_load_args(cfg, &argc, argv5), GPUM_EINVAL,
             "option 'feature.on' (from --feature-on): 'perhaps' is not a boolean");
  assert_true(gpum_config_get_bool(cfg, "feature.on"));
  /* --state-dir comes from the key state_dir */
  char *argv6[] = {"prog", "--state-dir", "/s", NULL};
  argc = 3;
  assert_int_equal(gpum_config_load_args(cfg, &argc, argv6), 0);
  assert_string_equal(gpum_config_get_string(cfg, "state_dir"), "/s");
  gpum_config_free(cfg);
}

static void test_args_errors_change_nothing(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  char *before = snapshot(cfg);
  char *argv[] = {"gpum", "--backend", "host", "status", "--log-level", NULL};
  char *copy[6];
  memcpy(copy, argv, sizeof argv);
  int argc = 5;
  expect_err(gpum_config_load_args(cfg, &argc, argv), GPUM_EINVAL,
             "flag --log-level needs a value");
  assert_int_equal(argc, 5);
  assert_memory_equal(argv, copy, sizeof argv);
  char *argv2[] = {"gpum", "--backend", "host", "--log-level", "loud", NULL};
  argc = 5;
  expect_err(gpum_config_load_args(cfg, &argc, argv2), GPUM_EINVAL,
             "option 'log.level' (from --log-level): 'loud' is not one of "
             "trace|debug|info|warn|error|off");
  char *argv3[] = {"gpum", "--retry-count=-3", NULL};
  argc = 2;
  expect_err(gpum_config_load_args(cfg, &argc, argv3), GPUM_ERANGE, "(from --retry-count)");
  char *after = snapshot(cfg);
  assert_string_equal(before, after); /* --backend host was not applied */
  free(before);
  free(after);
  gpum_config_free(cfg);
}

static void test_args_edge_cases(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  int argc = 0;
  assert_int_equal(gpum_config_load_args(cfg, &argc, NULL), 0);
  char *argv[] = {"gpum", NULL};
  argc = 1;
  assert_int_equal(gpum_config_load_args(cfg, &argc, argv), 0);
  assert_int_equal(argc, 1);
  expect_err(gpum_config_load_args(cfg, NULL, argv), GPUM_EINVAL, NULL);
  expect_err(gpum_config_load_args(NULL, &argc, argv), GPUM_EINVAL, NULL);
  /* argv[0] is never an option, even if it looks like one */
  char *argv2[] = {"--backend", "host", NULL};
  argc = 2;
  assert_int_equal(gpum_config_load_args(cfg, &argc, argv2), 0);
  assert_int_equal(argc, 2);
  assert_string_equal(gpum_config_get_string(cfg, "backend"), "auto");
  gpum_config_free(cfg);
}

/* ---- the YAML file ---- */

static void test_file_nested_and_dotted(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  const char *path = write_yaml("# gpum config\n"
                                "backend: host\n"
                                "log:\n"
                                "  level: debug   # comment\n"
                                "  target: syslog\n"
                                "retry.count: 7\n"
                                "sim:\n"
                                "  node: \"lab: one\"\n"
                                "  library: '/opt/x y/libgpum_sim.so'\n"
                                "nvml:\n"
                                "  library:\n"
                                "status: {interval: 5s}\n"
                                "devices: 0,2\n");
  int err = gpum_config_load_file(cfg, path);
  if (err)
    fail_msg("%s", gpum_last_error());
  assert_string_equal(gpum_config_get_string(cfg, "backend"), "host");
  assert_string_equal(gpum_config_get_string(cfg, "log.level"), "debug");
  assert_string_equal(gpum_config_get_string(cfg, "log.target"), "syslog");
  assert_int_equal(gpum_config_get_int(cfg, "retry.count"), 7);
  assert_string_equal(gpum_config_get_string(cfg, "sim.node"), "lab: one");
  assert_string_equal(gpum_config_get_string(cfg, "sim.library"), "/opt/x y/libgpum_sim.so");
  assert_string_equal(gpum_config_get_string(cfg, "nvml.library"), "");
  assert_int_equal(gpum_config_source(cfg, "nvml.library"), GPUM_OPT_SRC_FILE);
  assert_int_equal(gpum_config_get_duration(cfg, "status.interval"), 5000);
  assert_string_equal(gpum_config_get_string(cfg, "devices"), "0,2");
  assert_int_equal(gpum_config_source(cfg, "log.level"), GPUM_OPT_SRC_FILE);
  assert_int_equal(gpum_config_source(cfg, "color"), GPUM_OPT_SRC_DEFAULT);
  gpum_config_free(cfg);
}

static void test_file_empty_and_comments(void **state) {
  (void)state;
  static const char *const docs[] = {"",   "# only a comment\n", "---\n", "---\n...\n", "{}\n",
                                     "~\n"};
  for (size_t i = 0; i < ARRAY_LEN(docs); i++) {
    gpum_config_t *cfg = new_config();
    char *before = snapshot(cfg);
    int err = gpum_config_load_file(cfg, write_yaml(docs[i]));
    if (err)
      fail_msg("document %zu: %s", i, gpum_last_error());
    char *after = snapshot(cfg);
    assert_string_equal(before, after);
    free(before);
    free(after);
    gpum_config_free(cfg);
  }
}

typedef struct {
  const char *yaml;
  int err;
  const char *parts[3];
} bad_file_t;

static void test_file_rejections(void **state) {
  (void)state;
  static const bad_file_t cases[] = {
      {"log:\n  levle: debug\n",
       GPUM_EUNKNOWN_KEY,
       {"unknown option 'log.levle' (from ", ":2:3)", "did you mean 'log.level'?"}},
      {"backend: host\nhtpp:\n  listen: x\n", GPUM_EUNKNOWN_KEY, {"unknown option 'htpp'", ":2:1"}},
      {"a:\n  b:\n    c: 1\n", GPUM_EUNKNOWN_KEY, {"unknown option 'a'"}},
      {"log.level: loud\n",
       GPUM_EINVAL,
       {"option 'log.level' (from ",
        ":1:1): 'loud' is not one of trace|debug|info|warn|error|off"}},
      {"retry:\n  count: 1000\n", GPUM_ERANGE, {"option 'retry.count'", ":2:3", "out of range"}},
      {"retry.base: soon\n", GPUM_EINVAL, {"option 'retry.base'", "'soon' is not a duration"}},
      {"backend: [nvml, host]\n",
       GPUM_EINVAL,
       {"option 'backend'", "expected a single value, found a list"}},
      {"backend:\n  x: y\n", GPUM_EINVAL, {"option 'backend'", "found a mapping"}},
      {"log: debug\n", GPUM_EINVAL, {"'log' (from ", "is a group of options", "log.level"}},
      {"log.level: info\nlog:\n  level: debug\n",
       GPUM_EINVAL,
       {"option 'log.level' (from ", ":3:3) is set twice", "first on line 1"}},
      {"backend: host\nbackend: nvml\n", GPUM_EINVAL, {"set twice"}},
      {"backend: host: x\n", GPUM_EPARSE, {":1:14", "YAML syntax error"}},
      {"log: [debug]\n", GPUM_EINVAL, {"'log' (from ", "is a group of options"}},
      {"log:\n  level: debug\n target: none\n", GPUM_EPARSE, {":3:", "YAML syntax error"}},
      {"backend: \"open\n", GPUM_EPARSE, {"YAML syntax error"}},
      {"\tbackend: host\n", GPUM_EPARSE, {":1:1", "YAML syntax error"}},
      {"- backend\n- host\n", GPUM_EPARSE, {":1:1", "expected a mapping of options, found a list"}},
      {"hello\n", GPUM_EPARSE, {"expected a mapping of options at the top level"}},
      {"backend: host\n---\nbackend: nvml\n", GPUM_EPARSE, {":2:1", "only one YAML document"}},
      {"log.level: &lv debug\nlog.target: *lv\n",
       GPUM_EINVAL,
       {"option 'log.target'", "found an alias"}},
      {"? [a, b]\n: x\n", GPUM_EPARSE, {"expected an option name, found a list"}},
      {"\"\": x\n", GPUM_EPARSE, {"an empty key"}},
      {"sim.node: \"a\\0b\"\n", GPUM_EINVAL, {"option 'sim.node'", "NUL character"}},
      {"log.level: debug\nretry.count: nope\n", GPUM_EINVAL, {"'nope' is not an integer"}},
      {"backend: nvml\nlog:\n  level: trace\n  target: journal\n",
       GPUM_EINVAL,
       {"option 'log.target'", ":4:3", "'journal' is not one of stderr|syslog|none"}},
  };
  for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
    gpum_config_t *cfg = new_config();
    char *before = snapshot(cfg);
    const char *path = write_yaml(cases[i].yaml);
    int err = gpum_config_load_file(cfg, path);
    if (err != cases[i].err)
      fail_msg("case %zu: got %s (%s), expected %s", i, gpum_err_name(err), gpum_last_error(),
               gpum_err_name(cases[i].err));
    if (strstr(gpum_last_error(), path) == NULL)
      fail_msg("case %zu: detail '%s' does not name the file", i, gpum_last_error());
    for (size_t j = 0; j < 3 && cases[i].parts[j]; j++)
      if (strstr(gpum_last_error(), cases[i].parts[j]) == NULL)
        fail_msg("case %zu: detail '%s' lacks '%s'", i, gpum_last_error(), cases[i].parts[j]);
    char *after = snapshot(cfg);
    if (strcmp(before, after) != 0)
      fail_msg("case %zu: a rejected file changed the config", i);
    free(before);
    free(after);
    gpum_config_free(cfg);
  }
}

static void test_file_missing_or_unreadable(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  char path[160];
  snprintf(path, sizeof path, "%s/does-not-exist.yaml", scratch);
  expect_err(gpum_config_load_file(cfg, path), GPUM_ENOENT, path);
  snprintf(path, sizeof path, "%s/does-not-exist/x.yaml", scratch);
  expect_err(gpum_config_load_file(cfg, path), GPUM_ENOENT, NULL);
  /* a directory opens but cannot be read */
  assert_true(gpum_config_load_file(cfg, scratch) < 0);
  assert_non_null(strstr(gpum_last_error(), scratch));
  expect_err(gpum_config_load_file(cfg, NULL), GPUM_EINVAL, NULL);
  expect_err(gpum_config_load_file(NULL, path), GPUM_EINVAL, NULL);
  gpum_config_free(cfg);
}

static void test_file_below_env(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  char *envp[] = {"GPUM_LOG_LEVEL=error", NULL};
  assert_int_equal(gpum_config_load_env(cfg, envp), 0);
  assert_int_equal(gpum_config_load_file(cfg, write_yaml("log.level: debug\nbackend: host\n")), 0);
  assert_string_equal(gpum_config_get_string(cfg, "log.level"), "error");
  assert_string_equal(gpum_config_get_string(cfg, "backend"), "host");
  gpum_config_free(cfg);
}

static void test_file_all_types(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  int err = gpum_config_load_file(cfg, write_yaml("feature:\n  on: yes\n"
                                                  "num: {count: -3, ratio: 0.75}\n"
                                                  "mem:\n  limit: 1.5TiB\n  wait: 1h30m\n"
                                                  "mode: safe\nstate_dir: /tmp/s\n"));
  if (err)
    fail_msg("%s", gpum_last_error());
  assert_true(gpum_config_get_bool(cfg, "feature.on"));
  assert_int_equal(gpum_config_get_int(cfg, "num.count"), -3);
  assert_true(gpum_config_get_double(cfg, "num.ratio") == 0.75);
  assert_true(gpum_config_get_size(cfg, "mem.limit") == (UINT64_C(3) << 39));
  assert_int_equal(gpum_config_get_duration(cfg, "mem.wait"), 5400000);
  expect_err(gpum_config_load_file(cfg, write_yaml("mem:\n  limit: 16EiB\n")), GPUM_ERANGE,
             "option 'mem.limit' (from ");
  gpum_config_free(cfg);
}

/* ---- load_all and the config file search ---- */

static void test_default_path(void **state) {
  (void)state;
  char buf[256];
  char *env_xdg[] = {"HOME=/home/u", "XDG_CONFIG_HOME=/cfg", NULL};
  char *env_rel[] = {"HOME=/home/u", "XDG_CONFIG_HOME=rel/dir", NULL};
  char *env_home[] = {"HOME=/home/u", NULL};
  char *env_none[] = {"HOME=", NULL};
  assert_int_equal(gpum__config_default_path(env_xdg, 0, buf, sizeof buf), 0);
  assert_string_equal(buf, "/etc/gpum/gpum.yaml");
  assert_int_equal(gpum__config_default_path(env_xdg, 1000, buf, sizeof buf), 0);
  assert_string_equal(buf, "/cfg/gpum/gpum.yaml");
  assert_int_equal(gpum__config_default_path(env_rel, 1000, buf, sizeof buf), 0);
  assert_string_equal(buf, "/home/u/.config/gpum/gpum.yaml");
  assert_int_equal(gpum__config_default_path(env_home, 1000, buf, sizeof buf), 0);
  assert_string_equal(buf, "/home/u/.config/gpum/gpum.yaml");
  expect_err(gpum__config_default_path(env_none, 1000, buf, sizeof buf), GPUM_ENOENT, NULL);
  expect_err(gpum__config_default_path(NULL, 1000, buf, sizeof buf), GPUM_ENOENT, NULL);
  expect_err(gpum__config_default_path(env_home, 1000, buf, 10), GPUM_ENOSPC, NULL);
}

/* Creates scratch/xdg/gpum/gpum.yaml with content; returns "XDG_CONFIG_HOME=scratch/xdg". */
static const char *make_default_file(const char *content) {
  static char xdg_env[160];
  char path[160];
  snprintf(path, sizeof path, "%s/xdg", scratch);
  mkdir(path, 0700);
  snprintf(path, sizeof path, "%s/xdg/gpum", scratch);
  mkdir(path, 0700);
  snprintf(path, sizeof path, "%s/xdg/gpum/gpum.yaml", scratch);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(content, f);
  fclose(f);
  snprintf(xdg_env, sizeof xdg_env, "XDG_CONFIG_HOME=%s/xdg", scratch);
  return xdg_env;
}

static void test_load_all_sequence(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  char *xdg = (char *)make_default_file("backend: host\nlog.level: info\nretry.count: 9\n");
  char *envp[] = {xdg, "GPUM_LOG_LEVEL=debug", "GPUM_BIN=/x", NULL};
  char *argv[] = {"gpum", "status", "--log-level", "trace", "--json", NULL};
  int argc = 5;
  int err = gpum__config_load_all_from(cfg, NULL, &argc, argv, envp, 1000);
  if (err)
    fail_msg("%s", gpum_last_error());
  assert_string_equal(gpum_config_get_string(cfg, "backend"), "host");
  assert_int_equal(gpum_config_source(cfg, "backend"), GPUM_OPT_SRC_FILE);
  assert_int_equal(gpum_config_get_int(cfg, "retry.count"), 9);
  assert_string_equal(gpum_config_get_string(cfg, "log.level"), "trace");
  assert_int_equal(gpum_config_source(cfg, "log.level"), GPUM_OPT_SRC_FLAG);
  static const char *const want[] = {"gpum", "status", "--json"};
  assert_argv(argc, argv, want, 3);
  assert_null(argv[3]);
  /* which file was read: the default one */
  char path[200];
  snprintf(path, sizeof path, "%s/xdg/gpum/gpum.yaml", scratch);
  assert_non_null(gpum_config_file(cfg));
  assert_string_equal(gpum_config_file(cfg), path);
  gpum_config_free(cfg);
}

static void test_load_all_missing_default_is_fine(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  char xdg[160];
  snprintf(xdg, sizeof xdg, "XDG_CONFIG_HOME=%s/empty", scratch);
  char *envp[] = {xdg, NULL};
  assert_int_equal(gpum__config_load_all_from(cfg, NULL, NULL, NULL, envp, 1000), 0);
  char *no_home[] = {NULL};
  assert_int_equal(gpum__config_load_all_from(cfg, NULL, NULL, NULL, no_home, 1000), 0);
  assert_string_equal(gpum_config_get_string(cfg, "backend"), "auto");
  assert_null(gpum_config_file(cfg)); /* none was read */
  gpum_config_free(cfg);
}

static void test_load_all_explicit_files(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  char missing[160], genv[200];
  snprintf(missing, sizeof missing, "%s/missing.yaml", scratch);
  char *xdg = (char *)make_default_file("backend: host\n");
  /* a path given by the program must exist */
  char *envp[] = {xdg, NULL};
  expect_err(gpum__config_load_all_from(cfg, missing, NULL, NULL, envp, 1000), GPUM_ENOENT,
             missing);
  /* GPUM_CONFIG must exist too, and replaces the default file */
  snprintf(genv, sizeof genv, "GPUM_CONFIG=%s", missing);
  char *envp2[] = {xdg, genv, NULL};
  expect_err(gpum__config_load_all_from(cfg, NULL, NULL, NULL, envp2, 1000), GPUM_ENOENT, missing);
  const char *other = write_yaml("backend: nvml\n");
  snprintf(genv, sizeof genv, "GPUM_CONFIG=%s", other);
  assert_int_equal(gpum__config_load_all_from(cfg, NULL, NULL, NULL, envp2, 1000), 0);
  assert_string_equal(gpum_config_get_string(cfg, "backend"), "nvml");
  gpum_config_free(cfg);

  /* --config beats GPUM_CONFIG and is consumed; an empty GPUM_CONFIG means unset */
  cfg = new_config();
  char *flagged = strdup(write_yaml("log.level: error\n"));
  char *argv[] = {"gpum", "--config", flagged, "status", NULL};
  int argc = 4;
  assert_int_equal(gpum__config_load_all_from(cfg, NULL, &argc, argv, envp2, 1000), 0);
  assert_string_equal(gpum_config_get_string(cfg, "log.level"), "error");
  assert_string_equal(gpum_config_get_string(cfg, "backend"), "auto");
  static const char *const want[] = {"gpum", "status"};
  assert_argv(argc, argv, want, 2);
  gpum_config_free(cfg);
  free(flagged);

  cfg = new_config();
  char *envp3[] = {xdg, "GPUM_CONFIG=", NULL};
  assert_int_equal(gpum__config_load_all_from(cfg, NULL, NULL, NULL, envp3, 1000), 0);
  assert_string_equal(gpum_config_get_string(cfg, "backend"), "host"); /* the default file */
  gpum_config_free(cfg);
}

static void test_load_all_errors_change_nothing(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  char *before = snapshot(cfg);
  char *xdg = (char *)make_default_file("backend: host\n");
  char *envp[] = {xdg, "GPUM_LOG_LEVEL=debug", NULL};
  char *argv[] = {"gpum", "status", "--retry-count", "x", NULL};
  char *copy[5];
  memcpy(copy, argv, sizeof argv);
  int argc = 4;
  expect_err(gpum__config_load_all_from(cfg, NULL, &argc, argv, envp, 1000), GPUM_EINVAL,
             "--retry-count");
  assert_int_equal(argc, 4);
  assert_memory_equal(argv, copy, sizeof argv);
  char *argv2[] = {"gpum", "--config", NULL};
  argc = 2;
  expect_err(gpum__config_load_all_from(cfg, NULL, &argc, argv2, envp, 1000), GPUM_EINVAL,
             "--config needs a value");
  assert_int_equal(argc, 2);
  char *bad_xdg = (char *)make_default_file("backend: quantum\n");
  char *envp2[] = {bad_xdg, NULL};
  expect_err(gpum__config_load_all_from(cfg, NULL, NULL, NULL, envp2, 1000), GPUM_EINVAL,
             "'quantum'");
  char *envp3[] = {"GPUM_LOG_LEVLE=x", NULL};
  expect_err(gpum__config_load_all_from(cfg, NULL, NULL, NULL, envp3, 1000), GPUM_EUNKNOWN_KEY,
             NULL);
  char *after = snapshot(cfg);
  assert_string_equal(before, after);
  free(before);
  free(after);
  expect_err(gpum__config_load_all_from(NULL, NULL, NULL, NULL, envp, 1000), GPUM_EINVAL, NULL);
  gpum_config_free(cfg);
}

static void test_load_all_public(void **state) {
  (void)state;
  /* The process environment and the real search path: in the test environment the only
   * GPUM_* variables are the harness's, which must be accepted. */
  gpum_config_t *cfg = new_config();
  const char *path = write_yaml("retry.count: 4\n");
  assert_int_equal(gpum_config_load_all(cfg, path, NULL, NULL), 0);
  assert_int_equal(gpum_config_get_int(cfg, "retry.count"), 4);
  gpum_config_free(cfg);
}

/* ---- dump and generated documents ---- */

static void test_dump_round_trip(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  char *out = NULL;
  assert_int_equal(gpum_config_set(cfg, "log.level", "debug", GPUM_OPT_SRC_FLAG), 0);
  assert_int_equal(gpum_config_set(cfg, "sim.node", "a \"quoted\" #name: x", GPUM_OPT_SRC_ENV), 0);
  assert_int_equal(gpum_config_set(cfg, "devices", "0", GPUM_OPT_SRC_FILE), 0);
  assert_int_equal(gpum_config_dump_yaml(cfg, &out), 0);
  assert_non_null(strstr(out, "\nlog:\n  level: debug  # from flag\n  target: stderr\n"));
  assert_non_null(strstr(out, "\nbackend: auto\n"));
  assert_non_null(strstr(out, "\ndevices: \"0\"  # from file\n"));
  assert_non_null(strstr(out, "\nnvml:\n  library: \"\"\n"));
  /* the dump reads back into the same values */
  gpum_config_t *back = new_config();
  int err = gpum_config_load_file(back, write_yaml(out));
  if (err)
    fail_msg("%s\n%s", gpum_last_error(), out);
  for (size_t i = 0; i < gpum_option_count(); i++) {
    const char *k = gpum_option_at(i)->key;
    assert_string_equal(gpum_config_get_string(back, k), gpum_config_get_string(cfg, k));
  }
  free(out);
  gpum_config_free(back);
  expect_err(gpum_config_dump_yaml(NULL, &out), GPUM_EINVAL, NULL);
  gpum_config_free(cfg);
}

static void test_dump_hides_secrets(void **state) {
  (void)state;
  gpum_config_t *cfg = new_config();
  char *out = NULL;
  assert_int_equal(gpum_config_dump_yaml(cfg, &out), 0);
  assert_non_null(strstr(out, "\nhttp:\n  token: \"\"\n")); /* empty: nothing to hide */
  free(out);
  assert_int_equal(gpum_config_set(cfg, "http.token", "s3cr3t", GPUM_OPT_SRC_ENV), 0);
  assert_int_equal(gpum_config_dump_yaml(cfg, &out), 0);
  assert_null(strstr(out, "s3cr3t"));
  assert_non_null(strstr(out, "  token: (hidden)  # from environment\n"));
  assert_non_null(strstr(out, "\nfeature:\n  on: false\n"));
  free(out);
  char *md = NULL;
  assert_int_equal(gpum_options_markdown(&md), 0);
  assert_non_null(strstr(md, "A secret. Secret: never shown."));
  assert_non_null(strstr(md, "An enum \\| with a pipe."));
  assert_non_null(strstr(md, "| `num.count` | integer, -10 to 10 | `5` |"));
  free(md);
  gpum_config_free(cfg);
}

static void test_markdown_lists_every_option(void **state) {
  (void)state;
  char *md = NULL, env[160], flag[160], row[200];
  assert_int_equal(gpum_options_markdown(&md), 0);
  for (size_t i = 0; i < gpum_option_count(); i++) {
    const gpum_option_def_t *d = gpum_option_at(i);
    snprintf(row, sizeof row, "| `%s` | ", d->key);
    assert_non_null(strstr(md, row));
    assert_non_null(strstr(md, gpum_option_env_name(d, env, sizeof env)));
    assert_non_null(strstr(md, gpum_option_flag_name(d, flag, sizeof flag)));
  }
  assert_non_null(strstr(md, "| `log.level` | one of `trace`, `debug`, `info`, `warn`, `error`, "
                             "`off` | `warn` | `GPUM_LOG_LEVEL` | `--log-level` |"));
  assert_non_null(strstr(md, "| `devices` | string | (none) |"));
  free(md);
  expect_err(gpum_options_markdown(NULL), GPUM_EINVAL, NULL);
}

static char *read_whole(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return NULL;
  gpum__strbuf_t b = {0};
  char chunk[4096], *out = NULL;
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk - 1, f)) > 0) {
    chunk[n] = '\0';
    gpum__strbuf_puts(&b, chunk);
  }
  fclose(f);
  gpum__strbuf_puts(&b, "");
  assert_int_equal(gpum__strbuf_finish(&b, &out), 0);
  return out;
}

static void write_whole(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

#define MD_BEGIN "<!-- options:begin -->\n"
#define MD_END "<!-- options:end -->"

static bool write_docs(void) {
  const char *w = getenv("GPUM_WRITE_DOCS");
  return w != NULL && strcmp(w, "1") == 0;
}

/* Checks that docs/config.md holds md between the markers begin and end; GPUM_WRITE_DOCS=1
 * rewrites it. */
static void md_block_in_step(const char *begin_marker, const char *end_marker, const char *md,
                             const char *what) {
  const char *src = getenv("GPUM_SOURCE_DIR");
  if (src == NULL)
    skip();
  char path[4096];
  snprintf(path, sizeof path, "%s/docs/config.md", src);
  char *doc = read_whole(path);
  if (doc == NULL)
    fail_msg("cannot read %s", path);
  char *begin = strstr(doc, begin_marker), *end = begin ? strstr(begin, end_marker) : NULL;
  if (begin == NULL || end == NULL)
    fail_msg("%s lacks the markers %s and %s", path, begin_marker, end_marker);
  begin += strlen(begin_marker);
  size_t have = (size_t)(end - begin);
  if (have != strlen(md) || strncmp(begin, md, have) != 0) {
    if (!write_docs())
      fail_msg("docs/config.md's %s differs from the %s; regenerate it "
               "with GPUM_WRITE_DOCS=1 ctest --test-dir build -R unit.test_options",
               what, what);
    gpum__strbuf_t b = {0};
    char *out = NULL;
    gpum__strbuf_printf(&b, "%.*s%s%s", (int)(begin - doc), doc, md, end);
    assert_int_equal(gpum__strbuf_finish(&b, &out), 0);
    write_whole(path, out);
    free(out);
    print_message("rewrote %s\n", path);
  }
  free(doc);
}

static void test_docs_config_md_in_step(void **state) {
  (void)state;
  char *md = NULL;
  assert_int_equal(gpum_options_markdown(&md), 0);
  md_block_in_step(MD_BEGIN, MD_END, md, "options table");
  free(md);
  assert_int_equal(gpum_options_aliases_markdown(&md), 0);
  md_block_in_step("<!-- aliases:begin -->\n", "<!-- aliases:end -->", md, "alias table");
  free(md);
}

static void test_example_yaml_in_step(void **state) {
  (void)state;
  const char *src = getenv("GPUM_SOURCE_DIR");
  if (src == NULL)
    skip();
  char path[4096], *gen = NULL;
  snprintf(path, sizeof path, "%s/examples/gpum.yaml", src);
  assert_int_equal(gpum__options_example_yaml(&gen), 0);
  char *have = read_whole(path);
  if (have == NULL || strcmp(have, gen) != 0) {
    if (!write_docs())
      fail_msg("examples/gpum.yaml differs from the options table; regenerate it with "
               "GPUM_WRITE_DOCS=1 ctest --test-dir build -R unit.test_options");
    write_whole(path, gen);
    print_message("rewrote %s\n", path);
  }
  free(have);
  free(gen);
  /* it is a valid config that sets every option to its default */
  gpum_config_t *cfg = new_config();
  int err = gpum_config_load_file(cfg, path);
  if (err)
    fail_msg("%s", gpum_last_error());
  for (size_t i = 0; i < gpum_option_count(); i++) {
    const gpum_option_def_t *d = gpum_option_at(i);
    assert_int_equal(gpum_config_source(cfg, d->key), GPUM_OPT_SRC_FILE);
    assert_string_equal(gpum_config_get_string(cfg, d->key), d->default_value);
  }
  gpum_config_free(cfg);
}

static void test_example_yaml_every_type(void **state) {
  (void)state;
  /* the generator's output loads for every type, with the test table */
  char *gen = NULL;
  assert_int_equal(gpum__options_example_yaml(&gen), 0);
  gpum_config_t *cfg = new_config();
  int err = gpum_config_load_file(cfg, write_yaml(gen));
  if (err)
    fail_msg("%s\n%s", gpum_last_error(), gen);
  for (size_t i = 0; i < ARRAY_LEN(test_table); i++)
    assert_int_equal(gpum_config_source(cfg, test_table[i].key), GPUM_OPT_SRC_FILE);
  free(gen);
  gpum_config_free(cfg);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, make_scratch, remove_scratch)
#define TT(fn) cmocka_unit_test_setup_teardown(fn, use_test_table, use_builtin_table)
  const struct CMUnitTest tests[] = {
      T(test_table_well_formed),
      T(test_builtin_keys_and_defaults),
      T(test_derived_names),
      T(test_find_unknown),
      T(test_set_enum_message),
      T(test_set_unknown_key),
      T(test_set_int_bounds),
      TT(test_set_every_type),
      TT(test_getters_wrong_type),
      T(test_precedence),
      T(test_source_names),
      T(test_env_applies_and_ignores),
      T(test_env_unknown_in_section),
      T(test_env_bad_value),
      T(test_env_process_environment),
      T(test_env_below_flag_above_file),
      T(test_args_anywhere_before_dashdash),
      T(test_args_unknown_left_alone),
      T(test_args_value_forms),
      TT(test_args_bool_flags),
      T(test_args_errors_change_nothing),
      T(test_args_edge_cases),
      T(test_file_nested_and_dotted),
      T(test_file_empty_and_comments),
      T(test_file_rejections),
      T(test_file_missing_or_unreadable),
      T(test_file_below_env),
      TT(test_file_all_types),
      T(test_default_path),
      T(test_load_all_sequence),
      T(test_load_all_missing_default_is_fine),
      T(test_load_all_explicit_files),
      T(test_load_all_errors_change_nothing),
      T(test_load_all_public),
      T(test_dump_round_trip),
      TT(test_dump_hides_secrets),
      T(test_markdown_lists_every_option),
      T(test_docs_config_md_in_step),
      T(test_example_yaml_in_step),
      TT(test_example_yaml_every_type),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
