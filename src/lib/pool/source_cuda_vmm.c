/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The "cuda-vmm" memory source of the pool allocator: CUDA virtual memory management, for
 * expandable segments. The pool reserves a range of device address space once (reserve:
 * cuMemAddressReserve) and then maps and unmaps physical memory inside it as it grows and
 * shrinks (map: cuMemCreate + cuMemMap + cuMemSetAccess; unmap: cuMemUnmap + cuMemRelease), so a
 * segment can grow in place and give back its tail without moving anything.
 *
 * Layout: physical memory is created one granule at a time (the device's recommended
 * allocation granularity, cuMemGetAllocationGranularity; 2 MiB on current GPUs and in the
 * simulator), each granule its own allocation handle mapped at its own address. Every
 * reservation keeps an array with one handle per granule of its range (0 = not mapped), so any
 * granule-aligned sub-range can be unmapped and its physical memory released, whatever ranges
 * it was mapped with; map and unmap sizes and addresses must be multiples of the granularity
 * (GPUM_EINVAL naming it otherwise). The physical memory of a granule is given back to the
 * driver at unmap (its handle is released then), so trimming shows up at once as free device
 * memory. Plain segments (alloc/free) are a reservation of the size rounded up to the
 * granularity, mapped whole, so the same source serves pools without expandable segments.
 *
 * Reservations are found by a walk of a short list: a pool with expandable segments holds one or
 * a few; the walk happens per segment operation, never per block.
 */
#include <stdio.h>
#include <stdlib.h>

#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/pool.h>
#include <gpum/size.h>

#include "pool/source_cuda_internal.h"

typedef struct reservation {
  CUdeviceptr base;
  size_t size; /* a multiple of the granularity */
  size_t ngran;
  bool plain;                            /* a segment from vmm_alloc */
  CUmemGenericAllocationHandle *handles; /* one per granule; 0 = not mapped */
  struct reservation *next;
} reservation_t;

typedef struct {
  size_t gran;
  CUmemAllocationProp prop;
  CUmemAccessDesc access;
  reservation_t *list;
} vmm_t;

static vmm_t *vmm_of(gpum__cuda_src_t *s) {
  return s->impl;
}

/* The reservation holding [addr, addr + size) (s->mu held). */
static reservation_t *res_find(vmm_t *v, CUdeviceptr addr, size_t size) {
  for (reservation_t *r = v->list; r; r = r->next) {
    if (addr >= r->base && addr - r->base <= r->size && size <= r->size - (addr - r->base))
      return r;
  }
  return NULL;
}

/* Unmaps and releases granules [first, first + n) of r where mapped. Keeps going after an
 * error and returns the first. */
static int unmap_granules(gpum__cuda_src_t *s, reservation_t *r, size_t first, size_t n) {
  vmm_t *v = vmm_of(s);
  int rc = 0;
  for (size_t i = first; i < first + n; i++) {
    if (!r->handles[i])
      continue;
    CUdeviceptr p = r->base + i * v->gran;
    int e = gpum__cuda_src_check(s, s->cu->cuMemUnmap(p, v->gran), "cuMemUnmap(0x%llx)",
                                 (unsigned long long)p);
    if (e == 0) {
      e = gpum__cuda_src_check(s, s->cu->cuMemRelease(r->handles[i]), "cuMemRelease");
      r->handles[i] = 0;
    }
    if (e && !rc)
      rc = e;
  }
  return rc;
}

/* Creates, maps and opens one granule (context entered, s->mu held). */
static int map_granule(gpum__cuda_src_t *s, reservation_t *r, size_t i) {
  vmm_t *v = vmm_of(s);
  CUdeviceptr p = r->base + i * v->gran;
  CUmemGenericAllocationHandle h = 0;
  char sz[GPUM_SIZE_BUFSZ];
  int rc = gpum__cuda_src_check(s, s->cu->cuMemCreate(&h, v->gran, &v->prop, 0), "cuMemCreate(%s)",
                                gpum_size_format(v->gran, sz, sizeof sz));
  if (rc)
    return rc;
  rc = gpum__cuda_src_check(s, s->cu->cuMemMap(p, v->gran, 0, h, 0), "cuMemMap(0x%llx)",
                            (unsigned long long)p);
  if (rc) {
    s->cu->cuMemRelease(h);
    return rc;
  }
  rc = gpum__cuda_src_check(s, s->cu->cuMemSetAccess(p, v->gran, &v->access, 1),
                            "cuMemSetAccess(0x%llx)", (unsigned long long)p);
  if (rc) {
    s->cu->cuMemUnmap(p, v->gran);
    s->cu->cuMemRelease(h);
    return rc;
  }
  r->handles[i] = h;
  return 0;
}

