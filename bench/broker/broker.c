/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/broker's load generator for gpumd (bench/broker/run.sh drives it).
 *
 *   broker rtt SOCKET CLIENTS SECONDS
 *     CLIENTS threads, each with its own connection, do reserve + release round trips
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
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  int fd;
  char buf[65536];
  size_t len;
} conn_t;

static int conn_open(conn_t *c, const char *path) {
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  size_t n = strlen(path);
  if (n >= sizeof sun.sun_path)
    return -1;
  memcpy(sun.sun_path, path, n + 1);
  c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  c->len = 0;
  if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sun, sizeof sun) != 0) {
    if (c->fd >= 0)
      close(c->fd);
    return -1;
  }
  return 0;
}

static int send_all(conn_t *c, const char *s, size_t n) {
  while (n) {
    ssize_t w = write(c->fd, s, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Reads one line into out (NUL-terminated, newline removed). */
static int read_line(conn_t *c, char *out, size_t cap) {
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

typedef struct {
  const char *path;
  uint64_t end_ns;
  uint32_t *lat_us;
  size_t n, cap;
  int failed;
} worker_t;

static atomic_int ready;
static atomic_int go;

static void *worker(void *arg) {
  worker_t *w = arg;
  conn_t c;
  char line[4096], id[32], req[256];
  if (conn_open(&c, w->path) != 0) {
    w->failed = 1;
    atomic_fetch_add(&ready, 1);
    return NULL;
  }
  atomic_fetch_add(&ready, 1);
  while (!atomic_load(&go))
    ;
  unsigned seq = 0;
  while (now_ns() < w->end_ns) {
    uint64_t t0 = now_ns();
    int n = snprintf(req, sizeof req, "{\"id\":%u,\"op\":\"reserve\",\"bytes_per_gpu\":1048576}\n",
                     ++seq);
    if (send_all(&c, req, (size_t)n) || read_line(&c, line, sizeof line) ||
        reply_id(line, id, sizeof id)) {
      w->failed = 1;
      break;
    }
    n = snprintf(req, sizeof req, "{\"id\":%u,\"op\":\"release\",\"reservation\":\"%s\"}\n", ++seq,
                 id);
    if (send_all(&c, req, (size_t)n) || read_line(&c, line, sizeof line) ||
        !strstr(line, "\"ok\":true")) {
      w->failed = 1;
      break;
    }
    if (w->n == w->cap) {
      size_t cap = w->cap ? 2 * w->cap : 4096;
      uint32_t *p = realloc(w->lat_us, cap * sizeof *p);
      if (!p) {
        w->failed = 1;
        break;
      }
      w->lat_us = p;
      w->cap = cap;
    }
    w->lat_us[w->n++] = (uint32_t)((now_ns() - t0) / 1000);
  }
  close(c.fd);
  return NULL;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

static int run_rtt(const char *path, int clients, double secs) {
  worker_t *ws = calloc((size_t)clients, sizeof *ws);
  pthread_t *ts = calloc((size_t)clients, sizeof *ts);
  if (!ws || !ts)
    return 1;
  uint64_t start = 0;
  for (int i = 0; i < clients; i++) {
    ws[i].path = path;
    ws[i].end_ns = UINT64_MAX;
    pthread_create(&ts[i], NULL, worker, &ws[i]);
  }
  while (atomic_load(&ready) < clients)
    ;
  start = now_ns();
  for (int i = 0; i < clients; i++)
    ws[i].end_ns = start + (uint64_t)(secs * 1e9);
  atomic_store(&go, 1);
  size_t total = 0;
  int failed = 0;
  for (int i = 0; i < clients; i++) {
    pthread_join(ts[i], NULL);
    total += ws[i].n;
    failed |= ws[i].failed;
  }
  double wall = (double)(now_ns() - start) / 1e9;
  uint32_t *all = malloc((total ? total : 1) * sizeof *all);
  size_t k = 0;
  for (int i = 0; i < clients; i++) {
    memcpy(all + k, ws[i].lat_us, ws[i].n * sizeof *all);
    k += ws[i].n;
    free(ws[i].lat_us);
  }
  qsort(all, total, sizeof *all, cmp_u32);
  uint32_t p50 = total ? all[(total * 50 + 99) / 100 - 1] : 0;
  uint32_t p99 = total ? all[(total * 99 + 99) / 100 - 1] : 0;
  printf("clients=%d ops=%zu rate=%.0f p50_us=%u p99_us=%u%s\n", clients, total,
         (double)total / wall, p50, p99, failed ? " errors=yes" : "");
  free(all);
  free(ws);
  free(ts);
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
      if (send_all(&c, req, (size_t)n))
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
