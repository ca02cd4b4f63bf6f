/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's Unix-socket server: the lock files that keep a second daemon off the same socket
 * and state directory, the listening socket (mode and group from the config), accepting
 * clients with their SO_PEERCRED identity, line framing with the message-size limit, and the
 * end-of-turn step that commits the ledger before any staged reply or event is written. A
 * client whose unread output passes GPUMD_MAX_OUTPUT is disconnected so a reader that never
 * reads cannot grow the daemon without bound or stall the loop.
 *
 * A client's socket is read here, one read() per readable event into the daemon's read
 * buffer, its whole lines handled from there and a line begun kept with the connection (a
 * bufferevent's read side asks the kernel how much is there first, an ioctl per read); its
 * writing goes through a bufferevent.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <pwd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "accept_internal.h"
#include "gpumd.h"
#include "json_out.h"
#include "net.h"
#include "paths_internal.h"
#include "pidstart_internal.h"
#include "pidstart_internal.h"
#include "core/options_internal.h"
#include "os_internal.h"

/* Takes an exclusive lock on path (created 0644) and writes our pid into it. */
static int take_lock(const char *path, const char *what, int *out_fd) {
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return gpum_error(GPUM_EIO, "cannot open lock file %s: %s", path, strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    char pid[32] = "";
    ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
    pid[n > 0 ? n : 0] = '\0';
    pid[strcspn(pid, "\n")] = '\0';
    close(fd);
    if (e == EWOULDBLOCK)
      return gpum_error(GPUM_EBUSY, "another gpumd (pid %s) is using %s (lock %s)",
                        *pid ? pid : "?", what, path);
    return gpum_error(GPUM_EIO, "cannot lock %s: %s", path, strerror(e));
  }
  char buf[32];
  int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n)
    gpum_log(GPUM_LOG_WARN, "gpumd", "cannot write pid into %s: %s", path, strerror(errno));
  *out_fd = fd;
  return 0;
}

static int set_socket_access(gpumd_t *d) {
  const char *mode_s = gpum_config_get_string(d->cfg, "socket_mode");
  char *end = NULL;
  errno = 0;
  unsigned long mode = strtoul(mode_s ? mode_s : "", &end, 8);
  if (!mode_s || !*mode_s || errno || *end || mode > 07777)
    return gpum_error(GPUM_EINVAL, "socket_mode '%s' is not an octal mode such as 0660",
                      mode_s ? mode_s : "");
  const char *group = gpum_config_get_string(d->cfg, "socket_group");
  if (group && *group) {
    struct group gr, *res = NULL;
    char buf[4096];
    if (getgrnam_r(group, &gr, buf, sizeof buf, &res) == 0 && res) {
      if (chown(d->socket_path, (uid_t)-1, gr.gr_gid) != 0)
        gpum_log(GPUM_LOG_WARN, "gpumd", "cannot give %s to group %s: %s", d->socket_path, group,
                 strerror(errno));
    } else if (gpum_config_source(d->cfg, "socket_group") != GPUM_OPT_SRC_DEFAULT) {
      return gpum_error(GPUM_EINVAL, "socket_group '%s' does not exist", group);
    }
  }
  if (chmod(d->socket_path, (mode_t)mode) != 0)
    return gpum_error(GPUM_EIO, "cannot chmod %s: %s", d->socket_path, strerror(errno));
  return 0;
}

static bool in_group(uid_t uid, gid_t gid, gid_t want) {
  if (gid == want)
    return true;
  struct passwd pw, *res = NULL;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) != 0 || !res)
    return false;
  gid_t groups[256];
  int n = 256;
  if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) < 0)
    return false;
  for (int i = 0; i < n; i++)
    if (groups[i] == want)
      return true;
  return false;
}

bool gpumd_server_is_admin(const gpumd_t *d, uid_t uid, gid_t gid) {
  return uid == 0 || (d->admin_gid_set && in_group(uid, gid, d->admin_gid));
}

/* ---- connections ---------------------------------------------------------------------- */

static void conn_free(gpumd_conn_t *c) {
  gpumd_t *d = c->d;
  c->d->hooks.conn_closing(c);
  if (c->prev)
    c->prev->next = c->next;
  else
    d->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  d->conn_count--;
  if (c->rev)
    event_free(c->rev); /* before the bufferevent closes the descriptor */
  if (c->bev)
    bufferevent_free(c->bev);
  free(c->in);
  evbuffer_free(c->staged);
  evbuffer_free(c->held);
  free(c);
}

