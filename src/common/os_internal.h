/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The small OS layer: clocks and /proc/PID/stat, written once for libgpum, gpumd and the
 * simulated driver. os.c is compiled into libgpum and into libgpum_sim (which must not link
 * libgpum), so nothing here sets libgpum's error detail or exports a symbol: failures are
 * negative errno values that the caller turns into its own message.
 *
 * Every function is thread-safe and async-signal-safe except where noted.
 */
#ifndef GPUM_OS_INTERNAL_H
#define GPUM_OS_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds: for durations, deadlines and timeouts. Never fails. */
uint64_t gpum__os_mono_ns(void);
/* The same in milliseconds. */
uint64_t gpum__os_mono_ms(void);
/* CLOCK_REALTIME in nanoseconds since the epoch: for timestamps that are stored or shown. */
uint64_t gpum__os_real_ns(void);

/* Initialises a condition variable whose timed waits take CLOCK_MONOTONIC deadlines (the
 * default clock, CLOCK_REALTIME, jumps with the wall clock, and a monotonic deadline given to it
 * lies decades in the past, so the wait returns at once). Returns 0 or a positive errno. */
int gpum__os_cond_init_mono(pthread_cond_t *cond);
/* The timespec of a CLOCK_MONOTONIC deadline in nanoseconds, for pthread_cond_timedwait on a
 * condition variable made by gpum__os_cond_init_mono. */
struct timespec gpum__os_mono_timespec(uint64_t deadline_ns);

/* Reads up to len - 1 bytes of a small file (a /proc file: it may not say its size) into buf,
 * NUL-terminated (len > 0). Returns the byte count, or a negative errno when the file cannot be
 * opened or read (a read that fails after some bytes returns those). Not async-signal-safe. */
long gpum__os_read_file(const char *path, char *buf, size_t len);

/* The fields of /proc/PID/stat that gpum uses. */
typedef struct {
  char state;          /* field 3: R, S, D, Z (zombie), X (dead), ... */
  int ppid;            /* field 4 */
  uint64_t start_time; /* field 22: clock ticks after boot; with the pid, names a process */
} gpum__os_proc_stat_t;

/* Parses the text of a /proc/PID/stat line (NUL-terminated). The command name (field 2) may
 * hold spaces and ')': the fields resume after the last ')'. Returns 0 or -EINVAL (malformed:
 * fewer than 22 fields, or a field that is not a number). */
int gpum__os_parse_proc_stat(const char *text, gpum__os_proc_stat_t *out);
/* Reads /proc/PID/stat of pid. Returns 0, -ENOENT (no such process), -EINVAL (malformed) or
 * another negative errno (cannot open or read). Not async-signal-safe (strtoull). */
int gpum__os_proc_stat(int pid, gpum__os_proc_stat_t *out);

#endif /* GPUM_OS_INTERNAL_H */
