/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HIP runtime entry points of the simulated driver: the hip* subset gpum uses
 * (src/abi/hip_abi.h), over the node's AMD devices (a spec's `vendor: amd`), with the memory
 * accounting the simulated CUDA driver uses: an allocation is an entry of the node's table
 * under the caller's pid and device, checked against what every process holds plus the
 * driver's reserve, so ROCm SMI (rsmi_dev_memory_usage_get, the process list) and `gpum status`
 * see it. Programs reach it as libamdhip64.so.5 (src/sim/amdhip64/: a filter library whose
 * symbols resolve here), or with libgpum_sim.so itself.
 *
 * Devices: the runtime is initialised by the first call (hipInit or any other), which reads,
 * once, ROCR_VISIBLE_DEVICES (what ROCm's ROCr runtime applies first: a comma-separated list of
 * AMD device indices or "GPU-" UUIDs with ROCm SMI's 16 hex digits) and then
 * HIP_VISIBLE_DEVICES (indices into what ROCR left; CUDA_VISIBLE_DEVICES stands for it when it
 * is unset, as HIP on AMD does). In either list the simulator stops at the first entry it
 * cannot match (an index past the devices, an unknown UUID, anything else), and skips
 * repeated devices. HIP ordinals are the positions in what is left.
 *
 * Return codes, from hip_runtime_api.h 5.2 (checked by tests/abi/check_hip_abi.c): no node or
 * no visible AMD device: hipErrorNoDevice (hipGetDeviceCount sets *count to 0 too); an
 * ordinal past the visible devices: hipErrorInvalidDevice; a NULL pointer argument or a bad
 * flag: hipErrorInvalidValue; memory short (the node's, or the injected fail-after budget):
 * hipErrorOutOfMemory; a node stopped since initialisation: hipErrorDeinitialized. HIP has no
 * code of its own for a GPU that fell off the bus (the real runtime usually reports an HSA
 * hardware exception and aborts); the simulator answers hipErrorNoDevice for a lost device and,
 * for one that needs a reset, hipErrorECCNotCorrectable (XID 48) or hipErrorUnknown. Every call
 * sets the thread's last error to what it returns (hipGetLastError reads and clears it), as
 * HIP 5.x does. Streams are not simulated: the null stream is the only one
 * (hipErrorInvalidHandle for any other).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gpum/error.h>

#include "sim_internal.h"

#define HIP_CHECK(name, params) \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&name), gpum_##name##_fn), #name);
GPUM_HIP_FUNCS(HIP_CHECK)
GPUM_HIP_FUNCS_STR(HIP_CHECK)

/* Rows of hipMallocPitch are aligned to this (the real alignment is the device's image pitch
 * alignment, which the simulator does not model). */
#define PITCH_ALIGN 512u

/* ---- initialisation and devices ---- */

/* Lock order: init_mu before attach_mu (shm.c); blk_mu under the node lock; host_mu alone. */
static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static int init_state; /* 0 not yet, 1 done, -1 failed (no node): init_mu, then read atomically */
static struct gpum__sim_node *hip_node;
static unsigned visible[GPUM__SIM_MAX_DEVICES]; /* HIP ordinal -> node device index */
static int nvisible;

static __thread int cur_dev;
static __thread hipError_t last_error;

static hipError_t ret(hipError_t r) {
  last_error = r;
  return r;
}

/* The AMD device a ROCR_VISIBLE_DEVICES entry names: its node index, or -1. */
static int rocr_entry(const struct gpum__sim_node *n, const char *tok) {
  char *end;
  if (tok[0] >= '0' && tok[0] <= '9') {
    unsigned long k = strtoul(tok, &end, 10);
    return *end == '\0' && k < GPUM__SIM_MAX_DEVICES
               ? gpum__sim_vendor_dev(n, GPUM__SIM_V_AMD, (unsigned)k)
               : -1;
  }
  if (strncasecmp(tok, "GPU-", 4) != 0)
    return -1;
  for (unsigned i = 0; i < n->spec.device_count; i++)
    if (n->spec.dev[i].vendor == GPUM__SIM_V_AMD && !strcasecmp(n->spec.dev[i].uuid, tok))
      return (int)i;
  return -1;
}

/* Applies list (NULL: unset) to the nin devices in (node indices); out gets what stays. With
 * uuids, entries may be ROCR's indices of AMD devices or UUIDs; without, indices into in. */
static unsigned apply_list(const struct gpum__sim_node *n, const char *list, bool rocr,
                           const unsigned *in, unsigned nin, unsigned *out) {
  if (!list) {
    memcpy(out, in, nin * sizeof *in);
    return nin;
  }
  unsigned nout = 0;
  for (const char *p = list; *p;) {
    size_t len = strcspn(p, ",");
    char tok[64];
    if (len == 0 || len >= sizeof tok)
      break;
    memcpy(tok, p, len);
    tok[len] = '\0';
    int dev = -1;
    if (rocr) {
      int d = rocr_entry(n, tok);
      for (unsigned i = 0; d >= 0 && i < nin; i++)
        if (in[i] == (unsigned)d)
          dev = d;
    } else {
      char *end;
      unsigned long k = strtoul(tok, &end, 10);
      if (tok[0] >= '0' && tok[0] <= '9' && *end == '\0' && k < nin)
        dev = (int)in[k];
    }
    if (dev < 0)
      break; /* the rest of the list is not seen */
    bool seen = false;
    for (unsigned i = 0; i < nout; i++)
      seen |= out[i] == (unsigned)dev;
    if (!seen)
      out[nout++] = (unsigned)dev;
    p += len;
    if (*p == ',')
      p++;
  }
  return nout;
}

static void init_locked(void) {
  int err = 0;
  struct gpum__sim_node *n = gpum__sim_attach(&err);
  if (!n) {
    __atomic_store_n(&init_state, -1, __ATOMIC_RELEASE);
    return;
  }
  unsigned all[GPUM__SIM_MAX_DEVICES], rocr[GPUM__SIM_MAX_DEVICES];
  unsigned nall = gpum__sim_vendor_count(n, GPUM__SIM_V_AMD);
  for (unsigned k = 0; k < nall; k++)
    all[k] = (unsigned)gpum__sim_vendor_dev(n, GPUM__SIM_V_AMD, k);
  unsigned nrocr = apply_list(n, getenv("ROCR_VISIBLE_DEVICES"), true, all, nall, rocr);
  const char *hvd = getenv("HIP_VISIBLE_DEVICES");
  if (!hvd)
    hvd = getenv("CUDA_VISIBLE_DEVICES");
  nvisible = (int)apply_list(n, hvd, false, rocr, nrocr, visible);
  hip_node = n;
  __atomic_store_n(&init_state, 1, __ATOMIC_RELEASE);
}

/* Initialises once; hipSuccess with the node, or the error every call gives. */
static hipError_t live(struct gpum__sim_node **out) {
  int s = __atomic_load_n(&init_state, __ATOMIC_ACQUIRE);
  if (s == 0) {
    pthread_mutex_lock(&init_mu);
    if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) == 0)
      init_locked();
    s = __atomic_load_n(&init_state, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&init_mu);
  }
  if (s < 0 || nvisible == 0)
    return hipErrorNoDevice;
  if (__atomic_load_n(&hip_node->hdr.stopped, __ATOMIC_ACQUIRE))
    return hipErrorDeinitialized;
  *out = hip_node;
  return hipSuccess;
}

