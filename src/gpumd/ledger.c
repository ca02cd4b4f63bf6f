/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gpumd ledger (see ledger.h): reservations and their audit trail in SQLite, WAL mode,
 * one transaction per loop turn. Opening creates the state directory (0700) and the database
 * (0600), sets the journal and sync modes, and creates or checks the versioned schema.
 *
 * Writes are staged in memory (a batch of rows and audit rows) and written in one go: by
 * commit_turn on the caller's thread, by the writer thread after commit_async (ledger_writer.c
 * runs write_job), or into a transaction opened on the caller's thread when a read needs to
 * see them (flush_pending). The caller's thread touches the database only while the writer
 * is idle: every read and every synchronous commit first waits for the writer's batch.
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
#include <unistd.h>

#include <sqlite3.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "ledger_internal.h"

/* An audit row waiting to be written. */
typedef struct {
  uint64_t reservation;
  gpumd_resv_state_t from, to;
  uint64_t time_ns;
  uint32_t uid;
  int32_t pid;
  char reason[GPUMD_RESV_REASON_LEN];
} staged_audit_t;

/* Writes waiting for a transaction: reservation rows (a reservation put several times in a
 * turn is kept once, as last put) and audit rows in the order they came. */
typedef struct {
  gpumd_resv_t *rows;
  size_t n_rows, cap_rows;
  staged_audit_t *audits;
  size_t n_audits, cap_audits;
} batch_t;

struct gpumd_ledger {
  sqlite3 *db;
  int lock_fd; /* flock'ed state_dir/ledger.lock: one gpumd per state directory */
  char *path;
  bool in_turn;     /* a transaction is open on the caller's thread */
  bool turn_failed; /* a staged write failed to go into it: the commit rolls back */
  uint64_t commits;
  uint64_t prune_cursor; /* the id the scan of the next gpumd_ledger_prune goes on after */
  sqlite3_stmt *put, *audit;
  sqlite3_stmt *audit8;                    /* AUDIT_CHUNK audit rows in one INSERT */
  sqlite3_stmt *begin, *commit, *rollback; /* the writer's, prepared once */
  gpumd_ledger_ckpt_t *ckpt; /* the checkpointer thread; NULL: SQLite's own checkpoints */
  batch_t stage;             /* the caller's writes since the last commit */
  /* The writer thread (gpumd_ledger_start_writer; NULL: commits on the caller's thread). */
  gpumd_ledger_writer_t *writer;
  batch_t flight; /* the batch the writer has (or had: empty once collected) */
  bool writing;   /* flight handed over and not collected */
  int done;       /* for gpumd_ledger_poll: 1 a batch committed, < 0 one failed, 0 nothing */
  char fail[512]; /* the failed batch's error */
  /* This run's devices (gpumd_ledger_set_devices), and put()'s buffers for their UUID lists. */
  bool have_devices;
  char uuid[GPUMD_SCHED_MAX_DEVICES][GPUM_UUID_LEN];
  char dev_buf[GPUMD_SCHED_MAX_DEVICES * GPUM_UUID_LEN],
      want_buf[GPUMD_SCHED_MAX_DEVICES * GPUM_UUID_LEN];
};

static void batch_free(batch_t *b);

#define AUDIT_CHUNK 8                   /* audit rows per multi-row INSERT */
#define GPUMD_LEDGER_PAGE_SIZE_S "1024" /* of a new ledger */

#define RESV_COLUMNS                                                                          \
  "id, token, state, reason, uid, pid, label, bytes_per_gpu, gpus, model, min_memory, "       \
  "want_mask, priority, timeout_ms, on_timeout, lease, lease_pid, ttl_ms, expires_ns, "       \
  "device_mask, created_ns, granted_ns, ended_ns, timeout_told, pid_start, lease_pid_start, " \
  "device_uuids, want_uuids"
#define RESV_NCOLS 28

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

/* Sets the detail from SQLite's message and returns GPUM_EIO. */
static int db_error(const gpumd_ledger_t *l, const char *what) {
  return gpum_error(GPUM_EIO, "ledger %s: %s: %s", l->path, what, sqlite3_errmsg(l->db));
}

