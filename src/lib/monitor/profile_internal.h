/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the profiler (profile.c) shared with the benchmark helper (profile_bench.c) and
 * the unit tests: the clock (replaceable by tests), the histogram's bucket arithmetic and the
 * duration formatting of reports.
 */
#ifndef GPUM_PROFILE_INTERNAL_H
#define GPUM_PROFILE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* Test seam: use fn as the clock of timers and benchmarks (NULL: CLOCK_MONOTONIC again). Not
 * thread-safe: set it before timing anything. */
void gpum__profile_set_clock(uint64_t (*fn)(void));
/* The current clock, in ns. */
uint64_t gpum__profile_now(void);

/* The histogram bucket of a duration, and the value a bucket reports (its midpoint). */
unsigned gpum__profile_bucket(uint64_t ns);
uint64_t gpum__profile_bucket_value(unsigned bucket);

/* "850 ns", "1.23 us", "4.50 ms", "2.00 s". Returns buf. */
char *gpum__profile_format_ns(double ns, char *buf, size_t len);

#endif /* GPUM_PROFILE_INTERNAL_H */
