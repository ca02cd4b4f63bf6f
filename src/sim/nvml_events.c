/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NVML process lists, per-process utilisation and events of the simulated driver.
 *
 * Process lists show every pid that holds memory or a context on the device, with its bytes
 * (memory of dead processes is reclaimed first). The _v3 calls write 24-byte entries, or
 * 32-byte ones on a device whose spec says `process_stride: 32`, emulating early R535 drivers;
 * unlike those drivers the simulator never writes past *infoCount x 24 bytes.
 *
 * Event sets live in shared memory so that a fault injected by another process (`gpum sim
 * inject`) reaches them; nvmlEventSetWait_v2 sleeps on a futex, never holding the lock.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim_internal.h"

static nvmlReturn_t list_processes(nvmlDevice_t device, unsigned *infoCount, void *infos,
                                   unsigned version, bool graphics) {
  if (!gpum__sim_nvml_node())
    return NVML_ERROR_UNINITIALIZED;
  if (!infoCount || (*infoCount > 0 && !infos))
    return NVML_ERROR_INVALID_ARGUMENT;
  struct gpum__sim_node *n;
  unsigned idx;
  nvmlReturn_t ret = gpum__sim_nvml_enter(device, GPUM__SIM_M_PROCESSES, &n, &idx);
  if (ret != NVML_SUCCESS)
    return ret;
  gpum__sim_reap(n);
  gpum_sim_process_t procs[GPUM_SIM_MAX_PROCESSES];
  /* A GPU in MIG mode lists its instances' processes too (the aggregate a privileged caller
   * gets); a MIG handle lists its instance's, with their instance ids. */
  bool whole = n->spec.dev[idx].mig_mode == NVML_DEVICE_MIG_ENABLE;
  unsigned count =
      graphics ? 0
               : gpum__sim_processes(n, whole ? UINT32_MAX : idx, procs, GPUM_SIM_MAX_PROCESSES);
  if (whole) {
    unsigned kept = 0;
    for (unsigned k = 0; k < count && k < GPUM_SIM_MAX_PROCESSES; k++)
      if (procs[k].device == idx || n->spec.dev[procs[k].device].mig_of == idx + 1)
        procs[kept++] = procs[k];
    count = kept;
  }
  unsigned gi[GPUM_SIM_MAX_PROCESSES], ci[GPUM_SIM_MAX_PROCESSES];
  for (unsigned k = 0; k < count && k < GPUM_SIM_MAX_PROCESSES; k++) {
    const struct gpum__sim_dev_spec *pd = &n->spec.dev[procs[k].device];
    gi[k] = pd->mig_of ? pd->mig_gi : 0xFFFFFFFFu;
    ci[k] = pd->mig_of ? pd->mig_ci : 0xFFFFFFFFu;
  }
  unsigned stride = version == 1   ? sizeof(nvmlProcessInfo_v1_t)
                    : version == 3 ? n->spec.dev[idx].process_stride
                                   : sizeof(nvmlProcessInfo_t);
  gpum__sim_unlock(n);
  if (count > GPUM_SIM_MAX_PROCESSES)
    count = GPUM_SIM_MAX_PROCESSES;
  size_t declared = (version == 1 ? sizeof(nvmlProcessInfo_v1_t) : sizeof(nvmlProcessInfo_t));
  size_t room = (size_t)*infoCount * declared / stride;
  if (count > room) {
    /* Enough entries of the declared size for count entries of the actual stride. */
    *infoCount = (unsigned)(((size_t)count * stride + declared - 1) / declared);
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  unsigned char *out = infos;
  for (unsigned k = 0; k < count; k++) {
    unsigned char *e = out + (size_t)k * stride;
    if (version == 1) {
      nvmlProcessInfo_v1_t v1 = {.pid = procs[k].pid, .usedGpuMemory = procs[k].bytes};
      memcpy(e, &v1, sizeof v1);
    } else {
      nvmlProcessDetail_v1_t v = {.pid = procs[k].pid,
                                  .usedGpuMemory = procs[k].bytes,
                                  .gpuInstanceId = gi[k],
                                  .computeInstanceId = ci[k]};
      memcpy(e, &v, stride);
    }
  }
  *infoCount = count;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos) {
  return list_processes(device, infoCount, infos, 3, false);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos) {
  return list_processes(device, infoCount, infos, 2, false);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                  nvmlProcessInfo_v1_t *infos) {
  return list_processes(device, infoCount, infos, 1, false);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                      nvmlProcessInfo_t *infos) {
  /* No graphics on a simulated data-centre GPU. */
  return list_processes(device, infoCount, infos, 3, true);
}

nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device,
                                                   nvmlProcessDetailList_t *plist) {
  if (!gpum__sim_nvml_node())
    return NVML_ERROR_UNINITIALIZED;
  if (!plist || plist->mode > 3)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (plist->version != nvmlProcessDetailList_v1)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  struct gpum__sim_node *n;
  unsigned idx;
  nvmlReturn_t ret = gpum__sim_nvml_enter(device, GPUM__SIM_M_PROCESSES, &n, &idx);
  if (ret != NVML_SUCCESS)
    return ret;
  if (n->spec.dev[idx].process_stride == 32) {
    /* The early R535 drivers that wrote 32-byte _v3 entries predate this call (nvitop's rule):
     * on such a device it behaves as if the driver lacked it. */
    gpum__sim_unlock(n);
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  }
  gpum__sim_reap(n);
  gpum_sim_process_t procs[GPUM_SIM_MAX_PROCESSES];
  bool compute = plist->mode == 0 || plist->mode == 3;
  unsigned count = compute ? gpum__sim_processes(n, idx, procs, GPUM_SIM_MAX_PROCESSES) : 0;
  gpum__sim_unlock(n);
  if (count > GPUM_SIM_MAX_PROCESSES)
    count = GPUM_SIM_MAX_PROCESSES;
  if (count > plist->numProcArrayEntries || (count > 0 && !plist->procArray)) {
    plist->numProcArrayEntries = count;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned k = 0; k < count; k++)
    plist->procArray[k] = (nvmlProcessDetail_v1_t){.pid = procs[k].pid,
                                                   .usedGpuMemory = procs[k].bytes,
                                                   .gpuInstanceId = 0xFFFFFFFFu,
                                                   .computeInstanceId = 0xFFFFFFFFu};
  plist->numProcArrayEntries = count;
  return NVML_SUCCESS;
}

