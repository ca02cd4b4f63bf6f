/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GET /metrics: gpumd's state in the Prometheus text exposition format 0.0.4 (docs/metrics.md
 * lists every family). Device metrics come from the monitor's newest sample and carry the
 * labels gpu, uuid and model; a field the device could not read (its validity bit is clear:
 * unsupported or failed) is left out, never written as a sentinel value. Scheduler, queue,
 * process, Xid and alert metrics come from the scheduler, the process lists and the counters
 * of struct gpumd_obs. Every family is written once, with HELP and TYPE, its samples together;
 * label values are escaped (backslash, double quote, newline).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <gpum/fence.h>
#include <gpum/gputype.h>
#include <gpum/report.h>
#include <gpum/size.h>
#include <gpum/version.h>

#include "obs_internal.h"
#include "devices.h"
#include "engine.h"
#include "net.h"
#include "obs.h"
#include "rest.h"
#include "sched.h"
#include "users.h"
#include "utf8_internal.h"

#define LABELS_LEN 1024

typedef struct {
  struct evbuffer *out;
  int rc;
} writer_t;

/* What the render needs of one device, read once. */
typedef struct {
  const gpumd_device_t *dev;
  char labels[LABELS_LEN]; /* gpu="0",uuid="...",model="..." */
  bool have_sample;        /* a sample that is still a measurement (gpumd_device_measured) */
  bool any_sample;         /* a sample at all, maybe a lost GPU's last one */
  gpum_device_sample_t s;
  bool have_health;
  gpum_device_health_t h;
  bool have_stats;
  gpumd_sched_device_stats_t st;
  bool have_procs;
  gpumd_procs_t procs;
  const gpumd_resv_t *owner[GPUMD_MAX_PROCS]; /* the reservation of procs.pid[k], or NULL */
} devview_t;

