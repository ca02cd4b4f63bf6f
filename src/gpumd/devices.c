/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's view of the devices: the monitor (sampling and health on its own threads), a bridge
 * that carries the monitor's events into the libevent loop (the sampler thread queues them and
 * writes a byte into a socketpair the loop watches), the wait for the devices' static info at
 * start (monitor.start_timeout) and the info of a device that answers later, a timer that
 * reads the newest samples for memory pressure and the scheduler's device state, and the
 * "devices" part of the status reply.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/util.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "os_internal.h"
#include "gpumd_internal.h"

/* On the sampler thread: queue the event and wake the loop. Must be quick. */
static void on_monitor_event(const gpum_monitor_event_t *ev, void *user) {
  gpumd_t *d = user;
  if (ev->kind != GPUM_MONEV_HEALTH && ev->kind != GPUM_MONEV_XID && ev->kind != GPUM_MONEV_INFO)
    return;
  gpumd_monq_t *q = malloc(sizeof *q);
  if (!q)
    return;
  q->ev = *ev;
  q->next = NULL;
  pthread_mutex_lock(&d->monq_lock);
  bool wake = d->monq_head == NULL;
  if (d->monq_tail)
    d->monq_tail->next = q;
  else
    d->monq_head = q;
  d->monq_tail = q;
  d->monq_len++;
  pthread_mutex_unlock(&d->monq_lock);
  if (wake) {
    char b = 1;
    ssize_t n = write(d->mon_fds[1], &b, 1);
    (void)n; /* a full pipe already has a wake-up pending */
  }
}

static gpumd_device_t *device_by_index(gpumd_t *d, unsigned index) {
  for (unsigned i = 0; i < d->device_count; i++)
    if (d->devices[i].index == index)
      return &d->devices[i];
  return NULL;
}

/* Copies a device's static info from the monitor once it has been read. Returns true then. */
static bool take_info(gpumd_t *d, gpumd_device_t *dev) {
  gpum_device_info_t info;
  if (gpum_monitor_device_info(d->mon, dev->index, &info) != 0)
    return false;
  dev->info = info;
  dev->answered = true;
  gpum_alert_engine_t *e = gpumd_obs_alerts(d);
  if (e)
    gpum_alert_engine_set_device_info(e, dev->index, &dev->info);
  return true;
}

/* On the loop: a device's static info was read (at start, or later by a device that was
 * silent at start, or again after a failed read). */
static void on_info(gpumd_t *d, const gpum_monitor_event_t *ev) {
  gpumd_device_t *dev = device_by_index(d, ev->device);
  if (!dev)
    return;
  bool was = dev->answered;
  if (!take_info(d, dev))
    return;
  if (!was)
    gpum_log(GPUM_LOG_WARN, "gpumd", "device %u answered at last (%s): schedulable from now on",
             dev->index, ev->reason);
  gpumd_engine_device_answered(d, dev->index);
}

/* On the loop: take every queued event. */
static void on_monitor_wake(evutil_socket_t fd, short what, void *arg) {
  (void)what;
  gpumd_t *d = arg;
  char buf[64];
  while (read(fd, buf, sizeof buf) > 0) {
  }
  pthread_mutex_lock(&d->monq_lock);
  gpumd_monq_t *q = d->monq_head;
  d->monq_head = d->monq_tail = NULL;
  d->monq_len = 0;
  pthread_mutex_unlock(&d->monq_lock);
  while (q) {
    gpumd_monq_t *next = q->next;
    const gpum_monitor_event_t *ev = &q->ev;
    if (ev->kind == GPUM_MONEV_INFO) {
      on_info(d, ev);
      free(q);
      q = next;
      continue;
    }
    if (ev->kind == GPUM_MONEV_HEALTH) {
      gpum_log(GPUM_LOG_INFO, "gpumd", "device %u: %s -> %s (%s)", ev->device,
               gpum_health_state_name(ev->from), gpum_health_state_name(ev->to), ev->reason);
      gpumd_engine_device_health(d, ev->device, ev->to, ev->reason);
    }
    gpumd_obs_monitor_event(d, ev);
    free(q);
    q = next;
  }
}

