/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gpumd ledger (see ledger.h): reservations and their audit trail in SQLite, WAL mode,
 * one transaction per loop turn. This file opens it: creates the state directory (0700),
 * takes the directory's lock, makes a new database (0600, schema and all, renamed into place)
 * only where there is none, refuses an existing one that is empty, has no schema or fails
 * SQLite's integrity check (before anything is written to it), sets the journal and sync
 * modes, migrates an older schema and prepares the statements of the write path; and closes
 * it. Turns and batches are in ledger_turn.c, rows in ledger_rows.c,
 * retention in ledger_prune.c (the list is in ledger_internal.h).
 */
#include "ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <sqlite3.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "ledger_internal.h"

#define GPUMD_LEDGER_PAGE_SIZE_S "1024" /* of a new ledger */

static const char schema_v1[] =
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
    "PRAGMA user_version = 1;";

/* Version 2: process start times (0 = unknown, as for every row of a version-1 ledger). */
static const char migrate_v2[] =
    "ALTER TABLE reservations ADD COLUMN pid_start INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE reservations ADD COLUMN lease_pid_start INTEGER NOT NULL DEFAULT 0;"
    "PRAGMA user_version = 2;";

/* Version 3: device UUIDs next to the index masks ("" = indices only), and the index that
 * retention (gpumd_ledger_prune) walks. */
static const char migrate_v3[] =
    "ALTER TABLE reservations ADD COLUMN device_uuids TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE reservations ADD COLUMN want_uuids TEXT NOT NULL DEFAULT '';"
    "CREATE INDEX reservations_ended ON reservations(ended_ns) WHERE ended_ns > 0;"
    "PRAGMA user_version = 3;";

/* Version 4: cheaper writes (half of a request's ledger cost went to index upkeep). The
 * index on state goes (only the load at start filtered on it, and retention keeps the table
 * small enough to scan), and the audit table drops AUTOINCREMENT, whose sqlite_sequence row
 * was one more B-tree write per transition; audit ids still grow (max + 1), but the id of a
 * pruned newest row can come back. */
static const char migrate_v4[] =
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
    "PRAGMA user_version = 4;";

/* Version 5: no secondary indexes (their upkeep was over a quarter of a ledger write):
 * retention finds finished reservations in id order and deletes audit rows by age. */
static const char migrate_v5[] = "DROP INDEX IF EXISTS reservations_ended;"
                                 "DROP INDEX IF EXISTS audit_reservation;"
                                 "PRAGMA user_version = 5;";

/* Version 6: the operator's DISABLED switch per device, by UUID (ledger_admin.c). */
static const char migrate_v6[] =
    "CREATE TABLE device_admin (uuid TEXT PRIMARY KEY, reason TEXT NOT NULL,"
    " uid INTEGER NOT NULL, time_ns INTEGER NOT NULL) WITHOUT ROWID;"
    "PRAGMA user_version = 6;";

/* Version 7: the Slurm job and step a reservation was made for ("" = none). */
static const char migrate_v7[] =
    "ALTER TABLE reservations ADD COLUMN slurm_job TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE reservations ADD COLUMN slurm_step TEXT NOT NULL DEFAULT '';"
    "PRAGMA user_version = 7;";

/* Version 8: the highest reservation id ever stored, apart from the rows (which retention or
 * a hand may delete), so that ids never repeat. */
static const char migrate_v8[] =
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"
    "INSERT INTO meta VALUES ('max_id', (SELECT coalesce(max(id), 0) FROM reservations));"
    "PRAGMA user_version = 8;";

/* Version 9: suspend (docs/suspend.md): whether the job may be suspended, and a SUSPENDED
 * reservation's facts ("" otherwise; gpumd__ledger_suspend_format). */
static const char migrate_v9[] =
    "ALTER TABLE reservations ADD COLUMN preemptible INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE reservations ADD COLUMN suspend TEXT NOT NULL DEFAULT '';"
    "PRAGMA user_version = 9;";

/* Whether the file system holding path is mounted read-only now. */
static bool on_read_only_fs(const char *path) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash)
    *(slash == dir ? slash + 1 : slash) = '\0';
  struct statvfs vfs;
  return statvfs(slash ? dir : ".", &vfs) == 0 && (vfs.f_flag & ST_RDONLY) != 0;
}

