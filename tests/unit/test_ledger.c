/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the gpumd ledger (src/gpumd/ledger/ledger.h): a full round trip of every
 * reservation field, one transaction (one commit) per loop turn and its invisibility to other
 * readers before the commit, rollback, the audit trail, reopening after close and after a process
 * exits without closing (the SIGKILL case), file modes, the recovery policy, and the errors:
 * no state directory, a state directory that cannot be created, a garbage file as database,
 * a schema newer than ours; the migration of a version-1 ledger (start-time columns added as
 * 0 = unknown), process start times and pid reuse in the recovery decision; schema version 3:
 * grants stored by device UUID and mapped to the devices of a renumbered node (a gone device
 * fails the reservation at recovery), the migration of a version-2 ledger, and retention
 * (pruning finished reservations in creation order and audit rows by age, in batches, never
 * the newest ids; version 5 has no secondary index); the
 * page size of new and existing ledgers; the writer thread (turns committed off the caller's
 * thread, a busy writer, reads that wait for it, a failed batch, close with a batch in flight).
 * Each test works in its own mkdtemp directory and removes it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include <gpum/error.h>

#include "ledger.h"
#include "scratch_testlib.h"
#include "pidstart_internal.h"

#define GiB (UINT64_C(1) << 30)
#define SEC UINT64_C(1000000000)
#define T0 (UINT64_C(1700000000) * SEC)

/* ---- Scratch directories ---------------------------------------------------------------- */

/* "<dir>/<name>" in buf. */
static const char *sub(const char *dir, const char *name, char *buf, size_t len) {
  snprintf(buf, len, "%s/%s", dir, name);
  return buf;
}

static gpumd_ledger_t *open_ok(const char *state_dir) {
  gpumd_ledger_t *l = NULL;
  int rc = gpumd_ledger_open(state_dir, NULL, &l);
  if (rc != 0)
    fail_msg("gpumd_ledger_open(%s): %s", state_dir, gpum_last_error());
  return l;
}

/* A reservation with every field set to something distinctive. */
static void sample(gpumd_resv_t *r, uint64_t id, gpumd_resv_state_t st) {
  memset(r, 0, sizeof(*r));
  r->id = id;
  snprintf(r->token, sizeof(r->token), "%032llx", (unsigned long long)(id * 0x1234567u));
  r->state = st;
  snprintf(r->reason, sizeof(r->reason), "reason of r-%llu: 'quoted' \"text\"",
           (unsigned long long)id);
  r->uid = 1000 + (uint32_t)id;
  r->pid = 4000 + (int32_t)id;
  snprintf(r->label, sizeof(r->label), "train-%llu", (unsigned long long)id);
  r->bytes_per_gpu = 40 * GiB + id;
  r->gpus = 2;
  snprintf(r->model, sizeof(r->model), "*H100*");
  r->min_memory = 80 * GiB;
  r->want_mask = UINT64_C(0x8000000000000005); /* the top bit survives the int64 column */
  r->priority = -7;
  r->timeout_ms = 30000;
  r->on_timeout = GPUMD_ON_TIMEOUT_WAIT;
  r->lease = GPUMD_LEASE_TTL;
  r->lease_pid = 77;
  r->ttl_ms = 60000;
  r->expires_ns = T0 + 60 * SEC;
  r->device_mask = st == GPUMD_RESV_QUEUED ? 0 : 5;
  r->created_ns = T0 + id;
  r->granted_ns = st == GPUMD_RESV_QUEUED ? 0 : T0 + id + 1;
  r->ended_ns = gpumd_resv_state_final(st) ? T0 + id + 2 : 0;
  r->timeout_told = true;
  r->pid_start = UINT64_C(0x8000000000001234) + id; /* the top bit survives too */
  r->lease_pid_start = 987654321 + id;
  snprintf(r->slurm_job, sizeof(r->slurm_job), "4294967295_%llu", (unsigned long long)id);
  snprintf(r->slurm_step, sizeof(r->slurm_step), "%s", id % 2 ? "batch" : "4294967294");
  r->preemptible = id % 2;
  if (st == GPUMD_RESV_SUSPENDED) {
    r->suspend_hold = id % 2;
    r->suspended_ns = T0 + id + 3;
    r->host_bytes = UINT64_C(0x7000000000000001) + id;
    r->ckpt_mask = UINT64_C(0x8000000000000003);
    r->nprocs = GPUMD_RESV_MAX_PROCS;
    for (unsigned i = 0; i < r->nprocs; i++) {
      r->proc_pid[i] = INT32_MAX - (int32_t)i;
      r->proc_start[i] = UINT64_C(0x8000000000000000) + i; /* the top bit survives */
    }
  }
}

static void assert_resv_equal(const gpumd_resv_t *a, const gpumd_resv_t *b) {
  assert_int_equal(a->id, b->id);
  assert_string_equal(a->token, b->token);
  assert_int_equal(a->state, b->state);
  assert_string_equal(a->reason, b->reason);
  assert_int_equal(a->uid, b->uid);
  assert_int_equal(a->pid, b->pid);
  assert_string_equal(a->label, b->label);
  assert_string_equal(a->slurm_job, b->slurm_job);
  assert_string_equal(a->slurm_step, b->slurm_step);
  assert_int_equal(a->bytes_per_gpu, b->bytes_per_gpu);
  assert_int_equal(a->gpus, b->gpus);
  assert_string_equal(a->model, b->model);
  assert_int_equal(a->min_memory, b->min_memory);
  assert_int_equal(a->want_mask, b->want_mask);
  assert_int_equal(a->priority, b->priority);
  assert_int_equal(a->timeout_ms, b->timeout_ms);
  assert_int_equal(a->on_timeout, b->on_timeout);
  assert_int_equal(a->lease, b->lease);
  assert_int_equal(a->lease_pid, b->lease_pid);
  assert_int_equal(a->ttl_ms, b->ttl_ms);
  assert_int_equal(a->expires_ns, b->expires_ns);
  assert_int_equal(a->device_mask, b->device_mask);
  assert_int_equal(a->created_ns, b->created_ns);
  assert_int_equal(a->granted_ns, b->granted_ns);
  assert_int_equal(a->ended_ns, b->ended_ns);
  assert_int_equal(a->timeout_told, b->timeout_told);
  assert_int_equal(a->pid_start, b->pid_start);
  assert_int_equal(a->lease_pid_start, b->lease_pid_start);
  assert_int_equal(a->preemptible, b->preemptible);
  assert_int_equal(a->suspend_hold, b->suspend_hold);
  assert_int_equal(a->suspended_ns, b->suspended_ns);
  assert_int_equal(a->host_bytes, b->host_bytes);
  assert_int_equal(a->ckpt_mask, b->ckpt_mask);
  assert_int_equal(a->nprocs, b->nprocs);
  for (unsigned i = 0; i < a->nprocs; i++) {
    assert_int_equal(a->proc_pid[i], b->proc_pid[i]);
    assert_int_equal(a->proc_start[i], b->proc_start[i]);
  }
}

/* ---- Round trip, turns ------------------------------------------------------------------- */