/* The node device of HIP ordinal dev. */
static hipError_t device_of(int dev, struct gpum__sim_node **n, unsigned *simdev) {
  hipError_t r = live(n);
  if (r != hipSuccess)
    return r;
  if (dev < 0 || dev >= nvisible)
    return hipErrorInvalidDevice;
  *simdev = visible[dev];
  return hipSuccess;
}

/* A device's fault state as a hipError_t (lock held). */
static hipError_t fault(const struct gpum__sim_node *n, unsigned simdev) {
  const struct gpum__sim_dev_state *d = &n->dev[simdev];
  if (d->lost)
    return hipErrorNoDevice;
  if (d->reset_required)
    return d->reset_required == 48 ? hipErrorECCNotCorrectable : hipErrorUnknown;
  return hipSuccess;
}

/* Locks the node for a call on HIP ordinal dev that needs a healthy device. */
static hipError_t begin(int dev, struct gpum__sim_node **out, unsigned *simdev) {
  struct gpum__sim_node *n;
  hipError_t r = device_of(dev, &n, simdev);
  if (r != hipSuccess)
    return r;
  if (gpum__sim_lock(n) != 0)
    return hipErrorUnknown;
  gpum__sim_tick(n);
  if ((r = fault(n, *simdev)) != hipSuccess) {
    gpum__sim_unlock(n);
    return r;
  }
  *out = n;
  return hipSuccess;
}

