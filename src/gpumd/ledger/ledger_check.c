/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checking the ledger's rows when it is opened (see ledger.h). SQLite's PRAGMA quick_check
 * finds damaged pages and records; this finds rows that SQLite calls sound but that gpumd never
 * writes: one flipped byte in a label or a token, a row edited by hand. Every reservation row,
 * audit row, device switch and the highest id must hold what gpumd writes, by the rules the
 * protocol applies to a new request: text is UTF-8 without NUL bytes and fits its field, a token
 * is 32 lowercase hex digits, states, leases and timeout actions are spelled as gpumd spells
 * them, numbers are in their ranges, Slurm ids are as gpumd_slurm_ids_check accepts them. A row
 * that is not would go out to every client that lists the reservations (and, not being UTF-8,
 * fail them all), so the ledger is refused, the message naming the row and the field.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

#include <gpum/error.h>

#include "ledger_internal.h"
#include "utf8_internal.h"

/* What is wrong with a row: its field and why. */
typedef struct {
  const char *field;
  char why[160];
} fault_t;

static bool fault(fault_t *f, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool fault(fault_t *f, const char *field, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  f->field = field;
  vsnprintf(f->why, sizeof f->why, fmt, ap);
  va_end(ap);
  return false;
}

/* Column c is an integer in [lo, hi]. */
static bool int_ok(fault_t *f, sqlite3_stmt *st, int c, const char *field, int64_t lo, int64_t hi) {
  if (sqlite3_column_type(st, c) != SQLITE_INTEGER)
    return fault(f, field, "is not an integer");
  int64_t v = sqlite3_column_int64(st, c);
  if (v < lo || v > hi)
    return fault(f, field, "is %lld, out of range %lld..%lld", (long long)v, (long long)lo,
                 (long long)hi);
  return true;
}

/* Column c is text: UTF-8, no NUL byte, shorter than cap bytes (the field it is read into). */
static bool text_ok(fault_t *f, sqlite3_stmt *st, int c, const char *field, size_t cap) {
  if (sqlite3_column_type(st, c) != SQLITE_TEXT)
    return fault(f, field, "is not text");
  const char *t = (const char *)sqlite3_column_text(st, c);
  size_t n = (size_t)sqlite3_column_bytes(st, c);
  if (t == NULL)
    return fault(f, field, "cannot be read");
  if (strlen(t) != n)
    return fault(f, field, "holds a NUL byte");
  if (!gpumd_utf8_valid(t, n))
    return fault(f, field, "is not valid UTF-8");
  if (n >= cap)
    return fault(f, field, "is %zu bytes long, more than %zu", n, cap - 1);
  return true;
}

static bool state_spelled(const char *s) {
  gpumd_resv_state_t v;
  return gpumd_resv_state_parse(s, &v) == 0 && strcmp(gpumd_resv_state_name(v), s) == 0;
}

static bool lease_spelled(const char *s) {
  gpumd_lease_kind_t v;
  return gpumd_lease_kind_parse(s, &v) == 0 && strcmp(gpumd_lease_kind_name(v), s) == 0;
}

static bool on_timeout_spelled(const char *s) {
  gpumd_on_timeout_t v;
  return gpumd_on_timeout_parse(s, &v) == 0 && strcmp(gpumd_on_timeout_name(v), s) == 0;
}

/* Column c is one of the names spelled() accepts (what: "a reservation state"). */
static bool name_ok(fault_t *f, sqlite3_stmt *st, int c, const char *field,
                    bool (*spelled)(const char *), const char *what) {
  if (!text_ok(f, st, c, field, 16))
    return false;
  const char *t = (const char *)sqlite3_column_text(st, c);
  if (!spelled(t))
    return fault(f, field, "'%s' is not %s as gpumd writes it", t, what);
  return true;
}

/* A reservation's token: 32 lowercase hex digits. */
static bool token_ok(fault_t *f, sqlite3_stmt *st, int c) {
  if (!text_ok(f, st, c, "token", GPUMD_RESV_TOKEN_LEN))
    return false;
  const char *t = (const char *)sqlite3_column_text(st, c);
  size_t n = strspn(t, "0123456789abcdef");
  if (n != GPUMD_RESV_TOKEN_LEN - 1 || t[n] != '\0')
    return fault(f, "token", "is not %d lowercase hex digits", GPUMD_RESV_TOKEN_LEN - 1);
  return true;
}

/* Device UUIDs, comma-separated: "" or each 1..GPUM_UUID_LEN - 1 bytes. */
static bool uuids_ok(fault_t *f, sqlite3_stmt *st, int c, const char *field) {
  if (!text_ok(f, st, c, field, GPUMD_SCHED_MAX_DEVICES * GPUM_UUID_LEN))
    return false;
  const char *p = (const char *)sqlite3_column_text(st, c);
  while (*p != '\0') {
    size_t n = strcspn(p, ",");
    if (n == 0 || n >= GPUM_UUID_LEN)
      return fault(f, field, "holds a UUID of %zu bytes", n);
    p += n + (p[n] == ',');
  }
  return true;
}

/* One row of RESV_COLUMNS. */
static bool resv_ok(fault_t *f, sqlite3_stmt *st) {
  enum {
    ID,
    TOKEN,
    STATE,
    REASON,
    UID,
    PID,
    LABEL,
    BYTES,
    GPUS,
    MODEL,
    MIN_MEMORY,
    WANT,
    PRIO,
    TIMEOUT,
    ON_TIMEOUT,
    LEASE,
    LEASE_PID,
    TTL,
    EXPIRES,
    DEVICES,
    CREATED,
    GRANTED,
    ENDED,
    TOLD,
    PID_START,
    LEASE_PID_START,
    DEV_UUIDS,
    WANT_UUIDS,
    SLURM_JOB,
    SLURM_STEP,
    PREEMPTIBLE,
    SUSPEND
  };
  static const struct {
    int col;
    const char *name;
  } any_int[] = {{MIN_MEMORY, "min_memory"},
                 {WANT, "want_mask"},
                 {TIMEOUT, "timeout_ms"},
                 {TTL, "ttl_ms"},
                 {EXPIRES, "expires_ns"},
                 {DEVICES, "device_mask"},
                 {CREATED, "created_ns"},
                 {GRANTED, "granted_ns"},
                 {ENDED, "ended_ns"},
                 {PID_START, "pid_start"},
                 {LEASE_PID_START, "lease_pid_start"}};
  bool ok = int_ok(f, st, ID, "id", 1, INT64_MAX) && token_ok(f, st, TOKEN) &&
            name_ok(f, st, STATE, "state", state_spelled, "a reservation state") &&
            text_ok(f, st, REASON, "reason", GPUMD_RESV_REASON_LEN) &&
            int_ok(f, st, UID, "uid", 0, UINT32_MAX) && int_ok(f, st, PID, "pid", 0, INT32_MAX) &&
            text_ok(f, st, LABEL, "label", GPUMD_RESV_LABEL_LEN) &&
            int_ok(f, st, BYTES, "bytes_per_gpu", INT64_MIN, INT64_MAX) &&
            int_ok(f, st, GPUS, "gpus", 1, GPUMD_SCHED_MAX_DEVICES) &&
            text_ok(f, st, MODEL, "model", GPUMD_RESV_MODEL_LEN) &&
            int_ok(f, st, PRIO, "priority", -100, 100) &&
            name_ok(f, st, ON_TIMEOUT, "on_timeout", on_timeout_spelled, "a timeout action") &&
            name_ok(f, st, LEASE, "lease", lease_spelled, "a lease kind") &&
            int_ok(f, st, LEASE_PID, "lease_pid", 0, INT32_MAX) &&
            int_ok(f, st, TOLD, "timeout_told", 0, 1) &&
            uuids_ok(f, st, DEV_UUIDS, "device_uuids") &&
            uuids_ok(f, st, WANT_UUIDS, "want_uuids") &&
            text_ok(f, st, SLURM_JOB, "slurm_job", GPUMD_RESV_SLURM_LEN) &&
            text_ok(f, st, SLURM_STEP, "slurm_step", GPUMD_RESV_SLURM_LEN) &&
            int_ok(f, st, PREEMPTIBLE, "preemptible", 0, 1) &&
            text_ok(f, st, SUSPEND, "suspend", GPUMD_LEDGER_SUSPEND_LEN);
  for (size_t i = 0; ok && i < sizeof any_int / sizeof any_int[0]; i++)
    ok = int_ok(f, st, any_int[i].col, any_int[i].name, INT64_MIN, INT64_MAX);
  if (!ok)
    return false;
  /* What the fields say together. */
  const char *state = (const char *)sqlite3_column_text(st, STATE);
  const char *lease = (const char *)sqlite3_column_text(st, LEASE);
  const char *job = (const char *)sqlite3_column_text(st, SLURM_JOB);
  const char *step = (const char *)sqlite3_column_text(st, SLURM_STEP);
  if (sqlite3_column_int64(st, BYTES) == 0)
    return fault(f, "bytes_per_gpu", "is 0");
  if (strcmp(state, "GRANTED") == 0 && sqlite3_column_int64(st, DEVICES) == 0)
    return fault(f, "device_mask", "is 0 in a GRANTED reservation");
  const char *susp = (const char *)sqlite3_column_text(st, SUSPEND);
  if (strcmp(state, "SUSPENDED") == 0 && sqlite3_column_int64(st, DEVICES) == 0)
    return fault(f, "device_mask", "is 0 in a SUSPENDED reservation");
  if (strcmp(state, "SUSPENDED") == 0 || susp[0] != '\0') {
    gpumd_resv_t r;
    memset(&r, 0, sizeof r);
    if (!gpumd__ledger_suspend_parse(susp, &r, NULL, 0))
      return fault(f, "suspend", "is not a suspend's facts (hold, time, host bytes, pid:start)");
  }
  if (strcmp(lease, "pid") == 0 && sqlite3_column_int64(st, LEASE_PID) == 0)
    return fault(f, "lease_pid", "is 0 in a pid lease");
  if (strcmp(lease, "ttl") == 0 && sqlite3_column_int64(st, TTL) == 0)
    return fault(f, "ttl_ms", "is 0 in a ttl lease");
  if ((job[0] != '\0' || step[0] != '\0') && gpumd_slurm_ids_check(job, step) != 0) {
    char why[sizeof f->why];
    snprintf(why, sizeof why, "%s", gpum_last_error());
    return fault(f, "slurm_job", "and slurm_step are not a Slurm job step (%s)", why);
  }
  return true;
}

static bool from_spelled(const char *s) {
  return strcmp(s, "NEW") == 0 || state_spelled(s);
}

/* One audit row: id, reservation, from_state, to_state, time_ns, reason, uid, pid. */
static bool audit_ok(fault_t *f, sqlite3_stmt *st) {
  return int_ok(f, st, 0, "id", 1, INT64_MAX) && int_ok(f, st, 1, "reservation", 1, INT64_MAX) &&
         name_ok(f, st, 2, "from_state", from_spelled, "NEW or a reservation state") &&
         name_ok(f, st, 3, "to_state", state_spelled, "a reservation state") &&
         int_ok(f, st, 4, "time_ns", INT64_MIN, INT64_MAX) &&
         text_ok(f, st, 5, "reason", GPUMD_RESV_REASON_LEN) &&
         int_ok(f, st, 6, "uid", 0, UINT32_MAX) && int_ok(f, st, 7, "pid", 0, INT32_MAX);
}

/* One device switch: uuid, reason, uid, time_ns. */
static bool switch_ok(fault_t *f, sqlite3_stmt *st) {
  if (!text_ok(f, st, 0, "uuid", GPUM_UUID_LEN))
    return false;
  if (sqlite3_column_bytes(st, 0) == 0)
    return fault(f, "uuid", "is empty");
  return text_ok(f, st, 1, "reason", GPUMD_RESV_REASON_LEN) &&
         int_ok(f, st, 2, "uid", 0, UINT32_MAX) &&
         int_ok(f, st, 3, "time_ns", INT64_MIN, INT64_MAX);
}

/* The refusal: the ledger, the row (which), its field and why. */
static int refuse(const gpumd_ledger_t *l, const char *which, const fault_t *f) {
  return gpum_error(GPUM_EIO,
                    "ledger %s: %s: its %s %s; gpumd never writes that, so the ledger was "
                    "damaged or edited. " GPUMD_LEDGER_ADVICE,
                    l->path, which, f->field, f->why);
}

/* Runs sql and checks each row with ok(); which() names a bad row for the message. */
static int check_table(gpumd_ledger_t *l, const char *sql, bool (*ok)(fault_t *, sqlite3_stmt *),
                       void (*which)(sqlite3_stmt *, char *, size_t)) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK)
    return gpumd__ledger_db_error(l, "cannot check the rows");
  int step, rc = 0;
  fault_t f;
  while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
    if (!ok(&f, st)) {
      char name[160];
      which(st, name, sizeof name);
      rc = refuse(l, name, &f);
    }
  }
  if (rc == 0 && step != SQLITE_DONE)
    rc = gpumd__ledger_db_error(l, "cannot check the rows");
  sqlite3_finalize(st);
  return rc;
}

