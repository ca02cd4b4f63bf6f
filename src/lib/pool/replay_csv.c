/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading RMM CSV allocation logs (include/gpum/pool_replay.h) into a replayable operation list.
 *
 * Three passes over memory, one over the file: rows are parsed one line at a time from a fixed
 * buffer (lines longer than LINE_MAX_BYTES are rejected, so a file without newlines cannot make
 * us allocate its size) into a compact event array; the events are put in replay order (each
 * thread's rows in order, threads merged by Time then row, with a heap over the threads); and
 * every allocation gets a slot while a pointer map resolves each free to the slot of the
 * allocation it ends. Only the operation list (24 bytes an event) is kept.
 *
 * Malformed input is an error naming the file, the line, the column and the bad value; nothing
 * here asserts on input.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gpum/error.h>
#include <gpum/pool_replay.h>

#include "pool/replay_internal.h"
#include "pool/replay_map_internal.h"

#define LINE_MAX_BYTES 4096
#define NONE UINT32_MAX
#define ZERO_SLOT (UINT32_MAX - 1) /* a live 0-byte allocation: its free is dropped */
#define HALF_DAY (12u * 3600u)

enum { ACT_ALLOC, ACT_FREE, ACT_FAIL };

/* One parsed row (48 bytes). */
typedef struct {
  uint64_t time_s, ptr, size, stream;
  uint32_t time_ns, line, thread;
  uint8_t action;
} raw_t;

typedef struct {
  const char *name;
  raw_t *ev;
  size_t n, cap;
  bool sorted; /* times never decrease in row order */
  rmap_t threads, streams;
  uint64_t clock_prev, clock_day;
  gpum_replay_log_info_t info;
} reader_t;

/* ---- fields ---- */

static bool all_digits(const char *s, int base) {
  if (!*s)
    return false;
  for (; *s; s++)
    if (base == 16 ? !isxdigit((unsigned char)*s) : !isdigit((unsigned char)*s))
      return false;
  return true;
}

/* Unsigned decimal or (after 0x) hex, with overflow checks. */
static int parse_uint(const char *s, int base, uint64_t *out) {
  if (!all_digits(s, base))
    return -1;
  uint64_t v = 0;
  for (; *s; s++) {
    unsigned d = isdigit((unsigned char)*s) ? (unsigned)(*s - '0')
                                            : (unsigned)(tolower((unsigned char)*s) - 'a' + 10);
    if (v > (UINT64_MAX - d) / (unsigned)base)
      return -1;
    v = v * (unsigned)base + d;
  }
  *out = v;
  return 0;
}

static bool has_hex_prefix(const char *s) {
  return s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
}

/* A decimal or 0x-hex id (Thread, Stream). */
static int parse_id(const char *s, uint64_t *out) {
  return has_hex_prefix(s) ? parse_uint(s + 2, 16, out) : parse_uint(s, 10, out);
}

/* Reads exactly n digits at *p (n = 0: one or more) into *v. */
static int scan_digits(const char **p, int n, uint64_t *v) {
  const char *s = *p;
  uint64_t x = 0;
  int k = 0;
  for (; isdigit((unsigned char)s[k]) && (n == 0 || k < n); k++) {
    if (x > (UINT64_MAX - 9) / 10)
      return -1;
    x = x * 10 + (uint64_t)(s[k] - '0');
  }
  if (k == 0 || (n && k != n))
    return -1;
  *p = s + k;
  *v = x;
  return 0;
}

/* ".f{1,9}" at *p into nanoseconds (absent: 0). */
static int scan_fraction(const char **p, uint32_t *ns) {
  *ns = 0;
  if (**p != '.')
    return 0;
  const char *s = *p + 1;
  int k = 0;
  uint32_t v = 0;
  for (; isdigit((unsigned char)s[k]); k++) {
    if (k == 9)
      return -1;
    v = v * 10 + (uint32_t)(s[k] - '0');
  }
  if (k == 0)
    return -1;
  for (int i = k; i < 9; i++)
    v *= 10;
  *ns = v;
  *p = s + k;
  return 0;
}

int gpum__replay_parse_time(const char *s, uint64_t *secs, uint32_t *ns, int *clock) {
  const char *p = s;
  uint64_t a, m, sec;
  *clock = strchr(s, ':') != NULL;
  if (*clock) {
    if (!isdigit((unsigned char)p[0]) || scan_digits(&p, isdigit((unsigned char)p[1]) ? 2 : 1, &a))
      return GPUM_EPARSE;
    if (*p++ != ':' || scan_digits(&p, 2, &m) || *p++ != ':' || scan_digits(&p, 2, &sec))
      return GPUM_EPARSE;
    if (a > 23 || m > 59 || sec > 60)
      return GPUM_EPARSE;
    a = (a * 60 + m) * 60 + sec;
  } else if (scan_digits(&p, 0, &a)) {
    return GPUM_EPARSE;
  }
  if (scan_fraction(&p, ns) || *p)
    return GPUM_EPARSE;
  *secs = a;
  return 0;
}

/* Trims blanks (and one pair of double quotes) around a field in place. */
static char *trim(char *s) {
  while (*s == ' ' || *s == '\t')
    s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
    s[--n] = '\0';
  if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
    s[n - 1] = '\0';
    s++;
  }
  return s;
}