hipError_t hipInit(unsigned int flags) {
  struct gpum__sim_node *n;
  if (flags != 0)
    return ret(hipErrorInvalidValue);
  return ret(live(&n));
}

hipError_t hipRuntimeGetVersion(int *runtimeVersion) {
  if (!runtimeVersion)
    return ret(hipErrorInvalidValue);
  *runtimeVersion = GPUM_HIP_SIM_VERSION;
  return ret(hipSuccess);
}

hipError_t hipGetDeviceCount(int *count) {
  struct gpum__sim_node *n;
  if (!count)
    return ret(hipErrorInvalidValue);
  hipError_t r = live(&n);
  *count = r == hipSuccess ? nvisible : 0;
  return ret(r);
}

hipError_t hipSetDevice(int deviceId) {
  struct gpum__sim_node *n;
  unsigned s;
  hipError_t r = device_of(deviceId, &n, &s);
  if (r == hipSuccess)
    cur_dev = deviceId;
  return ret(r);
}

hipError_t hipGetDevice(int *deviceId) {
  struct gpum__sim_node *n;
  if (!deviceId)
    return ret(hipErrorInvalidValue);
  hipError_t r = live(&n);
  if (r == hipSuccess)
    *deviceId = cur_dev;
  return ret(r);
}

hipError_t hipDeviceGetUuid(hipUUID *uuid, hipDevice_t device) {
  struct gpum__sim_node *n;
  unsigned s;
  if (!uuid)
    return ret(hipErrorInvalidValue);
  hipError_t r = device_of(device, &n, &s);
  if (r == hipSuccess) /* the 16 hex digits after "GPU-", without a NUL */
    memcpy(uuid->bytes, n->spec.dev[s].uuid + 4, sizeof uuid->bytes);
  return ret(r);
}

hipError_t hipDeviceTotalMem(size_t *bytes, hipDevice_t device) {
  struct gpum__sim_node *n;
  unsigned s;
  if (!bytes)
    return ret(hipErrorInvalidValue);
  hipError_t r = device_of(device, &n, &s);
  if (r == hipSuccess)
    *bytes = n->spec.dev[s].memory;
  return ret(r);
}

hipError_t hipMemGetInfo(size_t *free, size_t *total) {
  struct gpum__sim_node *n;
  unsigned s;
  if (!free || !total)
    return ret(hipErrorInvalidValue);
  hipError_t r = begin(cur_dev, &n, &s);
  if (r != hipSuccess)
    return ret(r);
  gpum__sim_reap(n);
  *free = gpum__sim_free(n, s);
  *total = n->spec.dev[s].memory;
  gpum__sim_unlock(n);
  return ret(hipSuccess);
}

/* ---- device memory ---- */

/* One allocation of this process, in a map by address. */
struct block {
  struct gpum__sim_tnode node; /* key: the address */
  uint64_t size;
  unsigned simdev;
  int entry;    /* its entry in the node's allocation table */
  bool managed; /* hipMallocManaged */
};
static pthread_mutex_t blk_mu = PTHREAD_MUTEX_INITIALIZER;
static struct gpum__sim_tnode *blocks;

static struct block *block_of(struct gpum__sim_tnode *t) {
  return t ? GPUM__SIM_CONTAINER(t, struct block, node) : NULL;
}

/* Allocates size bytes on HIP ordinal dev. */
static hipError_t alloc_on(int dev, void **ptr, size_t size) {
  if (!ptr)
    return hipErrorInvalidValue;
  if (size == 0) { /* HIP: success with a NULL pointer */
    *ptr = NULL;
    return hipSuccess;
  }
  struct block *b = malloc(sizeof *b);
  if (!b)
    return hipErrorOutOfMemory;
  void *p =
      mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    free(b);
    return hipErrorOutOfMemory;
  }
  struct gpum__sim_node *n;
  unsigned s;
  hipError_t r = begin(dev, &n, &s);
  if (r != hipSuccess)
    goto out_unmap;
  int entry = -1;
  if (gpum__sim_cu_take_capacity(n, s, size) != CUDA_SUCCESS ||
      (entry = gpum__sim_alloc_add(n, GPUM__SIM_K_MEM, s, (uint64_t)(uintptr_t)p, size)) < 0)
    r = hipErrorOutOfMemory;
  if (r == hipSuccess) {
    *b = (struct block){.size = size, .simdev = s, .entry = entry};
    pthread_mutex_lock(&blk_mu);
    gpum__sim_tree_insert(&blocks, &b->node, (uint64_t)(uintptr_t)p);
    pthread_mutex_unlock(&blk_mu);
  }
  gpum__sim_unlock(n);
  if (r != hipSuccess)
    goto out_unmap;
  *ptr = p;
  return hipSuccess;
