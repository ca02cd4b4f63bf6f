/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The checks of `gpum doctor`. Each looks at one thing (configuration, the aliases of other GPU
 * managers' settings it read, the NVML and CUDA driver libraries, /dev/nvidia* permissions,
 * CUDA_VISIBLE_DEVICES, device health and ECC, retired pages and remapped rows) and adds
 * findings with a suggestion the user can act on. Devices are read through the device layer
 * only; the CUDA driver through libgpum's internal CUDA loader, so that doctor sees exactly what
 * the memory pool will see.
 */
#include <ctype.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gpum/device.h>
#include <gpum/error.h>

#include "cli.h"
#include "doctor.h"

#define SIM_HINT                                                        \
  "to try gpum without a GPU, start a simulated node: 'gpum sim start " \
  "examples/sim/h100x2.yaml', then run 'GPUM_SIM_NODE=h100x2 gpum status'"

/* ---- configuration ---- */

static void check_library_option(const gpum_config_t *cfg, doc_report_t *r, const char *key) {
  const char *v = gpum_config_get_string(cfg, key);
  if (!v || !*v || !strchr(v, '/'))
    return; /* empty, or a bare name for the loader's search path */
  if (access(v, R_OK) != 0) {
    doc_finding_t *f = doc_add(r, "config", DOC_FAIL, "%s is '%s' (from %s), which cannot be read",
                               key, v, gpum_opt_source_name(gpum_config_source(cfg, key)));
    doc_suggest(f, "fix the path or unset the option to use the default library");
  }
}

void doc_check_config(doc_ctx_t *c, doc_report_t *r) {
  const char *path = gpum_config_file(c->cfg);
  char set[512] = "";
  size_t used = 0;
  for (size_t i = 0; i < gpum_option_count(); i++) {
    const gpum_option_def_t *def = gpum_option_at(i);
    gpum_opt_source_t src = gpum_config_source(c->cfg, def->key);
    if (src == GPUM_OPT_SRC_DEFAULT || used >= sizeof set)
      continue;
    int w = snprintf(set + used, sizeof set - used, "%s%s (%s)", used ? ", " : "", def->key,
                     gpum_opt_source_name(src));
    used += w > 0 ? (size_t)w : 0;
  }
  if (path)
    doc_add(r, "config", DOC_OK, "loaded %s; options set: %s", path, used ? set : "none");
  else
    doc_add(r, "config", DOC_OK,
            "no configuration file (none at the default place; --config or GPUM_CONFIG name "
            "one); options set: %s",
            used ? set : "none");
  check_library_option(c->cfg, r, "nvml.library");
  check_library_option(c->cfg, r, "cuda.library");
  check_library_option(c->cfg, r, "sim.library");
  const char *backend = gpum_config_get_string(c->cfg, "backend");
  if (c->sim_node && backend && !strcmp(backend, "host")) {
    doc_finding_t *f = doc_add(r, "config", DOC_WARN,
                               "GPUM_SIM_NODE is '%s' but backend is host: the simulated GPUs are "
                               "not used",
                               c->sim_node);
    doc_suggest(f, "set backend to auto or nvml, or unset GPUM_SIM_NODE");
  }
}

/* One finding per alias of another GPU manager's setting that the configuration read: OK when
 * applied, WARN when gpum's own name overrode it or gpum has no such setting. */
void doc_check_aliases(doc_ctx_t *c, doc_report_t *r) {
  gpum_alias_read_t a;
  char line[512];
  for (size_t i = 0; gpum_config_alias_at(c->cfg, i, &a) == 0; i++) {
    gpum_config_alias_describe(c->cfg, i, line, sizeof line);
    doc_finding_t *f =
        doc_add(r, "alias", a.state == GPUM_ALIAS_APPLIED ? DOC_OK : DOC_WARN, "%s", line);
    if (a.state == GPUM_ALIAS_OVERRIDDEN)
      doc_suggest(f, "remove %s, or %s if it is the value you mean (docs/config.md, Aliases)",
                  a.name, a.by ? "the other alias" : "gpum's own setting of the option");
    else if (a.state == GPUM_ALIAS_IGNORED)
      doc_suggest(f, "remove %s: it has no effect on gpum (docs/config.md, Aliases)", a.name);
  }
}

