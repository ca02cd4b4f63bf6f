/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The caching pool allocator for device memory (and pinned or plain host memory).
 *
 * A pool takes segments from a memory source (cuMemAlloc, CUDA virtual memory, pinned host
 * memory, mmap, or a backing-free simulated address space for trace replay) and hands out blocks
 * from them. Its metadata lives out of band: it never reads or writes the memory it manages, so
 * the same code manages device memory, and traces replay on a CPU. Allocation and free are O(1)
 * (TLSF-style segregated fit with two bitmap levels; an O(1) pointer-to-block table), and free
 * needs no size.
 *
 * Streams: every block belongs to the stream it was allocated on. A block freed on stream A is
 * reusable on A at once; on another stream only after an event recorded on A has completed
 * (each stream keeps one outstanding event, recorded at a free; see docs/pool.md). A block
 * used on other streams too (gpum_pool_record_stream) is freed only when events recorded on
 * those streams at free time have completed. Stream 0 is the default stream. Streams are the
 * source's handles (CUstream for the CUDA sources) as integers. Sources without event
 * operations make freed blocks reusable on every stream at once.
 *
 * Thread safety: every gpum_pool_* call on one pool is thread-safe (one short critical
 * section). Sources are used only under the pool's lock.
 */
#ifndef GPUM_POOL_H
#define GPUM_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t gpum_devptr_t; /* a device (or host) address managed by a pool */
typedef uint64_t gpum_stream_t; /* a source stream handle; 0 = the default stream */

/* ---- Memory sources ------------------------------------------------------------------------ */

typedef struct gpum_pool_source gpum_pool_source_t;

/*
 * The operations a source provides. Required: alloc, free. Everything else is optional (NULL).
 * Every op returns 0 or a negative GPUM_E* code (GPUM_EDEVOOM when memory is short) and sets the
 * detail message with gpum_error(). ctx is the pointer given to gpum_pool_source_custom.
 */
typedef struct {
  const char *name; /* "cuda", "cuda-vmm", "pinned", "host", "simulated", or a custom name */
  /* A segment of exactly size bytes (a multiple of granularity). */
  int (*alloc)(void *ctx, size_t size, gpum_devptr_t *addr);
  int (*free)(void *ctx, gpum_devptr_t addr, size_t size);
  /* The device's free and total bytes (cuMemGetInfo), for limits as a fraction and messages. */
  int (*mem_info)(void *ctx, uint64_t *free_bytes, uint64_t *total_bytes);
  /* Expandable segments (virtual memory): reserve address space once, then map and unmap
   * physical memory in multiples of granularity inside it. All three or none. */
  int (*reserve)(void *ctx, size_t size, gpum_devptr_t *base);
  int (*map)(void *ctx, gpum_devptr_t addr, size_t size);
  int (*unmap)(void *ctx, gpum_devptr_t addr, size_t size);
  void (*unreserve)(void *ctx, gpum_devptr_t base, size_t size);
  /* Stream ordering: record an event on stream; query it (0 done, GPUM_EAGAIN not yet);
   * destroy it. Without these ops every event counts as completed at once. */
  int (*event_record)(void *ctx, gpum_stream_t stream, void **event);
  int (*event_query)(void *ctx, void *event);
  void (*event_destroy)(void *ctx, void *event);
  /* Waits until all work on every stream is done (before segments are given back). */
  int (*synchronize)(void *ctx);
  /* Releases ctx when the source is destroyed. */
  void (*destroy)(void *ctx);
} gpum_pool_source_ops_t;

/* Source constructors. Each returns 0, GPUM_EINVAL, GPUM_ENOMEM, or (CUDA ones) GPUM_EDRIVER
 * when the driver cannot be loaded / GPUM_ENODEV for a bad device / GPUM_ENOTSUP (cuda-vmm on a
 * device without virtual memory management). The caller destroys the source after every pool
 * using it. */
GPUM_API int gpum_pool_source_host(gpum_pool_source_t **out); /* mmap'd host memory */
GPUM_API int
gpum_pool_source_pinned(gpum_pool_source_t **out); /* cuMemHostAlloc through the loader */
GPUM_API int gpum_pool_source_cuda(int device, gpum_pool_source_t **out); /* cuMemAlloc_v2 */
GPUM_API int gpum_pool_source_cuda_vmm(int device,
                                       gpum_pool_source_t **out); /* cuMemCreate + cuMemMap */
