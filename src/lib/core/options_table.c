/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The options table: every configurable setting of gpum, in one place.
 *
 * The YAML file, the GPUM_* environment variables, the command-line flags, the effective-config
 * dump and docs/config.md are all derived from the rows below. To add an option, add a row
 * (documentation order), then regenerate docs/config.md and examples/gpum.yaml with
 * `GPUM_WRITE_DOCS=1 ctest --test-dir build -R unit.test_options`. Enum choices are '|'-separated;
 * INT, DOUBLE and MAP bounds apply when min < max. Secrets are never shown in dumps. Other GPU
 * managers' names for these options are in options_alias.c.
 */
#include <stdio.h>
#include <string.h>

#include "core/options_internal.h"

#define UNBOUNDED 0, 0

static const gpum_option_def_t builtin_table[] = {
    {"backend", GPUM_OPT_ENUM, "auto", "auto|nvml|rocm|levelzero|host", UNBOUNDED, false,
     "Device backend: nvml for NVIDIA GPUs, rocm for AMD GPUs (ROCm SMI), levelzero for Intel "
     "GPUs (Level Zero Sysman), host for the CPU fallback, auto for the devices of every "
     "vendor library that loads and finds some (one list: NVIDIA, then AMD, then Intel), "
     "else host."},
    {"devices", GPUM_OPT_STRING, "", NULL, UNBOUNDED, false,
     "Devices to use, as comma-separated indices such as \"0,2\"; empty means all."},
    {"nvml.library", GPUM_OPT_STRING, "", NULL, UNBOUNDED, false,
     "Path of the NVML library to load instead of libnvidia-ml.so.1."},
    {"rocm_smi.library", GPUM_OPT_STRING, "", NULL, UNBOUNDED, false,
     "Path of the ROCm SMI library to load instead of librocm_smi64.so.1."},
    {"level_zero.library", GPUM_OPT_STRING, "", NULL, UNBOUNDED, false,
     "Path of the Level Zero loader to load instead of libze_loader.so.1."},
    {"cuda.library", GPUM_OPT_STRING, "", NULL, UNBOUNDED, false,
     "Path of the CUDA driver library to load instead of libcuda.so.1."},
    {"sim.node", GPUM_OPT_STRING, "", NULL, UNBOUNDED, false,
     "Name of a simulated node (gpum sim start); when set, NVML and CUDA come from "
     "libgpum_sim.so unless nvml.library or cuda.library say otherwise."},
    {"sim.library", GPUM_OPT_STRING, "", NULL, UNBOUNDED, false,
     "Path of libgpum_sim.so; by default it is looked up beside libgpum.so, then in the "
     "install directory, then through the loader path."},
    {"retry.count", GPUM_OPT_INT, "5", NULL, 0, 100, false,
     "How many times a transient driver error is retried before it is reported."},
    {"retry.base", GPUM_OPT_DURATION, "10ms", NULL, UNBOUNDED, false,
     "Delay before the first retry; it doubles with each further retry, with jitter."},
    {"log.level", GPUM_OPT_ENUM, "warn", "trace|debug|info|warn|error|off", UNBOUNDED, false,
     "Lowest level of the log lines that are written."},
    {"log.target", GPUM_OPT_ENUM, "stderr", "stderr|syslog|none", UNBOUNDED, false,
     "Where log lines go: stderr, syslog (journald picks it up) or none."},
    {"status.interval", GPUM_OPT_DURATION, "2s", NULL, UNBOUNDED, false,
     "Refresh interval of gpum status --watch when no interval is given."},
    {"status.timeout", GPUM_OPT_DURATION, "5s", NULL, UNBOUNDED, false,
     "How long gpum status waits for a device to answer; one that has not (a driver call "
     "that hangs) is shown as ERROR, not waited for."},
    {"monitor.interval", GPUM_OPT_DURATION, "1s", NULL, UNBOUNDED, false,
     "Sampling interval of the monitor (gpum monitor, gpum alerts, and the daemon)."},
    {"monitor.start_timeout", GPUM_OPT_DURATION, "10s", NULL, UNBOUNDED, false,
     "gpumd: how long start waits for every device to answer (its static info) before it "
     "recovers the ledger; a device still silent then is unusable (ERROR) until it answers."},
    {"monitor.busy_util", GPUM_OPT_INT, "90", NULL, 0, 100, false,
     "A healthy device is BUSY at or above this GPU utilisation, in percent; 0 turns it off."},
    {"monitor.busy_memory", GPUM_OPT_INT, "90", NULL, 0, 100, false,
     "A healthy device is BUSY at or above this share of its memory in use, in percent; 0 "
     "turns it off."},
    {"monitor.busy_jobs", GPUM_OPT_INT, "0", NULL, 0, 100000, false,
     "A healthy device is BUSY with at least this many processes or jobs on it; 0 turns it "
     "off."},
    {"alerts.defaults", GPUM_OPT_BOOL, "true", NULL, UNBOUNDED, false,
     "Add the default alert rules (memory above 90%, temperature near the slowdown and "
     "shutdown thresholds, any Xid, a device in ERROR) before the configured ones."},
    {"alerts.rules", GPUM_OPT_STRING, "", NULL, UNBOUNDED, false,
     "Alert rules separated by ';', such as \"power_pct > 95 for 1m WARNING; xid 79 CRITICAL\" "
     "(syntax in docs/monitoring.md)."},
    {"alerts.file", GPUM_OPT_STRING, "", NULL, UNBOUNDED, false,
     "Path of a file of alert rules, one per line, with '#' comments; added after "
     "alerts.rules."},
    {"alerts.xid_window", GPUM_OPT_DURATION, "5m", NULL, UNBOUNDED, false,
     "How long an Xid alert stays active after the last occurrence of its Xid; 0 records Xid "
     "alerts in the history only."},
    {"alerts.history", GPUM_OPT_INT, "256", NULL, 1, 100000, false,
     "How many alerts (fired and cleared) the alert history keeps."},
    {"socket", GPUM_OPT_STRING, "", NULL, UNBOUNDED, false,
     "Path of gpumd's Unix socket; empty means /run/gpum/gpumd.sock as root, else "
     "$XDG_RUNTIME_DIR/gpum/gpumd.sock (or /tmp/gpum-UID/gpumd.sock)."},
    {"state_dir", GPUM_OPT_STRING, "", NULL, UNBOUNDED, false,
     "Directory of gpumd's ledger and lock file; empty means /var/lib/gpum as root, else "
     "$XDG_STATE_HOME/gpum (or ~/.local/state/gpum)."},
    {"socket_mode", GPUM_OPT_STRING, "0660", NULL, UNBOUNDED, false,
     "Octal permission bits of gpumd's socket."},
    {"socket_group", GPUM_OPT_STRING, "gpum", NULL, UNBOUNDED, false,
     "Group of gpumd's socket, used when it exists; empty keeps the daemon's group."},
    {"admin_group", GPUM_OPT_STRING, "", NULL, UNBOUNDED, false,
     "Members of this group may release or change any reservation, like root; empty means "
     "root only."},
    {"memory_fraction", GPUM_OPT_DOUBLE, "0.95", NULL, 0.01, 1.0, false,
     "Share of each device's total memory that gpumd may grant."},
    {"safety_margin", GPUM_OPT_SIZE, "256MiB", NULL, UNBOUNDED, false,
     "Memory kept free on every device, subtracted from what gpumd may grant."},
    {"admission.read_timeout", GPUM_OPT_DURATION, "1s", NULL, UNBOUNDED, false,
     "gpumd: before it grants or grows a reservation it reads the devices afresh (their memory "
     "and the processes using it) and decides on that; a device that has not answered within "
     "this time takes no grant then (one stuck in a call is not waited for again)."},
    {"max_concurrent_jobs", GPUM_OPT_INT, "0", NULL, 0, 100000, false,
     "Most granted reservations per device; 0 means no limit."},
    {"job_timeout", GPUM_OPT_DURATION, "0", NULL, UNBOUNDED, false,
     "Default queue timeout of a reservation that gives none; 0 means wait without limit."},
    {"placement", GPUM_OPT_ENUM, "pack", "pack|spread|score", UNBOUNDED, false,
     "How gpumd picks devices: pack (best fit), spread (least loaded) or score (free memory, "
     "utilisation, temperature and health)."},
    {"queue.max", GPUM_OPT_INT, "10000", NULL, 1, 1000000, false,
     "Most queued reservations; a request beyond it is rejected with EAGAIN."},
    {"queue.backfill_bound", GPUM_OPT_DURATION, "30s", NULL, UNBOUNDED, false,
     "Smaller requests may be granted past a blocked queue head until the head has waited "
     "this long; 0 turns backfill off."},
    {"preempt.enabled", GPUM_OPT_BOOL, "true", NULL, UNBOUNDED, false,
     "gpumd suspends preemptible jobs of lower priority (reserved with --preemptible) when a "
     "queued request could be placed no other way (docs/suspend.md). Off: jobs are suspended "
     "only by `gpum suspend`. Reloaded on SIGHUP."},
    {"preempt.min_run_time", GPUM_OPT_DURATION, "5m", NULL, UNBOUNDED, false,
     "How long a preemptible job runs, after its grant or its resume, before gpumd may suspend "
     "it for another (so that jobs do not thrash). Reloaded on SIGHUP."},
    {"suspend.host_memory", GPUM_OPT_DOUBLE, "0.5", NULL, 0.0, 1.0, false,
     "The share of the node's memory (MemTotal) that suspended jobs' GPU memory may take in "
     "all; a suspend that would pass it is refused. Reloaded on SIGHUP."},
    {"suspend.lock_timeout", GPUM_OPT_DURATION, "10s", NULL, UNBOUNDED, false,
     "How long a suspend waits for each of a job's processes to finish its CUDA calls in "
     "flight before it gives up (the job then runs on, untouched). Reloaded on SIGHUP."},
    {"suspend.slurm", GPUM_OPT_BOOL, "false", NULL, UNBOUNDED, false,
     "A Slurm job step that Slurm suspends (scontrol suspend, PreemptMode=SUSPEND: its tasks "
     "stopped) gives its GPU memory back: gpumd checkpoints its CUDA processes to host memory "
     "once they have been stopped for 3 s, and restores them when Slurm resumes the step "
     "(docs/slurm.md, \"Suspend\"). Reloaded on SIGHUP."},
    {"pressure.high", GPUM_OPT_DOUBLE, "0.90", NULL, 0.0, 1.0, false,
     "Used share of a device's memory above which its clients get a pressure event."},
    {"pressure.critical", GPUM_OPT_DOUBLE, "0.97", NULL, 0.0, 1.0, false,
     "Used share of a device's memory above which gpumd grants nothing more on it."},
    {"run.enforce", GPUM_OPT_BOOL, "false", NULL, UNBOUNDED, false,
     "gpum run: keep CMD inside its reservation with the enforcement shim (libgpum_enforce.so, "
     "LD_PRELOAD): an allocation past the reserved memory fails with CUDA's out-of-memory "
     "error. --enforce / --no-enforce decide per run (docs/enforce.md)."},
    {"run.on_end", GPUM_OPT_ENUM, "term", "term|keep", UNBOUNDED, false,
     "gpum run: what to do with CMD when its reservation ends under it (its GPU is gone, an "
     "admin released it, it was lost across a gpumd restart): term sends CMD SIGTERM (SIGKILL "
     "10 s later), keep lets it run on without a reservation (said on stderr). --on-end "
     "decides per run."},
    {"run.grow_timeout", GPUM_OPT_DURATION, "2s", NULL, UNBOUNDED, false,
     "gpum run --max-mem: how long an allocation past the reservation waits for gpumd to grow "
     "it before it fails with CUDA's out-of-memory error."},
    {"estimate.margin", GPUM_OPT_INT, "10", NULL, 0, 1000, false,
     "gpum run --estimate: reserve this many percent more than the estimate's total (the "
     "estimate's accuracy is in docs/estimate.md)."},
    {"lease.grace", GPUM_OPT_DURATION, "30s", NULL, UNBOUNDED, false,
     "After a gpumd restart, how long a connection-bound reservation waits for its client to "
     "re-attach with its token before it is released (at once when its owner process exits "
     "first). Reloaded on SIGHUP: a grace period "
     "that is running then ends lease.grace after it began (at once when that has passed)."},
    {"ledger.retention", GPUM_OPT_DURATION, "7d", NULL, UNBOUNDED, false,
     "How long gpumd keeps finished reservations (released, expired, cancelled, failed) and "
     "audit rows in the ledger; older ones are deleted at start and then periodically "
     "(hourly at most), in small batches. 0 keeps them forever. Reloaded on SIGHUP."},
    {"gputype.memory", GPUM_OPT_MAP, "", NULL, 0.1, 65536, false,
     "Memory of GPU families in GB, such as \"T4=16,V100=32\" (in the file also a mapping "
     "T4: 16), overriding the built-in table of GPU types for the families it names; empty "
     "keeps the table."},
    {"resources.default", GPUM_OPT_STRING, "nvidia.com/gpu", NULL, UNBOUNDED, false,
     "Kubernetes-style resource name of a GPU whose vendor has no name of its own below, and "
     "of a request that names no vendor; the resources.* names are those that status, the REST "
     "API and /metrics labels give."},
    {"resources.nvidia", GPUM_OPT_STRING, "nvidia.com/gpu", NULL, UNBOUNDED, false,
     "Resource name of NVIDIA GPUs."},
    {"resources.amd", GPUM_OPT_STRING, "amd.com/gpu", NULL, UNBOUNDED, false,
     "Resource name of AMD GPUs."},
    {"resources.intel", GPUM_OPT_STRING, "intel.com/gpu", NULL, UNBOUNDED, false,
     "Resource name of Intel GPUs."},
    {"resources.memory", GPUM_OPT_STRING, "gpum.io/gpu-memory", NULL, UNBOUNDED, false,
     "Resource name of GPU memory."},
    {"http.listen", GPUM_OPT_STRING, "127.0.0.1:8642", NULL, UNBOUNDED, false,
     "Address and port of gpumd's REST API (docs/rest.md), such as 127.0.0.1:8642 or "
     "[::1]:8642; port 0 picks a free port; \"off\" or empty turns the API off. A "
     "non-loopback address needs http.token_file and then every call needs the token."},
    {"http.token_file", GPUM_OPT_STRING, "", NULL, UNBOUNDED, false,
     "File holding the REST API's bearer token (created with mode 0600 when missing); empty "
     "means STATE_DIR/http.token. Re-read on SIGHUP; rotate with gpum http-token --rotate."},
    {"http.max_connections", GPUM_OPT_INT, "256", NULL, 1, 100000, false,
     "Most open HTTP connections. A new one past it closes the connection that has waited "
     "longest for a request, of the address holding the most connections; only when every "
     "connection is busy with a request is the new one answered 503 and closed."},
    {"http.max_connections_per_peer", GPUM_OPT_INT, "64", NULL, 1, 100000, false,
     "Most open HTTP connections from one remote address (an IPv6 one: its /64 network; every "
     "local client is 127.0.0.1 or ::1). A new one past it closes that address's connection "
     "that has waited longest for a request, or is answered 503 when all of them are busy."},
    {"http.max_body", GPUM_OPT_SIZE, "64KiB", NULL, UNBOUNDED, false,
     "Largest HTTP request body; a larger one is answered 413."},
    {"http.max_header", GPUM_OPT_SIZE, "8KiB", NULL, UNBOUNDED, false,
     "Largest HTTP request header block; a larger one is refused and the connection closed."},
    {"http.timeout", GPUM_OPT_DURATION, "10s", NULL, UNBOUNDED, false,
     "An HTTP client that sends or reads nothing for this long is disconnected."},
    {"http.event_replay", GPUM_OPT_SIZE, "4MiB", NULL, UNBOUNDED, false,
     "Recent events gpumd keeps to replay to an event stream that reconnects with "
     "Last-Event-ID (docs/metrics.md); 0 keeps none: every such stream gets a reset."},
    {"http.metrics_max_age", GPUM_OPT_DURATION, "1s", NULL, UNBOUNDED, false,
     "How stale a GET /metrics may be: a scrape within this long of the last rendering gets "
     "that rendering again (with thousands of reservations a rendering costs the event loop "
     "milliseconds); 0 renders whenever something it shows changed (docs/metrics.md)."},
    {"metrics.dcgm_names", GPUM_OPT_BOOL, "false", NULL, UNBOUNDED, false,
     "GET /metrics also exports what gpumd samples under dcgm-exporter's default names and "
     "labels (DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_GPU_UTIL, ...; gpu, UUID, modelName, Hostname), "
     "so dashboards made for dcgm-exporter work unchanged (docs/metrics.md)."},
    /* Not in a slurm section: GPUM_SLURM_* names the plugin's variables (GPUM_SLURM_JOB), which
     * a section of that name would refuse as unknown options. */
    {"cluster.slurm_refresh", GPUM_OPT_DURATION, "30s", NULL, UNBOUNDED, false,
     "gpumd: how often the cluster's GPU nodes are read from Slurm's controller for the REST "
     "node listing (docs/slurm.md), where libslurm and a slurm.conf are found; 0 turns it "
     "off. Takes effect at the next start."},
    {"color", GPUM_OPT_ENUM, "auto", "auto|always|never", UNBOUNDED, false,
     "Colour in terminal output: auto colours only when the output is a terminal and NO_COLOR "
     "is not set."},
};

