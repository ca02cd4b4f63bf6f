/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host backend: the CPU fallback, so that everything above the device layer works on a
 * machine without GPUs. It presents one device, index 0, named "cpu", vendor "host",
 * is_host = true, uuid "host-<machine-id>" (or "host-<hostname>" when /etc/machine-id is
 * missing):
 *   - memory: host RAM from /proc/meminfo, used = MemTotal - MemAvailable, free = MemAvailable;
 *     reserved is invalid;
 *   - util_gpu: CPU load in percent from /proc/stat deltas since the previous sample (the
 *     first sample: since the session opened). When less than 50 ms passed, a delta of jiffies
 *     (10 ms each) means nothing, so the 1-minute load average divided by the CPU count (capped
 *     at 100) stands in for it;
 *   - util_memory, temperature, power, clocks and ECC are invalid (never 0), and so is every
 *     field of the memory health (retired pages, remapped rows);
 *   - processes: none (host processes do not "use" the device; a list of every process would
 *     not help anyone), events: GPUM_ENOTSUP.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gpum/error.h>

#include "os_internal.h"
#include "device/device_internal.h"

#define MIN_DELTA_NS (50ull * 1000000ull)

typedef struct {
  gpum__cpu_times_t prev;
  bool prev_valid;
  uint64_t prev_ns; /* CLOCK_MONOTONIC */
  unsigned ncpu;
  char uuid[GPUM_UUID_LEN];
} host_t;

int gpum__parse_proc_stat(const char *text, gpum__cpu_times_t *out) {
  const char *p = text;
  while (p && *p) {
    if (!strncmp(p, "cpu ", 4)) {
      p += 4;
      uint64_t v[8] = {0};
      int got = 0;
      for (int i = 0; i < 8; i++) {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(p, &end, 10);
        if (end == p || errno)
          break;
        v[i] = x;
        got++;
        p = end;
        if (*p == '\n' || *p == '\0')
          break;
      }
      if (got < 4)
        return gpum_error(GPUM_EPARSE, "short cpu line in /proc/stat (%d fields)", got);
      /* user nice system idle iowait irq softirq steal; guest time is inside user already. */
      uint64_t total = 0;
      for (int i = 0; i < 8; i++)
        total += v[i];
      out->total = total;
      out->busy = total - v[3] - v[4];
      return 0;
    }
    p = strchr(p, '\n');
    if (p)
      p++;
  }
  return gpum_error(GPUM_EPARSE, "no aggregate cpu line in /proc/stat");
}

int gpum__cpu_util_percent(const gpum__cpu_times_t *a, const gpum__cpu_times_t *b) {
  if (b->total <= a->total || b->busy < a->busy)
    return -1;
  uint64_t dt = b->total - a->total, db = b->busy - a->busy;
  if (db > dt)
    db = dt;
  return (int)((db * 100 + dt / 2) / dt);
}

static int meminfo_field(const char *text, const char *key, uint64_t *bytes) {
  size_t klen = strlen(key);
  const char *p = text;
  while (p && *p) {
    if (!strncmp(p, key, klen) && p[klen] == ':') {
      char *end;
      errno = 0;
      unsigned long long kib = strtoull(p + klen + 1, &end, 10);
      if (end == p + klen + 1 || errno || kib > UINT64_MAX / 1024)
        return gpum_error(GPUM_EPARSE, "bad %s line in /proc/meminfo", key);
      *bytes = (uint64_t)kib * 1024;
      return 0;
    }
    p = strchr(p, '\n');
    if (p)
      p++;
  }
  return gpum_error(GPUM_EPARSE, "no %s line in /proc/meminfo", key);
}

int gpum__parse_meminfo(const char *text, uint64_t *total, uint64_t *available) {
  int rc = meminfo_field(text, "MemTotal", total);
  if (rc == 0)
    rc = meminfo_field(text, "MemAvailable", available);
  if (rc == 0 && *available > *total)
    *available = *total;
  return rc;
}

int gpum__parse_loadavg_percent(const char *text, unsigned ncpu, unsigned *percent) {
  char *end;
  errno = 0;
  double load = strtod(text, &end);
  if (end == text || errno || load < 0 || load != load)
    return gpum_error(GPUM_EPARSE, "bad /proc/loadavg '%.20s'", text);
  if (ncpu == 0)
    ncpu = 1;
  double pct = load * 100.0 / ncpu;
  *percent = pct >= 100.0 ? 100u : (unsigned)(pct + 0.5);
  return 0;
}

static int read_text(const char *path, char *buf, size_t len) {
  long got = gpum__os_read_file(path, buf, len);
  return got < 0 ? gpum_error(GPUM_EIO, "cannot read %s: %s", path, strerror((int)-got)) : 0;
}

static int read_cpu_times(gpum__cpu_times_t *t) {
  char buf[4096]; /* the aggregate line is the first one */
  int rc = read_text("/proc/stat", buf, sizeof buf);
  return rc ? rc : gpum__parse_proc_stat(buf, t);
}

static void cpu_model(char *out, size_t len) {
  char buf[8192];
  out[0] = '\0';
  if (read_text("/proc/cpuinfo", buf, sizeof buf) != 0) {
    gpum_error_clear();
    return;
  }
  const char *p = strstr(buf, "model name");
  if (!p || !(p = strchr(p, ':')))
    return;
  p++;
  while (*p == ' ' || *p == '\t')
    p++;
  size_t n = strcspn(p, "\n");
  snprintf(out, len, "%.*s", (int)n, p);
}

