/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for size and duration parsing and printing: the accepted spellings, exact values
 * for large and fractional inputs, every rejection (empty, negative, junk, unknown unit,
 * fraction of a byte, overflow, NaN/inf, stray spaces) with the output left untouched, IEC
 * formatting with rounding and truncation, and the duration round trip.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/size.h>

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define TiB (UINT64_C(1) << 40)
#define PiB (UINT64_C(1) << 50)
#define EiB (UINT64_C(1) << 60)

typedef struct {
  const char *text;
  uint64_t value;
} good_t;

static void test_size_accepts(void **state) {
  (void)state;
  static const good_t cases[] = {
      {"0", 0},
      {"512", 512},
      {"512B", 512},
      {"512b", 512},
      {"4k", 4 * KiB},
      {"4K", 4 * KiB},
      {"4KB", 4 * KiB},
      {"4KiB", 4 * KiB},
      {"4kib", 4 * KiB},
      {"8192MiB", 8 * GiB},
      {"8G", 8 * GiB},
      {"8GB", 8 * GiB},
      {"8GiB", 8 * GiB},
      {"8gib", 8 * GiB},
      {"1.5TiB", TiB + TiB / 2},
      {"2P", 2 * PiB},
      {"1EiB", EiB},
      {"0.5KiB", 512},
      {"1.0009765625KiB", 1025},                      /* exact fraction */
      {"0.0001KiB", 0},                               /* rounded down */
      {"8.00 GiB", 8 * GiB},                          /* gpum_size_format's output reads back */
      {"18446744073709551615", UINT64_MAX},           /* the largest */
      {"15.9999EiB", UINT64_C(18446628781559090931)}, /* floor(15.9999 * 2^60) */
      {"15.999999999999999999EiB", UINT64_MAX - 1},
      {"15.99999999999999999999EiB", UINT64_MAX}, /* floor is the largest value */
      {"0.000000000000000000867361737988403547205962240695953369140625EiB",
       1}, /* 2^-60 EiB: more digits than a naive 19-digit cut keeps */
      {"007G", 7 * GiB},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint64_t v = 12345;
    int err = gpum_size_parse(cases[i].text, &v);
    if (err)
      fail_msg("'%s' rejected: %s", cases[i].text, gpum_last_error());
    if (v != cases[i].value)
      fail_msg("'%s' gave %llu, expected %llu", cases[i].text, (unsigned long long)v,
               (unsigned long long)cases[i].value);
  }
}

typedef struct {
  const char *text;
  int err;
  const char *detail_part;
} bad_t;

static void check_bad(int (*parse)(const char *, uint64_t *), const bad_t *cases, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint64_t v = 777;
    gpum_error_clear();
    int err = parse(cases[i].text, &v);
    if (err != cases[i].err)
      fail_msg("'%s': got %s, expected %s", cases[i].text ? cases[i].text : "(null)",
               gpum_err_name(err), gpum_err_name(cases[i].err));
    assert_int_equal(v, 777); /* untouched on error */
    if (strstr(gpum_last_error(), cases[i].detail_part) == NULL)
      fail_msg("'%s': detail '%s' lacks '%s'", cases[i].text ? cases[i].text : "(null)",
               gpum_last_error(), cases[i].detail_part);
  }
}

