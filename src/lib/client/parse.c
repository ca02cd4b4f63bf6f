/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Turns the daemon's JSON (reservation objects, the status reply) into the client library's
 * public structs. Missing or mistyped fields give "" / 0, so that a newer daemon that adds
 * fields or an older one that lacks some never breaks a client.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>

#include "client/client_internal.h"

static const char *const state_names[] = {
    [GPUM_RES_UNKNOWN] = "UNKNOWN", [GPUM_RES_QUEUED] = "QUEUED",
    [GPUM_RES_GRANTED] = "GRANTED", [GPUM_RES_RELEASED] = "RELEASED",
    [GPUM_RES_EXPIRED] = "EXPIRED", [GPUM_RES_CANCELLED] = "CANCELLED",
    [GPUM_RES_FAILED] = "FAILED",
};

const char *gpum_res_state_name(gpum_res_state_t st) {
  if ((size_t)st >= sizeof state_names / sizeof state_names[0])
    return "UNKNOWN";
  return state_names[st];
}

bool gpum_res_state_is_final(gpum_res_state_t st) {
  return st == GPUM_RES_RELEASED || st == GPUM_RES_EXPIRED || st == GPUM_RES_CANCELLED ||
         st == GPUM_RES_FAILED;
}

static gpum_res_state_t state_of(const char *s) {
  for (size_t i = 1; s && i < sizeof state_names / sizeof state_names[0]; i++)
    if (!strcmp(s, state_names[i]))
      return (gpum_res_state_t)i;
  return GPUM_RES_UNKNOWN;
}

static void str(const json_t *o, const char *key, char *buf, size_t len) {
  const char *s = json_string_value(json_object_get(o, key));
  snprintf(buf, len, "%s", s ? s : "");
}

static uint64_t u64(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  if (json_is_integer(v))
    return json_integer_value(v) < 0 ? 0 : (uint64_t)json_integer_value(v);
  if (json_is_real(v))
    return json_real_value(v) < 0 ? 0 : (uint64_t)json_real_value(v);
  return 0;
}

static int64_t i64(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

static void device_ref(const json_t *d, gpum_res_device_t *out) {
  memset(out, 0, sizeof *out);
  if (json_is_string(d)) {
    snprintf(out->uuid, sizeof out->uuid, "%s", json_string_value(d));
    return;
  }
  out->index = (unsigned)u64(d, "index");
  str(d, "uuid", out->uuid, sizeof out->uuid);
}

void gpum__res_parse(const json_t *o, gpum_reservation_t *r) {
  memset(r, 0, sizeof *r);
  str(o, "id", r->id, sizeof r->id);
  str(o, "token", r->token, sizeof r->token);
  r->state = state_of(json_string_value(json_object_get(o, "state")));
  str(o, "reason", r->reason, sizeof r->reason);
  r->uid = (uint32_t)u64(o, "uid");
  r->pid = (int32_t)i64(o, "pid");
  str(o, "label", r->label, sizeof r->label);
  r->bytes_per_gpu = u64(o, "bytes_per_gpu");
  r->gpus = (unsigned)u64(o, "gpus");
  r->priority = (int)i64(o, "priority");
  const char *lease = json_string_value(json_object_get(o, "lease"));
  r->lease = lease && !strcmp(lease, "pid")   ? GPUM_LEASE_PID
             : lease && !strcmp(lease, "ttl") ? GPUM_LEASE_TTL
                                              : GPUM_LEASE_CONNECTION;
  r->ttl_ms = u64(o, "ttl_ms");
  r->expires_ns = u64(o, "expires_ns");
  const json_t *devs = json_object_get(o, "devices");
  size_t i;
  const json_t *d;
  for (i = 0; i < json_array_size(devs) && (d = json_array_get(devs, i)); i++) {
    if (r->ndevices == GPUM_CLIENT_MAX_DEVICES)
      break;
    device_ref(d, &r->devices[r->ndevices++]);
  }
  const json_t *qp = json_object_get(o, "queue_position");
  r->queue_position =
      r->state == GPUM_RES_QUEUED && json_is_integer(qp) ? (long)json_integer_value(qp) : -1;
  str(o, "waiting_for", r->waiting_for, sizeof r->waiting_for);
  r->created_ns = u64(o, "created_ns");
  r->granted_ns = u64(o, "granted_ns");
  r->ended_ns = u64(o, "ended_ns");
}

static int device_parse(const json_t *o, gpum_client_device_status_t *d) {
  d->index = (unsigned)u64(o, "index");
  str(o, "uuid", d->uuid, sizeof d->uuid);
  str(o, "name", d->name, sizeof d->name);
  str(o, "state", d->state, sizeof d->state);
  str(o, "reason", d->reason, sizeof d->reason);
  const json_t *mem = json_object_get(o, "memory");
  d->total = u64(mem, "total");
  d->used = u64(mem, "used");
  d->free = u64(mem, "free");
  d->committed = u64(o, "committed");
  d->reserved = u64(o, "reserved");
  d->unmanaged = u64(o, "unmanaged");
  d->jobs = (unsigned)u64(o, "jobs");
  const json_t *ids = json_object_get(o, "reservations");
  size_t n = json_array_size(ids);
  if (n == 0)
    return 0;
  d->reservations = calloc(n, sizeof *d->reservations);
  if (d->reservations == NULL)
    return gpum_error(GPUM_ENOMEM, "out of memory reading the status");
  size_t i;
  const json_t *id;
  for (i = 0; i < json_array_size(ids) && (id = json_array_get(ids, i)); i++) {
    const char *s =
        json_is_string(id) ? json_string_value(id) : json_string_value(json_object_get(id, "id"));
    snprintf(d->reservations[d->nreservations++], sizeof d->reservations[0], "%s", s ? s : "");
  }
  return 0;
}

int gpum__status_parse(const json_t *reply, gpum_client_status_t *out) {
  memset(out, 0, sizeof *out);
  const json_t *devs = json_object_get(reply, "devices");
  const json_t *queue = json_object_get(reply, "queue");
  size_t nd = json_array_size(devs), nq = json_array_size(queue);
  out->devices = nd ? calloc(nd, sizeof *out->devices) : NULL;
  out->queue = nq ? calloc(nq, sizeof *out->queue) : NULL;
  if ((nd && out->devices == NULL) || (nq && out->queue == NULL)) {
    gpum_client_status_free(out);
    return gpum_error(GPUM_ENOMEM, "out of memory reading the status");
  }
  size_t i;
  const json_t *v;
  for (i = 0; i < json_array_size(devs) && (v = json_array_get(devs, i)); i++) {
    int rc = device_parse(v, &out->devices[out->ndevices++]);
    if (rc != 0) {
      gpum_client_status_free(out);
      return rc;
    }
  }
  for (i = 0; i < json_array_size(queue) && (v = json_array_get(queue, i)); i++)
    gpum__res_parse(v, &out->queue[out->nqueue++]);
  return 0;
}

void gpum_client_status_free(gpum_client_status_t *st) {
  if (st == NULL)
    return;
  for (size_t i = 0; i < st->ndevices; i++)
    free(st->devices[i].reservations);
  free(st->devices);
  free(st->queue);
  memset(st, 0, sizeof *st);
}