/* Whether c still has output to write after what its bufferevent holds. */
static bool conn_owes(const gpumd_conn_t *c) {
  return evbuffer_get_length(c->staged) > 0 || evbuffer_get_length(c->held) > 0;
}

/* Closes c now (its connection leases end); the memory goes at the end of the turn. */
static void conn_close(gpumd_conn_t *c, const char *why) {
  if (c->dead)
    return;
  gpum_log(GPUM_LOG_DEBUG, "gpumd", "client %llu (uid %lu pid %ld) closed: %s",
           (unsigned long long)c->id, (unsigned long)c->uid, (long)c->pid, why);
  c->dead = true;
  c->d->hooks.conn_closing(c);
  if (c->rev) {
    event_free(c->rev);
    c->rev = NULL;
  }
  if (c->bev && c->sending) { /* the writer may be writing to it: it closes at the release */
    bufferevent_setcb(c->bev, NULL, NULL, NULL, NULL);
    bufferevent_disable(c->bev, EV_READ | EV_WRITE);
  } else if (c->bev) {
    bufferevent_free(c->bev);
    c->bev = NULL;
  }
  c->d->hooks.conn_closed(c);
  if (!c->dirty) {
    c->dirty = true;
    c->dirty_next = c->d->dirty;
    c->d->dirty = c;
  }
}

int gpumd_conn_send_with(gpumd_conn_t *c, void (*fill)(gpumd_jw_t *w, void *arg), void *arg) {
  if (c->dead)
    return 0;
  /* Serialised straight into the staged buffer: no intermediate string. A failure (out of
   * memory) may leave a partial line, so the buffer is cut back to where it was. */
  size_t before = evbuffer_get_length(c->staged);
  gpumd_jw_t w;
  gpumd_jw_init(&w, c->staged);
  fill(&w, arg);
  gpumd_jw_raw(&w, "\n", 1);
  int rc = gpumd_jw_end(&w);
  if (rc != 0) {
    size_t now = evbuffer_get_length(c->staged);
    struct evbuffer *keep = evbuffer_new();
    if (keep) {
      evbuffer_remove_buffer(c->staged, keep, before);
      evbuffer_drain(c->staged, now - before);
      evbuffer_add_buffer(c->staged, keep);
      evbuffer_free(keep);
    }
  }
  if (!c->dirty) {
    c->dirty = true;
    c->dirty_next = c->d->dirty;
    c->d->dirty = c;
  }
  return rc;
}

static void fill_value(gpumd_jw_t *w, void *arg) {
  gpumd_jw_value(w, arg);
}

int gpumd_conn_send(gpumd_conn_t *c, json_t *msg) {
  if (!msg)
    return -1;
  int rc = gpumd_conn_send_with(c, fill_value, msg);
  json_decref(msg);
  return rc;
}

void gpumd_conn_close_after_flush(gpumd_conn_t *c) {
  c->closing = true;
  c->d->hooks.conn_closing(c); /* going away: no more of the node's events */
  if (c->rev)
    event_del(c->rev);
}

/* Handles the whole lines of buf[0, have) for c; returns how many bytes they took, or
 * SIZE_MAX when c was closed meanwhile (then nothing of it may be touched but its memory, kept
 * to the end of the turn). A line longer than GPUMD_MAX_MESSAGE, or as much without an end,
 * is answered with an error and the connection closed after it. */
static size_t take_lines(gpumd_conn_t *c, const char *buf, size_t have) {
  size_t off = 0;
  while (!c->dead && !c->closing) {
    const char *nl = memchr(buf + off, '\n', have - off);
    size_t len = nl ? (size_t)(nl - (buf + off)) : have - off;
    if (len > GPUMD_MAX_MESSAGE) {
      gpumd_reply_err(c, NULL, GPUM_EPROTO, "message longer than %u bytes: closing",
                      GPUMD_MAX_MESSAGE);
      gpumd_conn_close_after_flush(c);
      break;
    }
    if (!nl)
      break;
    c->d->hooks.line(c, buf + off, len);
    if (c->dead)
      return SIZE_MAX;
    off += len + 1;
  }
  return off;
}