/* ---- events ---- */

#define EVSET_MAGIC 0x65767365u

struct nvmlEventSet_st {
  uint32_t magic;
  uint32_t slot, gen;
  struct gpum__sim_node *node;
  struct nvmlEventSet_st *next;
};

static pthread_mutex_t sets_mu = PTHREAD_MUTEX_INITIALIZER;
static struct nvmlEventSet_st *sets;

void gpum__sim_events_atfork(gpum__sim_fork_phase_t ph) {
  gpum__sim_fork_mutex(&sets_mu, ph);
}

/* Whether set is one of ours (checked by address before it is dereferenced). */
static bool set_known(nvmlEventSet_t set) {
  bool found = false;
  pthread_mutex_lock(&sets_mu);
  for (struct nvmlEventSet_st *s = sets; s && !found; s = s->next)
    found = s == set;
  pthread_mutex_unlock(&sets_mu);
  return found;
}

static uint64_t supported_events(const struct gpum__sim_node *n, unsigned idx) {
  uint64_t t = nvmlEventTypeXidCriticalError;
  if (n->spec.dev[idx].ecc)
    t |= nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError;
  return t;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
  struct gpum__sim_node *n = gpum__sim_nvml_node();
  if (!n)
    return NVML_ERROR_UNINITIALIZED;
  if (!set)
    return NVML_ERROR_INVALID_ARGUMENT;
  struct nvmlEventSet_st *s = calloc(1, sizeof *s);
  if (!s)
    return NVML_ERROR_MEMORY;
  if (gpum__sim_lock(n) != 0) {
    free(s);
    return NVML_ERROR_UNKNOWN;
  }
  int i = gpum__sim_evset_add(n);
  if (i < 0) {
    gpum__sim_unlock(n);
    free(s);
    return NVML_ERROR_INSUFFICIENT_RESOURCES;
  }
  struct gpum__sim_evset *e = &n->evsets[i];
  *s =
      (struct nvmlEventSet_st){.magic = EVSET_MAGIC, .slot = (uint32_t)i, .gen = e->gen, .node = n};
  gpum__sim_unlock(n);
  pthread_mutex_lock(&sets_mu);
  s->next = sets;
  sets = s;
  pthread_mutex_unlock(&sets_mu);
  *set = s;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes) {
  if (!gpum__sim_nvml_node())
    return NVML_ERROR_UNINITIALIZED;
  if (!eventTypes)
    return NVML_ERROR_INVALID_ARGUMENT;
  struct gpum__sim_node *n;
  unsigned idx;
  nvmlReturn_t ret = gpum__sim_nvml_enter(device, GPUM__SIM_M_EVENTS, &n, &idx);
  if (ret != NVML_SUCCESS)
    return ret;
  *eventTypes = supported_events(n, idx);
  gpum__sim_unlock(n);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set) {
  if (!gpum__sim_nvml_node())
    return NVML_ERROR_UNINITIALIZED;
  if (!set_known(set))
    return NVML_ERROR_INVALID_ARGUMENT;
  struct gpum__sim_node *n;
  unsigned idx;
  nvmlReturn_t ret = gpum__sim_nvml_enter(device, GPUM__SIM_M_EVENTS, &n, &idx);
  if (ret != NVML_SUCCESS)
    return ret;
  struct gpum__sim_evset *e = &set->node->evsets[set->slot];
  if (set->node != n || e->state != GPUM__SIM_A_USED || e->gen != set->gen)
    ret = NVML_ERROR_INVALID_ARGUMENT;
  else if (eventTypes & ~supported_events(n, idx))
    ret = NVML_ERROR_NOT_SUPPORTED;
  else
    e->mask[idx] |= eventTypes;
  gpum__sim_unlock(n);
  return ret;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                 unsigned int timeoutms) {
  if (!gpum__sim_nvml_node())
    return NVML_ERROR_UNINITIALIZED;
  if (!data || !set_known(set))
    return NVML_ERROR_INVALID_ARGUMENT;
  struct gpum__sim_node *n = set->node;
  struct gpum__sim_evset *e = &n->evsets[set->slot];
  uint64_t deadline = gpum__sim_now_ns() + (uint64_t)timeoutms * 1000000ull;
  for (;;) {
    if (gpum__sim_lock(n) != 0)
      return NVML_ERROR_UNKNOWN;
    gpum__sim_tick(n); /* scheduled faults fire while someone waits for them */
    uint32_t seen = __atomic_load_n(&n->event_seq, __ATOMIC_ACQUIRE);
    if (e->state != GPUM__SIM_A_USED || e->gen != set->gen) {
      gpum__sim_unlock(n);
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (e->head != e->tail) {
      struct gpum__sim_event ev = e->q[e->tail % GPUM__SIM_EVQ];
      e->tail++;
      gpum__sim_unlock(n);
      *data = (nvmlEventData_t){.device = gpum__sim_nvml_handle(ev.device),
                                .eventType = ev.type,
                                .eventData = ev.data,
                                .gpuInstanceId = 0xFFFFFFFFu,
                                .computeInstanceId = 0xFFFFFFFFu};
      return NVML_SUCCESS;
    }
    /* The spec's scheduled faults fire at their time while someone waits for them (they are
     * fixed when the node starts): the wait ends then at the latest. Nothing else wakes it but
     * an event, as with the real driver (it used to poll every 100 ms: ten wake-ups a second
     * of a monitor's event thread). */
    uint64_t fault_ms = gpum__sim_next_fault_ms(n);
    gpum__sim_unlock(n);
    uint64_t now = gpum__sim_now_ns();
    if (now >= deadline)
      return NVML_ERROR_TIMEOUT;
    uint64_t left_ms = (deadline - now + 999999) / 1000000;
    gpum__sim_wait(n, seen, fault_ms < left_ms ? (fault_ms ? fault_ms : 1) : left_ms);
  }
}

nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
  return nvmlEventSetWait_v2(set, data, timeoutms);
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  if (!gpum__sim_nvml_node())
    return NVML_ERROR_UNINITIALIZED;
  pthread_mutex_lock(&sets_mu);
  struct nvmlEventSet_st **pp = &sets;
  while (*pp && *pp != set)
    pp = &(*pp)->next;
  if (!*pp) {
    pthread_mutex_unlock(&sets_mu);
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  *pp = set->next;
  pthread_mutex_unlock(&sets_mu);
  struct gpum__sim_node *n = set->node;
  if (gpum__sim_lock(n) == 0) {
    struct gpum__sim_evset *e = &n->evsets[set->slot];
    if (e->state == GPUM__SIM_A_USED && e->gen == set->gen)
      gpum__sim_evset_remove(n, set->slot);
    gpum__sim_unlock(n);
  }
  free(set);
  return NVML_SUCCESS;
}

/* ---- per-process utilisation ---- */

/* The driver samples utilisation once per period; a sample's timeStamp is the CPU time
 * (microseconds since the epoch) at the end of the period it covers. */
#define PROC_UTIL_PERIOD_US 100000ull

/* nvmlDeviceGetProcessUtilization as NVML documents it: one sample per process that had some
 * non-zero utilisation in the last sample period, taken after lastSeenTimeStamp (0: any the
 * driver keeps); NOT_FOUND when there is none; INSUFFICIENT_SIZE with the count needed when
 * utilization is NULL or *processSamplesCount too small; NOT_SUPPORTED on a MIG handle and on
 * a GPU in MIG mode, and on a device whose spec says `unsupported: [process_utilization]`. The
 * device's utilisation
 * (`gpum sim set --util`) is shared among the processes holding memory on it in proportion to
 * their bytes: a process that holds more is taken to do more of the work. */
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *processSamplesCount,
                                             unsigned long long lastSeenTimeStamp) {
  if (!gpum__sim_nvml_node())
    return NVML_ERROR_UNINITIALIZED;
  if (!processSamplesCount)
    return NVML_ERROR_INVALID_ARGUMENT;
  struct gpum__sim_node *n;
  unsigned idx;
  nvmlReturn_t ret = gpum__sim_nvml_enter(device, GPUM__SIM_M_PROC_UTIL, &n, &idx);
  if (ret != NVML_SUCCESS)
    return ret;
  if (n->spec.dev[idx].mig_mode == NVML_DEVICE_MIG_ENABLE) { /* no per-process figures */
    gpum__sim_unlock(n);
    return NVML_ERROR_NOT_SUPPORTED;
  }
  gpum__sim_reap(n);
  gpum_sim_process_t procs[GPUM_SIM_MAX_PROCESSES];
  unsigned count = gpum__sim_processes(n, idx, procs, GPUM_SIM_MAX_PROCESSES);
  unsigned sm = n->dev[idx].util_gpu, mem = n->dev[idx].util_mem;
  gpum__sim_unlock(n);
  if (count > GPUM_SIM_MAX_PROCESSES)
    count = GPUM_SIM_MAX_PROCESSES;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  unsigned long long now =
      (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000ull;
  unsigned long long stamp = now - now % PROC_UTIL_PERIOD_US;
  uint64_t total = 0;
  for (unsigned k = 0; k < count; k++)
    total += procs[k].bytes;
  nvmlProcessUtilizationSample_t s[GPUM_SIM_MAX_PROCESSES];
  unsigned ns = 0;
  for (unsigned k = 0; k < count && stamp > lastSeenTimeStamp && total > 0; k++) {
    unsigned smk = (unsigned)((uint64_t)sm * procs[k].bytes / total);
    unsigned memk = (unsigned)((uint64_t)mem * procs[k].bytes / total);
    if (smk || memk)
      s[ns++] = (nvmlProcessUtilizationSample_t){
          .pid = procs[k].pid, .timeStamp = stamp, .smUtil = smk, .memUtil = memk};
  }
  if (ns == 0)
    return NVML_ERROR_NOT_FOUND;
  if (!utilization || *processSamplesCount < ns) {
    *processSamplesCount = ns;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  memcpy(utilization, s, ns * sizeof s[0]);
  *processSamplesCount = ns;
  return NVML_SUCCESS;
}
