/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libgpum's Slurm internals shared with gpumd and the unit tests: the parsers of the strings
 * Slurm's node information holds (gres.c) and the matching of GPU types as users write them
 * against Slurm's gres types.
 */
#ifndef GPUM_SLURM_INTERNAL_H
#define GPUM_SLURM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/slurm.h>

/* The GPU types of a node from its gres and gres_used strings, as node_info_t holds them:
 * comma-separated "NAME[:TYPE][:no_consume]:COUNT[(...)]" entries ("gpu:a100:4(S:0-1),
 * shard:150(S:0-1)"; gres_used "gpu:a100:2(IDX:0-1),shard:0(0/75,0/75)"); the parenthesised
 * parts may hold commas of their own. Only entries named "gpu" count; COUNT may end in K, M,
 * G (x1024 each); a missing COUNT is 1; a TYPE of "(null)" is none (""). Entries of one type
 * are summed. used is the gres_used count of the same type (an untyped used count goes to a
 * node's only type), capped at the total. Writes at most max types to out and their number to
 * *n (more types are left out). NULL, "" and "(null)" are empty strings (*n 0). Returns 0, or
 * GPUM_EPARSE (the detail says which entry) for an entry that is not of that form.
 * Thread-safe. */
int gpum__slurm_gres_parse(const char *gres, const char *gres_used, gpum_slurm_gpus_t *out,
                           size_t max, size_t *n);

/* Whether a request's GPU type filter ("V100", "a100-80gb", "A100*") names a Slurm gres type
 * ("tesla_v100", "a100_80gb_hbm3"): libgpum's one rule, gpum_gpu_type_matches (gpum/gputype.h:
 * a family without case, so "A10" never matches "a100"; shell patterns; vendors). NULL or ""
 * matches every type. Thread-safe. */
bool gpum__slurm_type_match(const char *filter, const char *type);

/* The memory a gres type states, in GB, as gpum_gpu_type_parse reads it ("h100_80gb_hbm3" ->
 * 80, "tesla_v100-sxm2-32gb" -> 32); 0 when it states none. */
unsigned gpum__slurm_type_memory_gb(const char *type);

#endif /* GPUM_SLURM_INTERNAL_H */
