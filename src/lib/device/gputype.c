/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU types as people write them (gpum/gputype.h): a marketing or driver name read into vendor,
 * family, stated memory and form factor; a request's type matched against a device's name; the
 * nominal memory of each family. The header states the rules; the words and the table that
 * drive them are the tables below, and nothing else in the file knows a card by name.
 */
#include <gpum/gputype.h>

#include <ctype.h>
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gpum/error.h>
#include "core/names_internal.h"

/* ---- the words ------------------------------------------------------------------------------ */

typedef struct {
  const char *word; /* upper case */
  gpum_gpu_vendor_t vendor;
} vendor_word_t;

static const vendor_word_t VENDOR_WORDS[] = {
    {"NVIDIA", GPUM_GPU_VENDOR_NVIDIA}, {"TESLA", GPUM_GPU_VENDOR_NVIDIA},
    {"QUADRO", GPUM_GPU_VENDOR_NVIDIA}, {"GEFORCE", GPUM_GPU_VENDOR_NVIDIA},
    {"AMD", GPUM_GPU_VENDOR_AMD},       {"ATI", GPUM_GPU_VENDOR_AMD},
    {"RADEON", GPUM_GPU_VENDOR_AMD},    {"INSTINCT", GPUM_GPU_VENDOR_AMD},
    {"INTEL", GPUM_GPU_VENDOR_INTEL},   {"ARC", GPUM_GPU_VENDOR_INTEL},
};

/* Joined to the word after them ("RTX 4090": RTX4090); the vendor they imply. */
static const vendor_word_t PREFIXES[] = {
    {"RTX", GPUM_GPU_VENDOR_NVIDIA},   {"GTX", GPUM_GPU_VENDOR_NVIDIA},
    {"TITAN", GPUM_GPU_VENDOR_NVIDIA}, {"RX", GPUM_GPU_VENDOR_AMD},
    {"MAX", GPUM_GPU_VENDOR_INTEL},    {"FLEX", GPUM_GPU_VENDOR_INTEL},
};

/* Joined to the family just read ("RTX 3090 Ti": RTX3090TI). */
static const char *const SUFFIXES[] = {"TI", "SUPER", "XT", "XTX", "ADA"};

/* ---- the memory table ----------------------------------------------------------------------- */

typedef struct {
  const char *family;
  gpum_gpu_vendor_t vendor;
  double gb;         /* nominal memory per GPU, GB as the vendor writes it; largest common size */
  bool name_not_gpu; /* the figure in its names is not the GPU's memory (GH200: the superchip's) */
} family_row_t;

#define NV GPUM_GPU_VENDOR_NVIDIA
#define AM GPUM_GPU_VENDOR_AMD
#define IN GPUM_GPU_VENDOR_INTEL

