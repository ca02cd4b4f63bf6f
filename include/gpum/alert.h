/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Alert rules: conditions on device metrics, Xid events and health states that raise and clear
 * alerts, with hysteresis, per-device state, callbacks and a bounded history.
 *
 * Rule syntax (one rule per string; keywords are case-insensitive):
 *
 *   METRIC OP THRESHOLD [for DURATION] LEVEL [clear THRESHOLD] [devices LIST]
 *   xid (any | critical | N[,N...]) LEVEL [devices LIST]
 *   health (== | !=) STATE [for DURATION] LEVEL [devices LIST]
 *
 * After the condition, the clauses (LEVEL, which is required, and the optional for, clear and
 * devices) may come in any order, each at most once; xid rules take no for or clear, health
 * rules no clear.
 *
 *   memory_used_pct > 90 for 30s WARNING clear 85
 *   temperature > slowdown-5 for 10s WARNING clear slowdown-8
 *   power > 300W for 1m INFO devices 0,2-3
 *   xid any auto
 *   health == ERROR CRITICAL
 *
 * METRIC is a device-layer metric by its gpum_metric_name ("memory_used", "temperature",
 * "power", "utilization_gpu", ...) or a derived one: memory_used_pct (used / total x 100),
 * memory_free_pct, power_pct (power / the device's power limit x 100). OP is one of > >= < <= ==
 * !=. THRESHOLD is a number, optionally with the metric's unit: a size for byte metrics ("70GiB"),
 * W or mW for power, C for temperature, % for percentages. For temperature, THRESHOLD may be
 * symbolic, resolved per device from gpum_device_info_t: slowdown, slowdown-N, slowdown+N,
 * shutdown, shutdown-N, shutdown+N (a device without that threshold is not checked by the rule).
 * DURATION as gpum_duration_parse ("500ms", "30s", "5m"); default 0: fire on the first sample.
 * LEVEL is INFO, WARNING, ERROR or CRITICAL; for xid rules also "auto": CRITICAL for the Xids
 * the table (xid.h) marks critical, ERROR for the others. `xid critical` matches only those.
 * STATE is AVAILABLE, BUSY, ERROR or DISABLED. LIST is comma-separated device indices and
 * ranges ("0,2-3"); without it the rule applies to every device. Devices are 0..63.
 *
 * Semantics. Time comes only from the now_ns arguments of the feed calls (never the clock), so
 * that the engine is deterministic; pass one clock, non-decreasing (the monitor passes the
 * sample's CLOCK_REALTIME timestamp, so history times are wall-clock times).
 * - A metric rule fires for a device when its condition has held on every sample of that device
 *   for at least DURATION (from the first sample where it held to the current one). A sample
 *   where the metric is invalid, or the condition is false, restarts the wait.
 * - An active alert clears, without a duration, when the clear condition holds: for > and >=
 *   rules value < clear threshold; for < and <= rules value > clear threshold; == clears on !=
 *   and != on ==. The clear threshold defaults to the threshold itself; it must not lie on the
 *   firing side of the threshold (a '>' rule's clear threshold is <= its threshold: a parse
 *   error when both are numbers or both relative to the same base; when they resolve so on a
 *   device, the threshold itself is used as the clear threshold there).
 * - One active alert per (rule, device): a rule that holds does not fire again until cleared.
 * - Xid rules fire once per matching Xid event; the alert is an event: active for the Xid
 *   window (opts.xid_window_ms, default 5 min, as dcgm-exporter's Xid window), then it clears
 *   by itself (its message gains "; expired"). A repeat of the same Xid on the same device
 *   while it is active refreshes the window and counts the repeat (gpum_alert_t.repeats)
 *   instead of firing again. A window of 0 makes Xid alerts history-only: fired and cleared in
 *   the same call. Every alert stays in the history either way.
 * - Health rules evaluate the last state fed with gpum_alert_engine_feed_health; with a
 *   DURATION the state must have lasted that long (checked on every feed call for the device
 *   and on gpum_alert_engine_advance). They clear when the state no longer matches.
 *
 * Threads: every function is thread-safe (one mutex per engine). Callbacks are called on the
 * thread that fed the engine, after the engine's mutex is released, in the order the alerts
 * fired or cleared within that feed (callbacks of feeds on different threads may interleave);
 * a callback may call engine functions (not destroy).
 */
#ifndef GPUM_ALERT_H
#define GPUM_ALERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/device.h>
#include <gpum/options.h>
#include <gpum/xid.h>

#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GPUM_ALERT_INFO = 0,
  GPUM_ALERT_WARNING = 1,
  GPUM_ALERT_ERROR = 2,
  GPUM_ALERT_CRITICAL = 3,
} gpum_alert_level_t;

/* "INFO", "WARNING", "ERROR", "CRITICAL" ("UNKNOWN" for other values). */
GPUM_API const char *gpum_alert_level_name(gpum_alert_level_t level);
/* Case-insensitive. Returns 0 or GPUM_EINVAL (detail names the bad word). */
GPUM_API int gpum_alert_level_parse(const char *s, gpum_alert_level_t *out);

typedef enum {
  GPUM_ALERT_FIRED = 1,   /* active */
  GPUM_ALERT_CLEARED = 2, /* no longer active */
} gpum_alert_state_t;

#define GPUM_ALERT_RULE_LEN 160
#define GPUM_ALERT_METRIC_LEN 32
#define GPUM_ALERT_MSG_LEN 256

typedef struct {
  uint64_t id;     /* unique in the engine, from 1; the fire and the clear share it */
  unsigned rule;   /* the rule's index (gpum_alert_engine_add_rule's *rule_index) */
  unsigned device; /* device index */
  gpum_alert_level_t level;
  gpum_alert_state_t state;
  char rule_text[GPUM_ALERT_RULE_LEN]; /* the rule as normalised by the parser */
  char metric[GPUM_ALERT_METRIC_LEN];  /* "temperature", "memory_used_pct", "xid", "health" */
  double value;                        /* value that fired (Xid number, health state) */
  double threshold;                    /* resolved for this device */
  double clear_threshold;              /* resolved for this device */
  double clear_value;                  /* value when cleared (metric rules); else 0 */
  uint64_t xid;                        /* Xid rules: the Xid; else 0 */
  unsigned repeats;                    /* Xid rules: further events in the window */
  uint64_t since_ns;                   /* first time the condition held */
  uint64_t fired_ns;
  uint64_t cleared_ns; /* 0 while active */
  /* "GPU 2: temperature 86 °C above 82 °C (slowdown 87 °C - 5) for 10s". Clears append
   * "; cleared at 79 °C" (or "; expired" for Xid alerts). */
  char message[GPUM_ALERT_MSG_LEN];
} gpum_alert_t;

/* Called on fire (alert->state == GPUM_ALERT_FIRED) and on clear (GPUM_ALERT_CLEARED). The
 * alert is valid only during the call. */
typedef void (*gpum_alert_fn)(const gpum_alert_t *alert, void *arg);

typedef struct {
  size_t history_cap;     /* alerts kept in the history (default 256, at least 1) */
  uint64_t xid_window_ms; /* how long an Xid alert stays active (default 300000 = 5 min) */
} gpum_alert_engine_opts_t;

GPUM_API void gpum_alert_engine_opts_init(gpum_alert_engine_opts_t *opts);
/* The defaults, then alerts.history and alerts.xid_window from cfg. */
GPUM_API void gpum_alert_engine_opts_from_config(gpum_alert_engine_opts_t *opts,
                                                 const gpum_config_t *cfg);

typedef struct gpum_alert_engine gpum_alert_engine_t;

/* Creates an engine without rules (opts NULL: defaults). Returns 0, GPUM_EINVAL or
 * GPUM_ENOMEM. Caller frees with gpum_alert_engine_destroy (NULL is fine). */
GPUM_API int gpum_alert_engine_create(const gpum_alert_engine_opts_t *opts,
                                      gpum_alert_engine_t **out);
GPUM_API void gpum_alert_engine_destroy(gpum_alert_engine_t *e);

/* Parses one rule and adds it. Returns 0 (and its index in *rule_index, which may be NULL) or
 * GPUM_EPARSE with a detail naming the column and what was expected ("column 13: unknown
 * level 'WARN' (expected INFO, WARNING, ERROR or CRITICAL)"), GPUM_EINVAL for NULL,
 * GPUM_ENOSPC past GPUM_ALERT_MAX_RULES, GPUM_ENOMEM. Nothing is added on error. */
#define GPUM_ALERT_MAX_RULES 256
#define GPUM_ALERT_MAX_DEVICES 64
GPUM_API int gpum_alert_engine_add_rule(gpum_alert_engine_t *e, const char *text,
                                        unsigned *rule_index);

/* Validates a rule without an engine; writes its normalised form into buf (may be NULL).
 * Returns 0 or the errors of gpum_alert_engine_add_rule. */
GPUM_API int gpum_alert_rule_check(const char *text, char *buf, size_t len);

/* Adds several rules separated by ';' or newlines; blank parts and '#' comments (to the end
 * of the line) are skipped. origin names the source in errors ("alerts.rules", a file name):
 * "alerts.rules: rule 2: column 5: ...". All-or-nothing. Returns as add_rule. */
GPUM_API int gpum_alert_engine_add_rules(gpum_alert_engine_t *e, const char *text,
                                         const char *origin);

/* Reads a rules file (one rule per line, '#' comments, blank lines) and adds its rules,
 * all-or-nothing; errors name the file and line. GPUM_ENOENT / GPUM_EIO when it can't be
 * read. */
GPUM_API int gpum_alert_engine_load_file(gpum_alert_engine_t *e, const char *path);

/* The default rules (GPUM_ALERT_DEFAULT_RULES, in this order):
 *   memory_used_pct > 90 for 10s WARNING clear 85
 *   temperature > slowdown-5 for 10s WARNING clear slowdown-8
 *   temperature > shutdown-5 for 5s CRITICAL clear shutdown-8
 *   xid any auto
 *   health == ERROR CRITICAL */
GPUM_API extern const char *const gpum_alert_default_rules[];
GPUM_API int gpum_alert_engine_add_default_rules(gpum_alert_engine_t *e);

/* Configures the engine from cfg: alerts.defaults (bool: add the default rules first),
 * alerts.rules (rules separated by ';'), alerts.file (a rules file). Errors as add_rules. */
GPUM_API int gpum_alert_engine_configure(gpum_alert_engine_t *e, const gpum_config_t *cfg);

GPUM_API size_t gpum_alert_engine_rule_count(gpum_alert_engine_t *e);
/* Copies rule i's normalised text into buf. Returns 0, GPUM_ENOENT (bad index), GPUM_ENOSPC
 * (truncated). */
GPUM_API int gpum_alert_engine_rule_text(gpum_alert_engine_t *e, unsigned i, char *buf, size_t len);

/* Registers fn (called on fire and clear). Returns 0, GPUM_EINVAL (fn NULL) or GPUM_ENOSPC
 * (more than 16 callbacks). */
GPUM_API int gpum_alert_engine_add_callback(gpum_alert_engine_t *e, gpum_alert_fn fn, void *arg);

/* Static info of a device, needed by power_pct (power_limit_mw), memory_used_pct (when the
 * sample lacks memory_total) and the symbolic temperature thresholds. Copied. Devices without
 * info skip the rules that need it. */
GPUM_API void gpum_alert_engine_set_device_info(gpum_alert_engine_t *e, unsigned device,
                                                const gpum_device_info_t *info);

/* Feeds: evaluate the rules for that device at time now_ns and fire/clear, calling the
 * callbacks before returning. Devices >= GPUM_ALERT_MAX_DEVICES are ignored. */
GPUM_API void gpum_alert_engine_feed_sample(gpum_alert_engine_t *e, unsigned device,
                                            const gpum_device_sample_t *s, uint64_t now_ns);
GPUM_API void gpum_alert_engine_feed_xid(gpum_alert_engine_t *e, unsigned device, uint64_t xid,
                                         uint64_t now_ns);
/* state: a gpum_health_t (monitor.h). reason may be NULL; it is quoted in the message. */
GPUM_API void gpum_alert_engine_feed_health(gpum_alert_engine_t *e, unsigned device,
                                            int state /* gpum_health_t from monitor.h */,
                                            const char *reason, uint64_t now_ns);
/* A condition the caller judges itself (no rule): name (at most GPUM_ALERT_METRIC_LEN - 1
 * bytes, e.g. "overcommitted") on device holds or not. The first feed that says it holds fires
 * one alert (rule GPUM_ALERT_RULE_CONDITION, metric and rule_text name, level, message); later
 * feeds while it holds update its message in place (no callback); the first that says it no
 * longer holds clears it ("; cleared" appended). message may be NULL while it does not hold. */
#define GPUM_ALERT_RULE_CONDITION 0xffffffffu
GPUM_API void gpum_alert_engine_feed_condition(gpum_alert_engine_t *e, unsigned device,
                                               const char *name, bool holds,
                                               gpum_alert_level_t level, const char *message,
                                               uint64_t now_ns);
/* Lets time pass without a feed: expires Xid alerts and fires health rules with a duration. */
GPUM_API void gpum_alert_engine_advance(gpum_alert_engine_t *e, uint64_t now_ns);

/* Copies the active alerts (oldest first) into out[0..cap) and their number into *count.
 * Returns 0 or GPUM_ENOSPC when cap < *count (the first cap are filled). out may be NULL when
 * cap is 0. */
GPUM_API int gpum_alert_engine_active(gpum_alert_engine_t *e, gpum_alert_t *out, size_t cap,
                                      size_t *count);
/* The history: every alert fired, still active or cleared, oldest first, at most history_cap
 * (older ones are dropped). Same contract as gpum_alert_engine_active. */
GPUM_API int gpum_alert_engine_history(gpum_alert_engine_t *e, gpum_alert_t *out, size_t cap,
                                       size_t *count);
/* Counters since creation. */
typedef struct {
  uint64_t fired, cleared, dropped_from_history;
} gpum_alert_counters_t;
GPUM_API void gpum_alert_engine_counters(gpum_alert_engine_t *e, gpum_alert_counters_t *out);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_ALERT_H */
