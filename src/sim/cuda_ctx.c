/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CUDA driver entry points of the simulated driver: cuInit, CUDA_VISIBLE_DEVICES, device
 * queries, primary contexts and the per-thread current context. The entry points open with
 * GPUM__SIM_CU_ENTRY (the fork gate, then gpum__sim_cu_check: its arguments, then an
 * initialised driver, a live node or a current context on a healthy device, as it needs);
 * gpum__sim_cu_begin() makes the same context check and keeps the node locked for calls that
 * change it.
 *
 * CUDA_VISIBLE_DEVICES is read once, at the first successful cuInit, as the real driver does:
 * a comma-separated list of indices, "GPU-" UUIDs or "MIG-" UUIDs (unique prefixes accepted);
 * parsing stops at the first invalid entry, and devices listed after it are not visible. NVML
 * ignores it. MIG: a process uses one MIG instance, the first one listed (later MIG entries are
 * passed over); a GPU in MIG mode is not a CUDA device itself (its "GPU-" UUID is an invalid
 * entry); without the variable, such a GPU stands as its first instance, and only the first
 * one of the node does. A MIG instance is a device of its own: its memory is the instance's.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>

#include "sim_internal.h"

#define CUDA_CHECK(name, params) \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&name), gpum_##name##_fn), #name);
GPUM_CUDA_FUNCS(CUDA_CHECK)
#define CUDA_CHECK_OTHER(name, pfn, params) CUDA_CHECK(name, params)
GPUM_CUDA_FUNCS_OTHER(CUDA_CHECK_OTHER)

#define CTX_MAGIC 0x63747821u

struct CUctx_st {
  uint32_t magic;
  CUdevice ordinal;
  unsigned simdev;
  int refcount;
  int entry; /* its entry in the node's allocation table */
};

static pthread_mutex_t cu_mu = PTHREAD_MUTEX_INITIALIZER;
static bool cu_inited;
static struct gpum__sim_node *cu_node;
static unsigned visible[GPUM__SIM_MAX_DEVICES];
static int nvisible;
static struct CUctx_st primary[GPUM__SIM_MAX_DEVICES];
static _Thread_local CUcontext current;

bool gpum__sim_cu_forked_flag;

void gpum__sim_ctx_atfork(gpum__sim_fork_phase_t ph) {
  gpum__sim_fork_mutex(&cu_mu, ph);
  /* What the parent initialised is the parent's: this process may not use it. */
  if (ph == GPUM__SIM_FORK_CHILD && cu_inited)
    __atomic_store_n(&gpum__sim_cu_forked_flag, true, __ATOMIC_RELAXED);
}

/* cu_inited and cu_node are written under cu_mu (cuInit) and read without it: every allocation
 * asks, and a real driver answers from thread-local state, not under a process-wide lock. */
bool gpum__sim_cu_initialized(void) {
  return __atomic_load_n(&cu_inited, __ATOMIC_ACQUIRE);
}

/* What CUDA enumerates without CUDA_VISIBLE_DEVICES: the NVIDIA GPUs in order, a GPU in MIG
 * mode standing as its first MIG instance, and only the first such instance of the node (a
 * process uses one MIG instance). Returns the count written to out. */
static unsigned default_devices(const struct gpum__sim_node *n, unsigned *out) {
  unsigned c = 0;
  bool mig_taken = false;
  for (unsigned i = 0; i < n->spec.device_count; i++) {
    const struct gpum__sim_dev_spec *d = &n->spec.dev[i];
    if (d->vendor != GPUM__SIM_V_NVIDIA || d->mig_of) /* CUDA sees only NVIDIA devices */
      continue;
    if (d->mig_mode != NVML_DEVICE_MIG_ENABLE) {
      out[c++] = i;
      continue;
    }
    for (unsigned k = 0; k < n->spec.device_count && !mig_taken; k++)
      if (n->spec.dev[k].mig_of == i + 1 && n->spec.dev[k].mig_index == 0) {
        out[c++] = k;
        mig_taken = true;
      }
  }
  return c;
}

/* One CUDA_VISIBLE_DEVICES entry to a device index; -1 when invalid. */
static int visible_entry(const struct gpum__sim_node *n, const char *tok, size_t len) {
  char buf[128];
  if (len == 0 || len >= sizeof buf)
    return -1;
  memcpy(buf, tok, len);
  buf[len] = '\0';
  if (isdigit((unsigned char)buf[0])) {
    char *end;
    unsigned all[GPUM__SIM_MAX_DEVICES];
    unsigned nall = default_devices(n, all);
    long v = strtol(buf, &end, 10);
    if (*end || v < 0 || v >= (long)nall)
      return -1;
    return (int)all[v]; /* CUDA's own numbering */
  }
  bool mig = strncmp(buf, "MIG-", 4) == 0;
  if (!mig && strncmp(buf, "GPU-", 4) != 0)
    return -1; /* negative numbers, junk */
  int found = -1;
  for (unsigned i = 0; i < n->spec.device_count; i++) {
    const struct gpum__sim_dev_spec *d = &n->spec.dev[i];
    /* A GPU in MIG mode is no CUDA device itself: only its instances are. */
    if (d->vendor == GPUM__SIM_V_NVIDIA && d->mig_mode != NVML_DEVICE_MIG_ENABLE &&
        strncmp(d->uuid, buf, len) == 0) {
      if (found >= 0)
        return -1; /* ambiguous prefix */
      found = (int)i;
    }
  }
  return found;
}

