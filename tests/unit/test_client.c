/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the gpumd client library against a fake server: a thread on the other end of
 * a socketpair (or a listening Unix socket, for connect) that plays a script of expected
 * requests and canned replies/events. Covers path resolution, the connect error, request ids
 * and fields ("wait": false for no_wait), replies and errors (code mapping), events queued during a
 * call and dispatched after it, blocking reserve through queued -> granted, reserve timeout
 * (cancels), a queued reservation that ends otherwise, list and status parsing (the list's pages
 * read by the scanner and by jansson alike), the pollable
 * non-blocking form, watching the node's events (node events), and bad input from the server:
 * malformed JSON, an over-long line, a closed connection.
 */
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include <gpum/client.h>
#include <gpum/error.h>
#include <gpum/options.h>

#include "client/client_internal.h"
#include "client/protocol_internal.h"

/* One step of the fake server: wait for a request with op `expect` (NULL: none) and then send
 * `send` (NULL: nothing), each "$ID" replaced by the request's id. */
typedef struct {
  const char *expect;
  const char *send;
} step_t;

typedef struct {
  int fd;
  const step_t *steps;
  size_t nsteps;
  bool close_after; /* close as soon as the script is done (else wait for EOF) */
  json_t *requests; /* every request received */
  int gate[2];
  size_t gated; /* 1 + the step sent only after the test writes a byte to gate[1]; 0: none */
  char failure[256];
  pthread_t thread;
} server_t;

static ssize_t read_line(int fd, char *buf, size_t cap) {
  size_t n = 0;
  while (n + 1 < cap) {
    ssize_t r = read(fd, buf + n, 1);
    if (r <= 0)
      return -1;
    if (buf[n] == '\n')
      break;
    n++;
  }
  buf[n] = '\0';
  return (ssize_t)n;
}

static void write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w <= 0)
      return;
    s += w;
    n -= (size_t)w;
  }
}

/* Sends text with "$ID" replaced by id. */
static void send_text(int fd, const char *text, long long id) {
  char out[8192];
  size_t o = 0;
  for (const char *p = text; *p && o + 32 < sizeof out;) {
    if (!strncmp(p, "$ID", 3)) {
      o += (size_t)snprintf(out + o, sizeof out - o, "%lld", id);
      p += 3;
    } else {
      out[o++] = *p++;
    }
  }
  write_all(fd, out, o);
}

static void *server_main(void *arg) {
  server_t *s = arg;
  static char line[128 * 1024];
  long long id = 0;
  for (size_t i = 0; i < s->nsteps; i++) {
    if (s->steps[i].expect) {
      if (read_line(s->fd, line, sizeof line) < 0) {
        snprintf(s->failure, sizeof s->failure, "EOF before '%s'", s->steps[i].expect);
        break;
      }
      json_t *req = json_loads(line, 0, NULL);
      const char *op = json_string_value(json_object_get(req, "op"));
      id = json_integer_value(json_object_get(req, "id"));
      if (!op || strcmp(op, s->steps[i].expect) != 0)
        snprintf(s->failure, sizeof s->failure, "step %zu: got op '%s', expected '%s'", i,
                 op ? op : "(none)", s->steps[i].expect);
      json_array_append_new(s->requests, req ? req : json_null());
    }
    char go;
    if (s->gated == i + 1 && read(s->gate[0], &go, 1) != 1)
      snprintf(s->failure, sizeof s->failure, "step %zu: gate closed", i);
    if (s->steps[i].send)
      send_text(s->fd, s->steps[i].send, id);
  }
  if (!s->close_after)
    while (read_line(s->fd, line, sizeof line) >= 0)
      json_array_append_new(s->requests, json_loads(line, 0, NULL));
  shutdown(s->fd, SHUT_RDWR);
  return NULL;
}

/* Starts the script on one end of a socketpair; *c gets a client on the other end. */
static void start_ex(server_t *s, const step_t *steps, size_t n, bool close_after, size_t gated,
                     gpum_client_t **c) {
  memset(s, 0, sizeof *s);
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  s->fd = sv[0];
  s->steps = steps;
  s->nsteps = n;
  s->close_after = close_after;
  s->gated = gated;
  s->requests = json_array();
  assert_int_equal(pipe(s->gate), 0);
  assert_int_equal(gpum__client_from_fd(sv[1], "fake.sock", 2000, c), 0);
  assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
}

/* Closes the client, joins the server and checks it saw its script. */
static void finish(server_t *s, gpum_client_t *c) {
  gpum_client_close(c);
  close(s->gate[1]);
  pthread_join(s->thread, NULL);
  close(s->fd);
  close(s->gate[0]);
  if (s->failure[0])
    fail_msg("fake server: %s", s->failure);
}

#define START(s, steps, c) start_ex(s, steps, sizeof steps / sizeof steps[0], false, 0, c)

static const char R_GRANTED[] =
    "{\"id\":$ID,\"ok\":true,\"reservation\":{\"id\":\"r-1\",\"token\":\"00ff\",\"state\":"
    "\"GRANTED\",\"uid\":1000,\"pid\":42,\"label\":\"train\",\"bytes_per_gpu\":8589934592,"
    "\"gpus\":1,\"priority\":5,\"lease\":\"connection\",\"devices\":[{\"index\":1,\"uuid\":"
    "\"GPU-bbb\"}],\"created_ns\":10,\"granted_ns\":20}}\n";

/* --- paths -------------------------------------------------------------------------------- */

static void test_paths_defaults_and_env(void **state) {
  (void)state;
  char buf[256];
  setenv("GPUM_SOCKET", "/x/y.sock", 1);
  assert_int_equal(gpum_socket_path(NULL, buf, sizeof buf), 0);
  assert_string_equal(buf, "/x/y.sock");
  unsetenv("GPUM_SOCKET");
  setenv("XDG_RUNTIME_DIR", "/run/user/77", 1);
  assert_int_equal(gpum_socket_path(NULL, buf, sizeof buf), 0);
  if (geteuid() != 0) {
    assert_string_equal(buf, "/run/user/77/gpum/gpumd.sock");
    setenv("XDG_RUNTIME_DIR", "relative", 1); /* ignored: not absolute */
    assert_int_equal(gpum_default_socket_path(buf, sizeof buf), 0);
    char want[64];
    snprintf(want, sizeof want, "/tmp/gpum-%lu/gpumd.sock", (unsigned long)geteuid());
    assert_string_equal(buf, want);
    setenv("XDG_STATE_HOME", "/s", 1);
    assert_int_equal(gpum_default_state_dir(buf, sizeof buf), 0);
    assert_string_equal(buf, "/s/gpum");
    unsetenv("XDG_STATE_HOME");
    setenv("HOME", "/home/u", 1);
    assert_int_equal(gpum_state_dir(NULL, buf, sizeof buf), 0);
    assert_string_equal(buf, "/home/u/.local/state/gpum");
  } else {
    assert_string_equal(buf, "/run/gpum/gpumd.sock");
  }
  setenv("GPUM_STATE_DIR", "/st", 1);
  assert_int_equal(gpum_state_dir(NULL, buf, sizeof buf), 0);
  assert_string_equal(buf, "/st");
  unsetenv("GPUM_STATE_DIR");
  /* Too small a buffer: ENOSPC and an empty string, never a truncated path. */
  assert_int_equal(gpum_default_socket_path(buf, 5), GPUM_ENOSPC);
  assert_string_equal(buf, "");
}