static void put(writer_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(writer_t *w, const char *fmt, ...) {
  if (w->rc != 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  if (evbuffer_add_vprintf(w->out, fmt, ap) < 0)
    w->rc = gpum_error(GPUM_ENOMEM, "out of memory rendering the metrics");
  va_end(ap);
}

static void family(writer_t *w, const char *name, const char *type, const char *help) {
  put(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Appends name="value" (with a leading comma when buf is not empty) to buf, escaped as the
 * text format wants; the format's label values are UTF-8, so each byte of value that is not
 * part of a character is written as '?' (one such byte would fail the whole scrape).
 * Truncation keeps buf a valid, shorter label set. */
static void label(char *buf, size_t cap, const char *name, const char *value) {
  size_t n = strlen(buf);
  char tmp[LABELS_LEN];
  size_t t = 0;
  size_t len = strlen(value);
  for (size_t i = 0; i < len && t + 5 < sizeof tmp;) {
    unsigned char ch = (unsigned char)value[i];
    size_t k = ch < 0x80 ? 1 : gpumd_utf8_seq((const unsigned char *)value + i, len - i);
    if (ch == '\\' || ch == '"' || ch == '\n') {
      tmp[t++] = '\\';
      tmp[t++] = ch == '\n' ? 'n' : (char)ch;
    } else if (k == 0) {
      tmp[t++] = '?';
      k = 1;
    } else {
      memcpy(tmp + t, value + i, k); /* a whole character, up to 4 bytes */
      t += k;
    }
    i += k;
  }
  tmp[t] = '\0';
  int k = snprintf(buf + n, cap - n, "%s%s=\"%s\"", n ? "," : "", name, tmp);
  if (k < 0 || (size_t)k >= cap - n)
    buf[n] = '\0';
}

static void label_u(char *buf, size_t cap, const char *name, unsigned long long v) {
  char num[24];
  snprintf(num, sizeof num, "%llu", v);
  label(buf, cap, name, num);
}

/* One sample: name{labels} value. Integers print exactly; others with 15 significant digits
 * (%g trims trailing zeros), which keeps 0.37 from printing as 0.36999999999999999. */
static void sample_u(writer_t *w, const char *name, const char *labels, unsigned long long v) {
  put(w, "%s{%s} %llu\n", name, labels, v);
}

static void sample_d(writer_t *w, const char *name, const char *labels, double v) {
  put(w, "%s{%s} %.15g\n", name, labels, v);
}

/* ---- users of processes ------------------------------------------------------------------ */

/* The user of a process's uid as the REST status shows it: gpumd's users cache (never a name
 * lookup here: NSS may block), the number until the name is known or when it has none, "" when
 * the pid is not visible here (another PID namespace). */
static const char *proc_user(gpumd_t *d, uint32_t uid, char *buf, size_t len) {
  if (uid == GPUMD_PROC_NO_UID)
    return "";
  char name[GPUMD_USER_BUFSZ];
  if (d->users && gpumd_users_name(d->users, uid, name))
    snprintf(buf, len, "%s", name);
  else
    snprintf(buf, len, "%lu", (unsigned long)uid);
  return buf;
}

/* ---- families ------------------------------------------------------------------------------ */

static void daemon_metrics(gpumd_t *d, writer_t *w) {
  family(w, "gpumd_up", "gauge", "1 while gpumd serves.");
  put(w, "gpumd_up 1\n");
  family(w, "gpumd_build_info", "gauge", "gpumd's version, as a label; always 1.");
  put(w, "gpumd_build_info{version=\"%s\"} 1\n", gpum_version());
  family(w, "gpumd_start_time_seconds", "gauge", "When gpumd started, seconds since the epoch.");
  put(w, "gpumd_start_time_seconds %.3f\n", (double)d->start_ns / 1e9);
  family(w, "gpumd_clients", "gauge", "Clients connected to the Unix socket.");
  put(w, "gpumd_clients %zu\n", d->conn_count);
  family(w, "gpumd_accept_failures_total", "counter",
         "Connections a listener could not accept (out of descriptors or memory).");
  put(w, "gpumd_accept_failures_total{listener=\"socket\"} %llu\n",
      (unsigned long long)d->accept_guard.failures);
  put(w, "gpumd_accept_failures_total{listener=\"http\"} %llu\n",
      (unsigned long long)gpumd_http_accept_failures(d));
  family(w, "gpumd_http_connections_evicted_total", "counter",
         "HTTP connections waiting for a request closed to make room for a new one "
         "(http.max_connections, http.max_connections_per_peer).");
  put(w, "gpumd_http_connections_evicted_total %llu\n", (unsigned long long)gpumd_http_evicted(d));
  uint64_t fa = 0, ff = 0;
  gpumd_http_forked_reads(d, &fa, &ff);
  family(w, "gpumd_http_forked_reads_total", "counter",
         "Large HTTP reads (the reservation list of a busy node, the history) answered by a "
         "child process off the event loop, by outcome (failed: answered 500).");
  put(w, "gpumd_http_forked_reads_total{outcome=\"answered\"} %llu\n", (unsigned long long)fa);
  put(w, "gpumd_http_forked_reads_total{outcome=\"failed\"} %llu\n", (unsigned long long)ff);
  struct gpumd_obs *o = d->obs;
  family(w, "gpumd_event_streams", "gauge", "Open Server-Sent Events streams (/api/v1/events).");
  put(w, "gpumd_event_streams %zu\n", o ? o->stream_count : 0);
  family(w, "gpumd_event_streams_dropped_total", "counter",
         "Event streams dropped because their reader did not keep up.");
  put(w, "gpumd_event_streams_dropped_total %llu\n",
      (unsigned long long)(o ? o->streams_dropped : 0));
}

/* The families read straight from a sample: value * mul / div, printed as an integer when
 * both are 1. */
typedef struct {
  gpum_metric_t metric;
  const char *name, *type, *help;
  double mul, div;
} sample_family_t;

static const sample_family_t memory_families[] = {
    {GPUM_METRIC_MEMORY_TOTAL, "gpum_device_memory_total_bytes", "gauge",
     "Device memory in total, bytes.", 1, 1},
    {GPUM_METRIC_MEMORY_USED, "gpum_device_memory_used_bytes", "gauge",
     "Device memory in use by all processes, bytes.", 1, 1},
    {GPUM_METRIC_MEMORY_FREE, "gpum_device_memory_free_bytes", "gauge",
     "Device memory free, bytes.", 1, 1},
    {GPUM_METRIC_MEMORY_RESERVED, "gpum_device_memory_driver_reserved_bytes", "gauge",
     "Device memory the driver keeps for itself, bytes.", 1, 1},
    {GPUM_METRIC_UTIL_GPU, "gpum_device_utilization_ratio", "gauge",
     "Share of the last sample period a kernel ran on the GPU, 0 to 1.", 1, 100},
    {GPUM_METRIC_UTIL_MEMORY, "gpum_device_memory_utilization_ratio", "gauge",
     "Share of the last sample period device memory was read or written, 0 to 1.", 1, 100},
};

static const sample_family_t power_families[] = {
    {GPUM_METRIC_POWER, "gpum_device_power_watts", "gauge", "Power drawn by the device, watts.", 1,
     1000},
    {GPUM_METRIC_CLOCK_SM, "gpum_device_sm_clock_hertz", "gauge",
     "Streaming multiprocessor clock, hertz.", 1e6, 1},
    {GPUM_METRIC_CLOCK_MEM, "gpum_device_memory_clock_hertz", "gauge", "Memory clock, hertz.", 1e6,
     1},
};

/* A family of one sample metric: devices whose newest sample has it valid. */
static void sample_family(writer_t *w, devview_t *v, unsigned n, const sample_family_t *f) {
  gpum_metric_t m = f->metric;
  const char *name = f->name;
  double mul = f->mul, div = f->div;
  bool any = false;
  for (unsigned i = 0; i < n && !any; i++)
    any = v[i].have_sample && gpum_sample_valid(&v[i].s, m);
  if (!any)
    return;
  family(w, name, f->type, f->help);
  for (unsigned i = 0; i < n; i++) {
    if (!v[i].have_sample || !gpum_sample_valid(&v[i].s, m))
      continue;
    double x = gpumd_obs_sample_value(&v[i].s, m);
    if (mul == 1 && div == 1)
      sample_u(w, name, v[i].labels, (unsigned long long)x);
    else
      sample_d(w, name, v[i].labels, x * mul / div); /* 37 / 100 prints as 0.37 */
  }
}

static void sample_families(writer_t *w, devview_t *v, unsigned n, const sample_family_t *f,
                            size_t count) {
  for (size_t k = 0; k < count; k++)
    sample_family(w, v, n, &f[k]);
}

static void device_metrics(writer_t *w, devview_t *v, unsigned n) {
  sample_families(w, v, n, memory_families, sizeof memory_families / sizeof memory_families[0]);
  /* Temperature may be negative: print it signed. */
  bool any = false;
  for (unsigned i = 0; i < n && !any; i++)
    any = v[i].have_sample && gpum_sample_valid(&v[i].s, GPUM_METRIC_TEMPERATURE);
  if (any) {
    family(w, "gpum_device_temperature_celsius", "gauge", "GPU core temperature, degrees Celsius.");
    for (unsigned i = 0; i < n; i++)
      if (v[i].have_sample && gpum_sample_valid(&v[i].s, GPUM_METRIC_TEMPERATURE))
        put(w, "gpum_device_temperature_celsius{%s} %d\n", v[i].labels, v[i].s.temperature_c);
  }
  sample_families(w, v, n, power_families, sizeof power_families / sizeof power_families[0]);
  any = false;
  for (unsigned i = 0; i < n && !any; i++)
    any = v[i].have_sample && (gpum_sample_valid(&v[i].s, GPUM_METRIC_ECC_CORRECTED) ||
                               gpum_sample_valid(&v[i].s, GPUM_METRIC_ECC_UNCORRECTED));
  if (any) {
    family(w, "gpum_device_ecc_errors_total", "counter",
           "ECC errors since the driver loaded (volatile counters), by type.");
    for (unsigned i = 0; i < n; i++) {
      if (!v[i].have_sample)
        continue;
      if (gpum_sample_valid(&v[i].s, GPUM_METRIC_ECC_CORRECTED))
        put(w, "gpum_device_ecc_errors_total{%s,type=\"corrected\"} %llu\n", v[i].labels,
            (unsigned long long)v[i].s.ecc_corrected);
      if (gpum_sample_valid(&v[i].s, GPUM_METRIC_ECC_UNCORRECTED))
        put(w, "gpum_device_ecc_errors_total{%s,type=\"uncorrected\"} %llu\n", v[i].labels,
            (unsigned long long)v[i].s.ecc_uncorrected);
    }
  }
  /* Whether the series above are measured now: a lost or hung GPU's are left out, not frozen. */
  family(w, "gpum_device_up", "gauge",
         "1 when the device's metrics are measured now; 0 when it is lost, hung or has not been "
         "sampled for three monitor intervals (its metric series are then left out).");
  for (unsigned i = 0; i < n; i++)
    put(w, "gpum_device_up{%s} %d\n", v[i].labels, v[i].have_sample ? 1 : 0);
  any = false;
  for (unsigned i = 0; i < n && !any; i++)
    any = v[i].any_sample;
  if (any) {
    family(w, "gpum_device_last_sample_timestamp_seconds", "gauge",
           "When the newest sample of the device was taken, seconds since the epoch.");
    for (unsigned i = 0; i < n; i++)
      if (v[i].any_sample)
        put(w, "gpum_device_last_sample_timestamp_seconds{%s} %.3f\n", v[i].labels,
            (double)v[i].s.timestamp_ns / 1e9);
  }
}

static void device_static_metrics(gpumd_t *d, writer_t *w, devview_t *v, unsigned n) {
  family(w, "gpum_device_info", "gauge",
         "Static facts of each device as labels (pci_bus_id, compute_capability, vendor_index: "
         "its number among its vendor's devices, gpu_type, resource: its Kubernetes-style "
         "name); always 1.");
  for (unsigned i = 0; i < n; i++) {
    const gpum_device_info_t *in = &v[i].dev->info;
    char l[LABELS_LEN];
    snprintf(l, sizeof l, "%s", v[i].labels);
    label(l, sizeof l, "pci_bus_id", in->valid & GPUM_INFO_PCI ? in->pci_bus_id : "");
    char cc[16] = "";
    if (in->valid & GPUM_INFO_COMPUTE_CAP)
      snprintf(cc, sizeof cc, "%d.%d", in->cc_major, in->cc_minor);
    label(l, sizeof l, "compute_capability", cc);
    gpum_gpu_type_t t;
    bool typed = gpum_gpu_type_parse(in->name, &t) == 0;
    label_u(l, sizeof l, "vendor_index", in->vendor_index);
    label(l, sizeof l, "gpu_type", typed ? t.family : "");
    label(l, sizeof l, "resource", gpumd_engine_resource_of(d, in->name));
    put(w, "gpum_device_info{%s} 1\n", l);
  }
  bool any = false;
  for (unsigned i = 0; i < n && !any; i++)
    any = v[i].dev->info.valid & GPUM_INFO_POWER_LIMIT;
  if (any) {
    family(w, "gpum_device_power_limit_watts", "gauge", "Power limit of the device, watts.");
    for (unsigned i = 0; i < n; i++)
      if (v[i].dev->info.valid & GPUM_INFO_POWER_LIMIT)
        sample_d(w, "gpum_device_power_limit_watts", v[i].labels,
                 v[i].dev->info.power_limit_mw / 1000.0);
  }
  family(w, "gpum_device_health_state", "gauge",
         "1 for the device's current health state (AVAILABLE, BUSY, ERROR, DISABLED), 0 for the "
         "others.");
  for (unsigned i = 0; i < n; i++) {
    if (!v[i].have_health)
      continue;
    for (int st = 0; st < GPUM_HEALTH_COUNT; st++)
      put(w, "gpum_device_health_state{%s,state=\"%s\"} %d\n", v[i].labels,
          gpum_health_state_name((gpum_health_t)st), v[i].h.state == (gpum_health_t)st);
  }
}

static void sched_device_metrics(writer_t *w, devview_t *v, unsigned n) {
  static const struct {
    const char *name, *help;
  } fams[] = {
      {"gpum_device_capacity_bytes",
       "Memory gpum may commit on the device (min(total x memory_fraction, total - driver "
       "reserved) - safety_margin), bytes."},
      {"gpum_device_reserved_bytes", "Memory held by granted reservations on the device, bytes."},
      {"gpum_device_unmanaged_bytes",
       "Memory used by processes that hold no reservation on the device, bytes."},
      {"gpum_device_reservations", "Granted reservations on the device."},
      {"gpum_device_overcommit_bytes",
       "Committed memory (reservations + unmanaged) above the device's capacity, bytes: taken "
       "after the grants by processes outside reservations; 0 when not overcommitted."},
      {"gpum_device_overcommitted",
       "1 while the device's committed memory is above its capacity (OVERCOMMITTED), else 0."},
  };
  for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
    family(w, fams[f].name, "gauge", fams[f].help);
    for (unsigned i = 0; i < n; i++) {
      if (!v[i].have_stats)
        continue;
      const gpumd_sched_device_stats_t *st = &v[i].st;
      unsigned long long x = f == 0   ? st->capacity
                             : f == 1 ? st->reserved
                             : f == 2 ? st->unmanaged
                             : f == 3 ? st->jobs
                             : f == 4 ? st->overcommit
                                      : st->overcommit > 0;
      sample_u(w, fams[f].name, v[i].labels, x);
    }
  }
}

static void process_metrics(gpumd_t *d, writer_t *w, devview_t *v, unsigned n) {
  family(w, "gpum_process_memory_used_bytes", "gauge",
         "Device memory used by a process, bytes; reservation is the granted reservation the "
         "process belongs to (\"\" for none).");
  for (unsigned i = 0; i < n; i++) {
    if (!v[i].have_procs)
      continue;
    const gpumd_procs_t *p = &v[i].procs;
    for (size_t k = 0; k < p->count; k++) {
      /* A pid listed twice (compute and graphics contexts) is one series: the sum. */
      bool seen = false;
      uint64_t bytes = 0;
      for (size_t j = 0; j < p->count && !seen; j++) {
        seen = j < k && p->pid[j] == p->pid[k];
        bytes += p->pid[j] == p->pid[k] ? p->memory[j] : 0;
      }
      if (seen)
        continue;
      char l[LABELS_LEN], user[64], id[GPUMD_RESV_ID_BUFSZ] = "";
      snprintf(l, sizeof l, "%s", v[i].labels);
      label_u(l, sizeof l, "pid", p->pid[k]);
      label(l, sizeof l, "user", proc_user(d, p->uid[k], user, sizeof user));
      const gpumd_resv_t *r = v[i].owner[k];
      if (r)
        gpumd_resv_id_format(r->id, id, sizeof id);
      label(l, sizeof l, "reservation", id);
      sample_u(w, "gpum_process_memory_used_bytes", l, (unsigned long long)bytes);
    }
  }
}

static uint64_t resv_used(const gpumd_resv_t *r, const devview_t *v) {
  if (!v->have_procs)
    return 0;
  uint64_t sum = 0;
  for (size_t k = 0; k < v->procs.count; k++)
    if (v->owner[k] == r)
      sum += v->procs.memory[k];
  return sum;
}

static void reservation_metrics(gpumd_t *d, writer_t *w, devview_t *v, unsigned n) {
  size_t count = gpumd_sched_count(d->sched);
  static const char *const names[] = {"gpum_reservation_reserved_bytes",
                                      "gpum_reservation_used_bytes",
                                      "gpum_reservation_fenced_bytes"};
  static const char *const helps[] = {
      "Device memory a granted reservation holds, per device, bytes.",
      "Device memory used by the processes of a granted reservation, per device, bytes.",
      ("Device memory the processes of a reservation run under the enforcement shim hold, as "
       "the shim counts it, per device, bytes (fenced reservations only).")};
  for (int pass = 0; pass < 3; pass++) {
    const char *name = names[pass];
    family(w, name, "gauge", helps[pass]);
    for (size_t i = 0; i < count; i++) {
      const gpumd_resv_t *r = gpumd_sched_at(d->sched, i);
      if (r->state != GPUMD_RESV_GRANTED)
        continue;
      gpum_fence *f = pass == 2 ? gpumd_fences_open(d, r) : NULL;
      if (pass == 2 && !f)
        continue; /* not run under the shim */
      char id[GPUMD_RESV_ID_BUFSZ];
      gpumd_resv_id_format(r->id, id, sizeof id);
      unsigned ordinal = 0; /* the job's CUDA numbers its GPUs in gpumd's index order */
      for (unsigned k = 0; k < n; k++) {
        if (!(r->device_mask >> v[k].dev->index & 1u))
          continue;
        char l[LABELS_LEN] = "";
        label(l, sizeof l, "reservation", id);
        label(l, sizeof l, "label", r->label);
        label(l, sizeof l, "slurm_job_id", r->slurm_job); /* "" when not a Slurm step's */
        label(l, sizeof l, "slurm_step_id", r->slurm_step);
        size_t len = strlen(l);
        snprintf(l + len, sizeof l - len, ",%s", v[k].labels);
        uint64_t value = r->bytes_per_gpu;
        if (pass == 1) {
          value = resv_used(r, &v[k]);
        } else if (pass == 2) {
          gpum_fence_usage_t u = {0};
          (void)gpum_fence_usage(f, ordinal++, &u);
          value = u.used;
        }
        sample_u(w, name, l, (unsigned long long)value);
      }
      gpum_fence_close(f);
    }
  }
}

/* The figures processes report on their reservations (reports.c), one family per unit, the
 * unit read from the figure's name (gpum_figure_unit) and put in the family's name, as
 * Prometheus names carry theirs: "queue_p99_us" 11400 is
 * gpum_workload_seconds{figure="queue_p99"} 0.0114. Counts, which have no unit, go to
 * gpum_workload_value ("_count" is the suffix Prometheus keeps for histograms). */
static const struct {
  gpum_unit_t unit;
  const char *name, *help;
} workload_families[] = {
    {GPUM_UNIT_BYTES, "gpum_workload_bytes",
     "A figure in bytes a job's process reports about its own work, by reservation, pid, source "
     "and figure (its name without the unit: docs/report.md)."},
    {GPUM_UNIT_SECONDS, "gpum_workload_seconds",
     "A time a job's process reports about its own work (a latency percentile), seconds."},
    {GPUM_UNIT_RATIO, "gpum_workload_ratio",
     "A fraction a job's process reports about its own work, 0 to 1."},
    {GPUM_UNIT_PER_SECOND, "gpum_workload_per_second",
     "A rate a job's process reports about its own work, per second."},
    {GPUM_UNIT_COUNT, "gpum_workload_value",
     "A figure without a unit (a count, a batch size) a job's process reports about its own "
     "work."},
};

/* Whether a figure before key in figures has the same unit and stem (e.g. "wait_ms" and
 * "wait_us"): only the first of them is written, so no series appears twice. */
static bool workload_shadowed(json_t *figures, const char *key, gpum_unit_t unit, size_t stem) {
  const char *k;
  json_t *v;
  json_object_foreach(figures, k, v) {
    if (k == key || strcmp(k, key) == 0)
      return false;
    if (gpum_figure_unit(k, NULL) == unit && gpum_figure_stem_len(k) == stem &&
        strncmp(k, key, stem) == 0)
      return true;
  }
  return false;
}

static void workload_family(gpumd_t *d, writer_t *w, size_t f) {
  gpum_unit_t unit = workload_families[f].unit;
  const char *name = workload_families[f].name;
  bool any = false;
  size_t n = gpumd_reports_count(d);
  for (size_t i = 0; i < n; i++) {
    uint64_t rid;
    int32_t pid;
    const char *source, *k;
    json_t *figures, *v;
    gpumd_report_at(d, i, &rid, &pid, &source, &figures);
    char id[GPUMD_RESV_ID_BUFSZ], base[LABELS_LEN] = "";
    label(base, sizeof base, "reservation", gpumd_resv_id_format(rid, id, sizeof id));
    label_u(base, sizeof base, "pid", (unsigned long long)pid);
    label(base, sizeof base, "source", source);
    json_object_foreach(figures, k, v) {
      double scale;
      if (gpum_figure_unit(k, &scale) != unit)
        continue;
      size_t stem = gpum_figure_stem_len(k);
      if (workload_shadowed(figures, k, unit, stem))
        continue;
      if (!any)
        family(w, name, "gauge", workload_families[f].help);
      any = true;
      char l[LABELS_LEN], fig[GPUM_REPORT_NAME_MAX + 1];
      snprintf(fig, sizeof fig, "%.*s", (int)stem, k);
      memcpy(l, base, sizeof l);
      label(l, sizeof l, "figure", fig);
      sample_d(w, name, l, json_number_value(v) * scale);
    }
  }
}

static void workload_metrics(gpumd_t *d, writer_t *w) {
  for (size_t f = 0; f < sizeof workload_families / sizeof workload_families[0]; f++)
    workload_family(d, w, f);
}

static void queue_metrics(gpumd_t *d, writer_t *w) {
  struct gpumd_obs *o = d->obs;
  size_t queued = 0, granted = 0, suspended = 0, count = gpumd_sched_count(d->sched);
  unsigned long long host = 0;
  for (size_t i = 0; i < count; i++) {
    const gpumd_resv_t *r = gpumd_sched_at(d->sched, i);
    queued += r->state == GPUMD_RESV_QUEUED;
    granted += r->state == GPUMD_RESV_GRANTED;
    if (r->state == GPUMD_RESV_SUSPENDED) {
      suspended++;
      host += r->host_bytes;
    }
  }
  family(w, "gpum_reservations", "gauge", "Live reservations by state.");
  put(w,
      "gpum_reservations{state=\"queued\"} %zu\ngpum_reservations{state=\"granted\"} %zu\n"
      "gpum_reservations{state=\"suspended\"} %zu\n",
      queued, granted, suspended);
  family(w, "gpum_suspended_host_bytes", "gauge",
         "Host memory that the suspended jobs' GPU memory takes, bytes (docs/suspend.md).");
  put(w, "gpum_suspended_host_bytes %llu\n", host);
  family(w, "gpum_queue_length", "gauge", "Reservations waiting in the queue.");
  put(w, "gpum_queue_length %zu\n", gpumd_sched_queue_length(d->sched));
  family(w, "gpum_reservation_transitions_total", "counter",
         "Reservation transitions since gpumd started, by the state entered.");
  static const char *const names[] = {"queued",    "granted", "released", "expired",
                                      "cancelled", "failed",  "suspended"};
  _Static_assert(sizeof names / sizeof names[0] == GPUMD_RESV_SUSPENDED + 1, "a name per state");
  for (int i = 0; i <= GPUMD_RESV_SUSPENDED; i++)
    put(w, "gpum_reservation_transitions_total{state=\"%s\"} %llu\n", names[i],
        (unsigned long long)(o ? o->transitions[i] : 0));
  family(w, "gpum_queue_wait_seconds", "histogram",
         "Time from submission to grant of the reservations granted since gpumd started, "
         "seconds.");
  for (int i = 0; i < GPUMD_OBS_WAIT_BUCKETS; i++)
    put(w, "gpum_queue_wait_seconds_bucket{le=\"%g\"} %llu\n", gpumd_wait_bounds[i],
        (unsigned long long)(o ? o->wait_buckets[i] : 0));
  unsigned long long cnt = o ? o->wait_count : 0;
  put(w, "gpum_queue_wait_seconds_bucket{le=\"+Inf\"} %llu\n", cnt);
  put(w, "gpum_queue_wait_seconds_sum %.9g\ngpum_queue_wait_seconds_count %llu\n",
      o ? o->wait_sum : 0.0, cnt);
}

static void xid_alert_metrics(gpumd_t *d, writer_t *w, devview_t *v, unsigned n) {
  struct gpumd_obs *o = d->obs;
  family(w, "gpum_xid_errors_total", "counter",
         "Xid errors the driver reported, by device and Xid.");
  for (size_t i = 0; o && i < o->xid_count; i++) {
    const devview_t *dv = NULL;
    for (unsigned k = 0; k < n && !dv; k++)
      if (v[k].dev->index == o->xids[i].device)
        dv = &v[k];
    if (!dv)
      continue;
    char l[LABELS_LEN];
    snprintf(l, sizeof l, "%s", dv->labels);
    label_u(l, sizeof l, "xid", o->xids[i].xid);
    sample_u(w, "gpum_xid_errors_total", l, o->xids[i].count);
  }
  family(w, "gpum_alerts_total", "counter", "Alerts fired since gpumd started, by level.");
  for (int lv = 0; lv < 4; lv++)
    put(w, "gpum_alerts_total{level=\"%s\"} %llu\n", gpum_alert_level_name((gpum_alert_level_t)lv),
        (unsigned long long)(o ? o->alerts_fired[lv] : 0));
  size_t active[4] = {0}, cnt = 0;
  if (o && o->alerts) {
    /* At most one active alert per (rule, device) plus the Xid alerts of the window. */
    gpum_alert_engine_active(o->alerts, NULL, 0, &cnt);
    size_t cap = cnt;
    gpum_alert_t *buf = cap ? calloc(cap, sizeof *buf) : NULL;
    if (cap && !buf)
      w->rc = gpum_error(GPUM_ENOMEM, "out of memory rendering the metrics");
    if (buf)
      gpum_alert_engine_active(o->alerts, buf, cap, &cnt); /* ENOSPC: the first cap */
    for (size_t i = 0; buf && i < cnt && i < cap; i++)
      if ((unsigned)buf[i].level < 4)
        active[buf[i].level]++;
    free(buf);
  }
  family(w, "gpum_alerts_active", "gauge", "Alerts active now, by level.");
  for (int lv = 0; lv < 4; lv++)
    put(w, "gpum_alerts_active{level=\"%s\"} %zu\n", gpum_alert_level_name((gpum_alert_level_t)lv),
        active[lv]);
}

/* ---- dcgm-exporter's names (metrics.dcgm_names) ------------------------------------------- */

/* dcgm-exporter's default counters (its etc/default-counters.csv) that gpumd samples, in
 * DCGM's units: memory in MiB, utilisation in percent, power in watts, clocks in MHz. Its
 * others (memory temperature, energy, PCIe, NVLink, encoder, remapped rows, the profiling
 * DCGM_FI_PROF_* fields) gpumd does not read, and leaves out. */
static const struct {
  gpum_metric_t metric;
  const char *name, *help;
  double div;
} dcgm_families[] = {
    {GPUM_METRIC_CLOCK_SM, "DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", 1},
    {GPUM_METRIC_CLOCK_MEM, "DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", 1},
    {GPUM_METRIC_TEMPERATURE, "DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", 1},
    {GPUM_METRIC_POWER, "DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", 1000},
    {GPUM_METRIC_UTIL_GPU, "DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", 1},
    {GPUM_METRIC_UTIL_MEMORY, "DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", 1},
    {GPUM_METRIC_MEMORY_FREE, "DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", 1 << 20},
    {GPUM_METRIC_MEMORY_USED, "DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", 1 << 20},
};

/* dcgm-exporter's labels of an NVIDIA device: gpu (NVML's index; a MIG instance's parent's,
 * with GPU_I_ID its GPU instance), UUID, pci_bus_id, device ("nvidia0"), modelName, Hostname,
 * DCGM_FI_DRIVER_VERSION. False for a device of another vendor (DCGM reads NVIDIA's only). */
static bool dcgm_labels(const devview_t *v, const char *host, char *l, size_t cap) {
  const gpum_device_info_t *in = &v->dev->info;
  if (!in->vendor || strcmp(in->vendor, "nvidia") != 0)
    return false;
  bool mig = in->valid & GPUM_INFO_MIG && in->parent_index >= 0;
  unsigned gpu = mig ? (unsigned)in->parent_index : in->vendor_index;
  char dev[32];
  snprintf(dev, sizeof dev, "nvidia%u", gpu);
  l[0] = '\0';
  label_u(l, cap, "gpu", gpu);
  label(l, cap, "UUID", mig ? in->parent_uuid : in->uuid);
  label(l, cap, "pci_bus_id", in->valid & GPUM_INFO_PCI ? in->pci_bus_id : "");
  label(l, cap, "device", dev);
  label(l, cap, "modelName", in->name);
  if (mig)
    label_u(l, cap, "GPU_I_ID", in->mig_gi);
  label(l, cap, "Hostname", host);
  label(l, cap, "DCGM_FI_DRIVER_VERSION", v->have_procs ? v->procs.driver_version : "");
  return true;
}

static void dcgm_metrics(gpumd_t *d, writer_t *w, devview_t *v, unsigned n) {
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0)
    host[0] = '\0';
  static char labels[GPUMD_MAX_DEVICES][LABELS_LEN]; /* loop thread only */
  bool nv[GPUMD_MAX_DEVICES];
  for (unsigned i = 0; i < n; i++)
    nv[i] = dcgm_labels(&v[i], host, labels[i], LABELS_LEN);
  for (size_t f = 0; f < sizeof dcgm_families / sizeof dcgm_families[0]; f++) {
    gpum_metric_t m = dcgm_families[f].metric;
    bool any = false;
    for (unsigned i = 0; i < n; i++) {
      if (!nv[i] || !v[i].have_sample || !gpum_sample_valid(&v[i].s, m))
        continue;
      if (!any)
        family(w, dcgm_families[f].name, "gauge", dcgm_families[f].help);
      any = true;
      double x = gpumd_obs_sample_value(&v[i].s, m);
      if (dcgm_families[f].div == 1 << 20)
        sample_u(w, dcgm_families[f].name, labels[i], (unsigned long long)x >> 20);
      else
        sample_d(w, dcgm_families[f].name, labels[i], x / dcgm_families[f].div);
    }
  }
  /* The number of the device's newest Xid, 0 before any (a gauge, as DCGM has it). */
  struct gpumd_obs *o = d->obs;
  bool any = false;
  for (unsigned i = 0; i < n; i++) {
    if (!nv[i])
      continue;
    if (!any)
      family(w, "DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.");
    any = true;
    const gpumd_xid_count_t *last = NULL;
    for (size_t k = 0; o && k < o->xid_count; k++)
      if (o->xids[k].device == v[i].dev->index && (!last || o->xids[k].seq > last->seq))
        last = &o->xids[k];
    sample_u(w, "DCGM_FI_DEV_XID_ERRORS", labels[i], last ? (unsigned long long)last->xid : 0ull);
  }
}

static int render(gpumd_t *d, struct evbuffer *out) {
  static devview_t v[GPUMD_MAX_DEVICES]; /* loop thread only; too big for the stack */
  writer_t w = {.out = out, .rc = 0};
  unsigned n = d->device_count;
  gpumd_engine_pids_begin(d); /* each process's reservation, from one index */
  for (unsigned i = 0; i < n; i++) {
    const gpumd_device_t *dev = &d->devices[i];
    devview_t *x = &v[i];
    x->dev = dev;
    x->labels[0] = '\0';
    label_u(x->labels, sizeof x->labels, "gpu", dev->index);
    label(x->labels, sizeof x->labels, "uuid", dev->info.uuid);
    label(x->labels, sizeof x->labels, "model", dev->info.name);
    label(x->labels, sizeof x->labels, "vendor", gpumd_engine_vendor_of(dev));
    x->any_sample = d->mon && gpum_monitor_latest(d->mon, dev->index, &x->s) == 0;
    x->have_sample = gpumd_device_measured(d, dev->index, &x->s);
    x->have_health = d->mon && gpum_monitor_health(d->mon, dev->index, &x->h) == 0;
    x->have_stats = d->sched && gpumd_sched_device_stats(d->sched, dev->index, &x->st) == 0;
    x->have_procs = gpumd_procs_get(d, dev->index, &x->procs) == 0;
    for (size_t k = 0; x->have_procs && k < x->procs.count; k++)
      x->owner[k] =
          d->sched ? gpumd_engine_resv_of_pid(d, dev->index, (int32_t)x->procs.pid[k]) : NULL;
  }
  gpumd_engine_pids_end(d);
  daemon_metrics(d, &w);
  device_static_metrics(d, &w, v, n);
  device_metrics(&w, v, n);
  xid_alert_metrics(d, &w, v, n);
  if (d->metrics_dcgm)
    dcgm_metrics(d, &w, v, n);
  if (d->sched) {
    sched_device_metrics(&w, v, n);
    process_metrics(d, &w, v, n);
    reservation_metrics(d, &w, v, n);
    workload_metrics(d, &w);
    queue_metrics(d, &w);
  }
  return w.rc;
}

int gpumd_metrics_render(gpumd_t *d, struct evbuffer *out) {
  return gpumd_render_cached(d, d->obs ? &d->obs->metrics_cache : NULL, render,
                             d->metrics_max_age_ns, out);
}