static int exec(gpumd_ledger_t *l, const char *sql, const char *what) {
  if (sqlite3_exec(l->db, sql, NULL, NULL, NULL) != SQLITE_OK)
    return db_error(l, what);
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

/* Creates the schema, or checks its version and migrates an older one. */
static int setup_schema(gpumd_ledger_t *l) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(l->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
    return db_error(l, "cannot read the schema version");
  int version = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
  sqlite3_finalize(st);
  if (version < 0)
    return db_error(l, "cannot read the schema version");
  if (version > GPUMD_LEDGER_SCHEMA_VERSION)
    return gpum_error(GPUM_EIO, "ledger %s: schema version %d is newer than this gpumd's (%d)",
                      l->path, version, GPUMD_LEDGER_SCHEMA_VERSION);
  if (version == GPUMD_LEDGER_SCHEMA_VERSION)
    return 0;
  int rc = exec(l, "BEGIN IMMEDIATE", "cannot begin");
  if (rc == 0 && version == 0)
    rc = exec(l, schema_v1, "cannot create the schema");
  if (rc == 0 && version < 2)
    rc = exec(l, migrate_v2, "cannot migrate the schema to version 2");
  if (rc == 0 && version < 3)
    rc = exec(l, migrate_v3, "cannot migrate the schema to version 3");
  if (rc == 0 && version < 4)
    rc = exec(l, migrate_v4, "cannot migrate the schema to version 4");
  if (rc == 0 && version < 5)
    rc = exec(l, migrate_v5, "cannot migrate the schema to version 5");
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
      "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET "
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
      "want_uuids = excluded.want_uuids";
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
          SQLITE_OK)
    return db_error(l, "cannot prepare statements");
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

static int open_db(gpumd_ledger_t *l, const gpumd_ledger_opts_t *opts) {
  /* Create the file ourselves so that it is 0600 whatever the umask; SQLite gives the -wal
   * and -shm files the database file's mode. */
  int fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return gpum_error(errno == EACCES || errno == EROFS ? GPUM_EPERM : GPUM_EIO,
                      "cannot open ledger %s: %s", l->path, strerror(errno));
  struct stat sb;
  bool fresh = fstat(fd, &sb) == 0 && sb.st_size == 0;
  close(fd);
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(l->path, &l->db, flags, NULL) != SQLITE_OK)
    return db_error(l, "cannot open");
  sqlite3_extended_result_codes(l->db, 1);
  sqlite3_busy_timeout(l->db, 2000);
  /* A new ledger gets 1 KiB pages (before WAL mode, which fixes the size): a turn changes a
   * few rows, and each page it touches is one frame of the log, checksummed and written. */
  if (fresh &&
      exec(l, "PRAGMA page_size=" GPUMD_LEDGER_PAGE_SIZE_S, "cannot set the page size") < 0)
    return GPUM_EIO;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(l->db, "PRAGMA journal_mode=WAL", -1, &st, NULL) != SQLITE_OK)
    return db_error(l, "not a usable SQLite database");
  bool wal = sqlite3_step(st) == SQLITE_ROW &&
             strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
  sqlite3_finalize(st);
  if (!wal)
    return db_error(l, "cannot switch to WAL mode");
  int rc = exec(l, opts->sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
                "cannot set the sync mode");
  if (rc == 0)
    rc = exec(l, "PRAGMA foreign_keys=OFF; PRAGMA temp_store=MEMORY", "cannot set pragmas");
  if (rc == 0)
    rc = setup_schema(l);
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
  sqlite3_close(l->db);
  batch_free(&l->stage);
  batch_free(&l->flight);
  if (l->lock_fd >= 0)
    close(l->lock_fd);
  free(l->path);
  free(l);
}

const char *gpumd_ledger_path(const gpumd_ledger_t *l) {
  return l->path;
}

/* ---- Batches ---------------------------------------------------------------------------- */

static bool batch_empty(const batch_t *b) {
  return b->n_rows == 0 && b->n_audits == 0;
}

static void batch_clear(batch_t *b) {
  b->n_rows = b->n_audits = 0;
}

static void batch_free(batch_t *b) {
  free(b->rows);
  free(b->audits);
  memset(b, 0, sizeof(*b));
}

/* Grows *arr (elements of size) to hold one more; false when out of memory. */
static bool grow(void **arr, size_t n, size_t *cap, size_t size) {
  if (n < *cap)
    return true;
  size_t ncap = *cap ? 2 * *cap : 64;
  void *p = realloc(*arr, ncap * size);
  if (p == NULL)
    return false;
  *arr = p;
  *cap = ncap;
  return true;
}

static int write_row(gpumd_ledger_t *l, const gpumd_resv_t *r);
static int write_audit(gpumd_ledger_t *l, const staged_audit_t *a);
static int write_audits(gpumd_ledger_t *l, const staged_audit_t *a);
static int step_done(gpumd_ledger_t *l, sqlite3_stmt *st, const char *what);

/* Ends the open transaction without its writes, keeping the error detail of what failed. */
static void roll_back(gpumd_ledger_t *l) {
  if (sqlite3_get_autocommit(l->db))
    return; /* SQLite rolled back already (a failed COMMIT can) */
  sqlite3_step(l->rollback);
  sqlite3_reset(l->rollback);
}

/* Writes a batch into the open transaction; stops at the first error. */
static int write_batch(gpumd_ledger_t *l, const batch_t *b) {
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < b->n_rows; i++)
    rc = write_row(l, &b->rows[i]);
  size_t i = 0;
  for (; rc == 0 && i + AUDIT_CHUNK <= b->n_audits; i += AUDIT_CHUNK)
    rc = write_audits(l, &b->audits[i]);
  for (; rc == 0 && i < b->n_audits; i++)
    rc = write_audit(l, &b->audits[i]);
  return rc;
}

