/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What gpumd does when a listener cannot accept (accept.c): out of descriptors (EMFILE,
 * ENFILE) or memory, the pending connection stays in the backlog and would wake the loop at
 * once again, so accepting on that listener pauses for GPUMD_ACCEPT_PAUSE_MS after each
 * failure. The log says so at most once per GPUMD_ACCEPT_LOG_S seconds per listener, with the
 * count of failures it did not log, and once more when accepting works again; /metrics counts
 * every failure (gpumd_accept_failures_total). Loop thread only.
 */
#ifndef GPUMD_ACCEPT_INTERNAL_H
#define GPUMD_ACCEPT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/listener.h>

#define GPUMD_ACCEPT_PAUSE_MS 100
#define GPUMD_ACCEPT_LOG_S 10

struct gpumd;

typedef struct {
  struct gpumd *d;                 /* its /metrics are told of each failure */
  const char *what;                /* the listener, for the log and /metrics: "socket", "http" */
  struct evconnlistener *listener; /* not owned */
  struct event *resume;            /* re-enables the listener after a pause */
  uint64_t failures;               /* since start */
  uint64_t unlogged;               /* failures since the last line */
  uint64_t logged_ns;              /* monotonic time of the last line; 0: none yet */
  bool failing;                    /* the last accept failed: the next success is logged */
} gpumd_accept_guard_t;

/* Sets the guard up on listener l (its error callback included; the guard must stay where it
 * is until gpumd_accept_guard_free). 0, GPUM_ENOMEM, or GPUM_ENOSPC past four guards. */
int gpumd_accept_guard_init(gpumd_accept_guard_t *g, struct gpumd *d, struct evconnlistener *l,
                            const char *what);
/* Frees what init made (not the listener). A zeroed guard is fine. */
void gpumd_accept_guard_free(gpumd_accept_guard_t *g);
/* To call on every accepted connection: logs the end of a run of failures. */
static inline void gpumd_accept_guard_ok(gpumd_accept_guard_t *g);
void gpumd__accept_guard_recovered(gpumd_accept_guard_t *g);

static inline void gpumd_accept_guard_ok(gpumd_accept_guard_t *g) {
  if (g->failing)
    gpumd__accept_guard_recovered(g);
}

#endif /* GPUMD_ACCEPT_INTERNAL_H */
