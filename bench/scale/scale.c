/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/scale's helpers (bench/scale/run.sh drives them; the reserve+release load itself is
 * bench/broker's `broker rtt`).
 *
 *   scale fill SOCKET GRANTED QUEUED
 *     on one connection (pipelined): one reservation of 60 GiB on device 7, GRANTED - 1 of
 *     1 MiB (best fit puts them beside it), then QUEUED of 30 GiB on device 7, which wait
 *     behind the first; prints "granted=G queued=Q" and keeps them until stdin closes.
 *   scale get HOST:PORT PATH
 *     GETs PATH over one keep-alive HTTP/1.1 connection in a loop until SIGTERM, then prints
 *     "requests=N bytes=B" (B: the last body's size). A reader that never stops reading.
 *
 * Plain sockets on purpose: the figure is gpumd's, not a client library's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "line_conn.h"

/* ---- fill --------------------------------------------------------------------------------- */

/* Sends the request of number i (0: the large one, then the small ones, then the queued). */
static int send_fill(conn_t *c, long i, long granted) {
  char req[200];
  int n;
  if (i == 0)
    n = snprintf(req, sizeof req,
                 "{\"id\":%ld,\"op\":\"reserve\",\"bytes_per_gpu\":%llu,\"devices\":[\"7\"]}\n", i,
                 60ull << 30);
  else if (i < granted)
    n = snprintf(req, sizeof req, "{\"id\":%ld,\"op\":\"reserve\",\"bytes_per_gpu\":1048576}\n", i);
  else
    n = snprintf(req, sizeof req,
                 "{\"id\":%ld,\"op\":\"reserve\",\"bytes_per_gpu\":%llu,\"devices\":[\"7\"]}\n", i,
                 30ull << 30);
  return send_all(c->fd, req, (size_t)n);
}

static int run_fill(const char *path, long granted, long queued) {
  static conn_t c;
  if (granted < 1 || queued < 0)
    return 2;
  if (conn_open(&c, path) != 0) {
    fprintf(stderr, "scale fill: cannot connect to %s\n", path);
    return 1;
  }
  long total = granted + queued, sent = 0, got = 0, ng = 0, nq = 0;
  char line[4096];
  while (got < total) {
    /* The large one alone first (sent == 1 until its reply): the small ones go beside it. */
    while (sent < total && sent - got < 256 && (sent == 0 || got > 0)) {
      if (send_fill(&c, sent, granted) != 0)
        return 1;
      sent++;
    }
    if (read_line(&c, line, sizeof line) != 0 || !strstr(line, "\"ok\":true")) {
      fprintf(stderr, "scale fill: %s\n", line);
      return 1;
    }
    ng += strstr(line, "\"GRANTED\"") != NULL;
    nq += strstr(line, "\"QUEUED\"") != NULL;
    got++;
  }
  printf("granted=%ld queued=%ld\n", ng, nq);
  fflush(stdout);
  while (getchar() != EOF)
    ;
  close(c.fd);
  return 0;
}

/* ---- get ---------------------------------------------------------------------------------- */

static volatile sig_atomic_t stop;
static void on_term(int sig) {
  (void)sig;
  stop = 1;
}

/* Reads one response (Content-Length framing) into buf (grown as needed). Returns the body's
 * size, or -1. */
static long read_response(int fd, char **buf, size_t *cap) {
  size_t len = 0, head = 0; /* head: the header's size with its blank line, once read */
  long clen = -1;
  for (;;) {
    if (len + 65536 > *cap) {
      size_t nc = *cap ? *cap * 2 : 1 << 20;
      char *p = realloc(*buf, nc);
      if (!p)
        return -1;
      *buf = p;
      *cap = nc;
    }
    ssize_t r = read(fd, *buf + len, *cap - len - 1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    len += (size_t)r;
    (*buf)[len] = '\0';
    if (!head) {
      char *hdr_end = strstr(*buf, "\r\n\r\n");
      if (!hdr_end)
        continue;
      head = (size_t)(hdr_end - *buf) + 4;
      if (strncmp(*buf, "HTTP/1.1 200", 12) != 0) {
        fprintf(stderr, "scale get: %.200s\n", *buf);
        return -1;
      }
      const char *cl = strcasestr(*buf, "\r\ncontent-length:");
      if (!cl || cl > hdr_end)
        return -1;
      clen = strtol(cl + 17, NULL, 10);
    }
    if (len >= head + (size_t)clen)
      return clen;
  }
}

static int run_get(const char *hostport, const char *path) {
  char host[64];
  const char *colon = strrchr(hostport, ':');
  if (!colon || (size_t)(colon - hostport) >= sizeof host)
    return 2;
  memcpy(host, hostport, (size_t)(colon - hostport));
  host[colon - hostport] = '\0';
  long port = strtol(colon + 1, NULL, 10);
  if (port <= 0 || port > 65535)
    return 2;
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, host, &sin.sin_addr) != 1)
    return 2;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0) {
    fprintf(stderr, "scale get: cannot connect to %s\n", hostport);
    return 1;
  }
  struct sigaction sa = {.sa_handler = on_term};
  sigaction(SIGTERM, &sa, NULL);
  char req[512];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, hostport);
  char *buf = NULL;
  size_t cap = 0;
  long count = 0, body = 0;
  while (!stop) {
    if (send_all(fd, req, (size_t)n) != 0)
      break;
    long b = read_response(fd, &buf, &cap);
    if (b < 0)
      break;
    body = b;
    count++;
  }
  printf("requests=%ld bytes=%ld\n", count, body);
  free(buf);
  close(fd);
  return stop ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "fill"))
    return run_fill(argv[2], strtol(argv[3], NULL, 10), strtol(argv[4], NULL, 10));
  if (argc == 4 && !strcmp(argv[1], "get"))
    return run_get(argv[2], argv[3]);
  fprintf(stderr, "usage: scale fill SOCKET GRANTED QUEUED | scale get HOST:PORT PATH\n");
  return 2;
}
