/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the benchmarks that talk to gpumd's socket share (bench/broker, bench/scale): a
 * connection to a Unix socket that reads one newline-terminated message at a time, and a write
 * of a whole buffer. Header-only: each benchmark is one C file built by its run.sh.
 */
#ifndef GPUM_BENCH_LINE_CONN_H
#define GPUM_BENCH_LINE_CONN_H

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

typedef struct {
  int fd;
  char buf[1 << 16];
  size_t len;
} conn_t;

/* Connects c to the Unix socket at path. 0, or -1 (nothing left open). */
static inline int conn_open(conn_t *c, const char *path) {
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  size_t n = strlen(path);
  c->len = 0;
  c->fd = -1;
  if (n >= sizeof sun.sun_path)
    return -1;
  memcpy(sun.sun_path, path, n + 1);
  c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sun, sizeof sun) != 0) {
    if (c->fd >= 0)
      close(c->fd);
    c->fd = -1;
    return -1;
  }
  return 0;
}

/* Writes all n bytes of s to fd. 0, or -1. */
static inline int send_all(int fd, const char *s, size_t n) {
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Reads one line into out (NUL-terminated, newline removed, cut to cap - 1 bytes). 0, or -1 at
 * the end of the stream, on an error, or for a line longer than the buffer. */
static inline int read_line(conn_t *c, char *out, size_t cap) {
  for (;;) {
    char *nl = memchr(c->buf, '\n', c->len);
    if (nl) {
      size_t n = (size_t)(nl - c->buf);
      size_t k = n < cap - 1 ? n : cap - 1;
      memcpy(out, c->buf, k);
      out[k] = '\0';
      memmove(c->buf, nl + 1, c->len - n - 1);
      c->len -= n + 1;
      return 0;
    }
    if (c->len == sizeof c->buf)
      return -1;
    ssize_t r = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    c->len += (size_t)r;
  }
}

#endif /* GPUM_BENCH_LINE_CONN_H */
