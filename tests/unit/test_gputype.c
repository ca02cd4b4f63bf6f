/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for GPU types (gpum/gputype.h): every name of the header and of the issue read into
 * vendor, family, memory and form factor; the rejections with their detail and *out untouched;
 * the matching rules (family without case, A10 never an A100, family plus memory, vendors,
 * shell patterns on the name and on the family, form factors, what matches nothing); the memory
 * table (the seed's figures, the extended ones, a stated figure winning, GH200's exception,
 * unknown families).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/error.h>
#include <gpum/gputype.h>

#define NV GPUM_GPU_VENDOR_NVIDIA
#define AM GPUM_GPU_VENDOR_AMD
#define IN GPUM_GPU_VENDOR_INTEL
#define UN GPUM_GPU_VENDOR_UNKNOWN
#define SXM GPUM_GPU_FORM_SXM
#define PCIE GPUM_GPU_FORM_PCIE
#define NOF GPUM_GPU_FORM_UNKNOWN

typedef struct {
  const char *name;
  gpum_gpu_vendor_t vendor;
  const char *family;
  double memory_gb;
  gpum_gpu_form_t form;
} parsed_t;

static void test_parse_names(void **state) {
  (void)state;
  static const parsed_t cases[] = {
      /* the names of the issue */
      {"NVIDIA A100-SXM4-40GB", NV, "A100", 40, SXM},
      {"Tesla V100-PCIE-32GB", NV, "V100", 32, PCIE},
      {"NVIDIA H100 80GB HBM3", NV, "H100", 80, NOF},
      {"NVIDIA GeForce RTX 4090", NV, "RTX4090", 0, NOF},
      {"NVIDIA RTX A6000", NV, "A6000", 0, NOF},
      {"Tesla T4", NV, "T4", 0, NOF},
      {"NVIDIA A40", NV, "A40", 0, NOF},
      {"AMD Instinct MI300X", AM, "MI300X", 0, NOF},
      {"AMD Instinct MI250X", AM, "MI250X", 0, NOF},
      {"Intel(R) Data Center GPU Max 1550", IN, "MAX1550", 0, NOF},
      {"V100", NV, "V100", 0, NOF},
      {"a100", NV, "A100", 0, NOF},
      {"RTX3090", NV, "RTX3090", 0, NOF},
      {"rtx 4090", NV, "RTX4090", 0, NOF},
      /* more driver names */
      {"Tesla V100-SXM2-16GB", NV, "V100", 16, SXM},
      {"Tesla V100S-PCIE-32GB", NV, "V100S", 32, PCIE},
      {"NVIDIA A100 80GB PCIe", NV, "A100", 80, PCIE},
      {"NVIDIA A100-PCIE-40GB", NV, "A100", 40, PCIE},
      {"NVIDIA H100 PCIe", NV, "H100", 0, PCIE},
      {"NVIDIA H100 NVL", NV, "H100", 0, NOF},
      {"NVIDIA H200", NV, "H200", 0, NOF},
      {"NVIDIA A10", NV, "A10", 0, NOF},
      {"NVIDIA A10G", NV, "A10G", 0, NOF},
      {"NVIDIA L4", NV, "L4", 0, NOF},
      {"NVIDIA L40S", NV, "L40S", 0, NOF},
      {"NVIDIA GeForce RTX 3090 Ti", NV, "RTX3090TI", 0, NOF},
      {"NVIDIA GeForce RTX 4070 Ti SUPER", NV, "RTX4070TISUPER", 0, NOF},
      {"NVIDIA RTX 6000 Ada Generation", NV, "RTX6000ADA", 0, NOF},
      {"Quadro RTX 8000", NV, "RTX8000", 0, NOF},
      {"NVIDIA TITAN RTX", NV, "TITANRTX", 0, NOF},
      {"NVIDIA TITAN V", NV, "TITANV", 0, NOF},
      {"NVIDIA GH200 480GB", NV, "GH200", 480, NOF},
      {"NVIDIA B100", NV, "B100", 0, NOF}, /* not in the table: still read */
      {"AMD Instinct MI250X / MI250", AM, "MI250X", 0, NOF},
      {"AMD Radeon RX 7900 XTX", AM, "RX7900XTX", 0, NOF},
      {"AMD Radeon PRO W7900", AM, "W7900", 0, NOF},
      {"Intel(R) Data Center GPU Flex 170", IN, "FLEX170", 0, NOF},
      {"Intel(R) Arc(TM) A770 Graphics", IN, "A770", 0, NOF},
      {"max1550", IN, "MAX1550", 0, NOF},
      {"mi300x", AM, "MI300X", 0, NOF},
      /* as requests write them */
      {"A100-80GB", NV, "A100", 80, NOF},
      {"A100 80GB", NV, "A100", 80, NOF},
      {"a100_40g", NV, "A100", 40, NOF},
      {"H100 SXM", NV, "H100", 0, SXM},
      {"V100 16GiB", NV, "V100", 16, NOF},
      {"rtx 3090 ti", NV, "RTX3090TI", 0, NOF},
      {"X1", UN, "X1", 0, NOF},
      /* a vendor alone */
      {"NVIDIA", NV, "", 0, NOF},
      {"amd", AM, "", 0, NOF},
      {"AMD Radeon Graphics", AM, "", 0, NOF},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gpum_gpu_type_t t;
    memset(&t, 0x5a, sizeof t);
    if (gpum_gpu_type_parse(cases[i].name, &t) != 0)
      fail_msg("'%s': %s", cases[i].name, gpum_last_error());
    if (t.vendor != cases[i].vendor || strcmp(t.family, cases[i].family) != 0 ||
        t.memory_gb != cases[i].memory_gb || t.form != cases[i].form)
      fail_msg("'%s': %s %s %g %s, expected %s %s %g %s", cases[i].name,
               gpum_gpu_vendor_name(t.vendor), t.family, t.memory_gb, gpum_gpu_form_name(t.form),
               gpum_gpu_vendor_name(cases[i].vendor), cases[i].family, cases[i].memory_gb,
               gpum_gpu_form_name(cases[i].form));
  }
}

