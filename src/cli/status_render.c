/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Renders a `gpum status` snapshot: gpustat-like text for people (a header, one line per
 * device, its processes below) and the JSON document documented in docs/cli.md for scripts.
 * A metric the device did not report is "n/a" in text and null in JSON, never 0. The reason of
 * every state other than AVAILABLE is shown: in place of the metrics for an ERROR device that
 * could not be read, else after them in parentheses.
 */
#include <string.h>
#include <time.h>

#include <jansson.h>

#include <gpum/error.h>
#include <gpum/size.h>

#include "status.h"

#define BAR_WIDTH 10

static bool valid(const cli_dev_snap_t *d, gpum_metric_t m) {
  return gpum_sample_valid(&d->sample, m);
}

/* True when an MPS control daemon's server runs on the device (among its processes). */
static bool device_mps(const cli_dev_snap_t *d) {
  for (size_t k = 0; k < d->nprocs; k++)
    if (d->procs[k].mps_server)
      return true;
  return false;
}

/* The name; on a node of several vendors also the vendor and the device's number among its
 * vendor's devices ("AMD Instinct MI300X (amd 0)"), which is what that vendor's tools and
 * runtime call it (rocm-smi, ROCR_VISIBLE_DEVICES). A MIG instance names its GPU
 * ("NVIDIA H100 80GB HBM3 MIG 3g.40gb of GPU 0"); a GPU served by MPS says so ("[MPS]"). */
static void device_name(const cli_snapshot_t *snap, const cli_dev_snap_t *d, char *buf,
                        size_t len) {
  const char *name = (d->info.valid & GPUM_INFO_NAME) ? d->info.name : "n/a";
  const char *mps = device_mps(d) ? " [MPS]" : "";
  char of[32] = "";
  if (d->info.valid & GPUM_INFO_MIG)
    snprintf(of, sizeof of, " of GPU %d", d->info.parent_index);
  if (d->info.is_host)
    snprintf(buf, len, "%s (host)", name);
  else if (snap->backend == GPUM_BACKEND_MIXED && d->info.vendor)
    snprintf(buf, len, "%s%s (%s %u)%s", name, of, d->info.vendor, d->info.vendor_index, mps);
  else
    snprintf(buf, len, "%s%s%s", name, of, mps);
}

static void format_time(const struct timespec *ts, char *buf, size_t len, bool iso) {
  struct tm tm;
  if (iso) {
    gmtime_r(&ts->tv_sec, &tm);
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, len - n, ".%03ldZ", ts->tv_nsec / 1000000);
  } else {
    localtime_r(&ts->tv_sec, &tm);
    strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
  }
}

static void text_header(const cli_out_t *o, const cli_snapshot_t *snap) {
  char when[64];
  format_time(&snap->time, when, sizeof when, false);
  cli_styled(o, CLI_BOLD, "%s", snap->hostname);
  fprintf(o->f, "  %s", when);
  if (snap->driver_version[0])
    fprintf(o->f, "  driver %s", snap->driver_version);
  const char *backend = gpum_backend_name(snap->backend);
  if (!strncmp(snap->backend_detail, backend, strlen(backend)))
    cli_styled(o, CLI_DIM, "  %s", snap->backend_detail);
  else
    cli_styled(o, CLI_DIM, "  %s: %s", backend, snap->backend_detail);
  if (snap->simulated)
    cli_styled(o, CLI_MAGENTA, "  [simulated]");
  fputc('\n', o->f);
}

/* "45°C   37 %": display width 11 whether valid or not. */
static void text_temp_util(const cli_out_t *o, const cli_dev_snap_t *d) {
  if (valid(d, GPUM_METRIC_TEMPERATURE))
    cli_styled(o, cli_level_style(d->sample.temperature_c, 70, 85), "%3d°C",
               d->sample.temperature_c);
  else
    fprintf(o->f, "%5s", "n/a");
  if (valid(d, GPUM_METRIC_UTIL_GPU))
    cli_styled(o, cli_level_style(d->sample.util_gpu, 50, 90), "  %3u %%", d->sample.util_gpu);
  else
    fprintf(o->f, "  %5s", "n/a");
}