out_unmap:
  munmap(p, size);
  free(b);
  return r;
}

hipError_t hipMalloc(void **ptr, size_t size) {
  return ret(alloc_on(cur_dev, ptr, size));
}

hipError_t hipExtMallocWithFlags(void **ptr, size_t sizeBytes, unsigned int flags) {
  if (flags != hipDeviceMallocDefault && flags != hipDeviceMallocFinegrained &&
      flags != hipMallocSignalMemory)
    return ret(hipErrorInvalidValue);
  if (flags == hipMallocSignalMemory && sizeBytes != 8) /* one HSA signal */
    return ret(hipErrorInvalidValue);
  return ret(alloc_on(cur_dev, ptr, sizeBytes));
}

/* Managed memory is counted on the current device from the start, as the simulated CUDA
 * driver counts cuMemAllocManaged (a real runtime places pages on first touch). */
hipError_t hipMallocManaged(void **dev_ptr, size_t size, unsigned int flags) {
  if (flags != hipMemAttachGlobal && flags != hipMemAttachHost)
    return ret(hipErrorInvalidValue);
  hipError_t r = alloc_on(cur_dev, dev_ptr, size);
  if (r == hipSuccess && *dev_ptr) {
    pthread_mutex_lock(&blk_mu);
    struct block *b = block_of(gpum__sim_tree_find(blocks, (uint64_t)(uintptr_t)*dev_ptr));
    if (b)
      b->managed = true;
    pthread_mutex_unlock(&blk_mu);
  }
  return ret(r);
}