/* Splits line at commas into at most max fields; returns the number of fields found (which may
 * exceed max: the extra ones are not stored). */
static int split(char *line, char **f, int max) {
  int n = 0;
  char *p = line;
  for (;;) {
    char *c = strchr(p, ',');
    if (c)
      *c = '\0';
    if (n < max)
      f[n] = trim(p);
    n++;
    if (!c)
      return n;
    p = c + 1;
  }
}

/* ---- rows ---- */

static int bad_field(const reader_t *r, uint32_t line, const char *col, const char *val,
                     const char *expect) {
  return gpum_error(GPUM_EPARSE, "%s:%u: bad %s '%.48s%s' (expected %s)", r->name, line, col, val,
                    strlen(val) > 48 ? "..." : "", expect);
}

static int parse_action(const char *s, uint8_t *act) {
  if (!strcasecmp(s, "allocate"))
    *act = ACT_ALLOC;
  else if (!strcasecmp(s, "free") || !strcasecmp(s, "deallocate"))
    *act = ACT_FREE;
  else if (!strcasecmp(s, "allocate failure"))
    *act = ACT_FAIL;
  else
    return -1;
  return 0;
}

static int parse_time_field(reader_t *r, uint32_t line, const char *s, raw_t *ev) {
  int clock;
  if (gpum__replay_parse_time(s, &ev->time_s, &ev->time_ns, &clock))
    return bad_field(r, line, "Time", s,
                     "an integer, a clock time HH:MM:SS.ffffff or seconds.fraction");
  if (clock) {
    /* RMM's clock has no date: a jump back by more than half a day is the next day. */
    if (ev->time_s + HALF_DAY < r->clock_prev)
      r->clock_day++;
    r->clock_prev = ev->time_s;
    ev->time_s += r->clock_day * 86400u;
  }
  return 0;
}

/* Registers a thread or stream id; *idx gets its dense index. */
static int intern(rmap_t *m, uint64_t id, uint32_t *idx) {
  rmap_entry_t *e = rmap_find(m, id);
  if (e) {
    *idx = e->val;
    return 0;
  }
  *idx = (uint32_t)m->n;
  return rmap_put(m, id, *idx);
}

static int parse_row(reader_t *r, char *text, uint32_t line, raw_t *ev) {
  char *f[6];
  int nf = split(text, f, 6);
  if (nf != 6)
    return gpum_error(GPUM_EPARSE,
                      "%s:%u: expected 6 columns (Thread,Time,Action,Pointer,Size,Stream), "
                      "found %d",
                      r->name, line, nf);
  uint64_t thread;
  memset(ev, 0, sizeof *ev);
  ev->line = line;
  if (parse_id(f[0], &thread))
    return bad_field(r, line, "Thread", f[0], "a decimal or 0x-hex thread id");
  int rc = parse_time_field(r, line, f[1], ev);
  if (rc)
    return rc;
  if (parse_action(f[2], &ev->action))
    return bad_field(r, line, "Action", f[2], "allocate, free or allocate failure");
  if (!strcmp(f[3], "(nil)"))
    ev->ptr = 0;
  else if (!has_hex_prefix(f[3]) || parse_uint(f[3] + 2, 16, &ev->ptr))
    return bad_field(r, line, "Pointer", f[3], "a 0x-hex address");
  if (parse_uint(f[4], 10, &ev->size))
    return bad_field(r, line, "Size", f[4], "a decimal number of bytes");
  if (parse_id(f[5], &ev->stream))
    return bad_field(r, line, "Stream", f[5], "a decimal or 0x-hex stream id");
  uint32_t idx;
  if ((rc = intern(&r->threads, thread, &ev->thread)) ||
      (rc = intern(&r->streams, ev->stream, &idx)))
    return rc;
  return 0;
}

