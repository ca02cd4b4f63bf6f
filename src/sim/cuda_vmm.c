/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA virtual-memory calls of the simulated driver, with the real driver's rules: flags
 * must be 0, the map offset 0, sizes and addresses multiples of the 2 MiB granularity; mapped
 * memory is inaccessible (PROT_NONE) until cuMemSetAccess; physical memory is given back only
 * once it is unmapped everywhere and released.
 *
 * A reservation is a PROT_NONE anonymous mapping. A physical allocation (cuMemCreate) is an
 * extent of one memfd per process (a sparse file: only pages written use host RAM), accounted
 * in the node's table like cuMemAlloc memory; cuMemMap maps the extent over the reservation,
 * so data written through one mapping is seen through another. One file, not one per handle:
 * a process may hold hundreds of thousands of handles, far more than it may open files. A
 * released extent's pages are punched out of the file and the extent is reused by the next
 * allocation of the same size.
 *
 * Handles index a table of physical allocations (O(1)); reservations and mappings are kept in
 * ordered maps by address (tree.c, O(log n)): no call costs more with more handles.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim_internal.h"

#define GRAN GPUM__SIM_GRAN
/* The memfd's size: offsets are handed out below it (released extents are reused, so the
 * offsets in use stay within what the devices can hold). */
#define FILE_SPAN (1ull << 50)

/* A spare extent size of a file: offsets of released extents of that size. */
struct spare {
  struct gpum__sim_tnode node; /* key: the size */
  uint64_t *offs;
  size_t n, cap;
};

/* The memfd behind this process's physical allocations. A child after fork inherits its
 * parent's file but makes its own for new allocations, and never punches holes in the
 * parent's. */
struct vmm_file {
  int fd;
  pid_t owner;
  dev_t dev; /* identity of fd, checked before use: a program may have closed it */
  ino_t ino;
  uint64_t end;                  /* offsets [0, end) have been handed out */
  struct gpum__sim_tnode *spare; /* struct spare, by size */
  size_t nphys;                  /* physical allocations in it */
};

struct reservation {
  struct gpum__sim_tnode node; /* key: the base address */
  size_t size;
};

struct phys {
  CUmemGenericAllocationHandle id;
  struct vmm_file *file;
  uint64_t off;
  size_t size;
  unsigned simdev;
  int entry; /* its entry in the node's allocation table */
  int maps;
  bool released;
};

struct mapping {
  struct gpum__sim_tnode node; /* key: the address */
  size_t size;
  struct phys *ph;
  int access; /* CU_MEM_ACCESS_FLAGS_PROT_* */
};

/* A handle is (generation << 32) | (slot + 1). Generations come from one counter, so a released
 * handle is refused rather than mistaken for a later one in its slot. The table is freed when
 * the process holds no handle (nothing of the library's stays allocated after cleanup). */
struct handle_slot {
  struct phys *ph; /* NULL when free */
  uint32_t gen;
  uint32_t next_free;
};

/* Lock order: the node lock before vmm_mu. */
static pthread_mutex_t vmm_mu = PTHREAD_MUTEX_INITIALIZER;
static struct gpum__sim_tnode *reservations, *mappings;
static struct vmm_file *cur_file;
static struct handle_slot *slots;
static uint32_t nslots, capslots, nlive, free_slots = UINT32_MAX;
static uint32_t next_gen = 1;

/* A checkpoint leaves physical allocations in their memfd (docs/sim.md: only their
 * accounting leaves the device); a restore onto other GPUs moves them there. */
void gpum__sim_vmm_remap(const uint32_t *map) {
  pthread_mutex_lock(&vmm_mu);
  for (uint32_t i = 0; i < nslots; i++)
    if (slots[i].ph)
      slots[i].ph->simdev = map[slots[i].ph->simdev];
  pthread_mutex_unlock(&vmm_mu);
}

void gpum__sim_vmm_atfork(gpum__sim_fork_phase_t ph) {
  gpum__sim_fork_mutex(&vmm_mu, ph);
}

#define AS(type, t) ((t) ? GPUM__SIM_CONTAINER((t), type, node) : NULL)

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
  bool args_ok = granularity && (option == CU_MEM_ALLOC_GRANULARITY_MINIMUM ||
                                 option == CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  GPUM__SIM_CU_ENTRY(args_ok, GPUM__SIM_CU_INIT);
  CUresult r = check_prop(prop, &s);
  if (r == CUDA_SUCCESS)
    *granularity = GRAN;
  return r;
}

