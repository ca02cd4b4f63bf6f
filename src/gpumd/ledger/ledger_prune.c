/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ledger's retention (gpumd_ledger_prune, ledger.retention): finished reservations are
 * found in id order, which is creation order, and deleted in small batches; audit rows are
 * deleted by age, oldest first. The newest reservation and audit rows always stay, so ids keep
 * growing.
 */
#include <stdlib.h>

#include <sqlite3.h>

#include <gpum/error.h>

#include "ledger_internal.h"

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
    return gpumd__ledger_db_error(l, "cannot select reservations to prune");
  sqlite3_bind_int64(st, 1, (sqlite3_int64)(before_ns > INT64_MAX ? INT64_MAX : before_ns));
  sqlite3_bind_int64(st, 2, (sqlite3_int64)l->prune_cursor);
  int step;
  unsigned scanned = 0;
  uint64_t cursor = 0; /* where the next call goes on; 0: from the start */
  while ((step = sqlite3_step(st)) == SQLITE_ROW && !sqlite3_column_int(st, 1)) {
    if (sqlite3_column_int(st, 2))
      ids[(*n)++] = gpumd__ledger_col_u64(st, 0);
    if (*n == max || ++scanned == PRUNE_SCAN_MAX) {
      *more = true;
      cursor = gpumd__ledger_col_u64(st, 0);
      break;
    }
  }
  l->prune_cursor = cursor;
  int rc = step == SQLITE_DONE || step == SQLITE_ROW
               ? 0
               : gpumd__ledger_db_error(l, "cannot select reservations to prune");
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
    return gpumd__ledger_db_error(l, "cannot select audit rows to prune");
  sqlite3_bind_int64(st, 1, (sqlite3_int64)(before_ns > INT64_MAX ? INT64_MAX : before_ns));
  sqlite3_bind_int64(st, 2, max);
  int step;
  uint64_t last = 0;
  while ((step = sqlite3_step(st)) == SQLITE_ROW && sqlite3_column_int(st, 1)) {
    last = gpumd__ledger_col_u64(st, 0);
    ++*n;
  }
  int rc = step == SQLITE_DONE || step == SQLITE_ROW
               ? 0
               : gpumd__ledger_db_error(l, "cannot select audit rows");
  sqlite3_finalize(st);
  if (rc < 0 || *n == 0)
    return rc;
  *more |= *n == max;
  rc = gpumd__ledger_ensure_turn(l);
  if (rc == 0 &&
      sqlite3_prepare_v2(l->db, "DELETE FROM audit WHERE id <= ?", -1, &st, NULL) != SQLITE_OK)
    rc = gpumd__ledger_db_error(l, "cannot prepare the pruning");
  if (rc == 0) {
    sqlite3_bind_int64(st, 1, (sqlite3_int64)last);
    rc = gpumd__ledger_step_done(l, st, "cannot prune the audit log");
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
  int rc = gpumd__ledger_flush(l); /* the selection sees this turn's puts */
  if (rc == 0)
    rc = prune_select(l, before_ns, max, ids, &n, more);
  if (rc == 0 && n > 0) /* no turn (no commit) when there is nothing to delete */
    rc = gpumd__ledger_ensure_turn(l);
  if (rc == 0 && n > 0 &&
      sqlite3_prepare_v2(l->db, "DELETE FROM reservations WHERE id = ?", -1, &del_resv, NULL) !=
          SQLITE_OK)
    rc = gpumd__ledger_db_error(l, "cannot prepare the pruning");
  for (size_t i = 0; rc == 0 && i < n; i++) {
    sqlite3_bind_int64(del_resv, 1, (sqlite3_int64)ids[i]);
    rc = gpumd__ledger_step_done(l, del_resv, "cannot prune a reservation");
  }
  sqlite3_finalize(del_resv);
  free(ids);
  if (rc == 0)
    rc = prune_audit(l, before_ns, max * 4, &n_audit, more);
  if (rc == 0 && deleted != NULL)
    *deleted = n;
  return rc;
}