static void which_resv(sqlite3_stmt *st, char *buf, size_t len) {
  snprintf(buf, len, "reservation r-%lld", (long long)sqlite3_column_int64(st, 0));
}

static void which_audit(sqlite3_stmt *st, char *buf, size_t len) {
  snprintf(buf, len, "audit row %lld (of r-%lld)", (long long)sqlite3_column_int64(st, 0),
           (long long)sqlite3_column_int64(st, 1));
}

static void which_switch(sqlite3_stmt *st, char *buf, size_t len) {
  char uuid[GPUM_UUID_LEN];
  const char *t = (const char *)sqlite3_column_text(st, 0);
  gpumd_utf8_clean(t ? t : "", uuid, sizeof uuid); /* the message is UTF-8 too */
  snprintf(buf, len, "the switch of device '%.96s' (device_admin)", uuid);
}

int gpumd__ledger_check_rows(gpumd_ledger_t *l) {
  int rc =
      check_table(l, "SELECT " RESV_COLUMNS " FROM reservations ORDER BY id", resv_ok, which_resv);
  if (rc == 0)
    rc = check_table(l,
                     "SELECT id, reservation, from_state, to_state, time_ns, reason, uid, pid "
                     "FROM audit ORDER BY id",
                     audit_ok, which_audit);
  if (rc == 0)
    rc = check_table(l, "SELECT uuid, reason, uid, time_ns FROM device_admin", switch_ok,
                     which_switch);
  if (rc < 0)
    return rc;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(l->db, "SELECT value FROM meta WHERE key = 'max_id'", -1, &st, NULL) !=
      SQLITE_OK)
    return gpumd__ledger_db_error(l, "cannot check the highest id");
  fault_t f = {.field = "max_id", .why = "is missing"};
  bool ok = sqlite3_step(st) == SQLITE_ROW && int_ok(&f, st, 0, "max_id", 0, INT64_MAX);
  sqlite3_finalize(st);
  return ok ? 0 : refuse(l, "meta", &f);
}
