/* SPDX-License-Identifier: Apache-2.0 */
/* Placeholder until the command is written. */
#include <stdio.h>
#include "cli.h"
int cmd_doctor(gpum_config_t *cfg, int argc, char **argv) {
  (void)cfg; (void)argc; (void)argv;
  fprintf(stderr, "gpum doctor: not implemented yet\n");
  return 1;
}