/* The vendors' data sheets; where a family has several sizes, the other ones in a comment. */
static const family_row_t FAMILIES[] = {
    /* NVIDIA data centre */
    {"P4", NV, 8, false},
    {"P40", NV, 24, false},
    {"P100", NV, 16, false}, /* also 12 */
    {"T4", NV, 16, false},
    {"V100", NV, 32, false}, /* also 16 */
    {"V100S", NV, 32, false},
    {"A2", NV, 16, false},
    {"A10", NV, 24, false},
    {"A10G", NV, 24, false},
    {"A16", NV, 16, false}, /* four GPUs of 16 GB on one board */
    {"A30", NV, 24, false},
    {"A40", NV, 48, false},
    {"A100", NV, 80, false}, /* also 40 */
    {"A800", NV, 80, false}, /* also 40 */
    {"H100", NV, 80, false}, /* H100 NVL: 94, not stated in its name */
    {"H800", NV, 80, false},
    {"H20", NV, 96, false},
    {"H200", NV, 141, false},
    {"GH200", NV, 144, true}, /* also 96; its names state the superchip's memory (480GB) */
    {"B200", NV, 180, false},
    {"L4", NV, 24, false},
    {"L20", NV, 48, false},
    {"L40", NV, 48, false},
    {"L40S", NV, 48, false},
    /* NVIDIA workstation */
    {"A4000", NV, 16, false},
    {"A5000", NV, 24, false},
    {"A6000", NV, 48, false},
    {"RTX6000", NV, 24, false}, /* Quadro RTX 6000 */
    {"RTX8000", NV, 48, false}, /* Quadro RTX 8000 */
    {"RTX5000ADA", NV, 32, false},
    {"RTX6000ADA", NV, 48, false},
    /* NVIDIA GeForce and TITAN */
    {"TITANV", NV, 12, false},
    {"TITANRTX", NV, 24, false},
    {"RTX2080TI", NV, 11, false},
    {"RTX3080", NV, 12, false}, /* also 10 */
    {"RTX3080TI", NV, 12, false},
    {"RTX3090", NV, 24, false},
    {"RTX3090TI", NV, 24, false},
    {"RTX4080", NV, 16, false},
    {"RTX4080SUPER", NV, 16, false},
    {"RTX4090", NV, 24, false},
    {"RTX5090", NV, 32, false},
    /* AMD */
    {"MI50", AM, 32, false}, /* also 16 */
    {"MI60", AM, 32, false},
    {"MI100", AM, 32, false},
    {"MI210", AM, 64, false},
    {"MI250", AM, 128, false},
    {"MI250X", AM, 128, false},
    {"MI300A", AM, 128, false},
    {"MI300X", AM, 192, false},
    {"MI325X", AM, 256, false},
    {"W7900", AM, 48, false},
    {"RX7900XTX", AM, 24, false},
    /* Intel */
    {"MAX1100", IN, 48, false},
    {"MAX1550", IN, 128, false},
    {"FLEX140", IN, 12, false},
    {"FLEX170", IN, 16, false},
    {"A770", IN, 16, false},
};

#undef NV
#undef AM
#undef IN

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const family_row_t *family_row(const char *family) {
  for (size_t i = 0; i < COUNT(FAMILIES); i++)
    if (strcmp(FAMILIES[i].family, family) == 0)
      return &FAMILIES[i];
  return NULL;
}

static const vendor_word_t *find_word(const vendor_word_t *words, size_t n, const char *w) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(words[i].word, w) == 0)
      return &words[i];
  return NULL;
}

static bool is_suffix(const char *w) {
  for (size_t i = 0; i < COUNT(SUFFIXES); i++)
    if (strcmp(SUFFIXES[i], w) == 0)
      return true;
  return false;
}

/* ---- reading a name ------------------------------------------------------------------------- */

static bool name_char(char c) {
  return isalnum((unsigned char)c) || strchr(" -_./,()", c) != NULL;
}

static bool separator(char c) {
  return strchr(" -_/,()", c) != NULL;
}

/* "40GB", "141GB", "80G", "1.5GiB" (upper case already): the figure into *gb. */
static bool memory_word(const char *w, double *gb) {
  char *end = NULL;
  if (!isdigit((unsigned char)w[0]))
    return false;
  double v = strtod(w, &end);
  if (strcmp(end, "GB") != 0 && strcmp(end, "G") != 0 && strcmp(end, "GIB") != 0)
    return false;
  if (!isfinite(v) || v <= 0)
    return false;
  *gb = v;
  return true;
}

static gpum_gpu_form_t form_word(const char *w) {
  if (strcmp(w, "PCIE") == 0)
    return GPUM_GPU_FORM_PCIE;
  if (strncmp(w, "SXM", 3) == 0 && (w[3] == '\0' || (w[3] >= '2' && w[3] <= '5' && !w[4])))
    return GPUM_GPU_FORM_SXM;
  return GPUM_GPU_FORM_UNKNOWN;
}

static bool has_digit(const char *w) {
  for (; *w; w++)
    if (isdigit((unsigned char)*w))
      return true;
  return false;
}

static bool all_alnum(const char *w) {
  for (; *w; w++)
    if (!isalnum((unsigned char)*w))
      return false;
  return true;
}

/* What one pass over the words has found so far. */
typedef struct {
  gpum_gpu_type_t t;
  gpum_gpu_vendor_t stated;     /* from a vendor word */
  gpum_gpu_vendor_t implied;    /* from a prefix */
  const vendor_word_t *pending; /* a prefix waiting for its word */
  bool extend;                  /* the last word set the family: a suffix may follow */
  bool too_long;
} reading_t;

