/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the gpum subcommands: opening the device layer as the configuration says,
 * parsing device lists and intervals, and deciding whether to colour the output. Keeping them
 * here means every command reads the same options the same way.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/error.h>
#include <gpum/size.h>

#include "cli.h"

int cli_open_session(const gpum_config_t *cfg, gpum_device_session_t **out) {
  return cli_open_session_as(cfg, GPUM_BACKEND_AUTO, out);
}

int cli_open_session_as(const gpum_config_t *cfg, gpum_backend_kind_t backend,
                        gpum_device_session_t **out) {
  gpum_device_open_opts_t opts;
  int rc = gpum_device_opts_from_config(cfg, &opts);
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

int cli_parse_uint(const char *s, unsigned long long lo, unsigned long long hi, bool pct,
                   unsigned long long *out) {
  if (!s || !*s || *s == '-' || *s == '+')
    return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (pct && *end == '%')
    end++;
  if (errno || end == s || *end || v < lo || v > hi)
    return -1;
  *out = v;
  return 0;
}

void cli_on_stop_signals(void (*handler)(int), bool hup) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  if (hup)
    sigaction(SIGHUP, &sa, NULL);
}
