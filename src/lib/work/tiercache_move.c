/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tiered cache's tiers (gpum/tiercache.h): their pools, making room in a tier, and moving
 * entries between tiers.
 *
 * Making room in tier t for n bytes: while the tier's byte limit would be passed, its coldest
 * movable entry goes one tier down (or, from the lowest tier, is evicted); then the pool
 * allocates, and each failure of the allocation (the device is short: another process took the
 * memory, or the simulated driver's fail-after fault) moves one more entry down and tries again
 * until nothing is left to move. Moving down cascades: room in the pinned tier may push its
 * coldest entries to the host tier, whose coldest may be evicted. An entry being placed or moved
 * is marked busy so that the room made for it is never made by moving it. A promotion swaps: the
 * bytes of the entry going up count as free in its tier while the device makes room for it.
 *
 * Copies to and from the device use cuMemcpyHtoDAsync_v2 / cuMemcpyDtoHAsync_v2 on the cache's
 * own non-blocking stream, followed by cuStreamSynchronize: a device block is freed only after
 * its bytes arrived in host memory. The driver calls run in the device's primary context, made
 * current for the call and the caller's context put back.
 */
#include <stdint.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/log.h>
#include <gpum/tiercache.h>

#include "work/tiercache_internal.h"

/* ---- the tiers' pools and the stream ------------------------------------------------------ */

static int open_pool(gpum_tiercache_t *c, gpum_tier_t t, const char *name) {
  gpum_pool_opts_t po;
  gpum_pool_opts_init(&po);
  po.name = name;
  po.device = c->o.device;
  return gpum_pool_create(c->t[t].src, &po, &c->t[t].pool);
}

int gpum__tc_open_tiers(gpum_tiercache_t *c) {
  int rc = gpum__cuda_src_open("tiercache", c->o.device, &c->cu);
  if (rc)
    return rc;
  CUcontext prev;
  if ((rc = gpum__cuda_src_enter(c->cu, &prev)) == 0) {
    rc = gpum__cuda_src_check(c->cu, c->cu->cu->cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING),
                              "cuStreamCreate");
    gpum__cuda_src_leave(c->cu, prev);
  }
  if (rc)
    goto out;
  if ((rc = gpum_pool_source_cuda(c->o.device, &c->t[GPUM_TIER_DEVICE].src)) != 0 ||
      (rc = open_pool(c, GPUM_TIER_DEVICE, "tiercache-device")) != 0)
    goto out;
  if ((rc = gpum_pool_source_pinned(&c->t[GPUM_TIER_PINNED].src)) != 0 ||
      (rc = open_pool(c, GPUM_TIER_PINNED, "tiercache-pinned")) != 0)
    goto out;
  c->ntiers = 2;
  if (c->o.host_limit) {
    if ((rc = gpum_pool_source_host(&c->t[GPUM_TIER_HOST].src)) != 0 ||
        (rc = open_pool(c, GPUM_TIER_HOST, "tiercache-host")) != 0)
      goto out;
    c->ntiers = 3;
  }
  return 0;
out:
  gpum__tc_close_tiers(c);
  return rc;
}

void gpum__tc_close_tiers(gpum_tiercache_t *c) {
  for (int t = GPUM_TIER_COUNT - 1; t >= 0; t--) {
    if (c->t[t].pool)
      gpum_pool_destroy(c->t[t].pool);
    if (c->t[t].src)
      gpum_pool_source_destroy(c->t[t].src);
    c->t[t].pool = NULL;
    c->t[t].src = NULL;
  }
  if (c->cu && c->stream) {
    CUcontext prev;
    if (gpum__cuda_src_enter(c->cu, &prev) == 0) {
      c->cu->cu->cuStreamDestroy_v2(c->stream);
      gpum__cuda_src_leave(c->cu, prev);
    }
  }
  c->stream = NULL;
  gpum__cuda_src_close(c->cu);
  c->cu = NULL;
}

/* ---- copies ------------------------------------------------------------------------------- */

/* n bytes from src to dst, each host memory or the cache's device: memcpy between host memory,
 * else the driver (async on the stream where it can, then synchronised). */
