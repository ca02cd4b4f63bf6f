/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Workload reports (gpum/report.h): the "report" op, the figures of libgpum's pool, batcher and
 * tiered cache, and the reporter thread that sends them every period.
 */
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/report.h>

#include "client/client_internal.h"
#include "client/protocol_internal.h"
#include "os_internal.h"

#define SOURCES_MAX 16
#define DEFAULT_PERIOD_MS 2000
#define CONNECT_TIMEOUT_MS 1000

_Static_assert(GPUM_REPORT_NAME_MAX == GPUM_PROTO_REPORT_NAME_MAX &&
                   GPUM_REPORT_FIGURES_MAX == GPUM_PROTO_REPORT_FIGURES_MAX,
               "the public limits are the protocol's");

bool gpum__report_name_ok(const char *s, bool source) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n > GPUM_REPORT_NAME_MAX)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          (source && (c == '.' || c == '-'))))
      return false;
  }
  return true;
}

static int check_source(const char *source) {
  if (!gpum__report_name_ok(source, true))
    return gpum_error(GPUM_EINVAL, "source '%.64s' must be 1 to %d of a-z, 0-9, '_', '.', '-'",
                      source ? source : "", GPUM_REPORT_NAME_MAX);
  return 0;
}

int gpum_client_report(gpum_client_t *c, const char *id, const char *source,
                       const gpum_figure_t *figures, size_t n) {
  if (!c || !id || (n && !figures))
    return gpum_error(GPUM_EINVAL, "gpum_client_report: NULL argument");
  int rc = check_source(source);
  if (rc != 0)
    return rc;
  if (n > GPUM_REPORT_FIGURES_MAX)
    return gpum_error(GPUM_EINVAL, "at most %d figures in a report (%zu given)",
                      GPUM_REPORT_FIGURES_MAX, n);
  json_t *f = json_object();
  for (size_t i = 0; f && i < n; i++) {
    if (!gpum__report_name_ok(figures[i].name, false)) {
      json_decref(f);
      return gpum_error(GPUM_EINVAL, "figure name '%.64s' must be 1 to %d of a-z, 0-9 and '_'",
                        figures[i].name ? figures[i].name : "", GPUM_REPORT_NAME_MAX);
    }
    if (!isfinite(figures[i].value)) {
      json_decref(f);
      return gpum_error(GPUM_EINVAL, "figure '%s' is not a finite number", figures[i].name);
    }
    if (json_object_set_new(f, figures[i].name, json_real(figures[i].value)) != 0) {
      json_decref(f);
      f = NULL;
    }
  }
  json_t *req = f ? json_pack("{s:s, s:s, s:s, s:o}", GPUM_PROTO_F_OP, GPUM_PROTO_OP_REPORT,
                              GPUM_PROTO_F_RESERVATION, id, GPUM_PROTO_F_SOURCE, source,
                              GPUM_PROTO_F_FIGURES, f)
                  : NULL;
  if (!req)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  json_t *reply = NULL;
  rc = gpum__client_call_consume(c, req, &reply);
  json_decref(reply);
  return rc;
}

/* ---- the figures of libgpum's pieces -------------------------------------------------------- */

typedef struct {
  gpum_figure_t *out;
  size_t cap, n;
} figs_t;

static void fig(figs_t *f, const char *name, double value) {
  if (f->n < f->cap)
    f->out[f->n++] = (gpum_figure_t){name, value};
}

size_t gpum_batcher_figures(gpum_batcher_t *b, gpum_figure_t *out, size_t cap) {
  gpum_batcher_stats_t s;
  gpum_batcher_stats(b, &s);
  figs_t f = {out, cap, 0};
  fig(&f, "queued", (double)s.queued);
  fig(&f, "submitted", (double)s.submitted);
  fig(&f, "completed", (double)s.completed);
  fig(&f, "failed", (double)s.failed);
  fig(&f, "rejected_full", (double)s.rejected_full);
  fig(&f, "rejected_timeout", (double)s.rejected_timeout);
  fig(&f, "cancelled", (double)s.cancelled);
  fig(&f, "batches", (double)s.batches);
  fig(&f, "mean_batch", s.batches ? (double)s.completed / (double)s.batches : 0);
  fig(&f, "oom_splits", (double)s.oom_splits);
  fig(&f, "bound", (double)s.bound);
  fig(&f, "throughput_per_s", s.throughput); /* the unit in the name: gpum_figure_unit */
  fig(&f, "queue_p50_us", s.queue_p50_us);
  fig(&f, "queue_p95_us", s.queue_p95_us);
  fig(&f, "queue_p99_us", s.queue_p99_us);
  fig(&f, "e2e_p50_us", s.e2e_p50_us);
  fig(&f, "e2e_p95_us", s.e2e_p95_us);
  fig(&f, "e2e_p99_us", s.e2e_p99_us);
  return f.n;
}

