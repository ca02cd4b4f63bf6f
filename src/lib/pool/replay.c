/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replaying a read allocation log (replay_csv.c) against a pool, and bisecting the smallest
 * capacity it fits in.
 *
 * A replay opens a source by name, creates a pool on it, and runs the operations in order with
 * one array from slot to pool pointer (0 = the allocation failed, so its free is skipped). The
 * timed loop does nothing but pool calls and that lookup; fragmentation at the peak is measured
 * in a second, untimed run that reads the pool's stats after every allocation, so the timing is
 * not disturbed. Replays are deterministic on the simulated source, which is what makes a
 * bisection over its capacity meaningful.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/error.h>
#include <gpum/pool_replay.h>
#include <gpum/size.h>

#include "os_internal.h"
#include "pool/replay_internal.h"

#define MIB (1024u * 1024u)

void gpum_replay_opts_init(gpum_replay_opts_t *opts) {
  if (!opts)
    return;
  memset(opts, 0, sizeof *opts);
  opts->strategy = GPUM_POOL_BALANCED;
  opts->source = "simulated";
  opts->measure_fragmentation = true;
}

/* A source, a pool on it and the live table. */
typedef struct {
  gpum_pool_source_t *src;
  gpum_pool_t *pool;
  gpum_devptr_t *ptr; /* slot -> pool pointer; 0 = none */
  bool pass_streams;  /* the log's stream ids mean something to the source */
} rig_t;

static int rig_open(const gpum_replay_log_t *log, const gpum_replay_opts_t *o, rig_t *rig) {
  const char *name = o->source && *o->source ? o->source : "simulated";
  bool simulated = !strcmp(name, "simulated");
  memset(rig, 0, sizeof *rig);
  /* Only the backing-free sources take any integer as a stream; the CUDA ones would hand the
   * log's stream handles to the driver, so everything runs on the default stream there. */
  rig->pass_streams = simulated || !strcmp(name, "host");
  gpum_pool_opts_t po;
  if (o->pool_opts)
    po = *o->pool_opts;
  else
    gpum_pool_opts_init(&po);
  po.strategy = o->strategy;
  if (!o->pool_opts)
    po.name = "replay";
  if (!simulated && o->capacity)
    po.limit_bytes = o->capacity;
  int rc = gpum_pool_source_open(name, o->device, simulated ? o->capacity : 0, &rig->src);
  if (rc)
    return rc;
  if ((rc = gpum_pool_create(rig->src, &po, &rig->pool)))
    goto out_src;
  rig->ptr = calloc(log->nslots ? log->nslots : 1, sizeof *rig->ptr);
  if (!rig->ptr) {
    rc = gpum_error(GPUM_ENOMEM, "out of memory for %u live blocks", log->nslots);
    goto out_pool;
  }
  return 0;
out_pool:
  gpum_pool_destroy(rig->pool);
out_src:
  gpum_pool_source_destroy(rig->src);
  rig->src = NULL;
  rig->pool = NULL;
  return rc;
}

/* Frees what the log left live (so the pool reports no leaks), then destroys everything. */
static void rig_close(const gpum_replay_log_t *log, rig_t *rig) {
  for (uint32_t s = 0; rig->ptr && s < log->nslots; s++)
    if (rig->ptr[s])
      gpum_pool_free(rig->pool, rig->ptr[s]);
  free(rig->ptr);
  gpum_pool_destroy(rig->pool);
  gpum_pool_source_destroy(rig->src);
  memset(rig, 0, sizeof *rig);
}

/* What one pass over the log counted. */
typedef struct {
  uint64_t ops, allocs, frees, ooms, failed_frees, first_oom_line;
  bool stopped;
  /* measured passes: */
  uint64_t reserved_max;
  double frag_at_peak;
} pass_t;

