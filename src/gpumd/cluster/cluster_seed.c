/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster's GPU nodes as the seed's node entries (cluster.h): what the REST face lists
 * beside this node for users of the GPU manager REST API described in docs/rest.md. Pure: no
 * lock, no I/O; the cache's copy is cluster.c's.
 */
#include <string.h>
#include <strings.h>

#include <gpum/error.h>

#include "cluster.h"
#include "slurm/slurm_internal.h"

/* One entry: a node's GPUs of one type. */
static json_t *entry(const gpum_slurm_node_t *node, const gpum_slurm_gpus_t *g) {
  unsigned gb = gpum__slurm_type_memory_gb(g->type);
  uint32_t avail = node->usable ? g->total - g->used : 0;
  return json_pack("{s:s, s:s?, s:I, s:o, s:n, s:I, s:I, s:s, s:s}", "node_name", node->name,
                   "gpu_type", g->type[0] ? g->type : NULL, "available_gpus", (json_int_t)avail,
                   "memory_per_gpu", gb ? json_real(gb) : json_null(), "utilization", "gpus_total",
                   (json_int_t)g->total, "gpus_used", (json_int_t)g->used, "state", node->state,
                   "source", "slurm");
}

json_t *gpumd_cluster_seed_json(const gpum_slurm_node_t *nodes, size_t n, const char *skip,
                                const char *gpu_type, double min_memory_gb, unsigned min_gpus) {
  json_t *out = json_array();
  if (!out)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    if (skip && !strcasecmp(nodes[i].name, skip))
      continue;
    for (size_t j = 0; j < nodes[i].ntypes && j < GPUM_SLURM_NODE_TYPES_MAX; j++) {
      const gpum_slurm_gpus_t *g = &nodes[i].gpus[j];
      if (gpu_type && *gpu_type && !gpum__slurm_type_match(gpu_type, g->type))
        continue;
      unsigned gb = gpum__slurm_type_memory_gb(g->type);
      if (min_memory_gb > 0 && (gb == 0 || gb < min_memory_gb))
        continue;
      if (min_gpus > 0 && (!nodes[i].usable || g->total - g->used < min_gpus))
        continue;
      if (json_array_append_new(out, entry(&nodes[i], g)) != 0) {
        json_decref(out);
        return NULL;
      }
    }
  }
  return out;
}