static bool time_before(const raw_t *a, const raw_t *b) {
  return a->time_s < b->time_s || (a->time_s == b->time_s && a->time_ns < b->time_ns);
}

static int append(reader_t *r, const raw_t *ev) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 4096;
    raw_t *p = realloc(r->ev, cap * sizeof *p);
    if (!p)
      return gpum_error(GPUM_ENOMEM, "%s: out of memory for %zu events", r->name, cap);
    r->ev = p;
    r->cap = cap;
  }
  if (r->n && time_before(ev, &r->ev[r->n - 1]))
    r->sorted = false;
  r->ev[r->n++] = *ev;
  return 0;
}

/* ---- the file ---- */

/* Reads one line (without its newline) into buf. Returns 1, 0 at the end, or an error code
 * (with the detail set). */
static int read_line(reader_t *r, FILE *f, uint32_t line, char *buf, size_t cap) {
  size_t n = 0;
  int c;
  while ((c = getc_unlocked(f)) != EOF && c != '\n') {
    if (c == '\0')
      return gpum_error(GPUM_EPARSE, "%s:%u: NUL byte in the line (not a text file?)", r->name,
                        line);
    if (n + 1 >= cap)
      return gpum_error(GPUM_EPARSE, "%s:%u: line longer than %zu bytes", r->name, line, cap - 1);
    buf[n++] = (char)c;
  }
  if (c == EOF && ferror(f))
    return gpum_error(GPUM_EIO, "%s:%u: read error", r->name, line);
  buf[n] = '\0';
  return c == EOF && n == 0 ? 0 : 1;
}

static bool blank(const char *s) {
  return s[strspn(s, " \t\r")] == '\0';
}

static int check_header(const reader_t *r, char *text, uint32_t line) {
  static const char *const want[] = {"Thread", "Time", "Action", "Pointer", "Size", "Stream"};
  char copy[128];
  size_t n = strnlen(text, sizeof copy - 1);
  memcpy(copy, text, n);
  copy[n] = '\0';
  char *f[6];
  if (!strncmp(text, "\xef\xbb\xbf", 3)) /* a UTF-8 byte order mark */
    text += 3;
  int nf = split(text, f, 6);
  bool ok = nf == 6;
  for (int i = 0; ok && i < 6; i++)
    ok = !strcasecmp(f[i], want[i]);
  if (!ok)
    return gpum_error(GPUM_EPARSE,
                      "%s:%u: not an RMM CSV log: expected the header "
                      "'Thread,Time,Action,Pointer,Size,Stream', found '%.60s'",
                      r->name, line, trim(copy));
  return 0;
}

static int read_rows(reader_t *r, FILE *f) {
  char buf[LINE_MAX_BYTES + 1];
  bool header = false;
  int rc = 0;
  flockfile(f);
  for (uint64_t line = 1;; line++) {
    if (line > GPUM__REPLAY_MAX_LINES) {
      rc = gpum_error(GPUM_ERANGE, "%s: more than %u lines", r->name, GPUM__REPLAY_MAX_LINES);
      break;
    }
    rc = read_line(r, f, (uint32_t)line, buf, sizeof buf);
    if (rc <= 0)
      break;
    rc = 0;
    if (blank(buf))
      continue;
    if (!header) {
      if ((rc = check_header(r, buf, (uint32_t)line)))
        break;
      header = true;
      continue;
    }
    raw_t ev;
    if ((rc = parse_row(r, buf, (uint32_t)line, &ev)))
      break;
    r->info.rows++;
    if (ev.action == ACT_FAIL)
      r->info.alloc_failures++;
    else if ((rc = append(r, &ev)))
      break;
  }
  funlockfile(f);
  if (rc == 0 && !header)
    rc = gpum_error(GPUM_EPARSE,
                    "%s: empty: no header 'Thread,Time,Action,Pointer,Size,Stream' (not an RMM "
                    "CSV log)",
                    r->name);
  return rc;
}

/* ---- order ---- */

