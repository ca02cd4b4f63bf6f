/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Workload reports: a process inside a job tells gpumd how its own work goes (its pool's bytes,
 * its request batcher's queue and latencies, its tiered cache's hits), and gpumd shows the
 * figures with the job's reservation: "workload" in `gpum jobs --json` and the REST API,
 * gpum_workload_figure in /metrics. So "is my job near its limit, or just caching?" and "is the
 * batcher keeping up?" have an answer from outside the process.
 *
 *   gpum_reporter_t *rep;
 *   gpum_reporter_create(NULL, &rep);              // $GPUM_RESERVATION_ID, every 2 s
 *   gpum_reporter_add_batcher(rep, "infer", batcher);
 *   gpum_reporter_add_pool(rep, "main", pool);
 *   ...
 *   gpum_reporter_destroy(rep);                    // a last report, then stops
 *
 * A report is one "report" op on gpumd's socket (docs/protocol.md): a source name
 * ([a-z0-9_.-], at most 48 bytes), and up to 48 figures, each a name ([a-z0-9_]) and a number.
 * gpumd keeps the latest per (reservation, pid, source) while the reservation is granted and
 * the process lives; only the reservation's owner (or an admin) may report on it.
 */
#ifndef GPUM_REPORT_H
#define GPUM_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/batch.h>
#include <gpum/batcher.h>
#include <gpum/client.h>
#include <gpum/export.h>
#include <gpum/pool.h>
#include <gpum/tiercache.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUM_REPORT_NAME_MAX 48    /* bytes of a source's or a figure's name */
#define GPUM_REPORT_FIGURES_MAX 48 /* figures per report */

typedef struct {
  const char *name;
  double value;
} gpum_figure_t;

/* Sends one report on reservation id ("r-7") over an open client. GPUM_EINVAL (a bad name, too
 * many figures, a value that is not finite), GPUM_EPERM (not the owner's), GPUM_ESTATE (not
 * granted), GPUM_ENOENT (no such reservation), or the client's errors. */
GPUM_API int gpum_client_report(gpum_client_t *c, const char *id, const char *source,
                                const gpum_figure_t *figures, size_t n);

/* The figures of a batcher, a pool or a tiered cache as a report gives them (names in
 * docs/batcher.md); each writes at most cap and returns how many it wrote. */
GPUM_API size_t gpum_batcher_figures(gpum_batcher_t *b, gpum_figure_t *out, size_t cap);
GPUM_API size_t gpum_pool_figures(gpum_pool_t *pool, gpum_figure_t *out, size_t cap);
GPUM_API size_t gpum_tiercache_figures(gpum_tiercache_t *c, gpum_figure_t *out, size_t cap);
/* An adaptive batch runner's figures (gpum/batch.h) as of its last step: batch_size (now),
 * smallest_batch, largest_batch, done, fallback, failed, ooms, oom_retries (items run again),
 * waits, peak_bytes, items (of the run), items_per_s. Any thread, also while the runner runs on
 * another (unlike gpum_batch_stats). */
GPUM_API size_t gpum_batch_figures(gpum_batch_runner_t *r, gpum_figure_t *out, size_t cap);

/* Fills out[0..cap) with a source's figures now; returns the count. Called on the reporter's
 * thread (or the caller of gpum_reporter_flush), never two at once for one reporter; the names
 * must stay valid until the reporter sent them (string literals, say). */
typedef size_t (*gpum_figures_fn)(void *user, gpum_figure_t *out, size_t cap);

typedef struct {
  const char *socket_path; /* NULL: gpum_socket_path(NULL): $GPUM_SOCKET or the default */
  const char *reservation; /* NULL: $GPUM_RESERVATION_ID (gpum run and gpum.reserve set it) */
  unsigned period_ms;      /* between reports; 0: 2000; GPUM_REPORTER_MANUAL: no thread */
} gpum_reporter_opts_t;

#define GPUM_REPORTER_MANUAL UINT32_MAX /* reports only on gpum_reporter_flush */

typedef struct gpum_reporter gpum_reporter_t;

/* A reporter on one reservation; its thread reports every source each period (and reconnects
 * after gpumd restarts; failures are logged once per kind, not per period). opts may be NULL.
 * GPUM_EINVAL when no reservation is named (outside a job: run under gpum run, or name one). */
GPUM_API int gpum_reporter_create(const gpum_reporter_opts_t *opts, gpum_reporter_t **out);
/* Adds a source (name as above); GPUM_EEXIST when the name is taken, GPUM_ENOSPC past 16. */
GPUM_API int gpum_reporter_add(gpum_reporter_t *rep, const char *source, gpum_figures_fn fn,
                               void *user);
GPUM_API int gpum_reporter_add_batcher(gpum_reporter_t *rep, const char *source, gpum_batcher_t *b);
GPUM_API int gpum_reporter_add_pool(gpum_reporter_t *rep, const char *source, gpum_pool_t *pool);
GPUM_API int gpum_reporter_add_tiercache(gpum_reporter_t *rep, const char *source,
                                         gpum_tiercache_t *c);
/* An adaptive batch runner: its figures (gpum_batch_figures), and it follows gpumd's pressure
 * (gpum_batch_set_pressure: a quarter less of the limit, no growth, until pressure clears). */
GPUM_API int gpum_reporter_add_batch(gpum_reporter_t *rep, const char *source,
                                     gpum_batch_runner_t *r);
/* Removes a source: once this returns, its function is not called again (remove it before
 * destroying what it reads). GPUM_ENOENT when there is none of that name. */
GPUM_API int gpum_reporter_remove(gpum_reporter_t *rep, const char *source);
/* Whether gpumd reports memory pressure on one of the reservation's devices now. The reporter
 * hears gpumd's pressure events on its connection (it reports, so gpumd tells it) and acts on
 * its sources: a batcher takes smaller batches while any device is under pressure
 * (gpum_batcher_set_pressure, until gpumd says it cleared); a tiered cache demotes its coldest
 * device entries as pressure rises (half its device tier at "high", every unpinned entry at
 * "critical"). Events are read by the reporter's thread (or during gpum_reporter_flush). */
GPUM_API bool gpum_reporter_pressure(gpum_reporter_t *rep);
/* Reports every source now, on the calling thread; returns the first failure (the others are
 * still sent). */
GPUM_API int gpum_reporter_flush(gpum_reporter_t *rep);
/* Stops the thread, reports a last time (errors ignored), frees. NULL is a no-op. */
GPUM_API void gpum_reporter_destroy(gpum_reporter_t *rep);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_REPORT_H */