static const gpum_option_def_t *table = builtin_table;
static size_t table_len = sizeof builtin_table / sizeof builtin_table[0];

const gpum_option_def_t *gpum__options_table(size_t *count) {
  *count = table_len;
  return table;
}

void gpum__options_use_table(const gpum_option_def_t *defs, size_t count) {
  if (defs == NULL) {
    table = builtin_table;
    table_len = sizeof builtin_table / sizeof builtin_table[0];
  } else {
    table = defs;
    table_len = count;
  }
}

size_t gpum_option_count(void) {
  return table_len;
}

const gpum_option_def_t *gpum_option_at(size_t i) {
  return i < table_len ? &table[i] : NULL;
}

long gpum__option_index(const char *key) {
  for (size_t i = 0; key != NULL && i < table_len; i++)
    if (!strcmp(table[i].key, key))
      return (long)i;
  return -1;
}

const gpum_option_def_t *gpum_option_find(const char *key) {
  long i = gpum__option_index(key);
  return i < 0 ? NULL : &table[i];
}

size_t gpum__option_section_len(const char *key) {
  const char *dot = strchr(key, '.');
  return dot ? (size_t)(dot - key) : 0;
}

/* Copies prefix + key into buf with each character mapped, always NUL-terminating. */
static char *derive(const char *prefix, const char *key, bool upper, char sep, char *buf,
                    size_t len) {
  size_t o = 0;
  if (buf == NULL || len == 0)
    return buf;
  for (const char *p = prefix; *p && o + 1 < len; p++)
    buf[o++] = *p;
  for (const char *p = key; *p && o + 1 < len; p++) {
    char c = *p;
    if (c == '.' || c == '-' || c == '_')
      c = sep;
    else if (upper && c >= 'a' && c <= 'z')
      c = (char)(c - 'a' + 'A');
    buf[o++] = c;
  }
  buf[o] = '\0';
  return buf;
}

