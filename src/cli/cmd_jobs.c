/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum jobs [--all] [--json]`: the reservations gpumd holds for the caller (--all: everyone's,
 * and what ended in the last ten minutes), granted ones first, then the queue in order, as a
 * table or as JSON.
 */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/error.h>
#include <gpum/size.h>
#include <gpum/clock.h>
#include <jansson.h>

#include "args.h"
#include "cli.h"
#include "output.h"
#include "client_cli.h"
#include "json_indent.h"

enum { OPT_ALL = 1, OPT_JSON, OPT_STATE, OPT_LABEL };

static const cli_arg_t jobs_args[] = {
    {OPT_ALL, "--all", 'a', NULL,
     "every user's reservations (tokens are only shown to their owners), and those that ended "
     "in the last 10 minutes with why (FAILED: its GPU is gone)",
     0},
    {OPT_JSON, "--json", 0, NULL,
     "the daemon's document: {\"reservations\": [...]}, with --all also \"ended\": [...] "
     "(docs/protocol.md)",
     0},
    {OPT_STATE, "--state", 0, "STATE",
     "only the QUEUED, the GRANTED or the SUSPENDED ones (suspended: their GPU memory is in host "
     "memory, docs/suspend.md)",
     0},
    {OPT_LABEL, "--label", 0, "LABEL",
     "only those labelled LABEL; LABEL ending with '*': those whose label begins with the rest", 0},
    {0},
};

static const cli_cmd_spec_t jobs_spec = {
    .name = "jobs",
    .usage = "[--all] [--json] [--state QUEUED|GRANTED|SUSPENDED] [--label LABEL]",
    .summary = "List your reservations in gpumd and the queue.",
    .text = "Granted ones come with their GPUs, queued ones with their position and what they\n"
            "wait for; under a granted one, a line per source of the figures its processes\n"
            "report, with their units (a batcher's queue and latencies, a pool's bytes:\n"
            "docs/report.md). gpumd answers in pages; gpum jobs reads them all.",
    .args = jobs_args,
    .examples = "gpum jobs\n"
                "gpum jobs --all --state QUEUED\n"
                "gpum jobs --label 'train-*' --json | jq '.reservations[].id'",
    .exit_status = "0, or 1 when gpumd cannot be reached; 2 for usage errors.",
};

/* "2m30s" since ns (a wall-clock time), "-" when unknown. */
static void age(uint64_t ns, char *buf, size_t len) {
  uint64_t now = gpum_clock_real_ns();
  if (ns == 0 || ns > now) {
    snprintf(buf, len, "-");
    return;
  }
  gpum_duration_format((now - ns) / 1000000000ull * 1000ull, buf, len);
}

/* Reservation ids are "r-N": they sort by N (r-5 before r-10), not as text. */
static int by_id(const char *x, const char *y) {
  char *ex = NULL, *ey = NULL;
  unsigned long long nx = strncmp(x, "r-", 2) ? 0 : strtoull(x + 2, &ex, 10);
  unsigned long long ny = strncmp(y, "r-", 2) ? 0 : strtoull(y + 2, &ey, 10);
  if (ex && ey && *ex == '\0' && *ey == '\0' && nx != ny)
    return nx < ny ? -1 : 1;
  return strcmp(x, y);
}

static int by_state(const void *a, const void *b) {
  const gpum_reservation_t *x = a, *y = b;
  int kx = x->state == GPUM_RES_GRANTED ? 0 : x->state == GPUM_RES_QUEUED ? 1 : 2;
  int ky = y->state == GPUM_RES_GRANTED ? 0 : y->state == GPUM_RES_QUEUED ? 1 : 2;
  if (kx != ky)
    return kx - ky;
  if (kx == 1)
    return (x->queue_position > y->queue_position) - (x->queue_position < y->queue_position);
  return by_id(x->id, y->id);
}

/* The workload figures processes of the job reported (gpum/report.h), a line per source under
 * the reservation's line: "    infer (pid 812): queued 0, completed 100, ...". */
static void print_workload(json_t *byid, const char *id) {
  size_t j;
  json_t *w;
  json_array_foreach(json_object_get(byid, id), j, w) {
    const char *src = json_string_value(json_object_get(w, "source"));
    printf("    %s (pid %lld):", src ? src : "?",
           (long long)json_integer_value(json_object_get(w, "pid")));
    const char *k;
    json_t *v;
    bool first = true;
    json_object_foreach(json_object_get(w, "figures"), k, v) {
      char fig[GPUM_FIGURE_BUFSZ];
      /* The name without its unit's suffix, the value in that unit: "e2e_p99 11.4 ms". */
      printf("%s %.*s %s", first ? "" : ",", (int)gpum_figure_stem_len(k), k,
             gpum_figure_format(k, json_number_value(v), fig, sizeof fig));
      first = false;
    }
    putchar('\n');
  }
}

/* --all: what ended in the last ten minutes (gpumd's "ended", newest first), a FAILED one with
 * why, so that it does not vanish the moment its GPU does. */
static void print_ended(const gpum_reservation_t *ended, size_t n) {
  if (n == 0)
    return;
  printf("\nENDED in the last 10 minutes (newest first)\n");
  for (size_t i = 0; i < n; i++) {
    const gpum_reservation_t *r = &ended[i];
    char user[64], size[GPUM_SIZE_BUFSZ], when[GPUM_DURATION_BUFSZ];
    cli_user_name(r->uid, user, sizeof user);
    age(r->ended_ns, when, sizeof when);
    printf("%-10s %-9s %-10s %8lld %10s %-8s ago  %s: %s\n", r->id[0] ? r->id : "?",
           gpum_res_state_name(r->state), user, (long long)r->pid,
           gpum_size_format(r->bytes_per_gpu, size, sizeof size), when,
           r->label[0] ? r->label : "-", r->reason);
  }
}

/* byid: the "workload" of the granted ones that carry figures, by id (one look-up a row). */
static void print_table(gpum_reservation_t *list, size_t n, json_t *byid) {
  if (n == 0) {
    printf("no reservations\n");
    return;
  }
  qsort(list, n, sizeof *list, by_state);
  char last_user[64] = "";
  uint32_t last_uid = 0;
  bool have_uid = false;
  printf("%-10s %-9s %-10s %8s %-8s %10s %10s %4s %-8s %s\n", "ID", "STATE", "USER", "PID", "GPUS",
         "MEM/GPU", "FENCED", "PRIO", "AGE", "LABEL / WAITING FOR");
  for (size_t i = 0; i < n; i++) {
    const gpum_reservation_t *r = &list[i];
    char user[64], gpus[64] = "", size[GPUM_SIZE_BUFSZ], when[GPUM_DURATION_BUFSZ],
                   fenced[GPUM_SIZE_BUFSZ] = "-";
    if (!have_uid || r->uid != last_uid) /* one look-up a run of one user's rows */
      cli_user_name(r->uid, last_user, sizeof last_user);
    have_uid = true;
    last_uid = r->uid;
    snprintf(user, sizeof user, "%s", last_user);
    size_t o = 0;
    for (size_t d = 0; d < r->ndevices && o < sizeof gpus; d++) {
      int k = snprintf(gpus + o, sizeof gpus - o, "%s%u", d ? "," : "", r->devices[d].index);
      o += k > 0 ? (size_t)k : 0;
    }
    if (r->state == GPUM_RES_QUEUED)
      snprintf(gpus, sizeof gpus, "#%ld", r->queue_position + 1); /* 0: next in line */
    else if (r->state == GPUM_RES_SUSPENDED) { /* the GPUs it came from, and will favour */
      char from[sizeof gpus];
      memcpy(from, gpus, sizeof from);
      snprintf(gpus, sizeof gpus, "(%.60s)", from[0] ? from : "-");
    } else if (gpus[0] == '\0')
      snprintf(gpus, sizeof gpus, "-");
    age(r->state == GPUM_RES_GRANTED && r->granted_ns ? r->granted_ns : r->created_ns, when,
        sizeof when);
    /* FENCED: what the job's processes hold under the shim (gpum run --enforce), all GPUs. */
    if (r->fenced)
      gpum_size_format(r->fenced_used, fenced, sizeof fenced);
    printf("%-10s %-9s %-10s %8d %-8s %10s %10s %4d %-8s %s", r->id, gpum_res_state_name(r->state),
           user, (int)r->pid, gpus, gpum_size_format(r->bytes_per_gpu, size, sizeof size), fenced,
           r->priority, when, r->label[0] ? r->label : "-");
    if (r->slurm_job_id[0]) /* a Slurm step's (gpum_spank.so): its ids as squeue writes them */
      printf(" [slurm %s.%s]", r->slurm_job_id, r->slurm_step_id);
    if (r->state == GPUM_RES_QUEUED && r->waiting_for[0])
      printf(" (waiting for %s)", r->waiting_for);
    else if (r->reason[0])
      printf(" (%s)", r->reason);
    if (r->moving[0])
      printf(" [%s]", r->moving);
    if (r->state == GPUM_RES_SUSPENDED) {
      char host[GPUM_SIZE_BUFSZ];
      printf(" [%s in host memory, %s]", gpum_size_format(r->host_bytes, host, sizeof host),
             r->hold ? "until gpum resume" : "resumes when there is room");
    }
    putchar('\n');
    if (r->state == GPUM_RES_GRANTED)
      print_workload(byid, r->id);
  }
}

/* ---- --json: gpumd's documents written as they come, page after page -------------------- */

/* The document's state: {"reservations": [...] and, with --all, "ended": [...]} as json_dumps
 * with JSON_INDENT(2) wrote it when this command built one tree of every page. */
typedef struct {
  cli_buf_t out;   /* written to stdout whenever it passes OUT_CHUNK */
  cli_buf_t ended; /* the "ended" items (the first page's), kept for the end */
  size_t nlive, nended;
  int werr; /* stdout failed */
} json_doc_t;

#define OUT_CHUNK (1u << 16)

static int json_item(void *user, gpum_list_part_t part, const gpum_reservation_t *r,
                     const char *doc, size_t len) {
  (void)r;
  json_doc_t *d = user;
  cli_buf_t *b = part == GPUM_LIST_LIVE ? &d->out : &d->ended;
  size_t *n = part == GPUM_LIST_LIVE ? &d->nlive : &d->nended;
  if ((*n)++ > 0)
    CLI_BUF_LIT(b, ",");
  CLI_BUF_LIT(b, "\n    ");
  cli_json_indent(b, doc, len, 2);
  if (b->oom)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  if (b == &d->out && b->len >= OUT_CHUNK && cli_buf_flush(b, stdout) != 0)
    d->werr = 1;
  return d->werr ? gpum_error(GPUM_EIO, "cannot write the list") : 0;
}

static int print_json(gpum_client_t *c, const gpum_list_query_t *q, bool all) {
  json_doc_t d = {0};
  CLI_BUF_LIT(&d.out, "{\n  \"reservations\": [");
  int rc = gpum_client_list_each(c, q, all, json_item, &d, NULL);
  if (rc == 0) {
    if (d.nlive > 0)
      CLI_BUF_LIT(&d.out, "\n  ");
    CLI_BUF_LIT(&d.out, "]");
    if (all) {
      CLI_BUF_LIT(&d.out, ",\n  \"ended\": [");
      cli_buf_put(&d.out, d.ended.s ? d.ended.s : "", d.ended.len);
      if (d.nended > 0)
        CLI_BUF_LIT(&d.out, "\n  ");
      CLI_BUF_LIT(&d.out, "]");
    }
    CLI_BUF_LIT(&d.out, "\n}\n");
    if (cli_buf_flush(&d.out, stdout) != 0 || fflush(stdout) != 0)
      rc = gpum_error(GPUM_EIO, "cannot write the list");
  } else if (d.nlive > 0) {
    fflush(stdout); /* what was written stays cut short: the exit status says so */
  }
  cli_buf_free(&d.out);
  cli_buf_free(&d.ended);
  if (rc != 0) {
    fprintf(stderr, "gpum jobs: %s\n", cli_reason(rc));
    return CLI_EXIT_FAIL;
  }
  return CLI_EXIT_OK;
}

/* ---- the table: rows from the structs, figures from the few documents that carry them ---- */

typedef struct {
  gpum_reservation_t *live, *ended;
  size_t nlive, cap, nended, ecap;
  json_t *byid; /* the workload of granted ones that report figures, by id */
} rows_t;

static int push(gpum_reservation_t **arr, size_t *n, size_t *cap, const gpum_reservation_t *r) {
  if (*n == *cap) {
    size_t ncap = *cap ? *cap * 2 : 256;
    gpum_reservation_t *p = realloc(*arr, ncap * sizeof *p);
    if (p == NULL)
      return gpum_error(GPUM_ENOMEM, "out of memory reading %zu reservations", *n + 1);
    *arr = p;
    *cap = ncap;
  }
  (*arr)[(*n)++] = *r;
  return 0;
}

/* A granted reservation's "workload" (docs/report.md), read from its document only when the
 * document names one: most carry none, and the structs hold everything else. */
static int take_workload(rows_t *t, const gpum_reservation_t *r, const char *doc, size_t len) {
  if (r->state != GPUM_RES_GRANTED || !memmem(doc, len, "\"workload\"", 10))
    return 0;
  json_t *o = json_loadb(doc, len, 0, NULL);
  json_t *w = json_object_get(o, "workload");
  int rc = 0;
  if (json_array_size(w) > 0 && json_object_set(t->byid, r->id, w) != 0)
    rc = gpum_error(GPUM_ENOMEM, "out of memory");
  json_decref(o);
  return rc;
}

static int take_row(void *user, gpum_list_part_t part, const gpum_reservation_t *r, const char *doc,
                    size_t len) {
  rows_t *t = user;
  if (part == GPUM_LIST_ENDED)
    return push(&t->ended, &t->nended, &t->ecap, r);
  int rc = push(&t->live, &t->nlive, &t->cap, r);
  return rc != 0 ? rc : take_workload(t, r, doc, len);
}

static int print_rows(gpum_client_t *c, const gpum_list_query_t *q, bool all) {
  rows_t t = {.byid = json_object()};
  int rc = t.byid ? gpum_client_list_each(c, q, all, take_row, &t, NULL)
                  : gpum_error(GPUM_ENOMEM, "out of memory");
  if (rc == 0) {
    print_table(t.live, t.nlive, t.byid);
    print_ended(t.ended, t.nended);
  }
  json_decref(t.byid);
  free(t.live);
  free(t.ended);
  if (rc != 0) {
    fprintf(stderr, "gpum jobs: %s\n", cli_reason(rc));
    return CLI_EXIT_FAIL;
  }
  return CLI_EXIT_OK;
}

int cmd_jobs(gpum_config_t *cfg, int argc, char **argv) {
  bool json = false, all = false;
  const char *v = NULL;
  gpum_list_query_t q = {0};
  cli_args_t p;
  cli_args_init(&p, &jobs_spec, argc, argv);
  for (int id; (id = cli_args_next(&p)) != CLI_ARGS_END;) {
    v = p.value;
    switch (id) {
    case CLI_ARGS_HELP:
      return CLI_EXIT_OK;
    case CLI_ARGS_ERR:
      return CLI_EXIT_USAGE;
    case CLI_ARGS_POS:
      return cli_args_error(&jobs_spec, "unexpected argument '%s'", v);
    case OPT_JSON:
      json = true;
      break;
    case OPT_ALL:
      all = true;
      break;
    case OPT_STATE: {
      gpum_res_state_t st = GPUM_RES_UNKNOWN;
      for (int k = GPUM_RES_QUEUED; k <= GPUM_RES_SUSPENDED; k++)
        if (!strcmp(v, gpum_res_state_name((gpum_res_state_t)k)))
          st = (gpum_res_state_t)k;
      if (st != GPUM_RES_QUEUED && st != GPUM_RES_GRANTED && st != GPUM_RES_SUSPENDED)
        return cli_args_error(&jobs_spec, "--state takes QUEUED, GRANTED or SUSPENDED");
      q.states = 1u << st;
      break;
    }
    case OPT_LABEL:
      if (strlen(v) > 128)
        return cli_args_error(&jobs_spec, "--label takes a label (ending with '*': a prefix), at "
                                          "most 127 bytes");
      q.label = v;
      break;
    }
  }
  q.all = all;
  gpum_client_t *c = NULL;
  int code = cli_client_connect(cfg, "jobs", 0, &c);
  if (code != 0)
    return code;
  /* --all also shows what ended lately (the first page's "ended"). */
  code = json ? print_json(c, &q, all) : print_rows(c, &q, all);
  gpum_client_close(c);
  return code;
}