static void host_uuid(char *out, size_t len) {
  char buf[128];
  if (read_text("/etc/machine-id", buf, sizeof buf) == 0 && buf[0]) {
    buf[strcspn(buf, "\r\n")] = '\0';
    snprintf(out, len, "host-%.64s", buf);
    return;
  }
  gpum_error_clear();
  if (gethostname(buf, sizeof buf) != 0)
    snprintf(buf, sizeof buf, "localhost");
  buf[sizeof buf - 1] = '\0';
  snprintf(out, len, "host-%.64s", buf);
}

static int host_open(gpum_device_session_t *s, const gpum_device_open_opts_t *opts) {
  (void)opts;
  host_t *h = calloc(1, sizeof *h);
  if (!h)
    return gpum_error(GPUM_ENOMEM, "cannot allocate the host backend");
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  h->ncpu = n > 0 ? (unsigned)n : 1;
  host_uuid(h->uuid, sizeof h->uuid);
  if (read_cpu_times(&h->prev) == 0) {
    h->prev_valid = true;
    h->prev_ns = gpum__os_mono_ns();
  } else {
    gpum_error_clear();
  }
  char model[128];
  cpu_model(model, sizeof model);
  if (model[0])
    snprintf(s->detail, sizeof s->detail, "host (%s, %u CPUs)", model, h->ncpu);
  else
    snprintf(s->detail, sizeof s->detail, "host (%u CPUs)", h->ncpu);
  s->impl = h;
  s->count = 1;
  s->simulated = false;
  s->driver_version[0] = '\0';
  return 0;
}

static void host_close(gpum_device_session_t *s) {
  free(s->impl);
  s->impl = NULL;
}

static int read_memory(uint64_t *total, uint64_t *avail) {
  char buf[8192];
  int rc = read_text("/proc/meminfo", buf, sizeof buf);
  return rc ? rc : gpum__parse_meminfo(buf, total, avail);
}

static int host_get_info(gpum_device_session_t *s, unsigned index, gpum_device_info_t *out) {
  host_t *h = s->impl;
  out->index = index;
  out->is_host = true;
  out->vendor = "host";
  snprintf(out->name, sizeof out->name, "cpu");
  snprintf(out->uuid, sizeof out->uuid, "%s", h->uuid);
  out->valid = GPUM_INFO_NAME | GPUM_INFO_UUID;
  uint64_t total, avail;
  if (read_memory(&total, &avail) == 0) {
    out->memory_total = total;
    out->valid |= GPUM_INFO_MEMORY_TOTAL;
  } else {
    gpum_error_clear();
  }
  return 0;
}

static unsigned cpu_util(host_t *h) {
  gpum__cpu_times_t now;
  uint64_t t = gpum__os_mono_ns();
  if (h->prev_valid && t - h->prev_ns >= MIN_DELTA_NS && read_cpu_times(&now) == 0) {
    int pct = gpum__cpu_util_percent(&h->prev, &now);
    h->prev = now;
    h->prev_ns = t;
    if (pct >= 0)
      return (unsigned)pct;
  }
  if (!h->prev_valid && read_cpu_times(&h->prev) == 0) {
    h->prev_valid = true;
    h->prev_ns = t;
  }
  char buf[128];
  unsigned pct = 0;
  if (read_text("/proc/loadavg", buf, sizeof buf) != 0 ||
      gpum__parse_loadavg_percent(buf, h->ncpu, &pct) != 0)
    return UINT32_MAX;
  return pct;
}

static int host_sample(gpum_device_session_t *s, unsigned index, gpum_device_sample_t *out) {
  (void)index;
  host_t *h = s->impl;
  uint64_t total, avail;
  if (read_memory(&total, &avail) == 0) {
    out->memory_total = total;
    out->memory_free = avail;
    out->memory_used = total - avail;
    out->valid |= 1u << GPUM_METRIC_MEMORY_TOTAL | 1u << GPUM_METRIC_MEMORY_USED |
                  1u << GPUM_METRIC_MEMORY_FREE;
  }
  unsigned util = cpu_util(h);
  if (util != UINT32_MAX) {
    out->util_gpu = util;
    out->valid |= 1u << GPUM_METRIC_UTIL_GPU;
  }
  gpum_error_clear();
  return 0;
}

static int host_memory_health(gpum_device_session_t *s, unsigned index, gpum_memory_health_t *out) {
  (void)s;
  (void)index;
  (void)out; /* host RAM has no page retirement or row remapping to report: nothing valid */
  return 0;
}

static int host_processes(gpum_device_session_t *s, unsigned index, gpum__rawproc_t **out,
                          size_t *n) {
  (void)s;
  (void)index;
  *out = NULL;
  *n = 0;
  return 0;
}

static int host_events_enable(gpum_device_session_t *s) {
  (void)s;
  return gpum_error(GPUM_ENOTSUP, "the host backend has no device events");
}

static int host_event_wait(gpum_device_session_t *s, gpum_device_event_t *ev, unsigned timeout_ms) {
  (void)s;
  (void)ev;
  (void)timeout_ms;
  return gpum_error(GPUM_ESTATE, "events are not enabled (the host backend has none)");
}

const struct gpum__backend gpum__backend_host = {
    .name = "host",
    .kind = GPUM_BACKEND_HOST,
    .open = host_open,
    .close = host_close,
    .get_info = host_get_info,
    .sample = host_sample,
    .memory_health = host_memory_health,
    .processes = host_processes,
    .events_enable = host_events_enable,
    .event_wait = host_event_wait,
};
