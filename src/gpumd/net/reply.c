/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The socket protocol's replies ({"id", "ok": true, ...} or {"id", "ok": false, "error":
 * {"code", "message"}}) and server-pushed events ({"event": NAME, ...}), staged on a
 * connection (server.c) and written after the turn's commit.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <gpum/error.h>

#include "gpumd.h"
#include "json_out.h"
#include "net.h"
#include "utf8_internal.h"

static json_t *id_or_null(json_t *id) {
  return id ? json_incref(id) : json_null();
}

/* An error reply, written without building jansson values (which cannot hold text that is
 * not UTF-8, and may fail to be built): the same bytes as json_pack("{s:o, s:b, s:{s:s,
 * s:s}}", "id", ..., "ok", 0, "error", "code", ..., "message", ...) would give. */
typedef struct {
  json_t *id;
  const char *code;
  const char *message; /* valid UTF-8 */
} err_reply_t;

static void fill_err_reply(gpumd_jw_t *w, void *arg) {
  const err_reply_t *e = arg;
  GPUMD_JW_LIT(w, "{" GPUMD_JSON_KEY(GPUM_PROTO_F_ID));
  if (e->id)
    gpumd_jw_value(w, e->id);
  else
    GPUMD_JW_LIT(w, "null");
  GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY(GPUM_PROTO_F_OK) "false," GPUMD_JSON_KEY(
                      GPUM_PROTO_F_ERROR) "{" GPUMD_JSON_KEY(GPUM_PROTO_F_CODE));
  gpumd_jw_string(w, e->code);
  GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY(GPUM_PROTO_F_MESSAGE));
  gpumd_jw_string(w, e->message);
  GPUMD_JW_LIT(w, "}}");
}

/* A reply that could not be staged (out of memory): a short error in its place, so that the
 * request still gets its one reply when memory allows that much. */
void gpumd_reply_oom(gpumd_conn_t *c, json_t *id) {
  err_reply_t e = {.id = id, .code = gpum_err_name(GPUM_ENOMEM), .message = "out of memory"};
  gpumd_conn_send_with(c, fill_err_reply, &e);
}

void gpumd_reply_ok_end(gpumd_jw_t *w, json_t *id) {
  GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY(GPUM_PROTO_F_ID));
  if (id)
    gpumd_jw_value(w, id);
  else
    GPUMD_JW_LIT(w, "null");
  GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY(GPUM_PROTO_F_OK) "true}");
}

void gpumd_reply_ok(gpumd_conn_t *c, json_t *id, json_t *body) {
  if (!body) { /* json_pack or its parts failed (out of memory, text that is not UTF-8) */
    gpumd_reply_err(c, id, GPUM_EINTERNAL, "gpumd could not build its reply");
    return;
  }
  json_t *msg = json_is_object(body) ? body : json_object();
  if (msg != body)
    json_decref(body);
  if (!msg || json_object_set_new(msg, GPUM_PROTO_F_ID, id_or_null(id)) != 0 ||
      json_object_set_new(msg, GPUM_PROTO_F_OK, json_true()) != 0) {
    json_decref(msg);
    gpumd_reply_err(c, id, GPUM_EINTERNAL, "gpumd could not build its reply");
    return;
  }
  if (gpumd_conn_send(c, msg) != 0)
    gpumd_reply_oom(c, id);
}

void gpumd_reply_err(gpumd_conn_t *c, json_t *id, int code, const char *fmt, ...) {
  char text[1024], clean[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (n < 0)
    text[0] = '\0';
  else if ((size_t)n >= sizeof text) { /* cut before a character, marked as gpum_error does */
    size_t cut = sizeof text - 4;
    while (cut > 0 && ((unsigned char)text[cut] & 0xC0) == 0x80)
      cut--;
    memcpy(text + cut, "...", 4);
  }
  /* The message may quote the client's bytes (jansson quotes a bad escape up to the first byte
   * of the character after the backslash): those that are no UTF-8 become '?'. */
  gpumd_utf8_clean(text, clean, sizeof clean);
  err_reply_t e = {.id = id, .code = gpum_err_name(code), .message = clean};
  if (gpumd_conn_send_with(c, fill_err_reply, &e) != 0)
    gpumd_reply_oom(c, id);
}

void gpumd_send_event(gpumd_conn_t *c, const char *name, json_t *body) {
  json_t *msg = body ? body : json_object();
  json_object_set_new(msg, GPUM_PROTO_F_EVENT, json_string(name));
  (void)gpumd_conn_send(c, msg); /* an event that cannot be staged is lost (out of memory) */
}
