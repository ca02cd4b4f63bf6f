/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A reservation session (gpum/session.h): one reservation held through the gpumd client for
 * the life of a job. The session keeps the reservation's id and token so that it can connect
 * again and re-attach after gpumd restarts (the daemon keeps a lost connection's reservations
 * for lease.grace), tells its caller what happens through one callback, and trims the pools
 * attached to it on pressure events. It is built on the public client API only.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/error.h>
#include <gpum/session.h>

#include "os_internal.h"
#include "client/protocol_internal.h"

#define WAIT_SLICE_MS 200        /* the longest a wait goes without asking `interrupted` */
#define REATTACH_CONNECT_MS 2000 /* connect timeout of one re-attach attempt */
#define DEFAULT_GRACE_MS 30000   /* when the options table has no lease.grace */
#define MAX_POOLS 16

typedef struct {
  gpum_pool_t *pool;
  int device;
} attached_t;

struct gpum_session {
  gpum_session_opts_t o;
  char socket[256];
  int64_t grace_ms;
  gpum_client_t *c;     /* NULL while gpumd is away */
  gpum_reservation_t r; /* as last seen; id "" before reserve */
  bool have;            /* a reservation was made */
  bool ended;           /* it reached a final state (reported) */
  int64_t lost_at;      /* monotonic ms when the connection was lost */
  int64_t next_try;     /* monotonic ms of the next re-attach attempt */
  long shown_position;  /* the queue position last reported */
  attached_t pools[MAX_POOLS];
  size_t npools;
  gpum_fence *fence; /* gpum_session_fence's: asked to shrink on pressure */
};

static void emit(gpum_session_t *s, gpum_session_event_t *ev) {
  ev->reservation = &s->r;
  if (s->o.on_event)
    s->o.on_event(ev, s->o.user);
}

static void emit_kind(gpum_session_t *s, gpum_session_event_kind_t kind, int error) {
  gpum_session_event_t ev = {.kind = kind, .error = error, .grace_ms = s->grace_ms};
  emit(s, &ev);
}

static bool interrupted(const gpum_session_t *s) {
  return s->o.interrupted && s->o.interrupted(s->o.user);
}

/* Reports a new queue position (once per position). */
static void note_position(gpum_session_t *s) {
  if (s->r.state != GPUM_RES_QUEUED || s->r.queue_position == s->shown_position)
    return;
  s->shown_position = s->r.queue_position;
  emit_kind(s, GPUM_SESSION_EV_QUEUED, 0);
}

/* Gives back the cached memory of the pools attached to device (or to any device). */
static uint64_t trim_pools(gpum_session_t *s, int device) {
  uint64_t total = 0;
  for (size_t i = 0; i < s->npools; i++) {
    if (s->pools[i].device >= 0 && s->pools[i].device != device)
      continue;
    uint64_t released = 0;
    if (gpum_pool_trim(s->pools[i].pool, 0, &released) == 0)
      total += released;
  }
  return total;
}

/* The client's event callback: events about the session's reservation update it, pressure
 * trims the attached pools. */
static void on_client_event(const gpum_client_event_t *ev, void *user) {
  gpum_session_t *s = user;
  if (ev->kind == GPUM_CLIENT_EV_PRESSURE) {
    gpum_session_event_t out = {.kind = GPUM_SESSION_EV_PRESSURE,
                                .device = ev->device,
                                .used_ratio = ev->used_ratio,
                                .level = ev->level ? ev->level : "high"};
    bool cleared =
        !strcmp(out.level, GPUM_PROTO_PRESSURE_NONE); /* the device came back under pressure.high */
    out.trimmed = cleared ? 0 : trim_pools(s, ev->device);
    /* An elastic job under the shim gives back what it holds above its base at its next free. */
    for (size_t k = 0; !cleared && s->fence && k < s->r.ndevices; k++)
      if ((int)s->r.devices[k].index == ev->device)
        gpum_fence_want_shrink(s->fence);
    emit(s, &out);
    return;
  }
  const gpum_reservation_t *r = ev->reservation;
  if (!s->have || r == NULL || strcmp(r->id, s->r.id) != 0)
    return;
  char token[sizeof s->r.token];
  memcpy(token, s->r.token, sizeof token); /* events do not carry the token */
  s->r = *r;
  if (s->r.token[0] == '\0')
    memcpy(s->r.token, token, sizeof token);
  if (gpum_res_state_is_final(r->state) && !s->ended) {
    s->ended = true;
    emit_kind(s, GPUM_SESSION_EV_ENDED, 0);
  } else {
    note_position(s);
  }
}

