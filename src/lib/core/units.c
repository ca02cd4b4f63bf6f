/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Figures with their units (gpum/size.h): a figure's unit is read from its name's suffix, as
 * Prometheus names carry theirs, and a value is written as people read it ("2.50 GiB",
 * "11.4 ms", "93.0%", "1.23k/s"). gpum top, gpum jobs, gpumd's /metrics and the Python
 * package all read units here, so a figure reads the same on every face.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <gpum/size.h>

typedef struct {
  const char *suffix;
  gpum_unit_t unit;
  double scale; /* to the unit's base: "_ms" is 1e-3 seconds */
} suffix_t;

/* Longest first where one ends another ("_per_s" before "_s" is not needed: "_s" is no suffix
 * of ours, but "_per_second" and "_seconds" both end in "seconds"). */
static const suffix_t suffixes[] = {
    {"_per_second", GPUM_UNIT_PER_SECOND, 1}, {"_per_s", GPUM_UNIT_PER_SECOND, 1},
    {"_bytes", GPUM_UNIT_BYTES, 1},           {"_seconds", GPUM_UNIT_SECONDS, 1},
    {"_ms", GPUM_UNIT_SECONDS, 1e-3},         {"_us", GPUM_UNIT_SECONDS, 1e-6},
    {"_ns", GPUM_UNIT_SECONDS, 1e-9},         {"_ratio", GPUM_UNIT_RATIO, 1},
    {"_percent", GPUM_UNIT_RATIO, 1e-2},
};

static bool ends_with(const char *s, size_t len, const char *suffix) {
  size_t n = strlen(suffix);
  return len > n && memcmp(s + len - n, suffix, n) == 0;
}

/* The suffix that gives name its unit, or NULL for a count. */
static const suffix_t *suffix_of(const char *name) {
  if (name == NULL)
    return NULL;
  size_t len = strlen(name);
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++)
    if (ends_with(name, len, suffixes[i].suffix))
      return &suffixes[i];
  return NULL;
}

gpum_unit_t gpum_figure_unit(const char *name, double *scale) {
  const suffix_t *sf = suffix_of(name);
  if (scale != NULL)
    *scale = sf ? sf->scale : 1;
  return sf ? sf->unit : GPUM_UNIT_COUNT;
}

size_t gpum_figure_stem_len(const char *name) {
  const suffix_t *sf = suffix_of(name);
  size_t len = name ? strlen(name) : 0;
  return sf ? len - strlen(sf->suffix) : len;
}

const char *gpum_unit_name(gpum_unit_t unit) {
  switch (unit) {
  case GPUM_UNIT_BYTES:
    return "bytes";
  case GPUM_UNIT_SECONDS:
    return "seconds";
  case GPUM_UNIT_RATIO:
    return "ratio";
  case GPUM_UNIT_PER_SECOND:
    return "per_second";
  case GPUM_UNIT_COUNT:
  default:
    return "";
  }
}

/* v with 3 significant digits, never in %g's exponent form: from 999.5 on (where %.3g would
 * write "1e+03") as a whole number. */
static void sig3(double v, const char *unit, char *buf, size_t len) {
  if (fabs(v) >= 999.5)
    snprintf(buf, len, "%.0f%s", v, unit);
  else
    snprintf(buf, len, "%.3g%s", v, unit);
}

/* 3 significant digits with an SI prefix past 9999 ("12.3k", "4.56M"); whole numbers below
 * 10,000 as they are ("42", "9999"), fractions with 3 significant digits ("2.35", "0.125"),
 * or whole from 1000 on ("1235"). */
static void format_count(double v, const char *unit, char *buf, size_t len) {
  static const char *const prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  double a = fabs(v);
  if (a < 10000) {
    if (a == floor(a) || a >= 999.5)
      snprintf(buf, len, "%.0f%s", v, unit);
    else
      snprintf(buf, len, "%.3g%s", v, unit);
    return;
  }
  unsigned i = 0;
  while (i < 6 && a >= 999.5) {
    a /= 1000;
    v /= 1000;
    i++;
  }
  snprintf(buf, len, "%.3g%s%s", v, prefixes[i], unit);
}

static void format_seconds(double s, char *buf, size_t len) {
  double a = fabs(s);
  if (a == 0)
    snprintf(buf, len, "0 s");
  else if (a < 1e-6)
    sig3(s * 1e9, " ns", buf, len);
  else if (a < 1e-3)
    sig3(s * 1e6, " us", buf, len);
  else if (a < 1)
    sig3(s * 1e3, " ms", buf, len);
  else if (a < 100)
    sig3(s, " s", buf, len);
  else {
    char d[GPUM_DURATION_BUFSZ];
    gpum_duration_format((uint64_t)(a * 1000 + 0.5) / 1000 * 1000, d, sizeof d); /* whole s */
    snprintf(buf, len, "%s%s", s < 0 ? "-" : "", d);
  }
}

char *gpum_value_format(gpum_unit_t unit, double value, char *buf, size_t len) {
  if (buf == NULL || len == 0)
    return buf;
  if (!isfinite(value)) {
    snprintf(buf, len, "%s", isnan(value) ? "nan" : value > 0 ? "inf" : "-inf");
    return buf;
  }
  switch (unit) {
  case GPUM_UNIT_BYTES:
    if (value >= 0 && value < 18446744073709551616.0) {
      gpum_size_format((uint64_t)(value + 0.5), buf, len);
      break;
    }
    format_count(value, " B", buf, len);
    break;
  case GPUM_UNIT_SECONDS:
    format_seconds(value, buf, len);
    break;
  case GPUM_UNIT_RATIO:
    snprintf(buf, len, "%.1f%%", value * 100);
    break;
  case GPUM_UNIT_PER_SECOND:
    format_count(value, "/s", buf, len);
    break;
  case GPUM_UNIT_COUNT:
  default:
    format_count(value, "", buf, len);
    break;
  }
  return buf;
}

char *gpum_figure_format(const char *name, double value, char *buf, size_t len) {
  double scale;
  gpum_unit_t unit = gpum_figure_unit(name, &scale);
  return gpum_value_format(unit, value * scale, buf, len);
}
