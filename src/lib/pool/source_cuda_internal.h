/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the CUDA memory sources of the pool share (library-internal): the driver loaded through
 * libgpum's CUDA loader, the retained primary context of one device, entering and leaving that
 * context around each call (ops may run on any thread, and the caller's current context is put
 * back afterwards; gpum__cuda_src_run wraps an op's body in both), error messages naming the call
 * and the device, and the stream-event ops with their small cache of CUevents. source_cuda.c
 * holds the "cuda" and "pinned" sources and this common part; source_cuda_vmm.c the "cuda-vmm"
 * source (expandable segments).
 */
#ifndef GPUM_POOL_SOURCE_CUDA_INTERNAL_H
#define GPUM_POOL_SOURCE_CUDA_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>

#include <gpum/pool.h>

#include "device/cuda_loader.h"

/* CUevents kept for reuse by event_destroy (recording into a cached event is cheaper than
 * creating one per free). */
#define GPUM__CUDA_SRC_EVENT_CACHE 64

typedef struct gpum__cuda_src gpum__cuda_src_t;

struct gpum__cuda_src {
  const char *kind; /* "cuda", "cuda-vmm", "pinned": the source's name, in messages */
  gpum__cuda_t *cu;
  int ordinal; /* CUDA device ordinal (after CUDA_VISIBLE_DEVICES) */
  CUdevice dev;
  CUcontext ctx; /* the retained primary context */
  /* Guards the event cache and the kind's own state: one source may serve several pools, each
   * calling it under its own lock. */
  pthread_mutex_t mu;
  CUevent events[GPUM__CUDA_SRC_EVENT_CACHE];
  unsigned nevents;
  void *impl;                            /* the kind's state (cuda-vmm: its reservations) */
  void (*impl_free)(gpum__cuda_src_t *); /* frees impl, called with the context entered */
};

/* Loads the driver, checks that device is a CUDA device ordinal (GPUM_ENODEV naming it and the
 * device count otherwise) and retains its primary context, without making it current. Returns 0,
 * GPUM_EDRIVER, GPUM_ENODEV, GPUM_ENOMEM or another mapped CUDA error. */
int gpum__cuda_src_open(const char *kind, int device, gpum__cuda_src_t **out);
/* Runs impl_free, drops the cached events, releases the context and unloads the driver. */
void gpum__cuda_src_close(gpum__cuda_src_t *s);

/* Makes the source's context current on the calling thread; *prev receives the one to put back
 * with gpum__cuda_src_leave. */
int gpum__cuda_src_enter(gpum__cuda_src_t *s, CUcontext *prev);
void gpum__cuda_src_leave(gpum__cuda_src_t *s, CUcontext prev);

/* The body of one source op: the driver calls it makes, with the source's context current. arg
 * is the op's own (its arguments and where its results go). Returns 0 or a GPUM_E* code. */
typedef int (*gpum__cuda_src_fn)(gpum__cuda_src_t *s, void *arg);

/* The prologue and epilogue every op shares: enters the source's context, runs fn(s, arg) and
 * puts the caller's context back. Returns gpum__cuda_src_enter's error (fn is not run then) or
 * what fn returns. gpum__cuda_src_run_locked also holds s->mu around fn. */
int gpum__cuda_src_run(gpum__cuda_src_t *s, gpum__cuda_src_fn fn, void *arg);
int gpum__cuda_src_run_locked(gpum__cuda_src_t *s, gpum__cuda_src_fn fn, void *arg);

/* The arguments of a segment op (alloc, free, reserve, map, unmap, unreserve) for its body: the
 * address and size it works on, and where it returns an address (alloc, reserve), written only
 * on success. */
typedef struct {
  gpum_devptr_t addr;
  size_t size;
  gpum_devptr_t *out;
} gpum__cuda_src_seg_t;

/* 0 for CUDA_SUCCESS; else sets the detail "<call, printf-formatted> on CUDA device N
 * (source 'kind'): CUDA_ERROR_X (text)" and returns the mapped GPUM_E* code. */
int gpum__cuda_src_check(const gpum__cuda_src_t *s, CUresult r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fills the ops every CUDA source has: mem_info (cuMemGetInfo_v2), event_record / event_query /
 * event_destroy, synchronize (cuCtxSynchronize) and destroy (gpum__cuda_src_close). */
void gpum__cuda_src_common_ops(gpum_pool_source_ops_t *ops);

/* Wraps s in a pool source with ops; closes s on failure. */
int gpum__cuda_src_finish(gpum__cuda_src_t *s, const gpum_pool_source_ops_t *ops,
                          gpum_pool_source_t **out);

/* The three sources as ops and ctx, before they are wrapped by gpum_pool_source_custom (the
 * public constructors do that; tests call the ops directly). Same errors as the public
 * constructors; release with ops->destroy(ctx). */
int gpum__pool_cuda_ops(int device, gpum_pool_source_ops_t *ops, void **ctx);
int gpum__pool_cuda_vmm_ops(int device, gpum_pool_source_ops_t *ops, void **ctx);
int gpum__pool_pinned_ops(gpum_pool_source_ops_t *ops, void **ctx);
/* The map granularity of a cuda-vmm ctx, in bytes. */
size_t gpum__pool_cuda_vmm_granularity(void *ctx);

#endif /* GPUM_POOL_SOURCE_CUDA_INTERNAL_H */
