/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device events from NVML: XID errors (with their number), single- and double-bit ECC errors,
 * and GPU loss. One event set per session; each device registers the XID and ECC masks ANDed
 * with what nvmlDeviceGetSupportedEventTypes says it supports. A device whose registration
 * fails with NOT_SUPPORTED is skipped (the set stays usable); NVML_ERROR_UNKNOWN leaves the set
 * undefined (fact sheet §1.2), so it is freed, created again, the devices registered so far
 * are registered again, and the failing device is skipped.
 *
 * GPU loss is not an NVML event: any call that returns GPU_IS_LOST marks its device lost
 * (gpum__nvml_note) and queues one GPUM_DEVEV_GPU_LOST, delivered by the next wait before it
 * blocks. After an XID event the device is probed so that an XID 79 (fallen off the bus) is
 * followed at once by its GPU_LOST event; a wait that itself returns GPU_IS_LOST probes every
 * device.
 *
 * Waiting holds the event lock (one waiter at a time) but not the session lock, so other
 * threads keep sampling; the session lock is taken only to map handles and to read or update
 * the lost marks. Lock order: event lock, then session lock.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "device/nvml_internal.h"
#include "os_internal.h"

#define WANTED_EVENTS \
  (nvmlEventTypeXidCriticalError | nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError)

static uint64_t now_ns(clockid_t c) {
  return c == CLOCK_MONOTONIC ? gpum__os_mono_ns() : gpum__os_real_ns();
}

void gpum__nvml_events_close(gpum__nvml_t *nv) {
  if (nv->evset && nv->f.nvmlEventSetFree)
    nv->f.nvmlEventSetFree(nv->evset);
  nv->evset = NULL;
  nv->events_on = false;
}

/* Registers device i on the current set. Returns the NVML result of the registration (0 when
 * the device was skipped: no supported event types, or asking for them failed). */
static int register_device(gpum_device_session_t *s, gpum__nvml_t *nv, unsigned i,
                           bool *registered) {
  nvmlDevice_t h;
  unsigned long long supported = 0;
  int rv;
  *registered = false;
  /* A MIG instance's events are its GPU's: registered once per GPU, through the GPU's handle,
   * on its first instance (which the events are then reported on). */
  for (unsigned k = 0; k < i; k++)
    if (nv->dev[i].mig >= 0 && nv->dev[k].gpu == nv->dev[i].gpu)
      return 0;
  if (gpum__nvml_gpu_handle(s, nv, i, &h) != 0)
    return 0; /* no handle (lost): nothing to register */
  if (nv->f.nvmlDeviceGetSupportedEventTypes) {
    GPUM__NV_DEV(s, nv, i, rv, nv->f.nvmlDeviceGetSupportedEventTypes(h, &supported));
    if (rv != NVML_SUCCESS) {
      /* The set is untouched: skip the device, whatever the code. */
      gpum_log(GPUM_LOG_DEBUG, "device", "no event types index=%u nvml=%d", i, rv);
      return 0;
    }
  } else {
    supported = WANTED_EVENTS;
  }
  unsigned long long mask = supported & WANTED_EVENTS;
  if (!mask)
    return 0;
  /* Not retried: after UNKNOWN the set is undefined, and register_all starts a new one. */
  rv = nv->f.nvmlDeviceRegisterEvents(h, mask, nv->evset);
  gpum__nvml_note(nv, i, rv);
  if (rv == NVML_SUCCESS)
    *registered = true;
  return rv == NVML_ERROR_NOT_SUPPORTED ? 0 : rv;
}

static int create_set(gpum_device_session_t *s, gpum__nvml_t *nv) {
  int rv;
  GPUM__NV_RETRY(s, rv, nv->f.nvmlEventSetCreate(&nv->evset));
  if (rv != NVML_SUCCESS) {
    nv->evset = NULL;
    return gpum_error(gpum_device_map_nvml_error(rv), "nvmlEventSetCreate: %s (NVML %d)",
                      gpum__nvml_strerror(nv, rv), rv);
  }
  return 0;
}

/* Registers every device; reg[i] says which ones took. A device whose registration fails
 * with UNKNOWN is skipped from then on, and the pass starts over on a new set (the old one is
 * undefined); each restart skips one more device, so this ends after at most ndev + 1 passes. */
