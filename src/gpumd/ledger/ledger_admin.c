/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The operator's switches per device in the ledger (see ledger.h): a device disabled with
 * `gpum disable` has a row in device_admin (by UUID, with the reason, who and when) until it
 * is enabled again, so that the switch survives gpumd's restarts and follows the device when
 * the GPUs are numbered differently. Changes go into the turn's transaction like prune's
 * deletes: they are committed (or rolled back) with the turn that made them.
 */
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>

#include "ledger_internal.h"
#include "utf8_internal.h"

int gpumd_ledger_set_disabled(gpumd_ledger_t *l, const char *uuid, bool disabled,
                              const char *reason, uint32_t uid, uint64_t time_ns) {
  if (uuid == NULL || uuid[0] == '\0' || strlen(uuid) >= GPUM_UUID_LEN ||
      !gpumd_utf8_valid(uuid, strlen(uuid)))
    return gpum_error(GPUM_EINVAL, "a device switch needs the device's UUID");
  if (reason != NULL &&
      (strlen(reason) >= GPUMD_RESV_REASON_LEN || !gpumd_utf8_valid(reason, strlen(reason))))
    return gpum_error(GPUM_EINVAL, "a device switch's reason must be UTF-8 of at most %d bytes",
                      GPUMD_RESV_REASON_LEN - 1);
  static const char put[] = "INSERT OR REPLACE INTO device_admin (uuid, reason, uid, time_ns) "
                            "VALUES (?, ?, ?, ?)";
  static const char del[] = "DELETE FROM device_admin WHERE uuid = ?";
  int rc = gpumd__ledger_flush(l); /* staged rows first: the order of the turn is kept */
  if (rc == 0)
    rc = gpumd__ledger_ensure_turn(l);
  sqlite3_stmt *st = NULL;
  if (rc == 0 && sqlite3_prepare_v2(l->db, disabled ? put : del, -1, &st, NULL) != SQLITE_OK)
    rc = gpumd__ledger_db_error(l, "cannot prepare a device switch");
  if (rc == 0) {
    sqlite3_bind_text(st, 1, uuid, -1, SQLITE_STATIC);
    if (disabled) {
      sqlite3_bind_text(st, 2, reason ? reason : "", -1, SQLITE_STATIC);
      sqlite3_bind_int64(st, 3, uid);
      sqlite3_bind_int64(st, 4, (sqlite3_int64)(time_ns > INT64_MAX ? INT64_MAX : time_ns));
    }
    rc = gpumd__ledger_step_done(l, st, "cannot store a device switch");
    if (rc < 0)
      l->turn_failed = true;
  }
  sqlite3_finalize(st);
  return rc;
}

int gpumd_ledger_load_disabled(gpumd_ledger_t *l, gpumd_ledger_disabled_t **out, size_t *count) {
  *out = NULL;
  *count = 0;
  int rc = gpumd__ledger_flush(l); /* reads see this turn's writes */
  if (rc < 0)
    return rc;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(l->db,
                         "SELECT uuid, reason, uid, time_ns FROM device_admin ORDER BY time_ns", -1,
                         &st, NULL) != SQLITE_OK)
    return gpumd__ledger_db_error(l, "cannot read the device switches");
  gpumd_ledger_disabled_t *arr = NULL;
  size_t n = 0, cap = 0;
  int step = SQLITE_DONE;
  while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
    if (!gpumd__ledger_grow((void **)&arr, n, &cap, sizeof *arr)) {
      rc = gpum_error(GPUM_ENOMEM, "out of memory reading the device switches");
      break;
    }
    gpumd_ledger_disabled_t *e = &arr[n];
    memset(e, 0, sizeof *e);
    const unsigned char *u = sqlite3_column_text(st, 0), *why = sqlite3_column_text(st, 1);
    if (u == NULL || strlen((const char *)u) >= sizeof e->uuid)
      continue; /* not a UUID this gpumd could have written */
    memcpy(e->uuid, u, strlen((const char *)u) + 1);
    if (why)
      strncpy(e->reason, (const char *)why, sizeof e->reason - 1);
    e->uid = (uint32_t)sqlite3_column_int64(st, 2);
    e->time_ns = gpumd__ledger_col_u64(st, 3);
    n++;
  }
  if (rc == 0 && step != SQLITE_DONE)
    rc = gpumd__ledger_db_error(l, "cannot read the device switches");
  sqlite3_finalize(st);
  if (rc < 0) {
    free(arr);
    return rc;
  }
  *out = arr;
  *count = n;
  return 0;
}
