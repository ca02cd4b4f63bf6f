/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replaying allocation logs against the pool allocator, and generating synthetic ones.
 *
 * A log is RMM's CSV event log (rmm::mr::logging_resource_adaptor, also what gpum_pool_opts_t
 * event_log writes): a header `Thread,Time,Action,Pointer,Size,Stream`, then one row per event.
 * Thread: a decimal or 0x-hex id. Time: an integer (any unit, or an event index), RMM's clock
 * string HH:MM:SS[.fraction], or decimal seconds (1634567890.123456). Action: `allocate`, `free`
 * (`deallocate` is read as free) or `allocate failure` (counted, never replayed). Pointer: 0x-hex
 * (`0x0`/`(nil)` only on failure rows). Size: decimal bytes. Stream: decimal or 0x-hex.
 *
 * Reading a log (gpum_replay_log_read) parses it row by row into one compact array (48 bytes an
 * event while reading, 24 once read, about 72 for a moment in between: a 100 MB log of 2.4
 * million events peaks near 170 MB; the file itself is never held in memory, and lines over 4 KiB
 * are rejected), orders it, and resolves every free to the allocation it ends:
 * - Order: the events of each thread keep their row order; across threads the next event is the
 *   one with the smallest Time, ties broken by row order. A single-thread log replays in row
 *   order whatever its times. The replay itself runs on one thread, so it is deterministic.
 * - Clock times past midnight: a clock time more than 12 hours before the previous row's is
 *   taken to be on the next day.
 * - A free of a pointer that is not live (never allocated, already freed, or allocated by a
 *   failure row) is counted (unknown_frees) and skipped. An allocate of a pointer that is still
 *   live counts as a reused pointer: the earlier allocation is then never freed. Allocations of
 *   0 bytes are counted and skipped with their frees.
 *
 * Replaying (gpum_replay_run) creates a source and a pool, runs every event, and reports peaks
 * and timings; gpum_replay_find_min_capacity bisects the capacity of a simulated source.
 * Everything here is thread-safe for distinct objects; a log is read-only once read and may be
 * replayed from several threads at once.
 */
#ifndef GPUM_POOL_REPLAY_H
#define GPUM_POOL_REPLAY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <gpum/pool.h>

#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Logs ---------------------------------------------------------------------------------- */

typedef struct gpum_replay_log gpum_replay_log_t;

/* What a log holds, from reading it alone (no allocator involved). */
typedef struct {
  uint64_t rows;            /* data rows (the header and blank lines not counted) */
  uint64_t allocs;          /* allocate rows replayed (size > 0) */
  uint64_t frees;           /* free rows that matched a live allocation */
  uint64_t alloc_failures;  /* `allocate failure` rows: counted, not replayed */
  uint64_t unknown_frees;   /* frees of pointers that were not live: counted, skipped */
  uint64_t zero_size;       /* allocations of 0 bytes: counted, skipped (with their frees) */
  uint64_t reused_pointers; /* allocates of a pointer still live */
  uint64_t threads;         /* distinct Thread values */
  uint64_t streams;         /* distinct Stream values */
  uint64_t peak_live_bytes; /* max over the replay order of the sum of live exact sizes */
  uint64_t peak_live_blocks;
  uint64_t live_at_end; /* allocations never freed */
  uint64_t max_size, min_size;
} gpum_replay_log_info_t;

/* Reads a log from f (read to its end, not closed). name is used in messages ("LOG:12: ...";
 * NULL: "log"). Returns 0, GPUM_EPARSE (malformed header or row: the detail names the line, the
 * column and the bad value), GPUM_ERANGE (more than 2^31 rows), GPUM_EIO (read error) or
 * GPUM_ENOMEM. *out is set only on success; free it with gpum_replay_log_free. */
GPUM_API int gpum_replay_log_read(FILE *f, const char *name, gpum_replay_log_t **out);
/* The same from a file: GPUM_ENOENT (with the path) when it cannot be opened. */
GPUM_API int gpum_replay_log_open(const char *path, gpum_replay_log_t **out);
GPUM_API void gpum_replay_log_free(gpum_replay_log_t *log);
GPUM_API void gpum_replay_log_info(const gpum_replay_log_t *log, gpum_replay_log_info_t *out);

/* ---- Replays ------------------------------------------------------------------------------- */

typedef struct {
  gpum_pool_strategy_t strategy; /* default BALANCED */
  const char *source;            /* gpum_pool_source_open name; default "simulated" */
  int device;                    /* for the CUDA sources; default 0 */
  /* The simulated source's capacity; for other sources the pool's limit. 0 = unlimited. */
  uint64_t capacity;
  /* Stop at the first allocation that fails (default: count it, go on, and skip the frees of
   * the allocations that failed). */
  bool stop_on_oom;
  /* Run the log a second time, untimed, calling gpum_pool_stats after every allocation, to
   * measure fragmentation at the moment reserved bytes first reach their peak. Default true. */
  bool measure_fragmentation;
  /* Base pool options (name, max_split_size, gc_threshold, expandable_segments, ...); NULL:
   * defaults. strategy above overrides theirs; their limit_bytes stands unless capacity sets one.
   */
  const gpum_pool_opts_t *pool_opts;
} gpum_replay_opts_t;

GPUM_API void gpum_replay_opts_init(gpum_replay_opts_t *opts);