/* Heap over threads keyed by their next event: (time, row). */
typedef struct {
  const raw_t *ev;
  const uint32_t *head;
  uint32_t *heap;
  uint32_t n;
} theap_t;

static bool head_less(const theap_t *h, uint32_t a, uint32_t b) {
  const raw_t *x = &h->ev[h->head[a]], *y = &h->ev[h->head[b]];
  if (time_before(x, y))
    return true;
  if (time_before(y, x))
    return false;
  return h->head[a] < h->head[b];
}

static void sift_down(theap_t *h, uint32_t i) {
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < h->n && head_less(h, h->heap[l], h->heap[m]))
      m = l;
    if (r < h->n && head_less(h, h->heap[r], h->heap[m]))
      m = r;
    if (m == i)
      return;
    uint32_t t = h->heap[i];
    h->heap[i] = h->heap[m];
    h->heap[m] = t;
    i = m;
  }
}

/* Puts the events in replay order: each thread's rows in order, threads merged by (Time, row).
 * When times never decrease in row order (or there is one thread) that is row order itself. */
static int order_events(reader_t *r) {
  uint32_t nt = (uint32_t)r->threads.n;
  if (r->sorted || nt <= 1 || r->n < 2)
    return 0;
  int rc = 0;
  uint32_t *next = malloc(r->n * sizeof *next);
  uint32_t *head = malloc(nt * sizeof *head), *tail = malloc(nt * sizeof *tail);
  uint32_t *heap = malloc(nt * sizeof *heap);
  raw_t *out = malloc(r->n * sizeof *out);
  if (!next || !head || !tail || !heap || !out) {
    rc = gpum_error(GPUM_ENOMEM, "%s: out of memory ordering %zu events", r->name, r->n);
    goto out_free;
  }
  for (uint32_t t = 0; t < nt; t++)
    head[t] = tail[t] = NONE;
  for (uint32_t i = 0; i < (uint32_t)r->n; i++) {
    uint32_t t = r->ev[i].thread;
    next[i] = NONE;
    if (head[t] == NONE)
      head[t] = i;
    else
      next[tail[t]] = i;
    tail[t] = i;
  }
  theap_t h = {.ev = r->ev, .head = head, .heap = heap, .n = 0};
  for (uint32_t t = 0; t < nt; t++)
    if (head[t] != NONE) /* a thread with only failure rows has no events */
      heap[h.n++] = t;
  for (uint32_t i = h.n / 2; i-- > 0;)
    sift_down(&h, i);
  for (size_t k = 0; k < r->n; k++) {
    uint32_t t = heap[0];
    out[k] = r->ev[head[t]];
    head[t] = next[head[t]];
    if (head[t] == NONE)
      heap[0] = heap[--h.n];
    if (h.n)
      sift_down(&h, 0);
  }
  free(r->ev);
  r->ev = out;
  r->cap = r->n;
  out = NULL;
out_free:
  free(out);
  free(heap);
  free(tail);
  free(head);
  free(next);
  return rc;
}

/* ---- resolve ---- */

typedef struct {
  rmap_t live;    /* log pointer -> slot */
  uint64_t *size; /* slot -> exact size */
  uint32_t *free_slots;
  uint32_t nfree, nslots, cap;
} slots_t;

static int slot_take(slots_t *s, uint32_t *slot) {
  if (s->nfree) {
    *slot = s->free_slots[--s->nfree];
    return 0;
  }
  if (s->nslots == s->cap) {
    uint32_t cap = s->cap ? s->cap * 2 : 1024;
    uint64_t *sz = realloc(s->size, cap * sizeof *sz);
    if (sz)
      s->size = sz;
    uint32_t *fs = sz ? realloc(s->free_slots, cap * sizeof *fs) : NULL;
    if (!fs)
      return gpum_error(GPUM_ENOMEM, "out of memory for %u live blocks", cap);
    s->free_slots = fs;
    s->cap = cap;
  }
  *slot = s->nslots++;
  return 0;
}

static void resolve_alloc(const raw_t *ev, gpum_replay_log_info_t *in, uint64_t *live,
                          uint64_t *blocks) {
  *live += ev->size;
  (*blocks)++;
  if (*live > in->peak_live_bytes)
    in->peak_live_bytes = *live;
  if (*blocks > in->peak_live_blocks)
    in->peak_live_blocks = *blocks;
  if (ev->size > in->max_size)
    in->max_size = ev->size;
  if (in->allocs == 0 || ev->size < in->min_size)
    in->min_size = ev->size;
  in->allocs++;
}

