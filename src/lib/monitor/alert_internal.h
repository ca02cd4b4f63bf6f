/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the alert engine shared by the rule parser (alert_rule.c), the engine
 * (alert.c), rule loading (alert_load.c) and their unit tests: the parsed form of a rule and
 * how a rule's value and thresholds are obtained for one device.
 */
#ifndef GPUM_ALERT_INTERNAL_H
#define GPUM_ALERT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/alert.h>
#include <gpum/device.h>

typedef enum {
  GPUM__RULE_METRIC = 0,
  GPUM__RULE_XID = 1,
  GPUM__RULE_HEALTH = 2,
} gpum__rule_kind_t;

typedef enum {
  GPUM__OP_GT = 0,
  GPUM__OP_GE,
  GPUM__OP_LT,
  GPUM__OP_LE,
  GPUM__OP_EQ,
  GPUM__OP_NE,
} gpum__alert_op_t;

/* Metrics a rule may watch: the device metrics (gpum_metric_t) and these derived ones. */
enum {
  GPUM__AM_MEMORY_USED_PCT = GPUM_METRIC_COUNT,
  GPUM__AM_MEMORY_FREE_PCT,
  GPUM__AM_POWER_PCT,
  GPUM__AM_COUNT
};

typedef enum {
  GPUM__THR_ABS = 0,  /* value */
  GPUM__THR_SLOWDOWN, /* the device's temp_slowdown_c + value */
  GPUM__THR_SHUTDOWN, /* the device's temp_shutdown_c + value */
} gpum__thr_base_t;

typedef struct {
  gpum__thr_base_t base;
  double value;  /* absolute value in the metric's unit, or the offset from base */
  char text[32]; /* as written, lower-cased ("slowdown-5", "70gib") */
} gpum__alert_thr_t;

#define GPUM__RULE_MAX_XIDS 32

typedef struct {
  gpum__rule_kind_t kind;
  int metric; /* gpum_metric_t or GPUM__AM_* (metric rules) */
  gpum__alert_op_t op;
  gpum__alert_thr_t threshold;
  bool has_clear;
  gpum__alert_thr_t clear;
  uint64_t for_ms;
  gpum_alert_level_t level;
  bool level_auto; /* xid rules: CRITICAL for critical Xids, else ERROR */
  bool has_devices;
  uint64_t devices; /* bit per device index */
  bool xid_any, xid_critical;
  size_t xid_count;
  uint64_t xids[GPUM__RULE_MAX_XIDS];
  int health_state;               /* health rules: the gpum_health_t compared with */
  char text[GPUM_ALERT_RULE_LEN]; /* normalised */
} gpum__alert_rule_t;

/* Parses text into *out. Returns 0 or GPUM_EPARSE / GPUM_EINVAL with a detail
 * "column N: ..." (no rule text: the caller adds context). */
int gpum__alert_rule_parse(const char *text, gpum__alert_rule_t *out);

/* The rule's metric name ("memory_used_pct", "xid", "health"). */
const char *gpum__alert_metric_name(const gpum__alert_rule_t *r);

/* The watched value of a metric rule for one device: false when it is unknown (metric invalid,
 * or derived from info the engine does not have; info may be NULL). */
bool gpum__alert_value(int metric, const gpum_device_sample_t *s, const gpum_device_info_t *info,
                       double *v);

/* Resolves a threshold for a device: false when it needs info the device lacks. */
bool gpum__alert_thr_resolve(const gpum__alert_thr_t *t, const gpum_device_info_t *info, double *v);

/* Formats value of metric in its unit ("86 °C", "93.4%", "250 W", "7.50 GiB"). Returns buf. */
char *gpum__alert_format_value(int metric, double v, char *buf, size_t len);

/* Adds already parsed rules to the engine, all-or-nothing. Returns 0, GPUM_ENOSPC or
 * GPUM_ENOMEM. */
int gpum__alert_engine_add_parsed(gpum_alert_engine_t *e, const gpum__alert_rule_t *rules,
                                  size_t n);

#endif /* GPUM_ALERT_INTERNAL_H */
