/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulated driver across fork() (sim_internal.h, docs/sim.md). A child forked without
 * exec while other threads of its parent were inside the driver used to inherit their
 * process-local locks held, and hung at its first call. Now every such lock is taken before
 * the fork and released after it in parent and child, so a child never inherits one held; and,
 * as with NVIDIA's driver, a child of a process that had called cuInit gets
 * CUDA_ERROR_NOT_INITIALIZED from every CUDA call instead of the parent's state (the child must
 * exec, or be forked before CUDA is initialised, or be spawned). NVML stays usable.
 *
 * The order below is the locks' order: cu_mu, the NVML, ROCm SMI and Level Zero libraries' init
 * locks and HIP's (hip.c, with its block and host locks) before attach_mu (cuInit, nvmlInit,
 * rsmi_init, zeInit/zesInit and HIP's first call attach while holding theirs); then the locks
 * taken under the node's lock or alone: blocks_mu before pools_mu (cuda_pool.c), host_mu, vmm_mu,
 * obj_mu and sets_mu alone.
 */
#include <pthread.h>

#include "sim_internal.h"

static void (*const hooks[])(gpum__sim_fork_phase_t) = {
    gpum__sim_ckpt_atfork, gpum__sim_ctx_atfork, gpum__sim_nvml_atfork, gpum__sim_rocm_atfork,
    gpum__sim_ze_atfork,   gpum__sim_hip_atfork, gpum__sim_shm_atfork,  gpum__sim_events_atfork,
    gpum__sim_misc_atfork, gpum__sim_mem_atfork, gpum__sim_pool_atfork, gpum__sim_vmm_atfork,
    gpum__sim_proc_atfork,
};
#define NHOOKS (sizeof hooks / sizeof hooks[0])

static void prepare(void) {
  for (size_t i = 0; i < NHOOKS; i++)
    hooks[i](GPUM__SIM_FORK_PREPARE);
}

static void in_parent(void) {
  for (size_t i = NHOOKS; i-- > 0;)
    hooks[i](GPUM__SIM_FORK_PARENT);
}

static void in_child(void) {
  for (size_t i = NHOOKS; i-- > 0;)
    hooks[i](GPUM__SIM_FORK_CHILD);
}

__attribute__((constructor)) static void fork_init(void) {
  pthread_atfork(prepare, in_parent, in_child);
}
