/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The target of the checkpoint tests (sim_ckpt.c drives it with the driver's calls, ckpt_lib.c
 * with libgpum's gpum/checkpoint.h), and the controller's helpers to talk to it. A target
 * allocates two buffers on its device 0, writes a pattern into them, and has a worker thread
 * read and check the pattern through CUDA in a loop; it answers one-letter commands on a pipe
 * (target() lists them). Included by one program each, which links the simulated driver.
 */
#ifndef GPUM_CKPT_TARGET_H
#define GPUM_CKPT_TARGET_H

#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gpum/sim.h>

#include "cuda_abi.h"
#include "prog_fail.h"

#define DECL(name, params) CUresult name params;
GPUM_CUDA_FUNCS(DECL)

#define BIG (64u << 20)   /* bytes of the big buffer */
#define SMALL (64u << 10) /* bytes of the small one, which the worker reads whole */

static unsigned char pattern(size_t i) {
  return (unsigned char)(i * 31u + 7u);
}

/* ---- the target ---- */

static CUdeviceptr big, small;
static atomic_ulong rounds;     /* the worker's checked reads */
static atomic_int worker_err;   /* the CUresult that stopped the worker, 0 while it runs */
static atomic_bool worker_hold; /* the worker waits while set */
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static bool worker_parked;

static void say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int fd, const char *fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (write(fd, line, (size_t)n) != n)
    fail("write to the pipe");
}

static bool check(CUdeviceptr at, size_t off, size_t len, CUresult *r) {
  unsigned char *buf = malloc(len);
  if (!buf)
    fail("malloc");
  *r = cuMemcpyDtoH_v2(buf, at + off, len);
  bool ok = *r == CUDA_SUCCESS;
  for (size_t i = 0; ok && i < len; i++)
    ok = buf[i] == pattern(off + i);
  free(buf);
  return ok;
}

static void *worker(void *arg) {
  CUcontext ctx = arg;
  if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
    fail("worker: cuCtxSetCurrent");
  for (size_t k = 0;; k++) {
    pthread_mutex_lock(&hold_mu);
    worker_parked = atomic_load(&worker_hold);
    pthread_cond_broadcast(&hold_cv);
    while (atomic_load(&worker_hold))
      pthread_cond_wait(&hold_cv, &hold_mu);
    worker_parked = false;
    pthread_mutex_unlock(&hold_mu);
    CUresult r;
    size_t off = (k * 4096u) % (BIG - 4096u);
    if (!check(small, 0, SMALL, &r) || (r == CUDA_SUCCESS && !check(big, off, 4096, &r))) {
      if (r == CUDA_SUCCESS)
        fail("worker: the pattern changed");
      atomic_store(&worker_err, r);
      return NULL;
    }
    atomic_fetch_add(&rounds, 1);
  }
}

static void worker_park(bool park) {
  pthread_mutex_lock(&hold_mu);
  atomic_store(&worker_hold, park);
  pthread_cond_broadcast(&hold_cv);
  while (park && !worker_parked && atomic_load(&worker_err) == 0)
    pthread_cond_wait(&hold_cv, &hold_mu);
  pthread_mutex_unlock(&hold_mu);
}

static CUstream held;
/* Set by the sync thread once its cuCtxSetCurrent has returned: a CUDA call in flight after that
 * is its cuStreamSynchronize (a call counted before it could be the cuCtxSetCurrent, which a lock
 * would wait for and then pass). */
static atomic_bool sync_entering;
static void *sync_thread(void *arg) {
  if (cuCtxSetCurrent(arg) != CUDA_SUCCESS)
    fail("sync thread: cuCtxSetCurrent");
  atomic_store(&sync_entering, true);
  CUresult r = cuStreamSynchronize(held);
  return (void *)(intptr_t)r;
}

struct call {
  CUcontext ctx;
  int out;
};
static void *blocked_call(void *arg) {
  struct call *c = arg;
  say(c->out, "calling\n");
  CUresult r = cuCtxSetCurrent(c->ctx); /* the first call blocks while the process is locked */
  bool ok = r == CUDA_SUCCESS && check(big, BIG - 4096, 4096, &r);
  say(c->out, "returned %d %d\n", (int)r, ok);
  return NULL;
}

static void write_pattern(CUdeviceptr at, size_t len) {
  unsigned char *buf = malloc(len);
  if (!buf)
    fail("malloc");
  for (size_t i = 0; i < len; i++)
    buf[i] = pattern(i);
  if (cuMemcpyHtoD_v2(at, buf, len) != CUDA_SUCCESS)
    fail("target: cuMemcpyHtoD");
  free(buf);
}

