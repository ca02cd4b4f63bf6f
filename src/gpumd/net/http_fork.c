/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Large reads off the writers' path: GET /api/v1/reservations on a node of thousands of
 * reservations, and GET /api/v1/gpu/history, are answered by a child process forked for the
 * request (http_router.c says which routes, and from what size). fork() gives the child a
 * copy-on-write image of gpumd as it is between two requests, so the answer shows one state,
 * exactly as if the loop had rendered it there; the loop only forks (a fraction of a
 * millisecond) and then reads the child's bytes from a pipe as they come, serving the others
 * meanwhile. The answer is queued like any other (gpumd__http_queue_reply): it goes out after
 * the commit of the turn that reads its last byte, so it never shows a change before that
 * change is durable.
 *
 * The child runs only the route's handler and the reply code (gpumd's own memory, jansson,
 * malloc: nothing that another thread of gpumd may hold a lock of across the fork, such as the
 * ledger's SQLite connection or the log), closes every descriptor but stdio and its pipe, dies
 * with gpumd (PR_SET_PDEATHSIG), writes "STATUS CONTENT-TYPE\n" and the body to the
 * pipe and _exits. A child that fails, dies or takes longer than GPUMD_HTTP_FORK_TIMEOUT_S
 * (SIGALRM's default action ends it) is answered with a 500. At most GPUMD_HTTP_FORK_MAX
 * children run at once; past that, or when fork fails, the handler runs on the loop as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "gpumd.h"
#include "http_internal.h"
#include "obs_internal.h"

#define GPUMD_HTTP_FORK_MAX 4        /* children answering at once */
#define GPUMD_HTTP_FORK_TIMEOUT_S 30 /* a child still running then is ended */
#define GPUMD_HTTP_FORK_READ 1048576 /* bytes read from a child per loop turn, at most */
#define CHILD_FD 3                   /* the pipe's write end in the child (after stdio) */

struct gpumd_http_forked {
  struct gpumd_http_forked *next;
  struct gpumd_http *h;
  struct evhttp_request *req;
  pid_t pid;
  int fd; /* the pipe's read end */
  struct event *ev;
  struct evbuffer *buf; /* what the child wrote so far */
};

/* ---- the child ----------------------------------------------------------------------------- */

static int write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Runs in the child: answers the call as the loop would have, then writes the answer to fd.
 * Never returns. */
static void child_answer(struct gpumd_http *h, gpumd_http_call_t *call, gpumd_http_fn fn, int fd,
                         pid_t parent) {
  /* The child dies with gpumd, and keeps none of its descriptors but stdio and the pipe: a
   * listener, the ledger or a lock file (gpumd.lock is an flock, shared with every copy of its
   * descriptor) held by a child would keep a restarted gpumd out. */
  (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent)
    _exit(4);
  if (fd != CHILD_FD) {
    if (dup2(fd, CHILD_FD) != CHILD_FD)
      _exit(4);
    fd = CHILD_FD;
  }
  if (close_range(CHILD_FD + 1, ~0u, 0) != 0)
    for (int k = CHILD_FD + 1; k < 65536; k++)
      close(k);
  /* gpumd's handlers (libevent's signal pipe) are the parent's: the child ends on a signal. */
  static const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    signal(sigs[i], SIG_DFL);
  signal(SIGPIPE, SIG_IGN); /* the parent stopped reading: write fails, the child exits */
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL);
  alarm(GPUMD_HTTP_FORK_TIMEOUT_S);
  /* The loop comes first: on a CPU it shares with the child (gpumd pinned to one), it takes
   * the CPU back the moment it has work. A failure leaves the child at gpumd's priority. */
  struct sched_param sp = {.sched_priority = 0};
  (void)sched_setscheduler(0, SCHED_IDLE, &sp);
  h->npend = 0;
  call->forked = true;
  gpum_error_clear();
  gpumd__http_answer(h, call, fn(call));
  if (h->npend != 1)
    _exit(3); /* the handler did not answer: the parent answers 500 */
  struct evhttp_request *req = call->req;
  const char *ct = evhttp_find_header(evhttp_request_get_output_headers(req), "Content-Type");
  char head[160];
  int n = snprintf(head, sizeof head, "%d %s\n", h->pend[0].status, ct ? ct : "application/json");
  struct evbuffer *out = evhttp_request_get_output_buffer(req);
  if (n <= 0 || (size_t)n >= sizeof head || write_all(fd, head, (size_t)n) != 0)
    _exit(2);
  while (evbuffer_get_length(out) > 0) {
    int w = evbuffer_write(out, fd);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      _exit(2);
  }
  _exit(0); /* no atexit handlers: they are the parent's (the ledger, the state directory) */
}

/* ---- the parent ---------------------------------------------------------------------------- */

