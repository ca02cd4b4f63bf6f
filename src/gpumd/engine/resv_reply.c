/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reply {"reservation": R} of a socket reserve or release, written straight from the
 * engine's reservation (gpumd_engine_resv_write) without building it.
 */
#include "engine.h"
#include "gpumd.h"
#include "json_out.h"
#include "net.h"

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
    gpumd_reply_oom(c, id);
}
