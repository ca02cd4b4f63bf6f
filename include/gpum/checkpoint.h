/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Suspending another CUDA process by pid: a thin, checked layer over the CUDA driver's
 * process-checkpoint calls (cuCheckpointProcessLock/Checkpoint/Restore/Unlock/GetState/
 * GetRestoreThreadId, CUDA 12.8, driver 570 or later). The building block of issue 28's
 * suspend and resume (docs/checkpoint.md): lock a process (its CUDA calls wait), checkpoint it
 * (its device memory moves to host memory and the GPU is free), restore it (onto the same GPUs,
 * or onto others of the same kind given as pairs of UUID strings), unlock it (it goes on).
 *
 * Every call returns 0 or a GPUM_E* code, and on failure sets the detail (gpum_last_error)
 * naming the pid, the step, the driver's error and the state the process is in now (read again
 * after the failure), so that the caller knows whether to retry, undo or give up:
 *   GPUM_ESTATE     the step is not allowed from the process's state (the detail names it);
 *   GPUM_ETIMEDOUT  gpum_ckpt_lock's bound passed with a CUDA call of the target in flight:
 *                   the process is still RUNNING, nothing changed;
 *   GPUM_EDEVOOM    restore: no room on a GPU to restore onto; still CHECKPOINTED, retry later;
 *   GPUM_ENOMEM     checkpoint: host memory could not take the pages; still LOCKED;
 *   GPUM_EINVAL     a pid that is no CUDA process (never called cuInit, exited), or GPU pairs
 *                   the driver refused (an unknown GPU, a GPU missing, another kind of GPU);
 *   GPUM_EIO        the driver failed inside the process: it is now FAILED (only killing it
 *                   frees it);
 *   GPUM_EDRIVERVER gpum_ckpt_open: the driver has no checkpoint API (older than CUDA 12.8).
 *
 * Not done here (the caller's job, docs/checkpoint.md): process trees and the processes of a
 * multi-process job (one call per pid), refusing processes that use managed (UVM) or IPC
 * memory, which the driver does not checkpoint, and reserving room before a restore.
 *
 * Thread safety: a handle is immutable once open; every function may be called from any thread
 * at once on one handle, except gpum_ckpt_close on a handle in use. The driver serves the
 * requests to one process one at a time; steps on one pid from two threads at once race in
 * their meaning (the caller orders them), never in memory.
 */
#ifndef GPUM_CHECKPOINT_H
#define GPUM_CHECKPOINT_H

#include <stddef.h>

#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most GPU pairs one restore takes (a node's GPUs). */
#define GPUM_CKPT_MAX_PAIRS 64

typedef struct gpum_ckpt gpum_ckpt;

/* A process's checkpoint state (the values of the driver's CUprocessState). */
typedef enum {
  GPUM_CKPT_RUNNING = 0,      /* running; its CUDA calls proceed */
  GPUM_CKPT_LOCKED = 1,       /* its CUDA calls wait; its memory is on the GPU */
  GPUM_CKPT_CHECKPOINTED = 2, /* its memory is in host memory; the GPU holds none of it */
  GPUM_CKPT_FAILED = 3,       /* the driver failed during a checkpoint or restore: unusable */
} gpum_ckpt_state_t;

/* "running", "locked", "checkpointed", "failed"; "unknown" for other values. Never NULL. */
GPUM_API const char *gpum_ckpt_state_name(int state);

/* Loads the CUDA driver as libgpum does everywhere (library NULL or "": $GPUM_CUDA_LIBRARY,
 * else the simulated driver when $GPUM_SIM_NODE is set, else libcuda.so.1) and calls cuInit.
 * Returns 0, GPUM_EINVAL (out NULL), GPUM_EDRIVER / GPUM_ENODEV (no usable driver), GPUM_ENOMEM,
 * or GPUM_EDRIVERVER when the driver lacks the checkpoint calls (the detail names the driver's
 * version and the one needed). Close with gpum_ckpt_close. */
GPUM_API int gpum_ckpt_open(const char *library, gpum_ckpt **out);
/* Frees the handle and unloads the driver. NULL is fine. Touches no process. */
GPUM_API void gpum_ckpt_close(gpum_ckpt *c);

/* The state of pid into *state. */
GPUM_API int gpum_ckpt_state(gpum_ckpt *c, int pid, gpum_ckpt_state_t *state);
/* RUNNING -> LOCKED: waits for pid's CUDA calls in flight, then makes its new calls wait.
 * timeout_ms 0 waits without bound; else GPUM_ETIMEDOUT past it (still RUNNING). */
GPUM_API int gpum_ckpt_lock(gpum_ckpt *c, int pid, unsigned timeout_ms);
/* LOCKED -> CHECKPOINTED: pid's device memory moves to host memory; the GPUs are free of it. */
GPUM_API int gpum_ckpt_checkpoint(gpum_ckpt *c, int pid);
/* CHECKPOINTED -> LOCKED: the memory comes back. count 0: onto the GPUs it came from; else
 * old_uuids[i] -> new_uuids[i] for i < count (at most GPUM_CKPT_MAX_PAIRS), each a GPU UUID
 * as gpum_device_info_t.uuid and nvidia-smi give it, "GPU-" and 32 hex digits in the 8-4-4-4-12
 * form (case-insensitive); the pairs must name every GPU pid had memory on, onto GPUs of the
 * same kind. Bad UUIDs or counts give GPUM_EINVAL before the driver is asked. */
GPUM_API int gpum_ckpt_restore(gpum_ckpt *c, int pid, const char *const *old_uuids,
                               const char *const *new_uuids, size_t count);
/* LOCKED -> RUNNING: pid's waiting CUDA calls go on. */
GPUM_API int gpum_ckpt_unlock(gpum_ckpt *c, int pid);
/* The thread id of pid's restore thread (the driver's thread inside pid that does the work;
 * a tool like CRIU must leave it running) into *tid. */
GPUM_API int gpum_ckpt_restore_thread(gpum_ckpt *c, int pid, int *tid);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_CHECKPOINT_H */