/* ---- The writer thread ------------------------------------------------------------------- */

/* The writer's job: one transaction with a batch. Runs on the writer thread, while the
 * caller's thread keeps off the database (it waits in collect() for any access). */
static int write_job(void *user, void *job) {
  gpumd_ledger_t *l = user;
  int rc = step_done(l, l->begin, "cannot begin a transaction");
  if (rc == 0)
    rc = write_batch(l, job);
  if (rc == 0)
    rc = step_done(l, l->commit, "cannot commit");
  if (rc < 0)
    roll_back(l);
  return rc;
}

/* Takes the writer's batch back once it has finished (waiting for it when wait), keeping its
 * result for gpumd_ledger_poll. */
static void collect(gpumd_ledger_t *l, bool wait) {
  int rc = 0;
  if (!l->writing || gpumd__ledger_writer_collect(l->writer, wait, &rc) == 0)
    return;
  l->writing = false;
  batch_clear(&l->flight);
  if (rc < 0) {
    snprintf(l->fail, sizeof(l->fail), "%s", gpum_last_error());
    l->done = rc;
  } else {
    l->commits++;
    if (l->done == 0)
      l->done = 1;
  }
}

int gpumd_ledger_start_writer(gpumd_ledger_t *l) {
  if (l->writer != NULL)
    return gpum_error(GPUM_ESTATE, "the ledger writer is already running");
  return gpumd__ledger_writer_start(write_job, l, &l->writer);
}

int gpumd_ledger_writer_fd(const gpumd_ledger_t *l) {
  return l->writer ? gpumd__ledger_writer_fd(l->writer) : -1;
}

bool gpumd_ledger_writing(const gpumd_ledger_t *l) {
  return l->writing;
}

void gpumd_ledger_wait(gpumd_ledger_t *l) {
  collect(l, true);
}

int gpumd_ledger_poll(gpumd_ledger_t *l) {
  collect(l, false);
  int done = l->done;
  l->done = 0;
  if (done < 0)
    return gpum_error(done, "%s", l->fail);
  return done;
}

/* ---- Turns ------------------------------------------------------------------------------- */

int gpumd_ledger_begin_turn(gpumd_ledger_t *l) {
  if (l->in_turn)
    return gpum_error(GPUM_ESTATE, "ledger turn already open");
  collect(l, true); /* the database is the writer's until then */
  int rc = step_done(l, l->begin, "cannot begin a transaction");
  if (rc == 0)
    l->in_turn = true;
  return rc;
}

static int ensure_turn(gpumd_ledger_t *l) {
  return l->in_turn ? 0 : gpumd_ledger_begin_turn(l);
}

/* Puts the staged writes into a transaction on the caller's thread (opened when needed,
 * after the writer's batch), so that reads see them and commit_turn commits them. A failed
 * write drops the staged writes and makes the commit roll back. */
static int flush_pending(gpumd_ledger_t *l) {
  collect(l, true);
  if (batch_empty(&l->stage))
    return 0;
  int rc = ensure_turn(l);
  if (rc == 0)
    rc = write_batch(l, &l->stage);
  batch_clear(&l->stage);
  if (rc < 0)
    l->turn_failed = true;
  return rc;
}

int gpumd_ledger_commit_turn(gpumd_ledger_t *l) {
  int frc = flush_pending(l);
  if (!l->in_turn)
    return frc;
  l->in_turn = false;
  if (frc < 0 || l->turn_failed) { /* the turn is rolled back whole */
    if (frc == 0)
      frc = gpum_error(GPUM_EIO, "ledger %s: a write of this turn failed", l->path);
    l->turn_failed = false;
    roll_back(l);
    return frc;
  }
  int rc = step_done(l, l->commit, "cannot commit");
  if (rc < 0) {
    roll_back(l);
    return rc;
  }
  l->commits++;
  return 0;
}

int gpumd_ledger_commit_async(gpumd_ledger_t *l) {
  if (l->writer == NULL || l->in_turn)
    return gpumd_ledger_commit_turn(l);
  collect(l, false);
  if (l->writing)
    return gpum_error(GPUM_ESTATE, "the ledger writer has not finished its batch");
  if (batch_empty(&l->stage))
    return 0;
  batch_t t = l->flight; /* empty: collected */
  l->flight = l->stage;
  l->stage = t;
  l->writing = true;
  gpumd__ledger_writer_submit(l->writer, &l->flight);
  return 1;
}

void gpumd_ledger_rollback_turn(gpumd_ledger_t *l) {
  batch_clear(&l->stage);
  l->turn_failed = false;
  l->prune_cursor = 0; /* what a pruning of this turn skipped past is looked at again */
  if (!l->in_turn)
    return;
  l->in_turn = false;
  roll_back(l);
}

