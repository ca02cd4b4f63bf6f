/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The web dashboard on gpumd's HTTP address: GET or HEAD / answers index.html and
 * /assets/NAME the embedded file NAME (web_internal.h), with its ETag (304 when If-None-Match
 * names it), Cache-Control: no-cache (the browser revalidates, so a new gpumd's page shows at
 * once), nosniff and a Content-Security-Policy that lets the page load scripts, styles and data
 * from gpumd only. The bytes are sent by reference: nothing is copied or read from disk.
 */

#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include <gpum/error.h>

#include "http_internal.h"
#include "net.h"
#include "rest.h"
#include "web_internal.h"

#define ASSETS_PREFIX "/assets/"

/* The page's own scripts, styles and API calls (fetch) go to gpumd; nothing else loads: no
 * inline script or style, no frame, no form, no plugin. Images: the icon and canvas
 * snapshots (data:). */
static const char csp[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
                          "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                          "form-action 'none'; frame-ancestors 'none'";

const gpumd_web_asset_t *gpumd_web_find(const char *name) {
  for (size_t i = 0; i < gpumd__web_nassets; i++)
    if (strcmp(gpumd__web_assets[i].name, name) == 0)
      return &gpumd__web_assets[i];
  return NULL;
}

bool gpumd_web_etag_matches(const char *inm, const char *etag) {
  size_t elen = strlen(etag);
  const char *p = inm;
  while (*p) {
    while (*p == ' ' || *p == '\t' || *p == ',')
      p++;
    if (*p == '*')
      return true;
    if (strncmp(p, "W/", 2) == 0) /* weak comparison: the W/ prefix does not count */
      p += 2;
    const char *end = p;
    if (*end == '"') {
      end = strchr(end + 1, '"');
      end = end ? end + 1 : p + strlen(p);
    } else {
      end += strcspn(end, ", \t");
    }
    if ((size_t)(end - p) == elen && strncmp(p, etag, elen) == 0)
      return true;
    if (end == p)
      break;
    p = end;
  }
  return false;
}

bool gpumd_web_serve(struct gpumd_http *h, struct evhttp_request *req, const char *path) {
  const char *name;
  if (strcmp(path, "/") == 0)
    name = "index.html";
  else if (strncmp(path, ASSETS_PREFIX, strlen(ASSETS_PREFIX)) == 0)
    name = path + strlen(ASSETS_PREFIX);
  else
    return false;

  struct evkeyvalq *out = evhttp_request_get_output_headers(req);
  enum evhttp_cmd_type method = evhttp_request_get_command(req);
  if (method != EVHTTP_REQ_GET && method != EVHTTP_REQ_HEAD) {
    evhttp_add_header(out, "Allow", "GET, HEAD");
    gpumd__http_reply_error(h, req, 405, GPUM_ENOTSUP,
                            "method not allowed here (allowed: GET, HEAD)");
    return true;
  }
  const gpumd_web_asset_t *a = gpumd_web_find(name);
  if (!a) {
    char msg[200];
    snprintf(msg, sizeof msg, "no such dashboard file: %.120s", path);
    gpumd__http_reply_error(h, req, 404, GPUM_ENOENT, msg);
    return true;
  }
  evhttp_add_header(out, "ETag", a->etag);
  evhttp_add_header(out, "Cache-Control", "no-cache");
  evhttp_add_header(out, "X-Content-Type-Options", "nosniff");
  const char *inm = evhttp_find_header(evhttp_request_get_input_headers(req), "If-None-Match");
  if (inm && gpumd_web_etag_matches(inm, a->etag)) {
    gpumd__http_queue_reply(h, req, 304);
    return true;
  }
  evhttp_add_header(out, "Content-Type", a->content_type);
  evhttp_add_header(out, "Content-Security-Policy", csp);
  evhttp_add_header(out, "Referrer-Policy", "no-referrer");
  struct evbuffer *body = evhttp_request_get_output_buffer(req);
  if (evbuffer_add_reference(body, a->data, a->size, NULL, NULL) != 0) {
    gpumd__http_reply_error(h, req, 500, GPUM_ENOMEM, "out of memory");
    return true;
  }
  gpumd__http_queue_reply(h, req, 200);
  return true;
}