static void set_family(reading_t *r, const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la + lb >= sizeof r->t.family) {
    r->too_long = true;
    return;
  }
  memmove(r->t.family + la, b, lb + 1);
  memcpy(r->t.family, a, la);
  r->extend = true;
}

/* Takes one word (upper case, non-empty). */
static void take_word(reading_t *r, const char *w) {
  bool extend = r->extend;
  const vendor_word_t *v;
  double gb;
  r->extend = false;
  if (r->pending) {
    const vendor_word_t *p = r->pending;
    r->pending = NULL;
    if (strcmp(p->word, "RTX") != 0 || !isalpha((unsigned char)w[0]) ||
        find_word(PREFIXES, COUNT(PREFIXES), w)) {
      r->implied = p->vendor;
      set_family(r, p->word, w);
      return;
    }
    /* "RTX A6000": the word after it is the family. */
  }
  if ((v = find_word(VENDOR_WORDS, COUNT(VENDOR_WORDS), w)) != NULL) {
    if (r->stated == GPUM_GPU_VENDOR_UNKNOWN)
      r->stated = v->vendor;
  } else if (form_word(w) != GPUM_GPU_FORM_UNKNOWN) {
    if (r->t.form == GPUM_GPU_FORM_UNKNOWN)
      r->t.form = form_word(w);
  } else if (memory_word(w, &gb)) {
    if (r->t.memory_gb == 0)
      r->t.memory_gb = gb;
  } else if (strncmp(w, "HBM", 3) == 0 || strncmp(w, "GDDR", 4) == 0) {
    /* a memory kind */
  } else if (r->t.family[0] == '\0' && (v = find_word(PREFIXES, COUNT(PREFIXES), w)) != NULL) {
    r->pending = v;
  } else if (extend && is_suffix(w)) {
    set_family(r, r->t.family, w);
  } else if (r->t.family[0] == '\0' && has_digit(w) && all_alnum(w)) {
    set_family(r, "", w);
  }
}

/* Reads name into *out; on failure returns GPUM_EINVAL with the reason in *why. Sets no detail
 * message (gpum_gpu_type_matches must leave it alone). */
static int read_type(const char *name, gpum_gpu_type_t *out, const char **why) {
  char buf[GPUM_GPU_NAME_MAX + 1];
  size_t n = strlen(name);
  if (n == 0) {
    *why = "the name is empty";
    return GPUM_EINVAL;
  }
  if (n > GPUM_GPU_NAME_MAX) {
    *why = "the name is longer than 255 bytes";
    return GPUM_EINVAL;
  }
  for (size_t i = 0; i < n; i++) {
    if (!name_char(name[i])) {
      *why = "a GPU name has only letters, digits, spaces and - _ . / , ( )";
      return GPUM_EINVAL;
    }
    buf[i] = (char)toupper((unsigned char)name[i]);
  }
  buf[n] = '\0';
  /* "Intel(R)", "Arc(TM)": the marks go. */
  for (char *p = buf; (p = strchr(p, '(')) != NULL; p++) {
    if (strncmp(p, "(R)", 3) == 0)
      memset(p, ' ', 3);
    else if (strncmp(p, "(TM)", 4) == 0)
      memset(p, ' ', 4);
  }
  reading_t r;
  memset(&r, 0, sizeof r);
  for (char *p = buf; *p;) {
    while (*p && separator(*p))
      p++;
    char *w = p;
    while (*p && !separator(*p))
      p++;
    if (*p)
      *p++ = '\0';
    if (*w)
      take_word(&r, w);
  }
  if (r.too_long) {
    *why = "its model is longer than 31 characters";
    return GPUM_EINVAL;
  }
  const family_row_t *row = r.t.family[0] ? family_row(r.t.family) : NULL;
  r.t.vendor = r.stated ? r.stated : row ? row->vendor : r.implied;
  if (r.t.vendor == GPUM_GPU_VENDOR_UNKNOWN && r.t.family[0] == '\0') {
    *why = "it names no GPU model (such as A100, V100, RTX4090, MI300X) and no vendor";
    return GPUM_EINVAL;
  }
  *out = r.t;
  return 0;
}