uint64_t gpumd_ledger_commit_count(const gpumd_ledger_t *l) {
  return l->commits;
}

uint64_t gpumd_ledger_checkpoint_count(const gpumd_ledger_t *l) {
  return gpumd__ledger_ckpt_count(l->ckpt);
}

/* ---- Devices by UUID --------------------------------------------------------------------- */

int gpumd_ledger_set_devices(gpumd_ledger_t *l, const char *const *uuids, unsigned count) {
  if (count > GPUMD_SCHED_MAX_DEVICES)
    return gpum_error(GPUM_EINVAL, "%u devices: the ledger keeps at most %d", count,
                      GPUMD_SCHED_MAX_DEVICES);
  for (unsigned i = 0; i < count; i++) {
    const char *u = uuids[i] ? uuids[i] : "";
    if (strlen(u) >= GPUM_UUID_LEN || strchr(u, ',') != NULL)
      return gpum_error(GPUM_EINVAL, "device %u: UUID '%.40s' is too long or has a comma", i, u);
  }
  memset(l->uuid, 0, sizeof(l->uuid));
  for (unsigned i = 0; i < count; i++)
    if (uuids[i] != NULL)
      memcpy(l->uuid[i], uuids[i], strlen(uuids[i]) + 1);
  l->have_devices = true;
  return 0;
}

/* The UUIDs of mask's devices, comma-separated in index order, in buf; "" when mask is 0 or
 * a device of it has no known UUID (then only the indices are stored). */
static const char *format_uuids(const gpumd_ledger_t *l, uint64_t mask, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  if (!l->have_devices)
    return buf;
  for (uint64_t m = mask; m != 0; m &= m - 1) {
    unsigned d = (unsigned)__builtin_ctzll(m);
    size_t n = strlen(l->uuid[d]);
    if (n == 0 || off + n + 2 > len) {
      buf[0] = '\0';
      return buf;
    }
    if (off > 0)
      buf[off++] = ',';
    memcpy(buf + off, l->uuid[d], n + 1);
    off += n;
  }
  return buf;
}

/* Maps a stored UUID list to this run's indices in *mask; a UUID not present goes to gone
 * (the first one only) and drops out of the mask. An empty list, or no devices set, keeps
 * *mask (the stored indices). */
static void map_uuids(const gpumd_ledger_t *l, const unsigned char *list, uint64_t *mask,
                      char *gone, size_t gone_len) {
  if (!l->have_devices || list == NULL || list[0] == '\0')
    return;
  uint64_t m = 0;
  const char *p = (const char *)list;
  while (*p != '\0') {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    bool found = false;
    for (unsigned d = 0; d < GPUMD_SCHED_MAX_DEVICES && !found; d++) {
      if (strlen(l->uuid[d]) == n && n > 0 && memcmp(l->uuid[d], p, n) == 0) {
        m |= UINT64_C(1) << d;
        found = true;
      }
    }
    if (!found && gone != NULL && gone[0] == '\0')
      snprintf(gone, gone_len, "%.*s", (int)(n < gone_len ? n : gone_len - 1), p);
    p += n + (end ? 1 : 0);
  }
  *mask = m;
}

/* ---- Writes ------------------------------------------------------------------------------ */

/* Runs a prepared statement that returns no rows and resets it. */
static int step_done(gpumd_ledger_t *l, sqlite3_stmt *st, const char *what) {
  int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : db_error(l, what);
  sqlite3_reset(st); /* every use binds all the parameters: no clearing needed */
  return rc;
}

/* Writes one reservation row (INSERT OR REPLACE) in the open transaction. */
static int write_row(gpumd_ledger_t *l, const gpumd_resv_t *r) {
  sqlite3_stmt *st = l->put;
  int i = 1;
  sqlite3_bind_int64(st, i++, (sqlite3_int64)r->id);
  sqlite3_bind_text(st, i++, r->token, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, i++, gpumd_resv_state_name(r->state), -1, SQLITE_STATIC);
  sqlite3_bind_text(st, i++, r->reason, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, i++, r->uid);
  sqlite3_bind_int64(st, i++, r->pid);
  sqlite3_bind_text(st, i++, r->label, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)r->bytes_per_gpu);
  sqlite3_bind_int64(st, i++, r->gpus);
  sqlite3_bind_text(st, i++, r->model, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)r->min_memory);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)r->want_mask);
  sqlite3_bind_int64(st, i++, r->priority);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)r->timeout_ms);
  sqlite3_bind_text(st, i++, gpumd_on_timeout_name(r->on_timeout), -1, SQLITE_STATIC);
  sqlite3_bind_text(st, i++, gpumd_lease_kind_name(r->lease), -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, i++, r->lease_pid);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)r->ttl_ms);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)r->expires_ns);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)r->device_mask);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)r->created_ns);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)r->granted_ns);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)r->ended_ns);
  sqlite3_bind_int(st, i++, r->timeout_told ? 1 : 0);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)r->pid_start);
  sqlite3_bind_int64(st, i++, (sqlite3_int64)r->lease_pid_start);
  sqlite3_bind_text(st, i++, format_uuids(l, r->device_mask, l->dev_buf, sizeof(l->dev_buf)), -1,
                    SQLITE_STATIC);
  sqlite3_bind_text(st, i++, format_uuids(l, r->want_mask, l->want_buf, sizeof(l->want_buf)), -1,
                    SQLITE_STATIC);
  return step_done(l, st, "cannot store a reservation");
}