/* ---- NVML ---- */

void doc_check_nvml(doc_ctx_t *c, doc_report_t *r) {
  gpum_device_open_opts_t opts;
  if (gpum_device_opts_from_config(c->cfg, &opts) != 0) {
    doc_add(r, "nvml", DOC_FAIL, "%s", gpum_last_error());
    return;
  }
  gpum_backend_kind_t wanted = opts.backend;
  opts.backend = GPUM_BACKEND_NVML;
  gpum_error_clear();
  c->nvml_rc = gpum_device_open(&opts, &c->nvml);
  if (c->nvml_rc != 0) {
    c->nvml = NULL;
    snprintf(c->nvml_reason, sizeof c->nvml_reason, "%s", cli_reason(c->nvml_rc));
    if (c->sim_node) {
      doc_finding_t *f = doc_add(r, "nvml", DOC_FAIL, "simulated node '%s' cannot be used: %s",
                                 c->sim_node, c->nvml_reason);
      doc_suggest(f,
                  "start it with 'gpum sim start SPEC --name %s' (specs in examples/sim/), or "
                  "unset GPUM_SIM_NODE",
                  c->sim_node);
    } else if (wanted == GPUM_BACKEND_NVML || opts.nvml_library) {
      doc_finding_t *f = doc_add(r, "nvml", DOC_FAIL, "NVML cannot be used: %s", c->nvml_reason);
      doc_suggest(f,
                  "install the NVIDIA driver (it provides libnvidia-ml.so.1) or fix "
                  "nvml.library; %s",
                  SIM_HINT);
    } else {
      doc_finding_t *f = doc_add(r, "nvml", DOC_WARN,
                                 "no NVIDIA GPU here (%s); gpum uses the host backend (the CPU "
                                 "as device 'cpu')",
                                 c->nvml_reason);
      doc_suggest(f, "on a GPU machine install the NVIDIA driver; %s", SIM_HINT);
    }
    return;
  }
  const char *ver = gpum_device_driver_version(c->nvml);
  unsigned n = gpum_device_count(c->nvml);
  doc_finding_t *f = doc_add(r, "nvml", n ? DOC_OK : DOC_WARN, "%s loaded, driver %s, %u device%s",
                             gpum_device_backend_detail(c->nvml),
                             ver && *ver ? ver : "(unknown version)", n, n == 1 ? "" : "s");
  if (n == 0)
    doc_suggest(f, "NVML found no GPU: check 'nvidia-smi' and dmesg for driver errors");
  if (gpum_device_is_simulated(c->nvml))
    doc_add(r, "sim", DOC_OK,
            "simulated node '%s' in use: every gpum process with "
            "GPUM_SIM_NODE=%s sees these GPUs",
            c->sim_node ? c->sim_node : "?", c->sim_node ? c->sim_node : "?");
  if (wanted == GPUM_BACKEND_HOST && n > 0) {
    f = doc_add(r, "config", DOC_WARN, "backend is host although NVML finds %u GPU%s", n,
                n == 1 ? "" : "s");
    doc_suggest(f, "set backend to auto (the default) to use the GPUs");
  }
}

/* ---- CUDA driver ---- */

/* Loads the CUDA driver exactly as the pool will, through libgpum's loader (cuda.library /
 * GPUM_CUDA_LIBRARY, the simulated driver when GPUM_SIM_NODE is set, else libcuda.so.1), which
 * also calls cuInit. */
