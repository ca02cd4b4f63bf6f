/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The web dashboard's files, embedded into gpumd at build time (web/ and uPlot's dist files,
 * turned into byte arrays by cmake/embed_assets.cmake), and their serving on gpumd's HTTP
 * address (http_web.c): GET / is index.html, GET /assets/NAME any embedded file. Nothing is
 * read from disk at run time.
 */
#ifndef GPUMD_WEB_INTERNAL_H
#define GPUMD_WEB_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

struct gpumd_http;
struct evhttp_request;

/* One embedded file. Every field points to static, read-only data. */
typedef struct {
  const char *name;         /* the file name in its URL: "app.js" for /assets/app.js */
  const char *content_type; /* "text/javascript; charset=utf-8" */
  const char *etag;         /* a strong ETag: the SHA-256 of the bytes, quoted */
  const unsigned char *data;
  size_t size;
} gpumd_web_asset_t;

/* The generated table (web_assets.c in the build tree). */
extern const gpumd_web_asset_t gpumd__web_assets[];
extern const size_t gpumd__web_nassets;

/* The embedded file called name, or NULL. */
const gpumd_web_asset_t *gpumd_web_find(const char *name);

/* Whether an If-None-Match header value (a list of entity tags, or "*") matches etag, by the
 * weak comparison RFC 9110 prescribes for If-None-Match. */
bool gpumd_web_etag_matches(const char *if_none_match, const char *etag);

/* Serves the dashboard if path is "/" or "/assets/..." and returns true (the request is
 * answered: 200, 304, 404, or 405 for a method other than GET and HEAD); false for any other
 * path. No token is needed: the files are the same public bytes in every gpumd of this build
 * and carry no data of the node; the page asks for a token when the API refuses it. */
bool gpumd_web_serve(struct gpumd_http *h, struct evhttp_request *req, const char *path);

#endif /* GPUMD_WEB_INTERNAL_H */
