/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside the gpumd client: the connection state (conn.c does the framing, ids and events;
 * ops.c builds the requests; parse.c turns reply objects into the public structs). The
 * protocol's names are in protocol_internal.h, shared with gpumd.
 */
#ifndef GPUM_CLIENT_INTERNAL_H
#define GPUM_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/client.h>
#include <jansson.h>

struct gpum_client {
  int fd;
  bool closed;
  char path[256];
  char version[64];
  unsigned timeout_ms;
  int64_t next_id;
  char *buf; /* read buffer: up to GPUM_CLIENT_MAX_MESSAGE bytes of unparsed input */
  size_t len;
  json_t *pending; /* events read while waiting for a reply, dispatched after it */
  gpum_client_event_fn cb;
  void *user;
  /* gpum_client_wait: the reservation being watched and whether it left QUEUED. */
  const char *watch_id; /* points into watch_res while a wait runs, else NULL */
  gpum_reservation_t watch_res;
  bool watch_done;
  /* gpum_client_call_json hands back the reply's line as gpumd sent it instead of writing the
   * parsed reply out again: while keep_raw, take_line keeps a copy of each line it parses (raw)
   * and gpum__client_call_nodispatch keeps the matched reply's (reply_raw). NULL when the copy
   * could not be made (the reply is then written out from its parse). */
  bool keep_raw;
  char *raw, *reply_raw;
  /* gpum__client_call_line: the reply's line is offered to line_fn before jansson sees it. */
  bool (*line_fn)(const char *line, size_t len, int64_t id, void *user);
  void *line_user;
  int64_t line_id;
  bool line_taken; /* line_fn took the reply: there is no parse of it */
};

/* A client over an already connected fd (taken over; closed by gpum_client_close), without
 * the hello handshake: for gpum_client_connect and for tests with a fake server. */
int gpum__client_from_fd(int fd, const char *path, unsigned timeout_ms, gpum_client_t **out);
/* Sends req (borrowed; an "id" is added) and waits for the reply with that id. ok true: 0 and
 * the reply in *reply (caller decrefs); ok false: the server's code and message (no reply).
 * Queued events are dispatched before returning. */
int gpum__client_call(gpum_client_t *c, json_t *req, json_t **reply);
/* gpum__client_call that consumes req; req NULL (a request that could not be built) is
 * GPUM_ENOMEM. */
int gpum__client_call_consume(gpum_client_t *c, json_t *req, json_t **reply);
/* The same without dispatching: the events stay queued for gpum__client_latest and
 * gpum__client_dispatch_pending. */
int gpum__client_call_nodispatch(gpum_client_t *c, json_t *req, json_t **reply);
/* gpum__client_call whose reply is first offered, as its line, to fn (a reader that needs no
 * jansson tree): fn returns true when the line is the successful reply to id and it has read
 * it, false to have the line parsed as usual (any other line is parsed as usual too). Returns 0
 * with *reply NULL when fn took the reply, 0 with *reply the parsed reply when fn gave it up, or
 * the call's error. Queued events are dispatched before returning. */
int gpum__client_call_line(gpum_client_t *c, json_t *req,
                           bool (*fn)(const char *line, size_t len, int64_t id, void *user),
                           void *user, json_t **reply);
/* Updates res from the queued events about res->id (the last one wins). */
void gpum__client_latest(const gpum_client_t *c, gpum_reservation_t *res);
void gpum__client_dispatch_pending(gpum_client_t *c);
/* parse.c */
void gpum__res_parse(const json_t *obj, gpum_reservation_t *out);
/* The same from a scanner at the reservation's object (core/json_scan_internal.h): fields the
 * same, a value of another type read as absent. Check s->fail after. */
struct gpum__jscan;
void gpum__res_scan(struct gpum__jscan *s, gpum_reservation_t *out);
int gpum__status_parse(const json_t *reply, gpum_client_status_t *out);
/* A protocol state name ("GRANTED") as the public enum; GPUM_RES_UNKNOWN for NULL or a name
 * this library does not know. */
gpum_res_state_t gpum__res_state_parse(const char *s);
/* The protocol's name of a lease kind ("connection"), NULL when out of range. */
const char *gpum__lease_name(gpum_lease_t lease);

#endif /* GPUM_CLIENT_INTERNAL_H */
