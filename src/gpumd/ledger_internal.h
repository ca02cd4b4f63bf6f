/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside the ledger: the checkpointer thread (ledger_ckpt.c) that ledger.c starts next to its
 * main connection.
 */
#ifndef GPUMD_LEDGER_INTERNAL_H
#define GPUMD_LEDGER_INTERNAL_H

#include <stdint.h>

#include <sqlite3.h>

typedef struct gpum_ledger_ckpt gpum_ledger_ckpt_t;

/* Starts checkpointing the WAL of the database at path on a thread with its own connection,
 * and hooks main_db's commits to tell it when (main_db's automatic checkpoint is turned off).
 * Returns 0, GPUM_EIO or GPUM_ENOMEM; main_db is unchanged on an error. */
int gpum__ledger_ckpt_start(sqlite3 *main_db, const char *path, gpum_ledger_ckpt_t **out);
/* Stops the thread (after a checkpoint in progress) and gives main_db its automatic
 * checkpoint back. NULL is fine. */
void gpum__ledger_ckpt_stop(gpum_ledger_ckpt_t *c);
/* Checkpoints the thread has run. */
uint64_t gpum__ledger_ckpt_count(gpum_ledger_ckpt_t *c);

#endif /* GPUMD_LEDGER_INTERNAL_H */
