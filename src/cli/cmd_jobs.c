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

#include "cli.h"
#include "output.h"
#include "client_cli.h"

static void usage(FILE *out) {
  fprintf(out, "usage: gpum jobs [--all] [--json] [--state QUEUED|GRANTED] [--label LABEL]\n"
               "\n"
               "Lists your reservations in gpumd: granted ones with their GPUs, queued ones with\n"
               "their position and what they wait for; under a granted one, a line per source\n"
               "of the figures its processes report (a batcher's queue and latencies, a pool's\n"
               "bytes: docs/report.md).\n"
               "\n"
               "options:\n"
               "  --all    every user's reservations (tokens are only shown to their owners),\n"
               "           and those that ended in the last 10 minutes with why (FAILED: its\n"
               "           GPU is gone)\n"
               "  --json   the daemon's document: {\"reservations\": [...]}, with --all also\n"
               "           \"ended\": [...] (docs/protocol.md)\n"
               "  --state S  only the QUEUED or only the GRANTED ones\n"
               "  --label L  only those labelled L; L ending with '*': those whose label\n"
               "           begins with the rest\n"
               "\n"
               "gpumd answers in pages; gpum jobs reads them all, however many there are.\n"
               "\n"
               "Exit status: 0, or 1 when gpumd cannot be reached.\n");
}

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
  json_array_foreach(json_object_get(json_object_get(byid, id), "workload"), j, w) {
    const char *src = json_string_value(json_object_get(w, "source"));
    printf("    %s (pid %lld):", src ? src : "?",
           (long long)json_integer_value(json_object_get(w, "pid")));
    const char *k;
    json_t *v;
    bool first = true;
    json_object_foreach(json_object_get(w, "figures"), k, v) {
      printf("%s %s %.6g", first ? "" : ",", k, json_number_value(v));
      first = false;
    }
    putchar('\n');
  }
}

/* --all: what ended in the last ten minutes (gpumd's "ended", newest first), a FAILED one with
 * why, so that it does not vanish the moment its GPU does. */
static void print_ended(json_t *doc) {
  json_t *ended = json_object_get(doc, "ended"), *r;
  size_t i;
  if (json_array_size(ended) == 0)
    return;
  printf("\nENDED in the last 10 minutes (newest first)\n");
  json_array_foreach(ended, i, r) {
    char user[64], size[GPUM_SIZE_BUFSZ], when[GPUM_DURATION_BUFSZ];
    cli_user_name((uint32_t)json_integer_value(json_object_get(r, "uid")), user, sizeof user);
    age((uint64_t)json_integer_value(json_object_get(r, "ended_ns")), when, sizeof when);
    const char *id = json_string_value(json_object_get(r, "id"));
    const char *st = json_string_value(json_object_get(r, "state"));
    const char *why = json_string_value(json_object_get(r, "reason"));
    const char *label = json_string_value(json_object_get(r, "label"));
    printf("%-10s %-9s %-10s %8lld %10s %-8s ago  %s: %s\n", id ? id : "?", st ? st : "?", user,
           (long long)json_integer_value(json_object_get(r, "pid")),
           gpum_size_format((uint64_t)json_integer_value(json_object_get(r, "bytes_per_gpu")), size,
                            sizeof size),
           when, label && *label ? label : "-", why ? why : "");
  }
}

static void print_table(gpum_reservation_t *list, size_t n, json_t *doc) {
  if (n == 0) {
    printf("no reservations\n");
    return;
  }
  /* The documents of the granted ones that carry figures, by id (one look-up a row). */
  json_t *byid = json_object(), *jr;
  size_t ji;
  json_array_foreach(json_object_get(doc, "reservations"), ji, jr) {
    const char *rid = json_string_value(json_object_get(jr, "id"));
    if (rid && json_array_size(json_object_get(jr, "workload")) > 0)
      json_object_set(byid, rid, jr);
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
    else if (gpus[0] == '\0')
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
    putchar('\n');
    if (r->state == GPUM_RES_GRANTED)
      print_workload(byid, r->id);
  }
  json_decref(byid);
}

/* The list's request: everyone's with what ended lately (--all) or the caller's, and the
 * filters. */
static json_t *list_args(bool all, const char *state, const char *label) {
  json_t *q = json_pack("{s:b}", "all", all);
  if (q && all)
    json_object_set_new(q, "ended", json_true());
  if (q && state)
    json_object_set_new(q, "state", json_string(state));
  if (q && label)
    json_object_set_new(q, "label", json_string(label));
  return q;
}

