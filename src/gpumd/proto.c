/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's wire protocol, one JSON object per line (docs/protocol.md): checking a line against
 * the nesting limit before it is parsed, parsing it into a request with an id and an op, and
 * building the replies ({"id", "ok": true, ...} or {"id", "ok": false, "error": {"code",
 * "message"}}) and the server-pushed events ({"event": NAME, ...}). A bad line gets an error
 * reply and changes nothing; the connection stays open (over-long lines are handled by the
 * framing in server.c, which closes).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <gpum/error.h>

#include "gpumd_internal.h"

int gpumd_json_depth(const char *s, size_t len, int limit) {
  int depth = 0, max = 0;
  bool in_str = false;
  for (size_t i = 0; i < len; i++) {
    char ch = s[i];
    if (in_str) {
      if (ch == '\\')
        i++;
      else if (ch == '"')
        in_str = false;
      continue;
    }
    if (ch == '"') {
      in_str = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > max) {
        max = depth;
        if (max > limit)
          return max;
      }
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      depth--; /* stray closers cannot hide the openers that follow */
    }
  }
  return max;
}

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
static void send_err_fallback(gpumd_conn_t *c, json_t *id) {
  err_reply_t e = {.id = id, .code = gpum_err_name(GPUM_ENOMEM), .message = "out of memory"};
  gpumd_conn_send_with(c, fill_err_reply, &e);
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
    send_err_fallback(c, id);
}

typedef struct {
  gpumd_t *d;
  json_t *id;
  const gpumd_resv_t *r;
  bool with_token;
} resv_reply_t;

/* The same bytes as gpumd_reply_ok(c, id, {"reservation": R}): the body's key, then id, ok. */
static void fill_resv_reply(gpumd_jw_t *w, void *arg) {
  const resv_reply_t *a = arg;
  GPUMD_JW_LIT(w, "{" GPUMD_JSON_KEY(GPUM_PROTO_F_RESERVATION));
  gpumd_engine_resv_write(a->d, w, a->r, a->with_token);
  GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY(GPUM_PROTO_F_ID));
  if (a->id)
    gpumd_jw_value(w, a->id);
  else
    GPUMD_JW_LIT(w, "null");
  GPUMD_JW_LIT(w, "," GPUMD_JSON_KEY(GPUM_PROTO_F_OK) "true}");
}

void gpumd_reply_ok_resv(gpumd_conn_t *c, json_t *id, const gpumd_resv_t *r, bool with_token) {
  resv_reply_t a = {.d = c->d, .id = id, .r = r, .with_token = with_token};
  if (gpumd_conn_send_with(c, fill_resv_reply, &a) != 0)
    send_err_fallback(c, id);
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
    send_err_fallback(c, id);
}

void gpumd_send_event(gpumd_conn_t *c, const char *name, json_t *body) {
  json_t *msg = body ? body : json_object();
  json_object_set_new(msg, GPUM_PROTO_F_EVENT, json_string(name));
  (void)gpumd_conn_send(c, msg); /* an event that cannot be staged is lost (out of memory) */
}

int gpumd_check_fields(json_t *obj, const char *const *allowed) {
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    bool ok = false;
    for (const char *const *a = allowed; *a && !ok; a++)
      ok = strcmp(*a, key) == 0;
    if (!ok)
      return gpum_error(GPUM_EINVAL, "unknown field '%s'", key);
  }
  return 0;
}

void gpumd_proto_line(gpumd_conn_t *c, const char *line, size_t len) {
  while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
    len--;
  size_t start = 0;
  while (start < len && (line[start] == ' ' || line[start] == '\t'))
    start++;
  if (start == len)
    return; /* blank lines are allowed (keep-alives) */
  line += start;
  len -= start;
  if (gpumd_json_depth(line, len, GPUMD_MAX_DEPTH) > GPUMD_MAX_DEPTH) {
    gpumd_reply_err(c, NULL, GPUM_EPROTO, "message nested deeper than %d levels", GPUMD_MAX_DEPTH);
    return;
  }
  json_error_t jerr;
  json_t *req = gpumd_json_parse(line, len, &jerr);
  if (!req) {
    gpumd_reply_err(c, NULL, GPUM_EPARSE, "malformed JSON at byte %d: %s", jerr.position,
                    jerr.text);
    return;
  }
  if (!json_is_object(req)) {
    gpumd_reply_err(c, NULL, GPUM_EPROTO, "a request must be a JSON object");
    goto out_req;
  }
  json_t *id = json_object_get(req, GPUM_PROTO_F_ID);
  if (!id || !(json_is_integer(id) || (json_is_string(id) && json_string_length(id) <= 256))) {
    gpumd_reply_err(c, NULL, GPUM_EINVAL,
                    "a request needs an \"id\": an integer or a string of at most 256 bytes");
    goto out_req;
  }
  json_t *op = json_object_get(req, GPUM_PROTO_F_OP);
  if (!json_is_string(op)) {
    gpumd_reply_err(c, id, GPUM_EINVAL, "a request needs an \"op\" string");
    goto out_req;
  }
  gpumd_op_dispatch(c, id, json_string_value(op), req);
out_req:
  json_decref(req);
}
