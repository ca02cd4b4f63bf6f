/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sizes and durations as people write them, parsed exactly.
 *
 * A size is a decimal number with an optional fraction and an optional binary unit; a duration
 * is one or more such numbers each followed by a unit (d, h, m, s, ms). Parsing never goes
 * through floating point: the integer part is accumulated with overflow checks and the fraction
 * is scaled by the unit with integer arithmetic, so "15.9999EiB" gives the exact floor and
 * "16EiB" is reported as overflow rather than rounded. Output is IEC for sizes and the shortest
 * exact unit string for durations.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <gpum/error.h>
#include <gpum/size.h>

__extension__ typedef unsigned __int128 u128;

/* A number as written: the integer part (checked for overflow) and the fraction's digits. */
typedef struct {
  uint64_t whole;
  bool whole_overflow;
  const char *frac; /* first fraction digit, or NULL */
  size_t frac_len;
  const char *end; /* first character after the number */
} number_t;

/* Reads [0-9]+(\.[0-9]+)? at s. Returns false when s does not start with a digit or a '.' is
 * not followed by a digit. */
static bool scan_number(const char *s, number_t *n) {
  memset(n, 0, sizeof *n);
  if (*s < '0' || *s > '9')
    return false;
  for (; *s >= '0' && *s <= '9'; s++) {
    unsigned d = (unsigned)(*s - '0');
    if (n->whole > (UINT64_MAX - d) / 10)
      n->whole_overflow = true;
    else
      n->whole = n->whole * 10 + d;
  }
  if (*s == '.') {
    s++;
    if (*s < '0' || *s > '9')
      return false;
    n->frac = s;
    while (*s >= '0' && *s <= '9')
      s++;
    n->frac_len = (size_t)(s - n->frac);
  }
  n->end = s;
  return true;
}

/* floor(0.<digits> * 2^shift), exactly. The fraction is doubled shift times as a decimal digit
 * string; the carries out of the first digit are the integer part of the product. Digits past
 * the 64th cannot change the result: k/2^shift (shift <= 60) has at most 60 fraction digits. */
static uint64_t frac_times_pow2(const char *digits, size_t len, unsigned shift) {
  unsigned char d[64];
  uint64_t carry_total = 0;
  if (len > sizeof d)
    len = sizeof d;
  for (size_t i = 0; i < len; i++)
    d[i] = (unsigned char)(digits[i] - '0');
  for (unsigned step = 0; step < shift; step++) {
    unsigned carry = 0;
    for (size_t i = len; i-- > 0;) {
      unsigned v = d[i] * 2u + carry;
      d[i] = (unsigned char)(v % 10);
      carry = v / 10;
    }
    carry_total = carry_total * 2 + carry;
  }
  return carry_total;
}

/* floor(0.<digits> * mult) for mult < 2^32, exactly. Only the first 18 digits are used: an
 * integer k/mult with mult = 2^a*3^b*5^c has at most max(a, c) < 18 fraction digits when it is
 * finite, so a longer fraction cannot reach the next integer. */
static uint64_t frac_times(const char *digits, size_t len, uint64_t mult) {
  uint64_t f = 0, scale = 1;
  if (len > 18)
    len = 18;
  for (size_t i = 0; i < len; i++) {
    f = f * 10 + (uint64_t)(digits[i] - '0');
    scale *= 10;
  }
  return (uint64_t)(((u128)f * mult) / scale);
}

typedef struct {
  const char *name;
  unsigned shift;
} size_unit_t;

static const size_unit_t size_units[] = {
    {"", 0},     {"B", 0},   {"K", 10},   {"KB", 10},  {"KiB", 10}, {"M", 20},   {"MB", 20},
    {"MiB", 20}, {"G", 30},  {"GB", 30},  {"GiB", 30}, {"T", 40},   {"TB", 40},  {"TiB", 40},
    {"P", 50},   {"PB", 50}, {"PiB", 50}, {"E", 60},   {"EB", 60},  {"EiB", 60},
};

static const size_unit_t *find_size_unit(const char *u) {
  for (size_t i = 0; i < sizeof size_units / sizeof size_units[0]; i++)
    if (!strcasecmp(u, size_units[i].name))
      return &size_units[i];
  return NULL;
}

int gpum_size_parse(const char *s, uint64_t *out) {
  number_t n;
  if (s == NULL || *s == '\0')
    return gpum_error(GPUM_EINVAL, "empty size (expected e.g. 8GiB, 512MiB, 4096)");
  if (*s == '-')
    return gpum_error(GPUM_EINVAL, "negative size '%s'", s);
  if (!scan_number(s, &n))
    return gpum_error(GPUM_EINVAL,
                      "'%s' is not a size (expected a number and an optional unit: 8GiB, "
                      "1.5TiB, 512MiB, 4k)",
                      s);
  const char *u = n.end;
  while (*u == ' ')
    u++; /* "8.00 GiB", as gpum_size_format writes it, reads back */
  if (u != n.end && *u == '\0')
    return gpum_error(GPUM_EINVAL, "trailing space in size '%s'", s);
  const size_unit_t *unit = find_size_unit(u);
  if (unit == NULL)
    return gpum_error(GPUM_EINVAL,
                      "unknown unit '%s' in size '%s' (use B, KiB, MiB, GiB, TiB, PiB or EiB)", u,
                      s);
  if (n.frac != NULL && unit->shift == 0)
    return gpum_error(GPUM_EINVAL, "size '%s' is a fraction of a byte: give a unit such as MiB", s);
  uint64_t frac = n.frac ? frac_times_pow2(n.frac, n.frac_len, unit->shift) : 0;
  if (n.whole_overflow || (unit->shift > 0 && n.whole > (UINT64_MAX >> unit->shift)) ||
      (n.whole << unit->shift) > UINT64_MAX - frac)
    return gpum_error(GPUM_ERANGE, "size '%s' is too large (the maximum is 16 EiB minus 1 byte)",
                      s);
  *out = (n.whole << unit->shift) + frac;
  return 0;
}