static void test_size_rejects(void **state) {
  (void)state;
  static const bad_t cases[] = {
      {NULL, GPUM_EINVAL, "empty"},
      {"", GPUM_EINVAL, "empty"},
      {"-1", GPUM_EINVAL, "negative size '-1'"},
      {"-1GiB", GPUM_EINVAL, "negative"},
      {"+1GiB", GPUM_EINVAL, "not a size"},
      {"GiB", GPUM_EINVAL, "'GiB' is not a size"},
      {"abc", GPUM_EINVAL, "not a size"},
      {" 8GiB", GPUM_EINVAL, "not a size"},
      {"8GiB ", GPUM_EINVAL, "unknown unit"},
      {"8 ", GPUM_EINVAL, "trailing space"},
      {"8XB", GPUM_EINVAL, "unknown unit 'XB' in size '8XB'"},
      {"8GiBs", GPUM_EINVAL, "unknown unit"},
      {"8GiB8", GPUM_EINVAL, "unknown unit"},
      {"8 G iB", GPUM_EINVAL, "unknown unit"},
      {"1.5", GPUM_EINVAL, "fraction of a byte"},
      {"1.5B", GPUM_EINVAL, "fraction of a byte"},
      {"1.", GPUM_EINVAL, "not a size"},
      {".5G", GPUM_EINVAL, "not a size"},
      {"1..5G", GPUM_EINVAL, "not a size"},
      {"1,5G", GPUM_EINVAL, "unknown unit"},
      {"0x10", GPUM_EINVAL, "unknown unit"},
      {"1e3", GPUM_EINVAL, "unknown unit"},
      {"nan", GPUM_EINVAL, "not a size"},
      {"NaN", GPUM_EINVAL, "not a size"},
      {"inf", GPUM_EINVAL, "not a size"},
      {"infinity", GPUM_EINVAL, "not a size"},
      {"16EiB", GPUM_ERANGE, "too large"},
      {"16384PiB", GPUM_ERANGE, "too large"},
      {"18446744073709551616", GPUM_ERANGE, "too large"},
      {"99999999999999999999999GiB", GPUM_ERANGE, "too large"},
      {"17179869184GiB", GPUM_ERANGE, "too large"}, /* 2^34 GiB = 2^64 */
  };
  check_bad(gpum_size_parse, cases, sizeof cases / sizeof cases[0]);
}

static void test_size_format(void **state) {
  (void)state;
  static const good_t cases[] = {
      {"0 B", 0},
      {"1 B", 1},
      {"512 B", 512},
      {"1023 B", 1023},
      {"1.00 KiB", 1024},
      {"1.50 KiB", 1536},
      {"8.00 GiB", 8 * GiB},
      {"1.50 TiB", TiB + TiB / 2},
      {"80.00 GiB", 80 * GiB},
      {"1.00 MiB", MiB - 1}, /* 1023.999 KiB rounds up into the next unit */
      {"1.00 EiB", EiB},
      {"16.00 EiB", UINT64_MAX},
      {"2.33 GiB", 2 * GiB + GiB / 3},
  };
  char buf[GPUM_SIZE_BUFSZ];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    assert_ptr_equal(gpum_size_format(cases[i].value, buf, sizeof buf), buf);
    assert_string_equal(buf, cases[i].text);
  }
}

static void test_size_format_truncates(void **state) {
  (void)state;
  char buf[6];
  memset(buf, 'z', sizeof buf);
  gpum_size_format(8 * GiB, buf, sizeof buf);
  assert_string_equal(buf, "8.00 ");
  assert_null(gpum_size_format(1, NULL, 0));
  char one[1] = {'z'};
  gpum_size_format(1, one, 1);
  assert_int_equal(one[0], '\0');
}

static void test_size_format_round_trip(void **state) {
  (void)state;
  char buf[GPUM_SIZE_BUFSZ];
  uint64_t v;
  static const uint64_t exact[] = {0, 1, 1023, KiB, 8 * GiB, 3 * TiB, TiB + TiB / 2};
  for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
    gpum_size_format(exact[i], buf, sizeof buf);
    assert_int_equal(gpum_size_parse(buf, &v), 0);
    assert_int_equal(v, exact[i]);
  }
}