/* Checks that [addr, addr + size) is granule-aligned and inside a reservation (s->mu held). */
static int range_check(gpum__cuda_src_t *s, const char *op, CUdeviceptr addr, size_t size,
                       reservation_t **out) {
  vmm_t *v = vmm_of(s);
  char g[GPUM_SIZE_BUFSZ], sz[GPUM_SIZE_BUFSZ];
  gpum_size_format(v->gran, g, sizeof g);
  gpum_size_format(size, sz, sizeof sz);
  if (size == 0 || size % v->gran || addr % v->gran)
    return gpum_error(GPUM_EINVAL,
                      "cuda-vmm pool source: cannot %s %s at 0x%llx on CUDA device "
                      "%d: address and size must be multiples of the allocation granularity %s",
                      op, sz, (unsigned long long)addr, s->ordinal, g);
  *out = res_find(v, addr, size);
  if (!*out)
    return gpum_error(GPUM_EINVAL,
                      "cuda-vmm pool source: cannot %s %s at 0x%llx on CUDA device "
                      "%d: not inside a reserved range",
                      op, sz, (unsigned long long)addr, s->ordinal);
  return 0;
}

static int map_range(gpum__cuda_src_t *s, reservation_t *r, size_t first, size_t n) {
  for (size_t i = first; i < first + n; i++) {
    if (r->handles[i])
      return gpum_error(GPUM_EEXIST,
                        "cuda-vmm pool source: 0x%llx on CUDA device %d is already "
                        "mapped",
                        (unsigned long long)(r->base + i * vmm_of(s)->gran), s->ordinal);
  }
  for (size_t i = first; i < first + n; i++) {
    int rc = map_granule(s, r, i);
    if (rc) {
      unmap_granules(s, r, first, i - first); /* all or nothing */
      return rc;
    }
  }
  return 0;
}

/* The ops' bodies below run through gpum__cuda_src_run_locked: context entered, s->mu held. */

static int map_in(gpum__cuda_src_t *s, void *arg) {
  const gpum__cuda_src_seg_t *a = arg;
  reservation_t *r;
  int rc = range_check(s, "map", a->addr, a->size, &r);
  if (rc == 0)
    rc = map_range(s, r, (a->addr - r->base) / vmm_of(s)->gran, a->size / vmm_of(s)->gran);
  return rc;
}

static int vmm_map(void *ctx, gpum_devptr_t addr, size_t size) {
  return gpum__cuda_src_run_locked(ctx, map_in,
                                   &(gpum__cuda_src_seg_t){.addr = addr, .size = size});
}

static int unmap_in(gpum__cuda_src_t *s, void *arg) {
  const gpum__cuda_src_seg_t *a = arg;
  reservation_t *r;
  int rc = range_check(s, "unmap", a->addr, a->size, &r);
  size_t first = 0, n = 0;
  if (rc == 0) {
    first = (a->addr - r->base) / vmm_of(s)->gran;
    n = a->size / vmm_of(s)->gran;
    for (size_t i = first; i < first + n && rc == 0; i++) {
      if (!r->handles[i])
        rc = gpum_error(GPUM_EINVAL,
                        "cuda-vmm pool source: cannot unmap 0x%llx on CUDA device "
                        "%d: not mapped",
                        (unsigned long long)(r->base + i * vmm_of(s)->gran), s->ordinal);
    }
  }
  if (rc == 0)
    rc = unmap_granules(s, r, first, n);
  return rc;
}

static int vmm_unmap(void *ctx, gpum_devptr_t addr, size_t size) {
  return gpum__cuda_src_run_locked(ctx, unmap_in,
                                   &(gpum__cuda_src_seg_t){.addr = addr, .size = size});
}

/* Reserves address space (context entered). */
static int reserve_locked(gpum__cuda_src_t *s, size_t size, bool plain, reservation_t **out) {
  vmm_t *v = vmm_of(s);
  if (size == 0 || size > SIZE_MAX - v->gran)
    return gpum_error(GPUM_EINVAL, "cuda-vmm pool source: cannot reserve %zu bytes", size);
  size_t rounded = (size + v->gran - 1) / v->gran * v->gran;
  reservation_t *r = calloc(1, sizeof *r);
  CUmemGenericAllocationHandle *h = calloc(rounded / v->gran, sizeof *h);
  if (!r || !h) {
    free(r);
    free(h);
    return gpum_error(GPUM_ENOMEM, "cuda-vmm pool source: cannot allocate the table of a "
                                   "reservation");
  }
  char sz[GPUM_SIZE_BUFSZ];
  CUdeviceptr base = 0;
  int rc =
      gpum__cuda_src_check(s, s->cu->cuMemAddressReserve(&base, rounded, 0, 0, 0),
                           "cuMemAddressReserve(%s)", gpum_size_format(rounded, sz, sizeof sz));
  if (rc) {
    free(r);
    free(h);
    return rc;
  }
  *r = (reservation_t){.base = base,
                       .size = rounded,
                       .ngran = rounded / v->gran,
                       .plain = plain,
                       .handles = h,
                       .next = v->list};
  v->list = r;
  *out = r;
  return 0;
}