/* The first mapping starting in [from, to), or NULL (vmm_mu held). */
static struct mapping *mapping_from(CUdeviceptr from, CUdeviceptr to) {
  struct mapping *m = AS(struct mapping, gpum__sim_tree_ceil(mappings, from));
  return m && m->node.key < to ? m : NULL;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_INIT);
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
  res->size = size;
  pthread_mutex_lock(&vmm_mu);
  gpum__sim_tree_insert(&reservations, &res->node, (uintptr_t)p);
  pthread_mutex_unlock(&vmm_mu);
  *ptr = (uintptr_t)p;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_INIT);
  pthread_mutex_lock(&vmm_mu);
  struct reservation *res = AS(struct reservation, gpum__sim_tree_find(reservations, ptr));
  /* Unknown range, or still mapped. */
  bool ok = res && res->size == size && !mapping_from(ptr, ptr + size);
  if (ok)
    gpum__sim_tree_remove(&reservations, &res->node);
  pthread_mutex_unlock(&vmm_mu);
  if (!ok)
    return CUDA_ERROR_INVALID_VALUE;
  munmap((void *)(uintptr_t)ptr, size);
  free(res);
  return CUDA_SUCCESS;
}

/* Whether f's descriptor is still the file it opened (a program may close descriptors it did
 * not open, and the number may since name another file). A file found lost is never used or
 * closed again. */
static bool file_ok(struct vmm_file *f) {
  struct stat st;
  if (f->fd >= 0 && (fstat(f->fd, &st) != 0 || st.st_dev != f->dev || st.st_ino != f->ino))
    f->fd = -1;
  return f->fd >= 0;
}

static void file_close(struct vmm_file *f) {
  while (f->spare) {
    struct spare *sp = AS(struct spare, f->spare);
    gpum__sim_tree_remove(&f->spare, &sp->node);
    free(sp->offs);
    free(sp);
  }
  if (f->fd >= 0)
    close(f->fd);
  free(f);
}

/* The file for new physical allocations of process pid (vmm_mu held), or NULL. */
static struct vmm_file *file_for(pid_t pid) {
  if (cur_file && cur_file->owner == pid && file_ok(cur_file))
    return cur_file;
  struct vmm_file *f = calloc(1, sizeof *f);
  struct stat st;
  if (!f)
    return NULL;
  f->fd = memfd_create("gpum-sim-vmm", MFD_CLOEXEC);
  if (f->fd < 0 || ftruncate(f->fd, (off_t)FILE_SPAN) != 0 || fstat(f->fd, &st) != 0) {
    if (f->fd >= 0)
      close(f->fd);
    free(f);
    return NULL;
  }
  f->owner = pid;
  f->dev = st.st_dev;
  f->ino = st.st_ino;
  /* The previous file lives on while physical allocations are in it. */
  if (cur_file && cur_file->nphys == 0)
    file_close(cur_file);
  cur_file = f;
  return f;
}

/* An extent of size bytes in f (vmm_mu held): a spare one of that size, or a new one. */
static bool extent_take(struct vmm_file *f, size_t size, uint64_t *off) {
  struct spare *sp = AS(struct spare, gpum__sim_tree_find(f->spare, size));
  if (sp && sp->n > 0) {
    *off = sp->offs[--sp->n];
    return true;
  }
  if (size > FILE_SPAN - f->end)
    return false;
  *off = f->end;
  f->end += size;
  return true;
}

/* Gives ph's extent back (vmm_mu held): its pages are freed and it is kept for reuse, unless
 * the file is another process's (inherited over fork). A file is closed when its last extent
 * goes. */
static void extent_give(struct phys *ph, pid_t pid) {
  struct vmm_file *f = ph->file;
  if (f->owner == pid && file_ok(f) &&
      fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)ph->off,
                (off_t)ph->size) == 0) {
    struct spare *sp = AS(struct spare, gpum__sim_tree_find(f->spare, ph->size));
    if (!sp && (sp = calloc(1, sizeof *sp)) != NULL)
      gpum__sim_tree_insert(&f->spare, &sp->node, ph->size);
    if (sp && sp->n == sp->cap) {
      size_t cap = sp->cap ? 2 * sp->cap : 16;
      uint64_t *offs = realloc(sp->offs, cap * sizeof *offs);
      if (offs) {
        sp->offs = offs;
        sp->cap = cap;
      }
    }
    if (sp && sp->n < sp->cap)
      sp->offs[sp->n++] = ph->off;
  }
  if (--f->nphys == 0) {
    if (f == cur_file)
      cur_file = NULL;
    file_close(f);
  }
}

