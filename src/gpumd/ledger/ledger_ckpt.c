/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ledger's checkpointer: copies the write-ahead log back into the database on a thread
 * of its own, with its own SQLite connection, so that no loop turn of gpumd pays for it.
 * SQLite's automatic checkpoint runs inside the COMMIT that crosses its threshold, which made
 * one turn in a few hundred take milliseconds longer (the p99 of every request). The main
 * connection turns the automatic checkpoint off and tells the thread, from its WAL hook, when
 * the log passes GPUMD_CKPT_BYTES; the thread then runs a PASSIVE checkpoint, which never
 * blocks the writer. The log can only start over from its beginning when a write begins with
 * every frame copied, which a busy writer rarely lets the thread achieve, so at
 * GPUMD_CKPT_INLINE_BYTES the hook checkpoints inline: by then the thread has copied nearly
 * everything, and the inline pass copies the rest and lets the next turn restart the log.
 * An inline pass still stalls the writer for a sync of the database file (milliseconds: the
 * p99 of every request at 256 clients, with the 16 MiB of an earlier version), so it waits
 * for 64 MiB of log: sixteen times rarer than SQLite's own, the log file stays under about
 * 64 MiB. The thresholds are in bytes, whatever the page size (a log frame is a page).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include <sqlite3.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "ledger_internal.h"

#define GPUMD_CKPT_BYTES (4u << 20)         /* SQLite's default threshold with 4 KiB pages */
#define GPUMD_CKPT_INLINE_BYTES (64u << 20) /* see above */

struct gpumd_ledger_ckpt {
  sqlite3 *main_db;
  sqlite3 *db; /* the thread's own connection */
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool want, stop;
  int frames, inline_frames; /* the thresholds in pages of main_db */
  uint64_t done;             /* checkpoints run by the thread */
  uint64_t asked;            /* times the thread was told */
  /* The writer's side (on_wal, only ever on the thread that commits): the log's length at the
   * last commit, and the length at which the thread is told next. */
  int seen, next;
};

static void *run(void *arg) {
  gpumd_ledger_ckpt_t *c = arg;
  pthread_setname_np(pthread_self(), "gpumd-ckpt");
  pthread_mutex_lock(&c->lock);
  for (;;) {
    while (!c->want && !c->stop)
      pthread_cond_wait(&c->cond, &c->lock);
    if (c->stop)
      break;
    c->want = false;
    pthread_mutex_unlock(&c->lock);
    int log = 0, copied = 0;
    int rc = sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY)
      gpum_log(GPUM_LOG_WARN, "gpumd", "ledger checkpoint failed: %s%s",
               sqlite3_system_errno(c->db) == EROFS ? "the file system is read-only (EROFS); "
                                                      "SQLite says: "
                                                    : "",
               sqlite3_errmsg(c->db));
    pthread_mutex_lock(&c->lock);
    c->done++;
  }
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

/* After every commit of the main connection, with the log's size in pages. Past the
 * threshold the thread is told once per further quarter of it (GPUMD_CKPT_BYTES / 4 of log),
 * not at every commit: it used to be woken, and to run a checkpoint, for nearly every commit
 * (a wake-up and a checkpoint's system calls per loop turn under load). */
static int on_wal(void *arg, sqlite3 *db, const char *name, int frames) {
  gpumd_ledger_ckpt_t *c = arg;
  if (frames >= c->inline_frames) {
    sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return SQLITE_OK;
  }
  if (frames < c->seen) /* the log started over */
    c->next = c->frames;
  c->seen = frames;
  if (frames >= c->next) {
    c->next = frames + (c->frames / 4 > 0 ? c->frames / 4 : 1);
    pthread_mutex_lock(&c->lock);
    c->want = true;
    c->asked++;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
  }
  return SQLITE_OK;
}

int gpumd__ledger_ckpt_start(sqlite3 *main_db, const char *path, gpumd_ledger_ckpt_t **out) {
  gpumd_ledger_ckpt_t *c = calloc(1, sizeof(*c));
  if (c == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory starting the ledger checkpointer");
  c->main_db = main_db;
  int page = 4096;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(main_db, "PRAGMA page_size", -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) > 0)
    page = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  c->frames = (int)(GPUMD_CKPT_BYTES / (unsigned)page);
  c->inline_frames = (int)(GPUMD_CKPT_INLINE_BYTES / (unsigned)page);
  c->next = c->frames;
  if (sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
      SQLITE_OK) {
    int rc = gpum_error(GPUM_EIO, "ledger %s: cannot open for checkpoints: %s", path,
                        sqlite3_errmsg(c->db));
    sqlite3_close(c->db);
    free(c);
    return rc;
  }
  sqlite3_busy_timeout(c->db, 2000);
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->cond, NULL);
  if (pthread_create(&c->thread, NULL, run, c) != 0) {
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    sqlite3_close(c->db);
    free(c);
    return gpum_error(GPUM_ENOMEM, "cannot start the ledger checkpointer thread");
  }
  sqlite3_wal_autocheckpoint(main_db, 0);
  sqlite3_wal_hook(main_db, on_wal, c);
  *out = c;
  return 0;
}

void gpumd__ledger_ckpt_stop(gpumd_ledger_ckpt_t *c) {
  if (c == NULL)
    return;
  sqlite3_wal_hook(c->main_db, NULL, NULL);
  pthread_mutex_lock(&c->lock);
  c->stop = true;
  pthread_cond_signal(&c->cond);
  pthread_mutex_unlock(&c->lock);
  pthread_join(c->thread, NULL);
  sqlite3_close(c->db);
  pthread_cond_destroy(&c->cond);
  pthread_mutex_destroy(&c->lock);
  sqlite3_wal_autocheckpoint(c->main_db, c->frames);
  free(c);
}

uint64_t gpumd__ledger_ckpt_count(gpumd_ledger_ckpt_t *c, uint64_t *asked) {
  if (c == NULL)
    return asked ? (*asked = 0) : 0;
  pthread_mutex_lock(&c->lock);
  uint64_t n = c->done;
  if (asked)
    *asked = c->asked;
  pthread_mutex_unlock(&c->lock);
  return n;
}