size_t gpum_pool_figures(gpum_pool_t *pool, gpum_figure_t *out, size_t cap) {
  gpum_pool_stats_t s;
  figs_t f = {out, cap, 0};
  if (gpum_pool_stats(pool, &s) != 0)
    return 0;
  double alloc = (double)s.allocated_bytes.current, resv = (double)s.reserved_bytes.current;
  fig(&f, "allocated_bytes", alloc);
  fig(&f, "allocated_peak_bytes", (double)s.allocated_bytes.peak);
  fig(&f, "reserved_bytes", resv);
  fig(&f, "reserved_peak_bytes", (double)s.reserved_bytes.peak);
  fig(&f, "cached_bytes", resv > alloc ? resv - alloc : 0);
  fig(&f, "fragmentation_ratio", s.fragmentation);
  fig(&f, "alloc_retries", (double)s.num_alloc_retries);
  fig(&f, "ooms", (double)s.num_ooms);
  fig(&f, "limit_bytes", (double)s.limit);
  return f.n;
}

size_t gpum_tiercache_figures(gpum_tiercache_t *c, gpum_figure_t *out, size_t cap) {
  static const char *const names[GPUM_TIER_COUNT][7] = {
      {"device_hits", "device_misses", "device_promotions", "device_demotions", "device_evictions",
       "device_bytes", "device_entries"},
      {"pinned_hits", "pinned_misses", "pinned_promotions", "pinned_demotions", "pinned_evictions",
       "pinned_bytes", "pinned_entries"},
      {"host_hits", "host_misses", "host_promotions", "host_demotions", "host_evictions",
       "host_bytes", "host_entries"}};
  gpum_tiercache_stats_t s;
  gpum_tiercache_stats(c, &s);
  figs_t f = {out, cap, 0};
  fig(&f, "gets", (double)s.gets);
  fig(&f, "misses", (double)s.misses);
  fig(&f, "alloc_failures", (double)s.alloc_failures);
  for (int t = 0; t < GPUM_TIER_COUNT; t++) {
    const gpum_tier_stats_t *x = &s.tier[t];
    const double v[7] = {(double)x->hits,      (double)x->misses,    (double)x->promotions,
                         (double)x->demotions, (double)x->evictions, (double)x->bytes,
                         (double)x->entries};
    for (int k = 0; k < 7; k++)
      fig(&f, names[t][k], v[k]);
  }
  return f.n;
}

/* ---- the reporter ---------------------------------------------------------------------------- */

typedef enum { SRC_CUSTOM, SRC_BATCHER, SRC_POOL, SRC_TIERCACHE, SRC_BATCH } source_kind_t;

typedef struct {
  char name[GPUM_REPORT_NAME_MAX + 1];
  gpum_figures_fn fn;
  void *user;
  source_kind_t kind; /* batchers and caches also follow gpumd's pressure events */
} source_t;

#define PRESSURE_DEVICES 64

struct gpum_reporter {
  char socket[256];
  char id[64];
  unsigned period_ms;
  pthread_mutex_t send_mu; /* one flush at a time; held while a source's function runs */
  pthread_mutex_t mu;      /* the fields below */
  source_t src[SOURCES_MAX];
  unsigned nsrc;
  bool stopping, started;
  pthread_t thread;
  gpum_client_t *client;           /* under send_mu */
  int last_err;                    /* the last failure logged (0: the last flush went through) */
  int wake[2];                     /* a pipe: destroy wakes the thread from poll */
  uint8_t level[PRESSURE_DEVICES]; /* gpumd's pressure per device: 0 none, 1 high, 2 critical */
  bool pressure;                   /* some device of the reservation is under pressure */
};

static int level_of(const char *name) {
  return !name                                         ? 1
         : !strcmp(name, GPUM_PROTO_PRESSURE_NONE)     ? 0
         : !strcmp(name, GPUM_PROTO_PRESSURE_CRITICAL) ? 2
                                                       : 1;
}

/* gpumd's pressure on one of the reservation's devices (send_mu held: events are read during a
 * flush or by the thread): batchers take smaller batches while any device is under pressure;
 * tiered caches demote their coldest device entries as it rises (half the device tier at
 * "high", every unpinned entry at "critical"). */
