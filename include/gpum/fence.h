/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The memory fence of a reservation: one small POSIX shared-memory region per reservation that
 * every process of the job maps (the enforcement shim, libgpum_enforce.so, does it for them), so
 * that one limit per device holds for all of them together (docs/enforce.md).
 *
 * The region holds, per device (the CUDA ordinal as the job's processes see it), the limit and
 * the bytes charged, and one slot per attached process with what that process holds. A charge
 * is a compare-and-swap on the device's counter against its limit, so two processes can never
 * both pass the check with bytes that fit only once; no lock is ever held, so a process killed
 * at any instruction blocks nobody. A process that dies, by SIGKILL too, gives its bytes back:
 * its slot is reclaimed by whoever finds its pid gone (or reused: the pid's start time is kept),
 * at the latest when an allocation would otherwise fail. The device counter is updated before
 * the slot on a charge and after it on an uncharge, so a process killed between the two leaks
 * its last bytes on the safe side (the fence stays tighter, never looser).
 *
 * Thread safety: every function may be called from any thread and any process at once, except
 * gpum_fence_close on a handle in use.
 */
#ifndef GPUM_FENCE_H
#define GPUM_FENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUM_FENCE_MAX_DEVICES 16   /* CUDA ordinals 0..15 of the job */
#define GPUM_FENCE_MAX_PROCS 256    /* processes of one job attached at once */
#define GPUM_FENCE_NAME_MAX 64      /* with the NUL; a POSIX shm name without the leading '/' */
#define GPUM_FENCE_ENV "GPUM_FENCE" /* the variable naming the region for the job's processes */

typedef struct gpum_fence gpum_fence;

/* What gpum_fence_create sets up. */
typedef struct {
  uint64_t limit;       /* bytes per device (> 0) */
  uint64_t max_limit;   /* elastic: the most the limit may grow to (0: not elastic) */
  uint64_t reservation; /* gpumd's reservation id (0: none, a limit from GPUM_MEM_LIMIT alone) */
  unsigned mode;        /* file mode of the region: 0600 (0), or 0640/0660 for a group that
                           must read it (gpum_fence_set_group); never more than owner and group */
} gpum_fence_opts_t;

/* One device of a fence as it stands. */
typedef struct {
  uint64_t limit;     /* bytes */
  uint64_t max_limit; /* 0: not elastic */
  uint64_t used;      /* bytes held by live processes of the job */
  unsigned procs;     /* live processes attached */
} gpum_fence_usage_t;

/* Names. A region's name cannot be guessed, so that no other user can create it first and stop
 * the job from starting: it ends in 64 bits from getrandom(2), and every call gives a new one.
 * gpumd finds the regions of its reservations by their prefix and their owner.
 *
 * gpum_fence_prefix: "gpum-fence-HHHHHHHHHHHH-", the prefix of every region of the gpumd at
 * scope (its socket path: distinct between two gpumd on one machine).
 * gpum_fence_name: a fresh name for a region of reservation at scope: the prefix, the id, "-",
 * 16 random hex digits.
 * gpum_fence_own_name: a fresh name for a region of the enforcement shim's own (a limit from
 * GPUM_MEM_LIMIT, no gpumd): "gpum-fence-pPID-" and 16 random hex digits.
 * Each returns 0, GPUM_ENOSPC if len is too small (GPUM_FENCE_NAME_MAX is enough), or GPUM_EIO
 * when the kernel gives no random bytes. Thread-safe. */
GPUM_API int gpum_fence_prefix(char *buf, size_t len, const char *scope);
GPUM_API int gpum_fence_name(char *buf, size_t len, const char *scope, uint64_t reservation);
GPUM_API int gpum_fence_own_name(char *buf, size_t len);

/* Creates the region name with every device's limit set from opts, and opens it read-write.
 * The name must not exist, whatever is there (a file of another user, a symbolic link):
 * GPUM_EEXIST then, and the caller picks another name. The region is created with mode 0600
 * (opts->mode) and checked to be the caller's after it is opened. */
GPUM_API int gpum_fence_create(const char *name, const gpum_fence_opts_t *opts, gpum_fence **out);
/* Gives the region name (the caller's) to group gid, for a gpumd that runs as another user and
 * reads it through that group (create it with mode 0640). 0, or GPUM_EPERM (not a group of the
 * caller), GPUM_ENOENT. */
GPUM_API int gpum_fence_set_group(const char *name, unsigned gid);
/* Opens an existing region owned by the caller's effective uid (gpum_fence_open) or by uid
 * owner: GPUM_ENOENT if there is none, GPUM_EPERM if it may not be opened so or belongs to
 * another uid, GPUM_EPROTO if it is not a regular file (a symbolic link is never followed) or
 * not a fence of this version. A read-only handle can read usage only. */
GPUM_API int gpum_fence_open(const char *name, bool writable, gpum_fence **out);
GPUM_API int gpum_fence_open_owned(const char *name, bool writable, unsigned owner,
                                   gpum_fence **out);
/* Unmaps the region (it stays for the other processes). NULL is ignored. */
GPUM_API void gpum_fence_close(gpum_fence *f);
/* Removes the region's name (mapped handles stay valid). GPUM_ENOENT if it was not there. */
GPUM_API int gpum_fence_unlink(const char *name);
/* Whether nobody will use the region again: the process that created it and every process
 * attached to it are gone. */
GPUM_API bool gpum_fence_abandoned(gpum_fence *f);
/* Removes the abandoned regions of the enforcement shim's own ("gpum-fence-p..."; the
 * caller's, or everyone's for root): a job killed before its first process could remove its
 * region leaves it to the next process that creates one, and to gpumd. Returns how many. */
GPUM_API unsigned gpum_fence_sweep_own(void);

/* Charges bytes on dev to the calling process: 0, or GPUM_EDEVOOM when the device's charged
 * bytes would pass its limit (after reclaiming dead processes' bytes), GPUM_ERANGE for a dev
 * past GPUM_FENCE_MAX_DEVICES, GPUM_ENOSPC when every process slot is taken by a live process,
 * GPUM_EPERM on a read-only handle. *used (may be NULL) is what the device held before. */
GPUM_API int gpum_fence_charge(gpum_fence *f, unsigned dev, uint64_t bytes, uint64_t *used);
/* Gives back bytes the calling process charged on dev. */
GPUM_API void gpum_fence_uncharge(gpum_fence *f, unsigned dev, uint64_t bytes);
/* Sets dev's limit (every device's when dev is GPUM_FENCE_ALL_DEVICES). A limit below what is
 * charged stops new charges until frees bring it under. */
#define GPUM_FENCE_ALL_DEVICES UINT32_MAX
GPUM_API int gpum_fence_set_limit(gpum_fence *f, unsigned dev, uint64_t limit);
/* What dev's counter holds (every charge not given back, a dead process's too until it is
 * reclaimed) and its limit (may be NULL): two atomic loads, for hot paths. 0 for a bad dev. */
GPUM_API uint64_t gpum_fence_charged(const gpum_fence *f, unsigned dev, uint64_t *limit);
/* Reads dev's figures, counting only processes that are alive (works on a read-only handle). */
GPUM_API int gpum_fence_usage(gpum_fence *f, unsigned dev, gpum_fence_usage_t *out);
/* Gives back the bytes of processes that are gone; returns how many slots it freed. */
GPUM_API unsigned gpum_fence_reclaim(gpum_fence *f);
/* The reservation id the region was created for (0: none). */
GPUM_API uint64_t gpum_fence_reservation(const gpum_fence *f);
/* Asks the job's processes to give memory back (gpumd reports pressure): the shim honours it at
 * its next free by shrinking an elastic reservation toward its base. Read and cleared by
 * gpum_fence_take_shrink. */
GPUM_API void gpum_fence_want_shrink(gpum_fence *f);
GPUM_API bool gpum_fence_take_shrink(gpum_fence *f);
/* The limit the region was created with (the elastic reservation's base). */
GPUM_API uint64_t gpum_fence_base_limit(const gpum_fence *f);

/* What the job's processes used that the driver's checkpoint (cuCheckpointProcess*, gpum/
 * checkpoint.h) cannot take: the enforcement shim marks the region when such a call succeeds
 * in any process of the job, so that gpumd can refuse to suspend the job up front and say why
 * (docs/enforce.md, "What the job used").
 * GPUM_FENCE_USED_MANAGED: managed (unified) memory: cuMemAllocManaged (the runtime's
 * cudaMallocManaged reaches it), hipMallocManaged.
 * GPUM_FENCE_USED_IPC: memory shared with another process, exported or imported:
 * cuIpcGetMemHandle, cuIpcOpenMemHandle, cuMemExportToShareableHandle,
 * cuMemImportFromShareableHandle, cuMemPoolExportToShareableHandle,
 * cuMemPoolImportFromShareableHandle, hipIpcGetMemHandle, hipIpcOpenMemHandle.
 * The flags say what the shim saw: none are set for a process not under it. */
#define GPUM_FENCE_USED_MANAGED 1u
#define GPUM_FENCE_USED_IPC 2u
#define GPUM_FENCE_USED_ALL (GPUM_FENCE_USED_MANAGED | GPUM_FENCE_USED_IPC)
/* Sets flags (GPUM_FENCE_USED_*; other bits are ignored) for the region's life: a flag is never
 * cleared. The calling process is recorded as the first user of each flag nobody set before.
 * One atomic OR, no lock; nothing on a read-only handle or NULL. For the shim. */
GPUM_API void gpum_fence_mark_used(gpum_fence *f, unsigned flags);
/* The flags set so far (0 for NULL). *managed_pid and *ipc_pid (each may be NULL) receive the
 * pid of the first process that set GPUM_FENCE_USED_MANAGED and GPUM_FENCE_USED_IPC, 0 when
 * that flag is not set. The pid is as that process saw it (its own PID namespace) and may be
 * gone by now. Works on a read-only handle. */
GPUM_API unsigned gpum_fence_used_flags(const gpum_fence *f, int *managed_pid, int *ipc_pid);

/* --- Putting a job under the shim ------------------------------------------------------------ */

/* The path of the enforcement shim, libgpum_enforce.so: $GPUM_ENFORCE_LIBRARY, else beside the
 * loaded libgpum, else in the install directory. GPUM_ENOENT (with the places tried in the
 * detail) when none exists, GPUM_ENOSPC when len is too small. */
GPUM_API int gpum_enforce_library(char *buf, size_t len);
/* Sets the calling process's environment so that the programs it runs next are fenced by the
 * region fence_name: LD_PRELOAD gets shim_path after what it held, GPUM_FENCE the name.
 * For the child of a launcher, between fork and exec (or before spawning). */
GPUM_API int gpum_enforce_setenv(const char *shim_path, const char *fence_name);

#ifdef __cplusplus
}
#endif

#endif /* GPUM_FENCE_H */