static void test_paths_from_config(void **state) {
  (void)state;
  gpum_config_t *cfg = NULL;
  assert_int_equal(gpum_config_new(&cfg), 0);
  char buf[256];
  setenv("GPUM_SOCKET", "/env.sock", 1); /* with a cfg, only the option counts */
  assert_int_equal(gpum_config_set(cfg, "socket", "/cfg/d.sock", GPUM_OPT_SRC_FLAG), 0);
  assert_int_equal(gpum_socket_path(cfg, buf, sizeof buf), 0);
  assert_string_equal(buf, "/cfg/d.sock");
  assert_int_equal(gpum_config_set(cfg, "state_dir", "/cfg/state", GPUM_OPT_SRC_FLAG), 0);
  assert_int_equal(gpum_state_dir(cfg, buf, sizeof buf), 0);
  assert_string_equal(buf, "/cfg/state");
  unsetenv("GPUM_SOCKET");
  gpum_config_free(cfg);
}

/* --- connect ------------------------------------------------------------------------------ */

static void test_connect_no_daemon(void **state) {
  (void)state;
  char path[] = "/tmp/gpum-test-client-XXXXXX";
  assert_non_null(mkdtemp(path));
  char sock[128];
  snprintf(sock, sizeof sock, "%s/none.sock", path);
  gpum_client_t *c = NULL;
  assert_int_equal(gpum_client_connect(sock, 500, &c), GPUM_ENOENT);
  assert_null(c);
  assert_non_null(strstr(gpum_last_error(), sock));
  assert_non_null(strstr(gpum_last_error(), "is gpumd running?"));
  assert_int_equal(gpum_client_connect("", 500, &c), GPUM_EINVAL);
  char longp[200];
  memset(longp, 'a', sizeof longp - 1);
  longp[sizeof longp - 1] = '\0';
  assert_int_equal(gpum_client_connect(longp, 500, &c), GPUM_EINVAL);
  rmdir(path);
}

typedef struct {
  int lfd;
  server_t srv;
} listen_t;

static void *accept_main(void *arg) {
  listen_t *l = arg;
  l->srv.fd = accept(l->lfd, NULL, NULL);
  if (l->srv.fd >= 0)
    server_main(&l->srv);
  return NULL;
}

/* Serves one connection on a listening socket with the script `reply` to hello; returns
 * what gpum_client_connect returned (the client is closed again). */
static int connect_with_hello(const char *reply, json_t **hello, char *version, size_t vlen) {
  char dir[] = "/tmp/gpum-test-client-XXXXXX";
  assert_non_null(mkdtemp(dir));
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s/d.sock", dir);
  listen_t l;
  memset(&l, 0, sizeof l);
  l.lfd = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_int_equal(bind(l.lfd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(l.lfd, 4), 0);
  step_t steps[] = {{"hello", reply}};
  l.srv.steps = steps;
  l.srv.nsteps = 1;
  l.srv.requests = json_array();
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, accept_main, &l), 0);
  gpum_client_t *c = NULL;
  int rc = gpum_client_connect(sa.sun_path, 2000, &c);
  if (rc == 0) {
    snprintf(version, vlen, "%s", gpum_client_server_version(c));
    assert_string_equal(gpum_client_socket(c), sa.sun_path);
  } else {
    assert_null(c);
  }
  char detail[1024];
  snprintf(detail, sizeof detail, "%s", gpum_last_error());
  gpum_client_close(c);
  pthread_join(t, NULL);
  assert_string_equal(l.srv.failure, "");
  *hello = json_incref(json_array_get(l.srv.requests, 0));
  json_decref(l.srv.requests);
  close(l.srv.fd);
  close(l.lfd);
  unlink(sa.sun_path);
  rmdir(dir);
  gpum_error(rc, "%s", detail);
  return rc;
}

static void test_connect_hello(void **state) {
  (void)state;
  json_t *hello = NULL;
  char version[64] = "";
  assert_int_equal(connect_with_hello("{\"id\":$ID,\"ok\":true,\"server\":\"gpumd\",\"version\":"
                                      "\"9.8.7\",\"protocol\":1,\"uid\":1,\"pid\":2}\n",
                                      &hello, version, sizeof version),
                   0);
  assert_string_equal(version, "9.8.7");
  assert_string_equal(json_string_value(json_object_get(hello, "op")), "hello");
  assert_string_equal(json_string_value(json_object_get(hello, "client")), "gpum");
  assert_int_equal(json_integer_value(json_object_get(hello, "protocol")), 1);
  json_decref(hello);
}

/* A daemon speaking another protocol version, or refusing the hello, is an error. */
static void test_connect_hello_refused(void **state) {
  (void)state;
  json_t *hello = NULL;
  char version[64] = "";
  assert_int_equal(connect_with_hello("{\"id\":$ID,\"ok\":true,\"version\":\"2.0\","
                                      "\"protocol\":2}\n",
                                      &hello, version, sizeof version),
                   GPUM_EPROTO);
  assert_non_null(strstr(gpum_last_error(), "protocol 2"));
  json_decref(hello);
  assert_int_equal(connect_with_hello("{\"id\":$ID,\"ok\":false,\"error\":{\"code\":\"EPERM\","
                                      "\"message\":\"not in group gpum\"}}\n",
                                      &hello, version, sizeof version),
                   GPUM_EPERM);
  assert_non_null(strstr(gpum_last_error(), "not in group gpum"));
  json_decref(hello);
}

/* --- requests and replies ----------------------------------------------------------------- */

