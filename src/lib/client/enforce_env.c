/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Putting a job under the enforcement shim (gpum/fence.h, gpum/session.h): where the shim is,
 * the environment that preloads it, and the fence of a granted reservation. Shared by gpum run,
 * the Slurm plugin and the Python package.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gpum/error.h>
#include <gpum/fence.h>
#include <gpum/session.h>

#include "device/device_internal.h"

#define SHIM_NAME "libgpum_enforce.so"

#ifndef GPUM_INSTALL_LIBDIR
#define GPUM_INSTALL_LIBDIR "/usr/local/lib"
#endif

int gpum_enforce_library(char *buf, size_t len) {
  if (!buf || len == 0)
    return gpum_error(GPUM_EINVAL, "gpum_enforce_library: no buffer");
  const char *env = getenv("GPUM_ENFORCE_LIBRARY");
  if (env && *env) {
    if (strlen(env) >= len)
      return gpum_error(GPUM_ENOSPC, "GPUM_ENFORCE_LIBRARY is longer than %zu bytes", len - 1);
    if (access(env, R_OK) != 0)
      return gpum_error(GPUM_ENOENT, "GPUM_ENFORCE_LIBRARY names %s, which cannot be read", env);
    snprintf(buf, len, "%s", env);
    return 0;
  }
  if (gpum__beside_libgpum(SHIM_NAME, buf, len))
    return 0;
  int w = snprintf(buf, len, "%s/%s", GPUM_INSTALL_LIBDIR, SHIM_NAME);
  if (w < 0 || (size_t)w >= len)
    return gpum_error(GPUM_ENOSPC, "the shim's path is longer than %zu bytes", len - 1);
  if (access(buf, R_OK) == 0)
    return 0;
  return gpum_error(GPUM_ENOENT,
                    "the enforcement shim %s was found neither beside libgpum nor in %s; "
                    "install it or set GPUM_ENFORCE_LIBRARY",
                    SHIM_NAME, GPUM_INSTALL_LIBDIR);
}

int gpum_enforce_setenv(const char *shim_path, const char *fence_name) {
  if (!shim_path || !*shim_path || !fence_name || !*fence_name)
    return gpum_error(GPUM_EINVAL, "gpum_enforce_setenv: the shim's path and the fence's name "
                                   "are needed");
  const char *old = getenv("LD_PRELOAD");
  size_t n = strlen(shim_path) + (old ? strlen(old) : 0) + 2;
  char *v = malloc(n);
  if (!v)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  /* After what is there (a sanitizer's runtime must stay first): the shim only has to come
   * before the driver, which is never preloaded. */
  snprintf(v, n, "%s%s%s", old ? old : "", old && *old ? " " : "", shim_path);
  int rc = 0;
  if (setenv("LD_PRELOAD", v, 1) != 0 || setenv(GPUM_FENCE_ENV, fence_name, 1) != 0)
    rc = gpum_error(GPUM_ENOMEM, "cannot set LD_PRELOAD / " GPUM_FENCE_ENV);
  free(v);
  return rc;
}

int gpum_reservation_fence(const gpum_reservation_t *r, const char *socket_path, uint64_t max_limit,
                           char *name, size_t len, gpum_fence **out) {
  if (!r || !socket_path || !name || !out)
    return gpum_error(GPUM_EINVAL, "gpum_reservation_fence: NULL argument");
  const char *digits = strrchr(r->id, '-');
  char *end = NULL;
  unsigned long long id = digits ? strtoull(digits + 1, &end, 10) : 0;
  if (!digits || !end || *end || r->bytes_per_gpu == 0)
    return gpum_error(GPUM_EINVAL, "reservation '%s' has no id or no memory to fence", r->id);
  /* gpumd reads the region: as root or as the caller it can at 0600; as another user, through
   * the socket's group, which the caller is in when it could connect. */
  struct stat sock;
  bool group = stat(socket_path, &sock) == 0 && sock.st_uid != 0 && sock.st_uid != geteuid();
  gpum_fence_opts_t o = {.limit = r->bytes_per_gpu,
                         .max_limit = max_limit > r->bytes_per_gpu ? max_limit : 0,
                         .reservation = id,
                         .mode = group ? 0640 : 0600};
  int rc = GPUM_EEXIST;
  /* A name that exists (64 random bits: only by design of someone who listed the names) is
   * never taken over: draw another. */
  for (int tries = 0; tries < 8 && rc == GPUM_EEXIST; tries++) {
    gpum_error_clear();
    rc = gpum_fence_name(name, len, socket_path, id);
    if (rc == 0)
      rc = gpum_fence_create(name, &o, out);
  }
  if (rc == 0 && group && gpum_fence_set_group(name, (unsigned)sock.st_gid) != 0)
    gpum_error_clear(); /* not in the group: gpumd shows the job unfenced, the fence holds */
  return rc;
}