static void bind_audit(sqlite3_stmt *st, int i, const staged_audit_t *a) {
  sqlite3_bind_int64(st, i + 1, (sqlite3_int64)a->reservation);
  sqlite3_bind_text(st, i + 2, gpumd_resv_state_name(a->from), -1, SQLITE_STATIC);
  sqlite3_bind_text(st, i + 3, gpumd_resv_state_name(a->to), -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, i + 4, (sqlite3_int64)a->time_ns);
  sqlite3_bind_text(st, i + 5, a->reason, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, i + 6, a->uid);
  sqlite3_bind_int64(st, i + 7, a->pid);
}

static int write_audit(gpumd_ledger_t *l, const staged_audit_t *a) {
  bind_audit(l->audit, 0, a);
  return step_done(l, l->audit, "cannot append to the audit log");
}

/* AUDIT_CHUNK audit rows with one statement (cheaper than one by one). */
static int write_audits(gpumd_ledger_t *l, const staged_audit_t *a) {
  for (int k = 0; k < AUDIT_CHUNK; k++)
    bind_audit(l->audit8, 7 * k, &a[k]);
  return step_done(l, l->audit8, "cannot append to the audit log");
}

/* How many of the newest staged rows put() looks through for the same reservation: the
 * transitions of one request (submit, grant; end) come together, and a row a longer search
 * would have found is only written twice, which is correct too. */
#define PEND_WINDOW 8
#define PEND_MAX 4096 /* staged writes kept before they go into a transaction within the turn */

/* Makes room for one more staged write: false when there is none (out of memory: the
 * staged writes then went into a transaction, or failed to, *rc says). */
static bool stage_room(gpumd_ledger_t *l, void **arr, size_t n, size_t *cap, size_t size, int *rc) {
  batch_t *b = &l->stage;
  *rc = 0;
  if (b->n_rows + b->n_audits >= PEND_MAX && (*rc = flush_pending(l)) < 0)
    return false;
  if (grow(arr, n, cap, size))
    return true;
  *rc = flush_pending(l); /* no room to defer it: the caller writes it now */
  return false;
}

int gpumd_ledger_put(gpumd_ledger_t *l, const gpumd_resv_t *r) {
  batch_t *b = &l->stage;
  for (size_t k = 0; k < b->n_rows && k < PEND_WINDOW; k++) {
    gpumd_resv_t *p = &b->rows[b->n_rows - 1 - k];
    if (p->id == r->id) {
      *p = *r;
      return 0;
    }
  }
  int rc;
  if (!stage_room(l, (void **)&b->rows, b->n_rows, &b->cap_rows, sizeof(*b->rows), &rc)) {
    if (rc == 0 && (rc = ensure_turn(l)) == 0 && (rc = write_row(l, r)) < 0)
      l->turn_failed = true;
    return rc;
  }
  b->rows[b->n_rows++] = *r;
  return 0;
}

int gpumd_ledger_audit(gpumd_ledger_t *l, const gpumd_ledger_audit_t *a) {
  batch_t *b = &l->stage;
  staged_audit_t one = {.reservation = a->reservation,
                        .from = a->from,
                        .to = a->to,
                        .time_ns = a->time_ns,
                        .uid = a->uid,
                        .pid = a->pid};
  const char *reason = a->reason ? a->reason : "";
  size_t n = strnlen(reason, sizeof(one.reason) - 1); /* as the reservation row keeps it */
  memcpy(one.reason, reason, n);
  one.reason[n] = '\0';
  int rc;
  if (!stage_room(l, (void **)&b->audits, b->n_audits, &b->cap_audits, sizeof(*b->audits), &rc)) {
    if (rc == 0 && (rc = ensure_turn(l)) == 0 && (rc = write_audit(l, &one)) < 0)
      l->turn_failed = true;
    return rc;
  }
  b->audits[b->n_audits++] = one;
  return 0;
}

/* ---- Reads ------------------------------------------------------------------------------- */

/* Copies column c (text) into dst[cap]. Returns false when NULL or too long. */
static bool col_text(sqlite3_stmt *st, int c, char *dst, size_t cap) {
  const unsigned char *t = sqlite3_column_text(st, c);
  int n = sqlite3_column_bytes(st, c);
  if (t == NULL || n < 0 || (size_t)n >= cap)
    return false;
  memcpy(dst, t, (size_t)n);
  dst[n] = '\0';
  return true;
}