static int op_failed(const gpum__replay_op_t *op, int rc) {
  char what[GPUM_SIZE_BUFSZ];
  const char *detail = gpum_last_error();
  if (gpum__replay_op_is_free(op))
    return gpum_error(rc, "line %u: free: %s", gpum__replay_op_line(op),
                      *detail ? detail : gpum_strerror(rc));
  return gpum_error(rc, "line %u: allocate %s: %s", gpum__replay_op_line(op),
                    gpum_size_format(op->size, what, sizeof what),
                    *detail ? detail : gpum_strerror(rc));
}

/* Reads the stats after an allocation; remembers the fragmentation when reserved bytes reach a
 * new high. */
static int measure(rig_t *rig, pass_t *p) {
  gpum_pool_stats_t st;
  int rc = gpum_pool_stats(rig->pool, &st);
  if (rc == 0 && st.reserved_bytes.current > p->reserved_max) {
    p->reserved_max = st.reserved_bytes.current;
    p->frag_at_peak = st.fragmentation;
  }
  return rc;
}

static int run_pass(const gpum_replay_log_t *log, const gpum_replay_opts_t *o, rig_t *rig,
                    bool measured, pass_t *p) {
  memset(p, 0, sizeof *p);
  for (size_t i = 0; i < log->nops; i++) {
    const gpum__replay_op_t *op = &log->ops[i];
    gpum_devptr_t *slot = &rig->ptr[op->slot];
    int rc;
    if (gpum__replay_op_is_free(op)) {
      if (!*slot) {
        p->failed_frees++;
        continue;
      }
      p->ops++;
      if ((rc = gpum_pool_free(rig->pool, *slot)))
        return op_failed(op, rc);
      *slot = 0;
      p->frees++;
      continue;
    }
    p->ops++;
    rc = gpum_pool_alloc(rig->pool, op->size, rig->pass_streams ? op->stream : 0, slot);
    if (rc == 0) {
      p->allocs++;
      if (measured && (rc = measure(rig, p)))
        return rc;
      continue;
    }
    *slot = 0;
    if (rc != GPUM_EDEVOOM)
      return op_failed(op, rc);
    if (p->ooms++ == 0)
      p->first_oom_line = gpum__replay_op_line(op);
    if (o->stop_on_oom) {
      p->stopped = true;
      break;
    }
  }
  return 0;
}

static void fill_result(const gpum_replay_log_t *log, const gpum_replay_opts_t *o, const pass_t *p,
                        const gpum_pool_stats_t *st, uint64_t ns, gpum_replay_result_t *r) {
  memset(r, 0, sizeof *r);
  r->strategy = o->strategy;
  r->capacity = o->capacity;
  r->ops = p->ops;
  r->allocs = p->allocs;
  r->frees = p->frees;
  r->ooms = p->ooms;
  r->failed_frees = p->failed_frees;
  r->stopped = p->stopped;
  r->first_oom_line = p->first_oom_line;
  r->peak_allocated = st->allocated_bytes.peak;
  r->peak_reserved = st->reserved_bytes.peak;
  r->peak_requested = st->requested_bytes.peak;
  r->peak_live = log->info.peak_live_bytes;
  r->reserved_ratio = r->peak_allocated ? (double)r->peak_reserved / (double)r->peak_allocated : 0;
  r->reserved_to_live = r->peak_live ? (double)r->peak_reserved / (double)r->peak_live : 0;
  r->fragmentation_at_peak = -1;
  r->retries = st->num_alloc_retries;
  r->segments_peak = st->segment.peak;
  r->source_allocs = st->num_source_allocs;
  r->elapsed_ns = ns;
  r->ns_per_op = p->ops ? (double)ns / (double)p->ops : 0;
}

/* One pass on a fresh rig; stats (may be NULL) get the pool's stats at the end. */
static int replay_once(const gpum_replay_log_t *log, const gpum_replay_opts_t *o, bool measured,
                       pass_t *p, gpum_pool_stats_t *st, uint64_t *ns) {
  rig_t rig;
  int rc = rig_open(log, o, &rig);
  if (rc)
    return rc;
  uint64_t t0 = gpum__os_mono_ns();
  rc = run_pass(log, o, &rig, measured, p);
  if (ns)
    *ns = gpum__os_mono_ns() - t0;
  if (rc == 0 && st)
    rc = gpum_pool_stats(rig.pool, st);
  rig_close(log, &rig);
  return rc;
}