static void on_event(const gpum_client_event_t *ev, void *user) {
  gpum_reporter_t *rep = user;
  if (ev->kind != GPUM_CLIENT_EV_PRESSURE || ev->device < 0 || ev->device >= PRESSURE_DEVICES)
    return;
  int was = rep->level[ev->device], now = level_of(ev->level);
  rep->level[ev->device] = (uint8_t)now;
  bool any = false;
  for (int k = 0; k < PRESSURE_DEVICES; k++)
    any = any || rep->level[k] > 0;
  source_t src[SOURCES_MAX];
  pthread_mutex_lock(&rep->mu);
  unsigned n = rep->nsrc;
  memcpy(src, rep->src, n * sizeof *src);
  pthread_mutex_unlock(&rep->mu);
  for (unsigned i = 0; i < n; i++) {
    if (src[i].kind == SRC_BATCHER) {
      gpum_batcher_set_pressure(src[i].user, any);
    } else if (src[i].kind == SRC_BATCH) {
      gpum_batch_set_pressure(src[i].user, any);
    } else if (src[i].kind == SRC_TIERCACHE && now > was) {
      gpum_tiercache_stats_t st;
      gpum_tiercache_stats(src[i].user, &st);
      uint64_t dev = st.tier[GPUM_TIER_DEVICE].bytes;
      if (gpum_tiercache_pressure(src[i].user, now == 2 ? UINT64_MAX : dev / 2, NULL) != 0)
        gpum_log(GPUM_LOG_WARN, "report", "demoting cache '%s' under pressure: %s", src[i].name,
                 gpum_last_error());
    }
  }
  pthread_mutex_lock(&rep->mu); /* after the sources acted: who sees it may count on that */
  rep->pressure = any;
  pthread_mutex_unlock(&rep->mu);
}

/* Connects when not connected (send_mu held). */
static int connect_locked(gpum_reporter_t *rep) {
  if (rep->client)
    return 0;
  int rc = gpum_client_connect(rep->socket, CONNECT_TIMEOUT_MS, &rep->client);
  if (rc == 0)
    gpum_client_set_event_cb(rep->client, on_event, rep);
  return rc;
}

static void disconnect_locked(gpum_reporter_t *rep) {
  gpum_client_close(rep->client);
  rep->client = NULL;
}

/* Sends every source; send_mu held. */
static int flush_locked(gpum_reporter_t *rep) {
  source_t src[SOURCES_MAX];
  pthread_mutex_lock(&rep->mu);
  unsigned n = rep->nsrc;
  memcpy(src, rep->src, n * sizeof *src);
  pthread_mutex_unlock(&rep->mu);
  int first = 0;
  for (unsigned i = 0; i < n; i++) {
    gpum_figure_t figs[GPUM_REPORT_FIGURES_MAX];
    size_t k = src[i].fn(src[i].user, figs, GPUM_REPORT_FIGURES_MAX);
    int rc = connect_locked(rep);
    if (rc == 0)
      rc = gpum_client_report(rep->client, rep->id, src[i].name, figs, k);
    bool refused = rc == GPUM_EINVAL || rc == GPUM_EPERM || rc == GPUM_ESTATE ||
                   rc == GPUM_ENOENT || rc == GPUM_EBUSY; /* gpumd said no: the link is fine */
    if (rc != 0 && !refused)
      disconnect_locked(rep); /* reconnect on the next report */
    if (rc != 0 && first == 0)
      first = rc;
  }
  if (first != 0 && first != rep->last_err)
    gpum_log(GPUM_LOG_WARN, "report", "reporting on %s to %s: %s (logged once until it changes)",
             rep->id, rep->socket, gpum_last_error());
  rep->last_err = first;
  return first;
}

int gpum_reporter_flush(gpum_reporter_t *rep) {
  if (!rep)
    return gpum_error(GPUM_EINVAL, "gpum_reporter_flush: NULL reporter");
  pthread_mutex_lock(&rep->send_mu);
  int rc = flush_locked(rep);
  pthread_mutex_unlock(&rep->send_mu);
  return rc;
}

static bool stopping(gpum_reporter_t *rep) {
  pthread_mutex_lock(&rep->mu);
  bool v = rep->stopping;
  pthread_mutex_unlock(&rep->mu);
  return v;
}