static uint64_t col_u64(sqlite3_stmt *st, int c) {
  return (uint64_t)sqlite3_column_int64(st, c);
}

/* Parses one row of RESV_COLUMNS, its masks mapped to this run's devices (gone, when not NULL,
 * gets a stored UUID not present; GPUM_UUID_LEN bytes). Returns 0 or GPUM_EIO naming the row. */
static int read_row(const gpumd_ledger_t *l, sqlite3_stmt *st, gpumd_resv_t *r, char *gone) {
  char state[16], on_timeout[16], lease[16];
  memset(r, 0, sizeof(*r));
  r->id = col_u64(st, 0);
  bool ok =
      col_text(st, 1, r->token, sizeof(r->token)) && col_text(st, 2, state, sizeof(state)) &&
      col_text(st, 3, r->reason, sizeof(r->reason)) &&
      col_text(st, 6, r->label, sizeof(r->label)) && col_text(st, 9, r->model, sizeof(r->model)) &&
      col_text(st, 14, on_timeout, sizeof(on_timeout)) && col_text(st, 15, lease, sizeof(lease)) &&
      gpumd_resv_state_parse(state, &r->state) == 0 &&
      gpumd_on_timeout_parse(on_timeout, &r->on_timeout) == 0 &&
      gpumd_lease_kind_parse(lease, &r->lease) == 0;
  if (!ok)
    return gpum_error(GPUM_EIO, "ledger %s: reservation r-%llu has an invalid row", l->path,
                      (unsigned long long)r->id);
  r->uid = (uint32_t)sqlite3_column_int64(st, 4);
  r->pid = (int32_t)sqlite3_column_int64(st, 5);
  r->bytes_per_gpu = col_u64(st, 7);
  r->gpus = (unsigned)sqlite3_column_int64(st, 8);
  r->min_memory = col_u64(st, 10);
  r->want_mask = col_u64(st, 11);
  r->priority = (int)sqlite3_column_int64(st, 12);
  r->timeout_ms = col_u64(st, 13);
  r->lease_pid = (int32_t)sqlite3_column_int64(st, 16);
  r->ttl_ms = col_u64(st, 17);
  r->expires_ns = col_u64(st, 18);
  r->device_mask = col_u64(st, 19);
  r->created_ns = col_u64(st, 20);
  r->granted_ns = col_u64(st, 21);
  r->ended_ns = col_u64(st, 22);
  r->timeout_told = sqlite3_column_int(st, 23) != 0;
  r->pid_start = col_u64(st, 24);
  r->lease_pid_start = col_u64(st, 25);
  char want_gone[GPUM_UUID_LEN] = "";
  if (gone != NULL)
    gone[0] = '\0';
  map_uuids(l, sqlite3_column_text(st, 26), &r->device_mask, gone, GPUM_UUID_LEN);
  map_uuids(l, sqlite3_column_text(st, 27), &r->want_mask, want_gone, sizeof(want_gone));
  /* A queued request whose explicit devices are too few now can never be granted. */
  if (gone != NULL && gone[0] == '\0' && want_gone[0] != '\0' && r->state == GPUMD_RESV_QUEUED &&
      (unsigned)__builtin_popcountll(r->want_mask) < r->gpus)
    memcpy(gone, want_gone, sizeof(want_gone));
  return 0;
}

int gpumd_ledger_load_rows(gpumd_ledger_t *l, gpumd_ledger_row_t **out, size_t *count) {
  int frc = flush_pending(l); /* reads see this turn's puts */
  if (frc < 0)
    return frc;
  static const char sql[] = "SELECT " RESV_COLUMNS " FROM reservations "
                            "WHERE state IN ('QUEUED', 'GRANTED') ORDER BY id";
  sqlite3_stmt *st = NULL;
  gpumd_ledger_row_t *arr = NULL;
  size_t n = 0, cap = 0;
  int rc = 0, step;
  *out = NULL;
  *count = 0;
  if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK)
    return db_error(l, "cannot read reservations");
  while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
    if (n == cap) {
      size_t ncap = cap ? cap * 2 : 16;
      gpumd_ledger_row_t *p = realloc(arr, ncap * sizeof(*p));
      if (p == NULL) {
        rc = gpum_error(GPUM_ENOMEM, "out of memory loading %zu reservations", ncap);
        break;
      }
      arr = p;
      cap = ncap;
    }
    rc = read_row(l, st, &arr[n].r, arr[n].gone);
    n += rc == 0 ? 1 : 0;
  }
  if (rc == 0 && step != SQLITE_DONE)
    rc = db_error(l, "cannot read reservations");
  sqlite3_finalize(st);
  if (rc < 0) {
    free(arr);
    return rc;
  }
  *out = arr;
  *count = n;
  return 0;
}