static int copy(gpum_tiercache_t *c, bool dst_dev, uintptr_t dst, bool src_dev, uintptr_t src,
                size_t n) {
  if (!dst_dev && !src_dev) {
    memcpy((void *)dst, (const void *)src, n);
    return 0;
  }
  const gpum__cuda_t *cu = c->cu->cu;
  if (dst_dev && src_dev && !cu->cuMemcpyDtoD_v2)
    return gpum_error(GPUM_ENOTSUP, "the CUDA driver has no cuMemcpyDtoD_v2");
  CUcontext prev;
  int rc = gpum__cuda_src_enter(c->cu, &prev);
  if (rc)
    return rc;
  CUresult r;
  const char *what;
  bool async = false;
  if (dst_dev && src_dev) {
    what = "cuMemcpyDtoD_v2";
    r = cu->cuMemcpyDtoD_v2(dst, src, n);
  } else if (dst_dev) {
    what = "cuMemcpyHtoDAsync_v2";
    async = cu->cuMemcpyHtoDAsync_v2 != NULL;
    r = async ? cu->cuMemcpyHtoDAsync_v2(dst, (const void *)src, n, c->stream)
              : cu->cuMemcpyHtoD_v2(dst, (const void *)src, n);
  } else {
    what = "cuMemcpyDtoHAsync_v2";
    async = cu->cuMemcpyDtoHAsync_v2 != NULL;
    r = async ? cu->cuMemcpyDtoHAsync_v2((void *)dst, src, n, c->stream)
              : cu->cuMemcpyDtoH_v2((void *)dst, src, n);
  }
  rc = gpum__cuda_src_check(c->cu, r, "%s of %zu bytes", what, n);
  if (rc == 0 && async)
    rc = gpum__cuda_src_check(c->cu, cu->cuStreamSynchronize(c->stream), "cuStreamSynchronize");
  gpum__cuda_src_leave(c->cu, prev);
  return rc;
}

int gpum__tc_copy_in(gpum_tiercache_t *c, gpum_tier_t t, gpum_devptr_t dst, gpum__tc_buf_t src,
                     size_t size) {
  return copy(c, t == GPUM_TIER_DEVICE, (uintptr_t)dst, src.device, src.addr, size);
}

int gpum__tc_copy_out(gpum_tiercache_t *c, gpum_tier_t t, gpum_devptr_t src, gpum__tc_buf_t dst,
                      size_t size) {
  return copy(c, dst.device, dst.addr, t == GPUM_TIER_DEVICE, (uintptr_t)src, size);
}

/* ---- moving entries ----------------------------------------------------------------------- */

gpum__tc_entry_t *gpum__tc_victim(gpum_tiercache_t *c, gpum_tier_t t) {
  for (gpum__tc_entry_t *e = c->t[t].tail; e; e = e->prev)
    if (!e->pins && !e->busy)
      return e;
  return NULL;
}

static void evict(gpum_tiercache_t *c, gpum__tc_entry_t *e) {
  c->st.tier[e->tier].evictions++;
  if (c->o.on_evict)
    c->o.on_evict(e->key, e->klen, e->size, c->o.user);
  gpum__tc_drop(c, e);
}

/* e's bytes now at dst in tier to; its old block is freed. */
static void rehome(gpum_tiercache_t *c, gpum__tc_entry_t *e, gpum_tier_t to, gpum_devptr_t dst) {
  gpum_tier_t from = e->tier;
  gpum__tc_list_unlink(c, e);
  if (gpum_pool_free(c->t[from].pool, e->addr) != 0)
    gpum_log(GPUM_LOG_WARN, "tiercache", "freeing a %s block: %s", gpum_tier_name(from),
             gpum_last_error());
  e->addr = dst;
  gpum__tc_list_push(c, e, to);
}

/* Copies n bytes from a block of tier from to one of tier to. */
static int move_bytes(gpum_tiercache_t *c, gpum_tier_t from, gpum_devptr_t src, gpum_tier_t to,
                      gpum_devptr_t dst, size_t n) {
  if (from == GPUM_TIER_DEVICE)
    return gpum__tc_copy_out(c, from, src, GPUM__TC_HOST(dst), n);
  return gpum__tc_copy_in(c, to, dst, GPUM__TC_HOST(src), n);
}