/* The nominal memory of t's card: the stated figure, else the table's. */
static bool nominal_gb(const gpum_gpu_type_t *t, double *gb) {
  const family_row_t *row = family_row(t->family);
  if (t->memory_gb > 0 && !(row && row->name_not_gpu)) {
    *gb = t->memory_gb;
    return true;
  }
  if (!row)
    return false;
  *gb = row->gb;
  return true;
}

/* ---- the API -------------------------------------------------------------------------------- */

int gpum_gpu_type_parse(const char *name, gpum_gpu_type_t *out) {
  const char *why = NULL;
  if (!name || !out)
    return gpum_error(GPUM_EINVAL, "gpum_gpu_type_parse: NULL %s", name ? "out" : "name");
  int rc = read_type(name, out, &why);
  if (rc != 0)
    return gpum_error(rc, "GPU type '%.64s': %s", name, why);
  return 0;
}

bool gpum_gpu_type_matches(const char *want, const char *device_name) {
  return gpum_gpu_type_matches_device(want, device_name, NULL);
}

bool gpum_gpu_type_matches_device(const char *want, const char *device_name, const char *vendor) {
  const char *dev = device_name ? device_name : "";
  const char *why = NULL;
  gpum_gpu_type_t d, w;
  if (!want || !*want)
    return true;
  bool dev_ok = read_type(dev, &d, &why) == 0;
  if (strpbrk(want, "*?[") != NULL)
    return fnmatch(want, dev, FNM_CASEFOLD) == 0 ||
           (dev_ok && d.family[0] && fnmatch(want, d.family, FNM_CASEFOLD) == 0);
  if (strcasecmp(want, "nvidia") == 0 || strcasecmp(want, "amd") == 0 ||
      strcasecmp(want, "intel") == 0) {
    if (vendor && *vendor) /* the driver's word: the name may not say ("Radeon Pro W7900") */
      return strcasecmp(want, vendor) == 0;
    return dev_ok && strcasecmp(want, gpum_gpu_vendor_name(d.vendor)) == 0;
  }
  if (strcasecmp(want, dev) == 0)
    return true;
  if (!dev_ok || read_type(want, &w, &why) != 0 || w.family[0] == '\0' ||
      strcmp(w.family, d.family) != 0)
    return false;
  if (w.vendor != GPUM_GPU_VENDOR_UNKNOWN && w.vendor != d.vendor)
    return false;
  double have = 0;
  if (w.memory_gb > 0 && (!nominal_gb(&d, &have) || fabs(have - w.memory_gb) >= 0.5))
    return false;
  return w.form == GPUM_GPU_FORM_UNKNOWN || w.form == d.form;
}

int gpum_gpu_type_memory_gb(const char *family_or_name, double *gb) {
  gpum_gpu_type_t t;
  if (!gb)
    return gpum_error(GPUM_EINVAL, "gpum_gpu_type_memory_gb: NULL gb");
  int rc = gpum_gpu_type_parse(family_or_name, &t);
  if (rc != 0)
    return rc;
  if (t.family[0] == '\0')
    return gpum_error(GPUM_EINVAL, "GPU type '%.64s' names no GPU model", family_or_name);
  if (!nominal_gb(&t, gb))
    return gpum_error(GPUM_ENOENT,
                      "GPU type '%.64s': the name states no memory and family %s is not in the "
                      "memory table",
                      family_or_name, t.family);
  return 0;
}

const char *gpum_gpu_vendor_name(gpum_gpu_vendor_t vendor) {
  static const char *const names[] = {[GPUM_GPU_VENDOR_NVIDIA] = "nvidia",
                                      [GPUM_GPU_VENDOR_AMD] = "amd",
                                      [GPUM_GPU_VENDOR_INTEL] = "intel"};
  return GPUM__NAME_OF(names, vendor, "unknown");
}

const char *gpum_gpu_form_name(gpum_gpu_form_t form) {
  static const char *const names[] = {[GPUM_GPU_FORM_SXM] = "SXM", [GPUM_GPU_FORM_PCIE] = "PCIe"};
  return GPUM__NAME_OF(names, form, "unknown");
}
