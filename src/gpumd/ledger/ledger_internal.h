/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside the ledger. Its files:
 *   ledger.c          opening: the state directory, its lock, the database, the schema and its
 *                     migrations, the prepared statements; closing
 *   ledger_turn.c     staged writes in batches, turns (transactions on the loop's thread) and
 *                     the hand-over of batches to the writer thread
 *   ledger_rows.c     devices by UUID, writing and reading reservation and audit rows
 *   ledger_prune.c    retention: deleting old finished reservations and audit rows
 *   ledger_admin.c    the operator's switches per device (disabled devices, by UUID)
 *   ledger_check.c    checking every row at open against the protocol's rules
 *   ledger_recover.c  what to do with each stored reservation after a restart
 *   ledger_writer.c   the writer thread that commits batches for the loop
 *   ledger_ckpt.c     the checkpointer thread next to the main connection
 * This header holds the ledger object they share and the functions they call across files.
 */
#ifndef GPUMD_LEDGER_INTERNAL_H
#define GPUMD_LEDGER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "ledger.h"

typedef struct gpumd_ledger_ckpt gpumd_ledger_ckpt_t;
typedef struct gpumd_ledger_writer gpumd_ledger_writer_t;

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

#define RESV_COLUMNS                                                                          \
  "id, token, state, reason, uid, pid, label, bytes_per_gpu, gpus, model, min_memory, "       \
  "want_mask, priority, timeout_ms, on_timeout, lease, lease_pid, ttl_ms, expires_ns, "       \
  "device_mask, created_ns, granted_ns, ended_ns, timeout_told, pid_start, lease_pid_start, " \
  "device_uuids, want_uuids, slurm_job, slurm_step, preemptible, suspend"
#define RESV_NCOLS 32

/* The suspend column: "" unless SUSPENDED or a suspend or resume is under way (nprocs > 0), else
 * "HOLD SINCE_NS HOST_BYTES CKPT_MASK CKPT_UUIDS" (the GPUs checkpointed from: their indices and
 * their UUIDs, comma-separated, "-" when unknown, so that a renumbering between two runs maps
 * them back) and " PID:START" per process (gpumd__ledger_suspend_format /
 * _parse): what a gpumd that restarts must finish or undo (docs/suspend.md). */
#define GPUMD_LEDGER_SUSPEND_LEN \
  (64 + GPUMD_SCHED_MAX_DEVICES * GPUM_UUID_LEN + GPUMD_RESV_MAX_PROCS * 36)
struct gpumd_ledger;
/* Writes r's suspend column into buf[len] (l: this run's UUIDs); returns buf. */
const char *gpumd__ledger_suspend_format(const struct gpumd_ledger *l, const gpumd_resv_t *r,
                                         char *buf, size_t len);
/* Reads it back into r (hold, suspended_ns, host_bytes, ckpt_mask as stored, the processes) and
 * the UUID list into uuids[len] ("" when "-"; uuids NULL: not kept). false when text is not one
 * gpumd writes. */
bool gpumd__ledger_suspend_parse(const char *text, gpumd_resv_t *r, char *uuids, size_t len);

struct gpumd_ledger {
  sqlite3 *db;
  int lock_fd; /* flock'ed state_dir/ledger.lock: one gpumd per state directory */
  char *path;
  bool in_turn;     /* a transaction is open on the caller's thread */
  bool turn_failed; /* a staged write failed to go into it: the commit rolls back */
  uint64_t commits;
  uint64_t prune_cursor; /* the id the scan of the next gpumd_ledger_prune goes on after */
  sqlite3_stmt *put, *audit;
  /* What put holds bound from its last row (a statement keeps its parameters across resets):
   * a value the same as the last row's is not bound again (ledger_rows.c). Bit i of
   * put_known: parameter i holds put_int[i], or put_text[i] (a string that lives as long as
   * the statement). */
  uint64_t put_known;
  sqlite3_int64 put_int[RESV_NCOLS + 1];
  const char *put_text[RESV_NCOLS + 1];
  sqlite3_stmt *audit8;                    /* AUDIT_CHUNK audit rows in one INSERT */
  sqlite3_stmt *begin, *commit, *rollback; /* the writer's, prepared once */
  sqlite3_stmt *put_high;                  /* raises meta's max_id */
  /* The highest id known to be in meta's max_id in the open transaction (0 after a rollback:
   * unknown), so that a batch without a new reservation writes no meta row. */
  uint64_t id_high;
  gpumd_ledger_ckpt_t *ckpt; /* the checkpointer thread; NULL: SQLite's own checkpoints */
  batch_t stage;             /* the caller's writes since the last commit */
  /* The writer thread (gpumd_ledger_start_writer; NULL: commits on the caller's thread). */
  gpumd_ledger_writer_t *writer;
  batch_t flight;              /* the batch the writer has (or had: empty once collected) */
  bool writing;                /* flight handed over and not collected */
  gpumd_ledger_after_fn after; /* called by the writer after each batch it commits */
  void *after_arg;
  int done;       /* for gpumd_ledger_poll: 1 a batch committed, < 0 one failed, 0 nothing */
  char fail[512]; /* the failed batch's error */
  /* This run's devices (gpumd_ledger_set_devices), and put()'s buffers for their UUID lists. */
  bool have_devices;
  char uuid[GPUMD_SCHED_MAX_DEVICES][GPUM_UUID_LEN];
  char dev_buf[GPUMD_SCHED_MAX_DEVICES * GPUM_UUID_LEN],
      want_buf[GPUMD_SCHED_MAX_DEVICES * GPUM_UUID_LEN];
  char suspend_buf[GPUMD_LEDGER_SUSPEND_LEN];
};

#define AUDIT_CHUNK 8 /* audit rows per multi-row INSERT */

/* ---- shared between the ledger's files ---- */

/* What the operator can do about a ledger gpumd refuses to start with (ends a message). */
#define GPUMD_LEDGER_ADVICE                                                                  \
  "Restore it from a backup (stop gpumd, replace ledger.db, delete ledger.db-wal and "       \
  "ledger.db-shm), or move the three files away to start a new ledger with no history: see " \
  "\"An empty or damaged ledger\" in docs/operations.md"

/* Checks every row (reservations, audit, device switches, the highest id) as gpumd writes
 * them, in the open transaction. Returns 0, GPUM_EIO naming the first bad row and its field
 * (refused: see GPUMD_LEDGER_ADVICE) or SQLite's error (ledger_check.c). */
int gpumd__ledger_check_rows(gpumd_ledger_t *l);

/* Sets the detail from SQLite's message and returns GPUM_EIO (ledger.c). */
int gpumd__ledger_db_error(const gpumd_ledger_t *l, const char *what);

/* Batches (ledger_turn.c). */
void gpumd__ledger_batch_free(batch_t *b);
/* Grows *arr (elements of size) to hold one more than n; false when out of memory. */
bool gpumd__ledger_grow(void **arr, size_t n, size_t *cap, size_t size);
/* Opens a transaction on the caller's thread unless one is open (after the writer's batch). */
int gpumd__ledger_ensure_turn(gpumd_ledger_t *l);
/* Puts the staged writes into a transaction on the caller's thread (opened when needed,
 * after the writer's batch), so that reads see them and commit_turn commits them. A failed
 * write drops the staged writes and makes the commit roll back. */
int gpumd__ledger_flush(gpumd_ledger_t *l);

/* Rows (ledger_rows.c), into the open transaction. */
/* Runs a prepared statement that returns no rows and resets it. */
int gpumd__ledger_step_done(gpumd_ledger_t *l, sqlite3_stmt *st, const char *what);
int gpumd__ledger_write_row(gpumd_ledger_t *l, const gpumd_resv_t *r);
int gpumd__ledger_write_audit(gpumd_ledger_t *l, const staged_audit_t *a);
/* AUDIT_CHUNK audit rows with one statement. */
int gpumd__ledger_write_audits(gpumd_ledger_t *l, const staged_audit_t *a);
/* Raises the highest id ever stored (meta's max_id) to id, unless it is there already. */
int gpumd__ledger_write_high(gpumd_ledger_t *l, uint64_t id);

static inline uint64_t gpumd__ledger_col_u64(sqlite3_stmt *st, int c) {
  return (uint64_t)sqlite3_column_int64(st, c);
}

/* Starts checkpointing the WAL of the database at path on a thread with its own connection,
 * and hooks main_db's commits to tell it when (main_db's automatic checkpoint is turned off).
 * Returns 0, GPUM_EIO or GPUM_ENOMEM; main_db is unchanged on an error. */
int gpumd__ledger_ckpt_start(sqlite3 *main_db, const char *path, gpumd_ledger_ckpt_t **out);
/* Stops the thread (after a checkpoint in progress) and gives main_db its automatic
 * checkpoint back. NULL is fine. */
void gpumd__ledger_ckpt_stop(gpumd_ledger_ckpt_t *c);
/* Checkpoints the thread has run. */
/* Checkpoints the thread ran, and (asked, when not NULL) the times it was told to. */
uint64_t gpumd__ledger_ckpt_count(gpumd_ledger_ckpt_t *c, uint64_t *asked);

/* ---- the writer thread ---- */

/* A job: runs on the writer thread; returns 0 or a negative GPUM_E* with the detail set. */
typedef int (*gpumd_ledger_job_fn)(void *user, void *job);

/* Starts the thread, which runs fn(user, job) for each job handed over. Returns 0, GPUM_EIO
 * or GPUM_ENOMEM. */
int gpumd__ledger_writer_start(gpumd_ledger_job_fn fn, void *user, gpumd_ledger_writer_t **out);
/* Finishes a job in progress and stops the thread. NULL is fine. */
void gpumd__ledger_writer_stop(gpumd_ledger_writer_t *w);
/* An eventfd that becomes readable (a counter) each time a job finishes; whoever polls it
 * reads it to clear it. Owned by w. */
int gpumd__ledger_writer_fd(const gpumd_ledger_writer_t *w);
/* Hands job over. Only when no job is in progress or uncollected. */
void gpumd__ledger_writer_submit(gpumd_ledger_writer_t *w, void *job);
/* Whether the job handed over has finished (waiting for it when wait): 1 (collected: *job_rc
 * gets its result, and on a failure this thread's error detail its detail), or 0 (none was
 * handed over, or it is still running). */
int gpumd__ledger_writer_collect(gpumd_ledger_writer_t *w, bool wait, int *job_rc);

/* The ledger's VFS (ledger_vfs.c): the underlying VFS named (NULL: SQLite's default) with the
 * log frames of a commit written in one call, not two per page. Registers it once (not as the
 * default; later calls return it whatever they name) and returns its name for
 * sqlite3_open_v2, or NULL when it cannot be made (the default VFS then serves). */
#define GPUMD_LEDGER_VFS "gpumd-ledger"
const char *gpumd__ledger_vfs_register(const char *underlying);

#endif /* GPUMD_LEDGER_INTERNAL_H */
