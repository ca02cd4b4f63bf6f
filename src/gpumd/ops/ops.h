/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The requests (ops.c, admin.c): each op core checks a request, asks the engine, and returns
 * its reply's body; both faces (proto.c, the REST API) call them.
 */
#ifndef GPUMD_OPS_H
#define GPUMD_OPS_H

#include "gpumd.h"

int gpumd_op_status(gpumd_t *d, const gpumd_actor_t *a, json_t *req, json_t **out);
int gpumd_op_list(gpumd_t *d, const gpumd_actor_t *a, json_t *req, json_t **out);
int gpumd_op_reserve(gpumd_t *d, const gpumd_actor_t *a, json_t *req, json_t **out);
/* A dry run of reserve (nothing changes): {"could_fit", "fits_now", "queue_first", "devices",
 * "reason"}. */
int gpumd_op_check(gpumd_t *d, const gpumd_actor_t *a, json_t *req, json_t **out);
int gpumd_op_release(gpumd_t *d, const gpumd_actor_t *a, json_t *req, json_t **out);
int gpumd_op_renew(gpumd_t *d, const gpumd_actor_t *a, json_t *req, json_t **out);
int gpumd_op_resize(gpumd_t *d, const gpumd_actor_t *a, json_t *j, json_t **out);
int gpumd_op_report(gpumd_t *d, const gpumd_actor_t *a, json_t *j, json_t **out);
/* The operator's switch (admin.c): {"device": index or UUID, "reason"} makes the device
 * DISABLED (no new grants on it; grants there keep running), stored in the ledger so that it
 * survives restarts; "enable" {"device"} gives it back to the health rules. Admins only
 * (EPERM). Reply: {"device": D} as in status. */
int gpumd_op_disable(gpumd_t *d, const gpumd_actor_t *a, json_t *req, json_t **out);
int gpumd_op_enable(gpumd_t *d, const gpumd_actor_t *a, json_t *req, json_t **out);
/* Dispatches a parsed request (an object with a valid op). */
void gpumd_op_dispatch(gpumd_conn_t *c, json_t *id, const char *op, json_t *req);

#endif /* GPUMD_OPS_H */