/* Every monitor interval: the newest samples go to the scheduler (memory pressure, used and
 * unmanaged memory). */
static void on_sample_timer(evutil_socket_t fd, short what, void *arg) {
  (void)fd, (void)what;
  gpumd_t *d = arg;
  for (unsigned i = 0; i < d->device_count; i++) {
    gpum_device_sample_t s;
    if (gpum_monitor_latest(d->mon, d->devices[i].index, &s) == 0)
      gpumd_engine_device_sample(d, d->devices[i].index, &s);
  }
  gpumd_obs_round(d);
}

/* Waits up to monitor.start_timeout for every device's static info (the monitor reads it on
 * each device's own thread), so that recovery knows the devices' UUIDs. A device still silent
 * then stays unusable until its info arrives (on_info): one hung GPU must not keep the whole
 * node's broker from starting. */
static void wait_devices(gpumd_t *d, uint64_t started_ns) {
  uint64_t ms = gpum_config_get_duration(d->cfg, "monitor.start_timeout");
  /* Counted from the monitor's start: its wait for the event registration is part of it. */
  uint64_t spent = (gpum__os_mono_ns() - started_ns) / 1000000u, left = ms > spent ? ms - spent : 0;
  unsigned missing = 0;
  gpum_monitor_wait_info(d->mon, left > UINT32_MAX ? UINT32_MAX : (unsigned)left, &missing);
  if (missing > 0)
    gpum_log(GPUM_LOG_WARN, "gpumd", "%u of %u devices did not answer within %llu ms", missing,
             d->device_count, (unsigned long long)ms);
  for (unsigned i = 0; i < d->device_count; i++) {
    gpumd_device_t *dev = &d->devices[i];
    if (!take_info(d, dev))
      gpum_log(GPUM_LOG_WARN, "gpumd",
               "device %u did not answer within monitor.start_timeout: it is unusable (ERROR, "
               "\"%s\") until it answers; recovered grants on it fail",
               dev->index, GPUMD_SILENT_REASON);
  }
}

int gpumd_devices_start(gpumd_t *d) {
  gpum_device_open_opts_t dopts;
  int rc = gpum_device_opts_from_config(d->cfg, &dopts);
  if (rc != 0)
    return rc;
  unsigned sel[GPUMD_MAX_DEVICES];
  gpum_monitor_opts_t mo;
  rc = gpum_monitor_opts_from_config(d->cfg, &mo, sel, GPUMD_MAX_DEVICES);
  if (rc != 0)
    return rc;
  mo.history_seconds = 600;
  d->monitor_interval_ms = mo.interval_ms;
  rc = gpum_monitor_create(&dopts, &mo, &d->mon);
  if (rc != 0)
    return rc;
  d->device_count = gpum_monitor_device_count(d->mon);
  if (d->device_count > GPUMD_MAX_DEVICES)
    d->device_count = GPUMD_MAX_DEVICES;
  for (unsigned i = 0; i < d->device_count; i++) {
    gpumd_device_t *dev = &d->devices[i];
    gpum_monitor_device_index(d->mon, i, &dev->index);
    dev->info.index = dev->index;
  }
  rc = gpumd_obs_start(d); /* the devices' info reaches the alert engine as it is read */
  if (rc != 0)
    return rc;
  if (evutil_socketpair(AF_UNIX, SOCK_STREAM, 0, d->mon_fds) != 0)
    return gpum_error(GPUM_EIO, "socketpair: %s", strerror(errno));
  evutil_make_socket_nonblocking(d->mon_fds[0]);
  evutil_make_socket_nonblocking(d->mon_fds[1]);
  evutil_make_socket_closeonexec(d->mon_fds[0]);
  evutil_make_socket_closeonexec(d->mon_fds[1]);
  d->mon_ev = event_new(d->base, d->mon_fds[0], EV_READ | EV_PERSIST, on_monitor_wake, d);
  d->pressure_timer = event_new(d->base, -1, EV_PERSIST, on_sample_timer, d);
  if (!d->mon_ev || !d->pressure_timer)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  event_add(d->mon_ev, NULL);
  struct timeval tv = {.tv_sec = mo.interval_ms / 1000, .tv_usec = (mo.interval_ms % 1000) * 1000};
  event_add(d->pressure_timer, &tv);
  rc = gpumd_procs_start(d, &dopts, mo.interval_ms);
  if (rc != 0)
    return rc;
  rc = gpum_monitor_subscribe(d->mon, on_monitor_event, d, NULL);
  uint64_t started = gpum__os_mono_ns();
  if (rc == 0)
    rc = gpum_monitor_start(d->mon);
  if (rc == 0)
    wait_devices(d, started);
  return rc;
}

