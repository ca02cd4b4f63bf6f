/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory sources: the small interface between the pool and whatever gives it memory. A source
 * is a copy of the caller's operations plus their context; the constructors for the built-in
 * sources live beside this file (source_host.c, source_sim.c, source_cuda*.c), and
 * gpum_pool_source_open picks one by name.
 */
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>

#include "pool/pool_internal.h"

int gpum_pool_source_custom(const gpum_pool_source_ops_t *ops, void *ctx,
                            gpum_pool_source_t **out) {
  if (out == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_pool_source_custom: out is NULL");
  *out = NULL;
  if (ops == NULL || ops->alloc == NULL || ops->free == NULL)
    return gpum_error(GPUM_EINVAL, "pool source '%s': alloc and free are required",
                      ops && ops->name ? ops->name : "custom");
  const char *name = ops->name ? ops->name : "custom";
  int vmm = !!ops->reserve + !!ops->map + !!ops->unmap + !!ops->unreserve;
  if (vmm != 0 && vmm != 4)
    return gpum_error(GPUM_EINVAL,
                      "pool source '%s': give all of reserve, map, unmap and unreserve, or none",
                      name);
  int ev = !!ops->event_record + !!ops->event_query + !!ops->event_destroy;
  if (ev != 0 && ev != 3)
    return gpum_error(GPUM_EINVAL,
                      "pool source '%s': give all of event_record, event_query and "
                      "event_destroy, or none",
                      name);
  if (strlen(name) >= sizeof(((gpum_pool_source_t *)0)->name))
    return gpum_error(GPUM_EINVAL, "pool source name '%.64s' is too long (at most %zu bytes)", name,
                      sizeof(((gpum_pool_source_t *)0)->name) - 1);
  gpum_pool_source_t *src = calloc(1, sizeof(*src));
  if (src == NULL)
    return gpum_error(GPUM_ENOMEM, "out of host memory for a pool source");
  src->ops = *ops;
  src->ctx = ctx;
  memcpy(src->name, name, strlen(name) + 1);
  src->ops.name = src->name;
  *out = src;
  return 0;
}

int gpum_pool_source_open(const char *name, int device, uint64_t capacity,
                          gpum_pool_source_t **out) {
  if (out == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_pool_source_open: out is NULL");
  *out = NULL;
  if (name == NULL)
    return gpum_error(GPUM_EINVAL, "no pool source named");
  if (strcmp(name, "cuda") == 0)
    return gpum_pool_source_cuda(device, out);
  if (strcmp(name, "cuda-vmm") == 0)
    return gpum_pool_source_cuda_vmm(device, out);
  if (strcmp(name, "pinned") == 0)
    return gpum_pool_source_pinned(out);
  if (strcmp(name, "host") == 0)
    return gpum_pool_source_host(out);
  if (strcmp(name, "simulated") == 0)
    return gpum_pool_source_simulated(capacity, out);
  return gpum_error(GPUM_EINVAL,
                    "unknown pool source '%s' (use cuda, cuda-vmm, pinned, host or simulated)",
                    name);
}

void gpum_pool_source_destroy(gpum_pool_source_t *src) {
  if (src == NULL)
    return;
  if (src->ops.destroy != NULL)
    src->ops.destroy(src->ctx);
  free(src);
}

const char *gpum_pool_source_name(const gpum_pool_source_t *src) {
  return src ? src->name : "";
}