static int register_all(gpum_device_session_t *s, gpum__nvml_t *nv, bool *reg, bool *skip) {
  for (;;) {
    bool redo = false;
    memset(reg, 0, nv->ndev * sizeof *reg);
    for (unsigned i = 0; i < nv->ndev && !redo; i++) {
      if (skip[i])
        continue;
      int rv = register_device(s, nv, i, &reg[i]);
      if (rv == NVML_ERROR_UNKNOWN) {
        gpum_log(GPUM_LOG_WARN, "device", "event registration failed, set recreated index=%u", i);
        skip[i] = redo = true;
      } else if (rv != NVML_SUCCESS) {
        gpum_log(GPUM_LOG_WARN, "device", "event registration skipped index=%u error=\"%s\"", i,
                 gpum__nvml_strerror(nv, rv));
      }
    }
    if (!redo)
      return 0;
    nv->f.nvmlEventSetFree(nv->evset);
    nv->evset = NULL;
    int rc = create_set(s, nv);
    if (rc)
      return rc;
  }
}

int gpum__nvml_events_enable(gpum_device_session_t *s) {
  gpum__nvml_t *nv = s->impl;
  int rc = 0;
  pthread_mutex_lock(&nv->ev_lock);
  gpum__session_lock(s);
  if (nv->events_on)
    goto out_unlock;
  if (!nv->f.nvmlEventSetCreate || !nv->f.nvmlDeviceRegisterEvents || !nv->event_wait ||
      !nv->f.nvmlEventSetFree) {
    rc = gpum_error(GPUM_ENOTSUP, "%s exports no event API", nv->path);
    goto out_unlock;
  }
  unsigned slots = nv->ndev ? nv->ndev : 1;
  bool *reg = calloc(2 * (size_t)slots, sizeof *reg);
  if (!reg) {
    rc = gpum_error(GPUM_ENOMEM, "cannot allocate %u flags", nv->ndev);
    goto out_unlock;
  }
  rc = create_set(s, nv);
  if (rc == 0)
    rc = register_all(s, nv, reg, reg + slots);
  unsigned nreg = 0;
  for (unsigned i = 0; i < nv->ndev; i++)
    nreg += reg[i];
  free(reg);
  if (rc == 0 && nreg == 0)
    rc = gpum_error(GPUM_ENOTSUP, "no device of %s supports XID or ECC events", nv->path);
  if (rc) {
    gpum__nvml_events_close(nv);
    goto out_unlock;
  }
  nv->events_on = true;
  gpum_log(GPUM_LOG_DEBUG, "device", "events enabled devices=%u", nreg);
out_unlock:
  gpum__session_unlock(s);
  pthread_mutex_unlock(&nv->ev_lock);
  return rc;
}

/* Pops one queued GPU_LOST event. Session lock held. */
static bool pop_lost(gpum__nvml_t *nv, gpum_device_event_t *ev) {
  for (unsigned i = 0; i < nv->ndev; i++) {
    if (nv->dev[i].lost_pending) {
      nv->dev[i].lost_pending = false;
      ev->kind = GPUM_DEVEV_GPU_LOST;
      ev->device = i;
      ev->xid = 0;
      ev->timestamp_ns = now_ns(CLOCK_REALTIME);
      return true;
    }
  }
  return false;
}

/* A cheap call whose only purpose is to learn whether device i still answers. */
static void probe(gpum_device_session_t *s, gpum__nvml_t *nv, unsigned i) {
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  int rv;
  nvmlDevice_t h = nv->dev[i].gpu_handle; /* the GPU's, also for its MIG instance */
  if (!h)
    return;
  GPUM__NV_DEV(s, nv, i, rv, nv->f.nvmlDeviceGetUUID(h, uuid, sizeof uuid));
}

static bool index_of(gpum__nvml_t *nv, nvmlDevice_t h, unsigned *index) {
  /* A GPU's handle names the GPU, or its first MIG instance. */
  for (unsigned i = 0; i < nv->ndev; i++) {
    if (nv->dev[i].handle == h || nv->dev[i].gpu_handle == h) {
      *index = i;
      return true;
    }
  }
  unsigned idx;
  if (nv->f.nvmlDeviceGetIndex && nv->f.nvmlDeviceGetIndex(h, &idx) == NVML_SUCCESS) {
    for (unsigned i = 0; i < nv->ndev; i++)
      if (nv->dev[i].gpu == idx) {
        *index = i;
        return true;
      }
  }
  return false;
}

