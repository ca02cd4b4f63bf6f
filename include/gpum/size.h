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

/* Figures and their units. A figure's unit is read from its name's suffix, as Prometheus
 * names carry theirs: "_bytes" bytes; "_seconds", "_ms", "_us", "_ns" a time (*scale turns the
 * value into seconds: 1e-3 for "_ms"); "_per_s" and "_per_second" a rate; "_ratio" a fraction
 * of one, "_percent" hundredths (scale 0.01); anything else a count (scale 1). */
typedef enum {
  GPUM_UNIT_COUNT,
  GPUM_UNIT_BYTES,
  GPUM_UNIT_SECONDS,
  GPUM_UNIT_RATIO,
  GPUM_UNIT_PER_SECOND,
} gpum_unit_t;
/* The unit of a figure named name; *scale (may be NULL) the factor to the unit's base. */
GPUM_API gpum_unit_t gpum_figure_unit(const char *name, double *scale);
/* The length of name without the suffix that gave its unit: 9 for "queue_p99_us" ("queue_p99"),
 * 4 for "ooms" (a count has no suffix); 0 for NULL. Where a unit goes into a metric's name, the
 * figure is labelled by this stem (gpumd's gpum_workload_seconds{figure="queue_p99"}). */
GPUM_API size_t gpum_figure_stem_len(const char *name);
/* The unit's name as Prometheus writes it in a metric's name: "bytes", "seconds", "ratio",
 * "per_second", "" for a count. */
GPUM_API const char *gpum_unit_name(gpum_unit_t unit);
/* A value in the unit's base as people read it: bytes "2.50 GiB"; seconds "850 ns", "11.4 ms",
 * "2.5 s", "1h30m" (from 100 s on); ratio "93.0%"; rate "1.23k/s"; count "42", "2.35",
 * "12.3k", "4.56M". Returns buf; GPUM_FIGURE_BUFSZ always suffices (else truncated). */
#define GPUM_FIGURE_BUFSZ 32
GPUM_API char *gpum_value_format(gpum_unit_t unit, double value, char *buf, size_t len);
/* gpum_value_format of a figure by its name: ("queue_p99_us", 11400) is "11.4 ms". */
GPUM_API char *gpum_figure_format(const char *name, double value, char *buf, size_t len);
#ifdef __cplusplus
}
#endif
#endif /* GPUM_SIZE_H */