void gpumd_devices_stop(gpumd_t *d) {
  if (d->mon) {
    gpum_monitor_stop(d->mon);
    gpum_monitor_destroy(d->mon);
    d->mon = NULL;
  }
  gpumd_procs_stop(d);
  if (d->mon_ev)
    event_free(d->mon_ev);
  if (d->pressure_timer)
    event_free(d->pressure_timer);
  d->mon_ev = d->pressure_timer = NULL;
  for (int i = 0; i < 2; i++)
    if (d->mon_fds[i] >= 0) {
      close(d->mon_fds[i]);
      d->mon_fds[i] = -1;
    }
  gpumd_monq_t *q = d->monq_head;
  while (q) {
    gpumd_monq_t *next = q->next;
    free(q);
    q = next;
  }
  d->monq_head = d->monq_tail = NULL;
  gpumd_obs_stop(d);
}

json_t *gpumd_engine_devices_json(gpumd_t *d) {
  json_t *arr = json_array();
  for (unsigned i = 0; i < d->device_count; i++) {
    gpumd_device_t *dev = &d->devices[i];
    gpum_device_health_t h;
    memset(&h, 0, sizeof h);
    gpum_monitor_health(d->mon, dev->index, &h);
    if (!dev->answered) {
      h.state = GPUM_HEALTH_ERROR;
      snprintf(h.reason, sizeof h.reason, "%s", GPUMD_SILENT_REASON);
    }
    gpum_device_sample_t s;
    bool have = gpum_monitor_latest(d->mon, dev->index, &s) == 0;
    uint64_t total = dev->info.memory_total;
    uint64_t used = have && gpum_sample_valid(&s, GPUM_METRIC_MEMORY_USED) ? s.memory_used : 0;
    /* The driver's own share (NVML memory info v2) is neither used nor free: free is what the
     * driver says, as in gpum status and /metrics, not total - used. */
    bool have_drv = have && gpum_sample_valid(&s, GPUM_METRIC_MEMORY_RESERVED);
    uint64_t drv = have_drv ? s.memory_reserved : 0;
    uint64_t free_b = have && gpum_sample_valid(&s, GPUM_METRIC_MEMORY_FREE) ? s.memory_free
                      : total > used + drv                                   ? total - used - drv
                                                                             : 0;
    json_t *o =
        json_pack("{s:I, s:s, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:o}}", "index",
                  (json_int_t)dev->index, "uuid", dev->info.uuid, "name", dev->info.name, "state",
                  gpum_health_state_name(h.state), "reason", h.reason, "memory", "total",
                  (json_int_t)total, "used", (json_int_t)used, "free", (json_int_t)free_b,
                  "driver_reserved", have_drv ? json_integer((json_int_t)drv) : json_null());
    if (o) {
      gpumd_engine_device_json(d, dev->index, o);
      json_array_append_new(arr, o);
    }
  }
  return arr;
}

gpumd_device_t *gpumd_device_find(gpumd_t *d, unsigned index) {
  return device_by_index(d, index);
}

bool gpumd_device_measured(gpumd_t *d, unsigned index, gpum_device_sample_t *s) {
  if (!d->mon || gpum_monitor_latest(d->mon, index, s) != 0)
    return false;
  gpum_device_health_t h;
  if (gpum_monitor_health(d->mon, index, &h) == 0 && h.state == GPUM_HEALTH_ERROR &&
      (h.gone || !h.responsive))
    return false;
  uint64_t bound = 3ull * d->monitor_interval_ms * 1000000ull;
  if (bound < 5000000000ull)
    bound = 5000000000ull;
  return s->timestamp_ns + bound >= gpum__os_real_ns();
}
