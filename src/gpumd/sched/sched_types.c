/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Names and spellings of the scheduler's types: reservation states, lease kinds, timeout
 * actions, placement strategies, pressure levels and reservation ids ("r-<n>"), plus the
 * defaults and checks of the scheduler options. Shared by the scheduler, the ledger (which
 * stores states by name) and the protocol code. The names that are the protocol's come from
 * its tables (client/protocol_internal.h), which the client library maps its enums through.
 */
#include "sched.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gpum/error.h>

#include "client/protocol_internal.h"
#include "core/names_internal.h"
#include "utf8_internal.h"

#define STATE_NAME(n) [GPUMD_RESV_##n] = GPUM_PROTO_STATE_##n,
static const char *const state_names[] = {GPUM_PROTO_STATES(STATE_NAME)};
#undef STATE_NAME
#define LEASE_NAME(n) [GPUMD_LEASE_##n] = GPUM_PROTO_LEASE_##n,
static const char *const lease_names[] = {GPUM_PROTO_LEASES(LEASE_NAME)};
#undef LEASE_NAME
#define TIMEOUT_NAME(n) [GPUMD_ON_TIMEOUT_##n] = GPUM_PROTO_ON_TIMEOUT_##n,
static const char *const timeout_names[] = {GPUM_PROTO_ON_TIMEOUTS(TIMEOUT_NAME)};
#undef TIMEOUT_NAME
#define PRESSURE_NAME(n) [GPUMD_PRESSURE_##n] = GPUM_PROTO_PRESSURE_##n,
static const char *const pressure_names[] = {GPUM_PROTO_PRESSURES(PRESSURE_NAME)};
#undef PRESSURE_NAME
static const char *const placement_names[] = {"pack", "spread", "score"}; /* the config's */

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Index of s in names (case-insensitive), or -1. */
static int lookup(const char *const *names, size_t n, const char *s) {
  if (s == NULL)
    return -1;
  for (size_t i = 0; i < n; i++)
    if (names[i] != NULL && strcasecmp(names[i], s) == 0)
      return (int)i;
  return -1;
}

/* *out = the index of s in names; GPUM_EINVAL "unknown WHAT 's' (expected EXPECTED)" when it is
 * not one. */
static int parse_name(const char *const *names, size_t n, const char *s, const char *what,
                      const char *expected, int *out) {
  int i = lookup(names, n, s);
  if (i < 0)
    return gpum_error(GPUM_EINVAL, "unknown %s '%s' (expected %s)", what, s ? s : "(null)",
                      expected);
  *out = i;
  return 0;
}

const char *gpumd_resv_state_name(gpumd_resv_state_t s) {
  if (s == GPUMD_RESV_NEW)
    return "NEW";
  if ((int)s >= 0 && (size_t)s < COUNT(state_names))
    return state_names[s];
  return "UNKNOWN";
}

int gpumd_resv_state_parse(const char *s, gpumd_resv_state_t *out) {
  int i = lookup(state_names, COUNT(state_names), s);
  if (i < 0)
    return gpum_error(GPUM_EINVAL, "unknown reservation state '%s'", s ? s : "(null)");
  *out = (gpumd_resv_state_t)i;
  return 0;
}

bool gpumd_resv_state_final(gpumd_resv_state_t s) {
  return s == GPUMD_RESV_RELEASED || s == GPUMD_RESV_EXPIRED || s == GPUMD_RESV_CANCELLED ||
         s == GPUMD_RESV_FAILED;
}

const char *gpumd_lease_kind_name(gpumd_lease_kind_t k) {
  return GPUM__NAME_OF(lease_names, k, "unknown");
}

int gpumd_lease_kind_parse(const char *s, gpumd_lease_kind_t *out) {
  int i = 0;
  int rc = parse_name(lease_names, COUNT(lease_names), s, "lease", "connection, pid or ttl", &i);
  if (rc == 0)
    *out = (gpumd_lease_kind_t)i;
  return rc;
}

const char *gpumd_on_timeout_name(gpumd_on_timeout_t t) {
  return GPUM__NAME_OF(timeout_names, t, "unknown");
}

int gpumd_on_timeout_parse(const char *s, gpumd_on_timeout_t *out) {
  int i = 0;
  int rc =
      parse_name(timeout_names, COUNT(timeout_names), s, "timeout action", "reject or wait", &i);
  if (rc == 0)
    *out = (gpumd_on_timeout_t)i;
  return rc;
}

const char *gpumd_placement_name(gpumd_placement_t p) {
  return GPUM__NAME_OF(placement_names, p, "unknown");
}