/* Sets the detail from SQLite's message and returns GPUM_EIO. SQLite's message alone misleads
 * when the file system went read-only under the ledger: it says "disk I/O error", or
 * "database or disk is full" where it did not keep the system's error. The system's error of
 * the failed call and the file system's flags say what happened. */
int gpumd__ledger_db_error(const gpumd_ledger_t *l, const char *what) {
  int e = l->db ? sqlite3_system_errno(l->db) : 0;
  const char *msg = l->db ? sqlite3_errmsg(l->db) : "no database";
  if (e == EROFS || on_read_only_fs(l->path))
    return gpum_error(GPUM_EIO,
                      "ledger %s: %s: the file system is read-only (EROFS; SQLite says: %s)",
                      l->path, what, msg);
  if (e == ENOSPC || e == EDQUOT)
    return gpum_error(GPUM_EIO, "ledger %s: %s: %s (SQLite says: %s)", l->path, what, strerror(e),
                      msg);
  return gpum_error(GPUM_EIO, "ledger %s: %s: %s", l->path, what, msg);
}

static int exec(gpumd_ledger_t *l, const char *sql, const char *what) {
  if (sqlite3_exec(l->db, sql, NULL, NULL, NULL) != SQLITE_OK)
    return gpumd__ledger_db_error(l, what);
  return 0;
}