static void parse_visible(const struct gpum__sim_node *n) {
  const char *env = getenv("CUDA_VISIBLE_DEVICES");
  nvisible = 0;
  if (!env) {
    nvisible = (int)default_devices(n, visible);
    return;
  }
  const char *p = env;
  bool mig_taken = false;
  while (*p && nvisible < GPUM__SIM_MAX_DEVICES) {
    while (isspace((unsigned char)*p))
      p++;
    size_t len = strcspn(p, ",");
    size_t tlen = len;
    while (tlen > 0 && isspace((unsigned char)p[tlen - 1]))
      tlen--;
    int idx = visible_entry(n, p, tlen);
    if (idx < 0)
      return;
    bool is_mig = n->spec.dev[idx].mig_of != 0;
    for (int k = 0; k < nvisible; k++)
      if (visible[k] == (unsigned)idx)
        return;                /* a device listed twice ends the list, as in CUDA */
    if (!is_mig || !mig_taken) /* one MIG instance per process: later ones are passed over */
      visible[nvisible++] = (unsigned)idx;
    mig_taken |= is_mig;
    if (!p[len])
      break;
    p += len + 1;
  }
}

CUresult cuInit(unsigned int Flags) {
  GPUM__SIM_CU_FORK_GATE();
  if (Flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult ret = CUDA_SUCCESS;
  pthread_mutex_lock(&cu_mu);
  if (cu_inited && !__atomic_load_n(&cu_node->hdr.stopped, __ATOMIC_ACQUIRE))
    goto out;
  int err = 0;
  struct gpum__sim_node *n = gpum__sim_attach(&err);
  if (!n) {
    ret =
        err == GPUM_EDRIVERVER ? GPUM__SIM_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH : CUDA_ERROR_NO_DEVICE;
    goto out;
  }
  parse_visible(n);
  if (nvisible == 0) {
    ret = CUDA_ERROR_NO_DEVICE;
    goto out;
  }
  for (int i = 0; i < GPUM__SIM_MAX_DEVICES; i++)
    primary[i] = (struct CUctx_st){
        .magic = CTX_MAGIC, .ordinal = i, .simdev = i < nvisible ? visible[i] : 0};
  __atomic_store_n(&cu_node, n, __ATOMIC_RELEASE);
  __atomic_store_n(&cu_inited, true, __ATOMIC_RELEASE);
  gpum__sim_ckpt_start(n); /* the checkpoint service thread (cuda_ckpt.c) */
out:
  pthread_mutex_unlock(&cu_mu);
  return ret;
}

/* The node of an initialised driver: NOT_INITIALIZED before cuInit, DEINITIALIZED once the node
 * was stopped. */
static CUresult live(struct gpum__sim_node **out) {
  bool ok = __atomic_load_n(&cu_inited, __ATOMIC_ACQUIRE);
  struct gpum__sim_node *n = __atomic_load_n(&cu_node, __ATOMIC_ACQUIRE);
  if (!ok)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (__atomic_load_n(&n->hdr.stopped, __ATOMIC_ACQUIRE))
    return CUDA_ERROR_DEINITIALIZED;
  *out = n;
  return CUDA_SUCCESS;
}

unsigned gpum__sim_cu_visible(unsigned *out) {
  memcpy(out, visible, sizeof visible);
  return (unsigned)nvisible;
}

void gpum__sim_ctx_remap(const uint32_t *map) {
  pthread_mutex_lock(&cu_mu);
  for (int i = 0; i < nvisible; i++) {
    visible[i] = map[visible[i]];
    primary[i].simdev = map[primary[i].simdev];
  }
  pthread_mutex_unlock(&cu_mu);
}

CUresult gpum__sim_cu_device(CUdevice dev, unsigned *simdev) {
  struct gpum__sim_node *n;
  CUresult r = live(&n);
  if (r != CUDA_SUCCESS)
    return r;
  if (dev < 0 || dev >= nvisible)
    return CUDA_ERROR_INVALID_DEVICE;
  *simdev = visible[dev];
  return CUDA_SUCCESS;
}

CUresult gpum__sim_cu_fault(const struct gpum__sim_node *n, unsigned simdev) {
  uint32_t parent = n->spec.dev[simdev].mig_of; /* a MIG instance fails with its GPU */
  if (parent && gpum__sim_cu_fault(n, parent - 1) != CUDA_SUCCESS)
    return gpum__sim_cu_fault(n, parent - 1);
  const struct gpum__sim_dev_state *d = &n->dev[simdev];
  if (d->lost)
    return CUDA_ERROR_UNKNOWN;
  if (d->reset_required)
    return d->reset_required == 74 ? CUDA_ERROR_UNKNOWN : CUDA_ERROR_ECC_UNCORRECTABLE;
  return CUDA_SUCCESS;
}

/* Whether ctx is a live context of ours. */
static bool ctx_ok(CUcontext ctx) {
  uintptr_t p = (uintptr_t)ctx, base = (uintptr_t)primary;
  if (p < base || p >= base + sizeof primary || (p - base) % sizeof primary[0] != 0)
    return false;
  return __atomic_load_n(&ctx->refcount, __ATOMIC_ACQUIRE) > 0;
}

CUresult gpum__sim_cu_begin(struct gpum__sim_node **out, unsigned *simdev) {
  struct gpum__sim_node *n;
  CUresult r = live(&n);
  if (r != CUDA_SUCCESS)
    return r;
  CUcontext c = current;
  if (!c || !ctx_ok(c))
    return CUDA_ERROR_INVALID_CONTEXT;
  if (gpum__sim_lock(n) != 0)
    return CUDA_ERROR_UNKNOWN;
  gpum__sim_tick(n);
  if ((r = gpum__sim_cu_fault(n, c->simdev)) != CUDA_SUCCESS) {
    gpum__sim_unlock(n);
    return r;
  }
  *out = n;
  *simdev = c->simdev;
  return CUDA_SUCCESS;
}

CUresult gpum__sim_cu_begin_on(struct gpum__sim_node **out, unsigned simdev) {
  struct gpum__sim_node *n;
  CUresult r = live(&n);
  if (r != CUDA_SUCCESS)
    return r;
  if (gpum__sim_lock(n) != 0)
    return CUDA_ERROR_UNKNOWN;
  gpum__sim_tick(n);
  if ((r = gpum__sim_cu_fault(n, simdev)) != CUDA_SUCCESS) {
    gpum__sim_unlock(n);
    return r;
  }
  *out = n;
  return CUDA_SUCCESS;
}

CUresult gpum__sim_cu_check(bool args_ok, gpum__sim_cu_need_t need) {
  if (!args_ok)
    return CUDA_ERROR_INVALID_VALUE;
  struct gpum__sim_node *n;
  unsigned dev;
  CUresult r;
  switch (need) {
  case GPUM__SIM_CU_INIT:
    return gpum__sim_cu_initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
  case GPUM__SIM_CU_LIVE:
    return live(&n);
  case GPUM__SIM_CU_CTX:
    if ((r = gpum__sim_cu_begin(&n, &dev)) == CUDA_SUCCESS)
      gpum__sim_unlock(n);
    return r;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult gpum__sim_cu_check_device(bool args_ok, CUdevice dev, unsigned *simdev) {
  return args_ok ? gpum__sim_cu_device(dev, simdev) : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGetCount(int *count) {
  GPUM__SIM_CU_ENTRY(count != NULL, GPUM__SIM_CU_LIVE);
  *count = nvisible;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  unsigned s;
  GPUM__SIM_CU_ENTRY_DEVICE(device != NULL, ordinal, &s);
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  unsigned s;
  GPUM__SIM_CU_ENTRY_DEVICE(name && len > 0, dev, &s);
  snprintf(name, (size_t)len, "%s", cu_node->spec.dev[s].name); /* truncates, as CUDA does */
  return CUDA_SUCCESS;
}

bool gpum__sim_cu_uuid(const struct gpum__sim_node *n, unsigned simdev, CUuuid *uuid) {
  /* "GPU-xxxxxxxx-xxxx-..." (or "MIG-..."): the 32 hex digits are the 16 bytes. */
  const char *p = n->spec.dev[simdev].uuid;
  p += strncmp(p, "GPU-", 4) == 0 || strncmp(p, "MIG-", 4) == 0 ? 4 : 0;
  memset(uuid->bytes, 0, sizeof uuid->bytes);
  int nib = 0;
  for (; *p && nib < 32; p++) {
    if (!isxdigit((unsigned char)*p))
      continue;
    int v = isdigit((unsigned char)*p) ? *p - '0' : (tolower((unsigned char)*p) - 'a' + 10);
    uuid->bytes[nib / 2] = (char)(uuid->bytes[nib / 2] | (nib % 2 ? v : v << 4));
    nib++;
  }
  return nib == 32;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
  unsigned s;
  GPUM__SIM_CU_ENTRY_DEVICE(uuid != NULL, dev, &s);
  gpum__sim_cu_uuid(cu_node, s, uuid);
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  unsigned s;
  GPUM__SIM_CU_ENTRY_DEVICE(bytes != NULL, dev, &s);
  *bytes = cu_node->spec.dev[s].memory;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  unsigned s;
  GPUM__SIM_CU_ENTRY_DEVICE(pi != NULL, dev, &s);
  const struct gpum__sim_dev_spec *d = &cu_node->spec.dev[s];
  switch (attrib) {
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *pi = (int)d->multiprocessors;
    break;
  case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
    *pi = (int)d->pci_bus;
    break;
  case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
    *pi = (int)d->pci_device;
    break;
  case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
    *pi = (int)d->pci_domain;
    break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *pi = d->cc_major;
    break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *pi = d->cc_minor;
    break;
  case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    *pi = d->virtual_memory ? 1 : 0;
    break;
  case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
  case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
  case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    *pi = 1;
    break;
  case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    *pi = 0; /* cuMemExportToShareableHandle is not simulated */
    break;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev) {
  unsigned s;
  GPUM__SIM_CU_ENTRY_DEVICE(pciBusId && len > 0, dev, &s);
  const struct gpum__sim_dev_spec *d = &cu_node->spec.dev[s];
  snprintf(pciBusId, (size_t)len, "%04X:%02X:%02X.0", d->pci_domain & 0xffff, d->pci_bus,
           d->pci_device);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  unsigned s;
  GPUM__SIM_CU_ENTRY_DEVICE(pctx != NULL, dev, &s);
  struct gpum__sim_node *n = cu_node;
  if (gpum__sim_lock(n) != 0)
    return CUDA_ERROR_UNKNOWN;
  gpum__sim_tick(n);
  struct CUctx_st *c = &primary[dev];
  CUresult r = gpum__sim_cu_fault(n, s);
  if (r != CUDA_SUCCESS)
    goto out;
  if (__atomic_load_n(&c->refcount, __ATOMIC_ACQUIRE) == 0) {
    /* A new context: it costs context_memory and makes the process show in NVML's list. Dead
     * processes are reaped only when they stand in the way. */
    uint64_t need = n->spec.dev[s].context_memory;
    if (need > gpum__sim_free(n, s))
      gpum__sim_reap(n);
    if (need > gpum__sim_free(n, s)) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
      goto out;
    }
    if ((c->entry = gpum__sim_alloc_add(n, GPUM__SIM_K_CTX, s, s, need)) < 0) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
      goto out;
    }
  }
  __atomic_add_fetch(&c->refcount, 1, __ATOMIC_ACQ_REL);
  *pctx = c;
out:
  gpum__sim_unlock(n);
  return r;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  GPUM__SIM_CU_FORK_GATE();
  unsigned s;
  CUresult r = gpum__sim_cu_device(dev, &s);
  if (r != CUDA_SUCCESS)
    return r;
  struct gpum__sim_node *n = cu_node;
  struct CUctx_st *c = &primary[dev];
  if (gpum__sim_lock(n) != 0)
    return CUDA_ERROR_UNKNOWN;
  if (__atomic_load_n(&c->refcount, __ATOMIC_ACQUIRE) == 0) {
    r = CUDA_ERROR_INVALID_CONTEXT;
  } else if (__atomic_sub_fetch(&c->refcount, 1, __ATOMIC_ACQ_REL) == 0) {
    /* The primary context is destroyed: its memory goes with it. */
    gpum__sim_cu_free_all(n, s);
    if (gpum__sim_alloc_mine(n, c->entry, GPUM__SIM_K_CTX, s))
      gpum__sim_alloc_remove(n, c->entry);
  }
  gpum__sim_unlock(n);
  return r;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_LIVE);
  if (ctx && !ctx_ok(ctx))
    return CUDA_ERROR_INVALID_CONTEXT;
  current = ctx;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx) {
  GPUM__SIM_CU_ENTRY(pctx != NULL, GPUM__SIM_CU_LIVE);
  *pctx = current;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device) {
  GPUM__SIM_CU_ENTRY(device != NULL, GPUM__SIM_CU_LIVE);
  if (!current || !ctx_ok(current))
    return CUDA_ERROR_INVALID_CONTEXT;
  *device = current->ordinal;
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
  GPUM__SIM_CU_ENTRY(true, GPUM__SIM_CU_CTX);
  /* Execution is synchronous: only streams held by gpum_sim_debug_stream_hold have work. */
  gpum__sim_cu_streams_wait_idle();
  return CUDA_SUCCESS;
}