void doc_check_cuda(doc_ctx_t *c, doc_report_t *r) {
  const char *lib = gpum_config_get_string(c->cfg, "cuda.library");
  gpum_cuda_probe_t cu;
  gpum_error_clear();
  int rc = gpum_cuda_probe(lib, &cu);
  if (rc == 0) {
    doc_add(r, "cuda", DOC_OK, "%s loaded, CUDA driver API %d.%d, %d device%s%s", cu.path,
            cu.driver_version / 1000, (cu.driver_version % 1000) / 10, cu.device_count,
            cu.device_count == 1 ? "" : "s", cu.simulated ? " (simulated)" : "");
    return;
  }
  const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
  bool no_gpu = !c->nvml && !c->sim_node && !(lib && *lib);
  doc_finding_t *f = doc_add(r, "cuda", no_gpu ? DOC_WARN : DOC_FAIL,
                             "the CUDA driver cannot be used: %s", cli_reason(rc));
  if (no_gpu)
    doc_suggest(f, "CUDA programs need the NVIDIA driver (libcuda.so.1); a simulated node (see "
                   "above) provides a CUDA driver too");
  else if (rc == GPUM_ENODEV && cvd)
    doc_suggest(f, "CUDA_VISIBLE_DEVICES='%s' hides every device: fix or unset it", cvd);
  else
    doc_suggest(f, "install the NVIDIA driver's CUDA library (libcuda.so.1) or fix cuda.library; "
                   "check that the kernel driver matches it ('nvidia-smi') and that /dev/nvidia* "
                   "are accessible");
}

/* ---- /dev/nvidia* ---- */

void doc_check_dev_files(doc_ctx_t *c, doc_report_t *r) {
  if (c->nvml && gpum_device_is_simulated(c->nvml)) {
    doc_add(r, "devfiles", DOC_OK, "not needed: the simulated driver uses no device files");
    return;
  }
  glob_t g;
  int grc = glob("/dev/nvidia*", 0, NULL, &g);
  if (grc != 0) {
    if (c->nvml) {
      doc_finding_t *f =
          doc_add(r, "devfiles", DOC_FAIL, "NVML loads but there is no /dev/nvidia*");
      doc_suggest(f, "in a container, pass the devices through (--gpus all / the NVIDIA "
                     "container toolkit); on a host, load the nvidia kernel module");
    } else {
      doc_add(r, "devfiles", DOC_OK, "no /dev/nvidia* files: no NVIDIA kernel driver here");
    }
    if (grc != GLOB_NOMATCH)
      globfree(&g);
    return;
  }
  size_t bad = 0, total = 0;
  char list[400] = "";
  size_t used = 0;
  for (size_t i = 0; i < g.gl_pathc; i++) {
    struct stat st;
    if (stat(g.gl_pathv[i], &st) != 0 || !S_ISCHR(st.st_mode))
      continue;
    total++;
    if (access(g.gl_pathv[i], R_OK | W_OK) != 0) {
      bad++;
      if (used < sizeof list) {
        int w = snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", g.gl_pathv[i]);
        used += w > 0 ? (size_t)w : 0;
      }
    }
  }
  globfree(&g);
  if (bad) {
    doc_finding_t *f = doc_add(r, "devfiles", DOC_FAIL,
                               "%zu of %zu device files are not readable "
                               "and writable by this user: %s",
                               bad, total, list);
    doc_suggest(f, "add the user to the group that owns them (often 'video'), or fix the "
                   "permissions (NVreg_DeviceFileMode / udev rules)");
  } else {
    doc_add(r, "devfiles", DOC_OK, "%zu /dev/nvidia* device files, all readable and writable",
            total);
  }
}

/* ---- CUDA_VISIBLE_DEVICES ---- */

/* Finds the device whose UUID starts with prefix (CUDA accepts unique prefixes). Returns the
 * index, -1 when none, -2 when several match. */
static int match_uuid(gpum_device_session_t *s, const char *prefix, size_t plen) {
  int found = -1;
  for (unsigned i = 0; i < gpum_device_count(s); i++) {
    gpum_device_info_t info;
    if (gpum_device_get_info(s, i, &info) != 0 || !(info.valid & GPUM_INFO_UUID))
      continue;
    if (strlen(info.uuid) >= plen && !strncasecmp(info.uuid, prefix, plen))
      found = found == -1 ? (int)i : -2;
  }
  return found;
}

/* Checks one entry; returns its device index, or -1 after adding a finding (CUDA ignores the
 * entry and everything after it). */