/* mkdir -p with mode 0700 for the directories it creates. */
static int make_dirs(const char *dir) {
  size_t len = strlen(dir);
  char *p = malloc(len + 1);
  if (p == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  memcpy(p, dir, len + 1);
  int rc = 0;
  for (size_t i = 1; i <= len && rc == 0; i++) {
    if (p[i] != '/' && p[i] != '\0')
      continue;
    char c = p[i];
    p[i] = '\0';
    if (mkdir(p, 0700) != 0 && errno != EEXIST)
      rc = gpum_error(errno == EACCES || errno == EROFS ? GPUM_EPERM : GPUM_EIO,
                      "cannot create state directory %s: %s", p, strerror(errno));
    p[i] = c;
  }
  free(p);
  if (rc < 0)
    return rc;
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return gpum_error(GPUM_EIO, "state directory %s is not a directory", dir);
  if (access(dir, W_OK | X_OK) != 0)
    return gpum_error(GPUM_EPERM, "state directory %s is not writable: %s", dir, strerror(errno));
  return 0;
}

/* Whether the last failure was another process's lock (not damage). */
static bool busy(const gpumd_ledger_t *l) {
  int code = sqlite3_errcode(l->db) & 0xff;
  return code == SQLITE_BUSY || code == SQLITE_LOCKED;
}

/* The integer a one-row query gives (its first column), or -1. */
static int64_t query_int(gpumd_ledger_t *l, const char *sql) {
  sqlite3_stmt *st = NULL;
  int64_t v = -1;
  if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

/* The schema version of an existing ledger, read before anything is written to it: an
 * SQLite database without gpumd's schema is refused (gpumd never makes a new ledger in place
 * of one that was there), and so is a newer one. Returns 0, or GPUM_EIO. */
static int check_version(gpumd_ledger_t *l, int64_t *version) {
  *version = query_int(l, "PRAGMA user_version");
  if (*version < 0 && busy(l))
    return gpumd__ledger_db_error(l, "cannot read the schema version");
  if (*version < 0)
    return gpum_error(GPUM_EIO,
                      "ledger %s is not a usable SQLite database (%s). " GPUMD_LEDGER_ADVICE,
                      l->path, sqlite3_errmsg(l->db));
  if (*version == 0)
    return gpum_error(
        GPUM_EIO,
        "ledger %s holds no gpumd schema (%lld tables, schema version 0): not a "
        "ledger gpumd wrote, or one that was emptied; gpumd never takes it for a "
        "new ledger, whose reservation ids would start again at r-1. " GPUMD_LEDGER_ADVICE,
        l->path, (long long)query_int(l, "SELECT count(*) FROM sqlite_master"));
  if (*version > GPUMD_LEDGER_SCHEMA_VERSION)
    return gpum_error(GPUM_EIO, "ledger %s: schema version %lld is newer than this gpumd's (%d)",
                      l->path, (long long)*version, GPUMD_LEDGER_SCHEMA_VERSION);
  return 0;
}

/* Creates the schema (version 0: a database create_ledger made) or migrates an older one to
 * this gpumd's version, and checks every row, in one transaction: a ledger refused for a row
 * is left as it was. */
static int setup_schema(gpumd_ledger_t *l, int64_t version) {
  /* migrations[k] takes a ledger of version k to version k + 1 (0: none yet, the schema). */
  static const char *const migrations[] = {schema_v1,  migrate_v2, migrate_v3,
                                           migrate_v4, migrate_v5, migrate_v6,
                                           migrate_v7, migrate_v8, migrate_v9};
  _Static_assert(sizeof migrations / sizeof migrations[0] == GPUMD_LEDGER_SCHEMA_VERSION,
                 "a migration for every schema version");
  int rc = exec(l, "BEGIN IMMEDIATE", "cannot begin");
  for (int64_t k = version; rc == 0 && k < (int64_t)(sizeof migrations / sizeof migrations[0]);
       k++) {
    char what[64];
    if (k == 0)
      snprintf(what, sizeof what, "cannot create the schema");
    else
      snprintf(what, sizeof what, "cannot migrate the schema to version %lld", (long long)k + 1);
    rc = exec(l, migrations[k], what);
  }
  if (rc == 0)
    rc = gpumd__ledger_check_rows(l);
  if (rc == 0)
    rc = exec(l, "COMMIT", "cannot commit the schema");
  if (rc < 0)
    sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

static int prepare(gpumd_ledger_t *l) {
  /* An upsert rather than INSERT OR REPLACE: an existing row is updated in place instead of
   * deleted and inserted again with all its index entries. */
  static const char put[] =
      "INSERT INTO reservations (" RESV_COLUMNS ") VALUES "
      "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE "
      "SET "
      "token = excluded.token, state = excluded.state, reason = excluded.reason, "
      "uid = excluded.uid, pid = excluded.pid, label = excluded.label, "
      "bytes_per_gpu = excluded.bytes_per_gpu, gpus = excluded.gpus, model = excluded.model, "
      "min_memory = excluded.min_memory, want_mask = excluded.want_mask, "
      "priority = excluded.priority, timeout_ms = excluded.timeout_ms, "
      "on_timeout = excluded.on_timeout, lease = excluded.lease, lease_pid = excluded.lease_pid, "
      "ttl_ms = excluded.ttl_ms, expires_ns = excluded.expires_ns, "
      "device_mask = excluded.device_mask, created_ns = excluded.created_ns, "
      "granted_ns = excluded.granted_ns, ended_ns = excluded.ended_ns, "
      "timeout_told = excluded.timeout_told, pid_start = excluded.pid_start, "
      "lease_pid_start = excluded.lease_pid_start, device_uuids = excluded.device_uuids, "
      "want_uuids = excluded.want_uuids, slurm_job = excluded.slurm_job, "
      "slurm_step = excluded.slurm_step, preemptible = excluded.preemptible, "
      "suspend = excluded.suspend";
#define AUDIT_INSERT \
  "INSERT INTO audit (reservation, from_state, to_state, time_ns, reason, uid, pid) VALUES "
  static const char audit[] = AUDIT_INSERT "(?,?,?,?,?,?,?)";
  char audit8[1024];
  size_t off = (size_t)snprintf(audit8, sizeof(audit8), "%s", AUDIT_INSERT);
  for (int k = 0; k < AUDIT_CHUNK; k++)
    off += (size_t)snprintf(audit8 + off, sizeof(audit8) - off, "%s(?,?,?,?,?,?,?)", k ? "," : "");
  if (sqlite3_prepare_v3(l->db, audit8, -1, SQLITE_PREPARE_PERSISTENT, &l->audit8, NULL) !=
          SQLITE_OK ||
      sqlite3_prepare_v3(l->db, put, -1, SQLITE_PREPARE_PERSISTENT, &l->put, NULL) != SQLITE_OK ||
      sqlite3_prepare_v3(l->db, audit, -1, SQLITE_PREPARE_PERSISTENT, &l->audit, NULL) !=
          SQLITE_OK ||
      sqlite3_prepare_v3(l->db, "BEGIN IMMEDIATE", -1, SQLITE_PREPARE_PERSISTENT, &l->begin,
                         NULL) != SQLITE_OK ||
      sqlite3_prepare_v3(l->db, "COMMIT", -1, SQLITE_PREPARE_PERSISTENT, &l->commit, NULL) !=
          SQLITE_OK ||
      sqlite3_prepare_v3(l->db, "ROLLBACK", -1, SQLITE_PREPARE_PERSISTENT, &l->rollback, NULL) !=
          SQLITE_OK ||
      sqlite3_prepare_v3(l->db, "UPDATE meta SET value = ?1 WHERE key = 'max_id' AND value < ?1",
                         -1, SQLITE_PREPARE_PERSISTENT, &l->put_high, NULL) != SQLITE_OK)
    return gpumd__ledger_db_error(l, "cannot prepare statements");
  return 0;
}

/* Takes state_dir/ledger.lock so that two daemons never share a ledger. The kernel drops the
 * lock when the process dies, so a SIGKILLed gpumd never blocks its successor. */
static int lock_dir(gpumd_ledger_t *l, const char *state_dir) {
  char path[4096];
  if ((size_t)snprintf(path, sizeof(path), "%s/ledger.lock", state_dir) >= sizeof(path))
    return gpum_error(GPUM_EINVAL, "state directory path is too long");
  l->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (l->lock_fd < 0)
    return gpum_error(errno == EACCES || errno == EROFS ? GPUM_EPERM : GPUM_EIO,
                      "cannot open %s: %s", path, strerror(errno));
  if (flock(l->lock_fd, LOCK_EX | LOCK_NB) != 0)
    return gpum_error(errno == EWOULDBLOCK ? GPUM_EBUSY : GPUM_EIO,
                      "ledger %s is in use by another gpumd (%s is locked)", l->path, path);
  return 0;
}

/* Runs PRAGMA quick_check (every page and record readable, the b-trees well formed; O(size)
 * but no index checks, and the ledger has no index). Returns 0 or GPUM_EIO with the first of
 * SQLite's findings. */
static int check_integrity(gpumd_ledger_t *l) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(l->db, "PRAGMA quick_check(1)", -1, &st, NULL) != SQLITE_OK)
    return gpum_error(GPUM_EIO,
                      "ledger %s fails SQLite's integrity check (%s). " GPUMD_LEDGER_ADVICE,
                      l->path, sqlite3_errmsg(l->db));
  int step = sqlite3_step(st);
  char what[256];
  const unsigned char *t = step == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
  snprintf(what, sizeof what, "%s", t ? (const char *)t : sqlite3_errmsg(l->db));
  sqlite3_finalize(st);
  if (step == SQLITE_ROW && strcmp(what, "ok") == 0)
    return 0;
  if (step != SQLITE_ROW && busy(l))
    return gpumd__ledger_db_error(l, "cannot run the integrity check");
  for (char *p = what; *p; p++)
    *p = *p == '\n' ? ' ' : *p; /* "*** in database main ***\nPage 2: ..." on one line */
  return gpum_error(
      GPUM_EIO,
      "ledger %s fails SQLite's integrity check (PRAGMA quick_check: %s). " GPUMD_LEDGER_ADVICE,
      l->path, what);
}

/* Sets the page size, WAL mode and the sync level on l->db. */
static int set_modes(gpumd_ledger_t *l, bool fresh, bool sync_full) {
  /* A new ledger gets 1 KiB pages (before WAL mode, which fixes the size): a turn changes a
   * few rows, and each page it touches is one frame of the log, checksummed and written. */
  if (fresh &&
      exec(l, "PRAGMA page_size=" GPUMD_LEDGER_PAGE_SIZE_S, "cannot set the page size") < 0)
    return GPUM_EIO;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(l->db, "PRAGMA journal_mode=WAL", -1, &st, NULL) != SQLITE_OK)
    return gpum_error(GPUM_EIO,
                      "ledger %s is not a usable SQLite database (%s). " GPUMD_LEDGER_ADVICE,
                      l->path, sqlite3_errmsg(l->db));
  int step = sqlite3_step(st);
  bool wal = step == SQLITE_ROW && strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
  sqlite3_finalize(st);
  if (step != SQLITE_ROW)
    return gpum_error(GPUM_EIO,
                      "ledger %s is not a usable SQLite database (%s). " GPUMD_LEDGER_ADVICE,
                      l->path, sqlite3_errmsg(l->db));
  if (!wal)
    return gpumd__ledger_db_error(l, "cannot switch to WAL mode");
  return exec(l, sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
              "cannot set the sync mode");
}