/* Keeps rest bytes of a line begun (at most GPUMD_MAX_MESSAGE) with c. */
static bool keep_begun(gpumd_conn_t *c, const char *rest, size_t n) {
  if (n > c->in_cap) {
    size_t cap = 4096;
    while (cap < n)
      cap *= 2;
    if (cap > GPUMD_MAX_MESSAGE + 2)
      cap = GPUMD_MAX_MESSAGE + 2;
    char *p = malloc(cap);
    if (!p)
      return false;
    free(c->in);
    c->in = p;
    c->in_cap = cap;
  }
  memmove(c->in, rest, n);
  c->in_len = n;
  return true;
}

/* The client shut down its writing side (c is reading, so neither closed nor closing). */
static void on_eof(gpumd_conn_t *c) {
  if (conn_owes(c) || evbuffer_get_length(bufferevent_get_output(c->bev))) {
    /* It may still read: its leases end now (it is going away), the replies it is owed are
     * written, then the connection closes. */
    gpumd_conn_close_after_flush(c); /* first: no events about its own leases' end */
    c->d->hooks.conn_closed(c);
    return;
  }
  conn_close(c, "end of file");
}

/* c's socket is readable: one read, onto the line it has begun when it has one (that buffer
 * grown as the line needs), else into the daemon's read buffer, of which a line left begun is
 * kept with c. */
static void on_readable(evutil_socket_t fd, short what, void *arg) {
  (void)what;
  gpumd_conn_t *c = arg;
  gpumd_t *d = c->d;
  char *buf = d->rbuf;
  size_t have = 0, cap = GPUMD_MAX_MESSAGE + 2;
  if (c->in_len > 0) {
    if (c->in_len == c->in_cap) {
      size_t ncap = c->in_cap * 2 > cap ? cap : c->in_cap * 2;
      char *p = realloc(c->in, ncap);
      if (!p) {
        conn_close(c, "out of memory");
        return;
      }
      c->in = p;
      c->in_cap = ncap;
    }
    buf = c->in;
    have = c->in_len;
    cap = c->in_cap;
  }
  ssize_t n = read(fd, buf + have, cap - have);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return;
  if (n < 0) {
    conn_close(c, "socket error");
    return;
  }
  if (n == 0) {
    on_eof(c);
    return;
  }
  have += (size_t)n;
  size_t took = take_lines(c, buf, have);
  if (took == SIZE_MAX)
    return; /* closed: its memory goes at the end of the turn */
  if (c->closing) {
    c->in_len = 0; /* reads no more: what is left is never handled */
    return;
  }
  if (buf == c->in) {
    memmove(c->in, c->in + took, have - took);
    c->in_len = have - took;
  } else if (took < have && !keep_begun(c, buf + took, have - took)) {
    conn_close(c, "out of memory");
    return;
  }
  if (c->in_len == 0 && c->in_cap > 4096) { /* a long line's buffer goes with it */
    free(c->in);
    c->in = NULL;
    c->in_cap = 0;
  }
}

static void on_write(struct bufferevent *bev, void *arg) {
  gpumd_conn_t *c = arg;
  if (c->closing && evbuffer_get_length(bufferevent_get_output(bev)) == 0 && !conn_owes(c))
    conn_close(c, "closed by the server after an error");
}

