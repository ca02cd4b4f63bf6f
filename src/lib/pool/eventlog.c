/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The event log in RMM's CSV format, so that logs replay with gpum pool replay and RMM's own
 * replay benchmark:
 *
 *   Thread,Time,Action,Pointer,Size,Stream
 *   1,14:03:07.123456,allocate,0x7f0000000000,4096,0
 *
 * Thread is a small integer per thread (1, 2, ... in order of first use in the process), Time
 * the wall clock as HH:MM:SS.ffffff in local time (RMM's clock string), Action one of
 * allocate, free and "allocate failure" (Pointer 0x0), Pointer lower-case hex, Size the bytes
 * asked for (a free repeats the size of its allocation), Stream the stream handle in decimal.
 * Rows are written under the pool's lock, so they are in the order the pool saw the calls.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "pool/pool_internal.h"

static atomic_uint next_thread = 1;
static _Thread_local unsigned thread_id;

void gpum__pool_log_header(gpum_pool_t *p) {
  if (p->log == NULL)
    return;
  fputs("Thread,Time,Action,Pointer,Size,Stream\n", p->log);
  fflush(p->log);
}

void gpum__pool_log(gpum_pool_t *p, const char *action, gpum_devptr_t ptr, uint64_t size,
                    gpum_stream_t stream) {
  if (thread_id == 0)
    thread_id = atomic_fetch_add(&next_thread, 1);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if ((uint64_t)ts.tv_sec != p->log_sec || p->log_hms[0] == '\0') {
    struct tm tm;
    time_t sec = ts.tv_sec;
    localtime_r(&sec, &tm);
    snprintf(p->log_hms, sizeof(p->log_hms), "%02d:%02d:%02d", tm.tm_hour, tm.tm_min, tm.tm_sec);
    p->log_sec = (uint64_t)ts.tv_sec;
  }
  fprintf(p->log, "%u,%s.%06ld,%s,0x%llx,%llu,%llu\n", thread_id, p->log_hms, ts.tv_nsec / 1000,
          action, (unsigned long long)ptr, (unsigned long long)size, (unsigned long long)stream);
}