/* The target: reads one-letter commands from in, answers on out. */
static void target(int in, int out) {
  CUcontext ctx;
  CUdevice dev;
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
      cuCtxSetCurrent(ctx) || cuMemAlloc_v2(&big, BIG) || cuMemAlloc_v2(&small, SMALL) ||
      cuStreamCreate(&held, 0))
    fail("target: setup");
  write_pattern(big, BIG);
  write_pattern(small, SMALL);
  pthread_t w, s, b;
  if (pthread_create(&w, NULL, worker, ctx))
    fail("pthread_create");
  struct call call = {ctx, out};
  say(out, "ready %lu\n", (unsigned long)atomic_load(&rounds));
  char cmd;
  while (read(in, &cmd, 1) == 1) {
    switch (cmd) {
    case 'h': /* a CUDA call in flight that cannot finish: the worker parked, a held stream */
      worker_park(true);
      atomic_store(&sync_entering, false);
      if (gpum_sim_debug_stream_hold(held, 1) || pthread_create(&s, NULL, sync_thread, ctx))
        fail("target: hold");
      /* In flight: the held cuStreamSynchronize (bounded by the test's timeout). */
      while (!atomic_load(&sync_entering) || gpum_sim_debug_cu_calls() != 1)
        sched_yield();
      say(out, "held\n");
      break;
    case 'r': { /* the held call finishes, the worker goes on */
      void *res;
      if (gpum_sim_debug_stream_hold(held, 0) || pthread_join(s, &res) || res != NULL)
        fail("target: release");
      worker_park(false);
      say(out, "released\n");
      break;
    }
    case 'x': /* a CUDA call from a new thread (to block while locked) */
      if (pthread_create(&b, NULL, blocked_call, &call))
        fail("pthread_create");
      break;
    case 'j':
      pthread_join(b, NULL);
      break;
    case 'v': { /* the pattern, whole; the worker's progress; what device 0 is */
      CUresult r1, r2;
      bool ok = check(big, 0, BIG, &r1) && check(small, 0, SMALL, &r2);
      unsigned long before = atomic_load(&rounds);
      while (atomic_load(&rounds) < before + 2 && atomic_load(&worker_err) == 0)
        sched_yield();
      CUuuid u;
      CUresult r3 = cuDeviceGetUuid_v2(&u, 0);
      say(out, "verified %d %d %02x%02x %d\n", ok, (int)r3, (unsigned char)u.bytes[0],
          (unsigned char)u.bytes[1], atomic_load(&worker_err));
      break;
    }
    case 'e': { /* what a CUDA call returns now, and what stopped the worker */
      size_t f, t;
      CUresult r = cuMemGetInfo_v2(&f, &t);
      while (atomic_load(&worker_err) == 0)
        sched_yield();
      say(out, "calls %d worker %d\n", (int)r, atomic_load(&worker_err));
      break;
    }
    default:
      fail("target: bad command %c", cmd);
    }
  }
  _exit(0);
}

/* ---- the controller ---- */

struct tgt {
  pid_t pid;
  int to, from;
};

static struct tgt spawn(void) {
  int a[2], b[2];
  if (pipe(a) || pipe(b))
    fail("pipe");
  struct tgt t = {0};
  t.pid = fork();
  if (t.pid < 0)
    fail("fork");
  if (t.pid == 0) {
    close(a[1]);
    close(b[0]);
    target(a[0], b[1]);
  }
  close(a[0]);
  close(b[1]);
  t.to = a[1];
  t.from = b[0];
  return t;
}

static void send_cmd(const struct tgt *t, char c) {
  if (write(t->to, &c, 1) != 1)
    fail("write to target");
}

/* Reads one line of the target's, a byte at a time (nothing is read ahead, so that pending()
 * sees what is left in the pipe). */
static void expect_line(const struct tgt *t, const char *prefix, char *line, size_t len) {
  size_t n = 0;
  char c;
  while (n + 1 < len && read(t->from, &c, 1) == 1 && c != '\n')
    line[n++] = c;
  line[n] = '\0';
  if (strncmp(line, prefix, strlen(prefix)) != 0)
    fail("target %d said \"%s\", expected \"%s\"", (int)t->pid, line, prefix);
}

/* Whether the target has said something not read yet. */
static bool pending(const struct tgt *t) {
  struct pollfd p = {.fd = t->from, .events = POLLIN};
  return poll(&p, 1, 0) > 0;
}

/* The target's bytes on each device, as the node counts them. */
static void node_bytes(pid_t pid, uint64_t out[2]) {
  static gpum_sim_status_t st;
  st.api_version = GPUM_SIM_API_VERSION;
  if (gpum_sim_status(getenv("GPUM_SIM_NODE"), &st) != 0)
    fail("gpum_sim_status: %s", gpum_sim_last_error());
  out[0] = out[1] = 0;
  for (unsigned i = 0; i < st.process_count; i++)
    if (st.processes[i].pid == (uint32_t)pid && st.processes[i].device < 2)
      out[st.processes[i].device] += st.processes[i].bytes;
}

/* The target's bytes, as node_bytes gives them, checked to be where it starts: all of its
 * buffers on device 0, nothing on device 1. */
static void node_bytes_at_start(pid_t pid, uint64_t out[2]) {
  node_bytes(pid, out);
  if (out[0] < BIG + SMALL || out[1] != 0)
    fail("the target holds %llu and %llu bytes", (unsigned long long)out[0],
         (unsigned long long)out[1]);
}

static void uuid_of(int ordinal, CUuuid *u) {
  if (cuDeviceGetUuid_v2(u, ordinal) != CUDA_SUCCESS)
    fail("cuDeviceGetUuid_v2");
}

static void end(struct tgt *t) {
  kill(t->pid, SIGKILL);
  waitpid(t->pid, NULL, 0);
  close(t->from);
  close(t->to);
}

#endif /* GPUM_CKPT_TARGET_H */