hipError_t hipMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height) {
  if (!ptr || !pitch || width > SIZE_MAX - PITCH_ALIGN)
    return ret(hipErrorInvalidValue);
  size_t p = (width + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
  if (height && p > SIZE_MAX / height)
    return ret(hipErrorOutOfMemory);
  hipError_t r = alloc_on(cur_dev, ptr, p * height);
  if (r == hipSuccess)
    *pitch = p;
  return ret(r);
}

/* The stream-ordered calls: streams are not simulated, the allocation is done at once. */
hipError_t hipMallocAsync(void **dev_ptr, size_t size, hipStream_t stream) {
  if (stream)
    return ret(hipErrorInvalidHandle);
  return ret(alloc_on(cur_dev, dev_ptr, size));
}

/* One default pool per HIP ordinal: a pool's handle is the address of its slot, whose index is
 * the ordinal (the slots are never written). */
struct ihipMemPoolHandle_t {
  char unused;
};
static struct ihipMemPoolHandle_t pools[GPUM__SIM_MAX_DEVICES];

hipError_t hipDeviceGetDefaultMemPool(hipMemPool_t *mem_pool, int device) {
  struct gpum__sim_node *n;
  unsigned s;
  if (!mem_pool)
    return ret(hipErrorInvalidValue);
  hipError_t r = device_of(device, &n, &s);
  if (r == hipSuccess)
    *mem_pool = &pools[device];
  return ret(r);
}

hipError_t hipMallocFromPoolAsync(void **dev_ptr, size_t size, hipMemPool_t mem_pool,
                                  hipStream_t stream) {
  uintptr_t p = (uintptr_t)mem_pool, base = (uintptr_t)pools;
  if (!mem_pool || p < base || p >= base + sizeof pools || (p - base) % sizeof pools[0])
    return ret(hipErrorInvalidValue);
  if (stream)
    return ret(hipErrorInvalidHandle);
  return ret(alloc_on((int)(mem_pool - pools), dev_ptr, size));
}

hipError_t hipFree(void *ptr) {
  if (!ptr)
    return ret(hipSuccess);
  struct gpum__sim_node *n;
  hipError_t r = live(&n);
  if (r != hipSuccess)
    return ret(r);
  if (gpum__sim_lock(n) != 0)
    return ret(hipErrorUnknown);
  /* Frees work on a lost device too, so that cleanup paths can give memory back. */
  pthread_mutex_lock(&blk_mu);
  struct block *b = block_of(gpum__sim_tree_find(blocks, (uint64_t)(uintptr_t)ptr));
  if (b) {
    if (gpum__sim_alloc_mine(n, b->entry, GPUM__SIM_K_MEM, b->node.key))
      gpum__sim_alloc_remove(n, b->entry);
    gpum__sim_tree_remove(&blocks, &b->node);
  }
  pthread_mutex_unlock(&blk_mu);
  gpum__sim_unlock(n);
  if (!b)
    return ret(hipErrorInvalidValue);
  munmap(ptr, b->size);
  free(b);
  return ret(hipSuccess);
}

hipError_t hipFreeAsync(void *dev_ptr, hipStream_t stream) {
  if (stream)
    return ret(hipErrorInvalidHandle);
  return hipFree(dev_ptr);
}

/* ---- memory shared between processes ---- */

/* Device memory is private to the process that allocated it (as in the simulated CUDA driver,
 * src/sim/cuda_ipc.c): hipIpcGetMemHandle gives a handle for the base of a device allocation
 * of this process (not managed memory; anything else: hipErrorInvalidHandle), and
 * hipIpcOpenMemHandle checks the handle and answers hipErrorNotSupported: mapping the memory
 * into another process is not simulated. */
#define IPC_MAGIC 0x3150494850535047ULL /* "GPSPHIP1" little-endian */

_Static_assert(sizeof(struct ipc_handle) == sizeof(hipIpcMemHandle_t), "an IPC handle's size");

hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t *handle, void *devPtr) {
  if (!handle || !devPtr)
    return ret(hipErrorInvalidValue);
  struct gpum__sim_node *n;
  hipError_t r = live(&n);
  if (r != hipSuccess)
    return ret(r);
  struct ipc_handle h = {
      .magic = IPC_MAGIC, .ptr = (uint64_t)(uintptr_t)devPtr, .pid = (uint32_t)getpid()};
  pthread_mutex_lock(&blk_mu);
  struct block *b = block_of(gpum__sim_tree_find(blocks, h.ptr));
  bool ok = b && !b->managed;
  if (ok) {
    h.size = b->size;
    h.simdev = b->simdev;
  }
  pthread_mutex_unlock(&blk_mu);
  if (!ok)
    return ret(hipErrorInvalidHandle);
  memcpy(handle, &h, sizeof h);
  return ret(hipSuccess);
}

hipError_t hipIpcOpenMemHandle(void **devPtr, hipIpcMemHandle_t handle, unsigned int flags) {
  (void)flags;
  if (!devPtr)
    return ret(hipErrorInvalidValue);
  struct gpum__sim_node *n;
  hipError_t r = live(&n);
  if (r != hipSuccess)
    return ret(r);
  struct ipc_handle h;
  memcpy(&h, &handle, sizeof h);
  if (h.magic != IPC_MAGIC || h.ptr == 0 || h.size == 0 || h.pid == 0)
    return ret(hipErrorInvalidHandle);
  return ret(hipErrorNotSupported);
}

/* Whether [p, p+len) lies inside one allocation of this process. */
static bool dev_range_ok(const void *p, size_t len) {
  pthread_mutex_lock(&blk_mu);
  uint64_t a = (uint64_t)(uintptr_t)p;
  struct block *b = block_of(gpum__sim_tree_floor(blocks, a));
  bool ok = b && a - b->node.key < b->size && len <= b->size - (a - b->node.key);
  pthread_mutex_unlock(&blk_mu);
  return ok;
}

hipError_t hipMemcpy(void *dst, const void *src, size_t sizeBytes, hipMemcpyKind kind) {
  struct gpum__sim_node *n;
  hipError_t r = live(&n);
  if (r != hipSuccess)
    return ret(r);
  if (sizeBytes == 0)
    return ret(hipSuccess);
  if (!dst || !src || kind < hipMemcpyHostToHost || kind > hipMemcpyDefault)
    return ret(hipErrorInvalidValue);
  bool dst_dev = kind == hipMemcpyHostToDevice || kind == hipMemcpyDeviceToDevice;
  bool src_dev = kind == hipMemcpyDeviceToHost || kind == hipMemcpyDeviceToDevice;
  if ((dst_dev && !dev_range_ok(dst, sizeBytes)) || (src_dev && !dev_range_ok(src, sizeBytes)))
    return ret(hipErrorInvalidValue);
  memmove(dst, src, sizeBytes);
  return ret(hipSuccess);
}

