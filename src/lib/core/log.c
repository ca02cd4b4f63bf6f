/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging: one line per event, key=value fields, silent until the application asks.
 *
 * gpum_log() formats the caller's text, splits it into the message (the words before the first
 * key=value token) and the fields, and writes
 *   2026-11-22T05:12:13.123Z level=info module=device msg="backend selected" backend=nvml
 * to the chosen target (stderr with one write(2) per line, or syslog(3)) and to the optional
 * callback, which gets the line without the timestamp. The level is an atomic read so that a
 * disabled level costs one load; target and callback changes are serialised by a mutex, which
 * is also held while a line is delivered so that a callback removed with
 * gpum_log_set_callback(NULL, NULL) is never called afterwards. A thread-local guard drops lines
 * logged from inside the callback instead of deadlocking. errno is preserved.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <gpum/error.h>
#include <gpum/log.h>

#define LINE_MAX_BYTES 4096

static atomic_int cur_level = GPUM_LOG_WARN;
static atomic_int cur_target = GPUM_LOG_TARGET_NONE;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static gpum_log_fn cb_fn;
static void *cb_arg;
static _Thread_local bool in_log;

static const char *const level_names[] = {"trace", "debug", "info", "warn", "error", "off"};

void gpum_log_set_level(gpum_log_level_t level) {
  if ((int)level < GPUM_LOG_TRACE || level > GPUM_LOG_OFF)
    return;
  atomic_store(&cur_level, (int)level);
}

gpum_log_level_t gpum_log_get_level(void) {
  return (gpum_log_level_t)atomic_load(&cur_level);
}

void gpum_log_set_target(gpum_log_target_t target) {
  if ((int)target < GPUM_LOG_TARGET_NONE || target > GPUM_LOG_TARGET_SYSLOG)
    return;
  pthread_mutex_lock(&lock);
  atomic_store(&cur_target, (int)target);
  pthread_mutex_unlock(&lock);
}

void gpum_log_set_callback(gpum_log_fn fn, void *arg) {
  pthread_mutex_lock(&lock);
  cb_fn = fn;
  cb_arg = arg;
  pthread_mutex_unlock(&lock);
}

int gpum_log_level_parse(const char *s, gpum_log_level_t *out) {
  for (int i = GPUM_LOG_TRACE; s != NULL && i <= GPUM_LOG_OFF; i++) {
    if (!strcasecmp(s, level_names[i])) {
      *out = (gpum_log_level_t)i;
      return 0;
    }
  }
  return gpum_error(GPUM_EINVAL, "'%s' is not a log level (one of trace|debug|info|warn|error|off)",
                    s ? s : "(null)");
}

const char *gpum_log_level_name(gpum_log_level_t level) {
  if ((int)level < GPUM_LOG_TRACE || level > GPUM_LOG_OFF)
    return "unknown";
  return level_names[level];
}

/* A bounded string builder: appends never overflow and remember that something was cut. */
typedef struct {
  char *buf;
  size_t cap, len;
  bool cut;
} sb_t;

static void sb_putc(sb_t *b, char c) {
  if (b->len + 1 < b->cap)
    b->buf[b->len++] = c;
  else
    b->cut = true;
  b->buf[b->len] = '\0';
}

static void sb_puts(sb_t *b, const char *s) {
  while (*s)
    sb_putc(b, *s++);
}

/* Appends s with control characters escaped so that the entry stays on one line; quotes and
 * backslashes are escaped too when the text goes inside msg="...". */
static void sb_escaped(sb_t *b, const char *s, size_t n, bool quoted) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\n') {
      sb_puts(b, "\\n");
    } else if (c == '\t') {
      sb_puts(b, "\\t");
    } else if (c == '\r') {
      sb_puts(b, "\\r");
    } else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      snprintf(hex, sizeof hex, "\\x%02x", c);
      sb_puts(b, hex);
    } else if (quoted && (c == '"' || c == '\\')) {
      sb_putc(b, '\\');
      sb_putc(b, (char)c);
    } else {
      sb_putc(b, (char)c);
    }
  }
}

