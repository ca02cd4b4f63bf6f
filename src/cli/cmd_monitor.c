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

#include "args.h"
#include "cli.h"
#include "monitor_run.h"

typedef struct {
  bool json;
  bool header;
  unsigned long long count; /* rounds; 0 = until stopped */
  cli_mon_setup_t setup;
} monitor_opts_t;

enum { OPT_INTERVAL = 1, OPT_JSON, OPT_COUNT, OPT_DEVICES, OPT_NO_HEADER };

static const cli_arg_t monitor_args[] = {
    {OPT_INTERVAL, "--interval", 0, "MS|DURATION",
     "sampling interval: milliseconds (250) or a duration (500ms, 2s); default: the "
     "monitor.interval option, else 1s",
     0},
    {OPT_JSON, "--json", 0, NULL, "JSON lines instead of text columns", 0},
    {OPT_COUNT, "--count", 0, "N", "stop after N rounds", 0},
    {OPT_DEVICES, "--devices", 0, "LIST", "only these devices, e.g. 0,2 or 0-3 (option 'devices')",
     0},
    {OPT_NO_HEADER, "--no-header", 0, NULL, "no header line in text mode", 0},
    {0},
};

static const cli_cmd_spec_t monitor_spec = {
    .name = "monitor",
    .usage = "[--interval MS|DURATION] [--json] [--count N] [--devices LIST] [--no-header]",
    .summary = "Stream samples of every GPU, a line per device per round, for scripts.",
    .text = "Text columns under a header, or with --json one JSON object per line with the\n"
            "field names of 'gpum status --json' (a metric the device does not report is null,\n"
            "n/a in text). Each line carries the device's health state (AVAILABLE, BUSY, ERROR,\n"
            "DISABLED) and, unless AVAILABLE, its reason. Stops on Ctrl-C or SIGTERM (exit 0)\n"
            "or after N rounds. gpum monitor samples the devices itself, whether gpumd runs or\n"
            "not (gpumd's own samples: /api/v1/gpu/monitoring, /api/v1/events).",
    .args = monitor_args,
    .examples = "gpum monitor --interval 500ms\n"
                "gpum monitor --json --count 10 > samples.jsonl",
    .exit_status = "0 when stopped or done, 1 when no device can be read or a selected device "
                   "does not exist, 2 for usage errors.",
};

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
  cli_args_t p;
  cli_args_init(&p, &monitor_spec, argc, argv);
  for (int id; (id = cli_args_next(&p)) != CLI_ARGS_END;) {
    const char *v = p.value;
    switch (id) {
    case CLI_ARGS_HELP:
      return CLI_EXIT_OK;
    case CLI_ARGS_ERR:
      return CLI_EXIT_USAGE;
    case CLI_ARGS_POS:
      return cli_args_error(&monitor_spec, "unexpected argument '%s'", v);
    case OPT_JSON:
      o->json = true;
      break;
    case OPT_NO_HEADER:
      o->header = false;
      break;
    case OPT_INTERVAL:
      if (cli_parse_interval_ms(v, &o->setup.interval_ms) != 0)
        return cli_args_error(&monitor_spec, "--interval: %s", gpum_last_error());
      break;
    case OPT_COUNT:
      if (parse_count(v, &o->count) != 0)
        return cli_args_error(&monitor_spec,
                              "--count: invalid value '%s': expected a positive integer", v);
      break;
    case OPT_DEVICES: /* an option of the table: main took it into cfg, this is for the help */
      break;
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