int gpumd_ledger_load_all(gpumd_ledger_t *l, gpumd_resv_t **out, size_t *count) {
  gpumd_ledger_row_t *rows = NULL;
  int rc = gpumd_ledger_load_rows(l, &rows, count);
  *out = NULL;
  if (rc < 0 || *count == 0)
    return rc;
  gpumd_resv_t *arr = malloc(*count * sizeof(*arr));
  if (arr == NULL) {
    free(rows);
    rc = gpum_error(GPUM_ENOMEM, "out of memory loading %zu reservations", *count);
    *count = 0;
    return rc;
  }
  for (size_t i = 0; i < *count; i++)
    arr[i] = rows[i].r;
  free(rows);
  *out = arr;
  return 0;
}

int gpumd_ledger_get(gpumd_ledger_t *l, uint64_t id, gpumd_resv_t *out) {
  int frc = flush_pending(l); /* reads see this turn's puts */
  if (frc < 0)
    return frc;
  static const char sql[] = "SELECT " RESV_COLUMNS " FROM reservations WHERE id = ?";
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK)
    return db_error(l, "cannot read a reservation");
  sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
  int step = sqlite3_step(st);
  int rc;
  if (step == SQLITE_ROW)
    rc = read_row(l, st, out, NULL);
  else if (step == SQLITE_DONE)
    rc = gpum_error(GPUM_ENOENT, "no reservation r-%llu in the ledger", (unsigned long long)id);
  else
    rc = db_error(l, "cannot read a reservation");
  sqlite3_finalize(st);
  return rc;
}

int gpumd_ledger_max_id(gpumd_ledger_t *l, uint64_t *out) {
  int frc = flush_pending(l); /* reads see this turn's puts */
  if (frc < 0)
    return frc;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(l->db, "SELECT coalesce(max(id), 0) FROM reservations", -1, &st, NULL) !=
      SQLITE_OK)
    return db_error(l, "cannot read the highest id");
  int rc = 0;
  if (sqlite3_step(st) == SQLITE_ROW)
    *out = col_u64(st, 0);
  else
    rc = db_error(l, "cannot read the highest id");
  sqlite3_finalize(st);
  return rc;
}

/* "NEW" or a state name. */
static gpumd_resv_state_t audit_state(const unsigned char *t) {
  gpumd_resv_state_t s = GPUMD_RESV_NEW;
  if (t != NULL && strcmp((const char *)t, "NEW") != 0 &&
      gpumd_resv_state_parse((const char *)t, &s) != 0)
    s = GPUMD_RESV_NEW;
  return s;
}

int gpumd_ledger_audit_list(gpumd_ledger_t *l, uint64_t reservation, gpumd_ledger_audit_fn fn,
                            void *user) {
  int frc = flush_pending(l); /* reads see this turn's puts */
  if (frc < 0)
    return frc;
  static const char all[] = "SELECT id, reservation, from_state, to_state, time_ns, reason, "
                            "uid, pid FROM audit WHERE ?1 = 0 OR reservation = ?1 ORDER BY id";
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(l->db, all, -1, &st, NULL) != SQLITE_OK)
    return db_error(l, "cannot read the audit log");
  sqlite3_bind_int64(st, 1, (sqlite3_int64)reservation);
  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    const unsigned char *reason = sqlite3_column_text(st, 5);
    gpumd_ledger_audit_t a = {
        .id = col_u64(st, 0),
        .reservation = col_u64(st, 1),
        .from = audit_state(sqlite3_column_text(st, 2)),
        .to = audit_state(sqlite3_column_text(st, 3)),
        .time_ns = col_u64(st, 4),
        .reason = reason ? (const char *)reason : "",
        .uid = (uint32_t)sqlite3_column_int64(st, 6),
        .pid = (int32_t)sqlite3_column_int64(st, 7),
    };
    if (!fn(user, &a)) {
      step = SQLITE_DONE;
      break;
    }
  }
  int rc = step == SQLITE_DONE ? 0 : db_error(l, "cannot read the audit log");
  sqlite3_finalize(st);
  return rc;
}

/* ---- Retention --------------------------------------------------------------------------- */

#define PRUNE_SCAN_MAX 20000 /* reservation rows looked at per call, survivors included */

/* The ids of up to max finished reservations that ended before before_ns, into ids (*n of
 * them), in id order, which is the order they were created in: the scan goes on from where
 * the last call stopped (l->prune_cursor) and stops at the first reservation created at or
 * after before_ns (none after it can have ended before: the next call starts over), after
 * PRUNE_SCAN_MAX rows or when max are found (*more then: the next call goes on from there).
 * Never the highest id. */