int gpum_replay_run(const gpum_replay_log_t *log, const gpum_replay_opts_t *opts,
                    gpum_replay_result_t *out) {
  if (!log || !out)
    return gpum_error(GPUM_EINVAL, "gpum_replay_run: NULL argument");
  gpum_replay_opts_t o;
  if (opts)
    o = *opts;
  else
    gpum_replay_opts_init(&o);
  pass_t p;
  gpum_pool_stats_t st;
  uint64_t ns = 0;
  int rc = replay_once(log, &o, false, &p, &st, &ns);
  if (rc)
    return rc;
  fill_result(log, &o, &p, &st, ns, out);
  if (o.measure_fragmentation) {
    pass_t m;
    if ((rc = replay_once(log, &o, true, &m, NULL, NULL)))
      return rc;
    out->fragmentation_at_peak = m.frag_at_peak;
  }
  return 0;
}

/* Whether log replays with no OOM in a simulated source of capacity bytes. */
static int fits(const gpum_replay_log_t *log, gpum_replay_opts_t *o, uint64_t capacity,
                gpum_replay_min_capacity_t *out, bool *ok) {
  pass_t p;
  o->capacity = capacity;
  int rc = replay_once(log, o, false, &p, NULL, NULL);
  out->runs++;
  *ok = rc == 0 && p.ooms == 0;
  return rc;
}

int gpum_replay_find_min_capacity(const gpum_replay_log_t *log, const gpum_replay_opts_t *opts,
                                  gpum_replay_min_capacity_t *out) {
  if (!log || !out)
    return gpum_error(GPUM_EINVAL, "gpum_replay_find_min_capacity: NULL argument");
  gpum_replay_opts_t o;
  if (opts)
    o = *opts;
  else
    gpum_replay_opts_init(&o);
  o.source = "simulated";
  o.stop_on_oom = true;
  o.measure_fragmentation = false;
  memset(out, 0, sizeof *out);
  uint64_t live = log->info.peak_live_bytes;
  out->peak_live = live;
  out->resolution = live / 1000 < MIB ? live / 1000 : MIB;
  if (out->resolution < 512)
    out->resolution = 512;
  if (live == 0)
    return 0;
  /* An unlimited run never holds more than its peak reserved bytes, so that capacity fits. */
  pass_t p;
  gpum_pool_stats_t st;
  o.capacity = 0;
  int rc = replay_once(log, &o, false, &p, &st, NULL);
  out->runs++;
  if (rc)
    return rc;
  if (p.ooms)
    return gpum_error(GPUM_EDEVOOM,
                      "the log does not replay even with unlimited capacity (line %llu)",
                      (unsigned long long)p.first_oom_line);
  uint64_t lo = live - 1, hi = st.reserved_bytes.peak;
  bool ok = false;
  if ((rc = fits(log, &o, hi, out, &ok)))
    return rc;
  for (int i = 0; !ok && i < 16; i++) /* a capacity limit changed the pool's choices */
    if ((rc = fits(log, &o, hi += hi / 4 + out->resolution, out, &ok)))
      return rc;
  if (!ok)
    return gpum_error(GPUM_EINTERNAL, "no capacity found at which the log replays without OOM");
  while (hi - lo > out->resolution) {
    uint64_t mid = lo + (hi - lo) / 2;
    if ((rc = fits(log, &o, mid, out, &ok)))
      return rc;
    if (ok)
      hi = mid;
    else
      lo = mid;
  }
  out->min_capacity = hi;
  out->failed_below = lo;
  out->ratio_to_live = (double)hi / (double)live;
  return 0;
}