static void test_round_trip(void **state) {
  const char *dir = *state;
  char sd[256];
  gpumd_ledger_t *l = open_ok(sub(dir, "state", sd, sizeof(sd)));
  gpumd_resv_t in[5];
  sample(&in[0], 1, GPUMD_RESV_GRANTED);
  sample(&in[1], 2, GPUMD_RESV_RELEASED);
  sample(&in[2], 3, GPUMD_RESV_QUEUED);
  sample(&in[3], 9, GPUMD_RESV_FAILED);
  sample(&in[4], 5, GPUMD_RESV_SUSPENDED);
  assert_int_equal(gpumd_ledger_begin_turn(l), 0);
  for (int i = 0; i < 5; i++)
    assert_int_equal(gpumd_ledger_put(l, &in[i]), 0);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);

  gpumd_resv_t *out = NULL;
  size_t n = 0;
  assert_int_equal(gpumd_ledger_load_all(l, &out, &n), 0);
  assert_int_equal(n, 3); /* the non-final ones, in id order */
  assert_resv_equal(&out[0], &in[0]);
  assert_resv_equal(&out[1], &in[2]);
  assert_resv_equal(&out[2], &in[4]); /* a suspended one's processes and facts */
  free(out);
  gpumd_resv_t one;
  assert_int_equal(gpumd_ledger_get(l, 9, &one), 0);
  assert_resv_equal(&one, &in[3]);
  assert_int_equal(gpumd_ledger_get(l, 10, &one), GPUM_ENOENT);
  uint64_t max = 0;
  assert_int_equal(gpumd_ledger_max_id(l, &max), 0);
  assert_int_equal(max, 9);
  /* A put replaces the row: r-1 released. */
  in[0].state = GPUMD_RESV_RELEASED;
  assert_int_equal(gpumd_ledger_put(l, &in[0]), 0); /* implicit turn */
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  assert_int_equal(gpumd_ledger_load_all(l, &out, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(out[0].id, 3);
  assert_int_equal(out[1].id, 5);
  free(out);
  gpumd_ledger_close(l);
}

/* Consecutive rows share most of their values, which the writer binds only when they change
 * (ledger_rows.c): rows that each differ from the one before in one field or in none, texts
 * going empty and back, names of each kind, in turns of one to three rows and through the
 * writer thread, and a row put again with other values: each reads back as last put. */
static void test_rows_share_values(void **state) {
  const char *dir = *state;
  char sd[256];
  gpumd_ledger_t *l = open_ok(sub(dir, "state", sd, sizeof(sd)));
  enum { N = 40 };
  gpumd_resv_t rows[N];
  sample(&rows[0], 1, GPUMD_RESV_GRANTED);
  for (int k = 1; k < N; k++) {
    gpumd_resv_t *r = &rows[k];
    *r = rows[k - 1];
    r->id = (uint64_t)k + 1;
    switch (k % 12) {
    case 0: /* the same values as the row before, but the id */
      break;
    case 1:
      r->label[0] = '\0';
      break;
    case 2:
      snprintf(r->label, sizeof(r->label), "back-%d", k);
      break;
    case 3:
      r->model[0] = r->slurm_job[0] = r->slurm_step[0] = '\0';
      break;
    case 4:
      r->lease = r->lease == GPUMD_LEASE_TTL ? GPUMD_LEASE_CONNECTION : GPUMD_LEASE_TTL;
      r->on_timeout =
          r->on_timeout == GPUMD_ON_TIMEOUT_WAIT ? GPUMD_ON_TIMEOUT_REJECT : GPUMD_ON_TIMEOUT_WAIT;
      break;
    case 5:
      r->uid++;
      r->pid = -r->pid;
      break;
    case 6:
      r->state = GPUMD_RESV_RELEASED;
      r->ended_ns = T0 + (uint64_t)k;
      break;
    case 7:
      r->state = GPUMD_RESV_QUEUED;
      r->device_mask = r->granted_ns = r->ended_ns = 0;
      break;
    case 8:
      r->reason[0] = '\0';
      r->want_mask = 0;
      break;
    case 9:
      snprintf(r->reason, sizeof(r->reason), "reason %d", k);
      snprintf(r->slurm_job, sizeof(r->slurm_job), "%d", 100 + k);
      snprintf(r->slurm_step, sizeof(r->slurm_step), "batch");
      break;
    case 10:
      r->expires_ns++;
      r->timeout_told = !r->timeout_told;
      r->want_mask = 3;
      break;
    default:
      snprintf(r->model, sizeof(r->model), "A100");
      r->bytes_per_gpu *= 2;
      break;
    }
  }
  int k = 0;
  for (int turn = 1; k < N; turn = turn % 3 + 1) {
    assert_int_equal(gpumd_ledger_begin_turn(l), 0);
    for (int i = 0; i < turn && k < N; i++, k++)
      assert_int_equal(gpumd_ledger_put(l, &rows[k]), 0);
    assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  }
  /* Through the writer thread: the first rows again, changed, and new ones. */
  assert_int_equal(gpumd_ledger_start_writer(l), 0);
  for (int i = 0; i < 6; i++) {
    snprintf(rows[i].label, sizeof(rows[i].label), "%s", i % 2 ? "" : "again");
    rows[i].state = GPUMD_RESV_RELEASED;
    rows[i].ended_ns = T0 + 1000 + (uint64_t)i;
    assert_int_equal(gpumd_ledger_put(l, &rows[i]), 0);
    assert_int_equal(gpumd_ledger_commit_async(l), 1);
    gpumd_ledger_wait(l);
    assert_int_equal(gpumd_ledger_poll(l), 1);
  }
  for (int i = 0; i < N; i++) {
    gpumd_resv_t got;
    assert_int_equal(gpumd_ledger_get(l, rows[i].id, &got), 0);
    assert_resv_equal(&got, &rows[i]);
  }
  gpumd_ledger_close(l);
}

static void test_empty_ledger(void **state) {
  const char *dir = *state;
  gpumd_ledger_t *l = open_ok(dir);
  gpumd_resv_t *out = (gpumd_resv_t *)&out;
  size_t n = 7;
  assert_int_equal(gpumd_ledger_load_all(l, &out, &n), 0);
  assert_null(out);
  assert_int_equal(n, 0);
  uint64_t max = 5;
  assert_int_equal(gpumd_ledger_max_id(l, &max), 0);
  assert_int_equal(max, 0);
  gpumd_ledger_close(l);
}

/* Rows in the reservations table as another connection sees them. */
static int outside_count(const char *path) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM reservations", -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  int n = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

/* Stages reservation id (QUEUED) and its audit row with reason (a turn's writes). */
static void stage_turn(gpumd_ledger_t *l, uint64_t id, const char *reason) {
  gpumd_resv_t r;
  sample(&r, id, GPUMD_RESV_QUEUED);
  assert_int_equal(gpumd_ledger_put(l, &r), 0);
  gpumd_ledger_audit_t a = {.reservation = id,
                            .from = GPUMD_RESV_NEW,
                            .to = GPUMD_RESV_QUEUED,
                            .time_ns = T0 + id,
                            .reason = reason,
                            .uid = 1000,
                            .pid = 42};
  assert_int_equal(gpumd_ledger_audit(l, &a), 0);
}

/* Checks that audit rows come for reservations 1, 2, 3, ... with the fields of
 * test_one_commit_per_turn; *user is the next expected id. */
static bool audit_in_order(void *user, const gpumd_ledger_audit_t *a) {
  uint64_t *next = user;
  assert_int_equal(a->reservation, *next);
  assert_int_equal(a->time_ns, T0 + *next);
  assert_int_equal(a->to, GPUMD_RESV_QUEUED);
  assert_string_equal(a->reason, "queued");
  assert_int_equal(a->pid, 42);
  ++*next;
  return true;
}

static void test_one_commit_per_turn(void **state) {
  const char *dir = *state;
  gpumd_ledger_t *l = open_ok(dir);
  uint64_t c0 = gpumd_ledger_commit_count(l);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0); /* nothing open: no commit */
  assert_int_equal(gpumd_ledger_commit_count(l), c0);

  assert_int_equal(gpumd_ledger_begin_turn(l), 0);
  assert_int_equal(gpumd_ledger_begin_turn(l), GPUM_ESTATE);
  for (uint64_t id = 1; id <= 50; id++)
    stage_turn(l, id, "queued");
  /* Not visible to another reader before the commit. */
  assert_int_equal(outside_count(gpumd_ledger_path(l)), 0);
  assert_int_equal(gpumd_ledger_commit_count(l), c0);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  assert_int_equal(gpumd_ledger_commit_count(l), c0 + 1); /* 100 writes, one commit */
  assert_int_equal(outside_count(gpumd_ledger_path(l)), 50);
  /* The 50 audit rows (written 8 to a statement, then the rest) in the order they came. */
  uint64_t next = 1;
  assert_int_equal(gpumd_ledger_audit_list(l, 0, audit_in_order, &next), 0);
  assert_int_equal(next, 51);

  /* A rolled-back turn leaves nothing. */
  gpumd_resv_t r;
  sample(&r, 51, GPUMD_RESV_QUEUED);
  assert_int_equal(gpumd_ledger_put(l, &r), 0);
  gpumd_ledger_rollback_turn(l);
  assert_int_equal(gpumd_ledger_get(l, 51, &r), GPUM_ENOENT);
  assert_int_equal(gpumd_ledger_commit_count(l), c0 + 1);
  gpumd_ledger_close(l);
}

/* The WAL is checkpointed by the ledger's own thread once commits have left 4 MiB in it
 * (4096 pages of 1 KiB): the count moves without any further commit, and the rows are all
 * there (and in the database file itself after the close). The thread is told once per MiB
 * of log past that, not at each of the 1,000 and more commits that follow. */
static void test_checkpoints_off_the_commit(void **state) {
  const char *dir = *state;
  gpumd_ledger_t *l = open_ok(dir);
  assert_int_equal(gpumd_ledger_checkpoint_count(l), 0);
  uint64_t id = 0;
  for (int turn = 0; turn < 3000; turn++) { /* a few pages per turn: well past 4096 */
    for (int k = 0; k < 4; k++) {
      gpumd_resv_t r;
      sample(&r, ++id, GPUMD_RESV_GRANTED);
      assert_int_equal(gpumd_ledger_put(l, &r), 0);
    }
    assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  }
  /* A commit here writes far fewer than 16 pages, so a MiB of log takes 64 commits or more:
   * told at most once per 64 commits (9 times in 3,000 here; before, at every commit once the
   * log had passed 4 MiB: well over a thousand times). */
  uint64_t asks = gpumd_ledger_checkpoint_asks(l);
  assert_true(asks >= 1 && asks <= 3000 / 64);
  struct timespec t0, now, nap = {0, 1000000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (gpumd_ledger_checkpoint_count(l) == 0) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    assert_true(now.tv_sec - t0.tv_sec < 20); /* a deadline, not a wait for it */
    nanosleep(&nap, NULL);
  }
  gpumd_resv_t back;
  assert_int_equal(gpumd_ledger_get(l, id, &back), 0);
  assert_int_equal(outside_count(gpumd_ledger_path(l)), (int)id);
  gpumd_ledger_close(l);
  l = open_ok(dir);
  assert_int_equal(gpumd_ledger_get(l, id, &back), 0);
  gpumd_ledger_close(l);
}

typedef struct {
  size_t n;
  gpumd_ledger_audit_t rows[8];
  char reasons[8][64];
} audit_acc_t;

static bool collect(void *user, const gpumd_ledger_audit_t *a) {
  audit_acc_t *acc = user;
  if (acc->n == 8)
    return false;
  acc->rows[acc->n] = *a;
  snprintf(acc->reasons[acc->n], sizeof(acc->reasons[0]), "%s", a->reason);
  acc->n++;
  return true;
}

static void test_audit_trail(void **state) {
  const char *dir = *state;
  gpumd_ledger_t *l = open_ok(dir);
  const gpumd_ledger_audit_t rows[] = {
      {.reservation = 1,
       .from = GPUMD_RESV_NEW,
       .to = GPUMD_RESV_QUEUED,
       .time_ns = T0,
       .reason = "queued",
       .uid = 1000,
       .pid = 10},
      {.reservation = 2,
       .from = GPUMD_RESV_NEW,
       .to = GPUMD_RESV_QUEUED,
       .time_ns = T0 + 1,
       .reason = NULL,
       .uid = 1001,
       .pid = 11},
      {.reservation = 1,
       .from = GPUMD_RESV_QUEUED,
       .to = GPUMD_RESV_GRANTED,
       .time_ns = T0 + 2,
       .reason = "granted on GPU 0",
       .uid = 0,
       .pid = 0},
      {.reservation = 1,
       .from = GPUMD_RESV_GRANTED,
       .to = GPUMD_RESV_FAILED,
       .time_ns = T0 + 3,
       .reason = "GPU 0 failed",
       .uid = 0,
       .pid = 0},
  };
  assert_int_equal(gpumd_ledger_begin_turn(l), 0);
  for (size_t i = 0; i < 4; i++)
    assert_int_equal(gpumd_ledger_audit(l, &rows[i]), 0);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  audit_acc_t acc = {0};
  assert_int_equal(gpumd_ledger_audit_list(l, 1, collect, &acc), 0);
  assert_int_equal(acc.n, 3);
  assert_int_equal(acc.rows[0].from, GPUMD_RESV_NEW);
  assert_int_equal(acc.rows[1].to, GPUMD_RESV_GRANTED);
  assert_int_equal(acc.rows[2].to, GPUMD_RESV_FAILED);
  assert_int_equal(acc.rows[2].time_ns, T0 + 3);
  assert_string_equal(acc.reasons[2], "GPU 0 failed");
  assert_true(acc.rows[0].id < acc.rows[1].id && acc.rows[1].id < acc.rows[2].id);
  memset(&acc, 0, sizeof(acc));
  assert_int_equal(gpumd_ledger_audit_list(l, 0, collect, &acc), 0);
  assert_int_equal(acc.n, 4);
  assert_int_equal(acc.rows[1].reservation, 2);
  assert_string_equal(acc.reasons[1], "");
  assert_int_equal(acc.rows[1].uid, 1001);
  gpumd_ledger_close(l);
}

/* ---- Reopen, crash, files ----------------------------------------------------------------- */

