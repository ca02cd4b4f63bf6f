/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum top`'s frame (src/cli/top_frame.c) rendered from made-up data, without a terminal:
 * every line fits the width and the frame the height at every size from tiny to wide, in UTF-8
 * and in ASCII (where no byte is outside ASCII); the frame shows the GPUs, the processes in
 * the chosen order and filter with their GPU utilisation ('-' where the driver gives none),
 * CPU %, host memory and run time, the reservations (granted, then the queue in its order)
 * with the shim's figures and workload lines (figures in their units), the queue and the
 * alerts; a panel too long for the screen ends with "... N more", and the selected
 * reservation and the selected process stay in sight and marked; /proc's stat lines are
 * parsed whatever the command's name, and a signal goes to no pid the screen did not show;
 * strings of other processes cannot put control characters on the screen; without gpumd a
 * line says so; --once's printing has escapes only with colour.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gpum/clock.h>
#include <gpum/error.h>
#include <jansson.h>

#include "top.h"

#define GIB (1024ull * 1024 * 1024)
#define MAXL 256

static top_line_t lines[MAXL];
static char ids[64][TOP_ID_LEN];

static void add_proc(cli_dev_snap_t *dv, unsigned pid, const char *user, uint64_t mem,
                     const char *cmd) {
  dv->procs = realloc(dv->procs, (dv->nprocs + 1) * sizeof *dv->procs);
  assert_non_null(dv->procs);
  gpum_process_t *p = &dv->procs[dv->nprocs++];
  memset(p, 0, sizeof *p);
  p->pid = pid;
  p->memory = mem;
  p->memory_valid = true;
  snprintf(p->user, sizeof p->user, "%s", user);
  snprintf(p->command, sizeof p->command, "%s", cmd);
}

static json_t *reservation(const char *id, const char *state, int64_t pos, const char *label) {
  uint64_t now = gpum_clock_real_ns();
  json_t *r = json_pack("{s:s, s:s, s:i, s:i, s:s, s:I, s:i, s:I}", "id", id, "state", state, "uid",
                        0, "pid", 100, "label", label, "bytes_per_gpu", (json_int_t)(8 * GIB),
                        "gpus", 2, "created_ns", (json_int_t)(now - 90000000000ull));
  assert_non_null(r);
  if (!strcmp(state, "GRANTED")) {
    json_object_set_new(r, "devices", json_pack("[{s:i}, {s:i}]", "index", 0, "index", 1));
    json_object_set_new(r, "granted_ns", json_integer((json_int_t)(now - 60000000000ull)));
  } else {
    json_object_set_new(r, "queue_position", json_integer(pos));
    json_object_set_new(r, "waiting_for", json_string("8.00 GiB free on 2 devices"));
  }
  return r;
}

/* Two H100s, processes of root and alice, gpumd with r-1 (granted, fenced, reporting), r-10
 * (granted) and r-3, r-2 queued at positions 1 and 0, and an active Xid alert. */
static top_data_t *make_data(bool gpumd) {
  top_data_t *d = calloc(1, sizeof *d);
  assert_non_null(d);
  d->have_snap = true;
  snprintf(d->snap.hostname, sizeof d->snap.hostname, "node7");
  snprintf(d->snap.backend_detail, sizeof d->snap.backend_detail, "simulated node 't'");
  d->snap.simulated = true;
  d->snap.ndevs = 2;
  d->snap.devs = calloc(2, sizeof *d->snap.devs);
  assert_non_null(d->snap.devs);
  for (unsigned i = 0; i < 2; i++) {
    cli_dev_snap_t *dv = &d->snap.devs[i];
    dv->index = i;
    dv->info.valid = GPUM_INFO_NAME | GPUM_INFO_MEMORY_TOTAL;
    snprintf(dv->info.name, sizeof dv->info.name, "NVIDIA H100 80GB HBM3");
    dv->info.memory_total = 80 * GIB;
    dv->sample.valid = (1u << GPUM_METRIC_MEMORY_TOTAL) | (1u << GPUM_METRIC_MEMORY_USED) |
                       (1u << GPUM_METRIC_UTIL_GPU) | (1u << GPUM_METRIC_TEMPERATURE);
    dv->sample.memory_total = 80 * GIB;
    dv->sample.memory_used = (i ? 60 : 20) * GIB;
    dv->sample.util_gpu = i ? 95 : 10;
    dv->sample.temperature_c = 40;
    dv->state = CLI_STATE_AVAILABLE;
  }
  add_proc(&d->snap.devs[0], 300, "root", 2 * GIB, "python train.py");
  add_proc(&d->snap.devs[0], 100, "alice", 12 * GIB, "python serve.py");
  add_proc(&d->snap.devs[1], 200, "bob", 40 * GIB, "evil\033[2J\ttitle");
  /* GPU 0's driver gives per-process utilisation (alice 37 %, root idle); GPU 1's does not. */
  d->snap.devs[0].putil = calloc(1, sizeof *d->snap.devs[0].putil);
  assert_non_null(d->snap.devs[0].putil);
  d->snap.devs[0].putil[0] = (gpum_process_util_t){.pid = 100, .sm_util = 37};
  d->snap.devs[0].nputil = 1;
  d->snap.devs[1].putil_rc = GPUM_ENOTSUP;
  /* /proc: alice's process uses 12.5 % of a CPU and 1.5 GiB, and has run 1h02m05s. */
  d->procs = calloc(1, sizeof *d->procs);
  assert_non_null(d->procs);
  d->procs[0] = (top_proc_t){.pid = 100,
                             .seen = true,
                             .rss_valid = true,
                             .cpu = 12.5,
                             .rss = 3 * GIB / 2,
                             .run_ms = 3725000};
  d->nprocs = 1;
  d->snap.nreadable = 2;
  snprintf(d->socket, sizeof d->socket, "/run/gpumd.sock");
  top_history_add(d);
  if (!gpumd)
    return d;
  d->gpumd = true;
  d->reservations = json_array();
  json_t *r1 = reservation("r-1", "GRANTED", 0, "train");
  json_object_set_new(r1, "fenced", json_pack("{s:I}", "used", (json_int_t)(6 * GIB)));
  json_object_set_new(r1, "workload",
                      json_pack("[{s:s, s:i, s:{s:i, s:f, s:I}}]", "source", "infer", "pid", 812,
                                "figures", "completed", 100, "e2e_p99_us", 1250.5,
                                "allocated_bytes", (json_int_t)(5 * GIB / 2)));
  json_array_append_new(d->reservations, reservation("r-3", "QUEUED", 1, "later"));
  json_array_append_new(d->reservations, reservation("r-10", "GRANTED", 0, "serve"));
  json_array_append_new(d->reservations, r1);
  json_array_append_new(d->reservations, reservation("r-2", "QUEUED", 0, "next"));
  d->now_ns = gpum_clock_real_ns(); /* after the reservations' times */
  d->status = json_pack("{s:[{s:i, s:I, s:s}]}", "devices", "index", 0, "reserved",
                        (json_int_t)(40 * GIB), "state", "AVAILABLE");
  d->alerts =
      json_pack("{s:b, s:[{s:s}], s:[{s:s, s:s, s:i, s:s, s:I}]}", "enabled", 1, "active", "level",
                "CRITICAL", "history", "level", "CRITICAL", "state", "active", "device", 1,
                "message", "GPU 1: Xid 79: fallen off the bus", "fired_ns", (json_int_t)d->now_ns);
  assert_non_null(d->alerts);
  return d;
}

static void free_data(top_data_t *d) {
  top_data_release(d);
  free(d);
}

static size_t render(const top_data_t *d, const top_view_t *v, int w, int h, size_t *nids) {
  size_t dummy;
  return top_render(d, v, w, h, lines, MAXL, ids, 64, nids ? nids : &dummy);
}

/* The index of the first line containing s, or -1. */
static int find(size_t n, const char *s) {
  for (size_t i = 0; i < n; i++)
    if (strstr(lines[i].text, s))
      return (int)i;
  return -1;
}

static void test_fits_every_size(void **state) {
  (void)state;
  top_data_t *d = make_data(true);
  for (int utf8 = 0; utf8 < 2; utf8++) {
    top_view_t v = {.utf8 = utf8, .panel = TOP_PANEL_RESERVATIONS};
    snprintf(v.selected, sizeof v.selected, "r-3");
    snprintf(v.message, sizeof v.message, "a message that is rather long for a small screen");
    for (int w = 1; w <= 320; w += (w < 40 ? 1 : 7)) {
      for (int h = 0; h <= 60; h += (h < 20 ? 1 : 10)) {
        size_t n = render(d, &v, w, h, NULL);
        assert_true(n <= (size_t)h);
        for (size_t i = 0; i < n; i++) {
          assert_true(top_text_width(lines[i].text) <= (w > TOP_MAX_WIDTH ? TOP_MAX_WIDTH : w));
          for (const char *p = lines[i].text; !utf8 && *p; p++)
            assert_true((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7F);
          for (int k = 0; k < lines[i].nspans; k++)
            assert_true((size_t)lines[i].spans[k].off + lines[i].spans[k].len <=
                        strlen(lines[i].text));
        }
        if (h >= 2 && w >= 10) /* the keys are always on the last line */
          assert_non_null(strstr(lines[n - 1].text, "q quit"));
      }
    }
  }
  free_data(d);
}

static void test_frame_content(void **state) {
  (void)state;
  top_data_t *d = make_data(true);
  top_view_t v = {.utf8 = true};
  size_t nids = 0;
  size_t n = render(d, &v, 160, 60, &nids);
  assert_true(find(n, "node7") == 0);
  assert_true(find(n, "gpumd: running at /run/gpumd.sock: 2 granted, 2 queued, 1 active") == 1);
  int g0 = find(n, "  0 NVIDIA H100 80GB"), g1 = find(n, "  1 NVIDIA H100 80GB");
  assert_true(g0 > 0 && g1 == g0 + 1);
  assert_non_null(strstr(lines[g0].text, "20.0/80.0 GiB"));
  assert_non_null(strstr(lines[g0].text, "\u2592")); /* reserved past used: 40 of 80 GiB */
  assert_non_null(strstr(lines[g1].text, " 95%"));
  /* reservations: granted by id number, then the queue in its order */
  assert_int_equal(nids, 4);
  assert_string_equal(ids[0], "r-1");
  assert_string_equal(ids[1], "r-10");
  assert_string_equal(ids[2], "r-2");
  assert_string_equal(ids[3], "r-3");
  int r1 = find(n, "  r-1 "), r2 = find(n, "  r-2 ");
  assert_true(r1 > 0 && r2 > r1);
  assert_non_null(strstr(lines[r1].text, "root"));
  assert_non_null(strstr(lines[r1].text, "GRANTED   0,1"));
  assert_non_null(strstr(lines[r1].text, "8.00 GiB"));
  assert_non_null(strstr(lines[r1].text, "6.00 GiB")); /* used under the shim */
  assert_non_null(strstr(lines[r1].text, "1m"));       /* age since the grant */
  assert_non_null(strstr(lines[r1].text, "train"));
  /* figures in their units: _us as a time, _bytes as a size; never %g of bytes */
  assert_non_null(strstr(lines[r1 + 1].text,
                         "infer (pid 812): completed 100, e2e_p99 1.25 ms, allocated 2.50 GiB"));
  assert_non_null(strstr(lines[r2].text, "QUEUED    x2"));
  assert_non_null(strstr(lines[r2].text, "#1"));
  assert_true(find(n, "QUEUE (2 waiting)") > r2);
  assert_true(find(n, "#1 r-2 root: 2 x 8.00 GiB, waiting for 8.00 GiB free on 2 devices") > 0);
  assert_true(find(n, "#2 r-3") > find(n, "#1 r-2"));
  int a = find(n, "ALERTS (1 active");
  assert_true(a > 0);
  assert_non_null(strstr(lines[a + 1].text, "CRITICAL  GPU 1  active   GPU 1: Xid 79"));
  /* the processes: GPU %, CPU %, host memory, GPU memory, run time */
  int head = find(n, "PID USER");
  assert_true(head > 0);
  assert_non_null(
      strstr(lines[head].text, "GPU GPU%  CPU%   HOST MEM  GPU MEMORY     TIME  COMMAND"));
  int alice = find(n, "    100 alice");
  assert_true(alice > head);
  assert_non_null(strstr(lines[alice].text,
                         "  0  37%   12%   1.50 GiB   12.00 GiB    1h02m  python "
                         "serve.py"));
  int root = find(n, "    300 root");
  assert_non_null(
      strstr(lines[root].text, "  0   0%     -        n/a    2.00 GiB        -  python"));
  int bob = find(n, "    200 bob");
  assert_non_null(strstr(lines[bob].text, "  1    -     -"));
  /* a control sequence in a command line is shown as '?' */
  int bad = find(n, "evil");
  assert_true(bad > 0);
  assert_non_null(strstr(lines[bad].text, "evil?[2J?title"));
  free_data(d);
}

/* A GPU in trouble says why on a line of its own under it, whole, at the usual widths (after
 * the sparklines it was cut off); gpumd's OVERCOMMITTED shows with gpumd's reason. */
static void test_trouble_reason_is_read(void **state) {
  (void)state;
  top_data_t *d = make_data(true);
  d->snap.devs[1].state = CLI_STATE_ERROR;
  snprintf(d->snap.devs[1].reason, sizeof d->snap.devs[1].reason,
           "GPU is lost (fallen off the bus): Xid 79");
  json_decref(d->status);
  d->status = json_pack("{s:[{s:i, s:I, s:s, s:s}]}", "devices", "index", 0, "reserved",
                        (json_int_t)(40 * GIB), "state", "OVERCOMMITTED", "reason",
                        "committed 80.00 GiB is 4.25 GiB over its capacity of 75.75 GiB");
  top_view_t v = {.utf8 = true};
  for (int w = 80; w <= 200; w += 40) {
    size_t n = render(d, &v, w, 60, NULL);
    int g0 = find(n, "  0 NVIDIA H100"), g1 = find(n, "  1 NVIDIA H100");
    assert_true(g0 > 0 && g1 > g0);
    assert_non_null(strstr(lines[g0].text, "OVERCOMMITTED"));
    assert_non_null(strstr(lines[g0 + 1].text, "    committed 80.00 GiB is 4.25 GiB over"));
    assert_non_null(strstr(lines[g1].text, "ERROR"));
    assert_non_null(strstr(lines[g1 + 1].text, "    GPU is lost (fallen off the bus)"));
  }
  free_data(d);
}

static void test_without_gpumd(void **state) {
  (void)state;
  top_data_t *d = make_data(false);
  top_view_t v = {0};
  size_t nids = 5;
  size_t n = render(d, &v, 120, 40, &nids);
  assert_true(find(n, "gpumd is not running (/run/gpumd.sock)") == 1);
  assert_true(find(n, "RESERVATIONS: gpumd is not running") > 0);
  assert_int_equal(find(n, "QUEUE"), -1);
  assert_int_equal(find(n, "ALERTS"), -1);
  assert_int_equal(nids, 0);
  assert_true(find(n, "python serve.py") > 0);
  v.bottom = true; /* a screen: the keys on its last line */
  n = render(d, &v, 120, 40, &nids);
  assert_int_equal(n, 40);
  assert_non_null(strstr(lines[39].text, "q quit"));
  assert_string_equal(lines[38].text, "");
  free_data(d);
}

static void test_sort_and_filter(void **state) {
  (void)state;
  top_data_t *d = make_data(true);
  top_view_t v = {0};
  size_t n = render(d, &v, 120, 60, NULL);
  assert_true(find(n, "sort: memory") > 0);
  assert_true(find(n, "    200 bob") < find(n, "    100 alice"));
  assert_true(find(n, "    100 alice") < find(n, "    300 root"));
  v.sort = TOP_SORT_PID;
  n = render(d, &v, 120, 60, NULL);
  assert_true(find(n, "sort: pid") > 0);
  assert_true(find(n, "    100 alice") < find(n, "    200 bob"));
  assert_true(find(n, "    200 bob") < find(n, "    300 root"));
  v.sort = TOP_SORT_USER;
  n = render(d, &v, 120, 60, NULL);
  assert_true(find(n, "    100 alice") < find(n, "    200 bob"));
  assert_true(find(n, "    200 bob") < find(n, "    300 root"));
  snprintf(v.user, sizeof v.user, "alice");
  size_t nids = 9;
  n = render(d, &v, 120, 60, &nids);
  assert_true(find(n, "PROCESSES (1)") > 0);
  assert_true(find(n, "    100 alice") > 0);
  assert_int_equal(find(n, "    200 bob"), -1);
  assert_int_equal(nids, 0); /* the reservations are root's */
  assert_true(find(n, "(no reservation of this user)") > 0);
  free_data(d);
}

static void test_truncation_and_selection(void **state) {
  (void)state;
  top_data_t *d = make_data(true);
  for (unsigned i = 0; i < 50; i++)
    add_proc(&d->snap.devs[1], 1000 + i, "carol", GIB, "worker");
  for (int i = 0; i < 30; i++) {
    char id[16];
    snprintf(id, sizeof id, "r-%d", 100 + i);
    json_array_append_new(d->reservations, reservation(id, "GRANTED", 0, "many"));
  }
  top_view_t v = {.panel = TOP_PANEL_RESERVATIONS};
  snprintf(v.selected, sizeof v.selected, "r-125");
  size_t nids = 0;
  size_t n = render(d, &v, 120, 30, &nids);
  assert_int_equal(n, 30);
  assert_int_equal(nids, 34);
  assert_true(find(n, "... ") > 0);
  int procs_more = find(n, "  ... ");
  assert_true(procs_more > find(n, "PROCESSES") && procs_more < find(n, "RESERVATIONS"));
  int sel = find(n, "> r-125 ");
  assert_true(sel > find(n, "RESERVATIONS"));
  assert_true(lines[sel].selected);
  assert_non_null(strstr(lines[sel + 1].text, "... ")); /* scrolled: the selection is last */
  for (size_t i = 0; i < n; i++)
    assert_true(lines[i].selected == ((int)i == sel || strstr(lines[i].text, "RESERVATIONS") ||
                                      strstr(lines[i].text, "q quit")));
  assert_non_null(strstr(lines[n - 1].text, "q quit"));
  free_data(d);
}

/* The selected process is marked and kept in sight when the panel is cut short; the rows
 * selection moves through are those shown, in their order. */
static void test_process_selection(void **state) {
  (void)state;
  top_data_t *d = make_data(true);
  for (unsigned i = 0; i < 50; i++)
    add_proc(&d->snap.devs[1], 1000 + i, "carol", GIB, "worker");
  top_view_t v = {.panel = TOP_PANEL_PROCESSES, .sort = TOP_SORT_PID};
  top_prow_t rows[64];
  size_t nrows = top_process_rows(d, &v, rows, 64);
  assert_int_equal(nrows, 53);
  assert_int_equal(rows[0].p->pid, 100);
  assert_int_equal(rows[52].p->pid, 1049);
  assert_int_equal(rows[52].gpu, 1);
  v.proc_selected = true;
  v.sel_pid = 1040;
  v.sel_gpu = 1;
  size_t n = render(d, &v, 120, 30, NULL);
  int sel = find(n, ">    1040 carol");
  assert_true(sel > find(n, "PROCESSES"));
  assert_true(lines[sel].selected);
  assert_non_null(strstr(lines[sel + 1].text, "... ")); /* scrolled: the selection is last */
  v.panel = TOP_PANEL_RESERVATIONS; /* marked, not reversed, without the focus */
  n = render(d, &v, 120, 60, NULL);
  sel = find(n, ">    1040 carol");
  assert_false(sel >= 0 && lines[sel].selected);
  snprintf(v.user, sizeof v.user, "alice");
  assert_int_equal(top_process_rows(d, &v, rows, 64), 1);
  free_data(d);
}

/* /proc/PID/stat: the fields counted from the last ')', whatever the command's name. */
static void test_parse_stat(void **state) {
  (void)state;
  uint64_t ticks = 0, start = 0;
  assert_int_equal(top_parse_stat("812 (py) thon (x)) S 1 812 812 0 -1 4194304 100 0 0 0 "
                                  "250 50 0 0 20 0 3 0 123456 1000 20\n",
                                  &ticks, &start),
                   0);
  assert_int_equal(ticks, 300);
  assert_int_equal(start, 123456);
  assert_int_equal(top_parse_stat("812 (x) S 1 2 3", &ticks, &start), -1);
  assert_int_equal(top_parse_stat("no parenthesis", &ticks, &start), -1);
  assert_int_equal(top_parse_stat(NULL, &ticks, &start), -1);
}

/* A signal: ESRCH for a process that has ended, EPERM for another user's (not as root), and
 * none at all to a pid whose process is not the one shown (a reused pid) or to pid 0. Signal
 * 0 only: nothing is disturbed. */
static void test_signal(void **state) {
  (void)state;
  top_data_t *d = calloc(1, sizeof *d);
  assert_non_null(d);
  char msg[200];
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0)
    _exit(0);
  assert_int_equal(waitpid(child, NULL, 0), child);
  assert_int_equal(top_signal(d, (unsigned)child, 0, "0", msg, sizeof msg), ESRCH);
  assert_non_null(strstr(msg, "no such process"));
  if (geteuid() != 0) {
    assert_int_equal(top_signal(d, 1, 0, "0", msg, sizeof msg), EPERM);
    assert_non_null(strstr(msg, "is not yours"));
  }
  assert_int_equal(top_signal(d, 0, 0, "0", msg, sizeof msg), ESRCH);
  top_procs_read(d); /* nothing to read: no snapshot */
  assert_int_equal(d->nprocs, 0);
  d->procs = calloc(1, sizeof *d->procs);
  assert_non_null(d->procs);
  d->procs[0] = (top_proc_t){.pid = (unsigned)getpid(), .seen = true, .start = 1};
  d->nprocs = 1;
  assert_int_equal(top_signal(d, (unsigned)getpid(), 0, "0", msg, sizeof msg), ESRCH);
  assert_non_null(strstr(msg, "not the process shown"));
  assert_int_equal(top_signal(d, (unsigned)getppid(), 0, "0", msg, sizeof msg), 0);
  char want[64];
  snprintf(want, sizeof want, "SIG0 sent to %u", (unsigned)getppid());
  assert_string_equal(msg, want);
  top_data_release(d);
  free(d);
}

static void test_sparkline_and_ascii(void **state) {
  (void)state;
  top_data_t *d = make_data(true);
  for (int i = 0; i < 300; i++) {
    d->snap.devs[1].sample.util_gpu = (unsigned)(i % 100);
    top_history_add(d);
  }
  assert_int_equal(d->hist[1].n, TOP_HISTORY);
  top_view_t v = {.utf8 = true};
  size_t n = render(d, &v, 200, 40, NULL);
  int g1 = find(n, "  1 NVIDIA");
  assert_non_null(strstr(lines[g1].text, "\u2588")); /* the peaks */
  assert_non_null(strstr(lines[g1].text, "MEM["));
  v.utf8 = false;
  n = render(d, &v, 200, 40, NULL);
  g1 = find(n, "  1 NVIDIA");
  assert_non_null(strstr(lines[g1].text, "MEM[#########"));
  assert_non_null(strstr(lines[g1].text, "UTIL[###"));
  free_data(d);
}

static void test_print(void **state) {
  (void)state;
  top_data_t *d = make_data(true);
  top_view_t v = {0};
  size_t n = render(d, &v, 120, 40, NULL);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  for (size_t i = 0; i < n; i++)
    top_line_print(f, &lines[i], false);
  fclose(f);
  assert_null(strchr(buf, '\033'));
  assert_non_null(strstr(buf, "gpum top  node7"));
  free(buf);
  f = open_memstream(&buf, &len);
  assert_non_null(f);
  for (size_t i = 0; i < n; i++)
    top_line_print(f, &lines[i], true);
  fclose(f);
  assert_non_null(strstr(buf, "\033[1mgpum top"));
  assert_non_null(strstr(buf, "\033[7m")); /* the keys' bar, reversed */
  free(buf);
  free_data(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fits_every_size),
      cmocka_unit_test(test_frame_content),
      cmocka_unit_test(test_trouble_reason_is_read),
      cmocka_unit_test(test_without_gpumd),
      cmocka_unit_test(test_sort_and_filter),
      cmocka_unit_test(test_truncation_and_selection),
      cmocka_unit_test(test_process_selection),
      cmocka_unit_test(test_parse_stat),
      cmocka_unit_test(test_signal),
      cmocka_unit_test(test_sparkline_and_ascii),
      cmocka_unit_test(test_print),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