static void test_parse_rejects(void **state) {
  (void)state;
  char long_name[GPUM_GPU_NAME_MAX + 2];
  memset(long_name, 'A', sizeof long_name - 1);
  long_name[0] = '1'; /* a word with a digit: a family */
  long_name[sizeof long_name - 1] = '\0';
  static const struct {
    const char *name, *detail;
  } cases[] = {
      {"", "empty"},
      {"   ", "names no GPU model"},
      {"hello", "names no GPU model"},
      {"80GB", "names no GPU model"},
      {"SXM4 HBM3", "names no GPU model"},
      {"A100*", "only letters, digits"},
      {"A100\n", "only letters, digits"},
      {"A\xc3\xa9"
       "100",
       "only letters, digits"},
      {"RTX ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", "longer than 31"},
  };
  gpum_gpu_type_t t, before;
  memset(&t, 0x5a, sizeof t);
  before = t;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    assert_int_equal(gpum_gpu_type_parse(cases[i].name, &t), GPUM_EINVAL);
    if (strstr(gpum_last_error(), cases[i].detail) == NULL)
      fail_msg("'%s': detail '%s' lacks '%s'", cases[i].name, gpum_last_error(), cases[i].detail);
    assert_memory_equal(&t, &before, sizeof t);
  }
  assert_int_equal(gpum_gpu_type_parse(long_name, &t), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "longer than 255"));
  long_name[GPUM_GPU_NAME_MAX] = '\0'; /* 255 bytes: read (and too long a family) */
  assert_int_equal(gpum_gpu_type_parse(long_name, &t), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "longer than 31"));
  assert_int_equal(gpum_gpu_type_parse(NULL, &t), GPUM_EINVAL);
  assert_int_equal(gpum_gpu_type_parse("A100", NULL), GPUM_EINVAL);
}

typedef struct {
  const char *want, *device;
  bool match;
} match_t;