static void test_reopen_after_close(void **state) {
  const char *dir = *state;
  char sd[256], db[300];
  sub(dir, "a/b/state", sd, sizeof(sd)); /* parents are created too */
  gpumd_ledger_t *l = open_ok(sd);
  gpumd_resv_t r;
  sample(&r, 12, GPUMD_RESV_GRANTED);
  assert_int_equal(gpumd_ledger_put(l, &r), 0);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  sample(&r, 13, GPUMD_RESV_GRANTED);
  assert_int_equal(gpumd_ledger_put(l, &r), 0); /* never committed: lost on close */
  char wal[320];
  struct stat st;
  snprintf(wal, sizeof(wal), "%s-wal", gpumd_ledger_path(l));
  assert_int_equal(stat(wal, &st), 0); /* WAL mode, and the log is private too */
  assert_int_equal(st.st_mode & 0777, 0600);
  gpumd_ledger_close(l);

  assert_int_equal(stat(sd, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  assert_int_equal(stat(sub(sd, GPUMD_LEDGER_FILE, db, sizeof(db)), &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);

  l = open_ok(sd);
  gpumd_resv_t *out = NULL;
  size_t n = 0;
  assert_int_equal(gpumd_ledger_load_all(l, &out, &n), 0);
  assert_int_equal(n, 1);
  sample(&r, 12, GPUMD_RESV_GRANTED);
  assert_resv_equal(&out[0], &r);
  free(out);
  gpumd_ledger_close(l);
}

static void test_commit_survives_process_death(void **state) {
  const char *dir = *state;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    gpumd_ledger_t *l = NULL;
    gpumd_resv_t r;
    sample(&r, 5, GPUMD_RESV_GRANTED);
    if (gpumd_ledger_open(dir, NULL, &l) != 0 || gpumd_ledger_put(l, &r) != 0 ||
        gpumd_ledger_commit_turn(l) != 0)
      _exit(1);
    sample(&r, 6, GPUMD_RESV_GRANTED);
    gpumd_ledger_put(l, &r); /* uncommitted at death */
    _exit(0);                /* no close, no checkpoint: like SIGKILL after the commit */
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  gpumd_ledger_t *l = open_ok(dir);
  gpumd_resv_t *out = NULL;
  size_t n = 0;
  assert_int_equal(gpumd_ledger_load_all(l, &out, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(out[0].id, 5);
  free(out);
  gpumd_ledger_close(l);
}

static void test_second_open_is_refused(void **state) {
  const char *dir = *state;
  gpumd_ledger_t *l = open_ok(dir);
  gpumd_ledger_t *l2 = NULL;
  assert_int_equal(gpumd_ledger_open(dir, NULL, &l2), GPUM_EBUSY);
  assert_non_null(strstr(gpum_last_error(), "in use by another gpumd"));
  assert_null(l2);
  gpumd_ledger_close(l);
  gpumd_ledger_close(open_ok(dir)); /* free again after close */
}

static void test_sync_full_option(void **state) {
  const char *dir = *state;
  gpumd_ledger_opts_t o = {.sync_full = true};
  gpumd_ledger_t *l = NULL;
  assert_int_equal(gpumd_ledger_open(dir, &o, &l), 0);
  gpumd_resv_t r;
  sample(&r, 1, GPUMD_RESV_QUEUED);
  assert_int_equal(gpumd_ledger_put(l, &r), 0);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  assert_int_equal(gpumd_ledger_get(l, 1, &r), 0);
  gpumd_ledger_close(l);
}

/* ---- Errors ------------------------------------------------------------------------------- */

static void test_bad_state_dirs(void **state) {
  const char *dir = *state;
  gpumd_ledger_t *l = NULL;
  assert_int_equal(gpumd_ledger_open(NULL, NULL, &l), GPUM_EINVAL);
  assert_int_equal(gpumd_ledger_open("", NULL, &l), GPUM_EINVAL);
  /* A parent that is a regular file: the directory cannot be created, even by root. */
  char file[256], sd[300];
  sub(dir, "plain-file", file, sizeof(file));
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fclose(f);
  int rc = gpumd_ledger_open(sub(file, "state", sd, sizeof(sd)), NULL, &l);
  assert_true(rc == GPUM_EIO || rc == GPUM_EPERM);
  assert_non_null(strstr(gpum_last_error(), "plain-file"));
  /* The state dir itself is a file. */
  rc = gpumd_ledger_open(file, NULL, &l);
  assert_true(rc == GPUM_EIO || rc == GPUM_EPERM);
  assert_non_null(strstr(gpum_last_error(), "not a directory"));
  /* An unwritable directory (permission bits bind only non-root users). */
  if (geteuid() != 0) {
    char ro[256];
    sub(dir, "readonly", ro, sizeof(ro));
    assert_int_equal(mkdir(ro, 0500), 0);
    assert_int_equal(gpumd_ledger_open(ro, NULL, &l), GPUM_EPERM);
    assert_non_null(strstr(gpum_last_error(), "not writable"));
    chmod(ro, 0700);
  }
}

static void test_garbage_database(void **state) {
  const char *dir = *state;
  char db[300];
  FILE *f = fopen(sub(dir, GPUMD_LEDGER_FILE, db, sizeof(db)), "w");
  assert_non_null(f);
  for (int i = 0; i < 1024; i++)
    fputs("this is not a database ", f);
  fclose(f);
  gpumd_ledger_t *l = (gpumd_ledger_t *)0x1;
  assert_int_equal(gpumd_ledger_open(dir, NULL, &l), GPUM_EIO);
  assert_ptr_equal(l, (gpumd_ledger_t *)0x1);
  const char *msg = gpum_last_error();
  assert_non_null(strstr(msg, db));
  assert_non_null(strstr(msg, "not a database"));
}

static int query_int(const char *db, const char *sql);
static int user_version(const char *db);

/* The size of a file, or -1 when it does not exist. */
static long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* The message of a refused ledger names the file and what to do. */
static void assert_refused(const char *dir, const char *db, const char *what) {
  gpumd_ledger_t *l = (gpumd_ledger_t *)0x1;
  assert_int_equal(gpumd_ledger_open(dir, NULL, &l), GPUM_EIO);
  assert_ptr_equal(l, (gpumd_ledger_t *)0x1);
  const char *msg = gpum_last_error();
  if (strstr(msg, db) == NULL || strstr(msg, what) == NULL ||
      strstr(msg, "Restore it from a backup") == NULL || strstr(msg, "docs/operations.md") == NULL)
    fail_msg("unexpected message: %s", msg);
}

/* A ledger.db of 0 bytes (truncated, a bad restore) is refused, never taken for a new ledger
 * (whose ids would start again at r-1), and left as it is. */
static void test_empty_file_refused(void **state) {
  const char *dir = *state;
  char db[300], wal[310];
  FILE *f = fopen(sub(dir, GPUMD_LEDGER_FILE, db, sizeof(db)), "w");
  assert_non_null(f);
  fclose(f);
  assert_refused(dir, db, "is empty (0 bytes)");
  assert_int_equal(file_size(db), 0);
  snprintf(wal, sizeof wal, "%s-wal", db);
  assert_int_equal(file_size(wal), -1);
}

/* An SQLite database without gpumd's schema is refused: emptied, or not a ledger. */
static void test_no_schema_refused(void **state) {
  const char *dir = *state;
  char db[300];
  sqlite3 *h = NULL;
  assert_int_equal(sqlite3_open(sub(dir, GPUMD_LEDGER_FILE, db, sizeof(db)), &h), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, "CREATE TABLE t(a); DROP TABLE t", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(h);
  long size = file_size(db);
  assert_true(size > 0);
  assert_refused(dir, db, "no gpumd schema");
  assert_int_equal(file_size(db), size);
  assert_int_equal(query_int(db, "SELECT count(*) FROM sqlite_master"), 0); /* nothing made */

  assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, "CREATE TABLE other(a)", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(h);
  assert_refused(dir, db, "no gpumd schema");
}

/* A database that SQLite finds damaged (a page of the reservations table overwritten) is
 * refused with what PRAGMA quick_check says. */
static void test_corrupt_database_refused(void **state) {
  const char *dir = *state;
  char db[300];
  sub(dir, GPUMD_LEDGER_FILE, db, sizeof(db));
  gpumd_ledger_t *l = open_ok(dir);
  for (uint64_t id = 1; id <= 50; id++) {
    gpumd_resv_t r;
    sample(&r, id, GPUMD_RESV_RELEASED);
    assert_int_equal(gpumd_ledger_put(l, &r), 0);
  }
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  gpumd_ledger_close(l);
  int root = query_int(db, "SELECT rootpage FROM sqlite_master WHERE name = 'reservations'");
  int page = query_int(db, "PRAGMA page_size");
  assert_true(root > 1 && page > 0);
  FILE *f = fopen(db, "r+b");
  assert_non_null(f);
  assert_int_equal(fseek(f, (long)(root - 1) * page, SEEK_SET), 0);
  assert_int_equal(fputc(0x00, f), 0x00); /* not a b-tree page type */
  fclose(f);
  assert_refused(dir, db, "fails SQLite's integrity check");
}

/* A new ledger is made whole beside its final name and moved there: a ledger.db that exists
 * always has the schema. What a crash left of an earlier try is replaced. A ledger.db that is
 * missing while its log (ledger.db-wal) is there was deleted: refused. */
static void test_new_ledger_made_whole(void **state) {
  const char *dir = *state;
  char db[300], tmp[310];
  sub(dir, GPUMD_LEDGER_FILE, db, sizeof(db));
  snprintf(tmp, sizeof tmp, "%s.new", db);
  FILE *f = fopen(tmp, "w"); /* left by a crash while creating */
  assert_non_null(f);
  fclose(f);
  gpumd_ledger_t *l = open_ok(dir);
  assert_int_equal(file_size(tmp), -1);
  assert_int_equal(user_version(db), GPUMD_LEDGER_SCHEMA_VERSION);
  struct stat st;
  assert_int_equal(stat(db, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  gpumd_ledger_close(l);
  snprintf(tmp, sizeof tmp, "%s.new-wal", db);
  assert_int_equal(file_size(tmp), -1);
  snprintf(tmp, sizeof tmp, "%s-wal", db);
  assert_int_equal(file_size(tmp), -1);

  /* ledger.db gone but its log left: deleted, not new. */
  f = fopen(tmp, "w");
  assert_non_null(f);
  fputs("a log of transactions", f);
  fclose(f);
  assert_int_equal(unlink(db), 0);
  assert_refused(dir, db, "is missing but its log");
  assert_int_equal(file_size(db), -1);
}

static void test_newer_schema_refused(void **state) {
  const char *dir = *state;
  gpumd_ledger_close(open_ok(dir));
  char db[300];
  sqlite3 *h = NULL;
  assert_int_equal(sqlite3_open(sub(dir, GPUMD_LEDGER_FILE, db, sizeof(db)), &h), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(h);
  gpumd_ledger_t *l = NULL;
  assert_int_equal(gpumd_ledger_open(dir, NULL, &l), GPUM_EIO);
  assert_non_null(strstr(gpum_last_error(), "schema version 99 is newer"));
}

/* The version-1 schema exactly as gpumd created it before start times were recorded. */
static const char old_schema_v1[] =
    "CREATE TABLE reservations ("
    " id INTEGER PRIMARY KEY, token TEXT NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL,"
    " uid INTEGER NOT NULL, pid INTEGER NOT NULL, label TEXT NOT NULL,"
    " bytes_per_gpu INTEGER NOT NULL, gpus INTEGER NOT NULL, model TEXT NOT NULL,"
    " min_memory INTEGER NOT NULL, want_mask INTEGER NOT NULL, priority INTEGER NOT NULL,"
    " timeout_ms INTEGER NOT NULL, on_timeout TEXT NOT NULL, lease TEXT NOT NULL,"
    " lease_pid INTEGER NOT NULL, ttl_ms INTEGER NOT NULL, expires_ns INTEGER NOT NULL,"
    " device_mask INTEGER NOT NULL, created_ns INTEGER NOT NULL, granted_ns INTEGER NOT NULL,"
    " ended_ns INTEGER NOT NULL, timeout_told INTEGER NOT NULL);"
    "CREATE INDEX reservations_state ON reservations(state);"
    "CREATE TABLE audit ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, reservation INTEGER NOT NULL,"
    " from_state TEXT NOT NULL, to_state TEXT NOT NULL, time_ns INTEGER NOT NULL,"
    " reason TEXT NOT NULL, uid INTEGER NOT NULL, pid INTEGER NOT NULL);"
    "CREATE INDEX audit_reservation ON audit(reservation);"
    "INSERT INTO reservations VALUES (7, '0123456789abcdef0123456789abcdef', 'GRANTED',"
    " 'granted', 1000, 4242, 'old', 1073741824, 1, '', 0, 0, 0, 0, 'reject', 'pid', 4343, 0,"
    " 0, 1, 100, 200, 0, 0);"
    "INSERT INTO audit (reservation, from_state, to_state, time_ns, reason, uid, pid)"
    " VALUES (7, 'QUEUED', 'GRANTED', 200, 'granted', 1000, 4242);"
    "PRAGMA user_version = 1;";

/* The integer in the first column of a query's first row, or -1. */
static int query_int(const char *db, const char *sql) {
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  int v = -1;
  if (sqlite3_open(db, &h) == SQLITE_OK && sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

static int user_version(const char *db) {
  return query_int(db, "PRAGMA user_version");
}

static int audit_rows(gpumd_ledger_t *l, uint64_t id);

static void test_migration_from_v1(void **state) {
  const char *dir = *state;
  char db[300];
  sqlite3 *h = NULL;
  assert_int_equal(sqlite3_open(sub(dir, GPUMD_LEDGER_FILE, db, sizeof(db)), &h), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, old_schema_v1, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(h);
  assert_int_equal(user_version(db), 1);

  gpumd_ledger_t *l = open_ok(dir);
  gpumd_resv_t r, back;
  assert_int_equal(gpumd_ledger_get(l, 7, &r), 0);
  assert_int_equal(r.state, GPUMD_RESV_GRANTED);
  assert_int_equal(r.lease, GPUMD_LEASE_PID);
  assert_int_equal(r.pid, 4242);
  assert_int_equal(r.lease_pid, 4343);
  assert_int_equal(r.pid_start, 0); /* unknown */
  assert_int_equal(r.lease_pid_start, 0);
  /* The migrated table takes the new fields. */
  sample(&r, 8, GPUMD_RESV_GRANTED);
  assert_int_equal(gpumd_ledger_put(l, &r), 0);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  gpumd_ledger_close(l);
  assert_int_equal(user_version(db), GPUMD_LEDGER_SCHEMA_VERSION);
  assert_int_equal(query_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index'"), 0);
  assert_int_equal(GPUMD_LEDGER_SCHEMA_VERSION, 9);
  /* Version 9: the old rows are not preemptible and hold no suspend facts. */
  assert_int_equal(query_int(db, "SELECT count(*) FROM reservations WHERE preemptible = 0 AND "
                                 "suspend = ''"),
                   query_int(db, "SELECT count(*) FROM reservations"));
  /* Version 8: the highest id, apart from the rows. */
  assert_int_equal(query_int(db, "SELECT value FROM meta WHERE key = 'max_id'"), 8);
  /* Version 7: the old row has no Slurm ids; the new one keeps them. */
  assert_int_equal(query_int(db, "SELECT count(*) FROM reservations WHERE id = 7 AND "
                                 "slurm_job = '' AND slurm_step = ''"),
                   1);
  assert_int_equal(query_int(db, "SELECT count(*) FROM reservations WHERE id = 8 AND "
                                 "slurm_job = '4294967295_8' AND slurm_step = '4294967294'"),
                   1);
  /* Version 6: the device switches' table, empty. */
  assert_int_equal(query_int(db, "SELECT count(*) FROM device_admin"), 0);
  /* Version 4: no index on state, no AUTOINCREMENT; the old audit row kept, with its id. */
  assert_int_equal(query_int(db, "SELECT count(*) FROM sqlite_master WHERE name = "
                                 "'reservations_state' OR (name = 'audit' AND sql LIKE "
                                 "'%AUTOINCREMENT%')"),
                   0);
  assert_int_equal(query_int(db, "SELECT count(*) FROM audit WHERE id = 1 AND reservation = 7 AND "
                                 "to_state = 'GRANTED'"),
                   1);

  l = open_ok(dir); /* a second open does not migrate again */
  assert_int_equal(audit_rows(l, 7), 1);
  assert_int_equal(gpumd_ledger_get(l, 8, &back), 0);
  assert_resv_equal(&r, &back);
  gpumd_resv_t *all = NULL;
  size_t n = 0;
  assert_int_equal(gpumd_ledger_load_all(l, &all, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(all[0].id, 7);
  assert_int_equal(all[0].pid_start, 0);
  free(all);
  gpumd_ledger_close(l);
}

/* ---- Process start times ------------------------------------------------------------------- */

static void test_pid_start_time(void **state) {
  (void)state;
  uint64_t self = 0, again = 0;
  assert_int_equal(gpumd_pid_start_time((int32_t)getpid(), &self), 0);
  assert_true(self > 0);
  assert_int_equal(gpumd_pid_start_or_zero((int32_t)getpid()), self);
  assert_true(gpumd_pid_is_alive((int32_t)getpid(), self));
  assert_true(gpumd_pid_is_alive((int32_t)getpid(), 0));         /* unknown: pid alone */
  assert_false(gpumd_pid_is_alive((int32_t)getpid(), self + 1)); /* "reused" */
  /* A child started later has a later (or equal) start time; once reaped it is dead. */
  int go[2];
  assert_int_equal(pipe(go), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    char c;
    close(go[1]);
    _exit(read(go[0], &c, 1) == 0 ? 0 : 1);
  }
  close(go[0]);
  assert_int_equal(gpumd_pid_start_time((int32_t)child, &again), 0);
  assert_true(again >= self);
  assert_true(gpumd_pid_is_alive((int32_t)child, again));
  close(go[1]);
  int st = 0;
  assert_int_equal(waitpid(child, &st, 0), child);
  assert_false(gpumd_pid_is_alive((int32_t)child, again));
  assert_int_equal(gpumd_pid_start_time((int32_t)child, &again), GPUM_ENOENT);
  /* Bad input. */
  assert_int_equal(gpumd_pid_start_time(0, &again), GPUM_EINVAL);
  assert_int_equal(gpumd_pid_start_time(-5, &again), GPUM_EINVAL);
  assert_false(gpumd_pid_is_alive(0, 0));
  assert_false(gpumd_pid_is_alive(-1, 0));
}

/* ---- Recovery policy ---------------------------------------------------------------------- */

/* Live processes: pid 100 started at tick 5000, pid 200 at tick 7000, pid 300 unknown. */
static bool alive_set(void *user, int32_t pid, uint64_t start_time) {
  const int32_t *alive = user; /* 0-terminated */
  for (; *alive != 0; alive++)
    if (*alive == pid) {
      uint64_t real = pid == 100 ? 5000 : pid == 200 ? 7000 : 0;
      return start_time == 0 || real == 0 || start_time == real;
    }
  return false;
}

/* sample() with unknown start times (0), as in a row written before they were recorded. */
static void sample_unknown(gpumd_resv_t *r, uint64_t id, gpumd_resv_state_t st) {
  sample(r, id, st);
  r->pid_start = 0;
  r->lease_pid_start = 0;
}

static void test_recovery_decisions(void **state) {
  (void)state;
  int32_t alive[] = {100, 200, 300, 0};
  gpumd_recover_decision_t d;
  gpumd_resv_t r;
  const uint64_t now = T0 + 100 * SEC;

  /* pid lease. */
  sample_unknown(&r, 1, GPUMD_RESV_GRANTED);
  r.lease = GPUMD_LEASE_PID;
  r.lease_pid = 100;
  gpumd_ledger_recover_decide(&r, now, alive_set, alive, &d);
  assert_int_equal(d.action, GPUMD_RECOVER_KEEP);
  r.lease_pid = 101;
  gpumd_ledger_recover_decide(&r, now, alive_set, alive, &d);
  assert_int_equal(d.action, GPUMD_RECOVER_END);
  assert_int_equal(d.to, GPUMD_RESV_RELEASED);
  assert_string_equal(d.reason, "lease pid 101 exited while gpumd was down");
  r.state = GPUMD_RESV_QUEUED;
  gpumd_ledger_recover_decide(&r, now, alive_set, alive, &d);
  assert_int_equal(d.action, GPUMD_RECOVER_END);
  assert_int_equal(d.to, GPUMD_RESV_CANCELLED);

  /* ttl lease: the deadline, not the pid, decides. */
  sample_unknown(&r, 2, GPUMD_RESV_GRANTED);
  r.lease = GPUMD_LEASE_TTL;
  r.pid = 999; /* dead */
  r.expires_ns = now + 1;
  gpumd_ledger_recover_decide(&r, now, alive_set, alive, &d);
  assert_int_equal(d.action, GPUMD_RECOVER_KEEP);
  r.expires_ns = now;
  gpumd_ledger_recover_decide(&r, now, alive_set, alive, &d);
  assert_int_equal(d.action, GPUMD_RECOVER_END);
  assert_int_equal(d.to, GPUMD_RESV_EXPIRED);

  /* connection lease: the owner may re-attach while it lives. */
  sample_unknown(&r, 3, GPUMD_RESV_GRANTED);
  r.lease = GPUMD_LEASE_CONNECTION;
  r.pid = 200;
  gpumd_ledger_recover_decide(&r, now, alive_set, alive, &d);
  assert_int_equal(d.action, GPUMD_RECOVER_AWAIT_ATTACH);
  assert_int_equal(d.to, GPUMD_RESV_RELEASED);
  assert_non_null(strstr(d.reason, "re-attach"));
  r.pid = 201;
  gpumd_ledger_recover_decide(&r, now, alive_set, alive, &d);
  assert_int_equal(d.action, GPUMD_RECOVER_END);
  assert_int_equal(d.to, GPUMD_RESV_RELEASED);
  assert_string_equal(d.reason, "owner pid 201 exited while gpumd was down");
  r.state = GPUMD_RESV_QUEUED;
  r.pid = 200;
  gpumd_ledger_recover_decide(&r, now, alive_set, alive, &d);
  assert_int_equal(d.action, GPUMD_RECOVER_AWAIT_ATTACH);
  assert_int_equal(d.to, GPUMD_RESV_CANCELLED);

  /* A recorded start time that differs: the pid was reused, the owner is dead. */
  sample_unknown(&r, 5, GPUMD_RESV_GRANTED);
  r.lease = GPUMD_LEASE_PID;
  r.lease_pid = 100;
  r.lease_pid_start = 5000;
  gpumd_ledger_recover_decide(&r, now, alive_set, alive, &d);
  assert_int_equal(d.action, GPUMD_RECOVER_KEEP);
  r.lease_pid_start = 4999;
  gpumd_ledger_recover_decide(&r, now, alive_set, alive, &d);
  assert_int_equal(d.action, GPUMD_RECOVER_END);
  assert_int_equal(d.to, GPUMD_RESV_RELEASED);
  assert_string_equal(d.reason, "lease pid 100 exited while gpumd was down");
  r.lease_pid_start = 0; /* unknown (a version-1 row): only the pid counts */
  gpumd_ledger_recover_decide(&r, now, alive_set, alive, &d);
  assert_int_equal(d.action, GPUMD_RECOVER_KEEP);
  sample_unknown(&r, 6, GPUMD_RESV_GRANTED);
  r.lease = GPUMD_LEASE_CONNECTION;
  r.pid = 200;
  r.pid_start = 7000;
  gpumd_ledger_recover_decide(&r, now, alive_set, alive, &d);
  assert_int_equal(d.action, GPUMD_RECOVER_AWAIT_ATTACH);
  r.pid_start = 7001;
  gpumd_ledger_recover_decide(&r, now, alive_set, alive, &d);
  assert_int_equal(d.action, GPUMD_RECOVER_END);
  assert_string_equal(d.reason, "owner pid 200 exited while gpumd was down");

  /* A final one stays final. */
  sample_unknown(&r, 4, GPUMD_RESV_EXPIRED);
  gpumd_ledger_recover_decide(&r, now, alive_set, alive, &d);
  assert_int_equal(d.action, GPUMD_RECOVER_END);
  assert_int_equal(d.to, GPUMD_RESV_EXPIRED);
}

/* ---- Schema version 3: devices by UUID, migration from v2, retention ---------------------- */

static const char *const uuids_abc[] = {"GPU-aaaa", "GPU-bbbb", "GPU-cccc"};

static void test_devices_by_uuid(void **state) {
  const char *dir = *state;
  gpumd_ledger_t *l = open_ok(dir);
  assert_int_equal(gpumd_ledger_set_devices(l, uuids_abc, 3), 0);
  gpumd_resv_t on_b, on_c, queued, by_index;
  sample(&on_b, 1, GPUMD_RESV_GRANTED);
  on_b.device_mask = 0x2; /* GPU-bbbb */
  on_b.want_mask = 0x3;   /* GPU-aaaa, GPU-bbbb */
  sample(&on_c, 2, GPUMD_RESV_GRANTED);
  on_c.device_mask = 0x5; /* GPU-aaaa, GPU-cccc */
  on_c.want_mask = 0;
  sample(&queued, 3, GPUMD_RESV_QUEUED);
  queued.want_mask = 0x4; /* GPU-cccc */
  sample(&by_index, 4, GPUMD_RESV_GRANTED);
  by_index.device_mask = UINT64_C(1) << 9; /* index 9 has no UUID: stored as the index */
  by_index.want_mask = 0;
  gpumd_resv_t granted_want_c, queued_ac_1, queued_ac_2;
  sample(&granted_want_c, 5, GPUMD_RESV_GRANTED);
  granted_want_c.device_mask = 0x1; /* GPU-aaaa */
  granted_want_c.want_mask = 0x5;   /* GPU-aaaa, GPU-cccc */
  sample(&queued_ac_1, 6, GPUMD_RESV_QUEUED);
  queued_ac_1.want_mask = 0x5;
  queued_ac_1.gpus = 1;
  sample(&queued_ac_2, 7, GPUMD_RESV_QUEUED);
  queued_ac_2.want_mask = 0x5;
  queued_ac_2.gpus = 2;
  /* A suspended job checkpointed from GPU-aaaa, being resumed on GPU-bbbb: both by UUID. */
  on_b.nprocs = 1;
  on_b.proc_pid[0] = 4242;
  on_b.ckpt_mask = 0x1;
  assert_int_equal(gpumd_ledger_put(l, &on_b), 0);
  assert_int_equal(gpumd_ledger_put(l, &on_c), 0);
  assert_int_equal(gpumd_ledger_put(l, &queued), 0);
  assert_int_equal(gpumd_ledger_put(l, &by_index), 0);
  assert_int_equal(gpumd_ledger_put(l, &granted_want_c), 0);
  assert_int_equal(gpumd_ledger_put(l, &queued_ac_1), 0);
  assert_int_equal(gpumd_ledger_put(l, &queued_ac_2), 0);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  gpumd_ledger_close(l);

  /* The node comes back renumbered (B is now 0, A is 1) and without GPU-cccc. */
  static const char *const renumbered[] = {"GPU-bbbb", "GPU-aaaa"};
  l = open_ok(dir);
  assert_int_equal(gpumd_ledger_set_devices(l, renumbered, 2), 0);
  gpumd_ledger_row_t *rows = NULL;
  size_t n = 0;
  assert_int_equal(gpumd_ledger_load_rows(l, &rows, &n), 0);
  assert_int_equal(n, 7);
  assert_int_equal(rows[0].r.device_mask, 0x1); /* still GPU-bbbb, now index 0 */
  assert_int_equal(rows[0].r.want_mask, 0x3);
  assert_int_equal(rows[0].r.ckpt_mask, 0x2); /* still GPU-aaaa, now index 1 */
  assert_int_equal(rows[0].r.nprocs, 1);
  assert_string_equal(rows[0].gone, "");
  assert_int_equal(rows[1].r.device_mask, 0x2); /* GPU-aaaa kept, GPU-cccc gone */
  assert_string_equal(rows[1].gone, "GPU-cccc");
  assert_int_equal(rows[2].r.want_mask, 0);
  assert_string_equal(rows[2].gone, "GPU-cccc");
  assert_int_equal(rows[3].r.device_mask, UINT64_C(1) << 9); /* indices only: kept */
  assert_string_equal(rows[3].gone, "");
  /* An explicit device that is gone matters only to a queued request left with too few. */
  assert_int_equal(rows[4].r.device_mask, 0x2);
  assert_int_equal(rows[4].r.want_mask, 0x2);
  assert_string_equal(rows[4].gone, "");
  assert_int_equal(rows[5].r.want_mask, 0x2);
  assert_string_equal(rows[5].gone, "");
  assert_string_equal(rows[6].gone, "GPU-cccc");

  /* Recovery: a gone device fails the reservation, named in the reason. */
  gpumd_recover_decision_t d;
  gpumd_ledger_recover_decide_row(&rows[1], T0, NULL, NULL, &d);
  assert_int_equal(d.action, GPUMD_RECOVER_END);
  assert_int_equal(d.to, GPUMD_RESV_FAILED);
  assert_string_equal(d.reason, "device GPU-cccc gone after restart");
  gpumd_ledger_recover_decide_row(&rows[2], T0, NULL, NULL, &d);
  assert_int_equal(d.to, GPUMD_RESV_FAILED);
  free(rows);

  /* load_all and get see the same mapping (gone devices dropped). */
  gpumd_resv_t *all = NULL;
  assert_int_equal(gpumd_ledger_load_all(l, &all, &n), 0);
  assert_int_equal(n, 7);
  assert_int_equal(all[0].device_mask, 0x1);
  free(all);
  gpumd_resv_t one;
  assert_int_equal(gpumd_ledger_get(l, 1, &one), 0);
  assert_int_equal(one.device_mask, 0x1);
  /* Without devices set, the stored indices come back as they were. */
  gpumd_ledger_close(l);
  l = open_ok(dir);
  assert_int_equal(gpumd_ledger_get(l, 1, &one), 0);
  assert_int_equal(one.device_mask, 0x2);
  gpumd_ledger_close(l);
}

static void test_set_devices_bad_input(void **state) {
  const char *dir = *state;
  gpumd_ledger_t *l = open_ok(dir);
  static const char *const comma[] = {"GPU-a,b"};
  assert_int_equal(gpumd_ledger_set_devices(l, comma, 1), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "GPU-a,b"));
  char big[200];
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  const char *const too_long[] = {big};
  assert_int_equal(gpumd_ledger_set_devices(l, too_long, 1), GPUM_EINVAL);
  assert_int_equal(gpumd_ledger_set_devices(l, uuids_abc, GPUMD_SCHED_MAX_DEVICES + 1),
                   GPUM_EINVAL);
  static const char *const holes[] = {NULL, "GPU-x", ""};
  assert_int_equal(gpumd_ledger_set_devices(l, holes, 3), 0);
  gpumd_ledger_close(l);
}

/* The version-2 migration exactly as gpumd applied it before UUIDs were stored. */
static const char old_migrate_v2[] =
    "ALTER TABLE reservations ADD COLUMN pid_start INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE reservations ADD COLUMN lease_pid_start INTEGER NOT NULL DEFAULT 0;"
    "INSERT INTO reservations VALUES (9, 'fedcba9876543210fedcba9876543210', 'GRANTED',"
    " 'granted', 1000, 4242, 'v2', 1073741824, 1, '', 0, 0, 0, 0, 'reject', 'ttl', 0, 60000,"
    " 9000000000000000000, 2, 100, 200, 0, 0, 55, 0);"
    "PRAGMA user_version = 2;";

static void test_migration_from_v2(void **state) {
  const char *dir = *state;
  char db[300];
  sqlite3 *h = NULL;
  assert_int_equal(sqlite3_open(sub(dir, GPUMD_LEDGER_FILE, db, sizeof(db)), &h), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, old_schema_v1, NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, old_migrate_v2, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(h);
  assert_int_equal(user_version(db), 2);

  gpumd_ledger_t *l = open_ok(dir);
  assert_int_equal(user_version(db), GPUMD_LEDGER_SCHEMA_VERSION);
  assert_int_equal(query_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index'"), 0);
  assert_int_equal(gpumd_ledger_set_devices(l, uuids_abc, 3), 0);
  gpumd_ledger_row_t *rows = NULL;
  size_t n = 0;
  assert_int_equal(gpumd_ledger_load_rows(l, &rows, &n), 0);
  assert_int_equal(n, 2); /* r-7 of the v1 rows and r-9 */
  assert_int_equal(rows[1].r.id, 9);
  assert_int_equal(rows[1].r.device_mask, 0x2); /* no UUIDs stored: the index is kept */
  assert_int_equal(rows[1].r.pid_start, 55);
  assert_string_equal(rows[1].gone, "");
  /* Re-stored, the row gets its UUID and follows it. */
  assert_int_equal(gpumd_ledger_put(l, &rows[1].r), 0);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  free(rows);
  gpumd_ledger_close(l);
  static const char *const moved[] = {"GPU-cccc", "GPU-bbbb", "GPU-aaaa"};
  l = open_ok(dir);
  assert_int_equal(gpumd_ledger_set_devices(l, moved, 3), 0);
  gpumd_resv_t r;
  assert_int_equal(gpumd_ledger_get(l, 9, &r), 0);
  assert_int_equal(r.device_mask, 0x2); /* GPU-bbbb is index 1 in both */
  gpumd_ledger_close(l);
  l = open_ok(dir);
  static const char *const swapped[] = {"GPU-bbbb", "GPU-aaaa"};
  assert_int_equal(gpumd_ledger_set_devices(l, swapped, 2), 0);
  assert_int_equal(gpumd_ledger_get(l, 9, &r), 0);
  assert_int_equal(r.device_mask, 0x1);
  gpumd_ledger_close(l);
}

static int count_rows(const char *db, const char *sql) {
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  int v = -1;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

static bool count_audit(void *user, const gpumd_ledger_audit_t *a) {
  (void)a;
  ++*(int *)user;
  return true;
}

/* Audit rows of reservation id (0 = all), read through the ledger itself. */
static int audit_rows(gpumd_ledger_t *l, uint64_t id) {
  int n = 0;
  assert_int_equal(gpumd_ledger_audit_list(l, id, count_audit, &n), 0);
  return n;
}

static bool exists(gpumd_ledger_t *l, uint64_t id) {
  gpumd_resv_t r;
  return gpumd_ledger_get(l, id, &r) == 0;
}

static void test_prune(void **state) {
  const char *dir = *state;
  char db[300];
  sub(dir, GPUMD_LEDGER_FILE, db, sizeof(db));
  gpumd_ledger_t *l = open_ok(dir);
  /* r-1..r-10 ended at T0+1s..T0+10s; r-11, r-12 live; r-13 ended first of all but has the
   * highest id. Two audit rows each, written at T0+id s - 1 ns. */
  for (uint64_t id = 1; id <= 13; id++) {
    gpumd_resv_t r;
    sample(&r, id,
           id == 11   ? GPUMD_RESV_GRANTED
           : id == 12 ? GPUMD_RESV_QUEUED
                      : GPUMD_RESV_RELEASED);
    r.ended_ns = id <= 10 ? T0 + id * SEC : id == 13 ? T0 : 0;
    gpumd_ledger_audit_t a = {.reservation = id,
                              .from = GPUMD_RESV_NEW,
                              .to = GPUMD_RESV_QUEUED,
                              .time_ns = T0 + id * SEC - 1,
                              .reason = "x"};
    assert_int_equal(gpumd_ledger_put(l, &r), 0);
    assert_int_equal(gpumd_ledger_audit(l, &a), 0);
    assert_int_equal(gpumd_ledger_audit(l, &a), 0);
  }
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  uint64_t commits = gpumd_ledger_commit_count(l);
  size_t n = 99;
  bool more = true;
  assert_int_equal(gpumd_ledger_prune(l, T0 + 5 * SEC, 0, &n, &more), GPUM_EINVAL);
  assert_int_equal(n, 0);
  assert_int_equal(gpumd_ledger_prune(l, T0 + 5 * SEC, 10001, NULL, NULL), GPUM_EINVAL);
  /* Nothing that old: no turn is opened, nothing to commit. */
  assert_int_equal(gpumd_ledger_prune(l, T0, 3, &n, &more), 0);
  assert_int_equal(n, 0);
  assert_false(more);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  assert_int_equal(gpumd_ledger_commit_count(l), commits);
  /* A batch of 3: the first created (r-1..r-3; never r-13), with 12 audit rows (4 x 3) of
   * those written before T0+5s, in the turn: a rollback undoes it. */
  assert_int_equal(gpumd_ledger_prune(l, T0 + 5 * SEC, 3, &n, &more), 0);
  assert_int_equal(n, 3);
  assert_true(more);
  assert_false(exists(l, 1));
  gpumd_ledger_rollback_turn(l);
  assert_true(exists(l, 1));
  assert_int_equal(audit_rows(l, 1), 2);
  assert_int_equal(gpumd_ledger_prune(l, T0 + 5 * SEC, 3, &n, &more), 0);
  assert_int_equal(n, 3);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  for (uint64_t id = 1; id <= 13; id++)
    assert_int_equal(exists(l, id), id > 3);
  assert_int_equal(audit_rows(l, 3), 0);
  assert_int_equal(audit_rows(l, 0), 16); /* 26 - 10 (the audit rows before T0+5s) */
  /* The rest before T0+5s: only r-4 (ended_ns < before, strictly), and nothing is left. */
  assert_int_equal(gpumd_ledger_prune(l, T0 + 5 * SEC, 3, &n, &more), 0);
  assert_int_equal(n, 1);
  assert_false(more);
  assert_int_equal(gpumd_ledger_prune(l, T0 + 5 * SEC, 3, &n, &more), 0);
  assert_int_equal(n, 0);
  assert_false(more);
  /* Live reservations created before the time stay (and do not stop the scan); audit rows go
   * by age, live reservation or not: everything ended, the highest ids stay. */
  assert_int_equal(gpumd_ledger_prune(l, UINT64_MAX, 100, &n, &more), 0);
  assert_int_equal(n, 6);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  uint64_t max = 0;
  assert_int_equal(gpumd_ledger_max_id(l, &max), 0);
  assert_int_equal(max, 13);
  gpumd_ledger_close(l);
  assert_int_equal(count_rows(db, "SELECT count(*) FROM reservations"), 3);
  assert_int_equal(count_rows(db, "SELECT min(id) FROM reservations"), 11);
  assert_int_equal(count_rows(db, "SELECT count(*) FROM audit"), 1);
  assert_int_equal(count_rows(db, "SELECT reservation FROM audit"), 13);
}

/* A reservation created at or after the time stops the scan: none after it can have ended
 * before, so rows behind it are not looked at. */
static void test_prune_stops_at_creation(void **state) {
  const char *dir = *state;
  gpumd_ledger_t *l = open_ok(dir);
  for (uint64_t id = 1; id <= 4; id++) {
    gpumd_resv_t r;
    sample(&r, id, GPUMD_RESV_RELEASED);
    r.created_ns = id == 2 ? T0 + 10 * SEC : T0; /* r-2 created late, r-3 (odd) early again */
    r.ended_ns = T0 + SEC;
    assert_int_equal(gpumd_ledger_put(l, &r), 0);
  }
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  size_t n = 0;
  bool more = true;
  assert_int_equal(gpumd_ledger_prune(l, T0 + 5 * SEC, 100, &n, &more), 0);
  assert_int_equal(n, 1); /* r-1 only: the scan stopped at r-2 */
  assert_false(more);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  assert_false(exists(l, 1));
  assert_true(exists(l, 3));
  gpumd_ledger_close(l);
}

/* More than a scan's worth (20,000) of live reservations created before the time: a call that
 * finds nothing in its scan says there is more, and the next goes on from where it stopped
 * instead of scanning the same rows again. */
static void test_prune_goes_on(void **state) {
  const char *dir = *state;
  gpumd_ledger_t *l = open_ok(dir);
  uint64_t last = 20003;
  for (uint64_t id = 1; id <= last; id++) {
    gpumd_resv_t r;
    sample(&r, id, id == 20002 ? GPUMD_RESV_RELEASED : GPUMD_RESV_GRANTED);
    r.created_ns = T0;
    r.ended_ns = id == 20002 ? T0 + SEC : 0;
    assert_int_equal(gpumd_ledger_put(l, &r), 0);
  }
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  size_t n = 99;
  bool more = false;
  assert_int_equal(gpumd_ledger_prune(l, T0 + 5 * SEC, 100, &n, &more), 0);
  assert_int_equal(n, 0); /* 20,000 live rows looked at */
  assert_true(more);
  assert_int_equal(gpumd_ledger_prune(l, T0 + 5 * SEC, 100, &n, &more), 0);
  assert_int_equal(n, 1); /* r-20002, past them */
  assert_false(more);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  assert_false(exists(l, 20002));
  assert_true(exists(l, 20001));
  gpumd_ledger_close(l);
}

/* A new ledger has 1 KiB pages; a database that exists keeps its page size (and works). */
static void test_page_size(void **state) {
  const char *dir = *state;
  char sd[256], db[300];
  gpumd_ledger_t *l = open_ok(sub(dir, "new", sd, sizeof(sd)));
  gpumd_ledger_close(l);
  assert_int_equal(count_rows(sub(sd, GPUMD_LEDGER_FILE, db, sizeof(db)), "PRAGMA page_size"),
                   1024);

  sub(dir, "old", sd, sizeof(sd));
  assert_int_equal(mkdir(sd, 0700), 0);
  sqlite3 *h = NULL;
  assert_int_equal(sqlite3_open(sub(sd, GPUMD_LEDGER_FILE, db, sizeof(db)), &h), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, "PRAGMA page_size=4096", NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, old_schema_v1, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(h);
  l = open_ok(sd);
  gpumd_resv_t r, back;
  sample(&r, 3, GPUMD_RESV_GRANTED);
  assert_int_equal(gpumd_ledger_put(l, &r), 0);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  assert_int_equal(gpumd_ledger_get(l, 3, &back), 0);
  assert_resv_equal(&back, &r);
  gpumd_ledger_close(l);
  assert_int_equal(count_rows(db, "PRAGMA page_size"), 4096);
}

/* ---- The writer thread ------------------------------------------------------------------- */

/* As the daemon's loop does: until gpumd_ledger_poll tells something, wait for the writer's
 * eventfd (a wake-up may be stale: its batch was already collected by a read) and clear it. */
static int poll_done(gpumd_ledger_t *l, int fd) {
  int rc;
  while ((rc = gpumd_ledger_poll(l)) == 0) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 10000), 1);
    uint64_t n;
    assert_int_equal(read(fd, &n, sizeof n), (ssize_t)sizeof n);
  }
  return rc;
}

/* An outside connection on the ledger, for locks and triggers. */
static sqlite3 *outside_open(const char *path) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  return db;
}

static void outside_exec(sqlite3 *db, const char *sql) {
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
    fail_msg("%s: %s", sql, err ? err : "?");
}

/* Turns handed to the writer thread: committed off the caller's thread, told through the
 * eventfd and gpumd_ledger_poll; while the writer is busy (held here by an outside write
 * lock) more turns stage and a second hand-over is refused; a read waits for the writer and
 * sees its rows; a failed batch (an outside trigger aborts it) is rolled back whole and
 * reported once by poll, and the next batch commits. */
static void test_writer_thread(void **state) {
  const char *dir = *state;
  gpumd_ledger_t *l = open_ok(dir);
  assert_int_equal(gpumd_ledger_writer_fd(l), -1);
  assert_int_equal(gpumd_ledger_commit_async(l), 0); /* no writer, nothing staged */
  assert_int_equal(gpumd_ledger_start_writer(l), 0);
  assert_int_equal(gpumd_ledger_start_writer(l), GPUM_ESTATE);
  int fd = gpumd_ledger_writer_fd(l);
  assert_true(fd >= 0);
  uint64_t c0 = gpumd_ledger_commit_count(l);
  assert_int_equal(gpumd_ledger_commit_async(l), 0); /* nothing staged: nothing to wait for */
  assert_false(gpumd_ledger_writing(l));

  /* The writer blocked by an outside transaction. */
  sqlite3 *out = outside_open(gpumd_ledger_path(l));
  outside_exec(out, "BEGIN IMMEDIATE");
  for (uint64_t id = 1; id <= 20; id++)
    stage_turn(l, id, "queued");
  assert_int_equal(gpumd_ledger_commit_async(l), 1);
  assert_true(gpumd_ledger_writing(l));
  stage_turn(l, 21, "queued"); /* the next turn, while the writer is busy */
  assert_int_equal(gpumd_ledger_commit_async(l), GPUM_ESTATE);
  assert_int_equal(gpumd_ledger_poll(l), 0);
  assert_true(gpumd_ledger_writing(l));
  outside_exec(out, "COMMIT");
  assert_int_equal(poll_done(l, fd), 1);
  assert_false(gpumd_ledger_writing(l));
  assert_int_equal(gpumd_ledger_poll(l), 0); /* told once */
  assert_int_equal(gpumd_ledger_commit_count(l), c0 + 1);
  assert_int_equal(outside_count(gpumd_ledger_path(l)), 20); /* 21 is still staged */
  assert_int_equal(gpumd_ledger_commit_async(l), 1);
  /* A read waits for the writer's batch and sees it; poll still tells. */
  gpumd_resv_t r;
  assert_int_equal(gpumd_ledger_get(l, 21, &r), 0);
  assert_int_equal(gpumd_ledger_poll(l), 1);
  assert_int_equal(outside_count(gpumd_ledger_path(l)), 21);

  /* A batch that fails: nothing of it stays, the error is reported once. */
  outside_exec(out, "CREATE TRIGGER boom BEFORE INSERT ON audit WHEN NEW.reason = 'boom' "
                    "BEGIN SELECT RAISE(ABORT, 'boom refused'); END");
  stage_turn(l, 22, "queued");
  stage_turn(l, 23, "boom");
  assert_int_equal(gpumd_ledger_commit_async(l), 1);
  gpumd_ledger_wait(l);
  assert_false(gpumd_ledger_writing(l));
  assert_int_equal(gpumd_ledger_poll(l), GPUM_EIO);
  assert_non_null(strstr(gpum_last_error(), "boom refused"));
  assert_int_equal(gpumd_ledger_poll(l), 0);
  assert_int_equal(gpumd_ledger_get(l, 22, &r), GPUM_ENOENT);
  assert_int_equal(outside_count(gpumd_ledger_path(l)), 21);
  stage_turn(l, 24, "queued");
  assert_int_equal(gpumd_ledger_commit_async(l), 1);
  assert_int_equal(poll_done(l, fd), 1);
  assert_int_equal(outside_count(gpumd_ledger_path(l)), 22);

  /* A turn that read the ledger commits on the caller's thread: 0, nothing to wait for. */
  stage_turn(l, 25, "queued");
  assert_int_equal(gpumd_ledger_get(l, 25, &r), 0);
  assert_int_equal(gpumd_ledger_commit_async(l), 0);
  assert_int_equal(outside_count(gpumd_ledger_path(l)), 23);

  /* Closing with a batch in flight commits it first. */
  stage_turn(l, 26, "queued");
  assert_int_equal(gpumd_ledger_commit_async(l), 1);
  sqlite3_close(out);
  gpumd_ledger_close(l);
  l = open_ok(dir);
  assert_int_equal(gpumd_ledger_get(l, 26, &r), 0);
  gpumd_ledger_close(l);
}

/* The operator's device switches: stored with the turn's commit, gone with its rollback,
 * replaced by a second disable, deleted by enable, kept across a reopen. */
static void test_disabled_devices(void **state) {
  const char *dir = *state;
  gpumd_ledger_t *l = open_ok(dir);
  gpumd_ledger_disabled_t *v = NULL;
  size_t n = 9;
  assert_int_equal(gpumd_ledger_load_disabled(l, &v, &n), 0);
  assert_int_equal(n, 0);
  assert_null(v);
  assert_int_equal(gpumd_ledger_set_disabled(l, "", true, "x", 0, 1), GPUM_EINVAL);
  assert_int_equal(gpumd_ledger_set_disabled(l, "GPU-a", true, "rolled back", 7, 100), 0);
  gpumd_ledger_rollback_turn(l);
  assert_int_equal(gpumd_ledger_load_disabled(l, &v, &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(gpumd_ledger_set_disabled(l, "GPU-a", true, "first", 7, 100), 0);
  assert_int_equal(gpumd_ledger_set_disabled(l, "GPU-b", true, "fans", 8, 200), 0);
  assert_int_equal(gpumd_ledger_set_disabled(l, "GPU-a", true, "again", 9, 300), 0);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  gpumd_ledger_close(l);

  l = open_ok(dir);
  assert_int_equal(gpumd_ledger_load_disabled(l, &v, &n), 0);
  assert_int_equal(n, 2);
  assert_string_equal(v[0].uuid, "GPU-b");
  assert_string_equal(v[0].reason, "fans");
  assert_int_equal(v[0].uid, 8);
  assert_string_equal(v[1].uuid, "GPU-a");
  assert_string_equal(v[1].reason, "again");
  assert_int_equal(v[1].uid, 9);
  assert_int_equal(v[1].time_ns, 300);
  free(v);
  assert_int_equal(gpumd_ledger_set_disabled(l, "GPU-b", false, NULL, 0, 400), 0);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  assert_int_equal(gpumd_ledger_load_disabled(l, &v, &n), 0);
  assert_int_equal(n, 1);
  assert_string_equal(v[0].uuid, "GPU-a");
  free(v);
  gpumd_ledger_close(l);
}

/* Versions 3 to 6 exactly as gpumd applied them, so a ledger of the version before Slurm ids
 * can be made as that gpumd left it, with a row in it. */
static const char old_migrate_v3_to_v6[] =
    "ALTER TABLE reservations ADD COLUMN device_uuids TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE reservations ADD COLUMN want_uuids TEXT NOT NULL DEFAULT '';"
    "CREATE INDEX reservations_ended ON reservations(ended_ns) WHERE ended_ns > 0;"
    "PRAGMA user_version = 3;"
    "DROP INDEX IF EXISTS reservations_state;"
    "CREATE TABLE audit_v4 ("
    " id INTEGER PRIMARY KEY, reservation INTEGER NOT NULL,"
    " from_state TEXT NOT NULL, to_state TEXT NOT NULL, time_ns INTEGER NOT NULL,"
    " reason TEXT NOT NULL, uid INTEGER NOT NULL, pid INTEGER NOT NULL);"
    "INSERT INTO audit_v4 SELECT id, reservation, from_state, to_state, time_ns, reason, uid, pid"
    " FROM audit;"
    "DROP TABLE audit;"
    "DELETE FROM sqlite_sequence WHERE name = 'audit';"
    "ALTER TABLE audit_v4 RENAME TO audit;"
    "CREATE INDEX audit_reservation ON audit(reservation);"
    "PRAGMA user_version = 4;"
    "DROP INDEX IF EXISTS reservations_ended;"
    "DROP INDEX IF EXISTS audit_reservation;"
    "PRAGMA user_version = 5;"
    "CREATE TABLE device_admin (uuid TEXT PRIMARY KEY, reason TEXT NOT NULL,"
    " uid INTEGER NOT NULL, time_ns INTEGER NOT NULL) WITHOUT ROWID;"
    "INSERT INTO reservations VALUES (11, 'aaaabbbbccccddddaaaabbbbccccdddd', 'GRANTED',"
    " 'granted', 1000, 4242, 'v6', 1073741824, 1, '', 0, 0, 0, 0, 'reject', 'ttl', 0, 60000,"
    " 9000000000000000000, 1, 100, 200, 0, 0, 55, 0, 'GPU-aaaa', '');"
    "PRAGMA user_version = 6;";

/* Writes a version-6 ledger into dir (its path into db) and returns it open. */
static sqlite3 *open_v6(const char *dir, char *db, size_t len) {
  sqlite3 *h = NULL;
  assert_int_equal(sqlite3_open(sub(dir, GPUMD_LEDGER_FILE, db, len), &h), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, old_schema_v1, NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, old_migrate_v2, NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, old_migrate_v3_to_v6, NULL, NULL, NULL), SQLITE_OK);
  return h;
}

/* A version-6 ledger (before Slurm ids) upgrades: its rows read back with none, a row put after
 * the upgrade keeps its ids across a reopen, and ids that do not read back as gpumd writes them
 * (a ledger edited by hand) make the ledger refused, naming the row and the field. */
static void test_migration_from_v6(void **state) {
  const char *dir = *state;
  char db[300];
  sqlite3 *h = open_v6(dir, db, sizeof(db));
  sqlite3_close(h);
  assert_int_equal(user_version(db), 6);

  gpumd_ledger_t *l = open_ok(dir);
  assert_int_equal(user_version(db), GPUMD_LEDGER_SCHEMA_VERSION);
  assert_int_equal(gpumd_ledger_set_devices(l, uuids_abc, 3), 0);
  gpumd_resv_t r;
  assert_int_equal(gpumd_ledger_get(l, 11, &r), 0);
  assert_string_equal(r.label, "v6");
  assert_int_equal(r.device_mask, 0x1);
  assert_string_equal(r.slurm_job, "");
  assert_string_equal(r.slurm_step, "");
  snprintf(r.slurm_job, sizeof(r.slurm_job), "12345");
  snprintf(r.slurm_step, sizeof(r.slurm_step), "interactive");
  assert_int_equal(gpumd_ledger_put(l, &r), 0);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  gpumd_ledger_close(l);

  l = open_ok(dir); /* no second migration */
  assert_int_equal(gpumd_ledger_set_devices(l, uuids_abc, 3), 0);
  gpumd_ledger_row_t *rows = NULL;
  size_t n = 0;
  assert_int_equal(gpumd_ledger_load_rows(l, &rows, &n), 0);
  bool found = false;
  for (size_t i = 0; i < n; i++)
    if (rows[i].r.id == 11) {
      found = true;
      assert_string_equal(rows[i].r.slurm_job, "12345");
      assert_string_equal(rows[i].r.slurm_step, "interactive");
    }
  assert_true(found);
  free(rows);
  gpumd_ledger_close(l);

  assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h,
                                "UPDATE reservations SET slurm_job = '1\",x=\"y', "
                                "slurm_step = '0' WHERE id = 11",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(h);
  assert_refused(dir, db, "reservation r-11: its slurm_job and slurm_step are not a Slurm job");
}

/* A version-7 ledger (before the highest id was kept apart) upgrades: its meta row gets the
 * highest id of its rows. */
static void test_migration_from_v7(void **state) {
  const char *dir = *state;
  char db[300];
  sqlite3 *h = open_v6(dir, db, sizeof(db));
  assert_int_equal(sqlite3_exec(h,
                                "ALTER TABLE reservations ADD COLUMN slurm_job TEXT NOT NULL "
                                "DEFAULT '';"
                                "ALTER TABLE reservations ADD COLUMN slurm_step TEXT NOT NULL "
                                "DEFAULT '';"
                                "PRAGMA user_version = 7;",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(h);
  assert_int_equal(user_version(db), 7);

  gpumd_ledger_t *l = open_ok(dir);
  assert_int_equal(user_version(db), GPUMD_LEDGER_SCHEMA_VERSION);
  assert_int_equal(query_int(db, "SELECT value FROM meta WHERE key = 'max_id'"), 11);
  uint64_t max = 0;
  assert_int_equal(gpumd_ledger_max_id(l, &max), 0);
  assert_int_equal(max, 11);
  gpumd_ledger_close(l);
}

/* Ids never repeat, whatever becomes of the rows: the highest id ever stored is kept apart from
 * them (the meta table), committed with the row, so a ledger whose rows were all deleted (as a
 * retention could) still continues above it; a rolled-back row does not count. */
static void test_ids_never_reused(void **state) {
  const char *dir = *state;
  char db[300];
  sub(dir, GPUMD_LEDGER_FILE, db, sizeof(db));
  gpumd_ledger_t *l = open_ok(dir);
  gpumd_resv_t r;
  for (uint64_t id = 1; id <= 5; id++) {
    sample(&r, id, GPUMD_RESV_RELEASED);
    assert_int_equal(gpumd_ledger_put(l, &r), 0);
  }
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  sample(&r, 9, GPUMD_RESV_GRANTED);
  assert_int_equal(gpumd_ledger_begin_turn(l), 0);
  assert_int_equal(gpumd_ledger_put(l, &r), 0);
  uint64_t max = 0;
  assert_int_equal(gpumd_ledger_max_id(l, &max), 0);
  assert_int_equal(max, 9); /* the turn's own row */
  gpumd_ledger_rollback_turn(l);
  assert_int_equal(gpumd_ledger_max_id(l, &max), 0);
  assert_int_equal(max, 5);
  /* Through the writer thread too. */
  assert_int_equal(gpumd_ledger_start_writer(l), 0);
  sample(&r, 6, GPUMD_RESV_RELEASED);
  assert_int_equal(gpumd_ledger_put(l, &r), 0);
  assert_int_equal(gpumd_ledger_commit_async(l), 1);
  gpumd_ledger_wait(l);
  assert_int_equal(gpumd_ledger_poll(l), 1);
  gpumd_ledger_close(l);
  assert_int_equal(query_int(db, "SELECT value FROM meta WHERE key = 'max_id'"), 6);

  sqlite3 *h = NULL;
  assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, "DELETE FROM reservations", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(h);
  l = open_ok(dir);
  assert_int_equal(gpumd_ledger_max_id(l, &max), 0);
  assert_int_equal(max, 6);
  gpumd_ledger_close(l);
}

/* A file's contents (caller frees), *len its size. */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long n = ftell(f);
  assert_true(n >= 0);
  rewind(f);
  char *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return buf;
}

static void spit(const char *path, const char *buf, size_t len) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(buf, 1, len, f), len);
  fclose(f);
}

/* A row that SQLite calls sound but that gpumd never writes (one flipped byte, an edit) makes
 * the ledger refused at open, the message naming the row and the field, and the ledger left as
 * it was: for each field of each table, by the rules the protocol applies to a new request. */
static void test_bad_rows_refused(void **state) {
  static const struct {
    const char *sql;  /* makes one row bad */
    const char *what; /* in the message */
  } cases[] = {
      {"UPDATE reservations SET label = CAST(x'6261642dff' AS TEXT) WHERE id = 1",
       "reservation r-1: its label is not valid UTF-8"},
      {"UPDATE reservations SET label = CAST(x'610062' AS TEXT) WHERE id = 1",
       "reservation r-1: its label holds a NUL byte"},
      {"UPDATE reservations SET token = CAST(x'ff' || substr(token, 2) AS TEXT) WHERE id = 2",
       "reservation r-2: its token is not valid UTF-8"},
      {"UPDATE reservations SET token = 'G' || substr(token, 2) WHERE id = 2",
       "reservation r-2: its token is not 32 lowercase hex digits"},
      {"UPDATE reservations SET token = substr(token, 2) WHERE id = 2",
       "reservation r-2: its token is not 32 lowercase hex digits"},
      {"UPDATE reservations SET reason = printf('%.300c', 'x') WHERE id = 1",
       "reservation r-1: its reason is 300 bytes long, more than 255"},
      {"UPDATE reservations SET model = CAST(x'c3' AS TEXT) WHERE id = 1",
       "reservation r-1: its model is not valid UTF-8"},
      {"UPDATE reservations SET state = 'GRANTEX' WHERE id = 1",
       "reservation r-1: its state 'GRANTEX' is not a reservation state"},
      {"UPDATE reservations SET state = 'granted' WHERE id = 1",
       "reservation r-1: its state 'granted' is not a reservation state"},
      {"UPDATE reservations SET lease = 'lease' WHERE id = 1",
       "reservation r-1: its lease 'lease' is not a lease kind"},
      {"UPDATE reservations SET on_timeout = 'later' WHERE id = 1",
       "reservation r-1: its on_timeout 'later' is not a timeout action"},
      {"UPDATE reservations SET gpus = 0 WHERE id = 1",
       "reservation r-1: its gpus is 0, out of range 1..64"},
      {"UPDATE reservations SET priority = 101 WHERE id = 1",
       "reservation r-1: its priority is 101, out of range -100..100"},
      {"UPDATE reservations SET uid = -1 WHERE id = 1", "reservation r-1: its uid is -1"},
      {"UPDATE reservations SET bytes_per_gpu = '1GiB' WHERE id = 1",
       "reservation r-1: its bytes_per_gpu is not an integer"},
      {"UPDATE reservations SET bytes_per_gpu = 0 WHERE id = 1",
       "reservation r-1: its bytes_per_gpu is 0"},
      {"UPDATE reservations SET device_mask = 0 WHERE id = 1",
       "reservation r-1: its device_mask is 0 in a GRANTED reservation"},
      {"UPDATE reservations SET lease = 'pid', lease_pid = 0 WHERE id = 1",
       "reservation r-1: its lease_pid is 0 in a pid lease"},
      {"UPDATE reservations SET ttl_ms = 0 WHERE id = 1",
       "reservation r-1: its ttl_ms is 0 in a ttl lease"},
      {"UPDATE reservations SET device_uuids = 'GPU-a,,GPU-c' WHERE id = 1",
       "reservation r-1: its device_uuids holds a UUID of 0 bytes"},
      {"UPDATE reservations SET slurm_job = '12x' WHERE id = 2",
       "reservation r-2: its slurm_job and slurm_step are not a Slurm job step"},
      {"UPDATE reservations SET timeout_told = 2 WHERE id = 2",
       "reservation r-2: its timeout_told is 2"},
      {"UPDATE audit SET reason = CAST(x'ff' AS TEXT) WHERE id = 2",
       "audit row 2 (of r-1): its reason is not valid UTF-8"},
      {"UPDATE audit SET to_state = 'NEW' WHERE id = 1",
       "audit row 1 (of r-1): its to_state 'NEW' is not a reservation state"},
      {"UPDATE audit SET from_state = 'OLD' WHERE id = 1",
       "audit row 1 (of r-1): its from_state 'OLD' is not NEW or a reservation state"},
      {"UPDATE device_admin SET reason = CAST(x'e282' AS TEXT)",
       "the switch of device 'GPU-b' (device_admin): its reason is not valid UTF-8"},
      {"DELETE FROM meta", "meta: its max_id is missing"},
  };
  const char *dir = *state;
  char db[300];
  sub(dir, GPUMD_LEDGER_FILE, db, sizeof(db));
  gpumd_ledger_t *l = open_ok(dir);
  gpumd_resv_t r;
  sample(&r, 1, GPUMD_RESV_GRANTED);
  assert_int_equal(gpumd_ledger_put(l, &r), 0);
  sample(&r, 2, GPUMD_RESV_RELEASED);
  assert_int_equal(gpumd_ledger_put(l, &r), 0);
  for (int k = 0; k < 2; k++) {
    gpumd_ledger_audit_t a = {.reservation = 1,
                              .from = k ? GPUMD_RESV_QUEUED : GPUMD_RESV_NEW,
                              .to = k ? GPUMD_RESV_GRANTED : GPUMD_RESV_QUEUED,
                              .time_ns = T0,
                              .reason = k ? "granted on GPU 0" : "queued",
                              .uid = 1000,
                              .pid = 42};
    assert_int_equal(gpumd_ledger_audit(l, &a), 0);
  }
  assert_int_equal(gpumd_ledger_set_disabled(l, "GPU-b", true, "fan swap", 0, T0), 0);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  gpumd_ledger_close(l);
  size_t good_len = 0;
  char *good = slurp(db, &good_len);
  gpumd_ledger_close(open_ok(dir)); /* as it is, it opens */

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    spit(db, good, good_len);
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    if (sqlite3_exec(h, cases[i].sql, NULL, NULL, NULL) != SQLITE_OK)
      fail_msg("%s: %s", cases[i].sql, sqlite3_errmsg(h));
    assert_int_equal(sqlite3_changes(h), 1);
    sqlite3_close(h);
    size_t before_len = 0, after_len = 0;
    char *before = slurp(db, &before_len);
    assert_refused(dir, db, cases[i].what);
    char *after = slurp(db, &after_len);
    assert_int_equal(after_len, before_len);
    assert_memory_equal(after, before, before_len); /* refused: left as it was */
    free(before);
    free(after);
  }
  free(good);
}

/* What gpumd writes it reads back: text that is not UTF-8 (a reason cut inside a character by
 * an older gpumd, or from anywhere) is stored with '?' for each bad byte, so that the ledger
 * is never refused for a row of gpumd's own; UUIDs and switches that are not UTF-8 are
 * refused before they are stored. */
static void test_stores_what_it_accepts(void **state) {
  const char *dir = *state;
  gpumd_ledger_t *l = open_ok(dir);
  gpumd_resv_t r, back;
  sample(&r, 1, GPUMD_RESV_FAILED);
  memset(r.reason, 'x', sizeof r.reason);
  memcpy(r.reason + sizeof r.reason - 2, "\xc3", 1); /* the first byte of an é, cut */
  r.reason[sizeof r.reason - 1] = '\0';
  snprintf(r.label, sizeof r.label, "l\xff");
  assert_int_equal(gpumd_ledger_put(l, &r), 0);
  gpumd_ledger_audit_t a = {.reservation = 1,
                            .from = GPUMD_RESV_GRANTED,
                            .to = GPUMD_RESV_FAILED,
                            .time_ns = T0,
                            .reason = r.reason};
  assert_int_equal(gpumd_ledger_audit(l, &a), 0);
  assert_int_equal(gpumd_ledger_commit_turn(l), 0);
  const char *bad_uuids[] = {"GPU-\xff"};
  assert_int_equal(gpumd_ledger_set_devices(l, bad_uuids, 1), GPUM_EINVAL);
  assert_int_equal(gpumd_ledger_set_disabled(l, "GPU-\xff", true, "x", 0, T0), GPUM_EINVAL);
  assert_int_equal(gpumd_ledger_set_disabled(l, "GPU-a", true, "bad \xc3", 0, T0), GPUM_EINVAL);
  gpumd_ledger_close(l);

  l = open_ok(dir);
  assert_int_equal(gpumd_ledger_get(l, 1, &back), 0);
  assert_int_equal(strlen(back.reason), sizeof back.reason - 1);
  assert_int_equal(back.reason[sizeof back.reason - 2], '?');
  assert_string_equal(back.label, "l?");
  gpumd_ledger_close(l);
}

#define DIR_TEST(fn) cmocka_unit_test_setup_teardown(fn, setup_dir, teardown_dir)

int main(void) {
  const struct CMUnitTest tests[] = {
      DIR_TEST(test_round_trip),
      DIR_TEST(test_rows_share_values),
      DIR_TEST(test_empty_ledger),
      DIR_TEST(test_one_commit_per_turn),
      DIR_TEST(test_checkpoints_off_the_commit),
      DIR_TEST(test_audit_trail),
      DIR_TEST(test_reopen_after_close),
      DIR_TEST(test_commit_survives_process_death),
      DIR_TEST(test_second_open_is_refused),
      DIR_TEST(test_sync_full_option),
      DIR_TEST(test_bad_state_dirs),
      DIR_TEST(test_garbage_database),
      DIR_TEST(test_empty_file_refused),
      DIR_TEST(test_no_schema_refused),
      DIR_TEST(test_corrupt_database_refused),
      DIR_TEST(test_new_ledger_made_whole),
      DIR_TEST(test_newer_schema_refused),
      DIR_TEST(test_migration_from_v1),
      DIR_TEST(test_devices_by_uuid),
      DIR_TEST(test_set_devices_bad_input),
      DIR_TEST(test_migration_from_v2),
      DIR_TEST(test_migration_from_v6),
      DIR_TEST(test_migration_from_v7),
      DIR_TEST(test_ids_never_reused),
      DIR_TEST(test_bad_rows_refused),
      DIR_TEST(test_stores_what_it_accepts),
      DIR_TEST(test_prune),
      DIR_TEST(test_prune_stops_at_creation),
      DIR_TEST(test_prune_goes_on),
      DIR_TEST(test_writer_thread),
      DIR_TEST(test_page_size),
      DIR_TEST(test_disabled_devices),
      cmocka_unit_test(test_pid_start_time),
      cmocka_unit_test(test_recovery_decisions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