/* Makes a new ledger, schema and all, as <path>.new (0600 whatever the umask: SQLite gives
 * the -wal and -shm files the database file's mode) and renames it to path, so that a
 * ledger.db that exists always has the schema: an empty one is damage, never a new ledger. */
static int create_ledger(gpumd_ledger_t *l) {
  size_t len = strlen(l->path) + sizeof(".new-wal");
  char *tmp = malloc(len), *side = malloc(len);
  if (tmp == NULL || side == NULL) {
    free(tmp);
    free(side);
    return gpum_error(GPUM_ENOMEM, "out of memory creating the ledger");
  }
  snprintf(tmp, len, "%s.new", l->path);
  for (int k = 0; k < 3; k++) { /* what a crash in here left */
    snprintf(side, len, "%s%s", tmp, k == 0 ? "" : k == 1 ? "-wal" : "-shm");
    (void)unlink(side);
  }
  free(side);
  int rc = 0;
  int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    rc = gpum_error(errno == EACCES || errno == EROFS ? GPUM_EPERM : GPUM_EIO,
                    "cannot create ledger %s: %s", tmp, strerror(errno));
  else
    close(fd);
  if (rc == 0 &&
      sqlite3_open_v2(tmp, &l->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
    rc = gpumd__ledger_db_error(l, "cannot create");
  if (rc == 0)
    rc = set_modes(l, true, true);
  if (rc == 0)
    rc = setup_schema(l, 0);
  /* The last connection's close copies the log into the file, syncs it and removes the log. */
  if (l->db != NULL && sqlite3_close(l->db) != SQLITE_OK && rc == 0)
    rc = gpum_error(GPUM_EIO, "cannot create ledger %s: closing failed", tmp);
  l->db = NULL;
  if (rc == 0 && rename(tmp, l->path) != 0)
    rc = gpum_error(GPUM_EIO, "cannot create ledger %s: %s", l->path, strerror(errno));
  if (rc == 0) { /* the rename itself on disk */
    char *dir = strdup(l->path);
    char *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash != NULL) {
      *slash = '\0';
      int dfd = open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
      }
    }
    free(dir);
    gpum_log(GPUM_LOG_INFO, "gpumd", "no ledger in the state directory: created %s", l->path);
  } else {
    (void)unlink(tmp);
  }
  free(tmp);
  return rc;
}

