/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the REST face's files share: the GPU configuration a caller describes (gpum's allocate
 * body, or the seed's TrainingGPUConfig: gpu_count, gpu_type, memory_gb,
 * distributed_training, mixed_precision, gpu_memory_fraction), decoded once (http_api.c) for
 * validate, allocate and the framework set-ups (http_setup.c).
 */
#ifndef GPUMD_REST_INTERNAL_H
#define GPUMD_REST_INTERNAL_H

#include <stdbool.h>

#include <jansson.h>

#include "gpumd.h"
#include "http_internal.h"
#include "ops.h"

/* Who acts in an HTTP call (http_api.c). */
gpumd_actor_t gpumd_rest_actor(const gpumd_http_call_t *call);

typedef struct {
  double memory_gb;     /* as asked */
  const char *gpu_type; /* as asked (borrowed from the body), or NULL */
  bool distributed, has_distributed;
  bool mixed, has_mixed;
  double fraction; /* gpu_memory_fraction, (0, 1]; 1 unless given */
  bool has_fraction;
  bool whole_card; /* memory_gb named a card's class: what it can grant is reserved */
  char note[256];  /* then, what is reserved and why */
} gpumd_rest_config_t;

/* The configuration's own fields of body (distributed_training, mixed_precision,
 * gpu_memory_fraction) into cfg. Returns 0 or GPUM_EINVAL with the detail. */
int gpumd_rest_config_extras(json_t *body, gpumd_rest_config_t *cfg);
/* Decodes a body (allocate's fields; with setup, also "master_port") into req and cfg, and
 * reads "memory_gb" as the seed means it (a number up to a card's class asks for that card:
 * its capacity is reserved, cfg->note says so). Returns 0 or GPUM_EINVAL with the detail. */
int gpumd_rest_config_decode(gpumd_t *d, json_t *body, bool setup, gpumd_reserve_req_t *req,
                             gpumd_rest_config_t *cfg);
/* {"gpu_count", "gpu_type", "memory_gb", "distributed_training", ["mixed_precision",]
 * ["gpu_memory_fraction",] "reserved_bytes_per_gpu", ["note"]}: what was asked, and what gpum
 * reserves for it. NULL when out of memory. */
json_t *gpumd_rest_config_json(const gpumd_reserve_req_t *req, const gpumd_rest_config_t *cfg);

#endif /* GPUMD_REST_INTERNAL_H */
