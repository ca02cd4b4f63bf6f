/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum top`: a frame of the node (top_frame.c: the devices through the device layer, and
 * gpumd's reservations, queue and alerts when it runs) rendered into lines of text with a style
 * each, which cmd_top.c draws with ncurses (the live screen) or prints (--once). Nothing here
 * knows about ncurses, so the tests render frames without a terminal.
 *
 * Text: every line is at most the frame's width in display columns. Strings that come from
 * outside (commands, labels, user names, alert messages) are cleaned to printable ASCII; the
 * only multi-byte characters are the bar and sparkline glyphs, drawn only when utf8 is set,
 * each one column wide.
 */
#ifndef GPUM_CLI_TOP_H
#define GPUM_CLI_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <gpum/client.h>

#include "output.h"
#include "status.h"

#define TOP_HISTORY 240    /* samples kept per device for the sparklines */
#define TOP_MAX_DEVICES 64 /* devices with a history; more are shown without a sparkline */
#define TOP_MAX_WIDTH 300  /* columns; a wider screen is drawn 300 wide */
#define TOP_LINE 1280      /* bytes of a line: TOP_MAX_WIDTH columns of 3-byte glyphs, and more */
#define TOP_SPANS 10       /* styled stretches in a line */
#define TOP_ID_LEN 32

typedef enum { TOP_PANEL_PROCESSES, TOP_PANEL_RESERVATIONS, TOP_PANEL_COUNT } top_panel_t;
typedef enum { TOP_SORT_MEMORY, TOP_SORT_PID, TOP_SORT_USER, TOP_SORT_COUNT } top_sort_t;

/* What the screen shows beside the data: the focused panel, the order of the processes, the
 * user filter ("" none), the selected reservation (its id; "" none), the selected process row
 * (its pid and GPU, when proc_selected), a status line (the last action's result or a prompt;
 * "" none) and whether the help replaces the panels. */
typedef struct {
  top_panel_t panel;
  top_sort_t sort;
  char user[64];
  char selected[TOP_ID_LEN];
  bool proc_selected;
  unsigned sel_pid, sel_gpu;
  char message[200];
  bool message_error; /* the message is shown in red */
  bool help;
  bool utf8;   /* block glyphs for bars and sparklines; else ASCII */
  bool bottom; /* the message and the keys on the last lines of the height (a screen) */
} top_view_t;

typedef struct {
  float mem[TOP_HISTORY], util[TOP_HISTORY]; /* 0..1, or < 0 when not read; newest at next - 1 */
  size_t n, next;
} top_history_t;

/* What top reads of a process from /proc at each refresh (top_proc.c), besides what the
 * driver says of it. */
typedef struct {
  unsigned pid;
  bool seen;       /* /proc/PID/stat was read (not: another PID namespace, or gone) */
  bool rss_valid;  /* rss was read */
  uint64_t start;  /* start time, clock ticks after boot: tells a reused pid apart */
  uint64_t ticks;  /* user + system CPU time, clock ticks */
  double cpu;      /* % of one CPU since the last refresh; < 0: not known (yet) */
  uint64_t rss;    /* resident host memory, bytes */
  uint64_t run_ms; /* since it started */
} top_proc_t;

/* A process's CPU time at the last refresh: the start of the next CPU %. */
typedef struct {
  unsigned pid;
  uint64_t start, ticks, at_ns;
} top_cpu_t;

/* A uid's name, looked up once. */
typedef struct {
  int64_t uid;
  char name[64];
} top_uid_t;

/* One frame's data. */
typedef struct {
  cli_snapshot_t snap;
  bool have_snap;
  char snap_error[256]; /* why there is no snapshot (when !have_snap) */
  bool gpumd;           /* gpumd answered */
  char socket[256];     /* where gpumd was asked */
  json_t *status;       /* gpumd's "status" reply (devices, queue), or NULL */
  json_t *reservations; /* gpumd's "list" {"all":true} reply's array, or NULL without gpumd */
  json_t *alerts;       /* gpumd's "alerts" reply ({active, history}), or NULL */
  top_history_t hist[TOP_MAX_DEVICES];
  uint64_t now_ns;   /* wall clock of the frame, for ages */
  top_proc_t *procs; /* the snapshot's processes from /proc, each pid once, by pid */
  size_t nprocs;
  /* Kept across refreshes (like hist): the CPU times of the last one, and the uids' names. */
  top_cpu_t *cpu;
  size_t ncpu;
  top_uid_t *uids;
  size_t nuids, cap_uids;
} top_data_t;

/* A row of the processes panel: a process on one GPU (a process on two GPUs has two). */
typedef struct {
  const gpum_process_t *p; /* points into the frame's snapshot */
  unsigned gpu;
} top_prow_t;

typedef struct {
  uint16_t off, len; /* bytes of text */
  cli_style_t style;
} top_span_t;

typedef struct {
  char text[TOP_LINE];
  cli_style_t style; /* of the whole line, under its spans */
  bool selected;     /* drawn reversed */
  top_span_t spans[TOP_SPANS];
  int nspans;
} top_line_t;

/* Where the frames' data comes from (top_data.c): a device session with its readers (kept
 * across refreshes, reopened when no device could be read) and gpumd's socket. */
typedef struct {
  const gpum_config_t *cfg;
  gpum_device_session_t *session;
  cli_readers_t *readers;
  gpum_backend_kind_t pinned; /* the backend that worked first: kept when the GPUs go away */
  gpum_busy_thresholds_t busy;
  unsigned timeout_ms; /* status.timeout: how long a device may take to answer */
  unsigned sel[TOP_MAX_DEVICES];
  size_t nsel;
  bool all;              /* every device (no `devices` option) */
  char socket[256];      /* gpumd's; "" when it cannot be resolved */
  bool live;             /* the live screen: keep the connection to gpumd and watch its events */
  gpum_client_t *client; /* that connection, or NULL (not yet, or gpumd went away) */
  bool watching;         /* gpumd took the watch: its events come on the client's fd */
  bool changed;          /* an event came since gpumd was last read: read it again */
} top_source_t;

/* Sets src up from cfg (the devices option, status.timeout, the busy thresholds, the socket).
 * Returns 0, or GPUM_EINVAL with the reason in gpum_last_error() (a bad devices list). */
int top_source_init(top_source_t *src, const gpum_config_t *cfg);
void top_source_close(top_source_t *src);

/* Replaces d's data with a fresh read: the snapshot (or the reason there is none in
 * d->snap_error), a point of history, and gpumd's status, reservations and last alerts (d->gpumd
 * false when gpumd does not answer within a short timeout). */
void top_fetch(top_source_t *src, top_data_t *d);

/* Replaces only gpumd's part of d with a fresh read (the devices and the history stay): after
 * gpumd's events. */
void top_fetch_gpumd(top_source_t *src, top_data_t *d);

/* The fd to poll for gpumd's events: the live screen's connection when it watches them, else
 * -1. */
int top_gpumd_fd(const top_source_t *src);

/* Takes the events that have arrived on the connection (src->changed set by any); a connection
 * that gpumd closed is dropped, src->changed set so that the screen says so. Never waits. */
void top_gpumd_events(top_source_t *src);

/* Releases reservation id at gpumd: 0 with what it became in msg ("r-7 RELEASED"), else the
 * error code with the reason in msg. */
int top_release(const top_source_t *src, const char *id, char *msg, size_t len);

/* Renders d for a screen width x height into lines[0..max); returns the count (<= height and
 * <= max). The ids of the reservation rows that selection moves through (every row the filter
 * keeps, in the order shown, shown or not) go to ids[0..cap_ids), their count to *nids. A
 * selected reservation lower than the panel's height scrolls the panel so it shows. */
size_t top_render(const top_data_t *d, const top_view_t *v, int width, int height,
                  top_line_t *lines, size_t max, char (*ids)[TOP_ID_LEN], size_t cap_ids,
                  size_t *nids);

/* The processes panel's rows for d and v (the user filter, the sort), in the order shown:
 * up to cap into rows; returns how many there are. */
size_t top_process_rows(const top_data_t *d, const top_view_t *v, top_prow_t *rows, size_t cap);

/* ---- processes from /proc (top_proc.c) ---- */

/* Reads /proc for every process of d's snapshot into d->procs; the CPU % from the times kept
 * from the last call (d->cpu, then replaced by this call's). */
void top_procs_read(top_data_t *d);
/* d's /proc figures of pid, or NULL. */
const top_proc_t *top_proc_find(const top_data_t *d, unsigned pid);
/* The name of uid: from d's cache, else looked up (getpwuid_r) and kept; the number when the
 * uid has no name; NULL only when memory runs out. */
const char *top_uid_name(top_data_t *d, int64_t uid);
/* The name of uid from d's cache only, or NULL (the frame's side: it never looks up). */
const char *top_uid_lookup(const top_data_t *d, int64_t uid);
/* Sums utime and stime (fields 14, 15) and reads starttime (22) of a /proc/PID/stat text.
 * Returns 0, or -1 for a text that is not one. */
int top_parse_stat(const char *text, uint64_t *ticks, uint64_t *start);
/* Sends sig (its name without SIG: "TERM") to pid, unless pid is no more the process d shows
 * (a reused pid: its start time differs). Returns 0 with "SIGTERM sent to 812" in msg, or the
 * errno (EPERM: not the user's; ESRCH: gone) with the reason in msg. Never signals pid 0 or
 * a process group. */
int top_signal(const top_data_t *d, unsigned pid, int sig, const char *name, char *msg, size_t len);

/* Adds the snapshot's figures to the histories (one point per device per call). */
void top_history_add(top_data_t *d);

/* Frees what d holds (snapshot, gpumd documents, /proc figures), keeping the histories, the
 * CPU times and the names of uids. */
void top_data_clear(top_data_t *d);
/* Frees everything d holds (not d itself). */
void top_data_release(top_data_t *d);

/* The sort's name as shown ("memory", "pid", "user"). */
const char *top_sort_name(top_sort_t s);

/* Display columns of a line's text (UTF-8 continuation bytes take none). */
int top_text_width(const char *s);

/* Writes line l to f, in colour with ANSI escapes when color is set (a selected line reversed),
 * else as plain text; then a newline. */
void top_line_print(FILE *f, const top_line_t *l, bool color);

#endif /* GPUM_CLI_TOP_H */