/* Unmaps what is still mapped, frees the address range and forgets r (s->mu held). */
static int unreserve_locked(gpum__cuda_src_t *s, reservation_t *r) {
  vmm_t *v = vmm_of(s);
  int rc = unmap_granules(s, r, 0, r->ngran);
  char sz[GPUM_SIZE_BUFSZ];
  int e = gpum__cuda_src_check(s, s->cu->cuMemAddressFree(r->base, r->size),
                               "cuMemAddressFree(0x%llx, %s)", (unsigned long long)r->base,
                               gpum_size_format(r->size, sz, sizeof sz));
  reservation_t **pp = &v->list;
  while (*pp != r)
    pp = &(*pp)->next;
  *pp = r->next;
  free(r->handles);
  free(r);
  return rc ? rc : e;
}

static int reserve_in(gpum__cuda_src_t *s, void *arg) {
  const gpum__cuda_src_seg_t *a = arg;
  reservation_t *r = NULL;
  int rc = reserve_locked(s, a->size, false, &r);
  if (rc == 0)
    *a->out = r->base;
  return rc;
}

static int vmm_reserve(void *ctx, size_t size, gpum_devptr_t *base) {
  return gpum__cuda_src_run_locked(ctx, reserve_in,
                                   &(gpum__cuda_src_seg_t){.size = size, .out = base});
}

/* The reservation starting at base (s->mu held). */
static reservation_t *res_at(vmm_t *v, CUdeviceptr base) {
  reservation_t *r = v->list;
  while (r && r->base != base)
    r = r->next;
  return r;
}

/* Failures are logged: unreserve has no error to return. */
static int unreserve_in(gpum__cuda_src_t *s, void *arg) {
  const gpum__cuda_src_seg_t *a = arg;
  reservation_t *r = res_at(vmm_of(s), a->addr);
  if (!r || r->plain)
    gpum_log(GPUM_LOG_WARN, "pool",
             "cuda-vmm source: unreserve of 0x%llx (%zu bytes): not a "
             "reservation",
             (unsigned long long)a->addr, a->size);
  else if (unreserve_locked(s, r) != 0)
    gpum_log(GPUM_LOG_WARN, "pool", "cuda-vmm source: %s", gpum_last_error());
  return 0;
}

static void vmm_unreserve(void *ctx, gpum_devptr_t base, size_t size) {
  (void)gpum__cuda_src_run_locked(ctx, unreserve_in,
                                  &(gpum__cuda_src_seg_t){.addr = base, .size = size});
}

static int alloc_in(gpum__cuda_src_t *s, void *arg) {
  const gpum__cuda_src_seg_t *a = arg;
  reservation_t *r = NULL;
  int rc = reserve_locked(s, a->size, true, &r);
  if (rc == 0) {
    rc = map_range(s, r, 0, r->ngran);
    if (rc == 0) {
      *a->out = r->base;
    } else {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", gpum_last_error());
      unreserve_locked(s, r);
      gpum_error(rc, "%s", msg);
    }
  }
  return rc;
}

static int vmm_alloc(void *ctx, size_t size, gpum_devptr_t *addr) {
  return gpum__cuda_src_run_locked(ctx, alloc_in,
                                   &(gpum__cuda_src_seg_t){.size = size, .out = addr});
}

static int free_in(gpum__cuda_src_t *s, void *arg) {
  const gpum__cuda_src_seg_t *a = arg;
  reservation_t *r = res_at(vmm_of(s), a->addr);
  if (!r || !r->plain)
    return gpum_error(GPUM_EINVAL,
                      "cuda-vmm pool source: free of 0x%llx (%zu bytes) on CUDA device "
                      "%d: not a segment of this source",
                      (unsigned long long)a->addr, a->size, s->ordinal);
  return unreserve_locked(s, r);
}

static int vmm_free(void *ctx, gpum_devptr_t addr, size_t size) {
  return gpum__cuda_src_run_locked(ctx, free_in,
                                   &(gpum__cuda_src_seg_t){.addr = addr, .size = size});
}