static void text_memory(const cli_out_t *o, const cli_dev_snap_t *d, int width) {
  bool have_used = valid(d, GPUM_METRIC_MEMORY_USED);
  uint64_t total = valid(d, GPUM_METRIC_MEMORY_TOTAL)         ? d->sample.memory_total
                   : (d->info.valid & GPUM_INFO_MEMORY_TOTAL) ? d->info.memory_total
                                                              : 0;
  if (have_used && total > 0) {
    char pair[64];
    cli_fmt_mem_pair(d->sample.memory_used, total, pair, sizeof pair);
    fprintf(o->f, "%*s ", width, pair);
    cli_bar(o, (double)d->sample.memory_used / (double)total, BAR_WIDTH);
  } else {
    fprintf(o->f, "%*s ", width, "n/a");
    fprintf(o->f, "[%*s]", BAR_WIDTH, "");
  }
}

static void text_power(const cli_out_t *o, const cli_dev_snap_t *d) {
  bool have_limit = d->info.valid & GPUM_INFO_POWER_LIMIT;
  if (!valid(d, GPUM_METRIC_POWER)) {
    fprintf(o->f, "n/a");
    if (have_limit)
      fprintf(o->f, " / %u W", d->info.power_limit_mw / 1000);
    return;
  }
  unsigned w = (d->sample.power_mw + 500) / 1000;
  cli_style_t st = have_limit
                       ? cli_level_style(100.0 * d->sample.power_mw /
                                             (d->info.power_limit_mw ? d->info.power_limit_mw : 1),
                                         80, 95)
                       : CLI_PLAIN;
  cli_styled(o, st, "%u", w);
  if (have_limit)
    fprintf(o->f, " / %u W", d->info.power_limit_mw / 1000);
  else
    fprintf(o->f, " W");
}

static void text_process(const cli_out_t *o, const gpum_process_t *p, const cli_render_opts_t *ro) {
  char mem[GPUM_SIZE_BUFSZ];
  cli_fmt_size(p->memory, p->memory_valid, mem, sizeof mem);
  fprintf(o->f, "    ");
  cli_styled(o, CLI_CYAN, "%8u", p->pid);
  fputs("  ", o->f);
  cli_styled(o, CLI_DIM, "%-12s", p->user[0] ? p->user : "n/a");
  fprintf(o->f, " %11s  ", mem);
  const char *cmd = p->command[0] ? p->command : "(not visible here)";
  int room = ro->width > 0 ? ro->width - 40 : 0; /* the columns before the command */
  if (ro->width > 0 && room < 10)
    room = 10;
  if (room > 0 && (int)strlen(cmd) > room)
    fprintf(o->f, "%.*s...\n", room - 3, cmd);
  else
    fprintf(o->f, "%s\n", cmd);
}

void cli_render_text(FILE *f, const cli_snapshot_t *snap, const cli_render_opts_t *ro) {
  cli_out_t o = {f, ro->color};
  int name_w = 4, state_w = 5, mem_w = 3;
  char name[GPUM_NAME_LEN + 40], pair[64];
  for (size_t i = 0; i < snap->ndevs; i++) {
    const cli_dev_snap_t *d = &snap->devs[i];
    device_name(snap, d, name, sizeof name);
    if ((int)strlen(name) > name_w)
      name_w = (int)strlen(name);
    cli_state_t st = cli_gpumd_state(snap->gpumd, d);
    if ((int)strlen(cli_state_name(st)) > state_w)
      state_w = (int)strlen(cli_state_name(st));
    uint64_t total = d->sample.memory_total ? d->sample.memory_total : d->info.memory_total;
    cli_fmt_mem_pair(d->sample.memory_used, total, pair, sizeof pair);
    if ((int)strlen(pair) > mem_w)
      mem_w = (int)strlen(pair);
  }
  text_header(&o, snap);
  for (size_t i = 0; i < snap->ndevs; i++) {
    const cli_dev_snap_t *d = &snap->devs[i];
    device_name(snap, d, name, sizeof name);
    cli_styled(&o, CLI_CYAN, "[%u]", d->index);
    fputc(' ', f);
    cli_styled(&o, CLI_BLUE, "%-*s", name_w, name);
    fputs("  ", f);
    cli_state_t st = cli_gpumd_state(snap->gpumd, d);
    cli_styled(&o, cli_state_style(st), "%-*s", state_w, cli_state_name(st));
    fputs("  ", f);
    if (d->state == CLI_STATE_ERROR && d->sample.valid == 0) { /* nothing to show but why */
      cli_styled(&o, CLI_RED, "%s\n", d->reason);
      continue;
    }
    text_temp_util(&o, d);
    fputs("  |  ", f);
    text_memory(&o, d, mem_w);
    fputs("  |  ", f);
    text_power(&o, d);
    if (d->reason[0]) /* BUSY, DISABLED, or a note such as transient driver errors */
      cli_styled(&o, d->state == CLI_STATE_AVAILABLE ? CLI_DIM : cli_state_style(d->state),
                 "  (%s)", d->reason);
    fputc('\n', f);
    if (ro->show_processes)
      for (size_t k = 0; k < d->nprocs; k++)
        text_process(&o, &d->procs[k], ro);
    cli_render_gpumd_device(&o, snap, d);
  }
  if (snap->ndevs == 0)
    fprintf(f, "no devices\n");
  cli_render_gpumd_strangers(&o, snap);
  cli_render_gpumd_queue(&o, snap);
}

