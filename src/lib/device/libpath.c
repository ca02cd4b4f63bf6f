/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which driver library to dlopen, for NVML and for the CUDA driver alike. One function decides
 * for both so that a process never mixes a real NVML with a simulated CUDA or the other way
 * round: an explicit path (options / config) wins, then GPUM_NVML_LIBRARY or
 * GPUM_CUDA_LIBRARY, then libgpum_sim.so when GPUM_SIM_NODE names a simulated node, then the
 * system driver (libnvidia-ml.so.1, libnvidia-ml.so; libcuda.so.1 only, because the
 * unversioned libcuda.so is usually the toolkit's stub that fails every call; for AMD's ROCm
 * SMI, GPUM_ROCM_SMI_LIBRARY, then librocm_smi64.so.1 and librocm_smi64.so; for Intel's Level
 * Zero, GPUM_LEVEL_ZERO_LIBRARY, then libze_loader.so.1 and libze_loader.so).
 *
 * libgpum_sim.so itself is found as the common brief fixes it: $GPUM_SIM_LIBRARY, else
 * beside the loaded libgpum.so (dladdr), else in GPUM_INSTALL_LIBDIR, else by name through
 * the loader's search path.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/error.h>

#include "device/device_internal.h"

#ifndef GPUM_INSTALL_LIBDIR
#define GPUM_INSTALL_LIBDIR "/usr/local/lib"
#endif

#define SIM_NAME "libgpum_sim.so"

static const char *env_nonempty(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

static int set_single(gpum__libpath_t *out, const char *path, const char *source) {
  size_t len = strlen(path);
  if (len >= sizeof out->storage)
    return gpum_error(GPUM_EINVAL, "library path from %s is too long (%zu bytes)", source, len);
  memcpy(out->storage, path, len + 1);
  out->candidates[0] = out->storage;
  out->n = 1;
  out->source = source;
  return 0;
}

static const char anchor; /* an object of ours, for dladdr */

bool gpum__beside_libgpum(const char *file, char *buf, size_t len) {
  Dl_info info;
  if (!dladdr(&anchor, &info) || !info.dli_fname)
    return false;
  const char *slash = strrchr(info.dli_fname, '/');
  if (!slash)
    return false;
  int dirlen = (int)(slash - info.dli_fname);
  int w = snprintf(buf, len, "%.*s/%s", dirlen, info.dli_fname, file);
  return w > 0 && (size_t)w < len && access(buf, R_OK) == 0;
}

static int resolve_sim(gpum__libpath_t *out, const char *node) {
  size_t nlen = strlen(node);
  if (nlen >= sizeof out->sim_node)
    return gpum_error(GPUM_EINVAL, "GPUM_SIM_NODE '%.40s...' is too long (%zu bytes)", node, nlen);
  memcpy(out->sim_node, node, nlen + 1);
  out->simulated = true;
  const char *env = env_nonempty("GPUM_SIM_LIBRARY");
  if (env)
    return set_single(out, env, "GPUM_SIM_LIBRARY");
  out->source = "GPUM_SIM_NODE";
  out->n = 1;
  if (gpum__beside_libgpum(SIM_NAME, out->storage, sizeof out->storage)) {
    out->candidates[0] = out->storage;
    return 0;
  }
  int w = snprintf(out->storage, sizeof out->storage, "%s/%s", GPUM_INSTALL_LIBDIR, SIM_NAME);
  if (w > 0 && (size_t)w < sizeof out->storage && access(out->storage, R_OK) == 0) {
    out->candidates[0] = out->storage;
    return 0;
  }
  out->candidates[0] = SIM_NAME;
  return 0;
}

int gpum__libpath_resolve(gpum__lib_kind_t kind, const char *explicit_path, gpum__libpath_t *out) {
  memset(out, 0, sizeof *out);
  if (explicit_path && *explicit_path)
    return set_single(out, explicit_path, "option");
  static const char *const env_names[] = {[GPUM__LIB_NVML] = "GPUM_NVML_LIBRARY",
                                          [GPUM__LIB_CUDA] = "GPUM_CUDA_LIBRARY",
                                          [GPUM__LIB_ROCM_SMI] = "GPUM_ROCM_SMI_LIBRARY",
                                          [GPUM__LIB_LEVEL_ZERO] = "GPUM_LEVEL_ZERO_LIBRARY"};
  const char *env_name = env_names[kind];
  const char *env = env_nonempty(env_name);
  if (env)
    return set_single(out, env, env_name);
  const char *node = env_nonempty("GPUM_SIM_NODE");
  if (node)
    return resolve_sim(out, node);
  out->source = "default";
  if (kind == GPUM__LIB_NVML) {
    out->candidates[0] = "libnvidia-ml.so.1";
    out->candidates[1] = "libnvidia-ml.so";
    out->n = 2;
  } else if (kind == GPUM__LIB_ROCM_SMI) {
    out->candidates[0] = "librocm_smi64.so.1";
    out->candidates[1] = "librocm_smi64.so";
    out->n = 2;
  } else if (kind == GPUM__LIB_LEVEL_ZERO) {
    out->candidates[0] = "libze_loader.so.1";
    out->candidates[1] = "libze_loader.so";
    out->n = 2;
  } else {
    out->candidates[0] = "libcuda.so.1";
    out->n = 1;
  }
  return 0;
}

int gpum__libpath_open(const gpum__libpath_t *lp, const char *what, void **dl, const char **used) {
  char errs[1024] = "";
  size_t off = 0;
  for (unsigned i = 0; i < lp->n; i++) {
    dlerror();
    void *h = dlopen(lp->candidates[i], RTLD_NOW | RTLD_LOCAL);
    if (h) {
      *dl = h;
      *used = lp->candidates[i];
      return 0;
    }
    const char *e = dlerror();
    int w =
        snprintf(errs + off, sizeof errs - off, "%s%s", i ? "; " : "", e ? e : lp->candidates[i]);
    if (w > 0)
      off += (size_t)w < sizeof errs - off ? (size_t)w : sizeof errs - off - 1;
  }
  if (lp->simulated)
    return gpum_error(GPUM_EDRIVER,
                      "cannot load the simulated %s driver for node '%s' (GPUM_SIM_NODE): %s "
                      "(set GPUM_SIM_LIBRARY to the path of libgpum_sim.so)",
                      what, lp->sim_node, errs);
  return gpum_error(GPUM_EDRIVER, "cannot load the %s library (chosen by %s): %s", what, lp->source,
                    errs);
}
