/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA virtual-memory calls of the simulated driver, with the real driver's rules: flags
 * must be 0, the map offset 0, sizes and addresses multiples of the 2 MiB granularity; mapped
 * memory is inaccessible (PROT_NONE) until cuMemSetAccess; physical memory is given back only
 * once it is unmapped everywhere and released.
 *
 * A reservation is a PROT_NONE anonymous mapping; a physical allocation (cuMemCreate) is a
 * memfd, accounted in the node's table like cuMemAlloc memory; cuMemMap maps the memfd over
 * the reservation, so data written through one mapping is seen through another.
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim_internal.h"

#define GRAN (2ull * 1024 * 1024)

struct reservation {
  CUdeviceptr base;
  size_t size;
  struct reservation *next;
};

struct phys {
  CUmemGenericAllocationHandle id;
  int fd;
  size_t size;
  unsigned simdev;
  int maps;
  bool released;
  struct phys *next;
};

struct mapping {
  CUdeviceptr ptr;
  size_t size;
  struct phys *ph;
  int access; /* CU_MEM_ACCESS_FLAGS_PROT_* */
  struct mapping *next;
};

static pthread_mutex_t vmm_mu = PTHREAD_MUTEX_INITIALIZER;
static struct reservation *reservations;
static struct phys *physs;
static struct mapping *mappings;
static uint64_t next_id = 1;

static CUresult need_init(void) {
  return gpum__sim_cu_initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

/* Checks an allocation property; gives the simulated device. */
static CUresult check_prop(const CUmemAllocationProp *prop, unsigned *simdev) {
  if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
       prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = gpum__sim_cu_device(prop->location.id, simdev);
  if (r != CUDA_SUCCESS)
    return r;
  /* A device without virtual memory management (spec: virtual_memory: false). */
  struct gpum__sim_node *n = gpum__sim_attached();
  if (n && !n->spec.dev[*simdev].virtual_memory)
    return CUDA_ERROR_NOT_SUPPORTED;
  return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option) {
  unsigned s;
  if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                       option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = need_init();
  if (r == CUDA_SUCCESS)
    r = check_prop(prop, &s);
  if (r == CUDA_SUCCESS)
    *granularity = GRAN;
  return r;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  CUresult r = need_init();
  if (r != CUDA_SUCCESS)
    return r;
  if (!ptr || flags != 0 || size == 0 || size % GRAN || (alignment & (alignment - 1)) ||
      addr % GRAN)
    return CUDA_ERROR_INVALID_VALUE;
  size_t align = alignment > GRAN ? alignment : GRAN;
  struct reservation *res = malloc(sizeof *res);
  if (!res)
    return CUDA_ERROR_OUT_OF_MEMORY;
  void *p = MAP_FAILED;
  if (addr) /* a hint, as in CUDA: used when free */
    p = mmap((void *)(uintptr_t)addr, size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED) {
    uint8_t *raw =
        mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) {
      free(res);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    uintptr_t start = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
    if (start > (uintptr_t)raw)
      munmap(raw, start - (uintptr_t)raw);
    size_t tail = (size_t)((uintptr_t)raw + size + align - (start + size));
    if (tail)
      munmap((void *)(start + size), tail);
    p = (void *)start;
  }
  *res = (struct reservation){.base = (uintptr_t)p, .size = size};
  pthread_mutex_lock(&vmm_mu);
  res->next = reservations;
  reservations = res;
  pthread_mutex_unlock(&vmm_mu);
  *ptr = (uintptr_t)p;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  CUresult r = need_init();
  if (r != CUDA_SUCCESS)
    return r;
  pthread_mutex_lock(&vmm_mu);
  struct reservation **pp = &reservations, *res;
  while (*pp && ((*pp)->base != ptr || (*pp)->size != size))
    pp = &(*pp)->next;
  res = *pp;
  bool busy = false;
  for (struct mapping *m = mappings; res && m; m = m->next)
    busy |= m->ptr >= res->base && m->ptr < res->base + res->size;
  if (res && !busy)
    *pp = res->next;
  pthread_mutex_unlock(&vmm_mu);
  if (!res || busy) /* unknown range, or still mapped */
    return CUDA_ERROR_INVALID_VALUE;
  munmap((void *)(uintptr_t)res->base, res->size);
  free(res);
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags) {
  unsigned s;
  CUresult r = need_init();
  if (r != CUDA_SUCCESS)
    return r;
  if (!handle || flags != 0 || size == 0 || size % GRAN)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = check_prop(prop, &s)) != CUDA_SUCCESS)
    return r;
  struct phys *ph = malloc(sizeof *ph);
  int fd = memfd_create("gpum-sim-vmm", MFD_CLOEXEC);
  if (!ph || fd < 0 || ftruncate(fd, (off_t)size) != 0) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
    goto out_free;
  }
  /* Lock order: vmm_mu before the node lock (phys_destroy takes the node lock under vmm_mu),
   * so the id is taken before the node is locked. */
  pthread_mutex_lock(&vmm_mu);
  uint64_t id = next_id++;
  pthread_mutex_unlock(&vmm_mu);
  struct gpum__sim_node *n = gpum__sim_attached();
  if (!n || gpum__sim_lock(n) != 0) {
    r = CUDA_ERROR_UNKNOWN;
    goto out_free;
  }
  gpum__sim_tick(n);
  r = gpum__sim_cu_fault(n, s);
  if (r == CUDA_SUCCESS)
    r = gpum__sim_cu_take_capacity(n, s, size);
  if (r == CUDA_SUCCESS && gpum__sim_alloc_add(n, GPUM__SIM_K_VMM, s, id, size, 0, 0) < 0)
    r = CUDA_ERROR_OUT_OF_MEMORY;
  gpum__sim_unlock(n);
  if (r != CUDA_SUCCESS)
    goto out_free;
  *ph = (struct phys){.id = id, .fd = fd, .size = size, .simdev = s};
  pthread_mutex_lock(&vmm_mu);
  ph->next = physs;
  physs = ph;
  pthread_mutex_unlock(&vmm_mu);
  *handle = id;
  return CUDA_SUCCESS;
