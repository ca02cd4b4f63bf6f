/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The in-process monitor shared by `gpum monitor` and `gpum alerts`: set-up from the
 * configuration, round tracking over the monitor's sample counters, signal-aware waiting and
 * the sample JSON. gpum monitor always samples in-process; gpum alerts does when it evaluates
 * the rules itself (--local, or gpumd not running).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gpum/error.h>
#include <gpum/size.h>
#include <gpum/clock.h>

#include "cli.h"
#include "monitor_run.h"
#include "status.h"

#define MAX_INTERVAL_MS 3600000u

int cli_parse_interval_ms(const char *s, unsigned *out_ms) {
  if (!s || !*s)
    return gpum_error(GPUM_EINVAL, "empty interval");
  uint64_t ms = 0;
  bool digits = strspn(s, "0123456789") == strlen(s);
  if (digits) {
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
      v = MAX_INTERVAL_MS + 1ull;
    ms = v;
  } else if (gpum_duration_parse(s, &ms) != 0) {
    return gpum_error(GPUM_EINVAL,
                      "invalid interval '%s': expected milliseconds (250) or a duration (500ms, "
                      "2s)",
                      s);
  }
  if (ms == 0 || ms > MAX_INTERVAL_MS)
    return gpum_error(GPUM_EINVAL, "invalid interval '%s': must be between 1ms and 1h", s);
  *out_ms = (unsigned)ms;
  return 0;
}

unsigned cli_default_monitor_interval(const gpum_config_t *cfg) {
  gpum_monitor_opts_t mo;
  gpum_monitor_opts_from_config(cfg, &mo, NULL, 0);
  return mo.interval_ms;
}

int cli_mon_parse_devices(const gpum_config_t *cfg, const char *cmd, cli_mon_setup_t *setup) {
  const char *devices = gpum_config_get_string(cfg, "devices");
  if (gpum_device_list_parse(devices, setup->sel, CLI_MON_MAX_DEVICES, &setup->nsel) != 0) {
    fprintf(stderr, "gpum %s: --devices: %s\n", cmd, gpum_last_error());
    return CLI_EXIT_USAGE;
  }
  return -1;
}

#define INFO_WAIT_MS 2000u /* how long the commands wait for the devices' static info */

int cli_mon_open(const gpum_config_t *cfg, const char *cmd, const cli_mon_setup_t *setup,
                 gpum_monitor_t **out) {
  gpum_device_open_opts_t dopts;
  gpum_error_clear();
  if (gpum_device_opts_from_config(cfg, &dopts) != 0) {
    fprintf(stderr, "gpum %s: %s\n", cmd, gpum_last_error());
    return CLI_EXIT_USAGE;
  }
  gpum_monitor_opts_t mo;
  gpum_monitor_opts_init(&mo);
  mo.interval_ms = setup->interval_ms;
  /* The command needs only the newest samples: keep a minute (at least 4 rounds). */
  uint64_t hist = setup->history_seconds;
  if (hist == 0)
    hist = 60;
  if (hist * 1000u < 4ull * setup->interval_ms)
    hist = (4ull * setup->interval_ms + 999u) / 1000u;
  mo.history_seconds = (unsigned)hist;
  gpum_busy_thresholds_from_config(cfg, &mo.busy);
  mo.devices = setup->nsel ? setup->sel : NULL;
  mo.device_count = setup->nsel;
  mo.alerts = setup->alerts;
  gpum_error_clear();
  int rc = gpum_monitor_create(&dopts, &mo, out);
  if (rc == 0) {
    rc = gpum_monitor_start(*out);
    if (rc != 0) {
      gpum_monitor_destroy(*out);
      *out = NULL;
    }
  }
  if (rc == 0) {
    /* The first lines show the devices' names: wait for their static info, but a device
     * that does not answer must not hold up the others (its lines come without it). */
    unsigned missing = 0;
    if (gpum_monitor_wait_info(*out, INFO_WAIT_MS, &missing) != 0 && missing > 0)
      fprintf(stderr, "gpum %s: %s; going on without their names\n", cmd, gpum_last_error());
    return 0;
  }
  if (rc == GPUM_EINVAL) {
    fprintf(stderr, "gpum %s: %s\n", cmd, cli_reason(rc));
    return CLI_EXIT_USAGE;
  }
  if (rc == GPUM_ENODEV && setup->nsel)
    fprintf(stderr, "gpum %s: %s\n", cmd, cli_reason(rc));
  else
    fprintf(stderr, "gpum %s: cannot read any device: %s\n", cmd, cli_reason(rc));
  return CLI_EXIT_FAIL;
}

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig) {
  if (stop_signal) /* a second signal: a driver call may hang the shutdown, leave at once */
    _exit(128 + sig);
  stop_signal = sig;
}

void cli_mon_block_signals(void) {
  cli_on_stop_signals(on_stop, false);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
}

void cli_mon_unblock_signals(void) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

int cli_mon_wait_fd(int fd, unsigned ms) {
  if (stop_signal)
    return stop_signal;
  /* The stop signals are blocked except inside ppoll, so one that arrives between two waits
   * stays pending and interrupts the next wait instead of being lost. */
  sigset_t unblocked;
  pthread_sigmask(SIG_SETMASK, NULL, &unblocked);
  sigdelset(&unblocked, SIGINT);
  sigdelset(&unblocked, SIGTERM);
  struct pollfd p = {fd, POLLIN, 0};
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  ppoll(fd >= 0 ? &p : NULL, fd >= 0 ? 1 : 0, &ts, &unblocked);
  return stop_signal;
}

