/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where gpumd keeps its socket and its state: the `socket` and `state_dir` options when set,
 * else the defaults (root: /run/gpum/gpumd.sock and /var/lib/gpum; other users:
 * $XDG_RUNTIME_DIR/gpum/gpumd.sock or /tmp/gpum-UID/gpumd.sock, and $XDG_STATE_HOME/gpum or
 * ~/.local/state/gpum), resolved by libgpum's client paths so that gpumd and its clients always
 * agree. Also a mkdir -p for the directories.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <gpum/client.h>
#include <gpum/error.h>

#include "paths_internal.h"

int gpumd_socket_path(const gpum_config_t *cfg, char *buf, size_t len) {
  return gpum_socket_path(cfg, buf, len); /* shared with the clients (libgpum) */
}

int gpumd_state_dir(const gpum_config_t *cfg, char *buf, size_t len) {
  return gpum_state_dir(cfg, buf, len);
}

int gpumd_mkdirs(const char *path, mode_t mode) {
  char tmp[PATH_MAX];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof tmp)
    return gpum_error(GPUM_ERANGE, "bad directory path '%s'", path);
  memcpy(tmp, path, n + 1);
  for (char *p = tmp + 1;; p++) {
    if (*p != '/' && *p != '\0')
      continue;
    char save = *p;
    *p = '\0';
    if (mkdir(tmp, mode) != 0 && errno != EEXIST)
      return gpum_error(GPUM_EIO, "cannot create directory %s: %s", tmp, strerror(errno));
    *p = save;
    if (save == '\0')
      break;
  }
  return 0;
}