/* Reports every period and, between reports, reads gpumd's events (pressure) as they come. */
static void *run(void *arg) {
  gpum_reporter_t *rep = arg;
  uint64_t period = (uint64_t)rep->period_ms * 1000000u;
  uint64_t next = gpum__os_mono_ns() + period;
  while (!stopping(rep)) {
    uint64_t now = gpum__os_mono_ns();
    if (now >= next) {
      gpum_reporter_flush(rep);
      next = gpum__os_mono_ns() + period;
      continue;
    }
    pthread_mutex_lock(&rep->send_mu);
    int fd = rep->client ? gpum_client_fd(rep->client) : -1;
    pthread_mutex_unlock(&rep->send_mu);
    struct pollfd p[2] = {{.fd = rep->wake[0], .events = POLLIN}, {.fd = fd, .events = POLLIN}};
    uint64_t wait_ms = (next - now + 999999u) / 1000000u;
    if (poll(p, fd >= 0 ? 2 : 1, wait_ms > INT32_MAX ? INT32_MAX : (int)wait_ms) <= 0)
      continue;
    if (p[0].revents) {
      char buf[16];
      while (read(rep->wake[0], buf, sizeof buf) > 0) {
      }
    }
    if (fd >= 0 && p[1].revents) {
      pthread_mutex_lock(&rep->send_mu);
      /* The same connection (a flush may have replaced it meanwhile): its events. */
      if (rep->client && gpum_client_fd(rep->client) == fd &&
          gpum_client_process(rep->client, 0) < 0)
        disconnect_locked(rep); /* gpumd went away: reconnect at the next report */
      pthread_mutex_unlock(&rep->send_mu);
    }
  }
  return NULL;
}