/* The writing side's errors (the bufferevent reads nothing). */
static void on_event(struct bufferevent *bev, short what, void *arg) {
  (void)bev;
  gpumd_conn_t *c = arg;
  conn_close(c, (what & BEV_EVENT_EOF) ? "end of file" : "socket error");
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
                      void *arg) {
  (void)l, (void)sa, (void)salen;
  gpumd_t *d = arg;
  gpumd_accept_guard_ok(&d->accept_guard);
  struct ucred cred;
  socklen_t clen = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0) {
    gpum_log(GPUM_LOG_WARN, "gpumd", "SO_PEERCRED failed: %s; client refused", strerror(errno));
    close(fd);
    return;
  }
  gpumd_conn_t *c = calloc(1, sizeof *c);
  struct bufferevent *bev = NULL;
  if (c) {
    c->staged = evbuffer_new();
    c->held = evbuffer_new();
    c->rev = event_new(d->base, fd, EV_READ | EV_PERSIST, on_readable, c);
  }
  if (c && c->staged && c->held && c->rev)
    bev = bufferevent_socket_new(d->base, fd, BEV_OPT_CLOSE_ON_FREE);
  if (!bev) {
    gpum_log(GPUM_LOG_ERROR, "gpumd", "out of memory accepting a client");
    if (c && c->rev)
      event_free(c->rev);
    if (c && c->staged)
      evbuffer_free(c->staged);
    if (c && c->held)
      evbuffer_free(c->held);
    free(c);
    close(fd);
    return;
  }
  c->d = d;
  c->bev = bev;
  c->id = ++d->next_conn_id;
  c->uid = cred.uid;
  c->gid = cred.gid;
  c->pid = cred.pid;
  /* Read once: the process that connected, even if its pid is reused while it stays open. */
  c->pid_start = gpumd_pid_start_or_zero(cred.pid);
  c->admin = gpumd_server_is_admin(d, cred.uid, cred.gid);
  c->next = d->conns;
  if (d->conns)
    d->conns->prev = c;
  d->conns = c;
  d->conn_count++;
  bufferevent_setcb(bev, NULL, on_write, on_event, c);
  bufferevent_disable(bev, EV_READ); /* read by on_readable */
  bufferevent_enable(bev, EV_WRITE);
  event_add(c->rev, NULL);
  gpum_log(GPUM_LOG_DEBUG, "gpumd", "client %llu connected: uid %lu pid %ld%s",
           (unsigned long long)c->id, (unsigned long)c->uid, (long)c->pid,
           c->admin ? " (admin)" : "");
}

