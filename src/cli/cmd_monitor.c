/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum monitor`: streams the samples of a monitor for scripts, one line per device per
 * sampling round, as text columns under a header or as JSON lines whose fields are named as in
 * `gpum status --json` (invalid metrics are null). It runs its own in-process gpum_monitor_t
 * (at any interval, with or without gpumd), and stops on SIGINT/SIGTERM (exit 0) or after
 * --count rounds.
 *
 * Exit codes: 0 (stopped by a signal or after --count rounds), 1 when no device can be read or
 * a selected device does not exist, 2 for bad flags.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>

#include "cli.h"
#include "monitor_run.h"

typedef struct {
  bool json;
  bool header;
  unsigned long long count; /* rounds; 0 = until stopped */
  cli_mon_setup_t setup;
} monitor_opts_t;

static void usage(FILE *out) {
  fprintf(out,
          "usage: gpum monitor [--interval MS|DURATION] [--json] [--count N] [--devices LIST]\n"
          "                    [--no-header]\n"
          "\n"
          "Samples every device at the interval and prints one line per device per round, for\n"
          "scripts: text columns under a header, or with --json one JSON object per line with\n"
          "the field names of 'gpum status --json' (a metric the device does not report is\n"
          "null, n/a in text). Each line carries the device's health state (AVAILABLE, BUSY,\n"
          "ERROR, DISABLED) and, unless AVAILABLE, its reason. Stops on Ctrl-C or SIGTERM\n"
          "(exit 0) or after N rounds.\n"
          "\n"
          "options:\n"
          "  --interval MS|DURATION  sampling interval: milliseconds (250) or a duration\n"
          "                          (500ms, 2s); default: the monitor.interval option, else 1s\n"
          "  --json                  JSON lines instead of text columns\n"
          "  --count N               stop after N rounds\n"
          "  --devices LIST          only these devices, e.g. 0,2 or 0-3 (option 'devices')\n"
          "  --no-header             no header line in text mode\n"
          "  -h, --help              this help\n"
          "\n"
          "gpum monitor samples the devices itself, whether gpumd runs or not (gpumd's own\n"
          "samples are in its REST API: /api/v1/gpu/monitoring, /api/v1/events).\n"
          "exit status: 0 when stopped or done, 1 when no device can be read or a selected\n"
          "device does not exist, 2 for usage errors.\n");
}

/* Returns the value of flag `name` at argv[*i] ("--name V" or "--name=V"), or NULL. */
static const char *flag_value(int argc, char **argv, int *i, const char *name, bool *matched) {
  size_t n = strlen(name);
  const char *a = argv[*i];
  *matched = false;
  if (strncmp(a, name, n) != 0)
    return NULL;
  if (a[n] == '=') {
    *matched = true;
    return a + n + 1;
  }
  if (a[n] != '\0')
    return NULL;
  *matched = true;
  if (*i + 1 >= argc)
    return NULL;
  return argv[++*i];
}

static int parse_count(const char *v, unsigned long long *out) {
  errno = 0;
  char *end = NULL;
  unsigned long long n = v && *v >= '0' && *v <= '9' ? strtoull(v, &end, 10) : 0;
  if (!v || errno != 0 || end == v || !end || *end != '\0' || n == 0)
    return -1;
  *out = n;
  return 0;
}

/* Returns -1 to go on, else an exit code. */
static int parse_flags(const gpum_config_t *cfg, int argc, char **argv, monitor_opts_t *o) {
  o->header = true;
  o->setup.interval_ms = cli_default_monitor_interval(cfg);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool m = false;
    const char *v;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return CLI_EXIT_OK;
    } else if (!strcmp(a, "--json")) {
      o->json = true;
    } else if (!strcmp(a, "--no-header")) {
      o->header = false;
    } else if ((v = flag_value(argc, argv, &i, "--interval", &m)), m) {
      if (!v) {
        fprintf(stderr, "gpum monitor: --interval needs a value (250, 500ms, 2s)\n");
        return CLI_EXIT_USAGE;
      }
      if (cli_parse_interval_ms(v, &o->setup.interval_ms) != 0) {
        fprintf(stderr, "gpum monitor: --interval: %s\n", gpum_last_error());
        return CLI_EXIT_USAGE;
      }
    } else if ((v = flag_value(argc, argv, &i, "--count", &m)), m) {
      if (parse_count(v, &o->count) != 0) {
        fprintf(stderr, "gpum monitor: --count: invalid value '%s': expected a positive integer\n",
                v ? v : "");
        return CLI_EXIT_USAGE;
      }
    } else if (a[0] == '-') {
      return cli_bad_option("monitor", a);
    } else {
      fprintf(stderr, "gpum monitor: unexpected argument '%s'\n", a);
      return CLI_EXIT_USAGE;
    }
  }
  return cli_mon_parse_devices(cfg, "monitor", &o->setup);
}

/* ---- output ---- */

static void text_header(void) {
  printf("%-24s %3s %-9s %6s %4s %7s %9s %9s %8s %6s %7s  %s\n", "TIME", "GPU", "STATE", "TEMP_C",
         "UTIL", "MEMUTIL", "USED_MIB", "TOTAL_MIB", "POWER_W", "SM_MHZ", "MEM_MHZ", "REASON");
}

/* "%*u" of a valid metric, else "n/a" in the same width. */
static void col_u(int width, const gpum_device_sample_t *s, gpum_metric_t m, unsigned long long v) {
  if (s && gpum_sample_valid(s, m))
    printf(" %*llu", width, v);
  else
    printf(" %*s", width, "n/a");
}

static void text_line(const char *when, unsigned dev, const gpum_device_health_t *h,
                      const gpum_device_sample_t *s) {
  printf("%-24s %3u %-9s", when, dev, gpum_health_state_name(h->state));
  if (s && gpum_sample_valid(s, GPUM_METRIC_TEMPERATURE))
    printf(" %6d", s->temperature_c);
  else
    printf(" %6s", "n/a");
  const gpum_device_sample_t z = {0};
  const gpum_device_sample_t *v = s ? s : &z;
  col_u(4, s, GPUM_METRIC_UTIL_GPU, v->util_gpu);
  col_u(7, s, GPUM_METRIC_UTIL_MEMORY, v->util_memory);
  col_u(9, s, GPUM_METRIC_MEMORY_USED, v->memory_used >> 20);
  col_u(9, s, GPUM_METRIC_MEMORY_TOTAL, v->memory_total >> 20);
  if (s && gpum_sample_valid(s, GPUM_METRIC_POWER))
    printf(" %8.1f", s->power_mw / 1000.0);
  else
    printf(" %8s", "n/a");
  col_u(6, s, GPUM_METRIC_CLOCK_SM, v->clock_sm_mhz);
  col_u(7, s, GPUM_METRIC_CLOCK_MEM, v->clock_mem_mhz);
  if (h->state != GPUM_HEALTH_AVAILABLE && h->reason[0])
    printf("  %s", h->reason);
  fputc('\n', stdout);
}

static void json_line(const char *when, unsigned long long round, unsigned dev,
                      const gpum_device_info_t *info, bool have_info, const gpum_device_health_t *h,
                      const gpum_device_sample_t *s) {
  json_t *o = json_object();
  json_object_set_new(o, "time", json_string(when));
  json_object_set_new(o, "round", json_integer((json_int_t)round));
  json_object_set_new(o, "index", json_integer(dev));
  bool uuid = have_info && (info->valid & GPUM_INFO_UUID);
  bool name = have_info && (info->valid & GPUM_INFO_NAME);
  json_object_set_new(o, "uuid", uuid ? json_string(info->uuid) : json_null());
  json_object_set_new(o, "name", name ? json_string(info->name) : json_null());
  json_object_set_new(o, "state", json_string(gpum_health_state_name(h->state)));
  json_object_set_new(o, "reason",
                      h->state != GPUM_HEALTH_AVAILABLE && h->reason[0] ? json_string(h->reason)
                                                                        : json_null());
  json_object_set_new(o, "responsive", json_boolean(h->responsive));
  cli_json_sample(o, s);
  json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
  fputc('\n', stdout);
  json_decref(o);
}

/* Prints one round: the new sample of each device that has one; a device without one (failing
 * or hung) is printed with null metrics and its health. */
static void print_round(const monitor_opts_t *o, const cli_rounds_t *r, unsigned long long round) {
  uint64_t now = cli_now_ns();
  for (unsigned i = 0; i < r->n; i++) {
    unsigned dev = r->dev[i];
    gpum_device_sample_t sample;
    bool have = r->fresh[i] && gpum_monitor_latest(r->mon, dev, &sample) == 0;
    gpum_device_health_t h;
    if (gpum_monitor_health(r->mon, dev, &h) != 0)
      memset(&h, 0, sizeof h);
    char when[40];
    cli_fmt_time_ns(have && sample.timestamp_ns ? sample.timestamp_ns : now, true, when,
                    sizeof when);
    if (o->json) {
      gpum_device_info_t info;
      bool have_info = gpum_monitor_device_info(r->mon, dev, &info) == 0;
      json_line(when, round, dev, &info, have_info, &h, have ? &sample : NULL);
    } else {
      text_line(when, dev, &h, have ? &sample : NULL);
    }
  }
  fflush(stdout);
}

int cmd_monitor(gpum_config_t *cfg, int argc, char **argv) {
  monitor_opts_t o;
  memset(&o, 0, sizeof o);
  int code = parse_flags(cfg, argc, argv, &o);
  if (code >= 0)
    return code;
  cli_mon_block_signals();
  gpum_monitor_t *mon = NULL;
  code = cli_mon_open(cfg, "monitor", &o.setup, &mon);
  if (code != 0) {
    cli_mon_unblock_signals();
    return code;
  }
  if (!o.json && o.header)
    text_header();
  cli_rounds_t rounds;
  cli_rounds_init(&rounds, mon, o.setup.interval_ms);
  for (unsigned long long round = 1; o.count == 0 || round <= o.count; round++) {
    if (cli_mon_next_round(&rounds) != 0)
      break;
    print_round(&o, &rounds, round);
  }
  cli_mon_unblock_signals();
  gpum_monitor_destroy(mon);
  return CLI_EXIT_OK;
}
