/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The end of a loop turn (turn.c): commit, then the output each channel held back.
 */
#ifndef GPUMD_TURN_H
#define GPUMD_TURN_H

#include "gpumd.h"

/* End of a loop turn: commit (or hand the writes to the ledger's writer), write the output
 * that is committed, free closed connections. */
void gpumd_end_turn(gpumd_t *d);
/* The last turns before stopping: waits for the ledger's writer until all is committed and
 * written. */
void gpumd_finish_turns(gpumd_t *d);

#endif /* GPUMD_TURN_H */