/* Turns NVML event data into ev. Returns false for events we do not report. Session lock. */
static bool translate(gpum_device_session_t *s, gpum__nvml_t *nv, const nvmlEventData_t *d,
                      gpum_device_event_t *ev) {
  unsigned i;
  if (!index_of(nv, d->device, &i)) {
    gpum_log(GPUM_LOG_DEBUG, "device", "event for an unknown device handle type=0x%llx",
             d->eventType);
    return false;
  }
  ev->device = i;
  ev->timestamp_ns = now_ns(CLOCK_REALTIME);
  if (d->eventType & nvmlEventTypeXidCriticalError) {
    ev->kind = GPUM_DEVEV_XID;
    ev->xid = d->eventData;
    probe(s, nv, i);
  } else if (d->eventType & nvmlEventTypeDoubleBitEccError) {
    ev->kind = GPUM_DEVEV_ECC_DOUBLE;
  } else if (d->eventType & nvmlEventTypeSingleBitEccError) {
    ev->kind = GPUM_DEVEV_ECC_SINGLE;
  } else {
    return false;
  }
  return true;
}

/* One wait on the set, without the session lock. 1: *ev filled; 0: go on; <0: error. */
static int wait_once(gpum_device_session_t *s, gpum__nvml_t *nv, gpum_device_event_t *ev,
                     unsigned ms) {
  nvmlEventData_t data;
  memset(&data, 0, sizeof data);
  int rv = nv->event_wait(nv->evset, &data, ms);
  if (rv == NVML_ERROR_TIMEOUT)
    return 0;
  gpum__session_lock(s);
  int res = 0;
  uint64_t delay_us = 0;
  if (rv == NVML_SUCCESS) {
    res = translate(s, nv, &data, ev) ? 1 : 0;
  } else if (rv == NVML_ERROR_GPU_IS_LOST) {
    for (unsigned i = 0; i < nv->ndev; i++)
      probe(s, nv, i);
    res = pop_lost(nv, ev) ? 1 : gpum__nvml_fail(nv, "nvmlEventSetWait", 0, rv);
  } else if (gpum_device_nvml_error_is_transient(rv)) {
    /* Back off (outside the lock) instead of spinning until the deadline. */
    delay_us = gpum__backoff_delay_us(s->retry.base_ms ? s->retry.base_ms : 1, s->retry.cap_ms, 0,
                                      gpum__retry_rand01(&s->retry));
  } else {
    res = gpum_error(gpum_device_map_nvml_error(rv), "nvmlEventSetWait: %s (NVML %d)",
                     gpum__nvml_strerror(nv, rv), rv);
  }
  gpum__session_unlock(s);
  if (delay_us && delay_us / 1000 < ms) {
    struct timespec ts = {(time_t)(delay_us / 1000000), (long)(delay_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
  }
  return res;
}

int gpum__nvml_event_wait(gpum_device_session_t *s, gpum_device_event_t *ev, unsigned timeout_ms) {
  gpum__nvml_t *nv = s->impl;
  int rc;
  pthread_mutex_lock(&nv->ev_lock);
  if (!nv->events_on) {
    rc = gpum_error(GPUM_ESTATE, "device events are not enabled (call gpum_device_events_enable)");
    goto out_unlock;
  }
  uint64_t deadline = now_ns(CLOCK_MONOTONIC) + (uint64_t)timeout_ms * 1000000ull;
  for (;;) {
    gpum__session_lock(s);
    bool lost = pop_lost(nv, ev);
    gpum__session_unlock(s);
    if (lost) {
      rc = 0;
      break;
    }
    uint64_t now = now_ns(CLOCK_MONOTONIC);
    unsigned left = now >= deadline ? 0 : (unsigned)((deadline - now + 999999) / 1000000);
    rc = wait_once(s, nv, ev, left);
    if (rc == 1) {
      rc = 0;
      break;
    }
    if (rc < 0)
      break;
    if (now_ns(CLOCK_MONOTONIC) >= deadline) {
      rc = gpum_error(GPUM_ETIMEDOUT, "no device event within %u ms", timeout_ms);
      break;
    }
  }
out_unlock:
  pthread_mutex_unlock(&nv->ev_lock);
  return rc;
}