static int check_cvd_entry(doc_ctx_t *c, doc_report_t *r, const char *cvd, const char *e,
                           size_t len) {
  unsigned n = gpum_device_count(c->nvml);
  if (len > 0 && isdigit((unsigned char)e[0])) {
    char *end = NULL;
    unsigned long v = strtoul(e, &end, 10);
    if ((size_t)(end - e) == len && v < n)
      return (int)v;
    doc_finding_t *f = doc_add(r, "cuda_visible", DOC_FAIL,
                               "CUDA_VISIBLE_DEVICES='%s': '%.*s' is not a device index (this "
                               "node has %u device%s, 0-%u); CUDA ignores it and every entry after "
                               "it",
                               cvd, (int)len, e, n, n == 1 ? "" : "s", n ? n - 1 : 0);
    doc_suggest(f, "use indexes below %u or UUIDs as shown by 'gpum status --json'", n);
    return -1;
  }
  if (len > 4 && (!strncasecmp(e, "GPU-", 4) || !strncasecmp(e, "MIG-", 4))) {
    if (!strncasecmp(e, "MIG-", 4)) {
      doc_add(r, "cuda_visible", DOC_WARN,
              "CUDA_VISIBLE_DEVICES names MIG instance '%.*s', "
              "which gpum cannot check yet",
              (int)len, e);
      return -1;
    }
    int idx = match_uuid(c->nvml, e, len);
    if (idx >= 0)
      return idx;
    doc_finding_t *f =
        doc_add(r, "cuda_visible", DOC_FAIL, "CUDA_VISIBLE_DEVICES='%s': '%.*s' %s", cvd, (int)len,
                e, idx == -2 ? "matches several devices" : "matches no device's UUID");
    doc_suggest(f, "copy the UUIDs from 'gpum status --json' (field uuid)");
    return -1;
  }
  doc_finding_t *f = doc_add(r, "cuda_visible", DOC_FAIL,
                             "CUDA_VISIBLE_DEVICES='%s': '%.*s' is neither an index nor a UUID; "
                             "CUDA sees no device from there on",
                             cvd, (int)len, e);
  doc_suggest(f, "list indexes (0,1) or UUIDs (GPU-...), separated by commas, or unset it");
  return -1;
}

void doc_check_visible_devices(doc_ctx_t *c, doc_report_t *r) {
  const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
  if (!cvd) {
    doc_add(r, "cuda_visible", DOC_OK,
            "CUDA_VISIBLE_DEVICES is not set: CUDA programs see every "
            "device");
    return;
  }
  if (!*cvd) {
    doc_finding_t *f =
        doc_add(r, "cuda_visible", DOC_WARN,
                "CUDA_VISIBLE_DEVICES is set but empty: CUDA programs see no device");
    doc_suggest(f, "unset it (unset CUDA_VISIBLE_DEVICES) unless hiding every GPU is intended");
    return;
  }
  if (!c->nvml) {
    doc_add(r, "cuda_visible", DOC_WARN,
            "CUDA_VISIBLE_DEVICES='%s' cannot be checked: no device "
            "can be read",
            cvd);
    return;
  }
  unsigned n = gpum_device_count(c->nvml);
  bool seen[1024] = {false};
  size_t good = 0;
  bool indexes = false;
  for (const char *p = cvd;;) {
    while (*p == ' ')
      p++;
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    while (len > 0 && p[len - 1] == ' ')
      len--;
    int idx = check_cvd_entry(c, r, cvd, p, len);
    if (idx < 0)
      return;
    indexes |= isdigit((unsigned char)p[0]) != 0;
    if ((unsigned)idx < sizeof seen && seen[idx]) {
      doc_finding_t *f = doc_add(r, "cuda_visible", DOC_WARN,
                                 "CUDA_VISIBLE_DEVICES='%s' lists device %d twice", cvd, idx);
      doc_suggest(f, "list each device once");
      return;
    }
    if ((unsigned)idx < sizeof seen)
      seen[idx] = true;
    good++;
    if (!end)
      break;
    p = end + 1;
  }
  const char *order = getenv("CUDA_DEVICE_ORDER");
  doc_finding_t *f =
      doc_add(r, "cuda_visible", DOC_OK,
              "CUDA_VISIBLE_DEVICES='%s': %zu of %u devices visible to CUDA", cvd, good, n);
  if (indexes && n > 1 && (!order || strcmp(order, "PCI_BUS_ID") != 0)) {
    f = doc_add(r, "cuda_visible", DOC_WARN,
                "CUDA_VISIBLE_DEVICES uses indexes but CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA "
                "may number the devices differently from gpum and nvidia-smi");
    doc_suggest(f, "export CUDA_DEVICE_ORDER=PCI_BUS_ID, or use UUIDs");
  }
  (void)f;
}