static void check_matches(const match_t *cases, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (gpum_gpu_type_matches(cases[i].want, cases[i].device) != cases[i].match)
      fail_msg("'%s' against '%s': expected %s", cases[i].want ? cases[i].want : "(null)",
               cases[i].device ? cases[i].device : "(null)",
               cases[i].match ? "a match" : "no match");
}

static void test_match_family(void **state) {
  (void)state;
  static const match_t cases[] = {
      {"a100", "NVIDIA A100-SXM4-80GB", true},
      {"A100", "NVIDIA A100-SXM4-40GB", true},
      {"NVIDIA A100", "NVIDIA A100-SXM4-40GB", true},
      {"V100", "Tesla V100-PCIE-32GB", true},
      {"v100", "Tesla V100-SXM2-16GB", true},
      {"T4", "Tesla T4", true},
      {"H100", "NVIDIA H100 80GB HBM3", true},
      {"h100", "NVIDIA H100 NVL", true},
      {"RTX4090", "NVIDIA GeForce RTX 4090", true},
      {"rtx 4090", "NVIDIA GeForce RTX 4090", true},
      {"RTX 4090", "NVIDIA GeForce RTX 4090", true},
      {"A6000", "NVIDIA RTX A6000", true},
      {"MI300X", "AMD Instinct MI300X", true},
      {"Max 1550", "Intel(R) Data Center GPU Max 1550", true},
      {"MAX1550", "Intel(R) Data Center GPU Max 1550", true},
      /* A10 is not an A100, an A10G, an A40 */
      {"A10", "NVIDIA A100-SXM4-40GB", false},
      {"A10", "NVIDIA A100 80GB PCIe", false},
      {"A10", "NVIDIA A10G", false},
      {"A10", "NVIDIA A10", true},
      {"a10", "NVIDIA A10", true},
      {"A100", "NVIDIA A10", false},
      {"A4", "NVIDIA A40", false},
      {"V100", "Tesla V100S-PCIE-32GB", false},
      {"RTX3090", "NVIDIA GeForce RTX 3090 Ti", false},
      {"RTX3090TI", "NVIDIA GeForce RTX 3090 Ti", true},
      {"H100", "NVIDIA H200", false},
      {"A100", "NVIDIA H100 80GB HBM3", false},
      /* the vendor, where want states one */
      {"AMD A100", "NVIDIA A100-SXM4-40GB", false},
      /* the whole name, without case */
      {"nvidia a100-sxm4-40gb", "NVIDIA A100-SXM4-40GB", true},
      {"Some Card", "some card", true},
      /* words that read as no family match nothing else */
      {"SXM4", "NVIDIA A100-SXM4-40GB", false},
      {"HBM3", "NVIDIA H100 80GB HBM3", false},
      {"80GB", "NVIDIA H100 80GB HBM3", false},
      {"Tesla", "Tesla T4", false},
      {"GeForce", "NVIDIA GeForce RTX 4090", false},
      {"A100!", "NVIDIA A100-SXM4-40GB", false},
      /* any */
      {"", "NVIDIA A100-SXM4-40GB", true},
      {NULL, "Tesla T4", true},
      {"A100", NULL, false},
      {"A100", "", false},
  };
  check_matches(cases, sizeof cases / sizeof cases[0]);
}