out_free:
  if (fd >= 0)
    close(fd);
  free(ph);
  return r;
}

/* Gives the physical memory back (vmm_mu held; ph already unlinked from physs). */
static void phys_destroy(struct phys *ph) {
  struct gpum__sim_node *n = gpum__sim_attached();
  if (n && gpum__sim_lock(n) == 0) {
    gpum__sim_alloc_remove(n, gpum__sim_alloc_find(n, GPUM__SIM_K_VMM, ph->id));
    gpum__sim_unlock(n);
  }
  close(ph->fd);
  free(ph);
}

static void phys_maybe_destroy(struct phys *ph) {
  if (!ph->released || ph->maps > 0)
    return;
  struct phys **pp = &physs;
  while (*pp && *pp != ph)
    pp = &(*pp)->next;
  if (*pp)
    *pp = ph->next;
  phys_destroy(ph);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  CUresult r = need_init();
  if (r != CUDA_SUCCESS)
    return r;
  pthread_mutex_lock(&vmm_mu);
  struct phys *ph = physs;
  while (ph && ph->id != handle)
    ph = ph->next;
  if (!ph || ph->released) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else {
    ph->released = true;
    phys_maybe_destroy(ph);
  }
  pthread_mutex_unlock(&vmm_mu);
  return r;
}