int gpum__tc_demote(gpum_tiercache_t *c, gpum__tc_entry_t *e) {
  gpum_tier_t from = e->tier;
  bool was_busy = e->busy;
  e->busy = true;
  int rc = GPUM_ENOSPC;
  for (int t = (int)from + 1; t < c->ntiers; t++) {
    gpum_devptr_t dst;
    rc = gpum__tc_alloc(c, (gpum_tier_t)t, e->size, &dst);
    if (rc == GPUM_ENOSPC || rc == GPUM_EDEVOOM)
      continue;
    if (rc)
      break;
    if ((rc = move_bytes(c, from, e->addr, (gpum_tier_t)t, dst, e->size)) != 0) {
      gpum_pool_free(c->t[t].pool, dst);
      break;
    }
    rehome(c, e, (gpum_tier_t)t, dst);
    c->st.tier[from].demotions++;
    break;
  }
  e->busy = was_busy;
  if (rc == GPUM_ENOSPC || rc == GPUM_EDEVOOM) { /* no lower tier can hold it */
    evict(c, e);
    return 0;
  }
  return rc;
}

/* Moves e one step out of tier t to make room there: down a tier, or out of the cache. */
static int make_room(gpum_tiercache_t *c, gpum__tc_entry_t *e) {
  if ((int)e->tier == c->ntiers - 1) {
    evict(c, e);
    return 0;
  }
  return gpum__tc_demote(c, e);
}

int gpum__tc_alloc(gpum_tiercache_t *c, gpum_tier_t t, size_t size, gpum_devptr_t *addr) {
  uint64_t limit = c->st.tier[t].limit;
  int rc;
  if (limit && size > limit)
    return GPUM_ENOSPC;
  /* Pinned entries never move: when they leave too little of the budget, demoting the others
   * would not make room, only lose their places. */
  if (limit && t == GPUM_TIER_DEVICE && c->pinned_bytes + size > limit)
    return GPUM_ENOSPC;
  /* An entry being promoted out of t still counts in its bytes: the room it will leave is room
   * now, so the entries its promotion demotes into t swap places with it (gpum__tc_promote). */
  while (limit && c->st.tier[t].bytes + size > limit + c->leaving[t]) {
    gpum__tc_entry_t *v = gpum__tc_victim(c, t);
    if (!v)
      return GPUM_ENOSPC;
    if ((rc = make_room(c, v)) != 0)
      return rc;
  }
  for (;;) {
    rc = gpum_pool_alloc(c->t[t].pool, size, 0, addr);
    if (rc != GPUM_EDEVOOM && rc != GPUM_ENOMEM)
      return rc;
    if (t == GPUM_TIER_DEVICE)
      c->st.alloc_failures++;
    gpum__tc_entry_t *v = gpum__tc_victim(c, t);
    if (!v)
      return t == GPUM_TIER_DEVICE ? GPUM_EDEVOOM : GPUM_ENOSPC;
    if ((rc = make_room(c, v)) != 0)
      return rc;
  }
}

/* Brings tier t back within its limit after a promotion out of it failed (the entries it
 * demoted into t stay there): its coldest movable entries go further down, or are evicted from
 * the lowest tier, which is then full indeed. */
static void settle(gpum_tiercache_t *c, gpum_tier_t t) {
  uint64_t limit = c->st.tier[t].limit;
  while (limit && c->st.tier[t].bytes > limit) {
    gpum__tc_entry_t *v = gpum__tc_victim(c, t);
    if (!v || make_room(c, v) != 0) {
      gpum_log(GPUM_LOG_WARN, "tiercache", "the %s tier stays over its limit: %s",
               gpum_tier_name(t), v ? gpum_last_error() : "nothing left to move");
      return;
    }
  }
}

/* A promotion is a swap: while it makes room on the device, e's bytes count as leaving its tier
 * (c->leaving), so the device entries it demotes may take e's place there instead of pushing
 * that tier's own entries down or out before e has gone. Should the promotion fail after all,
 * the tier may hold more than its limit: settle moves the excess down. */
int gpum__tc_promote(gpum_tiercache_t *c, gpum__tc_entry_t *e) {
  gpum_tier_t from = e->tier;
  bool was_busy = e->busy;
  e->busy = true;
  c->leaving[from] += e->size;
  gpum_devptr_t dst;
  int rc = gpum__tc_alloc(c, GPUM_TIER_DEVICE, e->size, &dst);
  if (rc == 0 && (rc = move_bytes(c, from, e->addr, GPUM_TIER_DEVICE, dst, e->size)) != 0)
    gpum_pool_free(c->t[GPUM_TIER_DEVICE].pool, dst);
  c->leaving[from] -= e->size;
  if (rc == 0) {
    rehome(c, e, GPUM_TIER_DEVICE, dst);
    c->st.tier[from].promotions++;
  } else {
    settle(c, from); /* e still busy: it stays */
  }
  e->busy = was_busy;
  return rc;
}