typedef struct {
  gpum_pool_strategy_t strategy;
  uint64_t capacity;       /* as asked (0 = unlimited) */
  uint64_t ops;            /* pool calls timed: allocations and frees */
  uint64_t allocs;         /* successful allocations */
  uint64_t frees;          /* frees done */
  uint64_t ooms;           /* allocations that failed with GPUM_EDEVOOM */
  uint64_t failed_frees;   /* frees skipped because their allocation had failed */
  bool stopped;            /* stop_on_oom and an allocation failed: the rest was not replayed */
  uint64_t first_oom_line; /* log line of the first failed allocation; 0 = none */
  uint64_t peak_allocated; /* pool stats: allocated_bytes.peak (rounded sizes) */
  uint64_t peak_reserved;  /* reserved_bytes.peak */
  uint64_t peak_requested; /* requested_bytes.peak (exact sizes, as the pool saw them) */
  uint64_t peak_live;      /* the log's peak live bytes (gpum_replay_log_info) */
  double reserved_ratio;   /* peak_reserved / peak_allocated (0 when nothing was allocated) */
  double reserved_to_live; /* peak_reserved / peak_live */
  /* The pool's fragmentation (1 - largest free block / free cached bytes) right after the
   * operation that first brought reserved bytes to their peak; -1 when not measured. */
  double fragmentation_at_peak;
  uint64_t retries;       /* num_alloc_retries */
  uint64_t segments_peak; /* segment.peak */
  uint64_t source_allocs; /* num_source_allocs */
  uint64_t elapsed_ns;    /* wall clock of the timed loop */
  double ns_per_op;       /* elapsed_ns / ops */
} gpum_replay_result_t;

/* Replays log on a new source and pool as opts say (NULL: defaults), then frees what is still
 * live and destroys both. OOMs are results, not errors. Returns 0, GPUM_EINVAL (bad options; also
 * an unknown source name), what opening the source returns (GPUM_EDRIVER, GPUM_ENODEV, ...),
 * GPUM_ENOMEM, or the error of a pool call that failed for another reason than memory (the
 * detail names the log line). */
GPUM_API int gpum_replay_run(const gpum_replay_log_t *log, const gpum_replay_opts_t *opts,
                             gpum_replay_result_t *out);

typedef struct {
  uint64_t min_capacity; /* smallest capacity found with no OOM (verified by a run) */
  uint64_t failed_below; /* the largest capacity known to fail, within resolution below
                            min_capacity: one replayed with an OOM, or peak live - 1 */
  uint64_t resolution;   /* bytes: min(1 MiB, 0.1% of peak live), at least 512 */
  uint64_t peak_live;    /* the log's peak live bytes */
  double ratio_to_live;  /* min_capacity / peak_live */
  unsigned runs;         /* replays made */
} gpum_replay_min_capacity_t;

/*
 * Finds by bisection the smallest capacity of a simulated source at which log replays with no
 * OOM (opts: strategy and pool options; source and capacity are ignored). The search runs between
 * the log's peak live bytes (no allocator can do with less) and the peak reserved bytes of an
 * unlimited run (which needs no more), to a resolution of 1 MiB or 0.1% of peak live bytes,
 * whichever is finer (at least 512 bytes). Success need not be monotone in the capacity; the
 * answer is always a capacity that was replayed without OOM, with a failing one within the
 * resolution below it. A log with nothing live at any time gives 0. Returns 0 or what
 * gpum_replay_run returns.
 */
GPUM_API int gpum_replay_find_min_capacity(const gpum_replay_log_t *log,
                                           const gpum_replay_opts_t *opts,
                                           gpum_replay_min_capacity_t *out);

/* ---- Synthetic transformer-training logs --------------------------------------------------- */

typedef struct {
  unsigned layers;      /* default 12 */
  unsigned hidden;      /* default 1024 */
  unsigned heads;       /* default 16 */
  unsigned seq;         /* longest sequence; each step draws one from [seq/2, seq], multiple of 8;
                           default 1024 */
  unsigned batch;       /* default 8 */
  unsigned vocab;       /* default 32000 */
  unsigned steps;       /* training steps; default 4 */
  unsigned dtype_bytes; /* activations and weights: 2 (fp16/bf16, default) or 4 (fp32) */
  bool flash_attention; /* no seq x seq attention matrices kept (default false) */
  uint64_t seed;        /* default 1 */
} gpum_tracegen_transformer_t;

GPUM_API void gpum_tracegen_transformer_init(gpum_tracegen_transformer_t *p);

/*
 * Writes an RMM CSV log of mixed-precision transformer training to out: weights (and their fp32
 * master copies) allocated first; per step, with a sequence length drawn per step: the forward
 * pass keeps each layer's activations for the backward pass and frees its temporaries
 * (workspaces, attention scratch), the loss allocates logits, the backward pass frees
 * activations layer by layer from the top and allocates gradients, the optimizer allocates its
 * Adam moments once (first step) and a scratch buffer, and gradients are freed before the next
 * step (zero_grad with set_to_none). Thread 0, stream 0, Time = event index, synthetic
 * addresses. Deterministic for a seed. *events (may be NULL) gets the rows written. Returns 0,
 * GPUM_EINVAL (a zero or absurd parameter, named in the detail) or GPUM_EIO (write error).
 */
GPUM_API int gpum_tracegen_transformer(const gpum_tracegen_transformer_t *p, FILE *out,
                                       uint64_t *events);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_POOL_REPLAY_H */
