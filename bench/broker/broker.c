/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/broker's load generator for gpumd (bench/broker/run.sh drives it).
 *
 *   broker rtt SOCKET CLIENTS SECONDS
 *     CLIENTS connections, driven by one thread with epoll as redis-benchmark drives its
 *     clients, each with one request in flight, do reserve + release round trips
 *     (1 MiB on one GPU, connection lease) for SECONDS; prints one line
 *     "clients=N ops=... rate=... p50_us=... p99_us=..." where an op is one reserve followed
 *     by its release (two requests, both committed to the ledger before their replies).
 *   broker hold SOCKET COUNT
 *     makes COUNT live reservations on one connection (pipelined), prints "held=COUNT" and
 *     keeps them until stdin closes.
 *
 * Plain sockets and hand-written JSON on purpose: the figure is gpumd's, not a client
 * library's.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "line_conn.h"

/* The reservation id ("r-N") of a reply, into id. */
static int reply_id(const char *line, char *id, size_t cap) {
  if (!strstr(line, "\"ok\":true"))
    return -1;
  const char *p = strstr(line, "\"id\":\"r-");
  if (!p)
    return -1;
  p += 6;
  size_t n = strcspn(p, "\"");
  if (n >= cap)
    return -1;
  memcpy(id, p, n);
  id[n] = '\0';
  return 0;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* One client of the rtt run: a connection that alternates reserve and release. */
typedef struct {
  conn_t c;
  unsigned seq;
  int phase;   /* 0: waiting for a reserve reply, 1: for a release reply */
  bool busy;   /* a request is in flight */
  uint64_t t0; /* when this op's reserve was sent */
} client_t;

typedef struct {
  uint32_t *v;
  size_t n, cap;
} lat_t;

static int lat_add(lat_t *l, uint32_t us) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 65536;
    uint32_t *p = realloc(l->v, cap * sizeof *p);
    if (!p)
      return -1;
    l->v = p;
    l->cap = cap;
  }
  l->v[l->n++] = us;
  return 0;
}

static int send_reserve(client_t *k) {
  char req[128];
  int n = snprintf(req, sizeof req, "{\"id\":%u,\"op\":\"reserve\",\"bytes_per_gpu\":1048576}\n",
                   ++k->seq);
  k->phase = 0;
  k->busy = true;
  k->t0 = now_ns();
  return send_all(k->c.fd, req, (size_t)n);
}

/* Handles every complete reply buffered on k. Returns 0, or -1 on an error reply. */
static int client_replies(client_t *k, lat_t *lat, bool timing) {
  char line[4096], id[32], req[128];
  for (;;) {
    char *nl = memchr(k->c.buf, '\n', k->c.len);
    if (!nl)
      return 0;
    if (read_line(&k->c, line, sizeof line) != 0)
      return -1;
    if (k->phase == 0) {
      if (reply_id(line, id, sizeof id) != 0)
        return -1;
      int n = snprintf(req, sizeof req, "{\"id\":%u,\"op\":\"release\",\"reservation\":\"%s\"}\n",
                       ++k->seq, id);
      k->phase = 1;
      if (send_all(k->c.fd, req, (size_t)n) != 0)
        return -1;
    } else {
      if (!strstr(line, "\"ok\":true"))
        return -1;
      k->busy = false;
      if (!timing)
        continue; /* the run is over: this client stops */
      if (lat_add(lat, (uint32_t)((now_ns() - k->t0) / 1000)) != 0 || send_reserve(k) != 0)
        return -1;
    }
  }
}

/* CLIENTS connections driven by one thread with epoll, like redis-benchmark drives its
 * clients: each keeps one request in flight. */
static int run_rtt(const char *path, int clients, double secs) {
  client_t *ks = calloc((size_t)clients, sizeof *ks);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  lat_t lat = {0};
  int failed = 0;
  if (!ks || ep < 0)
    return 1;
  for (int i = 0; i < clients; i++) {
    if (conn_open(&ks[i].c, path) != 0) {
      fprintf(stderr, "broker: cannot connect to %s\n", path);
      return 1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &ks[i]};
    epoll_ctl(ep, EPOLL_CTL_ADD, ks[i].c.fd, &ev);
  }
  uint64_t start = now_ns(), end = start + (uint64_t)(secs * 1e9);
  for (int i = 0; i < clients && !failed; i++)
    failed = send_reserve(&ks[i]) != 0;
  size_t in_flight = (size_t)clients;
  struct epoll_event evs[256];
  bool timing = true;
  while (!failed && in_flight > 0) {
    if (timing && now_ns() >= end)
      timing = false; /* finish the ops in flight, start no new ones */
    int n = epoll_wait(ep, evs, 256, 1000);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      failed = 1;
      break;
    }
    for (int i = 0; i < n && !failed; i++) {
      client_t *k = evs[i].data.ptr;
      ssize_t r = read(k->c.fd, k->c.buf + k->c.len, sizeof k->c.buf - k->c.len);
      if (r <= 0) {
        failed = !(r < 0 && errno == EINTR);
        continue;
      }
      k->c.len += (size_t)r;
      failed = client_replies(k, &lat, timing) != 0;
    }
    if (!timing) {
      in_flight = 0;
      for (int i = 0; i < clients; i++)
        in_flight += ks[i].busy;
    }
  }
  double wall = secs; /* ops are counted when they end inside the run */
  for (int i = 0; i < clients; i++)
    close(ks[i].c.fd);
  close(ep);
  qsort(lat.v, lat.n, sizeof *lat.v, cmp_u32);
  size_t total = lat.n;
  uint32_t p50 = total ? lat.v[(total * 50 + 99) / 100 - 1] : 0;
  uint32_t p99 = total ? lat.v[(total * 99 + 99) / 100 - 1] : 0;
  printf("clients=%d ops=%zu rate=%.0f p50_us=%u p99_us=%u%s\n", clients, total,
         (double)total / wall, p50, p99, failed ? " errors=yes" : "");
  free(lat.v);
  free(ks);
  return failed;
}

static int run_hold(const char *path, long count) {
  conn_t c;
  char line[4096], req[160];
  if (conn_open(&c, path) != 0)
    return 1;
  long sent = 0, got = 0;
  while (got < count) {
    while (sent < count && sent - got < 256) {
      int n = snprintf(req, sizeof req,
                       "{\"id\":%ld,\"op\":\"reserve\",\"bytes_per_gpu\":1048576}\n", sent);
      if (send_all(c.fd, req, (size_t)n))
        return 1;
      sent++;
    }
    if (read_line(&c, line, sizeof line) || !strstr(line, "\"ok\":true")) {
      fprintf(stderr, "broker hold: %s\n", line);
      return 1;
    }
    got++;
  }
  printf("held=%ld\n", count);
  fflush(stdout);
  while (getchar() != EOF)
    ;
  close(c.fd);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "rtt")) {
    long n = strtol(argv[3], NULL, 10);
    return run_rtt(argv[2], n > 0 && n <= 4096 ? (int)n : 1, strtod(argv[4], NULL));
  }
  if (argc == 4 && !strcmp(argv[1], "hold"))
    return run_hold(argv[2], strtol(argv[3], NULL, 10));
  fprintf(stderr, "usage: broker rtt SOCKET CLIENTS SECONDS | broker hold SOCKET COUNT\n");
  return 2;
}