static int open_db(gpumd_ledger_t *l, const gpumd_ledger_opts_t *opts) {
  struct stat sb;
  int rc = 0;
  if (stat(l->path, &sb) != 0) {
    if (errno != ENOENT)
      return gpum_error(errno == EACCES ? GPUM_EPERM : GPUM_EIO, "cannot open ledger %s: %s",
                        l->path, strerror(errno));
    /* A log without its database: the ledger was deleted, not never made (and SQLite would
     * apply that log to the new file). */
    char wal[4096];
    if ((size_t)snprintf(wal, sizeof wal, "%s-wal", l->path) < sizeof wal && stat(wal, &sb) == 0 &&
        sb.st_size > 0)
      return gpum_error(GPUM_EIO,
                        "ledger %s is missing but its log %s (%lld bytes) is there: the ledger "
                        "was deleted or moved, and gpumd never starts a new one over its "
                        "log. " GPUMD_LEDGER_ADVICE,
                        l->path, wal, (long long)sb.st_size);
    rc = create_ledger(l); /* a new state directory: the only way to a new ledger */
    if (rc < 0)
      return rc;
  } else if (S_ISREG(sb.st_mode) && sb.st_size == 0) {
    return gpum_error(GPUM_EIO,
                      "ledger %s is empty (0 bytes): truncated, or restored from a bad copy; "
                      "gpumd never takes it for a new ledger, whose reservation ids would start "
                      "again at r-1. " GPUMD_LEDGER_ADVICE,
                      l->path);
  }
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  /* The writer's connection: a commit's log frames written in one call (ledger_vfs.c). */
  if (sqlite3_open_v2(l->path, &l->db, flags, gpumd__ledger_vfs_register(NULL)) != SQLITE_OK)
    return gpumd__ledger_db_error(l, "cannot open");
  sqlite3_extended_result_codes(l->db, 1);
  sqlite3_busy_timeout(l->db, 2000);
  /* Checked before the first write (WAL mode, a migration): a refused ledger stays as it is. */
  int64_t version = 0;
  rc = check_version(l, &version);
  if (rc == 0)
    rc = check_integrity(l);
  if (rc == 0)
    rc = set_modes(l, false, opts->sync_full);
  if (rc == 0)
    rc = exec(l, "PRAGMA foreign_keys=OFF; PRAGMA temp_store=MEMORY", "cannot set pragmas");
  if (rc == 0)
    rc = setup_schema(l, version);
  if (rc == 0)
    rc = prepare(l);
  if (rc == 0 && gpumd__ledger_ckpt_start(l->db, l->path, &l->ckpt) != 0)
    gpum_log(GPUM_LOG_WARN, "gpumd", "%s; checkpoints stay in the commits", gpum_last_error());
  return rc;
}

