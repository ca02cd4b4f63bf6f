/* SPDX-License-Identifier: Apache-2.0 */
/*
 * State of the NVML backend, shared by its three files: nvml.c (loading, static info,
 * samples), nvml_proc.c (process lists and the stride problem) and nvml_events.c (XID/ECC
 * events and GPU-lost tracking). Never installed.
 */
#ifndef GPUM_NVML_INTERNAL_H
#define GPUM_NVML_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>

#include "nvml_abi.h"
#include "device/device_internal.h"

/* Every symbol of GPUM_NVML_FUNCS, NULL when the library does not export it. */
typedef struct {
#define GPUM__NVML_FIELD(ret, name, params) gpum_##name##_fn name;
  GPUM_NVML_FUNCS(GPUM__NVML_FIELD)
#undef GPUM__NVML_FIELD
} gpum__nvml_syms_t;

/* One device of the session: a whole GPU, or one MIG instance of a GPU in MIG mode (nvml.c
 * lists a GPU's instances in its place, in MIG device index order). */
typedef struct {
  unsigned gpu;            /* NVML index of the GPU (a MIG instance's parent) */
  int mig;                 /* MIG device index under the GPU; -1: the whole GPU */
  nvmlDevice_t gpu_handle; /* the GPU's handle (gpum__nvml_gpu_handle); NULL until looked up */
  nvmlDevice_t handle;     /* looked up on first use (gpum__nvml_handle); NULL until then */
  int handle_err;          /* NVML code of the last failed lookup, else 0 */
  bool lost;               /* the last call on it returned GPU_IS_LOST */
  bool lost_pending;       /* a GPUM_DEVEV_GPU_LOST event is waiting to be delivered */
  bool mem_v1;             /* memory info v2 was rejected: use v1 */
  bool temp_legacy;        /* nvmlDeviceGetTemperatureV was rejected: use the old call */
  bool info_cached;        /* info holds the last successful static info */
  gpum_device_info_t info;
} gpum__nvml_dev_t;

typedef struct {
  void *dl;
  char path[PATH_MAX];
  gpum__nvml_syms_t f;
  /* The versions chosen at load time (newest exported). */
  gpum_nvmlInit_v2_fn init;
  gpum_nvmlDeviceGetCount_v2_fn get_count;
  gpum_nvmlDeviceGetHandleByIndex_v2_fn get_handle;
  gpum_nvmlEventSetWait_v2_fn event_wait;
  bool initialised;
  unsigned ndev;
  gpum__nvml_dev_t *dev;
  /* Process lists. */
  unsigned stride_hint; /* 24 or 32, from the symbol-presence rule */
  bool detail_list_off; /* nvmlDeviceGetRunningProcessDetailList rejected: use _v3 */
  /* Events: ev_lock is taken before the session lock, never after. */
  pthread_mutex_t ev_lock;
  nvmlEventSet_t evset;
  bool events_on;
  /* A MIG probe thread was left in a driver call at open: the library stays loaded. */
  bool probe_left;
} gpum__nvml_t;

/* Runs expr (an NVML call yielding nvmlReturn_t into rv) with the session's retry policy. */
#define GPUM__NV_RETRY(s, rv, expr)                                               \
  do {                                                                            \
    for (int att_ = 0;; att_++) {                                                 \
      (rv) = (expr);                                                              \
      if (!gpum_device_nvml_error_is_transient(rv) || att_ >= (s)->retry.retries) \
        break;                                                                    \
      gpum__retry_sleep(&(s)->retry, att_);                                       \
    }                                                                             \
  } while (0)

/* Same, for a call on device i: also records loss and recovery of the device. */
#define GPUM__NV_DEV(s, nv, i, rv, expr) \
  do {                                   \
    GPUM__NV_RETRY(s, rv, expr);         \
    gpum__nvml_note((nv), (i), (rv));    \
  } while (0)

/* Device i's handle, looked up on the first call and kept once found (a failed lookup is
 * tried again by the next call). Session lock held. Returns 0 or the mapped error. */
int gpum__nvml_handle(gpum_device_session_t *s, gpum__nvml_t *nv, unsigned i, nvmlDevice_t *h);
/* The whole GPU's handle of device i: its own, or a MIG instance's parent's. Session lock
 * held. Returns 0 or the mapped error. */
int gpum__nvml_gpu_handle(gpum_device_session_t *s, gpum__nvml_t *nv, unsigned i, nvmlDevice_t *h);
/* Records a device call's result: GPU_IS_LOST marks the device lost and queues one
 * GPU_LOST event; success clears the lost mark. Session lock held. */
void gpum__nvml_note(gpum__nvml_t *nv, unsigned i, int rv);
/* The driver's message for rv (nvmlErrorString when exported). */
const char *gpum__nvml_strerror(const gpum__nvml_t *nv, int rv);
/* Sets the detail "<call> on device <i>: <message> (NVML <rv>)" and returns the mapped code. */
int gpum__nvml_fail(const gpum__nvml_t *nv, const char *call, unsigned i, int rv);
/* True for results that fail a whole sample or info read instead of one field: lost, reset
 * required, and transient errors that outlasted the retries. */
bool gpum__nvml_is_fatal(int rv);

int gpum__nvml_processes(gpum_device_session_t *s, unsigned index, gpum__rawproc_t **out,
                         size_t *n);
/* Per-process utilisation (nvml_proc.c): the vtable's process_util. */
int gpum__nvml_process_util(gpum_device_session_t *s, unsigned index, uint64_t since_us,
                            gpum_process_util_t **out, size_t *n);
int gpum__nvml_events_enable(gpum_device_session_t *s);
int gpum__nvml_event_wait(gpum_device_session_t *s, gpum_device_event_t *ev, unsigned timeout_ms);
/* Frees the event set (session closing). */
void gpum__nvml_events_close(gpum__nvml_t *nv);

#endif /* GPUM_NVML_INTERNAL_H */
