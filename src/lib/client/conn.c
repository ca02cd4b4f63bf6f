/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gpumd client connection: connecting with a clear message when the daemon is not there,
 * newline-delimited JSON framing with the 64 KiB message limit, request ids, and server events
 * (queued while a reply is awaited, then handed to the callback). Also gpum_client_wait, the
 * loop that waits for a queued reservation's grant.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <gpum/error.h>

#include "os_internal.h"
#include "client/client_internal.h"
#include "client/protocol_internal.h"

#define DEFAULT_TIMEOUT_MS 5000u

/* Milliseconds left until deadline (-1: none) for poll. */
static int left_ms(int64_t deadline) {
  if (deadline < 0)
    return -1;
  int64_t d = deadline - (int64_t)gpum__os_mono_ms();
  return d < 0 ? 0 : (d > 1000000 ? 1000000 : (int)d);
}

int gpum__client_from_fd(int fd, const char *path, unsigned timeout_ms, gpum_client_t **out) {
  gpum_client_t *c = calloc(1, sizeof *c);
  if (c == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory for the gpumd client");
  c->buf = malloc(GPUM_CLIENT_MAX_MESSAGE);
  c->pending = json_array();
  if (c->buf == NULL || c->pending == NULL) {
    free(c->buf);
    json_decref(c->pending);
    free(c);
    return gpum_error(GPUM_ENOMEM, "out of memory for the gpumd client");
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0)
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  c->fd = fd;
  c->timeout_ms = timeout_ms ? timeout_ms : DEFAULT_TIMEOUT_MS;
  c->next_id = 1;
  snprintf(c->path, sizeof c->path, "%s", path ? path : "");
  *out = c;
  return 0;
}

void gpum_client_close(gpum_client_t *c) {
  if (c == NULL)
    return;
  if (c->fd >= 0)
    close(c->fd);
  json_decref(c->pending);
  free(c->buf);
  free(c->raw);
  free(c->reply_raw);
  free(c);
}

void gpum_client_set_timeout(gpum_client_t *c, unsigned timeout_ms) {
  c->timeout_ms = timeout_ms ? timeout_ms : DEFAULT_TIMEOUT_MS;
}

void gpum_client_set_event_cb(gpum_client_t *c, gpum_client_event_fn fn, void *user) {
  c->cb = fn;
  c->user = user;
}

int gpum_client_fd(const gpum_client_t *c) {
  return c->fd;
}

const char *gpum_client_server_version(const gpum_client_t *c) {
  return c->version;
}

const char *gpum_client_socket(const gpum_client_t *c) {
  return c->path;
}

static int mark_closed(gpum_client_t *c, const char *why) {
  c->closed = true;
  return gpum_error(GPUM_ECLOSED, "gpumd at %s closed the connection%s%s", c->path, why ? ": " : "",
                    why ? why : "");
}

/* Writes the whole message (text + '\n'), waiting for the socket up to deadline. */
static int send_line(gpum_client_t *c, const char *text, int64_t deadline) {
  size_t n = strlen(text);
  if (n + 1 > GPUM_CLIENT_MAX_MESSAGE)
    return gpum_error(GPUM_ERANGE, "request of %zu bytes is over the %d-byte message limit", n + 1,
                      GPUM_CLIENT_MAX_MESSAGE);
  struct iovec iov[2] = {{(void *)text, n}, {(void *)"\n", 1}};
  size_t total = n + 1, done = 0;
  while (done < total) {
    struct msghdr mh = {0};
    struct iovec v[2];
    int nv = 0;
    size_t skip = done;
    for (int i = 0; i < 2; i++) {
      if (skip >= iov[i].iov_len) {
        skip -= iov[i].iov_len;
        continue;
      }
      v[nv].iov_base = (char *)iov[i].iov_base + skip;
      v[nv].iov_len = iov[i].iov_len - skip;
      skip = 0;
      nv++;
    }
    mh.msg_iov = v;
    mh.msg_iovlen = (size_t)nv;
    ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
    if (w > 0) {
      done += (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd p = {c->fd, POLLOUT, 0};
      int r = poll(&p, 1, left_ms(deadline));
      if (r == 0)
        return gpum_error(GPUM_ETIMEDOUT, "gpumd at %s does not read its socket", c->path);
      continue;
    }
    return mark_closed(c, strerror(errno));
  }
  return 0;
}

/* Takes one complete line out of the buffer, parsed, into *out (NULL when none is complete).
 * A line that is not a JSON object is a protocol error. */
static int take_line(gpum_client_t *c, json_t **out) {
  *out = NULL;
  char *nl = memchr(c->buf, '\n', c->len);
  if (nl == NULL) {
    if (c->len >= GPUM_CLIENT_MAX_MESSAGE) {
      /* No way to find the next message boundary we can trust: the connection is done. */
      c->closed = true;
      c->len = 0;
      return gpum_error(GPUM_EPROTO, "gpumd sent a message over the %d-byte limit",
                        GPUM_CLIENT_MAX_MESSAGE);
    }
    return 0;
  }
  size_t n = (size_t)(nl - c->buf);
  if (c->line_fn && c->line_fn(c->buf, n, c->line_id, c->line_user)) {
    c->line_fn = NULL; /* one reply */
    c->line_taken = true;
    memmove(c->buf, nl + 1, c->len - n - 1);
    c->len -= n + 1;
    return 0;
  }
  json_error_t jerr;
  json_t *msg = json_loadb(c->buf, n, JSON_REJECT_DUPLICATES, &jerr);
  if (c->keep_raw) {
    free(c->raw);
    c->raw = msg ? strndup(c->buf, n) : NULL;
  }
  memmove(c->buf, nl + 1, c->len - n - 1);
  c->len -= n + 1;
  if (msg == NULL || !json_is_object(msg)) {
    json_decref(msg);
    return gpum_error(GPUM_EPROTO, "gpumd sent a malformed message: %s",
                      msg ? "not an object" : jerr.text);
  }
  *out = msg;
  return 0;
}

/* Reads the next message, waiting up to deadline (-1: forever; now: no wait). */
static int read_msg(gpum_client_t *c, int64_t deadline, json_t **out) {
  for (;;) {
    int rc = take_line(c, out);
    if (rc != 0 || *out || c->line_taken)
      return rc;
    if (c->closed)
      return mark_closed(c, NULL);
    ssize_t r = read(c->fd, c->buf + c->len, GPUM_CLIENT_MAX_MESSAGE - c->len);
    if (r > 0) {
      c->len += (size_t)r;
      continue;
    }
    if (r == 0)
      return mark_closed(c, c->len ? "in the middle of a message" : NULL);
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return mark_closed(c, strerror(errno));
    struct pollfd p = {c->fd, POLLIN, 0};
    int w = poll(&p, 1, left_ms(deadline));
    if (w == 0)
      return gpum_error(GPUM_ETIMEDOUT, "no answer from gpumd at %s in time", c->path);
    if (w < 0 && errno != EINTR)
      return gpum_error(GPUM_EIO, "poll: %s", strerror(errno));
  }
}

static gpum_client_event_kind_t event_kind(const char *name) {
#define EVENT_KIND(n)                               \
  if (name && strcmp(name, GPUM_PROTO_EV_##n) == 0) \
    return GPUM_CLIENT_EV_##n;
  GPUM_PROTO_EVENTS(EVENT_KIND)
#undef EVENT_KIND
  return GPUM_CLIENT_EV_OTHER;
}

/* A node event (watch op): {"type", "seq", "data"}; the reservation of a "reservation" event
 * and the device of the others ("gpu", an alert's "device") are read from its data. */
static void dispatch_node(gpum_client_t *c, const json_t *msg, gpum_client_event_t *ev,
                          gpum_reservation_t *res) {
  ev->type_name = json_string_value(json_object_get(msg, GPUM_PROTO_F_TYPE));
  ev->type = (gpum_watch_type_t)gpum__proto_node_type(ev->type_name);
  const json_t *seq = json_object_get(msg, GPUM_PROTO_F_SEQ);
  ev->seq =
      json_is_integer(seq) && json_integer_value(seq) > 0 ? (uint64_t)json_integer_value(seq) : 0;
  const json_t *data = json_object_get(msg, GPUM_PROTO_F_DATA);
  char *text = data ? json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  ev->data = text ? text : "null";
  const json_t *r = json_object_get(data, GPUM_PROTO_F_RESERVATION);
  if (ev->type == GPUM_WATCH_RESERVATION && json_is_object(r)) {
    gpum__res_parse(r, res);
    ev->reservation = res;
  }
  const json_t *dev = json_object_get(data, "gpu");
  if (!json_is_integer(dev))
    dev = json_object_get(data, GPUM_PROTO_F_DEVICE);
  if (json_is_integer(dev) && json_integer_value(dev) >= 0 && json_integer_value(dev) <= INT_MAX)
    ev->device = (int)json_integer_value(dev);
  if (c->cb)
    c->cb(ev, c->user);
  free(text);
}

/* Hands one event to the watcher and the callback. */
static void dispatch(gpum_client_t *c, const json_t *msg) {
  const char *name = json_string_value(json_object_get(msg, GPUM_PROTO_F_EVENT));
  gpum_client_event_t ev = {.kind = event_kind(name), .name = name, .device = -1};
  gpum_reservation_t res;
  if (ev.kind == GPUM_CLIENT_EV_NODE) {
    dispatch_node(c, msg, &ev, &res);
    return;
  }
  const json_t *r = json_object_get(msg, GPUM_PROTO_F_RESERVATION);
  if (json_is_object(r)) {
    gpum__res_parse(r, &res);
    ev.reservation = &res;
    if (c->watch_id && !strcmp(res.id, c->watch_id)) {
      c->watch_res = res;
      if (res.state != GPUM_RES_QUEUED)
        c->watch_done = true;
    }
  }
  const json_t *dev = json_object_get(msg, GPUM_PROTO_F_DEVICE);
  if (json_is_integer(dev))
    ev.device = (int)json_integer_value(dev);
  ev.used_ratio = json_number_value(json_object_get(msg, GPUM_PROTO_F_USED_RATIO));
  ev.level = json_string_value(json_object_get(msg, GPUM_PROTO_F_LEVEL));
  if (c->cb)
    c->cb(&ev, c->user);
}

void gpum__client_dispatch_pending(gpum_client_t *c) {
  while (json_array_size(c->pending) > 0) {
    json_t *msg = json_incref(json_array_get(c->pending, 0));
    json_array_remove(c->pending, 0);
    dispatch(c, msg);
    json_decref(msg);
  }
}

/* An error reply's code and message as our error. */
static int reply_error(const json_t *reply) {
  const json_t *err = json_object_get(reply, GPUM_PROTO_F_ERROR);
  const char *code = json_string_value(json_object_get(err, GPUM_PROTO_F_CODE));
  const char *msg = json_string_value(json_object_get(err, GPUM_PROTO_F_MESSAGE));
  int e = gpum__proto_err_code(code);
  if (e == GPUM_EPROTO && code && strcmp(code, gpum_err_name(GPUM_EPROTO)) != 0)
    return gpum_error(e, "gpumd: %s (%s)", msg ? msg : "request failed", code);
  return gpum_error(e, "gpumd: %s", msg ? msg : gpum_strerror(e));
}

int gpum__client_call_nodispatch(gpum_client_t *c, json_t *req, json_t **reply) {
  if (c->closed)
    return mark_closed(c, NULL);
  int64_t id = c->next_id++;
  if (json_object_set_new(req, GPUM_PROTO_F_ID, json_integer(id)) != 0)
    return gpum_error(GPUM_ENOMEM, "out of memory building a request");
  char *text = json_dumps(req, JSON_COMPACT);
  if (text == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory encoding a request");
  int64_t deadline = (int64_t)gpum__os_mono_ms() + c->timeout_ms;
  int rc = send_line(c, text, deadline);
  free(text);
  json_t *msg = NULL;
  while (rc == 0) {
    rc = read_msg(c, deadline, &msg);
    if (rc != 0 || c->line_taken)
      break;
    if (json_object_get(msg, GPUM_PROTO_F_EVENT)) {
      json_array_append_new(c->pending, msg);
      continue;
    }
    const json_t *rid = json_object_get(msg, GPUM_PROTO_F_ID);
    if (json_is_integer(rid) && json_integer_value(rid) == id) {
      if (c->keep_raw) { /* the line just parsed is this reply's */
        free(c->reply_raw);
        c->reply_raw = c->raw;
        c->raw = NULL;
      }
      break;
    }
    json_decref(msg); /* a reply to an earlier, abandoned request */
  }
  /* Whole lines that came with the reply are taken now, so that nothing read waits in the
   * buffer while the caller polls the fd. */
  json_t *more = NULL;
  c->line_fn = NULL; /* the lines after the reply are events */
  while (rc == 0 && take_line(c, &more) == 0 && more) {
    if (json_object_get(more, GPUM_PROTO_F_EVENT))
      json_array_append_new(c->pending, more);
    else
      json_decref(more);
  }
  if (rc == 0 && !c->line_taken && !json_is_true(json_object_get(msg, GPUM_PROTO_F_OK))) {
    rc = reply_error(msg);
    json_decref(msg);
    msg = NULL;
  }
  if (rc == 0)
    *reply = msg;
  return rc;
}

int gpum__client_call(gpum_client_t *c, json_t *req, json_t **reply) {
  int rc = gpum__client_call_nodispatch(c, req, reply);
  gpum__client_dispatch_pending(c);
  return rc;
}

int gpum__client_call_line(gpum_client_t *c, json_t *req,
                           bool (*fn)(const char *line, size_t len, int64_t id, void *user),
                           void *user, json_t **reply) {
  *reply = NULL;
  c->line_fn = fn;
  c->line_user = user;
  c->line_id = c->next_id; /* the id gpum__client_call_nodispatch gives req */
  c->line_taken = false;
  json_t *msg = NULL;
  int rc = gpum__client_call_nodispatch(c, req, &msg);
  c->line_fn = NULL;
  c->line_taken = false;
  gpum__client_dispatch_pending(c);
  if (rc == 0)
    *reply = msg; /* NULL when fn took the reply */
  return rc;
}

int gpum__client_call_consume(gpum_client_t *c, json_t *req, json_t **reply) {
  if (req == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory building a request");
  int rc = gpum__client_call(c, req, reply);
  json_decref(req);
  return rc;
}

void gpum__client_latest(const gpum_client_t *c, gpum_reservation_t *res) {
  size_t i;
  const json_t *ev;
  for (i = 0; i < json_array_size(c->pending) && (ev = json_array_get(c->pending, i)); i++) {
    const json_t *r = json_object_get(ev, GPUM_PROTO_F_RESERVATION);
    const char *id = json_string_value(json_object_get(r, GPUM_PROTO_F_ID));
    if (id && !strcmp(id, res->id))
      gpum__res_parse(r, res);
  }
}

int gpum_client_process(gpum_client_t *c, int timeout_ms) {
  int n = (int)json_array_size(c->pending);
  gpum__client_dispatch_pending(c);
  int64_t deadline = timeout_ms < 0 ? -1 : (int64_t)gpum__os_mono_ms() + timeout_ms;
  for (;;) {
    json_t *msg = NULL;
    int rc = read_msg(c, n > 0 ? (int64_t)gpum__os_mono_ms() : deadline, &msg);
    if (rc == GPUM_ETIMEDOUT) {
      gpum_error_clear();
      return n;
    }
    if (rc != 0)
      return rc;
    if (json_object_get(msg, GPUM_PROTO_F_EVENT)) {
      dispatch(c, msg);
      n++;
    }
    json_decref(msg);
  }
}

int gpum_client_wait(gpum_client_t *c, const char *rid, int timeout_ms, gpum_reservation_t *out) {
  char id[sizeof c->watch_res.id];
  snprintf(id, sizeof id, "%s", rid);
  memset(&c->watch_res, 0, sizeof c->watch_res);
  memcpy(c->watch_res.id, id, sizeof id);
  c->watch_res.state = GPUM_RES_QUEUED;
  c->watch_res.queue_position = -1;
  c->watch_id = c->watch_res.id;
  c->watch_done = false;
  int64_t deadline = timeout_ms < 0 ? -1 : (int64_t)gpum__os_mono_ms() + timeout_ms;
  int rc = 0;
  /* At least one pass, so that a zero timeout still takes what has arrived. */
  for (;;) {
    rc = gpum_client_process(c, left_ms(deadline));
    if (rc < 0)
      break;
    rc = 0;
    if (c->watch_done)
      break;
    if (deadline >= 0 && left_ms(deadline) == 0) {
      rc = gpum_error(GPUM_ETIMEDOUT, "reservation %s still queued after %d ms", id, timeout_ms);
      break;
    }
  }
  c->watch_id = NULL;
  const gpum_reservation_t *res = &c->watch_res;
  if (rc == 0 && res->state != GPUM_RES_GRANTED)
    rc = gpum_error(GPUM_ESTATE, "reservation %s is %s%s%s", id, gpum_res_state_name(res->state),
                    res->reason[0] ? ": " : "", res->reason);
  if (out)
    *out = *res;
  return rc;
}

static int connect_error(const char *path, int err) {
  const char *hint = "is gpumd running? start it with 'gpumd' or 'systemctl start gpumd', or "
                     "set GPUM_SOCKET / --socket to its socket";
  if (err == EACCES || err == EPERM)
    return gpum_error(GPUM_EPERM,
                      "cannot connect to gpumd at %s: %s (is your user in the socket's group? "
                      "see the socket_group option)",
                      path, strerror(err));
  return gpum_error(err == ENOENT ? GPUM_ENOENT : GPUM_ECLOSED,
                    "cannot connect to gpumd at %s: %s (%s)", path, strerror(err), hint);
}

static int hello(gpum_client_t *c) {
  json_t *req = json_pack("{s:s, s:s, s:i}", GPUM_PROTO_F_OP, GPUM_PROTO_OP_HELLO,
                          GPUM_PROTO_F_CLIENT, "gpum", GPUM_PROTO_F_PROTOCOL, GPUM_CLIENT_PROTOCOL);
  if (req == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  json_t *reply = NULL;
  int rc = gpum__client_call(c, req, &reply);
  json_decref(req);
  if (rc != 0)
    return rc;
  const json_t *proto = json_object_get(reply, GPUM_PROTO_F_PROTOCOL);
  if (json_is_integer(proto) && json_integer_value(proto) != GPUM_CLIENT_PROTOCOL)
    rc = gpum_error(GPUM_EPROTO, "gpumd at %s speaks protocol %lld, this client %d", c->path,
                    (long long)json_integer_value(proto), GPUM_CLIENT_PROTOCOL);
  const char *v = json_string_value(json_object_get(reply, GPUM_PROTO_F_VERSION));
  snprintf(c->version, sizeof c->version, "%s", v ? v : "");
  json_decref(reply);
  return rc;
}

int gpum_client_connect(const char *path, unsigned timeout_ms, gpum_client_t **out) {
  char def[sizeof(((struct sockaddr_un *)0)->sun_path)];
  if (path == NULL) {
    int rc = gpum_socket_path(NULL, def, sizeof def);
    if (rc != 0)
      return rc;
    path = def;
  }
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof sa.sun_path)
    return gpum_error(GPUM_EINVAL, "socket path '%s' is %s", path,
                      n == 0 ? "empty" : "too long for a Unix socket (max 107 bytes)");
  memcpy(sa.sun_path, path, n + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return gpum_error(GPUM_EIO, "socket: %s", strerror(errno));
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int err = errno;
    close(fd);
    return connect_error(path, err);
  }
  gpum_client_t *c = NULL;
  int rc = gpum__client_from_fd(fd, path, timeout_ms, &c);
  if (rc != 0) {
    close(fd);
    return rc;
  }
  rc = hello(c);
  if (rc != 0) {
    gpum_client_close(c);
    return rc;
  }
  *out = c;
  return 0;
}