int cli_mon_wait_signal(unsigned ms) {
  return cli_mon_wait_fd(-1, ms);
}

uint64_t cli_now_ns(void) {
  return gpum_clock_real_ns();
}

void cli_rounds_init(cli_rounds_t *r, gpum_monitor_t *mon, unsigned interval_ms) {
  memset(r, 0, sizeof *r);
  r->mon = mon;
  r->interval_ms = interval_ms;
  unsigned n = gpum_monitor_device_count(mon);
  r->n = n > CLI_MON_MAX_DEVICES ? CLI_MON_MAX_DEVICES : n;
  for (unsigned i = 0; i < r->n; i++)
    gpum_monitor_device_index(mon, i, &r->dev[i]);
  r->last_round_mono = (gpum_clock_mono_ns() / 1000000u);
}

int cli_mon_next_round(cli_rounds_t *r) {
  unsigned step = r->interval_ms / 10;
  step = step < 2 ? 2 : (step > 50 ? 50 : step);
  uint64_t first_new = 0;
  /* How long the first new sample waits for the others: an interval (at least 50 ms), enough
   * for a loaded machine; a device still without one then is failing or hung. */
  uint64_t wait_rest = r->interval_ms < 50 ? 50 : r->interval_ms;
  for (;;) {
    int sig = cli_mon_wait_signal(step);
    if (sig)
      return sig;
    unsigned fresh = 0;
    for (unsigned i = 0; i < r->n; i++) {
      uint64_t c = 0;
      gpum_monitor_sample_count(r->mon, r->dev[i], &c);
      r->fresh[i] = c > r->last_count[i];
      fresh += r->fresh[i];
    }
    uint64_t now = (gpum_clock_mono_ns() / 1000000u);
    if (fresh && !first_new)
      first_new = now;
    bool done = (fresh == r->n && r->n > 0) || (first_new && now - first_new >= wait_rest) ||
                (!first_new && now - r->last_round_mono >= r->interval_ms * 3ull / 2);
    if (!done)
      continue;
    for (unsigned i = 0; i < r->n; i++)
      if (r->fresh[i])
        gpum_monitor_sample_count(r->mon, r->dev[i], &r->last_count[i]);
    r->last_round_mono = now;
    return 0;
  }
}

void cli_fmt_time_ns(uint64_t ns, bool iso, char *buf, size_t len) {
  time_t secs = (time_t)(ns / 1000000000ull);
  unsigned ms = (unsigned)(ns / 1000000ull % 1000u);
  struct tm tm;
  if (iso)
    gmtime_r(&secs, &tm);
  else
    localtime_r(&secs, &tm);
  size_t n = strftime(buf, len, iso ? "%Y-%m-%dT%H:%M:%S" : "%H:%M:%S", &tm);
  if (n > 0 && n < len)
    snprintf(buf + n, len - n, iso ? ".%03uZ" : ".%03u", ms);
}

static json_t *jint_if(const gpum_device_sample_t *s, gpum_metric_t m, uint64_t v) {
  return s && gpum_sample_valid(s, m) ? json_integer((json_int_t)v) : json_null();
}

void cli_json_sample(json_t *o, const gpum_device_sample_t *s) {
  gpum_device_sample_t zero;
  memset(&zero, 0, sizeof zero);
  const gpum_device_sample_t *v = s ? s : &zero;
  json_t *mem = json_object();
  json_object_set_new(mem, "total", jint_if(s, GPUM_METRIC_MEMORY_TOTAL, v->memory_total));
  json_object_set_new(mem, "used", jint_if(s, GPUM_METRIC_MEMORY_USED, v->memory_used));
  json_object_set_new(mem, "free", jint_if(s, GPUM_METRIC_MEMORY_FREE, v->memory_free));
  json_object_set_new(mem, "driver_reserved",
                      jint_if(s, GPUM_METRIC_MEMORY_RESERVED, v->memory_reserved));
  json_object_set_new(o, "memory", mem);
  json_t *util = json_object();
  json_object_set_new(util, "gpu", jint_if(s, GPUM_METRIC_UTIL_GPU, v->util_gpu));
  json_object_set_new(util, "memory", jint_if(s, GPUM_METRIC_UTIL_MEMORY, v->util_memory));
  json_object_set_new(o, "utilization", util);
  json_object_set_new(o, "temperature_c",
                      s && gpum_sample_valid(s, GPUM_METRIC_TEMPERATURE)
                          ? json_integer(v->temperature_c)
                          : json_null());
  json_object_set_new(o, "power_w",
                      s && gpum_sample_valid(s, GPUM_METRIC_POWER) ? json_real(v->power_mw / 1000.0)
                                                                   : json_null());
  json_t *clocks = json_object();
  json_object_set_new(clocks, "sm_mhz", jint_if(s, GPUM_METRIC_CLOCK_SM, v->clock_sm_mhz));
  json_object_set_new(clocks, "memory_mhz", jint_if(s, GPUM_METRIC_CLOCK_MEM, v->clock_mem_mhz));
  json_object_set_new(o, "clocks", clocks);
  json_t *ecc = json_object();
  json_object_set_new(ecc, "corrected", jint_if(s, GPUM_METRIC_ECC_CORRECTED, v->ecc_corrected));
  json_object_set_new(ecc, "uncorrected",
                      jint_if(s, GPUM_METRIC_ECC_UNCORRECTED, v->ecc_uncorrected));
  json_object_set_new(o, "ecc", ecc);
}