/* At destroy: gives back whatever the pools left behind (context entered). */
static void vmm_impl_free(gpum__cuda_src_t *s) {
  vmm_t *v = vmm_of(s);
  if (!v)
    return;
  if (v->list)
    gpum_log(GPUM_LOG_WARN, "pool",
             "cuda-vmm source on CUDA device %d destroyed with reserved "
             "address ranges left; giving them back",
             s->ordinal);
  while (v->list)
    unreserve_locked(s, v->list);
  free(v);
  s->impl = NULL;
}

static const char *const vmm_syms[] = {"cuMemAddressReserve",
                                       "cuMemAddressFree",
                                       "cuMemCreate",
                                       "cuMemRelease",
                                       "cuMemMap",
                                       "cuMemUnmap",
                                       "cuMemSetAccess",
                                       "cuMemGetAllocationGranularity"};

/* Checks the device and driver for virtual memory management and sets up v. */
static int vmm_setup(gpum__cuda_src_t *s, vmm_t *v) {
  gpum__cuda_t *cu = s->cu;
  const bool have[] = {cu->cuMemAddressReserve != NULL,
                       cu->cuMemAddressFree != NULL,
                       cu->cuMemCreate != NULL,
                       cu->cuMemRelease != NULL,
                       cu->cuMemMap != NULL,
                       cu->cuMemUnmap != NULL,
                       cu->cuMemSetAccess != NULL,
                       cu->cuMemGetAllocationGranularity != NULL};
  _Static_assert(sizeof have / sizeof have[0] == sizeof vmm_syms / sizeof vmm_syms[0], "");
  for (size_t i = 0; i < sizeof have / sizeof have[0]; i++) {
    if (!have[i])
      return gpum_error(GPUM_ENOTSUP,
                        "cuda-vmm pool source: the CUDA driver (%s) does not export "
                        "%s; use the 'cuda' source",
                        cu->path, vmm_syms[i]);
  }
  int supported = 0;
  int rc = gpum__cuda_src_check(
      s,
      cu->cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                               s->dev),
      "cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)");
  if (rc)
    return rc;
  if (!supported)
    return gpum_error(GPUM_ENOTSUP,
                      "cuda-vmm pool source: CUDA device %d does not support virtual "
                      "memory management (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED "
                      "is 0); use the 'cuda' source",
                      s->ordinal);
  v->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  v->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  v->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  v->prop.location.id = s->dev;
  v->access.location = v->prop.location;
  v->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  size_t min = 0, rec = 0;
  rc = gpum__cuda_src_check(
      s, cu->cuMemGetAllocationGranularity(&min, &v->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
      "cuMemGetAllocationGranularity(MINIMUM)");
  if (rc)
    return rc;
  if (cu->cuMemGetAllocationGranularity(&rec, &v->prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) !=
      CUDA_SUCCESS)
    rec = 0;
  if (min == 0)
    return gpum_error(GPUM_EDRIVER,
                      "cuda-vmm pool source: the CUDA driver reports an allocation "
                      "granularity of 0 for device %d",
                      s->ordinal);
  v->gran = rec && rec % min == 0 ? rec : min;
  return 0;
}

int gpum__pool_cuda_vmm_ops(int device, gpum_pool_source_ops_t *ops, void **ctx) {
  gpum__cuda_src_t *s;
  int rc = gpum__cuda_src_open("cuda-vmm", device, &s);
  if (rc)
    return rc;
  vmm_t *v = calloc(1, sizeof *v);
  if (!v) {
    gpum__cuda_src_close(s);
    return gpum_error(GPUM_ENOMEM, "cannot allocate the cuda-vmm pool source");
  }
  s->impl = v;
  s->impl_free = vmm_impl_free;
  if ((rc = vmm_setup(s, v)) != 0) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", gpum_last_error());
    gpum__cuda_src_close(s);
    return gpum_error(rc, "%s", msg);
  }
  *ops = (gpum_pool_source_ops_t){.name = "cuda-vmm",
                                  .alloc = vmm_alloc,
                                  .free = vmm_free,
                                  .reserve = vmm_reserve,
                                  .map = vmm_map,
                                  .unmap = vmm_unmap,
                                  .unreserve = vmm_unreserve};
  gpum__cuda_src_common_ops(ops);
  *ctx = s;
  return 0;
}

size_t gpum__pool_cuda_vmm_granularity(void *ctx) {
  return vmm_of(ctx)->gran;
}

int gpum_pool_source_cuda_vmm(int device, gpum_pool_source_t **out) {
  if (!out)
    return gpum_error(GPUM_EINVAL, "gpum_pool_source_cuda_vmm: out is NULL");
  *out = NULL;
  gpum_pool_source_ops_t ops;
  void *ctx;
  int rc = gpum__pool_cuda_vmm_ops(device, &ops, &ctx);
  return rc ? rc : gpum__cuda_src_finish(ctx, &ops, out);
}
