/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The clocks gpum uses, for programs that want the same: monotonic time for durations and
 * deadlines, wall-clock time for timestamps (gpumd's *_ns fields are gpum_clock_real_ns).
 */
#ifndef GPUM_CLOCK_H
#define GPUM_CLOCK_H

#include <stdint.h>

#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CLOCK_MONOTONIC in nanoseconds. Thread-safe, never fails. */
GPUM_API uint64_t gpum_clock_mono_ns(void);
/* CLOCK_REALTIME in nanoseconds since the Unix epoch. Thread-safe, never fails. */
GPUM_API uint64_t gpum_clock_real_ns(void);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_CLOCK_H */