/* Addresses only, no backing: a capacity in bytes (0 = unlimited) and a fake base address. */
GPUM_API int gpum_pool_source_simulated(uint64_t capacity, gpum_pool_source_t **out);
/* A source from your own ops (copied) and ctx. */
GPUM_API int gpum_pool_source_custom(const gpum_pool_source_ops_t *ops, void *ctx,
                                     gpum_pool_source_t **out);
/* By name: "cuda", "cuda-vmm", "pinned", "host", "simulated" (device and capacity used where
 * they apply). */
GPUM_API int gpum_pool_source_open(const char *name, int device, uint64_t capacity,
                                   gpum_pool_source_t **out);
GPUM_API void gpum_pool_source_destroy(gpum_pool_source_t *src);
GPUM_API const char *gpum_pool_source_name(const gpum_pool_source_t *src);

/* ---- Pools --------------------------------------------------------------------------------- */

typedef enum {
  /* Default. Small (<= 1 MiB) requests from 2 MiB segments, large ones from 20 MiB segments
   * (requests over 10 MiB rounded to 2 MiB and given their own segment); cached segments are
   * kept until trim or the OOM ladder needs them. Use it unless you know better. */
  GPUM_POOL_BALANCED = 0,
  /* Grow in big steps (large segments of 64 MiB doubling to 1 GiB, small ones of 16 MiB) and
   * never give memory back on its own (only gpum_pool_trim and, as the last step before
   * failing, the OOM ladder): the fewest driver calls, for a process that owns the GPU for its
   * whole life. */
  GPUM_POOL_GREEDY = 1,
  /* Pack allocations at low addresses and give empty segments back at once: the smallest
   * footprint, for processes sharing a GPU. */
  GPUM_POOL_CONSOLIDATED = 2,
  /* Never split blocks above max_split_size (default 64 MiB), free unsplit cached segments
   * past a garbage collection threshold (default 0.8 of the limit or device), and use
   * expandable (virtual) segments where the source has them: for long runs with varying shapes
   * whose fragmentation otherwise grows. */
  GPUM_POOL_FRAGMENTATION_AWARE = 3,
} gpum_pool_strategy_t;

GPUM_API const char *gpum_pool_strategy_name(gpum_pool_strategy_t s); /* "BALANCED" */
/* Case-insensitive; also accepts "fragmentation-aware". Returns 0 or GPUM_EINVAL. */
GPUM_API int gpum_pool_strategy_parse(const char *s, gpum_pool_strategy_t *out);

typedef struct {
  const char *name;              /* shown in messages and snapshots; default "default" */
  gpum_pool_strategy_t strategy; /* default BALANCED */
  int device;                    /* for messages ("GPU 0"); default 0 */
  uint64_t limit_bytes;          /* hard cap on reserved bytes; 0 = the reservation the
                                    process runs under (GPUM_MEM_LIMIT, which gpum run sets:
                                    bytes per GPU) unless no_reservation_limit or the source's
                                    memory is not a GPU's (host, pinned, simulated), else none */
  double limit_fraction;         /* cap as a fraction of the device total (0..1]; 0 = none;
                                    needs a source with mem_info; with limit_bytes the smaller
                                    wins */
  uint64_t max_split_size;       /* blocks at least this big are not split and serve only
                                    requests at most 20 MiB smaller; 0 = no limit, else at
                                    least 20 MiB */
  double gc_threshold;           /* (0..1): above this share of the limit, free old cached
                                    segments before growing; 0 = off */
  bool expandable_segments;      /* use the source's reserve/map when it has them */
  uint64_t cache_limit_bytes;    /* the most bytes kept cached (reserved but not allocated):
                                    past it, empty segments are given back, oldest first, as
                                    blocks are freed and before the pool grows. 0 = the
                                    default: cache_limit_fraction, else none when the pool has
                                    a limit (it caches up to it), else 1/8 of the device;
                                    UINT64_MAX: no bound */
  double cache_limit_fraction;   /* the same as a share (0..1] of the limit, else of the
                                    device total; 0 = the default */
  bool no_reservation_limit;     /* do not take the reservation as the default limit (below) */
  FILE *event_log;               /* RMM CSV event log (Thread,Time,Action,Pointer,Size,Stream);
                                    NULL = none. Not closed or flushed by the pool. */
} gpum_pool_opts_t;

GPUM_API void gpum_pool_opts_init(gpum_pool_opts_t *opts);

typedef struct gpum_pool gpum_pool_t;

