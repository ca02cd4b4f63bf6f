/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reads a simulated node's YAML spec (docs/sim.md, "Spec format") into a struct
 * gpum__sim_node_spec. Every error names the file and line. Absent fields get realistic defaults;
 * UUIDs and PCI bus ids are generated deterministically from the node name and device index, so the
 * same spec always gives the same devices.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include <gpum/error.h>

#include "sim_internal.h"

#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)

typedef struct {
  yaml_document_t *doc;
  const char *path;
} pctx_t;

static int fail(const pctx_t *c, const yaml_node_t *at, const char *fmt, const char *what) {
  return gpum__sim_err(GPUM_EINVAL, "%s:%lu: %s%s", c->path,
                       at ? (unsigned long)at->start_mark.line + 1 : 0ul, fmt, what);
}

static const char *scalar(const yaml_node_t *v) {
  return v && v->type == YAML_SCALAR_NODE ? (const char *)v->data.scalar.value : NULL;
}

/* A bad or missing scalar value for key: an error naming it. */
static int bad_value(const pctx_t *c, const yaml_node_t *v, const char *key, const char *expect) {
  const char *s = scalar(v);
  return gpum__sim_err(GPUM_EINVAL, "%s:%lu: bad value '%.40s' for '%s' (expected %s)", c->path,
                       v ? (unsigned long)v->start_mark.line + 1 : 0ul, s ? s : "(not a scalar)",
                       key, expect);
}

static int get_ull(const pctx_t *c, const yaml_node_t *v, const char *key, unsigned long long min,
                   unsigned long long max, unsigned long long *out) {
  const char *s = scalar(v);
  char range[96];
  snprintf(range, sizeof range, "an integer from %llu to %llu", min, max);
  if (!s || !*s || *s == '-')
    return bad_value(c, v, key, range);
  char *end;
  errno = 0;
  unsigned long long x = strtoull(s, &end, 0);
  if (errno || *end || x < min || x > max)
    return bad_value(c, v, key, range);
  *out = x;
  return 0;
}

static int get_uint(const pctx_t *c, const yaml_node_t *v, const char *key, unsigned min,
                    unsigned max, unsigned *out) {
  unsigned long long x;
  int rc = get_ull(c, v, key, min, max, &x);
  if (rc == 0)
    *out = (unsigned)x;
  return rc;
}

static int get_size(const pctx_t *c, const yaml_node_t *v, const char *key, uint64_t *out) {
  if (gpum__sim_parse_size(scalar(v), out) != 0)
    return bad_value(c, v, key, "a size like 80GiB or 512MiB");
  return 0;
}

