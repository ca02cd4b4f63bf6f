/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpum logging: levels, one line per event, key=value fields.
 *
 * Library code logs through gpum_log(); nothing is printed until the application chooses a
 * target (gpum_log_set_target), so a program that links libgpum stays silent unless it asks.
 * Line format on stderr: "2026-11-22T05:12:13.123Z level=info module=device msg=\"...\" k=v".
 * All functions are thread-safe.
 */
#ifndef GPUM_LOG_H
#define GPUM_LOG_H

#include <stdarg.h>

#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GPUM_LOG_TRACE = 0,
  GPUM_LOG_DEBUG = 1,
  GPUM_LOG_INFO = 2,
  GPUM_LOG_WARN = 3,
  GPUM_LOG_ERROR = 4,
  GPUM_LOG_OFF = 5,
} gpum_log_level_t;

typedef enum {
  GPUM_LOG_TARGET_NONE = 0, /* default: drop everything */
  GPUM_LOG_TARGET_STDERR = 1,
  GPUM_LOG_TARGET_SYSLOG = 2, /* syslog(3); journald picks it up */
} gpum_log_target_t;

/* A callback receives every line at or above the level, already formatted without the
 * timestamp. It may be called from any thread and must not call gpum_log itself. */
typedef void (*gpum_log_fn)(gpum_log_level_t level, const char *module, const char *line,
                            void *arg);

GPUM_API void gpum_log_set_level(gpum_log_level_t level);
GPUM_API gpum_log_level_t gpum_log_get_level(void);
GPUM_API void gpum_log_set_target(gpum_log_target_t target);
/* Replaces any previous callback; NULL removes it. Lines still go to the target as well. */
GPUM_API void gpum_log_set_callback(gpum_log_fn fn, void *arg);

/* Parses "trace|debug|info|warn|error|off" (case-insensitive). Returns 0 or GPUM_EINVAL. */
GPUM_API int gpum_log_level_parse(const char *s, gpum_log_level_t *out);
GPUM_API const char *gpum_log_level_name(gpum_log_level_t level);

/* Logs msg (printf format) with optional key=value fields already in fmt after the message,
 * e.g. gpum_log(GPUM_LOG_INFO, "device", "backend selected backend=%s count=%u", name, n). */
GPUM_API void gpum_log(gpum_log_level_t level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
GPUM_API void gpum_vlog(gpum_log_level_t level, const char *module, const char *fmt, va_list ap);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_LOG_H */