static void test_match_memory_and_form(void **state) {
  (void)state;
  static const match_t cases[] = {
      {"A100-80GB", "NVIDIA A100-SXM4-80GB", true},
      {"A100 80GB", "NVIDIA A100-SXM4-80GB", true},
      {"a100-80g", "NVIDIA A100 80GB PCIe", true},
      {"A100-80GB", "NVIDIA A100-SXM4-40GB", false},
      {"A100-40GB", "NVIDIA A100-SXM4-40GB", true},
      {"A100 40GB", "NVIDIA A100-PCIE-40GB", true},
      {"V100-32GB", "Tesla V100-PCIE-32GB", true},
      {"V100-16GB", "Tesla V100-PCIE-32GB", false},
      {"H100 80GB", "NVIDIA H100 80GB HBM3", true},
      /* the device's name states none: the table's figure for its family */
      {"RTX4090 24GB", "NVIDIA GeForce RTX 4090", true},
      {"RTX4090 48GB", "NVIDIA GeForce RTX 4090", false},
      {"H100 80GB", "NVIDIA H100 PCIe", true},
      {"B100 80GB", "NVIDIA B100", false}, /* not in the table */
      {"GH200 144GB", "NVIDIA GH200 480GB", true},
      {"GH200 480GB", "NVIDIA GH200 480GB", false},
      /* form factors: the device's name must state the same one */
      {"A100 SXM", "NVIDIA A100-SXM4-40GB", true},
      {"A100-SXM4", "NVIDIA A100-SXM4-40GB", true},
      {"A100 PCIe", "NVIDIA A100-SXM4-40GB", false},
      {"A100 PCIe", "NVIDIA A100-PCIE-40GB", true},
      {"A100 PCIe 80GB", "NVIDIA A100 80GB PCIe", true},
      {"A100 PCIe 80GB", "NVIDIA A100-PCIE-40GB", false},
      {"H100 SXM", "NVIDIA H100 80GB HBM3", false},
      {"H100 PCIe", "NVIDIA H100 PCIe", true},
  };
  check_matches(cases, sizeof cases / sizeof cases[0]);
}

static void test_match_vendor(void **state) {
  (void)state;
  static const match_t cases[] = {
      {"nvidia", "NVIDIA A100-SXM4-40GB", true},
      {"NVIDIA", "Tesla T4", true},
      {"nvidia", "A100", true}, /* the family's vendor */
      {"nvidia", "AMD Instinct MI300X", false},
      {"amd", "AMD Instinct MI300X", true},
      {"AMD", "NVIDIA H100 80GB HBM3", false},
      {"intel", "Intel(R) Data Center GPU Max 1550", true},
      {"Intel", "Tesla V100-PCIE-32GB", false},
      {"nvidia", "Some Card", false},
      {"nvidia", "", false},
  };
  check_matches(cases, sizeof cases / sizeof cases[0]);
}

static void test_match_patterns(void **state) {
  (void)state;
  static const match_t cases[] = {
      /* on the whole name, without case */
      {"*A100*", "NVIDIA A100-SXM4-40GB", true},
      {"*a100*", "NVIDIA A100-SXM4-40GB", true},
      {"*H100*", "NVIDIA H100 80GB HBM3", true},
      {"NVIDIA H100*", "NVIDIA H100 80GB HBM3", true},
      {"nvidia h100*", "NVIDIA H100 80GB HBM3", true},
      {"*A100*80GB*", "NVIDIA A100-SXM4-80GB", true},
      {"*A100*80GB*", "NVIDIA A100-SXM4-40GB", false},
      {"Tesla*", "Tesla T4", true},
      /* on the family */
      {"A100*", "NVIDIA A100-SXM4-40GB", true},
      {"a100*", "NVIDIA A100 80GB PCIe", true},
      {"H1??", "NVIDIA H100 80GB HBM3", true},
      {"H1??", "NVIDIA H200", false},
      {"H?00", "NVIDIA H200", true},
      {"H1??", "NVIDIA A100-SXM4-40GB", false},
      {"H100*", "NVIDIA H100 80GB HBM3", true},
      {"RTX40[89]0", "NVIDIA GeForce RTX 4090", true},
      {"MI3*", "AMD Instinct MI300X", true},
      /* a pattern says what it says */
      {"A100*", "NVIDIA A10", false},
      {"A10*", "NVIDIA A100-SXM4-40GB", true},
      {"*A10", "NVIDIA A100-SXM4-40GB", false},
      {"*V100*", "NVIDIA H100 80GB HBM3", false},
      {"*", "anything", true},
      {"[", "NVIDIA A100-SXM4-40GB", false},
  };
  check_matches(cases, sizeof cases / sizeof cases[0]);
}

/* Matching never sets the detail message. */
static void test_match_quiet(void **state) {
  (void)state;
  gpum_error_clear();
  assert_false(gpum_gpu_type_matches("A100!", "hello"));
  assert_false(gpum_gpu_type_matches("nvidia", "\xff"));
  assert_string_equal(gpum_last_error(), "");
}

