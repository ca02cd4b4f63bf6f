/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sizes and durations as people write them.
 *
 * Sizes: "8GiB", "8G" (G, GB and GiB all mean 2^30: GPU memory is counted in binary units
 * everywhere users meet it), "8192MiB", "1.5TiB", "512" (bytes), "512B", "4k". Case-insensitive
 * units B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB, P/PB/PiB. Fractions are allowed with a unit
 * and rounded down to whole bytes. Negative numbers, overflow past 2^64-1, empty strings,
 * trailing junk and NaN/inf are rejected with GPUM_EINVAL or GPUM_ERANGE and a detail message.
 * Output is IEC: "8.00 GiB", "512 B", "1.50 TiB".
 *
 * Durations: "500ms", "30s", "5m", "1h", "1h30m", "2d", a bare number means seconds.
 * All functions are pure and thread-safe.
 */
#ifndef GPUM_SIZE_H
#define GPUM_SIZE_H

#include <stddef.h>
#include <stdint.h>

#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Parses s into *out (bytes). Returns 0, GPUM_EINVAL (junk, negative, empty) or GPUM_ERANGE
 * (overflow). *out is untouched on error. */
GPUM_API int gpum_size_parse(const char *s, uint64_t *out);

/* Writes bytes in IEC units with two decimals ("8.00 GiB"; plain "512 B" below 1 KiB) into buf.
 * Returns buf. A buffer of GPUM_SIZE_BUFSZ always suffices; a shorter one is truncated with a
 * NUL terminator (never overflowed). */
#define GPUM_SIZE_BUFSZ 24
GPUM_API char *gpum_size_format(uint64_t bytes, char *buf, size_t len);

/* Parses a duration into milliseconds. Returns 0, GPUM_EINVAL or GPUM_ERANGE. */
GPUM_API int gpum_duration_parse(const char *s, uint64_t *out_ms);

/* Formats milliseconds as the shortest exact form ("1h30m", "500ms", "0s"). Returns buf. */
#define GPUM_DURATION_BUFSZ 32
GPUM_API char *gpum_duration_format(uint64_t ms, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_SIZE_H */
