/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum sim ...`: start, inspect, fault and stop simulated GPU nodes (docs/sim.md).
 *
 * The command dlopens libgpum_sim.so (RTLD_LOCAL, found like the device layer finds it: the
 * sim.library option / $GPUM_SIM_LIBRARY, else beside libgpum.so, else by name) and calls its
 * control API (include/gpum/sim.h) through dlsym. gpum is never linked against the simulator:
 * its nvml and cu symbols must not stand in for a real driver's.
 *
 * Exit codes: 0 success, 1 failure (reason on stderr, nothing changed), 2 usage error.
 */
#include <dlfcn.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gpum/error.h>
#include <gpum/sim.h>
#include <gpum/size.h>

#include "args.h"
#include "cli.h"

#define SIM_SO "libgpum_sim.so"

/* The control API, resolved with dlsym. */
typedef struct {
  void *dl;
  const char *(*last_error)(void);
  int (*create)(const char *, const char *, char *, size_t);
  int (*destroy)(const char *);
  int (*list)(char (*)[GPUM_SIM_NAME_MAX + 1], size_t, size_t *);
  int (*inject)(const char *, unsigned, const gpum_sim_fault_t *);
  int (*clear)(const char *, unsigned);
  int (*set_util)(const char *, unsigned, int, int);
  int (*hold)(const char *, unsigned, uint64_t, uint64_t, pid_t *);
  int (*status)(const char *, gpum_sim_status_t *);
} simapi_t;

static void *sym(void *dl, const char *name, int *missing) {
  void *p = dlsym(dl, name);
  if (!p) {
    fprintf(stderr, "gpum sim: %s lacks %s (a different gpum version?)\n", SIM_SO, name);
    *missing = 1;
  }
  return p;
}

/* Where libgpum_sim.so is: option or environment, beside libgpum.so, or by name. */
static const char *sim_path(gpum_config_t *cfg, char *buf, size_t len) {
  const char *opt = cfg ? gpum_config_get_string(cfg, "sim.library") : NULL;
  if (opt && *opt)
    return opt;
  const char *env = getenv("GPUM_SIM_LIBRARY");
  if (env && *env)
    return env;
  Dl_info info;
  const char *(*fn)(int) = gpum_strerror; /* any function of libgpum.so */
  void *addr;
  memcpy(&addr, &fn, sizeof addr);
  if (dladdr(addr, &info) && info.dli_fname) {
    const char *slash = strrchr(info.dli_fname, '/');
    if (slash) {
      int w = snprintf(buf, len, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname, SIM_SO);
      if (w > 0 && (size_t)w < len && access(buf, R_OK) == 0)
        return buf;
    }
  }
  return SIM_SO;
}

static int load_api(gpum_config_t *cfg, simapi_t *api) {
  char buf[PATH_MAX];
  const char *path = sim_path(cfg, buf, sizeof buf);
  memset(api, 0, sizeof *api);
  api->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!api->dl) {
    fprintf(stderr, "gpum sim: cannot load the simulator %s: %s\n", path, dlerror());
    fprintf(stderr, "  set GPUM_SIM_LIBRARY to the path of %s\n", SIM_SO);
    return 1;
  }
  int missing = 0;
  /* POSIX: a dlsym result converts to a function pointer; memcpy keeps ISO C quiet. */
#define RESOLVE(field, name)                 \
  do {                                       \
    void *p_ = sym(api->dl, name, &missing); \
    memcpy(&api->field, &p_, sizeof p_);     \
  } while (0)
  RESOLVE(last_error, "gpum_sim_last_error");
  RESOLVE(create, "gpum_sim_create");
  RESOLVE(destroy, "gpum_sim_destroy");
  RESOLVE(list, "gpum_sim_list");
  RESOLVE(inject, "gpum_sim_inject");
  RESOLVE(clear, "gpum_sim_clear");
  RESOLVE(set_util, "gpum_sim_set_util");
  RESOLVE(hold, "gpum_sim_hold");
  RESOLVE(status, "gpum_sim_status");
#undef RESOLVE
  if (missing) {
    dlclose(api->dl);
    return 1;
  }
  return 0;
}

/* Reports a failed control call: 1. */
static int failed(const simapi_t *api, const char *what, int rc) {
  const char *detail = api->last_error();
  fprintf(stderr, "gpum sim %s: %s\n", what, detail && *detail ? detail : gpum_strerror(rc));
  return 1;
}

/* ---- argument parsing ---- */

static int bad(const char *sub, const char *opt, const char *val, const char *expect) {
  fprintf(stderr, "gpum sim %s: bad value '%s' for %s (expected %s)\n", sub, val ? val : "", opt,
          expect);
  return 2;
}

/* Reports a required option left out (what: "--util PCT"): 2. */
static int missing(const char *sub, const char *what) {
  fprintf(stderr, "gpum sim %s: %s is required\n", sub, what);
  return 2;
}

static int parse_device(const char *sub, const char *s, unsigned *out) {
  unsigned long long v;
  if (!s)
    return missing(sub, "--device I");
  if (cli_parse_uint(s, 0, GPUM_SIM_MAX_DEVICES - 1, false, &v))
    return bad(sub, "--device", s, "a device index from 0 to 15");
  *out = (unsigned)v;
  return 0;
}

/* ---- subcommands ---- */

typedef struct sim_sub sim_sub_t;

/* A subcommand: its name, how many positional arguments it takes (exactly), and its options,
 * usage and summary (spec: its --help, and `gpum sim --help`'s list). api is NULL when it is
 * run for --help. */
struct sim_sub {
  const char *name;
  int (*run)(const simapi_t *api, const sim_sub_t *sub, int argc, char **argv);
  int npos;
  const cli_cmd_spec_t *spec;
};

#define SIM_MAX_OPTS 24 /* above every option id (O_*, below) */

/* The preamble every subcommand shares: parses argv against its spec, the options' values into
 * v (by id) and its sub->npos positional arguments into pos. Returns true when the subcommand
 * goes on; else false with *rc its exit code: 0 after its help, 2 after a usage error. */
static bool sim_args(const sim_sub_t *sub, int argc, char **argv, const char **v, const char **pos,
                     int *rc) {
  int np;
  int r = cli_args_collect(sub->spec, argc, argv, v, SIM_MAX_OPTS, pos, sub->npos, sub->npos, &np);
  *rc = r == CLI_ARGS_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
  return r == 0;
}

/* The end of a subcommand whose last step is the control call that returned rc: 0, or 1 with
 * the failure reported. */
static int sim_done(const simapi_t *api, const sim_sub_t *sub, int rc) {
  return rc ? failed(api, sub->name, rc) : 0;
}

enum {
  O_NAME = 1,
  O_JSON,
  O_DEVICE,
  O_XID,
  O_ECC,
  O_TEMP,
  O_ERROR_RATE,
  O_SLOW,
  O_FAIL_AFTER,
  O_CKPT_FAIL,
  O_RESTORE_FAIL,
  O_COUNT,
  O_UTIL,
  O_MEM_UTIL,
  O_BYTES,
  O_FOR,
  O_COUNT_
};

_Static_assert(O_COUNT_ <= SIM_MAX_OPTS, "SIM_MAX_OPTS holds every option id");

static const cli_arg_t start_args[] = {
    {O_NAME, "--name", 0, "NAME", "the node's name (default: the spec's 'name')", 0},
    {0},
};
static const cli_cmd_spec_t start_spec = {
    .name = "sim start",
    .usage = "SPEC [--name NAME]",
    .summary = "Start a simulated GPU node from a YAML spec.",
    .text = "SPEC describes the node (see examples/sim/ and docs/sim.md). Programs use the node\n"
            "when GPUM_SIM_NODE=NAME is in their environment.",
    .args = start_args,
    .examples = "gpum sim start examples/sim/h100x2.yaml\n"
                "GPUM_SIM_NODE=h100x2 gpum status",
    .exit_status = "0, 1 when the node cannot be started, 2 for usage errors.",
};

static int sim_start(const simapi_t *api, const sim_sub_t *sub, int argc, char **argv) {
  const char *v[SIM_MAX_OPTS] = {0}, *pos[1];
  int rc;
  if (!sim_args(sub, argc, argv, v, pos, &rc))
    return rc;
  const char *name = v[O_NAME];
  char actual[GPUM_SIM_NAME_MAX + 1];
  if ((rc = api->create(pos[0], name, actual, sizeof actual)))
    return failed(api, sub->name, rc);
  gpum_sim_status_t st = {.api_version = GPUM_SIM_API_VERSION};
  unsigned ndev = api->status(actual, &st) == 0 ? st.device_count : 0;
  printf("started simulated node '%s' with %u device%s\nuse it with: export GPUM_SIM_NODE=%s\n",
         actual, ndev, ndev == 1 ? "" : "s", actual);
  return 0;
}

static const cli_arg_t no_args[] = {{0}};
static const cli_cmd_spec_t stop_spec = {
    .name = "sim stop",
    .usage = "NAME",
    .summary = "Stop a simulated node.",
    .text = "Processes holding memory with 'gpum sim hold' end, and programs still using the\n"
            "node see the driver go away.",
    .args = no_args,
    .examples = "gpum sim stop h100x2",
    .exit_status = "0, 1 when there is no such node, 2 for usage errors.",
};

static int sim_stop(const simapi_t *api, const sim_sub_t *sub, int argc, char **argv) {
  const char *v[SIM_MAX_OPTS] = {0}, *pos[1];
  int rc;
  if (!sim_args(sub, argc, argv, v, pos, &rc))
    return rc;
  return sim_done(api, sub, api->destroy(pos[0]));
}

static const cli_cmd_spec_t list_spec = {
    .name = "sim list",
    .usage = "",
    .summary = "List this user's simulated nodes, one name a line.",
    .args = no_args,
    .examples = "gpum sim list",
    .exit_status = "0, 1 when they cannot be listed, 2 for usage errors.",
};

static int sim_list(const simapi_t *api, const sim_sub_t *sub, int argc, char **argv) {
  const char *v[SIM_MAX_OPTS] = {0}, *pos[1];
  int rc;
  if (!sim_args(sub, argc, argv, v, pos, &rc))
    return rc;
  char names[64][GPUM_SIM_NAME_MAX + 1];
  size_t n;
  if ((rc = api->list(names, 64, &n)))
    return failed(api, sub->name, rc);
  for (size_t i = 0; i < n && i < 64; i++)
    printf("%s\n", names[i]);
  return 0;
}

static const char *const metric_names[] = {GPUM_SIM_METRIC_NAMES};

static const char *dev_state(const gpum_sim_device_status_t *d) {
  return d->lost ? "lost" : d->reset_required ? "reset_required" : "ok";
}

static json_t *status_json(const gpum_sim_status_t *st) {
  json_t *root = json_object(), *devs = json_array(), *procs = json_array();
  char cuda[16];
  snprintf(cuda, sizeof cuda, "%d.%d", st->cuda_version / 1000, st->cuda_version % 1000 / 10);
  json_object_set_new(root, "name", json_string(st->name));
  json_object_set_new(root, "driver_version", json_string(st->driver_version));
  json_object_set_new(root, "cuda_version", json_string(cuda));
  json_object_set_new(root, "created_unix", json_integer((json_int_t)st->created_unix));
  for (unsigned i = 0; i < st->device_count; i++) {
    const gpum_sim_device_status_t *d = &st->devices[i];
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", d->cc_major, d->cc_minor);
    uint64_t taken = d->memory_reserved + d->memory_used;
    json_t *unsup = json_array();
    for (unsigned b = 0; b < sizeof metric_names / sizeof metric_names[0]; b++)
      if (d->unsupported & (1u << b))
        json_array_append_new(unsup, json_string(metric_names[b]));
    json_t *faults =
        json_pack("{s:o, s:i, s:o, s:f, s:i, s:o}", "last_xid",
                  d->last_xid ? json_integer(d->last_xid) : json_null(), "xid_count",
                  (int)d->xid_count, "temperature_override_c",
                  d->temp_override > -1000 ? json_integer(d->temp_override) : json_null(),
                  "error_rate", d->error_rate, "slow_ms", (int)d->slow_ms, "fail_after_left",
                  d->fail_after_set ? json_integer((json_int_t)d->fail_after_left) : json_null());
    json_t *ecc = json_pack(
        "{s:I, s:I, s:I, s:I}", "single_bit_volatile", (json_int_t)d->ecc_sbe_volatile,
        "double_bit_volatile", (json_int_t)d->ecc_dbe_volatile, "single_bit_aggregate",
        (json_int_t)d->ecc_sbe_aggregate, "double_bit_aggregate", (json_int_t)d->ecc_dbe_aggregate);
    json_array_append_new(
        devs,
        json_pack("{s:i, s:s, s:i, s:s, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:I}, "
                  "s:{s:i, s:i}, s:i, s:f, s:f, s:s, s:o, s:o, s:o}",
                  "index", (int)d->index, "vendor", d->vendor, "vendor_index", (int)d->vendor_index,
                  "name", d->name, "uuid", d->uuid, "pci_bus_id", d->pci_bus_id,
                  "compute_capability", cc, "memory", "total", (json_int_t)d->memory_total,
                  "reserved", (json_int_t)d->memory_reserved, "used", (json_int_t)d->memory_used,
                  "free", (json_int_t)(taken >= d->memory_total ? 0 : d->memory_total - taken),
                  "utilization", "gpu", (int)d->util_gpu, "memory", (int)d->util_mem,
                  "temperature_c", (int)d->temperature_c, "power_w", d->power_mw / 1000.0,
                  "power_limit_w", d->power_limit_mw / 1000.0, "state", dev_state(d), "faults",
                  faults, "ecc", ecc, "unsupported", unsup));
  }
  for (unsigned i = 0; i < st->process_count; i++)
    json_array_append_new(procs, json_pack("{s:i, s:i, s:I}", "pid", (int)st->processes[i].pid,
                                           "device", (int)st->processes[i].device, "bytes",
                                           (json_int_t)st->processes[i].bytes));
  json_object_set_new(root, "devices", devs);
  json_object_set_new(root, "processes", procs);
  return root;
}

static void print_faults(const gpum_sim_device_status_t *d) {
  char b[GPUM_SIZE_BUFSZ];
  int n = 0;
  printf("      faults:");
  if (d->lost)
    n += printf(" LOST (fallen off the bus)");
  if (d->reset_required)
    n += printf(" RESET REQUIRED (Xid %d)", d->last_xid);
  if (d->last_xid)
    n += printf(" last-xid=%d (%u seen)", d->last_xid, d->xid_count);
  if (d->temp_override > -1000)
    n += printf(" temp=%dC", d->temp_override);
  if (d->error_rate > 0)
    n += printf(" error-rate=%g", d->error_rate);
  if (d->slow_ms)
    n += printf(" slow=%ums", d->slow_ms);
  if (d->fail_after_set)
    n += printf(" fail-after=%s left", gpum_size_format(d->fail_after_left, b, sizeof b));
  if (d->ecc_sbe_volatile || d->ecc_dbe_volatile)
    n += printf(" ecc=%llu single/%llu double", (unsigned long long)d->ecc_sbe_volatile,
                (unsigned long long)d->ecc_dbe_volatile);
  printf("%s\n", n ? "" : " none");
}

static void status_text(const gpum_sim_status_t *st) {
  char a[GPUM_SIZE_BUFSZ], b[GPUM_SIZE_BUFSZ], c[GPUM_SIZE_BUFSZ];
  printf("node %s: %u device%s, driver %s, CUDA %d.%d\n", st->name, st->device_count,
         st->device_count == 1 ? "" : "s", st->driver_version, st->cuda_version / 1000,
         st->cuda_version % 1000 / 10);
  for (unsigned i = 0; i < st->device_count; i++) {
    const gpum_sim_device_status_t *d = &st->devices[i];
    printf("  [%u] %s %u  %s  %s  %s  cc %d.%d  %s\n", d->index, d->vendor, d->vendor_index,
           d->name, d->uuid, d->pci_bus_id, d->cc_major, d->cc_minor, dev_state(d));
    printf("      memory %s used + %s reserved of %s; util %u%% (mem %u%%); %u C; %.0f/%.0f W\n",
           gpum_size_format(d->memory_used, a, sizeof a),
           gpum_size_format(d->memory_reserved, b, sizeof b),
           gpum_size_format(d->memory_total, c, sizeof c), d->util_gpu, d->util_mem,
           d->temperature_c, d->power_mw / 1000.0, d->power_limit_mw / 1000.0);
    print_faults(d);
  }
  printf("  processes:%s\n", st->process_count ? "" : " none");
  for (unsigned i = 0; i < st->process_count; i++)
    printf("    pid %-8u device %-2u %s\n", st->processes[i].pid, st->processes[i].device,
           gpum_size_format(st->processes[i].bytes, a, sizeof a));
}

static const cli_arg_t status_args[] = {
    {O_JSON, "--json", 0, NULL, "print a JSON document", 0},
    {0},
};
static const cli_cmd_spec_t status_spec = {
    .name = "sim status",
    .usage = "NAME [--json]",
    .summary = "Show a simulated node's devices, faults and processes.",
    .text = "Its devices with memory, utilisation, temperature, power and injected faults, and\n"
            "the processes holding memory.",
    .args = status_args,
    .examples = "gpum sim status h100x2 --json | jq '.devices[0].faults'",
    .exit_status = "0, 1 when there is no such node, 2 for usage errors.",
};

static int sim_status(const simapi_t *api, const sim_sub_t *sub, int argc, char **argv) {
  const char *v[SIM_MAX_OPTS] = {0}, *pos[1];
  int rc;
  if (!sim_args(sub, argc, argv, v, pos, &rc))
    return rc;
  bool json = v[O_JSON] != NULL;
  gpum_sim_status_t *st = calloc(1, sizeof *st);
  if (!st)
    return 1;
  st->api_version = GPUM_SIM_API_VERSION;
  if ((rc = api->status(pos[0], st))) {
    free(st);
    return failed(api, sub->name, rc);
  }
  if (json) {
    json_t *j = status_json(st);
    json_dumpf(j, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    putchar('\n');
    json_decref(j);
  } else {
    status_text(st);
  }
  free(st);
  return 0;
}

/* Fills the fault from exactly one of the inject flags. Returns 0 or 2. */
static int fault_from_flags(const char *const v[8], const char *count, gpum_sim_fault_t *f) {
  static const char *const names[] = {"--xid",  "--ecc",        "--temp",      "--error-rate",
                                      "--slow", "--fail-after", "--ckpt-fail", "--restore-fail"};
  int given = 0;
  for (int i = 0; i < 8; i++)
    given += v[i] != NULL;
  if (given != 1) {
    fprintf(stderr, "gpum sim inject: give exactly one of --xid, --ecc, --temp, --error-rate, "
                    "--slow, --fail-after, --ckpt-fail, --restore-fail\n");
    return 2;
  }
  unsigned long long x;
  if (v[0]) {
    if (cli_parse_uint(v[0], 1, 999, false, &x))
      return bad("inject", names[0], v[0], "an Xid from 1 to 999");
    *f = (gpum_sim_fault_t){.kind = GPUM_SIM_FAULT_XID, .value = (int64_t)x};
  } else if (v[1]) {
    if (strcmp(v[1], "single") && strcmp(v[1], "double"))
      return bad("inject", names[1], v[1], "single or double");
    x = 1;
    if (count && cli_parse_uint(count, 1, 1000000, false, &x))
      return bad("inject", "--count", count, "a count from 1 to 1000000");
    *f = (gpum_sim_fault_t){.kind = v[1][0] == 's' ? GPUM_SIM_FAULT_ECC_SINGLE
                                                   : GPUM_SIM_FAULT_ECC_DOUBLE,
                            .value = (int64_t)x};
  } else if (v[2]) {
    char *end;
    errno = 0;
    long t = strtol(v[2], &end, 10);
    if (errno || end == v[2] || (*end && strcmp(end, "C")) || t < -50 || t > 200)
      return bad("inject", names[2], v[2], "degrees C from -50 to 200");
    *f = (gpum_sim_fault_t){.kind = GPUM_SIM_FAULT_TEMP, .value = t};
  } else if (v[3]) {
    char *end;
    errno = 0;
    double r = strtod(v[3], &end);
    bool pct = *end == '%';
    if (pct) {
      end++;
      r /= 100.0;
    }
    if (errno || end == v[3] || *end || !(r >= 0 && r <= 1))
      return bad("inject", names[3], v[3], "a fraction from 0 to 1, or a percentage like 20%");
    *f = (gpum_sim_fault_t){.kind = GPUM_SIM_FAULT_ERROR_RATE, .rate = r};
  } else if (v[4]) {
    uint64_t ms;
    if (cli_parse_uint(v[4], 0, 86400000, false, &x) == 0)
      ms = x; /* a bare number is milliseconds here */
    else if (gpum_duration_parse(v[4], &ms) != 0 || ms > 86400000)
      return bad("inject", names[4], v[4], "milliseconds, or a duration like 2s, up to 1d");
    *f = (gpum_sim_fault_t){.kind = GPUM_SIM_FAULT_SLOW, .value = (int64_t)ms};
  } else if (v[6] || v[7]) {
    int i = v[6] ? 6 : 7;
    if (cli_parse_uint(v[i], 1, 1000, false, &x))
      return bad("inject", names[i], v[i], "a count from 1 to 1000");
    *f = (gpum_sim_fault_t){.kind = v[6] ? GPUM_SIM_FAULT_CKPT_FAIL : GPUM_SIM_FAULT_RESTORE_FAIL,
                            .value = (int64_t)x};
  } else {
    uint64_t bytes;
    if (gpum_size_parse(v[5], &bytes) != 0 || bytes > INT64_MAX)
      return bad("inject", names[5], v[5], "a size like 1GiB or 512MiB");
    *f = (gpum_sim_fault_t){.kind = GPUM_SIM_FAULT_FAIL_AFTER, .value = (int64_t)bytes};
  }
  return 0;
}

static const cli_arg_t inject_args[] = {
    {O_DEVICE, "--device", 0, "I", "the device (required)", 0},
    {O_XID, "--xid", 0, "N", "an Xid error (79: GPU lost; 48, 74, 94, 95: reset required)", 0},
    {O_ECC, "--ecc", 0, "single|double", "ECC errors (--count N, default 1) and their event", 0},
    {O_COUNT, "--count", 0, "N", "how many ECC errors", 0},
    {O_TEMP, "--temp", 0, "C", "pin the temperature at C degrees", 0},
    {O_ERROR_RATE, "--error-rate", 0, "P",
     "fraction P (0..1, or 20%) of NVML calls fail with UNKNOWN", 0},
    {O_SLOW, "--slow", 0, "MS", "every NVML call on the device takes MS milliseconds longer", 0},
    {O_FAIL_AFTER, "--fail-after", 0, "BYTES",
     "CUDA allocations fail once BYTES more were allocated", 0},
    {O_CKPT_FAIL, "--ckpt-fail", 0, "N",
     "the next N CUDA checkpoints of a process on the device fail", 0},
    {O_RESTORE_FAIL, "--restore-fail", 0, "N", "the next N CUDA restores onto the device fail", 0},
    {0},
};
static const cli_cmd_spec_t inject_spec = {
    .name = "sim inject",
    .usage = "NAME --device I FAULT",
    .summary = "Inject a fault into a device of a simulated node.",
    .text = "FAULT is exactly one of the options below but --device and --count. See\n"
            "docs/sim.md for what each makes NVML and CUDA return. Undo with gpum sim clear.",
    .args = inject_args,
    .examples = "gpum sim inject h100x2 --device 0 --xid 79\n"
                "gpum sim inject h100x2 --device 1 --temp 95",
    .exit_status = "0, 1 when there is no such node or device, 2 for usage errors.",
};

static int sim_inject(const simapi_t *api, const sim_sub_t *sub, int argc, char **argv) {
  const char *o[SIM_MAX_OPTS] = {0}, *pos[1];
  int rc;
  if (!sim_args(sub, argc, argv, o, pos, &rc))
    return rc;
  const char *dev = o[O_DEVICE], *count = o[O_COUNT];
  const char *v[8] = {o[O_XID],  o[O_ECC],        o[O_TEMP],      o[O_ERROR_RATE],
                      o[O_SLOW], o[O_FAIL_AFTER], o[O_CKPT_FAIL], o[O_RESTORE_FAIL]};
  unsigned d;
  gpum_sim_fault_t f;
  if ((rc = parse_device("inject", dev, &d)) || (rc = fault_from_flags(v, count, &f)))
    return rc;
  if (count && !v[1])
    return bad("inject", "--count", count, "--count only with --ecc");
  return sim_done(api, sub, api->inject(pos[0], d, &f));
}

static const cli_arg_t clear_args[] = {
    {O_DEVICE, "--device", 0, "I", "only device I (default: every device)", 0},
    {0},
};
static const cli_cmd_spec_t clear_spec = {
    .name = "sim clear",
    .usage = "NAME [--device I]",
    .summary = "Clear a device's injected faults, like a GPU reset.",
    .text = "A lost GPU comes back and volatile ECC counters restart from 0.",
    .args = clear_args,
    .examples = "gpum sim clear h100x2 --device 0",
    .exit_status = "0, 1 when there is no such node or device, 2 for usage errors.",
};

static int sim_clear(const simapi_t *api, const sim_sub_t *sub, int argc, char **argv) {
  const char *v[SIM_MAX_OPTS] = {0}, *pos[1];
  int rc;
  if (!sim_args(sub, argc, argv, v, pos, &rc))
    return rc;
  const char *dev = v[O_DEVICE];
  unsigned d = UINT32_MAX;
  if (dev && (rc = parse_device("clear", dev, &d)))
    return rc;
  return sim_done(api, sub, api->clear(pos[0], d));
}

static const cli_arg_t set_args[] = {
    {O_DEVICE, "--device", 0, "I", "the device (required)", 0},
    {O_UTIL, "--util", 0, "PCT", "its GPU utilisation, 0 to 100 (required)", 0},
    {O_MEM_UTIL, "--mem-util", 0, "PCT", "its memory utilisation (default: half of --util)", 0},
    {0},
};
static const cli_cmd_spec_t set_spec = {
    .name = "sim set",
    .usage = "NAME --device I --util PCT [--mem-util PCT]",
    .summary = "Set the utilisation a device of a simulated node reports.",
    .text = "Temperature and power follow with a lag of a few seconds.",
    .args = set_args,
    .examples = "gpum sim set h100x2 --device 0 --util 80",
    .exit_status = "0, 1 when there is no such node or device, 2 for usage errors.",
};

static int sim_set(const simapi_t *api, const sim_sub_t *sub, int argc, char **argv) {
  const char *v[SIM_MAX_OPTS] = {0}, *pos[1];
  int rc;
  if (!sim_args(sub, argc, argv, v, pos, &rc))
    return rc;
  const char *dev = v[O_DEVICE], *util = v[O_UTIL], *mem = v[O_MEM_UTIL];
  unsigned d;
  unsigned long long u, m = ULLONG_MAX;
  if ((rc = parse_device("set", dev, &d)))
    return rc;
  if (!util)
    return missing(sub->name, "--util PCT");
  if (cli_parse_uint(util, 0, 100, true, &u))
    return bad("set", "--util", util, "a percentage from 0 to 100");
  if (mem && cli_parse_uint(mem, 0, 100, true, &m))
    return bad("set", "--mem-util", mem, "a percentage from 0 to 100");
  return sim_done(api, sub, api->set_util(pos[0], d, (int)u, mem ? (int)m : -1));
}

static const cli_arg_t hold_args[] = {
    {O_DEVICE, "--device", 0, "I", "the device (required)", 0},
    {O_BYTES, "--bytes", 0, "SIZE", "the memory to hold, e.g. 8GiB (required)", 0},
    {O_FOR, "--for", 0, "DURATION",
     "let go after DURATION (default: when killed or the node stops)", 0},
    {0},
};
static const cli_cmd_spec_t hold_spec = {
    .name = "sim hold",
    .usage = "NAME --device I --bytes SIZE [--for DURATION]",
    .summary = "Hold memory on a device from an unmanaged process.",
    .text = "Starts a detached process that holds SIZE of memory on device I, like a program\n"
            "that no scheduler manages; it shows in the process list. Prints its pid once the\n"
            "memory is held.",
    .args = hold_args,
    .examples = "pid=$(gpum sim hold h100x2 --device 0 --bytes 20GiB --for 5m)",
    .exit_status = "0, 1 when the memory cannot be held, 2 for usage errors.",
};

static int sim_hold(const simapi_t *api, const sim_sub_t *sub, int argc, char **argv) {
  const char *v[SIM_MAX_OPTS] = {0}, *pos[1];
  int rc;
  if (!sim_args(sub, argc, argv, v, pos, &rc))
    return rc;
  const char *dev = v[O_DEVICE], *bytes = v[O_BYTES], *dur = v[O_FOR];
  unsigned d;
  uint64_t size, ms = 0;
  if ((rc = parse_device("hold", dev, &d)))
    return rc;
  if (!bytes)
    return missing(sub->name, "--bytes SIZE");
  if (gpum_size_parse(bytes, &size) != 0 || size == 0)
    return bad("hold", "--bytes", bytes, "a size like 8GiB");
  if (dur && (gpum_duration_parse(dur, &ms) != 0 || ms == 0))
    return bad("hold", "--for", dur, "a duration like 30s or 5m");
  pid_t pid;
  if ((rc = api->hold(pos[0], d, size, ms, &pid)))
    return failed(api, sub->name, rc);
  printf("%d\n", (int)pid);
  return 0;
}

static const sim_sub_t subs[] = {
    {"start", sim_start, 1, &start_spec},    {"stop", sim_stop, 1, &stop_spec},
    {"status", sim_status, 1, &status_spec}, {"list", sim_list, 0, &list_spec},
    {"inject", sim_inject, 1, &inject_spec}, {"clear", sim_clear, 1, &clear_spec},
    {"set", sim_set, 1, &set_spec},          {"hold", sim_hold, 1, &hold_spec},
};

static const cli_cmd_spec_t *const sub_specs[] = {
    &start_spec, &stop_spec, &status_spec, &list_spec, &inject_spec,
    &clear_spec, &set_spec,  &hold_spec,   NULL,
};

static const cli_cmd_spec_t sim_spec = {
    .name = "sim",
    .usage = "COMMAND [ARGS]",
    .summary = "Start, control and stop simulated GPU nodes.",
    .text = "Develop and test GPU scheduling without GPUs (docs/sim.md).",
    .args = no_args,
    .examples = "gpum sim start examples/sim/h100x2.yaml\n"
                "gpum sim inject h100x2 --device 0 --xid 79",
    .exit_status = "0 success, 1 failure (reason on stderr, nothing changed), 2 usage error.",
    .subs = sub_specs,
};

int cmd_sim(gpum_config_t *cfg, int argc, char **argv) {
  if (argc < 2) {
    cli_args_help(&sim_spec, stderr);
    return CLI_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    cli_args_help(&sim_spec, stdout);
    return CLI_EXIT_OK;
  }
  const cli_cmd_spec_t *spec = cli_args_find_sub(&sim_spec, argv[1]);
  for (size_t i = 0; spec && i < sizeof subs / sizeof subs[0]; i++) {
    if (subs[i].spec != spec)
      continue;
    /* --help needs no simulator: every subcommand prints it before touching the API. */
    for (int k = 2; k < argc; k++)
      if (!strcmp(argv[k], "--help") || !strcmp(argv[k], "-h"))
        return subs[i].run(NULL, &subs[i], argc - 1, argv + 1);
    simapi_t api;
    if (load_api(cfg, &api))
      return 1;
    int rc = subs[i].run(&api, &subs[i], argc - 1, argv + 1);
    dlclose(api.dl);
    return rc;
  }
  return CLI_EXIT_USAGE;
}
