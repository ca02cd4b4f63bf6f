/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where gpumd's socket and state live. The daemon and every client resolve them here so that
 * both sides agree: the `socket` / `state_dir` options first, else per-user defaults (root:
 * /run/gpum and /var/lib/gpum; others: $XDG_RUNTIME_DIR or /tmp/gpum-<uid>, and
 * $XDG_STATE_HOME or ~/.local/state).
 */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <gpum/client.h>
#include <gpum/error.h>
#include <gpum/options.h>

/* Writes head + tail into buf; GPUM_ENOSPC (buf "") when it does not fit. */
static int put(char *buf, size_t len, const char *what, const char *head, const char *tail) {
  if (buf == NULL || len == 0)
    return gpum_error(GPUM_EINVAL, "no buffer for the %s", what);
  int n = snprintf(buf, len, "%s%s", head, tail);
  if (n < 0 || (size_t)n >= len) {
    buf[0] = '\0';
    return gpum_error(GPUM_ENOSPC, "the %s does not fit in %zu bytes", what, len);
  }
  return 0;
}

static const char *env_nonempty(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* An XDG_* directory is only used when absolute (the XDG spec says to ignore relative ones). */
static const char *env_abs(const char *name) {
  const char *v = getenv(name);
  return v && *v == '/' ? v : NULL;
}

int gpum_default_socket_path(char *buf, size_t len) {
  if (geteuid() == 0)
    return put(buf, len, "socket path", "/run/gpum/gpumd.sock", "");
  const char *xdg = env_abs("XDG_RUNTIME_DIR");
  if (xdg)
    return put(buf, len, "socket path", xdg, "/gpum/gpumd.sock");
  char tmp[64];
  snprintf(tmp, sizeof tmp, "/tmp/gpum-%lu", (unsigned long)geteuid());
  return put(buf, len, "socket path", tmp, "/gpumd.sock");
}

int gpum_default_state_dir(char *buf, size_t len) {
  if (geteuid() == 0)
    return put(buf, len, "state directory", "/var/lib/gpum", "");
  const char *xdg = env_abs("XDG_STATE_HOME");
  if (xdg)
    return put(buf, len, "state directory", xdg, "/gpum");
  const char *home = env_abs("HOME");
  if (home)
    return put(buf, len, "state directory", home, "/.local/state/gpum");
  struct passwd pw, *res = NULL;
  char tmp[4096];
  if (getpwuid_r(geteuid(), &pw, tmp, sizeof tmp, &res) != 0 || res == NULL)
    return gpum_error(GPUM_ENOENT,
                      "no home directory for uid %lu: set the state_dir option (GPUM_STATE_DIR)",
                      (unsigned long)geteuid());
  return put(buf, len, "state directory", pw.pw_dir, "/.local/state/gpum");
}

/* The option's value when cfg has it set, else the environment variable when cfg is NULL. */
static const char *configured(const gpum_config_t *cfg, const char *key, const char *env) {
  if (cfg == NULL)
    return env_nonempty(env);
  if (gpum_option_find(key) == NULL)
    return env_nonempty(env);
  const char *v = gpum_config_get_string(cfg, key);
  return v && *v ? v : NULL;
}

int gpum_socket_path(const gpum_config_t *cfg, char *buf, size_t len) {
  const char *v = configured(cfg, "socket", "GPUM_SOCKET");
  if (v)
    return put(buf, len, "socket path", v, "");
  return gpum_default_socket_path(buf, len);
}

int gpum_state_dir(const gpum_config_t *cfg, char *buf, size_t len) {
  const char *v = configured(cfg, "state_dir", "GPUM_STATE_DIR");
  if (v)
    return put(buf, len, "state directory", v, "");
  return gpum_default_state_dir(buf, len);
}