char *gpum_size_format(uint64_t bytes, char *buf, size_t len) {
  static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (buf == NULL || len == 0)
    return buf;
  if (bytes < 1024) {
    snprintf(buf, len, "%u B", (unsigned)bytes);
    return buf;
  }
  unsigned i = 1;
  while (i < 6 && bytes >= (UINT64_C(1) << (10 * (i + 1))))
    i++;
  /* Hundredths of the unit, rounded to nearest; 1023.996 KiB becomes 1.00 MiB. */
  unsigned shift = 10 * i;
  u128 hundredths = (((u128)bytes * 100) + ((u128)1 << (shift - 1))) >> shift;
  if (hundredths >= 102400 && i < 6) {
    i++;
    shift += 10;
    hundredths = (((u128)bytes * 100) + ((u128)1 << (shift - 1))) >> shift;
  }
  snprintf(buf, len, "%u.%02u %s", (unsigned)(hundredths / 100), (unsigned)(hundredths % 100),
           names[i]);
  return buf;
}

typedef struct {
  const char *name;
  uint64_t ms;
} dur_unit_t;

/* Longest names first so that "ms" is not read as "m" followed by junk. */
static const dur_unit_t dur_units[] = {
    {"d", 86400000}, {"h", 3600000}, {"ms", 1}, {"m", 60000}, {"s", 1000},
};

/* The unit at s, with its rank (0 = days ... 4 = ms) for the ordering check. */
static const dur_unit_t *scan_dur_unit(const char *s, int *rank, size_t *len) {
  static const int ranks[] = {0, 1, 4, 2, 3};
  for (size_t i = 0; i < sizeof dur_units / sizeof dur_units[0]; i++) {
    size_t l = strlen(dur_units[i].name);
    if (!strncmp(s, dur_units[i].name, l)) {
      *rank = ranks[i];
      *len = l;
      return &dur_units[i];
    }
  }
  return NULL;
}

static int dur_add(const char *s, uint64_t *total, const number_t *n, uint64_t mult) {
  uint64_t frac = n->frac ? frac_times(n->frac, n->frac_len, mult) : 0;
  if (n->whole_overflow || n->whole > (UINT64_MAX - frac) / mult ||
      n->whole * mult + frac > UINT64_MAX - *total)
    return gpum_error(GPUM_ERANGE, "duration '%s' is too long", s);
  *total += n->whole * mult + frac;
  return 0;
}

int gpum_duration_parse(const char *s, uint64_t *out_ms) {
  uint64_t total = 0;
  int last_rank = -1;
  number_t n;

  if (s == NULL || *s == '\0')
    return gpum_error(GPUM_EINVAL, "empty duration (expected e.g. 500ms, 30s, 5m, 1h30m)");
  if (*s == '-')
    return gpum_error(GPUM_EINVAL, "negative duration '%s'", s);
  if (scan_number(s, &n) && *n.end == '\0') { /* a bare number counts seconds */
    int err = dur_add(s, &total, &n, 1000);
    if (err)
      return err;
    *out_ms = total;
    return 0;
  }
  for (const char *p = s; *p != '\0';) {
    int rank;
    size_t ulen;
    if (!scan_number(p, &n))
      return gpum_error(GPUM_EINVAL,
                        "'%s' is not a duration (expected e.g. 500ms, 30s, 5m, 1h30m, 2d)", s);
    const dur_unit_t *unit = scan_dur_unit(n.end, &rank, &ulen);
    if (unit == NULL && *n.end == '\0')
      return gpum_error(GPUM_EINVAL,
                        "duration '%s': the last number needs a unit (d, h, m, s "
                        "or ms)",
                        s);
    if (unit == NULL)
      return gpum_error(GPUM_EINVAL,
                        "unknown unit at '%s' in duration '%s' (use d, h, m, s or "
                        "ms)",
                        n.end, s);
    if (rank <= last_rank)
      return gpum_error(GPUM_EINVAL,
                        "duration '%s': units must go from largest to smallest, each once", s);
    int err = dur_add(s, &total, &n, unit->ms);
    if (err)
      return err;
    last_rank = rank;
    p = n.end + ulen;
  }
  *out_ms = total;
  return 0;
}

char *gpum_duration_format(uint64_t ms, char *buf, size_t len) {
  static const dur_unit_t order[] = {
      {"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1},
  };
  size_t used = 0;
  if (buf == NULL || len == 0)
    return buf;
  buf[0] = '\0';
  if (ms == 0) {
    snprintf(buf, len, "0s");
    return buf;
  }
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
    uint64_t q = ms / order[i].ms;
    if (q == 0)
      continue;
    ms -= q * order[i].ms;
    int w = snprintf(buf + used, len - used, "%llu%s", (unsigned long long)q, order[i].name);
    if (w < 0 || (size_t)w >= len - used)
      break; /* truncated, still NUL-terminated */
    used += (size_t)w;
  }
  return buf;
}