/* Creates a pool on src (not owned). opts NULL: defaults. Returns 0, GPUM_EINVAL (the detail
 * names the bad option) or GPUM_ENOMEM. */
GPUM_API int gpum_pool_create(gpum_pool_source_t *src, const gpum_pool_opts_t *opts,
                              gpum_pool_t **out);
/* Gives every segment back to the source. Live blocks are reported at warn level (leaks). */
GPUM_API void gpum_pool_destroy(gpum_pool_t *pool);

/* Allocates size bytes (rounded up to 512) for use on stream. size 0 gives GPUM_EINVAL.
 * On shortage it runs the OOM ladder: reuse cached blocks, free unsplit cached segments and
 * retry, call the OOM callbacks (each may free memory and ask for a retry), then fails with
 * GPUM_EDEVOOM and a detail message naming the request, the device's total and free memory, the
 * pool's reserved, allocated and cached bytes, its largest cached block, fragmentation and
 * limit. */
GPUM_API int gpum_pool_alloc(gpum_pool_t *pool, size_t size, gpum_stream_t stream,
                             gpum_devptr_t *ptr);
/* Frees a block from gpum_pool_alloc. GPUM_EINVAL for a pointer the pool did not hand out (or
 * already freed); nothing changes then. */
GPUM_API int gpum_pool_free(gpum_pool_t *pool, gpum_devptr_t ptr);
/* Marks ptr as used on stream too: on free, its reuse waits for work on stream as well. */
GPUM_API int gpum_pool_record_stream(gpum_pool_t *pool, gpum_devptr_t ptr, gpum_stream_t stream);
/* Gives cached (wholly free) segments back to the source until reserved <= target_bytes or no
 * free segment is left; *released (may be NULL) gets the bytes given back. */
GPUM_API int gpum_pool_trim(gpum_pool_t *pool, uint64_t target_bytes, uint64_t *released);

/* An OOM callback: called with the pool's lock released, so it may call the pool (free blocks
 * in it); return true to ask for a retry (after freeing memory), false to pass. Each callback
 * is asked at most once per allocation, in the order added. At most 16 per pool (GPUM_ENOSPC
 * after that). */
typedef bool (*gpum_pool_oom_fn)(gpum_pool_t *pool, size_t requested, void *arg);
GPUM_API int gpum_pool_add_oom_callback(gpum_pool_t *pool, gpum_pool_oom_fn fn, void *arg);

/* A counter as PyTorch keeps it. */
typedef struct {
  uint64_t current, peak, allocated, freed;
} gpum_pool_stat_t;

typedef struct {
  gpum_pool_stat_t allocated_bytes;      /* bytes in blocks handed out (rounded sizes) */
  gpum_pool_stat_t requested_bytes;      /* bytes asked for (unrounded) */
  gpum_pool_stat_t reserved_bytes;       /* bytes held from the source */
  gpum_pool_stat_t active_bytes;         /* allocated + freed but awaiting stream events */
  gpum_pool_stat_t inactive_split_bytes; /* free blocks inside partly used segments */
  gpum_pool_stat_t allocation;           /* counts of the same */
  gpum_pool_stat_t segment;
  gpum_pool_stat_t active;
  gpum_pool_stat_t inactive_split;
  uint64_t num_alloc_retries; /* times the ladder freed cached segments and retried */
  uint64_t num_ooms;          /* GPUM_EDEVOOM returned */
  uint64_t num_source_allocs, num_source_frees;
  uint64_t largest_free_block; /* bytes */
  uint64_t free_cached;        /* bytes in free blocks */
  double fragmentation;        /* 1 - largest_free_block / free_cached; 0 when nothing cached */
  uint64_t limit;              /* effective limit in bytes; 0 = none */
  uint64_t cache_limit;        /* effective cache bound in bytes; 0 = none */
  /* Per-strategy counters. */
  uint64_t num_splits, num_merges, num_gc_frees, num_stream_merges, num_maps, num_unmaps;
} gpum_pool_stats_t;

GPUM_API int gpum_pool_stats(gpum_pool_t *pool, gpum_pool_stats_t *out);
/* Resets the peaks to the current values. */
GPUM_API void gpum_pool_reset_peaks(gpum_pool_t *pool);

/* A JSON snapshot of the pool: options, stats, and every segment with its blocks (address, size,
 * requested size, state "allocated" | "awaiting_free" | "free", stream). Malloc'd string the
 * caller frees. */
GPUM_API int gpum_pool_snapshot_json(gpum_pool_t *pool, char **out);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_POOL_H */
