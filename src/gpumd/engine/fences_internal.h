/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The memory fences of gpumd's reservations (fences.c; gpum/fence.h, docs/enforce.md). A
 * launcher (gpum run --enforce, the Slurm plugin) creates a reservation's region under a
 * random name: gpumd's prefix (gpum_fence_prefix of its socket), the id, 64 random bits. gpumd
 * finds it by prefix and id, and trusts it only when the reservation's owner owns the file and
 * the region names the reservation: a region another user made under a name of that shape is
 * never read or removed for it.
 *
 * Nothing outlives its reservation: when a reservation ends, for any reason, its regions are
 * removed at the end of that loop turn, before anything the turn says goes out (the job's
 * processes keep what they mapped; new ones find no fence). One look at inotify then serves
 * every reservation the turn ended, and it comes after every socket read of the turn: a region
 * made before the request that ended its reservation was sent is listed by then. A region made
 * after its reservation ended (a launcher racing the end), or while gpumd was down, goes at the
 * next sweep (at start, then every GPUMD_FENCES_SWEEP_S when /dev/shm changed), with the
 * enforcement shim's own abandoned regions (gpum_fence_sweep_own). The listing of /dev/shm is
 * kept and read again only when inotify says a gpum-fence-* name came or went. Loop thread only.
 */
#ifndef GPUMD_FENCES_INTERNAL_H
#define GPUMD_FENCES_INTERNAL_H

#include <gpum/fence.h>

#include "sched.h"

struct gpumd;

#define GPUMD_FENCES_SWEEP_S 5

/* Starts watching /dev/shm and sweeps once (after the ledger's recovery). 0 or GPUM_ENOMEM;
 * without inotify every lookup lists /dev/shm again. */
int gpumd_fences_start(struct gpumd *d);
void gpumd_fences_stop(struct gpumd *d);
/* The region of r opened read-only, or NULL when r has none (the caller closes it). */
gpum_fence *gpumd_fences_open(struct gpumd *d, const gpumd_resv_t *r);
/* r ended: its regions are removed at the end of the turn (gpumd_fences_end_turn); until then
 * gpumd_fences_open finds none for it. */
void gpumd_fences_ended(struct gpumd *d, const gpumd_resv_t *r);
/* The end of a loop turn: the regions of the reservations it ended are removed. */
void gpumd_fences_end_turn(struct gpumd *d);
/* Removes the regions of reservations that are not live any more, and the shim's abandoned
 * ones. Returns how many. */
unsigned gpumd_fences_sweep(struct gpumd *d);

#endif /* GPUMD_FENCES_INTERNAL_H */