hipError_t hipDeviceSynchronize(void) {
  struct gpum__sim_node *n;
  unsigned s;
  hipError_t r = begin(cur_dev, &n, &s);
  if (r == hipSuccess)
    gpum__sim_unlock(n);
  return ret(r);
}

hipError_t hipGetLastError(void) {
  hipError_t r = last_error;
  last_error = hipSuccess;
  return r;
}

/* ---- pinned host memory: plain page-aligned host memory, not the device's ---- */

struct host_block {
  void *p;
  struct host_block *next;
};
static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;
static struct host_block *host_blocks;

hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags) {
  struct gpum__sim_node *n;
  if (!ptr || (flags & ~(unsigned)(hipHostMallocPortable | hipHostMallocMapped |
                                   hipHostMallocWriteCombined)))
    return ret(hipErrorInvalidValue);
  hipError_t r = live(&n);
  if (r != hipSuccess)
    return ret(r);
  if (size == 0) {
    *ptr = NULL;
    return ret(hipSuccess);
  }
  struct host_block *b = malloc(sizeof *b);
  void *p = NULL;
  if (!b || posix_memalign(&p, 4096, size) != 0) {
    free(b);
    return ret(hipErrorOutOfMemory);
  }
  b->p = p;
  pthread_mutex_lock(&host_mu);
  b->next = host_blocks;
  host_blocks = b;
  pthread_mutex_unlock(&host_mu);
  *ptr = p;
  return ret(hipSuccess);
}

hipError_t hipHostFree(void *ptr) {
  if (!ptr)
    return ret(hipSuccess);
  pthread_mutex_lock(&host_mu);
  struct host_block **pp = &host_blocks, *b;
  while (*pp && (*pp)->p != ptr)
    pp = &(*pp)->next;
  b = *pp;
  if (b)
    *pp = b->next;
  pthread_mutex_unlock(&host_mu);
  if (!b)
    return ret(hipErrorInvalidValue);
  free(b->p);
  free(b);
  return ret(hipSuccess);
}

/* ---- errors ---- */

static const struct {
  hipError_t code;
  const char *name, *text;
} errors[] = {
    {hipSuccess, "hipSuccess", "no error"},
    {hipErrorInvalidValue, "hipErrorInvalidValue", "invalid argument"},
    {hipErrorOutOfMemory, "hipErrorOutOfMemory", "out of memory"},
    {hipErrorNotInitialized, "hipErrorNotInitialized", "initialization error"},
    {hipErrorDeinitialized, "hipErrorDeinitialized", "driver shutting down"},
    {hipErrorNoDevice, "hipErrorNoDevice", "no ROCm-capable device is detected"},
    {hipErrorInvalidDevice, "hipErrorInvalidDevice", "invalid device ordinal"},
    {hipErrorInvalidContext, "hipErrorInvalidContext", "invalid device context"},
    {hipErrorECCNotCorrectable, "hipErrorECCNotCorrectable", "uncorrectable ECC error encountered"},
    {hipErrorInvalidHandle, "hipErrorInvalidHandle", "invalid resource handle"},
    {hipErrorNotFound, "hipErrorNotFound", "named symbol not found"},
    {hipErrorNotSupported, "hipErrorNotSupported", "operation not supported"},
    {hipErrorUnknown, "hipErrorUnknown", "unknown error"},
};

const char *hipGetErrorName(hipError_t hip_error) {
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].code == hip_error)
      return errors[i].name;
  return "hipErrorUnknown";
}

const char *hipGetErrorString(hipError_t hipError) {
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].code == hipError)
      return errors[i].text;
  return "unknown error";
}

void gpum__sim_hip_atfork(gpum__sim_fork_phase_t ph) {
  if (ph == GPUM__SIM_FORK_PREPARE) {
    pthread_mutex_lock(&init_mu);
    pthread_mutex_lock(&blk_mu);
    pthread_mutex_lock(&host_mu);
  } else {
    pthread_mutex_unlock(&host_mu);
    pthread_mutex_unlock(&blk_mu);
    pthread_mutex_unlock(&init_mu);
  }
}
