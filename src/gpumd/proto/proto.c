/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's wire protocol, one JSON object per line (docs/protocol.md): checking a line against
 * the nesting limit before it is parsed, parsing it into a request with an id and an op, and
 * building the replies ({"id", "ok": true, ...} or {"id", "ok": false, "error": {"code",
 * "message"}}) and the server-pushed events ({"event": NAME, ...}). A bad line gets an error
 * reply and changes nothing; the connection stays open (over-long lines are handled by the
 * framing in server.c, which closes).
 */
#include <gpum/error.h>

#include "gpumd.h"
#include "json_in.h"
#include "net.h"
#include "ops.h"
#include "proto.h"

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
  /* The common requests (a reserve, a release: one level of scalars) are decoded straight
   * into their op's struct, without a JSON tree. */
  gpumd_flat_t flat;
  if (gpumd_json_parse_flat(line, len, &flat) && gpumd_op_dispatch_flat(c, &flat))
    return;
  /* The fast parser takes only well-formed lines nested within the limit: the nesting check
   * on the raw text, and jansson, are for the lines it gives up on. */
  json_t *req = gpumd_json_parse_fast(line, len, GPUMD_MAX_DEPTH);
  if (!req && gpumd_json_depth(line, len, GPUMD_MAX_DEPTH) > GPUMD_MAX_DEPTH) {
    gpumd_reply_err(c, NULL, GPUM_EPROTO, "message nested deeper than %d levels", GPUMD_MAX_DEPTH);
    return;
  }
  json_error_t jerr;
  if (!req && !(req = gpumd_json_parse(line, len, &jerr))) {
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
