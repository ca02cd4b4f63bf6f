/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the gpum subcommands: opening the device layer as the configuration says,
 * parsing device lists and intervals, and deciding whether to colour the output. Keeping them
 * here means every command reads the same options the same way.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/error.h>
#include <gpum/size.h>

#include "cli.h"

int cli_device_opts(const gpum_config_t *cfg, gpum_device_open_opts_t *opts) {
  gpum_device_open_opts_init(opts);
  const char *backend = gpum_config_get_string(cfg, "backend");
  if (backend && *backend && gpum_backend_parse(backend, &opts->backend) != 0)
    return gpum_error(GPUM_EINVAL, "invalid backend '%s' (expected auto, nvml or host)", backend);
  const char *lib = gpum_config_get_string(cfg, "nvml.library");
  opts->nvml_library = (lib && *lib) ? lib : NULL;
  int64_t retries = gpum_config_get_int(cfg, "retry.count");
  opts->retries = retries < 0 ? 0 : (retries > 100 ? 100 : (int)retries);
  uint64_t base = gpum_config_get_duration(cfg, "retry.base");
  opts->retry_base_ms = base > 60000 ? 60000 : (int)base;
  return 0;
}

int cli_open_session(const gpum_config_t *cfg, gpum_device_session_t **out) {
  return cli_open_session_as(cfg, GPUM_BACKEND_AUTO, out);
}

int cli_open_session_as(const gpum_config_t *cfg, gpum_backend_kind_t backend,
                        gpum_device_session_t **out) {
  gpum_device_open_opts_t opts;
  int rc = cli_device_opts(cfg, &opts);
  if (rc != 0)
    return rc;
  if (backend != GPUM_BACKEND_AUTO)
    opts.backend = backend;
  return gpum_device_open(&opts, out);
}

const char *cli_reason(int err) {
  const char *detail = gpum_last_error();
  return (detail && *detail) ? detail : gpum_strerror(err);
}

static int parse_uint(const char *s, const char *end, unsigned *out) {
  if (s == end || *s < '0' || *s > '9')
    return -1;
  unsigned long v = 0;
  for (const char *p = s; p < end; p++) {
    if (*p < '0' || *p > '9')
      return -1;
    v = v * 10 + (unsigned long)(*p - '0');
    if (v > 65535)
      return -1;
  }
  *out = (unsigned)v;
  return 0;
}

/* Inserts v into the ascending array idx[0..*n) unless present. */
static int add_index(unsigned v, unsigned *idx, size_t cap, size_t *n) {
  size_t i = 0;
  while (i < *n && idx[i] < v)
    i++;
  if (i < *n && idx[i] == v)
    return 0;
  if (*n >= cap)
    return gpum_error(GPUM_ERANGE, "too many devices in the list (at most %zu)", cap);
  memmove(idx + i + 1, idx + i, (*n - i) * sizeof *idx);
  idx[i] = v;
  (*n)++;
  return 0;
}

int cli_parse_device_list(const char *s, unsigned *idx, size_t cap, size_t *n, bool *all) {
  *n = 0;
  *all = true;
  if (!s || !*s)
    return 0;
  *all = false;
  const char *p = s;
  for (;;) {
    const char *comma = strchr(p, ',');
    const char *end = comma ? comma : p + strlen(p);
    const char *dash = memchr(p, '-', (size_t)(end - p));
    unsigned lo = 0, hi = 0;
    int bad = dash ? (parse_uint(p, dash, &lo) || parse_uint(dash + 1, end, &hi) || hi < lo)
                   : parse_uint(p, end, &lo);
    if (bad)
      return gpum_error(GPUM_EINVAL,
                        "invalid device list '%s' at '%.*s': expected indexes like 0,2 or 0-3", s,
                        (int)(end - p), p);
    if (!dash)
      hi = lo;
    for (unsigned v = lo; v <= hi; v++) {
      int rc = add_index(v, idx, cap, n);
      if (rc != 0)
        return rc;
    }
    if (!comma)
      break;
    p = comma + 1;
  }
  return 0;
}

bool cli_use_color(const gpum_config_t *cfg, FILE *out) {
  const char *mode = gpum_config_get_string(cfg, "color");
  if (mode && !strcmp(mode, "always"))
    return true;
  if (mode && !strcmp(mode, "never"))
    return false;
  const char *no_color = getenv("NO_COLOR");
  if (no_color && *no_color)
    return false;
  const char *term = getenv("TERM");
  if (term && !strcmp(term, "dumb"))
    return false;
  return isatty(fileno(out)) == 1;
}

int cli_parse_interval(const char *s, unsigned long *out_ms) {
  if (!s || !*s)
    return gpum_error(GPUM_EINVAL, "empty interval");
  char *end = NULL;
  errno = 0;
  double secs = strtod(s, &end);
  if (end != s && *end == '\0') {
    if (errno != 0 || !isfinite(secs) || secs <= 0 || secs > 86400)
      return gpum_error(GPUM_EINVAL, "invalid interval '%s': expected seconds in (0, 86400]", s);
    unsigned long ms = (unsigned long)llround(secs * 1000.0);
    *out_ms = ms ? ms : 1;
    return 0;
  }
  uint64_t ms = 0;
  if (gpum_duration_parse(s, &ms) != 0 || ms == 0 || ms > 86400000ull)
    return gpum_error(GPUM_EINVAL,
                      "invalid interval '%s': expected seconds (2, 0.5) or a duration (500ms)", s);
  *out_ms = (unsigned long)ms;
  return 0;
}

int cli_bad_option(const char *cmd, const char *opt) {
  fprintf(stderr, "gpum %s: unknown option '%s'\nRun 'gpum %s --help' for its options.\n", cmd, opt,
          cmd);
  return CLI_EXIT_USAGE;
}
