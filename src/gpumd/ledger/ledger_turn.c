/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ledger's turns (see ledger.h): writes are staged in memory (a batch of reservation rows
 * and audit rows) and written in one go: by commit_turn on the caller's thread, by the writer
 * thread after commit_async (ledger_writer.c runs write_job), or into a transaction opened on
 * the caller's thread when a read needs to see them (gpumd__ledger_flush). The caller's thread
 * touches the database only while the writer is idle: every read and every synchronous commit
 * first waits for the writer's batch (collect).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include <gpum/error.h>

#include "ledger_internal.h"

/* ---- Batches ---------------------------------------------------------------------------- */

static bool batch_empty(const batch_t *b) {
  return b->n_rows == 0 && b->n_audits == 0;
}

static void batch_clear(batch_t *b) {
  b->n_rows = b->n_audits = 0;
}

void gpumd__ledger_batch_free(batch_t *b) {
  free(b->rows);
  free(b->audits);
  memset(b, 0, sizeof(*b));
}

/* Grows *arr (elements of size) to hold one more; false when out of memory. */
bool gpumd__ledger_grow(void **arr, size_t n, size_t *cap, size_t size) {
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

/* Ends the open transaction without its writes, keeping the error detail of what failed. */
static void roll_back(gpumd_ledger_t *l) {
  l->id_high = 0; /* what the transaction raised it to is gone */
  if (sqlite3_get_autocommit(l->db))
    return; /* SQLite rolled back already (a failed COMMIT can) */
  sqlite3_step(l->rollback);
  sqlite3_reset(l->rollback);
}

/* Writes a batch into the open transaction; stops at the first error. */
static int write_batch(gpumd_ledger_t *l, const batch_t *b) {
  int rc = 0;
  uint64_t high = 0;
  for (size_t i = 0; rc == 0 && i < b->n_rows; i++) {
    rc = gpumd__ledger_write_row(l, &b->rows[i]);
    high = b->rows[i].id > high ? b->rows[i].id : high;
  }
  if (rc == 0)
    rc = gpumd__ledger_write_high(l, high); /* one meta write per batch with a new id */
  size_t i = 0;
  for (; rc == 0 && i + AUDIT_CHUNK <= b->n_audits; i += AUDIT_CHUNK)
    rc = gpumd__ledger_write_audits(l, &b->audits[i]);
  for (; rc == 0 && i < b->n_audits; i++)
    rc = gpumd__ledger_write_audit(l, &b->audits[i]);
  return rc;
}

/* ---- The writer thread ------------------------------------------------------------------- */

/* The writer's job: one transaction with a batch. Runs on the writer thread, while the
 * caller's thread keeps off the database (it waits in collect() for any access). */
static int write_job(void *user, void *job) {
  gpumd_ledger_t *l = user;
  int rc = gpumd__ledger_step_done(l, l->begin, "cannot begin a transaction");
  if (rc == 0)
    rc = write_batch(l, job);
  if (rc == 0)
    rc = gpumd__ledger_step_done(l, l->commit, "cannot commit");
  if (rc < 0)
    roll_back(l);
  else if (l->after)
    l->after(l->after_arg);
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

void gpumd_ledger_set_after_commit(gpumd_ledger_t *l, gpumd_ledger_after_fn fn, void *arg) {
  l->after = fn;
  l->after_arg = arg;
}

int gpumd_ledger_writer_fd(const gpumd_ledger_t *l) {
  return l->writer ? gpumd__ledger_writer_fd(l->writer) : -1;
}

bool gpumd_ledger_will_hand_over(gpumd_ledger_t *l) {
  collect(l, false);
  return l->writer != NULL && !l->in_turn && !l->writing && !batch_empty(&l->stage);
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
  int rc = gpumd__ledger_step_done(l, l->begin, "cannot begin a transaction");
  if (rc == 0)
    l->in_turn = true;
  return rc;
}

int gpumd__ledger_ensure_turn(gpumd_ledger_t *l) {
  return l->in_turn ? 0 : gpumd_ledger_begin_turn(l);
}

/* Puts the staged writes into a transaction on the caller's thread (opened when needed,
 * after the writer's batch), so that reads see them and commit_turn commits them. A failed
 * write drops the staged writes and makes the commit roll back. */
int gpumd__ledger_flush(gpumd_ledger_t *l) {
  collect(l, true);
  if (batch_empty(&l->stage))
    return 0;
  int rc = gpumd__ledger_ensure_turn(l);
  if (rc == 0)
    rc = write_batch(l, &l->stage);
  batch_clear(&l->stage);
  if (rc < 0)
    l->turn_failed = true;
  return rc;
}

int gpumd_ledger_commit_turn(gpumd_ledger_t *l) {
  int frc = gpumd__ledger_flush(l);
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
  int rc = gpumd__ledger_step_done(l, l->commit, "cannot commit");
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
  return gpumd__ledger_ckpt_count(l->ckpt, NULL);
}

uint64_t gpumd_ledger_checkpoint_asks(const gpumd_ledger_t *l) {
  uint64_t asked = 0;
  gpumd__ledger_ckpt_count(l->ckpt, &asked);
  return asked;
}
