/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host source: anonymous mmap'd memory, for pools of plain host memory and for tests that
 * want real addresses. Reserve/map/unmap are offered too (an inaccessible reservation whose
 * pages are made read-write and given back with madvise), so expandable segments work on the
 * host. mem_info reports the machine's physical and available memory.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gpum/error.h>

#include "pool/pool_internal.h"

static int host_error(const char *what, size_t size) {
  int e = errno;
  return gpum_error(e == ENOMEM ? GPUM_EDEVOOM : GPUM_EIO, "host source: %s of %zu bytes: %s", what,
                    size, strerror(e));
}

static int host_alloc(void *ctx, size_t size, gpum_devptr_t *addr) {
  (void)ctx;
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return host_error("mmap", size);
  *addr = (gpum_devptr_t)(uintptr_t)p;
  return 0;
}

static int host_free(void *ctx, gpum_devptr_t addr, size_t size) {
  (void)ctx;
  if (munmap((void *)(uintptr_t)addr, size) != 0)
    return host_error("munmap", size);
  return 0;
}

static int host_mem_info(void *ctx, uint64_t *free_bytes, uint64_t *total_bytes) {
  (void)ctx;
  long page = sysconf(_SC_PAGESIZE), total = sysconf(_SC_PHYS_PAGES),
       avail = sysconf(_SC_AVPHYS_PAGES);
  if (page <= 0 || total <= 0 || avail < 0)
    return gpum_error(GPUM_EIO, "host source: cannot read the memory size");
  *total_bytes = (uint64_t)total * (uint64_t)page;
  *free_bytes = (uint64_t)avail * (uint64_t)page;
  return 0;
}

static int host_reserve(void *ctx, size_t size, gpum_devptr_t *base) {
  (void)ctx;
  void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return host_error("reserving address space", size);
  *base = (gpum_devptr_t)(uintptr_t)p;
  return 0;
}

static int host_map(void *ctx, gpum_devptr_t addr, size_t size) {
  (void)ctx;
  if (mprotect((void *)(uintptr_t)addr, size, PROT_READ | PROT_WRITE) != 0)
    return host_error("mapping", size);
  return 0;
}

static int host_unmap(void *ctx, gpum_devptr_t addr, size_t size) {
  (void)ctx;
  void *p = (void *)(uintptr_t)addr;
  if (madvise(p, size, MADV_DONTNEED) != 0 || mprotect(p, size, PROT_NONE) != 0)
    return host_error("unmapping", size);
  return 0;
}

static void host_unreserve(void *ctx, gpum_devptr_t base, size_t size) {
  (void)ctx;
  munmap((void *)(uintptr_t)base, size);
}

int gpum_pool_source_host(gpum_pool_source_t **out) {
  static const gpum_pool_source_ops_t ops = {
      .name = "host",
      .alloc = host_alloc,
      .free = host_free,
      .mem_info = host_mem_info,
      .reserve = host_reserve,
      .map = host_map,
      .unmap = host_unmap,
      .unreserve = host_unreserve,
  };
  int rc = gpum_pool_source_custom(&ops, NULL, out);
  if (rc == 0)
    (*out)->host_memory = true;
  return rc;
}