/* True when the word at s (up to a space) looks like key=value: [A-Za-z_][A-Za-z0-9_.-]*=. */
static bool is_field(const char *s) {
  if (!(isalpha((unsigned char)*s) || *s == '_'))
    return false;
  for (s++; *s && *s != ' '; s++) {
    if (*s == '=')
      return true;
    if (!(isalnum((unsigned char)*s) || *s == '_' || *s == '.' || *s == '-'))
      return false;
  }
  return false;
}

/* Builds "level=L module=M msg=\"...\" fields" from the formatted text. */
static void build_line(sb_t *b, gpum_log_level_t level, const char *module, const char *text) {
  const char *fields = NULL;
  for (const char *p = text; *p; p++) {
    if ((p == text || p[-1] == ' ') && is_field(p)) {
      fields = p;
      break;
    }
  }
  size_t msg_len = fields ? (size_t)(fields - text) : strlen(text);
  while (msg_len > 0 && text[msg_len - 1] == ' ')
    msg_len--;
  sb_puts(b, "level=");
  sb_puts(b, level_names[level]);
  sb_puts(b, " module=");
  sb_escaped(b, module, strlen(module), false);
  sb_puts(b, " msg=\"");
  sb_escaped(b, text, msg_len, true);
  sb_putc(b, '"');
  if (fields) {
    sb_putc(b, ' ');
    sb_escaped(b, fields, strlen(fields), false);
  }
  if (b->cut && b->cap > 4)
    memcpy(b->buf + b->cap - 4, "...", 4);
}

static void write_stderr(const char *line) {
  char out[LINE_MAX_BYTES + 64];
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  int n = snprintf(out, sizeof out, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s\n", tm.tm_year + 1900,
                   tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                   ts.tv_nsec / 1000000, line);
  if (n < 0)
    return;
  size_t len = (size_t)n < sizeof out ? (size_t)n : sizeof out - 1;
  for (size_t off = 0; off < len;) {
    ssize_t w = write(STDERR_FILENO, out + off, len - off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return;
    off += (size_t)w;
  }
}

static int syslog_priority(gpum_log_level_t level) {
  switch (level) {
  case GPUM_LOG_TRACE:
  case GPUM_LOG_DEBUG:
    return LOG_DEBUG;
  case GPUM_LOG_INFO:
    return LOG_INFO;
  case GPUM_LOG_WARN:
    return LOG_WARNING;
  default:
    return LOG_ERR;
  }
}

void gpum_vlog(gpum_log_level_t level, const char *module, const char *fmt, va_list ap) {
  if ((int)level < atomic_load(&cur_level) || (int)level < GPUM_LOG_TRACE ||
      level >= GPUM_LOG_OFF || fmt == NULL || in_log)
    return;
  int saved_errno = errno;
  char text[LINE_MAX_BYTES], line[LINE_MAX_BYTES];
  sb_t b = {line, sizeof line, 0, false};

  vsnprintf(text, sizeof text, fmt, ap);
  line[0] = '\0';
  build_line(&b, level, module ? module : "gpum", text);

  pthread_mutex_lock(&lock);
  in_log = true;
  switch ((gpum_log_target_t)atomic_load(&cur_target)) {
  case GPUM_LOG_TARGET_STDERR:
    write_stderr(line);
    break;
  case GPUM_LOG_TARGET_SYSLOG:
    syslog(syslog_priority(level), "%s", line);
    break;
  default:
    break;
  }
  if (cb_fn != NULL)
    cb_fn(level, module ? module : "gpum", line, cb_arg);
  in_log = false;
  pthread_mutex_unlock(&lock);
  errno = saved_errno;
}

void gpum_log(gpum_log_level_t level, const char *module, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gpum_vlog(level, module, fmt, ap);
  va_end(ap);
}
