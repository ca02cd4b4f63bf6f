/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of log replay shared by replay_csv.c (reading, ordering and resolving a log into a
 * compact operation list) and replay.c (running the operations against a pool), and reachable
 * from the unit tests.
 *
 * A read log is a list of operations in replay order. Every allocation got a slot (a small
 * integer reused once its block is freed), and every free names the slot of the allocation it
 * ends, so the replay maps log pointers to pool pointers with one array indexed by slot: the
 * pointer hash ran once, at read time.
 */
#ifndef GPUM_POOL_REPLAY_INTERNAL_H
#define GPUM_POOL_REPLAY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <gpum/pool_replay.h>

#define GPUM__REPLAY_FREE_BIT 0x80000000u /* in op.line: the op is a free */
#define GPUM__REPLAY_MAX_LINES 0x7fffffffu

typedef struct {
  uint64_t size;   /* allocate: bytes (> 0); free: 0 */
  uint64_t stream; /* the log's Stream value */
  uint32_t slot;   /* index into the replay's live table */
  uint32_t line;   /* the log line (1-based), | GPUM__REPLAY_FREE_BIT for a free */
} gpum__replay_op_t;

struct gpum_replay_log {
  gpum__replay_op_t *ops;
  size_t nops;
  uint32_t nslots; /* slots ever needed at once (the live table's size) */
  gpum_replay_log_info_t info;
};

/* Line number of an op, without the free bit. */
static inline uint32_t gpum__replay_op_line(const gpum__replay_op_t *op) {
  return op->line & ~GPUM__REPLAY_FREE_BIT;
}

static inline int gpum__replay_op_is_free(const gpum__replay_op_t *op) {
  return (op->line & GPUM__REPLAY_FREE_BIT) != 0;
}

/* Parses one Time field: an integer, HH:MM:SS[.f{1,9}] or seconds[.f{1,9}]. *secs gets the
 * whole seconds (the integer for an integer time), *ns the fraction in nanoseconds, *clock
 * whether it was a clock string. Returns 0 or GPUM_EPARSE (no detail set). */
int gpum__replay_parse_time(const char *s, uint64_t *secs, uint32_t *ns, int *clock);

#endif /* GPUM_POOL_REPLAY_INTERNAL_H */
