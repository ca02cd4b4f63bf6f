/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The socket protocol's face (proto.c): a line checked, parsed and handed to the ops.
 */
#ifndef GPUMD_PROTO_H
#define GPUMD_PROTO_H

#include "gpumd.h"

/* Handles one complete line from c (without the newline). */
void gpumd_proto_line(gpumd_conn_t *c, const char *line, size_t len);

#endif /* GPUMD_PROTO_H */
