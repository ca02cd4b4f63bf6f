/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small helpers of the simulated driver: the thread-local error detail of the control API,
 * clocks, a per-thread random generator for the error-rate fault, and the size and duration
 * parsers used by the spec reader. libgpum_sim.so does not link libgpum (it must load into
 * programs that have their own copy, or none), hence these few duplicates.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim_internal.h"
#include "os_internal.h"

static _Thread_local char last_error[1024];

GPUM__SIM_API const char *gpum_sim_last_error(void) {
  return last_error;
}

int gpum__sim_err(int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return err;
}

uint64_t gpum__sim_now_ns(void) {
  return gpum__os_mono_ns();
}

void gpum__sim_sleep_ms(uint64_t ms) {
  struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
    ;
}

bool gpum__sim_valid_name(const char *name) {
  size_t len = name ? strlen(name) : 0;
  if (len == 0 || len > GPUM__SIM_NAME_MAX)
    return false;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)name[i];
    if (!isalnum(c) && c != '_' && c != '.' && c != '-')
      return false;
  }
  return true;
}

bool gpum__sim_strfit(char *dst, size_t len, const char *src) {
  size_t n = strlen(src);
  if (n >= len)
    return false;
  memcpy(dst, src, n + 1);
  return true;
}

double gpum__sim_rand01(void) {
  static _Thread_local uint64_t s;
  if (s == 0)
    s = gpum__sim_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&s;
  /* xorshift64* */
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  return (double)((s * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* Parses a non-negative decimal number with an optional fraction; *end gets the rest. */
static int parse_number(const char *s, double *out, const char **end) {
  while (isspace((unsigned char)*s))
    s++;
  if (!isdigit((unsigned char)*s) && *s != '.')
    return -1;
  char *e;
  errno = 0;
  double v = strtod(s, &e);
  if (e == s || errno || !isfinite(v) || v < 0)
    return -1;
  *out = v;
  *end = e;
  return 0;
}

int gpum__sim_parse_size(const char *s, uint64_t *out) {
  static const struct {
    const char *unit;
    int shift;
  } units[] = {{"", 0},    {"b", 0},    {"k", 10}, {"kb", 10}, {"kib", 10}, {"m", 20},
               {"mb", 20}, {"mib", 20}, {"g", 30}, {"gb", 30}, {"gib", 30}, {"t", 40},
               {"tb", 40}, {"tib", 40}, {"p", 50}, {"pb", 50}, {"pib", 50}};
  double v;
  const char *rest;
  if (!s || parse_number(s, &v, &rest) != 0)
    return -1;
  while (*rest == ' ')
    rest++;
  char unit[8] = "";
  size_t ul = strlen(rest);
  while (ul > 0 && isspace((unsigned char)rest[ul - 1]))
    ul--;
  if (ul >= sizeof unit)
    return -1;
  for (size_t i = 0; i < ul; i++)
    unit[i] = (char)tolower((unsigned char)rest[i]);
  unit[ul] = '\0';
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcmp(unit, units[i].unit) != 0)
      continue;
    double bytes = ldexp(v, units[i].shift);
    if (bytes >= 18446744073709551616.0)
      return -1;
    if (units[i].shift == 0 && v != floor(v))
      return -1;
    *out = (uint64_t)bytes;
    return 0;
  }
  return -1;
}

int gpum__sim_parse_duration_ms(const char *s, uint64_t *out) {
  double v;
  const char *rest;
  if (!s || parse_number(s, &v, &rest) != 0)
    return -1;
  double mult;
  if (!strcmp(rest, "") || !strcmp(rest, "s"))
    mult = 1000;
  else if (!strcmp(rest, "ms"))
    mult = 1;
  else if (!strcmp(rest, "m"))
    mult = 60000;
  else if (!strcmp(rest, "h"))
    mult = 3600000;
  else
    return -1;
  double ms = v * mult;
  if (ms >= 1e15)
    return -1;
  *out = (uint64_t)ms;
  return 0;
}
