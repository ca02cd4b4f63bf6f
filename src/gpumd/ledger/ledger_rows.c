/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ledger's rows (see ledger.h): this run's devices by UUID (a reservation's devices are
 * stored as UUIDs beside the index masks, so a restart with the GPUs renumbered finds them),
 * staging and writing reservation and audit rows, and reading them back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include <gpum/error.h>

#include "ledger_internal.h"
#include "utf8_internal.h"

/* ---- Devices by UUID --------------------------------------------------------------------- */

int gpumd_ledger_set_devices(gpumd_ledger_t *l, const char *const *uuids, unsigned count) {
  if (count > GPUMD_SCHED_MAX_DEVICES)
    return gpum_error(GPUM_EINVAL, "%u devices: the ledger keeps at most %d", count,
                      GPUMD_SCHED_MAX_DEVICES);
  for (unsigned i = 0; i < count; i++) {
    const char *u = uuids[i] ? uuids[i] : "";
    if (strlen(u) >= GPUM_UUID_LEN || strchr(u, ',') != NULL || !gpumd_utf8_valid(u, strlen(u))) {
      char shown[48];
      gpumd_utf8_clean(u, shown, sizeof shown);
      return gpum_error(GPUM_EINVAL,
                        "device %u: UUID '%s' is too long, has a comma or is not UTF-8", i, shown);
    }
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
int gpumd__ledger_step_done(gpumd_ledger_t *l, sqlite3_stmt *st, const char *what) {
  int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : gpumd__ledger_db_error(l, what);
  sqlite3_reset(st); /* every use binds all the parameters: no clearing needed */
  return rc;
}

/* Binds text s, which must read back as ledger_check.c wants: text that is not UTF-8 (which
 * the protocol never lets in; a message cut inside a character) is stored with '?' for each
 * byte that is not part of a character, as it goes out on the wire. */
static void bind_text(sqlite3_stmt *st, int i, const char *s) {
  if (gpumd_utf8_valid(s, strlen(s))) {
    sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    return;
  }
  char clean[GPUMD_RESV_REASON_LEN];
  gpumd_utf8_clean(s, clean, sizeof clean);
  sqlite3_bind_text(st, i, clean, -1, SQLITE_TRANSIENT);
}

/* Binding put's parameters. A statement keeps its parameters across sqlite3_reset, and most
 * of a row's thirty values are those of the row before (the same uid, sizes, lease, empty
 * label and Slurm ids): binding only those that changed takes a fifth off a row's write. */

/* Parameter i: the integer v. */
static void put_int(gpumd_ledger_t *l, int i, sqlite3_int64 v) {
  uint64_t bit = UINT64_C(1) << i;
  if ((l->put_known & bit) && l->put_int[i] == v)
    return;
  sqlite3_bind_int64(l->put, i, v);
  l->put_int[i] = v;
  l->put_known |= bit;
}

/* Parameter i: the text s, which lives as long as the statement (a literal, a name table's). */
static void put_const(gpumd_ledger_t *l, int i, const char *s) {
  uint64_t bit = UINT64_C(1) << i;
  if ((l->put_known & bit) && l->put_text[i] == s)
    return;
  sqlite3_bind_text(l->put, i, s, -1, SQLITE_STATIC);
  l->put_text[i] = s;
  l->put_known |= bit;
}

/* Parameter i: the text s of this row only, bound every time (an empty one as the literal,
 * which the next row may keep): as is when raw, else as bind_text stores it. */
static void put_text_as(gpumd_ledger_t *l, int i, const char *s, bool raw) {
  if (s[0] == '\0') {
    put_const(l, i, "");
    return;
  }
  l->put_known &= ~(UINT64_C(1) << i);
  if (raw)
    sqlite3_bind_text(l->put, i, s, -1, SQLITE_STATIC);
  else
    bind_text(l->put, i, s);
}

static void put_text(gpumd_ledger_t *l, int i, const char *s) {
  put_text_as(l, i, s, false);
}

/* Text stored as is: the token, UUID lists, Slurm ids. */
static void put_raw(gpumd_ledger_t *l, int i, const char *s) {
  put_text_as(l, i, s, true);
}

/* Writes one reservation row (insert or update) in the open transaction. */
int gpumd__ledger_write_row(gpumd_ledger_t *l, const gpumd_resv_t *r) {
  _Static_assert(RESV_NCOLS < 64, "put_known has a bit per parameter");
  int i = 1;
  put_int(l, i++, (sqlite3_int64)r->id);
  put_raw(l, i++, r->token);
  put_const(l, i++, gpumd_resv_state_name(r->state));
  put_text(l, i++, r->reason);
  put_int(l, i++, r->uid);
  put_int(l, i++, r->pid);
  put_text(l, i++, r->label);
  put_int(l, i++, (sqlite3_int64)r->bytes_per_gpu);
  put_int(l, i++, r->gpus);
  put_text(l, i++, r->model);
  put_int(l, i++, (sqlite3_int64)r->min_memory);
  put_int(l, i++, (sqlite3_int64)r->want_mask);
  put_int(l, i++, r->priority);
  put_int(l, i++, (sqlite3_int64)r->timeout_ms);
  put_const(l, i++, gpumd_on_timeout_name(r->on_timeout));
  put_const(l, i++, gpumd_lease_kind_name(r->lease));
  put_int(l, i++, r->lease_pid);
  put_int(l, i++, (sqlite3_int64)r->ttl_ms);
  put_int(l, i++, (sqlite3_int64)r->expires_ns);
  put_int(l, i++, (sqlite3_int64)r->device_mask);
  put_int(l, i++, (sqlite3_int64)r->created_ns);
  put_int(l, i++, (sqlite3_int64)r->granted_ns);
  put_int(l, i++, (sqlite3_int64)r->ended_ns);
  put_int(l, i++, r->timeout_told ? 1 : 0);
  put_int(l, i++, (sqlite3_int64)r->pid_start);
  put_int(l, i++, (sqlite3_int64)r->lease_pid_start);
  put_raw(l, i++, format_uuids(l, r->device_mask, l->dev_buf, sizeof(l->dev_buf)));
  put_raw(l, i++, format_uuids(l, r->want_mask, l->want_buf, sizeof(l->want_buf)));
  put_raw(l, i++, r->slurm_job);
  put_raw(l, i++, r->slurm_step);
  put_int(l, i++, r->preemptible ? 1 : 0);
  put_raw(l, i++, gpumd__ledger_suspend_format(l, r, l->suspend_buf, sizeof l->suspend_buf));
  return gpumd__ledger_step_done(l, l->put, "cannot store a reservation");
}

int gpumd__ledger_write_high(gpumd_ledger_t *l, uint64_t id) {
  if (id <= l->id_high)
    return 0;
  sqlite3_bind_int64(l->put_high, 1, (sqlite3_int64)id);
  int rc = gpumd__ledger_step_done(l, l->put_high, "cannot store the highest id");
  if (rc == 0)
    l->id_high = id;
  return rc;
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

int gpumd__ledger_write_audit(gpumd_ledger_t *l, const staged_audit_t *a) {
  bind_audit(l->audit, 0, a);
  return gpumd__ledger_step_done(l, l->audit, "cannot append to the audit log");
}

/* AUDIT_CHUNK audit rows with one statement (cheaper than one by one). */
int gpumd__ledger_write_audits(gpumd_ledger_t *l, const staged_audit_t *a) {
  for (int k = 0; k < AUDIT_CHUNK; k++)
    bind_audit(l->audit8, 7 * k, &a[k]);
  return gpumd__ledger_step_done(l, l->audit8, "cannot append to the audit log");
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
  if (b->n_rows + b->n_audits >= PEND_MAX && (*rc = gpumd__ledger_flush(l)) < 0)
    return false;
  if (gpumd__ledger_grow(arr, n, cap, size))
    return true;
  *rc = gpumd__ledger_flush(l); /* no room to defer it: the caller writes it now */
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
    if (rc == 0 && (rc = gpumd__ledger_ensure_turn(l)) == 0 &&
        ((rc = gpumd__ledger_write_row(l, r)) < 0 || (rc = gpumd__ledger_write_high(l, r->id)) < 0))
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
  /* As the reservation row keeps it: cut before a character, UTF-8 (as bind_text stores it). */
  const char *reason = a->reason ? a->reason : "";
  size_t n = gpumd_utf8_cut(reason, sizeof(one.reason) - 1);
  if (gpumd_utf8_valid(reason, n)) { /* the common case, ASCII checked at memcpy's pace */
    memcpy(one.reason, reason, n);
    one.reason[n] = '\0';
  } else {
    gpumd_utf8_clean(reason, one.reason, sizeof(one.reason));
  }
  int rc;
  if (!stage_room(l, (void **)&b->audits, b->n_audits, &b->cap_audits, sizeof(*b->audits), &rc)) {
    if (rc == 0 && (rc = gpumd__ledger_ensure_turn(l)) == 0 &&
        (rc = gpumd__ledger_write_audit(l, &one)) < 0)
      l->turn_failed = true;
    return rc;
  }
  b->audits[b->n_audits++] = one;
  return 0;
}

const char *gpumd__ledger_suspend_format(const gpumd_ledger_t *l, const gpumd_resv_t *r, char *buf,
                                         size_t len) {
  buf[0] = '\0';
  if (r->state != GPUMD_RESV_SUSPENDED && r->nprocs == 0)
    return buf;
  char uuids[GPUMD_SCHED_MAX_DEVICES * GPUM_UUID_LEN];
  format_uuids(l, r->ckpt_mask, uuids, sizeof uuids);
  size_t off =
      (size_t)snprintf(buf, len, "%d %llu %llu %llu %s", r->suspend_hold ? 1 : 0,
                       (unsigned long long)r->suspended_ns, (unsigned long long)r->host_bytes,
                       (unsigned long long)r->ckpt_mask, uuids[0] ? uuids : "-");
  for (unsigned i = 0; i < r->nprocs && i < GPUMD_RESV_MAX_PROCS && off < len; i++)
    off += (size_t)snprintf(buf + off, len - off, " %d:%llu", (int)r->proc_pid[i],
                            (unsigned long long)r->proc_start[i]);
  return buf;
}

bool gpumd__ledger_suspend_parse(const char *text, gpumd_resv_t *r, char *uuids, size_t len) {
  unsigned hold;
  unsigned long long since, host, mask;
  int n = 0, u0 = 0, u1 = 0;
  if (sscanf(text, "%u %llu %llu %llu %n%*s%n", &hold, &since, &host, &mask, &u0, &u1) != 4 ||
      hold > 1 || u1 <= u0)
    return false;
  n = u1;
  if (uuids && len) {
    size_t ulen = (size_t)(u1 - u0);
    bool none = ulen == 1 && text[u0] == '-';
    if (!none && ulen >= len)
      return false;
    memcpy(uuids, text + u0, none ? 0 : ulen);
    uuids[none ? 0 : ulen] = '\0';
  }
  r->suspend_hold = hold == 1;
  r->suspended_ns = since;
  r->host_bytes = host;
  r->ckpt_mask = mask;
  r->nprocs = 0;
  const char *p = text + n;
  while (*p == ' ') {
    int pid, m = 0;
    unsigned long long start;
    if (r->nprocs == GPUMD_RESV_MAX_PROCS || sscanf(p, " %d:%llu%n", &pid, &start, &m) != 2 ||
        pid <= 0)
      return false;
    r->proc_pid[r->nprocs] = pid;
    r->proc_start[r->nprocs++] = start;
    p += m;
  }
  return *p == '\0';
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

/* Parses one row of RESV_COLUMNS, its masks mapped to this run's devices (gone, when not NULL,
 * gets a stored UUID not present; GPUM_UUID_LEN bytes). Returns 0 or GPUM_EIO naming the row. */
static int read_row(const gpumd_ledger_t *l, sqlite3_stmt *st, gpumd_resv_t *r, char *gone) {
  char state[16], on_timeout[16], lease[16];
  memset(r, 0, sizeof(*r));
  r->id = gpumd__ledger_col_u64(st, 0);
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
  r->bytes_per_gpu = gpumd__ledger_col_u64(st, 7);
  r->gpus = (unsigned)sqlite3_column_int64(st, 8);
  r->min_memory = gpumd__ledger_col_u64(st, 10);
  r->want_mask = gpumd__ledger_col_u64(st, 11);
  r->priority = (int)sqlite3_column_int64(st, 12);
  r->timeout_ms = gpumd__ledger_col_u64(st, 13);
  r->lease_pid = (int32_t)sqlite3_column_int64(st, 16);
  r->ttl_ms = gpumd__ledger_col_u64(st, 17);
  r->expires_ns = gpumd__ledger_col_u64(st, 18);
  r->device_mask = gpumd__ledger_col_u64(st, 19);
  r->created_ns = gpumd__ledger_col_u64(st, 20);
  r->granted_ns = gpumd__ledger_col_u64(st, 21);
  r->ended_ns = gpumd__ledger_col_u64(st, 22);
  r->timeout_told = sqlite3_column_int(st, 23) != 0;
  r->pid_start = gpumd__ledger_col_u64(st, 24);
  r->lease_pid_start = gpumd__ledger_col_u64(st, 25);
  /* Slurm ids that do not read back as gpumd writes them are dropped, not trusted. */
  if (!col_text(st, 28, r->slurm_job, sizeof(r->slurm_job)) ||
      !col_text(st, 29, r->slurm_step, sizeof(r->slurm_step)) ||
      (r->slurm_job[0] != '\0' && gpumd_slurm_ids_check(r->slurm_job, r->slurm_step) != 0)) {
    gpum_error_clear();
    r->slurm_job[0] = r->slurm_step[0] = '\0';
  }
  r->preemptible = sqlite3_column_int(st, 30) != 0;
  const unsigned char *susp = sqlite3_column_text(st, 31);
  char ckpt_uuids[GPUMD_SCHED_MAX_DEVICES * GPUM_UUID_LEN] = "";
  if ((r->state == GPUMD_RESV_SUSPENDED || (susp && susp[0])) &&
      (susp == NULL ||
       !gpumd__ledger_suspend_parse((const char *)susp, r, ckpt_uuids, sizeof ckpt_uuids)))
    return gpum_error(GPUM_EIO, "ledger %s: reservation r-%llu has invalid suspend facts", l->path,
                      (unsigned long long)r->id);
  char ckpt_gone[GPUM_UUID_LEN]; /* a GPU checkpointed from that is gone: the driver decides */
  map_uuids(l, (const unsigned char *)ckpt_uuids, &r->ckpt_mask, ckpt_gone, sizeof ckpt_gone);
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
  int frc = gpumd__ledger_flush(l); /* reads see this turn's puts */
  if (frc < 0)
    return frc;
  static const char sql[] = "SELECT " RESV_COLUMNS " FROM reservations "
                            "WHERE state IN ('QUEUED', 'GRANTED', 'SUSPENDED') ORDER BY id";
  sqlite3_stmt *st = NULL;
  gpumd_ledger_row_t *arr = NULL;
  size_t n = 0, cap = 0;
  int rc = 0, step;
  *out = NULL;
  *count = 0;
  if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK)
    return gpumd__ledger_db_error(l, "cannot read reservations");
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
    rc = gpumd__ledger_db_error(l, "cannot read reservations");
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
  int frc = gpumd__ledger_flush(l); /* reads see this turn's puts */
  if (frc < 0)
    return frc;
  static const char sql[] = "SELECT " RESV_COLUMNS " FROM reservations WHERE id = ?";
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK)
    return gpumd__ledger_db_error(l, "cannot read a reservation");
  sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
  int step = sqlite3_step(st);
  int rc;
  if (step == SQLITE_ROW)
    rc = read_row(l, st, out, NULL);
  else if (step == SQLITE_DONE)
    rc = gpum_error(GPUM_ENOENT, "no reservation r-%llu in the ledger", (unsigned long long)id);
  else
    rc = gpumd__ledger_db_error(l, "cannot read a reservation");
  sqlite3_finalize(st);
  return rc;
}

int gpumd_ledger_max_id(gpumd_ledger_t *l, uint64_t *out) {
  int frc = gpumd__ledger_flush(l); /* reads see this turn's puts */
  if (frc < 0)
    return frc;
  /* Kept apart from the rows since schema version 8; the rows' own maximum, should a row
   * ever be above it, counts too. */
  static const char sql[] = "SELECT max((SELECT coalesce(max(value), 0) FROM meta WHERE key = "
                            "'max_id'), (SELECT coalesce(max(id), 0) FROM reservations))";
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK)
    return gpumd__ledger_db_error(l, "cannot read the highest id");
  int rc = 0;
  if (sqlite3_step(st) == SQLITE_ROW)
    *out = gpumd__ledger_col_u64(st, 0);
  else
    rc = gpumd__ledger_db_error(l, "cannot read the highest id");
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
  int frc = gpumd__ledger_flush(l); /* reads see this turn's puts */
  if (frc < 0)
    return frc;
  static const char all[] = "SELECT id, reservation, from_state, to_state, time_ns, reason, "
                            "uid, pid FROM audit WHERE ?1 = 0 OR reservation = ?1 ORDER BY id";
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(l->db, all, -1, &st, NULL) != SQLITE_OK)
    return gpumd__ledger_db_error(l, "cannot read the audit log");
  sqlite3_bind_int64(st, 1, (sqlite3_int64)reservation);
  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    const unsigned char *reason = sqlite3_column_text(st, 5);
    gpumd_ledger_audit_t a = {
        .id = gpumd__ledger_col_u64(st, 0),
        .reservation = gpumd__ledger_col_u64(st, 1),
        .from = audit_state(sqlite3_column_text(st, 2)),
        .to = audit_state(sqlite3_column_text(st, 3)),
        .time_ns = gpumd__ledger_col_u64(st, 4),
        .reason = reason ? (const char *)reason : "",
        .uid = (uint32_t)sqlite3_column_int64(st, 6),
        .pid = (int32_t)sqlite3_column_int64(st, 7),
    };
    if (!fn(user, &a)) {
      step = SQLITE_DONE;
      break;
    }
  }
  int rc = step == SQLITE_DONE ? 0 : gpumd__ledger_db_error(l, "cannot read the audit log");
  sqlite3_finalize(st);
  return rc;
}