/* Turns the ordered events into ops (written over nothing: a new array), slot by slot. */
static int resolve(reader_t *r, gpum_replay_log_t *log) {
  gpum_replay_log_info_t *in = &r->info;
  slots_t s = {0};
  uint64_t live = 0, blocks = 0;
  int rc = 0;
  log->ops = malloc((r->n ? r->n : 1) * sizeof *log->ops);
  if (!log->ops)
    return gpum_error(GPUM_ENOMEM, "%s: out of memory for %zu operations", r->name, r->n);
  for (size_t i = 0; i < r->n && rc == 0; i++) {
    const raw_t *ev = &r->ev[i];
    rmap_entry_t *e = rmap_find(&s.live, ev->ptr);
    uint32_t slot = 0;
    if (ev->action == ACT_FREE) {
      if (!e) {
        in->unknown_frees++;
        continue;
      }
      slot = e->val;
      rmap_del(&s.live, e);
      if (slot == ZERO_SLOT)
        continue;
      live -= s.size[slot];
      blocks--;
      s.free_slots[s.nfree++] = slot;
      in->frees++;
      log->ops[log->nops++] = (gpum__replay_op_t){
          .size = 0, .stream = ev->stream, .slot = slot, .line = ev->line | GPUM__REPLAY_FREE_BIT};
      continue;
    }
    if (e) { /* the earlier allocation of this pointer is never freed */
      in->reused_pointers++;
      rmap_del(&s.live, e);
    }
    if (ev->size == 0) {
      in->zero_size++;
      rc = rmap_put(&s.live, ev->ptr, ZERO_SLOT);
      continue;
    }
    if ((rc = slot_take(&s, &slot)) || (rc = rmap_put(&s.live, ev->ptr, slot)))
      break;
    s.size[slot] = ev->size;
    resolve_alloc(ev, in, &live, &blocks);
    log->ops[log->nops++] =
        (gpum__replay_op_t){.size = ev->size, .stream = ev->stream, .slot = slot, .line = ev->line};
  }
  in->live_at_end = blocks;
  log->nslots = s.nslots;
  rmap_free(&s.live);
  free(s.size);
  free(s.free_slots);
  if (rc == 0 && log->nops < r->n) {
    gpum__replay_op_t *shrunk = realloc(log->ops, (log->nops ? log->nops : 1) * sizeof *shrunk);
    if (shrunk)
      log->ops = shrunk;
  }
  return rc;
}

/* ---- public ---- */

int gpum_replay_log_read(FILE *f, const char *name, gpum_replay_log_t **out) {
  if (!f || !out)
    return gpum_error(GPUM_EINVAL, "gpum_replay_log_read: NULL argument");
  reader_t r = {.name = name ? name : "log", .sorted = true};
  gpum_replay_log_t *log = calloc(1, sizeof *log);
  int rc = log ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
  if (rc == 0)
    rc = read_rows(&r, f);
  if (rc == 0)
    rc = order_events(&r);
  if (rc == 0)
    rc = resolve(&r, log);
  free(r.ev);
  r.info.threads = r.threads.n;
  r.info.streams = r.streams.n;
  rmap_free(&r.threads);
  rmap_free(&r.streams);
  if (rc) {
    gpum_replay_log_free(log);
    return rc;
  }
  log->info = r.info;
  *out = log;
  return 0;
}

int gpum_replay_log_open(const char *path, gpum_replay_log_t **out) {
  if (!path || !out)
    return gpum_error(GPUM_EINVAL, "gpum_replay_log_open: NULL argument");
  FILE *f = fopen(path, "r");
  if (!f) {
    int e = errno;
    return gpum_error(e == ENOENT   ? GPUM_ENOENT
                      : e == EACCES ? GPUM_EPERM
                                    : GPUM_EIO,
                      "cannot open %s: %s", path, strerror(e));
  }
  int rc = gpum_replay_log_read(f, path, out);
  fclose(f);
  return rc;
}

void gpum_replay_log_free(gpum_replay_log_t *log) {
  if (!log)
    return;
  free(log->ops);
  free(log);
}

void gpum_replay_log_info(const gpum_replay_log_t *log, gpum_replay_log_info_t *out) {
  if (log && out)
    *out = log->info;
}