static int get_bool(const pctx_t *c, const yaml_node_t *v, const char *key, bool *out) {
  const char *s = scalar(v);
  if (s && (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on")))
    *out = true;
  else if (s && (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off")))
    *out = false;
  else
    return bad_value(c, v, key, "true or false");
  return 0;
}

static int get_string(const pctx_t *c, const yaml_node_t *v, const char *key, char *dst,
                      size_t len) {
  const char *s = scalar(v);
  char expect[64];
  snprintf(expect, sizeof expect, "a string of 1 to %zu characters", len - 1);
  if (!s || !*s || !gpum__sim_strfit(dst, len, s))
    return bad_value(c, v, key, expect);
  return 0;
}

/* "MAJOR.MINOR" version strings: "9.0" (compute capability), "12.4" (CUDA). */
static int get_version(const pctx_t *c, const yaml_node_t *v, const char *key, int *major,
                       int *minor) {
  const char *s = scalar(v);
  unsigned a, b;
  char tail;
  if (!s || sscanf(s, "%u.%u%c", &a, &b, &tail) != 2 || a > 99 || b > 99)
    return bad_value(c, v, key, "MAJOR.MINOR, like \"9.0\"");
  *major = (int)a;
  *minor = (int)b;
  return 0;
}

#define FOR_PAIRS(c, map, p)                                                                     \
  for (yaml_node_pair_t *p = (map)->data.mapping.pairs.start; p < (map)->data.mapping.pairs.top; \
       p++)

static yaml_node_t *node(const pctx_t *c, int id) {
  return yaml_document_get_node(c->doc, id);
}

static int need_mapping(const pctx_t *c, const yaml_node_t *n, const char *what) {
  if (!n || n->type != YAML_MAPPING_NODE)
    return fail(c, n, "expected a mapping for ", what);
  return 0;
}

uint32_t gpum__sim_metric_bit(const char *name) {
  static const char *const names[] = {GPUM_SIM_METRIC_NAMES};
  _Static_assert(sizeof names / sizeof names[0] == 13 && GPUM__SIM_M_PROC_UTIL == 1u << 12,
                 "GPUM_SIM_METRIC_NAMES and GPUM__SIM_M_* disagree");
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (name && !strcmp(name, names[i]))
      return 1u << i;
  return 0;
}

static int parse_sub(const pctx_t *c, yaml_node_t *map, const char *what, const char *const *keys,
                     unsigned *const *dst, unsigned max) {
  int rc = need_mapping(c, map, what);
  if (rc)
    return rc;
  FOR_PAIRS(c, map, p) {
    yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
    const char *key = scalar(k);
    size_t i = 0;
    while (keys[i] && (!key || strcmp(keys[i], key)))
      i++;
    if (!keys[i])
      return fail(c, k, "unknown key in ", what);
    if ((rc = get_uint(c, v, keys[i], 0, max, dst[i])))
      return rc;
  }
  return 0;
}

static int parse_unsupported(const pctx_t *c, yaml_node_t *v, uint32_t *mask) {
  if (!v || v->type != YAML_SEQUENCE_NODE)
    return fail(c, v, "'unsupported' must be a list of metric names", "");
  for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
    yaml_node_t *e = node(c, *it);
    uint32_t bit = gpum__sim_metric_bit(scalar(e));
    if (!bit)
      return bad_value(c, e, "unsupported",
                       "memory, memory_v2, utilization, temperature, power, clocks, ecc, "
                       "retired_pages, remapped_rows, processes, events, pci or "
                       "process_utilization");
    *mask |= bit;
  }
  return 0;
}

int gpum__sim_mig_profile(const char *s, unsigned *slices, unsigned *mem_gb) {
  unsigned c, m;
  int used = 0;
  if (!s || sscanf(s, "%ug.%ugb%n", &c, &m, &used) != 2 || s[used] || !isdigit((unsigned char)*s))
    return -1;
  if (c < 1 || c > GPUM__SIM_MIG_MAX || m < 1 || m > 999)
    return -1;
  *slices = c;
  *mem_gb = m;
  return 0;
}

/* mig: a list of profiles ("3g.40gb"), one instance each, in MIG device index order; an empty
 * list is a GPU in MIG mode with no instance yet. The slices must fit the GPU's seven. */
static int parse_mig(const pctx_t *c, yaml_node_t *v, struct gpum__sim_dev_spec *d) {
  if (!v || v->type != YAML_SEQUENCE_NODE)
    return fail(c, v, "'mig' must be a list of MIG profiles like [3g.40gb, 2g.20gb]", "");
  unsigned slices = 0;
  d->mig_capable = 1;
  d->mig_mode = d->mig_pending = NVML_DEVICE_MIG_ENABLE;
  d->mig_n = 0;
  for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
    yaml_node_t *e = node(c, *it);
    unsigned sl, gb;
    if (gpum__sim_mig_profile(scalar(e), &sl, &gb) != 0)
      return bad_value(c, e, "mig", "a MIG profile like 1g.10gb or 3g.40gb");
    slices += sl;
    if (d->mig_n >= GPUM__SIM_MIG_MAX || slices > GPUM__SIM_MIG_MAX)
      return fail(c, e, "the MIG profiles need more than the GPU's 7 slices", "");
    snprintf(d->mig_prof[d->mig_n++], sizeof d->mig_prof[0], "%s", scalar(e));
  }
  return 0;
}

static void device_defaults(struct gpum__sim_dev_spec *d) {
  memset(d, 0, sizeof *d);
  d->power_limit_mw = 300000;
  d->cc_major = 8;
  d->multiprocessors = 108;
  d->temp_idle = 32;
  d->temp_max = 78;
  d->temp_slowdown = 87;
  d->temp_shutdown = 92;
  d->temp_mem_max = 95;
  d->temp_gpu_max = 88;
  d->clock_sm_idle = 210;
  d->clock_sm_max = 1410;
  d->clock_mem_idle = 405;
  d->clock_mem_max = 1215;
  d->clock_video_max = 1290;
  d->ecc = true;
  d->virtual_memory = true;
  d->process_stride = 24;
  d->thermal_tau_s = 5.0;
  d->power_tau_s = 1.0;
  d->pci_device_id = 0x20B010DE;
  d->pci_subsystem_id = 0x134F10DE;
  d->reserved = UINT64_MAX; /* derived from memory below */
}

static int parse_device_key(const pctx_t *c, const char *key, yaml_node_t *k, yaml_node_t *v,
                            struct gpum__sim_dev_spec *d, unsigned *count, unsigned *pwr_idle_w,
                            unsigned *pwr_max_w) {
  unsigned w;
  if (!strcmp(key, "count"))
    return get_uint(c, v, key, 1, GPUM__SIM_MAX_DEVICES, count);
  if (!strcmp(key, "name"))
    return get_string(c, v, key, d->name, NVML_DEVICE_NAME_BUFFER_SIZE);
  if (!strcmp(key, "vendor")) {
    const char *s = scalar(v);
    if (s && !strcmp(s, "nvidia"))
      d->vendor = GPUM__SIM_V_NVIDIA;
    else if (s && !strcmp(s, "amd"))
      d->vendor = GPUM__SIM_V_AMD;
    else if (s && !strcmp(s, "intel"))
      d->vendor = GPUM__SIM_V_INTEL;
    else
      return bad_value(c, v, key, "nvidia, amd or intel");
    return 0;
  }
  if (!strcmp(key, "uuid"))
    return get_string(c, v, key, d->uuid, NVML_DEVICE_UUID_BUFFER_SIZE);
  if (!strcmp(key, "pci_bus_id")) {
    const char *s = scalar(v);
    unsigned dom, bus, dev, fn;
    char tail;
    if (!s || sscanf(s, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4 || bus > 255 ||
        dev > 31 || fn > 7)
      return bad_value(c, v, key, "DOMAIN:BUS:DEVICE.FUNCTION in hex, like 0000:18:00.0");
    d->pci_domain = dom;
    d->pci_bus = bus;
    d->pci_device = dev;
    d->pci_bus_id[0] = '\x01'; /* given: formatted later */
    return 0;
  }
  if (!strcmp(key, "pci_device_id")) {
    unsigned long long x;
    int rc = get_ull(c, v, key, 0, UINT32_MAX, &x);
    d->pci_device_id = (unsigned)x;
    return rc;
  }
  if (!strcmp(key, "memory"))
    return get_size(c, v, key, &d->memory);
  if (!strcmp(key, "reserved"))
    return get_size(c, v, key, &d->reserved);
  if (!strcmp(key, "context_memory"))
    return get_size(c, v, key, &d->context_memory);
  if (!strcmp(key, "power_limit")) {
    int rc = get_uint(c, v, key, 1, 100000, &w);
    d->power_limit_mw = w * 1000;
    return rc;
  }
  if (!strcmp(key, "compute_capability"))
    return get_version(c, v, key, &d->cc_major, &d->cc_minor);
  if (!strcmp(key, "multiprocessors"))
    return get_uint(c, v, key, 1, 10000, &d->multiprocessors);
  if (!strcmp(key, "ecc"))
    return get_bool(c, v, key, &d->ecc);
  if (!strcmp(key, "virtual_memory"))
    return get_bool(c, v, key, &d->virtual_memory);
  if (!strcmp(key, "unsupported"))
    return parse_unsupported(c, v, &d->unsupported);
  if (!strcmp(key, "mig"))
    return parse_mig(c, v, d);
  if (!strcmp(key, "mps")) {
    bool on = false;
    int rc = get_bool(c, v, key, &on);
    d->mps = on;
    return rc;
  }
  if (!strcmp(key, "mig_pending")) {
    bool on = false;
    int rc = get_bool(c, v, key, &on);
    d->mig_capable = 1;
    d->mig_pending = on ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    return rc;
  }
  if (!strcmp(key, "process_stride")) {
    int rc = get_uint(c, v, key, 24, 32, &d->process_stride);
    if (rc == 0 && d->process_stride != 24 && d->process_stride != 32)
      return bad_value(c, v, key, "24 or 32");
    return rc;
  }
  if (!strcmp(key, "thermal_time_constant") || !strcmp(key, "power_time_constant")) {
    uint64_t ms;
    if (gpum__sim_parse_duration_ms(scalar(v), &ms) != 0 || ms > 3600000)
      return bad_value(c, v, key, "a duration like 5s or 500ms, at most 1h");
    *(key[0] == 't' ? &d->thermal_tau_s : &d->power_tau_s) = (double)ms / 1000.0;
    return 0;
  }
  if (!strcmp(key, "temperature")) {
    static const char *const keys[] = {"idle",       "max",     "slowdown", "shutdown",
                                       "memory_max", "gpu_max", NULL};
    unsigned *const dst[] = {&d->temp_idle,     &d->temp_max,     &d->temp_slowdown,
                             &d->temp_shutdown, &d->temp_mem_max, &d->temp_gpu_max};
    return parse_sub(c, v, "'temperature' (idle, max, slowdown, shutdown, memory_max, gpu_max)",
                     keys, dst, 200);
  }
  if (!strcmp(key, "power")) {
    static const char *const keys[] = {"idle", "max", NULL};
    unsigned *const dst[] = {pwr_idle_w, pwr_max_w};
    return parse_sub(c, v, "'power' (idle, max: watts)", keys, dst, 100000);
  }
  if (!strcmp(key, "clocks")) {
    static const char *const keys[] = {"sm_idle", "sm_max",    "mem_idle",
                                       "mem_max", "video_max", NULL};
    unsigned *const dst[] = {&d->clock_sm_idle, &d->clock_sm_max, &d->clock_mem_idle,
                             &d->clock_mem_max, &d->clock_video_max};
    return parse_sub(c, v, "'clocks' (sm_idle, sm_max, mem_idle, mem_max, video_max: MHz)", keys,
                     dst, 100000);
  }
  return fail(c, k, "unknown device key ", key);
}

static uint64_t fnv1a(const char *s, uint64_t h) {
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 1099511628211ull;
  }
  return h;
}

/* Fills what the spec left out: PCI ids, derived power and reserve. UUIDs depend on the node's
 * name, which may differ from the spec's, so gpum__sim_spec_set_name makes them. */
/* splitmix64's finaliser: neighbouring keys give unrelated UUIDs. */
static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void gpum__sim_spec_set_name(struct gpum__sim_node_spec *s, const char *name) {
  gpum__sim_strfit(s->name, sizeof s->name, name);
  for (unsigned i = 0; i < s->device_count; i++) {
    struct gpum__sim_dev_spec *d = &s->dev[i];
    if (d->uuid[0] && !d->uuid_generated)
      continue;
    char key[128];
    snprintf(key, sizeof key, "%s/%u", name, i);
    uint64_t a = mix(fnv1a(key, 14695981039346656037ull)), b = mix(a ^ 0x9e3779b97f4a7c15ull);
    d->uuid_generated = true;
    if (d->mig_of) {
      /* A MIG device's UUID (R470 on): "MIG-" and a UUID of its own. */
      snprintf(d->uuid, sizeof d->uuid, "MIG-%08x-%04x-%04x-%04x-%012llx", (unsigned)(a >> 32),
               (unsigned)(a >> 16) & 0xffff, (unsigned)a & 0xffff, (unsigned)(b >> 48),
               (unsigned long long)(b & 0xffffffffffffull));
      continue;
    }
    if (d->vendor == GPUM__SIM_V_AMD) {
      /* ROCm's form: the 64-bit unique id in hex after "GPU-", as ROCR_VISIBLE_DEVICES takes it. */
      d->unique_id = a;
      snprintf(d->uuid, sizeof d->uuid, "GPU-%016llx", (unsigned long long)a);
      continue;
    }
    if (d->vendor == GPUM__SIM_V_INTEL) {
      /* Level Zero's 16 bytes, written in order as a UUID: PCI vendor and device id first
       * (little-endian, as Intel's driver puts them), the rest from the hash. */
      unsigned dev = d->pci_device_id >> 16;
      snprintf(d->uuid, sizeof d->uuid, "8680%02x%02x-%04x-%04x-%04x-%012llx", dev & 0xff, dev >> 8,
               (unsigned)(a >> 48), (unsigned)(a >> 32) & 0xffff, (unsigned)(b >> 48),
               (unsigned long long)(b & 0xffffffffffffull));
      continue;
    }
    snprintf(d->uuid, sizeof d->uuid, "GPU-%08x-%04x-%04x-%04x-%012llx", (unsigned)(a >> 32),
             (unsigned)(a >> 16) & 0xffff, (unsigned)a & 0xffff, (unsigned)(b >> 48),
             (unsigned long long)(b & 0xffffffffffffull));
  }
}

static void device_finish(unsigned index, struct gpum__sim_dev_spec *d, unsigned pwr_idle_w,
                          unsigned pwr_max_w) {
  if (!d->pci_bus_id[0]) {
    d->pci_domain = 0;
    d->pci_bus = 0x18 + 0x0d * index;
    d->pci_device = 0;
  }
  snprintf(d->pci_bus_id, sizeof d->pci_bus_id, "%08X:%02X:%02X.0", d->pci_domain, d->pci_bus,
           d->pci_device);
  if (d->reserved == UINT64_MAX)
    d->reserved = d->memory >= 32 * GIB ? 512 * MIB : 256 * MIB;
  d->power_idle_mw = pwr_idle_w ? pwr_idle_w * 1000 : d->power_limit_mw / 6;
  d->power_max_mw = pwr_max_w ? pwr_max_w * 1000 : d->power_limit_mw / 100 * 95;
  /* One memory-repair scheme per generation, as on the real boards: Ampere (8.0) and later
   * remap rows and have no page retirement; older GPUs retire pages and cannot remap rows. */
  d->unsupported |= d->cc_major >= 8 ? GPUM__SIM_M_RETIRED_PAGES : GPUM__SIM_M_REMAPPED_ROWS;
}

/* An Intel device: a Data Center GPU Max 1550 unless the spec says otherwise; a given uuid is
 * Level Zero's 16 bytes as 8-4-4-4-12 hex digits. */
static int intel_defaults(const pctx_t *c, yaml_node_t *dn, struct gpum__sim_dev_spec *d) {
  if (!d->name[0])
    snprintf(d->name, sizeof d->name, "%s", "Intel(R) Data Center GPU Max 1550");
  if (!d->memory)
    d->memory = 128 * GIB;
  if (d->pci_device_id == 0x20B010DE) {
    d->pci_device_id = 0x0BD58086; /* device << 16 | vendor */
    d->pci_subsystem_id = 0x00008086;
  }
  if (d->uuid[0] && !gpum__sim_uuid_bytes(d->uuid, NULL))
    return fail(c, dn, "an Intel device's 'uuid' is 8-4-4-4-12 hex digits (Level Zero's 16 bytes)",
                "");
  return 0;
}

static int parse_device(const pctx_t *c, yaml_node_t *dn, struct gpum__sim_node_spec *s) {
  struct gpum__sim_dev_spec d;
  unsigned count = 1, pwr_idle_w = 0, pwr_max_w = 0;
  int rc = need_mapping(c, dn, "a device");
  if (rc)
    return rc;
  device_defaults(&d);
  FOR_PAIRS(c, dn, p) {
    yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
    const char *key = scalar(k);
    if (!key)
      return fail(c, k, "device keys must be scalars", "");
    if ((rc = parse_device_key(c, key, k, v, &d, &count, &pwr_idle_w, &pwr_max_w)))
      return rc;
  }
  if (d.vendor == GPUM__SIM_V_INTEL && (rc = intel_defaults(c, dn, &d)))
    return rc;
  if (!d.name[0])
    return fail(c, dn, "device without 'name'", "");
  if (d.vendor == GPUM__SIM_V_AMD && d.uuid[0]) {
    unsigned long long id;
    char tail;
    if (strlen(d.uuid) != 20 || sscanf(d.uuid, "GPU-%16llx%c", &id, &tail) != 1)
      return fail(c, dn, "an AMD device's 'uuid' is GPU- and 16 hex digits (its unique id)", "");
    d.unique_id = id;
  }
  if (d.vendor == GPUM__SIM_V_AMD && d.pci_device_id == 0x20B010DE)
    d.pci_device_id = 0x74A11002; /* device << 16 | vendor: an MI300X */
  if (!d.memory)
    return fail(c, dn, "device without 'memory' (a size like 80GiB)", "");
  if (d.reserved != UINT64_MAX && d.reserved >= d.memory)
    return fail(c, dn, "'reserved' must be smaller than 'memory'", "");
  if (count > 1 && (d.uuid[0] || d.pci_bus_id[0]))
    return fail(c, dn, "'uuid' and 'pci_bus_id' need 'count: 1' (they must be unique)", "");
  if (d.temp_idle > d.temp_max)
    return fail(c, dn, "temperature 'idle' is above 'max'", "");
  /* Data-centre GPUs from Ampere on (A100, A30: 8.0; H100, H200: 9.0; B200: 10.0) support MIG
   * mode, disabled unless the spec gives 'mig'. */
  if (d.vendor == GPUM__SIM_V_NVIDIA && d.cc_major >= 8 && d.cc_minor == 0)
    d.mig_capable = 1;
  if (d.mps && (d.vendor != GPUM__SIM_V_NVIDIA || d.mig_mode == NVML_DEVICE_MIG_ENABLE))
    return fail(c, dn, "'mps' is simulated on whole NVIDIA GPUs only (not with 'mig')", "");
  if ((d.mig_n || d.mig_mode) && d.vendor != GPUM__SIM_V_NVIDIA)
    return fail(c, dn, "'mig' is for NVIDIA devices", "");
  uint64_t mig_bytes = 0;
  for (unsigned i = 0; i < d.mig_n; i++) {
    unsigned sl, gb;
    gpum__sim_mig_profile(d.mig_prof[i], &sl, &gb);
    mig_bytes += (uint64_t)gb * GIB;
  }
  if (mig_bytes > d.memory)
    return fail(c, dn, "the MIG instances' memory is more than the device's 'memory'", "");
  if (s->device_count + count > GPUM__SIM_MAX_DEVICES)
    return fail(c, dn, "too many devices (at most 16 per node)", "");
  for (unsigned i = 0; i < count; i++) {
    struct gpum__sim_dev_spec *t = &s->dev[s->device_count];
    *t = d;
    device_finish(s->device_count, t, pwr_idle_w, pwr_max_w);
    s->device_count++;
  }
  return 0;
}

static int parse_fault(const pctx_t *c, yaml_node_t *fn, struct gpum__sim_node_spec *s) {
  int rc = need_mapping(c, fn, "a fault");
  if (rc)
    return rc;
  if (s->sched_count >= GPUM__SIM_MAX_SCHED)
    return fail(c, fn, "too many scheduled faults (at most 32)", "");
  struct gpum__sim_sched_fault f = {.device = UINT32_MAX};
  bool have_at = false;
  FOR_PAIRS(c, fn, p) {
    yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
    const char *key = scalar(k);
    unsigned long long x;
    if (!key)
      return fail(c, k, "fault keys must be scalars", "");
    if (!strcmp(key, "device")) {
      if ((rc = get_uint(c, v, key, 0, GPUM__SIM_MAX_DEVICES - 1, &f.device)))
        return rc;
    } else if (!strcmp(key, "at")) {
      if (gpum__sim_parse_duration_ms(scalar(v), &f.at_ms) != 0)
        return bad_value(c, v, key, "a duration like 30s");
      have_at = true;
    } else if (f.fault.kind) {
      return fail(c, k, "a fault has one kind; extra key ", key);
    } else if (!strcmp(key, "xid")) {
      if ((rc = get_ull(c, v, key, 1, 999, &x)))
        return rc;
      f.fault = (gpum_sim_fault_t){.kind = GPUM_SIM_FAULT_XID, .value = (int64_t)x};
    } else if (!strcmp(key, "ecc")) {
      const char *e = scalar(v);
      if (!e || (strcmp(e, "single") && strcmp(e, "double")))
        return bad_value(c, v, key, "single or double");
      f.fault = (gpum_sim_fault_t){
          .kind = e[0] == 's' ? GPUM_SIM_FAULT_ECC_SINGLE : GPUM_SIM_FAULT_ECC_DOUBLE, .value = 1};
    } else if (!strcmp(key, "temp")) {
      if ((rc = get_ull(c, v, key, 0, 200, &x)))
        return rc;
      f.fault = (gpum_sim_fault_t){.kind = GPUM_SIM_FAULT_TEMP, .value = (int64_t)x};
    } else if (!strcmp(key, "slow")) {
      uint64_t ms;
      if (gpum__sim_parse_duration_ms(scalar(v), &ms) != 0 || ms > UINT32_MAX)
        return bad_value(c, v, key, "a duration like 500ms");
      f.fault = (gpum_sim_fault_t){.kind = GPUM_SIM_FAULT_SLOW, .value = (int64_t)ms};
    } else if (!strcmp(key, "fail_after")) {
      uint64_t b;
      if ((rc = get_size(c, v, key, &b)))
        return rc;
      f.fault = (gpum_sim_fault_t){.kind = GPUM_SIM_FAULT_FAIL_AFTER, .value = (int64_t)b};
    } else if (!strcmp(key, "error_rate")) {
      const char *e = scalar(v);
      char *end;
      double r = e ? strtod(e, &end) : -1;
      if (!e || *end || !(r >= 0 && r <= 1))
        return bad_value(c, v, key, "a fraction from 0 to 1");
      f.fault = (gpum_sim_fault_t){.kind = GPUM_SIM_FAULT_ERROR_RATE, .rate = r};
    } else {
      return fail(c, k, "unknown fault key ", key);
    }
  }
  if (f.device == UINT32_MAX || !have_at || !f.fault.kind)
    return fail(c, fn,
                "a fault needs 'device', 'at' and one of xid, ecc, temp, slow, fail_after, "
                "error_rate",
                "");
  s->sched[s->sched_count++] = f;
  return 0;
}

static int parse_seq(const pctx_t *c, yaml_node_t *v, const char *what,
                     struct gpum__sim_node_spec *s,
                     int (*fn)(const pctx_t *, yaml_node_t *, struct gpum__sim_node_spec *)) {
  if (!v || v->type != YAML_SEQUENCE_NODE)
    return fail(c, v, "expected a list for ", what);
  for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
    int rc = fn(c, node(c, *it), s);
    if (rc)
      return rc;
  }
  return 0;
}

/* Appends each MIG parent's instances as node devices of their own, after every spec device,
 * parents in node order and each one's instances in MIG device index order. GPU instance ids
 * are handed out from 1 per parent in that order, compute instance ids are 0 (one compute
 * instance per GPU instance, the default layout). */
static int expand_mig(const pctx_t *c, yaml_node_t *at, struct gpum__sim_node_spec *s) {
  unsigned top = s->device_count;
  for (unsigned p = 0; p < top; p++) {
    struct gpum__sim_dev_spec *d = &s->dev[p];
    for (unsigned k = 0; k < d->mig_n; k++) {
      if (s->device_count >= GPUM__SIM_MAX_DEVICES)
        return fail(c, at, "too many devices with the MIG instances (at most 16 per node)", "");
      struct gpum__sim_dev_spec *m = &s->dev[s->device_count++];
      unsigned sl, gb;
      gpum__sim_mig_profile(d->mig_prof[k], &sl, &gb);
      *m = *d;
      m->mig_capable = m->mig_mode = m->mig_pending = m->mig_n = m->mps = 0;
      memset(m->mig_prof, 0, sizeof m->mig_prof);
      m->mig_of = p + 1;
      m->mig_index = k;
      m->mig_gi = k + 1;
      m->mig_ci = 0;
      m->memory = (uint64_t)gb * GIB;
      m->reserved = 0;
      m->uuid[0] = '\0';
      m->uuid_generated = false;
      m->multiprocessors = d->multiprocessors * sl / GPUM__SIM_MIG_MAX;
      if (m->multiprocessors == 0)
        m->multiprocessors = 1;
      char pname[sizeof d->name], prof[sizeof d->mig_prof[0]];
      memcpy(pname, d->name, sizeof pname);
      memcpy(prof, d->mig_prof[k], sizeof prof);
      snprintf(m->name, sizeof m->name, "%.60s MIG %s", pname, prof);
    }
  }
  return 0;
}

static int parse_root(const pctx_t *c, yaml_node_t *root, struct gpum__sim_node_spec *s) {
  yaml_node_t *devices = NULL, *faults = NULL;
  int rc = need_mapping(c, root, "the spec (name, driver_version, cuda_version, devices)");
  if (rc)
    return rc;
  s->cuda_version = 12040;
  gpum__sim_strfit(s->driver_version, sizeof s->driver_version, "550.54.15");
  FOR_PAIRS(c, root, p) {
    yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
    const char *key = scalar(k);
    if (!key)
      return fail(c, k, "keys must be scalars", "");
    if (!strcmp(key, "name")) {
      if ((rc = get_string(c, v, key, s->name, sizeof s->name)))
        return rc;
      if (!gpum__sim_valid_name(s->name))
        return bad_value(c, v, key, "1-64 characters from A-Z a-z 0-9 _ . -");
    } else if (!strcmp(key, "driver_version")) {
      if ((rc = get_string(c, v, key, s->driver_version, 32)))
        return rc;
    } else if (!strcmp(key, "cuda_version")) {
      int major = 0, minor = 0;
      if ((rc = get_version(c, v, key, &major, &minor)))
        return rc;
      s->cuda_version = major * 1000 + minor * 10;
    } else if (!strcmp(key, "devices")) {
      devices = v;
    } else if (!strcmp(key, "faults")) {
      faults = v;
    } else {
      return fail(c, k, "unknown key ", key);
    }
  }
  if (!devices)
    return fail(c, root, "the spec has no 'devices' list", "");
  if ((rc = parse_seq(c, devices, "'devices'", s, parse_device)))
    return rc;
  if (s->device_count == 0)
    return fail(c, devices, "'devices' is empty", "");
  if ((rc = expand_mig(c, devices, s)))
    return rc;
  if (faults && (rc = parse_seq(c, faults, "'faults'", s, parse_fault)))
    return rc;
  for (unsigned i = 0; i < s->sched_count; i++)
    if (s->sched[i].device >= s->device_count)
      return gpum__sim_err(GPUM_EINVAL,
                           "%s: scheduled fault %u names device %u, but the node has %u", c->path,
                           i, s->sched[i].device, s->device_count);
  return 0;
}

int gpum__sim_spec_load(const char *path, struct gpum__sim_node_spec *out) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return gpum__sim_err(errno == ENOENT ? GPUM_ENOENT : GPUM_EIO, "cannot open spec %s: %s", path,
                         strerror(errno));
  yaml_parser_t parser;
  yaml_document_t doc;
  int rc = 0;
  memset(out, 0, sizeof *out);
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_file(&parser, f);
  if (!yaml_parser_load(&parser, &doc)) {
    rc = gpum__sim_err(GPUM_EPARSE, "%s:%lu:%lu: YAML error: %s", path,
                       (unsigned long)parser.problem_mark.line + 1,
                       (unsigned long)parser.problem_mark.column + 1,
                       parser.problem ? parser.problem : "malformed");
    goto out_parser;
  }
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  if (!root) {
    rc = gpum__sim_err(GPUM_EPARSE, "%s: the spec is empty", path);
    goto out_doc;
  }
  pctx_t c = {.doc = &doc, .path = path};
  rc = parse_root(&c, root, out);
out_doc:
  yaml_document_delete(&doc);
out_parser:
  yaml_parser_delete(&parser);
  fclose(f);
  return rc;
}