typedef struct {
  const char *name;
  double gb;
} memory_t;

static void test_memory_table(void **state) {
  (void)state;
  static const memory_t cases[] = {
      /* the seed's table */
      {"T4", 16},
      {"V100", 32},
      {"A100", 80},
      {"H100", 80},
      {"RTX3090", 24},
      {"RTX4090", 24},
      {"A6000", 48},
      {"A40", 48},
      /* extended */
      {"A10", 24},
      {"A10G", 24},
      {"A30", 24},
      {"L4", 24},
      {"L40", 48},
      {"L40S", 48},
      {"H200", 141},
      {"MI300X", 192},
      {"MI250X", 128},
      {"MI210", 64},
      {"MAX1550", 128},
      {"P100", 16},
      {"RTX3080", 12},
      /* names, any case */
      {"Tesla T4", 16},
      {"a100", 80},
      {"NVIDIA GeForce RTX 4090", 24},
      {"AMD Instinct MI300X", 192},
      {"Intel(R) Data Center GPU Max 1550", 128},
      /* a stated figure wins */
      {"NVIDIA A100-SXM4-40GB", 40},
      {"A100-40GB", 40},
      {"Tesla V100-SXM2-16GB", 16},
      {"NVIDIA H100 80GB HBM3", 80},
      {"B100 192GB", 192}, /* stated, though not in the table */
      /* except GH200's, which is the superchip's */
      {"NVIDIA GH200 480GB", 144},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double gb = -1;
    if (gpum_gpu_type_memory_gb(cases[i].name, &gb) != 0)
      fail_msg("'%s': %s", cases[i].name, gpum_last_error());
    if (gb != cases[i].gb)
      fail_msg("'%s': %g GB, expected %g", cases[i].name, gb, cases[i].gb);
  }
}

static void test_memory_errors(void **state) {
  (void)state;
  double gb = -1;
  assert_int_equal(gpum_gpu_type_memory_gb("NVIDIA B100", &gb), GPUM_ENOENT);
  assert_non_null(strstr(gpum_last_error(), "B100 is not in the memory table"));
  assert_int_equal(gpum_gpu_type_memory_gb("nvidia", &gb), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "names no GPU model"));
  assert_int_equal(gpum_gpu_type_memory_gb("", &gb), GPUM_EINVAL);
  assert_int_equal(gpum_gpu_type_memory_gb("A100*", &gb), GPUM_EINVAL);
  assert_int_equal(gpum_gpu_type_memory_gb(NULL, &gb), GPUM_EINVAL);
  assert_int_equal(gpum_gpu_type_memory_gb("A100", NULL), GPUM_EINVAL);
  assert_true(gb == -1);
}

static void test_names(void **state) {
  (void)state;
  assert_string_equal(gpum_gpu_vendor_name(GPUM_GPU_VENDOR_NVIDIA), "nvidia");
  assert_string_equal(gpum_gpu_vendor_name(GPUM_GPU_VENDOR_AMD), "amd");
  assert_string_equal(gpum_gpu_vendor_name(GPUM_GPU_VENDOR_INTEL), "intel");
  assert_string_equal(gpum_gpu_vendor_name(GPUM_GPU_VENDOR_UNKNOWN), "unknown");
  assert_string_equal(gpum_gpu_vendor_name((gpum_gpu_vendor_t)99), "unknown");
  assert_string_equal(gpum_gpu_form_name(GPUM_GPU_FORM_SXM), "SXM");
  assert_string_equal(gpum_gpu_form_name(GPUM_GPU_FORM_PCIE), "PCIe");
  assert_string_equal(gpum_gpu_form_name(GPUM_GPU_FORM_UNKNOWN), "unknown");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_names),   cmocka_unit_test(test_parse_rejects),
      cmocka_unit_test(test_match_family),  cmocka_unit_test(test_match_memory_and_form),
      cmocka_unit_test(test_match_vendor),  cmocka_unit_test(test_match_patterns),
      cmocka_unit_test(test_match_quiet),   cmocka_unit_test(test_memory_table),
      cmocka_unit_test(test_memory_errors), cmocka_unit_test(test_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