/* Before SQLite's first use: no global memory statistics, which would take a global mutex on
 * every allocation (both ledger threads allocate). Fails harmlessly (SQLITE_MISUSE) when the
 * process used SQLite before. */
static void sqlite_setup(void) {
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

int gpumd_ledger_open(const char *state_dir, const gpumd_ledger_opts_t *opts,
                      gpumd_ledger_t **out) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, sqlite_setup);
  gpumd_ledger_opts_t def = {0};
  if (opts == NULL)
    opts = &def;
  if (state_dir == NULL || state_dir[0] == '\0')
    return gpum_error(GPUM_EINVAL, "no state directory given");
  int rc = make_dirs(state_dir);
  if (rc < 0)
    return rc;
  gpumd_ledger_t *l = calloc(1, sizeof(*l));
  size_t len = strlen(state_dir) + sizeof("/" GPUMD_LEDGER_FILE);
  if (l == NULL || (l->path = malloc(len)) == NULL) {
    free(l);
    return gpum_error(GPUM_ENOMEM, "out of memory opening the ledger");
  }
  snprintf(l->path, len, "%s/%s", state_dir, GPUMD_LEDGER_FILE);
  l->lock_fd = -1;
  rc = lock_dir(l, state_dir);
  if (rc == 0)
    rc = open_db(l, opts);
  if (rc < 0) {
    gpumd_ledger_close(l);
    return rc;
  }
  *out = l;
  return 0;
}

void gpumd_ledger_close(gpumd_ledger_t *l) {
  if (l == NULL)
    return;
  gpumd__ledger_writer_stop(l->writer); /* after the batch it has: committed, as promised */
  if (l->in_turn)
    gpumd_ledger_rollback_turn(l);
  gpumd__ledger_ckpt_stop(l->ckpt);
  sqlite3_finalize(l->put);
  sqlite3_finalize(l->audit);
  sqlite3_finalize(l->audit8);
  sqlite3_finalize(l->begin);
  sqlite3_finalize(l->commit);
  sqlite3_finalize(l->rollback);
  sqlite3_finalize(l->put_high);
  sqlite3_close(l->db);
  gpumd__ledger_batch_free(&l->stage);
  gpumd__ledger_batch_free(&l->flight);
  if (l->lock_fd >= 0)
    close(l->lock_fd);
  free(l->path);
  free(l);
}

const char *gpumd_ledger_path(const gpumd_ledger_t *l) {
  return l->path;
}