static void unlink_forked(struct gpumd_http *h, struct gpumd_http_forked *f) {
  for (struct gpumd_http_forked **p = &h->forked; *p; p = &(*p)->next)
    if (*p == f) {
      *p = f->next;
      h->nforked--;
      return;
    }
}

static void free_forked(struct gpumd_http_forked *f) {
  if (f->ev)
    event_free(f->ev);
  if (f->fd >= 0)
    close(f->fd);
  if (f->buf)
    evbuffer_free(f->buf);
  free(f);
}

/* The child is done (its pipe at EOF, eof) or failed: reaps it and answers the request. */
static void finish(struct gpumd_http_forked *f, bool eof) {
  struct gpumd_http *h = f->h;
  int st = 0;
  if (!eof)
    kill(f->pid, SIGKILL);
  while (waitpid(f->pid, &st, 0) < 0 && errno == EINTR) {
  }
  unlink_forked(h, f);
  gpumd_obs_changed(h->d->obs); /* /metrics counts it */
  char head[160] = "";
  int status = 0;
  size_t hlen = 0;
  struct evbuffer_ptr nl = evbuffer_search(f->buf, "\n", 1, NULL);
  if (nl.pos > 0 && (size_t)nl.pos < sizeof head) {
    hlen = (size_t)nl.pos + 1;
    evbuffer_copyout(f->buf, head, (size_t)nl.pos);
    head[nl.pos] = '\0';
    long v = strtol(head, NULL, 10);
    status = v >= 100 && v <= 599 ? (int)v : 0;
  }
  const char *ct = strchr(head, ' ');
  if (!eof || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || status < 100 || status > 599 || !ct) {
    gpum_log(GPUM_LOG_WARN, "gpumd", "the child answering an HTTP read failed (%s %d)",
             WIFSIGNALED(st) ? "signal" : "status",
             WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    gpumd__http_reply_error(h, f->req, 500, GPUM_EIO, "the answer could not be made");
    h->forks_failed++;
    free_forked(f);
    return;
  }
  evbuffer_drain(f->buf, hlen);
  struct evbuffer *out = evhttp_request_get_output_buffer(f->req);
  evbuffer_add_buffer(out, f->buf);
  struct evkeyvalq *hd = evhttp_request_get_output_headers(f->req);
  evhttp_add_header(hd, "Content-Type", ct + 1);
  evhttp_add_header(hd, "Cache-Control", "no-store");
  gpumd__http_queue_reply(h, f->req, status);
  h->forks_answered++;
  free_forked(f);
}

static void on_readable(evutil_socket_t fd, short what, void *arg) {
  (void)fd, (void)what;
  struct gpumd_http_forked *f = arg;
  size_t got = 0;
  while (got < GPUMD_HTTP_FORK_READ) {
    int r = evbuffer_read(f->buf, f->fd, 65536);
    if (r > 0) {
      got += (size_t)r;
      continue;
    }
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return; /* more to come */
    finish(f, r == 0);
    return;
  }
}

bool gpumd__http_fork(struct gpumd_http *h, gpumd_http_call_t *call, gpumd_http_fn fn) {
  if (h->nforked >= GPUMD_HTTP_FORK_MAX || evhttp_request_get_command(call->req) != EVHTTP_REQ_GET)
    return false;
  struct gpumd_http_forked *f = calloc(1, sizeof *f);
  int p[2] = {-1, -1};
  if (!f || pipe2(p, O_CLOEXEC) != 0) {
    free(f);
    return false;
  }
  f->h = h;
  f->req = call->req;
  f->fd = p[0];
  f->buf = evbuffer_new();
  f->ev = f->buf ? event_new(h->d->base, p[0], EV_READ | EV_PERSIST, on_readable, f) : NULL;
  if (!f->ev || fcntl(p[0], F_SETFL, O_NONBLOCK) != 0) {
    close(p[1]);
    free_forked(f);
    return false;
  }
  fflush(NULL); /* nothing buffered is written twice */
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    child_answer(h, call, fn, p[1], parent);
  }
  close(p[1]);
  if (pid < 0 || event_add(f->ev, NULL) != 0) {
    if (pid > 0) {
      kill(pid, SIGKILL);
      while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
      }
    }
    free_forked(f);
    return false; /* answered on the loop */
  }
  f->pid = pid;
  f->next = h->forked;
  h->forked = f;
  h->nforked++;
  call->status = -1; /* answered when the child is done */
  return true;
}

void gpumd__http_fork_stop(struct gpumd_http *h) {
  while (h->forked) {
    struct gpumd_http_forked *f = h->forked;
    kill(f->pid, SIGKILL);
    while (waitpid(f->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    unlink_forked(h, f);
    /* Sent now (not queued: nothing is flushed any more), which also frees a request whose
     * client went away; evhttp_free closes the others' connections next. */
    evhttp_send_reply(f->req, 503, gpumd__http_phrase(503), NULL);
    free_forked(f);
  }
}