static int print_json(gpum_client_t *c, const char *args, bool all) {
  json_t *doc = cli_gpumd_list(c, args);
  if (doc == NULL) {
    fprintf(stderr, "gpum jobs: %s\n", cli_reason(GPUM_EPROTO));
    return CLI_EXIT_FAIL;
  }
  json_t *out = json_pack("{s:O}", "reservations", json_object_get(doc, "reservations"));
  if (out && all && json_object_get(doc, "ended"))
    json_object_set(out, "ended", json_object_get(doc, "ended"));
  json_decref(doc);
  if (out == NULL) {
    fprintf(stderr, "gpum jobs: gpumd's reply has no reservation list\n");
    return CLI_EXIT_FAIL;
  }
  /* One string, one write: json_dumpf writes piece by piece (a long list: most of the time). */
  char *text = json_dumps(out, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
  json_decref(out);
  if (text == NULL) {
    fprintf(stderr, "gpum jobs: out of memory\n");
    return CLI_EXIT_FAIL;
  }
  fputs(text, stdout);
  putchar('\n');
  free(text);
  return CLI_EXIT_OK;
}

/* The table's rows from gpumd's documents (every page, one walk: the figures are only there). */
static void row_of(const json_t *o, gpum_reservation_t *r) {
  const char *st = json_string_value(json_object_get(o, "state"));
  memset(r, 0, sizeof *r);
  for (int k = GPUM_RES_QUEUED; st && k <= GPUM_RES_FAILED; k++)
    if (!strcmp(st, gpum_res_state_name((gpum_res_state_t)k)))
      r->state = (gpum_res_state_t)k;
#define TEXT(field, key)                                                                           \
  snprintf(r->field, sizeof r->field, "%s",                                                        \
           json_string_value(json_object_get(o, key)) ? json_string_value(json_object_get(o, key)) \
                                                      : "")
  TEXT(id, "id");
  TEXT(reason, "reason");
  TEXT(label, "label");
  TEXT(waiting_for, "waiting_for");
#undef TEXT
  const json_t *slurm = json_object_get(o, "slurm");
  const char *job = json_string_value(json_object_get(slurm, "job_id"));
  const char *step = json_string_value(json_object_get(slurm, "step_id"));
  snprintf(r->slurm_job_id, sizeof r->slurm_job_id, "%s", job ? job : "");
  snprintf(r->slurm_step_id, sizeof r->slurm_step_id, "%s", step ? step : "");
  r->uid = (uint32_t)json_integer_value(json_object_get(o, "uid"));
  r->pid = (int32_t)json_integer_value(json_object_get(o, "pid"));
  r->bytes_per_gpu = (uint64_t)json_integer_value(json_object_get(o, "bytes_per_gpu"));
  r->priority = (int)json_integer_value(json_object_get(o, "priority"));
  r->queue_position = (long)json_integer_value(json_object_get(o, "queue_position"));
  r->created_ns = (uint64_t)json_integer_value(json_object_get(o, "created_ns"));
  r->granted_ns = (uint64_t)json_integer_value(json_object_get(o, "granted_ns"));
  const json_t *fenced = json_object_get(o, "fenced");
  r->fenced = json_is_object(fenced);
  r->fenced_used = (uint64_t)json_integer_value(json_object_get(fenced, "used"));
  const json_t *devs = json_object_get(o, "devices");
  for (size_t d = 0; d < json_array_size(devs) && d < GPUM_CLIENT_MAX_DEVICES; d++)
    r->devices[r->ndevices++].index =
        (unsigned)json_integer_value(json_object_get(json_array_get(devs, d), "index"));
}

static int rows_of(const json_t *doc, gpum_reservation_t **out, size_t *n) {
  const json_t *arr = json_object_get(doc, "reservations");
  size_t k = json_array_size(arr);
  gpum_reservation_t *list = calloc(k ? k : 1, sizeof *list);
  if (list == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory reading %zu reservations", k);
  for (size_t i = 0; i < k; i++)
    row_of(json_array_get(arr, i), &list[i]);
  *out = list;
  *n = k;
  return 0;
}

int cmd_jobs(gpum_config_t *cfg, int argc, char **argv) {
  bool json = false, all = false;
  const char *state = NULL, *label = NULL, *v = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return CLI_EXIT_OK;
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if (!strcmp(a, "--all") || !strcmp(a, "-a")) {
      all = true;
    } else if (cli_take_flag(argc, argv, &i, "--state", &v)) {
      if (!v || (strcmp(v, "QUEUED") && strcmp(v, "GRANTED"))) {
        fprintf(stderr, "gpum jobs: --state takes QUEUED or GRANTED\n");
        return CLI_EXIT_USAGE;
      }
      state = v;
    } else if (cli_take_flag(argc, argv, &i, "--label", &v)) {
      if (!v || strlen(v) > 128) {
        fprintf(stderr, "gpum jobs: --label takes a label (ending with '*': a prefix), at most "
                        "127 bytes\n");
        return CLI_EXIT_USAGE;
      }
      label = v;
    } else if (a[0] == '-') {
      return cli_bad_option("jobs", a);
    } else {
      fprintf(stderr, "gpum jobs: unexpected argument '%s'\n", a);
      return CLI_EXIT_USAGE;
    }
  }
  json_t *q = list_args(all, state, label);
  char *args = q ? json_dumps(q, JSON_COMPACT) : NULL;
  json_decref(q);
  if (args == NULL) {
    fprintf(stderr, "gpum jobs: out of memory\n");
    return CLI_EXIT_FAIL;
  }
  gpum_client_t *c = NULL;
  int code = cli_client_connect(cfg, "jobs", 0, &c);
  if (code != 0) {
    free(args);
    return code;
  }
  if (json) {
    code = print_json(c, args, all);
    gpum_client_close(c);
    free(args);
    return code;
  }
  gpum_reservation_t *list = NULL;
  size_t n = 0;
  json_t *doc = cli_gpumd_list(c, args); /* every page */
  int rc = doc ? rows_of(doc, &list, &n) : GPUM_EPROTO;
  free(args);
  gpum_client_close(c);
  if (rc != 0) {
    json_decref(doc);
    fprintf(stderr, "gpum jobs: %s\n", cli_reason(rc));
    return CLI_EXIT_FAIL;
  }
  print_table(list, n, doc);
  print_ended(doc);
  json_decref(doc);
  free(list);
  return CLI_EXIT_OK;
}