/* ---- JSON ---- */

static json_t *jint_if(bool ok, uint64_t v) {
  return ok ? json_integer((json_int_t)v) : json_null();
}

static json_t *jstr_if(bool ok, const char *s) {
  return ok && s && *s ? json_string(s) : json_null();
}

static json_t *json_process(const gpum_process_t *p) {
  json_t *o = json_object();
  json_object_set_new(o, "pid", json_integer(p->pid));
  json_object_set_new(o, "user", jstr_if(true, p->user));
  json_object_set_new(o, "command", jstr_if(true, p->command));
  json_object_set_new(o, "mps_server", json_boolean(p->mps_server));
  json_object_set_new(o, "memory", jint_if(p->memory_valid, p->memory));
  return o;
}

static json_t *json_device(const cli_dev_snap_t *d) {
  const gpum_device_info_t *in = &d->info;
  json_t *o = json_object();
  json_object_set_new(o, "index", json_integer(d->index));
  json_object_set_new(o, "uuid", jstr_if(in->valid & GPUM_INFO_UUID, in->uuid));
  json_object_set_new(o, "name", jstr_if(in->valid & GPUM_INFO_NAME, in->name));
  json_object_set_new(o, "pci_bus_id", jstr_if(in->valid & GPUM_INFO_PCI, in->pci_bus_id));
  json_object_set_new(o, "is_host", json_boolean(in->is_host));
  json_object_set_new(o, "vendor", jstr_if(true, in->vendor));
  json_object_set_new(o, "vendor_index", in->vendor ? json_integer(in->vendor_index) : json_null());
  /* NVIDIA MIG: the parent GPU's UUID, and the instance (null for a whole GPU). */
  json_object_set_new(o, "parent_uuid", jstr_if(in->valid & GPUM_INFO_MIG, in->parent_uuid));
  json_object_set_new(o, "mig",
                      (in->valid & GPUM_INFO_MIG)
                          ? json_pack("{s:i, s:s, s:i, s:i}", "parent_index", in->parent_index,
                                      "parent_uuid", in->parent_uuid, "gpu_instance",
                                      (json_int_t)in->mig_gi, "compute_instance",
                                      (json_int_t)in->mig_ci)
                          : json_null());
  json_object_set_new(o, "mps", json_boolean(device_mps(d)));
  json_object_set_new(o, "state", json_string(cli_state_name(d->state)));
  json_object_set_new(o, "reason", d->reason[0] ? json_string(d->reason) : json_null());
  json_object_set_new(o, "error", d->error ? json_string(gpum_err_name(d->error)) : json_null());

  json_t *mem = json_object();
  bool total_ok = valid(d, GPUM_METRIC_MEMORY_TOTAL) || (in->valid & GPUM_INFO_MEMORY_TOTAL);
  uint64_t total = valid(d, GPUM_METRIC_MEMORY_TOTAL) ? d->sample.memory_total : in->memory_total;
  json_object_set_new(mem, "total", jint_if(total_ok, total));
  json_object_set_new(mem, "used",
                      jint_if(valid(d, GPUM_METRIC_MEMORY_USED), d->sample.memory_used));
  json_object_set_new(mem, "free",
                      jint_if(valid(d, GPUM_METRIC_MEMORY_FREE), d->sample.memory_free));
  json_object_set_new(mem, "driver_reserved",
                      jint_if(valid(d, GPUM_METRIC_MEMORY_RESERVED), d->sample.memory_reserved));
  json_object_set_new(o, "memory", mem);

  json_t *util = json_object();
  json_object_set_new(util, "gpu", jint_if(valid(d, GPUM_METRIC_UTIL_GPU), d->sample.util_gpu));
  json_object_set_new(util, "memory",
                      jint_if(valid(d, GPUM_METRIC_UTIL_MEMORY), d->sample.util_memory));
  json_object_set_new(o, "utilization", util);

  json_object_set_new(o, "temperature_c",
                      valid(d, GPUM_METRIC_TEMPERATURE) ? json_integer(d->sample.temperature_c)
                                                        : json_null());
  json_object_set_new(o, "power_w",
                      valid(d, GPUM_METRIC_POWER) ? json_real(d->sample.power_mw / 1000.0)
                                                  : json_null());
  json_object_set_new(o, "power_limit_w",
                      (in->valid & GPUM_INFO_POWER_LIMIT) ? json_real(in->power_limit_mw / 1000.0)
                                                          : json_null());

  json_t *clocks = json_object();
  json_object_set_new(clocks, "sm_mhz",
                      jint_if(valid(d, GPUM_METRIC_CLOCK_SM), d->sample.clock_sm_mhz));
  json_object_set_new(clocks, "memory_mhz",
                      jint_if(valid(d, GPUM_METRIC_CLOCK_MEM), d->sample.clock_mem_mhz));
  json_object_set_new(o, "clocks", clocks);

  json_t *ecc = json_object();
  json_object_set_new(ecc, "enabled",
                      (in->valid & GPUM_INFO_ECC_MODE) ? json_boolean(in->ecc_enabled)
                                                       : json_null());
  json_object_set_new(ecc, "corrected",
                      jint_if(valid(d, GPUM_METRIC_ECC_CORRECTED), d->sample.ecc_corrected));
  json_object_set_new(ecc, "uncorrected",
                      jint_if(valid(d, GPUM_METRIC_ECC_UNCORRECTED), d->sample.ecc_uncorrected));
  json_object_set_new(o, "ecc", ecc);

  if (d->procs_rc == 0 || d->procs_rc == GPUM_ENOSPC) {
    json_t *procs = json_array();
    for (size_t k = 0; k < d->nprocs; k++)
      json_array_append_new(procs, json_process(&d->procs[k]));
    json_object_set_new(o, "processes", procs);
  } else {
    json_object_set_new(o, "processes", json_null());
  }
  return o;
}

