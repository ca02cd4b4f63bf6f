/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum top`'s frame (top.h): the data of one refresh laid out into lines. From the top: a
 * header (node, time, backend; whether gpumd runs), a line per GPU (state, temperature, a
 * memory bar with what gpumd reserved stacked on what is used, a utilisation bar and
 * sparklines of both over the kept history), then the panels (processes; reservations with
 * their workload figures; the queue; the last alerts), a message line and the keys.
 *
 * Height: the header, the GPU lines, the panels' titles, the message and the keys are always
 * drawn (as far as the screen goes); the rows of the panels share what is left, one row at a
 * time to each panel that wants more, and a panel that does not get all its rows ends with a
 * "... N more" line. The reservations panel scrolls to keep the selected row in sight.
 */
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/size.h>
#include <jansson.h>

#include "top.h"
#include "top_internal.h"

#define NONE ((size_t)-1)

static const char *const sort_names[TOP_SORT_COUNT] = {"memory", "pid", "user"};

const char *top_sort_name(top_sort_t s) {
  return (unsigned)s < TOP_SORT_COUNT ? sort_names[s] : "?";
}

/* ---- data ---- */

static float hist_at(const top_history_t *h, const float *v, size_t ago) {
  if (ago >= h->n)
    return -1;
  return v[(h->next + TOP_HISTORY - 1 - ago) % TOP_HISTORY];
}

static uint64_t mem_total(const cli_dev_snap_t *dv) {
  if (gpum_sample_valid(&dv->sample, GPUM_METRIC_MEMORY_TOTAL))
    return dv->sample.memory_total;
  return (dv->info.valid & GPUM_INFO_MEMORY_TOTAL) ? dv->info.memory_total : 0;
}

static float mem_frac(const cli_dev_snap_t *dv) {
  uint64_t total = mem_total(dv);
  if (total == 0 || !gpum_sample_valid(&dv->sample, GPUM_METRIC_MEMORY_USED))
    return -1;
  double f = (double)dv->sample.memory_used / (double)total;
  return (float)(f > 1 ? 1 : f);
}

static float util_frac(const cli_dev_snap_t *dv) {
  if (!gpum_sample_valid(&dv->sample, GPUM_METRIC_UTIL_GPU))
    return -1;
  return dv->sample.util_gpu >= 100 ? 1.0f : (float)dv->sample.util_gpu / 100.0f;
}

void top_history_add(top_data_t *d) {
  for (size_t i = 0; d->have_snap && i < d->snap.ndevs; i++) {
    const cli_dev_snap_t *dv = &d->snap.devs[i];
    if (dv->index >= TOP_MAX_DEVICES)
      continue;
    top_history_t *h = &d->hist[dv->index];
    h->mem[h->next] = mem_frac(dv);
    h->util[h->next] = util_frac(dv);
    h->next = (h->next + 1) % TOP_HISTORY;
    if (h->n < TOP_HISTORY)
      h->n++;
  }
}

void top_data_clear(top_data_t *d) {
  free(d->procs);
  d->procs = NULL;
  d->nprocs = 0;
  if (d->have_snap)
    cli_snapshot_free(&d->snap);
  d->have_snap = false;
  d->gpumd = false;
  json_decref(d->status);
  json_decref(d->reservations);
  json_decref(d->alerts);
  d->status = d->reservations = d->alerts = NULL;
}

void top_data_release(top_data_t *d) {
  top_data_clear(d);
  free(d->cpu);
  free(d->uids);
  d->cpu = NULL;
  d->uids = NULL;
  d->ncpu = d->nuids = d->cap_uids = 0;
}

static const char *jstr(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

static int64_t jint(const json_t *o, const char *key) {
  return (int64_t)json_integer_value(json_object_get(o, key));
}

/* A user's name as the frame shows it: printable ASCII only. From the names top_fetch looked
 * up (top_uid_name), else looked up here. */
static void user_name(const top_data_t *d, int64_t uid, char *buf, size_t len) {
  char raw[256];
  const char *known = top_uid_lookup(d, uid);
  if (known)
    snprintf(raw, sizeof raw, "%s", known);
  else
    cli_user_name(uid, raw, sizeof raw);
  top__clean(raw, buf, len);
}

/* gpumd's document of the device seen here as dv (by UUID: docs/cli.md). */
static const json_t *gpumd_device(const top_data_t *d, const cli_dev_snap_t *dv) {
  return cli_gpumd_device_of(d->status, dv);
}

/* ---- lines ---- */

/* A growing list of lines: a section before the layout cuts it. When memory runs out, lines
 * go to sink and are lost (the frame shows less, it does not fail). */
typedef struct {
  top_line_t *v;
  size_t n, cap;
  int width;
  top_line_t sink;
} lines_t;

static void push(lines_t *ls, top_lb_t *b, cli_style_t style) {
  if (ls->n == ls->cap) {
    size_t cap = ls->cap ? ls->cap * 2 : 8;
    top_line_t *v = realloc(ls->v, cap * sizeof *v);
    if (v == NULL) {
      top__lb_init(b, &ls->sink, ls->width, style);
      return;
    }
    ls->v = v;
    ls->cap = cap;
  }
  top__lb_init(b, &ls->v[ls->n++], ls->width, style);
}

/* The last line pushed (for flags such as selected), or the sink. */
static top_line_t *last(lines_t *ls) {
  return ls->n ? &ls->v[ls->n - 1] : &ls->sink;
}

/* ---- header and GPUs ---- */

static void build_header(lines_t *ls, const top_data_t *d) {
  top_lb_t b;
  push(ls, &b, CLI_PLAIN);
  top__lb_add(&b, CLI_BOLD, "gpum top");
  if (d->have_snap) {
    char when[32];
    struct tm tm;
    localtime_r(&d->snap.time.tv_sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    char host[256], detail[512];
    top__clean(d->snap.hostname, host, sizeof host);
    top__clean(d->snap.backend_detail, detail, sizeof detail);
    top__lb_add(&b, CLI_BOLD, "  %s", host);
    top__lb_add(&b, CLI_PLAIN, "  %s", when);
    if (d->snap.driver_version[0])
      top__lb_add(&b, CLI_PLAIN, "  driver %s", d->snap.driver_version);
    top__lb_add(&b, CLI_DIM, "  %s", detail);
    if (d->snap.simulated)
      top__lb_add(&b, CLI_MAGENTA, "  [simulated]");
  }
  push(ls, &b, CLI_PLAIN);
  if (d->gpumd) {
    size_t granted = 0, queued = 0, suspended = 0, i;
    const json_t *r;
    json_array_foreach(d->reservations, i, r) {
      granted += !strcmp(jstr(r, "state"), "GRANTED");
      queued += !strcmp(jstr(r, "state"), "QUEUED");
      suspended += !strcmp(jstr(r, "state"), "SUSPENDED");
    }
    size_t active = json_array_size(json_object_get(d->alerts, "active"));
    top__lb_add(&b, CLI_GREEN, "gpumd: running");
    top__lb_add(&b, CLI_PLAIN, " at %s: %zu granted, %zu queued, ", d->socket, granted, queued);
    if (suspended) /* their GPU memory is in host memory (docs/suspend.md) */
      top__lb_add(&b, CLI_YELLOW, "%zu suspended, ", suspended);
    top__lb_add(&b, active ? CLI_RED : CLI_PLAIN, "%zu active alert%s", active,
                active == 1 ? "" : "s");
    /* gpumd's GPUs matched by UUID (docs/cli.md): say so plainly when they are not these. */
    size_t strangers = 0;
    const json_t *g;
    json_array_foreach(json_object_get(d->status, "devices"), i, g) {
      bool seen = false;
      for (size_t k = 0; d->have_snap && k < d->snap.ndevs && !seen; k++)
        seen = cli_gpumd_device_of(d->status, &d->snap.devs[k]) == g;
      strangers += !seen;
    }
    if (strangers) {
      push(ls, &b, CLI_PLAIN);
      top__lb_add(&b, CLI_YELLOW,
                  "%zu of gpumd's GPUs are not among the devices seen here: gpumd and this gpum "
                  "read different drivers (GPUM_SIM_NODE?)",
                  strangers);
    }
  } else {
    top__lb_add(&b, CLI_YELLOW,
                "gpumd is not running (%s): devices and processes from the device layer; no "
                "reservations, queue or alerts",
                d->socket[0] ? d->socket : "no socket");
  }
  if (!d->have_snap) {
    push(ls, &b, CLI_BOLD_RED);
    top__lb_add(&b, CLI_PLAIN, "devices: %s", d->snap_error[0] ? d->snap_error : "not read");
  }
}

typedef struct {
  int bar;   /* cells of each bar */
  int spark; /* cells of each sparkline; 0: none */
} gpu_layout_t;

#define GPU_FIXED 73 /* columns of a GPU line besides its bars and sparklines (and one spare) */

static gpu_layout_t gpu_layout(int width) {
  gpu_layout_t g;
  int rest = width - GPU_FIXED;
  g.bar = rest / 4 < 4 ? 4 : rest / 4 > 20 ? 20 : rest / 4;
  g.spark = (rest - 2 * g.bar - 1) / 2;
  if (g.spark < 4)
    g.spark = 0;
  if (g.spark > 60)
    g.spark = 60;
  return g;
}

/* "[####++....]": used cells in the level's colour, then the cells gpumd reserved past what is
 * used (reserved < 0: none), then free ones. */
static void bar(top_lb_t *b, const top_view_t *v, double used, double reserved, int cells) {
  if (used < 0) {
    top__lb_add(b, CLI_DIM, "[%*s]", cells, "n/a");
    return;
  }
  int full = (int)(used * cells + 0.5), resv = 0;
  if (full == 0 && used > 0)
    full = 1; /* anything in use shows */
  if (full > cells)
    full = cells;
  if (reserved > used) {
    resv = (int)(reserved * cells + 0.5) - full;
    resv = resv < 0 ? 0 : resv > cells - full ? cells - full : resv;
  }
  top__lb_add(b, CLI_PLAIN, "[");
  top__lb_repeat(b, cli_level_style(used * 100.0, 50, 90), v->utf8 ? "\u2588" : "#", full);
  top__lb_repeat(b, CLI_BLUE, v->utf8 ? "\u2592" : "+", resv);
  top__lb_repeat(b, CLI_DIM, v->utf8 ? "\u2591" : ".", cells - full - resv);
  top__lb_add(b, CLI_PLAIN, "]");
}

/* The history in cells columns, oldest left: each column the highest value of its stretch of
 * points, so the line spans the whole history (TOP_HISTORY refreshes) however narrow. */
static void sparkline(top_lb_t *b, const top_view_t *v, const top_history_t *h, const float *vals,
                      int cells) {
  static const char *const utf8[] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                     "\u2585", "\u2586", "\u2587", "\u2588"};
  static const char *const ascii[] = {"_", ".", ",", "-", "=", "+", "*", "#"};
  size_t per = (TOP_HISTORY + (size_t)cells - 1) / (size_t)cells;
  for (int c = 0; c < cells; c++) {
    size_t col_ago = (size_t)(cells - 1 - c); /* 0: the newest column, right */
    float best = -1;
    for (size_t k = 0; k < per; k++) {
      float x = hist_at(h, vals, col_ago * per + k);
      best = x > best ? x : best;
    }
    if (best < 0) {
      top__lb_add(b, CLI_PLAIN, " ");
      continue;
    }
    int level = (int)(best * 7 + 0.5);
    level = level < 0 ? 0 : level > 7 ? 7 : level;
    top__lb_repeat(b, CLI_CYAN, v->utf8 ? utf8[level] : ascii[level], 1);
  }
}

static void build_gpus(lines_t *ls, const top_data_t *d, const top_view_t *v) {
  gpu_layout_t g = gpu_layout(ls->width);
  top_lb_t b;
  push(ls, &b, CLI_DIM);
  top__lb_add(&b, CLI_PLAIN, "GPU NAME             STATE     TEMP MEMORY");
  if (g.spark) {
    top__lb_pad(&b, GPU_FIXED - 2 + 2 * g.bar);
    top__lb_add(&b, CLI_PLAIN, "MEMORY, UTILISATION OVER TIME");
  }
  for (size_t i = 0; d->have_snap && i < d->snap.ndevs; i++) {
    const cli_dev_snap_t *dv = &d->snap.devs[i];
    const json_t *gd = gpumd_device(d, dv);
    cli_state_t st = cli_gpumd_state(d->status, dv);
    char name[GPUM_NAME_LEN], mem[48] = "n/a";
    char shown[GPUM_NAME_LEN + 24];
    const char *nm = (dv->info.valid & GPUM_INFO_NAME) ? dv->info.name : "n/a";
    if (d->snap.backend == GPUM_BACKEND_MIXED && dv->info.vendor) /* "amd:0 AMD Instinct" */
      snprintf(shown, sizeof shown, "%s:%u %s", dv->info.vendor, dv->info.vendor_index, nm);
    else
      snprintf(shown, sizeof shown, "%s", nm);
    top__clean(shown, name, sizeof name);
    push(ls, &b, CLI_PLAIN);
    top__lb_add(&b, CLI_BOLD, "%3u ", dv->index);
    top__lb_add(&b, CLI_PLAIN, "%-16.16s ", name);
    top__lb_add(&b, cli_state_style(st), "%-9s ", cli_state_name(st));
    if (gpum_sample_valid(&dv->sample, GPUM_METRIC_TEMPERATURE))
      top__lb_add(&b, cli_level_style(dv->sample.temperature_c, 70, 85), "%3dC ",
                  dv->sample.temperature_c);
    else
      top__lb_add(&b, CLI_DIM, " n/a ");
    uint64_t total = mem_total(dv);
    double reserved = -1;
    if (gd && total > 0)
      reserved = (double)jint(gd, "reserved") / (double)total;
    top__lb_add(&b, CLI_PLAIN, "MEM");
    bar(&b, v, mem_frac(dv), reserved, g.bar);
    if (gpum_sample_valid(&dv->sample, GPUM_METRIC_MEMORY_USED) && total > 0)
      cli_fmt_mem_pair(dv->sample.memory_used, total, mem, sizeof mem);
    top__lb_add(&b, CLI_PLAIN, " %-15.15s UTIL", mem);
    bar(&b, v, util_frac(dv), -1, g.bar);
    if (gpum_sample_valid(&dv->sample, GPUM_METRIC_UTIL_GPU))
      top__lb_add(&b, CLI_PLAIN, " %3u%%", dv->sample.util_gpu);
    else
      top__lb_add(&b, CLI_DIM, "  n/a");
    if (g.spark && dv->index < TOP_MAX_DEVICES) {
      const top_history_t *h = &d->hist[dv->index];
      top__lb_add(&b, CLI_PLAIN, "  ");
      sparkline(&b, v, h, h->mem, g.spark);
      top__lb_add(&b, CLI_PLAIN, " ");
      sparkline(&b, v, h, h->util, g.spark);
    }
    /* What is wrong with a device in trouble goes on a line of its own, right under it, where
     * it is read (after the sparklines it was cut off at every usual width); a note on a
     * healthy one (BUSY's utilisation, transient errors) stays at the end of its line. The
     * reason of a state only gpumd knows is gpumd's. */
    bool trouble =
        st == CLI_STATE_ERROR || st == CLI_STATE_DISABLED || st == CLI_STATE_OVERCOMMITTED;
    const char *reason =
        st != dv->state && gd && jstr(gd, "reason")[0] ? jstr(gd, "reason") : dv->reason;
    if (reason[0]) {
      char why[CLI_REASON_LEN];
      top__clean(reason, why, sizeof why);
      if (trouble) {
        push(ls, &b, CLI_PLAIN);
        top__lb_add(&b, st == CLI_STATE_DISABLED ? CLI_YELLOW : CLI_RED, "    %s", why);
      } else {
        top__lb_add(&b, CLI_DIM, "  %s", why);
      }
    }
  }
}

/* ---- processes ---- */

static int by_memory(const void *a, const void *b) {
  const top_prow_t *x = a, *y = b;
  uint64_t mx = x->p->memory_valid ? x->p->memory : 0, my = y->p->memory_valid ? y->p->memory : 0;
  if (mx != my)
    return mx > my ? -1 : 1;
  if (x->p->pid != y->p->pid)
    return x->p->pid < y->p->pid ? -1 : 1;
  return (x->gpu > y->gpu) - (x->gpu < y->gpu);
}

static int by_pid(const void *a, const void *b) {
  const top_prow_t *x = a, *y = b;
  if (x->p->pid != y->p->pid)
    return x->p->pid < y->p->pid ? -1 : 1;
  return (x->gpu > y->gpu) - (x->gpu < y->gpu);
}

static int by_user(const void *a, const void *b) {
  const top_prow_t *x = a, *y = b;
  int c = strcmp(x->p->user, y->p->user);
  return c ? c : by_memory(a, b);
}

size_t top_process_rows(const top_data_t *d, const top_view_t *v, top_prow_t *rows, size_t cap) {
  size_t total = 0, n = 0;
  for (size_t i = 0; d->have_snap && i < d->snap.ndevs; i++)
    total += d->snap.devs[i].nprocs;
  top_prow_t *all = total ? calloc(total, sizeof *all) : NULL;
  for (size_t i = 0; all && i < d->snap.ndevs; i++) {
    const cli_dev_snap_t *dv = &d->snap.devs[i];
    for (size_t k = 0; k < dv->nprocs; k++)
      if (!v->user[0] || !strcmp(v->user, dv->procs[k].user))
        all[n++] = (top_prow_t){&dv->procs[k], dv->index};
  }
  static int (*const cmp[TOP_SORT_COUNT])(const void *, const void *) = {by_memory, by_pid,
                                                                         by_user};
  if (n > 1)
    qsort(all, n, sizeof *all, cmp[v->sort < TOP_SORT_COUNT ? v->sort : 0]);
  for (size_t i = 0; i < n && i < cap; i++)
    rows[i] = all[i];
  free(all);
  return n;
}

/* The GPU utilisation of pid on the device of gpu: "37%", "0%" (the driver gives it, and had
 * no sample of pid: idle), "-" (it gives none). */
static void gpu_util(const top_data_t *d, unsigned pid, unsigned gpu, char *buf, size_t len) {
  snprintf(buf, len, "-");
  for (size_t i = 0; d->have_snap && i < d->snap.ndevs; i++) {
    const cli_dev_snap_t *dv = &d->snap.devs[i];
    if (dv->index != gpu || dv->putil_rc != 0)
      continue;
    snprintf(buf, len, "0%%");
    for (size_t k = 0; k < dv->nputil; k++)
      if (dv->putil[k].pid == pid)
        snprintf(buf, len, "%u%%", dv->putil[k].sm_util);
  }
}

/* A process row's columns (the header uses them too): selection mark, pid, user, GPU, GPU %,
 * CPU %, host memory, GPU memory, run time; then the command. */
#define PROC_ROW "%c %7s %-10.10s %4s %4s %5s %10s %11s %8s  "

/* A run time as ps and nvitop show it, two units at most: "45s", "12m05s", "3h04m", "2d03h". */
static void run_time(uint64_t ms, char *buf, size_t len) {
  uint64_t s = ms / 1000, m = s / 60, h = m / 60, days = h / 24;
  if (s < 60)
    snprintf(buf, len, "%us", (unsigned)s);
  else if (m < 60)
    snprintf(buf, len, "%um%02us", (unsigned)m, (unsigned)(s % 60));
  else if (h < 24)
    snprintf(buf, len, "%uh%02um", (unsigned)h, (unsigned)(m % 60));
  else
    snprintf(buf, len, "%llud%02uh", (unsigned long long)days, (unsigned)(h % 24));
}

/* The processes panel: its title and column header in head, a row per process in body; the
 * body line of the selected row to *focus (NONE when none is selected or shown). */
static void build_processes(lines_t *head, lines_t *body, const top_data_t *d, const top_view_t *v,
                            size_t *focus) {
  size_t total = 0;
  for (size_t i = 0; d->have_snap && i < d->snap.ndevs; i++)
    total += d->snap.devs[i].nprocs;
  top_prow_t *rows = total ? calloc(total, sizeof *rows) : NULL;
  size_t n = rows ? top_process_rows(d, v, rows, total) : 0;
  top_lb_t b;
  bool focused = v->panel == TOP_PANEL_PROCESSES;
  *focus = NONE;
  push(head, &b, focused ? CLI_BOLD : CLI_CYAN);
  last(head)->selected = focused;
  top__lb_add(&b, CLI_PLAIN, "%s PROCESSES (%zu)  sort: %s  user: %s", focused ? "*" : " ", n,
              top_sort_name(v->sort), v->user[0] ? v->user : "all");
  push(head, &b, CLI_DIM);
  top__lb_add(&b, CLI_PLAIN, PROC_ROW "%s", ' ', "PID", "USER", "GPU", "GPU%", "CPU%", "HOST MEM",
              "GPU MEMORY", "TIME", "COMMAND");
  if (n == 0) {
    push(body, &b, CLI_DIM);
    top__lb_add(&b, CLI_PLAIN, "  (no process%s)", v->user[0] ? " of this user" : "");
  }
  for (size_t i = 0; i < n; i++) {
    const gpum_process_t *p = rows[i].p;
    const top_proc_t *h = top_proc_find(d, p->pid);
    char user[GPUM_USER_LEN], cmd[GPUM_COMMAND_LEN], mem[GPUM_SIZE_BUFSZ], host[GPUM_SIZE_BUFSZ],
        util[8], cpu[16] = "-", run[GPUM_DURATION_BUFSZ] = "-";
    const char *who = p->user; /* the device layer read it from /proc with the list */
    top__clean(who[0] ? who : "?", user, sizeof user);
    top__clean(p->command[0] ? p->command : "?", cmd, sizeof cmd);
    gpu_util(d, p->pid, rows[i].gpu, util, sizeof util);
    if (h && h->cpu >= 0)
      snprintf(cpu, sizeof cpu, "%.*f%%", h->cpu < 9.95 ? 1 : 0, h->cpu);
    cli_fmt_size(h ? h->rss : 0, h && h->rss_valid, host, sizeof host);
    if (h && h->seen)
      run_time(h->run_ms, run, sizeof run);
    bool selected = v->proc_selected && v->sel_pid == p->pid && v->sel_gpu == rows[i].gpu;
    if (selected && focused)
      *focus = body->n;
    push(body, &b, CLI_PLAIN);
    last(body)->selected = selected && focused;
    char pid[16], gpu[16];
    snprintf(pid, sizeof pid, "%u", p->pid);
    snprintf(gpu, sizeof gpu, "%u", rows[i].gpu);
    top__lb_add(&b, CLI_PLAIN, PROC_ROW, selected ? '>' : ' ', pid, user, gpu, util, cpu, host,
                cli_fmt_size(p->memory, p->memory_valid, mem, sizeof mem), run);
    top__lb_add(&b, CLI_DIM, "%s", cmd);
  }
  free(rows);
}

/* ---- reservations and queue ---- */

static int64_t id_number(const json_t *r) {
  const char *id = jstr(r, "id");
  return strncmp(id, "r-", 2) ? -1 : strtoll(id + 2, NULL, 10);
}

static int res_rank(const json_t *r) {
  const char *st = jstr(r, "state");
  return !strcmp(st, "GRANTED") ? 0 : !strcmp(st, "QUEUED") ? 1 : 2;
}

/* Granted by id (r-5 before r-10), then the queue in its order, then the rest by id. */
static int res_order(const void *a, const void *b) {
  const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
  int kx = res_rank(x), ky = res_rank(y);
  if (kx != ky)
    return kx - ky;
  int64_t px = kx == 1 ? jint(x, "queue_position") : id_number(x);
  int64_t py = ky == 1 ? jint(y, "queue_position") : id_number(y);
  return (px > py) - (px < py);
}

/* The reservations the user filter keeps, in the order shown; *n of them (caller frees). */
static const json_t **filtered_reservations(const top_data_t *d, const top_view_t *v, size_t *n) {
  size_t cap = json_array_size(d->reservations), i;
  const json_t **out = cap ? calloc(cap, sizeof *out) : NULL;
  const json_t *r;
  *n = 0;
  json_array_foreach(d->reservations, i, r) {
    char owner[64];
    user_name(d, jint(r, "uid"), owner, sizeof owner);
    if (out && (!v->user[0] || !strcmp(owner, v->user)))
      out[(*n)++] = r;
  }
  if (*n > 1)
    qsort(out, *n, sizeof *out, res_order);
  return out;
}

static cli_style_t res_style(const char *state) {
  if (!strcmp(state, "GRANTED"))
    return CLI_GREEN;
  if (!strcmp(state, "QUEUED") || !strcmp(state, "SUSPENDED"))
    return CLI_YELLOW;
  return CLI_DIM;
}

/* The GPUs of a reservation: "0,1" granted, "x2" (how many it asks for) otherwise. */
static void res_gpus(const json_t *r, char *buf, size_t len) {
  const json_t *devs = json_object_get(r, "devices");
  size_t o = 0, i;
  const json_t *dv;
  buf[0] = '\0';
  json_array_foreach(devs, i, dv) {
    int k = snprintf(buf + o, len - o, "%s%lld", i ? "," : "", (long long)jint(dv, "index"));
    if (k < 0 || (size_t)k >= len - o)
      break;
    o += (size_t)k;
  }
  if (o == 0)
    snprintf(buf, len, "x%lld", (long long)jint(r, "gpus"));
}

static void res_age(const top_data_t *d, const json_t *r, char *buf, size_t len) {
  int64_t since = jint(r, "granted_ns");
  if (since <= 0)
    since = jint(r, "created_ns");
  if (since <= 0 || (uint64_t)since > d->now_ns) {
    snprintf(buf, len, "-");
    return;
  }
  gpum_duration_format((d->now_ns - (uint64_t)since) / 1000000000ull * 1000ull, buf, len);
}

/* "      infer (pid 812): completed 100, queued 0": a line per source that reported. */
static void workload_lines(lines_t *body, const json_t *r) {
  size_t i;
  const json_t *w;
  json_array_foreach(json_object_get(r, "workload"), i, w) {
    char src[64];
    top__clean(jstr(w, "source"), src, sizeof src);
    top_lb_t b;
    push(body, &b, CLI_DIM);
    top__lb_add(&b, CLI_PLAIN, "      %s (pid %lld):", src, (long long)jint(w, "pid"));
    const char *k;
    const json_t *val;
    bool first = true;
    json_object_foreach((json_t *)json_object_get(w, "figures"), k, val) {
      char key[64], stem[64];
      snprintf(stem, sizeof stem, "%.*s", (int)gpum_figure_stem_len(k), k); /* "e2e_p99" */
      top__clean(stem, key, sizeof key);
      char shown[GPUM_FIGURE_BUFSZ];
      gpum_figure_format(k, json_number_value(val), shown, sizeof shown);
      top__lb_add(&b, CLI_PLAIN, "%s %s %s", first ? "" : ",", key, shown);
      first = false;
    }
  }
}

/* The reservations panel; the ids of its rows go to ids, the body line of the selected one to
 * *focus (NONE when none is selected or shown). */
static void build_reservations(lines_t *head, lines_t *body, const top_data_t *d,
                               const top_view_t *v, char (*ids)[TOP_ID_LEN], size_t cap_ids,
                               size_t *nids, size_t *focus) {
  top_lb_t b;
  bool focused = v->panel == TOP_PANEL_RESERVATIONS;
  *focus = NONE;
  *nids = 0;
  push(head, &b, focused ? CLI_BOLD : CLI_CYAN);
  last(head)->selected = focused;
  if (!d->gpumd) {
    top__lb_add(&b, CLI_PLAIN, "%s RESERVATIONS: gpumd is not running", focused ? "*" : " ");
    return;
  }
  size_t n = 0;
  const json_t **rs = filtered_reservations(d, v, &n);
  top__lb_add(&b, CLI_PLAIN, "%s RESERVATIONS (%zu)  user: %s", focused ? "*" : " ", n,
              v->user[0] ? v->user : "all");
  push(head, &b, CLI_DIM);
  top__lb_add(&b, CLI_PLAIN,
              "  ID       OWNER      STATE     GPUS     LIMIT/GPU       USED AGE      QUEUE LABEL");
  if (n == 0) {
    push(body, &b, CLI_DIM);
    top__lb_add(&b, CLI_PLAIN, "  (no reservation%s)", v->user[0] ? " of this user" : "");
  }
  for (size_t i = 0; i < n; i++) {
    const json_t *r = rs[i];
    char id[TOP_ID_LEN], owner[64], gpus[32], limit[GPUM_SIZE_BUFSZ],
        used[GPUM_SIZE_BUFSZ] = "-", age[GPUM_DURATION_BUFSZ], queue[24] = "-", label[160];
    top__clean(jstr(r, "id"), id, sizeof id);
    if (ids && *nids < cap_ids)
      snprintf(ids[(*nids)++], TOP_ID_LEN, "%s", id);
    bool selected = v->selected[0] && !strcmp(v->selected, id);
    user_name(d, jint(r, "uid"), owner, sizeof owner);
    res_gpus(r, gpus, sizeof gpus);
    gpum_size_format((uint64_t)jint(r, "bytes_per_gpu"), limit, sizeof limit);
    const json_t *fenced = json_object_get(r, "fenced");
    if (json_is_object(fenced))
      gpum_size_format((uint64_t)jint(fenced, "used"), used, sizeof used);
    res_age(d, r, age, sizeof age);
    const char *state = jstr(r, "state");
    if (!strcmp(state, "QUEUED"))
      snprintf(queue, sizeof queue, "#%lld", (long long)jint(r, "queue_position") + 1);
    else if (json_is_string(json_object_get(r, "moving"))) /* suspending or resuming */
      snprintf(queue, sizeof queue, "move");
    else if (!strcmp(state, "SUSPENDED")) /* its GPU memory is in host memory */
      snprintf(queue, sizeof queue, "host");
    top__clean(jstr(r, "label"), label, sizeof label);
    if (selected && focused)
      *focus = body->n;
    push(body, &b, CLI_PLAIN);
    last(body)->selected = selected && focused;
    top__lb_add(&b, CLI_PLAIN, "%c %-8.8s %-10.10s ", selected ? '>' : ' ', id, owner);
    top__lb_add(&b, res_style(state), "%-9.9s", state);
    top__lb_add(&b, CLI_PLAIN, " %-8.8s %9s %10s %-8.8s %-5.5s %s", gpus, limit, used, age, queue,
                label[0] ? label : "-");
    workload_lines(body, r);
  }
  free(rs);
}

static void build_queue(lines_t *head, lines_t *body, const top_data_t *d, const top_view_t *v) {
  if (!d->gpumd)
    return;
  size_t n = 0, queued = 0;
  const json_t **rs = filtered_reservations(d, v, &n);
  top_lb_t b;
  for (size_t i = 0; i < n; i++) {
    const json_t *r = rs[i];
    if (strcmp(jstr(r, "state"), "QUEUED"))
      continue;
    char id[TOP_ID_LEN], owner[64], limit[GPUM_SIZE_BUFSZ], why[320];
    top__clean(jstr(r, "id"), id, sizeof id);
    top__clean(jstr(r, "waiting_for"), why, sizeof why);
    user_name(d, jint(r, "uid"), owner, sizeof owner);
    push(body, &b, CLI_PLAIN);
    top__lb_add(&b, CLI_YELLOW, "  #%lld", (long long)jint(r, "queue_position") + 1);
    top__lb_add(&b, CLI_PLAIN, " %s %s: %lld x %s", id, owner, (long long)jint(r, "gpus"),
                gpum_size_format((uint64_t)jint(r, "bytes_per_gpu"), limit, sizeof limit));
    if (why[0])
      top__lb_add(&b, CLI_DIM, ", waiting for %s", why);
    queued++;
  }
  free(rs);
  push(head, &b, CLI_CYAN);
  if (queued)
    top__lb_add(&b, CLI_PLAIN, "  QUEUE (%zu waiting)", queued);
  else
    top__lb_add(&b, CLI_PLAIN, "  QUEUE: empty");
}

/* ---- alerts ---- */

static cli_style_t level_style(const char *level) {
  if (!strcmp(level, "CRITICAL") || !strcmp(level, "ERROR"))
    return CLI_BOLD_RED;
  if (!strcmp(level, "WARNING"))
    return CLI_YELLOW;
  return CLI_PLAIN;
}

static void build_alerts(lines_t *head, lines_t *body, const top_data_t *d) {
  if (!d->gpumd)
    return;
  top_lb_t b;
  const json_t *active = json_object_get(d->alerts, "active");
  const json_t *hist = json_object_get(d->alerts, "history");
  push(head, &b, CLI_CYAN);
  if (d->alerts == NULL)
    top__lb_add(&b, CLI_PLAIN, "  ALERTS: gpumd did not answer");
  else if (!json_is_true(json_object_get(d->alerts, "enabled")))
    top__lb_add(&b, CLI_PLAIN, "  ALERTS: gpumd's alert engine is off");
  else
    top__lb_add(&b, CLI_PLAIN, "  ALERTS (%zu active, the last %zu)", json_array_size(active),
                json_array_size(hist));
  for (size_t i = json_array_size(hist); i-- > 0;) { /* newest first */
    const json_t *a = json_array_get(hist, i);
    char when[16] = "--:--:--", msg[320], level[16];
    int64_t ns = jint(a, "fired_ns");
    if (ns > 0) {
      time_t t = (time_t)(ns / 1000000000);
      struct tm tm;
      localtime_r(&t, &tm);
      strftime(when, sizeof when, "%H:%M:%S", &tm);
    }
    top__clean(jstr(a, "message"), msg, sizeof msg);
    top__clean(jstr(a, "level"), level, sizeof level);
    bool is_active = !strcmp(jstr(a, "state"), "active");
    push(body, &b, is_active ? CLI_PLAIN : CLI_DIM);
    top__lb_add(&b, CLI_PLAIN, "  %s  ", when);
    top__lb_add(&b, is_active ? level_style(level) : CLI_PLAIN, "%-8s", level);
    top__lb_add(&b, CLI_PLAIN, "  GPU %-2lld %-7s  %s", (long long)jint(a, "device"),
                is_active ? "active" : "cleared", msg);
  }
}

/* ---- help, message, keys ---- */

static void build_help(lines_t *ls) {
  static const char *const text[] = {
      "  KEYS",
      "    q          quit",
      "    tab        switch the focused panel (processes, reservations)",
      "    s          sort the processes by memory, pid or user (in turn)",
      "    u          filter processes and reservations by user (empty: all)",
      "    up/down    select a process (processes panel) or a reservation (also k/j)",
      "    K, F9      signal the selected process: t/Enter TERM, k KILL, i INT, then y",
      "               to confirm (only your own processes, unless you are root)",
      "    r          release the selected reservation (asks first; owner or admin only)",
      "    ?          this help (any key goes back)",
      "  PROCESSES",
      "    GPU%: the process's SM utilisation, where the driver gives it ('-' where not);",
      "    CPU%: of one CPU since the last refresh; HOST MEM: resident; TIME: since it started",
      "  GPU LINES",
      "    MEM [used|reserved by gpumd|free], the memory used/total, UTIL [busy|idle] %,",
      "    then sparklines of memory and utilisation over the last 240 refreshes",
      "  RESERVATIONS",
      "    LIMIT/GPU: bytes reserved per GPU; USED: what the job holds under the enforcement",
      "    shim (gpum run --enforce), '-' otherwise; QUEUE: position in gpumd's queue,",
      "    'host' for a SUSPENDED job (its GPU memory in host memory), 'move' while it moves",
  };
  top_lb_t b;
  for (size_t i = 0; i < sizeof text / sizeof text[0]; i++) {
    push(ls, &b, text[i][2] == ' ' ? CLI_PLAIN : CLI_CYAN);
    top__lb_add(&b, CLI_PLAIN, "%s", text[i]);
  }
}

static void build_footer(lines_t *ls, const top_view_t *v) {
  top_lb_t b;
  if (v->message[0]) {
    char msg[sizeof v->message];
    top__clean(v->message, msg, sizeof msg);
    push(ls, &b, v->message_error ? CLI_BOLD_RED : CLI_YELLOW);
    top__lb_add(&b, CLI_PLAIN, "%s", msg);
  }
  push(ls, &b, CLI_PLAIN);
  last(ls)->selected = true;
  top__lb_add(&b, CLI_PLAIN,
              "q quit  tab panel  s sort: %s  u user: %s  up/down select  K signal  r release  "
              "? help",
              top_sort_name(v->sort), v->user[0] ? v->user : "all");
}

/* ---- layout ---- */

enum { P_PROCS, P_RES, P_QUEUE, P_ALERTS, P_COUNT };

typedef struct {
  top_line_t *lines;
  size_t n, limit;
} frame_t;

static void emit(frame_t *f, const top_line_t *l) {
  if (f->n < f->limit)
    f->lines[f->n++] = *l;
}

static void emit_all(frame_t *f, const lines_t *ls) {
  for (size_t i = 0; i < ls->n; i++)
    emit(f, &ls->v[i]);
}

/* The body's lines in got rows: all when they fit, else got - 1 of them from start (moved so
 * that focus shows) and a "... N more" line. */
static void emit_window(frame_t *f, const lines_t *body, size_t got, size_t start, size_t focus) {
  if (got >= body->n) {
    emit_all(f, body);
    return;
  }
  if (got == 0)
    return;
  size_t show = got - 1;
  if (focus != NONE && focus >= start + show)
    start = focus + 1 - show;
  if (focus != NONE && focus < start)
    start = focus;
  if (start + show > body->n)
    start = body->n - show;
  for (size_t i = start; i < start + show; i++)
    emit(f, &body->v[i]);
  top_line_t more;
  top_lb_t b;
  top__lb_init(&b, &more, body->width, CLI_DIM);
  top__lb_add(&b, CLI_PLAIN, "  ... %zu more", body->n - show);
  emit(f, &more);
}

size_t top_render(const top_data_t *d, const top_view_t *v, int width, int height,
                  top_line_t *lines, size_t max, char (*ids)[TOP_ID_LEN], size_t cap_ids,
                  size_t *nids) {
  int w = width < 1 ? 1 : width > TOP_MAX_WIDTH ? TOP_MAX_WIDTH : width;
  lines_t top = {.width = w}, foot = {.width = w}, head[P_COUNT], body[P_COUNT];
  for (int i = 0; i < P_COUNT; i++)
    head[i] = body[i] = (lines_t){.width = w};
  size_t focus = NONE, proc_focus = NONE, dummy = 0;
  build_header(&top, d);
  build_gpus(&top, d, v);
  if (v->help) {
    build_help(&body[P_PROCS]);
  } else {
    build_processes(&head[P_PROCS], &body[P_PROCS], d, v, &proc_focus);
    build_reservations(&head[P_RES], &body[P_RES], d, v, ids, cap_ids, nids ? nids : &dummy,
                       &focus);
    build_queue(&head[P_QUEUE], &body[P_QUEUE], d, v);
    build_alerts(&head[P_ALERTS], &body[P_ALERTS], d);
  }
  build_footer(&foot, v);

  size_t limit = height < 0 ? 0 : (size_t)height;
  if (limit > max)
    limit = max;
  size_t fixed = top.n + foot.n, want[P_COUNT], got[P_COUNT] = {0};
  for (int i = 0; i < P_COUNT; i++) {
    fixed += head[i].n;
    want[i] = body[i].n;
  }
  size_t avail = limit > fixed ? limit - fixed : 0;
  for (bool more = true; more && avail > 0;) { /* a row at a time to each panel that wants one */
    more = false;
    for (int i = 0; i < P_COUNT && avail > 0; i++) {
      if (got[i] < want[i]) {
        got[i]++;
        avail--;
        more = true;
      }
    }
  }
  frame_t f = {lines, 0, limit > foot.n ? limit - foot.n : 0};
  emit_all(&f, &top);
  for (int i = 0; i < P_COUNT; i++) {
    emit_all(&f, &head[i]);
    emit_window(&f, &body[i], got[i], 0,
                i == P_RES                 ? focus
                : i == P_PROCS && !v->help ? proc_focus
                                           : NONE);
  }
  f.limit = limit;
  top_line_t blank;
  top_lb_t b;
  top__lb_init(&b, &blank, w, CLI_PLAIN);
  while (v->bottom && f.n + foot.n < limit)
    emit(&f, &blank);
  emit_all(&f, &foot);
  free(top.v);
  free(foot.v);
  for (int i = 0; i < P_COUNT; i++) {
    free(head[i].v);
    free(body[i].v);
  }
  return f.n;
}
