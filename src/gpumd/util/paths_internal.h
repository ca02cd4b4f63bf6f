/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's paths (paths.c): the socket and state directory as libgpum's client code resolves
 * them, and mkdir -p. A header of its own because paths.c includes <gpum/client.h>, whose
 * names must not meet the scheduler's (sched.h) in one translation unit.
 */
#ifndef GPUMD_PATHS_INTERNAL_H
#define GPUMD_PATHS_INTERNAL_H

#include <stddef.h>
#include <sys/types.h>

#include <gpum/options.h>

/* Effective socket path / state directory: the option when set, else the defaults of
 * docs/protocol.md. Return 0 or a negative code (detail set). */
int gpumd_socket_path(const gpum_config_t *cfg, char *buf, size_t len);
int gpumd_state_dir(const gpum_config_t *cfg, char *buf, size_t len);
/* mkdir -p with mode for the missing components. Returns 0 or GPUM_EIO (detail set). */
int gpumd_mkdirs(const char *path, mode_t mode);

#endif /* GPUMD_PATHS_INTERNAL_H */
