/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster's GPU nodes as Slurm knows them (cluster.c, cluster_seed.c), for the REST face's
 * node listing: a cached copy of libgpum's gpum_slurm_gpu_nodes, refreshed every
 * cluster.slurm_refresh on a thread of its own.
 *
 * Each refresh runs the query in a child process, gpumd itself started again with
 * GPUMD_CLUSTER_QUERY_ARG, which prints the nodes as one JSON document and exits: libslurm
 * ends the process that calls it when slurm.conf cannot be parsed, keeps what it read of
 * slurm.conf for the life of the process, and may wait tens of seconds for a controller that
 * does not answer. In a child none of that reaches gpumd: a child that has not answered within
 * GPUMD_CLUSTER_QUERY_TIMEOUT_MS is killed, and each refresh reads slurm.conf afresh. The loop
 * thread never waits on Slurm: it only copies the cache under its lock.
 *
 * The cache keeps the last list that was read while later refreshes fail; once that list is
 * older than three refresh intervals, and at least GPUMD_CLUSTER_STALE_MS, it is no longer
 * shown.
 */
#ifndef GPUMD_CLUSTER_H
#define GPUMD_CLUSTER_H

#include <gpum/slurm.h>

#include "gpumd.h"

#define GPUMD_CLUSTER_QUERY_ARG "--slurm-nodes-query"
#define GPUMD_CLUSTER_QUERY_TIMEOUT_MS 30000
#define GPUMD_CLUSTER_STALE_MS 90000

/* Starts the refresh thread when cluster.slurm_refresh is not 0 and a slurm.conf is found
 * (gpum_slurm_conf_path); logs why at info level when it does not start. The thread ends
 * itself, logging why, when Slurm is not available (GPUM_ENOTSUP: no libslurm.so.38) before
 * any query succeeded; other failures (slurmctld not answering, a slurm.conf gone or broken)
 * are logged as warnings when their reason changes and retried at the next refresh. Returns 0 (also
 * when nothing starts), or GPUM_ENOMEM. */
int gpumd_cluster_start(gpumd_t *d);

/* Stops the thread (a query running then is killed) and frees the cache. d->cluster may be
 * NULL. */
void gpumd_cluster_stop(gpumd_t *d);

/* The seed's node entries (docs/rest.md, nodes) for the cached cluster nodes, one per node and
 * GPU type: {"node_name", "gpu_type", "available_gpus", "memory_per_gpu", "utilization": null,
 * "gpus_total", "gpus_used", "state", "source": "slurm"}; see gpumd_cluster_seed_json for the
 * fields and filters. The Slurm node named as this host (its name up to the first dot) is left
 * out: the caller lists the local node from its own devices. An empty array when the listing
 * is off, Slurm is not available, or nothing was read yet or lately. Returns a new reference
 * (the caller json_decref's it); NULL only when out of memory. On the loop thread; takes the
 * cache's lock only to copy the list. */
json_t *gpumd_cluster_seed_nodes(gpumd_t *d, const char *gpu_type, double min_memory_gb,
                                 unsigned min_gpus);

/* The seed's node entries for nodes[0..n), in their order, without the node named skip (NULL:
 * none), for those GPU types that gpu_type names (NULL or "": all; matched as
 * gpum__slurm_type_match does: a family without case, "V100" names "v100" and "tesla_v100",
 * "A10" never "a100"; a shell pattern when it has *, ? or [): "node_name" the Slurm node,
 * "gpu_type" its gres type (null for an untyped gres), "gpus_total" and "gpus_used" its counts,
 * "available_gpus" the GPUs free (gpus_total - gpus_used) on a node Slurm may place jobs on,
 * else 0, "memory_per_gpu" the GB the type's name states ("a100_80gb" -> 80) or null,
 * "utilization" null (Slurm does not measure it), "state" Slurm's state ("idle", "mixed",
 * "allocated", "down+drain", ...) and "source" "slurm". min_memory_gb > 0 leaves out the
 * entries whose memory_per_gpu is below it or not known; min_gpus > 0 those with fewer
 * available GPUs. A new array (the caller json_decref's it); NULL only when out of memory.
 * Thread-safe (pure). */
json_t *gpumd_cluster_seed_json(const gpum_slurm_node_t *nodes, size_t n, const char *skip,
                                const char *gpu_type, double min_memory_gb, unsigned min_gpus);

/* gpumd started as `gpumd GPUMD_CLUSTER_QUERY_ARG`: runs gpum_slurm_gpu_nodes and prints
 * {"rc": 0, "nodes": [{"name", "state", "usable", "real_memory_mib", "gpus": [{"type",
 * "total", "used"}]}]} or {"rc": CODE, "error": "..."} as one line on stdout. Returns the exit
 * status (0 when the line was written). */
int gpumd_cluster_query_main(void);

#endif /* GPUMD_CLUSTER_H */