static int prune_select(gpumd_ledger_t *l, uint64_t before_ns, unsigned max, uint64_t *ids,
                        size_t *n, bool *more) {
  static const char sql[] =
      "SELECT id, created_ns >= ?1, ended_ns > 0 AND ended_ns < ?1 AND state IN "
      "('RELEASED', 'EXPIRED', 'CANCELLED', 'FAILED') FROM reservations "
      "WHERE id > ?2 AND id < (SELECT max(id) FROM reservations) ORDER BY id";
  sqlite3_stmt *st = NULL;
  *n = 0;
  if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK)
    return db_error(l, "cannot select reservations to prune");
  sqlite3_bind_int64(st, 1, (sqlite3_int64)(before_ns > INT64_MAX ? INT64_MAX : before_ns));
  sqlite3_bind_int64(st, 2, (sqlite3_int64)l->prune_cursor);
  int step;
  unsigned scanned = 0;
  uint64_t cursor = 0; /* where the next call goes on; 0: from the start */
  while ((step = sqlite3_step(st)) == SQLITE_ROW && !sqlite3_column_int(st, 1)) {
    if (sqlite3_column_int(st, 2))
      ids[(*n)++] = col_u64(st, 0);
    if (*n == max || ++scanned == PRUNE_SCAN_MAX) {
      *more = true;
      cursor = col_u64(st, 0);
      break;
    }
  }
  l->prune_cursor = cursor;
  int rc = step == SQLITE_DONE || step == SQLITE_ROW
               ? 0
               : db_error(l, "cannot select reservations to prune");
  sqlite3_finalize(st);
  return rc;
}

/* Deletes up to max audit rows older than before_ns, oldest first (id order, which is the
 * order they were written in), never the newest; *n gets how many (max: *more). */
static int prune_audit(gpumd_ledger_t *l, uint64_t before_ns, unsigned max, size_t *n, bool *more) {
  static const char sql[] = "SELECT id, time_ns < ?1 FROM audit WHERE id < (SELECT max(id) FROM "
                            "audit) ORDER BY id LIMIT ?2";
  sqlite3_stmt *st = NULL;
  *n = 0;
  if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK)
    return db_error(l, "cannot select audit rows to prune");
  sqlite3_bind_int64(st, 1, (sqlite3_int64)(before_ns > INT64_MAX ? INT64_MAX : before_ns));
  sqlite3_bind_int64(st, 2, max);
  int step;
  uint64_t last = 0;
  while ((step = sqlite3_step(st)) == SQLITE_ROW && sqlite3_column_int(st, 1)) {
    last = col_u64(st, 0);
    ++*n;
  }
  int rc = step == SQLITE_DONE || step == SQLITE_ROW ? 0 : db_error(l, "cannot select audit rows");
  sqlite3_finalize(st);
  if (rc < 0 || *n == 0)
    return rc;
  *more |= *n == max;
  rc = ensure_turn(l);
  if (rc == 0 &&
      sqlite3_prepare_v2(l->db, "DELETE FROM audit WHERE id <= ?", -1, &st, NULL) != SQLITE_OK)
    rc = db_error(l, "cannot prepare the pruning");
  if (rc == 0) {
    sqlite3_bind_int64(st, 1, (sqlite3_int64)last);
    rc = step_done(l, st, "cannot prune the audit log");
    sqlite3_finalize(st);
  }
  return rc;
}

int gpumd_ledger_prune(gpumd_ledger_t *l, uint64_t before_ns, unsigned max, size_t *deleted,
                       bool *more) {
  bool more_ = false;
  if (more == NULL)
    more = &more_;
  *more = false;
  if (deleted != NULL)
    *deleted = 0;
  if (max == 0 || max > 10000)
    return gpum_error(GPUM_EINVAL, "prune batch of %u: expected 1..10000", max);
  uint64_t *ids = malloc(max * sizeof(*ids));
  if (ids == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory pruning the ledger");
  size_t n = 0, n_audit = 0;
  sqlite3_stmt *del_resv = NULL;
  int rc = flush_pending(l); /* the selection sees this turn's puts */
  if (rc == 0)
    rc = prune_select(l, before_ns, max, ids, &n, more);
  if (rc == 0 && n > 0) /* no turn (no commit) when there is nothing to delete */
    rc = ensure_turn(l);
  if (rc == 0 && n > 0 &&
      sqlite3_prepare_v2(l->db, "DELETE FROM reservations WHERE id = ?", -1, &del_resv, NULL) !=
          SQLITE_OK)
    rc = db_error(l, "cannot prepare the pruning");
  for (size_t i = 0; rc == 0 && i < n; i++) {
    sqlite3_bind_int64(del_resv, 1, (sqlite3_int64)ids[i]);
    rc = step_done(l, del_resv, "cannot prune a reservation");
  }
  sqlite3_finalize(del_resv);
  free(ids);
  if (rc == 0)
    rc = prune_audit(l, before_ns, max * 4, &n_audit, more);
  if (rc == 0 && deleted != NULL)
    *deleted = n;
  return rc;
}
