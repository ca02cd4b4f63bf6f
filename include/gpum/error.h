/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpum error codes.
 *
 * Every fallible gpum function returns int: 0 on success or one of the negative GPUM_E* codes
 * below. The codes come from one X-macro table, GPUM_ERRNO_MAP, which yields both the enum and
 * gpum_strerror()/gpum_err_name(). A thread-local detail string carries the human, actionable
 * message for the last failure on the calling thread ("cannot open /etc/gpum.yaml: line 3:
 * unknown key 'htp.listen'"). Codes are stable: never renumber, only append.
 */
#ifndef GPUM_ERROR_H
#define GPUM_ERROR_H

#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* XX(NAME, value, message). Values are negative and never reused. */
#define GPUM_ERRNO_MAP(XX)                                          \
  XX(EINVAL, -1, "invalid argument")                                \
  XX(ENOMEM, -2, "out of host memory")                              \
  XX(ENOENT, -3, "not found")                                       \
  XX(ENODEV, -4, "no such device")                                  \
  XX(ENOTSUP, -5, "not supported")                                  \
  XX(ETIMEDOUT, -6, "timed out")                                    \
  XX(EAGAIN, -7, "temporary failure, try again")                    \
  XX(EIO, -8, "input/output error")                                 \
  XX(ELOST, -9, "device lost (fallen off the bus)")                 \
  XX(ERESET, -10, "device needs a reset")                           \
  XX(EPERM, -11, "permission denied")                               \
  XX(ENOSPC, -12, "buffer too small")                               \
  XX(EDRIVER, -13, "driver library not available")                  \
  XX(ERANGE, -14, "value out of range")                             \
  XX(EPARSE, -15, "syntax error")                                   \
  XX(EDEVOOM, -16, "out of device memory")                          \
  XX(EBUSY, -17, "resource busy")                                   \
  XX(EEXIST, -18, "already exists")                                 \
  XX(ESTATE, -19, "operation not valid in the current state")       \
  XX(EUNKNOWN_KEY, -20, "unknown configuration key")                \
  XX(EDRIVERVER, -21, "driver too old for this operation")          \
  XX(ECLOSED, -22, "connection closed")                             \
  XX(EPROTO, -23, "protocol error")                                 \
  XX(EINTERNAL, -24, "internal error")                              \
  XX(ENEVERFIT, -25, "request can never be satisfied on this node") \
  XX(EINTR, -26, "interrupted")

typedef enum {
  GPUM_OK = 0,
#define GPUM__ERR_ENUM(name, value, msg) GPUM_##name = (value),
  GPUM_ERRNO_MAP(GPUM__ERR_ENUM)
#undef GPUM__ERR_ENUM
} gpum_errno_t;

/* The static message for a code ("out of device memory"); "success" for 0, "unknown error"
 * for other codes not in the table. Never NULL. Thread-safe. */
GPUM_API const char *gpum_strerror(int err);

/* The code's name without the prefix ("EDEVOOM"); "OK" for 0, "UNKNOWN" for other codes not in
 * the table. */
GPUM_API const char *gpum_err_name(int err);

/* The detail message of the last error set on this thread, or "" when none. The string is
 * owned by the thread and valid until the next gpum call on that thread. Thread-safe. */
GPUM_API const char *gpum_last_error(void);

/* Sets this thread's detail message (printf format, truncated at 1 KiB with "..." marking the
 * cut) and returns err unchanged, so that library code can `return gpum_error(GPUM_EINVAL,
 * "bad size '%s'", s);`. Thread-safe. */
GPUM_API int gpum_error(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clears this thread's detail message. */
GPUM_API void gpum_error_clear(void);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_ERROR_H */