static void test_duration_accepts(void **state) {
  (void)state;
  static const good_t cases[] = {
      {"0", 0},
      {"0s", 0},
      {"30", 30000},
      {"1.5", 1500},
      {"500ms", 500},
      {"30s", 30000},
      {"5m", 300000},
      {"1h", 3600000},
      {"1h30m", 5400000},
      {"2d", 172800000},
      {"1d2h3m4s5ms", 93784005},
      {"1.5h", 5400000},
      {"0.5s", 500},
      {"0.0001s", 0},
      {"1.001s", 1001},
      {"2.5ms", 2},
      {"1m0.5s", 60500},
      {"18446744073709551615ms", UINT64_MAX},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint64_t v = 12345;
    int err = gpum_duration_parse(cases[i].text, &v);
    if (err)
      fail_msg("'%s' rejected: %s", cases[i].text, gpum_last_error());
    if (v != cases[i].value)
      fail_msg("'%s' gave %llu ms, expected %llu", cases[i].text, (unsigned long long)v,
               (unsigned long long)cases[i].value);
  }
}

static void test_duration_rejects(void **state) {
  (void)state;
  static const bad_t cases[] = {
      {NULL, GPUM_EINVAL, "empty"},
      {"", GPUM_EINVAL, "empty"},
      {"-5s", GPUM_EINVAL, "negative duration '-5s'"},
      {"s", GPUM_EINVAL, "not a duration"},
      {"abc", GPUM_EINVAL, "not a duration"},
      {"5x", GPUM_EINVAL, "unknown unit at 'x'"},
      {"5us", GPUM_EINVAL, "unknown unit at 'us'"},
      {"5min", GPUM_EINVAL, "not a duration"},
      {"1h30", GPUM_EINVAL, "needs a unit"},
      {"30m1h", GPUM_EINVAL, "largest to smallest"},
      {"5s5s", GPUM_EINVAL, "largest to smallest"},
      {" 5s", GPUM_EINVAL, "not a duration"},
      {"5s ", GPUM_EINVAL, "not a duration"},
      {"5 s", GPUM_EINVAL, "unknown unit"},
      {"nan", GPUM_EINVAL, "not a duration"},
      {"inf", GPUM_EINVAL, "not a duration"},
      {"1.s", GPUM_EINVAL, "not a duration"},
      {"18446744073709551616ms", GPUM_ERANGE, "too long"},
      {"213503982335d", GPUM_ERANGE, "too long"},
      {"18446744073709551615ms1ms", GPUM_EINVAL, "largest to smallest"},
      {"213503982334d23h", GPUM_ERANGE, "too long"},
      {"99999999999999999999999", GPUM_ERANGE, "too long"},
  };
  check_bad(gpum_duration_parse, cases, sizeof cases / sizeof cases[0]);
}

static void test_duration_format(void **state) {
  (void)state;
  static const good_t cases[] = {
      {"0s", 0},          {"1ms", 1},        {"500ms", 500},
      {"1s", 1000},       {"1s500ms", 1500}, {"1m", 60000},
      {"1h30m", 5400000}, {"2d", 172800000}, {"1d2h3m4s5ms", 93784005},
  };
  char buf[GPUM_DURATION_BUFSZ];
  uint64_t back;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gpum_duration_format(cases[i].value, buf, sizeof buf);
    assert_string_equal(buf, cases[i].text);
    assert_int_equal(gpum_duration_parse(buf, &back), 0);
    assert_int_equal(back, cases[i].value);
  }
  gpum_duration_format(UINT64_MAX, buf, sizeof buf);
  assert_int_equal(gpum_duration_parse(buf, &back), 0);
  assert_true(back == UINT64_MAX);
  char small[4];
  gpum_duration_format(93784005, small, sizeof small);
  assert_true(strlen(small) < sizeof small);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_size_accepts),
      cmocka_unit_test(test_size_rejects),
      cmocka_unit_test(test_size_format),
      cmocka_unit_test(test_size_format_truncates),
      cmocka_unit_test(test_size_format_round_trip),
      cmocka_unit_test(test_duration_accepts),
      cmocka_unit_test(test_duration_rejects),
      cmocka_unit_test(test_duration_format),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