static void test_reserve_granted_fields(void **state) {
  (void)state;
  static const step_t steps[] = {{"reserve", R_GRANTED}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  const char *devs[] = {"0", "GPU-bbb"};
  gpum_reserve_req_t q = {.bytes_per_gpu = 8ull << 30,
                          .model = "H100*",
                          .priority = 5,
                          .label = "train",
                          .devices = devs,
                          .ndevices = 2,
                          .queue_timeout_ms = 1500,
                          .wait_on_timeout = true};
  gpum_reservation_t r;
  assert_int_equal(gpum_client_reserve(c, &q, 1000, &r), 0);
  assert_string_equal(r.id, "r-1");
  assert_int_equal(r.state, GPUM_RES_GRANTED);
  assert_string_equal(r.token, "00ff");
  assert_int_equal(r.bytes_per_gpu, 8ull << 30);
  assert_int_equal(r.ndevices, 1);
  assert_int_equal(r.devices[0].index, 1);
  assert_string_equal(r.devices[0].uuid, "GPU-bbb");
  assert_int_equal(r.priority, 5);
  assert_int_equal(r.pid, 42);
  assert_int_equal(r.queue_position, -1);
  assert_string_equal(r.slurm_job_id, ""); /* none in the reply */
  assert_string_equal(r.slurm_step_id, "");
  finish(&s, c);
  json_t *req = json_array_get(s.requests, 0);
  assert_true(json_is_integer(json_object_get(req, "id")));
  assert_null(json_object_get(req, "slurm"));
  assert_int_equal(json_integer_value(json_object_get(req, "bytes_per_gpu")), 8ll << 30);
  assert_int_equal(json_integer_value(json_object_get(req, "gpus")), 1);
  assert_string_equal(json_string_value(json_object_get(req, "model")), "H100*");
  assert_string_equal(json_string_value(json_object_get(req, "label")), "train");
  assert_string_equal(json_string_value(json_object_get(req, "lease")), "connection");
  assert_string_equal(json_string_value(json_object_get(req, "on_timeout")), "wait");
  assert_int_equal(json_integer_value(json_object_get(req, "timeout_ms")), 1500);
  assert_int_equal(json_array_size(json_object_get(req, "devices")), 2);
  assert_null(json_object_get(req, "wait")); /* queueing is the default */
  json_decref(s.requests);
}

/* A Slurm step's ids go out as the request's "slurm" object and come back in the reservation;
 * one without the other is refused before anything is sent. */
static void test_reserve_slurm_ids(void **state) {
  (void)state;
  static const step_t steps[] = {
      {"reserve", "{\"id\":$ID,\"ok\":true,\"reservation\":{\"id\":\"r-4\",\"state\":"
                  "\"GRANTED\",\"label\":\"slurm job 12345 step batch\",\"slurm\":{\"job_id\":"
                  "\"12345\",\"step_id\":\"batch\"},\"bytes_per_gpu\":1,\"gpus\":1}}\n"}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  gpum_reserve_req_t q = {.bytes_per_gpu = 1, .slurm_job_id = "12345", .slurm_step_id = "batch"};
  gpum_reservation_t r;
  assert_int_equal(gpum_client_reserve(c, &q, 1000, &r), 0);
  assert_string_equal(r.slurm_job_id, "12345");
  assert_string_equal(r.slurm_step_id, "batch");
  q.slurm_step_id = NULL;
  assert_int_equal(gpum_client_reserve(c, &q, 1000, &r), GPUM_EINVAL);
  assert_non_null(strstr(gpum_last_error(), "slurm_step_id"));
  finish(&s, c);
  assert_int_equal(json_array_size(s.requests), 1);
  json_t *sl = json_object_get(json_array_get(s.requests, 0), "slurm");
  assert_string_equal(json_string_value(json_object_get(sl, "job_id")), "12345");
  assert_string_equal(json_string_value(json_object_get(sl, "step_id")), "batch");
  assert_int_equal(json_object_size(sl), 2);
  json_decref(s.requests);
}

static void test_reserve_no_wait(void **state) {
  (void)state;
  static const step_t steps[] = {
      {"reserve", "{\"id\":$ID,\"ok\":false,\"error\":{\"code\":\"EBUSY\",\"message\":"
                  "\"not granted now and \\\"wait\\\" is false; it would wait for 8 GiB\"}}\n"}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  gpum_reserve_req_t q = {.bytes_per_gpu = 8ull << 30, .no_wait = true};
  gpum_reservation_t r;
  assert_int_equal(gpum_client_reserve(c, &q, 1000, &r), GPUM_EBUSY);
  assert_non_null(strstr(gpum_last_error(), "it would wait for 8 GiB"));
  finish(&s, c);
  json_t *req = json_array_get(s.requests, 0);
  assert_true(json_is_false(json_object_get(req, "wait")));
  json_decref(s.requests);
}

static void test_ids_increase(void **state) {
  (void)state;
  static const step_t steps[] = {
      {"release", "{\"id\":$ID,\"ok\":true,\"reservation\":{\"id\":\"r-1\",\"state\":"
                  "\"RELEASED\"}}\n"},
      {"renew", "{\"id\":$ID,\"ok\":true,\"reservation\":{\"id\":\"r-1\",\"state\":\"GRANTED\","
                "\"lease\":\"ttl\",\"ttl_ms\":3000}}\n"},
      {"attach", "{\"id\":$ID,\"ok\":true,\"reservation\":{\"id\":\"r-1\",\"state\":\"GRANTED\"}}"
                 "\n"}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  gpum_reservation_t r;
  assert_int_equal(gpum_client_release(c, "r-1", &r), 0);
  assert_int_equal(r.state, GPUM_RES_RELEASED);
  assert_int_equal(gpum_client_renew(c, "r-1", 3000, &r), 0);
  assert_int_equal(r.lease, GPUM_LEASE_TTL);
  assert_int_equal(r.ttl_ms, 3000);
  assert_int_equal(gpum_client_attach(c, "r-1", "abcd", NULL), 0);
  finish(&s, c);
  json_int_t prev = 0;
  for (size_t i = 0; i < 3; i++) {
    json_t *q = json_array_get(s.requests, i);
    json_int_t id = json_integer_value(json_object_get(q, "id"));
    assert_true(id > prev);
    prev = id;
    assert_string_equal(json_string_value(json_object_get(q, "reservation")), "r-1");
  }
  assert_int_equal(json_integer_value(json_object_get(json_array_get(s.requests, 1), "ttl_ms")),
                   3000);
  assert_null(json_object_get(json_array_get(s.requests, 0), "ttl_ms"));
  assert_string_equal(json_string_value(json_object_get(json_array_get(s.requests, 2), "token")),
                      "abcd");
  json_decref(s.requests);
}

static void test_error_reply(void **state) {
  (void)state;
  static const step_t steps[] = {
      {"reserve", "{\"id\":$ID,\"ok\":false,\"error\":{\"code\":\"EPERM\",\"message\":"
                  "\"r-9 belongs to uid 0\"}}\n"},
      {"release", "{\"id\":$ID,\"ok\":false,\"error\":{\"code\":\"EWHATEVER\",\"message\":"
                  "\"new\"}}\n"},
      {"release", "{\"id\":$ID,\"ok\":false,\"error\":{\"code\":\"ENEVERFIT\",\"message\":"
                  "\"needs 200 GiB\"}}\n"}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  gpum_reserve_req_t q = {.bytes_per_gpu = 1};
  assert_int_equal(gpum_client_reserve_async(c, &q, NULL), GPUM_EPERM);
  assert_string_equal(gpum_last_error(), "gpumd: r-9 belongs to uid 0");
  assert_int_equal(gpum_client_release(c, "r-9", NULL), GPUM_EPROTO);
  assert_non_null(strstr(gpum_last_error(), "EWHATEVER"));
  assert_int_equal(gpum_client_release(c, "r-9", NULL), GPUM_ENEVERFIT);
  finish(&s, c);
  json_decref(s.requests);
}

static void test_bad_requests_not_sent(void **state) {
  (void)state;
  static const step_t steps[] = {{NULL, NULL}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  gpum_reserve_req_t q = {0};
  assert_int_equal(gpum_client_reserve_async(c, &q, NULL), GPUM_EINVAL);
  static char label[70 * 1024];
  memset(label, 'x', sizeof label - 1);
  q.bytes_per_gpu = 1;
  q.label = label;
  assert_int_equal(gpum_client_reserve_async(c, &q, NULL), GPUM_ERANGE);
  q.label = NULL;
  q.lease = (gpum_lease_t)7;
  assert_int_equal(gpum_client_reserve_async(c, &q, NULL), GPUM_EINVAL);
  char *reply = NULL;
  assert_int_equal(gpum_client_call_json(c, "list", "[1]", &reply), GPUM_EINVAL);
  assert_int_equal(gpum_client_call_json(c, "list", "{", &reply), GPUM_EINVAL);
  finish(&s, c);
  assert_int_equal(json_array_size(s.requests), 0);
  json_decref(s.requests);
}

/* --- events ------------------------------------------------------------------------------- */

typedef struct {
  int n;
  gpum_client_event_kind_t kinds[8];
  long positions[8];
  char ids[8][64];
  double ratio;
  int device;
} seen_t;

static void on_event(const gpum_client_event_t *ev, void *user) {
  seen_t *s = user;
  if (s->n >= 8)
    return;
  s->kinds[s->n] = ev->kind;
  if (ev->reservation) {
    s->positions[s->n] = ev->reservation->queue_position;
    snprintf(s->ids[s->n], sizeof s->ids[0], "%s", ev->reservation->id);
  }
  if (ev->kind == GPUM_CLIENT_EV_PRESSURE) {
    s->ratio = ev->used_ratio;
    s->device = ev->device;
  }
  s->n++;
}

#define QUEUED_REPLY                                                              \
  "{\"id\":$ID,\"ok\":true,\"reservation\":{\"id\":\"r-2\",\"state\":\"QUEUED\"," \
  "\"queue_position\":2,\"waiting_for\":\"r-1 on GPU 0\"}}\n"
#define QUEUED_EV(pos)                                                          \
  "{\"event\":\"queued\",\"reservation\":{\"id\":\"r-2\",\"state\":\"QUEUED\"," \
  "\"queue_position\":" #pos "}}\n"
#define GRANTED_EV                                                                \
  "{\"event\":\"granted\",\"reservation\":{\"id\":\"r-2\",\"state\":\"GRANTED\"," \
  "\"devices\":[{\"index\":0,\"uuid\":\"GPU-aaa\"}]}}\n"

static void test_reserve_waits_for_grant(void **state) {
  (void)state;
  static const step_t steps[] = {{"reserve", QUEUED_REPLY},
                                 {NULL, QUEUED_EV(1)},
                                 {NULL, "{\"event\":\"pressure\",\"device\":1,\"used_ratio\":0.93,"
                                        "\"level\":\"high\"}\n"},
                                 {NULL, GRANTED_EV}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  seen_t seen = {0};
  gpum_client_set_event_cb(c, on_event, &seen);
  gpum_reservation_t r;
  gpum_reserve_req_t q = {.bytes_per_gpu = 1 << 20};
  assert_int_equal(gpum_client_reserve(c, &q, 2000, &r), 0);
  assert_int_equal(r.state, GPUM_RES_GRANTED);
  assert_string_equal(r.devices[0].uuid, "GPU-aaa");
  assert_int_equal(seen.n, 3);
  assert_int_equal(seen.kinds[0], GPUM_CLIENT_EV_QUEUED);
  assert_int_equal(seen.positions[0], 1);
  assert_int_equal(seen.kinds[1], GPUM_CLIENT_EV_PRESSURE);
  assert_int_equal(seen.device, 1);
  assert_true(seen.ratio > 0.92 && seen.ratio < 0.94);
  assert_int_equal(seen.kinds[2], GPUM_CLIENT_EV_GRANTED);
  finish(&s, c);
  json_decref(s.requests);
}

/* An event that arrives before the reply is held and dispatched after it, before the call
 * returns. */
static void test_event_before_reply(void **state) {
  (void)state;
  static const step_t steps[] = {
      {"list", "{\"event\":\"released\",\"reservation\":{\"id\":\"r-7\",\"state\":"
               "\"RELEASED\"}}\n{\"id\":$ID,\"ok\":true,\"reservations\":[{\"id\":\"r-8\","
               "\"state\":\"QUEUED\",\"queue_position\":3},{\"id\":\"r-9\",\"state\":"
               "\"NEWSTATE\"}]}\n"}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  seen_t seen = {0};
  gpum_client_set_event_cb(c, on_event, &seen);
  gpum_reservation_t *list = NULL;
  size_t n = 0;
  assert_int_equal(gpum_client_list(c, true, &list, &n), 0);
  assert_int_equal(n, 2);
  assert_string_equal(list[0].id, "r-8");
  assert_int_equal(list[0].queue_position, 3);
  assert_int_equal(list[1].state, GPUM_RES_UNKNOWN);
  assert_string_equal(gpum_res_state_name(list[1].state), "UNKNOWN");
  free(list);
  assert_int_equal(seen.n, 1);
  assert_int_equal(seen.kinds[0], GPUM_CLIENT_EV_RELEASED);
  assert_string_equal(seen.ids[0], "r-7");
  finish(&s, c);
  assert_true(json_is_true(json_object_get(json_array_get(s.requests, 0), "all")));
  json_decref(s.requests);
}

/* gpum_client_list asks for every page, each with the cursor the one before gave. */
static void test_list_follows_cursors(void **state) {
  (void)state;
  static const step_t steps[] = {
      {"list", "{\"id\":$ID,\"ok\":true,\"reservations\":[{\"id\":\"r-1\"},{\"id\":\"r-2\"}],"
               "\"next_cursor\":\"c1.2\",\"total\":4}\n"},
      {"list", "{\"id\":$ID,\"ok\":true,\"reservations\":[{\"id\":\"r-5\"}],"
               "\"next_cursor\":\"c1.5\",\"total\":4}\n"},
      {"list", "{\"id\":$ID,\"ok\":true,\"reservations\":[{\"id\":\"r-9\"}],"
               "\"next_cursor\":null,\"total\":4}\n"}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  gpum_reservation_t *list = NULL;
  size_t n = 0;
  assert_int_equal(gpum_client_list(c, true, &list, &n), 0);
  assert_int_equal(n, 4);
  assert_string_equal(list[0].id, "r-1");
  assert_string_equal(list[2].id, "r-5");
  assert_string_equal(list[3].id, "r-9");
  free(list);
  finish(&s, c);
  assert_null(json_object_get(json_array_get(s.requests, 0), "cursor"));
  assert_string_equal(json_string_value(json_object_get(json_array_get(s.requests, 1), "cursor")),
                      "c1.2");
  assert_string_equal(json_string_value(json_object_get(json_array_get(s.requests, 2), "cursor")),
                      "c1.5");
  assert_true(json_is_true(json_object_get(json_array_get(s.requests, 2), "all")));
  json_decref(s.requests);
}

/* One page: the query's fields as sent, the cursor and total back; a cursor that does not fit,
 * one that is not a string, and states that no live reservation has. */
static void test_list_page(void **state) {
  (void)state;
  static const step_t steps[] = {
      {"list", "{\"id\":$ID,\"ok\":true,\"reservations\":[{\"id\":\"r-3\"}],"
               "\"next_cursor\":\"c1.3\",\"total\":12}\n"},
      {"list", "{\"id\":$ID,\"ok\":true,\"reservations\":[],\"next_cursor\":\"c1.3\"}\n"},
      {"list", "{\"id\":$ID,\"ok\":true,\"reservations\":[],\"next_cursor\":7}\n"},
      {"list", "{\"id\":$ID,\"ok\":true,\"reservations\":[],\"next_cursor\":null,\"total\":0}\n"}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  gpum_reservation_t *page = NULL;
  size_t n = 0, total = 0;
  char cur[GPUM_LIST_CURSOR_MAX] = "";
  gpum_list_query_t q = {.states = 1u << GPUM_RES_QUEUED,
                         .by_uid = true,
                         .uid = 1000,
                         .label = "train-*",
                         .limit = 50,
                         .cursor = "c1.1"};
  assert_int_equal(gpum_client_list_page(c, &q, &page, &n, cur, sizeof cur, &total), 0);
  assert_int_equal(n, 1);
  assert_int_equal(total, 12);
  assert_string_equal(page[0].id, "r-3");
  assert_string_equal(cur, "c1.3");
  free(page);
  char tiny[3];
  assert_int_equal(gpum_client_list_page(c, NULL, &page, &n, tiny, sizeof tiny, NULL), GPUM_ERANGE);
  assert_null(page);
  assert_int_equal(gpum_client_list_page(c, NULL, &page, &n, cur, sizeof cur, NULL), GPUM_EPROTO);
  assert_int_equal(gpum_client_list_page(c, NULL, &page, &n, cur, sizeof cur, &total), 0);
  assert_int_equal(n, 0);
  assert_non_null(page); /* never NULL on success */
  assert_string_equal(cur, "");
  free(page);
  q.states = 1u << GPUM_RES_RELEASED;
  assert_int_equal(gpum_client_list_page(c, &q, &page, &n, cur, sizeof cur, NULL), GPUM_EINVAL);
  finish(&s, c);
  json_t *r0 = json_array_get(s.requests, 0);
  assert_string_equal(json_string_value(json_array_get(json_object_get(r0, "state"), 0)), "QUEUED");
  assert_int_equal(json_integer_value(json_object_get(r0, "uid")), 1000);
  assert_string_equal(json_string_value(json_object_get(r0, "label")), "train-*");
  assert_int_equal(json_integer_value(json_object_get(r0, "limit")), 50);
  assert_string_equal(json_string_value(json_object_get(r0, "cursor")), "c1.1");
  assert_int_equal(json_array_size(s.requests), 4);
  json_decref(s.requests);
}

/* What a gpum_client_list_each callback saw: each reservation's part, struct and document. */
typedef struct {
  size_t n;
  gpum_list_part_t parts[8];
  gpum_reservation_t res[8];
  char docs[8][1024];
  int stop_at; /* return 42 at this call (1-based); 0 never */
} walk_t;

static int on_item(void *user, gpum_list_part_t part, const gpum_reservation_t *r, const char *doc,
                   size_t len) {
  walk_t *w = user;
  if (w->n == 8 || len >= sizeof w->docs[0])
    return -1;
  w->parts[w->n] = part;
  w->res[w->n] = *r;
  memcpy(w->docs[w->n], doc, len);
  w->docs[w->n][len] = '\0';
  return ++w->n == (size_t)w->stop_at ? 42 : 0;
}

/* gpum_client_list_each walks the pages: each reservation with its document as gpumd sent it
 * (the scanner's page, its fields in gpumd's order: id and ok last), the first page's "ended"
 * after its live ones, then a page the scanner gives up (an escape) read by jansson (its
 * documents written out again); "ended" asked for on the first page only. */
static void test_list_each(void **state) {
  (void)state;
  static const step_t steps[] = {
      {"list", "{\"reservations\":[{\"id\":\"r-1\",\"state\":\"GRANTED\",\"uid\":7,\"devices\":"
               "[{\"index\":3,\"uuid\":\"GPU-a\"}]},{\"id\":\"r-2\",\"state\":\"QUEUED\","
               "\"queue_position\":0}],\"ended\":[{\"id\":\"r-0\",\"state\":\"FAILED\","
               "\"reason\":\"gone\"}],\"next_cursor\":\"c1.2\",\"total\":3,\"id\":$ID,"
               "\"ok\":true}\n"},
      {"list", "{\"id\":$ID,\"ok\":true,\"reservations\":[{\"id\":\"r-3\",\"label\":"
               "\"caf\\u00e9\",\"pid\":12}],\"next_cursor\":null,\"total\":3}\n"}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  walk_t w = {0};
  size_t total = 0;
  gpum_list_query_t q = {.all = true};
  assert_int_equal(gpum_client_list_each(c, &q, true, on_item, &w, &total), 0);
  assert_int_equal(w.n, 4);
  assert_int_equal(total, 3);
  assert_int_equal(w.parts[0], GPUM_LIST_LIVE);
  assert_string_equal(w.docs[0], "{\"id\":\"r-1\",\"state\":\"GRANTED\",\"uid\":7,\"devices\":"
                                 "[{\"index\":3,\"uuid\":\"GPU-a\"}]}");
  assert_int_equal(w.res[0].uid, 7);
  assert_int_equal(w.res[0].ndevices, 1);
  assert_int_equal(w.res[0].devices[0].index, 3);
  assert_int_equal(w.res[0].queue_position, -1);
  assert_string_equal(w.res[1].id, "r-2");
  assert_int_equal(w.res[1].queue_position, 0);
  assert_int_equal(w.parts[2], GPUM_LIST_ENDED);
  assert_int_equal(w.res[2].state, GPUM_RES_FAILED);
  assert_string_equal(w.res[2].reason, "gone");
  assert_int_equal(w.parts[3], GPUM_LIST_LIVE);
  assert_string_equal(w.res[3].label, "caf\xc3\xa9");
  assert_int_equal(w.res[3].pid, 12);
  assert_string_equal(w.docs[3], "{\"id\":\"r-3\",\"label\":\"caf\xc3\xa9\",\"pid\":12}");
  finish(&s, c);
  json_t *r0 = json_array_get(s.requests, 0), *r1 = json_array_get(s.requests, 1);
  assert_true(json_is_true(json_object_get(r0, "ended")));
  assert_null(json_object_get(r0, "cursor"));
  assert_null(json_object_get(r1, "ended"));
  assert_string_equal(json_string_value(json_object_get(r1, "cursor")), "c1.2");
  json_decref(s.requests);
}

/* A callback's non-zero return stops the walk and is what the call returns. */
static void test_list_each_stops(void **state) {
  (void)state;
  static const step_t steps[] = {
      {"list", "{\"id\":$ID,\"ok\":true,\"reservations\":[{\"id\":\"r-1\"},{\"id\":\"r-2\"}],"
               "\"next_cursor\":\"c1.2\",\"total\":4}\n"}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  walk_t w = {.stop_at = 1};
  assert_int_equal(gpum_client_list_each(c, NULL, false, on_item, &w, NULL), 42);
  assert_int_equal(w.n, 1);
  finish(&s, c);
  assert_int_equal(json_array_size(s.requests), 1);
  json_decref(s.requests);
}

/* The scanner reads a reservation as jansson's reading does (gpum__res_parse), field for
 * field: the same document twice, the second with an escape in a field neither reads (so
 * jansson reads that page), give equal structs: truncated strings, a real where an integer is
 * due, negatives, mistyped fields, devices as UUIDs, objects and junk, more than fit. */
static void test_list_scan_equals_jansson(void **state) {
  (void)state;
  char label[301], doc[4096], page1[4400], page2[4400];
  memset(label, 'L', 300);
  label[300] = '\0';
  char devs[1024] = "\"GPU-x\",{\"index\":1,\"uuid\":\"GPU-y\",\"memory_total\":80.5,\"vendor\":"
                    "\"amd\",\"vendor_index\":-2,\"more\":[null]},7";
  for (size_t i = 0, o = strlen(devs); i < GPUM_CLIENT_MAX_DEVICES; i++)
    o += (size_t)snprintf(devs + o, sizeof devs - o, ",{\"index\":9}");
  snprintf(doc, sizeof doc,
           "{\"id\":\"r-5\",\"token\":\"tok\",\"state\":\"QUEUED\",\"reason\":\"why\",\"uid\":"
           "1000,\"pid\":-3,\"label\":\"%s\",\"slurm\":{\"job_id\":\"12_7\",\"step_id\":"
           "\"batch\"},\"bytes_per_gpu\":1048576.0,\"gpus\":\"2\",\"priority\":-5.5,\"lease\":"
           "\"ttl\",\"ttl_ms\":30000,\"expires_ns\":-1,\"devices\":[%s],\"queue_position\":4,"
           "\"waiting_for\":[\"room\"],\"created_ns\":1,\"granted_ns\":2,\"ended_ns\":3,"
           "\"fenced\":{\"used\":5,\"limit\":6},\"extra\":[1,{\"a\":null}]",
           label, devs);
  snprintf(page1, sizeof page1, "{\"id\":$ID,\"ok\":true,\"reservations\":[%s}]}\n", doc);
  snprintf(page2, sizeof page2,
           "{\"id\":$ID,\"ok\":true,\"reservations\":[%s,\"x\":\"\\u0041\"}]}\n", doc);
  const step_t steps[] = {{"list", page1}, {"list", page2}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  walk_t a = {0}, b = {0};
  assert_int_equal(gpum_client_list_each(c, NULL, false, on_item, &a, NULL), 0);
  assert_int_equal(gpum_client_list_each(c, NULL, false, on_item, &b, NULL), 0);
  assert_int_equal(a.n, 1);
  assert_int_equal(b.n, 1);
  assert_non_null(strstr(a.docs[0], "\"extra\":[1,{\"a\":null}]}")); /* as sent: scanned */
  assert_non_null(strstr(b.docs[0], "\"x\":\"A\"}"));                /* written out: jansson */
  const gpum_reservation_t *x = &a.res[0], *y = &b.res[0];
  assert_int_equal(x->ndevices, GPUM_CLIENT_MAX_DEVICES);
  assert_string_equal(x->devices[0].uuid, "GPU-x");
  assert_int_equal(x->devices[1].memory_total, 80);
  assert_int_equal(strlen(x->label), sizeof x->label - 1);
  assert_int_equal(x->bytes_per_gpu, 1048576);
  assert_int_equal(x->gpus, 0);
  assert_int_equal(x->priority, 0);
  assert_int_equal(x->pid, -3);
  assert_int_equal(x->lease, GPUM_LEASE_TTL);
  assert_int_equal(x->queue_position, 4);
  assert_string_equal(x->slurm_step_id, "batch");
  assert_true(x->fenced && x->fenced_limit == 6);
  assert_memory_equal(x, y, sizeof *x);
  finish(&s, c);
  json_decref(s.requests);
}

static void test_reserve_timeout_cancels(void **state) {
  (void)state;
  static const step_t steps[] = {
      {"reserve", QUEUED_REPLY},
      {"release", "{\"id\":$ID,\"ok\":true,\"reservation\":{\"id\":\"r-2\",\"state\":"
                  "\"CANCELLED\"}}\n"}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  gpum_reservation_t r;
  gpum_reserve_req_t q = {.bytes_per_gpu = 1 << 20};
  assert_int_equal(gpum_client_reserve(c, &q, 50, &r), GPUM_ETIMEDOUT);
  assert_non_null(strstr(gpum_last_error(), "cancelled"));
  finish(&s, c);
  assert_int_equal(json_array_size(s.requests), 2);
  assert_string_equal(
      json_string_value(json_object_get(json_array_get(s.requests, 1), "reservation")), "r-2");
  json_decref(s.requests);
}

static void test_queued_then_expired(void **state) {
  (void)state;
  static const step_t steps[] = {
      {"reserve", QUEUED_REPLY},
      {NULL, "{\"event\":\"expired\",\"reservation\":{\"id\":\"r-2\",\"state\":\"EXPIRED\","
             "\"reason\":\"queue timeout after 1s\"}}\n"}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  gpum_reservation_t r;
  gpum_reserve_req_t q = {.bytes_per_gpu = 1 << 20};
  assert_int_equal(gpum_client_reserve(c, &q, 2000, &r), GPUM_ESTATE);
  assert_int_equal(r.state, GPUM_RES_EXPIRED);
  assert_non_null(strstr(gpum_last_error(), "queue timeout after 1s"));
  assert_true(gpum_res_state_is_final(r.state));
  finish(&s, c);
  json_decref(s.requests);
}

/* A grant sent right behind the QUEUED reply is part of the answer: reserve_async says
 * GRANTED, and the event is still handed to the callback. */
static void test_grant_with_reply(void **state) {
  (void)state;
  static const step_t steps[] = {{"reserve", QUEUED_REPLY GRANTED_EV}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  seen_t seen = {0};
  gpum_client_set_event_cb(c, on_event, &seen);
  gpum_reservation_t r;
  gpum_reserve_req_t q = {.bytes_per_gpu = 1 << 20};
  assert_int_equal(gpum_client_reserve_async(c, &q, &r), 0);
  assert_int_equal(r.state, GPUM_RES_GRANTED);
  assert_string_equal(r.devices[0].uuid, "GPU-aaa");
  assert_int_equal(seen.n, 1);
  assert_int_equal(seen.kinds[0], GPUM_CLIENT_EV_GRANTED);
  finish(&s, c);
  json_decref(s.requests);
}

/* The non-blocking form: poll the fd, pump with gpum_client_process. */
static void test_async_poll(void **state) {
  (void)state;
  static const step_t steps[] = {{"reserve", QUEUED_REPLY}, {NULL, GRANTED_EV}};
  server_t s;
  gpum_client_t *c;
  start_ex(&s, steps, 2, false, 2, &c);
  seen_t seen = {0};
  gpum_client_set_event_cb(c, on_event, &seen);
  assert_int_equal(gpum_client_process(c, 0), 0); /* nothing sent yet: returns at once */
  gpum_reservation_t r;
  gpum_reserve_req_t q = {.bytes_per_gpu = 1 << 20};
  assert_int_equal(gpum_client_reserve_async(c, &q, &r), 0);
  assert_int_equal(r.state, GPUM_RES_QUEUED);
  assert_int_equal(r.queue_position, 2);
  assert_string_equal(r.waiting_for, "r-1 on GPU 0");
  assert_int_equal(gpum_client_process(c, 0), 0);
  assert_int_equal(write(s.gate[1], "g", 1), 1); /* now the server sends the grant */
  struct pollfd p = {gpum_client_fd(c), POLLIN, 0};
  while (seen.n == 0) {
    assert_int_equal(poll(&p, 1, 2000), 1);
    assert_true(gpum_client_process(c, 0) >= 0);
  }
  assert_int_equal(seen.n, 1);
  assert_int_equal(seen.kinds[0], GPUM_CLIENT_EV_GRANTED);
  assert_string_equal(seen.ids[0], "r-2");
  finish(&s, c);
  json_decref(s.requests);
}

static void test_status_parse(void **state) {
  (void)state;
  static const step_t steps[] = {
      {"status", "{\"id\":$ID,\"ok\":true,\"node\":{},\"devices\":[{\"index\":0,\"uuid\":\"GPU-a\","
                 "\"name\":\"H100\",\"state\":\"AVAILABLE\",\"memory\":{\"total\":1000,\"used\":"
                 "100,\"free\":900},\"committed\":300,\"reserved\":250,\"unmanaged\":50,\"jobs\":2,"
                 "\"reservations\":[\"r-1\",\"r-3\"]},{\"index\":1}],\"queue\":[{\"id\":\"r-4\","
                 "\"state\":\"QUEUED\",\"queue_position\":1}]}\n"}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  gpum_client_status_t st;
  assert_int_equal(gpum_client_status(c, &st), 0);
  assert_int_equal(st.ndevices, 2);
  assert_string_equal(st.devices[0].name, "H100");
  assert_int_equal(st.devices[0].total, 1000);
  assert_int_equal(st.devices[0].committed, 300);
  assert_int_equal(st.devices[0].reserved, 250);
  assert_int_equal(st.devices[0].jobs, 2);
  assert_int_equal(st.devices[0].nreservations, 2);
  assert_string_equal(st.devices[0].reservations[1], "r-3");
  assert_int_equal(st.devices[1].nreservations, 0);
  assert_int_equal(st.nqueue, 1);
  assert_string_equal(st.queue[0].id, "r-4");
  gpum_client_status_free(&st);
  finish(&s, c);
  json_decref(s.requests);
}

static void test_call_json(void **state) {
  (void)state;
  static const step_t steps[] = {{"list", "{\"id\":$ID,\"ok\":true,\"reservations\":[]}\n"}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  char *reply = NULL;
  assert_int_equal(gpum_client_call_json(c, "list", "{\"all\":true}", &reply), 0);
  json_t *doc = json_loads(reply, 0, NULL);
  assert_true(json_is_array(json_object_get(doc, "reservations")));
  json_decref(doc);
  free(reply);
  finish(&s, c);
  json_decref(s.requests);
}

/* --- bad input from the server ------------------------------------------------------------ */

static void test_malformed_reply(void **state) {
  (void)state;
  static const step_t steps[] = {{"list", "{not json\n"}, {"list", "[1,2]\n"}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  gpum_reservation_t *list = NULL;
  size_t n = 0;
  assert_int_equal(gpum_client_list(c, false, &list, &n), GPUM_EPROTO);
  assert_non_null(strstr(gpum_last_error(), "malformed"));
  assert_int_equal(gpum_client_list(c, false, &list, &n), GPUM_EPROTO);
  finish(&s, c);
  json_decref(s.requests);
}

typedef struct {
  int fd;
} flood_t;

static void *flood_main(void *arg) {
  flood_t *f = arg;
  static char junk[GPUM_CLIENT_MAX_MESSAGE + 100];
  memset(junk, 'x', sizeof junk);
  write_all(f->fd, junk, sizeof junk);
  return NULL;
}

static void test_overlong_line(void **state) {
  (void)state;
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  gpum_client_t *c = NULL;
  assert_int_equal(gpum__client_from_fd(sv[1], "fake.sock", 2000, &c), 0);
  flood_t f = {sv[0]};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, flood_main, &f), 0);
  int rc = 0;
  while (rc == 0)
    rc = gpum_client_process(c, 2000);
  assert_int_equal(rc, GPUM_EPROTO);
  assert_non_null(strstr(gpum_last_error(), "limit"));
  assert_int_equal(gpum_client_process(c, 0), GPUM_ECLOSED); /* no resync after that */
  gpum_client_close(c);                                      /* unblocks the writer */
  pthread_join(t, NULL);
  close(sv[0]);
}

/* Error reply codes are read back through GPUM_ERRNO_MAP: every code by its name, anything
 * else as EPROTO. */
static void test_error_code_names(void **state) {
  (void)state;
#define ROUND_TRIP(name, value, msg) \
  assert_int_equal(gpum__proto_err_code(gpum_err_name(value)), (value));
  GPUM_ERRNO_MAP(ROUND_TRIP)
#undef ROUND_TRIP
  assert_int_equal(gpum__proto_err_code("ENEVERFIT"), GPUM_ENEVERFIT);
  assert_int_equal(gpum__proto_err_code("EWHATEVER"), GPUM_EPROTO);
  assert_int_equal(gpum__proto_err_code("OK"), GPUM_EPROTO);
  assert_int_equal(gpum__proto_err_code(NULL), GPUM_EPROTO);
}

/* What the node events of test_watch carried (copied out during the callback). */
typedef struct {
  int n;
  gpum_watch_type_t types[8];
  char names[8][16];
  uint64_t seqs[8];
  char data[8][128];
  char res[8][96]; /* "ID STATE" of a reservation event, else "" */
  int devices[8];
} node_seen_t;

static void on_node(const gpum_client_event_t *ev, void *user) {
  node_seen_t *s = user;
  if (ev->kind != GPUM_CLIENT_EV_NODE || s->n == 8)
    return;
  int i = s->n++;
  s->types[i] = ev->type;
  snprintf(s->names[i], sizeof s->names[i], "%s", ev->type_name ? ev->type_name : "(null)");
  s->seqs[i] = ev->seq;
  snprintf(s->data[i], sizeof s->data[i], "%s", ev->data ? ev->data : "(null)");
  if (ev->reservation)
    snprintf(s->res[i], sizeof s->res[i], "%s %s", ev->reservation->id,
             gpum_res_state_name(ev->reservation->state));
  s->devices[i] = ev->device;
}

/* gpum_client_watch: the request ("events" by name; "off" for 0), the reply's seq, and node
 * events (one before the reply, dispatched after it) with their type, id, data, reservation and
 * device; an event over the limit (data null) and a type this library does not know; an unknown
 * bit refused without a request. */
static void test_watch(void **state) {
  (void)state;
  static const step_t steps[] = {
      {"watch", "{\"event\":\"node\",\"type\":\"reservation\",\"seq\":101,\"data\":"
                "{\"transition\":\"granted\",\"reservation\":{\"id\":\"r-3\",\"state\":"
                "\"GRANTED\"}}}\n{\"id\":$ID,\"ok\":true,\"events\":[\"reservation\","
                "\"alert\",\"health\",\"xid\"],\"seq\":100}\n"},
      {NULL, "{\"event\":\"node\",\"type\":\"xid\",\"seq\":102,\"data\":{\"gpu\":1,"
             "\"xid\":79}}\n{\"event\":\"node\",\"type\":\"alert\",\"seq\":103,\"data\":"
             "null,\"too_large\":true}\n{\"event\":\"node\",\"type\":\"later\",\"seq\":"
             "104,\"data\":{\"device\":2}}\n"},
      {"watch", "{\"id\":$ID,\"ok\":true,\"events\":[],\"seq\":104}\n"}};
  server_t s;
  gpum_client_t *c;
  START(&s, steps, &c);
  node_seen_t seen = {0};
  gpum_client_set_event_cb(c, on_node, &seen);
  uint64_t seq = 0;
  assert_int_equal(gpum_client_watch(c, GPUM_WATCH_DEFAULT, &seq), 0);
  assert_int_equal(seq, 100);
  /* The server may have pushed the next events already: the call may have read them too. */
  assert_true(seen.n >= 1);
  assert_int_equal(seen.types[0], GPUM_WATCH_RESERVATION);
  assert_string_equal(seen.res[0], "r-3 GRANTED");
  assert_int_equal(seen.devices[0], -1);
  for (int i = 0; i < 100 && seen.n < 4; i++)
    assert_true(gpum_client_process(c, 2000) >= 0);
  assert_int_equal(seen.n, 4);
  assert_int_equal(seen.types[1], GPUM_WATCH_XID);
  assert_int_equal(seen.seqs[1], 102);
  assert_int_equal(seen.devices[1], 1);
  assert_string_equal(seen.data[1], "{\"gpu\":1,\"xid\":79}");
  assert_string_equal(seen.res[1], "");
  assert_int_equal(seen.types[2], GPUM_WATCH_ALERT);
  assert_string_equal(seen.data[2], "null");
  assert_int_equal(seen.types[3], 0);
  assert_string_equal(seen.names[3], "later");
  assert_int_equal(seen.devices[3], 2);
  assert_int_equal(gpum_client_watch(c, 1u << 12, NULL), GPUM_EINVAL);
  assert_int_equal(gpum_client_watch(c, 0, &seq), 0);
  assert_int_equal(seq, 104);
  finish(&s, c);
  assert_int_equal(json_array_size(s.requests), 2);
  json_t *on = json_object_get(json_array_get(s.requests, 0), "events");
  assert_int_equal(json_array_size(on), 4);
  assert_string_equal(json_string_value(json_array_get(on, 0)), "reservation");
  assert_string_equal(json_string_value(json_array_get(on, 3)), "xid");
  json_t *off = json_array_get(s.requests, 1);
  assert_true(json_is_true(json_object_get(off, "off")));
  assert_null(json_object_get(off, "events"));
  json_decref(s.requests);
}

static void test_server_closes(void **state) {
  (void)state;
  static const step_t steps[] = {{"status", "{\"id\":$ID,\"ok\":tr"}};
  server_t s;
  gpum_client_t *c;
  start_ex(&s, steps, 1, true, 0, &c);
  gpum_client_status_t st;
  assert_int_equal(gpum_client_status(c, &st), GPUM_ECLOSED);
  assert_non_null(strstr(gpum_last_error(), "closed"));
  assert_int_equal(gpum_client_process(c, 0), GPUM_ECLOSED);
  assert_int_equal(gpum_client_release(c, "r-1", NULL), GPUM_ECLOSED);
  finish(&s, c);
  json_decref(s.requests);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_paths_defaults_and_env),
      cmocka_unit_test(test_paths_from_config),
      cmocka_unit_test(test_connect_no_daemon),
      cmocka_unit_test(test_connect_hello),
      cmocka_unit_test(test_connect_hello_refused),
      cmocka_unit_test(test_reserve_granted_fields),
      cmocka_unit_test(test_reserve_slurm_ids),
      cmocka_unit_test(test_reserve_no_wait),
      cmocka_unit_test(test_ids_increase),
      cmocka_unit_test(test_error_reply),
      cmocka_unit_test(test_bad_requests_not_sent),
      cmocka_unit_test(test_reserve_waits_for_grant),
      cmocka_unit_test(test_event_before_reply),
      cmocka_unit_test(test_list_follows_cursors),
      cmocka_unit_test(test_list_page),
      cmocka_unit_test(test_list_each),
      cmocka_unit_test(test_list_each_stops),
      cmocka_unit_test(test_list_scan_equals_jansson),
      cmocka_unit_test(test_reserve_timeout_cancels),
      cmocka_unit_test(test_queued_then_expired),
      cmocka_unit_test(test_grant_with_reply),
      cmocka_unit_test(test_async_poll),
      cmocka_unit_test(test_status_parse),
      cmocka_unit_test(test_call_json),
      cmocka_unit_test(test_malformed_reply),
      cmocka_unit_test(test_overlong_line),
      cmocka_unit_test(test_watch),
      cmocka_unit_test(test_server_closes),
      cmocka_unit_test(test_error_code_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