static bool in_reservation(CUdeviceptr ptr, size_t size) {
  for (struct reservation *r = reservations; r; r = r->next)
    if (ptr >= r->base && ptr + size <= r->base + r->size && ptr + size > ptr)
      return true;
  return false;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  CUresult r = need_init();
  if (r != CUDA_SUCCESS)
    return r;
  if (flags != 0 || offset != 0 || size == 0 || size % GRAN || ptr % GRAN)
    return CUDA_ERROR_INVALID_VALUE;
  struct mapping *m = malloc(sizeof *m);
  if (!m)
    return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&vmm_mu);
  struct phys *ph = physs;
  while (ph && ph->id != handle)
    ph = ph->next;
  bool overlap = false;
  for (struct mapping *o = mappings; o; o = o->next)
    overlap |= ptr < o->ptr + o->size && o->ptr < ptr + size;
  if (!ph || ph->released || size > ph->size || overlap || !in_reservation(ptr, size)) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else if (mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, ph->fd, 0) ==
             MAP_FAILED) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    *m = (struct mapping){.ptr = ptr, .size = size, .ph = ph, .next = mappings};
    mappings = m;
    ph->maps++;
    m = NULL;
  }
  pthread_mutex_unlock(&vmm_mu);
  free(m);
  return r;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  CUresult r = need_init();
  if (r != CUDA_SUCCESS)
    return r;
  if (size == 0 || size % GRAN || ptr % GRAN)
    return CUDA_ERROR_INVALID_VALUE;
  unsigned found = 0;
  pthread_mutex_lock(&vmm_mu);
  struct mapping **pp = &mappings;
  while (*pp) {
    struct mapping *m = *pp;
    if (m->ptr >= ptr && m->ptr + m->size <= ptr + size) {
      /* Back to an inaccessible reservation. */
      mmap((void *)(uintptr_t)m->ptr, m->size, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
      *pp = m->next;
      m->ph->maps--;
      phys_maybe_destroy(m->ph);
      free(m);
      found++;
    } else {
      pp = &m->next;
    }
  }
  pthread_mutex_unlock(&vmm_mu);
  return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
  CUresult r = need_init();
  if (r != CUDA_SUCCESS)
    return r;
  if (!desc || count == 0 || size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  int flags = 0;
  for (size_t i = 0; i < count; i++) {
    unsigned s;
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
         desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
         desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
      return CUDA_ERROR_INVALID_VALUE;
    if ((r = gpum__sim_cu_device(desc[i].location.id, &s)) != CUDA_SUCCESS)
      return r;
    flags |= desc[i].flags; /* one host address space: the widest access wins */
  }
  int prot = flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
             : flags == CU_MEM_ACCESS_FLAGS_PROT_READ    ? PROT_READ
                                                         : PROT_NONE;
  pthread_mutex_lock(&vmm_mu);
  /* The whole range must be mapped. */
  size_t covered = 0;
  for (struct mapping *m = mappings; m; m = m->next)
    if (m->ptr >= ptr && m->ptr + m->size <= ptr + size)
      covered += m->size;
  if (covered != size) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else {
    for (struct mapping *m = mappings; m; m = m->next) {
      if (m->ptr >= ptr && m->ptr + m->size <= ptr + size) {
        mprotect((void *)(uintptr_t)m->ptr, m->size, prot);
        m->access = flags;
      }
    }
  }
  pthread_mutex_unlock(&vmm_mu);
  return r;
}

bool gpum__sim_cu_vmm_range_ok(CUdeviceptr ptr, size_t len) {
  /* The range may span several adjacent mappings, each with access set. */
  bool ok = true;
  pthread_mutex_lock(&vmm_mu);
  while (ok && len > 0) {
    struct mapping *m = mappings;
    while (m && !(ptr >= m->ptr && ptr < m->ptr + m->size))
      m = m->next;
    if (!m || m->access == CU_MEM_ACCESS_FLAGS_PROT_NONE) {
      ok = false;
      break;
    }
    size_t here = (size_t)(m->ptr + m->size - ptr);
    if (here >= len)
      break;
    ptr += here;
    len -= here;
  }
  pthread_mutex_unlock(&vmm_mu);
  return ok;
}