/* The live physical allocation of handle h, or NULL (vmm_mu held). */
static struct phys *phys_of(CUmemGenericAllocationHandle h) {
  uint64_t i = (h & 0xffffffffu) - 1;
  if (i >= nslots || slots[i].gen != (uint32_t)(h >> 32))
    return NULL;
  return slots[i].ph;
}

/* A new handle for ph (vmm_mu held); false when out of memory. */
static bool handle_new(struct phys *ph) {
  uint32_t i = free_slots;
  if (i != UINT32_MAX) {
    free_slots = slots[i].next_free;
  } else {
    if (nslots == capslots) {
      uint32_t cap = capslots ? 2 * capslots : 1024;
      struct handle_slot *grown = NULL;
      if (capslots < (1u << 31)) /* 2^31 live handles at most: slot + 1 fits 32 bits */
        grown = realloc(slots, cap * sizeof *grown);
      if (!grown)
        return false;
      slots = grown;
      capslots = cap;
    }
    i = nslots++;
    slots[i].gen = next_gen;
    next_gen = next_gen == UINT32_MAX ? 1 : next_gen + 1;
  }
  nlive++;
  slots[i].ph = ph;
  ph->id = ((uint64_t)slots[i].gen << 32) | (i + 1);
  return true;
}

static void handle_free(CUmemGenericAllocationHandle h) {
  uint32_t i = (uint32_t)(h & 0xffffffffu) - 1;
  slots[i].ph = NULL;
  slots[i].gen = next_gen;
  next_gen = next_gen == UINT32_MAX ? 1 : next_gen + 1;
  slots[i].next_free = free_slots;
  free_slots = i;
  if (--nlive == 0) {
    free(slots);
    slots = NULL;
    nslots = capslots = 0;
    free_slots = UINT32_MAX;
  }
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags) {
  unsigned s;
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_INIT);
  if (!handle || flags != 0 || size == 0 || size % GRAN)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = check_prop(prop, &s);
  if (r != CUDA_SUCCESS)
    return r;
  struct phys *ph = calloc(1, sizeof *ph);
  if (!ph)
    return CUDA_ERROR_OUT_OF_MEMORY;
  struct gpum__sim_node *n = gpum__sim_attached();
  if (!n || gpum__sim_lock(n) != 0) {
    free(ph);
    return CUDA_ERROR_UNKNOWN;
  }
  gpum__sim_tick(n);
  r = gpum__sim_cu_fault(n, s);
  if (r == CUDA_SUCCESS)
    r = gpum__sim_cu_take_capacity(n, s, size);
  if (r == CUDA_SUCCESS) {
    pthread_mutex_lock(&vmm_mu);
    uint64_t off = 0;
    int entry = -1;
    struct vmm_file *f = NULL;
    if (!handle_new(ph) || (entry = gpum__sim_alloc_add(n, GPUM__SIM_K_VMM, s, ph->id, size)) < 0 ||
        !(f = file_for(gpum__sim_me()->pid)) || !extent_take(f, size, &off)) {
      /* Out of memory here, the allocation table is full, or there is no file. */
      if (entry >= 0)
        gpum__sim_alloc_remove(n, entry);
      if (phys_of(ph->id) == ph)
        handle_free(ph->id);
      if (cur_file && cur_file->nphys == 0) {
        file_close(cur_file);
        cur_file = NULL;
      }
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      *ph = (struct phys){
          .id = ph->id, .file = f, .off = off, .size = size, .simdev = s, .entry = entry};
      f->nphys++;
      *handle = ph->id;
      ph = NULL;
    }
    pthread_mutex_unlock(&vmm_mu);
  }
  gpum__sim_unlock(n);
  free(ph);
  return r;
}

/* Gives the physical memory back once it is released and unmapped everywhere (node lock and
 * vmm_mu held). */
static void phys_maybe_destroy(struct gpum__sim_node *n, struct phys *ph) {
  if (!ph->released || ph->maps > 0)
    return;
  if (gpum__sim_alloc_mine(n, ph->entry, GPUM__SIM_K_VMM, ph->id))
    gpum__sim_alloc_remove(n, ph->entry);
  handle_free(ph->id);
  extent_give(ph, gpum__sim_me()->pid);
  free(ph);
}

