/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Applying a loaded configuration to the process, for the programs built on libgpum (gpum,
 * gpumd): logging from log.level/log.target, and the simulated-node options exported to the
 * environment, where the device layer, libgpum_sim.so and child processes read them.
 */
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/options.h>

int gpum_config_apply_logging(const gpum_config_t *cfg) {
  gpum_log_level_t level = GPUM_LOG_WARN;
  const char *lv = gpum_config_get_string(cfg, "log.level");
  if (lv && *lv && gpum_log_level_parse(lv, &level) != 0)
    return gpum_error(GPUM_EINVAL, "invalid log.level '%s'", lv);
  const char *target = gpum_config_get_string(cfg, "log.target");
  gpum_log_target_t t = GPUM_LOG_TARGET_STDERR;
  if (target && !strcmp(target, "syslog"))
    t = GPUM_LOG_TARGET_SYSLOG;
  else if (target && !strcmp(target, "none"))
    t = GPUM_LOG_TARGET_NONE;
  gpum_log_set_level(level);
  gpum_log_set_target(t);
  return 0;
}

void gpum_config_export_sim(const gpum_config_t *cfg) {
  static const char *const keys[][2] = {{"sim.node", "GPUM_SIM_NODE"},
                                        {"sim.library", "GPUM_SIM_LIBRARY"}};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    gpum_opt_source_t src = gpum_config_source(cfg, keys[i][0]);
    const char *v = gpum_config_get_string(cfg, keys[i][0]);
    if ((src == GPUM_OPT_SRC_FILE || src == GPUM_OPT_SRC_FLAG) && v && *v)
      setenv(keys[i][1], v, 1);
  }
}
