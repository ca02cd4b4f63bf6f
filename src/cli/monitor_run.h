/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An in-process monitor for the CLI commands that need one (`gpum monitor`, and `gpum alerts`
 * when it evaluates the rules itself): setting it up from the configuration and the command's
 * flags, waiting for the next sampling round, stopping on SIGINT/SIGTERM, and the formatting
 * both commands share (times, samples as JSON with the field names of `gpum status --json`).
 */
#ifndef GPUM_CLI_MONITOR_RUN_H
#define GPUM_CLI_MONITOR_RUN_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <gpum/alert.h>
#include <gpum/monitor.h>
#include <gpum/options.h>

#define CLI_MON_MAX_DEVICES 64

/* Parses an interval for --interval: a bare integer is milliseconds ("250"), anything else a
 * duration ("500ms", "2s", "1m"). Range 1 ms to 1 h. Returns 0 or GPUM_EINVAL (detail set). */
int cli_parse_interval_ms(const char *s, unsigned *out_ms);

/* The default sampling interval: the monitor.interval option when the options table has it,
 * else 1000 ms. */
unsigned cli_default_monitor_interval(const gpum_config_t *cfg);

typedef struct {
  unsigned interval_ms;
  unsigned sel[CLI_MON_MAX_DEVICES]; /* the devices option; all when nsel == 0 */
  size_t nsel;
  gpum_alert_engine_t *alerts; /* optional, fed by the monitor */
  unsigned history_seconds;    /* 0: just enough for the command (a minute) */
} cli_mon_setup_t;

/* Reads the devices option into setup->sel. Returns -1 to go on, or CLI_EXIT_USAGE after a
 * message naming cmd. */
int cli_mon_parse_devices(const gpum_config_t *cfg, const char *cmd, cli_mon_setup_t *setup);

/* Creates and starts the monitor. Returns 0, or an exit code after a message on stderr naming
 * cmd: 1 when no device can be read or a selected device does not exist, 2 for bad options. */
int cli_mon_open(const gpum_config_t *cfg, const char *cmd, const cli_mon_setup_t *setup,
                 gpum_monitor_t **out);

/* Installs the stop handler for SIGINT and SIGTERM and blocks both in the calling thread. Call
 * before the monitor starts, so that its threads inherit the mask and the signals reach only
 * the waits below. A second signal exits at once (the first one's shutdown may wait for a hung
 * driver call). */
void cli_mon_block_signals(void);
/* Unblocks them again (call once stopping, so that a second signal can end a slow shutdown). */
void cli_mon_unblock_signals(void);
/* Waits up to ms for SIGINT/SIGTERM. Returns the signal (also every later call), or 0 when
 * the time passed. */
int cli_mon_wait_signal(unsigned ms);
/* Waits up to ms for fd (-1: none) to become readable or a stop signal. Returns the signal,
 * or 0 (readable, or the time passed). */
int cli_mon_wait_fd(int fd, unsigned ms);

/* Tracks completed sampling rounds: a round is complete when every watched device has a new
 * sample, or when an interval (at least 50 ms) passed after the first new one (a failing or
 * hung device does not hold the others back), or after an interval and a half without any
 * (all devices failing: the round is reported with their states). */
typedef struct {
  gpum_monitor_t *mon;
  unsigned interval_ms;
  unsigned n;
  unsigned dev[CLI_MON_MAX_DEVICES];
  uint64_t last_count[CLI_MON_MAX_DEVICES];
  bool fresh[CLI_MON_MAX_DEVICES]; /* set by cli_mon_next_round: a new sample this round */
  uint64_t last_round_mono;
} cli_rounds_t;

void cli_rounds_init(cli_rounds_t *r, gpum_monitor_t *mon, unsigned interval_ms);
/* Waits for the next round. Returns 0 when one completed (r->fresh says which devices have a
 * new sample), or the stop signal that arrived. */
int cli_mon_next_round(cli_rounds_t *r);

/* CLOCK_REALTIME ns as "2026-11-22T05:30:12.345Z" (iso) or "05:30:12.345" local (not iso). */
void cli_fmt_time_ns(uint64_t ns, bool iso, char *buf, size_t len);
uint64_t cli_now_ns(void);

/* The metrics of a sample as members of o, named as in `gpum status --json` (memory.{total,
 * used,free,reserved}, utilization.{gpu,memory}, temperature_c, power_w, clocks.{sm_mhz,
 * memory_mhz}, ecc.{corrected,uncorrected}); invalid metrics (or s NULL) are null. */
void cli_json_sample(json_t *o, const gpum_device_sample_t *s);

#endif /* GPUM_CLI_MONITOR_RUN_H */