int cli_render_json(FILE *f, const cli_snapshot_t *snap, bool compact) {
  char when[64];
  format_time(&snap->time, when, sizeof when, true);
  json_t *root = json_object();
  if (!root)
    return GPUM_ENOMEM;
  json_object_set_new(root, "hostname", json_string(snap->hostname));
  json_object_set_new(root, "time", json_string(when));
  json_object_set_new(root, "backend", json_string(gpum_backend_name(snap->backend)));
  json_object_set_new(root, "backend_detail", jstr_if(true, snap->backend_detail));
  json_object_set_new(root, "driver_version", jstr_if(true, snap->driver_version));
  json_object_set_new(root, "simulated", json_boolean(snap->simulated));
  json_object_set_new(root, "sim_node", jstr_if(snap->simulated, snap->sim_node));
  json_object_set_new(root, "device_count", json_integer(snap->device_count));
  json_t *devs = json_array();
  for (size_t i = 0; i < snap->ndevs; i++)
    json_array_append_new(devs, json_device(&snap->devs[i]));
  json_object_set_new(root, "devices", devs);
  json_object_set(root, "gpumd", snap->gpumd ? snap->gpumd : json_null());
  size_t flags =
      JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10) | (compact ? JSON_COMPACT : JSON_INDENT(2));
  int rc = json_dumpf(root, f, flags);
  fputc('\n', f);
  json_decref(root);
  return rc == 0 ? 0 : GPUM_ENOMEM;
}