char *gpum_option_env_name(const gpum_option_def_t *def, char *buf, size_t len) {
  return derive("GPUM_", def->key, true, '_', buf, len);
}

char *gpum_option_flag_name(const gpum_option_def_t *def, char *buf, size_t len) {
  return derive("--", def->key, false, '-', buf, len);
}

/* Levenshtein distance, capped: keys are short, so a two-row table on the stack suffices. */
static size_t edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  size_t prev[65], cur[65];
  if (la > 64 || lb > 64)
    return (size_t)-1;
  for (size_t j = 0; j <= lb; j++)
    prev[j] = j;
  for (size_t i = 1; i <= la; i++) {
    cur[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
      size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
      cur[j] = del < ins ? (del < sub ? del : sub) : (ins < sub ? ins : sub);
    }
    memcpy(prev, cur, sizeof prev);
  }
  return prev[lb];
}

const gpum_option_def_t *gpum__option_suggest(const char *name, gpum__name_form_t form) {
  const gpum_option_def_t *best = NULL;
  size_t best_d = 3; /* suggest only near misses: at most two edits */
  char derived[128];
  for (size_t i = 0; name != NULL && i < table_len; i++) {
    const char *cand = table[i].key;
    if (form == GPUM__NAME_ENV)
      cand = gpum_option_env_name(&table[i], derived, sizeof derived);
    else if (form == GPUM__NAME_FLAG)
      cand = gpum_option_flag_name(&table[i], derived, sizeof derived);
    size_t d = edit_distance(name, cand);
    if (d < best_d) {
      best_d = d;
      best = &table[i];
    }
  }
  return best;
}