/* Locks the node for a call that may give physical memory back; NULL when it cannot. */
static struct gpum__sim_node *lock_node(void) {
  struct gpum__sim_node *n = gpum__sim_attached();
  return n && gpum__sim_lock(n) == 0 ? n : NULL;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_INIT);
  struct gpum__sim_node *n = lock_node();
  if (!n)
    return CUDA_ERROR_UNKNOWN;
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&vmm_mu);
  struct phys *ph = phys_of(handle);
  if (!ph || ph->released) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else {
    ph->released = true;
    phys_maybe_destroy(n, ph);
  }
  pthread_mutex_unlock(&vmm_mu);
  gpum__sim_unlock(n);
  return r;
}

/* Whether [ptr, ptr + size) lies in one reservation (vmm_mu held). */
static bool in_reservation(CUdeviceptr ptr, size_t size) {
  struct reservation *res = AS(struct reservation, gpum__sim_tree_floor(reservations, ptr));
  return res && ptr + size > ptr && ptr + size <= res->node.key + res->size;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_INIT);
  if (flags != 0 || offset != 0 || size == 0 || size % GRAN || ptr % GRAN)
    return CUDA_ERROR_INVALID_VALUE;
  struct mapping *m = malloc(sizeof *m);
  if (!m)
    return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&vmm_mu);
  struct phys *ph = phys_of(handle);
  /* Mappings never overlap: only the last one starting below the end can reach into it. */
  struct mapping *below = AS(struct mapping, gpum__sim_tree_floor(mappings, ptr + size - 1));
  bool overlap = below && below->node.key + below->size > ptr;
  if (!ph || ph->released || size > ph->size || overlap || !in_reservation(ptr, size)) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else if (!file_ok(ph->file)) {
    r = CUDA_ERROR_UNKNOWN; /* the program closed the file behind the allocation */
  } else if (mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, ph->file->fd,
                  (off_t)ph->off) == MAP_FAILED) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    *m = (struct mapping){.size = size, .ph = ph};
    gpum__sim_tree_insert(&mappings, &m->node, ptr);
    ph->maps++;
    m = NULL;
  }
  pthread_mutex_unlock(&vmm_mu);
  free(m);
  return r;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_INIT);
  if (size == 0 || size % GRAN || ptr % GRAN)
    return CUDA_ERROR_INVALID_VALUE;
  struct gpum__sim_node *n = lock_node();
  if (!n)
    return CUDA_ERROR_UNKNOWN;
  unsigned found = 0;
  pthread_mutex_lock(&vmm_mu);
  struct mapping *m = mapping_from(ptr, ptr + size);
  while (m) {
    struct mapping *next = mapping_from(m->node.key + 1, ptr + size);
    if (m->node.key + m->size <= ptr + size) {
      /* Back to an inaccessible reservation. */
      mmap((void *)(uintptr_t)m->node.key, m->size, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
      gpum__sim_tree_remove(&mappings, &m->node);
      m->ph->maps--;
      phys_maybe_destroy(n, m->ph);
      free(m);
      found++;
    }
    m = next;
  }
  pthread_mutex_unlock(&vmm_mu);
  gpum__sim_unlock(n);
  return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_INIT);
  if (!desc || count == 0 || size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CUDA_SUCCESS;
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
  for (struct mapping *m = mapping_from(ptr, ptr + size); m;
       m = mapping_from(m->node.key + 1, ptr + size))
    if (m->node.key + m->size <= ptr + size)
      covered += m->size;
  if (covered != size) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else {
    for (struct mapping *m = mapping_from(ptr, ptr + size); m;
         m = mapping_from(m->node.key + 1, ptr + size)) {
      mprotect((void *)(uintptr_t)m->node.key, m->size, prot);
      m->access = flags;
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
    struct mapping *m = AS(struct mapping, gpum__sim_tree_floor(mappings, ptr));
    if (!m || ptr - m->node.key >= m->size || m->access == CU_MEM_ACCESS_FLAGS_PROT_NONE) {
      ok = false;
      break;
    }
    size_t here = (size_t)(m->node.key + m->size - ptr);
    if (here >= len)
      break;
    ptr += here;
    len -= here;
  }
  pthread_mutex_unlock(&vmm_mu);
  return ok;
}