int gpumd_placement_parse(const char *s, gpumd_placement_t *out) {
  int i = 0;
  int rc = parse_name(placement_names, COUNT(placement_names), s, "placement",
                      "pack, spread or score", &i);
  if (rc == 0)
    *out = (gpumd_placement_t)i;
  return rc;
}

const char *gpumd_pressure_name(gpumd_pressure_t p) {
  return GPUM__NAME_OF(pressure_names, p, "unknown");
}

char *gpumd_resv_id_format(uint64_t id, char *buf, size_t len) {
  size_t off = 0;
  if (len > 0) {
    buf[0] = '\0';
    gpumd_cat(buf, len, &off, "r-");
    gpumd_cat_u64(buf, len, &off, id);
  }
  return buf;
}

int gpumd_resv_id_parse(const char *s, uint64_t *out) {
  if (s == NULL || strncmp(s, "r-", 2) != 0 || s[2] < '1' || s[2] > '9')
    return gpum_error(GPUM_EINVAL, "bad reservation id '%s' (expected r-<n>)", s ? s : "(null)");
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s + 2, &end, 10);
  if (errno != 0 || *end != '\0')
    return gpum_error(GPUM_EINVAL, "bad reservation id '%s' (expected r-<n>)", s);
  *out = (uint64_t)v;
  return 0;
}

void gpumd_sched_request_init(gpumd_sched_request_t *req) {
  memset(req, 0, sizeof(*req));
  req->gpus = 1;
  req->lease = GPUMD_LEASE_CONNECTION;
  req->on_timeout = GPUMD_ON_TIMEOUT_REJECT;
}

void gpumd_sched_opts_init(gpumd_sched_opts_t *opts) {
  memset(opts, 0, sizeof(*opts));
  opts->memory_fraction = 0.95;
  opts->safety_margin = 256ull << 20;
  opts->max_concurrent_jobs = 0;
  opts->placement = GPUMD_PLACEMENT_PACK;
  opts->backfill = true;
  opts->backfill_bound_ns = 60ull * 1000000000ull;
  opts->pressure_high = 0.90;
  opts->pressure_critical = 0.97;
}

int gpumd_sched_opts_check(const gpumd_sched_opts_t *o) {
  if (!(o->memory_fraction > 0.0 && o->memory_fraction <= 1.0))
    return gpum_error(GPUM_EINVAL, "memory_fraction %g is out of range (0, 1]", o->memory_fraction);
  if ((int)o->placement < 0 || (size_t)o->placement >= COUNT(placement_names))
    return gpum_error(GPUM_EINVAL, "placement %d is not pack, spread or score", (int)o->placement);
  if (!(o->pressure_high > 0.0 && o->pressure_high <= 1.0))
    return gpum_error(GPUM_EINVAL, "pressure.high %g is out of range (0, 1]", o->pressure_high);
  if (!(o->pressure_critical >= o->pressure_high && o->pressure_critical <= 1.0))
    return gpum_error(GPUM_EINVAL, "pressure.critical %g must be in [pressure.high (%g), 1]",
                      o->pressure_critical, o->pressure_high);
  return 0;
}

/* The length of the run of 1 to 10 decimal digits at s, or 0 when there is none or it is
 * longer (a Slurm id is a 32-bit number). */
static size_t digit_run(const char *s) {
  size_t n = 0;
  while (s[n] >= '0' && s[n] <= '9')
    n++;
  return n <= 10 ? n : 0;
}

int gpumd_slurm_ids_check(const char *job, const char *step) {
  if (job == NULL && step == NULL)
    return 0;
  if (job == NULL || step == NULL)
    return gpum_error(GPUM_EINVAL, "a Slurm job needs both its job id and its step id");
  size_t n = digit_run(job);
  if (n > 0 && job[n] == '_') {
    size_t t = digit_run(job + n + 1);
    n = t > 0 ? n + 1 + t : 0;
  }
  if (n == 0 || job[n] != '\0')
    return gpum_error(GPUM_EINVAL, "the Slurm job id must be digits (\"12345\"), or an array "
                                   "task's (\"12345_7\"), each part at most 10 digits");
  static const char *const named[] = {"batch", "extern", "interactive"};
  for (size_t i = 0; i < COUNT(named); i++)
    if (strcmp(step, named[i]) == 0)
      return 0;
  n = digit_run(step);
  if (n == 0 || step[n] != '\0')
    return gpum_error(GPUM_EINVAL, "the Slurm step id must be at most 10 digits (\"0\") or one "
                                   "of batch, extern, interactive");
  return 0;
}