/* Raises the soft limit of open files to the hard one: every client is a descriptor. */
static void raise_nofile(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

/* The state directory holds the ledger (with every reservation's token) and the API token:
 * created 0700, and an existing one that others may read or enter is reported, not changed
 * (an operator may have reasons; docs/operations.md says to keep it 0700). */
static int state_dir_make(const char *dir) {
  int rc = gpumd_mkdirs(dir, 0700);
  if (rc != 0)
    return rc;
  struct stat st;
  if (stat(dir, &st) == 0 && (st.st_mode & 077) != 0)
    gpum_log(GPUM_LOG_WARN, "gpumd",
             "state directory %s is mode %04o: it holds the ledger and the API token, which "
             "other users can then reach; chmod 700 it",
             dir, (unsigned)(st.st_mode & 07777));
  return 0;
}

int gpumd_server_start(gpumd_t *d) {
  char lock[PATH_MAX + 16];
  int rc = state_dir_make(d->state_dir);
  if (rc != 0)
    return rc;
  snprintf(lock, sizeof lock, "%s/gpumd.lock", d->state_dir);
  rc = take_lock(lock, d->state_dir, &d->state_lock_fd);
  if (rc != 0)
    return rc;
  char dir[sizeof d->socket_path];
  memcpy(dir, d->socket_path, sizeof dir);
  char *slash = strrchr(dir, '/');
  if (slash && slash != dir) {
    *slash = '\0';
    rc = gpumd_mkdirs(dir, 0755);
    if (rc != 0)
      return rc;
  }
  snprintf(lock, sizeof lock, "%s.lock", d->socket_path);
  rc = take_lock(lock, d->socket_path, &d->socket_lock_fd);
  if (rc != 0)
    return rc;
  /* We hold the socket's lock: a socket file left there is a stale one from a crash. */
  if (unlink(d->socket_path) != 0 && errno != ENOENT)
    return gpum_error(GPUM_EIO, "cannot remove stale socket %s: %s", d->socket_path,
                      strerror(errno));
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  memcpy(sun.sun_path, d->socket_path, strlen(d->socket_path) + 1);
  mode_t old = umask(0177);
  d->listener =
      evconnlistener_new_bind(d->base, on_accept, d, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
                              128, (struct sockaddr *)&sun, (int)sizeof sun);
  umask(old);
  if (!d->listener)
    return gpum_error(GPUM_EIO, "cannot listen on %s: %s", d->socket_path, strerror(errno));
  d->socket_bound = true;
  d->rbuf = malloc(GPUMD_MAX_MESSAGE + 2);
  if (!d->rbuf)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  rc = gpumd_accept_guard_init(&d->accept_guard, d, d->listener, "socket");
  if (rc != 0)
    return rc;
  raise_nofile();
  return set_socket_access(d);
}

void gpumd_server_stop(gpumd_t *d) {
  if (d->listener) {
    evconnlistener_free(d->listener);
    d->listener = NULL;
  }
  gpumd_accept_guard_free(&d->accept_guard);
  if (d->socket_bound) {
    unlink(d->socket_path);
    d->socket_bound = false;
  }
  while (d->conns) {
    gpumd_conn_t *c = d->conns;
    if (c->rev) {
      event_free(c->rev);
      c->rev = NULL;
    }
    if (c->bev) { /* shutdown: leases stay in the ledger for the restart */
      bufferevent_free(c->bev);
      c->bev = NULL;
    }
    conn_free(c);
  }
  d->dirty = d->held = d->to_close = NULL;
  free(d->sendq.e);
  free(d->sendq.buf);
  d->sendq = (gpumd_sendq_t){0};
  free(d->rbuf);
  d->rbuf = NULL;
  if (d->socket_lock_fd >= 0) {
    /* The lock file stays: unlinking it could let two daemons lock two different files. */
    close(d->socket_lock_fd);
    d->socket_lock_fd = -1;
  }
  if (d->state_lock_fd >= 0) {
    close(d->state_lock_fd);
    d->state_lock_fd = -1;
  }
}

/* Closes c at the start of the next turn (gpumd_close_deferred, from the kick): what closing
 * changes (its leases end, events to others) is then committed and sent with that turn, never
 * with the output being written at the end of this one. Reads no more meanwhile. */
static void close_later(gpumd_conn_t *c, const char *why) {
  if (c->close_why)
    return;
  c->close_why = why;
  c->d->hooks.conn_closing(c);
  if (c->rev)
    event_del(c->rev);
  c->close_next = c->d->to_close;
  c->d->to_close = c;
  event_active(c->d->kick, 0, 0);
}

/* Writes buf (c's staged or held output) to c: at once in one call when nothing is queued
 * before, which spares arming the write event (epoll_ctl twice) and a second loop turn; what
 * the socket does not take goes to the bufferevent. On an error the bytes stay and the
 * bufferevent's own write reports it. */
static void conn_write(gpumd_conn_t *c, struct evbuffer *buf) {
  struct evbuffer *out = bufferevent_get_output(c->bev);
  if (evbuffer_get_length(out) == 0 && evbuffer_get_length(buf) > 0)
    evbuffer_write(buf, bufferevent_getfd(c->bev));
  evbuffer_add_buffer(out, buf);
  if (c->closing && evbuffer_get_length(out) == 0 && !conn_owes(c)) {
    /* All written here, so no write callback comes to close it. */
    close_later(c, "closed by the server after an error");
  } else if (evbuffer_get_length(out) > GPUMD_MAX_OUTPUT) {
    gpum_log(GPUM_LOG_WARN, "gpumd",
             "client %llu (uid %lu pid %ld) does not read its replies: disconnected",
             (unsigned long long)c->id, (unsigned long)c->uid, (long)c->pid);
    close_later(c, "output buffer full");
  }
}

void gpumd_conn_drop(gpumd_conn_t *c, const char *why) {
  if (c->dead || c->close_why)
    return;
  gpum_log(GPUM_LOG_WARN, "gpumd", "client %llu (uid %lu pid %ld) %s: disconnected",
           (unsigned long long)c->id, (unsigned long)c->uid, (long)c->pid, why);
  close_later(c, why);
}

void gpumd_close_deferred(gpumd_t *d) {
  gpumd_conn_t *c = d->to_close;
  d->to_close = NULL;
  while (c) {
    gpumd_conn_t *next = c->close_next;
    const char *why = c->close_why;
    c->close_next = NULL;
    c->close_why = NULL;
    if (!c->dead)
      conn_close(c, why); /* freed at the end of this turn */
    else if (!c->dirty && !c->in_held)
      conn_free(c); /* closed meanwhile, and no list has it any more */
    c = next;
  }
}

/* Takes each connection off the list at *head (linked through the field at offset next_at,
 * its flag cleared) and calls fn on it. */
static void drain_list(gpumd_t *d, gpumd_conn_t **head, size_t next_at, size_t flag_at,
                       void (*fn)(gpumd_t *d, gpumd_conn_t *c)) {
  gpumd_conn_t *c = *head;
  *head = NULL;
  while (c) {
    gpumd_conn_t **link = (gpumd_conn_t **)((char *)c + next_at);
    gpumd_conn_t *next = *link;
    *link = NULL;
    *(bool *)((char *)c + flag_at) = false;
    fn(d, c);
    c = next;
  }
}

#define DRAIN(d, list, next, flag, fn) \
  drain_list((d), &(d)->list, offsetof(gpumd_conn_t, next), offsetof(gpumd_conn_t, flag), (fn))

/* Puts a copy of c's held output in the writer's send queue (c's socket has nothing queued
 * before it). Without memory for it the loop writes it at the release, as without a writer. */
static void send_queue(gpumd_t *d, gpumd_conn_t *c) {
  gpumd_sendq_t *q = &d->sendq;
  size_t len = evbuffer_get_length(c->held);
  if (q->n == q->cap) {
    size_t cap = q->cap ? 2 * q->cap : 64;
    struct gpumd_send *e = realloc(q->e, cap * sizeof *e);
    if (!e)
      return;
    q->e = e;
    q->cap = cap;
  }
  if (q->used + len > q->buf_cap) {
    size_t cap = q->buf_cap ? q->buf_cap : 16384;
    while (cap < q->used + len)
      cap *= 2;
    char *b = realloc(q->buf, cap);
    if (!b)
      return;
    q->buf = b;
    q->buf_cap = cap;
  }
  if (evbuffer_copyout(c->held, q->buf + q->used, len) != (ev_ssize_t)len)
    return;
  q->e[q->n] = (struct gpumd_send){.fd = bufferevent_getfd(c->bev), .off = q->used, .len = len};
  q->used += len;
  c->send_slot = q->n++;
  c->sending = true;
}

/* Held until the writer has committed; closed connections too (release_held frees them).
 * What nothing is queued before on the socket goes in the writer's send queue too, when a
 * batch is about to be handed over (with_writer). */
static void seal_one(gpumd_t *d, gpumd_conn_t *c, bool with_writer) {
  if (!c->dead) {
    evbuffer_add_buffer(c->held, c->staged);
    if (with_writer && evbuffer_get_length(c->held) > 0 &&
        evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
      send_queue(d, c);
  }
  if (!c->in_held) {
    c->in_held = true;
    c->held_next = d->held;
    d->held = c;
  }
}

/* Written now that the writer has committed; a closed connection freed unless it has become
 * dirty since (the next release frees it then). */
static void release_one(gpumd_t *d, gpumd_conn_t *c) {
  if (c->sending) { /* what the writer wrote goes from the held output */
    c->sending = false;
    evbuffer_drain(c->held, d->sendq.e[c->send_slot].sent);
    if (c->dead && c->bev) { /* its close waited for the writer */
      bufferevent_free(c->bev);
      c->bev = NULL;
    }
  }
  if (!c->dead)
    conn_write(c, c->held);
  else if (!c->dirty && !c->close_why)
    conn_free(c);
}

void gpumd_conns_send_committed(void *arg) {
  gpumd_sendq_t *q = &((gpumd_t *)arg)->sendq;
  for (size_t i = 0; i < q->n; i++) {
    ssize_t n = send(q->e[i].fd, q->buf + q->e[i].off, q->e[i].len, MSG_DONTWAIT | MSG_NOSIGNAL);
    q->e[i].sent = n > 0 ? (size_t)n : 0;
  }
}

static void seal_for_writer(gpumd_t *d, gpumd_conn_t *c) {
  seal_one(d, c, true);
}

static void seal_alone(gpumd_t *d, gpumd_conn_t *c) {
  seal_one(d, c, false);
}

void gpumd_conns_seal(gpumd_t *d, bool with_writer) {
  DRAIN(d, dirty, dirty_next, dirty, with_writer ? seal_for_writer : seal_alone);
}

void gpumd_conns_release(gpumd_t *d) {
  DRAIN(d, held, held_next, in_held, release_one);
  d->sendq.n = d->sendq.used = 0;
}