void gpum_session_opts_init(gpum_session_opts_t *opts) {
  memset(opts, 0, sizeof *opts);
  opts->grace_ms = -1;
}

int gpum_session_open(const gpum_session_opts_t *opts, gpum_session_t **out) {
  gpum_session_opts_t def;
  if (opts == NULL) {
    gpum_session_opts_init(&def);
    opts = &def;
  }
  if (out == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_session_open: out is NULL");
  *out = NULL;
  gpum_session_t *s = calloc(1, sizeof *s);
  if (s == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  s->o = *opts;
  s->shown_position = -2;
  int rc = 0;
  if (opts->socket) {
    if (strlen(opts->socket) >= sizeof s->socket)
      rc = gpum_error(GPUM_EINVAL, "socket path is too long (%zu bytes at most)",
                      sizeof s->socket - 1);
    else
      memcpy(s->socket, opts->socket, strlen(opts->socket) + 1);
  } else {
    rc = gpum_socket_path(opts->cfg, s->socket, sizeof s->socket);
  }
  s->o.socket = NULL; /* the caller's string need not outlive the call */
  if (opts->grace_ms >= 0)
    s->grace_ms = opts->grace_ms;
  else if (gpum_option_find("lease.grace"))
    s->grace_ms = (int64_t)gpum_config_get_duration(opts->cfg, "lease.grace");
  else
    s->grace_ms = DEFAULT_GRACE_MS;
  if (rc == 0)
    rc = gpum_client_connect(s->socket, opts->connect_timeout_ms, &s->c);
  if (rc != 0) {
    free(s);
    return rc;
  }
  gpum_client_set_event_cb(s->c, on_client_event, s);
  *out = s;
  return 0;
}

const gpum_reservation_t *gpum_session_reservation(const gpum_session_t *s) {
  return &s->r;
}

int gpum_session_fd(const gpum_session_t *s) {
  return s->c ? gpum_client_fd(s->c) : -1;
}

gpum_client_t *gpum_session_client(gpum_session_t *s) {
  return s->c;
}

/* The connection failed (why): drop it and start the re-attach window. */
static void lose(gpum_session_t *s, int why) {
  gpum_client_close(s->c);
  s->c = NULL;
  s->lost_at = (int64_t)gpum__os_mono_ms();
  s->next_try = s->lost_at;
  emit_kind(s, GPUM_SESSION_EV_LOST, why);
  gpum_error_clear();
}

/* One attempt to connect again and re-attach. 0 when re-attached (GRANTED or QUEUED);
 * GPUM_EAGAIN when gpumd does not answer (yet); GPUM_ECLOSED when the grace has passed
 * (GAVE_UP reported); GPUM_ESTATE when gpumd answered but the reservation is gone (ENDED
 * reported). */
static int try_reattach(gpum_session_t *s) {
  int64_t now = (int64_t)gpum__os_mono_ms();
  if (now - s->lost_at > s->grace_ms) {
    emit_kind(s, GPUM_SESSION_EV_GAVE_UP, GPUM_ECLOSED);
    s->ended = true;
    return gpum_error(GPUM_ECLOSED,
                      "gpumd did not come back within %lld ms (lease.grace); %s is lost",
                      (long long)s->grace_ms, s->r.id);
  }
  if (now < s->next_try)
    return GPUM_EAGAIN;
  s->next_try = now + GPUM_SESSION_RETRY_MS;
  gpum_client_t *c = NULL;
  if (gpum_client_connect(s->socket, REATTACH_CONNECT_MS, &c) != 0) {
    gpum_error_clear();
    return GPUM_EAGAIN;
  }
  gpum_reservation_t now_r;
  int rc = gpum_client_attach(c, s->r.id, s->r.token, &now_r);
  if (rc == GPUM_ECLOSED || rc == GPUM_ETIMEDOUT) { /* gone again: try later */
    gpum_client_close(c);
    gpum_error_clear();
    return GPUM_EAGAIN;
  }
  if (rc == 0 && (now_r.state == GPUM_RES_GRANTED || now_r.state == GPUM_RES_QUEUED ||
                  now_r.state == GPUM_RES_SUSPENDED)) {
    if (now_r.token[0] == '\0')
      memcpy(now_r.token, s->r.token, sizeof now_r.token);
    s->r = now_r;
    s->c = c;
    gpum_client_set_event_cb(c, on_client_event, s);
    emit_kind(s, GPUM_SESSION_EV_REATTACHED, 0);
    return 0;
  }
  gpum_client_close(c);
  if (rc == 0) {
    s->r.state = now_r.state;
    memcpy(s->r.reason, now_r.reason, sizeof s->r.reason);
    rc = gpum_error(GPUM_ESTATE, "gpumd is back but %s is %s%s%s", s->r.id,
                    gpum_res_state_name(now_r.state), now_r.reason[0] ? ": " : "", now_r.reason);
  } else {
    /* the daemon refused (unknown id, bad token): the reservation is gone */
    char why[200];
    snprintf(why, sizeof why, "%s", gpum_last_error());
    s->r.state = GPUM_RES_FAILED;
    snprintf(s->r.reason, sizeof s->r.reason, "cannot be re-attached: %.200s", why);
    rc = gpum_error(GPUM_ESTATE, "gpumd is back but %s could not be re-attached: %s", s->r.id, why);
  }
  s->ended = true;
  emit_kind(s, GPUM_SESSION_EV_ENDED, 0);
  return rc;
}

/* While gpumd is away: re-attach attempts for up to timeout_ms (-1: until one succeeds or
 * the grace passes). 0 when re-attached or the time is up (still away, within the grace);
 * GPUM_EINTR, GPUM_ECLOSED or GPUM_ESTATE as try_reattach. */
static int reattach_for(gpum_session_t *s, int timeout_ms) {
  int64_t deadline = timeout_ms < 0 ? -1 : (int64_t)gpum__os_mono_ms() + timeout_ms;
  for (;;) {
    if (interrupted(s))
      return gpum_error(GPUM_EINTR, "interrupted while gpumd is away");
    int rc = try_reattach(s);
    if (rc != GPUM_EAGAIN)
      return rc;
    int64_t now = (int64_t)gpum__os_mono_ms();
    if (deadline >= 0 && now >= deadline)
      return 0;
    int64_t wait = s->next_try - now;
    if (deadline >= 0 && deadline - now < wait)
      wait = deadline - now;
    if (wait > 0)
      poll(NULL, 0, (int)wait); /* the retry interval; a signal cuts it short */
  }
}

int gpum_session_reserve(gpum_session_t *s, const gpum_reserve_req_t *req, int64_t timeout_ms) {
  if (s->have)
    return gpum_error(GPUM_ESTATE, "this session already holds reservation %s", s->r.id);
  if (s->c == NULL)
    return gpum_error(GPUM_ECLOSED, "not connected to gpumd");
  int rc = gpum_client_reserve_async(s->c, req, &s->r);
  if (rc != 0)
    return rc;
  s->have = true;
  note_position(s);
  int64_t start = (int64_t)gpum__os_mono_ms();
  while (s->r.state != GPUM_RES_GRANTED) {
    if (s->ended || gpum_res_state_is_final(s->r.state))
      return gpum_error(GPUM_ESTATE, "reservation %s is %s%s%s", s->r.id,
                        gpum_res_state_name(s->r.state), s->r.reason[0] ? ": " : "", s->r.reason);
    bool timed_out = timeout_ms >= 0 && (int64_t)gpum__os_mono_ms() - start >= timeout_ms;
    if (interrupted(s) || timed_out) {
      if (s->c == NULL)
        return gpum_error(GPUM_EINTR, "interrupted while gpumd is away");
      gpum_client_release(s->c, s->r.id, NULL);
      s->r.state = GPUM_RES_CANCELLED;
      s->ended = true;
      return timed_out ? gpum_error(GPUM_ETIMEDOUT, "%s not granted within %lld ms; cancelled",
                                    s->r.id, (long long)timeout_ms)
                       : gpum_error(GPUM_EINTR, "interrupted; %s cancelled", s->r.id);
    }
    if (s->c == NULL) {
      rc = reattach_for(s, WAIT_SLICE_MS);
      if (rc != 0)
        return rc;
      note_position(s);
      continue;
    }
    gpum_reservation_t now;
    rc = gpum_client_wait(s->c, s->r.id, WAIT_SLICE_MS, &now);
    if (rc == GPUM_ECLOSED || rc == GPUM_EIO) { /* gpumd went away: the queue survives it */
      lose(s, rc);
      continue;
    }
    if (rc == GPUM_ETIMEDOUT) { /* still queued: the events updated s->r */
      gpum_error_clear();
      continue;
    }
    if (now.token[0] == '\0')
      memcpy(now.token, s->r.token, sizeof now.token);
    s->r = now;
    if (rc != 0 && rc != GPUM_ESTATE)
      return rc;
  }
  emit_kind(s, GPUM_SESSION_EV_GRANTED, 0);
  return 0;
}

int gpum_session_process(gpum_session_t *s, int timeout_ms) {
  if (s->have && s->ended)
    return gpum_error(GPUM_ESTATE, "reservation %s is %s", s->r.id,
                      gpum_res_state_name(s->r.state));
  if (interrupted(s))
    return gpum_error(GPUM_EINTR, "interrupted");
  if (s->c == NULL)
    return s->have ? reattach_for(s, timeout_ms) : gpum_error(GPUM_ECLOSED, "not connected");
  int rc = gpum_client_process(s->c, timeout_ms);
  if (rc == GPUM_ECLOSED || rc == GPUM_EIO) {
    if (!s->have)
      return rc;
    lose(s, rc);
    return 0;
  }
  if (rc < 0) /* a malformed message (GPUM_EPROTO): the connection stays usable */
    return rc;
  if (s->ended)
    return gpum_error(GPUM_ESTATE, "reservation %s is %s%s%s", s->r.id,
                      gpum_res_state_name(s->r.state), s->r.reason[0] ? ": " : "", s->r.reason);
  return 0;
}

int gpum_session_renew(gpum_session_t *s, uint64_t ttl_ms) {
  if (!s->have || s->ended)
    return gpum_error(GPUM_ESTATE, "no live reservation to renew");
  if (s->c == NULL)
    return gpum_error(GPUM_ECLOSED, "gpumd is away");
  gpum_reservation_t now;
  int rc = gpum_client_renew(s->c, s->r.id, ttl_ms, &now);
  if (rc == 0) {
    if (now.token[0] == '\0')
      memcpy(now.token, s->r.token, sizeof now.token);
    s->r = now;
  }
  return rc;
}

int gpum_session_release(gpum_session_t *s) {
  if (!s->have || s->ended)
    return 0;
  if (s->c == NULL)
    return gpum_error(GPUM_ECLOSED, "gpumd is away; it ends %s itself after lease.grace", s->r.id);
  gpum_reservation_t now;
  int rc = gpum_client_release(s->c, s->r.id, &now);
  if (rc == 0) {
    s->r.state = now.state;
  } else if (rc == GPUM_ENOENT || rc == GPUM_ESTATE) { /* it had ended already */
    gpum_error_clear();
    rc = 0;
  }
  if (rc == 0)
    s->ended = true;
  return rc;
}

int gpum_session_attach_pool(gpum_session_t *s, gpum_pool_t *pool, int device) {
  if (pool == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_session_attach_pool: pool is NULL");
  if (s->npools == MAX_POOLS)
    return gpum_error(GPUM_ENOSPC, "at most %d pools per session", MAX_POOLS);
  s->pools[s->npools++] = (attached_t){.pool = pool, .device = device < 0 ? -1 : device};
  return 0;
}

int gpum_session_detach_pool(gpum_session_t *s, gpum_pool_t *pool) {
  for (size_t i = 0; i < s->npools; i++) {
    if (s->pools[i].pool == pool) {
      s->pools[i] = s->pools[--s->npools];
      return 0;
    }
  }
  return gpum_error(GPUM_ENOENT, "pool not attached to this session");
}

int gpum_session_fence(gpum_session_t *s, uint64_t max_limit, char *name, size_t len,
                       gpum_fence **out) {
  if (s == NULL || out == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_session_fence: NULL argument");
  if (!s->have || s->r.state != GPUM_RES_GRANTED)
    return gpum_error(GPUM_ESTATE, "the session holds no granted reservation to fence");
  if (s->fence)
    return gpum_error(GPUM_EEXIST, "the session's reservation is fenced already");
  int rc = gpum_reservation_fence(&s->r, s->socket, max_limit, name, len, out);
  if (rc == 0)
    s->fence = *out;
  return rc;
}

void gpum_session_close(gpum_session_t *s) {
  if (s == NULL)
    return;
  gpum_client_close(s->c);
  free(s);
}