/* ---- device health and ECC ---- */

static void check_one_device(doc_ctx_t *c, doc_report_t *r, unsigned i, unsigned *ecc_on,
                             unsigned *ecc_known, bool *healthy) {
  gpum_device_info_t info;
  gpum_device_sample_t sample;
  gpum_error_clear();
  int rc = gpum_device_get_info(c->nvml, i, &info);
  if (rc == 0) {
    gpum_error_clear();
    rc = gpum_device_sample(c->nvml, i, &sample);
  }
  if (rc != 0) {
    *healthy = false;
    doc_finding_t *f =
        doc_add(r, "device", DOC_FAIL, "GPU %u cannot be read: %s", i, cli_reason(rc));
    if (rc == GPUM_ELOST || rc == GPUM_ERESET)
      doc_suggest(f,
                  "drain its jobs and reset it ('nvidia-smi -r -i %u') or reboot; check "
                  "'dmesg' for Xid errors, and the power and cooling if it recurs",
                  i);
    else
      doc_suggest(f, "run 'nvidia-smi -q -i %u' and check 'dmesg' for driver errors", i);
    return;
  }
  if (info.valid & GPUM_INFO_ECC_MODE) {
    (*ecc_known)++;
    if (info.ecc_enabled)
      (*ecc_on)++;
  }
  if (gpum_sample_valid(&sample, GPUM_METRIC_ECC_UNCORRECTED) && sample.ecc_uncorrected > 0) {
    *healthy = false;
    doc_finding_t *f = doc_add(
        r, "ecc", DOC_FAIL, "GPU %u (%s) has %llu uncorrected ECC error%s since the driver loaded",
        i, info.name, (unsigned long long)sample.ecc_uncorrected,
        sample.ecc_uncorrected == 1 ? "" : "s");
    doc_suggest(f, "drain the GPU and reset it; if uncorrected errors return, have the GPU "
                   "replaced");
  }
}

void doc_check_devices(doc_ctx_t *c, doc_report_t *r) {
  if (!c->nvml)
    return;
  unsigned n = gpum_device_count(c->nvml), ecc_on = 0, ecc_known = 0;
  bool healthy = true;
  size_t before = r->n;
  for (unsigned i = 0; i < n; i++)
    check_one_device(c, r, i, &ecc_on, &ecc_known, &healthy);
  if (healthy && n > 0 && r->n == before)
    doc_add(r, "device", DOC_OK, "all %u device%s answer, no uncorrected ECC errors", n,
            n == 1 ? "" : "s");
  /* A device with uncorrected errors already has its ecc finding (FAIL): no summary after it
   * that would say the opposite. */
  for (size_t k = before; k < r->n; k++)
    if (!strcmp(r->v[k].check, "ecc"))
      return;
  if (ecc_known == 0 && n > 0) {
    doc_add(r, "ecc", DOC_OK, "ECC is not supported by %s devices (usual for consumer GPUs)",
            n == 1 ? "this" : "these");
  } else if (ecc_on < ecc_known) {
    doc_finding_t *f = doc_add(r, "ecc", DOC_WARN, "ECC is off on %u of %u devices that support it",
                               ecc_known - ecc_on, ecc_known);
    doc_suggest(f, "enable it with 'nvidia-smi -e 1' and reboot, unless the memory is needed more "
                   "than error detection");
  } else if (ecc_known > 0) {
    if (ecc_known == n)
      doc_add(r, "ecc", DOC_OK, "ECC enabled on %s %u device%s", n == 1 ? "the" : "all", n,
              n == 1 ? "" : "s");
    else
      doc_add(r, "ecc", DOC_OK, "ECC enabled on %u device%s; %u report%s no ECC mode", ecc_on,
              ecc_on == 1 ? "" : "s", n - ecc_known, n - ecc_known == 1 ? "s" : "");
  }
}

