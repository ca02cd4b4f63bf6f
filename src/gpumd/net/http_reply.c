/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's HTTP responses: status phrases, the status of each gpum error code, JSON bodies and
 * the one error shape {"error": {"code", "message"}} (messages made valid UTF-8), and the
 * holding of every response of a loop turn until the ledger has committed it: the turn's
 * responses are queued (gpumd__http_queue_reply) and sent by gpumd_http_flush, or sealed with
 * the batch the ledger's writer takes (gpumd_http_seal) and sent when it is committed
 * (gpumd_http_release).
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "http_internal.h"
#include "obs_internal.h"
#include "json_out.h"
#include "net.h"
#include "utf8_internal.h"

/* ---- responses ---------------------------------------------------------------------------- */

const char *gpumd__http_phrase(int status) {
  switch (status) {
  case 200:
    return "OK";
  case 201:
    return "Created";
  case 202:
    return "Accepted";
  case 304:
    return "Not Modified";
  case 400:
    return "Bad Request";
  case 401:
    return "Unauthorized";
  case 403:
    return "Forbidden";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 409:
    return "Conflict";
  case 413:
    return "Payload Too Large";
  case 422:
    return "Unprocessable Entity";
  case 503:
    return "Service Unavailable";
  default:
    return "Internal Server Error";
  }
}

int gpumd_http_status_of(int code) {
  switch (code) {
  case GPUM_EINVAL:
  case GPUM_EPARSE:
  case GPUM_EPROTO:
  case GPUM_ERANGE:
    return 400;
  case GPUM_EPERM:
    return 403;
  case GPUM_ENOENT:
  case GPUM_ENODEV:
    return 404;
  case GPUM_ESTATE:
  case GPUM_EEXIST:
  case GPUM_EBUSY:
  case GPUM_ENOTSUP: /* a suspend gpumd cannot do (docs/suspend.md) */
    return 409;
  case GPUM_ENEVERFIT:
    return 422;
  case GPUM_EAGAIN:
  case GPUM_ETIMEDOUT:
    return 503;
  default:
    return 500;
  }
}

/* Queues req's response (headers and body already set) for the end of the turn. The answer
 * to HEAD is GET's without its body: evhttp would send a body it is given (and then no
 * Content-Length), which the client would read as the start of the next response. */
void gpumd__http_queue_reply(struct gpumd_http *h, struct evhttp_request *req, int status) {
  if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
    struct evbuffer *out = evhttp_request_get_output_buffer(req);
    char len[24];
    snprintf(len, sizeof len, "%zu", evbuffer_get_length(out));
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Length", len);
    evbuffer_drain(out, evbuffer_get_length(out));
  }
  if (h->npend == h->cappend) {
    size_t cap = h->cappend ? h->cappend * 2 : 16;
    gpumd_http_pending_t *p = realloc(h->pend, cap * sizeof *p);
    if (!p) {
      evhttp_send_reply(req, 500, gpumd__http_phrase(500), NULL); /* nothing to order it behind */
      return;
    }
    h->pend = p;
    h->cappend = cap;
  }
  h->pend[h->npend++] = (gpumd_http_pending_t){.req = req, .status = status};
}

void gpumd__http_reply_json(struct gpumd_http *h, struct evhttp_request *req, int status,
                            json_t *body) {
  struct evbuffer *out = evhttp_request_get_output_buffer(req);
  evbuffer_drain(out, evbuffer_get_length(out));
  if (!body || gpumd_json_write(out, body) != 0 || evbuffer_add(out, "\n", 1) != 0) {
    evbuffer_drain(out, evbuffer_get_length(out));
    evbuffer_add_printf(out, "{\"error\":{\"code\":\"ENOMEM\",\"message\":\"out of memory\"}}\n");
    status = 500;
  }
  json_decref(body);
  struct evkeyvalq *hd = evhttp_request_get_output_headers(req);
  evhttp_add_header(hd, "Content-Type", "application/json");
  evhttp_add_header(hd, "Cache-Control", "no-store");
  gpumd__http_queue_reply(h, req, status);
}

void gpumd__http_reply_error(struct gpumd_http *h, struct evhttp_request *req, int status, int code,
                             const char *msg) {
  const char *name = gpum_err_name(code);
  char clean[1024];
  /* Error messages quote the client's bytes (paths, query parameters, ids), which need not be
   * UTF-8 and may have been cut inside a character; a JSON string cannot hold those. */
  gpumd_utf8_clean(msg && *msg ? msg : gpum_strerror(code), clean, sizeof clean);
  json_t *body = json_pack("{s:{s:s, s:s}}", "error", "code", name, "message", clean);
  if (status == 401)
    evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
                      "Bearer realm=\"gpumd\"");
  gpumd__http_reply_json(h, req, status, body);
}

void gpumd__http_answer(struct gpumd_http *h, gpumd_http_call_t *call, int rc) {
  if (rc != 0) {
    int status = call->err_status ? call->err_status : gpumd_http_status_of(rc);
    gpumd__http_reply_error(h, call->req, status, rc, gpum_last_error());
  } else if (call->status > 0) {
    gpumd__http_reply_json(h, call->req, call->status, call->out);
  } else {
    json_decref(call->out);
  }
  call->out = NULL;
}

/* ---- sending after the commit ------------------------------------------------------------ */

/* Sends n queued responses. A request whose client went away meanwhile is still valid
 * (evhttp detaches it from its connection; sending frees it). */
static void send_queued(struct gpumd_http *h, const gpumd_http_pending_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    /* The connection reads its next request from now on (after this response). */
    gpumd__http_request_deadline(h, evhttp_request_get_connection(p[i].req), true);
    evhttp_send_reply(p[i].req, p[i].status, gpumd__http_phrase(p[i].status), NULL);
  }
}

void gpumd_http_flush(gpumd_t *d) {
  struct gpumd_http *h = d->http;
  if (!h)
    return;
  if (h->nfresh)
    gpumd__http_check_fresh(h, NULL);
  send_queued(h, h->pend, h->npend);
  h->npend = 0;
}

void gpumd_http_seal(gpumd_t *d) {
  struct gpumd_http *h = d->http;
  if (!h)
    return;
  if (h->nfresh)
    gpumd__http_check_fresh(h, NULL);
  /* The held responses went out before the writer took this batch: swap the arrays. */
  gpumd_http_pending_t *p = h->held;
  size_t cap = h->capheld;
  h->held = h->pend;
  h->capheld = h->cappend;
  h->nheld = h->npend;
  h->pend = p;
  h->cappend = cap;
  h->npend = 0;
}

void gpumd_http_release(gpumd_t *d) {
  struct gpumd_http *h = d->http;
  if (!h)
    return;
  send_queued(h, h->held, h->nheld);
  h->nheld = 0;
}
