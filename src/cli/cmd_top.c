/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum top`: the node live on an ncurses screen (top_frame.c lays the frame out, top_data.c
 * reads it), or one frame on stdout with --once. The screen is redrawn at every refresh
 * (--interval), at once after a key, and within COALESCE_MS of an event of gpumd's (the screen
 * watches them on its connection: a reservation, an alert, a health change, an Xid), when it
 * reads gpumd again; the keys sort, filter, switch panels, select and release a reservation,
 * and select and signal a process (asking which signal, then for a y). The terminal is restored
 * on every way out: q, SIGINT/SIGTERM/SIGHUP, and an error after the screen was set up
 * (atexit).
 *
 * Exit codes: 0 (q or a stop signal; --once: a frame with at least one readable device), 1
 * (not a terminal, the screen cannot be set up; --once: no device could be read), 2 usage.
 */
#include <curses.h>
#include <langinfo.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gpum/error.h>

#include "args.h"
#include "cli.h"
#include "client_cli.h"
#include "top.h"

#define MAX_IDS 1024
#define ONCE_HEIGHT 4096  /* --once without $LINES: every line */
#define COALESCE_MS 100   /* gpumd is read at most this often after its events */
#define RECONNECT_MS 1000 /* how often to try gpumd again while it does not answer */
#define MAX_WAIT_MS 1000  /* the longest wait for input without looking at the clocks */

typedef struct {
  bool once, no_color;
  unsigned long interval_ms;
  top_view_t view;
} top_opts_t;

enum { OPT_ONCE = 1, OPT_INTERVAL, OPT_NO_COLOR, OPT_USER, OPT_SORT };

static const cli_arg_t top_args[] = {
    {OPT_ONCE, "--once", 0, NULL,
     "print one frame to stdout and exit (width: $COLUMNS, else 120; height: $LINES, else "
     "every line)",
     0},
    {OPT_INTERVAL, "--interval", 0, "SECONDS",
     "read the devices every SECONDS (default 1; also 500ms, 2s)", 0},
    {OPT_NO_COLOR, "--no-color", 0, NULL, "no colours (also NO_COLOR=1 or --color never)", 0},
    {OPT_USER, "--user", 0, "NAME", "only the processes and reservations of user NAME", 0},
    {OPT_SORT, "--sort", 0, "KEY", "order of the processes: memory (default), pid or user", 0},
    {0},
};

static const cli_cmd_spec_t top_spec = {
    .name = "top",
    .usage = "[--once] [--interval SECONDS] [--no-color] [--user NAME] [--sort memory|pid|user]",
    .summary = "Show the node live: GPUs, processes, reservations, queue and alerts.",
    .text = "In the manner of nvtop: a line per GPU with its state, temperature, a memory bar\n"
            "(used, and what gpumd reserved on top of it), a utilisation bar and sparklines of\n"
            "both over the last 240 refreshes; below, the processes on the GPUs, gpumd's\n"
            "reservations (with the workload figures their jobs report), its queue and its last\n"
            "alerts. Without gpumd, the devices and processes come from the device layer and a\n"
            "line says gpumd is not running. gpumd's reservations and alerts are redrawn as\n"
            "gpumd reports changes (its events).\n"
            "\n"
            "keys: q quit, tab switch panel, s sort processes (memory, pid, user), u filter by\n"
            "user, up/down select a process or a reservation, K signal the process (TERM,\n"
            "KILL or INT; asks; your own only), r release the reservation (asks; owner or\n"
            "admin only), ? help. The screen follows the terminal's size.",
    .args = top_args,
    .examples = "gpum top\n"
                "gpum top --user alice --sort pid\n"
                "COLUMNS=120 gpum top --once > frame.txt",
    .exit_status = "0; 1 when the screen cannot be set up (not a terminal: use --once) or, with "
                   "--once, no device could be read; 2 for usage errors.",
};

static int parse_flags(int argc, char **argv, top_opts_t *o) {
  o->interval_ms = 1000;
  cli_args_t p;
  cli_args_init(&p, &top_spec, argc, argv);
  for (int id; (id = cli_args_next(&p)) != CLI_ARGS_END;) {
    const char *v = p.value;
    int k = 0;
    switch (id) {
    case CLI_ARGS_HELP:
      return CLI_EXIT_OK;
    case CLI_ARGS_ERR:
      return CLI_EXIT_USAGE;
    case CLI_ARGS_POS:
      return cli_args_error(&top_spec, "unexpected argument '%s'", v);
    case OPT_ONCE:
      o->once = true;
      break;
    case OPT_NO_COLOR:
      o->no_color = true;
      break;
    case OPT_INTERVAL:
      if (cli_parse_interval(v, &o->interval_ms) != 0)
        return cli_args_error(&top_spec, "--interval: %s", gpum_last_error());
      break;
    case OPT_USER:
      if (!*v || strlen(v) >= sizeof o->view.user)
        return cli_args_error(&top_spec, "--user needs a user name (at most %zu characters)",
                              sizeof o->view.user - 1);
      snprintf(o->view.user, sizeof o->view.user, "%s", v);
      break;
    case OPT_SORT:
      while (k < TOP_SORT_COUNT && strcmp(v, top_sort_name((top_sort_t)k)))
        k++;
      if (k == TOP_SORT_COUNT)
        return cli_args_error(&top_spec, "--sort: expected memory, pid or user, not '%s'", v);
      o->view.sort = (top_sort_t)k;
      break;
    }
  }
  return -1;
}

/* A positive number from the environment (COLUMNS, LINES), else def. */
static int env_size(const char *name, int def) {
  const char *s = getenv(name);
  char *end = NULL;
  long v = s ? strtol(s, &end, 10) : 0;
  return s && *s && *end == '\0' && v > 0 && v <= 100000 ? (int)v : def;
}

static bool utf8_locale(void) {
  setlocale(LC_ALL, "");
  const char *cs = nl_langinfo(CODESET);
  return cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
}

static int run_once(const gpum_config_t *cfg, top_opts_t *o, top_source_t *src) {
  top_data_t *d = calloc(1, sizeof *d);
  int height = env_size("LINES", ONCE_HEIGHT);
  top_line_t *lines = calloc((size_t)height, sizeof *lines);
  if (!d || !lines) {
    free(d);
    free(lines);
    fprintf(stderr, "gpum top: out of memory\n");
    return CLI_EXIT_FAIL;
  }
  o->view.utf8 = utf8_locale();
  top_fetch(src, d);
  bool color = !o->no_color && cli_use_color(cfg, stdout);
  size_t n = top_render(d, &o->view, env_size("COLUMNS", 120), height, lines, (size_t)height, NULL,
                        0, NULL);
  for (size_t i = 0; i < n; i++)
    top_line_print(stdout, &lines[i], color);
  fflush(stdout);
  int code = d->have_snap && d->snap.nreadable > 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  if (code != CLI_EXIT_OK)
    fprintf(stderr, "gpum top: no device could be read%s%s\n", d->snap_error[0] ? ": " : "",
            d->snap_error);
  top_data_release(d);
  free(d);
  free(lines);
  return code;
}

/* ---- the live screen ---- */

static volatile sig_atomic_t stop_signal;
static SCREEN *screen; /* set while the screen is up */

static void on_stop(int sig) {
  stop_signal = sig;
}

static void restore_terminal(void) {
  if (screen) {
    endwin();
    delscreen(screen);
    screen = NULL;
  }
}

typedef struct {
  top_opts_t *o;
  top_source_t *src;
  top_data_t *d;
  bool color;
  char ids[MAX_IDS][TOP_ID_LEN];
  size_t nids;
} screen_t;

enum { PAIR_RED = 1, PAIR_GREEN, PAIR_YELLOW, PAIR_BLUE, PAIR_MAGENTA, PAIR_CYAN };

static attr_t style_attr(const screen_t *s, cli_style_t st) {
  switch (st) {
  case CLI_BOLD:
    return A_BOLD;
  case CLI_DIM:
    return A_DIM;
  case CLI_BOLD_RED:
    return A_BOLD | (s->color ? COLOR_PAIR(PAIR_RED) : 0);
  case CLI_RED:
    return s->color ? COLOR_PAIR(PAIR_RED) : A_NORMAL;
  case CLI_GREEN:
    return s->color ? COLOR_PAIR(PAIR_GREEN) : A_NORMAL;
  case CLI_YELLOW:
    return s->color ? COLOR_PAIR(PAIR_YELLOW) : A_NORMAL;
  case CLI_BLUE:
    return s->color ? COLOR_PAIR(PAIR_BLUE) : A_NORMAL;
  case CLI_MAGENTA:
    return s->color ? COLOR_PAIR(PAIR_MAGENTA) : A_NORMAL;
  case CLI_CYAN:
    return s->color ? COLOR_PAIR(PAIR_CYAN) : A_NORMAL;
  default:
    return A_NORMAL;
  }
}

static void draw_piece(const screen_t *s, const char *text, size_t len, cli_style_t st,
                       bool selected) {
  if (len == 0)
    return;
  attrset(style_attr(s, st) | (selected ? A_REVERSE : A_NORMAL));
  addnstr(text, (int)len);
}

static void draw_line(const screen_t *s, int y, const top_line_t *l) {
  size_t pos = 0, len = strlen(l->text);
  move(y, 0);
  for (int i = 0; i < l->nspans; i++) {
    const top_span_t *sp = &l->spans[i];
    if (sp->off > pos)
      draw_piece(s, l->text + pos, sp->off - pos, l->style, l->selected);
    draw_piece(s, l->text + sp->off, sp->len, sp->style, l->selected);
    pos = (size_t)sp->off + sp->len;
  }
  if (pos < len)
    draw_piece(s, l->text + pos, len - pos, l->style, l->selected);
  int cols = top_text_width(l->text);
  if (l->selected && cols < COLS) { /* the reversed bar spans the screen */
    attrset(A_REVERSE);
    hline(' ', COLS - cols);
  }
  attrset(A_NORMAL);
}

/* The processes panel's rows as shown (caller frees); *n of them. */
static top_prow_t *process_rows(const screen_t *s, size_t *n) {
  size_t total = 0;
  for (size_t i = 0; s->d->have_snap && i < s->d->snap.ndevs; i++)
    total += s->d->snap.devs[i].nprocs;
  top_prow_t *rows = total ? calloc(total, sizeof *rows) : NULL;
  *n = rows ? top_process_rows(s->d, &s->o->view, rows, total) : 0;
  return rows;
}

/* Keeps the process selection on a row that is still listed: else the first row while the
 * processes panel has the focus, none otherwise. */
static void keep_process_selection(screen_t *s) {
  top_view_t *v = &s->o->view;
  size_t n = 0, at = 0;
  top_prow_t *rows = process_rows(s, &n);
  while (v->proc_selected && at < n &&
         (rows[at].p->pid != v->sel_pid || rows[at].gpu != v->sel_gpu))
    at++;
  if (!v->proc_selected || at == n) {
    v->proc_selected = n > 0 && v->panel == TOP_PANEL_PROCESSES;
    if (v->proc_selected) {
      v->sel_pid = rows[0].p->pid;
      v->sel_gpu = rows[0].gpu;
    }
  }
  free(rows);
}

static bool have_id(const screen_t *s, const char *id) {
  for (size_t i = 0; i < s->nids; i++)
    if (!strcmp(s->ids[i], id))
      return true;
  return false;
}

/* Renders and draws a frame; keeps the selection on a reservation that is still listed (else
 * the first one while the reservations panel has the focus). */
static void draw(screen_t *s) {
  int height = LINES > 0 ? LINES : 1;
  top_line_t *lines = calloc((size_t)height, sizeof *lines);
  if (lines == NULL)
    return;
  top_view_t *v = &s->o->view;
  keep_process_selection(s);
  size_t n = top_render(s->d, v, COLS, height, lines, (size_t)height, s->ids, MAX_IDS, &s->nids);
  bool stale = v->selected[0] && !have_id(s, v->selected);
  bool want = !v->selected[0] && v->panel == TOP_PANEL_RESERVATIONS && s->nids > 0;
  if (stale || want) {
    snprintf(v->selected, sizeof v->selected, "%s", s->nids ? s->ids[0] : "");
    n = top_render(s->d, v, COLS, height, lines, (size_t)height, s->ids, MAX_IDS, &s->nids);
  }
  erase();
  for (size_t i = 0; i < n; i++)
    draw_line(s, (int)i, &lines[i]);
  refresh();
  free(lines);
}

/* Waits for one key (no timeout): for the answers to prompts. */
static int wait_key(void) {
  timeout(-1);
  int ch;
  do
    ch = getch();
  while (ch == ERR && !stop_signal);
  return ch;
}

static void prompt_user(screen_t *s) {
  top_view_t *v = &s->o->view;
  char buf[sizeof v->user] = "";
  const char *ask = "user (empty: everyone): ";
  attrset(A_BOLD);
  mvhline(LINES - 1, 0, ' ', COLS);
  mvaddstr(LINES - 1, 0, ask);
  attrset(A_NORMAL);
  echo();
  curs_set(1);
  timeout(-1);
  if (mvgetnstr(LINES - 1, (int)strlen(ask), buf, (int)sizeof buf - 1) == ERR)
    buf[0] = '\0';
  noecho();
  curs_set(0);
  char clean[sizeof buf];
  size_t k = 0;
  for (const char *p = buf; *p && k + 1 < sizeof clean; p++)
    if (*p != ' ' && *p != '\t')
      clean[k++] = *p;
  clean[k] = '\0';
  snprintf(v->user, sizeof v->user, "%s", clean);
  snprintf(v->message, sizeof v->message, "%s", clean[0] ? "" : "showing every user");
  v->message_error = false;
}

/* r: asks, then releases the selected reservation. Returns whether the data changed. */
static bool release_selected(screen_t *s) {
  top_view_t *v = &s->o->view;
  v->message_error = false;
  if (v->panel != TOP_PANEL_RESERVATIONS || !v->selected[0]) {
    snprintf(v->message, sizeof v->message,
             "select a reservation first: tab to the reservations panel, then up/down");
    return false;
  }
  char id[TOP_ID_LEN];
  snprintf(id, sizeof id, "%s", v->selected);
  snprintf(v->message, sizeof v->message, "release %s? y/n", id);
  draw(s);
  int ch = wait_key();
  if (ch != 'y' && ch != 'Y') {
    snprintf(v->message, sizeof v->message, "%s kept", id);
    return false;
  }
  v->message_error = top_release(s->src, id, v->message, sizeof v->message) != 0;
  return true;
}

/* The signals the prompt offers: a key each, TERM first (Enter too). */
static const struct {
  int key, sig;
  const char *name;
} signals[] = {{'t', SIGTERM, "TERM"}, {'k', SIGKILL, "KILL"}, {'i', SIGINT, "INT"}};

/* K (F9): asks which signal, then whether to send it, to the selected process; sends it only
 * on y. Returns whether the data should be read again (a signal was sent). */
static bool signal_selected(screen_t *s) {
  top_view_t *v = &s->o->view;
  v->message_error = false;
  keep_process_selection(s);
  if (v->panel != TOP_PANEL_PROCESSES || !v->proc_selected) {
    snprintf(v->message, sizeof v->message,
             "select a process first: tab to the processes panel, then up/down");
    return false;
  }
  unsigned pid = v->sel_pid;
  char cmd[64] = "?";
  size_t n = 0;
  top_prow_t *rows = process_rows(s, &n);
  for (size_t i = 0; i < n; i++)
    if (rows[i].p->pid == pid && rows[i].p->command[0])
      snprintf(cmd, sizeof cmd, "%.63s", rows[i].p->command);
  free(rows);
  snprintf(v->message, sizeof v->message,
           "signal %u (%s): t or Enter TERM, k KILL, i INT; any other key: none", pid, cmd);
  draw(s);
  int ch = wait_key(), k = -1;
  if (ch == '\n' || ch == '\r' || ch == KEY_ENTER)
    k = 0;
  for (int i = 0; k < 0 && i < (int)(sizeof signals / sizeof signals[0]); i++)
    if (ch == signals[i].key || ch == signals[i].key - 'a' + 'A')
      k = i;
  if (k < 0) {
    snprintf(v->message, sizeof v->message, "no signal sent to %u", pid);
    return false;
  }
  snprintf(v->message, sizeof v->message, "send SIG%s to %u (%s)? y/n", signals[k].name, pid, cmd);
  draw(s);
  ch = wait_key();
  if (ch != 'y' && ch != 'Y') {
    snprintf(v->message, sizeof v->message, "no signal sent to %u", pid);
    return false;
  }
  int rc = top_signal(s->d, pid, signals[k].sig, signals[k].name, v->message, sizeof v->message);
  v->message_error = rc != 0;
  return rc == 0;
}

static void move_selection(screen_t *s, int delta) {
  top_view_t *v = &s->o->view;
  if (v->panel == TOP_PANEL_PROCESSES) {
    size_t n = 0, at = 0;
    top_prow_t *rows = process_rows(s, &n);
    while (v->proc_selected && at < n &&
           (rows[at].p->pid != v->sel_pid || rows[at].gpu != v->sel_gpu))
      at++;
    if (at == n)
      at = 0;
    else if (delta < 0 && at > 0)
      at--;
    else if (delta > 0 && at + 1 < n)
      at++;
    if (n > 0) {
      v->proc_selected = true;
      v->sel_pid = rows[at].p->pid;
      v->sel_gpu = rows[at].gpu;
    }
    free(rows);
    return;
  }
  if (s->nids == 0)
    return;
  size_t at = 0;
  while (at < s->nids && strcmp(s->ids[at], v->selected))
    at++;
  if (at == s->nids)
    at = 0;
  else if (delta < 0 && at > 0)
    at--;
  else if (delta > 0 && at + 1 < s->nids)
    at++;
  snprintf(v->selected, sizeof v->selected, "%s", s->ids[at]);
}

/* Handles a key. Returns 1 to quit, 2 when the data should be read again, else 0. */
static int on_key(screen_t *s, int ch) {
  top_view_t *v = &s->o->view;
  if (v->help && ch != KEY_RESIZE) {
    v->help = false;
    return 0;
  }
  switch (ch) {
  case 'q':
  case 'Q':
    return 1;
  case '\t':
    v->panel = (top_panel_t)((v->panel + 1) % TOP_PANEL_COUNT);
    v->message[0] = '\0';
    return 0;
  case 's':
  case 'S':
    v->sort = (top_sort_t)((v->sort + 1) % TOP_SORT_COUNT);
    return 0;
  case 'u':
  case 'U':
    prompt_user(s);
    return 0;
  case KEY_UP:
  case 'k':
    move_selection(s, -1);
    return 0;
  case KEY_DOWN:
  case 'j':
    move_selection(s, 1);
    return 0;
  case 'r':
  case 'R':
    return release_selected(s) ? 2 : 0;
  case 'K':
  case KEY_F(9):
    return signal_selected(s) ? 2 : 0;
  case '?':
  case 'h':
    v->help = true;
    return 0;
  default: /* KEY_RESIZE and others: a redraw at the new size */
    return 0;
  }
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The earliest of the due times (-1: none), but at most MAX_WAIT_MS from now: a stop signal or a
 * resize that lands just before poll starts is then seen soon all the same. */
static long long next_due(long long dev_due, long long gpumd_due) {
  long long due = now_ms() + MAX_WAIT_MS;
  if (dev_due < due)
    due = dev_due;
  if (gpumd_due >= 0 && gpumd_due < due)
    due = gpumd_due;
  return due;
}

/* Waits until due (monotonic ms) for a key, a resize, a signal or an event from gpumd (taken
 * into src: src->changed). Returns the first key (KEY_RESIZE after a resize) with getch set not
 * to wait, or ERR when none came. */
static int wait_input(top_source_t *src, long long due) {
  struct pollfd p[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
                        {.fd = top_gpumd_fd(src), .events = POLLIN}};
  long long left = due - now_ms();
  int n = poll(p, p[1].fd >= 0 ? 2 : 1, left < 0 ? 0 : (int)left);
  if (n > 0 && p[1].fd >= 0 && p[1].revents)
    top_gpumd_events(src);
  timeout(0);
  /* Also when poll saw nothing on stdin: ncurses may hold keys it has read, or a resize. */
  return getch();
}

static void setup_colors(screen_t *s) {
  if (!s->color || !has_colors() || start_color() == ERR) {
    s->color = false;
    return;
  }
  use_default_colors();
  init_pair(PAIR_RED, COLOR_RED, -1);
  init_pair(PAIR_GREEN, COLOR_GREEN, -1);
  init_pair(PAIR_YELLOW, COLOR_YELLOW, -1);
  init_pair(PAIR_BLUE, COLOR_BLUE, -1);
  init_pair(PAIR_MAGENTA, COLOR_MAGENTA, -1);
  init_pair(PAIR_CYAN, COLOR_CYAN, -1);
}

static int run_screen(const gpum_config_t *cfg, top_opts_t *o, top_source_t *src) {
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
    fprintf(stderr, "gpum top: not a terminal (use --once to print one frame)\n");
    return CLI_EXIT_FAIL;
  }
  screen_t *s = calloc(1, sizeof *s);
  top_data_t *d = calloc(1, sizeof *d);
  if (!s || !d) {
    free(s);
    free(d);
    fprintf(stderr, "gpum top: out of memory\n");
    return CLI_EXIT_FAIL;
  }
  s->o = o;
  s->src = src;
  s->d = d;
  s->color = !o->no_color && cli_use_color(cfg, stdout);
  o->view.utf8 = utf8_locale();
  o->view.bottom = true;
  /* Ours before ncurses': it only installs its own where the handler is the default. */
  cli_on_stop_signals(on_stop, true);
  atexit(restore_terminal);
  screen = newterm(NULL, stdout, stdin);
  if (screen == NULL) {
    fprintf(stderr, "gpum top: cannot set up the terminal (TERM=%s)\n",
            getenv("TERM") ? getenv("TERM") : "");
    free(s);
    free(d);
    return CLI_EXIT_FAIL;
  }
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  curs_set(0);
  setup_colors(s);

  /* Three clocks: the devices are read every interval (with gpumd); gpumd alone again soon
   * after one of its events (at most once per COALESCE_MS: a burst of events is one read), or
   * every RECONNECT_MS while it does not answer, to see it come back. */
  long long dev_due = 0, gpumd_due = -1, gpumd_read = 0;
  bool redraw = true;
  while (!stop_signal) {
    long long now = now_ms();
    if (now >= dev_due) {
      top_fetch(src, d);
      gpumd_read = now_ms();
      dev_due = gpumd_read + (long long)o->interval_ms;
      gpumd_due = -1;
      redraw = true;
    } else if (gpumd_due >= 0 && now >= gpumd_due) {
      top_fetch_gpumd(src, d);
      gpumd_read = now_ms();
      gpumd_due = -1;
      redraw = true;
    }
    if (gpumd_due < 0 && src->changed)
      gpumd_due = gpumd_read + COALESCE_MS;
    else if (gpumd_due < 0 && !src->client)
      gpumd_due = gpumd_read + RECONNECT_MS;
    if (redraw)
      draw(s);
    redraw = false;
    int ch = wait_input(src, next_due(dev_due, gpumd_due));
    while (!stop_signal && ch != ERR) {
      int r = on_key(s, ch);
      if (r == 1)
        goto out;
      if (r == 2)
        dev_due = 0;
      redraw = true;
      timeout(0);   /* (a prompt of on_key's waits for its answer) */
      ch = getch(); /* the rest of what was typed, without waiting */
    }
  }
out:
  restore_terminal();
  top_data_release(d);
  free(d);
  free(s);
  return CLI_EXIT_OK;
}

int cmd_top(gpum_config_t *cfg, int argc, char **argv) {
  top_opts_t o;
  memset(&o, 0, sizeof o);
  int code = parse_flags(argc, argv, &o);
  if (code >= 0)
    return code;
  top_source_t src;
  if (top_source_init(&src, cfg) != 0) {
    fprintf(stderr, "gpum top: --devices: %s\n", gpum_last_error());
    return CLI_EXIT_USAGE;
  }
  src.live = !o.once;
  code = o.once ? run_once(cfg, &o, &src) : run_screen(cfg, &o, &src);
  top_source_close(&src);
  return code;
}
