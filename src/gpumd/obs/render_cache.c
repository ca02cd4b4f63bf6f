/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rendered response bodies reused while nothing they show has changed (obs_internal.h):
 * /metrics and the REST status are rendered once per change and shared by the responses.
 */
#include <stdbool.h>
#include <stdlib.h>

#include <event2/buffer.h>

#include <gpum/error.h>

#include "obs_internal.h"
#include "os_internal.h"
#include "obs.h"

/* A rendering shared by the responses that send it: evbuffer_add_reference points each
 * response at the same bytes (no copy per request), and the last reference frees it. All on
 * the loop thread. */
struct gpumd_render_blob {
  size_t refs;
  size_t len;
  char data[];
};

static void blob_unref(struct gpumd_render_blob *b) {
  if (b && --b->refs == 0)
    free(b);
}

static void blob_cleanup(const void *data, size_t len, void *arg) {
  (void)data, (void)len;
  blob_unref(arg);
}

void gpumd_render_cache_free(gpumd_render_cache_t *c) {
  blob_unref(c->blob);
  c->blob = NULL;
}

/* Renders into a new blob that becomes the cache. */
static int refresh(gpumd_t *d, gpumd_render_cache_t *c, gpumd_render_fn fn) {
  struct evbuffer *tmp = evbuffer_new();
  if (!tmp)
    return gpum_error(GPUM_ENOMEM, "out of memory rendering a response");
  int rc = fn(d, tmp);
  size_t n = evbuffer_get_length(tmp);
  struct gpumd_render_blob *b = rc == 0 ? malloc(sizeof *b + n) : NULL;
  if (rc == 0 && !b)
    rc = gpum_error(GPUM_ENOMEM, "out of memory rendering a response");
  if (rc == 0) {
    b->refs = 1;
    b->len = n;
    evbuffer_remove(tmp, b->data, n);
    gpumd_render_cache_free(c);
    c->blob = b;
    c->generation = d->obs->generation;
    c->clients = d->conn_count;
    c->rendered_ns = gpum__os_mono_ns();
  }
  evbuffer_free(tmp);
  return rc;
}

/* Requests come far more often than changes (a new sample each monitor interval): a body is
 * rendered once per change (struct gpumd_obs.generation, plus the client count, which has no
 * hook) and shared by the responses otherwise. On a busy node everything changes all the
 * time (each reserve and release): there max_age_ns bounds the renderings to one per max_age,
 * so a reader that scrapes without pause costs the loop one rendering per max_age, not one per
 * scrape. A cached body is a whole rendering made in one go on the loop: it shows one state,
 * at most max_age old. */
int gpumd_render_cached(gpumd_t *d, gpumd_render_cache_t *c, gpumd_render_fn fn,
                        uint64_t max_age_ns, struct evbuffer *out) {
  if (!d->obs)
    return fn(d, out);
  bool current = c->blob && c->generation == d->obs->generation && c->clients == d->conn_count;
  if (!current && c->blob && max_age_ns > 0)
    current = gpum__os_mono_ns() - c->rendered_ns < max_age_ns;
  if (!current) {
    int rc = refresh(d, c, fn);
    if (rc != 0)
      return rc;
  }
  struct gpumd_render_blob *b = c->blob;
  b->refs++;
  if (evbuffer_add_reference(out, b->data, b->len, blob_cleanup, b) != 0) {
    b->refs--;
    return gpum_error(GPUM_ENOMEM, "out of memory sending a response");
  }
  return 0;
}
