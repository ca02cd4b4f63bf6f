/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's transports (the net module): the Unix socket's connections (server.c) with their staged
 * and held output, the protocol's replies and events written on them (reply.c), and the HTTP
 * server's start, stop and output (http.c, http_conns.c, http_reply.c, http_token.c). Below
 * every module but the leaves: what arrives goes up through d->hooks.
 */
#ifndef GPUMD_NET_H
#define GPUMD_NET_H

#include "gpumd.h"
#include "json_out.h"

int gpumd_server_start(gpumd_t *d);
void gpumd_server_stop(gpumd_t *d);
/* Whether uid (with gid its primary group, or (gid_t)-1 when not known) is an admin: root, or
 * a member of admin_group as the system's group database says (may ask NSS: getpwuid_r,
 * getgrouplist). The socket decides it for each connection it accepts, the HTTP server for
 * each loopback caller whose socket's owner it found. Loop thread. */
bool gpumd_server_is_admin(const gpumd_t *d, uid_t uid, gid_t gid);
/* Appends one JSON message (plus '\n') to conn's staged output. Steals msg. Returns 0 (also
 * when c is closed: nothing is sent), or -1 when msg is NULL or could not be staged (out of
 * memory; nothing of it is). */
int gpumd_conn_send(gpumd_conn_t *c, json_t *msg);
/* Appends one message written by fill (plus '\n') to c's staged output. Returns as
 * gpumd_conn_send. */
int gpumd_conn_send_with(gpumd_conn_t *c, void (*fill)(gpumd_jw_t *w, void *arg), void *arg);
/* Marks c for closing after its staged output is written. */
void gpumd_conn_close_after_flush(gpumd_conn_t *c);
/* Drops c, a reader too slow (logged with why, a string literal): it reads nothing more, its
 * output of this turn is still written, and it closes at the start of the next turn (its
 * connection leases end then). */
void gpumd_conn_drop(gpumd_conn_t *c, const char *why);
/* Closes the connections that writing their output at the end of the last turn found gone
 * or hopeless (from the kick event, at the start of a turn). */
void gpumd_close_deferred(gpumd_t *d);
/* The output staged on the connections: held for the ledger's commit (seal), then written
 * once it is committed (release); closed connections are freed once no list has them. Called
 * at the end of a turn (turn.c). */
/* with_writer: a batch is handed to the ledger's writer right after, which writes what it can
 * of the sealed output as soon as the batch is committed (gpumd_conns_send_committed); the
 * release then writes what is left. Either way the held output goes at the release. */
void gpumd_conns_seal(gpumd_t *d, bool with_writer);
void gpumd_conns_release(gpumd_t *d);
/* The ledger writer's after-commit function (arg: the gpumd_t): writes the send queue's
 * replies to their sockets without blocking, each as far as the socket takes it. */
void gpumd_conns_send_committed(void *arg);
/* Replies: every request gets exactly one. id may be NULL (the request had none or could not
 * be parsed): then "id": null. A reply that cannot be staged (out of memory) is replaced by a
 * short ENOMEM error. gpumd_reply_ok steals body; a NULL body (building it failed: out of
 * memory, or text that is not UTF-8) makes the reply an EINTERNAL error. */
void gpumd_reply_ok(gpumd_conn_t *c, json_t *id, json_t *body);
/* The end of a success reply written with a gpumd_jw_t after its body's fields:
 * ,"id":ID,"ok":true} (what gpumd_reply_ok adds to a body object). */
void gpumd_reply_ok_end(gpumd_jw_t *w, json_t *id);
/* The message (cut at 1 KiB before a character, marked "...") may quote a client's bytes: what
 * is not UTF-8 is written as '?'. */
void gpumd_reply_err(gpumd_conn_t *c, json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* {"event": name, ...body} to c. Steals body (may be NULL). */
void gpumd_send_event(gpumd_conn_t *c, const char *name, json_t *body);
/* The short ENOMEM error that replaces a reply that could not be staged, so that the request
 * still gets its one reply when memory allows that much. */
void gpumd_reply_oom(gpumd_conn_t *c, json_t *id);
/* Starts the HTTP server per http.listen (nothing when "off"); creates or reads the API token.
 * Returns 0 or a negative code (bad address, non-loopback without http.token_file, ...). */
int gpumd_http_start(gpumd_t *d);
void gpumd_http_stop(gpumd_t *d);
/* End of turn: sends the HTTP responses staged so far (their turns are committed). */
void gpumd_http_flush(gpumd_t *d);
/* End of turn: the staged responses wait for the ledger's writer (held), and
 * gpumd_http_release sends them once it has committed. */
void gpumd_http_seal(gpumd_t *d);
void gpumd_http_release(gpumd_t *d);
/* SIGHUP: re-reads the token file. */
void gpumd_http_reload(gpumd_t *d);
/* Failed accepts on the HTTP listener since start (0 when http.listen is off). */
uint64_t gpumd_http_accept_failures(gpumd_t *d);
/* HTTP connections closed to make room for a new one (http.max_connections, _per_peer). */
uint64_t gpumd_http_evicted(gpumd_t *d);
/* Large reads answered by a child process (net/http_fork.c): those answered, and those whose
 * child failed (answered 500). */
void gpumd_http_forked_reads(gpumd_t *d, uint64_t *answered, uint64_t *failed);
/* "ADDR:PORT" the server listens on, or NULL when off. */
const char *gpumd_http_addr(gpumd_t *d);
/* Replaces the token with a fresh random one (written to the token file first) when rotate,
 * and returns {"token", "token_file"} in *out. Returns 0, GPUM_ESTATE (HTTP off) or GPUM_EIO. */
int gpumd_http_token_op(gpumd_t *d, bool rotate, json_t **out);

#endif /* GPUMD_NET_H */
