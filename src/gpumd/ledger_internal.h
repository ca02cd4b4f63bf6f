/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside the ledger: the checkpointer thread (ledger_ckpt.c) that ledger.c starts next to its
 * main connection, and the writer thread (ledger_writer.c) that commits turns for the loop
 * when the ledger writes asynchronously (gpumd_ledger_start_writer).
 */
#ifndef GPUMD_LEDGER_INTERNAL_H
#define GPUMD_LEDGER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <sqlite3.h>

typedef struct gpumd_ledger_ckpt gpumd_ledger_ckpt_t;

/* Starts checkpointing the WAL of the database at path on a thread with its own connection,
 * and hooks main_db's commits to tell it when (main_db's automatic checkpoint is turned off).
 * Returns 0, GPUM_EIO or GPUM_ENOMEM; main_db is unchanged on an error. */
int gpumd__ledger_ckpt_start(sqlite3 *main_db, const char *path, gpumd_ledger_ckpt_t **out);
/* Stops the thread (after a checkpoint in progress) and gives main_db its automatic
 * checkpoint back. NULL is fine. */
void gpumd__ledger_ckpt_stop(gpumd_ledger_ckpt_t *c);
/* Checkpoints the thread has run. */
uint64_t gpumd__ledger_ckpt_count(gpumd_ledger_ckpt_t *c);

/* ---- the writer thread ---- */

typedef struct gpumd_ledger_writer gpumd_ledger_writer_t;
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

#endif /* GPUMD_LEDGER_INTERNAL_H */
