/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The REST face (http_router.c, http_api.c, http_web.c, metrics.c): requests routed to the
 * ops, the dashboard and /metrics. Its internals, shared with the HTTP transport: http_internal.h.
 */
#ifndef GPUMD_REST_H
#define GPUMD_REST_H

#include "gpumd.h"

/* Renders the Prometheus text format 0.0.4 into out. Returns 0 or a negative code. */
int gpumd_metrics_render(gpumd_t *d, struct evbuffer *out);

struct evhttp_request;
/* http_router.c: evhttp's callback for every request (arg: the struct gpumd_http). */
void gpumd_rest_on_request(struct evhttp_request *req, void *arg);

#endif /* GPUMD_REST_H */
