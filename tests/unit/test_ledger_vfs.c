/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the ledger's VFS (src/gpumd/ledger/ledger_vfs.c): a commit's log frames
 * written in one write call (SQLite's own VFS makes two per page, measured beside it from the
 * thread's write calls in /proc), every commit whole in the file for a reader on SQLite's own
 * VFS as soon as it returns (in this process and in one that opens the file after the writer
 * died without closing), pages spilled from the cache and read back within a transaction, and
 * the log restarted after a checkpoint.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "ledger_internal.h"
#include "scratch_testlib.h"
#include "thread_io_testlib.h"

static void exec_ok(sqlite3 *db, const char *sql) {
  char *err = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
  if (rc != SQLITE_OK)
    fail_msg("%s: %s", sql, err ? err : sqlite3_errstr(rc));
}

static sqlite3 *open_db(const char *dir, const char *vfs) {
  char path[128];
  snprintf(path, sizeof path, "%s/t.db", dir);
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs),
                   SQLITE_OK);
  exec_ok(db, "PRAGMA page_size=1024; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
              "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, k INTEGER, v BLOB)");
  return db;
}

static long long query_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  long long v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

/* One transaction of rows rows from id first on: k = id, v = 600 bytes of (id & 0xff). */
static void insert_rows(sqlite3 *db, int first, int rows) {
  exec_ok(db, "BEGIN");
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO t VALUES (?, ?, ?)", -1, &st, NULL),
                   SQLITE_OK);
  unsigned char v[600];
  for (int id = first; id < first + rows; id++) {
    memset(v, id & 0xff, sizeof v);
    sqlite3_bind_int(st, 1, id);
    sqlite3_bind_int(st, 2, id);
    sqlite3_bind_blob(st, 3, v, sizeof v, SQLITE_TRANSIENT);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  exec_ok(db, "COMMIT");
}

/* The rows 1..n all there, each whole (its blob's bytes all its id's). */
static void assert_rows(sqlite3 *db, int n) {
  assert_int_equal(query_int(db, "SELECT count(*) FROM t"), n);
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(db, "SELECT id, k, v FROM t ORDER BY id", -1, &st, NULL),
                   SQLITE_OK);
  int want = 1;
  while (sqlite3_step(st) == SQLITE_ROW) {
    int id = sqlite3_column_int(st, 0);
    assert_int_equal(id, want);
    assert_int_equal(sqlite3_column_int(st, 1), id);
    const unsigned char *v = sqlite3_column_blob(st, 2);
    assert_int_equal(sqlite3_column_bytes(st, 2), 600);
    for (int i = 0; i < 600; i++)
      assert_int_equal(v[i], id & 0xff);
    want++;
  }
  sqlite3_finalize(st);
  assert_int_equal(want, n + 1);
}

static void integrity_ok(sqlite3 *db) {
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
  sqlite3_finalize(st);
}

/* Write calls of one commit of 12 rows (about a dozen pages, so two dozen writes the frame's
 * header and page apart) through vfs. */
static long commit_writes(const char *dir, const char *vfs) {
  sqlite3 *db = open_db(dir, vfs);
  insert_rows(db, 1, 12); /* the log's header and first frames: not measured */
  long before = thread_io("syscw");
  insert_rows(db, 13, 12);
  long n = thread_io("syscw") - before;
  assert_rows(db, 24);
  sqlite3_close(db);
  return n;
}

static void test_one_write_per_commit(void **state) {
  const char *name = gpumd__ledger_vfs_register(NULL);
  assert_string_equal(name, GPUMD_LEDGER_VFS);
  assert_string_equal(gpumd__ledger_vfs_register("unix-none"), GPUMD_LEDGER_VFS); /* once */
  char sub[2][96];
  for (int i = 0; i < 2; i++) {
    snprintf(sub[i], sizeof sub[i], "%s/%d", (const char *)*state, i);
    assert_int_equal(mkdir(sub[i], 0700), 0);
  }
  long own = commit_writes(sub[0], NULL), ours = commit_writes(sub[1], name);
  print_message("one commit of 12 rows: %ld write calls with SQLite's VFS, %ld with the "
                "ledger's\n",
                own, ours);
  assert_true(own >= 16); /* two per frame: the pattern the ledger's VFS gathers */
  assert_int_equal(ours, 1);
}

/* Every commit is whole in the file for a reader on SQLite's own VFS as soon as it returns,
 * across a checkpoint that restarts the log. */
static void test_commits_visible_at_once(void **state) {
  const char *dir = *state;
  sqlite3 *w = open_db(dir, gpumd__ledger_vfs_register(NULL));
  sqlite3 *r = open_db(dir, NULL);
  int n = 0;
  for (int i = 0; i < 40; i++) {
    insert_rows(w, n + 1, 1 + i % 7);
    n += 1 + i % 7;
    assert_rows(r, n);
    if (i == 20) { /* the log restarts from its start at the next commit */
      exec_ok(r, "PRAGMA wal_checkpoint(TRUNCATE)");
      assert_rows(w, n);
    }
  }
  integrity_ok(r);
  sqlite3_close(r);
  sqlite3_close(w);
}

/* A transaction larger than the cache: pages spilled to the log in the middle of it are read
 * back from there (what is gathered is written first), and a commit of more than the 64 KiB
 * gathered at most (the unix VFS refuses writes of 128 KiB and more) is written in pieces. */
static void test_spilled_pages_read_back(void **state) {
  sqlite3 *w = open_db(*state, gpumd__ledger_vfs_register(NULL));
  exec_ok(w, "PRAGMA cache_size=2; PRAGMA cache_spill=1");
  insert_rows(w, 1, 300);
  exec_ok(w, "BEGIN; UPDATE t SET k = k + 1000; UPDATE t SET k = k - 1000; COMMIT");
  assert_rows(w, 300);
  sqlite3 *r = open_db(*state, NULL);
  assert_rows(r, 300);
  integrity_ok(r);
  sqlite3_close(r);
  sqlite3_close(w);
}

/* What a commit wrote is in the file when it returns: a writer that dies right after without
 * closing loses none of it. */
static void test_commit_in_file_when_it_returns(void **state) {
  const char *dir = *state;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    sqlite3 *w = open_db(dir, gpumd__ledger_vfs_register(NULL));
    for (int i = 0; i < 10; i++)
      insert_rows(w, 1 + 5 * i, 5);
    _exit(0); /* no close, no checkpoint */
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  sqlite3 *r = open_db(dir, NULL);
  assert_rows(r, 50);
  integrity_ok(r);
  sqlite3_close(r);
}

#define DIR_TEST(fn) cmocka_unit_test_setup_teardown(fn, setup_dir, teardown_dir)

int main(void) {
  const struct CMUnitTest tests[] = {
      DIR_TEST(test_one_write_per_commit),
      DIR_TEST(test_commits_visible_at_once),
      DIR_TEST(test_spilled_pages_read_back),
      DIR_TEST(test_commit_in_file_when_it_returns),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
