/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The error table and the thread-local detail message.
 *
 * gpum_strerror() and gpum_err_name() are generated from GPUM_ERRNO_MAP, so a code added to the
 * table is described everywhere at once. gpum_error() keeps one 1 KiB detail buffer per thread:
 * library code fills it just before returning a negative code, and the caller reads it with
 * gpum_last_error(). Formatting goes through a scratch buffer so that a message may quote the
 * previous detail ("loading x: %s", gpum_last_error()) without overlapping reads and writes.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <gpum/error.h>

#define DETAIL_SIZE 1024

static _Thread_local char detail[DETAIL_SIZE];

const char *gpum_strerror(int err) {
  switch (err) {
  case GPUM_OK:
    return "success";
#define XX(name, value, msg) \
  case GPUM_##name:          \
    return msg;
    GPUM_ERRNO_MAP(XX)
#undef XX
  default:
    return "unknown error";
  }
}

const char *gpum_err_name(int err) {
  switch (err) {
  case GPUM_OK:
    return "OK";
#define XX(name, value, msg) \
  case GPUM_##name:          \
    return #name;
    GPUM_ERRNO_MAP(XX)
#undef XX
  default:
    return "UNKNOWN";
  }
}

const char *gpum_last_error(void) {
  return detail;
}

/* Marks a cut message: the last bytes become "...", moved back so that no UTF-8 sequence is
 * split in the middle. */
static void mark_truncated(char *buf, size_t size) {
  size_t cut = size - 4; /* room for "..." and the NUL */
  while (cut > 0 && ((unsigned char)buf[cut] & 0xC0) == 0x80)
    cut--;
  memcpy(buf + cut, "...", 4);
}

int gpum_error(int err, const char *fmt, ...) {
  int saved_errno = errno;
  char scratch[DETAIL_SIZE];

  if (fmt == NULL) {
    detail[0] = '\0';
    errno = saved_errno;
    return err;
  }
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(scratch, sizeof scratch, fmt, ap);
  va_end(ap);
  if (n < 0) {
    scratch[0] = '\0';
  } else if ((size_t)n >= sizeof scratch) {
    mark_truncated(scratch, sizeof scratch);
  }
  memcpy(detail, scratch, strlen(scratch) + 1);
  errno = saved_errno;
  return err;
}

void gpum_error_clear(void) {
  detail[0] = '\0';
}