/* ---- retired pages and remapped rows ---- */

typedef struct {
  unsigned known;    /* devices that report page retirement or row remapping */
  unsigned problems; /* devices with a finding of their own */
  unsigned rows;     /* rows remapped so far, over all devices */
} memrepair_tally_t;

static void check_memory_repair_one(doc_ctx_t *c, doc_report_t *r, unsigned i,
                                    memrepair_tally_t *t) {
  gpum_memory_health_t mh;
  gpum_device_info_t info;
  gpum_error_clear();
  /* A device that cannot be read already has its 'device' finding. */
  if (gpum_device_memory_health(c->nvml, i, &mh) != 0 || !mh.valid)
    return;
  t->known++;
  if (gpum_device_get_info(c->nvml, i, &info) != 0 || !(info.valid & GPUM_INFO_NAME))
    snprintf(info.name, sizeof info.name, "%s", "name unknown");
  bool rows = mh.valid & GPUM_MEMHEALTH_REMAPPED_ROWS;
  unsigned nrows = rows ? mh.remapped_rows_correctable + mh.remapped_rows_uncorrectable : 0;
  t->rows += nrows;
  doc_finding_t *f = NULL;
  if (rows && mh.remap_failure) {
    f = doc_add(r, "memory", DOC_FAIL,
                "GPU %u (%s): a row remapping failed (%u row%s remapped so far): the memory could "
                "not replace a bad row",
                i, info.name, nrows, nrows == 1 ? "" : "s");
    doc_suggest(f,
                "drain the node (or keep jobs off GPU %u) and have the GPU serviced (RMA); "
                "'nvidia-smi -q -d ROW_REMAPPER -i %u' shows the details",
                i, i);
  } else if (rows && mh.remap_pending) {
    f = doc_add(r, "memory", DOC_WARN,
                "GPU %u (%s): a row remap is pending (%u uncorrectable, %u correctable row%s "
                "remapped): it takes effect at the next GPU reset",
                i, info.name, mh.remapped_rows_uncorrectable, mh.remapped_rows_correctable,
                mh.remapped_rows_correctable == 1 ? "" : "s");
    doc_suggest(f,
                "when the GPU is idle, reset it ('nvidia-smi -r -i %u') or reboot, so that the "
                "bad row is replaced",
                i);
  }
  if ((mh.valid & GPUM_MEMHEALTH_RETIRED_PENDING) && mh.retired_pages_pending) {
    f = doc_add(r, "memory", DOC_WARN,
                "GPU %u (%s): a page retirement is pending: the bad page is retired when the "
                "driver next loads",
                i, info.name);
    doc_suggest(f,
                "when the GPU is idle, reset it ('nvidia-smi -r -i %u') or reboot, so that the "
                "retirement takes effect; many retired pages mean the GPU needs service",
                i);
  }
  if (f)
    t->problems++;
}

void doc_check_memory_repair(doc_ctx_t *c, doc_report_t *r) {
  if (!c->nvml)
    return;
  unsigned n = gpum_device_count(c->nvml);
  memrepair_tally_t t = {0, 0, 0};
  for (unsigned i = 0; i < n; i++)
    check_memory_repair_one(c, r, i, &t);
  if (n == 0 || t.problems > 0)
    return;
  if (t.known == 0) {
    doc_add(r, "memory", DOC_OK,
            "retired pages and remapped rows: not reported by %s device%s (usual for consumer "
            "GPUs and with ECC off)",
            n == 1 ? "this" : "these", n == 1 ? "" : "s");
    return;
  }
  doc_finding_t *f = doc_add(r, "memory", DOC_OK,
                             "no pending page retirement or row remap and no remap failure on "
                             "%u device%s (%u row%s remapped)",
                             t.known, t.known == 1 ? "" : "s", t.rows, t.rows == 1 ? "" : "s");
  if (f && t.known < n) {
    size_t len = strlen(f->message);
    snprintf(f->message + len, sizeof f->message - len, "; %u report%s neither", n - t.known,
             n - t.known == 1 ? "s" : "");
  }
}
