/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gpumd ledger (see ledger.h): reservations and their audit trail in SQLite, WAL mode,
 * one transaction per loop turn. Opening creates the state directory (0700) and the database
 * (0600), sets the journal and sync modes, and creates or checks the versioned schema.
 */
#include "ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include <gpum/error.h>

struct gpum_ledger {
  sqlite3 *db;
  int lock_fd; /* flock'ed state_dir/ledger.lock: one gpumd per state directory */
  char *path;
  bool in_turn;
  uint64_t commits;
  sqlite3_stmt *put, *audit;
};

#define RESV_COLUMNS                                                                    \
  "id, token, state, reason, uid, pid, label, bytes_per_gpu, gpus, model, min_memory, " \
  "want_mask, priority, timeout_ms, on_timeout, lease, lease_pid, ttl_ms, expires_ns, " \
  "device_mask, created_ns, granted_ns, ended_ns, timeout_told, pid_start, lease_pid_start"
#define RESV_NCOLS 26

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

/* Sets the detail from SQLite's message and returns GPUM_EIO. */
static int db_error(const gpum_ledger_t *l, const char *what) {
  return gpum_error(GPUM_EIO, "ledger %s: %s: %s", l->path, what, sqlite3_errmsg(l->db));
}

static int exec(gpum_ledger_t *l, const char *sql, const char *what) {
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
static int setup_schema(gpum_ledger_t *l) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(l->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
    return db_error(l, "cannot read the schema version");
  int version = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
  sqlite3_finalize(st);
  if (version < 0)
    return db_error(l, "cannot read the schema version");
  if (version > GPUM_LEDGER_SCHEMA_VERSION)
    return gpum_error(GPUM_EIO, "ledger %s: schema version %d is newer than this gpumd's (%d)",
                      l->path, version, GPUM_LEDGER_SCHEMA_VERSION);
  if (version == GPUM_LEDGER_SCHEMA_VERSION)
    return 0;
  int rc = exec(l, "BEGIN IMMEDIATE", "cannot begin");
  if (rc == 0 && version == 0)
    rc = exec(l, schema_v1, "cannot create the schema");
  if (rc == 0 && version < 2)
    rc = exec(l, migrate_v2, "cannot migrate the schema to version 2");
  if (rc == 0)
    rc = exec(l, "COMMIT", "cannot commit the schema");
  if (rc < 0)
    sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

static int prepare(gpum_ledger_t *l) {
  static const char put[] = "INSERT OR REPLACE INTO reservations (" RESV_COLUMNS ") VALUES "
                            "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
  static const char audit[] = "INSERT INTO audit (reservation, from_state, to_state, time_ns, "
                              "reason, uid, pid) VALUES (?,?,?,?,?,?,?)";
  if (sqlite3_prepare_v3(l->db, put, -1, SQLITE_PREPARE_PERSISTENT, &l->put, NULL) != SQLITE_OK ||
      sqlite3_prepare_v3(l->db, audit, -1, SQLITE_PREPARE_PERSISTENT, &l->audit, NULL) != SQLITE_OK)
    return db_error(l, "cannot prepare statements");
  return 0;
}

/* Takes state_dir/ledger.lock so that two daemons never share a ledger. The kernel drops the
 * lock when the process dies, so a SIGKILLed gpumd never blocks its successor. */
static int lock_dir(gpum_ledger_t *l, const char *state_dir) {
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

static int open_db(gpum_ledger_t *l, const gpum_ledger_opts_t *opts) {
  /* Create the file ourselves so that it is 0600 whatever the umask; SQLite gives the -wal
   * and -shm files the database file's mode. */
  int fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return gpum_error(errno == EACCES || errno == EROFS ? GPUM_EPERM : GPUM_EIO,
                      "cannot open ledger %s: %s", l->path, strerror(errno));
  close(fd);
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(l->path, &l->db, flags, NULL) != SQLITE_OK)
    return db_error(l, "cannot open");
  sqlite3_extended_result_codes(l->db, 1);
  sqlite3_busy_timeout(l->db, 2000);
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
  return rc;
}

int gpum_ledger_open(const char *state_dir, const gpum_ledger_opts_t *opts, gpum_ledger_t **out) {
  gpum_ledger_opts_t def = {0};
  if (opts == NULL)
    opts = &def;
  if (state_dir == NULL || state_dir[0] == '\0')
    return gpum_error(GPUM_EINVAL, "no state directory given");
  int rc = make_dirs(state_dir);
  if (rc < 0)
    return rc;
  gpum_ledger_t *l = calloc(1, sizeof(*l));
  size_t len = strlen(state_dir) + sizeof("/" GPUM_LEDGER_FILE);
  if (l == NULL || (l->path = malloc(len)) == NULL) {
    free(l);
    return gpum_error(GPUM_ENOMEM, "out of memory opening the ledger");
  }
  snprintf(l->path, len, "%s/%s", state_dir, GPUM_LEDGER_FILE);
  l->lock_fd = -1;
  rc = lock_dir(l, state_dir);
  if (rc == 0)
    rc = open_db(l, opts);
  if (rc < 0) {
    gpum_ledger_close(l);
    return rc;
  }
  *out = l;
  return 0;
}

void gpum_ledger_close(gpum_ledger_t *l) {
  if (l == NULL)
    return;
  if (l->in_turn)
    gpum_ledger_rollback_turn(l);
  sqlite3_finalize(l->put);
  sqlite3_finalize(l->audit);
  sqlite3_close(l->db);
  if (l->lock_fd >= 0)
    close(l->lock_fd);
  free(l->path);
  free(l);
}

const char *gpum_ledger_path(const gpum_ledger_t *l) {
  return l->path;
}

/* ---- Turns ------------------------------------------------------------------------------- */

int gpum_ledger_begin_turn(gpum_ledger_t *l) {
  if (l->in_turn)
    return gpum_error(GPUM_ESTATE, "ledger turn already open");
  int rc = exec(l, "BEGIN IMMEDIATE", "cannot begin a transaction");
  if (rc == 0)
    l->in_turn = true;
  return rc;
}

static int ensure_turn(gpum_ledger_t *l) {
  return l->in_turn ? 0 : gpum_ledger_begin_turn(l);
}

int gpum_ledger_commit_turn(gpum_ledger_t *l) {
  if (!l->in_turn)
    return 0;
  l->in_turn = false;
  if (sqlite3_exec(l->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
    int rc = db_error(l, "cannot commit");
    sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
  }
  l->commits++;
  return 0;
}

void gpum_ledger_rollback_turn(gpum_ledger_t *l) {
  if (!l->in_turn)
    return;
  l->in_turn = false;
  sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
}

uint64_t gpum_ledger_commit_count(const gpum_ledger_t *l) {
  return l->commits;
}

/* ---- Writes ------------------------------------------------------------------------------ */

/* Runs a prepared INSERT and resets it. */
static int step_done(gpum_ledger_t *l, sqlite3_stmt *st, const char *what) {
  int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : db_error(l, what);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return rc;
}

int gpum_ledger_put(gpum_ledger_t *l, const gpum_resv_t *r) {
  int rc = ensure_turn(l);
  if (rc < 0)
    return rc;
  sqlite3_stmt *st = l->put;
  int i = 1;
  sqlite3_bind_int64(st, i++, (sqlite3_int64)r->id);
  sqlite3_bind_text(st, i++, r->token, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, i++, gpum_resv_state_name(r->state), -1, SQLITE_STATIC);
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
  sqlite3_bind_text(st, i++, gpum_on_timeout_name(r->on_timeout), -1, SQLITE_STATIC);
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
  return step_done(l, st, "cannot store a reservation");
}

int gpum_ledger_audit(gpum_ledger_t *l, const gpum_ledger_audit_t *a) {
  int rc = ensure_turn(l);
  if (rc < 0)
    return rc;
  sqlite3_stmt *st = l->audit;
  sqlite3_bind_int64(st, 1, (sqlite3_int64)a->reservation);
  sqlite3_bind_text(st, 2, gpum_resv_state_name(a->from), -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, gpum_resv_state_name(a->to), -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 4, (sqlite3_int64)a->time_ns);
  sqlite3_bind_text(st, 5, a->reason ? a->reason : "", -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 6, a->uid);
  sqlite3_bind_int64(st, 7, a->pid);
  return step_done(l, st, "cannot append to the audit log");
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

/* Parses one row of RESV_COLUMNS. Returns 0 or GPUM_EIO naming the row. */
static int read_row(const gpum_ledger_t *l, sqlite3_stmt *st, gpum_resv_t *r) {
  char state[16], on_timeout[16], lease[16];
  memset(r, 0, sizeof(*r));
  r->id = col_u64(st, 0);
  bool ok =
      col_text(st, 1, r->token, sizeof(r->token)) && col_text(st, 2, state, sizeof(state)) &&
      col_text(st, 3, r->reason, sizeof(r->reason)) &&
      col_text(st, 6, r->label, sizeof(r->label)) && col_text(st, 9, r->model, sizeof(r->model)) &&
      col_text(st, 14, on_timeout, sizeof(on_timeout)) && col_text(st, 15, lease, sizeof(lease)) &&
      gpum_resv_state_parse(state, &r->state) == 0 &&
      gpum_on_timeout_parse(on_timeout, &r->on_timeout) == 0 &&
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
  return 0;
}

int gpum_ledger_load_all(gpum_ledger_t *l, gpum_resv_t **out, size_t *count) {
  static const char sql[] = "SELECT " RESV_COLUMNS " FROM reservations "
                            "WHERE state IN ('QUEUED', 'GRANTED') ORDER BY id";
  sqlite3_stmt *st = NULL;
  gpum_resv_t *arr = NULL;
  size_t n = 0, cap = 0;
  int rc = 0, step;
  *out = NULL;
  *count = 0;
  if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK)
    return db_error(l, "cannot read reservations");
  while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
    if (n == cap) {
      size_t ncap = cap ? cap * 2 : 16;
      gpum_resv_t *p = realloc(arr, ncap * sizeof(*p));
      if (p == NULL) {
        rc = gpum_error(GPUM_ENOMEM, "out of memory loading %zu reservations", ncap);
        break;
      }
      arr = p;
      cap = ncap;
    }
    rc = read_row(l, st, &arr[n]);
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

int gpum_ledger_get(gpum_ledger_t *l, uint64_t id, gpum_resv_t *out) {
  static const char sql[] = "SELECT " RESV_COLUMNS " FROM reservations WHERE id = ?";
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK)
    return db_error(l, "cannot read a reservation");
  sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
  int step = sqlite3_step(st);
  int rc;
  if (step == SQLITE_ROW)
    rc = read_row(l, st, out);
  else if (step == SQLITE_DONE)
    rc = gpum_error(GPUM_ENOENT, "no reservation r-%llu in the ledger", (unsigned long long)id);
  else
    rc = db_error(l, "cannot read a reservation");
  sqlite3_finalize(st);
  return rc;
}

int gpum_ledger_max_id(gpum_ledger_t *l, uint64_t *out) {
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
static gpum_resv_state_t audit_state(const unsigned char *t) {
  gpum_resv_state_t s = GPUM_RESV_NEW;
  if (t != NULL && strcmp((const char *)t, "NEW") != 0 &&
      gpum_resv_state_parse((const char *)t, &s) != 0)
    s = GPUM_RESV_NEW;
  return s;
}

int gpum_ledger_audit_list(gpum_ledger_t *l, uint64_t reservation, gpum_ledger_audit_fn fn,
                           void *user) {
  static const char all[] = "SELECT id, reservation, from_state, to_state, time_ns, reason, "
                            "uid, pid FROM audit WHERE ?1 = 0 OR reservation = ?1 ORDER BY id";
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(l->db, all, -1, &st, NULL) != SQLITE_OK)
    return db_error(l, "cannot read the audit log");
  sqlite3_bind_int64(st, 1, (sqlite3_int64)reservation);
  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    const unsigned char *reason = sqlite3_column_text(st, 5);
    gpum_ledger_audit_t a = {
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