int gpum_reporter_create(const gpum_reporter_opts_t *opts, gpum_reporter_t **out) {
  gpum_reporter_opts_t none = {0};
  if (!out)
    return gpum_error(GPUM_EINVAL, "gpum_reporter_create: NULL out");
  *out = NULL;
  if (!opts)
    opts = &none;
  const char *id = opts->reservation ? opts->reservation : getenv("GPUM_RESERVATION_ID");
  if (!id || !*id)
    return gpum_error(GPUM_EINVAL, "no reservation to report on: run under gpum run (which sets "
                                   "GPUM_RESERVATION_ID) or name one");
  gpum_reporter_t *rep = calloc(1, sizeof *rep);
  if (!rep)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  int rc = 0;
  if (strlen(id) >= sizeof rep->id)
    rc = gpum_error(GPUM_EINVAL, "reservation id '%.64s...' is too long", id);
  else if (opts->socket_path && strlen(opts->socket_path) >= sizeof rep->socket)
    rc = gpum_error(GPUM_EINVAL, "socket path is too long");
  else if (opts->socket_path)
    snprintf(rep->socket, sizeof rep->socket, "%s", opts->socket_path);
  else
    rc = gpum_socket_path(NULL, rep->socket, sizeof rep->socket);
  if (rc != 0) {
    free(rep);
    return rc;
  }
  snprintf(rep->id, sizeof rep->id, "%s", id);
  rep->period_ms = opts->period_ms ? opts->period_ms : DEFAULT_PERIOD_MS;
  pthread_mutex_init(&rep->send_mu, NULL);
  pthread_mutex_init(&rep->mu, NULL);
  rep->wake[0] = rep->wake[1] = -1;
  if (rep->period_ms != GPUM_REPORTER_MANUAL) {
    if (pipe2(rep->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
      gpum_reporter_destroy(rep);
      return gpum_error(GPUM_ENOMEM, "cannot make the reporter's wake-up pipe");
    }
    if (pthread_create(&rep->thread, NULL, run, rep) != 0) {
      gpum_reporter_destroy(rep);
      return gpum_error(GPUM_ENOMEM, "cannot start the reporter's thread");
    }
    rep->started = true;
  }
  *out = rep;
  return 0;
}

static int add(gpum_reporter_t *rep, const char *source, gpum_figures_fn fn, void *user,
               source_kind_t kind) {
  if (!rep || !fn)
    return gpum_error(GPUM_EINVAL, "gpum_reporter_add: NULL argument");
  int rc = check_source(source);
  if (rc != 0)
    return rc;
  pthread_mutex_lock(&rep->mu);
  for (unsigned i = 0; i < rep->nsrc && rc == 0; i++)
    if (!strcmp(rep->src[i].name, source))
      rc = gpum_error(GPUM_EEXIST, "the reporter has a source '%s' already", source);
  if (rc == 0 && rep->nsrc >= SOURCES_MAX)
    rc = gpum_error(GPUM_ENOSPC, "a reporter takes at most %d sources", SOURCES_MAX);
  if (rc == 0) {
    source_t *s = &rep->src[rep->nsrc++];
    snprintf(s->name, sizeof s->name, "%s", source); /* checked: it fits */
    s->fn = fn;
    s->user = user;
    s->kind = kind;
    if (kind == SRC_BATCHER && rep->pressure) /* under pressure already */
      gpum_batcher_set_pressure(user, true);
    if (kind == SRC_BATCH && rep->pressure)
      gpum_batch_set_pressure(user, true);
  }
  pthread_mutex_unlock(&rep->mu);
  return rc;
}

int gpum_reporter_add(gpum_reporter_t *rep, const char *source, gpum_figures_fn fn, void *user) {
  return add(rep, source, fn, user, SRC_CUSTOM);
}

bool gpum_reporter_pressure(gpum_reporter_t *rep) {
  pthread_mutex_lock(&rep->mu);
  bool v = rep->pressure;
  pthread_mutex_unlock(&rep->mu);
  return v;
}

static size_t batcher_fn(void *user, gpum_figure_t *out, size_t cap) {
  return gpum_batcher_figures(user, out, cap);
}
static size_t pool_fn(void *user, gpum_figure_t *out, size_t cap) {
  return gpum_pool_figures(user, out, cap);
}
static size_t tiercache_fn(void *user, gpum_figure_t *out, size_t cap) {
  return gpum_tiercache_figures(user, out, cap);
}
static size_t batch_fn(void *user, gpum_figure_t *out, size_t cap) {
  return gpum_batch_figures(user, out, cap);
}

int gpum_reporter_add_batcher(gpum_reporter_t *rep, const char *source, gpum_batcher_t *b) {
  return b ? add(rep, source, batcher_fn, b, SRC_BATCHER)
           : gpum_error(GPUM_EINVAL, "gpum_reporter_add_batcher: NULL batcher");
}

int gpum_reporter_add_pool(gpum_reporter_t *rep, const char *source, gpum_pool_t *pool) {
  return pool ? add(rep, source, pool_fn, pool, SRC_POOL)
              : gpum_error(GPUM_EINVAL, "gpum_reporter_add_pool: NULL pool");
}

int gpum_reporter_add_tiercache(gpum_reporter_t *rep, const char *source, gpum_tiercache_t *c) {
  return c ? add(rep, source, tiercache_fn, c, SRC_TIERCACHE)
           : gpum_error(GPUM_EINVAL, "gpum_reporter_add_tiercache: NULL cache");
}

int gpum_reporter_add_batch(gpum_reporter_t *rep, const char *source, gpum_batch_runner_t *r) {
  return r ? add(rep, source, batch_fn, r, SRC_BATCH)
           : gpum_error(GPUM_EINVAL, "gpum_reporter_add_batch: NULL runner");
}

int gpum_reporter_remove(gpum_reporter_t *rep, const char *source) {
  if (!rep || !source)
    return gpum_error(GPUM_EINVAL, "gpum_reporter_remove: NULL argument");
  pthread_mutex_lock(&rep->send_mu); /* no flush runs the source's function after this */
  pthread_mutex_lock(&rep->mu);
  int rc = gpum_error(GPUM_ENOENT, "the reporter has no source '%.64s'", source);
  for (unsigned i = 0; i < rep->nsrc; i++)
    if (!strcmp(rep->src[i].name, source)) {
      memmove(&rep->src[i], &rep->src[i + 1], (rep->nsrc - i - 1) * sizeof *rep->src);
      rep->nsrc--;
      gpum_error_clear();
      rc = 0;
      break;
    }
  pthread_mutex_unlock(&rep->mu);
  pthread_mutex_unlock(&rep->send_mu);
  return rc;
}

void gpum_reporter_destroy(gpum_reporter_t *rep) {
  if (!rep)
    return;
  pthread_mutex_lock(&rep->mu);
  rep->stopping = true;
  pthread_mutex_unlock(&rep->mu);
  if (rep->started) {
    ssize_t w = write(rep->wake[1], "x", 1);
    (void)w; /* a full pipe wakes the thread as well */
    pthread_join(rep->thread, NULL);
  }
  if (rep->nsrc)
    (void)gpum_reporter_flush(rep);
  gpum_client_close(rep->client);
  for (int i = 0; i < 2; i++)
    if (rep->wake[i] >= 0)
      close(rep->wake[i]);
  pthread_mutex_destroy(&rep->send_mu);
  pthread_mutex_destroy(&rep->mu);
  free(rep);
}
